/*
 * test_memplan_run.c -- the memory planner against real runs, at the world
 * size it is launched with (tests/memplan_mpi.sh runs it at 1-4 ranks; rank
 * 0 prints TAP):
 *  - grid (5 layers): stages 0-3 x every shard group that divides the world
 *    x activation checkpointing none / blocks / every-2 / every-3 x micro batch 1, 5
 *    (with accumulation 2), 16, with an eval batch twice the micro batch:
 *    the pre-flight prediction of the peak is within 5% of the accounted
 *    peak of two training steps and an evaluation (it is exact today);
 *  - mixed-precision grid (4 layers): bf16 and fp16 at stages 0-3 x every
 *    shard group x four variants crossing activation checkpointing
 *    none / blocks, communication_data_type fp32 / bf16 and optimizer
 *    offload off / on (stages 1-3): the predicted peak, every category's
 *    peak and the offloaded (host) peak per category equal the accounted
 *    ones on the ranks the plan describes (shard-group index 0, which owns
 *    the largest slices) and bound them on the others; the total is within
 *    5% everywhere (the largest error is reported);
 *  - offload_param=cpu with pin_memory (fp32, bf16; cpu and cpu-strict):
 *    exact per category (model states on cpu-strict), the parameter shards
 *    wholly offloaded, 0 pinned bytes without a pinning backend, shards
 *    bitwise those of the run without offload (test_offload_param);
 *  - QLoRA with offload_param=cpu (nf4, nf4-dq; fp32, bf16; cpu and
 *    cpu-strict; every shard group): the NF4 store's slices in host memory
 *    (nf4-dq's absmax2 alone on the device), every category exact as
 *    predicted, the adapters, the dequantized base and the eval loss
 *    bitwise those of the stage-3 run without offload (test_offload_nf4);
 *  - offload traffic (test_offload_traffic): the plan's host <-> device
 *    bytes a step of offloading equal what the counting backend counts
 *    over cpu-strict, less the same step without offload;
 *  - activation checkpointing (blocks, every-2, every-3, blocks-attn):
 *    losses, gradients and parameters bitwise identical to no checkpointing
 *    at stages 0 and 3; the accounted activation block shrinks as predicted
 *    (blocks-attn's between blocks' and none's);
 *  - a configuration that cannot fit is refused before any allocation, with
 *    suggestions; the first one fits and trains;
 *  - "auto" micro batch under a small limit: runs, keeps the global batch,
 *    and the next larger micro batch is predicted not to fit;
 *  - the Llama model (tied; untied with biases and the LM head in chunks of
 *    7 rows) at stages 0-3 x shard groups in fp32 / bf16 / fp16 with
 *    checkpointing and offload: exact per category on shard-group index 0
 *    (test_llama_grid).
 */
#include <math.h>
#include <mpi.h>
#include <unistd.h>
#include "count.h"
#include "ctx.h"
#include "ztrain_ckpt.h"
#include "tap.h"
#include "testutil.h"

static int synth_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    (void)s;
    (void)st;
    for (int i = 0; i < count * T; ++i) {
        uint64_t h = zt_hash3((uint64_t)step + 7, first + (uint64_t)(i / T), (uint64_t)(i % T));
        in[i] = (int)(h % 64);
        tg[i] = (int)((h >> 20) % 64);
    }
    return ZT_OK;
}

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static zt_config *base_config(int L) {
    zt_config *c = tu_tiny_config(L, 2, 32, 16, 64, 1);
    tu_set(c, "ztrain.data.val", "%s", "synthetic");   /* the planner counts the eval block */
    tu_set(c, "ztrain.steps", "2");
    tu_set(c, "ztrain.eval_every", "0");
    tu_set(c, "ztrain.eval_batches", "1");
    tu_set(c, "ztrain.log_every", "1000");
    return c;
}

static void attach(zt_ctx *ctx) {
    zt_status st;
    zt_data_source src = {NULL, synth_get, NULL, NULL}, val = {NULL, synth_get, NULL, NULL};
    zt_ctx_set_data(ctx, src, val, &st);
}

/* A context for c with fresh accounting peaks, trained on the synthetic
 * data; *ctx is set when it was created (free it either way). */
static int create_and_train(zt_config *c, zt_ctx **ctx, zt_status *st) {
    zt_mem_reset_peaks();
    *ctx = NULL;
    int rc = zt_ctx_create(c, NULL, ctx, st);
    if (rc == ZT_OK) {
        attach(*ctx);
        rc = zt_train(*ctx, st);
    }
    return rc;
}

