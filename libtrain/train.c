/* train.c -- context lifecycle, the training step, evaluation, metrics. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "agree.h"
#include "arch.h"
#include "count.h"
#include "ctx.h"
#include "lora.h"
#include "devmem.h"
#include "gpu.h"
#include "profile.h"
#include "runtime.h"
#include "seqpar.h"
#include "ztrain_env.h"
#include "cuda/zt_cuda.h"

void zt_log(const zt_ctx *ctx, int level, const char *fmt, ...) {
    if (!ctx->cb.log) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->cb.log(ctx->cb.user, level, buf);
}

const zt_config *zt_ctx_config(const zt_ctx *ctx) { return ctx->cfg; }

void zt_memory(zt_memory_report *out) {
    zt_mem_stats ms;
    zt_mem_get(&ms);
    for (int t = 0; t < ZT_MEM_CATEGORIES && t < ZT_MEM_NTAGS; ++t) {
        out->name[t] = zt_mem_tag_name(t);
        out->current[t] = ms.cur[t];
        out->peak[t] = ms.peak[t];
        out->host_current[t] = ms.host_cur[t];
        out->host_peak[t] = ms.host_peak[t];
    }
    out->current_total = ms.cur_total;
    out->peak_total = ms.peak_total;
    out->pinned_current = ms.pinned_cur;
    out->pinned_peak = ms.pinned_peak;
}

uint64_t zt_ctx_comm_bytes(const zt_ctx *ctx, int kind) {
    /* every group of the mesh once: the world, the engines' shard and
     * replica groups, sequence parallelism's, and their device twins */
    return zt_mesh_comm_bytes(ctx->mesh, kind);
}

static uint64_t comm_total(const zt_ctx *ctx) {
    uint64_t b = 0;
    for (int k = 0; k < ZT_COMM_NKINDS; ++k) b += zt_ctx_comm_bytes(ctx, k);
    return b;
}
long zt_ctx_step(const zt_ctx *ctx) { return ctx->step; }
size_t zt_ctx_num_params(const zt_ctx *ctx) { return ctx->model->num_params; }

/* engine.h: the context as ckpt/ and io/ see it */
int zt_ctx_rank(const zt_ctx *ctx) { return ctx->rank; }
int zt_ctx_nranks(const zt_ctx *ctx) { return ctx->nranks; }
const zt_progress *zt_ctx_progress(const zt_ctx *ctx) { return &ctx->cb.progress; }
zt_group *zt_ctx_world(const zt_ctx *ctx) { return ctx->mesh->world; }
const zt_backend *zt_ctx_backend(const zt_ctx *ctx) { return ctx->be; }
zt_model *zt_ctx_model(const zt_ctx *ctx) { return ctx->model; }
zt_shard *zt_ctx_shard(const zt_ctx *ctx) { return ctx->sh; }
zt_model *zt_ctx_lora_model(const zt_ctx *ctx) { return ctx->lmodel; }
zt_shard *zt_ctx_lora_shard(const zt_ctx *ctx) { return ctx->lsh; }

void zt_ctx_set_base_fingerprint(zt_ctx *ctx, const uint64_t *tensor_fnv, uint64_t config_fnv) {
    free(ctx->base_fnv);
    ctx->base_fnv = NULL;
    if (!tensor_fnv) return;
    const size_t n = (size_t)ctx->model->n_tensors;
    if (!(ctx->base_fnv = malloc(n * sizeof *ctx->base_fnv))) return;
    memcpy(ctx->base_fnv, tensor_fnv, n * sizeof *ctx->base_fnv);
    ctx->base_config_fnv = config_fnv;
}

const uint64_t *zt_ctx_base_fingerprint(const zt_ctx *ctx, uint64_t *config_fnv) {
    if (config_fnv) *config_fnv = ctx->base_config_fnv;
    return ctx->base_fnv;
}

int zt_batch_buf_alloc(zt_ctx *ctx, zt_batch_buf *b, int B, int T, int training, int tag,
                       zt_status *st) {
    memset(b, 0, sizeof *b);
    const zt_model *m = ctx->model;
    size_t n = (size_t)B * (size_t)T;
    b->inputs = zt_mem_alloc(n * sizeof(int), tag, st);
    b->targets = b->inputs ? zt_mem_alloc(n * sizeof(int), tag, st) : NULL;
    int rc = b->targets ? ZT_OK : (st ? st->code : ZT_ENOMEM);
    /* the training arrays go up asynchronously (zt_batch_buf_upload_async):
     * page-locked, so the copy reads them in stream order instead of CUDA
     * staging them at the call */
    const int htag = tag | ZT_MEM_HOST | (training ? ZT_MEM_PIN : 0);
    if (rc == ZT_OK && zt_be_device(ctx->be) &&
        (!(b->h_inputs = zt_mem_alloc(n * sizeof(int), htag, st)) ||
         !(b->h_targets = zt_mem_alloc(n * sizeof(int), htag, st))))
        rc = st ? st->code : ZT_ENOMEM;
    if (rc == ZT_OK) rc = m->ops->acts_create(m->self, B, T, training, tag, &b->acts, st);
    if (rc != ZT_OK) {
        zt_batch_buf_free(ctx, b);
        return rc;
    }
    b->B = B;
    b->T = T;
    return ZT_OK;
}

void zt_batch_buf_free(zt_ctx *ctx, zt_batch_buf *b) {
    zt_batch_buf_wait(ctx, b, NULL);   /* (a failure was reported where the run stopped) */
    if (b->acts && ctx->model) ctx->model->ops->acts_free(ctx->model->self, b->acts);
    zt_mem_free(b->inputs);
    zt_mem_free(b->targets);
    zt_mem_free(b->h_inputs);
    zt_mem_free(b->h_targets);
    memset(b, 0, sizeof *b);
}

void zt_batch_buf_upload(zt_ctx *ctx, zt_batch_buf *b, int count_inputs, int count_targets) {
    if (!b->h_inputs) return;
    ctx->be->to_device(b->inputs, b->h_inputs, (size_t)count_inputs * sizeof(int));
    ctx->be->to_device(b->targets, b->h_targets, (size_t)count_targets * sizeof(int));
}

void zt_batch_buf_upload_async(zt_ctx *ctx, zt_batch_buf *b, int count_inputs, int count_targets) {
    if (!b->h_inputs) return;
    if (!ctx->be->to_device_async) {
        zt_batch_buf_upload(ctx, b, count_inputs, count_targets);
        return;
    }
    zt_batch_buf_wait(ctx, b, NULL);   /* (the step waited already: none in flight) */
    b->up[0] = ctx->be->to_device_async(b->inputs, b->h_inputs, (size_t)count_inputs * sizeof(int));
    b->up[1] = ctx->be->to_device_async(b->targets, b->h_targets, (size_t)count_targets * sizeof(int));
}

int zt_batch_buf_wait(zt_ctx *ctx, zt_batch_buf *b, zt_status *st) {
    int rc = ZT_OK;
    for (int i = 0; i < 2; ++i)
        if (b->up[i]) {
            /* NCCL: queued after collectives waited for on the stream only,
             * so waited for with their bound (mesh.h) */
            const int r = zt_mesh_copy_wait(ctx->mesh, ctx->be, b->up[i], st);
            if (rc == ZT_OK) rc = r;
            b->up[i] = NULL;
        }
    return rc;
}

/* ztrain.backend: the compute table (cuda: this rank's device), which also
 * becomes the backend of accounted allocations. */
static int open_backend(zt_ctx *ctx, const zt_config *c, zt_status *st) {
    ctx->device = -1;
    if (zt_backend_stand_in()) {
        /* bench/costmodel, tests: a table standing in for the configured
         * backend, everything else as configured (kernels/count.h) */
        ctx->be = zt_backend_stand_in();
    } else if (strcmp(c->backend, "cuda") == 0) {
        ctx->be = zt_cuda_open(zt_rt()->local_rank, &ctx->device, st);
        if (!ctx->be) return st ? st->code : ZT_EUNSUPPORTED;
    } else if (strcmp(c->backend, "cpu-strict") == 0) {
        ctx->be = zt_backend_cpu_strict();
        if (!ctx->be)
            return zt_fail(st, ZT_EUNSUPPORTED, "backend cpu-strict cannot set up its memory "
                           "regions (no mmap/mprotect)");
        zt_backend_cpu_strict_set_capacity((size_t)c->strict_device_memory);
    } else {
        ctx->be = zt_backend_cpu();
    }
    /* bench_train --breakdown: every kernel timed (kernels/profile.h) */
    ctx->be = zt_prof_wrap(ctx->be);
    ctx->be->set_matmul_precision(zt_matmul_bf16_of(c, strcmp(c->backend, "cuda") == 0)
                                      ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32);
    zt_mem_set_backend(ctx->be);
    return ZT_OK;
}

/* Test hook: ZT_TEST_OVERFLOW_STEPS="5,6" makes the gradients of those
 * (1-based) steps overflow on the last rank (fp16 loss-scaler tests; the
 * variable is outside the ZTRAIN_ namespace on purpose). */
static int parse_inject_overflow(zt_ctx *ctx, zt_status *st) {
    const char *e = getenv("ZT_TEST_OVERFLOW_STEPS");
    ctx->n_inject_overflow = 0;
    if (!e || !*e) return ZT_OK;
    const int cap = (int)(sizeof ctx->inject_overflow / sizeof ctx->inject_overflow[0]);
    const char *p = e;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || ctx->n_inject_overflow == cap || (*end && *end != ','))
            return zt_fail(st, ZT_EINVAL, "ZT_TEST_OVERFLOW_STEPS='%s': expected up to %d "
                           "comma-separated step numbers >= 1", e, cap);
        ctx->inject_overflow[ctx->n_inject_overflow++] = v;
        p = *end ? end + 1 : end;
    }
    return ZT_OK;
}

static int inject_overflow_at(const zt_ctx *ctx, long step) {
    for (int i = 0; i < ctx->n_inject_overflow; ++i)
        if (ctx->inject_overflow[i] == step) return 1;
    return 0;
}

/* The memory planner's inputs (memplan.h): its options and the per-rank
 * limit with the words that describe it. */
typedef struct mem_limits {
    zt_memplan_opts mo;
    uint64_t limit;
    char limit_what[384], host_what[64];   /* mo.host_limit_what may point to host_what */
} mem_limits;

/* The limits the plan is checked against: on a device backend device memory
 * (ztrain.memory_limit overrides) and, for the host place (offloaded
 * optimizer state, staging, loaders), available host memory / ranks per
 * node; else host memory. */
