/*
 * classifier.h -- the LM head, its loss and its logits' gradient in chunks of
 * rows, for both built-in models (gpt.c, llama.c).  Internal to libtrain.
 *
 * The head's input x[N, C] (the final norm's output) and weight w[V, C] give
 * logits x w^T, [N, V]; no [N, V] array is ever held.  The activations keep
 * one chunk of R rows of fp32 logits (and, for a training pass with a final
 * logit soft-cap, the chunk's capped logits) and the N losses:
 *
 *   forward   chunk by chunk: logits = x w^T (matmul_fwd), cap tanh(logits /
 *             cap) (softcap_fwd, Gemma 2), probabilities and losses in place
 *             (xent_fwd).  The last chunk's probabilities stay in the buffer
 *             (zt_classifier_probs: sampling reads the last position).
 *   backward  chunk by chunk, last first: the last chunk's probabilities are
 *             still there (xent_bwd); every other chunk is recomputed
 *             (matmul_fwd, softcap_fwd, then xent_fused: probabilities and
 *             their gradient in one call), then softcap_bwd, and matmul_bwd
 *             gives the chunk's rows of dx and adds its share to dw.
 *
 * Every row's logits, probabilities, loss and gradient are computed by the
 * same kernels on the same inputs as an unchunked head (xent_fused is bitwise
 * xent_fwd + xent_bwd); what changes with the chunking is the order in which
 * dw sums the rows (chunk by chunk, last chunk first) and, on cuda, the GEMM
 * shapes.  A pass whose rows fit in one chunk computes exactly what one
 * [N, V] head did, with no recomputation.  The price of R < N is one more
 * head GEMM over the rows outside the last chunk, in backward.
 *
 * fused (zt_classifier_forward_fused; ZT_TEST_NO_HEADFUSE unset): a
 * training step's forward (train.c tells the engine the backward's dloss,
 * loss_scale included, before the forward: zt_units_fwd_dloss) computes
 * the backward's part too, chunk by chunk in the backward's order (last
 * chunk first): logits, xent_fused (the losses and the gradient in place),
 * softcap_bwd, matmul_bwd into dx's rows and dw.  The head's gradient unit
 * (tied: unit 0, the embedding's, held to the embedding's backward as
 * before; untied: the head's unit, which the final norm's backward shares)
 * is taken in the forward (model_skel.c), dx waits in the model's dbuf
 * (nothing writes it between the forward's end and the final norm's
 * backward), and the backward starts at the final norm: no head GEMM is
 * recomputed.  Every kernel gets the same operands as on the path of
 * before and dw sums the chunks in the same order, so losses, gradients
 * and parameters are bitwise those of ZT_TEST_NO_HEADFUSE=1 (tests/
 * test_count "LM head fused").  A backward with another dloss than the
 * one the forward used fails (ZT_EINVAL).  Everything else (eval,
 * sampling, zt_loss, direct zt_shard_forward / zt_shard_backward pairs)
 * keeps the path above.
 *
 * bf16 logits (zt_classifier_l16: a training block with the bf16
 * activations, zt_acts16_on, and no final soft-cap; ZT_TEST_NO_L16 unset):
 * the chunk is bf16, as PyTorch autocast has the logits, half the bytes.
 * The head GEMM writes it (matmul_fwd_o16, no fp32 scratch), xent16_fwd
 * gives the losses (fp32 max, sum, log-sum-exp; the logits left as they
 * are), and the backward's xent16_fused writes the bf16 gradient (softmax
 * - onehot) * dloss over them, which matmul_bwd_head16's GEMMs read as
 * their bf16 operand (nothing rounds it).  Not bitwise the fp32 path: the
 * logits are rounded.  In such a block the final norm writes its output in
 * bf16 alone (x16; no fp32 copy), which the head GEMMs of either path read
 * as their bf16 input: bitwise the fp32 x they round.  Eval and sampling blocks keep fp32 logits (and
 * zt_classifier_probs).
 *
 * Chunk rows: ztrain.classifier_chunk_rows (zt_model_config.classifier_rows),
 * 0 = auto: as many rows as ZT_CLASSIFIER_AUTO_BYTES of fp32 logits hold
 * (at least 1), except where the block keeps bf16 logits and the head takes
 * a gradient (full fine-tuning; a LoRA run's head is frozen): as many as
 * ZT_CLASSIFIER_AUTO_BYTES of bf16 logits hold, twice the rows, so the dw
 * GEMM, which reads and writes all of the fp32 [V, C] gradient per chunk,
 * runs half as many times (classifier.c zt_classifier_max_rows).  The
 * head's dw then sums other chunks than with the fp32 rows (not bitwise;
 * losses and dx are per row, unchanged): ztrain.classifier_chunk_rows
 * set to those rows gives the run of before.  A forward of N rows runs
 * ceil(N / max) chunks of equal size (the last one smaller when they do not
 * divide N); the activations hold min(N, max) rows.
 */
#ifndef ZT_CLASSIFIER_H
#define ZT_CLASSIFIER_H
#include <stddef.h>
#include "backend.h"
#include "config.h"
#include "model_acts.h"

/* auto chunk: at most this many bytes of fp32 logits */
#define ZT_CLASSIFIER_AUTO_BYTES ((size_t)256 << 20)