/* Every rank's verdict, so that rank 0 reports one result for all. */
static int all_ok(int ok) {
    int out = ok;
    MPI_Allreduce(&ok, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

static void test_grid(int N) {
    static const char *const ckpt[] = {"none", "blocks", "every-2", "every-3"};
    static const int micro[][2] = {{1, 1}, {5, 2}, {16, 1}};
    double worst = 0;
    int runs = 0, bad = 0, failed = 0;
    char worst_what[160] = "";
    for (int stage = 0; stage <= 3; ++stage)
        for (int G = 1; G <= N; ++G) {
            if (N % G || (stage == 0 && G != N)) continue;
            for (size_t k = 0; k < 4; ++k)
                for (size_t m = 0; m < 3; ++m) {
                    zt_config *c = base_config(5);
                    tu_set(c, "zero_optimization.stage", "%d", stage);
                    tu_set(c, "zero_optimization.shard_group_size", "%d", G);
                    tu_set(c, "activation_checkpointing.policy", "%s", ckpt[k]);
                    tu_set(c, "train_micro_batch_size_per_gpu", "%d", micro[m][0]);
                    tu_set(c, "gradient_accumulation_steps", "%d", micro[m][1]);
                    tu_set(c, "ztrain.eval_batch_size", "%d", 2 * micro[m][0]);
                    zt_ctx *ctx;
                    zt_status st;
                    int rc = create_and_train(c, &ctx, &st);
                    if (rc != ZT_OK) {
                        if (!failed++) tap_diag("stage %d G %d %s micro %d: %s", stage, G, ckpt[k],
                                                micro[m][0], st.msg);
                    } else {
                        zt_mem_stats ms;
                        zt_mem_get(&ms);
                        double err = fabs((double)ctx->plan.peak_bytes - (double)ms.peak_total) /
                                     (double)ms.peak_total;
                        runs++;
                        if (err > 0.05) bad++;
                        if (err >= worst) {
                            worst = err;
                            snprintf(worst_what, sizeof worst_what,
                                     "stage %d, G %d, %s, micro %d x %d: accounted %llu, predicted %llu",
                                     stage, G, ckpt[k], micro[m][0], micro[m][1],
                                     (unsigned long long)ms.peak_total,
                                     (unsigned long long)ctx->plan.peak_bytes);
                        }
                    }
                    zt_ctx_free(ctx);
                    zt_config_free(c);
                }
        }
    int ok = all_ok(failed == 0 && bad == 0 && runs > 0);
    tap_ok(ok, "N=%d grid: %d runs, predicted peak within 5%% of the accounted peak "
           "(largest error %.3f%%: %s)", N, runs, 100 * worst, worst_what);
}

/* bf16 / fp16, communication_data_type, optimizer offload.  Per (stage,
 * shard group), four variants v = 0..3: checkpointing blocks when v is odd,
 * 16-bit reductions (bf16) when v >= 2, offload when v is 1 or 2 (stages
 * 1-3; offload needs stage >= 1), fp16 when v + stage is odd (else bf16),
 * micro batch 3 with accumulation 2 for v = 3 (else 2 x 1). */
static void test_grid_mixed(int N) {
    double worst = 0;
    int runs = 0, bad = 0, failed = 0, inexact = 0, offl = 0;
    char worst_what[200] = "";
    for (int stage = 0; stage <= 3; ++stage)
        for (int G = 1; G <= N; ++G) {
            if (N % G || (stage == 0 && G != N)) continue;
            for (int v = 0; v < 4; ++v) {
                const int ck = v & 1, c16 = v >= 2, off = stage >= 1 && (v == 1 || v == 2);
                const char *prec = (v + stage) % 2 ? "fp16" : "bf16";
                const int mb = v == 3 ? 3 : 2, ga = v == 3 ? 2 : 1;
                zt_config *c = base_config(4);
                tu_set(c, "precision", "%s", prec);
                tu_set(c, "zero_optimization.stage", "%d", stage);
                tu_set(c, "zero_optimization.shard_group_size", "%d", G);
                tu_set(c, "activation_checkpointing.policy", "%s", ck ? "blocks" : "none");
                tu_set(c, "communication_data_type", "%s", c16 ? "bf16" : "fp32");
                tu_set(c, "zero_optimization.offload_optimizer.device", "%s", off ? "cpu" : "none");
                tu_set(c, "train_micro_batch_size_per_gpu", "%d", mb);
                tu_set(c, "gradient_accumulation_steps", "%d", ga);
                tu_set(c, "ztrain.eval_batch_size", "%d", 2 * mb);
                char what[160];
                snprintf(what, sizeof what, "%s stage %d G %d %s comm %s offload %s micro %d x %d",
                         prec, stage, G, ck ? "blocks" : "none", c16 ? "bf16" : "fp32",
                         off ? "cpu" : "none", mb, ga);
                zt_ctx *ctx;
                zt_status st;
                int rc = create_and_train(c, &ctx, &st);
                if (rc != ZT_OK) {
                    if (!failed++) tap_diag("%s: %s", what, st.msg);
                } else {
                    zt_mem_stats ms;
                    zt_mem_get(&ms);
                    const zt_memplan *p = &ctx->plan;
                    double err = fabs((double)p->peak_bytes - (double)ms.peak_total) /
                                 (double)ms.peak_total;
                    runs++;
                    if (err > 0.05) bad++;
                    /* the plan is for shard-group index 0, which owns the largest
                     * slices: exact there, an upper bound on the other ranks */
                    const int first = stage == 0 || zt_world_rank() % G == 0;
                    int exact = first ? p->peak_bytes == ms.peak_total
                                      : p->peak_bytes >= ms.peak_total;
                    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
                        if (first ? p->cat[ZT_MP_HOST][t] != ms.peak[t] ||
                                        p->offloaded[t] != ms.host_peak[t]
                                  : p->cat[ZT_MP_HOST][t] < ms.peak[t] ||
                                        p->offloaded[t] < ms.host_peak[t]) {
                            if (exact) tap_diag("%s: %s predicted %llu (offloaded %llu), accounted "
                                                "%llu (host %llu)", what, zt_mem_tag_name(t),
                                                (unsigned long long)p->cat[ZT_MP_HOST][t],
                                                (unsigned long long)p->offloaded[t],
                                                (unsigned long long)ms.peak[t],
                                                (unsigned long long)ms.host_peak[t]);
                            exact = 0;
                        }
                    }
                    if (off && ms.host_peak[ZT_MEM_OPTIMIZER] > 0 &&
                        ms.host_peak[ZT_MEM_OPTIMIZER] == ms.peak[ZT_MEM_OPTIMIZER])
                        offl++;
                    if (!exact) inexact++;
                    if (err >= worst) {
                        worst = err;
                        snprintf(worst_what, sizeof worst_what, "%s: accounted %llu, predicted %llu",
                                 what, (unsigned long long)ms.peak_total,
                                 (unsigned long long)p->peak_bytes);
                    }
                }
                zt_ctx_free(ctx);
                zt_config_free(c);
            }
        }
    int ok = all_ok(failed == 0 && bad == 0 && runs > 0);
    tap_ok(ok, "N=%d bf16/fp16 grid: %d runs, predicted peak within 5%% of the accounted peak "
           "(largest error %.3f%%: %s)", N, runs, 100 * worst, worst_what);
    tap_ok(all_ok(runs > 0 && inexact == 0 && offl > 0),
           "N=%d bf16/fp16 grid: every category's predicted peak and offloaded (host) peak equal "
           "the accounted ones on shard-group index 0, bound them elsewhere (%d of %d runs "
           "differ on rank 0; %d offloaded runs keep the whole optimizer state in host memory)",
           N, inexact, runs, offl);
}

/* The Llama model (grouped-query attention: 4 heads, 2 kv heads; SwiGLU
 * width 48; 3 layers), tied head, and untied with q/k/v biases.  Per
 * (stage, shard group, head), three variants: fp32 without checkpointing,
 * micro 2; bf16 with checkpointing blocks and bf16 reductions, micro 2;
 * fp16 every-2 with optimizer offload (stages 1-3), micro 3 x accumulation
 * 2.  The predicted peak and every category's peak (and offloaded peak)
 * equal the accounted ones on shard-group index 0 and bound them
 * elsewhere. */
static void test_llama_grid(int N) {
    static const char *const ckv[] = {"none", "blocks", "every-2"};
    int runs = 0, failed = 0, inexact = 0;
    char first_bad[220] = "";
    for (int stage = 0; stage <= 3; ++stage)
        for (int G = 1; G <= N; ++G) {
            if (N % G || (stage == 0 && G != N)) continue;
            for (int tied = 1; tied >= 0; --tied)
                for (int v = 0; v < 3; ++v) {
                    const char *prec = v == 0 ? "fp32" : v == 1 ? "bf16" : "fp16";
                    const int off = v == 2 && stage >= 1, mb = v == 2 ? 3 : 2, ga = v == 2 ? 2 : 1;
                    zt_config *c = base_config(3);
                    tu_set(c, "ztrain.model.arch", "llama");
                    tu_set(c, "ztrain.model.n_head", "4");
                    tu_set(c, "ztrain.model.n_kv_head", "2");
                    tu_set(c, "ztrain.model.intermediate_size", "48");
                    tu_set(c, "ztrain.model.tie_embeddings", "%s", tied ? "true" : "false");
                    tu_set(c, "ztrain.model.attention_bias", "%s", tied ? "false" : "true");
                    tu_set(c, "precision", "%s", prec);
                    tu_set(c, "zero_optimization.stage", "%d", stage);
                    tu_set(c, "zero_optimization.shard_group_size", "%d", G);
                    tu_set(c, "activation_checkpointing.policy", "%s", ckv[v]);
                    tu_set(c, "communication_data_type", "%s", v == 1 ? "bf16" : "fp32");
                    tu_set(c, "zero_optimization.offload_optimizer.device", "%s", off ? "cpu" : "none");
                    tu_set(c, "train_micro_batch_size_per_gpu", "%d", mb);
                    tu_set(c, "gradient_accumulation_steps", "%d", ga);
                    tu_set(c, "ztrain.eval_batch_size", "%d", 2 * mb);
                    /* untied: the LM head in chunks of 7 rows (classifier.h) */
                    tu_set(c, "ztrain.classifier_chunk_rows", "%d", tied ? 0 : 7);
                    char what[160];
                    snprintf(what, sizeof what, "%s stage %d G %d %s %s offload %s micro %d x %d",
                             tied ? "tied" : "untied+bias+head chunks of 7", stage, G, prec, ckv[v],
                             off ? "cpu" : "none", mb, ga);
                    zt_ctx *ctx;
                    zt_status st;
                    int rc = create_and_train(c, &ctx, &st);
                    if (rc != ZT_OK || !zt_model_is_llama(ctx->model)) {
                        if (!failed++) tap_diag("%s: %s", what, rc ? st.msg : "not the llama model");
                    } else {
                        zt_mem_stats ms;
                        zt_mem_get(&ms);
                        const zt_memplan *p = &ctx->plan;
                        const int first = stage == 0 || zt_world_rank() % G == 0;
                        int exact = first ? p->peak_bytes == ms.peak_total
                                          : p->peak_bytes >= ms.peak_total;
                        for (int t = 0; t < ZT_MEM_NTAGS; ++t)
                            if (first ? p->cat[ZT_MP_HOST][t] != ms.peak[t] ||
                                            p->offloaded[t] != ms.host_peak[t]
                                      : p->cat[ZT_MP_HOST][t] < ms.peak[t] ||
                                            p->offloaded[t] < ms.host_peak[t])
                                exact = 0;
                        runs++;
                        if (!exact && !inexact++)
                            snprintf(first_bad, sizeof first_bad, "%s: accounted %llu, predicted %llu",
                                     what, (unsigned long long)ms.peak_total,
                                     (unsigned long long)p->peak_bytes);
                    }
                    zt_ctx_free(ctx);
                    zt_config_free(c);
                }
        }
    if (inexact) tap_diag("first inexact: %s", first_bad);
    tap_ok(all_ok(failed == 0 && runs > 0 && inexact == 0),
           "N=%d llama grid (tied / untied+bias+head chunks, fp32 / bf16 / fp16, checkpointing, offload): %d runs, "
           "the predicted peak and every category's peak equal the accounted ones on shard-group "
           "index 0 and bound them elsewhere (%d differ)", N, runs, inexact);
}

/* offload_param=cpu (stage 3, with offload_optimizer), pin_memory on: fp32
 * and bf16 x every shard group x checkpointing none / blocks.
 *  cpu: every category's predicted peak and offloaded peak equal the
 *    accounted ones on shard-group index 0 (bound them elsewhere), the
 *    parameter shards are all host (offloaded) memory, 0 bytes pinned (the
 *    cpu backend cannot pin) as predicted, and the owned shards after two
 *    steps are bitwise those of the same run without offload;
 *  cpu-strict: the run goes, the model states (params, grads, optimizer) and
 *    the gathered units are accounted exactly as predicted, the parameter
 *    and optimizer categories entirely offloaded (host), 0 bytes pinned
 *    (no host_register), the shards bitwise equal to the cpu run's. */
static void owned_params(const zt_ctx *ctx, void **buf, size_t *bytes) {
    const zt_shard *sh = ctx->sh;
    size_t n = sh->shard_total ? sh->shard_total : 1;
    *bytes = n * sh->pes;
    *buf = malloc(*bytes);
    if (!*buf) return;
    const void *src = sh->pshard16 ? (const void *)sh->pshard16 : (const void *)sh->pshard;
    if (sh->host_params || !sh->dev) memcpy(*buf, src, *bytes);
    else sh->be->to_host(*buf, src, *bytes);
}

static void test_offload_param(int N) {
    static const char *const precs[] = {"fp32", "bf16"};
    static const char *const bes[] = {"cpu", "cpu-strict"};
    int runs = 0, failed = 0, inexact = 0, notoff = 0, pinned = 0, differ = 0, wrt = 0;
    for (int pi = 0; pi < 2; ++pi)
        for (int G = 1; G <= N; ++G) {
            if (N % G) continue;
            for (int ck = 0; ck < 2; ++ck) {
                void *ref = NULL;
                size_t ref_bytes = 0;
                /* k = 0: cpu without offload (the reference shards), 1: cpu, 2: cpu-strict */
                for (int k = 0; k < 3; ++k) {
                    zt_config *c = base_config(4);
                    const int off = k > 0, strict = k == 2;
                    tu_set(c, "precision", "%s", precs[pi]);
                    tu_set(c, "zero_optimization.stage", "3");
                    tu_set(c, "zero_optimization.shard_group_size", "%d", G);
                    tu_set(c, "activation_checkpointing.policy", "%s", ck ? "blocks" : "none");
                    tu_set(c, "offload", "%s", off ? "params" : "none");
                    tu_set(c, "zero_optimization.offload_optimizer.pin_memory", "%s", off ? "true" : "false");
                    tu_set(c, "zero_optimization.offload_param.pin_memory", "%s", off ? "true" : "false");
                    tu_set(c, "ztrain.backend", "%s", bes[strict]);
                    tu_set(c, "train_micro_batch_size_per_gpu", "2");
                    tu_set(c, "ztrain.eval_batch_size", "4");
                    char what[160];
                    snprintf(what, sizeof what, "%s %s stage 3 G %d %s offload %s", bes[strict],
                             precs[pi], G, ck ? "blocks" : "none", off ? "params" : "none");
                    zt_ctx *ctx;
                    zt_status st;
                    int rc = create_and_train(c, &ctx, &st);
                    if (rc != ZT_OK) {
                        if (!failed++) tap_diag("%s: %s", what, st.msg);
                        zt_ctx_free(ctx);
                        zt_config_free(c);
                        continue;
                    }
                    void *mine = NULL;
                    size_t mine_bytes = 0;
                    owned_params(ctx, &mine, &mine_bytes);
                    if (k == 0) {
                        ref = mine;
                        ref_bytes = mine_bytes;
                    } else {
                        if (!ref || !mine || mine_bytes != ref_bytes || memcmp(ref, mine, ref_bytes)) {
                            if (!differ++) tap_diag("%s: owned parameters differ from no offload", what);
                        }
                        free(mine);
                    }
                    if (!off) {
                        zt_ctx_free(ctx);
                        zt_config_free(c);
                        continue;
                    }
                    runs++;
                    zt_mem_stats ms;
                    zt_mem_get(&ms);
                    const zt_memplan *p = &ctx->plan;
                    const int first = zt_world_rank() % G == 0;
                    int exact = strict || (first ? p->peak_bytes == ms.peak_total
                                                 : p->peak_bytes >= ms.peak_total);
                    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
                        /* cpu-strict adds host staging the CPU-target plan does not
                         * count: exact there for the model states and gathers */
                        if (strict && t != ZT_MEM_PARAMS && t != ZT_MEM_GRADS &&
                            t != ZT_MEM_OPTIMIZER && t != ZT_MEM_GATHERED)
                            continue;
                        const int oft = !strict || t == ZT_MEM_PARAMS || t == ZT_MEM_OPTIMIZER;
                        /* cpu-strict is planned as a GPU target: these
                         * categories sit wholly in one place, device or host */
                        const uint64_t pc = p->cat[ZT_MP_HOST][t] +
                                            (strict ? p->cat[ZT_MP_DEVICE][t] : 0);
                        if (first ? pc != ms.peak[t] ||
                                        (oft && p->offloaded[t] != ms.host_peak[t])
                                  : pc < ms.peak[t] ||
                                        (oft && p->offloaded[t] < ms.host_peak[t])) {
                            if (exact) tap_diag("%s: %s predicted %llu (offloaded %llu), accounted "
                                                "%llu (host %llu)", what, zt_mem_tag_name(t),
                                                (unsigned long long)pc,
                                                (unsigned long long)p->offloaded[t],
                                                (unsigned long long)ms.peak[t],
                                                (unsigned long long)ms.host_peak[t]);
                            exact = 0;
                        }
                    }
                    if (!exact) inexact++;
                    if (!ms.peak[ZT_MEM_PARAMS] || ms.host_peak[ZT_MEM_PARAMS] != ms.peak[ZT_MEM_PARAMS] ||
                        ms.host_peak[ZT_MEM_OPTIMIZER] != ms.peak[ZT_MEM_OPTIMIZER]) {
                        if (!notoff++) tap_diag("%s: params %llu bytes, %llu of them in host memory", what,
                                                (unsigned long long)ms.peak[ZT_MEM_PARAMS],
                                                (unsigned long long)ms.host_peak[ZT_MEM_PARAMS]);
                    }
                    zt_memory_report mr;
                    zt_memory(&mr);
                    if (ms.pinned_peak || mr.pinned_peak || p->pinned_bytes) pinned++;
                    /* weights export + import through the host shards
                     * (zt_shard_full_params / zt_shard_set_full_params) leave
                     * them unchanged */
                    char wpath[96];
                    int pid = (int)getpid();
                    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
                    snprintf(wpath, sizeof wpath, "/tmp/zt_offp_weights_%d_%d.bin", pid, N);
                    void *before = NULL, *after = NULL;
                    size_t nb = 0, na = 0;
                    owned_params(ctx, &before, &nb);
                    int wrc = zt_save_weights(ctx, wpath, &st);
                    if (wrc == ZT_OK) wrc = zt_load_weights(ctx, wpath, &st);
                    owned_params(ctx, &after, &na);
                    if (wrc != ZT_OK || !before || !after || na != nb || memcmp(before, after, nb)) {
                        if (!wrt++) tap_diag("%s: weights save + load: %s", what,
                                             wrc != ZT_OK ? st.msg : "shards changed");
                    }
                    free(before);
                    free(after);
                    MPI_Barrier(MPI_COMM_WORLD);
                    if (zt_world_rank() == 0) remove(wpath);
                    zt_ctx_free(ctx);
                    zt_config_free(c);
                }
                free(ref);
            }
        }
    tap_ok(all_ok(runs > 0 && failed == 0 && inexact == 0),
           "N=%d offload_param=cpu (fp32, bf16; cpu and cpu-strict; every shard group; "
           "checkpointing none/blocks): %d runs, predicted categories and offloaded peaks equal "
           "the accounted ones on shard-group index 0 (%d differ)", N, runs, inexact);
    tap_ok(all_ok(runs > 0 && notoff == 0),
           "N=%d offload_param=cpu: the parameter shards and the optimizer state are wholly host "
           "(offloaded) memory (%d runs not)", N, notoff);
    tap_ok(all_ok(runs > 0 && pinned == 0),
           "N=%d pin_memory=true on backends that cannot pin (cpu, cpu-strict): 0 bytes pinned, "
           "0 predicted, and the runs go (%d report pinned bytes)", N, pinned);
    tap_ok(all_ok(runs > 0 && differ == 0),
           "N=%d offload_param=cpu: owned parameter shards after two steps bitwise equal to no "
           "offload, on cpu and cpu-strict (%d differ)", N, differ);
    tap_ok(all_ok(runs > 0 && wrt == 0),
           "N=%d offload_param=cpu: llm.c weights save + load round-trip the host shards "
           "(%d runs not)", N, wrt);
}

