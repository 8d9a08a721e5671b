/* cmd_estimate.c -- `ztrain estimate`: predicted memory per rank, before a
 * job is submitted (libtrain/memplan.h, docs/memory.md).  Pure arithmetic:
 * no MPI, no allocation of training state, any model size. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "cli.h"
#include "svg.h"
#include "lora.h"
#include "config.h"
#include "arch.h"
#include "memplan.h"
#include "ztrain_ckpt.h"

static void estimate_usage(void) {
    printf("usage: ztrain estimate [--config FILE] --world-size N [--ranks-per-node M]\n"
           "                       [--device cpu|gpu] [--device-memory SIZE] [--json]\n"
           "                       [--KEY VALUE ...]\n"
           "\n"
           "Predicts the peak memory of one rank -- device and host, per category (params,\n"
           "grads, optimizer, gathered units, activations, comm buffers, workspace, eval) --\n"
           "for a training run of the configuration on N ranks, and prints a table with one\n"
           "row per ZeRO stage / offload option next to DeepSpeed's model-state estimator.\n"
           "Every configuration key is accepted as a flag, as for 'ztrain train' (model\n"
           "shape, --stage, --shard-group, --precision, --micro-batch, --context,\n"
           "--act-ckpt, --offload ...).  bf16/fp16, optimizer offload and parameter\n"
           "offload (stage 3) are planned as the engine runs them, and so is pin_memory\n"
           "(page-locked bytes on a GPU target; a CPU backend cannot pin).\n"
           "\n"
           "  --config FILE          DeepSpeed-style JSON configuration (or ZTRAIN_CONFIG)\n"
           "  --model DIR|FILE       the model of a Hugging Face config.json (a model directory\n"
           "                         or the file; no weights are read): sets ztrain.model.*\n"
           "  --world-size N         ranks (required; in a Slurm job, default SLURM_NTASKS)\n"
           "  --ranks-per-node M     ranks sharing one node's host memory (default: in a Slurm job\n"
           "                         the most tasks on one node, from SLURM_NTASKS_PER_NODE or\n"
           "                         SLURM_TASKS_PER_NODE; else min(N, 8))\n"
           "  --device cpu|gpu       target (default: ztrain.backend: cpu, cuda = gpu)\n"
           "  --device-memory SIZE   memory of one GPU (e.g. 80G): checks the fit on a GPU target,\n"
           "                         against SIZE less the CUDA context and the run's reserve\n"
           "                         (512 MiB + 2%%), as the run's own check sees the device\n"
           "  --cuda-context SIZE    the CUDA context and libraries of one process (default\n"
           "                         1.25G, measured on H100/H200 with CUDA 13: docs/gpu.md)\n"
           "  --memory-limit SIZE    memory one rank may use (ztrain.memory_limit): checks the fit\n"
           "  --json                 one JSON object; the per-rank total is \"peak_bytes\"\n"
           "  --plot FILE.svg        also draw the predicted peak per category as stacked bars:\n"
           "                         this configuration and every option row, the limit as a line\n"
           "  --lora-r R             LoRA (with --lora-targets, --lora-alpha ...): a frozen base\n"
           "                         and rank-R adapters; prints the LoRA rows (docs/lora.md)\n");
}

/* ------------------------------------------------------------ options table */

typedef struct row {
    int stage, offload;            /* offload: 0 none, 1 optimizer, 2 params */
    int ok;
    zt_memplan p;
    double ds_gpu, ds_cpu;
    int has_ds;
} row;

static const char *offload_name(int o) { return o == 0 ? "none" : o == 1 ? "optimizer" : "params"; }

static int compute_rows(const zt_config *cfg, const zt_memplan_opts *o, row *rows, int *nrows) {
    static const int combos[][2] = {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 0}, {3, 1}, {3, 2}};
    int n = 0;
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; ++i) {
        row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        r->stage = combos[i][0];
        r->offload = combos[i][1];
        zt_config *c = zt_config_dup(cfg);
        zt_status st;
        char sv[8];
        snprintf(sv, sizeof sv, "%d", r->stage);
        r->ok = c && zt_config_set(c, "zero_optimization.stage", sv, ZT_SRC_DERIVED, &st) == ZT_OK &&
                zt_config_set(c, "offload", offload_name(r->offload), ZT_SRC_DERIVED, &st) == ZT_OK &&
                zt_memplan_compute(c, o, &r->p, &st) == ZT_OK;
        zt_config_free(c);
        if (r->ok)
            r->has_ds = zt_memplan_deepspeed(r->stage, r->offload, (double)r->p.num_params,
                                             (double)r->p.largest_tensor, r->p.world,
                                             r->p.ranks_per_node, &r->ds_gpu, &r->ds_cpu);
    }
    *nrows = n;
    return ZT_OK;
}

/* Model-state bytes of a plan, per place. */
static void states_by_place(const zt_memplan *p, uint64_t out[ZT_MP_NPLACES]) {
    for (int pl = 0; pl < ZT_MP_NPLACES; ++pl)
        out[pl] = p->cat[pl][ZT_MEM_PARAMS] + p->cat[pl][ZT_MEM_GRADS] + p->cat[pl][ZT_MEM_OPTIMIZER];
}

static void fmtb(double b, char *buf, size_t n) {
    if (b < 0) snprintf(buf, n, "-");
    else zt_memplan_fmt_bytes(b, buf, n);
}

/* ------------------------------------------------------------ output */

static const char *precision_name(const zt_config *c) {
    return c->bf16_enabled ? "bf16" : c->fp16_enabled ? "fp16" : "fp32";
}

#define SLURM_COUNT_MAX ((1L << 24) - 1)

/* The most tasks any node of the allocation runs: SLURM_NTASKS_PER_NODE
 * (an integer, when --ntasks-per-node was given) or SLURM_TASKS_PER_NODE
 * ("2(x3),1": counts with repetitions); 0 if neither is set, ZT_EINVAL
 * naming the variable for a value of neither form. */
static int slurm_ranks_per_node(const char **from, int *out, zt_status *st) {
    long per;
    *out = 0;
    ZT_TRY(zt_env_int("SLURM_NTASKS_PER_NODE", 1, SLURM_COUNT_MAX, 0, &per, st));
    if (per > 0) { *from = "SLURM_NTASKS_PER_NODE"; *out = (int)per; return ZT_OK; }
    const char *v = getenv("SLURM_TASKS_PER_NODE");
    char *end;
    if (!v || !*v) return ZT_OK;
    long most = 0;
    const char *q = v;
    while (*q) {
        long n = strtol(q, &end, 10);
        if (end == q || !isdigit((unsigned char)*q) || n < 1 || n > SLURM_COUNT_MAX) goto bad;
        q = end;
        if (*q == '(') {   /* "(xK)" */
            if (q[1] != 'x' || !isdigit((unsigned char)q[2])) goto bad;
            long k = strtol(q + 2, &end, 10);
            if (end == q + 2 || k < 1 || *end != ')') goto bad;
            q = end + 1;
        }
        if (n > most) most = n;
        if (*q == ',' && q[1]) ++q;
        else if (*q) goto bad;
    }
    *from = "SLURM_TASKS_PER_NODE";
    *out = (int)most;
    return ZT_OK;
bad:
    return zt_fail(st, ZT_EINVAL, "SLURM_TASKS_PER_NODE='%s': expected task counts per node such as 2(x3),1 "
                   "(each from 1 to %ld)", v, SLURM_COUNT_MAX);
}

