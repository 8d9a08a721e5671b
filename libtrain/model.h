/*
 * model.h -- a model as the engine sees it: a layout of units and tensors
 * (built through the public zt_layout_* calls), the model's operations, and
 * the full parameter / gradient blocks at the stages that keep them.
 *
 * The logical parameter block is laid out unit by unit, tensor by tensor,
 * in the order describe() listed them.  Unit u occupies elements
 * [units[u].offset, units[u].offset + units[u].numel).
 */
#ifndef ZT_MODEL_H
#define ZT_MODEL_H
#include <stdlib.h>
#include "backend.h"
#include "config.h"
#include "internal.h"

typedef struct zt_tensor_info {
    char name[40];
    int unit;          /* index into units */
    size_t offset;     /* elements from the start of the parameter block */
    size_t numel;
    int ndim;
    int shape[2];
    int decay;         /* AdamW weight decay applies */
    int gemm;          /* ZT_TENSOR_GEMM: only a GEMM weight (no fp32 copy beside the bf16 one) */
    int init;          /* zt_init_kind */
    double init_std;   /* ZT_INIT_NORMAL */
} zt_tensor_info;

typedef struct zt_unit_info {
    char name[24];
    size_t offset, numel;
    int first_tensor, n_tensors;
    int expert;        /* a Mixture of Experts' expert tensors (zt_layout_mark_expert): under
                        * expert parallelism each rank stores one window of it (shard.c) */
} zt_unit_info;

typedef struct zt_model {
    const zt_model_ops *ops;
    void *self;
    zt_model_config cfg;       /* context, vocab (and the GPT shape) */
    const zt_backend *be;
    int n_tensors, n_units;
    zt_tensor_info *tensors;
    zt_unit_info *units;
    size_t num_params;
    float *params, *grads;     /* [block_elems] each, or NULL (stage-dependent) */
    size_t block_elems;        /* the blocks' elements: num_params, or under expert
                                * parallelism this rank's (shard.c zt_shard_block_elems) */
} zt_model;

/* Which full blocks to allocate. */
enum { ZT_MODEL_PARAMS = 1, ZT_MODEL_GRADS = 2 };

/* Run ops->describe and lay the model out; allocates the blocks in flags.
 * The model does not own self (see zt_model_free). */
int zt_model_create(const zt_model_ops *ops, void *self, const zt_model_config *mc,
                    const zt_backend *be, int flags, zt_model **out, zt_status *st);
/* Allocate the blocks in flags with n elements each (the model has none
 * yet): zt_model_create's num_params, or a rank's share under expert
 * parallelism (zt_shard_block_elems). */
int zt_model_alloc_blocks(zt_model *m, int flags, size_t n, zt_status *st);
/* describe(): the open unit holds expert tensors (zt_unit_info.expert). */
void zt_layout_mark_expert(zt_layout *L);
/* Frees the layout and blocks; calls ops->destroy(self) when own_self. */
void zt_model_free(zt_model *m, int own_self);
/* Initial values of flat elements [lo, hi) into dst[0 .. hi-lo): a pure
 * function of (seed, tensor name, element). */
void zt_model_init_range(const zt_model *m, uint64_t seed, size_t lo, size_t hi, float *dst);
const zt_tensor_info *zt_model_find_tensor(const zt_model *m, const char *name);

/* The linear layers with the weight's bf16 bits beside it (w16: from
 * zt_unit_params16, NULL: none): the backend's bf16-weight entry where it
 * has one, else the fp32-weight entry on w.  Bitwise the same values either
 * way (backend.h). */
static inline void zt_mm_fwd(const zt_backend *be, float *out, const float *inp, const float *w,
                             const uint16_t *w16, const float *bias, int N, int C, int OC) {
    if (w16 && be->matmul_fwd_w16) be->matmul_fwd_w16(out, inp, w16, bias, N, C, OC);
    else be->matmul_fwd(out, inp, w, bias, N, C, OC);
}
/* The embedding lookup on the token table's bf16 bits where given (the
 * fp32 copy then lacks the table: zt_arch.gemm_weight), else on fp32 */
static inline void zt_enc_fwd(const zt_backend *be, float *out, const int *inp, const float *wte,
                              const uint16_t *wte16, const float *wpe, int B, int T, int C) {
    if (wte16 && be->encoder_fwd_w16) be->encoder_fwd_w16(out, inp, wte16, wpe, B, T, C);
    else be->encoder_fwd(out, inp, wte, wpe, B, T, C);
}
static inline void zt_mm_bwd(const zt_backend *be, float *dinp, float *dw, float *dbias,
                             const float *dout, const float *inp, const float *w,
                             const uint16_t *w16, int N, int C, int OC) {
    if (w16 && be->matmul_bwd_w16) be->matmul_bwd_w16(dinp, dw, dbias, dout, inp, w16, N, C, OC);
    else be->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
}
/* (the GELU layers: the caller checked be->matmul_gelu_fwd / matmul_dgelu_bwd) */
static inline void zt_mm_gelu_fwd(const zt_backend *be, float *out, float *pre, const float *inp,
                                  const float *w, const uint16_t *w16, const float *bias, int N,
                                  int C, int OC) {
    if (w16 && be->matmul_gelu_fwd_w16) be->matmul_gelu_fwd_w16(out, pre, inp, w16, bias, N, C, OC);
    else be->matmul_gelu_fwd(out, pre, inp, w, bias, N, C, OC);
}
static inline void zt_mm_dgelu_bwd(const zt_backend *be, float *dpre, float *dpre_bias, float *dw,
                                   float *dbias, const float *dout, const float *inp,
                                   const float *pre, const float *w, const uint16_t *w16, int N,
                                   int C, int OC) {
    if (w16 && be->matmul_dgelu_bwd_w16)
        be->matmul_dgelu_bwd_w16(dpre, dpre_bias, dw, dbias, dout, inp, pre, w16, N, C, OC);
    else be->matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, N, C, OC);
}