/* zt_shard_full_params of sh into a malloc'd copy (collective; NULL on failure) */
static float *full_copy(zt_shard *sh, size_t n) {
    float *full, *out = malloc((n ? n : 1) * sizeof(float));
    int owned;
    zt_status st;
    if (!out || zt_shard_full_params(sh, &full, &owned, &st) != ZT_OK) {
        free(out);
        return NULL;
    }
    if (sh->dev) sh->be->to_host(out, full, n * sizeof(float));   /* (device memory) */
    else memcpy(out, full, n * sizeof(float));
    if (owned) zt_mem_free(full);
    return out;
}

/* QLoRA (llama, adapters on all-linear, an nf4 / nf4-dq base) at stage 3
 * with offload_param=cpu + pin_memory, fp32 and bf16 x every shard group:
 *  the NF4 store's slices (rest, codes, absmax / qabsmax) are host memory:
 *    zt_nf4s_host_bytes is the whole store (nf4) or all but the absmax2
 *    (nf4-dq), and the accounted parameters' device part is exactly that
 *    remainder;
 *  cpu: every category's predicted peak and offloaded peak equal the
 *    accounted ones on shard-group index 0 (bound them elsewhere);
 *  cpu-strict: the model states and the gathered copies (the slices
 *    uploaded and all-gathered, no in-place read even with a one-rank
 *    group) exactly as predicted;
 *  both: the adapters, the dequantized base (zt_shard_full_params) and the
 *    eval loss bitwise those of the same run on cpu without offload. */
