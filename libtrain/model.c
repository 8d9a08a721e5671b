/* model.c -- GPT-2: layout, initialization, forward, backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

/* ------------------------------------------------------------ layout */

/* Per-block tensor family, in layout order. */
enum { T_LN1W, T_LN1B, T_QKVW, T_QKVB, T_PROJW, T_PROJB, T_LN2W, T_LN2B,
       T_FCW, T_FCB, T_FCPW, T_FCPB, T_PER_LAYER };
static const char *layer_names[T_PER_LAYER] = {
    "ln1.w", "ln1.b", "attn.qkv.w", "attn.qkv.b", "attn.proj.w", "attn.proj.b",
    "ln2.w", "ln2.b", "mlp.fc.w", "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"};

static void layer_shape(int which, int C, int *ndim, int shape[2]) {
    int rows = 0, cols = 0;
    switch (which) {
    case T_LN1W: case T_LN1B: case T_LN2W: case T_LN2B:
    case T_PROJB: case T_FCPB: rows = C; break;
    case T_QKVW: rows = 3 * C; cols = C; break;
    case T_QKVB: rows = 3 * C; break;
    case T_PROJW: rows = C; cols = C; break;
    case T_FCW: rows = 4 * C; cols = C; break;
    case T_FCB: rows = 4 * C; break;
    case T_FCPW: rows = C; cols = 4 * C; break;
    }
    *ndim = cols ? 2 : 1;
    shape[0] = rows;
    shape[1] = cols ? cols : 1;
}

static void add_tensor(zt_gpt *m, const char *name, int unit, int ndim, int r, int c) {
    zt_tensor_info *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->unit = unit;
    t->offset = m->num_params;
    t->ndim = ndim;
    t->shape[0] = r;
    t->shape[1] = c;
    t->numel = (size_t)r * (size_t)c;
    t->decay = ndim == 2;
    m->num_params += t->numel;
}

static void begin_unit(zt_gpt *m, const char *name) {
    zt_unit_info *u = &m->units[m->n_units];
    snprintf(u->name, sizeof u->name, "%s", name);
    u->offset = m->num_params;
    u->first_tensor = m->n_tensors;
}
static void end_unit(zt_gpt *m) {
    zt_unit_info *u = &m->units[m->n_units++];
    u->numel = m->num_params - u->offset;
    u->n_tensors = m->n_tensors - u->first_tensor;
}

void zt_gpt_bind(const zt_gpt *m, float *block, zt_gpt_params *v) {
    int L = m->cfg.n_layer;
    v->wte = block + m->tensors[0].offset;
    v->wpe = block + m->tensors[1].offset;
    for (int l = 0; l < L; ++l) {
        const zt_tensor_info *t = &m->tensors[2 + l * T_PER_LAYER];
        float **f = (float **)&v->h[l];   /* zt_gpt_layer is T_PER_LAYER pointers */
        for (int k = 0; k < T_PER_LAYER; ++k) f[k] = block + t[k].offset;
    }
    v->lnfw = block + m->tensors[2 + L * T_PER_LAYER].offset;
    v->lnfb = block + m->tensors[3 + L * T_PER_LAYER].offset;
}

void zt_gpt_bind_unit(const zt_gpt *m, int u, float *base, zt_gpt_params *v) {
    const zt_unit_info *ui = &m->units[u];
    int L = m->cfg.n_layer;
    if (u == 0) {
        v->wte = base + (m->tensors[0].offset - ui->offset);
        v->wpe = base + (m->tensors[1].offset - ui->offset);
    } else if (u == L + 1) {
        v->lnfw = base + (m->tensors[2 + L * T_PER_LAYER].offset - ui->offset);
        v->lnfb = base + (m->tensors[3 + L * T_PER_LAYER].offset - ui->offset);
    } else {
        const zt_tensor_info *t = &m->tensors[2 + (u - 1) * T_PER_LAYER];
        float **f = (float **)&v->h[u - 1];
        for (int k = 0; k < T_PER_LAYER; ++k) f[k] = base + (t[k].offset - ui->offset);
    }
}

