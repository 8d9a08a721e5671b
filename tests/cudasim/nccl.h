/*
 * nccl.h (CUDA simulator) -- the part of NCCL's API that
 * libtrain/comm_nccl.c and tests/test_comm_gpu.c use, for the host
 * compiler.  Only make check-cudasim sees this file (-I tests/cudasim); it
 * is never installed.  The declarations follow NVIDIA's documented API
 * (names, enum values, argument order); the behaviour is
 * tests/cudasim/nccl.cc: every communicator is an MPI communicator of its
 * members, and every collective is work queued on its CUDA stream
 * (tests/cudasim/README, "NCCL").
 */
#ifndef ZT_CUDASIM_NCCL_H
#define ZT_CUDASIM_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 18
#define NCCL_PATCH 0
#define NCCL_UNIQUE_ID_BYTES 128

typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

/* In C++ (the simulator and its selftest) these enums have int as their
 * fixed underlying type, so that an invalid value passed on purpose is a
 * checked argument rather than undefined behaviour. */
#ifdef __cplusplus
#define ZT_SIM_NCCL_ENUM enum : int
#else
#define ZT_SIM_NCCL_ENUM enum
#endif

/* the reductions simulated (ncclAvg and user-defined ops are not) */
typedef ZT_SIM_NCCL_ENUM { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 } ncclRedOp_t;

typedef ZT_SIM_NCCL_ENUM {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9
} ncclDataType_t;

#ifdef __cplusplus
extern "C" {
#endif
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
#ifdef __cplusplus
}
#endif
#endif /* ZT_CUDASIM_NCCL_H */