/* Offload traffic: the plan's host <-> device bytes of offloading a
 *    training step (zt_memplan offload_h2d_bytes / offload_d2h_bytes) equal
 *    what the engine moves: a step counted by the counting backend over
 *    cpu-strict (kernels/count.h: every to_device / to_host and async copy)
 *    with offload, less the same step without it (the token batches and the
 *    step's scalars move either way), on shard-group index 0 (bounded
 *    elsewhere: smaller slices); gradient accumulation 2, activation
 *    checkpointing, stages 1-3, bf16 and fp32, a QLoRA NF4 base and a LoRA
 *    bf16 base offloaded. */
static void step_transfers(const zt_config *c0, const char *offload, double *up, double *down,
                           const zt_memplan **plan, zt_ctx **keep, zt_status *st, int *rc) {
    zt_config *c = zt_config_dup(c0);
    tu_set(c, "offload", "%s", offload);
    zt_ctx *ctx = NULL;
    *up = *down = 0;
    zt_backend_set_stand_in(zt_backend_count_over(zt_backend_cpu_strict()));
    *rc = c ? zt_ctx_create(c, NULL, &ctx, st) : ZT_ENOMEM;
    zt_backend_set_stand_in(NULL);
    zt_metrics m;
    if (*rc == ZT_OK) {
        attach(ctx);
        *rc = zt_train_step(ctx, &m, st);   /* (the start-up's copies before the reset) */
    }
    zt_count_reset();
    if (*rc == ZT_OK) *rc = zt_train_step(ctx, &m, st);
    const zt_count_kernel *k;
    const size_t nk = zt_count_kernels(&k);
    for (size_t i = 0; i < nk; ++i) {
        if (k[i].cls != ZT_CC_HOST) continue;
        if (!strcmp(k[i].name, "cudaMemcpyAsync H2D")) *up += k[i].bytes * (double)k[i].launches;
        else *down += k[i].bytes * (double)k[i].launches;
    }
    zt_count_reset();
    *plan = ctx ? &ctx->plan : NULL;
    *keep = ctx;
    zt_config_free(c);
}

