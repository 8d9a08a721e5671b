/*
 * test_memplan.c -- the memory planner as pure arithmetic (no MPI, no
 * training; leak-checked):
 *  - its activation sizes are exactly what the GPT allocates (every
 *    checkpointing policy, training and eval), and checkpointing shrinks them;
 *  - model-state rows follow the ZeRO formulas: exactly for GPT-2 124M at
 *    stage 0 on one rank, within 0.01% for an 8B-shaped GPT on 64 ranks at
 *    every stage in fp32; in bf16 what the engine keeps (the formulas + the
 *    fp32 gradients); DeepSpeed's estimator figures;
 *  - placement on a GPU target (offload -> host: master + moments), the
 *    offloaded bytes on the CPU target, the pre-flight message and
 *    its suggestions (the first one fits), "auto" micro batch, limits.
 * Real runs against the prediction: tests/memplan_mpi.sh.
 */
#include <math.h>
#include <string.h>
#include "gpt.h"
#include "memplan.h"
#include "backend.h"
#include "cuda/cuda_workspace.h"
#include "tap.h"
#include "testutil.h"

static zt_config *shape(int L, int NH, int C, int T, int V) {
    zt_config *c = tu_tiny_config(L, NH, C, T, V, 1);
    return c;
}

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static void test_acts(void) {
    int shapes[][5] = {{1, 1, 8, 5, 11}, {2, 2, 32, 16, 64}, {5, 4, 48, 7, 300}, {7, 2, 16, 33, 29}};
    int ok = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        zt_model_config mc = {.n_layer = shapes[i][0], .n_head = shapes[i][1], .n_embd = shapes[i][2],
                              .context = shapes[i][3], .vocab = shapes[i][4]};
        int ks[] = {0, 1, 2, 3, mc.n_layer, mc.n_layer + 2};
        for (int B = 1; B <= 3; B += 2)
            for (size_t j = 0; j < sizeof ks / sizeof ks[0]; ++j)
                for (int tr = 0; tr <= 1; ++tr) {
                    uint64_t want = zt_gpt_acts_bytes_ckpt(&mc, B, mc.context, tr, ks[j]) +
                                    2 * sizeof(int) * (uint64_t)B * (uint64_t)mc.context;
                    uint64_t got = zt_memplan_acts_bytes(&mc, B, mc.context, tr, ks[j], 4);
                    if (got != want) {
                        ok = 0;
                        tap_diag("L%d C%d B%d k%d training %d: plan %llu, GPT %llu", mc.n_layer,
                                 mc.n_embd, B, ks[j], tr, (unsigned long long)got,
                                 (unsigned long long)want);
                    }
                }
    }
    tap_ok(ok, "activation bytes: planner == GPT's carve + token arrays (policies, B, shapes)");

    zt_model_config g2 = {.n_layer = 12, .n_head = 12, .n_embd = 768, .context = 1024, .vocab = 50257};
    uint64_t none = zt_memplan_acts_bytes(&g2, 8, 1024, 1, 0, 4);
    uint64_t blocks = zt_memplan_acts_bytes(&g2, 8, 1024, 1, 1, 4);
    uint64_t every3 = zt_memplan_acts_bytes(&g2, 8, 1024, 1, 3, 4);
    uint64_t every12 = zt_memplan_acts_bytes(&g2, 8, 1024, 1, 12, 4);
    tap_ok(blocks < every3 && every3 < none && every12 == none && blocks < none / 2,
           "GPT-2 124M B=8: checkpointing shrinks activations (none %.2f GiB, every-3 %.2f, "
           "blocks %.2f; every-12 = none)", none / 1073741824.0, every3 / 1073741824.0,
           blocks / 1073741824.0);
    tap_ok(zt_memplan_acts_bytes(&g2, 8, 1024, 1, 0, 2) < none * 0.55,
           "2-byte elements would halve the activation arrays");
    zt_config *c = shape(3, 2, 32, 16, 64);
    tu_set(c, "train_micro_batch_size_per_gpu", "4");
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, 1);
    zt_memplan a, b;
    zt_status st;
    int rc = zt_memplan_compute(c, &o, &a, &st);
    tu_set(c, "precision", "bf16");
    rc |= zt_memplan_compute(c, &o, &b, &st);
    tap_ok(rc == ZT_OK && a.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS] == b.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS] &&
           a.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS] ==
               zt_memplan_acts_bytes(&c->model, 4, 16, 1, 0, 4),
           "bf16 plans fp32 activations (the model computes in fp32): %llu bytes",
           (unsigned long long)b.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS]);
    zt_config_free(c);
}

static void test_formulas(void) {
    zt_status st;
    /* GPT-2 124M, stage 0, fp32, one rank: 16 Psi exactly */
    zt_config *c = shape(12, 12, 768, 1024, 50257);
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, 1);
    zt_memplan p;
    int rc = zt_memplan_compute(c, &o, &p, &st);
    if (rc) tap_diag("%s", st.msg);
    double P = (double)p.num_params;
    tap_ok(rc == ZT_OK && p.num_params == 124439808ULL, "GPT-2 124M: Psi = %llu",
           (unsigned long long)p.num_params);
    tap_ok(p.params_bytes == 4 * p.num_params && p.grads_bytes == 4 * p.num_params &&
           p.optim_bytes == 8 * p.num_params && p.formula_bytes == 16 * P,
           "GPT-2 124M stage 0 fp32 1 rank: params 4 Psi, grads 4 Psi, AdamW 8 Psi = 16 Psi exactly");
    tap_ok(p.peak[ZT_MP_DEVICE] == 0 && p.peak_bytes == p.peak[ZT_MP_HOST] && !p.gpu,
           "CPU target: everything is host memory");
    zt_config_free(c);

    /* 8B-shaped GPT (32 x 4096, 32 heads, context 8192, vocab 128256) on 64 ranks */
    int ok = 1;
    for (int mixed = 0; mixed <= 1; ++mixed)
        for (int stage = 0; stage <= 3; ++stage) {
            c = shape(32, 32, 4096, 8192, 128256);
            tu_set(c, "zero_optimization.stage", "%d", stage);
            tu_set(c, "precision", "%s", mixed ? "bf16" : "fp32");
            zt_memplan_opts_init(&o, 64);
            o.ranks_per_node = 8;
            o.target = ZT_MP_TARGET_GPU;
            rc = zt_memplan_compute(c, &o, &p, &st);
            double states = (double)(p.params_bytes + p.grads_bytes + p.optim_bytes);
            double f = zt_memplan_formula(stage, mixed, (double)p.num_params, 64);
            double e = zt_memplan_engine_formula(stage, mixed, (double)p.num_params, 64);
            double err = fabs(states - e) / e;
            /* the engine keeps fp32 gradients: 2 bytes more per gradient element */
            double gdiff = mixed ? 2.0 * (stage < 2 ? (double)p.num_params
                                                    : (double)p.num_params / 64) : 0.0;
            tap_diag("8B %s stage %d: states %.4f GiB, engine formula %.4f GiB (%.5f%%), ZeRO "
                     "formula %.4f GiB, peak %.2f GiB", mixed ? "bf16" : "fp32", stage,
                     states / 1073741824.0, e / 1073741824.0, 100 * err, f / 1073741824.0,
                     p.peak_bytes / 1073741824.0);
            if (rc != ZT_OK || err > 1e-4 || fabs(p.formula_bytes - f) > 1 ||
                fabs(p.engine_formula_bytes - e) > 1 || fabs(e - f - gdiff) > 1e-6 * f)
                ok = 0;
            zt_config_free(c);
        }
    tap_ok(ok, "8B-shaped on 64 ranks: model states within 0.01%% of what the engine keeps "
           "(fp32: the ZeRO formulas; mixed: the formulas + 2 bytes per fp32 gradient element), "
           "stages 0-3");
    tap_ok(zt_memplan_engine_formula(0, 1, 100, 4) == 1800 &&
           zt_memplan_engine_formula(1, 1, 100, 4) == 900 &&
           zt_memplan_engine_formula(2, 1, 100, 4) == 600 &&
           zt_memplan_engine_formula(3, 1, 100, 4) == 450 &&
           zt_memplan_engine_formula(2, 0, 100, 4) == zt_memplan_formula(2, 0, 100, 4),
           "engine table, mixed: 18, 6+12/N, 2+16/N, 18/N; fp32 = the formula");
    tap_ok(zt_memplan_formula(1, 0, 100, 4) == 1000 && zt_memplan_formula(2, 0, 100, 4) == 700 &&
           zt_memplan_formula(3, 0, 100, 4) == 400 && zt_memplan_formula(1, 1, 100, 4) == 700 &&
           zt_memplan_formula(2, 1, 100, 4) == 550 && zt_memplan_formula(0, 1, 100, 4) == 1600,
           "formula table: fp32 8+8/N, 4+12/N, 16/N; mixed 4+12/N, 2+14/N, 16");

    double gpu, cpu;
    double Pb = 7e9, Lb = 5e8;
    int ds = zt_memplan_deepspeed(2, 0, Pb, Lb, 64, 8, &gpu, &cpu);
    ok = ds && gpu == 2 * Pb + 18 * Pb / 64;
    ds = zt_memplan_deepspeed(2, 1, Pb, Lb, 64, 8, &gpu, &cpu);
    ok = ok && ds && gpu == 2 * Pb && cpu == Pb * 32 * 1.5;
    ds = zt_memplan_deepspeed(3, 0, Pb, Lb, 64, 8, &gpu, &cpu);
    ok = ok && ds && gpu == 4 * Lb + 18 * Pb / 64;
    ds = zt_memplan_deepspeed(3, 1, Pb, Lb, 64, 8, &gpu, &cpu);
    ok = ok && ds && gpu == 4 * Lb + 2 * Pb / 64;
    ds = zt_memplan_deepspeed(3, 2, Pb, Lb, 64, 8, &gpu, &cpu);
    ok = ok && ds && gpu == 4 * Lb && !zt_memplan_deepspeed(1, 0, Pb, Lb, 64, 8, &gpu, &cpu);
    tap_ok(ok, "DeepSpeed estimator: ZeRO-2 2P+18P/N, offload 2P / CPU P*max(4N,16)*1.5; "
           "ZeRO-3 4L+18P/N, 4L+2P/N, 4L");
}

