/*
 * costmodel_run.c -- one training step of the engine through the counting
 * backend (costmodel.h: cm_count_step), configured as the recorded GPU
 * runs are: ztrain.backend=cuda, bf16 (bf16 parameters, fp32 master
 * weights, bf16 matmuls), gradient clipping, 1 rank; with LoRA (lora_r) a
 * frozen base (bf16 or nf4) and the adapters trained.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel_run.h"
#include "memplan.h"

int cm_shape_parse(const char *s, cm_shape *out) {
    static const cm_shape builtin[] = {
        {"gpt2", 0, 12, 12, 12, 768, 0, 50304, 8, 1024, 0, 0, 0, 0, 0, 0, 0},
        {"smollm", 1, 30, 9, 3, 576, 1536, 49152, 8, 2048, 0, 0, 0, 0, 0, 0, 0},
        {"llama3.2-1b", 1, 16, 32, 8, 2048, 8192, 128256, 4, 2048, 0, 0, 0, 0, 0, 0, 0},
        {"llama3.2-3b", 1, 28, 24, 8, 3072, 8192, 128256, 4, 2048, 0, 0, 0, 0, 0, 0, 0},
        {"llama3.1-8b", 1, 32, 32, 8, 4096, 14336, 128256, 4, 2048, 1, 0, 0, 0, 0, 0, 0},
        /* Mixture of Experts (config.json's sizes; B=1, T=4096) */
        {"mixtral-8x7b", 1, 32, 32, 8, 4096, 14336, 32000, 1, 4096, 1, 0, 8, 2, 14336, 0, 0},
        {"qwen3-30b-a3b", 1, 48, 32, 4, 2048, 6144, 151936, 1, 4096, 1, 1, 128, 8, 768, 0, 128},
    };
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (!strcmp(s, builtin[i].name)) {
            *out = builtin[i];
            return 0;
        }
    cm_shape sh;
    memset(&sh, 0, sizeof sh);
    char tail[96] = "";
    if (!strncmp(s, "gpt2:", 5)) {
        if (sscanf(s + 5, "%d,%d,%d,%d,%d,%d", &sh.L, &sh.NH, &sh.C, &sh.V, &sh.B, &sh.T) != 6) return -1;
        sh.NKV = sh.NH;
    } else if (!strncmp(s, "llama:", 6)) {
        sh.llama = 1;
        const int k = sscanf(s + 6, "%d,%d,%d,%d,%d,%d,%d,%d,%95s", &sh.L, &sh.NH, &sh.NKV, &sh.C, &sh.I,
                             &sh.V, &sh.B, &sh.T, tail);
        if (k < 8) return -1;
        /* the flags, comma-separated, each at most once and in this order:
         * untied, qk_norm, hd=D, moe=E:K:Im[:S] */
        int last = 0;
        for (char *sv = NULL, *t = strtok_r(tail, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            char end = 0;
            int at;
            if (!strcmp(t, "untied")) {
                at = 1;
                sh.untied = 1;
            } else if (!strcmp(t, "qk_norm")) {
                at = 2;
                sh.qk_norm = 1;
            } else if (!strncmp(t, "hd=", 3)) {
                at = 3;
                if (sscanf(t, "hd=%d%c", &sh.hd, &end) != 1 || sh.hd < 1) return -1;
            } else if (!strncmp(t, "moe=", 4)) {
                at = 4;
                long v[4] = {0, 0, 0, 0};
                int n = 0;
                const char *q = t + 4;
                while (n < 4) {   /* E:K:Im[:S], nothing after */
                    char *e;
                    v[n] = strtol(q, &e, 10);
                    if (e == q || v[n] < 0 || v[n] > (1L << 30)) return -1;
                    n++;
                    q = e;
                    if (*q != ':') break;
                    q++;
                }
                if (*q || n < 3) return -1;
                sh.E = (int)v[0];
                sh.K = (int)v[1];
                sh.Im = (int)v[2];
                sh.S = (int)v[3];
                if (sh.E < 1 || sh.K < 1 || sh.K > sh.E || sh.Im < 1) return -1;
            } else {
                return -1;
            }
            if (at <= last) return -1;
            last = at;
        }
        if (s[strlen(s) - 1] == ',') return -1;
    } else {
        return -1;
    }
    if (sh.L < 1 || sh.NH < 1 || sh.NKV < 1 || sh.C < 1 || sh.V < 1 || sh.B < 1 || sh.T < 1 ||
        (sh.C % sh.NH && !sh.hd) || sh.NH % sh.NKV || (sh.llama && sh.I < 1))
        return -1;
    snprintf(sh.name, sizeof sh.name, "%s", s);
    *out = sh;
    return 0;
}