static void test_offload_traffic(int N) {
    static const struct {
        int stage, fp32, lora;   /* lora: 0 none, 1 bf16 base, 2 nf4, 3 nf4-dq; 4 a MoE, no LoRA */
        const char *off, *ckpt;
    } cases[] = {
        {1, 0, 0, "optimizer", "blocks"}, {2, 0, 0, "optimizer", "none"}, {2, 1, 0, "optimizer", "every-2"},
        {3, 0, 0, "optimizer", "blocks"}, {3, 0, 0, "params", "none"}, {3, 0, 0, "params", "blocks"},
        {3, 0, 0, "params", "every-2"}, {3, 1, 0, "params", "blocks"}, {3, 0, 1, "params", "blocks"},
        {3, 0, 2, "params", "blocks"}, {3, 1, 3, "params", "none"}, {2, 0, 2, "optimizer", "blocks"},
        {1, 0, 4, "optimizer", "none"}, {3, 0, 4, "params", "blocks"}, {3, 1, 4, "params", "none"},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    int runs = 0, failed = 0, bad = 0, nonzero = 0;
    for (int i = 0; i < nc; ++i)
        for (int G = 1; G <= N; ++G) {
            if (N % G) continue;
            zt_config *c = base_config(4);
            tu_set(c, "ztrain.data.val", "%s", "");
            tu_set(c, "ztrain.model.arch", "llama");
            tu_set(c, "ztrain.model.n_head", "4");
            tu_set(c, "ztrain.model.n_kv_head", "2");
            tu_set(c, "ztrain.model.intermediate_size", "48");
            if (cases[i].lora == 4) {   /* (the expert windows: every expert a unit of its own) */
                tu_set(c, "ztrain.model.n_experts", "4");
                tu_set(c, "ztrain.model.experts_per_token", "2");
                tu_set(c, "ztrain.model.moe_intermediate_size", "24");
                tu_set(c, "ztrain.model.shared_expert_size", "16");
            } else if (cases[i].lora) {
                tu_set(c, "ztrain.lora.r", "2");
                tu_set(c, "ztrain.lora.targets", "all-linear");
                if (cases[i].lora > 1) tu_set(c, "ztrain.lora.base", "%s", cases[i].lora == 2 ? "nf4" : "nf4-dq");
            }
            tu_set(c, "precision", "%s", cases[i].fp32 ? "fp32" : "bf16");
            tu_set(c, "zero_optimization.stage", "%d", cases[i].stage);
            tu_set(c, "zero_optimization.shard_group_size", "%d", G);
            tu_set(c, "activation_checkpointing.policy", "%s", cases[i].ckpt);
            tu_set(c, "ztrain.backend", "%s", "cpu-strict");
            tu_set(c, "train_micro_batch_size_per_gpu", "2");
            tu_set(c, "gradient_accumulation_steps", "2");
            char what[200];
            snprintf(what, sizeof what, "%s stage %d G %d offload %s, %s%s, accumulation 2",
                     cases[i].fp32 ? "fp32" : "bf16", cases[i].stage, G, cases[i].off, cases[i].ckpt,
                     cases[i].lora == 1 ? ", LoRA bf16 base" : cases[i].lora == 2 ? ", QLoRA nf4"
                     : cases[i].lora == 3 ? ", QLoRA nf4-dq" : cases[i].lora == 4 ? ", MoE" : "");
            zt_status st;
            int rc;
            double u0, d0, u1, d1;
            const zt_memplan *p0, *p1;
            zt_ctx *c0 = NULL, *c1 = NULL;
            step_transfers(c, "none", &u0, &d0, &p0, &c0, &st, &rc);
            if (rc == ZT_OK) step_transfers(c, cases[i].off, &u1, &d1, &p1, &c1, &st, &rc);
            if (rc != ZT_OK) {
                if (!failed++) tap_diag("%s: %s", what, st.msg);
            } else {
                runs++;
                const double pu = (double)p1->offload_h2d_bytes, pd = (double)p1->offload_d2h_bytes;
                const int first = zt_world_rank() % G == 0;
                const int ok = first ? u1 - u0 == pu && d1 - d0 == pd : u1 - u0 <= pu && d1 - d0 <= pd;
                if (!ok && !bad++)
                    tap_diag("%s: counted %.0f up, %.0f down more than without offload; planned %.0f up "
                             "(micro-step %llu, update %llu), %.0f down", what, u1 - u0, d1 - d0, pu,
                             (unsigned long long)p1->offload_micro_h2d,
                             (unsigned long long)p1->offload_update_h2d, pd);
                if (pu > 0 && pd > 0 && p0->offload_h2d_bytes == 0 && p0->offload_d2h_bytes == 0) nonzero++;
                if (i == 0 && G == 1) tap_diag("%s: %.0f up, %.0f down", what, pu, pd);
            }
            zt_ctx_free(c0);
            zt_ctx_free(c1);
            zt_config_free(c);
        }
    tap_ok(all_ok(runs > 0 && failed == 0 && bad == 0),
           "N=%d offload traffic (stages 1-3, optimizer / params, fp32 and bf16, LoRA bf16 and QLoRA "
           "nf4/nf4-dq bases, a Mixture of Experts, checkpointing none/blocks/every-2, accumulation 2; "
           "every shard group): "
           "%d runs, the planned host<->device bytes a step equal the counted ones on shard-group "
           "index 0 less those without offload (%d differ)", N, runs, bad);
    tap_ok(all_ok(runs > 0 && nonzero == runs),
           "N=%d offload traffic: both directions planned non-zero with offload, 0 without "
           "(%d of %d runs)", N, nonzero, runs);
}

static void test_offload_nf4(int N) {
    static const char *const bases[] = {"nf4", "nf4-dq"};
    static const char *const precs[] = {"fp32", "bf16"};
    static const char *const bes[] = {"cpu", "cpu-strict"};
    int runs = 0, failed = 0, inexact = 0, notoff = 0, differ = 0;
    for (int bi = 0; bi < 2; ++bi)
        for (int pi = 0; pi < 2; ++pi)
            for (int G = 1; G <= N; ++G) {
                if (N % G) continue;
                float *ref_a = NULL, *ref_b = NULL;
                double ref_loss = 0;
                size_t na = 0, nb = 0;
                /* k = 0: cpu without offload (the reference), 1: cpu, 2: cpu-strict */
                for (int k = 0; k < 3; ++k) {
                    zt_config *c = base_config(3);
                    const int off = k > 0, strict = k == 2;
                    tu_set(c, "ztrain.model.arch", "llama");
                    tu_set(c, "ztrain.model.n_head", "4");
                    tu_set(c, "ztrain.model.n_kv_head", "2");
                    tu_set(c, "ztrain.model.intermediate_size", "48");
                    tu_set(c, "ztrain.lora.r", "2");
                    tu_set(c, "ztrain.lora.alpha", "3");
                    tu_set(c, "ztrain.lora.targets", "all-linear");
                    tu_set(c, "ztrain.lora.base", "%s", bases[bi]);
                    tu_set(c, "precision", "%s", precs[pi]);
                    tu_set(c, "zero_optimization.stage", "3");
                    tu_set(c, "zero_optimization.shard_group_size", "%d", G);
                    tu_set(c, "offload", "%s", off ? "params" : "none");
                    tu_set(c, "zero_optimization.offload_optimizer.pin_memory", "%s", off ? "true" : "false");
                    tu_set(c, "zero_optimization.offload_param.pin_memory", "%s", off ? "true" : "false");
                    tu_set(c, "ztrain.backend", "%s", bes[strict]);
                    tu_set(c, "train_micro_batch_size_per_gpu", "2");
                    tu_set(c, "ztrain.eval_batch_size", "4");
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s stage 3 G %d offload %s", bes[strict],
                             bases[bi], precs[pi], G, off ? "params" : "none");
                    zt_ctx *ctx;
                    zt_status st;
                    int rc = create_and_train(c, &ctx, &st);
                    if (rc != ZT_OK || !ctx->sh->q) {
                        if (!failed++) tap_diag("%s: %s", what, rc ? st.msg : "no NF4 store");
                        zt_ctx_free(ctx);
                        zt_config_free(c);
                        continue;
                    }
                    zt_mem_stats ms;
                    zt_mem_get(&ms);   /* (before the full copies below) */
                    const size_t qb = zt_nf4s_bytes(ctx->sh), qh = zt_nf4s_host_bytes(ctx->sh);
                    na = ctx->lmodel->num_params;
                    nb = ctx->model->num_params;
                    float *a = full_copy(ctx->lsh, na), *b = full_copy(ctx->sh, nb);
                    const double loss = ctx->last_val_loss;
                    if (k == 0) {
                        ref_a = a;
                        ref_b = b;
                        ref_loss = loss;
                        zt_ctx_free(ctx);
                        zt_config_free(c);
                        continue;
                    }
                    if (!a || !b || !ref_a || !ref_b || memcmp(a, ref_a, na * sizeof(float)) ||
                        memcmp(b, ref_b, nb * sizeof(float)) || memcmp(&loss, &ref_loss, sizeof loss)) {
                        if (!differ++) tap_diag("%s: adapters, base or eval loss differ from no offload "
                                                "(loss %.9g vs %.9g)", what, loss, ref_loss);
                    }
                    free(a);
                    free(b);
                    runs++;
                    if (!qh || (bi == 0 ? qh != qb : qh >= qb) ||
                        ms.cur[ZT_MEM_PARAMS] - ms.host_cur[ZT_MEM_PARAMS] != qb - qh) {
                        if (!notoff++) tap_diag("%s: store %zu bytes, %zu of them host; parameters %llu "
                                                "bytes, %llu host", what, qb, qh,
                                                (unsigned long long)ms.cur[ZT_MEM_PARAMS],
                                                (unsigned long long)ms.host_cur[ZT_MEM_PARAMS]);
                    }
                    const zt_memplan *p = &ctx->plan;
                    const int first = zt_world_rank() % G == 0;
                    int exact = strict || (first ? p->peak_bytes == ms.peak_total
                                                 : p->peak_bytes >= ms.peak_total);
                    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
                        if (strict && t != ZT_MEM_PARAMS && t != ZT_MEM_GRADS &&
                            t != ZT_MEM_OPTIMIZER && t != ZT_MEM_GATHERED)
                            continue;
                        const uint64_t pc = p->cat[ZT_MP_HOST][t] + (strict ? p->cat[ZT_MP_DEVICE][t] : 0);
                        if (first ? pc != ms.peak[t] || p->offloaded[t] != ms.host_peak[t]
                                  : pc < ms.peak[t] || p->offloaded[t] < ms.host_peak[t]) {
                            if (exact) tap_diag("%s: %s predicted %llu (offloaded %llu), accounted "
                                                "%llu (host %llu)", what, zt_mem_tag_name(t),
                                                (unsigned long long)pc,
                                                (unsigned long long)p->offloaded[t],
                                                (unsigned long long)ms.peak[t],
                                                (unsigned long long)ms.host_peak[t]);
                            exact = 0;
                        }
                    }
                    if (!exact) inexact++;
                    zt_ctx_free(ctx);
                    zt_config_free(c);
                }
                free(ref_a);
                free(ref_b);
            }
    tap_ok(all_ok(runs > 0 && failed == 0 && inexact == 0),
           "N=%d QLoRA offload_param=cpu (nf4, nf4-dq; fp32, bf16; cpu and cpu-strict; every "
           "shard group): %d runs, predicted categories and offloaded peaks equal the accounted "
           "ones on shard-group index 0 (%d differ)", N, runs, inexact);
    tap_ok(all_ok(runs > 0 && notoff == 0),
           "N=%d QLoRA offload_param=cpu: the NF4 store's slices are host (offloaded) memory, "
           "the device keeps only nf4-dq's absmax2 (%d runs not)", N, notoff);
    tap_ok(all_ok(runs > 0 && differ == 0),
           "N=%d QLoRA offload_param=cpu: adapters, dequantized base and eval loss bitwise those "
           "of the stage-3 run without offload, on cpu and cpu-strict (%d differ)", N, differ);
}

