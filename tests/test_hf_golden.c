/*
 * test_hf_golden.c -- ztrain against transformers, on the tiny random models
 * of tests/fixtures/hf (made once by scripts/make_hf_fixtures.py; no Python
 * here).  For each fixture -- llama (GQA, llama3 RoPE scaling, untied,
 * sharded safetensors), qwen2 (q/k/v biases, multi-query, tied), qwen3
 * (per-head q/k RMSNorm, GQA, tied), phi3 (fused qkv_proj / gate_up_proj split
 * on load), rope_linear / rope_dynamic / rope_yarn / rope_longrope
 * (Llama with those rope types, yarn's cos/sin scale; longrope a Phi-3 past
 * its original context, so long_factor and cos/sin x sqrt(2)), gemma2 / gemma3,
 * mistral (sliding window 5 < T on every layer), qwen2_swa (use_sliding_window:
 * layer 1 of 2 slides, window 4), pad (Qwen2, tied, pad_token_id 5 among
 * the inputs: no lookup gradient on that row), gpt2 --:
 *
 *   config     zt_hf_read_config maps config.json onto ztrain.model.*
 *   load       zt_hf_load puts every HF tensor, bit for bit, where the layout
 *              contract says (GPT-2 Conv1D weights transposed), and uses
 *              every tensor of the files
 *   forward    log-softmax of the logits and the mean cross-entropy of a
 *              fixed batch [B=2, T=16]
 *   backward   the gradient of that loss for every parameter
 *   training   the losses of 3 zt_train_step calls (AdamW lr 1e-3, betas
 *              0.9/0.95, eps 1e-8, weight decay 0.1 on ZT_TENSOR_DECAY
 *              tensors, no clipping, constant lr) on that batch, and the loss
 *              after the third update
 *
 * The references are float64 computations (stored as float32 arrays); ztrain
 * computes in float32.  The fixture's .ref.json records how far transformers'
 * own float32 run lands from them: at most 2.6e-6 on a log-prob, 3.6e-7 on a
 * loss, 1.4e-6 of a tensor's largest gradient entry.  The tolerances below
 * are about 10x those: an fp32 implementation with another summation order
 * passes, a wrong formula (a RoPE pair convention, a missing bias, an off
 * llama3 band, a transposed weight, eps in the wrong place) misses by 1e-3
 * or more.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include "ctx.h"
#include "llama.h"
#include "tap.h"
#include "testutil.h"
#include "ztrain_ckpt.h"

#define TOL_LOGPROB 3e-5   /* absolute, per log-prob (values around -5)         */
#define TOL_LOSS 5e-6      /* absolute, mean cross-entropy (~5)                  */
#define TOL_GRAD 2e-5      /* relative to the largest |entry| of that gradient   */
#define TOL_STEP 1e-5      /* absolute, losses after AdamW updates               */

/* ------------------------------------------------------------ safetensors (reading the fixtures) */

typedef struct st_tensor {
    char *name;
    int ndim;
    long shape[4];
    size_t numel;
    float *data;      /* F32 only: every fixture tensor is F32 */
    int uses;         /* how many of our tensors matched it */
} st_tensor;

typedef struct st_set {
    st_tensor *t;
    int n, cap;
} st_set;

static void st_set_free(st_set *s) {
    for (int i = 0; i < s->n; ++i) { free(s->t[i].name); free(s->t[i].data); }
    free(s->t);
    memset(s, 0, sizeof *s);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    unsigned char *buf = NULL;
    if (fseek(fp, 0, SEEK_END) == 0) {
        long sz = ftell(fp);
        if (sz >= 0 && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz + 1))) {
            if (fread(buf, 1, (size_t)sz, fp) != (size_t)sz) { free(buf); buf = NULL; }
            else { buf[sz] = 0; *n = (size_t)sz; }
        }
    }
    fclose(fp);
    return buf;
}

