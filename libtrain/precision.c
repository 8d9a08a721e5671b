/* precision.c -- mixed-precision modes, the fp16 loss scaler, helpers.
 * See precision.h for the semantics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "precision.h"

zt_precision zt_precision_of(const zt_config *cfg) {
    if (cfg->bf16_enabled) return ZT_PREC_BF16;
    if (cfg->fp16_enabled) return ZT_PREC_FP16;
    return ZT_PREC_FP32;
}

const char *zt_precision_name(zt_precision p) {
    switch (p) {
    case ZT_PREC_BF16: return "bf16";
    case ZT_PREC_FP16: return "fp16";
    default: return "fp32";
    }
}

zt_dtype zt_precision_dtype(zt_precision p) {
    switch (p) {
    case ZT_PREC_BF16: return ZT_BF16;
    case ZT_PREC_FP16: return ZT_F16;
    default: return ZT_F32;
    }
}

size_t zt_precision_elem_size(zt_precision p) { return p == ZT_PREC_FP32 ? 4 : 2; }

int zt_matmul_bf16_of(const zt_config *cfg, int cuda) {
    if (strcmp(cfg->matmul_precision, "bf16") == 0) return 1;
    if (strcmp(cfg->matmul_precision, "fp32") == 0) return 0;
    return cuda && cfg->bf16_enabled;
}

int zt_weights16_of(const zt_config *cfg) {
    if (!cfg->bf16_enabled) return 0;
    if (strcmp(cfg->backend, "cuda") == 0 && !zt_matmul_bf16_of(cfg, 1)) return 0;
    /* test hook (tests/test_count.c: bitwise the rounding path; outside the
     * ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_W16");
}

int zt_acts16_of(const zt_config *cfg, int cuda) {
    if (!cfg->bf16_enabled || !zt_matmul_bf16_of(cfg, cuda)) return 0;
    /* test hook (tests/test_count.c: bitwise the fp32 activations' path;
     * outside the ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_ACT16");
}

/* the bf16-output paths' test hooks (config.h ZT_W16_*; tests/test_count.c:
 * bitwise the to_bf16 paths; outside the ZTRAIN_ namespace on purpose): a
 * hook set, its path off.  A new hook: one row. */