static int memory_limits(zt_ctx *ctx, mem_limits *ml, zt_status *st) {
    zt_memplan_opts *mo = &ml->mo;
    zt_memplan_opts_init(mo, zt_rt()->world);
    mo->ranks_per_node = zt_rt()->local_size;
    if (zt_be_device(ctx->be)) {
        ml->limit = zt_memplan_device_limit(ctx->cfg, ctx->be, zt_mesh_ranks_on_device(ctx->device), mo->ranks_per_node,
                                            ml->limit_what, sizeof ml->limit_what);
        ZT_TRY(zt_be_check(ctx->be, "querying free device memory", st));
        /* the plan asks the backend what its attention calls will need
         * (cuda: cuDNN's plans' workspace, known only to cuDNN) */
        mo->be = ctx->be;
        const int strict_host = strcmp(ctx->be->name, "cpu-strict") == 0 &&
                                !ctx->cfg->strict_device_memory && !ctx->cfg->memory_limit;
        if (!strict_host) {   /* (cpu-strict without a capacity: already the host limit) */
            mo->host_limit = zt_memplan_host_available() / (uint64_t)(mo->ranks_per_node > 0
                                                                          ? mo->ranks_per_node : 1);
            if (mo->ranks_per_node > 1)
                snprintf(ml->host_what, sizeof ml->host_what,
                         "available host memory / %d ranks on this node", mo->ranks_per_node);
            else
                snprintf(ml->host_what, sizeof ml->host_what, "available host memory");
            mo->host_limit_what = ml->host_what;
        }
    } else {
        ml->limit = zt_memplan_limit(ctx->cfg, mo->ranks_per_node, ml->limit_what, sizeof ml->limit_what);
    }
    return ZT_OK;
}

/* The "auto" micro batch (planned for the built-in models only), then the
 * configuration finalized for the world size and checked against Slurm's. */
/* The "auto" micro batch is planned from the memory each rank measures,
 * which may differ between ranks (other jobs, another node): every rank
 * takes the smallest plan, and a rank that could not plan gives every rank
 * its error (instead of the others going on to a hang). */
static int agree_auto_micro(zt_ctx *ctx, int rc, zt_status *st) {
    if (zt_rt()->world < 2) return rc;
    zt_group *g;
    zt_status gst;
    if (zt_mesh_world_group(ctx->cfg->comm_timeout_s, &g, &gst) != ZT_OK) {
        *st = gst;
        return gst.code;
    }
    zt_group_where(g, "start-up: agreeing on the auto micro batch");
    rc = zt_agree_text(g, "planning train_micro_batch_size_per_gpu=\"auto\"", NULL, "", rc, st);
    int64_t neg = -(int64_t)ctx->cfg->micro_batch;   /* max of the negatives: the smallest */
    if (rc == ZT_OK) rc = g->ops->allreduce_max(g, &neg, 1, ZT_I64, st);
    if (rc == ZT_OK) ctx->cfg->micro_batch = (int)-neg;
    zt_group_free(g);
    return rc;
}

static int finalize_config(zt_ctx *ctx, const zt_model_ops *ops, mem_limits *ml, zt_status *st) {
    char why[640] = "";
    if (ctx->cfg->micro_batch == ZT_MICRO_BATCH_AUTO) {
        if (ops && ctx->cfg->train_batch_size > 0)   /* (without one, nothing to plan: the default) */
            return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=\"auto\" is planned for "
                           "the built-in GPT only; give a number for model '%s'",
                           ops->name ? ops->name : "?");
        int rc = zt_memplan_auto_micro(ctx->cfg, &ml->mo, ml->limit, ZT_MEMPLAN_AUTO_MARGIN, why,
                                       sizeof why, st);
        const int mine = ctx->cfg->micro_batch;
        ZT_TRY(agree_auto_micro(ctx, rc, st));
        if (ctx->cfg->micro_batch != mine)
            snprintf(why, sizeof why, "micro batch %d, the smallest plan of any rank (the memory "
                     "this rank measured would allow %d)", ctx->cfg->micro_batch, mine);
    }
    ZT_TRY(zt_config_finalize(ctx->cfg, zt_rt()->world, st));
    ZT_TRY(zt_rt_check_slurm(st));
    if (why[0]) zt_log(ctx, ZT_LOG_INFO, "train_micro_batch_size_per_gpu=auto: %s", why);
    return ZT_OK;
}

/* The pre-flight check of the built-in models' predicted peak against the
 * limit (ztrain.force starts anyway, with a warning). */
static int preflight(zt_ctx *ctx, const mem_limits *ml, zt_status *st) {
    const zt_config *c = ctx->cfg;
    const uint64_t limit = ml->limit;
    int forced = 0;
    int rc = zt_memplan_check(c, &ml->mo, limit, ml->limit_what, &ctx->plan, &forced, st);
    /* checkpoint.async left at its default (true): a host snapshot that does
     * not fit falls back to synchronous checkpoints (set explicitly, the
     * check refuses and names them); every rank agrees in zt_ckpt_attach */
    if ((rc == ZT_ENOMEM || forced) && c->ckpt_async && ctx->plan.ckpt_snapshot_bytes &&
        zt_config_source(c, "ztrain.checkpoint.async") == ZT_SRC_DEFAULT) {
        const uint64_t with = ctx->plan.peak_bytes, snap = ctx->plan.ckpt_snapshot_bytes;
        zt_status sst;
        int sforced = 0;
        ctx->cfg->ckpt_async = 0;
        if (zt_memplan_check(c, &ml->mo, limit, ml->limit_what, &ctx->plan, &sforced, &sst) == ZT_OK &&
            !sforced) {
            char pw[32], ps[32], lim[32];
            zt_memplan_fmt_bytes((double)with, pw, sizeof pw);
            zt_memplan_fmt_bytes((double)snap, ps, sizeof ps);
            zt_memplan_fmt_bytes((double)limit, lim, sizeof lim);
            zt_log(ctx, ZT_LOG_WARN, "memory: the checkpoint.async host snapshot (%s per rank) does "
                   "not fit the limit %s (%s; predicted peak %s with it): falling back to "
                   "synchronous checkpoints (checkpoint.async=false, --ckpt-async false)", ps, lim,
                   ml->limit_what, pw);
            rc = ZT_OK;
            forced = 0;
            zt_status_clear(st);
        } else {
            /* it does not fit either way: the check of the configuration as given */
            ctx->cfg->ckpt_async = 1;
            forced = 0;
            rc = zt_memplan_check(c, &ml->mo, limit, ml->limit_what, &ctx->plan, &forced, st);
        }
    }
    if (rc != ZT_OK) return rc;
    ctx->have_plan = 1;
    ctx->mem_limit = limit;
    ctx->plan_forced = forced;
    ctx->plan_opts = ml->mo;
    snprintf(ctx->limit_what, sizeof ctx->limit_what, "%s", ml->limit_what);
    snprintf(ctx->host_limit_what, sizeof ctx->host_limit_what, "%s",
             ml->mo.host_limit_what ? ml->mo.host_limit_what : "host memory limit");
    ctx->plan_opts.host_limit_what = ctx->host_limit_what;
    char pk[32], lim[32];
    zt_memplan_fmt_bytes((double)ctx->plan.peak_bytes, pk, sizeof pk);
    zt_memplan_fmt_bytes((double)limit, lim, sizeof lim);
    if (forced)
        zt_log(ctx, ZT_LOG_WARN, "memory: predicted peak %s per rank exceeds the limit %s (%s); "
               "starting anyway (ztrain.force)", pk, lim, ml->limit_what);
    else if (limit)
        zt_log(ctx, ZT_LOG_INFO, "memory: predicted peak %s per rank (at %s), limit %s (%s)", pk,
               ctx->plan.peak_phase[ctx->plan.gpu ? ZT_MP_DEVICE : ZT_MP_HOST], lim, ml->limit_what);
    else
        zt_log(ctx, ZT_LOG_INFO, "memory: predicted peak %s per rank (at %s); not checked: %s", pk,
               ctx->plan.peak_phase[ctx->plan.gpu ? ZT_MP_DEVICE : ZT_MP_HOST], ml->limit_what);
    /* (the speed hint: advice, the same on every rank, planned on rank 0
     * alone, whose log the CLI prints) */
    char hint[320];
    if (limit && !forced && zt_world_rank() == 0 &&
        zt_memplan_speed_hint(c, &ml->mo, &ctx->plan, limit, hint, sizeof hint))
        zt_log(ctx, ZT_LOG_INFO, "memory: %s", hint);
    return ZT_OK;
}

void zt_ctx_release_activations(zt_ctx *ctx) {
    if (!ctx) return;
    zt_batch_buf_free(ctx, &ctx->acts);
    zt_batch_buf_free(ctx, &ctx->eval_acts);
}

int zt_ctx_end_fits(zt_ctx *ctx, int step, int sample_window, char *why, size_t n) {
    if (n) why[0] = '\0';
    /* nothing checked: no plan, a run over its limit started anyway */
    if (!ctx->have_plan || ctx->plan_forced) return 1;
    zt_memplan_opts o = ctx->plan_opts;
    o.sample_window = sample_window;
    zt_memplan p;
    zt_status pst;
    if (zt_memplan_compute(ctx->cfg, &o, &p, &pst) != ZT_OK) return 1;   /* (planned before: not reached) */
    const uint64_t *pk = step == ZT_END_EXPORT ? p.export_peak : p.sample_peak;
    const int bind = p.gpu ? ZT_MP_DEVICE : ZT_MP_HOST;
    uint64_t need = 0, limit = 0;
    const char *what = "", *place = p.gpu ? "device memory " : "";
    if (ctx->mem_limit && pk[bind] > ctx->mem_limit) {
        need = pk[bind];
        limit = ctx->mem_limit;
        what = ctx->limit_what;
    } else if (p.gpu && o.host_limit && pk[ZT_MP_HOST] > o.host_limit) {
        need = pk[ZT_MP_HOST];
        limit = o.host_limit;
        what = ctx->host_limit_what;
        place = "host memory ";
    } else {
        return 1;
    }
    char a[32], b[32];
    zt_memplan_fmt_bytes((double)need, a, sizeof a);
    zt_memplan_fmt_bytes((double)limit, b, sizeof b);
    if (n) snprintf(why, n, "predicted peak %s%s per rank exceeds the limit %s (%s)", place, a, b, what);
    return 0;
}

/* Threads and the mesh: the world, how collectives move device buffers,
 * and the axes' groups (mesh.h). */
static int open_world(zt_ctx *ctx, zt_status *st) {
    const zt_config *c = ctx->cfg;
    ctx->threads = c->threads > 0 ? c->threads : zt_rt_default_threads();
    ctx->be->set_threads(ctx->threads);
    ZT_TRY(zt_mesh_create(c, ctx->be, ctx->device, &ctx->mesh, st));
    ctx->rank = ctx->mesh->world->rank;
    ctx->nranks = ctx->mesh->world->size;
    if (zt_be_device(ctx->be))
        zt_log(ctx, ZT_LOG_INFO, "backend %s%s; collectives on device buffers: %s", ctx->be->name,
               ctx->device >= 0 ? " (device chosen from the local rank)" : "",
               ctx->mesh->comm_kind == ZT_MESH_COMM_NCCL ? "NCCL" : "MPI staged through host memory");
    if (strcmp(ctx->be->name, "cuda") == 0)
        zt_log(ctx, ZT_LOG_INFO, "attention: %s", zt_cuda_attention_path());
    return ZT_OK;
}