/* Add every tensor of one .safetensors file; 0 on success. */
static int st_add_file(st_set *s, const char *path) {
    size_t size = 0;
    unsigned char *buf = slurp(path, &size);
    if (!buf || size < 8) { tap_diag("%s: unreadable", path); free(buf); return -1; }
    uint64_t hl = 0;
    for (int k = 0; k < 8; ++k) hl |= (uint64_t)buf[k] << (8 * k);
    json_error_t je;
    json_t *h = hl <= size - 8 ? json_loadb((const char *)buf + 8, (size_t)hl, 0, &je) : NULL;
    int rc = h ? 0 : -1;
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v) {
        if (rc || !strcmp(key, "__metadata__")) continue;
        json_t *shape = json_object_get(v, "shape"), *offs = json_object_get(v, "data_offsets");
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        if (!dt || strcmp(dt, "F32") || !json_is_array(shape) || json_array_size(shape) > 4 ||
            json_array_size(offs) != 2) { rc = -1; break; }
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            s->t = realloc(s->t, (size_t)s->cap * sizeof *s->t);
        }
        st_tensor *t = &s->t[s->n++];
        memset(t, 0, sizeof *t);
        t->name = strdup(key);
        t->ndim = (int)json_array_size(shape);
        t->numel = 1;
        for (int d = 0; d < t->ndim; ++d) {
            t->shape[d] = (long)json_integer_value(json_array_get(shape, (size_t)d));
            t->numel *= (size_t)t->shape[d];
        }
        uint64_t b = (uint64_t)json_integer_value(json_array_get(offs, 0));
        uint64_t e = (uint64_t)json_integer_value(json_array_get(offs, 1));
        if (e < b || e - b != t->numel * sizeof(float) || 8 + hl + e > size) { rc = -1; break; }
        t->data = malloc(t->numel * sizeof(float) + 1);
        memcpy(t->data, buf + 8 + hl + b, t->numel * sizeof(float));
    }
    if (rc) tap_diag("%s: not a safetensors file of F32 tensors", path);
    json_decref(h);
    free(buf);
    return rc;
}

static st_tensor *st_find(st_set *s, const char *name) {
    for (int i = 0; i < s->n; ++i)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

/* The weights of a model directory: model.safetensors, or the shards its
 * model.safetensors.index.json names. */
static int st_add_model_dir(st_set *s, const char *dir, int *nfiles) {
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_error_t je;
    json_t *idx = json_load_file(path, 0, &je);
    *nfiles = 0;
    if (!idx) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        *nfiles = 1;
        return st_add_file(s, path);
    }
    /* each shard once, in the order first named */
    const char *key, *seen[64];
    json_t *v;
    int rc = 0;
    json_object_foreach(json_object_get(idx, "weight_map"), key, v) {
        const char *f = json_string_value(v);
        int dup = 0;
        for (int i = 0; i < *nfiles; ++i) dup |= !strcmp(seen[i], f);
        if (dup || rc || *nfiles == 64) continue;
        seen[(*nfiles)++] = f;
        snprintf(path, sizeof path, "%s/%s", dir, f);
        rc = st_add_file(s, path);
    }
    json_decref(idx);
    return rc;
}

/* ------------------------------------------------------------ our names -> HF names */

/* The HF name of one of our tensors and whether HF stores it transposed
 * (GPT-2's Conv1D keeps [in, out]; nn.Linear [out, in] like us).  Written
 * from the layout contract independently of ckpt/, so a mapping error in
 * the loader cannot cancel out here. */
static int g_gemma;   /* the fixture is a Gemma: its names of the MLP norms */

