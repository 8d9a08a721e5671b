/*
 * cudasim.cc -- the CUDA simulator's runtime: devices, memory, streams,
 * events and the kernel launches (tests/cudasim/README).
 *
 * Kernels: every CUDA thread of a block is a ucontext of its own.  A
 * thread runs until it exits or reaches a barrier (__syncthreads) or a warp
 * operation (__syncwarp, shuffles); then the block scheduler resumes the
 * next.  A barrier opens when every thread of the block waits at the same
 * __syncthreads; a warp operation completes when every lane of its mask
 * waits at the same one (shuffles then exchange the values).  Anything else
 * (a thread that exited or waits elsewhere) is an error naming the kernel,
 * the block and the threads.  Blocks run one after another.
 *
 * Streams: every call that queues work (launches, async copies and
 * memsets, cudaFreeAsync, cuBLAS, cub) only queues it; the work runs when
 * the host synchronizes with it (stream or event synchronize, a blocking
 * copy, cudaDeviceSynchronize), so a missing synchronization reads stale
 * memory.
 *
 * Limits enforced at the launch (cudaGetLastError returns the error, as on
 * a device): block <= 1024 threads (x, y <= 1024, z <= 64) and no more
 * than the kernel's __launch_bounds__, grid x < 2^31, y, z <= 65535,
 * dynamic shared memory > 48 KiB only up to the size set with
 * cudaFuncSetAttribute, and at most 227 KiB.  Static shared memory
 * > 48 KiB per block is reported when a block declares it.
 */
/* switches between CUDA threads use _setjmp/_longjmp across the thread
 * stacks, which the fortified longjmp refuses */
#undef _FORTIFY_SOURCE
#include "cuda_runtime.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ------------------------------------------------------------ device */

static const size_t SIM_SMEM_DEFAULT = 48 * 1024;
static const size_t SIM_SMEM_OPTIN = 227 * 1024;
/* SMs reported (ZT_CUDAsim_sms()): few, so that grid-stride kernels, whose
 * results never depend on the grid, launch fewer threads */
static int sim_sms(void) {
    const char *s = getenv("ZT_CUDAsim_sms()");
    return s && *s && atoi(s) > 0 ? atoi(s) : 4;
}

static int g_dev;
static cudaError_t g_last;       /* returned (and cleared) by cudaGetLastError */
static std::string g_async_msg;  /* the first failure of queued work since the last sync */
static bool g_async_err;

static int sim_ndev(void) {
    const char *s = getenv("ZT_CUDASIM_DEVICES");
    return s && *s ? atoi(s) : 1;
}
static size_t sim_total_mem(void) {
    const char *s = getenv("ZT_CUDASIM_MEM_MB");
    return (s && *s ? (size_t)atol(s) : (size_t)80 * 1024) << 20;
}

static cudaError_t set_last(cudaError_t e) {
    if (e != cudaSuccess && g_last == cudaSuccess) g_last = e;
    return e;
}

void zt_sim_async_fail(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudasim: %s\n", buf);
    if (!g_async_err) {
        g_async_err = true;
        g_async_msg = buf;
    }
}

/* the result of a synchronization: the first failure of the work it ran */
static cudaError_t sync_result(void) {
    if (!g_async_err) return cudaSuccess;
    g_async_err = false;
    return set_last(cudaErrorLaunchFailure);
}

extern "C" const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaError (simulator)";
    }
}

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    case cudaErrorLaunchFailure:
        return g_async_msg.empty() ? "unspecified launch failure" : g_async_msg.c_str();
    default: return "unknown error (simulator)";
    }
}

extern "C" cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) { return g_last; }