static void test_placement(void) {
    zt_status st;
    zt_memplan_opts o;
    zt_memplan p;
    zt_config *c = shape(4, 4, 64, 32, 100);
    tu_set(c, "zero_optimization.stage", "3");
    tu_set(c, "precision", "bf16");
    tu_set(c, "offload", "params");
    zt_memplan_opts_init(&o, 8);
    o.target = ZT_MP_TARGET_GPU;
    int rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.gpu && p.cat[ZT_MP_HOST][ZT_MEM_PARAMS] == p.params_bytes &&
           p.cat[ZT_MP_HOST][ZT_MEM_OPTIMIZER] == p.optim_bytes &&
           p.cat[ZT_MP_DEVICE][ZT_MEM_PARAMS] == 0 && p.cat[ZT_MP_DEVICE][ZT_MEM_GRADS] == p.grads_bytes &&
           p.cat[ZT_MP_DEVICE][ZT_MEM_ACTIVATIONS] > 0 && p.cat[ZT_MP_DEVICE][ZT_MEM_GATHERED] > 0 &&
           p.peak_bytes == p.peak[ZT_MP_DEVICE],
           "GPU target, offload params: params + optimizer on the host; grads, activations, "
           "gathered units on the device; peak_bytes = device peak");
    /* a GPU run's page-locked staging, whatever pin_memory says: the step's
     * scalars and the training token arrays (inputs, targets: 4 bytes a token) */
    const uint64_t T = (uint64_t)(c->seq_len ? c->seq_len : c->model.context);   /* (0: derived) */
    const uint64_t stg = sizeof(zt_step_scalars) + (uint64_t)p.micro_batch * T * 4 * 2;
    tap_ok(rc == ZT_OK && p.offloaded[ZT_MEM_PARAMS] == p.params_bytes &&
           p.offloaded[ZT_MEM_OPTIMIZER] == p.optim_bytes && p.pinned_staging == stg &&
           p.pinned_bytes == stg,
           "offload params: parameter shards and optimizer state reported offloaded; "
           "pin_memory off: only the staging pinned (%llu bytes: the step's scalars, the token arrays)",
           (unsigned long long)p.pinned_bytes);
    /* pin_memory: a GPU target pins the offloaded blocks of the kinds asked for */
    tu_set(c, "zero_optimization.offload_param.pin_memory", "true");
    zt_memplan pp;
    rc = zt_memplan_compute(c, &o, &pp, &st);
    tu_set(c, "zero_optimization.offload_optimizer.pin_memory", "true");
    zt_memplan pb;
    int rcb = zt_memplan_compute(c, &o, &pb, &st);
    o.target = ZT_MP_TARGET_CPU;
    zt_memplan pc;
    int rcc = zt_memplan_compute(c, &o, &pc, &st);
    o.target = ZT_MP_TARGET_GPU;
    tap_ok(rc == ZT_OK && rcb == ZT_OK && rcc == ZT_OK && pp.pinned_bytes == p.params_bytes + stg &&
           pp.pinned_staging == stg && pb.pinned_staging > stg &&
           pb.pinned_bytes == p.params_bytes + p.optim_bytes + pb.pinned_staging && pc.pinned_bytes == 0 &&
           pc.pinned_staging == 0 && pb.peak_bytes == p.peak_bytes,
           "pin_memory: params only %llu, both %llu pinned bytes on a GPU target (with the staging, "
           "and the offloaded update's gradient slices pinned with the optimizer: %llu); 0 on a CPU "
           "target; the peaks unchanged", (unsigned long long)pp.pinned_bytes,
           (unsigned long long)pb.pinned_bytes, (unsigned long long)pb.pinned_staging);
    tu_set(c, "zero_optimization.offload_param.pin_memory", "false");
    tu_set(c, "zero_optimization.offload_optimizer.pin_memory", "false");
    /* fp32 with offloaded parameters: the host shard is the master (no
     * separate fp32 master weights): params 4 Psi/N and optimizer 8 Psi/N */
    tu_set(c, "precision", "fp32");
    zt_memplan p4;
    rc = zt_memplan_compute(c, &o, &p4, &st);
    tap_ok(rc == ZT_OK && p4.cat[ZT_MP_HOST][ZT_MEM_PARAMS] == p4.params_bytes &&
           p4.optim_bytes == 2 * p4.params_bytes && p4.offloaded[ZT_MEM_PARAMS] == p4.params_bytes &&
           p4.cat[ZT_MP_DEVICE][ZT_MEM_PARAMS] == 0,
           "GPU target, fp32 offload params: 4 Psi/N shard on the host is the master (optimizer "
           "%llu = 2 x params %llu: m and v only)", (unsigned long long)p4.optim_bytes,
           (unsigned long long)p4.params_bytes);
    tu_set(c, "precision", "bf16");
    tu_set(c, "zero_optimization.stage", "2");
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_EINVAL && contains(st.msg, "offload_param") && contains(st.msg, "stage=3"),
           "offload of parameters needs stage 3: %s", st.msg);
    /* optimizer offload, bf16 stage 2 on 8 GPUs: master + m + v (12 bytes per
     * owned element) on the host, tagged offloaded; the rest on the device */
    tu_set(c, "offload", "optimizer");
    rc = zt_memplan_compute(c, &o, &p, &st);
    uint64_t psi = p.num_params;
    tap_ok(rc == ZT_OK && p.optim_bytes >= 12 * (psi / 8) && p.optim_bytes <= 12 * (psi / 8 + 8) &&
           p.cat[ZT_MP_HOST][ZT_MEM_OPTIMIZER] == p.optim_bytes &&
           p.offloaded[ZT_MEM_OPTIMIZER] == p.optim_bytes && p.cat[ZT_MP_DEVICE][ZT_MEM_OPTIMIZER] == 0 &&
           p.cat[ZT_MP_DEVICE][ZT_MEM_PARAMS] == 2 * psi && p.cat[ZT_MP_HOST][ZT_MEM_PARAMS] == 0 &&
           p.cat[ZT_MP_DEVICE][ZT_MEM_GRADS] == p.grads_bytes && p.offloaded[ZT_MEM_PARAMS] == 0,
           "GPU target, bf16 stage 2, optimizer offload: master + m + v (%llu bytes, 12 per owned "
           "element) on the host and offloaded; 16-bit params (2 Psi) and fp32 grads on the device",
           (unsigned long long)p.optim_bytes);
    /* CPU target: everything is host memory; the offloaded part is the optimizer */
    o.target = ZT_MP_TARGET_CPU;
    zt_memplan q;
    rc = zt_memplan_compute(c, &o, &q, &st);
    tu_set(c, "offload", "none");
    zt_memplan r;
    int rc2 = zt_memplan_compute(c, &o, &r, &st);
    tap_ok(rc == ZT_OK && rc2 == ZT_OK && q.peak_bytes == r.peak_bytes &&
           q.offloaded[ZT_MEM_OPTIMIZER] == q.optim_bytes && r.offloaded[ZT_MEM_OPTIMIZER] == 0 &&
           q.peak[ZT_MP_DEVICE] == 0,
           "CPU target: optimizer offload moves nothing out of the per-rank total (%llu bytes); "
           "it is reported as offloaded host memory", (unsigned long long)q.peak_bytes);
    zt_config_free(c);
}