/* The built-in architecture ztrain.model.* names (Llama or GPT-2), with
 * its activation checkpointing; freed with the context. */
static int builtin_model(const zt_ctx *ctx, const zt_model_ops **ops, void **self, zt_status *st) {
    const zt_config *c = ctx->cfg;
    zt_model_config mc = c->model;
    mc.acts16 = zt_acts16_of(c, strcmp(c->backend, "cuda") == 0);
    mc.ckpt_attn = zt_config_act_ckpt_attn(c);   /* (blocks-attn) */
    zt_out16_of(&mc);
    return zt_arch_of(&mc)->create(&mc, ctx->be, zt_config_act_ckpt_k(c), ops, self, st);
}

/* The model (the built-in one when ops == NULL) laid out for the ZeRO
 * stage at its parameter storage precision, and the fp16 loss scaler. */
static int build_model(zt_ctx *ctx, const zt_model_ops *ops, void *self, zt_status *st) {
    const zt_config *c = ctx->cfg;
    int own = 0, rc;
    if (!ops) {
        ZT_TRY(builtin_model(ctx, &ops, &self, st));
        own = 1;
    }
    ctx->prec = zt_precision_of(c);
    zt_scaler_init(&ctx->scaler, c);
    if ((rc = parse_inject_overflow(ctx, st)) != ZT_OK) {
        if (own) ops->destroy(self);
        return rc;
    }
    const int lora = c->model.lora_r > 0 && own;
    if (c->model.lora_r > 0 && !own) {
        if (own) ops->destroy(self);
        return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.r=%d: LoRA is built into the llama and "
                       "gpt2 models, not a model of the caller's own", c->model.lora_r);
    }
    const int flags = lora ? zt_shard_model_flags_frozen(c->zero_stage, ctx->prec) &
                                 (zt_lora_base_kind(&c->model, NULL) > 0 ? ~ZT_MODEL_PARAMS : ~0)
                           : zt_shard_model_flags_prec(c->zero_stage, ctx->prec);
    if ((rc = zt_model_create(ops, self, &c->model, ctx->be, 0, &ctx->model, st)) != ZT_OK) {
        if (own) ops->destroy(self);
        return rc;
    }
    ctx->own_model_self = own;
    /* the blocks the stage keeps, at this rank's share (expert parallelism
     * stores a window of each expert unit: shard.h) */
    ZT_TRY(zt_model_alloc_blocks(ctx->model, flags, zt_shard_block_elems(ctx->model, ctx->mesh), st));
    if (lora) {
        zt_lora lo;
        ZT_TRY(zt_lora_plan(&c->model, &lo, st));
        ZT_TRY(zt_lora_model_create(&lo, &c->model, ctx->be,
                                    zt_shard_model_flags_prec(c->zero_stage, ctx->prec),
                                    &ctx->lmodel, st));
    }
    return ZT_OK;
}

/* The rank layout handed to the built-in model (its set_mesh hook, arch.h):
 * sequence_parallel_size > 1 (seqpar.h) needs one. */
static int apply_mesh(zt_ctx *ctx, zt_status *st) {
    zt_model *m = ctx->model;
    const zt_arch *a = zt_arch_of_ops(m->ops);
    const int sp = zt_mesh_size(ctx->mesh, ZT_AX_SP);
    if (sp > 1 && (!a || !a->set_mesh))
        return zt_fail(st, ZT_EUNSUPPORTED, "sequence_parallel_size=%d: sequence parallelism is "
                       "built into the llama and gpt2 models, not a model of the caller's own", sp);
    return a && a->set_mesh ? a->set_mesh(m->self, ctx->mesh, st) : ZT_OK;
}

/* Sequence parallel: this rank's tokens of the B whole samples in
 * ctx->sp_in / sp_tg into in / tg [B, Tl] (seqpar.h). */
static void sp_slice(const zt_ctx *ctx, int B, int T, int *in, int *tg) {
    zt_seqpar sp;
    zt_seqpar_of(ctx->mesh, &sp);
    zt_sp_slice_tokens(&sp, B, T, ctx->sp_in, ctx->sp_tg, in, tg);
}

/* The host buffers of B whole samples of T tokens (sequence parallel). */
static int sp_buffers(zt_ctx *ctx, size_t n, zt_status *st) {
    if (n <= ctx->sp_cap) return ZT_OK;
    zt_mem_free(ctx->sp_in);
    zt_mem_free(ctx->sp_tg);
    ctx->sp_cap = 0;
    ctx->sp_in = zt_mem_alloc(n * sizeof(int), ZT_MEM_ACTIVATIONS | ZT_MEM_HOST, st);
    ctx->sp_tg = ctx->sp_in ? zt_mem_alloc(n * sizeof(int), ZT_MEM_ACTIVATIONS | ZT_MEM_HOST, st) : NULL;
    if (!ctx->sp_tg) return st ? st->code : ZT_ENOMEM;
    ctx->sp_cap = n;
    return ZT_OK;
}

/* The training block [micro_batch, seq_len / sp] (allocated with the
 * engine; again after zt_ctx_release_activations). */
static int train_acts_ready(zt_ctx *ctx, zt_status *st) {
    if (ctx->acts.acts) return ZT_OK;
    /* sequence parallel: each rank's activations hold seq_len / sp tokens */
    return zt_batch_buf_alloc(ctx, &ctx->acts, ctx->cfg->micro_batch,
                              ctx->cfg->seq_len / zt_mesh_size(ctx->mesh, ZT_AX_SP), 1, ZT_MEM_ACTIVATIONS,
                              st);
}

/* The ZeRO engine over the model's units (sharding, offload, overlap),
 * initialized parameters, the training activations and the optimizer. */
static int build_engine(zt_ctx *ctx, int defer, zt_status *st) {
    const zt_config *c = ctx->cfg;
    const zt_shard_prec sp = {ctx->prec, zt_comm_dtype_of(c),
                              strcmp(c->offload_optimizer, "none") != 0, ctx->mesh->comm_kind,
                              ctx->device, c->overlap_comm, strcmp(c->offload_param, "none") != 0,
                              c->pin_optimizer, c->pin_param, 0, 0, NULL,
                              /* the GEMMs read the bf16 storage (precision.h) */
                              ctx->prec == ZT_PREC_BF16 && zt_weights16_of(c), 0, 0};
    zt_shard_prec bp = sp;
    bp.frozen = ctx->lmodel != NULL;   /* LoRA: the base is frozen */
    unsigned char *qt = NULL;          /* QLoRA: which base tensors are NF4 */
    if (bp.frozen && (bp.nf4 = zt_lora_base_kind(&c->model, st)) != 0) {
        if (bp.nf4 < 0) return st->code;
        if (!(qt = calloc((size_t)ctx->model->n_tensors, 1)))
            return zt_fail(st, ZT_ENOMEM, "out of memory");
        for (int i = 0; i < ctx->model->n_tensors; ++i)
            qt[i] = (unsigned char)zt_lora_base_quantized(&c->model, ctx->model->tensors[i].name);
        bp.nf4_tensor = qt;
        bp.nf4w16 = zt_nf4w16_of();   /* (decided once: precision.h) */
        bp.nf4view = zt_nf4view_of();
    }
    int rc0 = zt_shard_create_on(ctx->model, c->zero_stage, ctx->mesh, ZT_AX_SHARD, ZT_AX_REPLICA, &bp,
                                 &ctx->sh, st);
    free(qt);
    ZT_TRY(rc0);
    ctx->sh->seed = (uint64_t)c->seed;   /* LoRA dropout's mask (lora.h) */
    /* ZT_CTX_DEFER_INIT: the initial values are owed until a load wrote
     * the parameters or something reads them (zt_shard_defer_init) */
    double t0 = zt_now_s();
    int rc = defer ? zt_shard_defer_init(ctx->sh, c->seed) : zt_shard_init_params(ctx->sh, c->seed);
    if (rc != ZT_OK) return zt_fail(st, rc, "out of memory initializing the parameters");
    if (ctx->lmodel) {
        ZT_TRY(zt_shard_create_on(ctx->lmodel, c->zero_stage, ctx->mesh, ZT_AX_SHARD, ZT_AX_REPLICA, &sp,
                                  &ctx->lsh, st));
        ctx->sh->peer = ctx->lsh;
        rc = defer ? zt_shard_defer_init(ctx->lsh, c->seed) : zt_shard_init_params(ctx->lsh, c->seed);
        if (rc != ZT_OK) return zt_fail(st, rc, "out of memory initializing the LoRA adapters");
    }
    ctx->startup.init_s += zt_now_s() - t0;
    /* (decided once: precision.h) */
    float *fg;
    size_t fn;
    ctx->gradfresh = zt_gradfresh_of() && zt_shard_fresh_range(zt_ctx_tsh(ctx), &fg, &fn);
    {
        /* (the bits as the built-in model takes them: builtin_model) */
        zt_model_config hc = c->model;
        zt_out16_of(&hc);
        ctx->headfresh = ctx->gradfresh && zt_w16_on(&hc, ZT_W16_HEADFRESH) && zt_w16_on(&hc, ZT_W16_HEADFUSE);
    }
    ZT_TRY(train_acts_ready(ctx, st));
    if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1) ZT_TRY(sp_buffers(ctx, (size_t)c->micro_batch * c->seq_len, st));
    ZT_TRY(zt_adamw_init(&ctx->opt, c, zt_shard_optim_elems(zt_ctx_tsh(ctx)), st));
    ZT_TRY(zt_be_check(ctx->be, "creating the context", st));
    /* pin_memory: a failed registration is a warning, the run goes on */
    char why[400];
    if (zt_mem_pin_warning(why, sizeof why)) zt_log(ctx, ZT_LOG_WARN, "%s", why);
    return ZT_OK;
}

/* Shared by zt_ctx_create (built-in model: ops == NULL) and
 * zt_ctx_create_model: one named step after the other. */