typedef struct zt_classifier {
    float *logits;    /* [R, V]: a chunk's logits -> probabilities -> gradient (NULL with logits16) */
    uint16_t *logits16; /* [R, V] bf16 (zt_classifier_l16): logits -> gradient; else NULL */
    float *capped;    /* [R, V]: the chunk's capped logits (soft-cap, training), else NULL */
    float *losses;    /* [N] */
    long rmax;        /* most rows per chunk (zt_classifier_max_rows) */
    /* after a forward: rows [p0, p0 + pn) of it have their probabilities in
     * logits (pn = 0: none, e.g. after a backward) */
    long p0, pn;
    /* the head weight's bf16 bits (zt_unit_params16), set by the model
     * before each forward / backward; NULL: none (model.h zt_mm_fwd) */
    const uint16_t *w16;
    /* the input x [N, C] in bf16 (the final norm's output, which writes it:
     * a training block with the bf16 activations; set by the model's carve),
     * which the head GEMMs read as their bf16 input (the *_a16 entries,
     * matmul_fwd_o16's and matmul_bwd_head16's inp16: the values they round
     * x to), x then unused (NULL); NULL: x */
    const uint16_t *x16;
} zt_classifier;

/* Most rows of one chunk of a block (training, capped: as
 * zt_classifier_l16's): ztrain.classifier_chunk_rows, or for 0 as many as
 * ZT_CLASSIFIER_AUTO_BYTES of fp32 logits hold -- of bf16 logits where the
 * block keeps bf16 logits (zt_classifier_l16) and the head takes a gradient
 * (mc->lora_r <= 0: not LoRA's frozen head); at least 1. */
long zt_classifier_max_rows(const zt_model_config *mc, int training, int capped);
/* Rows of the chunks of a forward of N rows: ceil(N / max) chunks of this
 * many rows, the last one the rest. */
long zt_classifier_rows(const zt_model_config *mc, long N, int training, int capped);
/* Rows the activations of N rows hold: min(N, max). */
long zt_classifier_buffer_rows(const zt_model_config *mc, long N, int training, int capped);
/* 1: the block's chunk holds bf16 logits (a training block with the bf16
 * activations, zt_acts16_on, without a final soft-cap (capped); model.h
 * zt_l16_test_on). */
int zt_classifier_l16(const zt_model_config *mc, int training, int capped);
/* Bytes of the chunk buffers of N rows (the logits, fp32 or bf16, and the
 * capped logits of a training pass with a final soft-cap), without the
 * losses. */
size_t zt_classifier_chunk_bytes(const zt_model_config *mc, long N, int training, int capped);

/* Carve the classifier's arrays of an N-row activation block (cv->base NULL:
 * sizes only): logits [R, V] (bf16 in logits16 with zt_classifier_l16),
 * losses [N] (small), and for training with capped the capped logits
 * [R, V].  Sets c->rmax either way. */
void zt_classifier_carve(zt_carve *cv, zt_classifier *c, const zt_model_config *mc, size_t N,
                         int training, int capped);

/* The head's forward over N rows of x[N, C] with w[V, C] (cap > 0: final
 * soft-cap; the capped logits kept when c->capped): c->losses[N], and
 * *loss_sum the sum of the losses (backend sum) when has_targets, else 0;
 * with loss_dev (the engine's device accumulator, zt_units_loss_acc) the
 * sum is added there instead (backend sum_to: no host read) and *loss_sum
 * is 0. */
void zt_classifier_forward(const zt_backend *be, zt_classifier *c, const float *x, const float *w,
                           const int *targets, int N, int C, int V, float cap, int has_targets,
                           double *loss_sum, double *loss_dev);
/* The engine's accumulator of a training step's loss sum in the backend's
 * memory, for the forward pass of U now running (shard.c): a built-in
 * model adds its loss sum there (zt_classifier_forward's loss_dev) and
 * reports 0 in *loss_sum; NULL outside a training step's forward (eval,
 * zt_loss, sampling: the sum comes back to the host as before). */
double *zt_units_loss_acc(zt_units *U);
/* The head's backward after zt_classifier_forward of the same N rows:
 * dx[N, C] (overwritten), dw[V, C] (+=; NULL: skipped, a frozen head), each
 * position's loss weighted by dloss.  Training activations (with the capped
 * buffer when cap > 0). */
void zt_classifier_backward(const zt_backend *be, zt_classifier *c, float *dx, float *dw,
                            const float *x, const float *w, const int *targets, float dloss,
                            int N, int C, int V, float cap);
/* The fused head (a training step's forward whose backward's dloss is known
 * before it: zt_units_fwd_dloss; "fused" above): zt_classifier_forward with
 * targets and zt_classifier_backward in one pass over the chunks -- the
 * losses, *loss_sum or loss_dev as zt_classifier_forward's, dx[N, C]
 * (overwritten) and dw (+=; NULL: a frozen head) as zt_classifier_backward's
 * with this dloss, bitwise.  No zt_classifier_backward after it. */
void zt_classifier_forward_fused(const zt_backend *be, zt_classifier *c, float *dx, float *dw,
                                 const float *x, const float *w, const int *targets, float dloss,
                                 int N, int C, int V, float cap, double *loss_sum,
                                 double *loss_dev);
/* The loss gradient scale of the backward that follows the training
 * forward of U now running, when the engine was told it before the forward
 * (train.c: zt_shard.fwd_dloss): 1 and *dloss, and the forward may then take
 * gradient buffers (zt_unit_grads) for the fused head; else 0 (eval,
 * zt_loss, sampling, a forward / backward pair called directly). */
int zt_units_fwd_dloss(zt_units *U, float *dloss);
/* The probabilities [V] of row `row` of the last forward, NULL when its chunk
 * was not the last one (or a backward ran since), or the chunk is bf16 (a
 * training block: sampling forwards through a block of its own). */
const float *zt_classifier_probs(const zt_classifier *c, long row, int V);

#endif
