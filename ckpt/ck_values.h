/* ck_values.h -- refuse values that no trained state holds, on every load
 * path (llm.c weights files, Hugging Face safetensors, checkpoints). */
#ifndef ZT_CK_VALUES_H
#define ZT_CK_VALUES_H
#include <math.h>
#include <stdint.h>
#include "internal.h"

/*
 * x[n] are elements [at, at + n) of tensor `tensor` read from `file`; `what`
 * names the family ("weights", "AdamW m", "AdamW v").  NaN or Inf anywhere,
 * or a negative second moment (nonneg = 1), is ZT_EDATA naming the file, the
 * tensor and the first bad element: training from it would turn every
 * update into NaN, silently, steps later.
 */
static inline int ck_check_values(const float *x, uint64_t n, uint64_t at, int nonneg,
                                  const char *what, const char *file, const char *tensor,
                                  zt_status *st) {
    for (uint64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (isfinite(v) && !(nonneg && v < 0.0f)) continue;
        return zt_fail(st, ZT_EDATA, "%s: tensor %s (%s) element %llu is %s: refusing %s values "
                       "(a diverged run or a damaged export; use an earlier checkpoint or the "
                       "original model)", file, tensor, what, (unsigned long long)(at + i),
                       isnan(v) ? "NaN" : isinf(v) ? (v > 0 ? "Inf" : "-Inf") : "negative",
                       isfinite(v) ? "negative second-moment" : "non-finite");
    }
    return ZT_OK;
}
#endif
