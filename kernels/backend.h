/*
 * backend.h -- the compute backend table.
 *
 * The model and the optimizer call compute only through this table (one
 * instance per backend: cpu/ with OpenMP + CBLAS, cuda/ with CUDA + cuBLAS).
 * kernels/ depends on nothing in libtrain: memory accounting, errors and
 * scheduling live above it.
 *
 * Conventions: fp32, row-major, contiguous.  Shapes are written as
 * [dim0, dim1, ...].  N = B*T rows.  "(+=)" marks outputs that are
 * ACCUMULATED into (the caller zeroes them at the start of a step);
 * everything else is overwritten.  All kernels are deterministic for a
 * fixed thread count (cpu) or a fixed device model (cuda: no float atomics;
 * every reduction has a fixed order), except cuda's attention where it runs
 * through cuDNN (not promised; ZT_CUDA_DETERMINISTIC=1 avoids it: docs/gpu.md).
 *
 * Pointers passed to a kernel are memory of the backend's device (host
 * memory for cpu, from alloc() for cuda).  On cuda, kernels are queued in
 * call order on the backend's one compute stream and return before they
 * finish; to_host/to_device return when the host buffer may be used, and
 * sumsq/nonfinite return their result to the host (sum_to / sumsq_to /
 * nonfinite_to leave theirs in the backend's memory and do not wait).
 */
#ifndef ZT_KERNELS_BACKEND_H
#define ZT_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Matmul input precision (set_matmul_precision). */
typedef enum zt_matmul_precision {
    ZT_MATMUL_FP32 = 0,   /* fp32 operands, fp32 accumulation */
    ZT_MATMUL_BF16 = 1    /* operands rounded to bf16, fp32 accumulation */
} zt_matmul_precision;

/* Options of gqa_ext_fwd / gqa_ext_bwd (Gemma 2/3 attention). */
typedef struct zt_attn_opts {
    float scale;      /* score scale (gqa_fwd: 1 / sqrt(hd); Gemma: query_pre_attn_scalar^-0.5) */
    float softcap;    /* attention logit soft-cap, 0: none */
    int window;       /* sliding window (keys u > t - window), 0: none */
} zt_attn_opts;

/* The scalars of one optimizer step, in the backend's memory (the engine
 * keeps one, libtrain/optim.h): written by sum_to / sumsq_to /
 * nonfinite_to, read by adamw_multi's gate and, once per step, by the host.
 * 32 bytes. */
typedef struct zt_step_scalars {
    double loss_sum;      /* the step's loss sum (sum_to over its micro-steps) */
    double sumsq;         /* the global gradient sum of squares (sumsq_to) */
    uint64_t nonfinite;   /* non-finite gradients counted (nonfinite_to; fp16) */
    uint64_t reserved;    /* 0 */
} zt_step_scalars;

/* One segment of adamw_multi: the n elements [start, start + n) of the
 * call's compact index space (where m and v live); an array flagged
 * "logical" in the call is addressed at index + shift instead.  wd: the
 * segment's weight decay (0: none). */
typedef struct zt_adamw_seg {
    size_t start, n;
    size_t shift;
    float wd;
} zt_adamw_seg;
/* adamw_multi: which arrays are addressed at index + shift */
enum { ZT_ADAMW_P_LOGICAL = 1, ZT_ADAMW_G_LOGICAL = 2, ZT_ADAMW_H_LOGICAL = 4 };
/* adamw_multi: the 16-bit copy written beside p (0: none) */
enum { ZT_ADAMW_H_NONE = 0, ZT_ADAMW_H_BF16 = 1, ZT_ADAMW_H_F16 = 2 };
/* adamw_multi's hyperparameters (host memory). */
typedef struct zt_adamw_hyper {
    float lr, b1, b2, eps, bc1, bc2;
    float grad_scale;                /* with gate NULL: the factor of every gradient */
    /* NULL, or the step's scalars in the backend's memory: then nothing is
     * written when gate->nonfinite > 0 or gate->loss_sum or gate->sumsq is
     * not finite (the step is skipped), and grad_scale is instead
     * (float)zt_adamw_clip(sqrt(gate->sumsq), max_norm) (adamw_step.h:
     * global-norm clipping computed where the norm is, in double) */
    const zt_step_scalars *gate;
    double max_norm;                 /* with gate: the clipping threshold (<= 0: none) */
} zt_adamw_hyper;

