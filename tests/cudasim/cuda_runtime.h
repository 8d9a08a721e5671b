/*
 * cuda_runtime.h (CUDA simulator) -- the part of the CUDA runtime API and
 * of the device language that kernels/cuda/ uses, for the host compiler.
 * Only make check-cudasim sees this file (-I tests/cudasim); it is never
 * installed.  The declarations follow NVIDIA's documented API; the
 * behaviour is tests/cudasim/cudasim.cc.  Plain C sees the runtime calls
 * (libtrain/gpu.c), C++ also the device language and the launches.
 */
#ifndef ZT_CUDASIM_RUNTIME_H
#define ZT_CUDASIM_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ZT_CUDASIM 1

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorIllegalInstruction = 715,
    cudaErrorMisalignedAddress = 716,
    cudaErrorLaunchFailure = 719
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
    cudaDevAttrMemoryPoolsSupported = 115
} cudaDeviceAttr;

typedef enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 } cudaMemPoolAttr;
typedef enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 } cudaFuncAttribute;

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaHostRegisterDefault 0x00

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

typedef struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
} cudaDeviceProp;

#ifdef __cplusplus
extern "C" {
#endif
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr a, void *v);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags);
cudaError_t cudaHostUnregister(void *p);
cudaError_t cudaFuncSetAttribute(const void *fn, cudaFuncAttribute a, int v);
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
/* ------------------------------------------------------------ device language */
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
/* 16 bytes, 16-byte aligned, as CUDA's (vector loads and stores) */
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
/* the running CUDA thread's coordinates (set by the block scheduler before
 * it resumes a thread) */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
enum { warpSize = 32 };

template <class T>
cudaError_t cudaFuncSetAttribute(T *fn, cudaFuncAttribute a, int v) {
    return cudaFuncSetAttribute((const void *)fn, a, v);
}

/* barriers and warp intrinsics: they switch back to the block scheduler */
void zt_sim_syncthreads(const char *file, int line);
void zt_sim_syncwarp(const char *file, int line, unsigned mask = 0xffffffffu);
uint64_t zt_sim_shfl(const char *file, int line, int kind, unsigned mask, uint64_t bits, int arg,
                     int width);
#define __syncthreads() zt_sim_syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) zt_sim_syncwarp(__FILE__, __LINE__, ##__VA_ARGS__)

enum { ZT_SIM_SHFL_XOR = 0, ZT_SIM_SHFL_IDX = 1, ZT_SIM_SHFL_DOWN = 2, ZT_SIM_SHFL_UP = 3 };
template <class T>
inline T zt_sim_shfl_t(const char *file, int line, int kind, unsigned mask, T v, int arg,
                       int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a value > 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = zt_sim_shfl(file, line, kind, mask, b, arg, width);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
#define __shfl_xor_sync(...) zt_sim_shfl_t(__FILE__, __LINE__, ZT_SIM_SHFL_XOR, __VA_ARGS__)
#define __shfl_sync(...) zt_sim_shfl_t(__FILE__, __LINE__, ZT_SIM_SHFL_IDX, __VA_ARGS__)
#define __shfl_down_sync(...) zt_sim_shfl_t(__FILE__, __LINE__, ZT_SIM_SHFL_DOWN, __VA_ARGS__)
#define __shfl_up_sync(...) zt_sim_shfl_t(__FILE__, __LINE__, ZT_SIM_SHFL_UP, __VA_ARGS__)

/* shared memory (launch.pl rewrites the declarations to these): every
 * allocation lives in the block's shared-memory arena between guard zones;
 * name is the variable's, for the reports */
void *zt_sim_dyn_shared(const char *name);
void *zt_sim_static_shared(size_t bytes, size_t align, const char *name, const char *file, int line);
template <class T, size_t N>
inline T (&zt_sim_shared_array(const char *name, const char *file, int line))[N] {
    return *(T(*)[N])zt_sim_static_shared(sizeof(T[N]), alignof(T), name, file, line);
}

/* atomics: the threads of a launch run one at a time, so a plain
 * read-modify-write between two switch points is atomic */
template <class T> inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <class T> inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <class T> inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <class T> inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <class T> inline T atomicCAS(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }

/* IEEE fp32 operations rounded once each (the compiler may not fuse them) */
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
/* a fused multiply-add, rounded once (libm's fmaf) */
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

/* ------------------------------------------------------------ launches */

/* Checks the configuration (an error is what cudaGetLastError returns next)
 * and queues the launch on stream s; body runs the kernel in the calling
 * CUDA thread. */
void zt_sim_launch(const char *name, const void *fn, unsigned bound, dim3 grid, dim3 block,
                   size_t smem, cudaStream_t s, std::function<void()> body);
/* Queue host work on stream s (cuBLAS, cub): it runs when the host
 * synchronizes with the stream. */
void zt_sim_enqueue(cudaStream_t s, std::function<void()> op);
/* Report a failure of queued work (cuBLAS, cub): the next synchronization
 * returns cudaErrorLaunchFailure. */
void zt_sim_async_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

template <class... P>
struct zt_sim_launcher {
    const char *name;
    void (*fn)(P...);
    unsigned bound;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    /* a plain call: the arguments convert to the kernel's parameter types
     * as in a real launch, and are copied at the launch */
    void operator()(P... a) const {
        std::tuple<typename std::decay<P>::type...> args(a...);
        void (*f)(P...) = fn;
        zt_sim_launch(name, (const void *)f, bound, grid, block, smem, stream,
                      [f, args]() { std::apply(f, args); });
    }
};
template <class... P>
inline zt_sim_launcher<P...> zt_sim_make_launcher(const char *name, void (*fn)(P...), unsigned bound,
                                                  dim3 grid, dim3 block, size_t smem = 0,
                                                  cudaStream_t s = 0) {
    return zt_sim_launcher<P...>{name, fn, bound, grid, block, smem, s};
}
#define ZT_SIM_LAUNCH(name, k, bound, ...) zt_sim_make_launcher(name, k, bound, __VA_ARGS__)

#endif /* __cplusplus */
#endif /* ZT_CUDASIM_RUNTIME_H */