/* Stage-3 gathered units and stage-2/3 buckets: the per-unit replay. */
static void test_transients(void) {
    zt_status st;
    zt_memplan_opts o;
    zt_memplan p;
    zt_config *c = shape(3, 2, 16, 8, 40);
    uint64_t C = 16, n0 = 40 * C + 8 * C, nb = 12 * C * C + 13 * C;
    zt_memplan_opts_init(&o, 1);
    tu_set(c, "zero_optimization.stage", "3");
    zt_memplan_opts_init(&o, 2);
    int rc = zt_memplan_compute(c, &o, &p, &st);
    /* forward: embedding + current + prefetched block; backward: two
     * blocks gathered + the embedding's and the block's buckets */
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_GATHERED] == 4 * (n0 + 2 * nb),
           "stage 3: gathered peak = embedding + 2 blocks (%llu)",
           (unsigned long long)p.cat[ZT_MP_HOST][ZT_MEM_GATHERED]);
    uint64_t big = n0 > nb ? n0 : nb, rs = 4 * ((big + 1) / 2);   /* the largest slice */
    /* overlap_comm (the default), 3 blocks: when block 0's bucket is
     * allocated, the reductions of blocks 2 and 1 are in flight (the final
     * norm's finished when block 1's started), each holding its bucket and
     * its receive slice ceil(nb/2) */
    const uint64_t ov = rs + 4 * (n0 + 2 * (nb + (nb + 1) / 2) + nb);
    tap_ok(p.cat[ZT_MP_HOST][ZT_MEM_COMM] == ov,
           "stage 3, overlap_comm: comm peak = reduce-scatter buffer + embedding bucket + 2 "
           "reductions in flight (buckets + slices) + the block bucket (%llu vs %llu)",
           (unsigned long long)p.cat[ZT_MP_HOST][ZT_MEM_COMM], (unsigned long long)ov);
    tu_set(c, "zero_optimization.overlap_comm", "false");
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_COMM] == rs + 4 * (n0 + nb),
           "stage 3, no overlap: comm peak = reduce-scatter buffer + embedding bucket + block bucket");
    tu_set(c, "zero_optimization.stage", "2");
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_GATHERED] == 0 &&
           p.cat[ZT_MP_HOST][ZT_MEM_COMM] == rs + 4 * (n0 + nb), "stage 2: no gathers; same buckets");
    tu_set(c, "zero_optimization.overlap_comm", "true");
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_COMM] == ov, "stage 2, overlap_comm: the same "
           "reductions in flight");
    zt_memplan_opts_init(&o, 1);
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.overlap_comm == 0, "one rank: nothing to overlap");
    zt_memplan_opts_init(&o, 2);
    tu_set(c, "zero_optimization.stage", "1");
    rc = zt_memplan_compute(c, &o, &p, &st);
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_COMM] == rs, "stage 1: only the reduce-scatter buffer");
    zt_config_free(c);
}

