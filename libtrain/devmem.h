/*
 * devmem.h -- the engine's discipline for memory of the compute backend.
 *
 * Accounted blocks (zt_mem_alloc without ZT_MEM_ON_HOST / ZT_MEM_HOST) are
 * memory of the backend's device.  On the cpu backend that is host memory
 * (be->host_memory = 1) and the host may touch it; on a device backend
 * (cuda, the debugging backend cpu-strict) the host never dereferences it:
 * data moves only through be->copy / to_host / to_device / zero and is
 * computed on only by the table's kernels.  Whatever the host must see
 * (token batches, losses, sampling probabilities, initial values,
 * checkpoints, weights files, offloaded optimizer state) goes through host
 * buffers, in bounded chunks where the data is model-sized.
 */
#ifndef ZT_DEVMEM_H
#define ZT_DEVMEM_H
#include <string.h>
#include "backend.h"
#include "internal.h"

/* Elements of fp32 per host staging chunk (4 MiB). */
#define ZT_STAGE_ELEMS ((size_t)1 << 20)

/* 1 when be's memory is not host memory (the engine must stage). */
static inline int zt_be_device(const zt_backend *be) { return be && !be->host_memory; }

/* Copy bytes between memory of be's device (*_dev = 1) and host memory
 * (*_dev = 0); on a host-memory backend every case is a plain copy. */
static inline void zt_xcopy(const zt_backend *be, void *dst, int dst_dev, const void *src,
                            int src_dev, size_t bytes) {
    if (!bytes || dst == src) return;
    if (!zt_be_device(be)) {
        memmove(dst, src, bytes);
        return;
    }
    if (dst_dev && src_dev) be->copy(dst, src, bytes);
    else if (dst_dev) be->to_device(dst, src, bytes);
    else if (src_dev) be->to_host(dst, src, bytes);
    else memmove(dst, src, bytes);
}

/* A device backend's first failure since the last check, as a zt_status
 * ("<what>: <backend> backend: <message>"); ZT_OK when none. */
static inline int zt_be_check(const zt_backend *be, const char *what, zt_status *st) {
    /* (the cpu backend's only "error" is a bf16 matmul that fell back to fp32) */
    const char *e = zt_be_device(be) && be->error ? be->error() : NULL;
    if (!e) return ZT_OK;
    const int code = strstr(e, "out of memory") ? ZT_ENOMEM : ZT_EINTERNAL;
    return zt_fail(st, code, "%s: %s backend: %s", what, be->name, e);
}

#endif