/* Gradient / parameter block of this rank after a step. */
static void state_views(zt_ctx *ctx, const float **g, size_t *ng, const float **p, size_t *np) {
    zt_shard *sh = ctx->sh;
    if (sh->stage >= 2) { *g = sh->gshard; *ng = sh->shard_total; }
    else { *g = ctx->model->grads; *ng = ctx->model->num_params; }
    if (sh->stage == 3) { *p = sh->pshard; *np = sh->shard_total; }
    else { *p = ctx->model->params; *np = ctx->model->num_params; }
}

static void test_checkpointing(int N) {
    static const char *const ckpt[] = {"none", "blocks", "every-2", "every-3", "blocks-attn"};
    for (int stage = 0; stage <= 3; stage += 3) {
        double loss0[3] = {0}, norm0[3] = {0};
        float *g0 = NULL, *p0 = NULL;
        size_t ng0 = 0, np0 = 0;
        uint64_t acts[5] = {0}, pred[5] = {0};
        int ok = 1;
        for (int k = 0; k < 5; ++k) {
            zt_config *c = base_config(5);
            tu_set(c, "zero_optimization.stage", "%d", stage);
            tu_set(c, "activation_checkpointing.policy", "%s", ckpt[k]);
            tu_set(c, "train_micro_batch_size_per_gpu", "3");
            zt_mem_reset_peaks();
            zt_ctx *ctx = NULL;
            zt_status st;
            int rc = zt_ctx_create(c, NULL, &ctx, &st);
            if (rc == ZT_OK) attach(ctx);
            double loss[3] = {0}, norm[3] = {0};
            for (int s = 0; s < 3 && rc == ZT_OK; ++s) {
                zt_metrics m;
                rc = zt_train_step(ctx, &m, &st);
                loss[s] = m.loss;
                norm[s] = m.grad_norm;
            }
            if (rc != ZT_OK) {
                tap_diag("%s: %s", ckpt[k], st.msg);
                ok = 0;
            } else {
                const float *g, *p;
                size_t ng, np;
                state_views(ctx, &g, &ng, &p, &np);
                zt_mem_stats ms;
                zt_mem_get(&ms);
                acts[k] = ms.peak[ZT_MEM_ACTIVATIONS];
                pred[k] = ctx->plan.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS];
                if (k == 0) {
                    memcpy(loss0, loss, sizeof loss0);
                    memcpy(norm0, norm, sizeof norm0);
                    g0 = malloc(ng * sizeof *g0);
                    p0 = malloc(np * sizeof *p0);
                    memcpy(g0, g, ng * sizeof *g0);
                    memcpy(p0, p, np * sizeof *p0);
                    ng0 = ng;
                    np0 = np;
                } else if (memcmp(loss, loss0, sizeof loss) || memcmp(norm, norm0, sizeof norm) ||
                           ng != ng0 || np != np0 || memcmp(g, g0, ng * sizeof *g) ||
                           memcmp(p, p0, np * sizeof *p)) {
                    tap_diag("stage %d %s: losses %.9g %.9g %.9g vs %.9g %.9g %.9g", stage, ckpt[k],
                             loss[0], loss[1], loss[2], loss0[0], loss0[1], loss0[2]);
                    ok = 0;
                }
            }
            zt_ctx_free(ctx);
            zt_config_free(c);
        }
        free(g0);
        free(p0);
        tap_ok(all_ok(ok), "N=%d stage %d: blocks, every-2, every-3, blocks-attn: losses, "
               "gradient norms, gradients and parameters bitwise equal to no checkpointing "
               "(3 steps)", N, stage);
        tap_ok(all_ok(acts[1] < acts[2] && acts[2] < acts[0] && acts[3] < acts[0] &&
                      acts[1] < acts[4] && acts[4] < acts[0] &&
                      acts[0] == pred[0] && acts[1] == pred[1] && acts[2] == pred[2] &&
                      acts[3] == pred[3] && acts[4] == pred[4]),
               "N=%d stage %d: accounted activations none %llu > every-2 %llu > blocks %llu bytes "
               "(every-3 %llu; blocks-attn %llu, between blocks and none), each as predicted", N,
               stage, (unsigned long long)acts[0], (unsigned long long)acts[2],
               (unsigned long long)acts[1], (unsigned long long)acts[3],
               (unsigned long long)acts[4]);
    }
}