extern "C" cudaError_t cudaGetDeviceCount(int *n) {
    if (!n) return set_last(cudaErrorInvalidValue);
    *n = sim_ndev();
    return *n > 0 ? cudaSuccess : set_last(cudaErrorNoDevice);
}
extern "C" cudaError_t cudaGetDevice(int *d) {
    if (!d) return set_last(cudaErrorInvalidValue);
    *d = g_dev;
    return cudaSuccess;
}
extern "C" cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= sim_ndev()) return set_last(cudaErrorInvalidDevice);
    g_dev = d;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev) {
    if (!v) return set_last(cudaErrorInvalidValue);
    if (dev < 0 || dev >= sim_ndev()) return set_last(cudaErrorInvalidDevice);
    switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrMultiProcessorCount: *v = sim_sms(); break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)SIM_SMEM_OPTIN; break;
    case cudaDevAttrMemoryPoolsSupported: *v = 1; break;
    default: return set_last(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev) {
    if (!p) return set_last(cudaErrorInvalidValue);
    if (dev < 0 || dev >= sim_ndev()) return set_last(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudasim (a CPU simulator of an sm_90 device)");
    p->totalGlobalMem = sim_total_mem();
    p->sharedMemPerBlock = SIM_SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = SIM_SMEM_OPTIN;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->multiProcessorCount = sim_sms();
    return cudaSuccess;
}

/* ------------------------------------------------------------ streams */

struct CUstream_st {
    std::deque<std::function<void()>> q;
    unsigned flags;
};
struct CUevent_st {
    uint64_t recorded = 0, reached = 0;   /* record count, and the last one the stream ran */
    cudaStream_t s = nullptr;
};

static CUstream_st g_null_stream = {{}, cudaStreamDefault};
static std::vector<cudaStream_t> g_streams;

static cudaStream_t S(cudaStream_t s) { return s ? s : &g_null_stream; }

static bool stream_known(cudaStream_t s) {
    if (!s) return true;
    for (cudaStream_t x : g_streams)
        if (x == s) return true;
    return false;
}

/* run queued work of s, all of it or until *stop */
static void run_stream(cudaStream_t s, const bool *stop = nullptr) {
    s = S(s);
    while (!s->q.empty() && !(stop && *stop)) {
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        op();
    }
}

void zt_sim_enqueue(cudaStream_t s, std::function<void()> op) { S(s)->q.push_back(std::move(op)); }

/* the legacy default stream waits for every blocking stream, and they for it */
static void run_legacy(void) {
    run_stream(nullptr);
    for (cudaStream_t x : g_streams)
        if (!(x->flags & cudaStreamNonBlocking)) run_stream(x);
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    if (!s || (flags & ~1u)) return set_last(cudaErrorInvalidValue);
    *s = new CUstream_st{{}, flags};
    g_streams.push_back(*s);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    run_stream(s);   /* work already queued completes */
    for (size_t i = 0; i < g_streams.size(); i++)
        if (g_streams[i] == s) g_streams.erase(g_streams.begin() + (long)i);
    delete s;
    return sync_result() == cudaSuccess ? cudaSuccess : cudaErrorLaunchFailure;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!s) run_legacy();
    else run_stream(s);
    return sync_result();
}

extern "C" cudaError_t cudaDeviceSynchronize(void) {
    run_stream(nullptr);
    for (cudaStream_t x : g_streams) run_stream(x);
    return sync_result();
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    if (!e) return set_last(cudaErrorInvalidValue);
    *e = new CUevent_st;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    delete e;   /* a record still queued refers to it: see cudaEventRecord */
    return cudaSuccess;
}

static std::map<cudaEvent_t, uint64_t> g_ev_alive;   /* event -> generation, for queued records */

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    const uint64_t n = ++e->recorded;
    e->s = S(s);
    S(s)->q.push_back([e, n]() { if (e->reached < n) e->reached = n; });
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    if (e->s && e->reached < e->recorded) {
        bool stop = false;
        const uint64_t want = e->recorded;
        cudaStream_t s = e->s;
        while (!s->q.empty() && e->reached < want) {
            std::function<void()> op = std::move(s->q.front());
            s->q.pop_front();
            op();
        }
        (void)stop;
    }
    return sync_result();
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    /* work runs only when the host synchronizes: an event with work queued
     * before it is never complete here */
    return e->reached >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    if (!e || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!e->s || e->reached >= e->recorded) return cudaSuccess;
    const uint64_t want = e->recorded;
    cudaStream_t src = e->s;
    S(s)->q.push_back([e, want, src]() {
        while (!src->q.empty() && e->reached < want) {
            std::function<void()> op = std::move(src->q.front());
            src->q.pop_front();
            op();
        }
    });
    return cudaSuccess;
}

