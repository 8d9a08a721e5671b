/*
 * table_gpt.h -- a GPT-2 training step written with the backend table
 * alone (header-only; used by tests/test_cuda.c and bench/bench_gpu.c).
 *
 * Forward (pre-LayerNorm blocks, tied embedding), softmax cross-entropy,
 * backward, global-norm clipping to 1.0 and AdamW over all parameters, with
 * every activation kept.  No communication, no engine: it checks that the
 * kernels compose into training (CPU vs GPU losses) and times a model step.
 * Initialization and data come from a fixed seed, so two backends given the
 * same shape and seed train the same model on the same tokens.
 */
#ifndef ZT_TABLE_GPT_H
#define ZT_TABLE_GPT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef struct tg_shape { int L, H, C, V, B, T; } tg_shape;

typedef struct tg_layer_off {
    size_t ln1w, ln1b, wqkv, bqkv, wproj, bproj, ln2w, ln2b, wfc, bfc, wfcp, bfcp, size;
} tg_layer_off;

typedef struct tg_act {
    float *ln1, *m1, *r1, *qkv, *att, *lse, *res2, *ln2, *m2, *r2, *fch, *gel, *res3;
} tg_act;

typedef struct tg_model {
    const zt_backend *be;
    tg_shape s;
    tg_layer_off lo;
    size_t off_wte, off_wpe, off_layers, off_lnf, P;
    float *params, *grads, *mom, *var;
    tg_act *a;
    float *x0, *lnf, *mf, *rf, *logits, *losses, *dres, *dbuf, *d4, *d4b, *dqkv;
    int *tok, *tgt;
    float *hl;         /* host losses */
    double last_norm;  /* gradient norm of the last step */
} tg_model;

static inline uint64_t tg_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline void *tg_alloc(tg_model *m, size_t bytes, int *ok) {
    void *p = m->be->alloc(bytes);
    if (!p) *ok = 0;
    return p;
}

/* d[n] = scale * uniform(-1, 1) + bias, through a host buffer */
static inline int tg_fill(const zt_backend *be, float *d, size_t n, float scale, float bias, uint64_t *rs) {
    const size_t chunk = (size_t)1 << 20;
    float *h = malloc(chunk * sizeof(float));
    if (!h) return 0;
    for (size_t off = 0; off < n; off += chunk) {
        const size_t k = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < k; i++)
            h[i] = scale * (float)((double)(tg_rng(rs) >> 11) / 9007199254740992.0 * 2.0 - 1.0) + bias;
        be->to_device(d + off, h, k * sizeof(float));
    }
    free(h);
    return 1;
}

static inline int *tg_tokens(tg_model *m, size_t n, int V, uint64_t *rs, int *ok) {
    int *h = malloc(n * sizeof(int));
    int *d = tg_alloc(m, n * sizeof(int), ok);
    if (!h || !d) {
        free(h);
        *ok = 0;
        return d;
    }
    for (size_t i = 0; i < n; i++) h[i] = (int)(tg_rng(rs) % (uint64_t)V);
    m->be->to_device(d, h, n * sizeof(int));
    free(h);
    return d;
}

static inline void tg_free(tg_model *m) {
    const zt_backend *be = m->be;
    if (!be) return;
    be->free(m->params); be->free(m->grads); be->free(m->mom); be->free(m->var); be->free(m->x0);
    if (m->a)
        for (int l = 0; l < m->s.L; l++) {
            tg_act *q = &m->a[l];
            be->free(q->ln1); be->free(q->m1); be->free(q->r1); be->free(q->qkv); be->free(q->att);
            be->free(q->lse); be->free(q->res2); be->free(q->ln2); be->free(q->m2); be->free(q->r2);
            be->free(q->fch); be->free(q->gel); be->free(q->res3);
        }
    free(m->a);
    be->free(m->lnf); be->free(m->mf); be->free(m->rf); be->free(m->logits); be->free(m->losses);
    be->free(m->dres); be->free(m->dbuf); be->free(m->d4); be->free(m->d4b); be->free(m->dqkv);
    be->free(m->tok); be->free(m->tgt);
    free(m->hl);
    memset(m, 0, sizeof *m);
}

