/* perf.c -- the model's FLOPs a token and a device's peak, for the
 * throughput the progress line and the metrics report (ztrain.h
 * zt_ctx_flops_per_token, zt_ctx_peak_tflops; docs/production.md). */
#include <stdio.h>
#include <string.h>

#include "ctx.h"
#include "arch.h"
#include "precision.h"

/* bench/README.md's count, which bench/costmodel, bench/measure_json.py and
 * the PyTorch scripts use too (as llm.c and torchtitan count): a matmul
 * parameter's multiply-add 2 FLOPs forward, 4 backward (input and weight
 * gradients), so 6 a trained parameter and 4 a frozen one (LoRA's base: no
 * weight gradient); the causal attention's scores and weighted values
 * 6 L (n_head head_dim) T a token (half of 12: the masked half is not
 * counted).  A Mixture of Experts counts the parameters a token runs: of
 * each sparse block's E routed experts (3 C Im each: gate|up and down),
 * its K. */
double zt_ctx_flops_per_token(const zt_ctx *ctx) {
    const zt_model_config *mc = &ctx->cfg->model;
    const double all = (double)ctx->model->num_params;
    const double trained = ctx->lmodel ? (double)ctx->lmodel->num_params : all;
    const double frozen = ctx->lmodel ? all : 0.0;
    /* the routed experts a token does not run (the architecture's count,
     * the estimate's active parameters: tests/hf_moe.sh holds it to
     * transformers') */
    const zt_arch *ar = zt_arch_of_ops(ctx->model->ops);
    const double idle = ar && ar->inactive_params ? (double)ar->inactive_params(mc) : 0.0;
    /* (idle experts are frozen or trained as the rest: LoRA's adapters are
     * never on the experts, so with LoRA they are the base's) */
    double f = ctx->lmodel ? 6.0 * trained + 4.0 * (frozen - idle) : 6.0 * (trained - idle);
    /* the attention: the built-in models only (a model of the caller's own:
     * its parameters' terms alone) */
    if (ar)
        f += 6.0 * mc->n_layer * (double)mc->n_head * (double)zt_model_head_dim(mc) *
             (double)ctx->cfg->seq_len;
    return f;
}

/* Dense peaks (TFLOP/s) by device name, from NVIDIA's data sheets: the
 * 16-bit tensor cores without sparsity, and fp32 without tensor cores
 * (ztrain does not use TF32).  The first match wins, so the more specific
 * name first. */
static const struct {
    const char *a, *b;   /* both in the name (b NULL: a alone) */
    double bf16, fp32;
} PEAKS[] = {
    {"H100", "NVL", 835.5, 60.0},
    {"H100", "PCIe", 756.0, 51.2},
    {"H100", NULL, 989.4, 66.9},   /* SXM */
    {"H200", "NVL", 835.5, 60.0},
    {"H200", NULL, 989.4, 66.9},   /* SXM (GH200 too) */
    {"A100", NULL, 312.0, 19.5},
};

double zt_peak_tflops_of_name(const char *name, int b16) {
    for (size_t i = 0; name && i < sizeof PEAKS / sizeof PEAKS[0]; i++)
        if (strstr(name, PEAKS[i].a) && (!PEAKS[i].b || strstr(name, PEAKS[i].b)))
            return b16 ? PEAKS[i].bf16 : PEAKS[i].fp32;
    return 0.0;
}

double zt_ctx_peak_tflops(const zt_ctx *ctx, char *src, size_t n) {
    if (src && n) src[0] = 0;
    const zt_config *c = ctx->cfg;
    if (c->peak_tflops > 0) {
        if (src && n) snprintf(src, n, "ztrain.peak_tflops");
        return c->peak_tflops;
    }
    /* a GPU's name from the backend (cuda); the CPU backends name none */
    char name[128] = "";
    size_t fr = 0, tot = 0;
    if (!ctx->be || !ctx->be->device_memory || strcmp(ctx->be->name, "cuda") ||
        ctx->be->device_memory(&fr, &tot, name, sizeof name) != 0)
        return 0.0;
    const int b16 = zt_matmul_bf16_of(c, 1);
    const double p = zt_peak_tflops_of_name(name, b16);
    if (p > 0 && src && n) snprintf(src, n, "%s, %s dense", name, b16 ? "16-bit tensor cores" : "fp32");
    return p;
}
