/*
 * config_check.c -- zt_config_finalize: the rules between keys, the site
 * limits, and the values derived from others (the batch triple, seq_len,
 * eval_batch_size, total_num_steps), each marked ZT_SRC_DERIVED and
 * recomputed by every finalize.
 *
 * Settings that are valid but not implemented yet are refused in ONE place:
 * check_implemented().
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "arch.h"
#include "lora.h"
#include "ztrain_env.h"

/* ================================================================ finalize */

/* Valid settings that this build cannot run yet.  Later work removes these
 * refusals one by one as features land; nothing here is silently ignored. */
static int check_implemented(const zt_config *c, zt_status *st) {
    /* bf16 / fp16 (precision.h), offload_optimizer=cpu and offload_param=cpu
     * are implemented; on the CPU backend the offloaded state is host memory
     * anyway, and only its accounting changes */
    (void)c;
    (void)st;
    /* ztrain.backend=cuda is checked when the context picks the device
     * (no device / no CUDA in this build: one clear error there) */
    return ZT_OK;
}

static void fmt_batch(char *buf, size_t n, int v) {
    if (v > 0) snprintf(buf, n, "%d", v);
    else snprintf(buf, n, "unset");
}

static int batch_fail(zt_status *st, int tbs, int mb, int ga, int world, const char *why) {
    char a[32], b[32], c[32];
    fmt_batch(a, sizeof a, tbs);
    fmt_batch(b, sizeof b, mb);
    fmt_batch(c, sizeof c, ga);
    return zt_fail(st, ZT_EINVAL,
                   "batch sizes: train_batch_size=%s, train_micro_batch_size_per_gpu=%s, "
                   "gradient_accumulation_steps=%s, world_size=%d: %s",
                   a, b, c, world, why);
}