/* Slurm's task count for the job (or step): SLURM_NTASKS, else SLURM_NPROCS
 * (0: neither set). */
static int slurm_ntasks(const char **from, int *out, zt_status *st) {
    const char *names[] = {"SLURM_NTASKS", "SLURM_NPROCS"};
    *out = 0;
    for (int i = 0; i < 2; ++i) {
        long n;
        ZT_TRY(zt_env_int(names[i], 1, SLURM_COUNT_MAX, 0, &n, st));
        if (n > 0) { *from = names[i]; *out = (int)n; return ZT_OK; }
    }
    return ZT_OK;
}

/* ---- the text report, one section after the other (print_text) */

/* The model, the run's shape, sequence parallelism, the LM head's chunks; where the shape came from and
 * the automatic micro batch. */
static void print_run(const zt_config *c, const zt_memplan *p, const char *auto_why, const char *hf_arch,
                      const char *shape_from) {
    const zt_model_config *mc = &c->model;
    char what[96], llama[320] = "";
    snprintf(what, sizeof what, "%s%s%s%s", mc->arch, hf_arch ? " (" : "", hf_arch ? hf_arch : "",
             hf_arch ? ")" : "");
    zt_arch_of(mc)->summary(mc, ZT_ARCH_SUM_ESTIMATE, llama, sizeof llama);
    char active[96] = "";
    if (p->active_params != p->num_params)
        snprintf(active, sizeof active, ", %llu active per token (%.3g B)",
                 (unsigned long long)p->active_params, (double)p->active_params / 1e9);
    printf("model: %s, %llu parameters (Psi; %.3g B)%s: %d layers, %d heads%s, %d wide, context %d, "
           "training length %d, vocab %d; largest unit %llu, largest layer %llu\n", what,
           (unsigned long long)p->num_params, (double)p->num_params / 1e9, active, mc->n_layer, mc->n_head,
           llama, mc->n_embd, mc->context, c->seq_len, mc->vocab, (unsigned long long)p->largest_unit,
           (unsigned long long)p->largest_tensor);
    printf("run: %d rank%s (%d per node), ZeRO stage %d, shard group %d, %s, micro-batch %d x "
           "accumulation %d (batch %d), eval batch %d%s, activation checkpointing %s, offload "
           "optimizer %s / params %s, target %s\n",
           p->world, p->world > 1 ? "s" : "", p->ranks_per_node, p->stage, p->shard_group,
           precision_name(c), p->micro_batch, p->grad_accum, c->train_batch_size, p->eval_batch,
           p->with_eval ? "" : " (no eval data)", c->act_ckpt, c->offload_optimizer, c->offload_param,
           p->gpu ? "gpu" : "cpu");
    if (p->seq_parallel > 1) {
        char lg[32], aa[32];
        fmtb((double)p->logits_bytes, lg, sizeof lg);
        fmtb((double)p->alltoall_bytes, aa, sizeof aa);
        printf("sequence parallel: %d ranks share each sample (data parallel %d), %d of its %d tokens "
               "per rank; logits per rank %s (%s, in activations); all-to-all per step per rank "
               "%s (docs/long-context.md)\n", p->seq_parallel, p->world / p->seq_parallel,
               c->seq_len / p->seq_parallel, c->seq_len, lg, p->logits_elem == 2 ? "bf16" : "fp32",
               aa);
    }
    if (p->offload_optimizer || p->offload_param) {   /* docs/memory.md, "Offload traffic" */
        char up[32], down[32], mu[32], uu[32];
        fmtb((double)p->offload_h2d_bytes, up, sizeof up);
        fmtb((double)p->offload_d2h_bytes, down, sizeof down);
        fmtb((double)p->offload_micro_h2d, mu, sizeof mu);
        fmtb((double)p->offload_update_h2d, uu, sizeof uu);
        if (!p->gpu)
            printf("offload traffic: none (a CPU target: the offloaded state is host memory like the rest)\n");
        else
            printf("offload traffic: %s host->device, %s device->host a step per rank (up: %s a micro-step "
                   "x accumulation %d%s + %s of the update; down: the fp32 gradients for the host's AdamW, "
                   "once a step; bytes, not a time: the bus is the site's)\n", up, down, mu, p->grad_accum,
                   !p->offload_param ? ""
                   : p->ckpt_k ? ", the gathers' uploads: forward, backward and its recomputes"
                               : ", the gathers' uploads: forward and backward", uu);
    }
    if (p->expert_parallel > 1) {   /* docs/moe.md, "Expert parallelism" */
        const zt_model_config *m = &c->model;
        const double row = (2.0 * m->n_embd + 3.0 * m->moe_intermediate) * 4;
        char w[32], b[32];
        fmtb((double)p->ep_rows_worst * row, w, sizeof w);
        fmtb((double)p->ep_rows_balanced * row, b, sizeof b);
        printf("expert parallel: groups of %d ranks, %d of the %d experts per rank; routed rows a "
               "rank's experts receive per MoE layer and micro batch: %llu at the worst-case routing "
               "(planned: %s of activations a layer), %llu at a balanced one (%s) (docs/moe.md)\n",
               p->expert_parallel, m->n_experts / p->expert_parallel, m->n_experts,
               (unsigned long long)p->ep_rows_worst, w, (unsigned long long)p->ep_rows_balanced, b);
        /* each rank stores its experts alone (shard.h): the model states
         * below are of its rank_params, not of Psi */
        const int eg = (p->stage == 0 ? p->world : p->shard_group) / p->expert_parallel;
        printf("expert parallel storage: %llu of the %llu parameters are experts'; a rank stores "
               "its %d experts' %llu and the other %llu: %llu parameters, %s %d rank%s with the same "
               "experts\n", (unsigned long long)p->expert_params, (unsigned long long)p->num_params,
               m->n_experts / p->expert_parallel,
               (unsigned long long)(p->expert_params / (uint64_t)p->expert_parallel),
               (unsigned long long)(p->num_params - p->expert_params),
               (unsigned long long)p->rank_params,
               p->stage == 0 ? "its experts replicated on the" : "its experts then sharded over the",
               eg, eg > 1 ? "s" : "");
    }
    {   /* the LM head's chunk (docs/memory.md, "The LM head in chunks") */
        char lg[32], fl[32];
        fmtb((double)p->logits_bytes, lg, sizeof lg);
        fmtb((double)p->full_logits_bytes, fl, sizeof fl);
        const long rows = (long)p->micro_batch * (c->seq_len / p->seq_parallel);
        printf("LM head: the %ld rows of a micro batch in %ld chunk%s of %ld, %s of %s logits per "
               "rank (in activations; all rows at once: %s; ztrain.classifier_chunk_rows)\n", rows,
               (rows + p->chunk_rows - 1) / p->chunk_rows, rows > p->chunk_rows ? "s" : "",
               p->chunk_rows, lg, p->logits_elem == 2 ? "bf16" : "fp32", fl);
    }
    if (shape_from[0]) printf("  (%s)\n", shape_from);
    if (auto_why && *auto_why) printf("train_micro_batch_size_per_gpu=auto: %s\n", auto_why);
}