/* 1 on success, 0 when out of memory (m is then freed) */
static inline int tg_init(tg_model *m, const zt_backend *be, tg_shape s, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->be = be;
    m->s = s;
    const size_t c = (size_t)s.C, N = (size_t)s.B * s.T;
    tg_layer_off o;
    size_t p = 0;
    o.ln1w = p; p += c;
    o.ln1b = p; p += c;
    o.wqkv = p; p += 3 * c * c;
    o.bqkv = p; p += 3 * c;
    o.wproj = p; p += c * c;
    o.bproj = p; p += c;
    o.ln2w = p; p += c;
    o.ln2b = p; p += c;
    o.wfc = p; p += 4 * c * c;
    o.bfc = p; p += 4 * c;
    o.wfcp = p; p += 4 * c * c;
    o.bfcp = p; p += c;
    o.size = p;
    m->lo = o;
    m->off_wte = 0;
    m->off_wpe = (size_t)s.V * c;
    m->off_layers = m->off_wpe + (size_t)s.T * c;
    m->off_lnf = m->off_layers + (size_t)s.L * o.size;
    m->P = m->off_lnf + 2 * c;

    int ok = 1;
    m->params = tg_alloc(m, m->P * 4, &ok);
    m->grads = tg_alloc(m, m->P * 4, &ok);
    m->mom = tg_alloc(m, m->P * 4, &ok);
    m->var = tg_alloc(m, m->P * 4, &ok);
    m->a = calloc((size_t)s.L, sizeof *m->a);
    if (!m->a) ok = 0;
    m->x0 = tg_alloc(m, N * c * 4, &ok);
    for (int l = 0; ok && l < s.L; l++) {
        tg_act *q = &m->a[l];
        q->ln1 = tg_alloc(m, N * c * 4, &ok); q->m1 = tg_alloc(m, N * 4, &ok); q->r1 = tg_alloc(m, N * 4, &ok);
        q->qkv = tg_alloc(m, 3 * N * c * 4, &ok); q->att = tg_alloc(m, N * c * 4, &ok);
        q->lse = tg_alloc(m, (size_t)s.B * s.H * s.T * 4, &ok); q->res2 = tg_alloc(m, N * c * 4, &ok);
        q->ln2 = tg_alloc(m, N * c * 4, &ok); q->m2 = tg_alloc(m, N * 4, &ok); q->r2 = tg_alloc(m, N * 4, &ok);
        q->fch = tg_alloc(m, 4 * N * c * 4, &ok); q->gel = tg_alloc(m, 4 * N * c * 4, &ok);
        q->res3 = tg_alloc(m, N * c * 4, &ok);
    }
    m->lnf = tg_alloc(m, N * c * 4, &ok);
    m->mf = tg_alloc(m, N * 4, &ok);
    m->rf = tg_alloc(m, N * 4, &ok);
    m->logits = tg_alloc(m, N * (size_t)s.V * 4, &ok);
    m->losses = tg_alloc(m, N * 4, &ok);
    m->dres = tg_alloc(m, N * c * 4, &ok);
    m->dbuf = tg_alloc(m, N * c * 4, &ok);
    m->d4 = tg_alloc(m, 4 * N * c * 4, &ok);
    m->d4b = tg_alloc(m, 4 * N * c * 4, &ok);
    m->dqkv = tg_alloc(m, 3 * N * c * 4, &ok);
    m->hl = malloc(N * 4);
    if (!m->hl) ok = 0;
    uint64_t rs = seed | 1;
    if (ok) m->tok = tg_tokens(m, N, s.V, &rs, &ok);
    if (ok) m->tgt = tg_tokens(m, N, s.V, &rs, &ok);
    if (ok) ok = tg_fill(be, m->params, m->P, 0.02f, 0.0f, &rs);
    for (int l = 0; ok && l < s.L; l++) {   /* LayerNorm weights 1, biases 0 */
        float *lp = m->params + m->off_layers + (size_t)l * o.size;
        ok = tg_fill(be, lp + o.ln1w, c, 0.0f, 1.0f, &rs) && tg_fill(be, lp + o.ln2w, c, 0.0f, 1.0f, &rs);
        be->zero(lp + o.ln1b, c * 4);
        be->zero(lp + o.ln2b, c * 4);
    }
    if (ok) ok = tg_fill(be, m->params + m->off_lnf, c, 0.0f, 1.0f, &rs);
    if (ok) be->zero(m->params + m->off_lnf + c, c * 4);
    if (!ok) tg_free(m);
    return ok;
}

/* Forward and loss; returns the mean loss (host).  Leaves the
 * probabilities in m->logits for tg_backward. */
static inline double tg_forward(tg_model *m) {
    const zt_backend *be = m->be;
    const int L = m->s.L, NH = m->s.H, C = m->s.C, V = m->s.V, B = m->s.B, T = m->s.T;
    const size_t N = (size_t)B * T, c = (size_t)C;
    const tg_layer_off lo = m->lo;
    float *params = m->params;
    float *wte = params + m->off_wte, *wpe = params + m->off_wpe;

    /* ---- forward */
    be->encoder_fwd(m->x0, m->tok, wte, wpe, B, T, C);
    const float *res = m->x0;
    for (int l = 0; l < L; l++) {
        float *lp = params + m->off_layers + (size_t)l * lo.size;
        tg_act *q = &m->a[l];
        be->layernorm_fwd(q->ln1, q->m1, q->r1, res, lp + lo.ln1w, lp + lo.ln1b, (int)N, C);
        be->matmul_fwd(q->qkv, q->ln1, lp + lo.wqkv, lp + lo.bqkv, (int)N, C, 3 * C);
        be->attention_fwd(q->att, q->lse, q->qkv, B, T, C, NH);
        be->matmul_fwd(m->dbuf, q->att, lp + lo.wproj, lp + lo.bproj, (int)N, C, C);
        be->add(q->res2, res, m->dbuf, N * c);
        be->layernorm_fwd(q->ln2, q->m2, q->r2, q->res2, lp + lo.ln2w, lp + lo.ln2b, (int)N, C);
        be->matmul_fwd(q->fch, q->ln2, lp + lo.wfc, lp + lo.bfc, (int)N, C, 4 * C);
        be->gelu_fwd(q->gel, q->fch, 4 * N * c);
        be->matmul_fwd(m->dbuf, q->gel, lp + lo.wfcp, lp + lo.bfcp, (int)N, 4 * C, C);
        be->add(q->res3, q->res2, m->dbuf, N * c);
        res = q->res3;
    }
    be->layernorm_fwd(m->lnf, m->mf, m->rf, res, params + m->off_lnf, params + m->off_lnf + c, (int)N, C);
    be->matmul_fwd(m->logits, m->lnf, wte, NULL, (int)N, C, V);   /* tied embedding */
    be->xent_fwd(m->losses, m->logits, m->logits, m->tgt, (int)N, V);
    be->to_host(m->hl, m->losses, N * 4);
    double loss = 0.0;
    for (size_t i = 0; i < N; i++) loss += m->hl[i];
    return loss / (double)N;
}

