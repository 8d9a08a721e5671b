/* optim.h -- AdamW with decoupled weight decay, LR schedule, clipping. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H
#include "config.h"
#include "model.h"

typedef struct zt_adamw {
    float *m, *v;           /* moments for the n elements this rank updates */
    size_t n;
    long t;                 /* updates applied */
    double b1, b2, eps, wd;
    float bc1, bc2;         /* bias corrections of the current update */
    int fresh;              /* m and v still hold the zeros they were allocated with
                             * (no update, no restore wrote them) */
    zt_step_scalars *scal;  /* the step's scalars (loss sum, gradient sum of squares,
                             * non-finite count) in the model backend's memory: what
                             * the step reads back once, and the update's gate */
    zt_step_scalars *hscal; /* a device backend's host memory the step reads them into,
                             * page-locked where the backend can pin (NULL on cpu) */
} zt_adamw;

/* Moments for n elements (and the step's scalars, 32 bytes of the
 * backend's memory, ZT_MEM_WORKSPACE; on a device backend also 32 bytes of
 * page-locked host memory, hscal: ZT_MEM_WORKSPACE | ZT_MEM_HOST | ZT_MEM_PIN). */
int zt_adamw_init(zt_adamw *o, const zt_config *cfg, size_t n, zt_status *st);
void zt_adamw_free(zt_adamw *o);
/* Start an update (once per optimizer step, before zt_adamw_range). */
void zt_adamw_begin(zt_adamw *o);
/* Update the logical elements [lo, hi): p, g, mm, vv point at element lo,
 * all memory of backend be (the model's backend, or the cpu backend for
 * optimizer state offloaded to the host).  Weight decay only where the
 * element's tensor is marked decay. */
void zt_adamw_range(zt_adamw *o, const zt_model *m, const zt_backend *be, size_t lo, size_t hi,
                    float *p, const float *g, float *mm, float *vv, double lr, double grad_scale);

/* Learning rate for 0-based step s (the step about to be taken). */
double zt_lr_at(const zt_config *cfg, long s);
/* Clip factor for a global gradient norm (1 when no clipping needed):
 * zt_adamw_clip (kernels/adamw_step.h), which adamw_multi's gate computes
 * on the device. */
double zt_clip_scale(double grad_norm, double max_norm);

#endif
