/*
 * cuda_backend.cu -- the CUDA backend table: initialization, errors,
 * device memory (with accounting), elementwise ops, AdamW, the sum of
 * squares and non-finite count (fixed-order two-pass reductions), and the
 * bf16 / fp16 conversions.
 *
 * Everything runs on one non-blocking compute stream.  Reductions never use
 * atomics: each block reduces a fixed set of elements in a fixed order and
 * the partials are added in block order, so results are bitwise
 * reproducible on a given GPU model.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw_step.h"
#include "dropout.h"
#include "cuda_convert.h"
#include "cuda_internal.cuh"

zt_cuda_state zt_cu = {0, -1, 0, 0, 0, NULL};

/* ------------------------------------------------------------ errors */

static char g_err[512], g_err_out[512];
static int g_has_err;
static char g_why[512];

static const char *basename_of(const char *f) {
    const char *s = strrchr(f, '/');
    return s ? s + 1 : f;
}

void zt_cuda_fail(const char *file, int line, const char *what, const char *msg,
                  const char *hint) {
    if (g_has_err) return;
    snprintf(g_err, sizeof g_err, "%s:%d: %s: %s%s%s%s", basename_of(file), line, what,
             msg ? msg : "failed", hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
    g_has_err = 1;
}

static const char *hint_for(cudaError_t e) {
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "out of GPU memory: lower the micro-batch, or shard more (ZeRO stage 3, offload)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
        return "this GPU's architecture is not in the build: reconfigure with --with-cuda-arch";
    case cudaErrorInsufficientDriver:
        return "the NVIDIA driver is older than the CUDA runtime ztrain was built with";
    case cudaErrorNoDevice:
        return "no CUDA device is visible: check CUDA_VISIBLE_DEVICES";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
        return "a kernel faulted; the CUDA context is unusable now. Rerun with ZT_CUDA_SYNC=1 "
               "or under compute-sanitizer to find it";
    case cudaErrorLaunchOutOfResources:
        return "a kernel needs more registers or shared memory than the GPU has (a bug: please report)";
    case cudaErrorInvalidValue:
        return "bad argument (a bug: please report)";
    default:
        return NULL;
    }
}

bool zt_cuda_ok(cudaError_t e, const char *file, int line, const char *what) {
    if (e == cudaSuccess) return true;
    zt_cuda_fail(file, line, what, cudaGetErrorString(e), hint_for(e));
    (void)cudaGetLastError();   /* clear a non-sticky error */
    return false;
}

bool zt_cuda_launch_ok(const char *file, int line, const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && zt_cu.sync_each) e = cudaStreamSynchronize(zt_cu.stream);
    if (e == cudaSuccess) return true;
    char what[160];
    snprintf(what, sizeof what, "kernel %s", kernel);
    zt_cuda_fail(file, line, what, cudaGetErrorString(e), hint_for(e));
    (void)cudaGetLastError();
    return false;
}

static const char *cuda_error(void) {
    if (!g_has_err) return NULL;
    memcpy(g_err_out, g_err, sizeof g_err_out);
    g_has_err = 0;
    return g_err_out;
}

/* ------------------------------------------------------------ accounting
 * Device pointer -> size, open addressing with linear probing.  When the
 * table itself cannot grow, allocations are simply not tracked. */

struct acct_slot { void *p; size_t n; };
static acct_slot *acct_tab;
static size_t acct_cap, acct_used, mem_cur, mem_peak;
static pthread_mutex_t acct_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t acct_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p >> 8;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static void acct_put_nolock(void *p, size_t n) {
    size_t m = acct_cap - 1, i = acct_hash(p) & m;
    while (acct_tab[i].p) i = (i + 1) & m;
    acct_tab[i].p = p;
    acct_tab[i].n = n;
    acct_used++;
}

static void acct_add(void *p, size_t n) {
    pthread_mutex_lock(&acct_mu);
    if ((acct_used + 1) * 2 > acct_cap) {
        size_t ncap = acct_cap ? acct_cap * 2 : 1024;
        acct_slot *nt = (acct_slot *)calloc(ncap, sizeof *nt);
        if (nt) {
            acct_slot *old = acct_tab;
            size_t ocap = acct_cap;
            acct_tab = nt;
            acct_cap = ncap;
            acct_used = 0;
            for (size_t i = 0; i < ocap; i++)
                if (old[i].p) acct_put_nolock(old[i].p, old[i].n);
            free(old);
        }
    }
    if ((acct_used + 1) * 2 <= acct_cap) {
        acct_put_nolock(p, n);
        mem_cur += n;
        if (mem_cur > mem_peak) mem_peak = mem_cur;
    }
    pthread_mutex_unlock(&acct_mu);
}

static void acct_del(void *p) {
    pthread_mutex_lock(&acct_mu);
    if (acct_cap) {
        const size_t m = acct_cap - 1;
        size_t i = acct_hash(p) & m;
        while (acct_tab[i].p && acct_tab[i].p != p) i = (i + 1) & m;
        if (acct_tab[i].p == p) {
            mem_cur -= acct_tab[i].n;
            acct_used--;
            /* backward-shift deletion keeps every probe chain intact */
            size_t j = i;
            for (;;) {
                j = (j + 1) & m;
                if (!acct_tab[j].p) break;
                const size_t k = acct_hash(acct_tab[j].p) & m;
                const bool move = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
                if (move) {
                    acct_tab[i] = acct_tab[j];
                    i = j;
                }
            }
            acct_tab[i].p = NULL;
            acct_tab[i].n = 0;
        }
    }
    pthread_mutex_unlock(&acct_mu);
}

extern "C" void zt_cuda_mem(size_t *cur, size_t *peak) {
    pthread_mutex_lock(&acct_mu);
    if (cur) *cur = mem_cur;
    if (peak) *peak = mem_peak;
    pthread_mutex_unlock(&acct_mu);
}

extern "C" void zt_cuda_mem_reset_peak(void) {
    pthread_mutex_lock(&acct_mu);
    mem_peak = mem_cur;
    pthread_mutex_unlock(&acct_mu);
}