/* Gradients of the mean loss of the last tg_forward into m->grads. */
static inline void tg_backward(tg_model *m) {
    const zt_backend *be = m->be;
    const int L = m->s.L, NH = m->s.H, C = m->s.C, V = m->s.V, B = m->s.B, T = m->s.T;
    const size_t N = (size_t)B * T, c = (size_t)C;
    const tg_layer_off lo = m->lo;
    float *params = m->params, *grads = m->grads;
    float *wte = params + m->off_wte;
    const float *res = L ? m->a[L - 1].res3 : m->x0;

    /* ---- backward */
    be->zero(grads, m->P * 4);
    be->xent_bwd(m->logits, m->logits, m->tgt, 1.0f / (float)N, (int)N, V);
    be->matmul_bwd(m->dbuf, grads + m->off_wte, NULL, m->logits, m->lnf, wte, (int)N, C, V);
    be->zero(m->dres, N * c * 4);
    be->layernorm_bwd(m->dres, grads + m->off_lnf, grads + m->off_lnf + c, m->dbuf, res,
                      params + m->off_lnf, m->mf, m->rf, (int)N, C);
    for (int l = L - 1; l >= 0; l--) {
        float *lp = params + m->off_layers + (size_t)l * lo.size;
        float *gp = grads + m->off_layers + (size_t)l * lo.size;
        tg_act *q = &m->a[l];
        const float *res_in = l ? m->a[l - 1].res3 : m->x0;
        /* res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
        be->matmul_bwd(m->d4, gp + lo.wfcp, gp + lo.bfcp, m->dres, q->gel, lp + lo.wfcp, (int)N, 4 * C, C);
        be->gelu_bwd(m->d4b, q->fch, m->d4, 4 * N * c);
        be->matmul_bwd(m->dbuf, gp + lo.wfc, gp + lo.bfc, m->d4b, q->ln2, lp + lo.wfc, (int)N, C, 4 * C);
        be->layernorm_bwd(m->dres, gp + lo.ln2w, gp + lo.ln2b, m->dbuf, q->res2, lp + lo.ln2w, q->m2,
                          q->r2, (int)N, C);
        /* res2 = res_in + proj(attn(qkv(ln1(res_in)))) */
        be->matmul_bwd(m->dbuf, gp + lo.wproj, gp + lo.bproj, m->dres, q->att, lp + lo.wproj, (int)N, C, C);
        be->attention_bwd(m->dqkv, m->dbuf, q->qkv, q->att, q->lse, B, T, C, NH);
        be->matmul_bwd(m->dbuf, gp + lo.wqkv, gp + lo.bqkv, m->dqkv, q->ln1, lp + lo.wqkv, (int)N, C, 3 * C);
        be->layernorm_bwd(m->dres, gp + lo.ln1w, gp + lo.ln1b, m->dbuf, res_in, lp + lo.ln1w, q->m1, q->r1,
                          (int)N, C);
    }
    be->encoder_bwd(grads + m->off_wte, grads + m->off_wpe, m->dres, m->tok, B, T, C);
}

/* Global-norm clipping to 1 and AdamW (learning rate 3e-4, betas
 * 0.9/0.95, weight decay 0.1) for step index `step` (0-based). */
static inline void tg_update(tg_model *m, int step) {
    const zt_backend *be = m->be;
    float *params = m->params, *grads = m->grads;
    const double norm = sqrt(be->sumsq(grads, m->P));
    m->last_norm = norm;
    const float clip = norm > 1.0 ? (float)(1.0 / norm) : 1.0f;
    const int t = step + 1;
    be->adamw(params, grads, m->mom, m->var, m->P, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
              1.0f - powf(0.9f, (float)t), 1.0f - powf(0.95f, (float)t), clip);
}

/* One training step; returns its mean loss (before the update). */
static inline double tg_step(tg_model *m, int step) {
    const double loss = tg_forward(m);
    tg_backward(m);
    tg_update(m, step);
    return loss;
}

#endif /* ZT_TABLE_GPT_H */
