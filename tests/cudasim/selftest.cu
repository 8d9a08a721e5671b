/*
 * selftest.cu -- the CUDA simulator checks what it claims (make
 * check-cudasim runs it before tests/test_cuda): correct kernels give the
 * right results, and each planted violation is reported.  TAP output.
 * Built like the backend: launch.pl, then the host C++ compiler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cub/device/device_radix_sort.cuh>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <cuda_runtime.h>

static int n_test, n_fail;
static void ok(bool c, const char *what) {
    n_test++;
    if (!c) n_fail++;
    printf("%sok %d - %s\n", c ? "" : "not ", n_test, what);
    fflush(stdout);
}

/* block sum through shared memory and shuffles */
__global__ void __launch_bounds__(256) k_bsum(float *out, const float *in) {
    __shared__ float sh[8];
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (unsigned w = 0; w < blockDim.x / 32; w++) s += sh[w];
        out[blockIdx.x] = s;
    }
}

/* thread 0 returns before the barrier the others wait at */
__global__ void k_divergent(float *out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* lane 5 skips the shuffle its mask names */
__global__ void k_bad_shuffle(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x != 5) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* dynamic shared memory, used by every thread */
__global__ void k_dyn(float *out, int n) {
    extern __shared__ float dyn[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) dyn[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = dyn[n - 1];
}

__global__ void k_fill(float *x, float v, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = v;
}

/* planted: thread 1 reads what thread 0 writes, with no barrier between
 * (read after write in forward order, write after read in others) */
__global__ void k_race(float *out) {
    __shared__ float sh[64];
    if (threadIdx.x == 0) sh[0] = 1.0f;
    if (threadIdx.x == 1) out[0] = sh[0];
}

/* the same between two lanes of a warp, ordered by __syncwarp: no race */
__global__ void k_warp_ordered(float *out) {
    __shared__ float sh[64];
    if (threadIdx.x == 0) sh[0] = 2.0f;
    __syncwarp();
    if (threadIdx.x == 1) out[0] = sh[0];
}

/* planted: every thread writes its neighbour's word; thread 31 writes one
 * past the end */
__global__ void k_oob_write(float *out) {
    __shared__ float sh[32];
    sh[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = sh[threadIdx.x];
}

/* planted: off-by-one read of the dynamic shared memory (n words) */
__global__ void k_oob_read(float *out, int n) {
    extern __shared__ float dyn[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) dyn[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = dyn[n];
}

/* out[i] = in[i] + 1 */
__global__ void k_add1(float *out, const float *in, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}

/* run fn(arg) in a child whose stderr is captured into out; true when the
 * child died of SIGABRT and its stderr holds want1 and want2 */
static bool child_aborts(void (*fn)(void *), void *arg, const char *want1, const char *want2, char *out,
                         size_t outn) {
    int fd[2];
    out[0] = 0;
    if (pipe(fd)) return false;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn(arg);
        _exit(0);   /* not reached when the access is caught */
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < outn && (r = read(fd[0], out + got, outn - 1 - got)) > 0) got += (size_t)r;
    out[got] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;   /* the report's first line */
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, want1) && strstr(out, want2);
}

static void host_reads(void *p) { printf("# read %g\n", (double)((volatile float *)p)[2]); }
static void host_reads_freed(void *p) {
    cudaFree(p);
    printf("# read %g\n", (double)((volatile float *)p)[0]);
}
static void kernel_writes_freed(void *p) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaFreeAsync(p, s);
    k_fill<<<1, 32, 0, s>>>((float *)p, 1.0f, 8);   /* after the free in stream order */
    cudaStreamSynchronize(s);
}

/* a library (MPI) installs its own SIGSEGV handler after the first
 * allocation: device work re-installs the simulator's, which hands every
 * other fault to that handler */
static void foreign_segv(int sig) {
    (void)sig;
    static const char m[] = "foreign handler\n";
    if (write(2, m, sizeof m - 1) < 0) _exit(8);
    abort();
}
static void foreign_then_host_reads(void *p) {
    signal(SIGSEGV, foreign_segv);
    cudaMemset(p, 0, 4);   /* device work */
    host_reads(p);
}
static void foreign_then_null(void *p) {
    signal(SIGSEGV, foreign_segv);
    cudaMemset(p, 0, 4);
    printf("# read %g\n", (double)*(volatile float *)(uintptr_t)8);
}

static bool failed_with(cudaError_t e, const char *word) {
    return e != cudaSuccess && strstr(cudaGetErrorString(e), word) != NULL;
}

extern "C" unsigned long long zt_sim_host_waits(void);

/* Events and streams as the CUDA runtime documents them: cudaEventQuery of
 * an event never recorded returns cudaSuccess; a record completes once the
 * work queued before it on its stream has, and that work includes
 * cudaStreamWaitEvent's waits on other streams, which no host call drives
 * otherwise.  A host polling an event is waiting for it (the device
 * progresses meanwhile): the first query of an incomplete record runs the
 * work up to it and says not ready, the next says complete, whatever the
 * number of operations before it (one host wait).  Polls counted here are
 * bounded: a lost record would show as a poll that never ends. */
static int poll_count(cudaEvent_t e, int cap) {
    for (int n = 1; n <= cap; n++) {
        const cudaError_t r = cudaEventQuery(e);
        if (r == cudaSuccess) return n;
        if (r != cudaErrorNotReady) return -1;
    }
    return 0;
}
static void events(void) {
    const int N = 64;
    cudaStream_t a, b;
    cudaEvent_t never, ea, eb;
    float *x, *y;
    ok(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess &&
       cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess &&
       cudaEventCreateWithFlags(&never, cudaEventDisableTiming) == cudaSuccess &&
       cudaEventCreateWithFlags(&ea, cudaEventDisableTiming) == cudaSuccess &&
       cudaEventCreateWithFlags(&eb, cudaEventDisableTiming) == cudaSuccess &&
       cudaMalloc((void **)&x, N * sizeof(float)) == cudaSuccess &&
       cudaMalloc((void **)&y, N * sizeof(float)) == cudaSuccess, "events: streams, events, buffers");
    ok(cudaEventQuery(never) == cudaSuccess && cudaEventSynchronize(never) == cudaSuccess &&
       cudaStreamWaitEvent(a, never, 0) == cudaSuccess && cudaStreamSynchronize(a) == cudaSuccess,
       "events: an event never recorded is complete (query, synchronize, a stream's wait)");

    /* 200 kernels, then the record: two polls, one host wait */
    for (int i = 0; i < 200; i++) k_fill<<<1, N, 0, a>>>(x, (float)i, N);
    cudaEventRecord(ea, a);
    unsigned long long w0 = zt_sim_host_waits();
    int n = poll_count(ea, 1000);
    float h[2] = {0, 0};
    cudaMemcpy(h, x + N - 1, sizeof(float), cudaMemcpyDeviceToHost);
    char what[256];
    snprintf(what, sizeof what, "events: a record after 200 kernels: complete at the 2nd poll (%d), its work "
             "done (%g), one host wait (%llu)", n, (double)h[0], zt_sim_host_waits() - w0 - 1);
    ok(n == 2 && h[0] == 199.0f && zt_sim_host_waits() - w0 == 2, what);   /* (+1: the cudaMemcpy) */

    /* a record on a that waits for b's work, b driven by no host call: the
     * poll of a's record completes b's kernel first (y = x + 1 = 8) */
    k_fill<<<1, N, 0, b>>>(x, 7.0f, N);
    cudaEventRecord(eb, b);
    cudaStreamWaitEvent(a, eb, 0);
    k_add1<<<1, N, 0, a>>>(y, x, N);
    cudaEventRecord(ea, a);
    n = poll_count(ea, 1000);
    const cudaError_t qb = cudaEventQuery(eb);
    cudaMemcpy(h, y, sizeof(float), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof what, "events: a's record behind a wait for b's: complete at the 2nd poll (%d), b's "
             "record with it (%s), y = x + 1 = %g", n, cudaGetErrorString(qb), (double)h[0]);
    ok(n == 2 && qb == cudaSuccess && h[0] == 8.0f, what);

    /* each stream waits for the other's earlier record (a -> b -> a) */
    k_fill<<<1, N, 0, a>>>(x, 1.0f, N);
    cudaEventRecord(ea, a);
    cudaStreamWaitEvent(b, ea, 0);
    k_add1<<<1, N, 0, b>>>(y, x, N);   /* y = 2 */
    cudaEventRecord(eb, b);
    cudaStreamWaitEvent(a, eb, 0);
    k_add1<<<1, N, 0, a>>>(x, y, N);   /* x = 3 */
    cudaEventRecord(ea, a);
    k_add1<<<1, N, 0, b>>>(y, y, N);   /* y = 3, after b's record: not waited for */
    n = poll_count(ea, 1000);
    cudaMemcpy(h, x, sizeof(float), cudaMemcpyDeviceToHost);
    cudaStreamSynchronize(b);
    cudaMemcpy(h + 1, y, sizeof(float), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof what, "events: waits both ways (a, b, a): a's last record at the 2nd poll (%d), "
             "x = %g, then y = %g", n, (double)h[0], (double)h[1]);
    ok(n == 2 && h[0] == 3.0f && h[1] == 3.0f, what);

    /* re-recorded between polls: the query answers for the last record */
    k_fill<<<1, N, 0, a>>>(x, 4.0f, N);
    cudaEventRecord(ea, a);
    const cudaError_t q1 = cudaEventQuery(ea);
    k_fill<<<1, N, 0, a>>>(x, 5.0f, N);
    cudaEventRecord(ea, a);
    n = poll_count(ea, 1000);
    cudaMemcpy(h, x, sizeof(float), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof what, "events: re-recorded after a not-ready query (%s): the new record not ready, "
             "then complete (%d polls), x = %g", cudaGetErrorString(q1), n, (double)h[0]);
    ok(q1 == cudaErrorNotReady && n == 2 && h[0] == 5.0f, what);

    cudaFree(x);
    cudaFree(y);
    cudaEventDestroy(never);
    cudaEventDestroy(ea);
    cudaEventDestroy(eb);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
}

int main(void) {
    cudaStream_t s;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    float h[512], *d, *o;
    for (int i = 0; i < 512; i++) h[i] = (float)(i % 7) - 3.0f;
    cudaMalloc((void **)&d, sizeof h);
    cudaMalloc((void **)&o, sizeof h);
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s);

    /* a correct kernel */
    k_bsum<<<2, 256, 0, s>>>(o, d);
    float r[2];
    cudaMemcpyAsync(r, o, sizeof r, cudaMemcpyDeviceToHost, s);
    ok(cudaStreamSynchronize(s) == cudaSuccess, "block sum runs");
    float e0 = 0, e1 = 0;
    for (int i = 0; i < 256; i++) { e0 += h[i]; e1 += h[256 + i]; }
    ok(r[0] == e0 && r[1] == e1, "block sum: shuffles and shared memory give the sum");

    /* work runs only when the host synchronizes (into page-locked memory;
     * a copy into pageable memory completes before it returns, as CUDA
     * documents for device-to-host copies) */
    float v = -1.0f;
    ok(cudaHostRegister(&v, sizeof v, cudaHostRegisterDefault) == cudaSuccess, "cudaHostRegister of the destination");
    k_fill<<<1, 32, 0, s>>>(o, 5.0f, 1);
    cudaMemcpyAsync(&v, o, 4, cudaMemcpyDeviceToHost, s);
    ok(v == -1.0f, "no synchronization: the host still sees its old value (page-locked destination)");
    cudaStreamSynchronize(s);
    ok(v == 5.0f, "after cudaStreamSynchronize: the kernel's value");
    ok(cudaHostUnregister(&v) == cudaSuccess, "cudaHostUnregister");
    float pv = -1.0f;
    k_fill<<<1, 32, 0, s>>>(o, 6.0f, 1);
    cudaMemcpyAsync(&pv, o, 4, cudaMemcpyDeviceToHost, s);
    ok(pv == 6.0f, "device-to-host into pageable memory: done when cudaMemcpyAsync returns (the stream's work first)");

    /* launch limits */
    k_bsum<<<1, 512, 0, s>>>(o, d);
    ok(cudaGetLastError() == cudaErrorLaunchOutOfResources, "512 threads above __launch_bounds__(256): refused");
    k_fill<<<1, 1025, 0, s>>>(o, 0.0f, 1);
    ok(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads per block: refused");
    k_fill<<<dim3(1, 65536), 32, 0, s>>>(o, 0.0f, 1);
    ok(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid y 65536: refused");
    k_dyn<<<1, 128, 64 * 1024, s>>>(o, 16384);
    ok(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB dynamic shared memory without the attribute: refused");
    ok(cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess,
       "cudaFuncSetAttribute 64 KiB");
    k_dyn<<<1, 128, 64 * 1024, s>>>(o, 16384);
    ok(cudaGetLastError() == cudaSuccess, "64 KiB after the attribute: launched");
    cudaMemcpyAsync(&v, o, 4, cudaMemcpyDeviceToHost, s);
    ok(cudaStreamSynchronize(s) == cudaSuccess && v == 16383.0f, "dynamic shared memory holds what the block wrote");
    ok(cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue,
       "228 KiB dynamic shared memory: refused");
    (void)cudaGetLastError();

    /* execution errors: reported at the synchronization */
    k_divergent<<<1, 64, 0, s>>>(o);
    cudaError_t e = cudaStreamSynchronize(s);
    ok(failed_with(e, "divergent __syncthreads") && failed_with(e, "k_divergent") && failed_with(e, "thread (0,0,0)"),
       "divergent barrier: reported with kernel and thread");
    printf("# %s\n", cudaGetErrorString(e));
    k_bad_shuffle<<<1, 32, 0, s>>>(o);
    e = cudaStreamSynchronize(s);
    ok(failed_with(e, "k_bad_shuffle") && failed_with(e, "lane 5"), "shuffle without lane 5 of its mask: reported");
    printf("# %s\n", cudaGetErrorString(e));
    ok(cudaStreamSynchronize(s) == cudaSuccess, "the error is reported once");

    /* shared-memory bounds: guard zones checked at every switch point */
    setenv("ZT_CUDASIM_RACECHECK", "0", 1);
    k_oob_write<<<1, 32, 0, s>>>(o);
    e = cudaStreamSynchronize(s);
    ok(failed_with(e, "out of bounds") && failed_with(e, "k_oob_write") && failed_with(e, "thread (31,0,0)") &&
       failed_with(e, "byte offset 128 of sh"), "shared write one past the end: reported (guard zone)");
    printf("# %s\n", cudaGetErrorString(e));
    k_oob_read<<<1, 32, 16 * 4, s>>>(o, 16);
    ok(cudaStreamSynchronize(s) == cudaSuccess, "without the race check an out-of-bounds read is not seen");

    /* the race check: every shared access checked (x86-64 Linux only) */
#if defined(__x86_64__) && defined(__linux__)
    setenv("ZT_CUDASIM_RACECHECK", "1", 1);
    k_race<<<1, 64, 0, s>>>(o);
    e = cudaStreamSynchronize(s);
    ok(failed_with(e, "shared memory race (") && failed_with(e, "k_race") && failed_with(e, "thread (1,0,0)") &&
       failed_with(e, "thread (0,0,0)") && failed_with(e, "byte offset 0 of sh"),
       "racecheck: a read of another thread's write with no barrier between: reported with both threads");
    printf("# %s\n", cudaGetErrorString(e));
    k_warp_ordered<<<1, 32, 0, s>>>(o);
    cudaMemcpyAsync(&v, o, 4, cudaMemcpyDeviceToHost, s);
    ok(cudaStreamSynchronize(s) == cudaSuccess && v == 2.0f, "racecheck: the same ordered by __syncwarp: no report");
    k_oob_read<<<1, 32, 16 * 4, s>>>(o, 16);
    e = cudaStreamSynchronize(s);
    ok(failed_with(e, "out of bounds") && failed_with(e, "thread (0,0,0) reads") &&
       failed_with(e, "byte offset 64 of dyn"), "racecheck: dynamic shared read one past the end: reported");
    printf("# %s\n", cudaGetErrorString(e));
    k_oob_write<<<1, 32, 0, s>>>(o);
    e = cudaStreamSynchronize(s);
    ok(failed_with(e, "out of bounds") && failed_with(e, "thread (31,0,0) writes") &&
       failed_with(e, "byte offset 128 of sh"), "racecheck: shared write one past the end: reported at the access");
    printf("# %s\n", cudaGetErrorString(e));
    k_bsum<<<2, 256, 0, s>>>(o, d);
    cudaMemcpyAsync(r, o, sizeof r, cudaMemcpyDeviceToHost, s);
    ok(cudaStreamSynchronize(s) == cudaSuccess && r[0] == e0 && r[1] == e1, "racecheck: the block sum: no report, same sum");
    unsetenv("ZT_CUDASIM_RACECHECK");
#else
    for (int i = 0; i < 5; i++) printf("ok %d - # SKIP the race check needs x86-64 Linux\n", ++n_test);
#endif

    /* cuBLAS: documented argument checks and column-major semantics */
    cublasHandle_t hb;
    cublasCreate(&hb);
    cublasSetStream(hb, s);
    const float one = 1.0f, zero = 0.0f;
    /* A 2x3 (ld 2), B 3x2 (ld 3): C = A B is 2x2 */
    float ha[6] = {1, 2, 3, 4, 5, 6}, hbm[6] = {1, 0, 2, 0, 1, 1}, hc[4];
    float *da, *db, *dc;
    cudaMalloc((void **)&da, sizeof ha);
    cudaMalloc((void **)&db, sizeof hbm);
    cudaMalloc((void **)&dc, sizeof hc);
    cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hbm, sizeof hbm, cudaMemcpyHostToDevice);
    ok(cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_32F, 1, db, CUDA_R_32F, 3, &zero, dc,
                    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE,
       "cublasGemmEx lda 1 < m 2: CUBLAS_STATUS_INVALID_VALUE");
    ok(cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_32F, 2, db, CUDA_R_32F, 3, &zero, dc,
                    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
       "cublasGemmEx 2x3 by 3x2");
    cudaMemcpyAsync(hc, dc, sizeof hc, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    /* column-major: A = [1 3 5; 2 4 6], B = [1 0; 0 1; 2 1] (columns 1 0 2, 0 1 1) */
    ok(hc[0] == 11 && hc[1] == 14 && hc[2] == 8 && hc[3] == 10, "GemmEx: column-major product");
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatrixLayout_t la;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 4, 2, 3);   /* ld 3 < rows 4 */
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, la, la, la, pref, 1, &res, &nres) == CUBLAS_STATUS_INVALID_VALUE,
       "cuBLASLt layout with ld < rows: CUBLAS_STATUS_INVALID_VALUE");
    const int64_t wrong = 1;
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &wrong, sizeof wrong) == CUBLAS_STATUS_INVALID_VALUE,
       "cuBLASLt attribute of the wrong size: CUBLAS_STATUS_INVALID_VALUE");

    /* cuDNN (backend API): documented argument checks, finalize order,
     * NOT_SUPPORTED for what the engine does not take, and a tiny graph */
    {
        cudnnHandle_t hn;
        cudnnCreate(&hn);
        cudnnSetStream(hn, s);
        cudnnBackendDescriptor_t t, t2;
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
        const int64_t dims[3] = {1, 2, 8}, str[3] = {16, 8, 1}, uid = 1, al = 16;
        const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
        ok(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 3, dims) ==
               CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "cuDNN: tensor dims as INT32: BAD_PARAM_ATTRIBUTE_TYPE");
        ok(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, dims) ==
               CUDNN_STATUS_BAD_PARAM, "cuDNN: two unique ids: BAD_PARAM");
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &bf);
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims);
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 2, str);
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al);
        ok(cudnnBackendFinalize(t) == CUDNN_STATUS_BAD_PARAM, "cuDNN: 3 dims, 2 strides: finalize BAD_PARAM");
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, str);
        ok(cudnnBackendFinalize(t) == CUDNN_STATUS_SUCCESS, "cuDNN: a bf16 [1, 2, 8] tensor");
        ok(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ==
               CUDNN_STATUS_BAD_PARAM, "cuDNN: setting a finalized descriptor: BAD_PARAM");
        /* a matmul over a tensor not finalized yet */
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t2);
        cudnnBackendDescriptor_t mm, mop;
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm);
        cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
        cudnnBackendFinalize(mm);
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &mop);
        cudnnBackendSetAttribute(mop, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        cudnnBackendSetAttribute(mop, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t2);
        cudnnBackendSetAttribute(mop, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        cudnnBackendSetAttribute(mop, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
        ok(cudnnBackendFinalize(mop) == CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
           "cuDNN: a matmul over an unfinalized tensor: BAD_PARAM_NOT_FINALIZED");
        /* t2 = [1, 8, 2]: t (1x2x8) times t2 = [1, 2, 2]; a graph of one
         * matmul is not an attention graph: the heuristics find no engine */
        const int64_t d2[3] = {1, 8, 2}, s2[3] = {16, 2, 1}, u2 = 2, d3[3] = {1, 2, 2}, s3[3] = {4, 2, 1}, u3 = 3;
        cudnnBackendSetAttribute(t2, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &bf);
        cudnnBackendSetAttribute(t2, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, d2);
        cudnnBackendSetAttribute(t2, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, s2);
        cudnnBackendSetAttribute(t2, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &u2);
        cudnnBackendSetAttribute(t2, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al);
        cudnnBackendFinalize(t2);
        ok(cudnnBackendFinalize(mop) == CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
           "cuDNN: [1,2,8] x [1,8,2] into [1,2,8]: BAD_PARAM_SHAPE_MISMATCH");
        cudnnBackendDescriptor_t t3, mop2, g, h;
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t3);
        cudnnBackendSetAttribute(t3, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
        cudnnBackendSetAttribute(t3, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, d3);
        cudnnBackendSetAttribute(t3, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, s3);
        cudnnBackendSetAttribute(t3, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &u3);
        cudnnBackendSetAttribute(t3, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al);
        cudnnBackendFinalize(t3);
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &mop2);
        cudnnBackendSetAttribute(mop2, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        cudnnBackendSetAttribute(mop2, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t2);
        cudnnBackendSetAttribute(mop2, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t3);
        cudnnBackendSetAttribute(mop2, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
        ok(cudnnBackendFinalize(mop2) == CUDNN_STATUS_SUCCESS, "cuDNN: [1,2,8] x [1,8,2] into [1,2,2]");
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g);
        cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mop2);
        ok(cudnnBackendFinalize(g) == CUDNN_STATUS_BAD_PARAM, "cuDNN: a graph without a handle: BAD_PARAM");
        cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &hn);
        ok(cudnnBackendFinalize(g) == CUDNN_STATUS_SUCCESS, "cuDNN: a graph of one matmul");
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &h);
        const cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
        cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
        cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
        int64_t ncfg = -1;
        ok(cudnnBackendFinalize(h) == CUDNN_STATUS_SUCCESS &&
               cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &ncfg,
                                        NULL) == CUDNN_STATUS_SUCCESS && ncfg == 0,
           "cuDNN: not an attention graph: the heuristics return no engine");
        cudnnBackendDescriptor_t all[] = {h, g, mop2, mop, mm, t3, t2, t};
        for (cudnnBackendDescriptor_t x : all) cudnnBackendDestroyDescriptor(x);
        cudnnDestroy(hn);
    }

    /* cub: the two-call protocol */
    int keys[6] = {3, 1, 3, 0, 1, 3}, vals[6] = {0, 1, 2, 3, 4, 5}, ko[6], vo[6];
    int *dk, *dv, *dko, *dvo;
    cudaMalloc((void **)&dk, sizeof keys);
    cudaMalloc((void **)&dv, sizeof vals);
    cudaMalloc((void **)&dko, sizeof keys);
    cudaMalloc((void **)&dvo, sizeof vals);
    cudaMemcpy(dk, keys, sizeof keys, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, vals, sizeof vals, cudaMemcpyHostToDevice);
    size_t tb = 0;
    cub::DeviceRadixSort::SortPairs(NULL, tb, dk, dko, dv, dvo, 6, 0, 32, s);
    void *tmp;
    cudaMalloc(&tmp, tb);
    size_t small = tb - 1;
    ok(cub::DeviceRadixSort::SortPairs(tmp, small, dk, dko, dv, dvo, 6, 0, 32, s) == cudaErrorInvalidValue,
       "cub SortPairs with less temporary storage than it asked for: refused");
    ok(cub::DeviceRadixSort::SortPairs(tmp, tb, dk, dko, dv, dvo, 6, 0, 32, s) == cudaSuccess, "cub SortPairs");
    cudaMemcpyAsync(ko, dko, sizeof ko, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(vo, dvo, sizeof vo, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    ok(ko[0] == 0 && ko[1] == 1 && ko[2] == 1 && ko[5] == 3 && vo[0] == 3 && vo[1] == 1 && vo[2] == 4 &&
       vo[3] == 0 && vo[4] == 2 && vo[5] == 5, "cub SortPairs: stable by key");

    /* host/device discipline: device memory is unreadable from host code */
    char rep[512];
    ok(child_aborts(host_reads, d, "host access to device memory at", "(allocation of 2048 bytes, offset 8)", rep,
                    sizeof rep), "a host read of device memory (after a synchronize): reported, abort");
    printf("# %s\n", rep);
    ok(child_aborts(host_reads_freed, o, "host access to freed device memory at",
                    "(allocation of 2048 bytes, offset 0)", rep, sizeof rep),
       "a host read of device memory after cudaFree: reported as freed, abort");
    printf("# %s\n", rep);
    ok(child_aborts(kernel_writes_freed, dko, "kernel k_fill: block (0,0,0) thread (", "access to freed device memory",
                    rep, sizeof rep), "a kernel writing what cudaFreeAsync freed before it: reported, abort");
    printf("# %s\n", rep);
    ok(child_aborts(foreign_then_host_reads, d, "host access to device memory at", "(allocation of 2048 bytes, offset 8)",
                    rep, sizeof rep), "another SIGSEGV handler installed later: device memory still reported");
    printf("# %s\n", rep);
    ok(child_aborts(foreign_then_null, d, "foreign handler", "", rep, sizeof rep),
       "a fault outside device memory goes to that other handler");
    printf("# %s\n", rep);
    v = 0.0f;
    cudaMemcpy(&v, d + 2, 4, cudaMemcpyDeviceToHost);
    ok(v == h[2], "the same memory through cudaMemcpy: the value");
    events();

    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