/* The model states per rank next to the ZeRO paper's formula (a run without LoRA). */
static void print_model_states(const zt_memplan *p) {
    char a[32], f[32];
    double psi = (double)p->num_params, N = p->shard_group;
    printf("\nmodel states per rank (Psi = %llu, N = %d): what the engine keeps, next to the ZeRO "
           "paper's formula\n", (unsigned long long)p->num_params, p->shard_group);
    /* the paper: 2-byte params and grads when mixed; the engine keeps the
     * gradients in fp32 in every precision */
    double pb = p->mixed ? 2 : 4;
    double fp = p->stage < 3 ? pb * psi : pb * psi / N;
    double fg = p->stage < 2 ? pb * psi : pb * psi / N;
    double fo = (p->mixed ? 12 : 8) * (p->stage == 0 ? psi : psi / N);
    const char *tp = p->stage < 3 ? (p->mixed ? "2 Psi" : "4 Psi") : (p->mixed ? "2 Psi/N" : "4 Psi/N");
    const char *tg = p->stage < 2 ? (p->mixed ? "2 Psi" : "4 Psi") : (p->mixed ? "2 Psi/N" : "4 Psi/N");
    const char *eg = p->stage < 2 ? "4 Psi" : "4 Psi/N";
    const char *to = p->stage == 0 ? (p->mixed ? "12 Psi" : "8 Psi") : (p->mixed ? "12 Psi/N" : "8 Psi/N");
    char off[64] = "";
    if (p->offloaded[ZT_MEM_OPTIMIZER]) {
        fmtb((double)p->offloaded[ZT_MEM_OPTIMIZER], a, sizeof a);
        snprintf(off, sizeof off, "  (offloaded: %s in host memory)", a);
    }
    char offp[96] = "";
    if (p->offloaded[ZT_MEM_PARAMS]) {
        fmtb((double)p->offloaded[ZT_MEM_PARAMS], a, sizeof a);
        snprintf(offp, sizeof offp, "  (%soffloaded: %s in host memory)", p->mixed ? "16-bit; " : "", a);
    }
    struct { const char *name; uint64_t v; const char *eterm; double fv; const char *term;
             const char *note; } ms[3] = {
        {"params", p->params_bytes, tp, fp, tp,
         offp[0] ? offp : p->mixed ? "  (16-bit; no fp32 parameter block)" : ""},
        {"grads", p->grads_bytes, eg, fg, tg, p->mixed ? "  (fp32: accumulated and reduced in fp32)" : ""},
        {"optimizer", p->optim_bytes, to, fo, to, off}};
    for (int i = 0; i < 3; ++i) {
        fmtb((double)ms[i].v, a, sizeof a);
        fmtb(ms[i].fv, f, sizeof f);
        printf("  %-10s %12s   %-10s | ZeRO %-9s = %12s%s\n", ms[i].name, a, ms[i].eterm,
               ms[i].term, f, ms[i].note);
    }
    uint64_t tot = p->params_bytes + p->grads_bytes + p->optim_bytes;
    fmtb((double)tot, a, sizeof a);
    fmtb(p->formula_bytes, f, sizeof f);
    static const char *const ftext[2][4] = {
        {"16 Psi", "8 Psi + 8 Psi/N", "4 Psi + 12 Psi/N", "16 Psi/N"},
        {"16 Psi", "4 Psi + 12 Psi/N", "2 Psi + 14 Psi/N", "16 Psi/N"}};
    static const char *const etext[2][4] = {
        {"16 Psi", "8 Psi + 8 Psi/N", "4 Psi + 12 Psi/N", "16 Psi/N"},
        {"18 Psi", "6 Psi + 12 Psi/N", "2 Psi + 16 Psi/N", "18 Psi/N"}};
    printf("  %-10s %12s   engine %s | ZeRO formula %s = %s (engine %+.3f%%)\n", "total", a,
           etext[p->mixed][p->stage], ftext[p->mixed][p->stage], f,
           p->formula_bytes > 0 ? 100.0 * ((double)tot - p->formula_bytes) / p->formula_bytes : 0.0);
    if (p->rank_params != p->num_params && p->stage < 3)
        printf("  (expert parallel: a rank's full blocks hold its %llu parameters, not Psi: read the "
               "engine's Psi as that; the ZeRO formula is without expert parallelism)\n",
               (unsigned long long)p->rank_params);
    if (p->mixed)
        printf("  (the formula counts 2-byte gradients; the engine keeps them in fp32, 2 bytes more "
               "per gradient element, so that accumulation and reduction never round to 16 bits)\n");
}

/* LoRA (docs/lora.md): the rows of a frozen base + adapters, in place of the ZeRO formula. */
static void print_lora(const zt_config *c, const zt_memplan *p) {
    const zt_model_config *mc = &c->model;
    char a[32];
    char tl[200] = "";
    zt_lora lo;
    if (zt_lora_plan(mc, &lo, NULL) == ZT_OK) zt_lora_target_list(&lo, tl, sizeof tl);
    printf("\nLoRA r=%d, alpha %g%s (scale %g), targets %s: %llu adapter parameters (%.3f%% of "
           "Psi) on a frozen base\n", p->lora_r, mc->lora_alpha, mc->lora_rslora ? ", rslora" : "",
           (double)lo.scale, tl, (unsigned long long)p->lora_params,
           100.0 * (double)p->lora_params / (double)(p->num_params ? p->num_params : 1));
    fmtb((double)p->lora_base_bytes, a, sizeof a);
    printf("  %-22s %12s   (%s, %s; no gradients, no optimizer state)\n", "frozen base", a,
           mc->lora_base[0] ? (!strcmp(mc->lora_base, "nf4") ? "NF4 linear weights + absmax, the rest "
                                              "in the compute dtype"
                                            : "NF4 linear weights + double-quantized absmax, the rest "
                                              "in the compute dtype")
           : p->mixed ? "16-bit" : "fp32", p->stage == 3 ? "1/N per rank, gathered per unit"
                                                      : "replicated on every rank");
    fmtb((double)p->lora_adapter_bytes, a, sizeof a);
    printf("  %-22s %12s   (%s)\n", "adapters", a, p->stage == 3 ? "1/N" : "replicated");
    fmtb((double)p->grads_bytes, a, sizeof a);
    printf("  %-22s %12s   (fp32, %s)\n", "adapter gradients", a, p->stage >= 2 ? "1/N" : "full");
    fmtb((double)p->optim_bytes, a, sizeof a);
    printf("  %-22s %12s   (AdamW moments%s, %s)\n", "adapter optimizer", a,
           p->mixed ? " + fp32 master" : "", p->stage >= 1 ? "1/N" : "full");
    fmtb((double)p->cat[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST][ZT_MEM_ACTIVATIONS], a, sizeof a);
    printf("  %-22s %12s   (with the adapters' matmul scratch)\n", "activations", a);
}