/* Stream-ordered allocation (cudaMallocAsync / cudaFreeAsync on the compute
 * stream, from the device's default pool, which keeps freed memory for
 * reuse): freeing needs no host synchronization, so the engine's per-unit
 * buffers (gathered units, gradient buckets, reductions in flight) do not
 * stall the host or the NCCL transfers queued on the communication stream.
 * Set at init: 0 where the device has no memory pools, or with
 * ZT_CUDA_ALLOC=legacy (cudaMalloc, and a stream synchronize + cudaFree). */
static int g_pool;

void *zt_cuda_malloc_acct(size_t bytes, const char *who) {
    void *p = NULL;
    const size_t sz = bytes ? bytes : 256;
    cudaError_t e = g_pool ? cudaMallocAsync(&p, sz, zt_cu.stream) : cudaMalloc(&p, sz);
    if (e != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, "%s(%zu bytes) for %s", g_pool ? "cudaMallocAsync" : "cudaMalloc",
                 sz, who);
        zt_cuda_fail(__FILE__, __LINE__, what, cudaGetErrorString(e), hint_for(e));
        (void)cudaGetLastError();
        return NULL;
    }
    acct_add(p, sz);
    return p;
}

void zt_cuda_free_acct(void *p) {
    if (!p) return;
    acct_del(p);
    if (g_pool) {   /* ordered after the work already queued on the stream */
        ZT_CU(cudaFreeAsync(p, zt_cu.stream));
        return;
    }
    /* the stream may still be using p */
    ZT_CU(cudaStreamSynchronize(zt_cu.stream));
    ZT_CU(cudaFree(p));
}

/* ------------------------------------------------------------ memory */

static void *cuda_alloc(size_t bytes) {
    void *p = zt_cuda_malloc_acct(bytes, "alloc");
    if (!p) return NULL;
    if (!ZT_CU(cudaMemsetAsync(p, 0, bytes ? bytes : 256, zt_cu.stream))) {
        zt_cuda_free_acct(p);
        return NULL;
    }
    return p;
}

/* alloc_nz: cudaMallocAsync alone (the caller overwrites the whole block) */
static void *cuda_alloc_nz(size_t bytes) { return zt_cuda_malloc_acct(bytes, "alloc"); }

static void cuda_free(void *p) { zt_cuda_free_acct(p); }

static void cuda_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
        ZT_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, zt_cu.stream));
}

static void cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height) {
    if (width && height)
        ZT_CU(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                zt_cu.stream));
}

static void cuda_to_host(void *host_dst, const void *dev_src, size_t bytes) {
    if (!bytes) return;
    if (!ZT_CU(cudaMemcpyAsync(host_dst, dev_src, bytes, cudaMemcpyDeviceToHost, zt_cu.stream)) ||
        !ZT_CU(cudaStreamSynchronize(zt_cu.stream)))
        memset(host_dst, 0, bytes);   /* never hand back uninitialized memory */
}

static void cuda_to_device(void *dev_dst, const void *host_src, size_t bytes) {
    if (!bytes) return;
    /* synchronous: the host buffer may be reused (or be pinned) on return */
    if (ZT_CU(cudaMemcpyAsync(dev_dst, host_src, bytes, cudaMemcpyHostToDevice, zt_cu.stream)))
        ZT_CU(cudaStreamSynchronize(zt_cu.stream));
}

/* Asynchronous copies: cudaMemcpyAsync on the compute stream, then an event
 * (from a small free list) recorded after it; copy_wait synchronizes on the
 * event.  A failure is recorded and the copy done synchronously (NULL). */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t ev_free[64];
static int ev_nfree;

static void *copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return NULL;
    cudaEvent_t ev = NULL;
    pthread_mutex_lock(&ev_mu);
    if (ev_nfree) ev = ev_free[--ev_nfree];
    pthread_mutex_unlock(&ev_mu);
    if (!ev && !ZT_CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming))) ev = NULL;
    if (ZT_CU(cudaMemcpyAsync(dst, src, bytes, kind, zt_cu.stream)) && ev &&
        ZT_CU(cudaEventRecord(ev, zt_cu.stream)))
        return (void *)ev;
    if (ev) cudaEventDestroy(ev);
    ZT_CU(cudaStreamSynchronize(zt_cu.stream));
    return NULL;
}

static void *cuda_to_host_async(void *host_dst, const void *dev_src, size_t bytes) {
    return copy_async(host_dst, dev_src, bytes, cudaMemcpyDeviceToHost);
}
static void *cuda_to_device_async(void *dev_dst, const void *host_src, size_t bytes) {
    return copy_async(dev_dst, host_src, bytes, cudaMemcpyHostToDevice);
}
/* a query: no wait ("not ready" is not an error: never left for the next
 * launch check; a failure is copy_wait's to record) */
static int cuda_copy_done(void *h) {
    if (!h) return 1;
    const cudaError_t e = cudaEventQuery((cudaEvent_t)h);
    if (e == cudaErrorNotReady) {
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        return 0;
    }
    return 1;
}
static void cuda_copy_wait(void *h) {
    if (!h) return;
    cudaEvent_t ev = (cudaEvent_t)h;
    ZT_CU(cudaEventSynchronize(ev));
    pthread_mutex_lock(&ev_mu);
    if (ev_nfree < (int)(sizeof ev_free / sizeof ev_free[0])) {
        ev_free[ev_nfree++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&ev_mu);
    if (ev) cudaEventDestroy(ev);
}

static void cuda_zero(void *p, size_t bytes) {
    if (bytes) ZT_CU(cudaMemsetAsync(p, 0, bytes, zt_cu.stream));
}

/* pin_memory: page-lock an offloaded host block.  A failure is reported to
 * the caller (which continues with pageable memory), not through error(). */
static const char *cuda_host_register(void *p, size_t bytes) {
    static char why[256];
    if (!p || !bytes) return NULL;
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess) return NULL;
    (void)cudaGetLastError();   /* not sticky: clear it */
    snprintf(why, sizeof why, "cudaHostRegister(%zu bytes): %s", bytes, cudaGetErrorString(e));
    return why;
}