int zt_gpt_create(const zt_model_config *mc, const zt_backend *be, int flags,
                  zt_gpt **out, zt_status *st) {
    *out = NULL;
    if (mc->n_layer < 1 || mc->n_head < 1 || mc->n_embd < 1 || mc->context < 1 ||
        mc->vocab < 2 || mc->n_embd % mc->n_head)
        return zt_fail(st, ZT_EINVAL, "invalid model shape (n_layer %d, n_head %d, "
                       "n_embd %d, context %d, vocab %d)", mc->n_layer, mc->n_head,
                       mc->n_embd, mc->context, mc->vocab);
    zt_gpt *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    m->cfg = *mc;
    m->be = be;
    int L = mc->n_layer, C = mc->n_embd;
    m->tensors = calloc((size_t)(4 + L * T_PER_LAYER), sizeof *m->tensors);
    m->units = calloc((size_t)(L + 2), sizeof *m->units);
    m->p.h = calloc((size_t)L, sizeof(zt_gpt_layer));
    m->g.h = calloc((size_t)L, sizeof(zt_gpt_layer));
    if (!m->tensors || !m->units || !m->p.h || !m->g.h) {
        zt_gpt_free(m);
        return zt_fail(st, ZT_ENOMEM, "out of memory (model layout)");
    }
    begin_unit(m, "embeddings");
    add_tensor(m, "wte", 0, 2, mc->vocab, C);
    add_tensor(m, "wpe", 0, 2, mc->context, C);
    end_unit(m);
    for (int l = 0; l < L; ++l) {
        char un[24], tn[40];
        snprintf(un, sizeof un, "block.%d", l);
        begin_unit(m, un);
        for (int k = 0; k < T_PER_LAYER; ++k) {
            int nd, sh[2];
            layer_shape(k, C, &nd, sh);
            snprintf(tn, sizeof tn, "h%d.%s", l, layer_names[k]);
            add_tensor(m, tn, 1 + l, nd, sh[0], sh[1]);
        }
        end_unit(m);
    }
    begin_unit(m, "final_norm");
    add_tensor(m, "lnf.w", L + 1, 1, C, 1);
    add_tensor(m, "lnf.b", L + 1, 1, C, 1);
    end_unit(m);

    if (flags & ZT_GPT_PARAMS) {
        m->params = zt_mem_alloc(m->num_params * sizeof(float), ZT_MEM_PARAMS, st);
        if (!m->params) { zt_gpt_free(m); return st ? st->code : ZT_ENOMEM; }
        zt_gpt_bind(m, m->params, &m->p);
    }
    if (flags & ZT_GPT_GRADS) {
        m->grads = zt_mem_alloc(m->num_params * sizeof(float), ZT_MEM_GRADS, st);
        if (!m->grads) { zt_gpt_free(m); return st ? st->code : ZT_ENOMEM; }
        zt_gpt_bind(m, m->grads, &m->g);
    }
    *out = m;
    return ZT_OK;
}

void zt_gpt_free(zt_gpt *m) {
    if (!m) return;
    zt_mem_free(m->params);
    zt_mem_free(m->grads);
    free(m->tensors);
    free(m->units);
    free(m->p.h);
    free(m->g.h);
    free(m);
}

const zt_tensor_info *zt_gpt_find_tensor(const zt_gpt *m, const char *name) {
    for (int i = 0; i < m->n_tensors; ++i)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* FNV-1a of a name: the per-tensor RNG key. */
static uint64_t name_key(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void zt_gpt_init_range(const zt_gpt *m, uint64_t seed, size_t lo, size_t hi, float *dst) {
    const double std = 0.02, resid_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        float *p = dst + (a - lo);
        size_t n = b - a, j0 = a - t->offset;
        const char *nm = t->name;
        size_t len = strlen(nm);
        int is_ln = strstr(nm, "ln") != NULL;
        int is_bias = len > 2 && !strcmp(nm + len - 2, ".b");
        if (is_ln || is_bias) {
            float v = (is_ln && !is_bias) ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; ++j) p[j] = v;
        } else {
            double s = (strstr(nm, "proj.w") != NULL) ? resid_std : std;
            uint64_t key = zt_hash3(seed, name_key(nm), 0x696e6974ULL);
            #pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j) p[j] = (float)(s * zt_normal(key, j0 + j));
        }
    }
}

void zt_gpt_init_params(zt_gpt *m, uint64_t seed) {
    zt_gpt_init_range(m, seed, 0, m->num_params, m->params);
}

/* ------------------------------------------------------------ activations */