/* The predicted peak per rank by category (device, host, offloaded), the kernels' workspace, the peak
 * and its phase, the pinned bytes. */
static void print_categories(const zt_config *c, const zt_memplan *p) {
    char a[32], b[32];
    printf("\npredicted peak per rank, by category (each at its own peak%s):\n",
           p->offload_optimizer ? "; offloaded: the part of host that is offloaded state" : "");
    printf("  %-16s %14s %14s%s\n", "category", "device", "host",
           p->offload_optimizer ? "     offloaded" : "");
    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
        fmtb(p->gpu ? (double)p->cat[ZT_MP_DEVICE][t] : -1, a, sizeof a);
        fmtb((double)p->cat[ZT_MP_HOST][t], b, sizeof b);
        char o[32] = "";
        if (p->offload_optimizer) fmtb(p->offloaded[t] ? (double)p->offloaded[t] : -1, o, sizeof o);
        printf("  %-16s %14s %14s%s%14s\n", zt_mem_tag_name(t), a, b, o[0] ? " " : "", o);
    }
    if (p->kernel_ws_bytes) {   /* cuda: cuBLAS workspace + kernel scratch (cuda_workspace.h) */
        fmtb((double)p->kernel_ws_bytes, a, sizeof a);
        printf("  %-16s %14s %14s   (cuda backend: cuBLAS workspace + kernel scratch)\n",
               "kernel-workspace", a, "-");
        /* which attention path its scratch counts (memplan.h att_path) */
        if (p->att_path) printf("  %-16s %14s %14s   (attention in it: %s)\n", "  attention", "", "", p->att_path);
    }
    fmtb(p->gpu ? (double)p->peak[ZT_MP_DEVICE] : -1, a, sizeof a);
    fmtb((double)p->peak[ZT_MP_HOST], b, sizeof b);
    printf("  %-16s %14s %14s   (peak during %s)\n", "peak", a, b,
           p->peak_phase[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST]);
    if (c->pin_optimizer || c->pin_param) {
        fmtb((double)p->pinned_bytes, a, sizeof a);
        printf("  %-16s %14s %14s   (pin_memory: page-locked host memory%s)\n", "pinned", "", a,
               !p->gpu ? "; none on a CPU target"
                       : p->pinned_staging ? ", with the asynchronous copies' staging" : "");
    }
}

/* The end of `ztrain train`: what a default run does, then each optional step's peak on its own. */
static void print_run_end(const zt_memplan *p) {
    char a[32], b[32];
    fmtb(p->gpu ? (double)p->end_peak[ZT_MP_DEVICE] : -1, a, sizeof a);
    fmtb((double)p->end_peak[ZT_MP_HOST], b, sizeof b);
    /* sequence parallel: the CLI skips its closing text sample (no window planned) */
    const int sampled = p->sample_window > 0;
    const char *end_what;
    if (p->export_default) end_what = sampled ? "llm.c weights file, then the text sample" : "llm.c weights file";
    else if (sampled) end_what = "the text sample; no weights file, they stay in the checkpoint";
    else end_what = "no weights file, they stay in the checkpoint; no text sample under sequence or expert parallelism";
    printf("  %-16s %14s %14s   (a default `ztrain train` run's end: %s)\n", "end of run", a, b, end_what);
    fmtb(p->gpu ? (double)p->sample_peak[ZT_MP_DEVICE] : -1, a, sizeof a);
    fmtb((double)p->sample_peak[ZT_MP_HOST], b, sizeof b);
    if (sampled)
        printf("  %-16s %14s %14s   (if the text sample runs: a [1, %d] forward, the default 256 "
               "tokens; --sample-tokens 0 skips it)\n", "  with sample", a, b, p->sample_window);
    else
        printf("  %-16s %14s %14s   (no text sample: a sequence- or expert-parallel run skips it)\n", "  with sample", a,
               b);
    fmtb(p->gpu ? (double)p->export_peak[ZT_MP_DEVICE] : -1, a, sizeof a);
    fmtb((double)p->export_peak[ZT_MP_HOST], b, sizeof b);
    printf("  %-16s %14s %14s   (if an llm.c weights file were written: %s)\n", "  with export", a, b,
           p->export_default ? "done by default (model.bin)"
                             : "not done by this run: GPT-2 without LoRA only");
}

/* The end of `ztrain train` against the limit training fits: a step that
 * does not fit is skipped by the run (run/run.c's check_end). */
static void print_end_fit(const zt_memplan *p, uint64_t limit) {
    const int pl = p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST;
    char a[32], b[32];
    fmtb((double)p->end_peak[pl], a, sizeof a);
    fmtb((double)limit, b, sizeof b);
    if (p->end_peak[pl] <= limit) {
        printf("end of run fits too: %s <= %s\n", a, b);
        return;
    }
    const int ex = p->export_default && p->export_peak[pl] > limit;
    const int sa = p->sample_window > 0 && p->sample_peak[pl] > limit;
    printf("end of run does not fit: %s > %s; `ztrain train` skips %s%s%s\n", a, b,
           ex ? "the llm.c weights file (the weights stay in the final checkpoint: ztrain ckpt export "
                "DIR --output FILE writes it)" : "",
           ex && sa ? " and " : "",
           sa ? "the text sample (ztrain sample --checkpoint DIR on a larger device)" : "");
}

/* The peak per node and per rank, per GPU process with the CUDA context, and whether it fits the
 * limit (with the changes that would). */
static void print_peak(const zt_memplan *p, uint64_t cuda_ctx, uint64_t limit, const char *limit_what,
                       const char *sug, int nsug, const char *hint) {
    char a[32], b[32], f[32];
    fmtb((double)p->peak[ZT_MP_HOST] * p->ranks_per_node, b, sizeof b);
    printf("  host memory per node (%d rank%s): %s\n", p->ranks_per_node,
           p->ranks_per_node > 1 ? "s" : "", b);
    fmtb((double)p->peak_bytes, a, sizeof a);
    printf("peak_bytes per rank: %llu (%s, %s)\n", (unsigned long long)p->peak_bytes, a,
           p->gpu ? "device" : "host");
    if (p->gpu) {
        fmtb((double)(p->peak_bytes + cuda_ctx), b, sizeof b);
        fmtb((double)cuda_ctx, f, sizeof f);
        printf("per GPU process (what nvidia-smi shows): about %s with the CUDA context and libraries "
               "(%s; --cuda-context)\n", b, f);
    }
    if (limit) {
        fmtb((double)limit, b, sizeof b);
        if (p->peak_bytes <= limit) {
            printf("fits: %s <= %s (%s)\n", a, b, limit_what);
            print_end_fit(p, limit);
        }
        else if (nsug > 0)
            printf("does not fit: %s > %s (%s); changes that fit: %s\n", a, b, limit_what, sug);
        else
            printf("does not fit: %s > %s (%s); no change of stage, micro batch or activation "
                   "checkpointing fits\n", a, b, limit_what);
    }
    if (hint && *hint) printf("speed: %s\n", hint);
}