/* The linear layers whose input is a saved activation kept in bf16 (x16 !=
 * NULL: the backend's *_a16 entries, the weight w16 or w; the model keeps
 * x16 only where the backend has them, zt_acts16_ok) or in fp32 (x: the
 * entries above).  Bitwise the same values either way (backend.h). */
/* The bf16-output entries (backend.h matmul_fwd_o16, gelu_fwd16, swiglu /
 * geglu _fwd16 and _bwd16, gqa_ext_fwd16 / _bwd16): 1 when the backend has
 * them all, and the models then write the bf16 GEMM outputs and MLP
 * activations directly and the attention reads the bf16 q|k|v
 * (bitwise the fp32 values rounded by to_bf16, which they compute
 * otherwise).  Checked once, when the model is created (with
 * ZT_W16_O16: the test hook ZT_TEST_NO_O16, precision.h
 * zt_out16_of); the blocks read the model's cfg (zt_w16_on). */
static inline int zt_o16_ok(const zt_backend *be) {
    return be && be->matmul_fwd_o16 && be->gelu_fwd16 && be->swiglu_fwd16 && be->geglu_fwd16 &&
           be->swiglu_bwd16 && be->geglu_bwd16 && be->gqa_ext_fwd16 && be->gqa_ext_bwd16;
}
/* The norms writing bf16 (backend.h layernorm_fwd16, rmsnorm_fwd16,
 * add_layernorm_fwd16, add_rmsnorm_fwd16): 1 when the backend has them all,
 * and the models then write the bf16 normalized activations directly
 * (bitwise the fp32 norm rounded by to_bf16, which they compute
 * otherwise).  Checked once, when the model is created (with
 * ZT_W16_N16); the blocks read the model's cfg. */
static inline int zt_n16_ok(const zt_backend *be) {
    return be && be->layernorm_fwd16 && be->rmsnorm_fwd16 && be->add_layernorm_fwd16 &&
           be->add_rmsnorm_fwd16;
}
/* RoPE writing bf16 (backend.h rope_fwd16): 1 when the backend has it, and
 * Llama then writes the bf16 q|k|v from the rotation itself (bitwise
 * rope_fwd rounded by to_bf16, which it computes otherwise).
 * Checked once, when the model is created (with ZT_W16_R16);
 * the blocks read the model's cfg. */
static inline int zt_r16_ok(const zt_backend *be) {
    return be && be->rope_fwd16;
}
/* The LM head's bf16 logits (backend.h xent16_fwd, xent16_fused,
 * matmul_bwd_head16, and matmul_fwd_o16 without tmp; classifier.h): the
 * backend has them all (the models keep the bf16 activations only then:
 * a training block's classifier chunk is bf16).  zt_l16_test_on: 0 when
 * ZT_TEST_NO_L16 is set (tests compare with the fp32 logits' path, which
 * is not bitwise: the logits are rounded to bf16, as autocast has them). */
static inline int zt_l16_ok(const zt_backend *be) {
    return be && be->matmul_fwd_o16 && be->xent16_fwd && be->xent16_fused && be->matmul_bwd_head16;
}
static inline int zt_l16_test_on(void) { return !getenv("ZT_TEST_NO_L16"); }
/* The attention's output in bf16 (backend.h gqa_ext_fwd16o / _bwd16o): 1
 * when the backend has them, and the models then have the attention write
 * its bf16 output and the backward read it (bitwise gqa_ext_fwd16 rounded
 * by to_bf16, and gqa_ext_bwd16 on its widened values, which they compute
 * otherwise).  Checked once, when the model is created (with
 * ZT_W16_AO16); the blocks read the model's cfg. */
/* Qwen3's q/k norms and RoPE writing bf16 in one entry (backend.h
 * qknorm_rope_fwd16): 1 when the backend has it, and Llama with q/k norms
 * and ZT_W16_R16 then calls it (bitwise headnorm_fwd on the q and k heads and
 * rope_fwd16, which it calls otherwise).  Checked once, when the model is
 * created (with ZT_W16_QKR16); the blocks read the model's cfg. */