/* Carve the activation block.  With base == NULL only sizes are computed. */
static size_t carve(const zt_model_config *mc, int B, int T, int training,
                    zt_gpt_acts *a, float *base) {
    size_t N = (size_t)B * T, C = (size_t)mc->n_embd, V = (size_t)mc->vocab;
    size_t NH = (size_t)mc->n_head, L = (size_t)mc->n_layer;
    size_t slots = training ? L : 1, nres = training ? L + 1 : 2;
    size_t off = 0;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += ((size_t)(n) + 15) & ~(size_t)15; } while (0)
    float *dummy;
    (void)dummy;
    for (size_t r = 0; r < nres; ++r) TAKE(a->res[r], N * C);
    for (size_t s = 0; s < slots; ++s) {
        struct zt_layer_acts *la = base ? &a->layer[s] : NULL;
#define LTAKE(f, n) do { if (la) { TAKE(la->f, n); } else { TAKE(dummy, n); } } while (0)
        LTAKE(ln1, N * C); LTAKE(ln1_mean, N); LTAKE(ln1_rstd, N);
        LTAKE(qkv, N * 3 * C); LTAKE(atty, N * C); LTAKE(lse, (size_t)B * NH * T);
        LTAKE(res2, N * C);
        LTAKE(ln2, N * C); LTAKE(ln2_mean, N); LTAKE(ln2_rstd, N);
        LTAKE(fch, N * 4 * C); LTAKE(fch_gelu, N * 4 * C);
#undef LTAKE
    }
    TAKE(a->scratch, N * C);
    TAKE(a->lnf, N * C); TAKE(a->lnf_mean, N); TAKE(a->lnf_rstd, N);
    TAKE(a->probs, N * V); TAKE(a->losses, N);
    /* int and float are both 4 bytes: token ids share the block */
    if (base) a->inputs = (int *)(void *)(base + off);
    off += (N + 15) & ~(size_t)15;
    if (base) a->targets = (int *)(void *)(base + off);
    off += (N + 15) & ~(size_t)15;
    if (training) {
        TAKE(a->dres, N * C); TAKE(a->dbuf, N * C); TAKE(a->dqkv, N * 3 * C);
        TAKE(a->d4a, N * 4 * C); TAKE(a->d4b, N * 4 * C);
    }
#undef TAKE
    return off * sizeof(float);
}

size_t zt_gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training) {
    zt_gpt_acts a;
    memset(&a, 0, sizeof a);
    float *res[1];
    a.res = res;   /* not written when base == NULL, but keep it valid */
    return carve(mc, B, T, training, &a, NULL);
}