/* One row per ZeRO stage / offload option: model states and peak per rank, DeepSpeed's estimator, the
 * fit. */
static void print_options(const row *rows, int nrows, uint64_t limit) {
    printf("\noptions (model states per rank, and the total peak per rank with this run's "
           "activations;\n DeepSpeed's estimator counts model states only: GPU per rank, CPU per node):\n");
    printf("  %-5s %-9s | %12s %12s | %12s %12s | %13s %13s%s\n", "stage", "offload", "states dev",
           "states host", "peak dev", "peak host", "DeepSpeed GPU", "DeepSpeed CPU", limit ? " | fits" : "");
    for (int i = 0; i < nrows; ++i) {
        const row *r = &rows[i];
        if (!r->ok) continue;
        uint64_t sp[ZT_MP_NPLACES];
        states_by_place(&r->p, sp);
        char s1[32], s2[32], p1[32], p2[32], d1[32], d2[32];
        fmtb(r->p.gpu ? (double)sp[ZT_MP_DEVICE] : -1, s1, sizeof s1);
        fmtb((double)sp[ZT_MP_HOST], s2, sizeof s2);
        fmtb(r->p.gpu ? (double)r->p.peak[ZT_MP_DEVICE] : -1, p1, sizeof p1);
        fmtb((double)r->p.peak[ZT_MP_HOST], p2, sizeof p2);
        fmtb(r->has_ds ? r->ds_gpu : -1, d1, sizeof d1);
        fmtb(r->has_ds ? r->ds_cpu : -1, d2, sizeof d2);
        printf("  %-5d %-9s | %12s %12s | %12s %12s | %13s %13s%s\n", r->stage,
               offload_name(r->offload), s1, s2, p1, p2, d1, d2,
               limit ? (r->p.peak_bytes <= limit ? " | yes" : " | no") : "");
    }
}

static void print_text(const zt_config *c, const zt_memplan *p, const row *rows, int nrows,
                       uint64_t cuda_ctx, uint64_t limit, const char *limit_what, const char *sug, int nsug,
                       const char *hint, const char *auto_why, const char *hf_arch,
                       const char *shape_from) {
    print_run(c, p, auto_why, hf_arch, shape_from);
    if (p->lora_r) print_lora(c, p);
    else print_model_states(p);
    print_categories(c, p);
    print_run_end(p);
    print_peak(p, cuda_ctx, limit, limit_what, sug, nsug, hint);
    print_options(rows, nrows, limit);
}