/* DeepSpeed's rule: train_batch_size == micro * accum * world_size. */
static int resolve_batch(zt_config *c, int world, zt_status *st) {
    const int tbs = c->train_batch_size, mb = c->micro_batch, ga = c->grad_accum;
    const long long w = world;
    long long T = tbs, M = mb, A = ga;
    char why[160];
    if (tbs > 0 && mb > 0 && ga > 0) {
        if (M * A * w != T) {
            snprintf(why, sizeof why, "train_batch_size must equal micro * accum * world_size"
                     " = %lld", M * A * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
    } else if (tbs > 0 && mb > 0) {
        if (T % (M * w) != 0) {
            snprintf(why, sizeof why, "train_batch_size is not divisible by micro * "
                     "world_size = %lld", M * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
        A = T / (M * w);
    } else if (tbs > 0 && ga > 0) {
        if (T % (A * w) != 0) {
            snprintf(why, sizeof why, "train_batch_size is not divisible by accum * "
                     "world_size = %lld", A * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
        M = T / (A * w);
    } else if (mb > 0 && ga > 0) {
        T = M * A * w;
    } else if (tbs > 0) {
        if (T % w != 0)
            return batch_fail(st, tbs, mb, ga, world,
                              "train_batch_size is not divisible by world_size");
        A = 1;
        M = T / w;
    } else if (mb > 0) {
        A = 1;
        T = M * w;
    } else if (ga > 0) {
        return batch_fail(st, tbs, mb, ga, world,
                          "gradient_accumulation_steps alone cannot determine the batch; also "
                          "set train_micro_batch_size_per_gpu or train_batch_size");
    } else {
        M = 16;
        A = 1;
        T = M * w;
    }
    if (T > INT_MAX)
        return batch_fail(st, tbs, mb, ga, world, "train_batch_size would overflow");
    int it = zt_cfg_key_index("train_batch_size"), im = zt_cfg_key_index("train_micro_batch_size_per_gpu"),
        ia = zt_cfg_key_index("gradient_accumulation_steps");
    if (tbs <= 0) { c->train_batch_size = (int)T; c->src[it] = ZT_SRC_DERIVED; }
    if (mb <= 0) { c->micro_batch = (int)M; c->src[im] = ZT_SRC_DERIVED; }
    if (ga <= 0) { c->grad_accum = (int)A; c->src[ia] = ZT_SRC_DERIVED; }
    return ZT_OK;
}

/* Keys whose value zt_config_finalize may compute. */
static const char *const derived_keys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "ztrain.eval_batch_size", "scheduler.params.total_num_steps", "ztrain.seq_len",
};

/* Forget values computed by an earlier finalize so it can be redone. */
static void reset_derived(zt_config *c) {
    for (size_t j = 0; j < sizeof derived_keys / sizeof derived_keys[0]; j++) {
        int i = zt_cfg_key_index(derived_keys[j]);
        if (i < 0 || c->src[i] != ZT_SRC_DERIVED) continue;
        kval v;
        memset(&v, 0, sizeof v);
        if (zt_cfg_keys[i].def && zt_cfg_parse_str(&zt_cfg_keys[i], zt_cfg_keys[i].def, &v) == ZT_OK)
            zt_cfg_store_raw(c, i, &v);
        c->src[i] = ZT_SRC_DEFAULT;
    }
}

int zt_model_kv_heads(const zt_model_config *mc) {
    return mc->n_kv_head > 0 ? mc->n_kv_head : mc->n_head;
}
int zt_model_head_dim(const zt_model_config *mc) {
    return mc->head_dim > 0 ? mc->head_dim : (mc->n_head > 0 ? mc->n_embd / mc->n_head : 0);
}
int zt_model_intermediate(const zt_model_config *mc) {
    return mc->intermediate > 0 ? mc->intermediate : 4 * mc->n_embd;
}

int zt_mlp_only_parse(const char *s, int n, int *out) {
    int k = 0;
    const char *p = s;
    while (*p == ' ') ++p;
    while (*p) {
        char *end;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1 << 24) return -1;
        if (k < n && out) out[k] = (int)v;
        ++k;
        p = end;
        while (*p == ' ') ++p;
        if (*p == ',') {
            ++p;
            while (*p == ' ') ++p;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    return k;
}

int zt_model_layer_sparse(const zt_model_config *mc, int l) {
    if (mc->n_experts <= 0) return 0;
    const int step = mc->decoder_sparse_step > 0 ? mc->decoder_sparse_step : 1;
    if ((l + 1) % step) return 0;
    const char *p = mc->mlp_only_layers;
    while (*p) {   /* (malformed lists are refused by the llama check) */
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v == l) return 0;
        p = end;
        while (*p == ' ' || *p == ',') ++p;
    }
    return 1;
}

int zt_model_sparse_layers(const zt_model_config *mc) {
    int n = 0;
    for (int l = 0; l < mc->n_layer; ++l) n += zt_model_layer_sparse(mc, l);
    return n;
}

/* The model shape's cross-key rules: the architecture's (arch.h). */
/* sequence_parallel_size N: groups of N whole ranks, T/N tokens each, heads
 * split N ways (GQA: the key/value heads too; replicating key/value heads
 * when there are fewer than N is not implemented) */
static int check_seqpar(zt_config *c, int world, zt_status *st) {
    const int N = c->model.seq_parallel;
    if (N < 1) c->model.seq_parallel = 1;
    if (N <= 1) return ZT_OK;
    const zt_model_config *m = &c->model;
    const int kv = zt_model_kv_heads(m);
    if (world % N)
        return zt_fail(st, ZT_EINVAL, "sequence_parallel_size=%d must divide the number of ranks "
                       "(%d)", N, world);
    if (c->seq_len % N)
        return zt_fail(st, ZT_EINVAL, "sequence_parallel_size=%d must divide ztrain.seq_len=%d "
                       "(each rank holds seq_len / N consecutive tokens)", N, c->seq_len);
    if (m->n_head % N)
        return zt_fail(st, ZT_EINVAL, "sequence_parallel_size=%d must divide the %d attention "
                       "heads (ztrain.model.n_head): attention runs n_head / N heads per rank",
                       N, m->n_head);
    if (kv % N)
        return zt_fail(st, ZT_EINVAL, "sequence_parallel_size=%d must divide the %d key/value "
                       "heads (ztrain.model.n_kv_head; %d query heads): each rank takes n_kv_head "
                       "/ N of them; replicating key/value heads over ranks when there are fewer "
                       "than N is not implemented: use sequence_parallel_size <= %d that divides "
                       "%d", N, kv, m->n_head, kv, kv);
    return ZT_OK;
}

/* expert_parallel_size P: groups of P consecutive ranks split every MoE
 * block's experts (moe.h); the expert-data-parallel groups (ranks with the
 * same place in their expert group) must fit in the ZeRO shard groups */
static int check_expertpar(zt_config *c, int world, zt_status *st) {
    const int P = c->model.expert_parallel, E = c->model.n_experts;
    if (P < 1) c->model.expert_parallel = 1;
    if (P <= 1) return ZT_OK;
    if (E <= 0)
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d needs a Mixture of Experts model "
                       "(ztrain.model.n_experts > 0; this model has a dense MLP)", P);
    if (world % P)
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d must divide the number of ranks "
                       "(%d)", P, world);
    if (E % P)
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d must divide the %d experts "
                       "(ztrain.model.n_experts): each rank holds n_experts / %d of them", P, E, P);
    if (c->zero_stage > 0 && c->shard_group_size > 0 && c->shard_group_size % P)
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d must divide "
                       "zero_optimization.shard_group_size=%d (ZeRO stage %d shards the experts "
                       "within the shard group)", P, c->shard_group_size, c->zero_stage);
    return ZT_OK;
}

static int check_model(const zt_model_config *m, zt_status *st) {
    return zt_arch_of(m)->check(m, st);
}

/* The site limits in force for this process (ztrain_env.h): the stricter of
 * the plugin's root-owned statement file for the enclosing Slurm step and
 * ZTRAIN_SITE_LIMITS; *from names where the binding limits came from.
 * Unsetting or raising the variable inside the task changes nothing while
 * the statement file holds the limits. */
static int site_limits(int *ms, int *md, char *from, size_t n, zt_status *st) {
    const char *v = getenv(ZTRAIN_ENV_SITE_LIMITS), *why = NULL;
    char path[128];
    *ms = ZTRAIN_STAGE_MAX;
    *md = ZTRAIN_DATALOADERS_MAX;
    snprintf(from, n, "%s", "");
    int r = ztrain_statement_find(ms, md, path, sizeof path, &why);
    if (r < 0)
        return zt_fail(st, ZT_EINVAL, "the ztrain Slurm plugin's site-limit statement %s is %s; "
                       "refusing to run without the site limits (ask your administrator)", path, why);
    if (r > 0) snprintf(from, n, "stated by the ztrain Slurm plugin in %s", path);
    if (!v) return ZT_OK;
    int es = ZTRAIN_STAGE_MAX, ed = ZTRAIN_DATALOADERS_MAX;
    if (ztrain_site_limits_parse(v, &es, &ed, &why))
        return zt_fail(st, ZT_EINVAL, "%s='%s': %s; refusing to run without the site limits",
                       ZTRAIN_ENV_SITE_LIMITS, v, why);
    if (es < *ms || ed < *md || r == 0)
        snprintf(from, n, "%s, stated by the ztrain Slurm plugin", ZTRAIN_ENV_SITE_LIMITS);
    if (es < *ms) *ms = es;
    if (ed < *md) *md = ed;
    return ZT_OK;
}

/* A setting beyond the site limits is refused whatever its source. */
static int check_site_limits(const zt_config *c, zt_status *st) {
    int ms, md;
    char from[192];
    ZT_TRY(site_limits(&ms, &md, from, sizeof from, st));
    int is = zt_cfg_key_index("zero_optimization.stage"), id = zt_cfg_key_index("ztrain.data.dataloaders");
    if (c->zero_stage > ms)
        return zt_fail(st, ZT_EINVAL, "zero_optimization.stage=%d (%s) exceeds the site limit "
                       "max_stage=%d (%s)", c->zero_stage, zt_source_name(c->src[is]), ms, from);
    if (c->dataloaders > md)
        return zt_fail(st, ZT_EINVAL, "ztrain.data.dataloaders=%d (%s) exceeds the site limit "
                       "max_dataloaders=%d (%s)", c->dataloaders, zt_source_name(c->src[id]), md,
                       from);
    return ZT_OK;
}

int zt_config_site_max_dataloaders(void) {
    int ms, md;
    char from[192];
    zt_status st;
    memset(&st, 0, sizeof st);
    if (site_limits(&ms, &md, from, sizeof from, &st) != ZT_OK) return ZTRAIN_DATALOADERS_MIN;
    return md;
}

/* LoRA: the targets against the architecture's modules; another ztrain.lora.*
 * key given a value other than its default while the rank is 0 (LoRA off)
 * is refused rather than ignored (defaults -- a configuration written out
 * whole and read back -- are fine). */
static int check_lora(const zt_config *c, zt_status *st) {
    const zt_model_config *m = &c->model;
    if (m->lora_r > 0) return zt_lora_check(m, st);
    const char *key = m->lora_alpha != 8.0     ? "ztrain.lora.alpha"
                      : m->lora_dropout != 0.0 ? "ztrain.lora.dropout"
                      : m->lora_targets[0]     ? "ztrain.lora.targets"
                      : m->lora_rslora         ? "ztrain.lora.rslora"
                      : m->lora_from[0]        ? "ztrain.lora.from"
                      : m->lora_base[0]        ? "ztrain.lora.base"
                                               : NULL;
    if (!key) return ZT_OK;
    int k = zt_cfg_key_index(key);
    return zt_fail(st, ZT_EINVAL, "%s is set (%s) but ztrain.lora.r=0 (LoRA off): give "
                   "ztrain.lora.r >= 1 (--lora-r)", key, k >= 0 ? zt_source_name(c->src[k]) : "?");
}

static int finalize_into(zt_config *c, int world, int check_impl, zt_status *st) {
    reset_derived(c);
    ZT_TRY(check_site_limits(c, st));
    if (c->micro_batch == ZT_MICRO_BATCH_AUTO && c->train_batch_size <= 0)
        c->micro_batch = 0;   /* "auto" with no train_batch_size to keep (absent, or "auto" as
                               * well: the Hugging Face examples): nothing to fit, so ztrain's
                               * own default, exactly as when the key is absent */
    if (c->micro_batch == ZT_MICRO_BATCH_AUTO)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=\"auto\" is chosen against "
                       "the memory limit when training starts (zt_ctx_create) or by 'ztrain "
                       "estimate'; zt_config_finalize alone cannot pick it");
    if (c->bf16_enabled && c->fp16_enabled)
        return zt_fail(st, ZT_EINVAL, "bf16.enabled and fp16.enabled are both true; "
                       "enable at most one");
    if (strcmp(c->offload_optimizer, "none") != 0 && c->zero_stage < 1)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_optimizer.device=%s needs "
                       "zero_optimization.stage >= 1 (as in DeepSpeed)", c->offload_optimizer);
    if (strcmp(c->offload_param, "none") != 0 && c->zero_stage != 3)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_param.device=%s needs "
                       "zero_optimization.stage=3 (as in DeepSpeed: only sharded parameters "
                       "can be offloaded)", c->offload_param);
    if (strcmp(c->offload_param, "none") != 0 && strcmp(c->offload_optimizer, "none") == 0)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_param.device=%s needs "
                       "zero_optimization.offload_optimizer.device=cpu as well (parameters are "
                       "offloaded together with the optimizer state): add it, or use "
                       "--offload params", c->offload_param);
    if (!strcmp(c->optimizer_type, "Adam") && !c->adam_w_mode)
        return zt_fail(st, ZT_EINVAL, "optimizer.type=Adam with optimizer.params.adam_w_mode=false "
                       "(L2 regularization) is not implemented; adam_w_mode=true is AdamW");
    if ((!strcmp(c->scheduler_type, "WarmupLR") || !strcmp(c->scheduler_type, "WarmupDecayLR")) &&
        c->src[zt_cfg_key_index("scheduler.params.warmup_type")] == ZT_SRC_DEFAULT) {
        snprintf(c->warmup_type, sizeof c->warmup_type, "log");   /* DeepSpeed's default */
        c->src[zt_cfg_key_index("scheduler.params.warmup_type")] = ZT_SRC_DERIVED;
    }
    ZT_TRY(check_model(&c->model, st));
    ZT_TRY(check_lora(c, st));
    if (c->seq_len == 0) {
        c->seq_len = c->model.context;
        c->src[zt_cfg_key_index("ztrain.seq_len")] = ZT_SRC_DERIVED;
    }
    if (c->seq_len > c->model.context)
        return zt_fail(st, ZT_EINVAL, "ztrain.seq_len=%d exceeds the model's maximum positions "
                       "ztrain.model.context=%d", c->seq_len, c->model.context);
    ZT_TRY(check_seqpar(c, world, st));
    ZT_TRY(check_expertpar(c, world, st));
    /* the batch triple counts data parallel ranks: world / sequence_parallel_size */
    ZT_TRY(resolve_batch(c, world / c->model.seq_parallel, st));
    if (c->eval_batch_size == 0) {
        /* the global batch: the same samples at any world size and micro batch
         * (evaluated in forwards of at most micro_batch rows: zt_config_eval_rows) */
        c->eval_batch_size = c->train_batch_size;
        c->src[zt_cfg_key_index("ztrain.eval_batch_size")] = ZT_SRC_DERIVED;
    }
    /* token positions of one batch are counted in int (B*T) everywhere */
    if ((long long)c->micro_batch * c->seq_len > INT_MAX)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=%d x ztrain.seq_len=%d = "
                       "%lld tokens per micro batch exceeds %d", c->micro_batch, c->seq_len,
                       (long long)c->micro_batch * c->seq_len, INT_MAX);
    if ((long long)c->eval_batch_size * c->seq_len > INT_MAX)
        return zt_fail(st, ZT_EINVAL, "ztrain.eval_batch_size=%d x ztrain.seq_len=%d = %lld "
                       "tokens per evaluation batch exceeds %d", c->eval_batch_size, c->seq_len,
                       (long long)c->eval_batch_size * c->seq_len, INT_MAX);
    if (c->total_steps == 0) {
        if (c->steps > INT_MAX)
            return zt_fail(st, ZT_EINVAL, "ztrain.steps=%ld is too large for "
                           "scheduler.params.total_num_steps; set it explicitly", c->steps);
        c->total_steps = (int)c->steps;
        c->src[zt_cfg_key_index("scheduler.params.total_num_steps")] = ZT_SRC_DERIVED;
    }
    if (c->warmup_steps > c->total_steps)
        return zt_fail(st, ZT_EINVAL, "scheduler.params.warmup_num_steps=%d must be <= "
                       "scheduler.params.total_num_steps=%d", c->warmup_steps,
                       c->total_steps);
    if (check_impl) ZT_TRY(check_implemented(c, st));
    c->world_size = world;
    c->finalized = 1;
    return ZT_OK;
}

