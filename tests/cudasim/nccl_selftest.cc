/*
 * nccl_selftest.cc -- the simulator's NCCL subset (nccl.cc) against its
 * own promises, under mpirun (make check-cudasim runs it at 3 ranks with
 * ZT_CUDASIM_DEVICES=3): NCCL's argument checks, the in-place forms,
 * duplicate devices, groups, deferred execution, the rounding of 16-bit
 * sums in the type, mismatched operations as asynchronous errors, destroy
 * and abort.  Every check is agreed over all ranks; rank 0 prints TAP.
 */
#include <mpi.h>

#include "nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size, n_tap, n_fail;

static void check(int cond, const char *what) {
    int all = 0;
    MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ++n_tap;
    if (!all) n_fail++;
    if (g_rank == 0) printf("%s %d - %s [%d ranks]\n", all ? "ok" : "not ok", n_tap, what, g_size);
    fflush(stdout);
}

static ncclComm_t make_comm(ncclResult_t *r) {
    ncclUniqueId id;
    if (g_rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c = nullptr;
    *r = ncclCommInitRank(&c, g_size, id, g_rank);
    return c;
}

static float *dev_floats(size_t n, float v) {
    float *d = nullptr;
    cudaMalloc((void **)&d, n * sizeof(float));
    float *h = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = v;
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const int P = g_size, R = g_rank;
    ncclResult_t r;

    /* ---- communicators */
    check(ncclGetUniqueId(nullptr) == ncclInvalidArgument, "ncclGetUniqueId(NULL): ncclInvalidArgument");
    ncclUniqueId zero;
    memset(&zero, 0, sizeof zero);
    ncclComm_t c = nullptr;
    check(ncclCommInitRank(&c, P, zero, R) == ncclInvalidArgument && !c,
          "ncclCommInitRank with an id not from ncclGetUniqueId: ncclInvalidArgument");
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    check(ncclCommInitRank(&c, P, id, P) == ncclInvalidArgument && ncclCommInitRank(&c, 0, id, 0) == ncclInvalidArgument,
          "ncclCommInitRank: rank >= nranks or nranks 0: ncclInvalidArgument");
    if (P > 1) {   /* every rank on device 0: NCCL refuses a device twice */
        cudaSetDevice(0);
        c = make_comm(&r);
        check(r == ncclInvalidUsage && !c && strstr(ncclGetLastError(nullptr), "duplicate GPU"),
              "ranks on the same device: ncclInvalidUsage (duplicate GPU) on every rank");
    }
    check(cudaSetDevice(R) == cudaSuccess, "cudaSetDevice(rank) (ZT_CUDASIM_DEVICES >= ranks)");
    c = make_comm(&r);
    check(r == ncclSuccess && c, "ncclCommInitRank on one device per rank");

    /* ---- argument checks */
    const size_t N = 8;
    float *a = dev_floats(N * (size_t)P, (float)(R + 1)), *b = dev_floats(N * (size_t)P, -1.0f);
    float host[8];
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    check(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, nullptr, s) == ncclInvalidArgument, "NULL comm: ncclInvalidArgument");
    check(ncclAllReduce(a, nullptr, N, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument, "NULL recvbuff: ncclInvalidArgument");
    check(ncclAllReduce(host, b, N, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
          "a host buffer: ncclInvalidArgument");
    check(ncclAllReduce(a, b, N * (size_t)P + 1, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
          "a count past the end of the allocation: ncclInvalidArgument");
    check(ncclAllReduce(a, b, N, (ncclDataType_t)42, ncclSum, c, s) == ncclInvalidArgument,
          "an invalid datatype: ncclInvalidArgument");
    check(ncclAllReduce(a, b, N, ncclFloat32, (ncclRedOp_t)9, c, s) == ncclInvalidArgument,
          "an invalid reduction op: ncclInvalidArgument");
    check(ncclBroadcast(a, a, N, ncclFloat32, P, c, s) == ncclInvalidArgument &&
          ncclReduce(a, b, N, ncclFloat32, ncclSum, -1, c, s) == ncclInvalidArgument,
          "root outside 0..nranks-1: ncclInvalidArgument");
    check(ncclAllReduce(a, a + 1, N, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
          "all-reduce with overlapping buffers that are not in place: ncclInvalidArgument");
    if (P > 1)
        check(ncclAllGather(b + (R + 1) % P * N, b, N, ncclFloat32, c, s) == ncclInvalidArgument &&
              ncclReduceScatter(a, a + (R + 1) % P * N, N, ncclFloat32, ncclSum, c, s) == ncclInvalidArgument,
              "all-gather / reduce-scatter inside the buffer but not at rank * count: ncclInvalidArgument");
    check(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, c, s) == ncclSuccess, "count 0: ncclSuccess, nothing to do");
    check(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart: ncclInvalidUsage");

    /* ---- deferred execution: the result appears when the stream is synchronized */
    check(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, s) == ncclSuccess, "ncclAllReduce queued");
    cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);   /* the legacy stream: s is not waited for */
    check(host[0] == -1.0f && host[7] == -1.0f, "before cudaStreamSynchronize the receive buffer is unchanged");
    check(cudaStreamSynchronize(s) == cudaSuccess, "cudaStreamSynchronize");
    cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == (float)(P * (P + 1) / 2) && host[7] == host[0], "after it: the sum over the ranks");

    /* ---- a group with an invalid call launches nothing */
    float *g = dev_floats(N, 5.0f);
    ncclGroupStart();
    const ncclResult_t r1 = ncclAllReduce(g, g, N, ncclFloat32, ncclSum, c, s);
    const ncclResult_t r2 = ncclAllReduce(g, nullptr, N, ncclFloat32, ncclSum, c, s);
    const ncclResult_t r3 = ncclGroupEnd();
    cudaStreamSynchronize(s);
    cudaMemcpy(host, g, sizeof host, cudaMemcpyDeviceToHost);
    check(r1 == ncclSuccess && r2 == ncclInvalidArgument && r3 == ncclInvalidArgument && host[0] == 5.0f,
          "a group with an invalid call: ncclGroupEnd returns the error and launches none of it");
    /* a group of reduces, one per root (comm_nccl's uneven reduce-scatter) */
    ncclGroupStart();
    ncclGroupStart();   /* nested: only the outermost end launches */
    for (int root = 0; root < P; root++) ncclReduce(a + root * N, g, N, ncclFloat32, ncclMax, root, c, s);
    r = ncclGroupEnd();
    check(r == ncclSuccess && ncclGroupEnd() == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess,
          "a nested group of ncclReduce, one per root");
    cudaMemcpy(host, g, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == (float)P && host[N - 1] == (float)P, "each root received the maximum (rank P-1's value)");

    /* ---- 16-bit sums are rounded to the type at every step, in rank order:
     * bf16 1 + 2^-8 + 2^-8 (ties to even) stays 1 (an fp32 sum rounded
     * once would give 1 + 2^-7 at 3 ranks); fp16 2048 + 1 + 1 stays 2048 */
    {
        uint16_t hb[2] = {(uint16_t)(R == 0 ? 0x3F80 : 0x3B80), (uint16_t)(R == 0 ? 0x6800 : 0x3C00)};
        uint16_t *db = nullptr;
        cudaMalloc((void **)&db, sizeof hb);
        cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice);
        ncclAllReduce(db, db, 1, ncclBfloat16, ncclSum, c, s);
        ncclAllReduce(db + 1, db + 1, 1, ncclFloat16, ncclSum, c, s);
        cudaStreamSynchronize(s);
        cudaMemcpy(hb, db, sizeof hb, cudaMemcpyDeviceToHost);
        check(hb[0] == 0x3F80, "bf16 sum rounded in the type at each step: 1 + 2^-8 + ... = 1");
        check(hb[1] == 0x6800, "fp16 sum rounded in the type at each step: 2048 + 1 + ... = 2048");
        cudaFree(db);
    }

    /* ---- ncclCommDestroy completes the queued work first */
    ncclComm_t c2 = make_comm(&r);
    float *d2 = dev_floats(N, 2.0f);
    ncclAllReduce(d2, d2, N, ncclFloat32, ncclSum, c2, s);
    check(ncclCommDestroy(c2) == ncclSuccess, "ncclCommDestroy with an operation queued");
    cudaMemcpy(host, d2, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == 2.0f * (float)P, "the queued operation completed before the communicator went");
    /* ---- ncclCommAbort drops it, without waiting */
    ncclComm_t c3 = make_comm(&r);
    ncclAllReduce(d2, d2, N, ncclFloat32, ncclSum, c3, s);
    check(ncclCommAbort(c3) == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess, "ncclCommAbort with an operation queued");
    cudaMemcpy(host, d2, sizeof host, cudaMemcpyDeviceToHost);
    check(host[0] == 2.0f * (float)P, "the queued operation was dropped");

    /* ---- mismatched operations: an asynchronous error on every rank */
    if (P > 1) {
        ncclAllReduce(a, b, R == 0 ? N - 1 : N, ncclFloat32, ncclSum, c, s);
        const cudaError_t e = cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        ncclResult_t ae = ncclSuccess;
        ncclCommGetAsyncError(c, &ae);
        check(e == cudaErrorLaunchFailure && ae == ncclInvalidUsage,
              "mismatched counts: the stream fails and ncclCommGetAsyncError says ncclInvalidUsage");
        check(ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c, s) == ncclInvalidUsage,
              "a call on the failed communicator: ncclInvalidUsage");
        ncclComm_t c4 = make_comm(&r);
        ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c4, s);
        ncclBroadcast(a, b, N, ncclFloat32, 0, c4, s);   /* rank 0 broadcasts, the others reduce */
        if (R != 0) ncclAllReduce(a, b, N, ncclFloat32, ncclSum, c4, s);
        else ncclBroadcast(a, b, N, ncclFloat32, 0, c4, s);
        const cudaError_t e4 = cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        ncclCommGetAsyncError(c4, &ae);
        check(e4 == cudaErrorLaunchFailure && ae == ncclInvalidUsage && strstr(ncclGetLastError(c4), "operation 2"),
              "a different operation kind (the third call): reported with its sequence number");
        ncclCommAbort(c4);
        /* a call that fails its checks on one rank only: the others' calls
         * passed; they learn of it instead of waiting for it */
        ncclComm_t c5 = make_comm(&r);
        const ncclResult_t r5 = ncclAllReduce(a, R == 0 ? nullptr : b, N, ncclFloat32, ncclSum, c5, s);
        const cudaError_t e5 = cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        ncclCommGetAsyncError(c5, &ae);
        check((R == 0 ? r5 == ncclInvalidArgument : r5 == ncclSuccess) && e5 == cudaErrorLaunchFailure &&
              ae == ncclInvalidUsage && strstr(ncclGetLastError(c5), "a failed ncclAllReduce"),
              "a call that failed its checks on rank 0 only: every rank reports it (no wait)");
        ncclCommAbort(c5);
    }
    check(ncclCommAbort(c) == ncclSuccess, "ncclCommAbort of the failed communicator");
    cudaFree(a);
    cudaFree(b);
    cudaFree(g);
    cudaFree(d2);
    cudaStreamDestroy(s);
    if (g_rank == 0) printf("1..%d\n", n_tap);
    MPI_Finalize();
    return n_fail ? 1 : 0;
}