typedef struct zt_backend {
    const char *name;

    /* Set the number of compute threads (OpenMP and BLAS); <= 0: leave. */
    void (*set_threads)(int n);

    /* ---- errors and ordering ----
     * Kernels return nothing.  A backend that can fail (cuda: a launch or
     * library error, out of device memory) records its FIRST failure as one
     * line "file:line: call: message (hint)".  error() returns it and clears
     * it, or returns NULL when nothing failed since the previous call.  cpu:
     * only a failed scratch allocation in bf16 matmuls (it then computes in
     * fp32 and says so here).                                               */
    const char *(*error)(void);
    /* Wait until all queued work has finished (cpu: nothing to wait for). */
    void (*synchronize)(void);

    /* ---- memory on the backend's device (host memory for cpu) ---- */
    void *(*alloc)(size_t bytes);               /* zero-filled, 64 B aligned; NULL on failure */
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes);  /* device <-> device */
    void (*to_host)(void *host_dst, const void *dev_src, size_t bytes);
    void (*to_device)(void *dev_dst, const void *host_src, size_t bytes);
    void (*zero)(void *p, size_t bytes);
    /* Asynchronous host <-> device copies (optional: NULL on cpu, where
     * to_host / to_device are used instead).  Queued in order with the
     * kernels (cuda: on the compute stream; the copy sees what kernels queued
     * before it wrote).  They return a handle at once (NULL: the copy has
     * already completed); copy_wait(handle) returns when that copy, and
     * everything queued before it, has completed, and releases the handle.
     * Until then the host must neither read host_dst nor change host_src.
     * Every handle must be waited on.  cuda: truly overlapped with the host
     * only for page-locked host memory.                                     */
    void *(*to_host_async)(void *host_dst, const void *dev_src, size_t bytes);
    void *(*to_device_async)(void *dev_dst, const void *host_src, size_t bytes);
    void (*copy_wait)(void *handle);
    /* Optional (NULL: the backend cannot pin; cpu, cpu-strict).  Page-lock
     * bytes of HOST memory at p (pageable memory the caller allocated) so
     * to_host / to_device on it move at full speed (cuda: cudaHostRegister).
     * Returns NULL on success, else a one-line reason (the memory stays
     * usable, just pageable); a failure here is NOT recorded in error().   */
    const char *(*host_register)(void *p, size_t bytes);
    /* Undo host_register on p (before the memory is freed); optional, set
     * exactly when host_register is.                                        */
    void (*host_unregister)(void *p);
    /* Device memory (NULL on cpu, whose memory is the host's): free and
     * total bytes of the backend's device now, and its name for messages
     * ("cuda device 0 (NVIDIA H100 80GB HBM3)") into name[n] (may be NULL).
     * 0 on success; -1 when unknown (cpu-strict without an emulated
     * capacity; a failed query, recorded for error() where it is an error).
     * cuda: cudaMemGetInfo on the backend's device, so memory other
     * processes or the CUDA context hold is not free.  cpu-strict with a
     * capacity (zt_backend_cpu_strict_set_capacity): capacity - live.      */
    int (*device_memory)(size_t *free_bytes, size_t *total_bytes, char *name, size_t n);
    /* Bytes of device memory the backend holds now and at most since it
     * started (NULL on cpu): everything alloc() handed out and not freed,
     * plus the backend's own buffers (cuda: the cuBLAS workspace and the
     * kernels' growing scratch, kernels/cuda/cuda_workspace.h; cpu-strict:
     * none).  The measured side of --memory-report's device peak.          */
    void (*mem_stats)(size_t *cur, size_t *peak);

    /* ---- embeddings: token + learned position ----
     * out[N,C] = wte[inp[b,t], :] + wpe[t, :]; wpe may be NULL (token
     * embedding only: Llama)                                                */
    void (*encoder_fwd)(float *out, const int *inp, const float *wte,
                        const float *wpe, int B, int T, int C);
    /* dwte[V,C] (+=), dwpe[maxT,C] (+=; may be NULL) from dout[N,C] */
    /* the same with the token table's bf16 bits (the engine's 16-bit
     * storage): each row widened to fp32 as it is copied, exact (NULL: none) */
    void (*encoder_fwd_w16)(float *out, const int *inp, const uint16_t *wte16,
                            const float *wpe, int B, int T, int C);
    void (*encoder_bwd)(float *dwte, float *dwpe, const float *dout,
                        const int *inp, int B, int T, int C);

    /* ---- LayerNorm over the last dim (eps 1e-5) ----
     * out[N,C], mean[N], rstd[N] from inp[N,C], w[C], b[C]                  */
    void (*layernorm_fwd)(float *out, float *mean, float *rstd,
                          const float *inp, const float *w, const float *b,
                          int N, int C);
    /* dinp[N,C] (+=), dw[C] (+=), db[C] (+=) */
    void (*layernorm_bwd)(float *dinp, float *dw, float *db,
                          const float *dout, const float *inp, const float *w,
                          const float *mean, const float *rstd, int N, int C);

    /* ---- RMSNorm over the last dim (Llama) ----
     * out[N,C] = inp * rstd * w, rstd[N] = 1 / sqrt(mean(inp^2) + eps),
     * computed in fp32 (as transformers' LlamaRMSNorm)                      */
    void (*rmsnorm_fwd)(float *out, float *rstd, const float *inp, const float *w,
                        float eps, int N, int C);
    /* dinp[N,C] (+=), dw[C] (+=) from dout[N,C], inp, w, rstd */
    void (*rmsnorm_bwd)(float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C);

    /* ---- per-head RMSNorm, in place (Qwen3's q_norm / k_norm) ----
     * x holds N rows of `stride` floats; in each row the first n_heads heads
     * of hd floats are normalized over their hd values with the weight
     * w[hd] (rmsnorm_fwd's formula per head): raw[(n * n_heads + h) * hd
     * + c] keeps the input for the backward, rstd[n * n_heads + h].        */
    void (*headnorm_fwd)(float *x, float *raw, float *rstd, const float *w, float eps,
                         int N, int n_heads, int stride, int hd);
    /* in place: dx (same layout as x) holds the output gradient and gets
     * the input gradient; dw[hd] (+=) summed over every row and head     */
    void (*headnorm_bwd)(float *dx, float *dw, const float *raw, const float *w,
                         const float *rstd, int N, int n_heads, int stride, int hd);

    /* ---- rotary position embeddings, in place (Llama, rotate_half) ----
     * x holds B*T rows of `stride` floats; in each row the first n_heads
     * heads of hd floats are rotated (q heads then k heads of a qkv row:
     * n_heads = NH + NKV).  Within a head, element j pairs with j + hd/2
     * (j < hd/2), the angle is a = (float)t * inv_freq[j] (t = position in
     * the sequence, row index mod T; inv_freq[hd/2] in the backend's
     * memory):  x[j] <- x[j] cos a - x[j+hd/2] sin a,
     *           x[j+hd/2] <- x[j+hd/2] cos a + x[j] sin a.
     * cos a and sin a are multiplied by `scale` first (transformers'
     * attention_scaling: 1 but for yarn / longrope).
     * rope_bwd applies the inverse rotation (angle -a, the same scale): the
     * gradient.                                                             */
    void (*rope_fwd)(float *x, const float *inv_freq, int B, int T, int n_heads,
                     int stride, int hd, float scale);
    void (*rope_bwd)(float *x, const float *inv_freq, int B, int T, int n_heads,
                     int stride, int hd, float scale);

    /* ---- SwiGLU (Llama MLP) ----
     * gu[N, 2H] holds gate | up per row (H = intermediate size):
     * out[N,H] = silu(gate) * up,
     * silu(x) = x / (1 + exp(-x))                                           */
    void (*swiglu_fwd)(float *out, const float *gu, int N, int H);
    /* dgu[N, 2H] (overwritten) from dout[N, H] and gu */
    void (*swiglu_bwd)(float *dgu, const float *dout, const float *gu, int N, int H);

    /* ---- Mixture of Experts (libtrain/moe.h); NULL on a backend without
     * them (the model refuses at creation).  Routing: probs[N,E] =
     * softmax(logits[N,E]); idx[N,K] the K largest probabilities of each
     * row, largest first (ties: the lower expert), wts[N,K] theirs, divided
     * by their sum with norm.                                               */
    void (*moe_route_fwd)(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                          int K, int norm);
    /* dlogits[N,E] (overwritten) from dwts[N,K] through the same steps, and
     * dprobs[E] (NULL: none) added to every row's probability gradient
     * (the load-balancing loss's) */
    void (*moe_route_bwd)(float *dlogits, const float *dwts, const float *dprobs,
                          const float *probs, const int *idx, int N, int E, int K, int norm);
    /* rows (NULL: row i itself), w (NULL: 1), each of n entries:
     * gather:   out[i, :] = w[i] * x[rows[i], :]
     * scatter:  y[rows[i], :] += w[i] * x[i, :], i in order (deterministic)
     * dot:      out[i] = sum_c a[rows[i], c] * b[i, c]                      */
    void (*rows_gather)(float *out, const float *x, const int *rows, const float *w, int n, int C);
    void (*rows_scatter)(float *y, const float *x, const int *rows, const float *w, int n, int C);
    void (*rows_dot)(float *out, const float *a, const int *rows, const float *b, int n, int C);
    /* The routing's permutation, a stable counting sort of idx[N,K]'s
     * slots n K + k by expert: off[E + 1] each expert's first row (off[0] =
     * 0, off[E] = the rows counted), perm[NK] each row's slot (grouped by
     * expert, in slot order within an expert), rows[NK] its token
     * (perm / K).  A slot whose expert is outside [0, E) is left out (then
     * off[E] < NK and the rows past off[E] are unset).                      */
    void (*moe_permute)(int *off, int *perm, int *rows, const int *idx, int N, int K, int E);
    /* Rows in P x El pieces, piece (i, l) cnt[i El + l] rows, laid out
     * i-major ("by rank"); the same rows l-major ("by expert": piece (l, i)
     * after (l, i - 1), a piece's rows in order).  perm[R] (R = sum cnt):
     * for each row of the by-expert layout its position by rank; inv[R]:
     * for each row by rank its position by expert.                          */
    void (*moe_regroup)(int *perm, int *inv, const int *cnt, int P, int El);
    /* y[n] = 1 / (1 + exp(-x[n])); dx[n] (overwritten) = dy * y * (1 - y) */
    void (*sigmoid_fwd)(float *y, const float *x, size_t n);
    void (*sigmoid_bwd)(float *dx, const float *dy, const float *y, size_t n);

    /* ---- linear layer: out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] ----
     * bias may be NULL.                                                     */
    void (*matmul_fwd)(float *out, const float *inp, const float *w,
                       const float *bias, int N, int C, int OC);
    /* dinp[N,C] (overwritten; may be NULL to skip), dw[OC,C] (+=),
     * dbias[OC] (+=, may be NULL) from dout[N,OC] */
    void (*matmul_bwd)(float *dinp, float *dw, float *dbias,
                       const float *dout, const float *inp, const float *w,
                       int N, int C, int OC);
    /* Input precision of matmul_fwd / matmul_bwd from now on, one of
     * zt_matmul_precision (other values are ignored).  ZT_MATMUL_BF16: every
     * GEMM operand (inp, w, dout) is rounded to bfloat16 (nearest even)
     * before the multiply; products and sums stay fp32; bias, dbias and all
     * outputs are fp32.  Default ZT_MATMUL_FP32 (on cuda: no TF32).         */
    void (*set_matmul_precision)(int mode);

    /* ---- causal multi-head self-attention, memory-efficient ----
     * qkv[B,T,3C] holds q | k | v, each [NH, hs=C/NH] per position.
     * out[B,T,C]; lse[B,NH,T] = log-sum-exp of each softmax row, kept for
     * backward.  No [T,T] matrix is stored: backward recomputes scores.    */
    void (*attention_fwd)(float *out, float *lse, const float *qkv,
                          int B, int T, int C, int NH);
    /* dqkv[B,T,3C] (overwritten) from dout[B,T,C], qkv, out, lse */
    void (*attention_bwd)(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse,
                          int B, int T, int C, int NH);

    /* ---- causal grouped-query attention (Llama), memory-efficient ----
     * qkv[B,T,(NH+2*NKV)*hd] holds, per position, NH q heads, NKV k heads,
     * NKV v heads of hd floats each; q head h attends with kv head
     * h / (NH/NKV) (NKV divides NH; NKV = 1: multi-query).  Scores are
     * q.k / sqrt(hd).  out[B,T,NH*hd]; lse[B,NH,T] as attention_fwd.  No
     * [T,T] matrix is stored.                                               */
    void (*gqa_fwd)(float *out, float *lse, const float *qkv,
                    int B, int T, int NH, int NKV, int hd);
    /* dqkv[B,T,(NH+2*NKV)*hd] (overwritten) from dout[B,T,NH*hd], qkv,
     * out, lse; a kv head's gradient sums its q heads in a fixed order      */
    void (*gqa_bwd)(float *dqkv, const float *dout, const float *qkv,
                    const float *out, const float *lse,
                    int B, int T, int NH, int NKV, int hd);

    /* ---- causal grouped-query attention with options (Gemma 2/3) ----
     * As gqa_fwd / gqa_bwd (same layouts, lse, determinism), with the
     * score of query t and key u <= t
     *   x = (q.k) * o->scale,  then, with o->softcap > 0,
     *   x <- softcap * tanh(x / softcap)          (attention soft-capping)
     * and, with o->window > 0, only keys u > t - window are attended
     * (transformers' sliding window: q_idx - kv_idx < window; window >= T
     * is full causal attention).  The backward multiplies dS by
     * 1 - tanh(x / softcap)^2 before the scale.  In bf16 matmul mode the
     * rounding points are gqa_fwd's (operands and p, dS rounded; scores,
     * the cap and the softmax in fp32).  With scale = 1/sqrt(hd),
     * softcap 0 and window 0 the result is gqa_fwd's / gqa_bwd's bitwise.
     * o is required (callers pass the defaults explicitly, never NULL).   */
    void (*gqa_ext_fwd)(float *out, float *lse, const float *qkv,
                        int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o);
    void (*gqa_ext_bwd)(float *dqkv, const float *dout, const float *qkv,
                        const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o);

    /* ---- GeGLU, tanh approximation (Gemma MLP) ----
     * gu[N, 2H] holds gate | up per row: out[N,H] = gelu(gate) * up with
     * gelu the tanh approximation of gelu_fwd.  geglu_bwd: dgu[N, 2H]
     * (overwritten) from dout[N, H] and gu.                                 */
    void (*geglu_fwd)(float *out, const float *gu, int N, int H);
    void (*geglu_bwd)(float *dgu, const float *dout, const float *gu, int N, int H);

    /* ---- logit soft-capping (Gemma 2 final logits), n elements ----
     * y = cap * tanh(x / cap) (y may alias x); softcap_bwd: dx = dy *
     * (1 - (y / cap)^2) from the forward's output y (dx may alias dy).      */
    void (*softcap_fwd)(float *y, const float *x, size_t n, float cap);
    void (*softcap_bwd)(float *dx, const float *dy, const float *y, size_t n, float cap);

    /* ---- GELU, tanh approximation (GPT-2) over n elements ---- */
    void (*gelu_fwd)(float *out, const float *inp, size_t n);
    /* dinp (overwritten) = gelu'(inp) * dout */
    void (*gelu_bwd)(float *dinp, const float *inp, const float *dout, size_t n);

    /* out[n] = a[n] + b[n] (out may alias a) */
    void (*add)(float *out, const float *a, const float *b, size_t n);

    /* ---- softmax + cross-entropy over the vocabulary ----
     * logits[N,V] -> probs[N,V] (probs may alias logits), losses[N] =
     * -log probs[i, targets[i]].  Targets < 0 are ignored (loss 0).         */
    void (*xent_fwd)(float *losses, float *probs, const float *logits,
                     const int *targets, int N, int V);
    /* dlogits[N,V] (overwritten; may alias probs) =
     * (probs - onehot(target)) * dloss                                      */
    void (*xent_bwd)(float *dlogits, const float *probs, const int *targets,
                     float dloss, int N, int V);

    /* ---- optimizer ----
     * AdamW on n elements, in place:
     *   g  = grad * grad_scale
     *   m  = b1 m + (1-b1) g ;  v = b2 v + (1-b2) g^2
     *   p -= lr * ( (m/bc1) / (sqrt(v/bc2) + eps) + wd * p )
     * with bc1 = 1 - b1^t, bc2 = 1 - b2^t.                                  */
    void (*adamw)(float *p, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd,
                  float bc1, float bc2, float grad_scale);
    /* sum of squares of x[n], accumulated in double */
    double (*sumsq)(const float *x, size_t n);
    /* x[n] *= s */
    void (*scale)(float *x, size_t n, float s);
    /* Inverted dropout of x[rows, C] into y (y may be x): element (i, c)
     * is kept, times 1 / (1 - p), when the counter-based draw of
     * (key, (row0 + i) * C + c) is >= p (kernels/dropout.h), else 0.  The
     * mask is a pure function of key and the global row row0 + i: the same
     * on every backend, at any split of the rows.  0 <= p < 1.              */
    void (*dropout)(float *y, const float *x, size_t rows, size_t C, uint64_t key,
                    uint64_t row0, float p);
    /* ---- precision conversion, round to nearest even (NaN stays NaN) ---- */
    void (*to_bf16)(uint16_t *out, const float *in, size_t n);
    void (*from_bf16)(float *out, const uint16_t *in, size_t n);
    void (*to_f16)(uint16_t *out, const float *in, size_t n);
    void (*from_f16)(float *out, const uint16_t *in, size_t n);
    /* number of non-finite (inf/nan) values in x[n] */
    size_t (*nonfinite)(const float *x, size_t n);

    /* ---- NF4 dequantization (QLoRA's frozen base; kernels/nf4.h) ----
     * out[i], i < n: NF4[c_i] * a[i / 64], where c_i is element i's 4-bit
     * code (codes[i / 2]: the high nibble for even i, the low for odd i)
     * and a[b] = absmax[b], or, with double quantization (qabsmax !=
     * NULL; absmax is then ignored),
     *   a[b] = fp32(fp32(DYN[qabsmax[b]] * absmax2[b / 256]) + offset).
     * Every operation is one fp32 rounding (no fused multiply-add), so the
     * result is bitwise bitsandbytes' dequantize_4bit on the same state.
     * out_bf16 = 1: out is uint16_t bf16 bits (the fp32 value rounded to
     * nearest even), else float.  codes [ceil(n/2)], absmax / qabsmax
     * [ceil(n/64)], absmax2 [ceil(n/16384)] in the backend's memory.  A
     * slice starting at element s, s a multiple of 64 (of 16384 with
     * double quantization), is the same call with codes + s/2, absmax (or
     * qabsmax) + s/64, absmax2 + s/16384.  n = 0: nothing.               */
    void (*nf4_dequant)(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                        const uint8_t *qabsmax, const float *absmax2, float offset, size_t n);

    /* sum of x[n], accumulated in double (cpu: in index order; cuda: a
     * fixed-order tree), returned to the host (the engine's loss sums) */
    double (*sum)(const float *x, size_t n);

    /* 1: alloc() returns host memory that the host may read and write
     * directly (cpu).  0: device memory, reached only through this table's
     * kernels and copy / to_host / to_device / zero (cuda, cpu-strict); the
     * engine then stages through host buffers whatever the host must see. */
    int host_memory;

    /* ---- memory, strided (last: added after the table's other entries) ----
     * device <-> device: height rows of width bytes, row r from src + r
     * spitch to dst + r dpitch (width <= both pitches; the ranges do not
     * overlap).  Optional (NULL: one copy() per row); cuda:
     * cudaMemcpy2DAsync, one call where copy() would take height.          */
    void (*copy2d)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t height);

    /* ---- softmax + cross-entropy and its gradient in one call (last: added
     * after the table's other entries; the chunked LM head,
     * libtrain/classifier.h) ----
     * In place on logits[N,V]: losses[N] (may be NULL) as xent_fwd gives
     * them, and each row overwritten with its gradient (softmax -
     * onehot(target)) * dloss as xent_bwd gives it (targets < 0 or >= V:
     * loss 0, gradient 0; targets may be NULL: none).  Bitwise xent_fwd
     * followed by xent_bwd on the same memory, in one pass over the rows.  */
    void (*xent_fused)(float *losses, float *logits, const int *targets, float dloss, int N,
                       int V);

    /* ---- the optimizer step without host reads (last: added after the
     * table's other entries; libtrain/train.c's step) ----
     * Results land in the backend's memory; nothing returns to the host and
     * nothing waits (cuda: queued, no synchronization).
     *
     * sum_to: *dst += sum(x[n]), the sum exactly as `sum` computes it (the
     * same double value, then one double addition).                       */
    void (*sum_to)(double *dst, const float *x, size_t n);
    /* *dst = s_0 + s_1 + ... + s_{nr-1} in double, left to right from 0.0,
     * s_r = sumsq(x[r], n[r]) exactly as `sumsq` computes it (x[] and n[]
     * host arrays of nr ranges; the ranges in the backend's memory; n[r] = 0
     * contributes 0).  nonfinite_to: *dst = the number of non-finite values
     * over the ranges.                                                      */
    void (*sumsq_to)(double *dst, const float *const *x, const size_t *n, int nr);
    void (*nonfinite_to)(uint64_t *dst, const float *const *x, const size_t *n, int nr);
    /* Multi-tensor AdamW: every element k of every segment, in any order,
     * exactly as adamw(p + kp, grad + kg, m + k, v + k, 1, lr, b1, b2, eps,
     * seg.wd, bc1, bc2, grad_scale) with kp = k + shift when `logical` has
     * ZT_ADAMW_P_LOGICAL, else k (kg likewise with _G_); then, with hprec,
     * p16[kh] = p[kp] rounded to bf16 / fp16 as to_bf16 / to_f16 round
     * (kh with _H_).  Segments in increasing start order (seg[i+1].start >=
     * seg[i].start + seg[i].n); h->gate as zt_adamw_hyper says.  cuda: one
     * launch per run of up to ZT_CUDA_ADAMW_SEGS contiguous segments
     * (kernels/cuda/cuda_workspace.h).                                     */
    void (*adamw_multi)(float *p, const float *grad, float *m, float *v, uint16_t *p16, int hprec,
                        unsigned logical, const zt_adamw_seg *seg, int nseg,
                        const zt_adamw_hyper *h);

    /* ---- a linear layer fused with the GELU of gelu_fwd (GPT-2's MLP; last:
     * added after the table's other entries).  Optional: NULL when the
     * backend has none (the caller then makes the unfused calls).
     * matmul_gelu_fwd: pre[N,OC] = inp @ w^T + bias (bias may be NULL) and
     * out[N,OC] = gelu(pre), as matmul_fwd into pre then gelu_fwd (cuda:
     * one cuBLASLt call, epilogue GELU_AUX_BIAS with pre its aux output).  */
    void (*matmul_gelu_fwd)(float *out, float *pre, const float *inp, const float *w,
                            const float *bias, int N, int C, int OC);
    /* matmul_bwd of a layer whose input is inp = gelu(pre), the input
     * gradient taken on through the GELU: dpre[N,C] (overwritten) =
     * gelu_bwd(pre, dout @ w), dpre_bias[C] (+=; may be NULL) = the column
     * sums of dpre (the bias gradient of the layer before the GELU), dw
     * (+=), dbias (+=; may be NULL) as matmul_bwd.  As matmul_bwd into a
     * temporary, gelu_bwd, then matmul_bwd's column sum of dpre (cuda: the
     * input-gradient GEMM with epilogue DGELU_BGRAD, pre its aux input).    */
    void (*matmul_dgelu_bwd)(float *dpre, float *dpre_bias, float *dw, float *dbias,
                             const float *dout, const float *inp, const float *pre, const float *w,
                             int N, int C, int OC);

    /* ---- the residual add fused with the next norm (last: added after the
     * table's other entries).  Optional: NULL when the backend has none.
     * res[N,C] = a + b (res may alias a), then the norm of res as
     * layernorm_fwd / rmsnorm_fwd compute it (out, its statistics): bitwise
     * add followed by the norm (cuda: one kernel, a warp per row).  The
     * backward needs nothing fused: the norm's dinp (+=) already adds into
     * the residual's gradient.                                              */
    void (*add_layernorm_fwd)(float *res, float *out, float *mean, float *rstd, const float *a,
                              const float *b, const float *w, const float *bias, int N, int C);
    void (*add_rmsnorm_fwd)(float *res, float *out, float *rstd, const float *a, const float *b,
                            const float *w, float eps, int N, int C);

    /* ---- the linear layers with a bf16 weight (last: added after the
     * table's other entries; the GEMMs read the engine's 16-bit parameter
     * storage, libtrain/ztrain.h zt_unit_params16).  Optional: NULL when
     * the backend has none (the caller passes the fp32 weight instead).
     * w16[OC,C] holds bf16 bits; each entry is its fp32-weight entry
     * (matmul_fwd, matmul_bwd, matmul_gelu_fwd, matmul_dgelu_bwd) with w =
     * the fp32 values of w16, bitwise.  In bf16 matmul mode that entry
     * rounds w to bf16, the identity on these values, so the GEMM reads w16
     * itself and nothing rounds the weight.  cuda: bf16 matmul mode only
     * (fp32 mode records an error and computes nothing).                  */
    void (*matmul_fwd_w16)(float *out, const float *inp, const uint16_t *w16, const float *bias,
                           int N, int C, int OC);
    void (*matmul_bwd_w16)(float *dinp, float *dw, float *dbias, const float *dout,
                           const float *inp, const uint16_t *w16, int N, int C, int OC);
    void (*matmul_gelu_fwd_w16)(float *out, float *pre, const float *inp, const uint16_t *w16,
                                const float *bias, int N, int C, int OC);
    void (*matmul_dgelu_bwd_w16)(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                 const float *dout, const float *inp, const float *pre,
                                 const uint16_t *w16, int N, int C, int OC);

    /* ---- the linear layers with a bf16 input (last: added after the
     * table's other entries; the saved activations the models keep in bf16,
     * libtrain/model.h zt_mm_fwd_a16).  Optional: NULL when the backend has
     * none (the model then keeps those activations in fp32).  inp16[N,C]
     * holds bf16 bits; the weight is w16 (bf16 bits) when w16 != NULL, else
     * the fp32 w.  Each entry is its fp32 entry (matmul_fwd, matmul_bwd,
     * matmul_gelu_fwd, matmul_dgelu_bwd; with w16: the *_w16 entry) with inp
     * = the fp32 values of inp16, bitwise.  In bf16 matmul mode that entry
     * rounds inp to bf16, the identity on these values, so the GEMMs read
     * inp16 itself (forward, and the weight gradient's GEMM) and nothing
     * rounds it.  bf16 matmul mode only on cuda (fp32 mode records an error
     * and computes nothing).                                               */
    void (*matmul_fwd_a16)(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                           const float *bias, int N, int C, int OC);
    void (*matmul_bwd_a16)(float *dinp, float *dw, float *dbias, const float *dout,
                           const uint16_t *inp16, const float *w, const uint16_t *w16, int N, int C,
                           int OC);
    void (*matmul_gelu_fwd_a16)(float *out, float *pre, const uint16_t *inp16, const float *w,
                                const uint16_t *w16, const float *bias, int N, int C, int OC);
    void (*matmul_dgelu_bwd_a16)(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                 const float *dout, const uint16_t *inp16, const float *pre,
                                 const float *w, const uint16_t *w16, int N, int C, int OC);

    /* ---- bf16 outputs (last: added after the table's other entries; the
     * GEMM outputs and MLP activations the models keep in bf16, libtrain/
     * model.h zt_o16_ok).  Optional: NULL when the backend has none (the
     * caller computes fp32 and rounds with to_bf16).  Each is bitwise its
     * fp32 sequence followed by to_bf16 (round to nearest even): the same
     * values, without the fp32 round trip through memory on cuda.  tmp
     * (and tmp2): fp32 scratch of the sizes given, which the cpu backends
     * compute the fp32 values in (that very sequence); cuda leaves it alone.
     *
     * matmul_fwd_o16: out16[N,OC] = bf16(inp @ w^T + bias), the result of
     * matmul_fwd (inp16 != NULL: matmul_fwd_a16 with inp16, inp unused;
     * w16 != NULL: the bf16 weight, else w) rounded once; tmp[N,OC], or
     * NULL with bias NULL (the LM head: the cpu backends then compute in
     * host memory of their own; cuda's plain-GEMM path, where cuBLASLt has
     * no algorithm, writes the bf16 D with cublasGemmEx).  cuda: a cuBLASLt
     * GEMM with a bf16 D (fp32 compute and bias), bf16 matmul mode only
     * (fp32 mode records an error).                                        */
    void (*matmul_fwd_o16)(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                           const float *w, const uint16_t *w16, const float *bias, int N, int C,
                           int OC);
    /* matmul_gelu_fwd_o16: GPT-2's fc and GELU with both outputs in bf16:
     * pre16[N,OC] = bf16(pre) and out16[N,OC] = bf16(gelu(pre)), pre = inp
     * @ w^T + bias the fp32 result matmul_fwd_o16 rounds (inp16 / w16 as
     * there): bitwise matmul_gelu_fwd (its _a16 / _w16 forms) followed by
     * to_bf16 of out and of pre.  NOT gelu_fwd16 of matmul_fwd_o16's output
     * (the GELU of the rounded pre).  tmp[N,OC]: fp32 scratch (the cpu
     * backends compute in it; cuda's fallback).  cuda: one cuBLASLt GEMM,
     * epilogue GELU_AUX_BIAS with a bf16 D (the GELU) and its aux in D's
     * type (pre); where Lt has no such algorithm, without a bias, or with
     * the aux or the bias not 16-byte aligned: matmul_fwd into tmp, then
     * k_gelu_fwd16p (both roundings from the fp32 pre).  bf16 matmul mode
     * only.  Optional (NULL: the caller takes matmul_fwd_o16 and
     * gelu_fwd16). */
    void (*matmul_gelu_fwd_o16)(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                const uint16_t *inp16, const float *w, const uint16_t *w16,
                                const float *bias, int N, int C, int OC);
    /* gelu_fwd16: out16[n] = bf16(gelu_fwd(fp32(in16))); tmp[n] */
    void (*gelu_fwd16)(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n);
    /* swiglu_fwd16 / geglu_fwd16: out16[N,H] = bf16(swiglu_fwd / geglu_fwd
     * of fp32(gu16[N,2H])); tmp[N,2H], tmp2[N,H] */
    void (*swiglu_fwd16)(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                         int H);
    void (*geglu_fwd16)(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                        int H);
    /* gelu_fwd16r / swiglu_fwd16r / geglu_fwd16r: the fp32 input rounded
     * and the activation of the rounded values in one entry (LoRA's fc /
     * gate|up output, made in fp32 with its adapters' delta): bitwise
     * to_bf16(in16, in, n) then gelu_fwd16(out16, in16, tmp, n), and
     * to_bf16(gu16, gu, N*2H) then swiglu_fwd16 / geglu_fwd16(out16, gu16,
     * gu, tmp2, N, H).  in16[n] / gu16[N,2H] written (the rounded input,
     * kept for the backward), out16[n] / [N,H] = bf16 of the activation;
     * tmp[n], tmp2[N,H] fp32 scratch; gu[N,2H] read, then overwritten by
     * the cpu backends with fp32(gu16) (the sequence's tmp; cuda leaves it
     * alone).  Optional: NULL when the backend has none (the caller makes
     * the two calls).  cuda: one kernel reading the fp32 input once.      */
    void (*gelu_fwd16r)(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n);
    void (*swiglu_fwd16r)(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H);
    void (*geglu_fwd16r)(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H);
    /* swiglu_bwd16 / geglu_bwd16: dgu[N,2H] (overwritten) = swiglu_bwd /
     * geglu_bwd of dout[N,H] and fp32(gu16[N,2H]) (the cpu backends widen
     * gu16 into dgu first) */
    void (*swiglu_bwd16)(float *dgu, const float *dout, const uint16_t *gu16, int N, int H);
    void (*geglu_bwd16)(float *dgu, const float *dout, const uint16_t *gu16, int N, int H);
    /* gqa_ext_fwd16 / gqa_ext_bwd16: gqa_ext_fwd / gqa_ext_bwd with qkv =
     * the fp32 values of qkv16[B,T,(NH+2NKV)hd] (o required); tmp the same
     * count of fp32 scratch (the cpu backends widen qkv16 there; cuda too
     * on its cuDNN and fp32 paths, while its tensor-core paths read qkv16
     * as the bf16 q, k, v they would round them to).                      */
    void (*gqa_ext_fwd16)(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                          int NH, int NKV, int hd, const zt_attn_opts *o);
    void (*gqa_ext_bwd16)(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                          const float *out, const float *lse, int B, int T, int NH, int NKV, int hd,
                          const zt_attn_opts *o);

    /* ---- the norms writing bf16 (last: added after the table's other
     * entries; the normalized activations the models keep in bf16, libtrain/
     * model.h zt_n16_ok).  Optional: NULL when the backend has none (the
     * caller computes fp32 and rounds with to_bf16).  Each is bitwise its
     * fp32 entry (layernorm_fwd, rmsnorm_fwd, add_layernorm_fwd,
     * add_rmsnorm_fwd) with out rounded by to_bf16 into out16[N,C]; the
     * statistics (mean, rstd) and res stay fp32, bitwise.  tmp[N,C]: fp32
     * scratch the cpu backends compute out in (that very sequence); cuda
     * leaves it alone (one kernel, a warp per row, writing out16 itself). */
    void (*layernorm_fwd16)(uint16_t *out16, float *tmp, float *mean, float *rstd,
                            const float *inp, const float *w, const float *b, int N, int C);
    void (*rmsnorm_fwd16)(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                          const float *w, float eps, int N, int C);
    void (*add_layernorm_fwd16)(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                const float *a, const float *b, const float *w, const float *bias,
                                int N, int C);
    void (*add_rmsnorm_fwd16)(float *res, uint16_t *out16, float *tmp, float *rstd, const float *a,
                              const float *b, const float *w, float eps, int N, int C);
    /* add_layernorm_fwd16b: add_layernorm_fwd16 with the branch in bf16
     * (a Linear's bf16 output): res[N,C] = a + fp32(b16) in fp32 (the
     * widening exact), then out16, mean, rstd as add_layernorm_fwd16 of that
     * res; bitwise from_bf16 of b16 then add_layernorm_fwd16.  tmp[N,C] as
     * there (the cpu backends widen b16 into it first).  Optional (NULL:
     * the caller keeps the fp32 branch). */
    void (*add_layernorm_fwd16b)(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                 const float *a, const uint16_t *b16, const float *w,
                                 const float *bias, int N, int C);
    /* add_rmsnorm_fwd16b: add_rmsnorm_fwd16 with the branch in bf16 (a
     * Linear's bf16 output, as PyTorch autocast's): res[N,C] = a +
     * fp32(b16) in fp32 (the widening exact), then out16, rstd as
     * add_rmsnorm_fwd16 of that res; bitwise from_bf16 of b16 then
     * add_rmsnorm_fwd16.  tmp[N,C] as there (the cpu backends widen b16
     * into it first, then compute out in it). */
    void (*add_rmsnorm_fwd16b)(float *res, uint16_t *out16, float *tmp, float *rstd,
                               const float *a, const uint16_t *b16, const float *w, float eps,
                               int N, int C);

    /* ---- RoPE writing bf16 (last; libtrain/model.h zt_r16_ok).  Optional:
     * NULL when the backend has none (the caller rotates in place with
     * rope_fwd and rounds with to_bf16).  rope_fwd16: qkv16[B*T, stride] =
     * to_bf16 of x after rope_fwd(x, inv_freq, B, T, n_heads, stride, hd,
     * scale), every column of the rows (the rotated heads and the rest, the
     * v heads of a q|k|v row), bitwise.  x: the fp32 input, used as scratch
     * (the cpu backends rotate it in place there; cuda leaves it alone, one
     * kernel reading x and writing qkv16): its contents after are
     * unspecified. */
    void (*rope_fwd16)(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T, int n_heads,
                       int stride, int hd, float scale);

    /* ---- the LM head's bf16 logits (last; libtrain/classifier.h: a
     * training block with the bf16 activations, libtrain/model.h
     * zt_l16_ok).  Optional: NULL when the backend has none (the models
     * then keep fp32 logits).  logits16[N,V] holds bf16 bits (the head
     * GEMM's output, matmul_fwd_o16).  Per row, in fp32: the max and the
     * sum of exp of the widened logits in one pass (ZT_XENT16_LANES lanes,
     * lane t a running max m and sum s over j = t, t + LANES, ...: a larger
     * x gives s = fma(s, exp(m - x), 1), m = x, else s += exp(x - m); then
     * the lanes' max, and their s exp(m - max) summed, in the CUDA block
     * reductions' order, which the cpu backends follow), the loss log(sum)
     * - (x[target] - max) (targets < 0 or >= V, or NULL: 0).
     * xent16_fwd: losses[N] (may be NULL: nothing to do); logits16 left as
     * they are.  xent16_fused: losses (may be NULL) as xent16_fwd gives
     * them, and each row overwritten with its gradient (softmax -
     * onehot(target)) * dloss, p = exp(x - max) * (1 / sum) rounded to fp32
     * first, the result rounded to bf16 (nearest even); a row without a
     * valid target: 0.                                                     */
    void (*xent16_fwd)(float *losses, const uint16_t *logits16, const int *targets, int N, int V);
    void (*xent16_fused)(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                         int V);
    /* The LM head's backward GEMMs on that bf16 gradient (a classifier-local
     * entry; a general bf16-dout matmul backward could replace it): matmul_bwd
     * (w16 != NULL: matmul_bwd_w16 on w16, w unused) with dout = the fp32
     * values of dout16[N,OC] and no bias, bitwise, in bf16 matmul mode
     * (whose rounding of dout is the identity on these values: the GEMMs
     * read dout16 itself, nothing rounds it); inp16 != NULL: the input in
     * bf16 (matmul_bwd_a16 on inp16, inp unused: the final norm's bf16
     * output, which dw's GEMM reads as it is).  dinp[N,C] overwritten, dw
     * (+=); either may be NULL.  cuda: bf16 matmul mode only and dout16
     * 256-byte aligned (else an error, nothing computed).                  */
    void (*matmul_bwd_head16)(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                              const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                              int C, int OC);
    /* ---- the attention's output in bf16 (last; libtrain/model.h
     * zt_ao16_ok).  Optional: NULL when the backend has none (the caller
     * runs gqa_ext_fwd16 into fp32 and rounds with to_bf16, and widens the
     * bf16 output with from_bf16 for gqa_ext_bwd16).  gqa_ext_fwd16o:
     * out16[B*T, NH hd] = to_bf16 of gqa_ext_fwd16's out, lse as its,
     * bitwise; out: fp32 scratch of that size (the cpu backends compute
     * gqa_ext_fwd16 there; cuda: its flash tensor-core kernel and cuDNN
     * store out16 themselves, its cuBLAS and fp32 paths compute out there
     * and round it).  gqa_ext_bwd16o: gqa_ext_bwd16 with out = the fp32
     * values of out16, bitwise; out: fp32 scratch of that size (the cpu
     * backends widen out16 there; cuda: D = rowsum(dout . O) and cuDNN
     * read out16 itself, its fp32 kernels' path widens it there). */
    void (*gqa_ext_fwd16o)(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16, float *tmp,
                           int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o);
    void (*gqa_ext_bwd16o)(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                           const uint16_t *out16, float *out, const float *lse, int B, int T, int NH,
                           int NKV, int hd, const zt_attn_opts *o);
    /* ---- the host's check of an asynchronous copy without waiting (last).
     * Optional, set with to_host_async (NULL: copy_wait only).  1 when the
     * copy of handle h (to_host_async / to_device_async) has completed or
     * failed (copy_wait then returns at once and records the failure), 0
     * while it has not; h stays valid until copy_wait (NULL: 1).  cuda:
     * cudaEventQuery on the copy's event; cpu-strict: 1 (its copies are
     * done by copy_wait itself, which never waits).  libtrain/mesh.h
     * zt_mesh_copy_wait polls it while checking the collectives it may
     * wait for. */
    int (*copy_done)(void *handle);
    /* ---- bf16 gradients (last; libtrain/model.h zt_d16_ok).  Optional:
     * NULL when the backend has none (the caller passes the fp32 gradient
     * and the GEMM entry rounds it).  A gradient a backward GEMM reads is
     * written in bf16 by the kernel that produces it, beside its fp32 value.
     *
     * matmul_bwd_d16 / matmul_dgelu_bwd_d16: matmul_bwd / matmul_dgelu_bwd
     * (inp16 != NULL: the bf16 input, inp unused; w16 != NULL: the bf16
     * weight, w unused; as the *_a16 / *_w16 entries) with the GEMMs' dout
     * operand dout16[N,OC] (bf16 bits); dbias (+=; may be NULL) is the
     * column sum of the fp32 dout (may be NULL when dbias is; dout NULL
     * with dbias: the column sum of fp32(dout16), bitwise that of a dout
     * equal to it: gqa_ext_bwd16d's bf16 gradient).  Bitwise
     * the fp32-dout entry when dout16 = to_bf16(dout): in bf16 matmul mode
     * that entry rounds dout once for both GEMMs, these read dout16 instead
     * (nothing rounds).  bf16 matmul mode only (cuda: fp32 mode records an
     * error and computes nothing; the scratch request stays the fp32
     * entry's).                                                          */
    void (*matmul_bwd_d16)(float *dinp, float *dw, float *dbias, const float *dout,
                           const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                           const float *w, const uint16_t *w16, int N, int C, int OC);
    void (*matmul_dgelu_bwd_d16)(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                 const float *dout, const uint16_t *dout16, const float *inp,
                                 const uint16_t *inp16, const float *pre, const float *w,
                                 const uint16_t *w16, int N, int C, int OC);
    /* layernorm_bwd16 / rmsnorm_bwd16: layernorm_bwd / rmsnorm_bwd, bitwise,
     * and dinp16[N,C] = to_bf16 of dinp after the accumulation (the
     * residual gradient's bf16 copy; cuda: the same kernel writes both) */
    void (*layernorm_bwd16)(float *dinp, uint16_t *dinp16, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, const float *mean, const float *rstd,
                            int N, int C);
    void (*rmsnorm_bwd16)(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                          const float *inp, const float *w, const float *rstd, int N, int C);
    /* rmsnorm_bwd16d: rmsnorm_bwd16 reading the output's gradient in bf16,
     * dout16[N,C]: bitwise rmsnorm_bwd (dinp16 NULL) or rmsnorm_bwd16 with
     * dout = fp32(dout16) (widened exactly; the same fp32 arithmetic in the
     * same order), dinp16 rounded to nearest even from the accumulated
     * dinp.  dinp16 may be NULL (only dinp and dw written, both +=).
     * dout16 must not overlap dinp16 (cuda: the dw pass reads dout16 after
     * the row pass wrote dinp16).  cuda: the same kernel as rmsnorm_bwd,
     * no fp32 dout read. */
    void (*rmsnorm_bwd16d)(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                           const float *inp, const float *w, const float *rstd, int N, int C);
    /* layernorm_bwd16d: layernorm_bwd16 reading the output's gradient in
     * bf16, dout16[N,C] (widened exactly: bitwise layernorm_bwd, or
     * layernorm_bwd16, on dout = fp32(dout16)), or the fp32 dout where
     * dout16 is NULL (exactly one of the two); dinp16 may be NULL (dinp,
     * dw, db written, +=, nothing rounded).  dsum (may be NULL): dsum[c] +=
     * the column sum of dinp after the accumulation, bitwise the dbias
     * matmul_bwd takes of a dout equal to that dinp (GPT-2: the attention
     * projection's bias gradient, whose output gradient is the residual
     * gradient this leaves).  dout16 must not overlap dinp16.  cuda: the
     * layernorm_bwd kernel, the column sums in its column pass over the rows
     * it has just written (no second read of dinp from memory), a third
     * array of partials in its scratch. */
    void (*layernorm_bwd16d)(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                             const float *dout, const uint16_t *dout16, const float *inp,
                             const float *w, const float *mean, const float *rstd, int N, int C);
    /* swiglu_bwd_d16 / geglu_bwd_d16: swiglu_bwd16 / geglu_bwd16, bitwise,
     * and dgu16[N,2H] = to_bf16(dgu) (cuda: the same kernel writes both).
     * dgu16 may be gu16 (the models write it in place of gate|up): an
     * element's gradient is written after gate|up's element is read.  dgu
     * may be NULL (no reader of the fp32 gradient): then only dgu16 is
     * written, the same bits (cuda: the kernel writes no fp32 value; the
     * cpu backends make them in host scratch of their own). */
    void (*swiglu_bwd_d16)(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                           int N, int H);
    void (*geglu_bwd_d16)(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                          int N, int H);
    /* swiglu_bwd_dd16 / geglu_bwd_dd16: swiglu_bwd_d16 / geglu_bwd_d16
     * reading the output's gradient in bf16, dout16[N,H]: bitwise them with
     * dout = fp32(dout16) (widened exactly; the same fp32 arithmetic), the
     * same in-place rule (dgu16 may be gu16) and dgu NULL allowed (only
     * dgu16 written).  dout16 must not overlap dgu16, gu16 or dgu.  The
     * cpu backends widen dout16 into host scratch of their own.  cuda: the
     * same kernel as swiglu_bwd16 / geglu_bwd16, no fp32 dout read (Llama
     * and Gemma's down projection writing its input gradient in bf16,
     * config.h ZT_W16_DH16).  Optional: NULL when the backend has none. */
    void (*swiglu_bwd_dd16)(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                            const uint16_t *gu16, int N, int H);
    void (*geglu_bwd_dd16)(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                           const uint16_t *gu16, int N, int H);
    /* ---- Qwen3's q/k norms and RoPE writing bf16 (last; libtrain/model.h
     * zt_qkr16_ok).  Optional: NULL when the backend has none (the caller
     * runs headnorm_fwd on the q and the k heads, then rope_fwd16).
     * qknorm_rope_fwd16: bitwise that sequence, N = B T rows of x[stride]:
     * headnorm_fwd(x, raw, rstd, qw, eps, N, qnh, stride, NH hd / qnh),
     * headnorm_fwd(x + NH hd, raw + N NH hd, rstd + N NH, kw, eps, N, knh,
     * stride, NKV hd / knh) (qnh, knh: the norms' groups of a row, NH and
     * NKV per head, 1 over the whole projection), then rope_fwd16(qkv16, x,
     * inv_freq, B, T, NH + NKV, stride, hd, scale): qkv16, raw and rstd
     * written as that sequence writes them; x: the fp32 input (q|k|v before
     * the norms), used as scratch (the cpu backends run the sequence in
     * place there; cuda leaves it alone, one kernel): its contents after
     * are unspecified. */
    void (*qknorm_rope_fwd16)(uint16_t *qkv16, float *x, float *raw, float *rstd, const float *qw,
                              const float *kw, float eps, const float *inv_freq, int B, int T,
                              int NH, int NKV, int qnh, int knh, int stride, int hd, float scale);
    /* ---- the attention entries' scratch (last; the memory planner's query,
     * libtrain/memplan.c).  Optional: NULL when the backend keeps no scratch
     * of its own (the planner then counts ztrain's kernels' need,
     * kernels/cuda/cuda_workspace.h).  att_scratch: the bytes gqa_ext_fwd
     * (bwd 0) or gqa_ext_bwd (bwd 1) -- and the entries built on them
     * (attention_*, gqa_*, the *16 forms) -- will ask of the backend's own
     * scratch for this shape and o in matmul precision `mode`, on the path
     * the backend takes for it, for the entry form in16: ZT_ATT_IN32 the
     * fp32 q|k|v (gqa_ext_*, gqa_*, attention_*), ZT_ATT_IN16 the bf16
     * q|k|v (gqa_ext_fwd16 / _bwd16), ZT_ATT_IN16O and the bf16 output
     * (gqa_ext_fwd16o / _bwd16o); cuDNN's path reads the bf16 ones as they
     * are, with no copies.  cuda: its attention rule (docs/gpu.md);
     * where that picks cuDNN's fused attention, the shape's execution plan
     * is built (or the cached one reused: the very plan the call will run)
     * and its workspace, which only cuDNN knows, added to our buffers; a
     * shape cuDNN declines counts ztrain's kernels.  *cudnn (may be NULL):
     * 1 when cuDNN's path was counted, else 0.  A cuDNN error is recorded
     * (error()) and counts ztrain's kernels. */
    size_t (*att_scratch)(int bwd, int mode, int in16, int B, int T, int NH, int NKV, int hd,
                          const zt_attn_opts *o, int *cudnn);
    /* ---- the attention backward's gradient in bf16 (last; libtrain/arch.h
     * zt_att_in16_of ZT_ATT_IN16OD).  Optional: NULL when the backend has
     * none (the caller calls gqa_ext_bwd16o).  gqa_ext_bwd16d: on a path
     * whose q|k|v gradient is bf16 by construction (cuda: cuDNN's, which
     * writes dQ, dK, dV in bf16) it writes that gradient into dqkv16[B*T,
     * (NH+2NKV) hd] (16-byte aligned, as the bf16 q|k|v) and returns 1,
     * dqkv untouched: fp32(dqkv16) is, bitwise, the dqkv gqa_ext_bwd16o
     * gives on that path.  Elsewhere (the cpu backends, cuda's ztrain
     * kernels, dqkv16 misaligned) it is gqa_ext_bwd16o into dqkv and
     * returns 0, dqkv16 untouched.  The caller's backward GEMM then reads
     * dqkv16 (matmul_bwd_d16 with dout NULL) or dqkv. */
    int (*gqa_ext_bwd16d)(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                          float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                          int NH, int NKV, int hd, const zt_attn_opts *o);
    /* ---- the GELU backward writing bf16 (last; libtrain/model.h
     * zt_g16_ok).  Optional: NULL when the backend has none (the caller
     * widens pre16 and calls matmul_dgelu_bwd_d16, whose dpre the next
     * GEMMs round).  matmul_dgelu_bwd_o16: matmul_dgelu_bwd_d16 into tmp
     * (dout16 required) with pre = the fp32 values of pre16[N,C], then
     * dpre16[N,C] = to_bf16(tmp): dpre16, dpre_bias (+=: the column sums of
     * the fp32 dpre), dw and dbias bitwise that sequence.  tmp[N,C]: fp32
     * scratch (the cpu backends compute that sequence there; cuda only
     * where cuBLASLt has no algorithm: its contents after are unspecified).
     * cuda: the input-gradient GEMM with a bf16 D and DGELU_BGRAD, its aux
     * pre16 read in bf16 (cuBLASLt's aux has D's type), the bias gradient
     * the epilogue's fp32 column sums (kernels/cuda/cuda_matmul.cu); bf16
     * matmul mode only (fp32 mode records an error and computes nothing;
     * the scratch request is matmul_dgelu_bwd_d16's). */
    void (*matmul_dgelu_bwd_o16)(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                 float *dbias, const float *dout, const uint16_t *dout16,
                                 const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                 const float *w, const uint16_t *w16, int N, int C, int OC);
    /* ---- RoPE's backward on a bf16 gradient (last; libtrain/arch.h
     * zt_att_in16_of ZT_ATT_IN16OD on Llama's blocks: gqa_ext_bwd16d's
     * bf16 dQ|dK|dV rotated back in place, then the q|k|v GEMM reads it,
     * matmul_bwd_d16 with dout NULL).  Optional: NULL when the backend has
     * none (the caller's gradient stays fp32: gqa_ext_bwd16o, rope_bwd).
     * rope_bwd16: x16[B*T, stride] (bf16 bits) overwritten with
     * to_bf16(rope_bwd(from_bf16(x16), inv_freq, B, T, n_heads, stride, hd,
     * scale)), every column of the rows (the rotated heads rounded once,
     * nearest even, as matmul_bwd's bf16 mode rounds dout; the rest, the v
     * heads of a q|k|v row, as they were), bitwise.  dbias[stride] (+=; may
     * be NULL): the column sums of the fp32 values rope_bwd gives, before
     * that rounding, bitwise the dbias matmul_bwd adds from that fp32 dout
     * (its fixed-order column sum; the caller then passes the GEMM no
     * dbias).  cpu: the sequence in host scratch of its own; cuda: the
     * column sums first (k_rope_colsum16_part, a thread per pair of rotated
     * columns or per other column and chunk of rows, the pair rotated as
     * k_rope does; k_colsum_final), then k_rope in place on the bf16 rows
     * (the v columns not touched). */
    void (*rope_bwd16)(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T, int n_heads,
                       int stride, int hd, float scale);
    /* ---- the attention output's gradient in bf16 (last; libtrain/arch.h
     * zt_do16_of).  Optional: NULL when the backend has none (the caller
     * computes the fp32 dout and calls gqa_ext_bwd16d / _bwd16o, which
     * round it for cuDNN).
     * att_do16: 1 when gqa_ext_bwd16do at this shape and o, in the current
     * matmul precision, with lse, qkv16 and out16 16-byte aligned, takes a
     * path reading dout16 as it is (cuda: cuDNN's, whose dO is bf16: the
     * values gqa_ext_bwd16o rounds the fp32 dout to, and nothing else of it
     * read in fp32), else 0 (the cpu backends: their attention backward
     * reads the fp32 dout).  cuda: the shape's plan is built (or the cached
     * one reused); a cuDNN error is recorded and answers 0.
     * matmul_bwd_o16: matmul_bwd_d16 (dout16 required) with the input
     * gradient written in bf16, dinp16[N,C] = to_bf16(dinp): dinp16, dw
     * and dbias bitwise matmul_bwd_d16 followed by to_bf16.  tmp[N,C]: fp32
     * scratch (the cpu backends compute that sequence there; cuda only
     * where cuBLASLt has no bf16-D algorithm: its contents after are
     * unspecified).  cuda: the input-gradient GEMM with a bf16 D (fp32
     * accumulation, D rounded to nearest even once: the values to_bf16
     * gives of matmul_bwd_d16's fp32 dinp); bf16 matmul mode only (fp32
     * mode records an error and computes nothing; the scratch request is
     * matmul_bwd_d16's).
     * gqa_ext_bwd16do: gqa_ext_bwd16d with the output's gradient in bf16,
     * dout16[B*T, NH hd] (16-byte aligned); on the path att_do16 answers 1
     * for, bitwise gqa_ext_bwd16d with dout = any fp32 values that round
     * to dout16 (cuda: cuDNN reads dout16 as its dO, no k_sdpa_round;
     * its scratch request stays gqa_ext_bwd16d's).  Elsewhere it is
     * gqa_ext_bwd16d with dout = fp32(dout16) (widened into scratch of its
     * own: not the fp32-dout path's values, hence att_do16).  Returns as
     * gqa_ext_bwd16d (dqkv16 may be NULL: dqkv written, 0). */
    int (*att_do16)(int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o);
    void (*matmul_bwd_o16)(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                           const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                           const float *w, const uint16_t *w16, int N, int C, int OC);
    int (*gqa_ext_bwd16do)(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                           float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                           int NH, int NKV, int hd, const zt_attn_opts *o);
    /* ---- the input gradient accumulated (last; optional: NULL when the
     * backend has none, and the caller writes matmul_bwd's dinp into a
     * temporary and adds it; libtrain/lora.c's adapter products) ----
     * dinp[N,C] += dout[N,OC] @ w[OC,C]: bitwise matmul_bwd(tmp, NULL, NULL,
     * dout, NULL, w, N, C, OC) into a temporary tmp[N,C] followed by
     * add(dinp, dinp, tmp, N*C): the product rounded to fp32 once, then one
     * fp32 addition an element (in bf16 matmul mode dout and w rounded to
     * bf16 as matmul_bwd rounds them).  N, C or OC <= 0: nothing (dinp
     * unchanged).  cuda: the input-gradient GEMM with beta = 1 and C = D
     * (D = op + C in fp32: no temporary, no add kernel; its scratch request
     * is matmul_bwd's with dinp alone); cpu: that sequence, the product in
     * host scratch of its own. */
    void (*matmul_dinp_acc)(float *dinp, const float *dout, const float *w, int N, int C, int OC);
    /* ---- memory the caller wholly overwrites before it reads it (last;
     * optional: NULL when the backend has none, and the caller uses alloc)
     * ---- alloc_nz(bytes): alloc's block (the same alignment, failure and
     * free) without the zero fill: its contents are unspecified until
     * written.  cuda: cudaMallocAsync alone (no cudaMemsetAsync); cpu:
     * posix_memalign alone; cpu-strict: the block filled with 0xff bytes
     * (fp32 / bf16 NaN, NF4 code 15) so a read before the write shows in
     * the results.  libtrain: zt_mem_alloc's ZT_MEM_NOZERO. */
    void *(*alloc_nz)(size_t bytes);
    /* ---- the forward product accumulated (last; optional: NULL when the
     * backend has none; libtrain/lora.c's order swapped, config.h
     * ZT_W16_LORASWAP: the adapters' delta written first, the base GEMM
     * adding into it) ----
     * out[N,OC] += inp[N,C] @ w[OC,C]^T: bitwise the beta-0 entry's product
     * into a temporary tmp[N,OC] followed by add(out, out, tmp, N*OC), the
     * entry being matmul_fwd_a16(tmp, inp16, w, w16, NULL, ...) when inp16 !=
     * NULL (bf16 matmul mode only; inp unused), else matmul_fwd_w16(tmp, inp,
     * w16, NULL, ...) when w16 != NULL (bf16 mode only; w unused), else
     * matmul_fwd(tmp, inp, w, NULL, ...): the product rounded to fp32 once,
     * then one fp32 addition an element (fl(product + out) = fl(out +
     * product)).  No bias.  N, C or OC <= 0: nothing (out unchanged).  cuda:
     * the forward GEMM with beta = 1 and C = D (no temporary, no add kernel;
     * its scratch request is the beta-0 entry's); cpu: that sequence, the
     * product in host scratch of its own. */
    void (*matmul_fwd_acc)(float *out, const float *inp, const uint16_t *inp16, const float *w,
                           const uint16_t *w16, int N, int C, int OC);
    /* ---- the base input gradient accumulated (last; optional: NULL when
     * the backend has none; libtrain/lora.c's backward order swapped,
     * config.h ZT_W16_BWDSWAP: the adapters' dx = dh A written first, the
     * base dinp GEMM adding into it) ----
     * dinp[N,C] += dout[N,OC] @ w[OC,C]: bitwise the beta-0 entry's dinp
     * into a temporary tmp[N,C] followed by add(dinp, dinp, tmp, N*C), the
     * entry being matmul_bwd_d16(tmp, NULL, NULL, NULL, dout16, NULL, NULL,
     * w, w16, ...) when dout16 != NULL (bf16 matmul mode only; dout
     * unused), else matmul_bwd_w16(tmp, NULL, NULL, dout, NULL, w16, ...)
     * when w16 != NULL (bf16 mode only; w unused), else matmul_bwd(tmp,
     * NULL, NULL, dout, NULL, w, ...) (in bf16 mode dout rounded to bf16 as
     * matmul_bwd rounds it): the product rounded to fp32 once, then one
     * fp32 addition an element (fl(product + dinp) = fl(dinp + product)).
     * No dw, no dbias.  N, C or OC <= 0: nothing (dinp unchanged).  cuda:
     * the input-gradient GEMM with beta = 1 and C = D (no temporary, no add
     * kernel; its scratch request is the beta-0 entry's with dinp alone);
     * cpu: that sequence, the product in host scratch of its own. */
    void (*matmul_bwd_acc)(float *dinp, const float *dout, const uint16_t *dout16, const float *w,
                           const uint16_t *w16, int N, int C, int OC);
    /* ---- the forward product accumulated into a bf16 output (last;
     * optional: NULL when the backend has none; libtrain/llama.c's LoRA
     * gate|up, config.h ZT_W16_GU16: the adapters' delta written in bf16
     * first, the base GEMM adding into it and writing the bf16 gate|up) ----
     * out16[N,OC] = bf16(inp[N,C] @ w[OC,C]^T + fp32(out16)), in place: the
     * beta-0 entry's product (matmul_fwd_a16(tmp, inp16, w, w16, NULL, ...)
     * when inp16 != NULL, inp unused; else matmul_fwd_w16(tmp, inp, w16,
     * NULL, ...) when w16 != NULL, w unused; else matmul_fwd(tmp, inp, w,
     * NULL, ...)) rounded to fp32 once, plus the widened out16 (exact) in one
     * fp32 addition, then rounded to bf16 once (nearest even): to_bf16 of
     * matmul_fwd_acc's out from out = fp32(out16).  No bias.  N, C or OC <=
     * 0: nothing (out16 unchanged).  cuda: the forward GEMM with beta = 1, C
     * = D in bf16 (cuBLASLt: bf16 A, B, C, D, fp32 compute: the epilogue adds
     * C in fp32 and rounds D once; where Lt has no such algorithm,
     * cublasGemmEx with the same types), bf16 matmul mode only (fp32 mode
     * records an error and computes nothing); its scratch request is the
     * beta-0 entry's.  cpu: that sequence, the product in host scratch of
     * its own (either matmul mode). */
    void (*matmul_fwd_acc16)(uint16_t *out16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC);
    /* ---- weight gradients written fresh (last; optional: NULL when the
     * backend has none, and the engine zeroes the gradients before the
     * backward; libtrain/train.c, config.h ZT_W16_GRADFRESH) ----
     * From now on the weight-gradient GEMM of matmul_bwd and its family
     * (matmul_bwd_w16 / _a16 / _d16 / _o16 / _head16, matmul_dgelu_bwd and
     * its _w16 / _a16 / _d16 / _o16) whose dw lies in g[0, n) (dw >= g and
     * dw < g + n) overwrites it: dw[OC,C] = dout^T @ inp (GEMM beta 0, dw
     * not read), bitwise the (+=) entry on a zeroed dw except that an
     * element whose sum is -0.0 stays -0.0 (0 + -0 = +0 there); any other
     * dw (and dinp, dbias, dpre_bias) as before.  g NULL or n 0: none (the
     * default).  The caller makes each such GEMM its dw's first write since
     * the zeros it no longer writes.  cpu: cblas beta 0 (which zeroes C
     * itself: the same bits as the zeroed dw, -0.0 included); cuda: the
     * GEMM's beta 0 (C = D not read). */
    void (*set_dw_fresh)(float *g, size_t n);
    /* ---- Qwen3's q/k norms' backward on the bf16 gradient (last;
     * libtrain/arch.h zt_att_in16_of ZT_ATT_IN16OD on Llama's blocks with
     * q/k norms: gqa_ext_bwd16d's bf16 dQ|dK|dV taken back through RoPE
     * and the norms in place, then the q|k|v GEMM reads it, matmul_bwd_d16
     * with dout NULL).  Optional: NULL when the backend has none (the
     * caller's gradient stays fp32: gqa_ext_bwd16o, rope_bwd, headnorm_bwd
     * twice).
     * qknorm_rope_bwd16: dqkv16[N = B T, stride] (bf16 bits) overwritten
     * with the bf16 rounding (nearest even) of the fp32 rows x that the
     * sequence x = from_bf16(dqkv16); rope_bwd(x, inv_freq, B, T, NH +
     * NKV, stride, hd, scale); headnorm_bwd(x, dqw, raw, qw, rstd, N, qnh,
     * stride, NH hd / qnh); headnorm_bwd(x + NH hd, dkw, raw + N NH hd, kw,
     * rstd + N NH, N, knh, stride, NKV hd / knh) leaves, bitwise, and dqw,
     * dkw (+=) as that sequence adds to them, bitwise (raw, rstd: what
     * qknorm_rope_fwd16 / headnorm_fwd saved; qnh, knh the norms' groups
     * of a row as there).  The columns past the q and k heads (v) are not
     * touched.  cpu: the sequence in host scratch of its own; cuda:
     * k_qknorm_rope_bwd16, a block per chunk of k_headnorm_bwd's (row,
     * group) pairs of the q norm and then of the k norm (its chunks, its
     * order: each value k_rope's rotation of the widened pair, computed
     * where it is read), the partial dw then each pair's gradient stored
     * rounded in place, then k_colsum_final for dqw and for dkw; hd even
     * and NH, NKV multiples of qnh, knh on cuda (otherwise it records an
     * error and computes nothing: Llama's head_dim is even, its groups a
     * head or the projection); scratch cuda_workspace.h
     * zt_cuda_ws_qknorm_rope_bwd16. */
    void (*qknorm_rope_bwd16)(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                              const float *rstd, const float *qw, const float *kw,
                              const float *inv_freq, int B, int T, int NH, int NKV, int qnh, int knh,
                              int stride, int hd, float scale);
    /* ---- the base input gradient accumulated into a bf16 input gradient
     * (last; optional: NULL when the backend has none; libtrain/llama.c's
     * LoRA q|k|v and gate|up, config.h ZT_W16_LGRAD16: the adapters' share
     * of the input gradient written in bf16 first, lora.h
     * zt_lora_bwd_first16, the base dinp GEMM adding into it and writing
     * the bf16 gradient the norm backward reads, rmsnorm_bwd16d) ----
     * dinp16[N,C] = bf16(dout[N,OC] @ w[OC,C] + fp32(dinp16)), in place: the
     * beta-0 entry's product (matmul_bwd_d16(tmp, NULL, NULL, NULL, dout16,
     * NULL, NULL, w, w16, ...) when dout16 != NULL, dout unused; else
     * matmul_bwd_w16(tmp, NULL, NULL, dout, NULL, w16, ...) when w16 !=
     * NULL, w unused; else matmul_bwd(tmp, NULL, NULL, dout, NULL, w, ...),
     * dout rounded to bf16 as matmul_bwd rounds it) rounded to fp32 once,
     * plus the widened dinp16 (exact) in one fp32 addition, then rounded to
     * bf16 once (nearest even): to_bf16 of matmul_bwd_acc's dinp from dinp
     * = fp32(dinp16).  No dw, no dbias.  N, C or OC <= 0: nothing (dinp16
     * unchanged).  cuda: the input-gradient GEMM with beta = 1, C = D in
     * bf16 (cuBLASLt: bf16 A, B, C, D, fp32 compute: the epilogue adds C in
     * fp32 and rounds D once; where Lt has no such algorithm, cublasGemmEx
     * with the same types, as matmul_fwd_acc16), bf16 matmul mode only
     * (fp32 mode records an error and computes nothing); its scratch
     * request is the beta-0 entry's with dinp alone (matmul_bwd_acc's).
     * cpu: that sequence, the product in host scratch of its own (either
     * matmul mode). */
    void (*matmul_bwd_acc16)(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                             const float *w, const uint16_t *w16, int N, int C, int OC);
    /* ---- the Mixture of Experts' grouped forward GEMM (last; optional:
     * NULL when the backend has none, libtrain/moe.c then runs the
     * per-expert matmul_fwd_o16 loop) ----
     * matmul_grouped_o16: G GEMMs over consecutive row blocks: block g has
     * n[g] >= 0 rows (n: host ints; 0: skipped), rows [o_g, o_g + n[g]),
     * o_0 = 0, o_{g+1} = o_g + n[g]; out16[o_g.., OC] = bf16(x_g @ w16_g^T),
     * w16_g = w16 + g OC C (bf16 [OC, C]); x the bf16 inp16 [rows, C], or
     * (inp16 NULL) the fp32 inp [rows, C] rounded to bf16 once as
     * matmul_fwd_o16 rounds it.  Bitwise, on the cpu backends, the loop
     * matmul_fwd_o16(out16 + o_g OC, tmp, inp + o_g C, inp16 + o_g C, NULL,
     * w16_g, NULL, n[g], C, OC) over the blocks with n[g] > 0 (cpu: that
     * loop, tmp host scratch of its own).  cuda: bf16 matmul mode only
     * (fp32 mode records an error and computes nothing); one
     * cublasGemmGroupedBatchedEx (bf16 A, B, C, fp32 compute; a group of
     * one a non-empty block), the fp32 input rounded into scratch first and
     * the A, B, C pointer arrays in scratch (zt_cuda_ws_matmul_grouped);
     * where cuBLAS refuses the call (any error status), the per-block
     * matmul_fwd_o16 loop for the rest of the run, reported once. */
    void (*matmul_grouped_o16)(uint16_t *out16, const float *inp, const uint16_t *inp16,
                               const uint16_t *w16, const int *n, int G, int C, int OC);
    /* ---- the Mixture of Experts' bf16 row gather (optional: NULL when the
     * backend has none, libtrain then keeps the MoE blocks' norm output
     * and routed rows in fp32) ----
     * rows_gather16: out[i, :] = x[rows[i], :] (rows NULL: row i itself),
     * i < n, bf16 bits copied (no arithmetic): rows_gather's bf16 form
     * without the weight. */
    void (*rows_gather16)(uint16_t *out, const uint16_t *x, const int *rows, int n, int C);
    /* ---- the Mixture of Experts' bf16 row entries (last; optional: NULL
     * when the backend has none, libtrain/moe.c then widens with from_bf16
     * and runs rows_dot / rows_gather / rows_scatter) ----
     * rows_dot16: out[i] = sum_c a[i, c] * fp32(b16[i, c]) (a [n, C] fp32,
     * b16 [n, C] bf16 bits, the columns summed in order, rows_dot's order:
     * bitwise from_bf16 + rows_dot), then, when w != NULL, a[i, :] *= w[i]
     * in place (bitwise rows_gather(a, a, NULL, w, n, C)); one pass.
     * rows_scatter16: y[rows[i], :] += w[i] * fp32(x16[i, :]) (rows NULL:
     * row i; w NULL: 1), i in order: bitwise from_bf16 + rows_scatter. */
    void (*rows_dot16)(float *out, float *a, const uint16_t *b16, const float *w, int n, int C);
    void (*rows_scatter16)(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                           int C);
    /* ---- the Mixture of Experts' grouped backward input gradients (last;
     * optional: NULL when the backend has none, libtrain/moe.c then runs
     * a matmul_bwd_d16 an expert; config.h ZT_W16_MOEGB) ----
     * matmul_grouped_bwd_o16: G input-gradient GEMMs over consecutive row
     * blocks (n, o_g as matmul_grouped_o16's): dinp16[o_g.., C] =
     * bf16(dout16_g @ w16_g), dout16_g = dout16 + o_g OC (bf16 [n[g], OC]),
     * w16_g = w16 + g OC C (bf16 [OC, C]).  No weight gradient.  Bitwise,
     * on the cpu backends, the loop matmul_bwd_o16(dinp16 + o_g C, tmp, NULL,
     * NULL, NULL, dout16 + o_g OC, NULL, NULL, NULL, w16_g, n[g], C, OC)
     * over the blocks with n[g] > 0 (cpu: that loop; tmp [rows, C] fp32
     * scratch, unused on cuda but for its fallback: contents after
     * unspecified).  cuda: bf16 matmul mode only (fp32 mode records an
     * error and computes nothing); one cublasGemmGroupedBatchedEx (bf16 A,
     * B, C, fp32 compute; m C, n n[g], k OC, A N, B N), its pointer arrays
     * in scratch (zt_cuda_ws_matmul_grouped(0, ...)); where cuBLAS refuses
     * (any error status) the per-block matmul_bwd_o16 loop for the rest of
     * the run, reported once (the forward's switch: one for both).
     * rows_dot16h: rows_dot16 with a in bf16: out[i] = sum_c fp32(a16[i, c])
     * fp32(b16[i, c]) (the columns in order), then, when w != NULL,
     * a16[i, c] = bf16(w[i] fp32(a16[i, c])) in place (nearest even); one
     * pass. */
    void (*matmul_grouped_bwd_o16)(uint16_t *dinp16, float *tmp, const uint16_t *dout16,
                                   const uint16_t *w16, const int *n, int G, int C, int OC);
    void (*rows_dot16h)(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C);
    /* ---- whether a weight gradient is written fresh (last; optional:
     * NULL when the backend has none, and with it set_dw_fresh) ----
     * 1 when dw lies in the range set_dw_fresh set (dw >= g and dw < g +
     * n): its dW GEMM overwrites it; else 0.  libtrain/moe.c zeroes then
     * the gradient of an expert that received no rows (no GEMM writes
     * it). */
    int (*dw_fresh)(const float *dw);
    /* ---- the Mixture of Experts' per-token sum of its routed rows (last;
     * optional: NULL when the backend has none, libtrain/moe.c then runs
     * rows_scatter16 with rows[i] = perm[i] / K) ----
     * rows_sum16: for i < n in order, y[perm[i] / K, :] += w[i] fp32(x16[i,
     * :]) (w NULL: 1): bitwise rows_scatter16(y, x16, rows, w, n, C) with
     * rows[i] = perm[i] / K.  perm: n distinct slots in [0, N K) (moe_permute's
     * perm, the routed rows by expert); y [N, C].  pos: [N K] int scratch
     * (cpu: unused; cuda: the inverse permutation, -1 for a slot no row
     * takes).  cuda: pos set to -1 (a memset), k_moe_inverse (pos[perm[i]] =
     * i, a thread a row), then k_rows_sum16, a thread an element of y
     * (coalesced over C): each token's K slots' rows taken in increasing i,
     * so each element's additions in rows_scatter16's order. */
    void (*rows_sum16)(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n,
                       int N, int K, int C);
    /* ---- the Mixture of Experts' grouped weight gradients (last;
     * optional: NULL when the backend has none, libtrain/moe.c then runs
     * a matmul_bwd_d16 an expert; config.h ZT_W16_MOEGW) ----
     * matmul_grouped_dw16: G weight-gradient GEMMs over consecutive row
     * blocks (n, o_g as matmul_grouped_o16's): for each block with n[g] > 0,
     * dw_g = dw + g OC C (fp32 [OC, C]) becomes
     *   (dw_fresh(dw_g) ? 0 : dw_g) + fp32(bf16(dout16_g^T @ inp16_g)),
     * dout16_g = dout16 + o_g OC (bf16 [n[g], OC]), inp16_g = inp16 + o_g C
     * (bf16 [n[g], C]): the product in fp32, rounded to bf16 once (nearest
     * even) and added in fp32, as autocast's bf16 Linear writes its weight's
     * gradient and the fp32 .grad takes it.  Blocks without rows: dw_g
     * untouched.  tmp16: bf16 scratch of tmp_n >= OC C elements (the
     * products wait there; contents after unspecified; cpu: unused).  cpu:
     * per block, the product as matmul_bwd_d16's dW computes it (beta 0,
     * host scratch of its own), rounded, added.  cuda: bf16 matmul mode only
     * (fp32 mode, or tmp_n < OC C, records an error and computes nothing);
     * the blocks with rows in chunks of min(tmp_n / (OC C), 256): one
     * cublasGemmGroupedBatchedEx a chunk (bf16 A, B, C, fp32 compute; m C,
     * n OC, k n[g], A N, B T; block q of the chunk into tmp16 + q OC C), its
     * pointer arrays in scratch (zt_cuda_ws_matmul_grouped(0, ...)), then
     * k_dw_add16 over the chunk (a thread an element); where cuBLAS refuses
     * (the forward's switch) a cublasGemmEx a block into the same tmp16
     * slots, then the same k_dw_add16. */
    void (*matmul_grouped_dw16)(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                const uint16_t *inp16, const int *n, int G, int C, int OC);
    /* ---- the Mixture of Experts' row gather writing bf16 (last;
     * optional: NULL when the backend has none, libtrain/moe.c then runs
     * rows_gather and to_bf16; config.h ZT_W16_GATHER16) ----
     * rows_gather_o16: out16[i, :] = to_bf16(w[i] * x[rows[i], :]) (rows
     * NULL: row i; w NULL: 1), rounded to nearest even as to_bf16 rounds:
     * bitwise rows_gather then to_bf16.  out16 [n, C] bf16 bits, x fp32
     * (not overlapping out16). */
    void (*rows_gather_o16)(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C);
    /* ---- several runs of bf16 widened in one call (last; optional: NULL
     * when the backend has none, the caller then widens each run with
     * from_bf16) ----
     * from_bf16_runs: run r, the n[r] elements at in + off[r], widened into
     * out + o_r, o_r = n[0] + ... + n[r - 1] (the runs placed one after the
     * other), each element as from_bf16 widens it: bitwise from_bf16 run by
     * run.  off[] and n[] host arrays of nr runs (n[r] = 0 allowed); out and
     * in do not overlap.  libtrain/shard.c: a unit's fp32 copy of its
     * tensors other than the GEMM-only ones.  cuda: one k_from_bf16_runs
     * launch per ZT_CUDA_WIDEN_RUNS non-empty runs (their table a kernel
     * argument: kernels/cuda/cuda_workspace.h). */
    void (*from_bf16_runs)(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr);
} zt_backend;

