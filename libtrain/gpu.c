/*
 * gpu.c -- the GPU of a rank (gpu.h).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "cuda/zt_cuda.h"
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
    if (zt_rt_gpu_bound()) return 0;
    return local_rank % n;
}

const zt_backend *zt_cuda_open(int local_rank, int *device, zt_status *st) {
    *device = zt_cuda_pick_device(local_rank, st);
    if (*device < 0) return NULL;
    cudaError_t e = cudaSetDevice(*device);
    if (e != cudaSuccess) {
        zt_fail(st, ZT_EUNSUPPORTED, "backend cuda: cudaSetDevice(%d) failed: %s", *device,
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        return NULL;
    }
    const zt_backend *be = zt_backend_cuda();
    if (!be) {
        zt_fail(st, ZT_EUNSUPPORTED, "backend cuda on device %d: %s", *device, zt_backend_cuda_why());
        return NULL;
    }
    return be;
}

int zt_cuda_visible_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

#else

int zt_cuda_pick_device(int local_rank, zt_status *st) {
    (void)local_rank;
    zt_fail(st, ZT_EUNSUPPORTED, "backend cuda requested but this build has no CUDA backend "
            "(configure --with-cuda)");
    return -1;
}

const zt_backend *zt_cuda_open(int local_rank, int *device, zt_status *st) {
    *device = zt_cuda_pick_device(local_rank, st);
    return NULL;
}

int zt_cuda_visible_devices(void) { return 0; }

#endif
