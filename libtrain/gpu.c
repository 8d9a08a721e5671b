/*
 * gpu.c -- the GPU of a rank (gpu.h).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "ztrain_env.h"

#ifdef ZT_HAVE_CUDA
#include <cuda_runtime.h>

int zt_cuda_pick_device(int local_rank, zt_status *st) {
    if (local_rank < 0) {
        zt_fail(st, ZT_EINVAL, "zt_cuda_pick_device: local rank %d < 0", local_rank);
        return -1;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        zt_fail(st, ZT_EUNSUPPORTED,
                "backend cuda requested but no CUDA device is visible (cudaGetDeviceCount: %s%s%s%s)",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices",
                cvd ? "; CUDA_VISIBLE_DEVICES='" : "", cvd ? cvd : "", cvd ? "'" : "");
        (void)cudaGetLastError();
        return -1;
    }
    const char *bind = getenv(ZTRAIN_ENV_GPU_BIND);
    if (bind && (strcmp(bind, "local") == 0 || strncmp(bind, "map:", 4) == 0)) return 0;
    return local_rank % n;
}

#else

int zt_cuda_pick_device(int local_rank, zt_status *st) {
    (void)local_rank;
    zt_fail(st, ZT_EUNSUPPORTED, "backend cuda requested but this build has no CUDA backend "
            "(configure --with-cuda)");
    return -1;
}

#endif
