/* classifier.c -- the LM head, loss and logit gradient in chunks of rows
 * (classifier.h). */
#include "classifier.h"
#include "model.h"

/* The auto rule (ztrain.classifier_chunk_rows = 0).  Every chunk's dw
 * GEMM, dw[V, C] += dlogits_chunk^T x_chunk, reads and writes the whole
 * fp32 [V, C] head gradient (8 V C bytes) for 2 R V C FLOPs: R / 4 FLOP per
 * byte, memory-bound below the GPU's ridge (an H100 SXM's 989 bf16
 * TFLOP/s over 3.35 TB/s: ~295 FLOP/byte).  At 512 rows (Llama 3's
 * V = 128256 in 256 MiB of fp32 logits) the GEMM takes about twice its
 * compute-bound time.  So where the block keeps bf16 logits
 * (zt_classifier_l16) and the head takes a gradient (full fine-tuning; not
 * LoRA, whose base, the head included, is frozen: lora.h), the chunk holds
 * ZT_CLASSIFIER_AUTO_BYTES of bf16 logits: twice the rows, half the dw
 * passes over [V, C], the chunk's bytes those of an fp32 chunk.  Everywhere
 * else the rows of ZT_CLASSIFIER_AUTO_BYTES of fp32 logits: fp32 logits
 * (eval, sampling, a final soft-cap, ZT_TEST_NO_L16), and a frozen head,
 * which runs no dw GEMM and where memory matters most. */
long zt_classifier_max_rows(const zt_model_config *mc, int training, int capped) {
    if (mc->classifier_rows > 0) return mc->classifier_rows;
    const size_t elem = zt_classifier_l16(mc, training, capped) && mc->lora_r <= 0
                            ? sizeof(uint16_t)
                            : sizeof(float);
    const size_t row = (size_t)(mc->vocab > 0 ? mc->vocab : 1) * elem;
    const size_t r = ZT_CLASSIFIER_AUTO_BYTES / row;
    return r > 0 ? (long)r : 1;
}

/* ceil(N / rmax) chunks of equal rows, the last one the rest */
static long rows_for(long rmax, long N) {
    if (N < 1) return 1;
    const long nch = (N + rmax - 1) / rmax;
    return (N + nch - 1) / nch;
}

long zt_classifier_rows(const zt_model_config *mc, long N, int training, int capped) {
    return rows_for(zt_classifier_max_rows(mc, training, capped), N);
}

long zt_classifier_buffer_rows(const zt_model_config *mc, long N, int training, int capped) {
    const long rmax = zt_classifier_max_rows(mc, training, capped);
    return N < rmax ? N : rmax;
}

int zt_classifier_l16(const zt_model_config *mc, int training, int capped) {
    return training && !capped && zt_acts16_on(mc) && zt_l16_test_on();
}

size_t zt_classifier_chunk_bytes(const zt_model_config *mc, long N, int training, int capped) {
    const size_t RV = (size_t)zt_classifier_buffer_rows(mc, N, training, capped) * (size_t)mc->vocab;
    if (zt_classifier_l16(mc, training, capped)) return ((RV + 127) & ~(size_t)127) * 2;
    return ZT_ACTS_ROUND(RV) * (training && capped ? 2 : 1) * sizeof(float);
}

void zt_classifier_carve(zt_carve *cv, zt_classifier *c, const zt_model_config *mc, size_t N,
                         int training, int capped) {
    const size_t RV =
        (size_t)zt_classifier_buffer_rows(mc, (long)N, training, capped) * (size_t)mc->vocab;
    float *p;
    if (zt_classifier_l16(mc, training, capped)) {
        uint16_t *p16 = zt_carve_take16(cv, RV);
        if (cv->base) c->logits16 = p16;
    } else {
        p = zt_carve_take(cv, RV, 0);
        if (cv->base) c->logits = p;
    }
    p = zt_carve_take(cv, N, 1);
    if (cv->base) c->losses = p;
    if (training && capped) {
        p = zt_carve_take(cv, RV, 0);
        if (cv->base) c->capped = p;
    }
    c->rmax = zt_classifier_max_rows(mc, training, capped);
}

/* chunk k of a pass over N rows in chunks of R: first row, rows */
static long chunk_rows(long N, long R, long k, long *r0) {
    *r0 = k * R;
    return N - *r0 < R ? N - *r0 : R;
}

/* rows [r0, ...) of the input: x's, or x16's (the bf16 input: x NULL) */
static const float *rows_x(const zt_classifier *c, const float *x, long r0, int C) {
    return c->x16 || !x ? NULL : x + (size_t)r0 * C;
}
static const uint16_t *rows_x16(const zt_classifier *c, long r0, int C) {
    return c->x16 ? c->x16 + (size_t)r0 * C : NULL;
}

/* logits of rows [r0, r0 + n): x w^T, soft-capped (the capped logits kept
 * when there is a buffer for them) */
static void chunk_logits(const zt_backend *be, zt_classifier *c, const float *x, const float *w,
                         long r0, long n, int C, int V, float cap) {
    zt_mm_fwd_x(be, c->logits, rows_x(c, x, r0, C), rows_x16(c, r0, C), w, c->w16, NULL, (int)n, C,
                V);
    if (cap > 0) {
        be->softcap_fwd(c->logits, c->logits, (size_t)n * V, cap);
        if (c->capped) be->copy(c->capped, c->logits, (size_t)n * V * sizeof(float));
    }
}

/* bf16 logits of rows [r0, r0 + n): the head GEMM writing bf16 (no soft-cap
 * on this path) */