static void test_refusal(int N) {
    zt_config *c = base_config(4);
    tu_set(c, "train_micro_batch_size_per_gpu", "8");
    tu_set(c, "ztrain.model.vocab", "512");
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, N);
    zt_memplan p;
    zt_status st;
    zt_memplan_compute(c, &o, &p, &st);
    uint64_t limit = p.peak_bytes * 3 / 4;
    tu_set(c, "ztrain.memory_limit", "%llu", (unsigned long long)limit);
    zt_mem_reset_peaks();
    zt_ctx *ctx = NULL;
    int rc = zt_ctx_create(c, NULL, &ctx, &st);
    zt_mem_stats ms;
    zt_mem_get(&ms);
    const char *fs = strstr(st.msg, "changes that fit: ");
    char flags[200] = "";
    if (fs) {
        const char *o1 = strchr(fs, '('), *o2 = o1 ? strchr(o1, ')') : NULL;
        if (o1 && o2 && o2 - o1 - 1 < (long)sizeof flags)
            snprintf(flags, sizeof flags, "%.*s", (int)(o2 - o1 - 1), o1 + 1);
    }
    tap_ok(all_ok(rc == ZT_ENOMEM && !ctx && ms.peak_total == 0 && fs && flags[0] &&
                  contains(st.msg, "--force")),
           "N=%d: a run predicted to need %llu bytes is refused under a %llu-byte limit before "
           "anything is allocated (%llu bytes accounted)", N, (unsigned long long)p.peak_bytes,
           (unsigned long long)limit, (unsigned long long)ms.peak_total);
    if (zt_world_rank() == 0) tap_diag("%s", st.msg);
    /* apply the first suggestion */
    int applied = 0;
    for (char *save = NULL, *k = strtok_r(flags, " ", &save); k; k = strtok_r(NULL, " ", &save)) {
        char *v = strtok_r(NULL, " ", &save);
        if (v && zt_config_set(c, k + 2, v, ZT_SRC_FLAG, &st) == ZT_OK) applied++;
    }
    zt_mem_reset_peaks();
    rc = applied ? zt_ctx_create(c, NULL, &ctx, &st) : ZT_EINVAL;
    if (rc == ZT_OK) {
        attach(ctx);
        rc = zt_train(ctx, &st);
    }
    zt_mem_get(&ms);
    if (rc) tap_diag("%s", st.msg);
    tap_ok(all_ok(rc == ZT_OK && ms.peak_total <= limit),
           "N=%d: with the first suggestion applied it trains, peak %llu <= limit %llu", N,
           (unsigned long long)ms.peak_total, (unsigned long long)limit);
    zt_ctx_free(ctx);
    ctx = NULL;
    /* --force starts anyway */
    zt_config_free(c);
    c = base_config(4);
    tu_set(c, "train_micro_batch_size_per_gpu", "8");
    tu_set(c, "ztrain.model.vocab", "512");
    tu_set(c, "ztrain.memory_limit", "%llu", (unsigned long long)limit);
    tu_set(c, "ztrain.force", "true");
    rc = zt_ctx_create(c, NULL, &ctx, &st);
    if (rc == ZT_OK) {
        attach(ctx);
        rc = zt_train(ctx, &st);
    }
    tap_ok(all_ok(rc == ZT_OK), "N=%d: ztrain.force starts the same run anyway", N);
    zt_ctx_free(ctx);
    zt_config_free(c);
}

