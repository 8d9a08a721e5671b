/*
 * adamw_step.h -- the AdamW update of one element, shared by the CPU
 * backend (C) and the CUDA backend (device code), so both apply the same
 * operations in the same order (backend.h documents the formula).
 */
#ifndef ZT_ADAMW_STEP_H
#define ZT_ADAMW_STEP_H
#include <math.h>

#ifdef __CUDACC__
#define ZT_ADAMW_FN static __host__ __device__ __forceinline__
#else
#define ZT_ADAMW_FN static inline
#endif

/* ob1 = 1 - b1, ob2 = 1 - b2 (computed once by the caller). */
ZT_ADAMW_FN void zt_adamw_step(float *p, const float *grad, float *m, float *v, size_t i,
                               float lr, float b1, float b2, float ob1, float ob2, float eps,
                               float wd, float bc1, float bc2, float grad_scale) {
    const float g = grad[i] * grad_scale;
    const float mi = b1 * m[i] + ob1 * g;
    const float vi = b2 * v[i] + ob2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    const float pi = p[i];
    p[i] = pi - lr * (mhat / (sqrtf(vhat) + eps) + wd * pi);
}

/* Global-norm clipping: the factor of the gradients for global norm
 * `norm` and threshold max_norm (<= 0: none), in double -- 1 unless norm >
 * max_norm, then max_norm / (norm + 1e-6).  Shared by libtrain's
 * zt_clip_scale (host) and adamw_multi's gate (device code), so both
 * compute the same double (IEEE sqrt, addition and division). */
ZT_ADAMW_FN double zt_adamw_clip(double norm, double max_norm) {
    if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
    return max_norm / (norm + 1e-6);
}

#endif