static void chunk_logits16(const zt_backend *be, zt_classifier *c, const float *x, const float *w,
                           long r0, long n, int C, int V) {
    be->matmul_fwd_o16(c->logits16, NULL, rows_x(c, x, r0, C), rows_x16(c, r0, C), c->w16 ? NULL : w,
                       c->w16, NULL, (int)n, C, V);
}

void zt_classifier_forward(const zt_backend *be, zt_classifier *c, const float *x, const float *w,
                           const int *targets, int N, int C, int V, float cap, int has_targets,
                           double *loss_sum, double *loss_dev) {
    const long R = rows_for(c->rmax, N);
    const long nch = (N + R - 1) / R;
    long r0 = 0, n = 0;
    for (long k = 0; k < nch; ++k) {
        n = chunk_rows(N, R, k, &r0);
        if (c->logits16) {
            chunk_logits16(be, c, x, w, r0, n, C, V);
            be->xent16_fwd(c->losses + r0, c->logits16, targets + r0, (int)n, V);
            continue;
        }
        chunk_logits(be, c, x, w, r0, n, C, V, cap);
        be->xent_fwd(c->losses + r0, c->logits, c->logits, targets + r0, (int)n, V);
    }
    c->p0 = r0;
    c->pn = n;
    *loss_sum = 0.0;
    if (has_targets && loss_dev) be->sum_to(loss_dev, c->losses, (size_t)N);
    else if (has_targets) *loss_sum = be->sum(c->losses, (size_t)N);
}

/* The gradient of rows [r0, r0 + n) (a chunk): their probabilities'
 * gradient (softmax - onehot) * dloss in the chunk's buffer, then dx's rows
 * (overwritten) and dw's share (+=; NULL: a frozen head).  kept: the
 * chunk's forward values are still in the buffers (the fp32 path's
 * probabilities and capped logits, the bf16 path's logits), else its
 * logits are computed here; losses (NULL: none) the rows' losses too. */
static void chunk_grad(const zt_backend *be, zt_classifier *c, float *dx, float *dw, const float *x,
                       const float *w, const int *targets, float dloss, long r0, long n, int C, int V,
                       float cap, float *losses, int kept) {
    if (c->logits16) {
        /* bf16 logits: the gradient in place, read by the GEMMs */
        if (!kept) chunk_logits16(be, c, x, w, r0, n, C, V);
        be->xent16_fused(losses, c->logits16, targets + r0, dloss, (int)n, V);
        be->matmul_bwd_head16(dx + (size_t)r0 * C, dw, c->logits16, rows_x(c, x, r0, C),
                              rows_x16(c, r0, C), w, c->w16, (int)n, C, V);
        return;
    }
    if (kept) {
        be->xent_bwd(c->logits, c->logits, targets + r0, dloss, (int)n, V);
    } else {
        chunk_logits(be, c, x, w, r0, n, C, V, cap);
        be->xent_fused(losses, c->logits, targets + r0, dloss, (int)n, V);
    }
    if (cap > 0) be->softcap_bwd(c->logits, c->logits, c->capped, (size_t)n * V, cap);
    zt_mm_bwd_x(be, dx + (size_t)r0 * C, dw, NULL, c->logits, rows_x(c, x, r0, C),
                rows_x16(c, r0, C), w, c->w16, (int)n, C, V);
}

void zt_classifier_forward_fused(const zt_backend *be, zt_classifier *c, float *dx, float *dw,
                                 const float *x, const float *w, const int *targets, float dloss,
                                 int N, int C, int V, float cap, double *loss_sum,
                                 double *loss_dev) {
    const long R = rows_for(c->rmax, N);
    const long nch = (N + R - 1) / R;
    /* dw written fresh (backend.h set_dw_fresh over exactly its [V, C]:
     * train.c, a tied head's gradient, shard.h zt_shard_head_fresh): by the
     * first chunk's GEMM, the range then ended so that the others add */
    const int fresh = dw && V > 0 && C > 0 && be->dw_fresh && be->dw_fresh(dw) &&
                      be->dw_fresh(dw + (size_t)V * C - 1);
    /* last chunk first: dw sums the rows in the order of
     * zt_classifier_backward; every chunk's logits computed, their losses
     * written with their gradient */
    for (long k = nch - 1; k >= 0; --k) {
        long r0;
        const long n = chunk_rows(N, R, k, &r0);
        chunk_grad(be, c, dx, dw, x, w, targets, dloss, r0, n, C, V, cap, c->losses + r0, 0);
        if (fresh && k == nch - 1) be->set_dw_fresh(NULL, 0);
    }
    c->pn = 0;   /* (no probabilities kept: the buffer holds gradients) */
    *loss_sum = 0.0;
    if (loss_dev) be->sum_to(loss_dev, c->losses, (size_t)N);
    else *loss_sum = be->sum(c->losses, (size_t)N);
}

void zt_classifier_backward(const zt_backend *be, zt_classifier *c, float *dx, float *dw,
                            const float *x, const float *w, const int *targets, float dloss,
                            int N, int C, int V, float cap) {
    const long R = rows_for(c->rmax, N);
    const long nch = (N + R - 1) / R;
    for (long k = nch - 1; k >= 0; --k) {
        long r0;
        const long n = chunk_rows(N, R, k, &r0);
        /* the forward's last chunk is still in the buffers; the others are
         * recomputed */
        const int kept = k == nch - 1 && c->pn == n && c->p0 == r0;
        chunk_grad(be, c, dx, dw, x, w, targets, dloss, r0, n, C, V, cap, NULL, kept);
    }
    c->pn = 0;
}

const float *zt_classifier_probs(const zt_classifier *c, long row, int V) {
    if (c->logits16 || row < c->p0 || row >= c->p0 + c->pn) return NULL;
    return c->logits + (size_t)(row - c->p0) * (size_t)V;
}