void cm_shape_key(const cm_shape *s, char *buf, size_t n) {
    if (s->llama) {
        const int k = snprintf(buf, n, "%d,%d,%d,%d,%d,%d,%d,%d%s", s->L, s->NH, s->NKV, s->C, s->I, s->V, s->B,
                               s->T, s->qk_norm ? ",qk_norm" : "");
        if (k < 0 || (size_t)k >= n) return;
        if (s->hd) snprintf(buf + k, n - (size_t)k, ",hd=%d", s->hd);
        const size_t l = strlen(buf);
        if (s->E && l < n) snprintf(buf + l, n - l, ",moe=%d:%d:%d:%d", s->E, s->K, s->Im, s->S);
    } else snprintf(buf, n, "%d,%d,%d,%d,%d,%d", s->L, s->NH, s->C, s->V, s->B, s->T);
}

static int oom(zt_status *st) {
    st->code = ZT_ENOMEM;
    snprintf(st->msg, sizeof st->msg, "out of memory");
    return ZT_ENOMEM;
}

/* synthetic tokens (the counts do not depend on them) */
static int synth_get(void *st_, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    const int V = *(int *)st_;
    (void)st;
    for (int i = 0; i < count * T; ++i) {
        uint64_t h = ((uint64_t)step * 0x9E3779B97F4A7C15ull) ^ (first + (uint64_t)i) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        h *= 0x94D049BB133111EBull;
        h ^= h >> 29;
        in[i] = (int)(h % (uint64_t)V);
        tg[i] = (int)((h >> 24) % (uint64_t)V);
    }
    return ZT_OK;
}

const char *cm_offload_check(const cm_run_opts *o) {
    /* the engine's rules (config_check.c, shard.c) */
    if (o->offload == CM_OFFLOAD_OPTIMIZER && o->stage < 1)
        return "--offload optimizer needs --stage 1, 2 or 3 (zero_optimization.offload_optimizer.device=cpu "
               "needs ZeRO stage >= 1)";
    if (o->offload == CM_OFFLOAD_PARAMS && o->stage != 3)
        return "--offload params needs --stage 3 (zero_optimization.offload_param.device=cpu: only sharded "
               "parameters can be offloaded)";
    return NULL;
}