int zt_gpt_acts_alloc(const zt_gpt *m, int B, int T, int training, int mem_tag,
                      zt_gpt_acts *a, zt_status *st) {
    memset(a, 0, sizeof *a);
    if (B < 1 || T < 1 || T > m->cfg.context)
        return zt_fail(st, ZT_EINVAL, "batch shape B=%d T=%d invalid (context %d)",
                       B, T, m->cfg.context);
    int L = m->cfg.n_layer;
    a->B = B; a->T = T; a->training = training;
    a->n_slots = training ? L : 1;
    a->res = calloc((size_t)(training ? L + 1 : 2), sizeof(float *));
    a->layer = calloc((size_t)a->n_slots, sizeof *a->layer);
    if (!a->res || !a->layer) { zt_gpt_acts_free(a); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    size_t bytes = zt_gpt_acts_bytes(&m->cfg, B, T, training);
    a->block = zt_mem_alloc(bytes, mem_tag, st);
    if (!a->block) {
        zt_gpt_acts_free(a);
        return zt_fail_prefix(st, "activations for B=%d T=%d", B, T);
    }
    a->bytes = bytes;
    carve(&m->cfg, B, T, training, a, a->block);
    return ZT_OK;
}

void zt_gpt_acts_free(zt_gpt_acts *a) {
    zt_mem_free(a->block);
    free(a->res);
    free(a->layer);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------ forward */

static struct zt_layer_acts *slot(zt_gpt_acts *a, int l) {
    return &a->layer[a->n_slots == 1 ? 0 : l];
}
static float *res_at(zt_gpt_acts *a, int l) {
    return a->training ? a->res[l] : a->res[l & 1];
}

#define HOOK(fn, ...) do { if (m->hooks.fn) ZT_TRY(m->hooks.fn(m->hooks.user, __VA_ARGS__, st)); } while (0)

int zt_gpt_forward(zt_gpt *m, zt_gpt_acts *a, int T, int with_targets, double *loss_sum,
                   zt_status *st) {
    const zt_backend *be = m->be;
    int B = a->B, C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab;
    int L = m->cfg.n_layer, N = B * T;

    HOOK(need, 0, ZT_FWD);
    be->encoder_fwd(res_at(a, 0), a->inputs, m->p.wte, m->p.wpe, B, T, C);
    for (int l = 0; l < L; ++l) {
        HOOK(need, 1 + l, ZT_FWD);
        const zt_gpt_layer *w = &m->p.h[l];
        struct zt_layer_acts *s = slot(a, l);
        float *x = res_at(a, l), *y = res_at(a, l + 1);
        /* attention sub-block: res2 = x + proj(attn(qkv(ln1(x)))) */
        be->layernorm_fwd(s->ln1, s->ln1_mean, s->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
        be->matmul_fwd(s->qkv, s->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
        be->attention_fwd(s->atty, s->lse, s->qkv, B, T, C, NH);
        be->matmul_fwd(a->scratch, s->atty, w->attprojw, w->attprojb, N, C, C);
        be->add(s->res2, x, a->scratch, (size_t)N * C);
        /* MLP sub-block: y = res2 + proj(gelu(fc(ln2(res2)))) */
        be->layernorm_fwd(s->ln2, s->ln2_mean, s->ln2_rstd, s->res2, w->ln2w, w->ln2b, N, C);
        be->matmul_fwd(s->fch, s->ln2, w->fcw, w->fcb, N, C, 4 * C);
        be->gelu_fwd(s->fch_gelu, s->fch, (size_t)N * 4 * C);
        be->matmul_fwd(a->scratch, s->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
        be->add(y, s->res2, a->scratch, (size_t)N * C);
        HOOK(done, 1 + l, ZT_FWD);
    }
    HOOK(need, L + 1, ZT_FWD);
    be->layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, res_at(a, L), m->p.lnfw,
                      m->p.lnfb, N, C);
    HOOK(done, L + 1, ZT_FWD);
    /* tied LM head: logits[N,V] = lnf @ wte^T */
    be->matmul_fwd(a->probs, a->lnf, m->p.wte, NULL, N, C, V);
    HOOK(done, 0, ZT_FWD);
    if (!with_targets) {
        for (int i = 0; i < N; ++i) a->targets[i] = -1;
    }
    be->xent_fwd(a->losses, a->probs, a->probs, a->targets, N, V);
    double sum = 0.0;
    if (with_targets)
        for (int i = 0; i < N; ++i) sum += a->losses[i];
    *loss_sum = sum;
    return ZT_OK;
}

/* ------------------------------------------------------------ backward */

int zt_gpt_backward(zt_gpt *m, zt_gpt_acts *a, float dloss, zt_status *st) {
    const zt_backend *be = m->be;
    int B = a->B, T = a->T, C = m->cfg.n_embd, NH = m->cfg.n_head, V = m->cfg.vocab;
    int L = m->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;

    be->xent_bwd(a->probs, a->probs, a->targets, dloss, N, V);
    /* LM head (tied): dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
    HOOK(need, 0, ZT_BWD);
    be->matmul_bwd(a->dbuf, m->g.wte, NULL, a->probs, a->lnf, m->p.wte, N, C, V);
    HOOK(done, 0, ZT_BWD);
    be->zero(a->dres, NC * sizeof(float));
    HOOK(need, L + 1, ZT_BWD);
    be->layernorm_bwd(a->dres, m->g.lnfw, m->g.lnfb, a->dbuf, a->res[L], m->p.lnfw,
                      a->lnf_mean, a->lnf_rstd, N, C);
    HOOK(done, L + 1, ZT_BWD);
    HOOK(grads_ready, L + 1);
    for (int l = L - 1; l >= 0; --l) {
        HOOK(need, 1 + l, ZT_BWD);
        const zt_gpt_layer *w = &m->p.h[l];
        zt_gpt_layer *g = &m->g.h[l];
        struct zt_layer_acts *s = &a->layer[l];
        /* MLP: dres flows to res2 unchanged and into the projection */
        be->matmul_bwd(a->d4a, g->fcprojw, g->fcprojb, a->dres, s->fch_gelu, w->fcprojw,
                       N, 4 * C, C);
        be->gelu_bwd(a->d4b, s->fch, a->d4a, (size_t)N * 4 * C);
        be->matmul_bwd(a->dbuf, g->fcw, g->fcb, a->d4b, s->ln2, w->fcw, N, C, 4 * C);
        be->layernorm_bwd(a->dres, g->ln2w, g->ln2b, a->dbuf, s->res2, w->ln2w,
                          s->ln2_mean, s->ln2_rstd, N, C);
        /* attention */
        be->matmul_bwd(a->dbuf, g->attprojw, g->attprojb, a->dres, s->atty, w->attprojw,
                       N, C, C);
        be->attention_bwd(a->dqkv, a->dbuf, s->qkv, s->atty, s->lse, B, T, C, NH);
        be->matmul_bwd(a->dbuf, g->qkvw, g->qkvb, a->dqkv, s->ln1, w->qkvw, N, C, 3 * C);
        be->layernorm_bwd(a->dres, g->ln1w, g->ln1b, a->dbuf, a->res[l], w->ln1w,
                          s->ln1_mean, s->ln1_rstd, N, C);
        HOOK(done, 1 + l, ZT_BWD);
        HOOK(grads_ready, 1 + l);
    }
    HOOK(need, 0, ZT_BWD);
    be->encoder_bwd(m->g.wte, m->g.wpe, a->dres, a->inputs, B, T, C);
    HOOK(done, 0, ZT_BWD);
    HOOK(grads_ready, 0);
    return ZT_OK;
}