static int ctx_create(const zt_config *cfg_in, const zt_model_ops *ops, void *self,
                      const zt_callbacks *cb, unsigned flags, zt_ctx **out, zt_status *st) {
    zt_status_clear(st);
    *out = NULL;
    if (!zt_rt()->initialized)
        return zt_fail(st, ZT_EINVAL, "zt_init must be called before zt_ctx_create");
    zt_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return zt_fail(st, ZT_ENOMEM, "out of memory (context)");
    if (cb) ctx->cb = *cb;
    int rc;
    /* every rank read the same configuration (before anything uses it) */
    if ((rc = zt_config_agree(cfg_in, ZT_OK, st)) != ZT_OK) goto fail;
    mem_limits ml;
    memset(&ml, 0, sizeof ml);
    ctx->cfg = zt_config_dup(cfg_in);
    if (!ctx->cfg) { rc = zt_fail(st, ZT_ENOMEM, "out of memory (config)"); goto fail; }
    /* The backend first (cuda: this rank's device and its CUDA context), so
     * that the pre-flight check can ask it for free device memory. */
    if ((rc = open_backend(ctx, ctx->cfg, st)) != ZT_OK) goto fail;
    if ((rc = zt_mesh_check_topology(ctx->cfg, st)) != ZT_OK) goto fail;
    /* The memory planner (memplan.h) runs before anything is allocated:
     * "auto" micro batch first, then the pre-flight check (built-in models
     * only: the activations of a model of the caller's own are unknown). */
    double t0 = zt_now_s();
    if ((rc = memory_limits(ctx, &ml, st)) != ZT_OK) goto fail;
    /* (the initialization's transients where this run has them) */
    ml.mo.deferred_init = (flags & ZT_CTX_DEFER_INIT) != 0;
    if ((rc = finalize_config(ctx, ops, &ml, st)) != ZT_OK) goto fail;
    if (!ops && (rc = preflight(ctx, &ml, st)) != ZT_OK) goto fail;
    double t1 = zt_now_s();
    ctx->startup.planning_s = t1 - t0;
    if ((rc = open_world(ctx, st)) != ZT_OK) goto fail;
    /* ZT_CTX_PREFAULT: the buffers the first step writes are populated in
     * the background while the caller reads the weights and opens the data
     * (mem.c) */
    ctx->prefaulting = (flags & ZT_CTX_PREFAULT) != 0;
    if (ctx->prefaulting) zt_mem_prefault_begin();
    if ((rc = build_model(ctx, ops, self, st)) != ZT_OK) goto fail;
    if ((rc = apply_mesh(ctx, st)) != ZT_OK) goto fail;
    if ((rc = build_engine(ctx, (flags & ZT_CTX_DEFER_INIT) != 0, st)) != ZT_OK) goto fail;
    if (ctx->prefaulting) zt_mem_prefault_start();
    /* (build_engine's initialization counted apart) */
    ctx->startup.allocation_s = zt_now_s() - t1 - ctx->startup.init_s;
    ctx->last_val_loss = NAN;
    *out = ctx;
    return ZT_OK;
fail:
    zt_ctx_free(ctx);
    return rc;
}

int zt_ctx_create(const zt_config *cfg, const zt_callbacks *cb, zt_ctx **out, zt_status *st) {
    return ctx_create(cfg, NULL, NULL, cb, 0, out, st);
}

int zt_ctx_create_ex(const zt_config *cfg, const zt_callbacks *cb, unsigned flags, zt_ctx **out,
                     zt_status *st) {
    return ctx_create(cfg, NULL, NULL, cb, flags, out, st);
}

int zt_ctx_init_pending(zt_ctx *ctx, zt_status *st) {
    double t0 = zt_now_s();
    int owed = (ctx->sh && ctx->sh->init_todo) || (ctx->lsh && ctx->lsh->init_todo);
    if (zt_shard_init_pending(ctx->sh) != ZT_OK || zt_shard_init_pending(ctx->lsh) != ZT_OK)
        return zt_fail(st, ZT_ENOMEM, "out of memory initializing the parameters");
    if (owed) ZT_TRY(zt_be_check(ctx->be, "initializing the parameters", st));
    ctx->startup.init_s += zt_now_s() - t0;
    return ZT_OK;
}

void zt_ctx_startup(const zt_ctx *ctx, zt_startup *out) {
    *out = ctx->startup;
    out->init_params = (ctx->sh ? ctx->sh->init_elems : 0) + (ctx->lsh ? ctx->lsh->init_elems : 0);
    out->num_params = (uint64_t)ctx->model->num_params +
                      (ctx->lmodel ? (uint64_t)ctx->lmodel->num_params : 0);
}

int zt_ctx_create_model(const zt_config *cfg, const zt_model_ops *ops, void *self,
                        const zt_callbacks *cb, zt_ctx **out, zt_status *st) {
    if (!ops) {
        zt_status_clear(st);
        *out = NULL;
        return zt_fail(st, ZT_EINVAL, "zt_ctx_create_model: ops is NULL");
    }
    return ctx_create(cfg, ops, self, cb, 0, out, st);
}

void zt_ctx_free(zt_ctx *ctx) {
    if (!ctx) return;
    zt_ctx_fence(ctx);   /* nothing reads the state being freed */
    if (ctx->prefaulting) zt_mem_prefault_stop();
    if (ctx->has_train && ctx->train.close) ctx->train.close(ctx->train.state);
    if (ctx->has_val && ctx->val.close) ctx->val.close(ctx->val.state);
    if (ctx->metrics_fp) fclose(ctx->metrics_fp);
    zt_tb_close(&ctx->tb);
    zt_batch_buf_free(ctx, &ctx->acts);
    zt_batch_buf_free(ctx, &ctx->eval_acts);
    zt_batch_buf_free(ctx, &ctx->sample_acts);
    zt_adamw_free(&ctx->opt);
    zt_shard_free(ctx->sh);
    zt_shard_free(ctx->lsh);
    zt_model_free(ctx->model, ctx->own_model_self);
    zt_model_free(ctx->lmodel, 1);
    free(ctx->owned);
    free(ctx->base_fnv);
    zt_mem_free(ctx->sp_in);
    zt_mem_free(ctx->sp_tg);
    zt_mesh_free(ctx->mesh);   /* (after the engines, which borrow its groups) */
    zt_config_free(ctx->cfg);
    free(ctx);
}

int zt_ctx_set_data(zt_ctx *ctx, zt_data_source train, zt_data_source val, zt_status *st) {
    if (ctx->has_train && ctx->train.close) ctx->train.close(ctx->train.state);
    if (ctx->has_val && ctx->val.close) ctx->val.close(ctx->val.state);
    ctx->train = train;
    ctx->has_train = train.get != NULL;
    ctx->val = val;
    ctx->has_val = val.get != NULL;
    return ZT_OK;
}

/* ------------------------------------------------------------ metrics */

/* A resumed run continues the metrics file: keep the complete records of
 * steps <= the resumed step (those past it are from the interrupted run's
 * lost steps), written to PATH.tmp and renamed over PATH. */
static int metrics_keep(const char *path, long step, zt_status *st) {
    FILE *in = fopen(path, "r");
    if (!in) return ZT_OK;                      /* nothing to continue */
    char tmp[ZT_PATH_MAX + 8], *line = NULL;
    size_t cap = 0;
    ssize_t n;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return zt_fail(st, ZT_EIO, "%s: cannot write metrics file", tmp);
    }
    long s;
    while ((n = getline(&line, &cap, in)) > 0) {
        if (line[n - 1] != '\n') break;           /* a torn last record */
        if (sscanf(line, "{\"step\": %ld", &s) == 1 && s <= step) fputs(line, out);
    }
    free(line);
    fclose(in);
    int bad = fflush(out) != 0 || ferror(out);
    if (fclose(out) != 0 || bad || rename(tmp, path) != 0) {
        remove(tmp);
        return zt_fail(st, ZT_EIO, "%s: cannot rewrite metrics file", path);
    }
    return ZT_OK;
}

/* The wall time an event records (seconds since the epoch). */
static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ztrain.tensorboard.dir: a new events file per zt_train.  A resumed run's
 * file starts with a SessionLog START at the step after its checkpoint's:
 * TensorBoard reads the directory's files as one run and drops what an
 * earlier file has of the steps from there on (the interrupted run's lost
 * steps). */
static int tb_open(zt_ctx *ctx, zt_status *st) {
    if (ctx->tb.fp || !ctx->cfg->tensorboard_dir[0] || ctx->rank != 0) return ZT_OK;
    ZT_TRY(zt_tb_open_dir(&ctx->tb, ctx->cfg->tensorboard_dir, wall_now(), st));
    /* resumed: the restart marker at the first step to come */
    if (ctx->step > 0 && (zt_tb_start(&ctx->tb, ctx->step + 1, wall_now()) != 0 ||
                          zt_tb_flush(&ctx->tb) != 0)) {
        zt_tb_close(&ctx->tb);
        return zt_fail(st, ZT_EIO, "%s: cannot write the TensorBoard events file", ctx->tb.path);
    }
    return ZT_OK;
}

/* A failed write (a full disk) is a warning, once, as for the metrics file. */
static void tb_check(zt_ctx *ctx) {
    if (!ctx->tb.failed || ctx->tb_warned) return;
    ctx->tb_warned = 1;
    zt_log(ctx, ZT_LOG_WARN, "%s: cannot write the TensorBoard events file; events are lost from "
           "step %ld on (training continues; reported once)", ctx->tb.path, ctx->step);
}

static void tb_scalar(zt_ctx *ctx, const char *tag, long step, double v) {
    if (!ctx->tb.fp || !isfinite(v)) return;
    zt_tb_scalar(&ctx->tb, tag, step, v, wall_now());
    tb_check(ctx);
}

static void tb_flush(zt_ctx *ctx) {
    if (!ctx->tb.fp) return;
    zt_tb_flush(&ctx->tb);
    tb_check(ctx);
}

void zt_ctx_scalar(zt_ctx *ctx, const char *tag, long step, double value) {
    if (ctx) tb_scalar(ctx, tag, step, value);
}

/* The run's configuration next to a metrics file that is a regular file
 * (RUN.jsonl -> RUN.config.json, else PATH.config.json), for `ztrain report`;
 * a failure is a warning. */