static void test_check_and_auto(void) {
    zt_status st;
    zt_memplan_opts o;
    zt_memplan p;
    zt_config *c = shape(6, 4, 64, 64, 256);
    tu_set(c, "train_micro_batch_size_per_gpu", "8");
    zt_memplan_opts_init(&o, 4);
    int rc = zt_memplan_compute(c, &o, &p, &st);
    uint64_t peak = p.peak_bytes, limit = peak * 8 / 10;
    int forced = 0;
    rc = zt_memplan_check(c, &o, limit, "ztrain.memory_limit", NULL, &forced, &st);
    tap_ok(rc == ZT_ENOMEM && contains(st.msg, "exceeds the limit") &&
           contains(st.msg, "changes that fit:") && contains(st.msg, "--force") &&
           contains(st.msg, "%") && !strchr(st.msg, '\n'),
           "pre-flight refusal: one line with the prediction, the limit and suggestions");
    tap_diag("%s", st.msg);
    char sug[640], first[160];
    int ns = zt_memplan_suggest(c, &o, &p, limit, sug, sizeof sug, first, sizeof first);
    /* apply the first suggestion's flags: it must fit */
    zt_config *d = zt_config_dup(c);
    char buf[160];
    snprintf(buf, sizeof buf, "%s", first);
    int applied = 0;
    for (char *save = NULL, *k = strtok_r(buf, " ", &save); k; k = strtok_r(NULL, " ", &save)) {
        char *v = strtok_r(NULL, " ", &save);
        if (!v || zt_config_set(d, k + 2, v, ZT_SRC_FLAG, &st) != ZT_OK) { applied = -1; break; }
        applied++;
    }
    zt_memplan q;
    rc = zt_memplan_compute(d, &o, &q, &st);
    tap_ok(ns >= 1 && applied > 0 && rc == ZT_OK && q.peak_bytes <= limit,
           "the first suggestion (%s) fits: %llu <= %llu", first, (unsigned long long)q.peak_bytes,
           (unsigned long long)limit);
    zt_config_free(d);
    tu_set(c, "ztrain.force", "true");
    rc = zt_memplan_check(c, &o, limit, "ztrain.memory_limit", NULL, &forced, &st);
    tap_ok(rc == ZT_OK && forced == 1, "ztrain.force: the check passes, marked forced");
    rc = zt_memplan_check(c, &o, peak, "x", NULL, &forced, &st);
    tap_ok(rc == ZT_OK && forced == 0, "a limit equal to the prediction fits");
    tu_set(c, "ztrain.force", "false");
    rc = zt_memplan_check(c, &o, 1000, "x", NULL, &forced, &st);
    tap_ok(rc == ZT_ENOMEM && contains(st.msg, "no change"), "nothing fits: says so");
    zt_config_free(c);

    /* blocks-attn (the attention outputs and lse kept per layer): between
     * blocks and none, and where only blocks fits, the suggestion is blocks */
    {
        zt_memplan_opts o2;
        zt_memplan_opts_init(&o2, 1);
        zt_memplan pn, pb, pa;
        c = shape(6, 4, 64, 64, 256);
        tu_set(c, "train_micro_batch_size_per_gpu", "8");
        int r1 = zt_memplan_compute(c, &o2, &pn, &st);
        tu_set(c, "activation_checkpointing.policy", "blocks");
        int r2 = zt_memplan_compute(c, &o2, &pb, &st);
        tu_set(c, "activation_checkpointing.policy", "blocks-attn");
        int r3 = zt_memplan_compute(c, &o2, &pa, &st);
        const uint64_t an = pn.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS],
                       ab = pb.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS],
                       aa = pa.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS];
        /* (fp32 here: (L - 1) x ([N, C] + [B, NH, T]) floats, every count a multiple of 16) */
        const uint64_t d = 5ull * (8 * 64 * 64 + 8 * 4 * 64) * 4;
        tap_ok(!r1 && !r2 && !r3 && ab < aa && aa < an && aa - ab == d,
               "blocks-attn plans activations %llu bytes: blocks' %llu + 5 x the attention "
               "output and lse (%llu), none %llu", (unsigned long long)aa,
               (unsigned long long)ab, (unsigned long long)d, (unsigned long long)an);
        const uint64_t lim = pb.peak_bytes + (pa.peak_bytes - pb.peak_bytes) / 2;
        ns = zt_memplan_suggest(c, &o2, &pa, lim, sug, sizeof sug, first, sizeof first);
        tap_ok(ns >= 1 && contains(sug, "--act-ckpt blocks") &&
                   contains(sug, "recomputing the attention too"),
               "blocks-attn over the limit, blocks under it: blocks suggested (%s)", sug);
        /* the speed hint: a blocks run that fits is told blocks-attn fits too
         * (with its peak), at a limit it fits, and not where it does not, nor
         * to a blocks-attn, none or every-2 run */
        char hint[320];
        tu_set(c, "activation_checkpointing.policy", "blocks");
        int h1 = zt_memplan_speed_hint(c, &o2, &pb, pa.peak_bytes, hint, sizeof hint);
        char pkw[32];
        zt_memplan_fmt_bytes((double)pa.peak_bytes, pkw, sizeof pkw);
        tap_ok(h1 == 1 && contains(hint, "--act-ckpt blocks-attn fits too") && contains(hint, pkw) &&
                   contains(hint, "5 attention forwards fewer"),
               "blocks that fits, blocks-attn fits the limit (its peak): hinted (%s)", hint);
        int h2 = zt_memplan_speed_hint(c, &o2, &pb, lim, hint, sizeof hint);
        tap_ok(h2 == 0 && !hint[0], "blocks-attn over the limit: no hint");
        int h3 = zt_memplan_speed_hint(c, &o2, &pb, 0, hint, sizeof hint);
        tap_ok(h3 == 1 && contains(hint, "would cost") && !contains(hint, "limit"),
               "no limit known: the hint states the cost only (%s)", hint);
        tu_set(c, "activation_checkpointing.policy", "blocks-attn");
        int h4 = zt_memplan_speed_hint(c, &o2, &pa, 0, hint, sizeof hint);
        tu_set(c, "activation_checkpointing.policy", "none");
        int h5 = zt_memplan_speed_hint(c, &o2, &pn, 0, hint, sizeof hint);
        tu_set(c, "activation_checkpointing.policy", "every-2");
        int h6 = zt_memplan_speed_hint(c, &o2, &pn, 0, hint, sizeof hint);
        tap_ok(h4 == 0 && h5 == 0 && h6 == 0, "blocks-attn, none, every-2: no hint");
        /* where none fits the limit: none hinted to blocks, every-2 and
         * blocks-attn (the recomputed forwards: L - 1, the last group kept;
         * every-2 of 6 layers: 4), with none's peak */
        char pkn[32];
        zt_memplan_fmt_bytes((double)pn.peak_bytes, pkn, sizeof pkn);
        static const struct { const char *pol, *say; } nh[] = {
            {"blocks", "(now 5 block forwards a micro batch)"},
            {"every-2", "(now 4 block forwards a micro batch)"},
            {"blocks-attn", "(now 5 block forwards a micro batch, their attention skipped)"}};
        for (size_t i = 0; i < sizeof nh / sizeof nh[0]; ++i) {
            zt_memplan pc;
            tu_set(c, "activation_checkpointing.policy", "%s", nh[i].pol);
            int rc1 = zt_memplan_compute(c, &o2, &pc, &st);
            int h7 = zt_memplan_speed_hint(c, &o2, &pc, pn.peak_bytes, hint, sizeof hint);
            char hint2[320];
            int h8 = zt_memplan_speed_hint(c, &o2, &pc, pn.peak_bytes - 1, hint2, sizeof hint2);
            tap_ok(!rc1 && h7 == 1 && contains(hint, "--act-ckpt none fits too") && contains(hint, pkn) &&
                       contains(hint, nh[i].say) && !(h8 && contains(hint2, "none")),
                   "%s, none fits the limit: none hinted (%s); one byte under none's peak: not (%s)",
                   nh[i].pol, hint, h8 ? hint2 : "no hint");
        }
        zt_config_free(c);
    }

    /* an eval batch far larger than the micro batch: the cheapest fix keeps
     * training as it is and evaluates the same samples in smaller batches */
    c = shape(6, 4, 64, 64, 256);
    tu_set(c, "train_micro_batch_size_per_gpu", "2");
    tu_set(c, "ztrain.data.val", "%s", "val.bin");
    tu_set(c, "ztrain.eval_batch_size", "32");
    tu_set(c, "ztrain.eval_batches", "2");
    zt_memplan_opts o1;
    zt_memplan_opts_init(&o1, 1);
    rc = zt_memplan_compute(c, &o1, &p, &st);
    limit = p.peak_bytes * 9 / 10;
    ns = zt_memplan_suggest(c, &o1, &p, limit, sug, sizeof sug, first, sizeof first);
    tap_ok(rc == ZT_OK && p.cat[ZT_MP_HOST][ZT_MEM_EVAL] > p.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS] &&
           ns >= 1 && strncmp(first, "--eval-batch-size 16 --eval-batches 4", 38) == 0 &&
           contains(sug, "eval batch 32 -> 16 with 4 eval batches"),
           "eval block dominates: first suggestion halves the eval batch, doubling eval batches (%s)",
           first);
    zt_config_free(c);

    /* auto micro batch: global batch 64 on 4 ranks = 16 per rank */
    c = shape(6, 4, 64, 64, 256);
    tu_set(c, "train_micro_batch_size_per_gpu", "auto");
    tu_set(c, "train_batch_size", "64");
    zt_config *m4 = zt_config_dup(c);
    tu_set(m4, "train_micro_batch_size_per_gpu", "4");
    zt_memplan_compute(m4, &o, &p, &st);
    zt_config_free(m4);
    /* a limit at which micro 4 fits within the margin but 8 does not */
    uint64_t lim = (uint64_t)((double)p.peak_bytes / (1 - ZT_MEMPLAN_AUTO_MARGIN)) + 1;
    char why[640];
    rc = zt_memplan_auto_micro(c, &o, lim, ZT_MEMPLAN_AUTO_MARGIN, why, sizeof why, &st);
    int got = c->micro_batch;
    rc |= zt_config_finalize(c, 4, &st);
    tap_ok(rc == ZT_OK && got == 4 && c->grad_accum == 4 && c->train_batch_size == 64 &&
           contains(why, "micro batch 8 would need"),
           "auto: micro 4 x accumulation 4 x 4 ranks keeps batch 64 (%s)", why);
    zt_config_free(c);
    c = shape(6, 4, 64, 64, 256);
    tu_set(c, "train_micro_batch_size_per_gpu", "auto");
    rc = zt_memplan_auto_micro(c, &o, lim, ZT_MEMPLAN_AUTO_MARGIN, why, sizeof why, &st);
    zt_config *nob = zt_config_dup(c);
    got = c->micro_batch;
    rc |= zt_config_finalize(nob, 4, &st);
    tap_ok(rc == ZT_OK && got == ZT_MICRO_BATCH_AUTO && !why[0] && nob->micro_batch == 16 &&
           nob->grad_accum == 1 && nob->train_batch_size == 64,
           "auto without a global batch: nothing to keep, so the default micro batch 16 x 4 ranks, "
           "as with the key absent");
    zt_config_free(nob);
    tu_set(c, "train_batch_size", "64");
    rc = zt_memplan_auto_micro(c, &o, 1000, ZT_MEMPLAN_AUTO_MARGIN, why, sizeof why, &st);
    tap_ok(rc == ZT_ENOMEM && contains(st.msg, "even micro batch 1"), "auto when nothing fits: %s",
           st.msg);
    zt_config_free(c);

    c = zt_config_new();
    tu_set(c, "ztrain.memory_limit", "3G");
    char what[64];
    tap_ok(zt_memplan_limit(c, 4, what, sizeof what) == 3ULL << 30 && contains(what, "memory_limit"),
           "limit: ztrain.memory_limit when set");
    tu_set(c, "ztrain.memory_limit", "0");
    /* available memory moves while other processes run: the limit must sit
     * between two readings taken around it (give or take 10%) */
    uint64_t a0 = zt_memplan_host_available();
    uint64_t lim4 = zt_memplan_limit(c, 4, what, sizeof what);
    uint64_t a1 = zt_memplan_host_available();
    uint64_t lo = (a0 < a1 ? a0 : a1) / 4, hi = (a0 > a1 ? a0 : a1) / 4;
    lo -= lo / 10;   /* and allow 10% of movement in between */
    hi += hi / 10;
    tap_ok(a0 > 0 && lim4 >= lo && lim4 <= hi && contains(what, "available"),
           "limit: available memory / ranks per node otherwise (%llu in [%llu, %llu])",
           (unsigned long long)lim4, (unsigned long long)lo, (unsigned long long)hi);
    zt_config_free(c);
}