static void json_cats(const zt_memplan *p, int pl) {
    printf("{");
    for (int t = 0; t < ZT_MEM_NTAGS; ++t)
        printf("%s\"%s\": %llu", t ? ", " : "", zt_mem_tag_name(t), (unsigned long long)p->cat[pl][t]);
    printf("}");
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void print_json(const zt_config *c, const zt_memplan *p, const row *rows, int nrows,
                       uint64_t cuda_ctx, uint64_t limit, const char *sug, const char *hint,
                       const char *auto_why) {
    const zt_model_config *mc = &c->model;
    printf("{\n  \"model\": {\"arch\": \"%s\", \"n_layer\": %d, \"n_head\": %d, \"n_embd\": %d, \"context\": %d, "
           "\"vocab\": %d, \"num_params\": %llu, \"active_params\": %llu, \"largest_unit_params\": %llu, "
           "\"largest_layer_params\": %llu},\n", mc->arch, mc->n_layer, mc->n_head, mc->n_embd, mc->context,
           mc->vocab, (unsigned long long)p->num_params, (unsigned long long)p->active_params,
           (unsigned long long)p->largest_unit,
           (unsigned long long)p->largest_tensor);
    printf("  \"run\": {\"world_size\": %d, \"ranks_per_node\": %d, \"shard_group\": %d, "
           "\"stage\": %d, \"precision\": \"%s\", \"train_batch_size\": %d, \"micro_batch\": %d, "
           "\"grad_accum\": %d, \"eval_batch\": %d, \"with_eval\": %s, \"with_data\": %s, "
           "\"activation_checkpointing\": \"%s\", \"offload_optimizer\": \"%s\", "
           "\"offload_param\": \"%s\", \"target\": \"%s\", \"sequence_parallel_size\": %d, "
           "\"logits_bytes\": %llu, \"full_logits_bytes\": %llu, \"classifier_chunk_rows\": %ld, "
           "\"alltoall_bytes_per_step\": %llu, \"expert_parallel_size\": %d, "
           "\"ep_recv_rows_worst\": %llu, \"ep_recv_rows_balanced\": %llu, "
           "\"expert_params\": %llu, \"rank_params\": %llu, \"offload_h2d_bytes_per_step\": %llu, "
           "\"offload_d2h_bytes_per_step\": %llu, \"offload_h2d_bytes_per_micro_step\": %llu, "
           "\"offload_update_h2d_bytes\": %llu, \"offload_update_d2h_bytes\": %llu},\n",
           p->world, p->ranks_per_node, p->shard_group, p->stage, precision_name(c),
           c->train_batch_size, p->micro_batch, p->grad_accum, p->eval_batch,
           p->with_eval ? "true" : "false", p->with_data ? "true" : "false", c->act_ckpt,
           c->offload_optimizer, c->offload_param, p->gpu ? "gpu" : "cpu", p->seq_parallel,
           (unsigned long long)p->logits_bytes, (unsigned long long)p->full_logits_bytes,
           p->chunk_rows, (unsigned long long)p->alltoall_bytes, p->expert_parallel,
           (unsigned long long)p->ep_rows_worst, (unsigned long long)p->ep_rows_balanced,
           (unsigned long long)p->expert_params, (unsigned long long)p->rank_params,
           (unsigned long long)p->offload_h2d_bytes, (unsigned long long)p->offload_d2h_bytes,
           (unsigned long long)p->offload_micro_h2d, (unsigned long long)p->offload_update_h2d,
           (unsigned long long)p->offload_update_d2h);
    if (p->lora_r)
        printf("  \"lora\": {\"r\": %d, \"adapter_params\": %llu, \"frozen_base_bytes\": %llu, "
               "\"adapter_bytes\": %llu, \"adapter_grads_bytes\": %llu, "
               "\"adapter_optimizer_bytes\": %llu},\n", p->lora_r,
               (unsigned long long)p->lora_params, (unsigned long long)p->lora_base_bytes,
               (unsigned long long)p->lora_adapter_bytes, (unsigned long long)p->grads_bytes,
               (unsigned long long)p->optim_bytes);
    printf("  \"model_states\": {\"params_bytes\": %llu, \"grads_bytes\": %llu, "
           "\"optimizer_bytes\": %llu, \"total_bytes\": %llu, \"formula_bytes\": %.0f, "
           "\"engine_formula_bytes\": %.0f, \"offloaded_bytes\": %llu, "
           "\"offloaded_params_bytes\": %llu, \"pinned_bytes\": %llu, \"pinned_staging\": %llu},\n",
           (unsigned long long)p->params_bytes, (unsigned long long)p->grads_bytes,
           (unsigned long long)p->optim_bytes,
           (unsigned long long)(p->params_bytes + p->grads_bytes + p->optim_bytes), p->formula_bytes,
           p->engine_formula_bytes, (unsigned long long)p->offloaded[ZT_MEM_OPTIMIZER],
           (unsigned long long)p->offloaded[ZT_MEM_PARAMS], (unsigned long long)p->pinned_bytes,
           (unsigned long long)p->pinned_staging);
    printf("  \"device\": {\"peak_bytes\": %llu, \"kernel_workspace_bytes\": %llu, ",
           (unsigned long long)p->peak[ZT_MP_DEVICE], (unsigned long long)p->kernel_ws_bytes);
    if (p->att_path) {   /* the attention path the kernel scratch counts */
        printf("\"attention_path\": ");
        json_str(p->att_path);
        printf(", ");
    }
    printf("\"categories\": ");
    json_cats(p, ZT_MP_DEVICE);
    printf("},\n  \"host\": {\"peak_bytes\": %llu, \"per_node_bytes\": %llu, \"categories\": ",
           (unsigned long long)p->peak[ZT_MP_HOST],
           (unsigned long long)p->peak[ZT_MP_HOST] * (unsigned long long)p->ranks_per_node);
    json_cats(p, ZT_MP_HOST);
    printf(", \"offloaded_categories\": {");
    for (int t = 0; t < ZT_MEM_NTAGS; ++t)
        printf("%s\"%s\": %llu", t ? ", " : "", zt_mem_tag_name(t), (unsigned long long)p->offloaded[t]);
    printf("}");
    printf("},\n  \"peak_bytes\": %llu,\n  \"peak_phase\": \"%s\",\n", (unsigned long long)p->peak_bytes,
           p->peak_phase[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST]);
    printf("  \"end_of_run_peak_bytes\": %llu,\n",
           (unsigned long long)p->end_peak[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST]);
    printf("  \"sample_peak_bytes\": %llu,\n  \"export_peak_bytes\": %llu,\n"
           "  \"export_by_default\": %s,\n",
           (unsigned long long)p->sample_peak[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST],
           (unsigned long long)p->export_peak[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST],
           p->export_default ? "true" : "false");
    if (auto_why && *auto_why) {
        printf("  \"auto_micro_batch\": ");
        json_str(auto_why);
        printf(",\n");
    }
    if (p->gpu)
        printf("  \"cuda_context_bytes\": %llu,\n  \"process_peak_bytes\": %llu,\n",
               (unsigned long long)cuda_ctx, (unsigned long long)(p->peak_bytes + cuda_ctx));
    if (limit) {
        printf("  \"limit_bytes\": %llu,\n  \"fits\": %s,\n  \"end_of_run_fits\": %s,\n  \"suggestions\": ",
               (unsigned long long)limit, p->peak_bytes <= limit ? "true" : "false",
               p->end_peak[p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST] <= limit ? "true" : "false");
        json_str(sug ? sug : "");
        printf(",\n");
    }
    printf("  \"speed_hint\": ");
    json_str(hint ? hint : "");
    printf(",\n");
    printf("  \"options\": [");
    int first = 1;
    for (int i = 0; i < nrows; ++i) {
        const row *r = &rows[i];
        if (!r->ok) continue;
        uint64_t sp[ZT_MP_NPLACES];
        states_by_place(&r->p, sp);
        printf("%s\n    {\"stage\": %d, \"offload\": \"%s\", \"states_device_bytes\": %llu, "
               "\"states_host_bytes\": %llu, \"peak_device_bytes\": %llu, \"peak_host_bytes\": %llu, "
               "\"peak_bytes\": %llu", first ? "" : ",", r->stage, offload_name(r->offload),
               (unsigned long long)sp[ZT_MP_DEVICE], (unsigned long long)sp[ZT_MP_HOST],
               (unsigned long long)r->p.peak[ZT_MP_DEVICE], (unsigned long long)r->p.peak[ZT_MP_HOST],
               (unsigned long long)r->p.peak_bytes);
        if (r->has_ds) {
            printf(", \"deepspeed_gpu_bytes\": %.0f", r->ds_gpu);
            if (r->ds_cpu >= 0) printf(", \"deepspeed_cpu_node_bytes\": %.0f", r->ds_cpu);
        }
        if (limit) printf(", \"fits\": %s", r->p.peak_bytes <= limit ? "true" : "false");
        printf(", \"kernel_workspace_bytes\": %llu, \"categories\": ",   /* (the target's: device on
                                                                      * a GPU, else host) */
               (unsigned long long)r->p.kernel_ws_bytes);
        json_cats(&r->p, r->p.gpu ? ZT_MP_DEVICE : ZT_MP_HOST);
        printf("}");
        first = 0;
    }
    printf("\n  ]\n}\n");
}

/* ------------------------------------------------------------ --plot */

/* One stacked bar per plan (this configuration, then each option row): the
 * predicted bytes per category on the target (device on a GPU, else host;
 * each category at its own peak, as the table prints them, with the cuda
 * kernels' workspace on a device), a tick at the plan's peak, and the limit
 * as a dashed line.  Every bar segment, peak tick and the limit carry
 * data-bytes; the plot area its mapping (cli/svg.h). */
static int write_plot(const char *path, const zt_memplan *p, const row *rows, int nrows, uint64_t limit,
                      const char *limit_what, zt_status *st) {
    const zt_memplan *plans[9];
    char names[9][2][32];
    int nb = 0;
    plans[nb] = p;
    snprintf(names[nb][0], sizeof names[0][0], "this run");
    snprintf(names[nb++][1], sizeof names[0][1], "(stage %d)", p->stage);
    for (int i = 0; i < nrows && nb < 9; ++i)
        if (rows[i].ok) {
            plans[nb] = &rows[i].p;
            snprintf(names[nb][0], sizeof names[0][0], "stage %d", rows[i].stage);
            snprintf(names[nb++][1], sizeof names[0][1], "%s",
                     rows[i].offload == 0 ? "no offload" : rows[i].offload == 1 ? "optimizer offload"
                                                                                  : "param offload");
        }
    const int pl = p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST;
    enum { NSEG = ZT_MEM_NTAGS + 1 };
    double top = (double)limit;
    for (int b = 0; b < nb; ++b) {
        double sum = p->gpu ? (double)plans[b]->kernel_ws_bytes : 0;
        for (int t = 0; t < ZT_MEM_NTAGS; ++t) sum += (double)plans[b]->cat[pl][t];
        top = fmax(top, fmax(sum, (double)plans[b]->peak[pl]));
    }
    double u = 1, y0, dy;
    int ky;
    while (u * 1024 <= top) u *= 1024;
    svg_ticks(0, top / u, 6, &y0, &dy, &ky);
    const double ymax = (y0 + ky * dy) * u;
    const int X = 96, Y = 40, BW = 96, W = nb * BW, H = 340, LW = 260, LX = X + W + 80;
    const int width = X + W + LW, height = Y + H + 80;
    FILE *f = fopen(path, "w");
    if (!f) return zt_fail(st, ZT_EIO, "%s: cannot write the plot: %s", path, strerror(errno));
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", width, height, width, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", width, height);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">predicted peak per rank by category (%s memory, "
               "each category at its own peak)</text>\n", X, p->gpu ? "device" : "host");
    for (int t = 0; t <= ky; ++t) {
        double v = (y0 + t * dy) * u, y = Y + H - v / ymax * H;
        char lb[48];
        svg_label(v, 1, lb, sizeof lb);
        fprintf(f, "<line x1=\"%d\" y1=\"%.3f\" x2=\"%d\" y2=\"%.3f\" stroke=\"#e3e3e3\"/>"
                   "<text x=\"%d\" y=\"%.3f\" text-anchor=\"end\">%s</text>\n", X, y, X + W, y, X - 6, y + 4, lb);
    }
    fprintf(f, "<g class=\"plot\" data-x=\"%d\" data-y=\"%d\" data-w=\"%d\" data-h=\"%d\" data-ymin=\"0\" "
               "data-ymax=\"%.17g\">\n", X, Y, W, H, ymax);
    static const char *const seg_color[NSEG] = {"#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c",
                                                "#98df8a", "#9467bd", "#c5b0d5", "#8c564b"};
    for (int b = 0; b < nb; ++b) {
        const zt_memplan *q = plans[b];
        double base = 0;
        const int x = X + b * BW + 14, bw = BW - 28;
        for (int t = 0; t < NSEG; ++t) {
            const uint64_t v = t < ZT_MEM_NTAGS ? q->cat[pl][t] : p->gpu ? q->kernel_ws_bytes : 0;
            if (!v) continue;
            const double h = (double)v / ymax * H, y = Y + H - (base + (double)v) / ymax * H;
            fprintf(f, "<rect class=\"seg\" data-bar=\"%d\" data-cat=\"%s\" data-bytes=\"%llu\" x=\"%d\" "
                       "y=\"%.3f\" width=\"%d\" height=\"%.3f\" fill=\"%s\"><title>%s: %s %llu bytes</title></rect>\n",
                    b, t < ZT_MEM_NTAGS ? zt_mem_tag_name(t) : "kernel-workspace", (unsigned long long)v, x, y,
                    bw, h, seg_color[t % NSEG], names[b][0], t < ZT_MEM_NTAGS ? zt_mem_tag_name(t) : "kernel-workspace",
                    (unsigned long long)v);
            base += (double)v;
        }
        const double py = Y + H - (double)q->peak[pl] / ymax * H;
        fprintf(f, "<line class=\"peak\" data-bar=\"%d\" data-bytes=\"%llu\" x1=\"%d\" y1=\"%.3f\" x2=\"%d\" "
                   "y2=\"%.3f\" stroke=\"#000\" stroke-width=\"2\"/>\n", b, (unsigned long long)q->peak[pl],
                x - 6, py, x + bw + 6, py);
        for (int k = 0; k < 2; ++k) {
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\"%s>", x + bw / 2, Y + H + 16 + 13 * k,
                    b == 0 ? " font-weight=\"bold\"" : "");
            svg_text(f, names[b][k]);
            fprintf(f, "</text>\n");
        }
    }
    if (limit) {
        const double ly = Y + H - (double)limit / ymax * H;
        char lb[48];
        svg_label((double)limit, 1, lb, sizeof lb);
        fprintf(f, "<line class=\"limit\" data-bytes=\"%llu\" x1=\"%d\" y1=\"%.3f\" x2=\"%d\" y2=\"%.3f\" "
                   "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
                (unsigned long long)limit, X, ly, X + W, ly);
        fprintf(f, "<text x=\"%d\" y=\"%.3f\" fill=\"#d62728\">limit %s</text>\n", X + W + 4, ly + 4, lb);
    }
    fprintf(f, "</g>\n");
    int ly = Y;
    for (int t = NSEG - 1; t >= 0; --t) {
        if (t == ZT_MEM_NTAGS && !p->gpu) continue;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                LX, ly, seg_color[t], LX + 18, ly + 10,
                t < ZT_MEM_NTAGS ? zt_mem_tag_name(t) : "kernel-workspace");
        ly += 18;
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\" stroke-width=\"2\"/>"
               "<text x=\"%d\" y=\"%d\">peak (the plan's)</text>\n", LX, ly + 6, LX + 12, ly + 6,
            LX + 18, ly + 10);
    fprintf(f, "<text x=\"%d\" y=\"%d\">", X, Y + H + 56);
    if (limit) {
        fprintf(f, "dashed: the limit (");
        svg_text(f, limit_what);
        fprintf(f, ")");
    } else
        fprintf(f, "no limit given (--device-memory on a GPU target, or --memory-limit)");
    fprintf(f, "</text>\n</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return zt_fail(st, ZT_EIO, "%s: cannot write the plot", path);
    return ZT_OK;
}