static void metrics_config(zt_ctx *ctx) {
    struct stat sb;
    if (fstat(fileno(ctx->metrics_fp), &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    char path[ZT_PATH_MAX + 16];
    const char *m = ctx->cfg->metrics;
    size_t n = strlen(m);
    if (n > 6 && !strcmp(m + n - 6, ".jsonl"))
        snprintf(path, sizeof path, "%.*s.config.json", (int)(n - 6), m);
    else
        snprintf(path, sizeof path, "%s.config.json", m);
    char *js = zt_config_to_json(ctx->cfg);
    FILE *f = js ? fopen(path, "w") : NULL;
    int ok = f && fputs(js, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(js);
    if (!ok)
        zt_log(ctx, ZT_LOG_WARN, "%s: cannot write the run's configuration next to the metrics "
               "file (training continues)", path);
}

static int metrics_open(zt_ctx *ctx, zt_status *st) {
    ZT_TRY(tb_open(ctx, st));
    if (ctx->metrics_fp || !ctx->cfg->metrics[0] || ctx->rank != 0) return ZT_OK;
    if (ctx->step > 0) ZT_TRY(metrics_keep(ctx->cfg->metrics, ctx->step, st));
    ctx->metrics_fp = fopen(ctx->cfg->metrics, ctx->step > 0 ? "a" : "w");
    if (!ctx->metrics_fp)
        return zt_fail(st, ZT_EIO, "%s: cannot write metrics file: %s", ctx->cfg->metrics,
                       strerror(errno));
    metrics_config(ctx);
    return ZT_OK;
}

/* Flush the metrics file; the first failure (a full disk, /dev/full) is
 * reported once as a warning and training goes on: metrics are not worth
 * losing a run for. */
static void metrics_flush(zt_ctx *ctx) {
    if (fflush(ctx->metrics_fp) == 0 && !ferror(ctx->metrics_fp)) return;
    int e = errno;
    clearerr(ctx->metrics_fp);
    if (ctx->metrics_failed) return;
    ctx->metrics_failed = 1;
    zt_log(ctx, ZT_LOG_WARN, "%s: cannot write the metrics file: %s; metrics records are lost "
           "from step %ld on (training continues; reported once)", ctx->cfg->metrics,
           strerror(e), ctx->step);
}

static void json_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "null");
}

static void metrics_emit(zt_ctx *ctx, const zt_metrics *m) {
    if (ctx->tb.fp) {
        if (m->kind == ZT_METRIC_STEP) {
            tb_scalar(ctx, "train/loss", m->step, m->loss);
            tb_scalar(ctx, "train/lr", m->step, m->lr);
            tb_scalar(ctx, "train/grad_norm", m->step, m->grad_norm);
            if (ctx->scaler.enabled) tb_scalar(ctx, "train/loss_scale", m->step, m->loss_scale);
            tb_scalar(ctx, "perf/tokens_per_s", m->step, m->tokens_per_s);
            tb_scalar(ctx, "perf/step_ms", m->step, m->step_ms);
            tb_scalar(ctx, "perf/data_wait_ms", m->step, m->data_wait_ms);
            tb_scalar(ctx, "perf/tflops", m->step, m->tflops);
            if (!isnan(m->mfu)) tb_scalar(ctx, "perf/mfu", m->step, m->mfu);
            tb_scalar(ctx, "comm/bytes", m->step, (double)m->comm_bytes);
            if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1)
                tb_scalar(ctx, "comm/alltoall_bytes", m->step, (double)m->alltoall_bytes);
            tb_scalar(ctx, "memory/peak_bytes", m->step, (double)m->mem_peak_bytes);
        } else
            tb_scalar(ctx, "eval/val_loss", m->step, m->val_loss);
    }
    if (ctx->metrics_fp) {
        if (m->kind == ZT_METRIC_STEP) {
            /* JSON has no NaN: a value that is not finite is written null */
            char loss[32], norm[32], fp16[96] = "", a2a[64] = "", aux[48] = "", mfu[40] = "";
            json_num(loss, sizeof loss, "%.6f", m->loss);
            json_num(norm, sizeof norm, "%.6f", m->grad_norm);
            if (ctx->scaler.enabled)
                snprintf(fp16, sizeof fp16, ", \"loss_scale\": %.17g, \"skipped\": %s",
                         m->loss_scale, m->skipped ? "true" : "false");
            if (!isnan(m->aux_loss)) {   /* a Mixture of Experts */
                char v[32];
                json_num(v, sizeof v, "%.6f", m->aux_loss);
                snprintf(aux, sizeof aux, ", \"aux_loss\": %s", v);
            }
            if (!isnan(m->mfu)) snprintf(mfu, sizeof mfu, ", \"mfu\": %.6f", m->mfu);
            if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1 || zt_mesh_size(ctx->mesh, ZT_AX_EP) > 1)
                snprintf(a2a, sizeof a2a, ", \"alltoall_bytes\": %llu",
                         (unsigned long long)m->alltoall_bytes);
            fprintf(ctx->metrics_fp,
                    "{\"step\": %ld, \"loss\": %s, \"lr\": %.6e, \"grad_norm\": %s, "
                    "\"tokens_per_s\": %.1f, \"step_ms\": %.3f, \"data_wait_ms\": %.3f, "
                    "\"tflops\": %.6g%s, "
                    "\"comm_bytes\": %llu, \"mem_peak_bytes\": %llu%s%s%s}\n",
                    m->step, loss, m->lr, norm, m->tokens_per_s, m->step_ms,
                    m->data_wait_ms, m->tflops, mfu, (unsigned long long)m->comm_bytes,
                    (unsigned long long)m->mem_peak_bytes, fp16, a2a, aux);
        } else
            fprintf(ctx->metrics_fp, "{\"step\": %ld, \"val_loss\": %.6f}\n", m->step,
                    m->val_loss);
        metrics_flush(ctx);
    }
    if (ctx->cb.metrics) ctx->cb.metrics(ctx->cb.user, m);
}

/* ------------------------------------------------------------ training */

/* A masked source (one with count_targets, e.g. SFT data): *n = its counted
 * targets among samples [0, count) of step, which must not be 0; else *n is
 * left alone. */
static int counted_targets(const zt_data_source *src, long step, uint64_t count, double *n,
                           zt_status *st) {
    if (!src->count_targets) return ZT_OK;
    uint64_t c;
    ZT_TRY(src->count_targets(src->state, step, 0, (int)count, &c, st));
    if (c == 0)
        return zt_fail(st, ZT_EDATA, "%s %ld: the loss mask leaves no target to train on in its %llu "
                       "windows", step < 0 ? "evaluation round" : "step",
                       step < 0 ? -step : step + 1, (unsigned long long)count);
    *n = (double)c;
    return ZT_OK;
}