/* The device limit: cpu-strict emulating a device (free = capacity - live),
 * ranks sharing a device, ztrain.memory_limit over it, the cuda reserve. */
static void test_device_limit(void) {
    const zt_backend *S = zt_backend_cpu_strict();
    zt_config *c = zt_config_new();
    tu_set(c, "ztrain.backend", "cpu-strict");
    char what[384];
    zt_backend_cpu_strict_set_capacity((size_t)8 << 20);
    void *blk = S->alloc((size_t)1 << 20);
    uint64_t l1 = zt_memplan_device_limit(c, S, 1, 1, what, sizeof what);
    tap_ok(blk && l1 == (7ULL << 20) && contains(what, "free device memory") &&
           contains(what, "cpu-strict emulated device of 8388608 bytes"),
           "device limit: cpu-strict capacity 8 MiB less 1 MiB live (%llu; %s)",
           (unsigned long long)l1, what);
    tap_ok(zt_memplan_device_limit(c, S, 2, 2, what, sizeof what) == (7ULL << 20) / 2 &&
           contains(what, "/ 2 ranks sharing the device"),
           "device limit: divided by the ranks sharing the device (%s)", what);
    void *big = S->alloc((size_t)8 << 20);
    const char *err = S->error();
    tap_ok(!big && contains(err, "out of memory on the emulated device"),
           "cpu-strict: alloc beyond the capacity fails: %s", err ? err : "(no error)");
    size_t cur = 0, peak = 0;
    S->mem_stats(&cur, &peak);
    tap_ok(cur == ((size_t)1 << 20) && peak >= cur, "cpu-strict mem_stats: %zu live, %zu peak", cur, peak);
    S->free(blk);
    tu_set(c, "ztrain.memory_limit", "3G");
    tap_ok(zt_memplan_device_limit(c, S, 1, 1, what, sizeof what) == 3ULL << 30 &&
           contains(what, "ztrain.memory_limit, device memory of cpu-strict"),
           "device limit: ztrain.memory_limit overrides (%s)", what);
    tu_set(c, "ztrain.memory_limit", "0");
    zt_backend_cpu_strict_set_capacity(0);
    uint64_t lh = zt_memplan_device_limit(c, S, 1, 1, what, sizeof what);
    tap_ok(lh > 0 && contains(what, "available memory") && contains(what, "no emulated capacity"),
           "device limit: cpu-strict without a capacity falls back to host memory (%s)", what);
    tap_ok(zt_memplan_device_reserve("cuda", 80ULL << 30) ==
               ZT_MEMPLAN_CUDA_RESERVE_FIXED + (uint64_t)(80.0 * (1 << 30) * ZT_MEMPLAN_CUDA_RESERVE_FRAC) &&
           zt_memplan_device_reserve("cpu-strict", 80ULL << 30) == 0,
           "device reserve: cuda 512 MiB + 2%%, cpu-strict none");
    zt_config_free(c);
}

/* The cuda backend's own memory in a GPU plan: the cuBLAS workspace plus the
 * scratch buffer at its final size, the max of cuda_workspace.h's functions
 * over the GPT's kernel calls; none on the CPU target or on cpu-strict. */
static uint64_t gpt_ws_max(int L, int NH, int C, int T, int V, int B, int E, uint64_t psi) {
    (void)L;
    const int N = B * T;
    uint64_t w = 0, x;
#define MX(e) do { x = (uint64_t)(e); if (x > w) w = x; } while (0)
    MX(zt_cuda_ws_reduce((size_t)N));                         /* loss sum */
    MX(zt_cuda_ws_matmul_bwd(0, N, C, V, 1, 1, 0));           /* LM head */
    MX(zt_cuda_ws_layernorm_bwd(N, C));                       /* lnf, ln2, ln1 */
    MX(zt_cuda_ws_matmul_bwd(0, N, 4 * C, C, 1, 1, 1));       /* fcproj */
    MX(zt_cuda_ws_matmul_bwd(0, N, C, 4 * C, 1, 1, 1));       /* fc */
    MX(zt_cuda_ws_matmul_bwd(0, N, C, C, 1, 1, 1));           /* attproj */
    MX(zt_cuda_ws_matmul_bwd(0, N, C, 3 * C, 1, 1, 1));       /* qkv */
    MX(zt_cuda_ws_attention_bwd(0, B, T, C, NH));
    MX(zt_cuda_ws_encoder_bwd(N, 0));
    MX(zt_cuda_ws_reduce((size_t)psi));                       /* grad norm */
    if (E) MX(zt_cuda_ws_reduce((size_t)E * T));              /* eval loss sum */
#undef MX
    return w;
}

/* bf16 attention's workspace follows the kernel path: head sizes <= 128
 * (flash on tensor cores) hold only the bf16 copies, larger ones (cuBLAS)
 * also the [kc, T, T] scores (and with a cap the cap's derivative) */
static void test_attention_ws_paths(void) {
    const int B = 2, T = 1024, NH = 8, NKV = 2;
    for (int hs = 64; hs <= 136; hs += 8) {
        const int flash = hs <= 128;
        for (int capped = 0; capped <= 1; capped++) {
            const float cap = capped ? 30.0f : 0.0f;
            const size_t f = zt_cuda_ws_gqa_ext_fwd(1, B, T, NH, NKV, hs, cap),
                         bw = zt_cuda_ws_gqa_ext_bwd(1, B, T, NH, NKV, hs, cap);
            const size_t q16 = zt_cuda_ws_al256((size_t)B * T * (NH + 2 * NKV) * hs * 2),
                         d = zt_cuda_ws_al256((size_t)B * NH * T * 4),
                         do16 = zt_cuda_ws_al256((size_t)B * T * NH * hs * 2);
            const int kc = zt_cuda_att_tc_heads_ext(T, NKV, capped);
            const size_t sc = zt_cuda_ws_att_tc_scores(T, kc),
                         fc = capped ? zt_cuda_ws_al256((size_t)kc * T * T * 4) : 0;
            tap_ok(f == (flash ? q16 : q16 + sc) && bw == (flash ? d + q16 + do16 : d + q16 + do16 + sc + fc) &&
                       zt_cuda_att_flash_tc(hs) == flash,
                   "bf16 attention workspace, head size %d%s: %s (forward %zu, backward %zu bytes)", hs,
                   capped ? ", soft-capped" : "", flash ? "flash, no scores" : "cuBLAS, with the scores", f, bw);
        }
    }
    tap_ok(zt_cuda_ws_gqa_ext_fwd(0, B, T, NH, NKV, 64, 0.0f) == 0 &&
               zt_cuda_ws_gqa_ext_bwd(0, B, T, NH, NKV, 64, 0.0f) == (size_t)B * NH * T * 4,
           "fp32 attention workspace: D alone in the backward");
}

