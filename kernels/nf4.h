/*
 * nf4.h -- NF4 (4-bit NormalFloat) weights for QLoRA's frozen base: the
 * quantization, the layout and its size, bitwise bitsandbytes' CPU path.
 * docs/nf4.md is the long version (format, exactness, how the engine calls
 * this).
 *
 * A weight is the Hugging Face [out, in] matrix read row-major as n =
 * out * in values w[i].  It is cut into blocks of 64 (the last one may be
 * shorter); block b has an fp32 absmax and every w[i] a 4-bit code c[i],
 * an index into the NF4 table (kernels/nf4_tables.h).  Codes are packed two
 * per byte, the EARLIER element in the HIGH nibble:
 *   codes[j] = c[2j] << 4 | c[2j+1]    (n odd: the last low nibble is 7,
 *                                        the code of 0.0, as bitsandbytes)
 * Dequantized: w'[i] = NF4[c[i]] * absmax[i / 64]   (one fp32 rounding).
 *
 * Double quantization (bitsandbytes' compress_statistics, --lora-base
 * nf4-dq): the absmax array itself is stored as 8-bit codes qabsmax[b] into
 * the dynamic map DYN (nf4_tables.h) in blocks of 256, with an fp32
 * absmax2 per 256 and one fp32 offset (the mean of the absmax):
 *   absmax[b] = fp32(fp32(DYN[qabsmax[b]] * absmax2[b / 256]) + offset)
 * (two fp32 roundings, never a fused multiply-add: bitsandbytes does a
 * multiply, then a separate add).
 *
 * Quantization (zt_nf4_quantize) reproduces bitsandbytes 0.50's
 * quantize_4bit(W, blocksize=64, quant_type="nf4"[, compress_statistics=
 * True]) on the CPU bit for bit: the codes, the absmax and, with double
 * quantization, qabsmax, absmax2 and offset.  The offset is torch's fp32
 * mean, whose summation order depends on torch's thread count and SIMD
 * width for large tensors: zt_nf4_torch says which torch to match
 * (docs/nf4.md).  A bf16 weight gives exactly what its fp32 widening gives
 * (bitsandbytes widens first); transformers' BitsAndBytesConfig quantizes
 * the weight in the model's dtype, so a checkpoint loaded as bf16 must be
 * rounded to bf16 (round to nearest even) before it is quantized here.
 *
 * Dequantization runs on a backend (backend.h: nf4_dequant); the host
 * version zt_nf4_dequantize here is the same arithmetic.
 *
 * Nothing here aborts: functions return a zt_nf4_status and, where err is
 * not NULL, a one-line message in err.
 */
#ifndef ZT_KERNELS_NF4_H
#define ZT_KERNELS_NF4_H

#include <stddef.h>
#include <stdint.h>

#define ZT_NF4_BLOCK 64      /* weights per absmax */
#define ZT_NF4_DQ_BLOCK 256  /* absmax per absmax2 (double quantization) */

typedef enum zt_nf4_status {
    ZT_NF4_OK = 0,
    ZT_NF4_EINVAL = -1,     /* a NULL buffer, n = 0, an unknown dtype */
    ZT_NF4_ENONFINITE = -2, /* the weight holds a NaN or an infinity */
    ZT_NF4_ENOMEM = -3      /* a scratch allocation failed */
} zt_nf4_status;

/* Element type of a weight or of dequantized output. */
enum { ZT_NF4_F32 = 0, ZT_NF4_BF16 = 1 };

/* An NF4 tensor in host memory.  The caller owns the buffers (or uses
 * zt_nf4_alloc); sizes from the helpers below. */
typedef struct zt_nf4 {
    size_t n;             /* weights (out * in) */
    int double_quant;     /* 0: absmax in fp32; 1: qabsmax + absmax2 + offset */
    uint8_t *codes;       /* [zt_nf4_code_bytes(n)] */
    float *absmax;        /* [zt_nf4_blocks(n)]   (double_quant = 0; else unused) */
    uint8_t *qabsmax;     /* [zt_nf4_blocks(n)]   (double_quant = 1) */
    float *absmax2;       /* [zt_nf4_blocks2(n)]  (double_quant = 1) */
    float offset;         /* (double_quant = 1) */
} zt_nf4;

/* Which torch's mean the double-quantization offset reproduces: torch sums
 * fp32 in double in a SIMD-width-dependent cascade, and above 32768 values
 * splits the sum over its threads.  threads: torch.get_num_threads() of
 * the run to match (<= 0: 1); simd_floats: 8 (torch's CPU capability
 * AVX2, the default when 0) or 16 (AVX512).  NULL: {1, 8}. */
typedef struct zt_nf4_torch {
    int threads;
    int simd_floats;
} zt_nf4_torch;

/* ---- sizes ---- */
size_t zt_nf4_blocks(size_t n);      /* ceil(n / 64) */
size_t zt_nf4_blocks2(size_t n);     /* ceil(zt_nf4_blocks(n) / 256) */
size_t zt_nf4_code_bytes(size_t n);  /* ceil(n / 2) */
/* Bytes of an NF4 tensor of n weights as stored (codes + absmax; with
 * double quantization codes + qabsmax + absmax2 + 4 for the offset), not
 * counting alignment padding between the arrays.  For the memory
 * estimator: a [4096, 4096] weight is 8 MiB + 1 MiB codes/absmax = 9437184
 * bytes (4.5 bits per weight), 8654852 bytes with double quantization. */
size_t zt_nf4_bytes(size_t n, int double_quant);

/* ---- host buffers ---- */
/* malloc the arrays q needs for n weights (the others NULL); q->n and
 * q->double_quant are set.  ZT_NF4_ENOMEM leaves q with NULL arrays. */
zt_nf4_status zt_nf4_alloc(zt_nf4 *q, size_t n, int double_quant);
void zt_nf4_free(zt_nf4 *q);

/* ---- quantization (host, OpenMP over blocks) ----
 * w: n values of dtype (ZT_NF4_F32: float; ZT_NF4_BF16: uint16_t bf16
 * bits).  q: n and double_quant set and its arrays allocated for them
 * (zt_nf4_alloc).  A NaN or infinity anywhere gives ZT_NF4_ENONFINITE
 * naming the first such index, and leaves q's contents unspecified.
 * torch: see zt_nf4_torch (only used with double quantization). */
zt_nf4_status zt_nf4_quantize(zt_nf4 *q, const void *w, int dtype, const zt_nf4_torch *torch,
                              char *err, size_t errlen);

/* ---- dequantization (host reference of backend nf4_dequant) ----
 * out: q->n values of out_dtype (float or bf16 bits, the fp32 value
 * rounded to nearest even). */
zt_nf4_status zt_nf4_dequantize(const zt_nf4 *q, void *out, int out_dtype, char *err,
                                size_t errlen);

/* ---- the pieces, for tests ---- */
/* The NF4 and dynamic-map tables (nf4_tables.h) as arrays. */
extern const float zt_nf4_code[16];
extern const float zt_nf4_dyn[256];
/* torch's float32 x.mean() for a contiguous 1-D x of n >= 1 values */
float zt_nf4_torch_mean(const float *x, size_t n, const zt_nf4_torch *torch);
/* bitsandbytes' CPU quantize_blockwise(x, code=DYN, blocksize): codes
 * out[n], absmax[ceil(n / blocksize)]; ZT_NF4_ENOMEM if its table cannot
 * be allocated. */
zt_nf4_status zt_nf4_quantize_dyn(uint8_t *out, float *absmax, const float *x, size_t n,
                                  size_t blocksize);

#endif /* ZT_KERNELS_NF4_H */
