/*
 * cuda_stub.c -- the CUDA backend entry points in builds without CUDA
 * (compiled only when configure did not enable --with-cuda).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "zt_cuda.h"

const zt_backend *zt_backend_cuda(void) { return NULL; }
const char *zt_backend_cuda_why(void) {
    return "this build has no CUDA backend (configure --with-cuda)";
}
int zt_cuda_built(void) { return 0; }
void *zt_cuda_compute_stream(void) { return NULL; }
int zt_cuda_device(void) { return -1; }
void zt_cuda_mem(size_t *cur, size_t *peak) {
    if (cur) *cur = 0;
    if (peak) *peak = 0;
}
void zt_cuda_mem_reset_peak(void) {}
void zt_cuda_set_gemm_impl(int use_lt) { (void)use_lt; }
void zt_cuda_att_flash_for_test(int on) { (void)on; }
const char *zt_cuda_attention_path(void) { return "none (no CUDA backend in this build)"; }
void zt_cuda_att_cudnn_for_test(int on, int deterministic) { (void)on, (void)deterministic; }
void zt_cuda_att_cudnn_calls_for_test(long *fwd, long *bwd, long *declined) {
    if (fwd) *fwd = 0;
    if (bwd) *bwd = 0;
    if (declined) *declined = 0;
}
void zt_cuda_att_cudnn_version_for_test(long version, int sm) { (void)version, (void)sm; }
int zt_cuda_att_cudnn_report(char *buf, size_t n) {
    if (buf && n) buf[0] = 0;
    return 0;
}
int zt_cuda_grouped_report(char *buf, size_t n) {
    if (buf && n) buf[0] = 0;
    return 0;
}
void zt_cuda_grouped_for_test(int on) { (void)on; }
void *zt_cuda_scratch_for_test(size_t bytes, size_t *have) {
    (void)bytes;
    if (have) *have = 0;
    return NULL;
}
int zt_cuda_device_memory(int device, size_t *free_bytes, size_t *total_bytes) {
    (void)device;
    if (free_bytes) *free_bytes = 0;
    if (total_bytes) *total_bytes = 0;
    return -1;
}