static void test_kernel_ws(void) {
    /* shapes where different kernels have the largest request: attention
     * (many heads), LayerNorm / column-sum partials (wide), the encoder sort
     * (one head, narrow) */
    int shapes[][7] = {{2, 16, 64, 128, 50, 8, 4}, {2, 2, 1024, 64, 100, 8, 0},
                       {1, 1, 8, 256, 30, 16, 2}, {12, 12, 768, 1024, 50257, 4, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        int *s = shapes[i];
        zt_config *c = shape(s[0], s[1], s[2], s[3], s[4]);
        tu_set(c, "train_micro_batch_size_per_gpu", "%d", s[5]);
        zt_status st;
        zt_memplan_opts o;
        zt_memplan g, k, q;
        zt_memplan_opts_init(&o, 1);
        o.with_eval = s[6] > 0;
        if (s[6]) tu_set(c, "ztrain.eval_batch_size", "%d", s[6]);
        o.target = ZT_MP_TARGET_GPU;
        int rc = zt_memplan_compute(c, &o, &g, &st);
        tu_set(c, "ztrain.backend", "cpu-strict");
        int rc2 = zt_memplan_compute(c, &o, &k, &st);
        o.target = ZT_MP_TARGET_CPU;
        int rc3 = zt_memplan_compute(c, &o, &q, &st);
        uint64_t want = zt_cuda_ws_scratch_size(
            gpt_ws_max(s[0], s[1], s[2], s[3], s[4], s[5], s[6], g.num_params));
        tap_ok(rc == ZT_OK && rc2 == ZT_OK && rc3 == ZT_OK && g.gpu && k.gpu &&
                   g.scratch_bytes == want && g.cublas_ws_bytes == ZT_CUDA_CUBLAS_WS_BYTES &&
                   g.kernel_ws_bytes == want + ZT_CUDA_CUBLAS_WS_BYTES &&
                   g.peak[ZT_MP_DEVICE] == k.peak[ZT_MP_DEVICE] + g.kernel_ws_bytes &&
                   g.peak_bytes == g.peak[ZT_MP_DEVICE] && k.kernel_ws_bytes == 0 &&
                   q.kernel_ws_bytes == 0 && q.peak[ZT_MP_DEVICE] == 0,
               "GPU plan %dx%d heads x%d T=%d V=%d B=%d E=%d: kernel workspace = cuBLAS 32 MiB + "
               "scratch %llu (the largest kernel request, rounded to MiB); cpu-strict and CPU "
               "targets: none", s[0], s[1], s[2], s[3], s[4], s[5], s[6], (unsigned long long)want);
        zt_config_free(c);
    }
    /* the scratch rounding: exact MiB multiples, growth to the largest */
    tap_ok(zt_cuda_ws_scratch_size(1) == (1u << 20) && zt_cuda_ws_scratch_size(1u << 20) == (1u << 20) &&
           zt_cuda_ws_scratch_size((1u << 20) + 1) == (2u << 20) && zt_cuda_ws_scratch_size(0) == 0,
           "cuda scratch grows to the request rounded up to 1 MiB");
}

/* The attention calls' scratch follows the backend's answer (backend.h
 * att_scratch, which the pre-flight's plan asks: cuda's cuDNN path with
 * its plan's workspace): a fake backend answers one size for the forward
 * and a larger one for the backward, either above every other kernel's
 * request; the plan's scratch is the backward's, rounded, every attention
 * call of the run asked once (GPT-2: the step's forward and backward, the
 * eval's and the sample's forwards; a Llama with a sliding window shorter
 * than seq_len: each for the full and the sliding layers' options), in
 * the run's matmul precision; without a backend ztrain's kernels' need
 * (cuda_workspace.h), said in att_path.  The entries asked for (in16): a
 * backend with the bf16 entries (the CPU's table) in bf16, the training
 * step's forward and backward the bf16 q|k|v and output with the
 * backward's bf16 gradient (GPT-2: ZT_ATT_IN16OD; ZT_TEST_NO_AB16:
 * ZT_ATT_IN16O; ZT_TEST_NO_AO16: the bf16 q|k|v, ZT_ATT_IN16), the backward's
 * with ZT_ATT_DO16 where the output is bf16 (the caller's bf16 dO; not with
 * ZT_TEST_NO_DO16 or ZT_TEST_NO_AO16), eval and sample the fp32 q|k|v; in
 * fp32 every call the fp32 entries. */
static struct { int n, nwin, mode, B[16], in16[16], bwd[16], T, NH, NKV, hd; } g_asked;
static size_t fake_att_scratch(int bwd, int mode, int in16, int B, int T, int NH, int NKV, int hd,
                               const zt_attn_opts *o, int *cudnn) {
    if (g_asked.n < 16) g_asked.B[g_asked.n] = B, g_asked.in16[g_asked.n] = in16, g_asked.bwd[g_asked.n] = bwd;
    g_asked.n++;
    g_asked.nwin += o->window > 0;
    g_asked.mode = mode, g_asked.T = T, g_asked.NH = NH, g_asked.NKV = NKV, g_asked.hd = hd;
    if (cudnn) *cudnn = 1;
    return bwd ? ((size_t)80 << 20) + 1 : ((size_t)70 << 20) + 1;
}
/* (do16: or'ed into the training backward's) */
static int asked_in16_do(int train_in16, int do16) {
    int ok = g_asked.n == 4;
    for (int i = 0; i < g_asked.n && i < 16; ++i)
        ok &= g_asked.in16[i] == (g_asked.B[i] == 3 ? train_in16 | (g_asked.bwd[i] ? do16 : 0) : ZT_ATT_IN32);
    return ok;
}
static int asked_in16(int train_in16) { return asked_in16_do(train_in16, 0); }
/* c's plan with the test hook `hook` set for it (NULL: none), g_asked
 * recording its calls afresh */
static int plan_asked(zt_config *c, const zt_memplan_opts *o, zt_memplan *a, const char *hook,
                      zt_status *st) {
    if (hook) setenv(hook, "1", 1);
    memset(&g_asked, 0, sizeof g_asked);
    const int rc = zt_memplan_compute(c, o, a, st);
    if (hook) unsetenv(hook);
    return rc;
}
/* plan_asked's plan computed and the calls asked for train_in16's
 * entries, do16 or'ed into the training backward's (asked_in16_do) */
static int asked_ok(zt_config *c, const zt_memplan_opts *o, zt_memplan *a, const char *hook, zt_status *st,
                    int train_in16, int do16) {
    return plan_asked(c, o, a, hook, st) == ZT_OK && asked_in16_do(train_in16, do16);
}
static void test_attention_backend(void) {
    zt_backend fake = *zt_backend_cpu();   /* (the CPU's entries: the bf16 activations and outputs) */
    fake.name = "fake";
    fake.att_scratch = fake_att_scratch;
    zt_config *c = shape(2, 4, 64, 32, 256);
    tu_set(c, "train_micro_batch_size_per_gpu", "3");
    tu_set(c, "ztrain.eval_batch_size", "2");
    tu_set(c, "precision", "bf16");
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, 1);
    o.with_eval = 1;
    o.target = ZT_MP_TARGET_GPU;
    zt_memplan a, k;
    zt_status st;
    int rc = zt_memplan_compute(c, &o, &k, &st);
    tap_ok(rc == ZT_OK && k.att_asked == 0 && k.att_cudnn == 0 && contains(k.att_path, "ztrain's kernels (assumed") &&
               k.scratch_bytes < ((uint64_t)70 << 20),
           "no backend asked: ztrain's kernels' attention scratch assumed (%s)", k.att_path ? k.att_path : "-");
    o.be = &fake;
    rc = plan_asked(c, &o, &a, NULL, &st);
    tap_ok(rc == ZT_OK && a.scratch_bytes == zt_cuda_ws_scratch_size(((size_t)80 << 20) + 1) &&
               a.kernel_ws_bytes == a.scratch_bytes + ZT_CUDA_CUBLAS_WS_BYTES &&
               a.peak[ZT_MP_DEVICE] == k.peak[ZT_MP_DEVICE] - k.kernel_ws_bytes + a.kernel_ws_bytes,
           "GPT-2 on a backend with att_scratch: the plan's scratch is its backward answer rounded "
           "(%llu), the device peak moves by the difference", (unsigned long long)a.scratch_bytes);
    int bs = g_asked.n == 4;
    for (int i = 0; i < g_asked.n && i < 16; ++i) bs &= g_asked.B[i] == 3 || g_asked.B[i] == 2 || g_asked.B[i] == 1;
    tap_ok(bs && a.att_asked == 4 && a.att_cudnn == 4 && g_asked.nwin == 0 && g_asked.mode == ZT_MATMUL_BF16 &&
               g_asked.T == 32 && g_asked.NH == 4 && g_asked.NKV == 4 && g_asked.hd == 16 &&
               contains(a.att_path, "cuDNN's fused attention"),
           "GPT-2: 4 attention calls asked (forward B 3, E 2, sample 1; backward B 3), bf16, T 32, 4 heads of 16 "
           "(asked %d, cuDNN %d; %s)", g_asked.n, a.att_cudnn, a.att_path ? a.att_path : "-");
    tap_ok(asked_in16_do(ZT_ATT_IN16OD, ZT_ATT_DO16),
           "GPT-2 in bf16: the training forward and backward asked for the bf16 q|k|v and output entries with "
           "the backward's bf16 gradient (ZT_ATT_IN16OD) and bf16 dO (| ZT_ATT_DO16), eval and sample for the "
           "fp32 ones");
    tap_ok(asked_ok(c, &o, &a, "ZT_TEST_NO_DO16", &st, ZT_ATT_IN16OD, 0),
           "ZT_TEST_NO_DO16: the backward asked without ZT_ATT_DO16 "
           "(ZT_ATT_IN16OD)");
    tap_ok(asked_ok(c, &o, &a, "ZT_TEST_NO_AB16", &st, ZT_ATT_IN16O, ZT_ATT_DO16),
           "ZT_TEST_NO_AB16: the training calls asked "
           "for the bf16 q|k|v and output entries (ZT_ATT_IN16O; the backward | ZT_ATT_DO16)");
    tap_ok(asked_ok(c, &o, &a, "ZT_TEST_NO_AO16", &st, ZT_ATT_IN16, 0),
           "ZT_TEST_NO_AO16: the training calls asked for the bf16 q|k|v "
           "entries (fp32 output)");
    tu_set(c, "precision", "fp32");
    rc = plan_asked(c, &o, &a, NULL, &st);
    tap_ok(rc == ZT_OK && g_asked.n == 4 && g_asked.mode == ZT_MATMUL_FP32 && asked_in16(ZT_ATT_IN32),
           "fp32 run: asked in fp32 matmul mode, for the fp32 entries");
    /* a Llama whose layers slide (window 8 < seq_len 32): both options asked */
    tu_set(c, "ztrain.model.arch", "llama");
    tu_set(c, "ztrain.model.n_kv_head", "2");
    tu_set(c, "ztrain.model.sliding_window", "8");
    rc = plan_asked(c, &o, &a, NULL, &st);
    tap_ok(rc == ZT_OK && g_asked.n == 8 && g_asked.nwin == 4 && a.att_asked == 8 && g_asked.NKV == 2 &&
               a.scratch_bytes == zt_cuda_ws_scratch_size(((size_t)80 << 20) + 1),
           "Llama with a sliding window: each call asked for the full and the sliding layers (%d, %d with the "
           "window)", g_asked.n, g_asked.nwin);
    /* a Llama in bf16 (no window): the backward's bf16 gradient through
     * RoPE's backward in bf16 (rb16, the backend's rope_bwd16); the test
     * hook ZT_TEST_NO_RB16: ZT_ATT_IN16O; q/k norms (Qwen3) the same
     * (qkb16: RoPE's and the norms' backward in bf16, qknorm_rope_bwd16),
     * but with ZT_TEST_NO_QKB16 or q|k|v biases (their backward reads the
     * fp32 gradient): ZT_ATT_IN16O; the backward's with ZT_ATT_DO16 (the
     * bf16 dO, do16) in each */
    tu_set(c, "ztrain.model.sliding_window", "0");
    tu_set(c, "precision", "bf16");
    tap_ok(asked_ok(c, &o, &a, NULL, &st, ZT_ATT_IN16OD, ZT_ATT_DO16),
           "Llama in bf16: the training forward and backward asked for the bf16 q|k|v and output entries with "
           "the backward's bf16 gradient (ZT_ATT_IN16OD: rope_bwd16) and bf16 dO (| ZT_ATT_DO16), eval and sample "
           "for the fp32 ones");
    tap_ok(asked_ok(c, &o, &a, "ZT_TEST_NO_RB16", &st, ZT_ATT_IN16O, ZT_ATT_DO16),
           "Llama, ZT_TEST_NO_RB16: the training calls asked for the "
           "bf16 q|k|v and output entries (ZT_ATT_IN16O)");
    tu_set(c, "ztrain.model.qk_norm", "true");
    tap_ok(asked_ok(c, &o, &a, NULL, &st, ZT_ATT_IN16OD, ZT_ATT_DO16),
           "Llama with q/k norms: the training calls asked for the "
           "bf16 q|k|v and output entries with the backward's bf16 gradient (ZT_ATT_IN16OD: qknorm_rope_bwd16)");
    tap_ok(asked_ok(c, &o, &a, "ZT_TEST_NO_QKB16", &st, ZT_ATT_IN16O, ZT_ATT_DO16),
           "Llama with q/k norms, ZT_TEST_NO_QKB16: the training "
           "calls asked for the bf16 q|k|v and output entries (ZT_ATT_IN16O)");
    tu_set(c, "ztrain.model.attention_bias", "true");
    tap_ok(asked_ok(c, &o, &a, NULL, &st, ZT_ATT_IN16O, ZT_ATT_DO16),
           "Llama with q/k norms and q|k|v biases: the training "
           "calls asked for the bf16 q|k|v and output entries (ZT_ATT_IN16O)");
    zt_config_free(c);
}