int zt_train_step(zt_ctx *ctx, zt_metrics *out, zt_status *st) {
    zt_status_clear(st);
    const zt_config *c = ctx->cfg;
    if (!ctx->has_train)
        return zt_fail(st, ZT_EINVAL, "no training data: call zt_ctx_open_data or zt_ctx_set_data");
    ZT_TRY(train_acts_ready(ctx, st));   /* (after zt_ctx_release_activations) */
    int B = c->micro_batch, T = c->seq_len, A = c->grad_accum;
    /* sequence parallel: the sp ranks of a group share their samples */
    long global_batch = (long)B * A * zt_mesh_size(ctx->mesh, ZT_AX_DP);
    const int Tl = T / zt_mesh_size(ctx->mesh, ZT_AX_SP);
    /* the loss is the mean over the global batch's counted targets: all
     * global_batch * T, or those of the source's loss mask (known before
     * the backward, the same on every rank) */
    double ntgt = (double)global_batch * T;
    ZT_TRY(counted_targets(&ctx->train, ctx->step, (uint64_t)global_batch, &ntgt, st));
    float dloss = (float)(1.0 / ntgt);
    /* the steps' threads, not the pre-fault thread, get the cores from now
     * on: what it did not populate yet the step faults itself */
    if (ctx->prefaulting) {
        zt_mem_prefault_stop();
        ctx->prefaulting = 0;
    }
    /* fp16: the loss (its gradient) is scaled; 1 otherwise */
    const float loss_scale = zt_scaler_scale(&ctx->scaler);
    double t0 = zt_now_s();

    zt_shard *sh = zt_ctx_tsh(ctx);   /* the trained parameters (LoRA: the adapters) */
    sh->step = ctx->step;
    ctx->sh->step = ctx->step;
    uint64_t comm0 = comm_total(ctx), a2a0 = zt_ctx_comm_bytes(ctx, ZT_COMM_ALLTOALL);
    /* the blocks' weight gradients: written fresh by the first
     * micro-batch's dW GEMMs (backend.h set_dw_fresh over fg[0, fn)), and
     * a tied head's by the first micro-batch's fused head (hg[0, hn):
     * shard.h zt_shard_head_fresh), the rest zeroed; else all zeroed */
    float *fg = NULL, *hg = NULL;
    size_t fn = 0, hn = 0;
    if (ctx->gradfresh && zt_shard_fresh_range(sh, &fg, &fn))
        zt_shard_zero_grads_fresh(sh, ctx->headfresh ? zt_shard_head_fresh(sh, &hg, &hn) : -1);
    else zt_shard_zero_grads(sh);
    /* the step's scalars (loss sum, gradient sum of squares, fp16's
     * non-finite count) are computed into backend memory and read back
     * once, below */
    zt_adamw *o = &ctx->opt;
    ctx->be->zero(o->scal, sizeof *o->scal);
    /* the backward's dloss, known now: each micro-batch's forward is told
     * it (and only the forward), so that its LM head computes its gradients
     * itself (classifier.h "fused") */
    const float bwd_dloss = dloss * loss_scale;
    ctx->sh->fwd_dloss = bwd_dloss;
    int dev_loss = 1;   /* every forward added its loss there (built-in models) */
    double loss_sum = 0.0, wait_s = 0.0, aux[2] = {0, 0};   /* MoE: load-balancing loss, forwards */
    for (int micro = 0; micro < A; ++micro) {
        uint64_t first = (uint64_t)zt_mesh_coord(ctx->mesh, ZT_AX_DP) * (uint64_t)(B * A) + (uint64_t)micro * B;
        ctx->sh->sample0 = first;   /* LoRA dropout's mask (lora.h) */
        double tw = zt_now_s();
        zt_prof_mark pm;
        zt_prof_begin(&pm);
        /* the last upload from the host arrays (a micro-step after the
         * first: queued after the previous one's collectives) */
        ZT_TRY(zt_batch_buf_wait(ctx, &ctx->acts, st));
        if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1) {
            ZT_TRY(ctx->train.get(ctx->train.state, ctx->step, first, B, T, ctx->sp_in, ctx->sp_tg, st));
            sp_slice(ctx, B, T, zt_batch_host_inputs(&ctx->acts), zt_batch_host_targets(&ctx->acts));
        } else {
            ZT_TRY(ctx->train.get(ctx->train.state, ctx->step, first, B, T,
                                  zt_batch_host_inputs(&ctx->acts), zt_batch_host_targets(&ctx->acts), st));
        }
        wait_s += zt_now_s() - tw;
        zt_batch_buf_upload_async(ctx, &ctx->acts, B * Tl, B * Tl);
        zt_prof_end(&pm, ZT_PROF_DATA);
        double ls;
        /* the passes' own engine time (ZeRO waits and bookkeeping, the
         * model's host code between kernels) is "comm + engine" too */
        zt_prof_mark pm_pass;
        zt_prof_begin(&pm_pass);
        const int taken = ctx->sh->loss_taken;
        /* the loss accumulator and the dloss are told to this forward only
         * (the forward engine; LoRA: the base), so that no early return
         * leaves them set */
        ctx->sh->loss_acc = &o->scal->loss_sum;
        ctx->sh->fwd_dloss_set = 1;
        /* (the fused head's first dW GEMM writes hg, and ends the range:
         * classifier.h zt_classifier_forward_fused) */
        if (hg && micro == 0) sh->be->set_dw_fresh(hg, hn);
        int rc = zt_shard_forward(ctx->sh, ctx->acts.acts, ctx->acts.inputs, ctx->acts.targets, B,
                                  Tl, 1, &ls, st);
        if (hg && micro == 0) {
            /* (no GEMM wrote it: an unfused head, or no rows) */
            if (sh->be->dw_fresh(hg)) sh->be->zero(hg, hn * sizeof(float));
            sh->be->set_dw_fresh(NULL, 0);
        }
        ctx->sh->fwd_dloss_set = 0;
        ctx->sh->loss_acc = NULL;
        if (rc != ZT_OK) return rc;
        if (ctx->sh->loss_taken == taken) dev_loss = 0;
        loss_sum += ls;
        double ax;
        const zt_arch *ar = zt_arch_of_ops(ctx->model->ops);
        if (ar && ar->aux_loss && ar->aux_loss(ctx->model, &ax)) {
            aux[0] += ax;
            aux[1] += 1;
        }
        if (fg && micro == 0) sh->be->set_dw_fresh(fg, fn);
        rc = zt_shard_backward(ctx->sh, ctx->acts.acts, bwd_dloss, st);
        if (fg && micro == 0) sh->be->set_dw_fresh(NULL, 0);
        if (rc != ZT_OK) return rc;
        zt_prof_end(&pm_pass, ZT_PROF_COMM);
    }
    /* communication and the engine's bookkeeping from here to the end of
     * the step, exclusive of the kernels (bench_train --breakdown) */
    zt_prof_mark pm_comm;
    zt_prof_begin(&pm_comm);
    ZT_TRY(zt_shard_reduce_grads(sh, st));
    /* fp16: unscale; the non-finite gradients and the sum of squares, into
     * the scalars */
    if (ctx->scaler.enabled && inject_overflow_at(ctx, ctx->step + 1) && ctx->rank == ctx->nranks - 1)
        zt_shard_poison_grad(sh);
    ZT_TRY(zt_shard_grad_scalars(sh, 1.0f / loss_scale, ctx->scaler.enabled ? &o->scal->nonfinite : NULL,
                                 &o->scal->sumsq, st));
    /* the schedule advances with the updates applied: an fp16 step skipped
     * on overflow does not move it (DeepSpeed's scheduler does not step) */
    double lr = zt_lr_at(c, o->t);
    /* One rank with the state on the device and the whole loss there: the
     * update is queued before the host reads anything, gated on the device
     * by the scalars (skipped on an fp16 overflow or a non-finite loss or
     * norm, clipped by the norm), and the scalars are read once, after it.
     * Otherwise (collectives need the host's values first: the loss, the
     * overflow flag and the norm are all-reduced on the host; offloaded
     * state; a model that returns its loss to the host) they are read once
     * before the update. */
    const int gated = ctx->nranks == 1 && dev_loss && zt_shard_state_on_device(sh);
    const zt_adamw before = *o;   /* the counters zt_adamw_begin moves */
    if (gated) {
        /* a background checkpoint may still be copying the owned state */
        zt_ctx_fence(ctx);
        ZT_TRY(zt_shard_update_ex(sh, o, lr, 1.0, o->scal, c->grad_clip, st));
    }
    zt_step_scalars hs;
    if (zt_mesh_has_fence(ctx->mesh) && ctx->be->to_host_async && ctx->be->copy_wait &&
        zt_mem_async_into(ctx->be, o->hscal)) {
        /* NCCL: the passes waited for their collectives on the stream only;
         * the read is queued into page-locked memory (it returns at once:
         * into pageable memory CUDA would return only once the copy, and
         * so every collective before it, completed, with no bound), and the
         * fence's one bounded host wait covers it and reports a hung or
         * failed collective */
        void *h = ctx->be->to_host_async(o->hscal, o->scal, sizeof hs);
        const int frc = zt_mesh_fence(ctx->mesh, st);
        ctx->be->copy_wait(h);   /* (after a failure too: the copy writes hscal) */
        ZT_TRY(frc);
        hs = *o->hscal;
    } else if (zt_mesh_has_fence(ctx->mesh)) {
        /* (the backend could not pin hscal) the fence's bounded wait first,
         * then the synchronous read of what is done */
        ZT_TRY(zt_mesh_fence(ctx->mesh, st));
        ctx->be->to_host(&hs, o->scal, sizeof hs);
    } else {
        ctx->be->to_host(&hs, o->scal, sizeof hs);   /* the step's one read */
    }
    loss_sum += hs.loss_sum;   /* (one of the two parts is 0) */
    if (!gated && ctx->nranks > 1) {
        zt_group_where(ctx->mesh->world, "step %ld, loss", ctx->step + 1);
        ZT_TRY(ctx->mesh->world->ops->allreduce_sum(ctx->mesh->world, &loss_sum, 1, ZT_F64, st));
    }
    double loss = loss_sum / ntgt;
    if (aux[1] > 0 && ctx->nranks > 1) {
        zt_group_where(ctx->mesh->world, "step %ld, load-balancing loss", ctx->step + 1);
        ZT_TRY(ctx->mesh->world->ops->allreduce_sum(ctx->mesh->world, aux, 2, ZT_F64, st));
    }
    int skipped = 0, rc = ZT_OK;
    if (ctx->scaler.enabled) {
        /* fp16: skip the step on every rank if any rank's gradients (or
         * the loss) overflowed; the scaler adapts */
        size_t nonfinite = (size_t)hs.nonfinite;
        if (!isfinite(loss)) nonfinite++;
        int overflow;
        zt_group_where(ctx->mesh->world, "step %ld, overflow check", ctx->step + 1);
        rc = zt_prec_overflow_any(ctx->mesh->world, nonfinite, &overflow, st);
        if (rc == ZT_OK) rc = zt_scaler_update(&ctx->scaler, overflow, ctx->step + 1, &skipped, st);
    }
    double norm = NAN;
    if (rc == ZT_OK && !skipped) {
        double sq = hs.sumsq;
        if (!gated) rc = zt_shard_sumsq_reduce(sh, &sq, st);
        norm = sqrt(sq);
        if (rc == ZT_OK && (!isfinite(norm) || !isfinite(loss)))
            rc = zt_fail(st, ZT_EDATA, "step %ld: loss %g / gradient norm %g is not finite "
                         "(learning rate %g too high?)", ctx->step + 1, loss, norm, c->lr);
        if (rc == ZT_OK && !gated) {
            zt_ctx_fence(ctx);
            rc = zt_shard_update_ex(sh, o, lr, zt_clip_scale(norm, c->grad_clip), NULL, 0.0, st);
        }
    }
    if (gated && (rc != ZT_OK || skipped)) {
        /* the gate skipped the update on the device: no step was applied */
        o->t = before.t;
        o->bc1 = before.bc1;
        o->bc2 = before.bc2;
        o->fresh = before.fresh;
    }
    if (rc != ZT_OK) return rc;
    ZT_TRY(zt_be_check(ctx->be, "training step", st));
    ctx->step++;

    double dt = zt_now_s() - t0;
    ctx->train_time_s += dt;
    zt_mem_stats ms;
    zt_mem_get(&ms);
    zt_metrics met;
    memset(&met, 0, sizeof met);
    met.kind = ZT_METRIC_STEP;
    met.step = ctx->step;
    met.steps_total = c->steps;
    met.loss = loss;
    met.aux_loss = aux[1] > 0 ? aux[0] / aux[1] : NAN;
    met.lr = lr;
    met.grad_norm = norm;
    met.step_ms = dt * 1e3;
    met.tokens_per_s = (double)global_batch * T / (dt > 0 ? dt : 1e-9);
    met.eta_s = ctx->train_time_s / (double)ctx->step * (double)(c->steps - ctx->step);
    met.mem_peak_bytes = ms.peak_total;
    met.data_wait_ms = wait_s * 1e3;
    met.comm_bytes = comm_total(ctx) - comm0;
    met.alltoall_bytes = zt_ctx_comm_bytes(ctx, ZT_COMM_ALLTOALL) - a2a0;
    met.loss_scale = loss_scale;
    met.skipped = skipped;
    /* Rank 0's timing is the one everybody reports. */
    if (ctx->nranks > 1) {
        double tv[5] = {met.step_ms, met.tokens_per_s, met.eta_s, (double)met.comm_bytes,
                        (double)met.alltoall_bytes};
        ZT_TRY(ctx->mesh->world->ops->bcast(ctx->mesh->world, tv, 5, ZT_F64, 0, st));
        met.step_ms = tv[0]; met.tokens_per_s = tv[1]; met.eta_s = tv[2];
        met.comm_bytes = (uint64_t)tv[3];
        met.alltoall_bytes = (uint64_t)tv[4];
    }
    if (!ctx->perf_set) {
        ctx->fpt = zt_ctx_flops_per_token(ctx);
        ctx->peak = zt_ctx_peak_tflops(ctx, NULL, 0);
        ctx->perf_set = 1;
    }
    met.tflops = ctx->fpt * met.tokens_per_s / ctx->nranks * 1e-12;
    met.mfu = ctx->peak > 0 ? met.tflops / ctx->peak : NAN;
    zt_prof_end(&pm_comm, ZT_PROF_COMM);
    if (out) *out = met;
    return ZT_OK;
}

/* ztrain.eval_batch_size is the global number of samples per evaluation
 * batch, split over the ranks in contiguous shares of ceil(E / nranks) (the
 * last ranks may hold fewer, or only padding), so the same samples are
 * evaluated at any world size.  A share is run in forwards of eval_rows
 * rows (zt_config_eval_rows: the share, or the micro batch for the derived
 * default), every rank the same forwards. */
static int eval_rows(const zt_ctx *ctx) {
    /* (sequence parallel: over the data parallel groups) */
    return zt_config_eval_rows(ctx->cfg, zt_mesh_size(ctx->mesh, ZT_AX_DP));
}

static int eval_acts_ready(zt_ctx *ctx, zt_status *st) {
    if (ctx->eval_acts.acts) return ZT_OK;
    if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1)
        ZT_TRY(sp_buffers(ctx, (size_t)eval_rows(ctx) * ctx->cfg->seq_len, st));
    return zt_batch_buf_alloc(ctx, &ctx->eval_acts, eval_rows(ctx),
                              ctx->cfg->seq_len / zt_mesh_size(ctx->mesh, ZT_AX_SP), 0, ZT_MEM_EVAL, st);
}

