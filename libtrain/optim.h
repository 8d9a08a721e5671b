/* optim.h -- AdamW with decoupled weight decay, LR schedule, clipping. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H
#include "config.h"
#include "model.h"

typedef struct zt_adamw {
    float *m, *v;           /* moments for the elements this rank updates */
    size_t lo, hi;          /* element range [lo, hi) of the parameter block */
    long t;                 /* updates applied */
    double b1, b2, eps, wd;
} zt_adamw;

/* Moments for parameter elements [lo, hi). */
int zt_adamw_init(zt_adamw *o, const zt_config *cfg, size_t lo, size_t hi, zt_status *st);
void zt_adamw_free(zt_adamw *o);
/* One update of params[lo, hi) from grads[lo, hi) (both full-block
 * pointers).  Weight decay only on tensors marked decay. */
void zt_adamw_step(zt_adamw *o, const zt_gpt *m, float *params, const float *grads,
                   double lr, double grad_scale);

/* Learning rate for 0-based step s (the step about to be taken). */
double zt_lr_at(const zt_config *cfg, long s);
/* Clip factor for a global gradient norm (1 when no clipping needed). */
double zt_clip_scale(double grad_norm, double max_norm);

#endif
