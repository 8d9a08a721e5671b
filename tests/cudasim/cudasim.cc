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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ucontext.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ------------------------------------------------------------ device */

static const size_t SIM_SMEM_DEFAULT = 48 * 1024;
static const size_t SIM_SMEM_OPTIN = 227 * 1024;
/* SMs reported (ZT_CUDASIM_SMS): few, so that grid-stride kernels, whose
 * results never depend on the grid, launch fewer threads */
static int sim_sms(void) {
    const char *s = getenv("ZT_CUDASIM_SMS");
    return s && *s && atoi(s) > 0 ? atoi(s) : 4;
}

static int g_dev;
static unsigned long long g_sim_launches;   /* kernels queued, for the device report */
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

/* device memory is open only while stream work runs (see memory below) */
struct dev_window {
    dev_window();
    ~dev_window();
};

struct CUstream_st {
    std::deque<std::function<void()>> q;
    unsigned flags;
};
struct CUevent_st {
    /* record count, and the last one the stream ran: shared with the
     * records and waits still queued, which outlive a cudaEventDestroy (as
     * on a device, where the resources go once the event completes) */
    uint64_t recorded = 0;
    uint64_t waited = 0;   /* the last record a poll counted as a host wait */
    std::shared_ptr<uint64_t> reached = std::make_shared<uint64_t>(0);
    cudaStream_t s = nullptr;
};

static CUstream_st g_null_stream = {{}, cudaStreamDefault};

/* Host waits, for the device report (host_waits): stream work runs only
 * while the host waits for it, so a host call that ran device work (any
 * queued operation but an event record or a stream's wait on an event) is
 * a point where the host waited for the device: a stream or device
 * synchronize, an event synchronize, a blocking cudaMemcpy (always: the
 * transfer is the host's wait), cudaFree; a poll of an event counts once
 * per record of it (the queries of one poll loop are one wait). */
static unsigned long long g_ops_run, g_markers_run, g_host_waits;
static unsigned long long work_run(void) { return g_ops_run - g_markers_run; }
extern "C" unsigned long long zt_sim_host_waits(void) { return g_host_waits; }
/* cudaMemcpyAsync calls from device memory into host memory that is not
 * page-locked (cudaHostRegister): synchronous on a GPU, counted for the
 * device report (pageable_d2h) */
static unsigned long long g_pageable_d2h;
extern "C" unsigned long long zt_sim_pageable_d2h(void) { return g_pageable_d2h; }
struct host_wait {
    unsigned long long w0 = work_run();
    ~host_wait() {
        if (work_run() > w0) g_host_waits++;
    }
};
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
    if (s->q.empty()) return;
    dev_window open;
    while (!s->q.empty() && !(stop && *stop)) {
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        g_ops_run++;
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
/* priorities order nothing here: streams run when the host synchronizes */
extern "C" cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority) {
    if (priority > 0 || priority < -5) return set_last(cudaErrorInvalidValue);
    return cudaStreamCreateWithFlags(s, flags);
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    {
        host_wait w;
        run_stream(s);   /* work already queued completes */
    }
    for (size_t i = 0; i < g_streams.size(); i++)
        if (g_streams[i] == s) g_streams.erase(g_streams.begin() + (long)i);
    delete s;
    return sync_result() == cudaSuccess ? cudaSuccess : cudaErrorLaunchFailure;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    host_wait w;
    if (!s) run_legacy();
    else run_stream(s);
    return sync_result();
}

extern "C" cudaError_t cudaDeviceSynchronize(void) {
    host_wait w;
    run_stream(nullptr);
    for (cudaStream_t x : g_streams) run_stream(x);
    return sync_result();
}

/* events created so far (tests: a pool's reuse) */
static unsigned long long g_events_created;
extern "C" unsigned long long zt_sim_events_created(void) { return g_events_created; }

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    if (!e) return set_last(cudaErrorInvalidValue);
    *e = new CUevent_st;
    g_events_created++;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    delete e;   /* records and waits still queued keep its shared count (CUevent_st) */
    return cudaSuccess;
}


extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    const uint64_t n = ++e->recorded;
    e->s = S(s);
    std::shared_ptr<uint64_t> r = e->reached;
    S(s)->q.push_back([r, n]() {
        g_markers_run++;
        if (*r < n) *r = n;
    });
    return cudaSuccess;
}

/* A record that its stream's queue no longer holds while the event has not
 * reached it: on a device impossible (a record completes once the work
 * before it has), so here a simulator fault (a queue changed under it, say
 * by a thread calling in without a lock), reported rather than answered
 * "not ready" forever or waited past */