int zt_evaluate(zt_ctx *ctx, double *val_loss, zt_status *st) {
    zt_status_clear(st);
    if (!ctx->has_val)
        return zt_fail(st, ZT_EINVAL, "no validation data (ztrain.data.val is empty)");
    ZT_TRY(eval_acts_ready(ctx, st));
    int E = ctx->cfg->eval_batch_size, T = ctx->cfg->seq_len, R = eval_rows(ctx);
    /* this rank's samples of every round: [first, first + k) of the E */
    const long share = ((long)E + zt_mesh_size(ctx->mesh, ZT_AX_DP) - 1) / zt_mesh_size(ctx->mesh, ZT_AX_DP);
    long first = (long)zt_mesh_coord(ctx->mesh, ZT_AX_DP) * share;
    const int Tl = T / zt_mesh_size(ctx->mesh, ZT_AX_SP);
    long k = first >= E ? 0 : (E - first < share ? E - first : share);
    double sum = 0.0, ntgt = 0.0;
    for (int r = 0; r < ctx->cfg->eval_batches; ++r) {
        double nr = 0.0;
        ZT_TRY(counted_targets(&ctx->val, -1 - (long)r, (uint64_t)E, &nr, st));
        ntgt += nr;
        for (long c0 = 0; c0 < share; c0 += R) {
            int *in = zt_batch_host_inputs(&ctx->eval_acts), *tg = zt_batch_host_targets(&ctx->eval_acts);
            int *fin = zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1 ? ctx->sp_in : in, *ftg = zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1 ? ctx->sp_tg : tg;
            int kc = k - c0 <= 0 ? 0 : k - c0 < R ? (int)(k - c0) : R;
            if (kc > 0)
                ZT_TRY(ctx->val.get(ctx->val.state, -1 - (long)r, (uint64_t)(first + c0), kc, T, fin, ftg,
                                    st));
            /* padding rows (every rank runs the same forwards): no target */
            for (long i = (long)kc * T; i < (long)R * T; ++i) { fin[i] = 0; ftg[i] = -1; }
            if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1) sp_slice(ctx, R, T, in, tg);
            zt_batch_buf_upload(ctx, &ctx->eval_acts, R * Tl, R * Tl);
            double ls;
            ZT_TRY(zt_shard_forward(ctx->sh, ctx->eval_acts.acts, ctx->eval_acts.inputs,
                                    ctx->eval_acts.targets, R, Tl, 0, &ls, st));
            sum += ls;
        }
    }
    ZT_TRY(zt_be_check(ctx->be, "evaluation", st));
    if (ctx->nranks > 1)
        ZT_TRY(ctx->mesh->world->ops->allreduce_sum(ctx->mesh->world, &sum, 1, ZT_F64, st));
    *val_loss = ctx->val.count_targets ? sum / ntgt
                                       : sum / ((double)ctx->cfg->eval_batches * E * T);
    return ZT_OK;
}

int zt_loss(zt_ctx *ctx, const int *inputs, const int *targets, int B, int T,
            double *loss, zt_status *st) {
    zt_status_clear(st);
    long counted = 0;   /* the loss is the mean over the targets >= 0 */
    for (int i = 0; i < B * T; ++i) {
        if (inputs[i] < 0 || inputs[i] >= ctx->cfg->model.vocab)
            return zt_fail(st, ZT_EINVAL, "token %d at position %d outside vocab %d",
                           inputs[i], i, ctx->cfg->model.vocab);
        counted += targets[i] >= 0;
    }
    if (counted == 0) return zt_fail(st, ZT_EINVAL, "zt_loss: no target >= 0 in the batch");
    /* sequence parallel: every rank of a group computes its T / sp tokens of
     * the same batch (a collective over the group), the sums added up */
    const int sp = zt_mesh_size(ctx->mesh, ZT_AX_SP);
    if (sp > 1 && T % sp)
        return zt_fail(st, ZT_EINVAL, "zt_loss: T=%d is not divisible by sequence_parallel_size=%d",
                       T, sp);
    const int Tl = T / sp;
    zt_batch_buf b;
    ZT_TRY(zt_batch_buf_alloc(ctx, &b, B, Tl, 0, ZT_MEM_EVAL, st));
    for (int r = 0; r < B; ++r) {
        const size_t src = (size_t)r * T + (size_t)zt_mesh_coord(ctx->mesh, ZT_AX_SP) * Tl, dst = (size_t)r * Tl;
        zt_xcopy(ctx->be, b.inputs + dst, 1, inputs + src, 0, sizeof(int) * (size_t)Tl);
        zt_xcopy(ctx->be, b.targets + dst, 1, targets + src, 0, sizeof(int) * (size_t)Tl);
    }
    double ls = 0.0;
    int rc = zt_shard_forward(ctx->sh, b.acts, b.inputs, b.targets, B, Tl, 0, &ls, st);
    if (rc == ZT_OK) rc = zt_be_check(ctx->be, "loss", st);
    zt_group *spg = ctx->mesh->g[ZT_AX_SP];
    if (rc == ZT_OK && sp > 1) rc = spg->ops->allreduce_sum(spg, &ls, 1, ZT_F64, st);
    *loss = ls / (double)counted;
    zt_batch_buf_free(ctx, &b);
    return rc;
}

static void fmt_duration(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

static void log_memory(zt_ctx *ctx) {
    zt_mem_stats ms;
    zt_mem_get(&ms);
    zt_log(ctx, ZT_LOG_INFO, "memory per rank (accounted, peak): total %.2f MiB", ms.peak_total / 1048576.0);
    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
        if (!ms.peak[t]) continue;
        char host[64] = "";
        if (ms.host_peak[t])
            snprintf(host, sizeof host, zt_be_device(ctx->be) ? "  (in host memory: %.2f MiB)"
                                                               : "  (offloaded: %.2f MiB in host memory)",
                     ms.host_peak[t] / 1048576.0);
        zt_log(ctx, ZT_LOG_INFO, "  %-16s %10.2f MiB%s", zt_mem_tag_name(t), ms.peak[t] / 1048576.0,
               host);
    }
    if (ctx->cfg->pin_optimizer || ctx->cfg->pin_param || ms.pinned_peak)
        zt_log(ctx, ZT_LOG_INFO, "  %-16s %10.2f MiB  (page-locked host memory%s%s%s)", "pinned",
               ms.pinned_peak / 1048576.0, ctx->be->host_register ? "" : "; the ",
               ctx->be->host_register ? "" : ctx->be->name,
               ctx->be->host_register ? "" : " backend cannot pin: pin_memory has no effect");
}

/* ztrain.memory_report: current / peak / predicted per category (rank 0's
 * view through the log callback; a "memory" record in the metrics file). */
static void memory_report(zt_ctx *ctx, const char *when) {
    zt_mem_stats ms;
    zt_mem_get(&ms);
    const zt_memplan *p = ctx->have_plan ? &ctx->plan : NULL;
    char a[32], b[32], c[32];
    zt_log(ctx, ZT_LOG_INFO, "memory report (%s), per rank: %-16s %12s %12s %12s", when, "category",
           "current", "peak", "predicted");
    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
        /* the accounted figures count a category's blocks in both places
         * (device runs: device and host blocks), so the prediction does too
         * (exact where a category lives in one place, an upper bound else) */
        const uint64_t pc = p ? p->cat[ZT_MP_HOST][t] + p->cat[ZT_MP_DEVICE][t] : 0;
        if (!ms.peak[t] && !pc) continue;
        zt_memplan_fmt_bytes((double)ms.cur[t], a, sizeof a);
        zt_memplan_fmt_bytes((double)ms.peak[t], b, sizeof b);
        if (p) zt_memplan_fmt_bytes((double)pc, c, sizeof c);
        char host[64] = "";
        if (ms.host_peak[t])
            snprintf(host, sizeof host, zt_be_device(ctx->be) ? "  (in host memory: %.2f MiB)"
                                                               : "  (offloaded: %.2f MiB in host memory)",
                     ms.host_peak[t] / 1048576.0);
        zt_log(ctx, ZT_LOG_INFO, "  %-16s %12s %12s %12s%s", zt_mem_tag_name(t), a, b, p ? c : "-",
               host);
    }
    zt_memplan_fmt_bytes((double)ms.cur_total, a, sizeof a);
    zt_memplan_fmt_bytes((double)ms.peak_total, b, sizeof b);
    if (p) zt_memplan_fmt_bytes((double)p->accounted_peak, c, sizeof c);
    zt_log(ctx, ZT_LOG_INFO, "  %-16s %12s %12s %12s", "total", a, b, p ? c : "-");
    if (ctx->cfg->pin_optimizer || ctx->cfg->pin_param || ms.pinned_peak) {
        zt_memplan_fmt_bytes((double)ms.pinned_cur, a, sizeof a);
        zt_memplan_fmt_bytes((double)ms.pinned_peak, b, sizeof b);
        if (p) zt_memplan_fmt_bytes((double)p->pinned_bytes, c, sizeof c);
        zt_log(ctx, ZT_LOG_INFO, "  %-16s %12s %12s %12s  (page-locked host memory%s)", "pinned", a, b,
               p ? c : "-", ctx->be->host_register ? "" : "; this backend cannot pin");
    }
    /* accounted blocks, both places (device runs: device and host blocks) */
    if (p)
        zt_log(ctx, ZT_LOG_INFO, "memory peak per rank: accounted %llu bytes, predicted %llu bytes "
               "(%+.2f%%)", (unsigned long long)ms.peak_total, (unsigned long long)p->accounted_peak,
               ms.peak_total ? 100.0 * ((double)p->accounted_peak - (double)ms.peak_total) /
                                   (double)ms.peak_total : 0.0);
    /* device backends: what the backend itself measured (cuda: every
     * cudaMalloc, its cuBLAS workspace and scratch included) against the
     * planner's device peak */
    size_t dcur = 0, dpeak = 0;
    const int have_dev = zt_be_device(ctx->be) && ctx->be->mem_stats && p && p->gpu;
    if (have_dev) {
        ctx->be->mem_stats(&dcur, &dpeak);
        char name[160] = "";
        size_t fr, tot;
        if (ctx->be->device_memory) ctx->be->device_memory(&fr, &tot, name, sizeof name);
        const double pd = (double)p->peak[ZT_MP_DEVICE];
        char kw[192] = "";
        if (p->kernel_ws_bytes)
            snprintf(kw, sizeof kw, "; of it kernel workspace %llu bytes",
                     (unsigned long long)p->kernel_ws_bytes);
        /* what a default CLI run adds after the report (the llm.c weights
         * file when it writes one, the sample) */
        if (p->end_peak[ZT_MP_DEVICE] > p->peak[ZT_MP_DEVICE])
            snprintf(kw + strlen(kw), sizeof kw - strlen(kw), "; with the end of a CLI run %llu bytes",
                     (unsigned long long)p->end_peak[ZT_MP_DEVICE]);
        zt_log(ctx, ZT_LOG_INFO, "device memory peak per rank (%s): measured %llu bytes, "
               "predicted %llu bytes (%+.2f%%%s)", name[0] ? name : ctx->be->name,
               (unsigned long long)dpeak, (unsigned long long)p->peak[ZT_MP_DEVICE],
               dpeak ? 100.0 * (pd - (double)dpeak) / (double)dpeak : 0.0, kw);
    }
    if (ctx->metrics_fp) {
        fprintf(ctx->metrics_fp, "{\"step\": %ld, \"memory\": {", ctx->step);
        for (int t = 0; t < ZT_MEM_NTAGS; ++t)
            fprintf(ctx->metrics_fp, "\"%s\": [%llu, %llu], ", zt_mem_tag_name(t),
                    (unsigned long long)ms.cur[t], (unsigned long long)ms.peak[t]);
        fprintf(ctx->metrics_fp, "\"current_bytes\": %llu, \"peak_bytes\": %llu",
                (unsigned long long)ms.cur_total, (unsigned long long)ms.peak_total);
        fprintf(ctx->metrics_fp, ", \"pinned_bytes\": [%llu, %llu]",
                (unsigned long long)ms.pinned_cur, (unsigned long long)ms.pinned_peak);
        if (p) fprintf(ctx->metrics_fp, ", \"predicted_peak_bytes\": %llu",
                       (unsigned long long)p->accounted_peak);
        if (have_dev)
            fprintf(ctx->metrics_fp, ", \"device_peak_bytes\": %llu, \"predicted_device_peak_bytes\": %llu",
                    (unsigned long long)dpeak, (unsigned long long)p->peak[ZT_MP_DEVICE]);
        fprintf(ctx->metrics_fp, "}}\n");
        metrics_flush(ctx);
    }
    if (ctx->tb.fp) {
        tb_scalar(ctx, "memory/report_current_bytes", ctx->step, (double)ms.cur_total);
        tb_scalar(ctx, "memory/report_peak_bytes", ctx->step, (double)ms.peak_total);
        if (p) tb_scalar(ctx, "memory/predicted_peak_bytes", ctx->step, (double)p->accounted_peak);
        if (have_dev) {
            tb_scalar(ctx, "memory/device_peak_bytes", ctx->step, (double)dpeak);
            tb_scalar(ctx, "memory/predicted_device_peak_bytes", ctx->step,
                      (double)p->peak[ZT_MP_DEVICE]);
        }
        tb_flush(ctx);
    }
}