static void cuda_host_unregister(void *p) {
    if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

static void cuda_set_threads(int n) { (void)n; }

/* free / total memory of the backend's device (its device is current) */
static int cuda_device_memory(size_t *free_bytes, size_t *total_bytes, char *name, size_t n) {
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (free_bytes) *free_bytes = e == cudaSuccess ? f : 0;
    if (total_bytes) *total_bytes = e == cudaSuccess ? t : 0;
    if (name && n) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, zt_cu.device) == cudaSuccess)
            snprintf(name, n, "cuda device %d (%s)", zt_cu.device, prop.name);
        else
            snprintf(name, n, "cuda device %d", zt_cu.device);
    }
    if (e != cudaSuccess) {
        zt_cuda_fail(__FILE__, __LINE__, "cudaMemGetInfo", cudaGetErrorString(e), hint_for(e));
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

static void cuda_mem_stats(size_t *cur, size_t *peak) { zt_cuda_mem(cur, peak); }

static void cuda_synchronize(void) { ZT_CU(cudaStreamSynchronize(zt_cu.stream)); }

/* ------------------------------------------------------------ scratch */

static void *g_scratch;
static size_t g_scratch_bytes;

void *zt_cuda_scratch(size_t bytes, const char *who) {
    if (bytes <= g_scratch_bytes && g_scratch) return g_scratch;
    /* exactly the request rounded up to 1 MiB (cuda_workspace.h): the final
     * size is then a function of the largest request alone */
    const size_t want = zt_cuda_ws_scratch_size(bytes);
    zt_cuda_free_acct(g_scratch);   /* after the kernels already queued that use it */
    g_scratch = NULL;
    g_scratch_bytes = 0;
    g_scratch = zt_cuda_malloc_acct(want, who);
    /* zero-filled like alloc(): kernels write their part of the scratch
     * before reading it, but some parts are written only by cuBLAS (the
     * tensor-core attention's scores), and compute-sanitizer initcheck does
     * not see cuBLAS's writes at 16-byte-aligned shapes (tests/gpu/
     * initcheck_probe.cu, docs/gpu.md): without this every such read is an
     * "uninitialized" report.  Once per growth, so a few times a run. */
    if (g_scratch && !ZT_CU(cudaMemsetAsync(g_scratch, 0, want, zt_cu.stream))) {
        zt_cuda_free_acct(g_scratch);
        g_scratch = NULL;
    }
    if (g_scratch) g_scratch_bytes = want;
    return g_scratch;
}

extern "C" void *zt_cuda_scratch_for_test(size_t bytes, size_t *have) {
    void *p = zt_cuda_scratch(bytes, "test");
    if (have) *have = p ? g_scratch_bytes : 0;
    return p;
}

/* ------------------------------------------------------------ elementwise */

__global__ void k_add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void k_scale(float *x, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

static void cuda_add(float *out, const float *a, const float *b, size_t n) {
    if (!n) return;
    k_add<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, a, b, n);
    ZT_LAUNCHED("k_add");
}

static void cuda_scale(float *x, size_t n, float s) {
    if (!n) return;
    k_scale<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(x, n, s);
    ZT_LAUNCHED("k_scale");
}

__global__ void k_dropout(float *y, const float *x, size_t n, uint64_t key, uint64_t c0, float p,
                          float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = zt_dropout_one(x[i], key, c0 + i, p, s);
}

static void cuda_dropout(float *y, const float *x, size_t rows, size_t C, uint64_t key,
                         uint64_t row0, float p) {
    const size_t n = rows * C;
    if (!n) return;
    const float s = (float)(1.0 / (1.0 - (double)p));
    k_dropout<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(y, x, n, key,
                                                                    row0 * (uint64_t)C, p, s);
    ZT_LAUNCHED("k_dropout");
}

/* ------------------------------------------------------------ AdamW */

/* The CPU backend's formula, operation for operation. */
__global__ void k_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                        float b1, float b2, float eps, float wd, float bc1, float bc2,
                        float grad_scale) {
    const float ob1 = 1.0f - b1, ob2 = 1.0f - b2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        zt_adamw_step(p, grad, m, v, i, lr, b1, b2, ob1, ob2, eps, wd, bc1, bc2, grad_scale);
    }
}

static void cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                       float b1, float b2, float eps, float wd, float bc1, float bc2,
                       float grad_scale) {
    if (!n) return;
    k_adamw<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(p, grad, m, v, n, lr, b1, b2,
                                                                 eps, wd, bc1, bc2, grad_scale);
    ZT_LAUNCHED("k_adamw");
}

/* Multi-tensor AdamW (adamw_multi): one launch per run of up to
 * ZT_CUDA_ADAMW_SEGS contiguous segments, whose table is a kernel argument;
 * each element gets zt_adamw_step exactly as k_adamw gives it, and its
 * 16-bit copy k_to_bf16's / k_to_f16's rounding. */
struct zt_adamw_tab {
    unsigned long long start[ZT_CUDA_ADAMW_SEGS + 1];   /* start[ns]: the run's end */
    unsigned long long shift[ZT_CUDA_ADAMW_SEGS];
    float wd[ZT_CUDA_ADAMW_SEGS];
    int ns;
};
static_assert(sizeof(zt_adamw_tab) + 256 <= 4096, "kernel arguments within 4 KiB");

__global__ void k_adamw_multi(zt_adamw_tab t, float *p, const float *grad, float *m, float *v,
                              uint16_t *h, int hprec, unsigned logical, float lr, float b1,
                              float b2, float eps, float bc1, float bc2, float grad_scale,
                              const zt_step_scalars *gate, double max_norm) {
    float gs = grad_scale;
    if (gate) {   /* the step's scalars: skipped, or the clip factor of its norm */
        const double ls = gate->loss_sum, sq = gate->sumsq;
        if (gate->nonfinite || !isfinite(ls) || !isfinite(sq)) return;
        gs = (float)zt_adamw_clip(sqrt(sq), max_norm);
    }
    const float ob1 = 1.0f - b1, ob2 = 1.0f - b2;
    const size_t lo = t.start[0], hi = t.start[t.ns];
    int s = 0;
    for (size_t k = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < hi;
         k += (size_t)gridDim.x * blockDim.x) {
        if (k < t.start[s] || k >= t.start[s + 1]) {   /* the last segment starting at or before k */
            int a = 0, b = t.ns - 1;
            while (a < b) {
                const int mid = (a + b + 1) / 2;
                if (t.start[mid] <= k) a = mid;
                else b = mid - 1;
            }
            s = a;
        }
        const size_t sh = (size_t)t.shift[s];
        float *pp = p + (logical & ZT_ADAMW_P_LOGICAL ? sh : 0);
        const float *gg = grad + (logical & ZT_ADAMW_G_LOGICAL ? sh : 0);
        zt_adamw_step(pp, gg, m, v, k, lr, b1, b2, ob1, ob2, eps, t.wd[s], bc1, bc2, gs);
        if (h) {
            const float x = pp[k];
            h[k + (logical & ZT_ADAMW_H_LOGICAL ? sh : 0)] =
                hprec == ZT_ADAMW_H_BF16 ? zt_cvt_f32_to_bf16(x) : zt_cvt_f32_to_f16(x);
        }
    }
}