/* ------------------------------------------------------------ memory */

static std::map<uintptr_t, size_t> g_dev_mem;    /* device allocations: start -> bytes */
static std::map<uintptr_t, size_t> g_host_reg;   /* registered host ranges */
static size_t g_dev_used;

/* the allocation holding [p, p + n), or false */
static bool dev_range(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_dev_mem.upper_bound(a);
    if (it == g_dev_mem.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}
static bool host_registered(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_host_reg.upper_bound(a);
    if (it == g_host_reg.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

static cudaError_t dev_alloc(void **p, size_t bytes) {
    if (!p) return set_last(cudaErrorInvalidValue);
    *p = nullptr;
    const size_t sz = bytes ? bytes : 1;
    if (sz > sim_total_mem() - g_dev_used) return set_last(cudaErrorMemoryAllocation);
    void *q = aligned_alloc(256, (sz + 255) & ~(size_t)255);
    if (!q) return set_last(cudaErrorMemoryAllocation);
    memset(q, 0xA5, sz);   /* device memory is not zeroed */
    g_dev_mem[(uintptr_t)q] = sz;
    g_dev_used += sz;
    *p = q;
    return cudaSuccess;
}

static cudaError_t dev_free(void *p, const char *who) {
    if (!p) return cudaSuccess;
    auto it = g_dev_mem.find((uintptr_t)p);
    if (it == g_dev_mem.end()) {
        zt_sim_async_fail("%s(%p): not a device allocation (double free?)", who, p);
        return set_last(cudaErrorInvalidValue);
    }
    memset(p, 0xDB, it->second);   /* poisoned */
    g_dev_used -= it->second;
    g_dev_mem.erase(it);
    free(p);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) { return dev_alloc(p, bytes); }
extern "C" cudaError_t cudaFree(void *p) {
    cudaDeviceSynchronize();   /* cudaFree synchronizes the device */
    return dev_free(p, "cudaFree");
}
extern "C" cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    return dev_alloc(p, bytes);
}
extern "C" cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (p && !g_dev_mem.count((uintptr_t)p)) return set_last(cudaErrorInvalidValue);
    S(s)->q.push_back([p]() { dev_free(p, "cudaFreeAsync"); });
    return cudaSuccess;
}

static CUmemPoolHandle_st *const g_pool = (CUmemPoolHandle_st *)&g_dev_used;
extern "C" cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev) {
    if (!pool) return set_last(cudaErrorInvalidValue);
    if (dev < 0 || dev >= sim_ndev()) return set_last(cudaErrorInvalidDevice);
    *pool = g_pool;
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr a, void *v) {
    if (pool != g_pool || !v || a != cudaMemPoolAttrReleaseThreshold) return set_last(cudaErrorInvalidValue);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) return set_last(cudaErrorInvalidValue);
    *total_bytes = sim_total_mem();
    *free_bytes = *total_bytes - g_dev_used;
    return cudaSuccess;
}