static void log_comm(zt_ctx *ctx) {
    if (ctx->nranks < 2) return;
    for (int k = 0; k < ZT_COMM_NKINDS; ++k) {
        uint64_t b = zt_ctx_comm_bytes(ctx, k);
        if (b)
            zt_log(ctx, ZT_LOG_INFO, "communication (rank 0): %-14s %10.2f MiB sent",
                   zt_comm_kind_name(k), b / 1048576.0);
    }
}

int zt_train(zt_ctx *ctx, zt_status *st) {
    zt_status_clear(st);
    const zt_config *c = ctx->cfg;
    if (!ctx->has_train)
        return zt_fail(st, ZT_EINVAL, "no training data: call zt_ctx_open_data or zt_ctx_set_data");
    ZT_TRY(zt_ctx_init_pending(ctx, st));   /* (a save may come before any step) */
    ZT_TRY(metrics_open(ctx, st));
    if (ctx->has_val) ZT_TRY(eval_acts_ready(ctx, st));
    const int report = zt_config_memory_report(c);
    /* "model: P parameters (L layers, H heads, C wide, context T, vocab V)"
     * is parsed by bench/ (zero.sh, gpu_table.py); the architecture follows */
    const char *arch = ctx->model->ops->name ? ctx->model->ops->name : "?";
    char more[256] = "";
    const zt_arch *a = zt_arch_find(arch);   /* a built-in model: its settings */
    if (a && a->model_ops == ctx->model->ops) a->summary(&c->model, ZT_ARCH_SUM_LOG, more, sizeof more);
    zt_log(ctx, ZT_LOG_INFO, "model: %zu parameters (%d layers, %d heads, %d wide, context %d, "
           "vocab %d), architecture %s%s", ctx->model->num_params, c->model.n_layer,
           c->model.n_head, c->model.n_embd, c->model.context, c->model.vocab, arch, more);
    if (zt_mesh_size(ctx->mesh, ZT_AX_SP) > 1)
        zt_log(ctx, ZT_LOG_INFO, "batch: %d global = %d micro x %d accumulation x %d data parallel "
               "groups; sequence parallel: %d ranks per group share each sample, %d of its %d tokens "
               "each (all-to-alls around attention); %d threads per rank", c->train_batch_size,
               c->micro_batch, c->grad_accum, zt_mesh_size(ctx->mesh, ZT_AX_DP), zt_mesh_size(ctx->mesh, ZT_AX_SP), c->seq_len / zt_mesh_size(ctx->mesh, ZT_AX_SP), c->seq_len,
               ctx->threads);
    else
        zt_log(ctx, ZT_LOG_INFO, "batch: %d global = %d micro x %d accumulation x %d ranks; %d threads per rank",
               c->train_batch_size, c->micro_batch, c->grad_accum, ctx->nranks, ctx->threads);
    if (ctx->nranks > 1) {
        char topo[1024];
        zt_rt_topology(topo, sizeof topo);
        zt_log(ctx, ZT_LOG_INFO, "topology: %s", topo);
        int G = zt_config_shard_group(c, ctx->nranks, zt_rt()->local_size);
        if (c->zero_stage > 0 && G > 0 && G < ctx->nranks && zt_rt()->n_nodes > 0) {
            /* hybrid sharding: is each shard group inside one node? */
            int inside = 1, whole = 1;
            for (int g0 = 0; g0 < ctx->nranks; g0 += G) {
                int nd = zt_rt_node_of(g0), cnt = 0;
                for (int r = g0; r < g0 + G; ++r) inside &= zt_rt_node_of(r) == nd;
                for (int r = 0; r < ctx->nranks; ++r) cnt += zt_rt_node_of(r) == nd;
                whole &= cnt == G;
            }
            zt_log(ctx, ZT_LOG_INFO, "hybrid sharding: %d groups of %d ranks, %s", ctx->nranks / G, G,
                   inside && whole ? "one node each (parameters gathered inside a node, gradients "
                                     "averaged across nodes)"
                   : inside ? "each inside one node"
                            : "spanning nodes (shard traffic crosses nodes every step; a group of "
                              "the ranks per node keeps it inside a node)");
        }
    }
    if (ctx->prec != ZT_PREC_FP32) {
        char scale[96] = "";
        if (ctx->scaler.enabled)
            snprintf(scale, sizeof scale, "; loss scale %g (%s)", ctx->scaler.s.scale,
                     ctx->scaler.dynamic ? "dynamic" : "static");
        const int cuda = strcmp(c->backend, "cuda") == 0;
        zt_log(ctx, ZT_LOG_INFO, "precision: %s parameters, fp32 master weights, AdamW state and "
               "activations, %s matmul operands%s; gradients reduced in %s%s",
               zt_precision_name(ctx->prec), zt_matmul_bf16_of(c, cuda) ? "bf16" : "fp32",
               zt_acts16_of(c, cuda) ? " (the activations only matmuls, attention and the MLP read kept in bf16; "
                                       "docs/precision.md)" : "",
               c->comm_dtype, scale);
    }
    {
        char src[192];
        /* (kept for the steps' metrics: no second lookup) */
        const double fpt = zt_ctx_flops_per_token(ctx), peak = zt_ctx_peak_tflops(ctx, src, sizeof src);
        ctx->fpt = fpt;
        ctx->peak = peak;
        ctx->perf_set = 1;
        char pk[256];
        if (peak > 0) snprintf(pk, sizeof pk, "MFU against %.4g TFLOP/s a device (%s)", peak, src);
        else snprintf(pk, sizeof pk, "no MFU: no known peak for this device (ztrain.peak_tflops sets one)");
        zt_log(ctx, ZT_LOG_INFO, "throughput: the model's %.4g GFLOP a token (6 a trained parameter, 4 a "
               "frozen one, the attention 6 L n_head head_dim T; docs/production.md), TFLOP/s a device; %s",
               fpt * 1e-9, pk);
    }
    while (ctx->step < c->steps) {
        zt_metrics met;
        ZT_TRY(zt_train_step(ctx, &met, st));
        metrics_emit(ctx, &met);
        if (ctx->step % c->log_every == 0 || ctx->step == c->steps || ctx->step == 1) {
            tb_flush(ctx);   /* TensorBoard sees the run at each log line */
            char eta[32];
            fmt_duration(met.eta_s, eta, sizeof eta);
            char scale[64] = "";
            if (ctx->scaler.enabled)
                snprintf(scale, sizeof scale, " | scale %g%s", met.loss_scale,
                         met.skipped ? " (overflow: skipped)" : "");
            char mfu[24] = "";
            if (!isnan(met.mfu)) snprintf(mfu, sizeof mfu, " (MFU %.1f%%)", 100.0 * met.mfu);
            zt_log(ctx, ZT_LOG_INFO, "step %5ld/%ld | loss %.4f | lr %.2e | norm %.3f | %8.0f tok/s | %7.1f ms/step | "
                   "%.3g TFLOP/s%s | ETA %s%s",
                   met.step, c->steps, met.loss, met.lr, met.grad_norm, met.tokens_per_s,
                   met.step_ms, met.tflops, mfu, eta, scale);
        }
        int last = ctx->step == c->steps;
        if (ctx->has_val && ((c->eval_every > 0 && ctx->step % c->eval_every == 0) || last)) {
            double vl;
            ZT_TRY(zt_evaluate(ctx, &vl, st));
            ctx->last_val_loss = vl;
            zt_metrics em;
            memset(&em, 0, sizeof em);
            em.kind = ZT_METRIC_EVAL;
            em.step = ctx->step;
            em.steps_total = c->steps;
            em.val_loss = vl;
            metrics_emit(ctx, &em);
            tb_flush(ctx);
            zt_log(ctx, ZT_LOG_INFO, "eval  %5ld/%ld | val loss %.4f", ctx->step, c->steps, vl);
        }
        if (ctx->hook) {
            int hr = ctx->hook(ctx->hook_user, ctx, st);
            if (hr == ZT_EPREEMPTED) {
                zt_log(ctx, ZT_LOG_INFO, "stopping after step %ld (preempted)", ctx->step);
                log_memory(ctx);
                log_comm(ctx);
                return zt_fail(st, ZT_EPREEMPTED, "preempted after step %ld; checkpoint saved", ctx->step);
            }
            if (hr != ZT_OK) return hr;
        }
        if (report > 0 && ctx->step % report == 0 && !last) {
            char when[48];
            snprintf(when, sizeof when, "step %ld", ctx->step);
            memory_report(ctx, when);
        }
    }
    if (ctx->scaler.enabled)
        zt_log(ctx, ZT_LOG_INFO, "fp16: %llu steps skipped on gradient overflow; loss scale now %g",
               (unsigned long long)ctx->scaler.skipped, ctx->scaler.s.scale);
    if (report >= 0) memory_report(ctx, "end of training");
    else log_memory(ctx);
    log_comm(ctx);
    if (c->model.n_experts > 0 && strcmp(ctx->be->name, "cuda") == 0 && zt_acts16_of(c, 1)) {
        /* (the experts' forward GEMMs: grouped, or the per-expert loop
         * after cuBLAS refused the grouped call, and why) */
        char why[200];
        zt_cuda_grouped_report(why, sizeof why);
        zt_log(ctx, ZT_LOG_INFO, "MoE experts' forward GEMMs: %s", why);
    }
    tb_flush(ctx);
    zt_ctx_fence(ctx);   /* the caller may write the state now */
    return ZT_OK;
}