[[noreturn]] static void lost_record(cudaEvent_t e, uint64_t want, const char *who) {
    fprintf(stderr, "cudasim: %s: event %p waits for its record %llu, reached %llu, and its stream %p has "
            "no work left: the record was lost (a simulator fault)\n", who, (void *)e,
            (unsigned long long)want, (unsigned long long)*e->reached, (void *)e->s);
    abort();
}

/* run e's stream until e reached record `want` (the work before it, and
 * the other streams' work that it waits for: cudaStreamWaitEvent's
 * markers); how many operations ran */
static unsigned long long run_to_record(cudaEvent_t e, uint64_t want, const char *who) {
    const unsigned long long n0 = g_ops_run;
    cudaStream_t s = e->s;
    dev_window open;
    while (!s->q.empty() && *e->reached < want) {
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        g_ops_run++;
        op();
    }
    if (*e->reached < want) lost_record(e, want, who);
    return g_ops_run - n0;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    if (e->s && *e->reached < e->recorded) {
        host_wait w;
        run_to_record(e, e->recorded, "cudaEventSynchronize");
    }
    return sync_result();
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return set_last(cudaErrorInvalidResourceHandle);
    /* never recorded, or its last record reached: complete (CUDA: a query
     * of an event never recorded returns cudaSuccess) */
    if (*e->reached >= e->recorded) return cudaSuccess;
    /* Work runs only when the host waits, and a host that polls an event
     * waits for it while a GPU progresses on its own: the first query of
     * an incomplete record runs its stream up to the record (the work
     * before it, and what that work waits for on other streams) and says
     * not ready, so the host's poll loop sees "not ready" at least once
     * and the next query finds the event complete; a failure of that work
     * is the answer instead.  (One operation a query made the device's
     * progress the host's: a loop that yields between polls then ran a
     * micro-step's kernels one scheduler slice each.) */
    const unsigned long long w0 = work_run();
    run_to_record(e, e->recorded, "cudaEventQuery");
    if (work_run() > w0 && e->waited < e->recorded) {   /* one wait per record */
        e->waited = e->recorded;
        g_host_waits++;
    }
    const cudaError_t r = sync_result();
    if (r != cudaSuccess) return r;
    return cudaErrorNotReady;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    if (!e || !stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!e->s || *e->reached >= e->recorded) return cudaSuccess;
    const uint64_t want = e->recorded;
    cudaStream_t src = e->s;
    std::shared_ptr<uint64_t> r = e->reached;
    S(s)->q.push_back([r, want, src, e]() {
        g_markers_run++;
        while (!src->q.empty() && *r < want) {
            std::function<void()> op = std::move(src->q.front());
            src->q.pop_front();
            g_ops_run++;
            op();
        }
        if (*r < want) {   /* (e may be destroyed: its address only) */
            fprintf(stderr, "cudasim: cudaStreamWaitEvent: the wait for record %llu of event %p (reached %llu) "
                    "found its stream %p without work: the record was lost (a simulator fault)\n",
                    (unsigned long long)want, (void *)e, (unsigned long long)*r, (void *)src);
            abort();
        }
    });
    return cudaSuccess;
}

/* ------------------------------------------------------------ memory */

/* Device memory: every allocation (cudaMalloc, cudaMallocAsync, so the
 * pool's) is a mapping of its own, page-aligned and rounded up to whole
 * pages, PROT_NONE except while the simulator runs device work (a
 * dev_window: run_stream, an event synchronize, a blocking copy), so a host
 * dereference of a device pointer faults as on a GPU; the SIGSEGV handler
 * reports it (dev_segv) and aborts.  A freed allocation's pages are given
 * back and its range stays reserved, PROT_NONE, never reused: any later
 * access, by the host or by a kernel, faults and is reported as freed
 * (stricter than poisoning it).  Host memory
 * (registered or not) is the process's own and stays readable. */
static std::map<uintptr_t, size_t> g_dev_mem;    /* device allocations: start -> bytes */
static std::map<uintptr_t, size_t> g_dev_freed;  /* freed ones, still reserved: start -> bytes */
static std::map<uintptr_t, size_t> g_host_reg;   /* registered host ranges */
static size_t g_dev_used;
static int g_dev_depth;                          /* dev_window nesting: > 0 while device work runs */
static unsigned long long g_dev_nalloc, g_dev_nwin, g_dev_nprot;   /* printed at exit */
static size_t g_dev_maxlive;

static size_t dev_pages(size_t bytes) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + pg - 1) / pg * pg;
}
static void dev_protect(int prot) {
    g_dev_nprot += g_dev_mem.size();
    for (auto &a : g_dev_mem)
        if (mprotect((void *)a.first, dev_pages(a.second), prot)) {
            perror("cudasim: mprotect of device memory");
            abort();
        }
}
dev_window::dev_window() {
    if (g_dev_depth++ == 0) {
        g_dev_nwin++;
        dev_protect(PROT_READ | PROT_WRITE);
    }
}
static void dev_handler_install(void);
dev_window::~dev_window() {
    if (--g_dev_depth == 0) {
        dev_protect(PROT_NONE);
        if (!g_dev_mem.empty()) dev_handler_install();
    }
}

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

