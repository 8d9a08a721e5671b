/* optim.c -- AdamW, WarmupCosineLR schedule, global-norm clipping. */
#include <math.h>
#include <string.h>
#include "adamw_step.h"
#include "optim.h"

int zt_adamw_init(zt_adamw *o, const zt_config *cfg, size_t n, zt_status *st) {
    memset(o, 0, sizeof *o);
    o->n = n;
    o->b1 = cfg->beta1;
    o->b2 = cfg->beta2;
    o->eps = cfg->eps;
    o->wd = cfg->weight_decay;
    /* offload_optimizer=cpu: the moments live in host memory (on a device
     * backend AdamW then runs on the host: shard.c); pin_memory page-locks them */
    const int off = strcmp(cfg->offload_optimizer, "none") != 0;
    const int tag = ZT_MEM_OPTIMIZER | (off ? ZT_MEM_ON_HOST : 0) |
                    (off && cfg->pin_optimizer ? ZT_MEM_PIN : 0);
    o->m = zt_mem_alloc((n ? n : 1) * sizeof(float), tag, st);
    o->v = zt_mem_alloc((n ? n : 1) * sizeof(float), tag, st);
    /* the step's scalars: written by kernels of the model's backend
     * (device memory on a device backend, also when the state is offloaded) */
    if (o->m && o->v) o->scal = zt_mem_alloc(sizeof *o->scal, ZT_MEM_WORKSPACE, st);
    /* on a device backend, where the step reads them back into: page-locked
     * (the asynchronous read returns at once; mem.c ZT_MEM_PIN) */
    int hs_ok = 1;
    if (o->scal && zt_mem_device_backend())
        hs_ok = (o->hscal = zt_mem_alloc(sizeof *o->hscal, ZT_MEM_WORKSPACE | ZT_MEM_HOST | ZT_MEM_PIN,
                                         st)) != NULL;
    if (!o->m || !o->v || !o->scal || !hs_ok) {
        zt_adamw_free(o);
        return zt_fail_prefix(st, "AdamW state");
    }
    o->fresh = 1;   /* zt_mem_alloc's blocks are zero (and, on the host, untouched) */
    return ZT_OK;
}

void zt_adamw_free(zt_adamw *o) {
    zt_mem_free(o->m);
    zt_mem_free(o->v);
    zt_mem_free(o->scal);
    zt_mem_free(o->hscal);
    o->m = o->v = NULL;
    o->scal = o->hscal = NULL;
}

void zt_adamw_begin(zt_adamw *o) {
    o->fresh = 0;
    o->t++;
    o->bc1 = (float)(1.0 - pow(o->b1, (double)o->t));
    o->bc2 = (float)(1.0 - pow(o->b2, (double)o->t));
}

void zt_adamw_range(zt_adamw *o, const zt_model *m, const zt_backend *be, size_t lo, size_t hi,
                    float *p, const float *g, float *mm, float *vv, double lr, double grad_scale) {
    for (int i = 0; i < m->n_tensors; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        size_t k = a - lo;
        be->adamw(p + k, g + k, mm + k, vv + k, b - a, (float)lr, (float)o->b1, (float)o->b2,
                     (float)o->eps, t->decay ? (float)o->wd : 0.0f, o->bc1, o->bc2,
                     (float)grad_scale);
    }
}

double zt_lr_at(const zt_config *cfg, long s) {
    double base = cfg->lr;
    if (!strcmp(cfg->scheduler_type, "none")) return base;
    long warm = cfg->warmup_steps;
    long total = cfg->total_steps > 0 ? cfg->total_steps : cfg->steps;
    if (!strcmp(cfg->scheduler_type, "WarmupLR") || !strcmp(cfg->scheduler_type, "WarmupDecayLR")) {
        /* DeepSpeed's: min + (max - min) * gamma */
        double lo = cfg->warmup_min_lr, gamma;
        if (s < warm) {
            if (!strcmp(cfg->warmup_type, "log"))
                gamma = warm > 1 ? log((double)s + 1.0) / log((double)warm) : 1.0;
            else
                gamma = (double)s / (double)warm;
        } else if (!strcmp(cfg->scheduler_type, "WarmupLR")) {
            gamma = 1.0;
        } else {
            double span = (double)(total - warm) > 1.0 ? (double)(total - warm) : 1.0;
            gamma = (double)(total - s) / span;
            if (gamma < 0.0) gamma = 0.0;
        }
        return lo + (base - lo) * gamma;
    }
    if (s < warm) {
        double frac;
        if (!strcmp(cfg->warmup_type, "log"))
            frac = log((double)s + 1.0) / log((double)warm + 1.0);
        else
            frac = (double)(s + 1) / (double)warm;
        return base * (cfg->warmup_min_ratio + (1.0 - cfg->warmup_min_ratio) * frac);
    }
    double span = (double)(total - warm);
    double prog = span > 0 ? (double)(s - warm) / span : 1.0;
    if (prog > 1.0) prog = 1.0;
    double cosf_ = 0.5 * (1.0 + cos(M_PI * prog));
    return base * (cfg->cos_min_ratio + (1.0 - cfg->cos_min_ratio) * cosf_);
}

double zt_clip_scale(double grad_norm, double max_norm) { return zt_adamw_clip(grad_norm, max_norm); }
