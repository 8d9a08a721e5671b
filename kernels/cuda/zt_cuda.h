/*
 * zt_cuda.h -- the CUDA backend, callable from C.
 *
 * Built with `configure --with-cuda`.  In builds without it these functions
 * exist too (kernels/cuda/cuda_stub.c): zt_backend_cuda() returns NULL and
 * zt_backend_cuda_why() says that the build has no CUDA backend, so callers
 * never need #ifdefs.
 *
 * One backend per process, on the device that is current when
 * zt_backend_cuda() is first called (cudaSetDevice first: see
 * zt_cuda_pick_device() in libtrain/gpu.h).  All its work runs on one
 * compute stream, in call order.
 */
#ifndef ZT_KERNELS_CUDA_H
#define ZT_KERNELS_CUDA_H

#include <stddef.h>
#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA backend table, or NULL when this build has no CUDA backend or no
 * CUDA device can be used; zt_backend_cuda_why() then says why. */
const zt_backend *zt_backend_cuda(void);
/* One line: why the last zt_backend_cuda() returned NULL ("" otherwise). */
const char *zt_backend_cuda_why(void);
/* 1 when this build has the CUDA backend, 0 otherwise. */
int zt_cuda_built(void);

/* The backend's compute stream (a cudaStream_t), NULL before a successful
 * zt_backend_cuda().  The NCCL comm backend orders its stream against it. */
void *zt_cuda_compute_stream(void);
/* The device the backend runs on, -1 before a successful zt_backend_cuda(). */
int zt_cuda_device(void);

/* Bytes of device memory the backend holds now and at most since the last
 * reset (alloc() plus its own scratch and cuBLAS workspace). */
void zt_cuda_mem(size_t *cur, size_t *peak);
void zt_cuda_mem_reset_peak(void);

/* Free and total memory of CUDA device `device` (cudaMemGetInfo; the
 * current device is kept).  0 on success, -1 without CUDA or on error.
 * For the memory planner's limit on the cuda backend. */
int zt_cuda_device_memory(int device, size_t *free_bytes, size_t *total_bytes);

/* GEMM implementation (tests, benchmarks): 1 = cuBLASLt with a bias
 * epilogue (default), 0 = cublasGemmEx + a bias kernel. */
void zt_cuda_set_gemm_impl(int use_lt);

/* The kernels' device scratch (tests): at least `bytes`, valid until the
 * next request, its size in *have (may be NULL); a grown scratch is all
 * zeros.  NULL (*have 0) on failure or without CUDA. */
void *zt_cuda_scratch_for_test(size_t bytes, size_t *have);
/* Attention in bf16 mode (tests, bench): on = 1 (the default) runs the
 * flash kernels on tensor cores at head sizes <= 128, 0 the cuBLAS path at
 * every head size (the same values).  Nothing without CUDA. */
void zt_cuda_att_flash_for_test(int on);

/* Which attention path the rule picks (one line, for the run's start-up
 * log): cuDNN's fused attention where this build has cuDNN, the matmul
 * mode is bf16, there is no soft-cap, the head size is a multiple of 8 up
 * to 256, cuDNN takes the shape and ZT_CUDA_DETERMINISTIC is not set;
 * ztrain's own kernels otherwise (docs/gpu.md). */
const char *zt_cuda_attention_path(void);
/* Tests: on = 0 keeps attention on ztrain's kernels, deterministic = 1 as
 * ZT_CUDA_DETERMINISTIC=1; and the calls cuDNN ran (forward, backward) and
 * the shapes it declined.  Nothing / zeros without cuDNN. */
void zt_cuda_att_cudnn_for_test(int on, int deterministic);
void zt_cuda_att_cudnn_calls_for_test(long *fwd, long *bwd, long *declined);
/* Tests: the cuDNN version (9.x as 9xxyy, as cudnnGetVersion() reports it)
 * and the device's compute capability major cuda_sdpa.cu's rules assume
 * (0: the real ones, the default); drops every cached cuDNN plan.  Nothing
 * without cuDNN. */
void zt_cuda_att_cudnn_version_for_test(long version, int sm);
/* The cuDNN attention plans built so far, for a GPU session's log: a line
 * with the cuDNN version at run time, then one per plan (direction, shape,
 * FINALIZED with the engine config taken, DECLINED or FAILED with why:
 * the rule or cuDNN's own message) written into buf (n bytes, truncated);
 * returns the number of plans.  0 and "" without cuDNN. */
int zt_cuda_att_cudnn_report(char *buf, size_t n);
/* The MoE experts' forward GEMMs (backend.h matmul_grouped_o16), one line:
 * one cublasGemmGroupedBatchedEx a call, or, after cuBLAS refused one (any
 * error status: the backend then runs the per-expert GEMMs for the rest of
 * the run), that and cuBLAS's status.  Returns 1 while grouped, 0 after
 * the fallback.  "" and 0 without CUDA.  Tests: zt_cuda_grouped_for_test(1)
 * tries the grouped call again (after a fallback), 0 forces the loop. */
int zt_cuda_grouped_report(char *buf, size_t n);
void zt_cuda_grouped_for_test(int on);

#ifdef __cplusplus
}
#endif
#endif /* ZT_KERNELS_CUDA_H */