static void dev_on_segv(int sig, siginfo_t *si, void *ctx);
#if defined(__x86_64__) && defined(__linux__)
static void on_segv(int sig, siginfo_t *si, void *ctx);
#endif
static struct sigaction g_prev_segv;   /* the handler before ours: faults not in device memory */

/* SIGSEGV reports device-memory faults: ours (or the race check's, which
 * passes them on), installed at the first allocation and again whenever
 * device work ends, in case a library (MPI) installed its own since; that
 * one keeps the faults that are not in device memory */
static void dev_handler_install(void) {
    struct sigaction cur;
    if (sigaction(SIGSEGV, nullptr, &cur)) return;
    if (cur.sa_flags & SA_SIGINFO) {
        if (cur.sa_sigaction == dev_on_segv) return;
#if defined(__x86_64__) && defined(__linux__)
        if (cur.sa_sigaction == on_segv) return;
#endif
    }
    g_prev_segv = cur;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = dev_on_segv;
    sigaction(SIGSEGV, &sa, nullptr);
}
static void dev_summary(void) {
    fprintf(stderr, "cudasim: device memory: %llu allocations (at most %zu live), %llu device-work windows, "
            "%llu mprotect calls\n", g_dev_nalloc, g_dev_maxlive, g_dev_nwin, g_dev_nprot);
}
static void sim_mem_note(long long delta, bool resident);   /* the device report (end of file) */

static cudaError_t dev_alloc(void **p, size_t bytes) {
    if (!p) return set_last(cudaErrorInvalidValue);
    *p = nullptr;
    const size_t sz = bytes ? bytes : 1;
    if (sz > sim_total_mem() - g_dev_used) return set_last(cudaErrorMemoryAllocation);
    void *q = mmap(nullptr, dev_pages(sz), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (q == MAP_FAILED) return set_last(cudaErrorMemoryAllocation);
    memset(q, 0xA5, sz);   /* device memory is not zeroed */
    if (!g_dev_depth) mprotect(q, dev_pages(sz), PROT_NONE);
    g_dev_mem[(uintptr_t)q] = sz;
    g_dev_freed.erase((uintptr_t)q);
    g_dev_used += sz;
    sim_mem_note((long long)sz, true);
    *p = q;
    if (!g_dev_nalloc++) atexit(dev_summary);
    if (g_dev_mem.size() > g_dev_maxlive) g_dev_maxlive = g_dev_mem.size();
    dev_handler_install();
    return cudaSuccess;
}

static cudaError_t dev_free(void *p, const char *who) {
    if (!p) return cudaSuccess;
    auto it = g_dev_mem.find((uintptr_t)p);
    if (it == g_dev_mem.end()) {
        zt_sim_async_fail("%s(%p): %s", who, p, g_dev_freed.count((uintptr_t)p) ? "already freed (double free)" :
                          "not a device allocation");
        return set_last(cudaErrorInvalidValue);
    }
    const size_t len = dev_pages(it->second);
    /* pages given back, the range kept: every later access faults */
    if (mmap(p, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
        perror("cudasim: unmapping freed device memory");
        abort();
    }
    g_dev_used -= it->second;
    g_dev_freed[(uintptr_t)p] = it->second;
    sim_mem_note(-(long long)it->second, true);
    g_dev_mem.erase(it);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) { return dev_alloc(p, bytes); }
extern "C" cudaError_t cudaFree(void *p) {
    cudaDeviceSynchronize();   /* cudaFree synchronizes the device */
    auto it = g_dev_mem.find((uintptr_t)p);
    if (it != g_dev_mem.end()) sim_mem_note(-(long long)it->second, false);
    return dev_free(p, "cudaFree");
}
extern "C" cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    return dev_alloc(p, bytes);
}
extern "C" cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (p && !g_dev_mem.count((uintptr_t)p)) {
        fprintf(stderr, "cudasim: cudaFreeAsync(%p): %s\n", p,
                g_dev_freed.count((uintptr_t)p) ? "already freed (double free)" : "not a device allocation");
        return set_last(cudaErrorInvalidValue);
    }
    if (p) sim_mem_note(-(long long)g_dev_mem[(uintptr_t)p], false);
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
    if (dev_range(src, n) && !dev_range(dst, n) && !host_registered(dst, n)) {
        /* device to pageable host memory: "the function will return only
         * once the copy has completed" (CUDA's API synchronization
         * behavior), so the host waits here for the stream's earlier work
         * and the copy, unbounded (pageable_d2h in the device report) */
        g_pageable_d2h++;
        host_wait w;
        run_stream(s);
        return sync_result();
    }
    return cudaSuccess;
}