static int hf_name(int arch, const char *ours, char *out, size_t n, int *tr) {
    /* Phi-3's fused tensors: see hf_name_fused */
    static const struct { const char *ours, *hf; int tr; } gpt2[] = {
        {"wte", "transformer.wte.weight", 0}, {"wpe", "transformer.wpe.weight", 0},
        {"lnf.w", "transformer.ln_f.weight", 0}, {"lnf.b", "transformer.ln_f.bias", 0},
        {"ln1.w", "ln_1.weight", 0}, {"ln1.b", "ln_1.bias", 0},
        {"attn.qkv.w", "attn.c_attn.weight", 1}, {"attn.qkv.b", "attn.c_attn.bias", 0},
        {"attn.proj.w", "attn.c_proj.weight", 1}, {"attn.proj.b", "attn.c_proj.bias", 0},
        {"ln2.w", "ln_2.weight", 0}, {"ln2.b", "ln_2.bias", 0},
        {"mlp.fc.w", "mlp.c_fc.weight", 1}, {"mlp.fc.b", "mlp.c_fc.bias", 0},
        {"mlp.proj.w", "mlp.c_proj.weight", 1}, {"mlp.proj.b", "mlp.c_proj.bias", 0},
    }, llama[] = {
        {"embed.w", "model.embed_tokens.weight", 0}, {"norm.w", "model.norm.weight", 0},
        {"lm_head.w", "lm_head.weight", 0},
        {"attn_norm.w", "input_layernorm.weight", 0},
        {"q.w", "self_attn.q_proj.weight", 0}, {"k.w", "self_attn.k_proj.weight", 0},
        {"v.w", "self_attn.v_proj.weight", 0}, {"o.w", "self_attn.o_proj.weight", 0},
        {"q.b", "self_attn.q_proj.bias", 0}, {"k.b", "self_attn.k_proj.bias", 0},
        {"v.b", "self_attn.v_proj.bias", 0},
        {"q_norm.w", "self_attn.q_norm.weight", 0}, {"k_norm.w", "self_attn.k_norm.weight", 0},
        {"mlp_norm.w", "post_attention_layernorm.weight", 0},
        {"gate.w", "mlp.gate_proj.weight", 0}, {"up.w", "mlp.up_proj.weight", 0},
        {"down.w", "mlp.down_proj.weight", 0},
    }, gemma[] = {
        {"mlp_norm.w", "pre_feedforward_layernorm.weight", 0},
        {"post_attn_norm.w", "post_attention_layernorm.weight", 0},
        {"post_mlp_norm.w", "post_feedforward_layernorm.weight", 0},
    };
    const int is_gpt = arch == ZT_ARCH_GPT2;
    const size_t nmap = is_gpt ? sizeof gpt2 / sizeof gpt2[0] : sizeof llama / sizeof llama[0];
    const char *layers = is_gpt ? "transformer.h" : "model.layers";
    int l = -1, used = 0;
    const char *rest = ours;
    if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used > 0) rest = ours + used;
    else l = -1;
    for (size_t i = 0; g_gemma && !is_gpt && l >= 0 && i < sizeof gemma / sizeof gemma[0]; ++i)
        if (!strcmp(rest, gemma[i].ours)) {
            *tr = 0;
            snprintf(out, n, "%s.%d.%s", layers, l, gemma[i].hf);
            return 0;
        }
    for (size_t i = 0; i < nmap; ++i) {
        const char *o = is_gpt ? gpt2[i].ours : llama[i].ours;
        const char *h = is_gpt ? gpt2[i].hf : llama[i].hf;
        if (strcmp(rest, o)) continue;
        *tr = is_gpt ? gpt2[i].tr : llama[i].tr;
        if (l >= 0) snprintf(out, n, "%s.%d.%s", layers, l, h);
        else snprintf(out, n, "%s", h);
        return 0;
    }
    return -1;
}

/* Phi-3 (fused): q.w | k.w | v.w are rows of self_attn.qkv_proj.weight,
 * gate.w | up.w of mlp.gate_up_proj.weight; *row0: where ours starts
 * (the shapes of the fixtures: 4 q heads and 2 kv heads of 8, MLP 64). */
static int hf_name_fused(int fused, int arch, const char *ours, char *out, size_t n, int *tr,
                         long *row0) {
    static const struct { const char *ours, *hf; long row0; } phi3[] = {
        {"q.w", "self_attn.qkv_proj.weight", 0}, {"k.w", "self_attn.qkv_proj.weight", 32},
        {"v.w", "self_attn.qkv_proj.weight", 48}, {"gate.w", "mlp.gate_up_proj.weight", 0},
        {"up.w", "mlp.gate_up_proj.weight", 64},
    };
    *row0 = 0;
    int l = -1, used = 0;
    if (fused && sscanf(ours, "h%d.%n", &l, &used) == 1 && used > 0)
        for (size_t i = 0; i < sizeof phi3 / sizeof phi3[0]; ++i)
            if (!strcmp(ours + used, phi3[i].ours)) {
                snprintf(out, n, "model.layers.%d.%s", l, phi3[i].hf);
                *tr = 0;
                *row0 = phi3[i].row0;
                return 0;
            }
    return hf_name(arch, ours, out, n, tr);
}