static void cuda_adamw_multi(float *p, const float *grad, float *m, float *v, uint16_t *p16,
                             int hprec, unsigned logical, const zt_adamw_seg *seg, int nseg,
                             const zt_adamw_hyper *hy) {
    uint16_t *h = hprec && p16 ? p16 : NULL;
    zt_adamw_tab t;
    int i = 0;
    while (i < nseg) {
        if (!seg[i].n) { i++; continue; }
        /* a run: contiguous segments, at most ZT_CUDA_ADAMW_SEGS */
        t.ns = 0;
        size_t end = seg[i].start;
        while (i < nseg && t.ns < ZT_CUDA_ADAMW_SEGS && (!seg[i].n || seg[i].start == end)) {
            if (seg[i].n) {
                t.start[t.ns] = seg[i].start;
                t.shift[t.ns] = seg[i].shift;
                t.wd[t.ns] = seg[i].wd;
                t.ns++;
                end = seg[i].start + seg[i].n;
            }
            i++;
        }
        t.start[t.ns] = end;
        const size_t n = end - (size_t)t.start[0];
        k_adamw_multi<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(
            t, p, grad, m, v, h, hprec, logical, hy->lr, hy->b1, hy->b2, hy->eps, hy->bc1, hy->bc2,
            hy->grad_scale, hy->gate, hy->max_norm);
        if (!ZT_LAUNCHED("k_adamw_multi")) return;
    }
}

/* ------------------------------------------------------------ reductions */

#define ZT_RED_THREADS ZT_CUDA_RED_THREADS
#define ZT_RED_MAXBLOCKS ZT_CUDA_RED_MAXBLOCKS

/* Blocks for a reduction over n elements: a function of n only, so the
 * partition (and the result) is the same on every run and every device. */
static unsigned red_blocks(size_t n) { return zt_cuda_ws_red_blocks(n); }

/* One block's partial of the fixed-order sum of x[i] (SQUARE: of x[i]^2)
 * in double over x[n] split into nb blocks: block b's threads take
 * elements b*T + t, stepping by nb*T, each in index order, then the warps'
 * shuffle trees and the warps in order.  The partial is valid in thread 0.
 * sh: ZT_RED_THREADS / 32 doubles of shared memory.  sum, sumsq, sum_to
 * and sumsq_to all reduce through it, so their partials are the same. */
template <bool SQUARE>
__device__ __forceinline__ double block_sum_d(const float *x, size_t n, unsigned b, unsigned nb,
                                              double *sh) {
    double s = 0.0;
    for (size_t i = b * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)nb * blockDim.x) {
        const double v = (double)x[i];
        s += SQUARE ? v * v : v;
    }
    s = zt_warp_sum_d(s);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sh[wid] = s;
    __syncthreads();
    double t = 0.0;
    if (wid == 0) {
        t = lane < ZT_RED_THREADS / 32 ? sh[lane] : 0.0;
        t = zt_warp_sum_d(t);
    }
    return t;
}

/* the non-finite values among those a block takes (block_sum_d's
 * partition); valid in thread 0; sh: ZT_RED_THREADS / 32 counts */
__device__ __forceinline__ unsigned long long block_nonfinite(const float *x, size_t n, unsigned b,
                                                              unsigned nb, unsigned long long *sh) {
    unsigned long long c = 0;
    for (size_t i = b * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)nb * blockDim.x)
        c += (__float_as_uint(x[i]) & 0x7F800000u) == 0x7F800000u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) sh[wid] = c;
    __syncthreads();
    unsigned long long t = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < ZT_RED_THREADS / 32; w++) t += sh[w];
    return t;
}

/* one partial per block over a fixed partition; the host adds the
 * partials in block order */