/* The LM head in chunks (classifier.h): a Llama-3-8B-shaped model at
 * T = 8192 holds one chunk of 523 rows of logits, not [8192, 128256], in
 * its training and eval blocks: bf16 in training (the bf16 activations:
 * 128 MiB, not 1.96 GiB), fp32 in eval (256 MiB, not 3.91 GiB); the plan's
 * activation and eval categories shrink by exactly the differences, the
 * kernel workspace (bf16: the GEMM operands' copies) with the chunk too,
 * and logits_bytes reports the chunk.  ZT_TEST_NO_L16: the training chunk
 * in fp32, twice the bytes.  Gemma 2 (final soft-cap, fp32 logits) holds
 * two chunks in training (the capped logits). */
static void test_classifier_chunk(void) {
    zt_config *c = shape(32, 32, 4096, 8192, 128256);
    tu_set(c, "ztrain.model.arch", "llama");
    tu_set(c, "ztrain.model.n_kv_head", "8");
    tu_set(c, "ztrain.model.intermediate_size", "14336");
    tu_set(c, "ztrain.model.tie_embeddings", "false");
    tu_set(c, "ztrain.data.val", "%s", "synthetic");
    tu_set(c, "ztrain.eval_batch_size", "1");
    tu_set(c, "precision", "bf16");
    zt_memplan_opts o;
    zt_memplan a, w;
    zt_status st;
    zt_memplan_opts_init(&o, 1);
    o.target = ZT_MP_TARGET_GPU;
    int rc = zt_memplan_compute(c, &o, &a, &st);
    tu_set(c, "ztrain.classifier_chunk_rows", "8192");   /* one chunk: the [N, V] head */
    rc |= zt_memplan_compute(c, &o, &w, &st);
    zt_model_config one = c->model;
    tu_set(c, "ztrain.classifier_chunk_rows", "0");
    const zt_model_config *mc = &c->model;
    /* (fp32 logits: 523 rows, 256 MiB; a training block's bf16 logits, the
     * head trained: 1046 rows, 256 MiB of bf16, in chunks of 1024; multiples
     * of 128) */
    const uint64_t NV = 8192ull * 128256, RV = 523ull * 128256, RT = 1046ull * 128256;
    const uint64_t d = (NV - RV) * 4, d16 = (NV - RT) * 2;
    const uint64_t tr = zt_memplan_acts_bytes(&one, 1, 8192, 1, 0, 4) - zt_memplan_acts_bytes(mc, 1, 8192, 1, 0, 4);
    const uint64_t ev = zt_memplan_acts_bytes(&one, 1, 8192, 0, 0, 4) - zt_memplan_acts_bytes(mc, 1, 8192, 0, 0, 4);
    const uint64_t *ca = a.cat[ZT_MP_DEVICE], *cw = w.cat[ZT_MP_DEVICE];
    /* (the training block's bf16 logits: the activations as the run keeps them) */
    zt_model_config b16 = *mc, one16 = one;
    b16.acts16 = one16.acts16 = 1;
    const uint64_t tr16 = zt_memplan_acts_bytes(&one16, 1, 8192, 1, 0, 4) -
                          zt_memplan_acts_bytes(&b16, 1, 8192, 1, 0, 4);
    tap_ok(rc == ZT_OK && tr == d && tr16 == d16 && ev == d &&
               cw[ZT_MEM_ACTIVATIONS] - ca[ZT_MEM_ACTIVATIONS] == d16 &&
               cw[ZT_MEM_EVAL] - ca[ZT_MEM_EVAL] == d && a.logits_bytes == RT * 2 &&
               a.full_logits_bytes == NV * 2 && a.logits_elem == 2 && a.chunk_rows == 1024 &&
               w.logits_bytes == NV * 2 && w.chunk_rows == 8192 && a.kernel_ws_bytes < w.kernel_ws_bytes &&
               w.peak_bytes - a.peak_bytes >= d + d16,
           "Llama-3-8B shape, T 8192, bf16, GPU: the activations hold 1046 rows of bf16 logits "
           "(%llu bytes) and the eval block 523 of fp32 (%llu) instead of 8192 (%llu, %llu): %llu "
           "and %llu bytes less, as the planner counts; chunks of 1024; kernel workspace %llu "
           "instead of %llu; peak %llu instead of %llu",
           (unsigned long long)(RT * 2), (unsigned long long)(RV * 4), (unsigned long long)(NV * 2),
           (unsigned long long)(NV * 4), (unsigned long long)d16, (unsigned long long)d,
           (unsigned long long)a.kernel_ws_bytes, (unsigned long long)w.kernel_ws_bytes,
           (unsigned long long)a.peak_bytes, (unsigned long long)w.peak_bytes);
    /* the fp32 logits (the test hook): 523 rows of fp32, the same bytes as
     * 1046 of bf16 */
    zt_memplan f;
    setenv("ZT_TEST_NO_L16", "1", 1);
    rc = zt_memplan_compute(c, &o, &f, &st);
    unsetenv("ZT_TEST_NO_L16");
    const uint64_t *cf = f.cat[ZT_MP_DEVICE];
    tap_ok(rc == ZT_OK && f.logits_bytes == RV * 4 && f.logits_elem == 4 && f.chunk_rows == 512 &&
               RV * 4 == RT * 2 && cf[ZT_MEM_ACTIVATIONS] == ca[ZT_MEM_ACTIVATIONS] &&
               cf[ZT_MEM_EVAL] == ca[ZT_MEM_EVAL] && f.kernel_ws_bytes >= a.kernel_ws_bytes &&
               f.peak_bytes > a.peak_bytes,
           "ZT_TEST_NO_L16 (fp32 logits): the training chunk %llu bytes in 523 rows, chunks of "
           "512 (bf16: %llu in 1046), activations %llu more, kernel workspace %llu (bf16 logits: "
           "%llu), peak %llu (%llu)",
           (unsigned long long)f.logits_bytes, (unsigned long long)a.logits_bytes,
           (unsigned long long)(cf[ZT_MEM_ACTIVATIONS] - ca[ZT_MEM_ACTIVATIONS]),
           (unsigned long long)f.kernel_ws_bytes, (unsigned long long)a.kernel_ws_bytes,
           (unsigned long long)f.peak_bytes, (unsigned long long)a.peak_bytes);
    /* LoRA: the head frozen (no dw GEMM), the bf16 chunk keeps 523 rows
     * (128 MiB) */
    zt_memplan lo;
    tu_set(c, "ztrain.lora.r", "16");
    rc = zt_memplan_compute(c, &o, &lo, &st);
    tu_set(c, "ztrain.lora.r", "0");
    tap_ok(rc == ZT_OK && lo.logits_elem == 2 && lo.logits_bytes == RV * 2 && lo.chunk_rows == 512,
           "LoRA (the head frozen): the training chunk %llu bytes of bf16 logits in chunks of %ld "
           "(full fine-tuning: %llu in %ld)%s%s", (unsigned long long)lo.logits_bytes, lo.chunk_rows,
           (unsigned long long)a.logits_bytes, a.chunk_rows, rc == ZT_OK ? "" : ": ",
           rc == ZT_OK ? "" : st.msg);
    /* Gemma 2's final soft-cap: the capped logits' chunk too (training only) */
    tu_set(c, "ztrain.model.gemma", "2");
    tu_set(c, "ztrain.model.final_softcap", "30");
    one = c->model;
    one.classifier_rows = 8192;
    const uint64_t gtr = zt_memplan_acts_bytes(&one, 1, 8192, 1, 0, 4) - zt_memplan_acts_bytes(mc, 1, 8192, 1, 0, 4);
    const uint64_t gev = zt_memplan_acts_bytes(&one, 1, 8192, 0, 0, 4) - zt_memplan_acts_bytes(mc, 1, 8192, 0, 0, 4);
    rc = zt_memplan_compute(c, &o, &a, &st);
    tap_ok(rc == ZT_OK && gtr == 2 * d && gev == d && a.logits_bytes == 2 * RV * 4 &&
               a.full_logits_bytes == 2 * NV * 4,
           "final soft-cap: training holds two chunks (logits, capped logits), eval one");
    zt_config_free(c);
}

