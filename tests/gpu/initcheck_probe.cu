/* initcheck_probe.cu -- is compute-sanitizer initcheck's "Uninitialized
 * __global__ memory read" after a cuBLAS GEMM a real hole in the GEMM's
 * output, or writes the tool does not see?
 *
 * For each shape: C [batch, T, T] fp32 is filled with NaN by a kernel of
 * ours (a store initcheck tracks), then freed and allocated again (fresh to
 * initcheck: never written), then cublasGemmStridedBatchedEx (bf16 A and B,
 * fp32 C, beta 0: the attention score GEMM of kernels/cuda/cuda_attention.cu,
 * S^T = K Q^T) writes it, and a kernel of ours reads every element and
 * counts the non-finite ones.  Without the sanitizer the program prints,
 * per shape, the count (0: cuBLAS wrote every element) and whether the
 * buffer came back at the same address (so the NaN fill is what the GEMM
 * overwrote).  Under `compute-sanitizer --tool initcheck` an initcheck
 * report on k_count for a shape whose count is 0 is a write the tool did
 * not see, not an uninitialized value.
 *
 *   nvcc -O2 -arch=sm_90 -o initcheck_probe tests/gpu/initcheck_probe.cu -lcublas
 *   ./initcheck_probe && compute-sanitizer --tool initcheck ./initcheck_probe
 *
 * Not built by `make`: scripts/gpu-bundle.sh compiles it into the bundle
 * (bin/initcheck_probe) and `run.sh probe` runs both.  Exit 0 when every
 * count is 0.                                                               */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 2;                                                                      \
        }                                                                                  \
    } while (0)

__global__ void k_fill(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}
__global__ void k_fill_bf16(__nv_bfloat16 *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        p[i] = __float2bfloat16(((h >> 8) & 0xffff) / 65536.0f - 0.5f);
    }
}
__global__ void k_count(unsigned long long *bad, const float *p, size_t n) {
    unsigned long long b = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b += !isfinite(p[i]);
    if (b) atomicAdd(bad, b);
}

/* one shape: T keys and queries, hs head size, n heads in the batch, the
 * rows R floats apart (q, k, v of all heads side by side, as in qkv) */
static int probe(cublasHandle_t h, int T, int hs, int n, unsigned long long *bad_d, int *fails) {
    const int R = 3 * n * hs;
    const size_t nq = (size_t)T * R, nc = (size_t)n * T * T;
    __nv_bfloat16 *qkv;
    float *C;
    CK(cudaMalloc(&qkv, nq * 2));
    k_fill_bf16<<<64, 256>>>(qkv, nq, 12345u + (unsigned)T);
    CK(cudaMalloc(&C, nc * 4));
    k_fill<<<64, 256>>>(C, nc, NAN);
    CK(cudaDeviceSynchronize());
    void *was = C;
    CK(cudaFree(C));
    CK(cudaMalloc(&C, nc * 4));
    const __nv_bfloat16 *Q = qkv, *K = qkv + (size_t)n * hs;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &one, K, CUDA_R_16BF,
                                                   R, hs, Q, CUDA_R_16BF, R, hs, &zero, C, CUDA_R_32F, T,
                                                   (long long)T * T, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmStridedBatchedEx: status %d\n", (int)st);
        return 2;
    }
    CK(cudaMemset(bad_d, 0, sizeof *bad_d));
    k_count<<<64, 256>>>(bad_d, C, nc);
    unsigned long long bad = 0;
    CK(cudaMemcpy(&bad, bad_d, sizeof bad, cudaMemcpyDeviceToHost));
    printf("T=%-4d hs=%-3d heads=%d (ldc %4zu bytes): %llu of %zu outputs not written (NaN left)%s\n", T, hs, n,
           (size_t)T * 4, bad, nc, (void *)C == was ? ", buffer at the NaN-filled address" : ", other address");
    if (bad) ++*fails;
    CK(cudaFree(C));
    CK(cudaFree(qkv));
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* in order with the sanitizer's reports */
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 2;
    }
    unsigned long long *bad_d;
    CK(cudaMalloc(&bad_d, sizeof *bad_d));
    /* aligned (T, hs multiples of 16: test_cuda's training test, GPT-2's
     * head size) and unaligned (the quick gqa tests' T = 37, 33, 20) */
    const int shapes[][3] = {{64, 32, 4}, {128, 64, 1}, {37, 16, 4}, {33, 8, 2}, {20, 32, 1}};
    int fails = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (probe(h, shapes[s][0], shapes[s][1], shapes[s][2], bad_d, &fails)) return 2;
    cudaFree(bad_d);
    cublasDestroy(h);
    printf("%s\n", fails ? "FAIL: cuBLAS left outputs unwritten" : "every output written by cuBLAS");
    return fails ? 1 : 0;
}