template <bool SQUARE>
__global__ void __launch_bounds__(ZT_RED_THREADS) k_sum_d(double *part, const float *x, size_t n) {
    __shared__ double sh[ZT_RED_THREADS / 32];
    const double t = block_sum_d<SQUARE>(x, n, blockIdx.x, gridDim.x, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = t;
}

template <bool SQUARE>
static double reduce_d(const float *x, size_t n, const char *what) {
    if (!n) return 0.0;
    const unsigned nb = red_blocks(n);
    double *part = (double *)zt_cuda_scratch(zt_cuda_ws_reduce(n), what);
    if (!part) return 0.0;
    k_sum_d<SQUARE><<<nb, ZT_RED_THREADS, 0, zt_cu.stream>>>(part, x, n);
    if (!ZT_LAUNCHED(SQUARE ? "k_sum_d<sumsq>" : "k_sum_d<sum>")) return 0.0;
    double host[ZT_RED_MAXBLOCKS];
    cuda_to_host(host, part, nb * sizeof(double));
    double s = 0.0;
    for (unsigned i = 0; i < nb; i++) s += host[i];
    return s;
}

static double cuda_sumsq(const float *x, size_t n) { return reduce_d<true>(x, n, "sumsq"); }
static double cuda_sum(const float *x, size_t n) { return reduce_d<false>(x, n, "sum"); }

__global__ void __launch_bounds__(ZT_RED_THREADS) k_nonfinite(unsigned long long *part,
                                                             const float *x, size_t n) {
    __shared__ unsigned long long sh[ZT_RED_THREADS / 32];
    const unsigned long long t = block_nonfinite(x, n, blockIdx.x, gridDim.x, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = t;
}

static size_t cuda_nonfinite(const float *x, size_t n) {
    if (!n) return 0;
    const unsigned nb = red_blocks(n);
    unsigned long long *part =
        (unsigned long long *)zt_cuda_scratch(zt_cuda_ws_reduce(n), "nonfinite");
    if (!part) return 0;
    k_nonfinite<<<nb, ZT_RED_THREADS, 0, zt_cu.stream>>>(part, x, n);
    if (!ZT_LAUNCHED("k_nonfinite")) return 0;
    unsigned long long host[ZT_RED_MAXBLOCKS];
    cuda_to_host(host, part, nb * sizeof(unsigned long long));
    size_t c = 0;
    for (unsigned i = 0; i < nb; i++) c += (size_t)host[i];
    return c;
}

/* ------------------------------------------------------------ reductions into device memory
 * sum_to, sumsq_to, nonfinite_to: the same partials as sum / sumsq /
 * nonfinite (block_sum_d, block_nonfinite over each range's own
 * red_blocks(n) blocks), up to ZT_CUDA_RED_RANGES ranges per launch (their
 * table is a kernel argument), then k_finish_ranges adds each range's
 * partials in block order and the ranges in order into *dst, where the
 * host did the same additions after a copy and a synchronization. */

struct zt_red_tab {
    const float *x[ZT_CUDA_RED_RANGES];
    unsigned long long n[ZT_CUDA_RED_RANGES];
    unsigned b0[ZT_CUDA_RED_RANGES + 1];   /* first block of each range; b0[nr]: the grid */
    int nr;
};
static_assert(sizeof(zt_red_tab) + 64 <= 4096, "kernel arguments within 4 KiB");

/* the range of block B: the last r with b0[r] <= B */
__device__ __forceinline__ int range_of(const zt_red_tab &t, unsigned B) {
    int lo = 0, hi = t.nr - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (t.b0[mid] <= B) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

template <bool SQUARE>
__global__ void __launch_bounds__(ZT_RED_THREADS) k_sum_ranges(zt_red_tab t, double *part) {
    __shared__ double sh[ZT_RED_THREADS / 32];
    const int r = range_of(t, blockIdx.x);
    const double s = block_sum_d<SQUARE>(t.x[r], (size_t)t.n[r], blockIdx.x - t.b0[r],
                                         t.b0[r + 1] - t.b0[r], sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void __launch_bounds__(ZT_RED_THREADS) k_nonfinite_ranges(zt_red_tab t,
                                                                    unsigned long long *part) {
    __shared__ unsigned long long sh[ZT_RED_THREADS / 32];
    const int r = range_of(t, blockIdx.x);
    const unsigned long long c = block_nonfinite(t.x[r], (size_t)t.n[r], blockIdx.x - t.b0[r],
                                                 t.b0[r + 1] - t.b0[r], sh);
    if (threadIdx.x == 0) part[blockIdx.x] = c;
}

/* *dst = (acc ? *dst : 0) + s_0 + s_1 + ..., s_r = range r's partials
 * added in block order (a thread per range), the ranges added in order */
template <typename T>
__global__ void __launch_bounds__(ZT_CUDA_RED_RANGES) k_finish_ranges(zt_red_tab t, const T *part,
                                                                     T *dst, int acc) {
    __shared__ T sh[ZT_CUDA_RED_RANGES];
    for (int r = threadIdx.x; r < t.nr; r += blockDim.x) {
        T s = 0;
        for (unsigned i = t.b0[r]; i < t.b0[r + 1]; i++) s += part[i];
        sh[r] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        T total = acc ? *dst : (T)0;
        for (int r = 0; r < t.nr; r++) total += sh[r];
        *dst = total;
    }
}

enum { RED_SUM, RED_SUMSQ, RED_NONFINITE };

/* one launch of the ranges in t (t.nr may be 0: the finish alone) */
template <typename T>
static bool ranges_launch(int kind, zt_red_tab &t, unsigned nb, T *dst, int acc) {
    T *part = NULL;
    t.b0[t.nr] = nb;
    if (t.nr > 0) {
        part = (T *)zt_cuda_scratch((size_t)nb * 8, "reduction");
        if (!part) return false;
        if (kind == RED_NONFINITE) {
            k_nonfinite_ranges<<<nb, ZT_RED_THREADS, 0, zt_cu.stream>>>(t, (unsigned long long *)part);
            if (!ZT_LAUNCHED("k_nonfinite_ranges")) return false;
        } else if (kind == RED_SUMSQ) {
            k_sum_ranges<true><<<nb, ZT_RED_THREADS, 0, zt_cu.stream>>>(t, (double *)part);
            if (!ZT_LAUNCHED("k_sum_ranges<sumsq>")) return false;
        } else {
            k_sum_ranges<false><<<nb, ZT_RED_THREADS, 0, zt_cu.stream>>>(t, (double *)part);
            if (!ZT_LAUNCHED("k_sum_ranges<sum>")) return false;
        }
    }
    k_finish_ranges<T><<<1, ZT_CUDA_RED_RANGES, 0, zt_cu.stream>>>(t, part, dst, acc);
    return ZT_LAUNCHED("k_finish_ranges");
}

/* the non-empty ranges in launches of ZT_CUDA_RED_RANGES; acc: the first
 * launch adds to *dst (the later ones always do) */
template <typename T>
static void reduce_ranges(int kind, T *dst, const float *const *x, const size_t *n, int nr, int acc) {
    zt_red_tab t;
    t.nr = 0;
    unsigned nb = 0;
    bool launched = false;
    for (int r = 0; r < nr; r++) {
        if (!n[r]) continue;
        if (t.nr == ZT_CUDA_RED_RANGES) {
            if (!ranges_launch<T>(kind, t, nb, dst, acc || launched)) return;
            launched = true;
            t.nr = 0;
            nb = 0;
        }
        t.x[t.nr] = x[r];
        t.n[t.nr] = n[r];
        t.b0[t.nr] = nb;
        nb += red_blocks(n[r]);
        t.nr++;
    }
    if (t.nr > 0 || !launched) ranges_launch<T>(kind, t, nb, dst, acc || launched);
}

static void cuda_sum_to(double *dst, const float *x, size_t n) {
    if (!n) return;
    reduce_ranges<double>(RED_SUM, dst, &x, &n, 1, 1);
}
static void cuda_sumsq_to(double *dst, const float *const *x, const size_t *n, int nr) {
    reduce_ranges<double>(RED_SUMSQ, dst, x, n, nr, 0);
}
static void cuda_nonfinite_to(uint64_t *dst, const float *const *x, const size_t *n, int nr) {
    static_assert(sizeof(uint64_t) == sizeof(unsigned long long), "64-bit counts");
    reduce_ranges<unsigned long long>(RED_NONFINITE, (unsigned long long *)dst, x, n, nr, 0);
}

/* ------------------------------------------------------------ conversions
 * Bit-exact round to nearest even (cuda_convert.h, also tested on the host). */

__global__ void k_to_bf16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f32_to_bf16(in[i]);
}
__global__ void k_from_bf16(float *out, const uint16_t *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_bf16_to_f32(in[i]);
}
__global__ void k_to_f16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f32_to_f16(in[i]);
}
__global__ void k_from_f16(float *out, const uint16_t *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f16_to_f32(in[i]);
}

void zt_cuda_to_bf16(uint16_t *out, const float *in, size_t n) {
    if (!n) return;
    k_to_bf16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    ZT_LAUNCHED("k_to_bf16");
}
static void cuda_from_bf16(float *out, const uint16_t *in, size_t n) {
    if (!n) return;
    k_from_bf16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    ZT_LAUNCHED("k_from_bf16");
}
/* from_bf16_runs (backend.h): up to ZT_CUDA_WIDEN_RUNS runs a launch, each
 * with zt_ew_blocks(n) blocks of its own (b0: the first block of each run,
 * b0[nr] the grid), a grid-stride loop over the run as k_from_bf16's */
struct zt_widen_tab {
    const uint16_t *in[ZT_CUDA_WIDEN_RUNS];
    float *out[ZT_CUDA_WIDEN_RUNS];
    unsigned long long n[ZT_CUDA_WIDEN_RUNS];
    unsigned b0[ZT_CUDA_WIDEN_RUNS + 1];
    int nr;
};
static_assert(sizeof(zt_widen_tab) + 64 <= 4096, "kernel arguments within 4 KiB");
__global__ void k_from_bf16_runs(zt_widen_tab t) {
    int r = 0;   /* (the last run whose first block is at or before this one) */
    while (r + 1 < t.nr && t.b0[r + 1] <= blockIdx.x) ++r;
    const size_t nb = t.b0[r + 1] - t.b0[r], n = (size_t)t.n[r];
    const uint16_t *in = t.in[r];
    float *out = t.out[r];
    for (size_t i = (blockIdx.x - t.b0[r]) * (size_t)blockDim.x + threadIdx.x; i < n; i += nb * blockDim.x)
        out[i] = zt_cvt_bf16_to_f32(in[i]);
}
static bool widen_launch(zt_widen_tab &t, unsigned nb) {
    t.b0[t.nr] = nb;
    k_from_bf16_runs<<<nb, ZT_EW_THREADS, 0, zt_cu.stream>>>(t);
    return ZT_LAUNCHED("k_from_bf16_runs");
}
static void cuda_from_bf16_runs(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr) {
    zt_widen_tab t;
    t.nr = 0;
    unsigned nb = 0;
    for (int r = 0; r < nr; ++r) {
        if (!n[r]) continue;
        if (t.nr == ZT_CUDA_WIDEN_RUNS) {
            if (!widen_launch(t, nb)) return;
            t.nr = 0;
            nb = 0;
        }
        t.in[t.nr] = in + off[r];
        t.out[t.nr] = out;
        t.n[t.nr] = n[r];
        t.b0[t.nr] = nb;
        nb += zt_ew_blocks(n[r]);
        t.nr++;
        out += n[r];
    }
    if (t.nr) widen_launch(t, nb);
}
static void cuda_to_f16(uint16_t *out, const float *in, size_t n) {
    if (!n) return;
    k_to_f16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    ZT_LAUNCHED("k_to_f16");
}
static void cuda_from_f16(float *out, const uint16_t *in, size_t n) {
    if (!n) return;
    k_from_f16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    ZT_LAUNCHED("k_from_f16");
}

/* ------------------------------------------------------------ the table */

static zt_backend g_table;

static void fill_table(zt_backend *t) {
    memset(t, 0, sizeof *t);
    t->name = "cuda";
    t->set_threads = cuda_set_threads;
    t->error = cuda_error;
    t->synchronize = cuda_synchronize;
    t->alloc = cuda_alloc;
    t->alloc_nz = cuda_alloc_nz;
    t->free = cuda_free;
    t->copy = cuda_copy;
    t->copy2d = cuda_copy2d;
    t->to_host = cuda_to_host;
    t->to_host_async = cuda_to_host_async;
    t->to_device_async = cuda_to_device_async;
    t->copy_wait = cuda_copy_wait;
    t->copy_done = cuda_copy_done;
    t->to_device = cuda_to_device;
    t->zero = cuda_zero;
    t->host_register = cuda_host_register;
    t->host_unregister = cuda_host_unregister;
    t->device_memory = cuda_device_memory;
    t->mem_stats = cuda_mem_stats;
    t->encoder_fwd = zt_cuda_encoder_fwd;
    t->encoder_fwd_w16 = zt_cuda_encoder_fwd_w16;
    t->encoder_bwd = zt_cuda_encoder_bwd;
    t->layernorm_fwd = zt_cuda_layernorm_fwd;
    t->layernorm_bwd = zt_cuda_layernorm_bwd;
    t->matmul_fwd = zt_cuda_matmul_fwd;
    t->matmul_bwd = zt_cuda_matmul_bwd;
    t->set_matmul_precision = zt_cuda_set_matmul_precision;
    t->attention_fwd = zt_cuda_attention_fwd;
    t->attention_bwd = zt_cuda_attention_bwd;
    t->rmsnorm_fwd = zt_cuda_rmsnorm_fwd;
    t->rmsnorm_bwd = zt_cuda_rmsnorm_bwd;
    t->headnorm_fwd = zt_cuda_headnorm_fwd;
    t->headnorm_bwd = zt_cuda_headnorm_bwd;
    t->rope_fwd = zt_cuda_rope_fwd;
    t->rope_bwd = zt_cuda_rope_bwd;
    t->swiglu_fwd = zt_cuda_swiglu_fwd;
    t->swiglu_bwd = zt_cuda_swiglu_bwd;
    t->gqa_fwd = zt_cuda_gqa_fwd;
    t->gqa_bwd = zt_cuda_gqa_bwd;
    t->gqa_ext_fwd = zt_cuda_gqa_ext_fwd;
    t->gqa_ext_bwd = zt_cuda_gqa_ext_bwd;
    t->geglu_fwd = zt_cuda_geglu_fwd;
    t->geglu_bwd = zt_cuda_geglu_bwd;
    t->moe_route_fwd = zt_cuda_moe_route_fwd;   /* cuda_moe.cu */
    t->moe_route_bwd = zt_cuda_moe_route_bwd;
    t->rows_gather = zt_cuda_rows_gather;
    t->rows_gather16 = zt_cuda_rows_gather16;
    t->rows_scatter = zt_cuda_rows_scatter;
    t->rows_dot = zt_cuda_rows_dot;
    t->rows_dot16 = zt_cuda_rows_dot16;
    t->rows_scatter16 = zt_cuda_rows_scatter16;
    t->moe_permute = zt_cuda_moe_permute;
    t->moe_regroup = zt_cuda_moe_regroup;
    t->sigmoid_fwd = zt_cuda_sigmoid_fwd;
    t->sigmoid_bwd = zt_cuda_sigmoid_bwd;
    t->softcap_fwd = zt_cuda_softcap_fwd;
    t->softcap_bwd = zt_cuda_softcap_bwd;
    t->gelu_fwd = zt_cuda_gelu_fwd;
    t->gelu_bwd = zt_cuda_gelu_bwd;
    t->add = cuda_add;
    t->xent_fwd = zt_cuda_xent_fwd;
    t->xent_bwd = zt_cuda_xent_bwd;
    t->xent_fused = zt_cuda_xent_fused;
    t->adamw = cuda_adamw;
    t->sumsq = cuda_sumsq;
    t->scale = cuda_scale;
    t->dropout = cuda_dropout;
    t->to_bf16 = zt_cuda_to_bf16;
    t->from_bf16 = cuda_from_bf16;
    t->from_bf16_runs = cuda_from_bf16_runs;
    t->to_f16 = cuda_to_f16;
    t->from_f16 = cuda_from_f16;
    t->nonfinite = cuda_nonfinite;
    t->nf4_dequant = zt_cuda_nf4_dequant;
    t->sum = cuda_sum;
    t->host_memory = 0;
    t->sum_to = cuda_sum_to;
    t->sumsq_to = cuda_sumsq_to;
    t->nonfinite_to = cuda_nonfinite_to;
    t->adamw_multi = cuda_adamw_multi;
    t->matmul_gelu_fwd = zt_cuda_matmul_gelu_fwd;
    t->matmul_dgelu_bwd = zt_cuda_matmul_dgelu_bwd;
    t->add_layernorm_fwd = zt_cuda_add_layernorm_fwd;
    t->add_rmsnorm_fwd = zt_cuda_add_rmsnorm_fwd;
    t->matmul_fwd_w16 = zt_cuda_matmul_fwd_w16;
    t->matmul_bwd_w16 = zt_cuda_matmul_bwd_w16;
    t->matmul_gelu_fwd_w16 = zt_cuda_matmul_gelu_fwd_w16;
    t->matmul_dgelu_bwd_w16 = zt_cuda_matmul_dgelu_bwd_w16;
    t->matmul_fwd_a16 = zt_cuda_matmul_fwd_a16;
    t->matmul_bwd_a16 = zt_cuda_matmul_bwd_a16;
    t->matmul_gelu_fwd_a16 = zt_cuda_matmul_gelu_fwd_a16;
    t->matmul_dgelu_bwd_a16 = zt_cuda_matmul_dgelu_bwd_a16;
    t->matmul_fwd_o16 = zt_cuda_matmul_fwd_o16;
    t->gelu_fwd16 = zt_cuda_gelu_fwd16;
    t->layernorm_fwd16 = zt_cuda_layernorm_fwd16;
    t->rmsnorm_fwd16 = zt_cuda_rmsnorm_fwd16;
    t->add_layernorm_fwd16 = zt_cuda_add_layernorm_fwd16;
    t->add_rmsnorm_fwd16 = zt_cuda_add_rmsnorm_fwd16;
    t->add_rmsnorm_fwd16b = zt_cuda_add_rmsnorm_fwd16b;
    t->rope_fwd16 = zt_cuda_rope_fwd16;
    t->qknorm_rope_fwd16 = zt_cuda_qknorm_rope_fwd16;
    t->xent16_fwd = zt_cuda_xent16_fwd;
    t->xent16_fused = zt_cuda_xent16_fused;
    t->matmul_bwd_head16 = zt_cuda_matmul_bwd_head16;
    t->swiglu_fwd16 = zt_cuda_swiglu_fwd16;
    t->geglu_fwd16 = zt_cuda_geglu_fwd16;
    t->gelu_fwd16r = zt_cuda_gelu_fwd16r;
    t->swiglu_fwd16r = zt_cuda_swiglu_fwd16r;
    t->geglu_fwd16r = zt_cuda_geglu_fwd16r;
    t->swiglu_bwd16 = zt_cuda_swiglu_bwd16;
    t->geglu_bwd16 = zt_cuda_geglu_bwd16;
    t->gqa_ext_fwd16 = zt_cuda_gqa_ext_fwd16;
    t->gqa_ext_bwd16 = zt_cuda_gqa_ext_bwd16;
    t->gqa_ext_fwd16o = zt_cuda_gqa_ext_fwd16o;
    t->gqa_ext_bwd16o = zt_cuda_gqa_ext_bwd16o;
    t->matmul_bwd_d16 = zt_cuda_matmul_bwd_d16;
    t->matmul_dgelu_bwd_d16 = zt_cuda_matmul_dgelu_bwd_d16;
    t->layernorm_bwd16 = zt_cuda_layernorm_bwd16;
    t->rmsnorm_bwd16 = zt_cuda_rmsnorm_bwd16;
    t->rmsnorm_bwd16d = zt_cuda_rmsnorm_bwd16d;
    t->layernorm_bwd16d = zt_cuda_layernorm_bwd16d;
    t->add_layernorm_fwd16b = zt_cuda_add_layernorm_fwd16b;
    t->matmul_gelu_fwd_o16 = zt_cuda_matmul_gelu_fwd_o16;
    t->swiglu_bwd_d16 = zt_cuda_swiglu_bwd_d16;
    t->geglu_bwd_d16 = zt_cuda_geglu_bwd_d16;
    t->swiglu_bwd_dd16 = zt_cuda_swiglu_bwd_dd16;
    t->geglu_bwd_dd16 = zt_cuda_geglu_bwd_dd16;
    t->att_scratch = zt_cuda_att_scratch;
    t->gqa_ext_bwd16d = zt_cuda_gqa_ext_bwd16d;
    t->rope_bwd16 = zt_cuda_rope_bwd16;
    t->matmul_dgelu_bwd_o16 = zt_cuda_matmul_dgelu_bwd_o16;
    t->att_do16 = zt_cuda_att_do16;
    t->matmul_bwd_o16 = zt_cuda_matmul_bwd_o16;
    t->gqa_ext_bwd16do = zt_cuda_gqa_ext_bwd16do;
    t->matmul_dinp_acc = zt_cuda_matmul_dinp_acc;
    t->matmul_fwd_acc = zt_cuda_matmul_fwd_acc;
    t->matmul_bwd_acc = zt_cuda_matmul_bwd_acc;
    t->matmul_fwd_acc16 = zt_cuda_matmul_fwd_acc16;
    t->matmul_bwd_acc16 = zt_cuda_matmul_bwd_acc16;
    t->matmul_grouped_o16 = zt_cuda_matmul_grouped_o16;
    t->matmul_grouped_bwd_o16 = zt_cuda_matmul_grouped_bwd_o16;
    t->rows_dot16h = zt_cuda_rows_dot16h;   /* cuda_moe.cu */
    t->dw_fresh = zt_cuda_dw_fresh;
    t->rows_sum16 = zt_cuda_rows_sum16;
    t->matmul_grouped_dw16 = zt_cuda_matmul_grouped_dw16;
    t->rows_gather_o16 = zt_cuda_rows_gather_o16;
    t->set_dw_fresh = zt_cuda_set_dw_fresh;
    t->qknorm_rope_bwd16 = zt_cuda_qknorm_rope_bwd16;
}

__global__ void k_probe(int *x) {
    if (x) *x = 1;
}

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

/* 0 on success, else fills g_why */
static int cuda_init(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(g_why, sizeof g_why,
                 "backend cuda requested but no CUDA device is visible (cudaGetDeviceCount: %s%s%s%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices",
                 cvd ? "; CUDA_VISIBLE_DEVICES='" : "", cvd ? cvd : "", cvd ? "'" : "");
        (void)cudaGetLastError();
        return -1;
    }
    int dev = 0, major = 0, minor = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&zt_cu.num_sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&zt_cu.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
            cudaSuccess) {
        snprintf(g_why, sizeof g_why, "backend cuda: cannot query CUDA device %d: %s", dev,
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    if ((e = cudaStreamCreateWithFlags(&zt_cu.stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "backend cuda: cannot create a stream on device %d: %s%s%s%s",
                 dev, cudaGetErrorString(e), hint_for(e) ? " (" : "", hint_for(e) ? hint_for(e) : "",
                 hint_for(e) ? ")" : "");
        (void)cudaGetLastError();
        return -1;
    }
    /* A first launch: catches a build without this GPU's architecture. */
    k_probe<<<1, 1, 0, zt_cu.stream>>>(NULL);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(zt_cu.stream);
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "backend cuda: cannot run a kernel on device %d (sm_%d%d): %s%s%s%s",
                 dev, major, minor, cudaGetErrorString(e), hint_for(e) ? " (" : "",
                 hint_for(e) ? hint_for(e) : "", hint_for(e) ? ")" : "");
        (void)cudaGetLastError();
        cudaStreamDestroy(zt_cu.stream);
        zt_cu.stream = NULL;
        return -1;
    }
    zt_cu.device = dev;
    {   /* stream-ordered allocation from the default pool, which keeps what is freed */
        int pools = 0;
        const char *a = getenv("ZT_CUDA_ALLOC");
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        g_pool = (!a || strcmp(a, "legacy") != 0) &&
                 cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess &&
                 pools && cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
                 cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess;
        (void)cudaGetLastError();
    }
    const char *s = getenv("ZT_CUDA_SYNC");
    zt_cu.sync_each = s && *s && strcmp(s, "0") != 0;
    if (!zt_cuda_matmul_init()) {
        const char *err = cuda_error();
        snprintf(g_why, sizeof g_why, "backend cuda: cuBLAS setup failed on device %d: %s", dev,
                 err ? err : "?");
        cudaStreamDestroy(zt_cu.stream);
        zt_cu.stream = NULL;
        return -1;
    }
    fill_table(&g_table);
    return 0;
}

extern "C" const zt_backend *zt_backend_cuda(void) {
    pthread_mutex_lock(&init_mu);
    if (!zt_cu.ready && cuda_init() == 0) {
        zt_cu.ready = 1;
        g_why[0] = '\0';
    }
    const zt_backend *t = zt_cu.ready ? &g_table : NULL;
    pthread_mutex_unlock(&init_mu);
    return t;
}

extern "C" const char *zt_backend_cuda_why(void) { return g_why; }
extern "C" int zt_cuda_built(void) { return 1; }
extern "C" void *zt_cuda_compute_stream(void) { return zt_cu.ready ? (void *)zt_cu.stream : NULL; }
extern "C" int zt_cuda_device(void) { return zt_cu.ready ? zt_cu.device : -1; }

extern "C" int zt_cuda_device_memory(int device, size_t *free_bytes, size_t *total_bytes) {
    size_t f = 0, t = 0;
    int cur = -1, rc = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
        cudaMemGetInfo(&f, &t) == cudaSuccess)
        rc = 0;
    if (cur >= 0) cudaSetDevice(cur);
    (void)cudaGetLastError();
    if (free_bytes) *free_bytes = rc == 0 ? f : 0;
    if (total_bytes) *total_bytes = rc == 0 ? t : 0;
    return rc;
}
