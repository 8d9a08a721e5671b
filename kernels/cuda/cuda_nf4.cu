/*
 * cuda_nf4.cu -- NF4 dequantization on the GPU (backend.h: nf4_dequant;
 * the format in kernels/nf4.h).
 *
 * One thread per code byte (two weights), grid-stride.  The arithmetic is
 * the CPU kernel's (kernels/cpu/cpu_nf4.c) with every rounding spelled out
 * (__fmul_rn / __fadd_rn: nvcc would otherwise fuse the double-quantized
 * absmax's multiply and add), so the output is bitwise the CPU's and
 * bitsandbytes'.  Elementwise: results do not depend on the launch shape.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "cuda_convert.h"
#include "cuda_internal.cuh"
#include "nf4.h"
#include "nf4_tables.h"

__constant__ float k_nf4_code[16] = {ZT_NF4_CODE_INIT};
__constant__ float k_nf4_dyn[256] = {ZT_NF4_DYN_INIT};

__device__ __forceinline__ float nf4_scale(const float *absmax, const uint8_t *qabsmax,
                                           const float *absmax2, float offset, size_t b) {
    if (!qabsmax) return absmax[b];
    return __fadd_rn(__fmul_rn(k_nf4_dyn[qabsmax[b]], absmax2[b / ZT_NF4_DQ_BLOCK]), offset);
}

__global__ void k_nf4_dequant(float *of, uint16_t *oh, const uint8_t *codes, const float *absmax,
                              const uint8_t *qabsmax, const float *absmax2, float offset,
                              size_t n) {
    const size_t nbytes = n / 2 + (n & 1);
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < nbytes;
         j += (size_t)gridDim.x * blockDim.x) {
        const size_t i = 2 * j;   /* both weights of the byte are in block i / 64 */
        const float a = nf4_scale(absmax, qabsmax, absmax2, offset, i / ZT_NF4_BLOCK);
        const unsigned byte = codes[j];
        const float v0 = __fmul_rn(k_nf4_code[byte >> 4], a);
        const float v1 = __fmul_rn(k_nf4_code[byte & 15u], a);
        const int two = i + 1 < n;
        if (oh) {
            oh[i] = zt_cvt_f32_to_bf16(v0);
            if (two) oh[i + 1] = zt_cvt_f32_to_bf16(v1);
        } else {
            of[i] = v0;
            if (two) of[i + 1] = v1;
        }
    }
}

void zt_cuda_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                         const uint8_t *qabsmax, const float *absmax2, float offset, size_t n) {
    if (!n) return;
    const size_t nbytes = n / 2 + (n & 1);
    k_nf4_dequant<<<zt_ew_blocks(nbytes), ZT_EW_THREADS, 0, zt_cu.stream>>>(
        out_bf16 ? NULL : (float *)out, out_bf16 ? (uint16_t *)out : NULL, codes, absmax,
        qabsmax, absmax2, offset, n);
    ZT_LAUNCHED("k_nf4_dequant");
}
