/*
 * gpu.h -- choosing the GPU of a rank (libtrain/gpu.c).  Always built; in
 * builds without --with-cuda it only reports that there is no CUDA backend.
 */
#ifndef ZT_GPU_H
#define ZT_GPU_H
#include "internal.h"

/*
 * The CUDA device ordinal this rank should use, among the devices visible
 * to the process (CUDA_VISIBLE_DEVICES applies, as everywhere in CUDA):
 *   - ZTRAIN_GPU_BIND=local or map:LIST (the Slurm plugin bound the task):
 *     the plugin already narrowed CUDA_VISIBLE_DEVICES to this task's GPU(s),
 *     so device 0 (the first of them);
 *   - otherwise (unset, none): local_rank modulo the number of visible
 *     devices, so ranks on a node spread over its GPUs (and share them
 *     round robin when there are more ranks than GPUs).
 * It does not call cudaSetDevice.  Returns the ordinal (>= 0), or -1 with
 * st filled: ZT_EUNSUPPORTED when no device is visible ("backend cuda
 * requested but no CUDA device is visible (cudaGetDeviceCount: ...)") or
 * when this build has no CUDA backend, ZT_EINVAL for a negative local_rank.
 */
int zt_cuda_pick_device(int local_rank, zt_status *st);

/* 1 when the Slurm plugin bound each task to its own GPUs:
 * ZTRAIN_GPU_BIND=local or map:LIST (runtime.c; none, unset: 0; any other
 * value is refused by zt_rt_check_slurm). */
int zt_rt_gpu_bound(void);

/*
 * The CUDA backend on this rank's device: zt_cuda_pick_device, make the
 * device current, zt_backend_cuda().  *device receives the ordinal.  NULL
 * with st filled (ZT_EUNSUPPORTED, one line: no device visible, no CUDA in
 * this build, or why the backend could not start on the device).
 */
struct zt_backend;
const struct zt_backend *zt_cuda_open(int local_rank, int *device, zt_status *st);
/* CUDA devices visible to this process (0 without CUDA or without devices). */
int zt_cuda_visible_devices(void);

#endif