/* device to device only (the subset the backend uses): every row inside
 * the allocations, width <= both pitches */
extern "C" cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind k, cudaStream_t s) {
    if (!stream_known(s)) return set_last(cudaErrorInvalidResourceHandle);
    if (!width || !height) return cudaSuccess;
    const size_t dn = (height - 1) * dpitch + width, sn = (height - 1) * spitch + width;
    if (width > dpitch || width > spitch || k != cudaMemcpyDeviceToDevice || !dev_range(dst, dn) ||
        !dev_range(src, sn)) {
        fprintf(stderr, "cudasim: cudaMemcpy2DAsync(dst %p pitch %zu, src %p pitch %zu, %zu x %zu bytes, kind "
                "%d): not device to device within the allocations (or width > a pitch)\n", dst, dpitch,
                src, spitch, width, height, (int)k);
        return set_last(cudaErrorInvalidValue);
    }
    S(s)->q.push_back([dst, dpitch, src, spitch, width, height]() {
        for (size_t r = 0; r < height; r++)
            memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    });
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k) {
    if (!n) return cudaSuccess;
    if (check_copy(dst, src, n, k, "cudaMemcpy") != cudaSuccess) return cudaErrorInvalidValue;
    g_host_waits++;   /* a blocking transfer */
    run_legacy();   /* on the legacy default stream: after the work before it */
    {
        dev_window open;
        memmove(dst, src, n);
    }
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
    host_wait w;
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
static size_t g_static_bytes, g_dyn_bytes;
static bool g_block_err;

/* Shared memory: one arena per simulator, laid out again for every block.
 * Offset 0 is a guard zone, then the dynamic allocation, then each static
 * __shared__ array in the order the block's threads first reach its
 * declaration; every allocation is followed by a guard zone of at least
 * SH_GUARD bytes.  Guards hold SH_CANARY bytes, allocations start as 0xFF
 * (NaN).  After every thread switch (a barrier, a warp operation, a thread
 * exit) the guards are checked: a changed byte is a write out of bounds by
 * the thread that just ran. */
static const size_t SH_GUARD = 256;
static const unsigned char SH_CANARY = 0xCB;
static const size_t SH_ARENA = 1 << 20;
static unsigned char *g_arena;
static size_t g_sh_top;   /* end of the last allocation's guard */
struct sim_alloc {
    const char *name, *file;
    int line;
    size_t off, bytes;
};
static std::vector<sim_alloc> g_allocs;   /* [0]: the dynamic allocation */
static unsigned char g_canary_ref[SH_GUARD];

/* Race check (ZT_CUDASIM_RACECHECK=1, x86-64 Linux): from the first time a
 * thread of the block obtains a shared-memory pointer to the block's end,
 * the arena's pages are PROT_NONE (the guards are then not checked at the
 * switch points: every access is bounds-checked instead).  Every
 * access faults; the SIGSEGV handler records it (the fault address and the
 * page-fault error code's write bit), opens the arena and sets the trap
 * flag, and the SIGTRAP after that one instruction closes the arena again.
 * Shadow state per 4-byte word: the last writer and the last two readers,
 * each with the block barrier epoch and the warp-sync clock of the access.
 * Two accesses of different threads, one a write, conflict unless a
 * __syncthreads opened between them, or (same warp) a __syncwarp whose mask
 * held both. */
struct sh_acc {
    uint32_t ep, ws;   /* barrier epoch, warp-sync clock at the access */
    int32_t tid;       /* -1: none */
};
struct sh_word {
    sh_acc w, r1, r2;
};
static bool g_race;                /* ZT_CUDASIM_RACECHECK, for this block */
static bool g_race_launch;         /* ZT_CUDASIM_RACECHECK, for this launch */
static unsigned long long g_race_blocks;   /* ZT_CUDASIM_RACECHECK_BLOCKS: 0 = all */
/* ZT_CUDASIM_RACECHECK_ACCESSES: accesses checked per kernel (by launch
 * name and dynamic shared size) in the whole run, 0 = all; the running
 * kernel's count */
static unsigned long long g_race_max, *g_race_n;
static std::map<std::string, unsigned long long> g_race_used;
static sh_word *g_shadow;          /* one per 4 bytes of the arena */
static uint32_t g_bar_ep;          /* +1 at each block start and each opened barrier */
static uint32_t g_wsync;           /* +1 at each completed __syncwarp */
static uint32_t (*g_pair)[32];     /* [thread][lane]: g_wsync of their last common __syncwarp */
static bool g_closed, g_stepping;
static std::string sh_describe(size_t p);

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

/* the arena's laid-out pages (the rest of it is never accessed legally:
 * a stray access there is a plain SIGSEGV) */
static size_t g_closed_len;
static const size_t SH_PAGE = 4096;
static void sh_close(void) {
    if (g_race && !g_closed) {
        g_closed_len = (g_sh_top + SH_PAGE - 1) / SH_PAGE * SH_PAGE;
        mprotect(g_arena, g_closed_len, PROT_NONE);
        g_closed = true;
    }
}
static void sh_open(void) {
    if (g_closed) {
        mprotect(g_arena, g_closed_len, PROT_READ | PROT_WRITE);
        g_closed = false;
    }
}
/* the pages one instruction opened for its single step: the page of each
 * access and the next (an access may straddle them); two for a
 * shared-to-shared string move */
static unsigned char *g_step_page[2];
static size_t g_step_len[2];
static int g_nstep;

void *zt_sim_dyn_shared(const char *name) {
    g_allocs[0].name = name;
    sh_close();
    return g_arena + g_allocs[0].off;
}

void *zt_sim_static_shared(size_t bytes, size_t align, const char *name, const char *file, int line) {
    for (auto &e : g_allocs)
        if (e.line == line && e.file && !strcmp(e.file, file)) {
            sh_close();
            return g_arena + e.off;
        }
    sh_open();
    g_static_bytes += bytes;
    if (align < 16) align = 16;
    const size_t off = (g_sh_top + align - 1) / align * align;
    if (g_static_bytes > SIM_SMEM_DEFAULT || off + bytes + SH_GUARD > SH_ARENA) {
        block_fail(where(g_cur) + ": " + std::to_string(g_static_bytes) +
                   " bytes of static shared memory (the limit is 48 KiB)");
        _longjmp(g_sched_jb, 1);   /* the block is over */
    }
    if (g_static_bytes + g_dyn_bytes > SIM_SMEM_OPTIN) {
        block_fail(where(g_cur) + ": static + dynamic shared memory above 227 KiB");
        _longjmp(g_sched_jb, 1);
    }
    memset(g_arena + g_sh_top, SH_CANARY, off - g_sh_top);
    memset(g_arena + off, 0xFF, bytes);   /* uninitialized: NaN */
    memset(g_arena + off + bytes, SH_CANARY, SH_GUARD);
    g_sh_top = off + bytes + SH_GUARD;
    g_allocs.push_back({name, file, line, off, bytes});
    sh_close();
    return g_arena + off;
}

static bool sh_ordered(const sh_acc &a, int b) {
    if (a.tid < 0 || a.tid == b || a.ep != g_bar_ep) return true;
    return a.tid / 32 == b / 32 && g_pair[b][a.tid % 32] > a.ws;
}

static void sh_race(const char *what, int b, size_t off, const sh_acc &a) {
    block_fail("shared memory race (" + std::string(what) + "): " + where((unsigned)b) +
               " and " + where((unsigned)a.tid) + " access " + sh_describe(off) +
               " with no __syncthreads (or __syncwarp of both) between");
}

/* one access of the running thread at arena offset off */
static void sh_access(size_t off, bool write) {
    if (g_block_err) return;
    ++*g_race_n;
    if (g_race_max && *g_race_n >= g_race_max) g_race = false;   /* the kernel's budget is spent */
    const int b = g_cur;
    bool inside = false;
    for (const sim_alloc &a : g_allocs)
        if (off >= a.off && off < a.off + a.bytes) inside = true;
    if (!inside) {
        block_fail("shared memory out of bounds: " + where((unsigned)b) + (write ? " writes " : " reads ") +
                   sh_describe(off));
        return;
    }
    sh_word &w = g_shadow[off / 4];
    const sh_acc now = {g_bar_ep, g_wsync, b};
    if (!sh_ordered(w.w, b)) {
        sh_race(write ? "write after write" : "read after write", b, off, w.w);
        return;
    }
    if (write) {
        if (!sh_ordered(w.r1, b)) { sh_race("write after read", b, off, w.r1); return; }
        if (!sh_ordered(w.r2, b)) { sh_race("write after read", b, off, w.r2); return; }
        w.w = now;
    } else if (w.r1.tid == b || w.r1.tid < 0 || w.r1.ep != g_bar_ep) {
        w.r1 = now;
    } else {
        w.r2 = now;
    }
}

/* A fault at address a: in a device allocation (live or freed) it is
 * reported, with the kernel and thread when a kernel runs, and the process
 * aborts (as a GPU's host process dies of its segfault); anything else
 * returns (the caller restores the handler before it, or SIG_DFL: the fault
 * repeats there). */
static void dev_segv(const void *a) {
    const uintptr_t x = (uintptr_t)a;
    bool freed = false;
    auto it = g_dev_mem.upper_bound(x);
    if (it == g_dev_mem.begin() || (--it, x >= it->first + dev_pages(it->second))) {
        freed = true;
        it = g_dev_freed.upper_bound(x);
        if (it == g_dev_freed.begin() || (--it, x >= it->first + dev_pages(it->second))) return;
    }
    std::string who = "host access to";
    if (g_dev_depth > 0 && g_body) who = "kernel " + std::string(g_kname) + ": " + where((unsigned)g_cur) + ": access to";
    else if (g_dev_depth > 0) who = "simulated device work (a copy, memset, cuBLAS or cub): access to";
    const size_t off = (size_t)(x - it->first);
    fprintf(stderr, "cudasim: %s %sdevice memory at %p (allocation of %zu bytes, offset %zu%s)\n", who.c_str(),
            freed ? "freed " : "", a, it->second, off, off >= it->second ? ", past its end" : "");
    signal(SIGABRT, SIG_DFL);
    abort();
}

static void dev_on_segv(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    dev_segv(si->si_addr);
    sigaction(sig, &g_prev_segv, nullptr);   /* not device memory: the fault repeats, for the previous handler */
}

#if defined(__x86_64__) && defined(__linux__)
static void on_segv(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = (ucontext_t *)ctx;
    unsigned char *a = (unsigned char *)si->si_addr;
    if (!g_closed || g_nstep == 2 || a < g_arena || a >= g_arena + g_closed_len) {
        dev_segv(a);            /* device memory: reported, abort */
        signal(sig, SIG_DFL);   /* not ours: the fault repeats and kills */
        return;
    }
    const size_t pg = (size_t)(a - g_arena) / SH_PAGE * SH_PAGE;
    g_step_page[g_nstep] = g_arena + pg;
    g_step_len[g_nstep] = g_closed_len - pg < 2 * SH_PAGE ? g_closed_len - pg : 2 * SH_PAGE;
    mprotect(g_step_page[g_nstep], g_step_len[g_nstep], PROT_READ | PROT_WRITE);
    g_nstep++;
    sh_access((size_t)(a - g_arena), (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0);
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100;   /* trap after this instruction */
    g_stepping = true;
}
static void on_trap(int sig, siginfo_t *si, void *ctx) {
    (void)si;
    ucontext_t *uc = (ucontext_t *)ctx;
    if (!g_stepping) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stepping = false;
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
    for (int k = 0; k < g_nstep; k++)
        if (g_race) mprotect(g_step_page[k], g_step_len[k], PROT_NONE);
    g_nstep = 0;
    if (!g_race) sh_open();   /* the budget is spent: the rest of the launch is not checked */
}
#endif

/* how many accesses the race check saw (printed at exit) */
static void race_summary(void) {
    unsigned long long n = 0;
    for (auto &e : g_race_used) n += e.second;
    size_t k = 0;
    for (auto &e : g_race_used) k += e.second > 0;
    fprintf(stderr, "cudasim: race check: %llu shared-memory accesses checked in %zu kernels (by name and "
            "dynamic shared size)\n", n, k);
}

/* read at every launch (the selftest switches it) */
static void race_init(void) {
    const char *e = getenv("ZT_CUDASIM_RACECHECK"), *nb = getenv("ZT_CUDASIM_RACECHECK_BLOCKS");
    g_race_launch = e && *e && atoi(e);
    g_race_blocks = nb && *nb ? strtoull(nb, nullptr, 0) : 0;
    const char *mx = getenv("ZT_CUDASIM_RACECHECK_ACCESSES");
    g_race_max = mx && *mx ? strtoull(mx, nullptr, 0) : 0;
    if (!g_race_launch || g_shadow) return;
#if defined(__x86_64__) && defined(__linux__)
    g_shadow = (sh_word *)mmap(nullptr, SH_ARENA / 4 * sizeof(sh_word), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    g_pair = (uint32_t(*)[32])calloc(1024, sizeof *g_pair);
    if (g_shadow == (sh_word *)MAP_FAILED || !g_pair) {
        fprintf(stderr, "cudasim: ZT_CUDASIM_RACECHECK: out of memory\n");
        exit(2);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_segv;
    sigaction(SIGSEGV, &sa, nullptr);
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, nullptr);
    atexit(race_summary);
#else
    static bool told;
    if (!told) fprintf(stderr, "cudasim: ZT_CUDASIM_RACECHECK needs x86-64 Linux: not checked\n");
    told = true;
    g_race_launch = false;
#endif
}

/* the allocation nearest to arena offset p, and p relative to its start */
static std::string sh_describe(size_t p) {
    const sim_alloc *best = &g_allocs[0];
    size_t bestd = (size_t)-1;
    for (const sim_alloc &a : g_allocs) {
        const size_t d = p < a.off ? a.off - p : p >= a.off + a.bytes ? p - (a.off + a.bytes) + 1 : 0;
        if (d < bestd) { bestd = d; best = &a; }
    }
    char b[512];
    const char *f = best->file ? strrchr(best->file, '/') : nullptr;
    char decl[300];
    if (best->file) snprintf(decl, sizeof decl, "__shared__, %s:%d", f ? f + 1 : best->file, best->line);
    else snprintf(decl, sizeof decl, "extern __shared__, the launch's %zu bytes", best->bytes);
    snprintf(b, sizeof b, "byte offset %lld of %s (%zu bytes; %s)", (long long)p - (long long)best->off,
             best->name ? best->name : "the dynamic shared memory", best->bytes, decl);
    return b;
}

/* the guards intact?  Otherwise report the thread that just ran (i) */
static void sh_check_guards(unsigned i) {
    size_t from = 0;
    for (size_t k = 0; k <= g_allocs.size(); k++) {
        const size_t to = k < g_allocs.size() ? g_allocs[k].off : g_sh_top;
        for (size_t p = from; p < to; p += SH_GUARD) {
            const size_t n = to - p < SH_GUARD ? to - p : SH_GUARD;
            if (!memcmp(g_arena + p, g_canary_ref, n)) continue;
            size_t q = p;
            while (g_arena[q] == SH_CANARY) q++;
            block_fail("shared memory out of bounds: " + where(i) + " wrote " + sh_describe(q) +
                       " (a guard zone; found at its next switch point)");
            return;
        }
        if (k < g_allocs.size()) from = g_allocs[k].off + g_allocs[k].bytes;
    }
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
            if (g_race && a.kind < 0) {   /* __syncwarp orders the lanes of its mask */
                g_wsync++;
                for (unsigned j = 0; j < nl; j++)
                    if (a.mask >> j & 1u)
                        for (unsigned l2 = 0; l2 < 32; l2++)
                            if (a.mask >> l2 & 1u) g_pair[w0 + j][l2] = g_wsync;
            }
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

/* ------------------------------------------------------------ orders
 * ZT_CUDASIM_ORDER: forward (default), reverse or shuffle (seeded by
 * ZT_CUDASIM_SEED): the order in which the scheduler resumes the runnable
 * threads of a block in every round, and the order of the blocks of a
 * grid.  A result that depends on it is a race. */
enum { ORD_FORWARD, ORD_REVERSE, ORD_SHUFFLE };
static int g_order = -1;
static uint64_t g_rng;
static std::vector<unsigned> g_tord;

static uint64_t rng_next(void) {   /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}

static void order_init(void) {
    if (g_order >= 0) return;
    const char *o = getenv("ZT_CUDASIM_ORDER"), *sd = getenv("ZT_CUDASIM_SEED");
    if (!o || !*o || !strcmp(o, "forward")) g_order = ORD_FORWARD;
    else if (!strcmp(o, "reverse")) g_order = ORD_REVERSE;
    else if (!strcmp(o, "shuffle")) g_order = ORD_SHUFFLE;
    else {
        fprintf(stderr, "cudasim: ZT_CUDASIM_ORDER=%s: not forward, reverse or shuffle\n", o);
        exit(2);
    }
    g_rng = (sd && *sd ? strtoull(sd, nullptr, 0) : 1) * 0x9E3779B97F4A7C15ull + 1;
}

/* a permutation of 0..n-1 in the chosen order */
static void order_fill(std::vector<unsigned> &v, unsigned n) {
    v.resize(n);
    for (unsigned i = 0; i < n; i++) v[i] = g_order == ORD_REVERSE ? n - 1 - i : i;
    if (g_order == ORD_SHUFFLE)
        for (unsigned i = n; i > 1; i--) std::swap(v[i - 1], v[rng_next() % i]);
}

static void order_threads(void) { order_fill(g_tord, g_nthr); }

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
    g_bar_ep++;
    g_static_bytes = 0;
    g_allocs.clear();
    g_allocs.push_back({nullptr, nullptr, 0, SH_GUARD, g_dyn_bytes});
    memset(g_arena, SH_CANARY, SH_GUARD);
    memset(g_arena + SH_GUARD, 0xFF, g_dyn_bytes);   /* uninitialized: NaN */
    g_sh_top = SH_GUARD + g_dyn_bytes + SH_GUARD;
    memset(g_arena + SH_GUARD + g_dyn_bytes, SH_CANARY, SH_GUARD);
    for (;;) {
        order_threads();
        for (volatile unsigned k = 0; k < g_nthr && !g_block_err; k++) {
            const unsigned i = g_tord[k];
            if (g_thr[i].state != T_RUN) continue;
            sim_thread &t = g_thr[i];
            g_cur = (int)i;
            tid_of(i, &threadIdx.x, &threadIdx.y, &threadIdx.z);
            if (_setjmp(g_sched_jb) != 0) {   /* the thread waits or exited */
                if (!g_block_err && !g_closed) sh_check_guards(i);
                continue;
            }
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
        g_bar_ep++;   /* the barrier opens */
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
        g_arena = (unsigned char *)mmap(nullptr, SH_ARENA, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (g_arena == (unsigned char *)MAP_FAILED) {
            g_arena = nullptr;
            zt_sim_async_fail("kernel %s: cannot map the shared-memory arena", name);
            return;
        }
        memset(g_canary_ref, SH_CANARY, sizeof g_canary_ref);
        order_init();
    }
    race_init();
    g_race_n = &g_race_used[std::string(name) + "/" + std::to_string(smem)];
    g_body = &body;
    g_kname = name;
    g_block_err = false;
    gridDim = grid;
    blockDim = block;
    g_nthr = block.x * block.y * block.z;
    g_dyn_bytes = smem;
    const unsigned long long nb = (unsigned long long)grid.x * grid.y * grid.z;
    static std::vector<unsigned> bord;
    const bool permute = g_order != ORD_FORWARD && nb <= (1u << 22);
    if (permute) order_fill(bord, (unsigned)nb);
    for (unsigned long long k = 0; k < nb && !g_block_err; k++) {
        const unsigned long long b = permute ? bord[k] : k;
        blockIdx.x = (unsigned)(b % grid.x);
        blockIdx.y = (unsigned)(b / grid.x % grid.y);
        blockIdx.z = (unsigned)(b / ((unsigned long long)grid.x * grid.y));
        g_race = g_race_launch && (!g_race_blocks || k < g_race_blocks) && (!g_race_max || *g_race_n < g_race_max);
        run_block();
        sh_open();
    }
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
    g_sim_launches++;
    S(s)->q.push_back([kname, grid, block, smem, body]() {
        run_kernel(kname.c_str(), grid, block, smem, body);
    });
}

bool zt_sim_is_device(const void *p, size_t bytes) { return dev_range(p, bytes ? bytes : 1); }

/* ------------------------------------------------------------ device report
 * What the device held, for the engine check (tests/cudasim/engine.sh):
 * with ZT_CUDASIM_REPORT set, one line at exit, appended to that file (or
 * on stderr for "-"):
 *   cudasim-report: rank R device D peak P resident_peak Q live L allocs A launches K total T host_waits W
 *   pageable_d2h N
 * P is the peak of the bytes allocated (cudaMalloc, cudaMallocAsync) and
 * not yet freed in stream order: cudaFreeAsync counts when it is queued,
 * as a stream-ordered pool lets the next allocation on that stream reuse
 * the block (every allocation of the backend is on its compute stream).
 * Q is the peak of what the simulator held, where a cudaFreeAsync counts
 * only when the stream runs it (at a synchronization): >= P.  Both are
 * the requested sizes, without a pool's or an allocator's rounding.  R is
 * the MPI rank from the launcher's environment (-1 without one).  W is the
 * number of host waits for the device (g_host_waits, under streams); N the
 * cudaMemcpyAsync calls from device to pageable host memory (each one of
 * those waits, unbounded: under cudaMemcpyAsync). */
static long long g_mem_live, g_mem_peak, g_mem_res, g_mem_res_peak;
static unsigned long long g_mem_allocs;
static bool g_report_armed;

static void sim_report(void) {
    const char *path = getenv("ZT_CUDASIM_REPORT");
    if (!path || !*path) return;
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    char line[400];
    snprintf(line, sizeof line, "cudasim-report: rank %s device %d peak %lld resident_peak %lld live %lld "
             "allocs %llu launches %llu total %zu host_waits %llu pageable_d2h %llu\n", r ? r : "-1", g_dev,
             g_mem_peak, g_mem_res_peak, g_mem_live, g_mem_allocs, g_sim_launches, sim_total_mem(), g_host_waits,
             g_pageable_d2h);
    FILE *f = strcmp(path, "-") == 0 ? stderr : fopen(path, "a");
    if (!f) {
        fprintf(stderr, "cudasim: ZT_CUDASIM_REPORT=%s: cannot open it\n", path);
        return;
    }
    fputs(line, f);
    if (f != stderr) fclose(f);
}

/* delta bytes allocated (> 0) or freed; resident: the simulator's own
 * allocation or release, else a free in stream order */
static void sim_mem_note(long long delta, bool resident) {
    if (!g_report_armed) {
        g_report_armed = true;
        atexit(sim_report);
    }
    if (resident) {
        g_mem_res += delta;
        if (g_mem_res > g_mem_res_peak) g_mem_res_peak = g_mem_res;
        if (delta < 0) return;   /* counted in stream order when it was freed */
        g_mem_allocs++;
    }
    g_mem_live += delta;
    if (g_mem_live > g_mem_peak) g_mem_peak = g_mem_live;
}