int cm_count_step(const cm_shape *s, const cm_run_opts *o, const zt_backend *be, cm_counts *out,
                  zt_status *st) {
    memset(out, 0, sizeof *out);
    if (cm_offload_check(o)) {
        st->code = ZT_EINVAL;
        snprintf(st->msg, sizeof st->msg, "%s", cm_offload_check(o));
        return ZT_EINVAL;
    }
    zt_config *c = zt_config_new();
    if (!c) return oom(st);
    char v[64];
    int rc = ZT_OK;
#define SET(k, fmt, x)                                                          \
    do {                                                                        \
        snprintf(v, sizeof v, fmt, x);                                          \
        if (rc == ZT_OK) rc = zt_config_set(c, k, v, ZT_SRC_FLAG, st);          \
    } while (0)
    SET("ztrain.model.n_layer", "%d", s->L);
    SET("ztrain.model.n_head", "%d", s->NH);
    SET("ztrain.model.n_embd", "%d", s->C);
    SET("ztrain.model.vocab", "%d", s->V);
    if (s->llama) {
        SET("ztrain.model.arch", "%s", "llama");
        SET("ztrain.model.n_kv_head", "%d", s->NKV);
        SET("ztrain.model.intermediate_size", "%d", s->I);
        SET("ztrain.model.tie_embeddings", "%s", s->untied ? "false" : "true");
        if (s->qk_norm) SET("ztrain.model.qk_norm", "%s", "true");
        if (s->hd) SET("ztrain.model.head_dim", "%d", s->hd);
        if (s->E) {
            SET("ztrain.model.n_experts", "%d", s->E);
            SET("ztrain.model.experts_per_token", "%d", s->K);
            SET("ztrain.model.moe_intermediate_size", "%d", s->Im);
            if (s->S) SET("ztrain.model.shared_expert_size", "%d", s->S);
        }
    }
    SET("ztrain.model.context", "%d", s->T);
    SET("ztrain.seq_len", "%d", s->T);
    SET("train_micro_batch_size_per_gpu", "%d", s->B);
    SET("train_batch_size", "%d", s->B);
    SET("zero_optimization.stage", "%d", o->stage);
    SET("gradient_clipping", "%s", "1.0");
    SET("ztrain.backend", "%s", "cuda");
    /* collectives through host memory (the stand-in has no NCCL): at stage 0
     * on one rank there are none */
    SET("ztrain.comm_backend", "%s", "mpi");
    SET("bf16.enabled", "%s", o->fp32 ? "false" : "true");
    SET("ztrain.threads", "%d", o->threads > 0 ? o->threads : 1);
    SET("ztrain.data.val", "%s", "");
    SET("ztrain.classifier_chunk_rows", "%d", o->head_rows > 0 ? o->head_rows : 0);
    if (o->lora_r > 0) {
        SET("ztrain.lora.r", "%d", o->lora_r);
        if (o->lora_targets[0]) SET("ztrain.lora.targets", "%s", o->lora_targets);
        if (o->lora_base[0]) SET("ztrain.lora.base", "%s", o->lora_base);
    }
    if (o->act_ckpt[0]) SET("activation_checkpointing.policy", "%s", o->act_ckpt);
    if (o->offload >= CM_OFFLOAD_OPTIMIZER) SET("zero_optimization.offload_optimizer.device", "%s", "cpu");
    if (o->offload == CM_OFFLOAD_PARAMS) SET("zero_optimization.offload_param.device", "%s", "cpu");
#undef SET
    zt_ctx *ctx = NULL;
    int *V = NULL;
    const int cudnn_was = zt_count_cudnn();
    if (o->attention != CM_ATT_AS_SET) zt_count_set_cudnn(o->attention == CM_ATT_CUDNN);
    if (rc == ZT_OK) {
        zt_count_set_whatif(o->whatif);
        /* A16_ROUNDED: the activations in fp32, as before the models kept
         * some in bf16 (the engine's test hook, precision.c zt_acts16_of) */
        const int a32 = (o->whatif & ZT_COUNT_WHATIF_A16_ROUNDED) && !getenv("ZT_TEST_NO_ACT16");
        if (a32) setenv("ZT_TEST_NO_ACT16", "1", 1);
        /* ADD_SPLIT: the residual add unfolded (precision.c, read at the setup) */
        const int split = (o->whatif & ZT_COUNT_WHATIF_ADD_SPLIT) && !getenv("ZT_TEST_NO_ADDFOLD");
        if (split) setenv("ZT_TEST_NO_ADDFOLD", "1", 1);
        /* HEAD_UNFUSED: the LM head recomputed in backward (classifier.h) */
        const int unfused = (o->whatif & ZT_COUNT_WHATIF_HEAD_UNFUSED) && !getenv("ZT_TEST_NO_HEADFUSE");
        if (unfused) setenv("ZT_TEST_NO_HEADFUSE", "1", 1);
        zt_backend_set_stand_in(be);
        rc = zt_ctx_create(c, NULL, &ctx, st);
        zt_backend_set_stand_in(NULL);
        if (a32) unsetenv("ZT_TEST_NO_ACT16");
        if (split) unsetenv("ZT_TEST_NO_ADDFOLD");
        if (unfused) unsetenv("ZT_TEST_NO_HEADFUSE");
    }
    if (rc == ZT_OK && !(V = malloc(sizeof *V))) rc = oom(st);
    if (rc == ZT_OK) {
        *V = s->V;
        zt_data_source d = {V, synth_get, free, NULL}, none = {0};
        rc = zt_ctx_set_data(ctx, d, none, st);
        if (rc != ZT_OK) free(V);
    }
    zt_metrics m;
    for (int step = 0; rc == ZT_OK && step < 2; step++) {
        if (step == 1) zt_count_reset();   /* the second step: nothing left of the start */
        rc = zt_train_step(ctx, &m, st);
    }
    if (rc == ZT_OK) {
        const zt_count_kernel *k;
        out->nk = zt_count_kernels(&k);
        out->k = malloc((out->nk ? out->nk : 1) * sizeof *out->k);
        if (!out->k) rc = oom(st);
        else memcpy(out->k, k, out->nk * sizeof *k);
        zt_count_totals_get(&out->tot);
        /* (zt_ctx_num_params: the base's; the start-up's count: all) */
        zt_startup su;
        zt_ctx_startup(ctx, &su);
        out->params = (double)su.num_params;
        out->trained = o->lora_r > 0 ? (double)(su.num_params - zt_ctx_num_params(ctx)) : out->params;
        out->fpt = zt_ctx_flops_per_token(ctx);
        size_t cur = 0;
        be->mem_stats(&cur, &out->peak_bytes);
        if (o->offload) {
            zt_memory_report r;
            zt_memory(&r);
            out->host_opt_bytes = (double)r.host_current[ZT_MEM_OPTIMIZER];
            out->host_adam_elems = out->trained;
            zt_memplan_opts po;
            zt_memplan_opts_init(&po, 1);
            zt_memplan plan;
            rc = zt_memplan_compute(c, &po, &plan, st);
            out->off_h2d = (double)plan.offload_h2d_bytes;
            out->off_d2h = (double)plan.offload_d2h_bytes;
        }
    }
    zt_count_set_whatif(0);
    zt_count_set_cudnn(cudnn_was);
    if (ctx) zt_ctx_free(ctx);
    zt_config_free(c);
    zt_count_reset();
    return rc;
}

void cm_counts_free(cm_counts *c) {
    free(c->k);
    memset(c, 0, sizeof *c);
}