static inline int zt_qkr16_ok(const zt_backend *be) {
    return be && be->qknorm_rope_fwd16;
}
static inline int zt_ao16_ok(const zt_backend *be) {
    return be && be->gqa_ext_fwd16o && be->gqa_ext_bwd16o;
}
/* The bf16 gradients (backend.h matmul_bwd_d16, matmul_dgelu_bwd_d16,
 * layernorm_bwd16, rmsnorm_bwd16, swiglu_bwd_d16, geglu_bwd_d16): 1 when
 * the backend has them all, and the models then have the kernel producing a
 * gradient that backward GEMMs read (the norm backward adding into the
 * residual gradient, SwiGLU / GeGLU's) write its bf16 copy beside the fp32
 * value, and the GEMMs read that copy (bitwise the values the GEMM entries
 * round otherwise).  Checked once, when the model is created (with ZT_W16_D16: ZT_TEST_NO_D16 unset). */
static inline int zt_d16_ok(const zt_backend *be) {
    return be && be->matmul_bwd_d16 && be->matmul_dgelu_bwd_d16 && be->layernorm_bwd16 &&
           be->rmsnorm_bwd16 && be->swiglu_bwd_d16 && be->geglu_bwd_d16;
}
/* GPT-2's fc backward through the GELU writing its gradient in bf16
 * (backend.h matmul_dgelu_bwd_o16: the fc GEMMs read it, fc's bias
 * gradient the fp32 values' column sums, no widened copy of the bf16 fc
 * output): 1 when the backend has it.  Checked once, when the model is
 * created (with ZT_W16_G16: ZT_TEST_NO_G16 unset, and D16). */
static inline int zt_g16_ok(const zt_backend *be) { return be && be->matmul_dgelu_bwd_o16; }
static inline int zt_acts16_ok(const zt_backend *be) {
    return be && be->matmul_fwd_a16 && be->matmul_bwd_a16 && be->matmul_gelu_fwd_a16 &&
           be->matmul_dgelu_bwd_a16;
}
static inline void zt_mm_fwd_x(const zt_backend *be, float *out, const float *x, const uint16_t *x16,
                               const float *w, const uint16_t *w16, const float *bias, int N, int C,
                               int OC) {
    if (x16) be->matmul_fwd_a16(out, x16, w, w16, bias, N, C, OC);
    else zt_mm_fwd(be, out, x, w, w16, bias, N, C, OC);
}
static inline void zt_mm_bwd_x(const zt_backend *be, float *dinp, float *dw, float *dbias,
                               const float *dout, const float *x, const uint16_t *x16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (x16) be->matmul_bwd_a16(dinp, dw, dbias, dout, x16, w, w16, N, C, OC);
    else zt_mm_bwd(be, dinp, dw, dbias, dout, x, w, w16, N, C, OC);
}
static inline void zt_mm_gelu_fwd_x(const zt_backend *be, float *out, float *pre, const float *x,
                                    const uint16_t *x16, const float *w, const uint16_t *w16,
                                    const float *bias, int N, int C, int OC) {
    if (x16) be->matmul_gelu_fwd_a16(out, pre, x16, w, w16, bias, N, C, OC);
    else zt_mm_gelu_fwd(be, out, pre, x, w, w16, bias, N, C, OC);
}
static inline void zt_mm_dgelu_bwd_x(const zt_backend *be, float *dpre, float *dpre_bias, float *dw,
                                     float *dbias, const float *dout, const float *x,
                                     const uint16_t *x16, const float *pre, const float *w,
                                     const uint16_t *w16, int N, int C, int OC) {
    if (x16) be->matmul_dgelu_bwd_a16(dpre, dpre_bias, dw, dbias, dout, x16, pre, w, w16, N, C, OC);
    else zt_mm_dgelu_bwd(be, dpre, dpre_bias, dw, dbias, dout, x, pre, w, w16, N, C, OC);
}

/* The backward linear layers with dout's bf16 copy where the model has it
 * (dout16 != NULL: the backend's *_d16 entries, zt_d16_ok), else the
 * entries above.  Bitwise the same values either way (backend.h). */
static inline void zt_mm_bwd_d(const zt_backend *be, float *dinp, float *dw, float *dbias,
                               const float *dout, const uint16_t *dout16, const float *x,
                               const uint16_t *x16, const float *w, const uint16_t *w16, int N,
                               int C, int OC) {
    if (dout16) be->matmul_bwd_d16(dinp, dw, dbias, dout, dout16, x, x16, w, w16, N, C, OC);
    else zt_mm_bwd_x(be, dinp, dw, dbias, dout, x, x16, w, w16, N, C, OC);
}
static inline void zt_mm_dgelu_bwd_d(const zt_backend *be, float *dpre, float *dpre_bias,
                                     float *dw, float *dbias, const float *dout,
                                     const uint16_t *dout16, const float *x, const uint16_t *x16,
                                     const float *pre, const float *w, const uint16_t *w16, int N,
                                     int C, int OC) {
    if (dout16)
        be->matmul_dgelu_bwd_d16(dpre, dpre_bias, dw, dbias, dout, dout16, x, x16, pre, w, w16, N,
                                 C, OC);
    else zt_mm_dgelu_bwd_x(be, dpre, dpre_bias, dw, dbias, dout, x, x16, pre, w, w16, N, C, OC);
}

#endif