/* The end of a CLI run: only a GPT-2 without LoRA writes the llm.c weights
 * file (stage 3 gathers 4 Psi bytes for it); a llama run's end is its
 * sample alone, [1, min(256, context)] unless opts.sample_window says. */
static void test_end_of_run(void) {
    zt_status st;
    zt_memplan_opts o;
    zt_memplan g, l, w;
    zt_config *c = shape(8, 4, 128, 8, 64);   /* 4 Psi above the gathered blocks and activations */
    tu_set(c, "zero_optimization.stage", "3");
    zt_memplan_opts_init(&o, 2);
    int rc = zt_memplan_compute(c, &o, &g, &st);
    const uint64_t *eg = g.export_peak, *sg = g.sample_peak;
    tap_ok(rc == ZT_OK && g.export_default && eg[ZT_MP_HOST] > g.peak[ZT_MP_HOST] &&
           g.end_peak[ZT_MP_HOST] == (eg[ZT_MP_HOST] > sg[ZT_MP_HOST] ? eg[ZT_MP_HOST] : sg[ZT_MP_HOST]),
           "gpt2 stage 3: the run writes model.bin; end of run = max(export %llu, sample %llu) > peak %llu",
           (unsigned long long)eg[ZT_MP_HOST], (unsigned long long)sg[ZT_MP_HOST],
           (unsigned long long)g.peak[ZT_MP_HOST]);
    tu_set(c, "ztrain.model.arch", "llama");
    rc = zt_memplan_compute(c, &o, &l, &st);
    tap_ok(rc == ZT_OK && !l.export_default && l.end_peak[ZT_MP_HOST] == l.sample_peak[ZT_MP_HOST] &&
           l.export_peak[ZT_MP_HOST] > l.end_peak[ZT_MP_HOST] && l.sample_window == 8,
           "llama stage 3: no weights file, so the end of run is the sample's peak %llu, not the "
           "export's %llu; the sample window is the context 8",
           (unsigned long long)l.end_peak[ZT_MP_HOST], (unsigned long long)l.export_peak[ZT_MP_HOST]);
    tu_set(c, "ztrain.model.context", "1024");
    tu_set(c, "ztrain.model.vocab", "8192");   /* the sample's [1, W, V] logits above the training peak */
    tu_set(c, "ztrain.seq_len", "8");
    rc = zt_memplan_compute(c, &o, &l, &st);
    o.sample_window = 1024;
    rc |= zt_memplan_compute(c, &o, &w, &st);
    tap_ok(rc == ZT_OK && l.sample_window == 256 && w.sample_window == 1024 &&
           w.sample_peak[ZT_MP_HOST] - l.sample_peak[ZT_MP_HOST] ==
               zt_memplan_acts_bytes(&c->model, 1, 1024, 0, 0, 4) -
               zt_memplan_acts_bytes(&c->model, 1, 256, 0, 0, 4),
           "context 1024: the default sample forwards [1, 256]; a 1024 window adds the difference "
           "of the two activation blocks (%llu vs %llu)", (unsigned long long)l.sample_peak[ZT_MP_HOST],
           (unsigned long long)w.sample_peak[ZT_MP_HOST]);
    zt_config_free(c);
}

int main(void) {
    test_end_of_run();
    test_acts();
    test_formulas();
    test_placement();
    test_transients();
    test_check_and_auto();
    test_device_limit();
    test_kernel_ws();
    test_attention_ws_paths();
    test_attention_backend();
    test_classifier_chunk();
    return tap_done();
}