static void test_auto(int N) {
    zt_config *c = base_config(4);
    tu_set(c, "train_batch_size", "%d", 12 * N);
    tu_set(c, "ztrain.model.vocab", "512");
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, N);
    zt_memplan p4, p6;
    zt_status st;
    zt_config *m = zt_config_dup(c);
    tu_set(m, "train_micro_batch_size_per_gpu", "4");
    zt_memplan_compute(m, &o, &p4, &st);
    tu_set(m, "train_micro_batch_size_per_gpu", "6");
    zt_memplan_compute(m, &o, &p6, &st);
    zt_config_free(m);
    uint64_t limit = (uint64_t)((double)p4.peak_bytes / (1 - ZT_MEMPLAN_AUTO_MARGIN)) + 1;
    tu_set(c, "ztrain.memory_limit", "%llu", (unsigned long long)limit);
    tu_set(c, "train_micro_batch_size_per_gpu", "auto");
    zt_ctx *ctx = NULL;
    zt_mem_reset_peaks();
    int rc = zt_ctx_create(c, NULL, &ctx, &st);
    int mb = rc == ZT_OK ? ctx->cfg->micro_batch : 0, ga = rc == ZT_OK ? ctx->cfg->grad_accum : 0;
    int tbs = rc == ZT_OK ? ctx->cfg->train_batch_size : 0;
    if (rc == ZT_OK) {
        attach(ctx);
        rc = zt_train(ctx, &st);
    }
    if (rc) tap_diag("%s", st.msg);
    zt_mem_stats ms;
    zt_mem_get(&ms);
    tap_ok(all_ok(rc == ZT_OK && mb == 4 && ga == 3 && tbs == 12 * N && ms.peak_total <= limit &&
                  (double)p6.peak_bytes > (1 - ZT_MEMPLAN_AUTO_MARGIN) * (double)limit),
           "N=%d: micro batch auto under a %llu-byte limit picks 4 (x accumulation %d = batch %d, "
           "kept), trains within it (peak %llu); micro 6 is predicted not to fit (%llu)", N,
           (unsigned long long)limit, ga, tbs, (unsigned long long)ms.peak_total,
           (unsigned long long)p6.peak_bytes);
    zt_ctx_free(ctx);
    zt_config_free(c);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    int N = zt_world_size();
    if (zt_world_rank() != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    tap_diag("world size %d", N);
    test_grid(N);
    test_grid_mixed(N);
    test_llama_grid(N);
    test_offload_param(N);
    test_offload_nf4(N);
    test_offload_traffic(N);
    test_checkpointing(N);
    test_refusal(N);
    test_auto(N);
    int rc = tap_done();
    zt_finalize();
    return rc;
}