static const struct {
    const char *env;
    uint64_t bit;
} out16_hooks[] = {
    {"ZT_TEST_NO_O16", ZT_W16_O16},     {"ZT_TEST_NO_N16", ZT_W16_N16},
    {"ZT_TEST_NO_R16", ZT_W16_R16},     {"ZT_TEST_NO_AO16", ZT_W16_AO16},
    {"ZT_TEST_NO_D16", ZT_W16_D16},     {"ZT_TEST_NO_QKR16", ZT_W16_QKR16},
    {"ZT_TEST_NO_AB16", ZT_W16_AB16},   {"ZT_TEST_NO_X16", ZT_W16_X16},
    {"ZT_TEST_NO_G16", ZT_W16_G16},     {"ZT_TEST_NO_SP16", ZT_W16_SP16},
    {"ZT_TEST_NO_RB16", ZT_W16_RB16},   {"ZT_TEST_NO_DO16", ZT_W16_DO16},
    {"ZT_TEST_NO_ADDFOLD", ZT_W16_ADDFOLD}, {"ZT_TEST_NO_HEADFUSE", ZT_W16_HEADFUSE},
    {"ZT_TEST_NO_LORAACC", ZT_W16_LORAACC},
    {"ZT_TEST_NO_LORABT", ZT_W16_LORABT},
    {"ZT_TEST_NO_LORASWAP", ZT_W16_LORASWAP},
    {"ZT_TEST_NO_QKV16", ZT_W16_QKV16},
    {"ZT_TEST_NO_GPT16", ZT_W16_GPT16},
    {"ZT_TEST_NO_BWDSWAP", ZT_W16_BWDSWAP},
    {"ZT_TEST_NO_GLUROUND", ZT_W16_GLUROUND},
    {"ZT_TEST_NO_KEEPH", ZT_W16_KEEPH},
    {"ZT_TEST_NO_LORA16", ZT_W16_LORA16},
    {"ZT_TEST_NO_LGATE", ZT_W16_LGATE},
    {"ZT_TEST_NO_GU16", ZT_W16_GU16},
    {"ZT_TEST_NO_LORAPATH", ZT_W16_LORAPATH},
    {"ZT_TEST_NO_BRANCH16", ZT_W16_BRANCH16},
    {"ZT_TEST_NO_DOUT16N", ZT_W16_DOUT16N},
    {"ZT_TEST_NO_QKB16", ZT_W16_QKB16},
    {"ZT_TEST_NO_DH16", ZT_W16_DH16},
    {"ZT_TEST_NO_LBRANCH16", ZT_W16_LBRANCH16},
    {"ZT_TEST_NO_LGRAD16", ZT_W16_LGRAD16},
    {"ZT_TEST_NO_LO16", ZT_W16_LO16},
    {"ZT_TEST_NO_MOE16", ZT_W16_MOE16},
    {"ZT_TEST_NO_EP16", ZT_W16_EP16},
    {"ZT_TEST_NO_MX16", ZT_W16_MX16},
    {"ZT_TEST_MOE_KEEP_YP", ZT_W16_NOYP},
    {"ZT_TEST_NO_MOED16", ZT_W16_MOED16},
    {"ZT_TEST_NO_MOEGB", ZT_W16_MOEGB},
    {"ZT_TEST_NO_MOEGW", ZT_W16_MOEGW},
    {"ZT_TEST_NO_EPYP16", ZT_W16_EPYP16},
    {"ZT_TEST_NO_EPX16", ZT_W16_EPX16},
    {"ZT_TEST_NO_EPDY16", ZT_W16_EPDY16},
    {"ZT_TEST_NO_EPDX16", ZT_W16_EPDX16},
    {"ZT_TEST_NO_GATHER16", ZT_W16_GATHER16},
    {"ZT_TEST_NO_EPGB", ZT_W16_EPGB},
    {"ZT_TEST_NO_GPTN16", ZT_W16_GPTN16},
    {"ZT_TEST_NO_LNSUM", ZT_W16_LNSUM},
    {"ZT_TEST_NO_GELUE", ZT_W16_GELUE},
    {"ZT_TEST_NO_GBRANCH16", ZT_W16_GBRANCH16},
    {"ZT_TEST_NO_MLPSUM", ZT_W16_MLPSUM},
    {"ZT_TEST_NO_HEADFRESH", ZT_W16_HEADFRESH},
};

void zt_out16_of(zt_model_config *mc) {
    /* (read here once a run, not per block) */
    mc->w16 = 0;
    for (size_t i = 0; i < sizeof out16_hooks / sizeof out16_hooks[0]; i++)
        if (!getenv(out16_hooks[i].env)) mc->w16 |= out16_hooks[i].bit;
}

int zt_nf4w16_of(void) {
    /* test hook (tests/test_lora.c: bitwise the fp32 copy's path; outside
     * the ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_NF4W16");
}

int zt_nf4view_of(void) {
    /* test hook (tests/test_count.c: bitwise the zero-filled, copied
     * temporaries' path; outside the ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_NF4VIEW");
}

int zt_gradfresh_of(void) {
    /* test hook (tests/test_count.c: bitwise the zeroed gradients' path;
     * outside the ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_GRADFRESH");
}

int zt_widen_runs_of(void) {
    /* test hook (tests/test_count.c: bitwise the per-run path; outside the
     * ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_WIDENRUNS");
}

int zt_ckptkeep_of(void) {
    /* test hook (tests/test_count.c, tests/test_memplan.c: bitwise every
     * group recomputed; outside the ZTRAIN_ namespace on purpose) */
    return !getenv("ZT_TEST_NO_CKPTKEEP");
}

zt_dtype zt_comm_dtype_of(const zt_config *cfg) {
    if (strcmp(cfg->comm_dtype, "bf16") == 0) return ZT_BF16;
    if (strcmp(cfg->comm_dtype, "fp16") == 0) return ZT_F16;
    return ZT_F32;
}

/* ------------------------------------------------------------ loss scaler */