/* the copy's direction against where its pointers live */
static cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind k, const char *who) {
    const bool dd = dev_range(dst, n), sd = dev_range(src, n);
    bool ok;
    switch (k) {
    case cudaMemcpyHostToDevice: ok = dd && !sd; break;
    case cudaMemcpyDeviceToHost: ok = sd && !dd; break;
    case cudaMemcpyDeviceToDevice: ok = dd && sd; break;
    case cudaMemcpyHostToHost: ok = !dd && !sd; break;
    case cudaMemcpyDefault: ok = true; break;
    default: ok = false;
    }
    if (!ok) {
        fprintf(stderr, "cudasim: %s(dst %p, src %p, %zu bytes, kind %d): a pointer is not where the kind says "
                "(or the range runs past its allocation)\n", who, dst, (const void *)src, n, (int)k);
        return set_last(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                                       cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    if (check_copy(dst, src, n, k, "cudaMemcpyAsync") != cudaSuccess) return cudaErrorInvalidValue;
    if (k == cudaMemcpyHostToDevice && !host_registered(src, n)) {
        /* from pageable memory the source is staged at the call */
        std::vector<unsigned char> staged((const unsigned char *)src, (const unsigned char *)src + n);
        S(s)->q.push_back([dst, staged]() { memcpy(dst, staged.data(), staged.size()); });
    } else {
        S(s)->q.push_back([dst, src, n]() { memmove(dst, src, n); });
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k) {
    if (!n) return cudaSuccess;
    if (check_copy(dst, src, n, k, "cudaMemcpy") != cudaSuccess) return cudaErrorInvalidValue;
    run_legacy();   /* on the legacy default stream: after the work before it */
    memmove(dst, src, n);
    return sync_result();
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    if (!dev_range(p, n)) {
        fprintf(stderr, "cudasim: cudaMemsetAsync(%p, %zu bytes): not device memory\n", p, n);
        return set_last(cudaErrorInvalidValue);
    }
    S(s)->q.push_back([p, v, n]() { memset(p, v, n); });
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemset(void *p, int v, size_t n) {
    cudaError_t e = cudaMemsetAsync(p, v, n, nullptr);
    if (e != cudaSuccess) return e;
    run_legacy();
    return sync_result();
}

extern "C" cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags) {
    if (!p || !n) return set_last(cudaErrorInvalidValue);
    if (host_registered(p, 1) || host_registered((char *)p + n - 1, 1))
        return set_last(cudaErrorHostMemoryAlreadyRegistered);
    g_host_reg[(uintptr_t)p] = n;
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostUnregister(void *p) {
    if (!g_host_reg.erase((uintptr_t)p)) return set_last(cudaErrorHostMemoryNotRegistered);
    return cudaSuccess;
}

/* ------------------------------------------------------------ kernels */

static std::map<const void *, int> g_func_smem;   /* cudaFuncSetAttribute */

extern "C" cudaError_t cudaFuncSetAttribute(const void *fn, cudaFuncAttribute a, int v) {
    if (!fn) return set_last(cudaErrorInvalidDeviceFunction);
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || v < 0 || (size_t)v > SIM_SMEM_OPTIN)
        return set_last(cudaErrorInvalidValue);
    g_func_smem[fn] = v;
    return cudaSuccess;
}

enum { T_RUN, T_BAR, T_WARP, T_DONE };

struct sim_thread {
    ucontext_t ctx;     /* its first entry */
    jmp_buf jb;         /* where it waits */
    int state;
    bool started;
    const char *file;   /* where it waits */
    int line;
    int kind;           /* warp op: -1 syncwarp, else the shuffle kind */
    unsigned mask;
    uint64_t val;
    int arg, width;
};

static const size_t STACK_BYTES = 256 * 1024;
static char *g_stacks;                     /* 1024 thread stacks */
static std::vector<sim_thread> g_thr;
static ucontext_t g_ctx_template;
static jmp_buf g_sched_jb;
static bool g_have_template;
static int g_cur;                          /* the running thread */
static const std::function<void()> *g_body;
static const char *g_kname;
static unsigned g_nthr;
static std::vector<unsigned char> g_dyn;   /* this block's dynamic shared memory */
static std::vector<std::pair<void *, size_t>> g_static;   /* static shared of this block */
static size_t g_static_bytes, g_dyn_bytes;
static bool g_block_err;

static void tid_of(unsigned i, unsigned *x, unsigned *y, unsigned *z) {
    *x = i % blockDim.x;
    *y = (i / blockDim.x) % blockDim.y;
    *z = i / (blockDim.x * blockDim.y);
}

static std::string where(unsigned i) {
    unsigned x, y, z;
    tid_of(i, &x, &y, &z);
    char b[160];
    snprintf(b, sizeof b, "block (%u,%u,%u) thread (%u,%u,%u)", blockIdx.x, blockIdx.y, blockIdx.z, x, y, z);
    return b;
}

static std::string at(const sim_thread &t) {
    if (t.state == T_DONE) return "has exited";
    char b[256];
    const char *f = strrchr(t.file, '/');
    snprintf(b, sizeof b, "waits at %s %s:%d", t.state == T_BAR ? "__syncthreads" :
             t.kind < 0 ? "__syncwarp" : "a shuffle", f ? f + 1 : t.file, t.line);
    return b;
}

static std::string hex(unsigned m) {
    char b[16];
    snprintf(b, sizeof b, "0x%08x", m);
    return b;
}

static void block_fail(const std::string &msg) {
    if (!g_block_err)
        zt_sim_async_fail("kernel %s: %s", g_kname, msg.c_str());
    g_block_err = true;
}

static void trampoline(void) {
    (*g_body)();
    g_thr[g_cur].state = T_DONE;
    _longjmp(g_sched_jb, 1);
}

/* back to the block scheduler until it resumes this thread */
static void wait_here(void) {
    if (_setjmp(g_thr[g_cur].jb) == 0) _longjmp(g_sched_jb, 1);
}

void zt_sim_syncthreads(const char *file, int line) {
    sim_thread &t = g_thr[g_cur];
    t.state = T_BAR;
    t.file = file;
    t.line = line;
    wait_here();
}

static uint64_t warp_op(const char *file, int line, int kind, unsigned mask, uint64_t bits, int arg, int width) {
    sim_thread &t = g_thr[g_cur];
    t.state = T_WARP;
    t.file = file;
    t.line = line;
    t.kind = kind;
    t.mask = mask;
    t.val = bits;
    t.arg = arg;
    t.width = width;
    wait_here();
    return g_thr[g_cur].val;
}

void zt_sim_syncwarp(const char *file, int line, unsigned mask) { warp_op(file, line, -1, mask, 0, 0, 32); }

uint64_t zt_sim_shfl(const char *file, int line, int kind, unsigned mask, uint64_t bits, int arg, int width) {
    return warp_op(file, line, kind, mask, bits, arg, width);
}

void *zt_sim_dyn_shared(void) { return g_dyn.empty() ? nullptr : g_dyn.data(); }

void zt_sim_static_shared(void *p, size_t bytes, const char *file, int line) {
    for (auto &e : g_static)
        if (e.first == p) return;
    memset(p, 0xFF, bytes);   /* uninitialized: NaN */
    g_static.push_back({p, bytes});
    g_static_bytes += bytes;
    if (g_static_bytes > SIM_SMEM_DEFAULT)
        block_fail(where(g_cur) + ": " + std::to_string(g_static_bytes) +
                   " bytes of static shared memory (the limit is 48 KiB)");
    else if (g_static_bytes + g_dyn_bytes > SIM_SMEM_OPTIN)
        block_fail(where(g_cur) + ": static + dynamic shared memory above 227 KiB");
}

/* Complete the warp operations whose lanes have all arrived; false when
 * none could complete.  Errors: a lane of a mask that exited or waits
 * elsewhere. */
static bool resolve_warps(void) {
    bool any = false;
    for (unsigned w0 = 0; w0 < g_nthr && !g_block_err; w0 += 32) {
        const unsigned nl = g_nthr - w0 < 32 ? g_nthr - w0 : 32;
        for (unsigned l = 0; l < nl && !g_block_err; l++) {
            sim_thread &a = g_thr[w0 + l];
            if (a.state != T_WARP) continue;
            if (!(a.mask >> l & 1u)) {
                block_fail(where(w0 + l) + ": its own lane is not in the mask " +
                           hex(a.mask) + " of " + at(a));
                return false;
            }
            bool ready = true;
            for (unsigned j = 0; j < 32 && !g_block_err; j++) {
                if (!(a.mask >> j & 1u)) continue;
                if (j >= nl) {
                    block_fail(where(w0 + l) + ": mask names lane " + std::to_string(j) +
                               ", which the block does not have (" + at(a) + ")");
                    return false;
                }
                const sim_thread &b = g_thr[w0 + j];
                if (b.state == T_RUN) { ready = false; continue; }
                if (b.state != T_WARP || b.kind != a.kind || b.line != a.line || strcmp(b.file, a.file) ||
                    b.mask != a.mask) {
                    block_fail(where(w0 + l) + " " + at(a) + " with mask " + hex(a.mask) +
                               ", but lane " + std::to_string(j) + " (" + where(w0 + j) + ") " + at(b));
                    return false;
                }
            }
            if (!ready || g_block_err) continue;
            /* every lane of the mask is here: exchange */
            uint64_t v[32];
            for (unsigned j = 0; j < 32; j++) v[j] = (a.mask >> j & 1u) ? g_thr[w0 + j].val : 0;
            for (unsigned j = 0; j < 32; j++) {
                if (!(a.mask >> j & 1u)) continue;
                sim_thread &b = g_thr[w0 + j];
                if (b.kind >= 0) {
                    const int wd = b.width;
                    if (wd <= 0 || wd > 32 || (wd & (wd - 1))) {
                        block_fail(where(w0 + j) + ": shuffle width " + std::to_string(wd) +
                                   " is not a power of 2 <= 32");
                        return false;
                    }
                    const int seg = (int)j & ~(wd - 1);
                    int src;
                    switch (b.kind) {
                    case ZT_SIM_SHFL_XOR: src = (int)j ^ b.arg; if (src >= seg + wd) src = (int)j; break;
                    case ZT_SIM_SHFL_IDX: src = seg + (b.arg & (wd - 1)); break;
                    case ZT_SIM_SHFL_DOWN: src = (int)j + b.arg; if (src >= seg + wd) src = (int)j; break;
                    default: src = (int)j - b.arg; if (src < seg) src = (int)j; break;
                    }
                    if (src < 0 || src > 31 || !(a.mask >> src & 1u)) {
                        block_fail(where(w0 + j) + ": shuffle reads lane " + std::to_string(src) +
                                   ", which is not in the mask (its value is undefined)");
                        return false;
                    }
                    b.val = v[src];
                }
                b.state = T_RUN;
            }
            any = true;
        }
    }
    return any;
}

static void run_block(void) {
    if (!g_have_template) {
        getcontext(&g_ctx_template);
        g_have_template = true;
    }
    for (unsigned i = 0; i < g_nthr; i++) {
        sim_thread &t = g_thr[i];
        t.state = T_RUN;
        t.started = false;
    }
    g_static.clear();
    g_static_bytes = 0;
    if (!g_dyn.empty()) memset(g_dyn.data(), 0xFF, g_dyn.size());   /* uninitialized: NaN */
    for (;;) {
        for (unsigned i = 0; i < g_nthr && !g_block_err; i++) {
            if (g_thr[i].state != T_RUN) continue;
            sim_thread &t = g_thr[i];
            g_cur = (int)i;
            tid_of(i, &threadIdx.x, &threadIdx.y, &threadIdx.z);
            if (_setjmp(g_sched_jb) != 0) continue;   /* the thread waits or exited */
            if (t.started) _longjmp(t.jb, 1);
            t.started = true;
            t.ctx = g_ctx_template;
            t.ctx.uc_stack.ss_sp = g_stacks + (size_t)i * STACK_BYTES;
            t.ctx.uc_stack.ss_size = STACK_BYTES;
            t.ctx.uc_link = nullptr;
            makecontext(&t.ctx, trampoline, 0);
            setcontext(&t.ctx);
        }
        if (g_block_err) return;
        if (resolve_warps()) continue;
        if (g_block_err) return;
        /* every thread exited or waits at a barrier */
        int first_bar = -1, first_done = -1;
        for (unsigned i = 0; i < g_nthr; i++) {
            if (g_thr[i].state == T_BAR && first_bar < 0) first_bar = (int)i;
            if (g_thr[i].state == T_DONE && first_done < 0) first_done = (int)i;
            if (g_thr[i].state == T_WARP) {
                block_fail(where(i) + " " + at(g_thr[i]) + " forever (a lane of its mask never arrives)");
                return;
            }
        }
        if (first_bar < 0) return;   /* all exited */
        const sim_thread &b0 = g_thr[first_bar];
        if (first_done >= 0) {
            block_fail("divergent __syncthreads: " + where(first_bar) + " " + at(b0) + " but " +
                       where(first_done) + " has exited");
            return;
        }
        for (unsigned i = 0; i < g_nthr; i++) {
            const sim_thread &t = g_thr[i];
            if (t.line != b0.line || strcmp(t.file, b0.file)) {
                block_fail("divergent __syncthreads: " + where(first_bar) + " " + at(b0) + " but " +
                           where(i) + " " + at(t));
                return;
            }
        }
        for (unsigned i = 0; i < g_nthr; i++) g_thr[i].state = T_RUN;
    }
}

static void run_kernel(const char *name, dim3 grid, dim3 block, size_t smem,
                       const std::function<void()> &body) {
    if (!g_stacks) {
        g_stacks = (char *)mmap(nullptr, STACK_BYTES * 1024, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (g_stacks == (char *)MAP_FAILED) {
            g_stacks = nullptr;
            zt_sim_async_fail("kernel %s: cannot map the thread stacks", name);
            return;
        }
        g_thr.resize(1024);
    }
    g_body = &body;
    g_kname = name;
    g_block_err = false;
    gridDim = grid;
    blockDim = block;
    g_nthr = block.x * block.y * block.z;
    g_dyn.assign(smem, 0);
    g_dyn_bytes = smem;
    for (unsigned z = 0; z < grid.z && !g_block_err; z++)
        for (unsigned y = 0; y < grid.y && !g_block_err; y++)
            for (unsigned x = 0; x < grid.x && !g_block_err; x++) {
                blockIdx.x = x;
                blockIdx.y = y;
                blockIdx.z = z;
                run_block();
            }
    g_dyn.clear();
    g_body = nullptr;
}

void zt_sim_launch(const char *name, const void *fn, unsigned bound, dim3 grid, dim3 block,
                   size_t smem, cudaStream_t s, std::function<void()> body) {
    const unsigned long long nthr = (unsigned long long)block.x * block.y * block.z;
    const char *why = nullptr;
    char buf[256];
    cudaError_t e = cudaSuccess;
    if (!stream_known(s)) {
        e = cudaErrorInvalidResourceHandle;
        why = "unknown stream";
    } else if (!block.x || !block.y || !block.z || block.x > 1024 || block.y > 1024 || block.z > 64 ||
               nthr > 1024) {
        e = cudaErrorInvalidConfiguration;
        snprintf(buf, sizeof buf, "block (%u,%u,%u): at most 1024 threads (x, y <= 1024, z <= 64)", block.x,
                 block.y, block.z);
        why = buf;
    } else if (bound && nthr > bound) {
        e = cudaErrorLaunchOutOfResources;
        snprintf(buf, sizeof buf, "%llu threads per block, above its __launch_bounds__(%u)", nthr, bound);
        why = buf;
    } else if (!grid.x || !grid.y || !grid.z || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        e = cudaErrorInvalidConfiguration;
        snprintf(buf, sizeof buf, "grid (%u,%u,%u) outside (1..2^31-1, 1..65535, 1..65535)", grid.x, grid.y,
                 grid.z);
        why = buf;
    } else if (smem > SIM_SMEM_DEFAULT) {
        auto it = g_func_smem.find(fn);
        const size_t allowed = it == g_func_smem.end() ? SIM_SMEM_DEFAULT : (size_t)it->second;
        if (smem > allowed) {
            e = cudaErrorInvalidValue;
            snprintf(buf, sizeof buf, "%zu bytes of dynamic shared memory: above 48 KiB needs "
                     "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) (set: %zu)", smem, allowed);
            why = buf;
        }
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "cudasim: launch of kernel %s refused: %s\n", name, why);
        set_last(e);
        return;
    }
    std::string kname(name);
    S(s)->q.push_back([kname, grid, block, smem, body]() {
        run_kernel(kname.c_str(), grid, block, smem, body);
    });
}

bool zt_sim_is_device(const void *p, size_t bytes) { return dev_range(p, bytes ? bytes : 1); }