/* ------------------------------------------------------------ the command */

static int parse_int_opt(const char *name, const char *v, int lo, int *out, zt_status *st) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || end == v || n < lo || n > 1 << 24) {
        snprintf(st->msg, sizeof st->msg, "--%s must be an integer >= %d, got '%s'", name, lo, v);
        st->code = ZT_EINVAL;
        return ZT_EINVAL;
    }
    *out = (int)n;
    return ZT_OK;
}

int cmd_estimate(int argc, char **argv) {
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { estimate_usage(); return ZT_EXIT_OK; }
    const char *config_path = getenv("ZTRAIN_CONFIG"), *model = NULL, *plot = NULL;
    int world = 0, rpn = 0, json = 0, target = ZT_MP_TARGET_AUTO;
    unsigned long long devmem = 0;
    unsigned long long cuda_ctx = ZT_MEMPLAN_CUDA_CONTEXT;
    zt_status st;
    memset(&st, 0, sizeof st);
    zt_config *cfg = zt_config_new();
    if (!cfg) { cli_error("out of memory"); return ZT_EXIT_FAIL; }
    int rc = ZT_OK;
    for (int i = 1; i < argc && rc == ZT_OK; ++i) {
        const char *a = argv[i], *v = NULL;
        int r;
        if ((r = cli_opt(argc, argv, &i, "config", &v))) { if (r < 0) goto missing; config_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "model", &v))) { if (r < 0) goto missing; model = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "plot", &v))) { if (r < 0) goto missing; plot = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "world-size", &v))) {
            if (r < 0) goto missing;
            rc = parse_int_opt("world-size", v, 1, &world, &st);
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "ranks-per-node", &v))) {
            if (r < 0) goto missing;
            rc = parse_int_opt("ranks-per-node", v, 1, &rpn, &st);
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "device-memory", &v))) {
            if (r < 0) goto missing;
            if (zt_parse_size(v, &devmem) != 0 || devmem == 0) {
                snprintf(st.msg, sizeof st.msg, "--device-memory must be a size such as 80G, got '%s'", v);
                rc = ZT_EINVAL;
            }
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "cuda-context", &v))) {
            if (r < 0) goto missing;
            if (zt_parse_size(v, &cuda_ctx) != 0) {
                snprintf(st.msg, sizeof st.msg, "--cuda-context must be a size such as 1G, got '%s'", v);
                rc = ZT_EINVAL;
            }
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "device", &v))) {
            if (r < 0) goto missing;
            if (!strcmp(v, "gpu") || !strcmp(v, "cuda")) target = ZT_MP_TARGET_GPU;
            else if (!strcmp(v, "cpu")) target = ZT_MP_TARGET_CPU;
            else {
                snprintf(st.msg, sizeof st.msg, "--device must be cpu or gpu, got '%s'", v);
                rc = ZT_EINVAL;
            }
            continue;
        }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        rc = cli_config_flag(cfg, argc, argv, &i, "estimate", &st);
        if (rc != ZT_OK) break;
        continue;
    missing:
        snprintf(st.msg, sizeof st.msg, "option '%s' needs a value", a);
        rc = ZT_EINVAL;
    }
    if (rc == ZT_OK && config_path) rc = zt_config_load_file(cfg, config_path, &st);
    if (rc == ZT_OK) rc = zt_config_load_env(cfg, &st);
    int hf_err = 0;
    if (rc == ZT_OK && (model || cfg->init_from[0])) {
        rc = zt_hf_read_config(model ? model : cfg->init_from, cfg, &st);
        hf_err = rc != ZT_OK;
    }
    /* Inside a Slurm job or step the shape defaults to Slurm's: its task
     * count and the most tasks on one node (host memory is per node). */
    const char *world_from = NULL, *rpn_from = NULL;
    /* where the run's shape came from when not given (under the "run:" line) */
    char shape_from[256] = "";
    size_t sl = 0;
    if (rc == ZT_OK && world < 1) rc = slurm_ntasks(&world_from, &world, &st);
    if (rc == ZT_OK && world_from)
        sl += (size_t)snprintf(shape_from + sl, sizeof shape_from - sl, "world size %d from %s", world,
                               world_from);
    if (rc == ZT_OK && rpn < 1) rc = slurm_ranks_per_node(&rpn_from, &rpn, &st);
    if (rc == ZT_OK && rpn_from)
        snprintf(shape_from + sl, sizeof shape_from - sl, "%s%d ranks per node from %s=%s",
                 sl ? ", " : "", rpn, rpn_from, getenv(rpn_from));
    if (rc == ZT_OK && world < 1) {
        snprintf(st.msg, sizeof st.msg, "--world-size N is required (the number of ranks; inside a "
                 "Slurm job it defaults to SLURM_NTASKS)");
        rc = ZT_EINVAL;
    }
    if (rc != ZT_OK) {
        cli_error("%s", st.msg);
        zt_config_free(cfg);
        return hf_err ? cli_exit_code(rc) : ZT_EXIT_USAGE;
    }
    const char *hf_arch = model || cfg->init_from[0] ? zt_hf_arch_name(model ? model : cfg->init_from) : NULL;
    if (rpn < 1) rpn = world < 8 ? world : 8;
    if (rpn > world) rpn = world;

    zt_memplan_opts o;
    zt_memplan_opts_init(&o, world);
    o.deferred_init = 1;   /* (ztrain train's: run.c, ZT_CTX_DEFER_INIT) */
    o.ranks_per_node = rpn;
    o.target = target;
    int gpu = target == ZT_MP_TARGET_AUTO ? !strcmp(cfg->backend, "cuda") : target == ZT_MP_TARGET_GPU;
    /* the limit a fit is checked against: one GPU's memory on a GPU target,
     * else ztrain.memory_limit; "auto" micro batch falls back to this host */
    uint64_t limit = 0;
    const char *limit_what = "";
    char limit_buf[200];
    if (gpu && devmem) {
        /* the run's check: free memory (the device less the CUDA context)
         * less the reserve (zt_memplan_device_limit) */
        const uint64_t reserve = zt_memplan_device_reserve("cuda", devmem);
        limit = zt_memplan_device_usable("cuda", devmem > cuda_ctx ? devmem - cuda_ctx : 0, devmem);
        char d[32], c[32], r[32];
        fmtb((double)devmem, d, sizeof d);
        fmtb((double)cuda_ctx, c, sizeof c);
        fmtb((double)reserve, r, sizeof r);
        snprintf(limit_buf, sizeof limit_buf,
                 "--device-memory %s less the CUDA context %s and the run's reserve %s", d, c, r);
        limit_what = limit_buf;
    }
    else if (cfg->memory_limit) { limit = cfg->memory_limit; limit_what = "ztrain.memory_limit"; }
    char why[640] = "";
    int exit_code = ZT_EXIT_OK;
    if (cfg->micro_batch == ZT_MICRO_BATCH_AUTO) {
        uint64_t l = limit;
        char lw[64];
        if (!l && !gpu) l = zt_memplan_limit(cfg, rpn, lw, sizeof lw);
        rc = zt_memplan_auto_micro(cfg, &o, l, ZT_MEMPLAN_AUTO_MARGIN, why, sizeof why, &st);
        if (rc != ZT_OK) {
            cli_error("%s", st.msg);
            zt_config_free(cfg);
            return rc == ZT_ENOMEM ? ZT_EXIT_FAIL : ZT_EXIT_USAGE;
        }
    }
    zt_memplan p;
    rc = zt_config_finalize_plan(cfg, world, &st);
    if (rc == ZT_OK) rc = zt_memplan_compute(cfg, &o, &p, &st);
    if (rc != ZT_OK) {
        cli_error("%s", st.msg);
        zt_config_free(cfg);
        return cli_exit_code(rc);
    }
    row rows[8];
    int nrows = 0;
    compute_rows(cfg, &o, rows, &nrows);
    char sug[640] = "", first[160];
    int nsug = 0;
    if (limit && p.peak_bytes > limit)
        nsug = zt_memplan_suggest(cfg, &o, &p, limit, sug, sizeof sug, first, sizeof first);
    char hint[320] = "";
    zt_memplan_speed_hint(cfg, &o, &p, limit, hint, sizeof hint);
    if (json) print_json(cfg, &p, rows, nrows, cuda_ctx, limit, sug, hint, why);
    else print_text(cfg, &p, rows, nrows, cuda_ctx, limit, limit_what, sug, nsug, hint, why, hf_arch,
                    shape_from);
    fflush(stdout);
    if (plot && write_plot(plot, &p, rows, nrows, limit, limit_what, &st) != ZT_OK) {
        cli_error("%s", st.msg);
        exit_code = ZT_EXIT_FAIL;
    }
    zt_config_free(cfg);
    return exit_code;
}