/* att_scratch's in16: which attention entries ask */
/* (ZT_ATT_IN16OD: ZT_ATT_IN16O whose backward is gqa_ext_bwd16d, writing
 * the caller's dqkv16: the forward's scratch is ZT_ATT_IN16O's) */
enum { ZT_ATT_IN32 = 0, ZT_ATT_IN16 = 1, ZT_ATT_IN16O = 2, ZT_ATT_IN16OD = 3 };
/* (ZT_ATT_DO16, or'ed into a backward's in16: its dO the caller's bf16
 * values, gqa_ext_bwd16do's, which cuDNN's path reads as they are: no dO
 * buffer of its own; libtrain/arch.h zt_do16_of) */
#define ZT_ATT_DO16 4

/* Lanes of one row of xent16_fwd / xent16_fused (the CUDA kernel's threads
 * per block; the cpu backends reduce in the same order). */
#define ZT_XENT16_LANES 512

/* The CPU backend (always built). */
const zt_backend *zt_backend_cpu(void);

/* A debugging backend (always built, kernels/cpu/cpu_strict.c): the CPU
 * kernels on memory the host cannot touch.  Every block alloc() hands out
 * is an mmap'd region kept PROT_NONE except while one of this table's own
 * kernels or copies runs, and host_memory is 0, so a host dereference of
 * "device" memory by its caller crashes (SIGSEGV) at the faulting line
 * instead of silently working as it would on the cpu backend.  Results are
 * bitwise those of zt_backend_cpu().  Slow (every call changes the
 * protection of every live block): for tiny models in tests.  NULL when
 * the regions cannot be set up (no mmap/mprotect). */
const zt_backend *zt_backend_cpu_strict(void);
/* cpu-strict emulates a device of `bytes` capacity ("a small GPU on the
 * CPU"; ztrain.strict_device_memory): alloc() returns NULL, with error()
 * saying so, once the live bytes it handed out would exceed it, and
 * device_memory() reports capacity - live as free.  0 (the default) = no
 * capacity: alloc() fails only when mmap does and device_memory() reports
 * "unknown".  Counts requested bytes (not pages).  Set it before the first
 * alloc(); process-wide, like the backend. */
void zt_backend_cpu_strict_set_capacity(size_t bytes);

#endif /* ZT_KERNELS_BACKEND_H */