static int finalize_checked(zt_config *cfg, int world_size, int check_impl, zt_status *st) {
    if (!cfg) return zt_fail(st, ZT_EINVAL, "zt_config_finalize: no config");
    if (world_size < 1)
        return zt_fail(st, ZT_EINVAL, "zt_config_finalize: world_size=%d must be >= 1",
                       world_size);
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) return zt_fail(st, ZT_ENOMEM, "out of memory finalizing the configuration");
    int rc = finalize_into(tmp, world_size, check_impl, st);
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    zt_cfg_commit(cfg, tmp);
    return ZT_OK;
}

int zt_config_finalize(zt_config *cfg, int world_size, zt_status *st) {
    return finalize_checked(cfg, world_size, 1, st);
}

int zt_config_finalize_plan(zt_config *cfg, int world_size, zt_status *st) {
    return finalize_checked(cfg, world_size, 0, st);
}

int zt_config_shard_group(const zt_config *cfg, int world, int ranks_per_node) {
    if (cfg->shard_group_size == ZT_SHARD_GROUP_NODE) {
        int g = ranks_per_node > 0 ? ranks_per_node : 1;
        return world > 0 && g > world ? world : g;
    }
    return cfg->shard_group_size > 0 ? cfg->shard_group_size : world;
}

int zt_config_act_ckpt_k(const zt_config *cfg) {
    const char *p = cfg->act_ckpt;
    if (strcmp(p, "blocks") == 0 || strcmp(p, "blocks-attn") == 0) return 1;
    if (strncmp(p, "every-", 6) == 0) {
        long k = strtol(p + 6, NULL, 10);
        return k >= 1 ? (int)k : 1;
    }
    return 0;
}

int zt_config_act_ckpt_attn(const zt_config *cfg) {
    return strcmp(cfg->act_ckpt, "blocks-attn") == 0;
}

int zt_config_eval_rows(const zt_config *cfg, int dp) {
    long n = dp > 0 ? dp : 1;
    long share = ((long)cfg->eval_batch_size + n - 1) / n;
    int derived = cfg->src[zt_cfg_key_index("ztrain.eval_batch_size")] == ZT_SRC_DERIVED;
    if (derived && cfg->micro_batch > 0 && share > cfg->micro_batch) share = cfg->micro_batch;
    return share > 0 ? (int)share : 1;
}

int zt_config_memory_report(const zt_config *cfg) {
    const char *p = cfg->memory_report;
    if (strcmp(p, "end") == 0) return 0;
    if (isdigit((unsigned char)*p)) {
        long n = strtol(p, NULL, 10);
        return n >= 1 && n <= INT_MAX ? (int)n : -1;
    }
    return -1;
}