/* How many of our tensors a file tensor holds. */
static int hf_parts(const char *hf) {
    return strstr(hf, "qkv_proj") ? 3 : strstr(hf, "gate_up_proj") ? 2 : 1;
}

/* Our tensor t ([rows, cols] at x) against an HF array y (transposed when tr):
 * the largest |difference| and the largest |y|. */
static void compare(const zt_tensor_info *t, const float *x, const float *y, int tr, double *maxdiff,
                    double *maxref) {
    const size_t R = (size_t)t->shape[0], C = t->ndim == 2 ? (size_t)t->shape[1] : 1;
    *maxdiff = *maxref = 0;
    for (size_t r = 0; r < R; ++r)
        for (size_t c = 0; c < C; ++c) {
            const double ref = y[tr ? c * R + r : r * C + c], d = fabs((double)x[r * C + c] - ref);
            if (d > *maxdiff || isnan(d)) *maxdiff = isnan(d) ? INFINITY : d;
            if (fabs(ref) > *maxref) *maxref = fabs(ref);
        }
}

/* ------------------------------------------------------------ the fixed batch as a data source */

typedef struct fixed_batch {
    int B, T;
    int *in, *tg;     /* [B, T] */
} fixed_batch;

static int fixed_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    (void)step;
    fixed_batch *f = s;
    if (T != f->T || first + (uint64_t)count > (uint64_t)f->B)
        return zt_fail(st, ZT_EINVAL, "fixed batch: asked for samples %llu..%llu of length %d",
                       (unsigned long long)first, (unsigned long long)first + (uint64_t)count, T);
    memcpy(in, f->in + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    memcpy(tg, f->tg + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    return ZT_OK;
}

/* ------------------------------------------------------------ one fixture */

/* What config.json must turn into (checked on the finalized configuration). */
typedef struct expect {
    const char *name, *arch;
    int n_kv_head, attention_bias, tie, context;
    const char *rope_scaling;
    double rope_theta;
    int qk_norm;
    double eps;
    int fused;         /* Phi-3's fused qkv_proj / gate_up_proj */
    /* Gemma: gemma 2 | 3, layers, head_dim, query_pre_attn_scalar, the
     * soft-caps, window, pattern, the sliding layers' rotary base; any:
     * the first sliding layer (Qwen2/3's max_window_layers) */
    int gemma, layers, hd;
    double qpas, acap, fcap;
    int window, pattern;
    double local;
    int from;
    int pad;           /* pad_token_id (-1: none): its row gets no lookup gradient */
} expect;

static const expect fixtures[] = {
    {"gpt2", "gpt2", 0, 0, 1, 32, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"llama", "llama", 2, 0, 0, 64, "llama3", 1000.0, 0, 1e-5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"qwen2", "llama", 1, 1, 1, 64, "none", 10000.0, 0, 1e-6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"qwen3", "llama", 2, 0, 1, 64, "none", 10000.0, 1, 1e-6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"phi3", "llama", 2, 0, 0, 64, "none", 10000.0, 0, 1e-5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"rope_linear", "llama", 2, 0, 1, 64, "linear", 1000.0, 0, 1e-5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"rope_dynamic", "llama", 2, 0, 1, 64, "dynamic", 1000.0, 0, 1e-5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"rope_yarn", "llama", 2, 0, 1, 64, "yarn", 1000.0, 0, 1e-5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    {"rope_longrope", "llama", 2, 0, 0, 64, "longrope", 1000.0, 0, 1e-5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1},
    /* Gemma 2: soft-caps 2 / 3, window 5 < T on layer 0; Gemma 3: q/k
     * norms, layers 0-1 slide (rotary base 100), layer 2 full (linear 2) */
    {"gemma2", "llama", 2, 0, 1, 64, "none", 10000.0, 0, 1e-6, 0, 2, 2, 16, 24, 2, 3, 5, 2, 0, 0, -1},
    {"gemma3", "llama", 1, 0, 0, 64, "linear", 10000.0, 1, 1e-6, 0, 3, 3, 16, 16, 0, 0, 5, 3, 100, 0, -1},
    /* Mistral: every layer slides, window 5 < T; Qwen2 with use_sliding_window:
     * layer 0 full, layer 1 slides with window 4 (max_window_layers 1) */
    {"mistral", "llama", 2, 0, 0, 64, "none", 10000.0, 0, 1e-5, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, -1},
    {"qwen2_swa", "llama", 2, 1, 0, 64, "none", 10000.0, 0, 1e-6, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 1, -1},
    /* Qwen2, tied, pad_token_id 5, an input mid-sequence: transformers'
     * nn.Embedding(padding_idx) adds no lookup gradient to row 5 (the tied
     * head's still flows) */
    {"pad", "llama", 2, 1, 1, 64, "none", 10000.0, 0, 1e-6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5},
};

static void run_fixture(const char *root, const expect *ex) {
    char dir[768], path[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, ex->name);
    g_gemma = ex->gemma;
    zt_status st;
    st_set ref = {0}, w = {0};
    zt_config *cfg = NULL;
    zt_ctx *ctx = NULL;
    int *in = NULL, *tg = NULL;
    json_t *meta = NULL;

    /* ---- the reference */
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s.ref.json", root, ex->name);
    meta = json_load_file(path, 0, &je);
    snprintf(path, sizeof path, "%s/%s.ref.safetensors", root, ex->name);
    int nfiles = 0;
    const int readable = meta && st_add_file(&ref, path) == 0 && st_add_model_dir(&w, dir, &nfiles) == 0;
    if (!tap_ok(readable, "%s: fixture files readable (%d weight file%s)", ex->name, nfiles,
                nfiles == 1 ? "" : "s"))
        goto out;
    const int B = (int)json_integer_value(json_object_get(meta, "B"));
    const int T = (int)json_integer_value(json_object_get(meta, "T"));
    const int V = (int)json_integer_value(json_object_get(meta, "vocab"));
    json_t *tok = json_object_get(meta, "tokens");
    in = malloc(sizeof(int) * (size_t)(B * T));
    tg = malloc(sizeof(int) * (size_t)(B * T));
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            json_t *row = json_array_get(tok, (size_t)b);
            in[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t));
            tg[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t + 1));
        }

    /* ---- configuration from config.json */
    cfg = zt_config_new();
    if (!tap_ok(zt_hf_read_config(dir, cfg, &st) == ZT_OK, "%s: zt_hf_read_config", ex->name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    tu_set(cfg, "train_micro_batch_size_per_gpu", "%d", B);
    tu_set(cfg, "gradient_accumulation_steps", "1");
    tu_set(cfg, "zero_optimization.stage", "0");
    tu_set(cfg, "ztrain.seq_len", "%d", T);
    tu_set(cfg, "optimizer.params.lr", "1e-3");
    tu_set(cfg, "optimizer.params.betas", "[0.9, 0.95]");
    tu_set(cfg, "optimizer.params.eps", "1e-8");
    tu_set(cfg, "optimizer.params.weight_decay", "0.1");
    tu_set(cfg, "gradient_clipping", "0");
    tu_set(cfg, "scheduler.type", "none");
    tu_set(cfg, "ztrain.steps", "3");
    tu_set(cfg, "ztrain.threads", "1");
    tu_set(cfg, "ztrain.backend", "cpu");
    tu_set(cfg, "ztrain.data.train", "%s", "");
    tu_set(cfg, "ztrain.data.val", "%s", "");
    if (!tap_ok(zt_ctx_create(cfg, NULL, &ctx, &st) == ZT_OK, "%s: context created", ex->name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    const zt_config *c = zt_ctx_config(ctx);
    const zt_model_config *mc = &c->model;
    if (!tap_ok(zt_hf_check_config(dir, c, &st) == ZT_OK, "%s: zt_hf_check_config", ex->name))
        tap_diag("%s", st.msg);
    int cok = !strcmp(mc->arch, ex->arch) && mc->vocab == V && mc->context == ex->context &&
              mc->n_layer == (ex->layers ? ex->layers : 2) && mc->n_embd == 32 && mc->n_head == 4 &&
              zt_model_head_dim(mc) == (ex->hd ? ex->hd : 8) && !!mc->tie_embeddings == ex->tie &&
              mc->gemma == ex->gemma;
    if (ex->gemma)
        cok &= mc->query_pre_attn_scalar == ex->qpas && mc->attn_softcap == ex->acap &&
               mc->final_softcap == ex->fcap && mc->rope_local_theta == ex->local;
    cok &= mc->sliding_window == ex->window && mc->sliding_pattern == ex->pattern &&
           mc->sliding_from == ex->from;
    if (zt_model_arch(mc) == ZT_ARCH_LLAMA) cok &= mc->pad_token_id == ex->pad;
    if (zt_model_arch(mc) == ZT_ARCH_LLAMA)
        cok &= zt_model_kv_heads(mc) == ex->n_kv_head && zt_model_intermediate(mc) == 64 &&
               !!mc->attention_bias == ex->attention_bias && !strcmp(mc->rope_scaling, ex->rope_scaling) &&
               mc->rope_theta == ex->rope_theta && mc->norm_eps == ex->eps &&
               !!mc->qk_norm == ex->qk_norm &&
               (strcmp(ex->rope_scaling, "llama3") ||
                (mc->rope_factor == 8 && mc->rope_low_freq_factor == 1 &&
                 mc->rope_high_freq_factor == 4 && mc->rope_original_max == 48)) &&
               (strcmp(ex->rope_scaling, "linear") || mc->rope_factor == 2) &&
               (strcmp(ex->rope_scaling, "dynamic") || mc->rope_factor == 4) &&
               (strcmp(ex->rope_scaling, "yarn") ||
                (mc->rope_factor == 4 && mc->rope_original_max == 48 && mc->rope_attention_factor == 0 &&
                 mc->rope_beta_fast == 32 && mc->rope_beta_slow == 1 && mc->rope_truncate)) &&
               (strcmp(ex->rope_scaling, "longrope") ||
                (mc->rope_factor == 8 && mc->rope_original_max == 8 && mc->rope_attention_factor == 0 &&
                 !strcmp(mc->rope_short_factor, "1,1.25,1.5,2") &&
                 !strcmp(mc->rope_long_factor, "1,2,4.5,8.25")));
    tap_ok(cok, "%s: config.json -> arch %s, kv heads %d, bias %d, tied %d, context %d, rope %s, "
           "pad %d", ex->name, mc->arch, zt_model_kv_heads(mc), mc->attention_bias,
           mc->tie_embeddings, mc->context, mc->rope_scaling, mc->pad_token_id);

    /* ---- longrope: transformers' fp32 frequencies, bit for bit, on both
     * sides of the switch (short_factor at original tokens, long_factor at
     * one more), and its cos/sin scale */
    json_t *rope = json_object_get(meta, "rope");
    if (rope) {
        const int om = (int)json_integer_value(json_object_get(rope, "original_max_position_embeddings"));
        const char *set[2] = {"inv_freq_short", "inv_freq_long"};
        const int hd = zt_model_head_dim(mc);
        float f[512];
        int fok = hd / 2 <= 512 && om == mc->rope_original_max;
        for (int i = 0; i < 2 && fok; ++i) {
            json_t *a = json_object_get(rope, set[i]);
            fok &= json_array_size(a) == (size_t)(hd / 2) && zt_llama_rope_long(mc, om + i) == i;
            zt_llama_inv_freq_at(mc, om + i, f);
            for (int j = 0; j < hd / 2 && fok; ++j)
                if (f[j] != (float)json_real_value(json_array_get(a, (size_t)j))) {
                    tap_diag("%s: %s[%d] %.9g, transformers %.9g", ex->name, set[i], j, (double)f[j],
                             json_real_value(json_array_get(a, (size_t)j)));
                    fok = 0;
                }
        }
        const double sc = json_real_value(json_object_get(rope, "attention_scaling"));
        tap_ok(fok && zt_llama_rope_scale(mc) == (float)sc,
               "%s: inv_freq at %d tokens (short_factor) and %d (long_factor) bitwise transformers', "
               "cos/sin scale %.9g", ex->name, om, om + 1, sc);
    }

    /* ---- weights */
    zt_model *m = ctx->model;
    if (!tap_ok(zt_hf_load(ctx, dir, &st) == ZT_OK, "%s: zt_hf_load", ex->name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    if (!tap_ok(m->params && m->grads, "%s: stage 0 keeps full parameter and gradient blocks", ex->name))
        goto out;
    int wok = 1, mapped = 0;
    for (int i = 0; i < m->n_tensors; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        char hn[160];
        int tr;
        long r0;
        st_tensor *h = hf_name_fused(ex->fused, zt_model_arch(mc), t->name, hn, sizeof hn, &tr, &r0)
                           ? NULL : st_find(&w, hn);
        const size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        double d, mx;
        if (!h || h->numel < t->numel + (size_t)r0 * cols || (hf_parts(hn) == 1 && h->numel != t->numel)) {
            tap_diag("%s: no HF tensor of %zu elements for %s (%s)", ex->name, t->numel, t->name, hn);
            wok = 0;
            continue;
        }
        h->uses++;
        mapped++;
        compare(t, m->params + t->offset, h->data + (size_t)r0 * cols, tr, &d, &mx);
        if (d != 0) { tap_diag("%s: %s differs from %s by %.3g", ex->name, t->name, hn, d); wok = 0; }
    }
    for (int i = 0; i < w.n; ++i)
        if (w.t[i].uses != hf_parts(w.t[i].name)) { tap_diag("%s: %s used %d times", ex->name, w.t[i].name, w.t[i].uses); wok = 0; }
    int nparts = 0;
    for (int i = 0; i < w.n; ++i) nparts += hf_parts(w.t[i].name);
    tap_ok(wok && mapped == nparts, "%s: every one of the %d HF tensors loaded bit-exactly where the layout says",
           ex->name, w.n);

    /* ---- forward: log-probs and loss */
    zt_shard *sh = ctx->sh;
    zt_batch_buf *bb = &ctx->acts;
    memcpy(zt_batch_host_inputs(bb), in, sizeof(int) * (size_t)(B * T));
    memcpy(zt_batch_host_targets(bb), tg, sizeof(int) * (size_t)(B * T));
    zt_batch_buf_upload(ctx, bb, B * T, B * T);
    zt_shard_zero_grads(sh);
    double ls = NAN;
    if (!tap_ok(zt_shard_forward(sh, bb->acts, bb->inputs, bb->targets, B, T, 1, &ls, &st) == ZT_OK,
                "%s: forward", ex->name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    char what[160];
    snprintf(what, sizeof what, "%s: loss of the fixed batch (|diff| %.2e)", ex->name,
             fabs(ls / (B * T) - json_real_value(json_object_get(meta, "loss"))));
    tap_close(ls / (B * T), json_real_value(json_object_get(meta, "loss")), 0, TOL_LOSS, what);
    const st_tensor *lp = st_find(&ref, "logprobs");
    if (m->ops->probs && lp && lp->numel == (size_t)(B * T * V)) {
        double worst = 0;
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < T; ++t) {
                const float *p = m->ops->probs(m->self, bb->acts, b, t);
                if (!p) { worst = INFINITY; continue; }   /* (not kept: one chunk holds them all here) */
                for (int v = 0; v < V; ++v) {
                    double d = fabs(log((double)p[v]) - lp->data[((size_t)b * T + t) * V + v]);
                    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
                }
            }
        tap_ok(worst <= TOL_LOGPROB, "%s: log-softmax of the logits [%d, %d, %d], max |diff| %.2e",
               ex->name, B, T, V, worst);
    } else {
        tap_ok(0, "%s: log-probs: %s", ex->name, lp ? "the model has no probs op" : "no reference");
    }

    /* ---- backward: every parameter's gradient */
    if (!tap_ok(zt_shard_backward(sh, bb->acts, 1.0f / (float)(B * T), &st) == ZT_OK, "%s: backward",
                ex->name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    int gok = 1, ng = 0;
    double worst = 0;
    for (int i = 0; i < m->n_tensors; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        char hn[160], gn[200];
        int tr;
        long r0;
        if (hf_name_fused(ex->fused, zt_model_arch(mc), t->name, hn, sizeof hn, &tr, &r0)) continue;
        snprintf(gn, sizeof gn, "grad.%s", hn);
        const st_tensor *g = st_find(&ref, gn);
        const size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        double d, mx;
        if (!g || g->numel < t->numel + (size_t)r0 * cols) { gok = 0; tap_diag("%s: no reference %s", ex->name, gn); continue; }
        compare(t, m->grads + t->offset, g->data + (size_t)r0 * cols, tr, &d, &mx);
        const double rel = d / (mx > 0 ? mx : 1);
        if (!(rel <= TOL_GRAD)) {
            gok = 0;
            tap_diag("%s: gradient of %s: max |diff| %.3g, %.3g of its largest entry %.3g", ex->name,
                     t->name, d, rel, mx);
        }
        if (rel > worst) worst = rel;
        ng++;
    }
    int nref = 0;
    for (size_t i = 0; i < json_array_size(json_object_get(meta, "params")); ++i)
        nref += hf_parts(json_string_value(json_array_get(json_object_get(meta, "params"), i)));
    tap_ok(gok && ng == m->n_tensors && ng == nref,
           "%s: gradients of all %d parameter tensors (worst %.2e of the tensor's largest entry)",
           ex->name, ng, worst);

    /* ---- 3 AdamW steps through zt_train_step on the same batch */
    fixed_batch fb = {B, T, in, tg};
    zt_data_source src = {&fb, fixed_get, NULL, NULL}, none = {0};
    if (!tap_ok(zt_ctx_set_data(ctx, src, none, &st) == ZT_OK, "%s: data source", ex->name)) goto out;
    json_t *sl = json_object_get(meta, "step_losses");
    int sok = 1;
    double sworst = 0;
    for (size_t i = 0; i < json_array_size(sl); ++i) {
        zt_metrics mt;
        if (zt_train_step(ctx, &mt, &st) != ZT_OK) { tap_diag("step %zu: %s", i + 1, st.msg); sok = 0; break; }
        const double want = json_real_value(json_array_get(sl, i));
        tap_diag("%s: step %zu loss %.7f, transformers %.7f", ex->name, i + 1, mt.loss, want);
        sok &= fabs(mt.loss - want) <= TOL_STEP;
        if (!(fabs(mt.loss - want) <= sworst)) sworst = fabs(mt.loss - want);
    }
    tap_ok(sok && json_array_size(sl) == 3,
           "%s: losses of 3 AdamW steps match torch.optim.AdamW (max |diff| %.2e)", ex->name, sworst);
    double after = NAN;
    int rc = zt_loss(ctx, in, tg, B, T, &after, &st);
    snprintf(what, sizeof what, "%s: loss after the third update (zt_loss, |diff| %.2e)", ex->name,
             fabs(after - json_real_value(json_object_get(meta, "loss_after"))));
    tap_close(rc == ZT_OK ? after : NAN, json_real_value(json_object_get(meta, "loss_after")), 0, TOL_STEP,
              what);

out:
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    st_set_free(&ref);
    st_set_free(&w);
    json_decref(meta);
    free(in);
    free(tg);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    const char *src = getenv("ZT_SRCDIR");
    char root[512];
    snprintf(root, sizeof root, "%s/tests/fixtures/hf", src && *src ? src : ".");
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; ++i) run_fixture(root, &fixtures[i]);
    int rc = tap_done();
    zt_finalize();
    return rc;
}