void zt_scaler_init(zt_loss_scaler *ls, const zt_config *cfg) {
    memset(ls, 0, sizeof *ls);
    ls->enabled = cfg->fp16_enabled != 0;
    ls->dynamic = ls->enabled && cfg->fp16_loss_scale == 0.0;
    ls->min_scale = cfg->fp16_min_loss_scale;
    ls->window = cfg->fp16_loss_scale_window > 0 ? cfg->fp16_loss_scale_window : 1;
    ls->hysteresis = cfg->fp16_hysteresis > 0 ? cfg->fp16_hysteresis : 1;
    if (!ls->enabled) ls->s.scale = 1.0;
    else if (ls->dynamic) ls->s.scale = ldexp(1.0, cfg->fp16_initial_scale_power);
    else ls->s.scale = cfg->fp16_loss_scale;
    ls->s.good_steps = 0;
    ls->s.hysteresis_left = ls->hysteresis;
}

int zt_scaler_update(zt_loss_scaler *ls, int overflow, long step, int *skip, zt_status *st) {
    *skip = 0;
    if (!ls->enabled) return ZT_OK;
    if (!overflow) {
        if (!ls->dynamic) return ZT_OK;
        if (++ls->s.good_steps >= ls->window) {
            ls->s.scale *= 2.0;
            ls->s.good_steps = 0;
            ls->s.hysteresis_left = ls->hysteresis;
            ls->grows++;
        }
        return ZT_OK;
    }
    if (ls->dynamic) {
        if (ls->s.hysteresis_left <= 1) {
            if (ls->s.scale <= ls->min_scale)
                return zt_fail(st, ZT_EDATA,
                               "fp16 loss scale already at minimum (%g = fp16.min_loss_scale) "
                               "and the gradients of step %ld still overflow: the run diverged "
                               "or needs a smaller fp16.min_loss_scale, a lower learning rate, "
                               "or bf16", ls->s.scale, step);
            double next = ls->s.scale / 2.0;
            ls->s.scale = next > ls->min_scale ? next : ls->min_scale;
            ls->shrinks++;
        } else {
            ls->s.hysteresis_left--;
        }
        ls->s.good_steps = 0;
    }
    ls->skipped++;
    *skip = 1;
    return ZT_OK;
}

int zt_scaler_set_state(zt_loss_scaler *ls, const zt_scaler_state *s, zt_status *st) {
    if (!(isfinite(s->scale) && s->scale > 0.0))
        return zt_fail(st, ZT_EDATA, "loss-scaler state: scale %g is not a positive finite "
                       "number", s->scale);
    if (s->good_steps < 0 || s->hysteresis_left < 1)
        return zt_fail(st, ZT_EDATA, "loss-scaler state: good_steps %lld / hysteresis_left %d "
                       "out of range", (long long)s->good_steps, (int)s->hysteresis_left);
    ls->s = *s;
    ls->s.reserved = 0;
    if (!ls->enabled) ls->s.scale = 1.0;
    return ZT_OK;
}

/* ------------------------------------------------------------ helpers */

size_t zt_prec_unscale_check(const zt_backend *be, float *g, size_t n, float inv_scale) {
    if (inv_scale != 1.0f) be->scale(g, n, inv_scale);
    return be->nonfinite(g, n);
}

int zt_prec_overflow_any(zt_group *g, size_t local_nonfinite, int *overflow, zt_status *st) {
    int32_t v = local_nonfinite > 0;
    if (g && g->size > 1) ZT_TRY(g->ops->allreduce_max(g, &v, 1, ZT_I32, st));
    *overflow = v != 0;
    return ZT_OK;
}

void zt_prec_narrow(const zt_backend *be, zt_precision p, void *dst, const float *src, size_t n) {
    switch (p) {
    case ZT_PREC_BF16: be->to_bf16(dst, src, n); break;
    case ZT_PREC_FP16: be->to_f16(dst, src, n); break;
    default: be->copy(dst, src, n * sizeof(float)); break;
    }
}

void zt_prec_widen(const zt_backend *be, zt_precision p, float *dst, const void *src, size_t n) {
    switch (p) {
    case ZT_PREC_BF16: be->from_bf16(dst, src, n); break;
    case ZT_PREC_FP16: be->from_f16(dst, src, n); break;
    default: be->copy(dst, src, n * sizeof(float)); break;
    }
}
