/*
 * costmodel.c -- a GPU training step predicted without a GPU.
 *
 *   bench/costmodel [--shape S]... [--calib FILE] [--stage N] [--fp32]
 *                   [--act-ckpt none|blocks|blocks-attn|every-K] [--offload none|optimizer|params]
 *                   [--what-if bf16-operands,fused-xent] [--kernels N] [--launches N]
 *                   [--attention cudnn|ztrain] [--assume cudnn=E][,host_adam=G]
 *   bench/costmodel --calibrate BENCH.txt      (a calibration file on stdout)
 *   bench/costmodel --rows BENCH.txt [--calib FILE]
 *
 * The engine runs one step on the counting backend (kernels/count.h), as
 * `ztrain train --backend cuda --precision bf16` would on one GPU; the
 * roofline of costmodel.h, calibrated on a recorded bench_gpu table, turns
 * the counts into a time: the step, by kernel class and by kernel.  Shapes:
 * gpt2 (GPT-2 124M, B=8, T=1024), smollm (SmolLM-135M, B=8, T=2048),
 * llama3.2-1b, llama3.2-3b, llama3.1-8b (B=4, T=2048), or
 * gpt2:L,H,C,V,B,T / llama:L,NH,NKV,C,I,V,B,T[,untied][,qk_norm].  Where the
 * calibration's source recorded the engine step of the shape, it prints
 * the measurement and the ratio.
 *
 * --attention: which attention path the modelled build takes: cudnn (a
 * build with cuDNN: kernels/cuda/cuda_sdpa.cu's rule) or ztrain (its own
 * kernels); default: what this build has.  cuDNN's classes (cudnn_fwd,
 * cudnn_bwd) are uncalibrated until a bench_gpu table of a cuDNN build is
 * fitted: the step is then printed without them ("predicted step without
 * attention"), their launches listed as uncalibrated; --assume cudnn=E
 * gives them an efficiency E of the bf16 peak, printed as a WHAT-IF.
 *
 * --act-ckpt: the step with activation checkpointing
 * (activation_checkpointing.policy): the backward's recomputed forwards
 * are counted and timed like any launch; MFU still counts the model's
 * FLOPs only (6 a trained parameter a token), so the recompute lowers it.
 *
 * --offload optimizer|params: the step with ZeRO-Offload
 * (zero_optimization.offload_optimizer.device=cpu, --stage >= 1) or the
 * parameters offloaded too (offload_param.device=cpu, --stage 3; a QLoRA
 * base's 4-bit slices with --lora-base): the step's host <-> device copies
 * by direction, of them what offloading adds (the planner's figure, as
 * `ztrain estimate` prints it), their time at the calibration's ASSUMED
 * bus rate, and the share of the step; the host's AdamW is no device
 * kernel: --assume host_adam=G times the bytes it moves (the engine's host
 * optimizer state read and written, the gradients read, the 16-bit
 * parameters written) at an assumed G GB/s, else it is left out and the
 * output says so.  --offload none reports the step's copies alone.
 *
 * --launches N lists the N costliest launch signatures (a kernel with its
 * per-launch FLOPs and bytes: one GEMM shape, one norm size), -1 all.
 *
 * --calibrate fits the classes on a bench.txt's kernel rows (costmodel.h);
 * --rows prints those rows measured against predicted.  --what-if models
 * planned changes (count.h): the output is then a model of code that does
 * not exist yet, not a measurement of anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel_run.h"

#ifndef CM_DEFAULT_CALIB
#define CM_DEFAULT_CALIB "bench/costmodel_h100.txt"
#endif

static void usage(void) {
    fprintf(stderr,
            "usage: costmodel [--shape gpt2|smollm|llama3.2-1b|llama3.2-3b|llama3.1-8b|mixtral-8x7b|qwen3-30b-a3b|"
            "gpt2:L,H,C,V,B,T|\n"
            "                  llama:L,NH,NKV,C,I,V,B,T[,untied][,qk_norm][,hd=D][,moe=E:K:Im[:S]]]... [--calib FILE]\n"
            "                 [--stage N] [--fp32]\n"
            "                 [--classifier-chunk-rows N] [--lora R[:TARGETS]] [--lora-base nf4|nf4-dq]\n"
            "                 [--act-ckpt none|blocks|blocks-attn|every-K] [--offload none|optimizer|params]\n"
            "                 [--what-if bf16-operands,fused-xent] [--kernels N] [--launches N]\n"
            "                 [--attention cudnn|ztrain] [--assume cudnn=E|cudnn_fwd=E,cudnn_bwd=E][,host_adam=GB/s]\n"
            "       costmodel --calibrate BENCH.txt\n"
            "       costmodel --rows BENCH.txt [--calib FILE]\n");
}

typedef struct agg { const char *name; int cls; long launches; double flops, bytes, s; } agg;

static int by_time(const void *a, const void *b) {
    const double x = ((const agg *)a)->s, y = ((const agg *)b)->s;
    return x < y ? 1 : x > y ? -1 : strcmp(((const agg *)a)->name, ((const agg *)b)->name);
}

static void rate(char *buf, size_t n, int cls, double flops, double bytes, double s) {
    if (s <= 0) snprintf(buf, n, "-");
    else if (cm_compute_class(cls)) snprintf(buf, n, "%7.1f TFLOP/s", flops / s * 1e-12);
    else snprintf(buf, n, "%7.1f GB/s", bytes / s * 1e-9);
}

/* --assume host_adam=G: the host memory bandwidth (GB/s) the offloaded AdamW is timed at (0: left out) */
static double host_adam_gbs;
/* --offload given (none too: the step's transfers are reported) */
static int offload_asked;

/* --offload: the step's host <-> device copies by direction, their time at
 * the calibration's assumed bus rate, and the host's AdamW (not a device
 * kernel: counted nowhere else) at --assume host_adam's bandwidth, or left
 * out; the step with and without the host part */
static void offload_report(const cm_calib *cal, const cm_counts *cn, const cm_run_opts *o, double step,
                           int uncal) {
    double up = 0, down = 0, ts = 0;
    long nup = 0, ndown = 0;
    for (size_t i = 0; i < cn->nk; i++) {
        if (cn->k[i].cls != ZT_CC_HOST) continue;
        const int h2d = !strcmp(cn->k[i].name, "cudaMemcpyAsync H2D");
        if (h2d) up += cn->k[i].bytes * cn->k[i].launches, nup += cn->k[i].launches;
        else down += cn->k[i].bytes * cn->k[i].launches, ndown += cn->k[i].launches;
        ts += cn->k[i].launches * cm_kernel_s(cal, ZT_CC_HOST, cn->k[i].flops, cn->k[i].bytes);
    }
    if (!o->offload) {
        printf("  offload none: host<->device a step: %.0f bytes up (%ld H2D), %.0f bytes down (%ld D2H) counted "
               "(the token batches, the step's scalars); %.1f ms at the ASSUMED bus rate of %s (%g GB/s + %g us a "
               "transfer; not measured)\n", up, nup, down, ndown, ts * 1e3, cal->source, cal->host_gbs, cal->host_us);
        return;
    }
    printf("  offload %s (%s = cpu, pin_memory false): AdamW on the host%s\n",
           o->offload == CM_OFFLOAD_PARAMS ? "params" : "optimizer",
           o->offload == CM_OFFLOAD_PARAMS ? "offload_param and offload_optimizer" : "offload_optimizer",
           o->offload == CM_OFFLOAD_PARAMS ? ", the parameter shards in host memory (each gather uploads its "
                                             "slice)" : "");
    printf("  host<->device a step: %.0f bytes up (%ld H2D), %.0f bytes down (%ld D2H) counted; of them offloading "
           "%.0f up, %.0f down (%.3f GB, %.3f GB: the planner's, ztrain estimate's 'offload traffic'); %.1f ms at "
           "the ASSUMED bus rate of %s (%g GB/s + %g us a transfer; not measured), one after another, no overlap: "
           "%.1f%% of the step%s\n",
           up, nup, down, ndown, cn->off_h2d, cn->off_d2h, cn->off_h2d / 1e9, cn->off_d2h / 1e9, ts * 1e3,
           cal->source, cal->host_gbs, cal->host_us, 100 * ts / step, uncal ? " without attention" : "");
    /* the bytes the host's AdamW moves: the offloaded state read and written
     * (master weights and moments: the engine's host optimizer bytes; fp32
     * with the parameters offloaded, the parameter shard is the master), the
     * gradient slice read, the 16-bit parameters written (mixed) */
    const double n = cn->host_adam_elems;
    const double hb = 2.0 * cn->host_opt_bytes + 4 * n + (o->fp32 ? (o->offload == CM_OFFLOAD_PARAMS ? 8 * n : 0) : 2 * n);
    if (host_adam_gbs > 0) {
        const double ha = hb / (host_adam_gbs * 1e9);
        printf("  host AdamW: %.3f GB a step (%.0f bytes, %.0f elements: the host optimizer state, %.0f bytes of "
               "%s, read and written, the fp32 gradients read%s) at an ASSUMED %g GB/s (--assume host_adam; not "
               "measured): %.1f ms; the host runs it after the gradients come down, nothing overlaps it in this "
               "model\n",
               hb / 1e9, hb, n, cn->host_opt_bytes,
               o->fp32 && o->offload == CM_OFFLOAD_PARAMS ? "moments (the fp32 parameter shard, the master, read "
                                                            "and written too)"
                                                          : "master weights and moments",
               o->fp32 ? "" : ", the bf16 parameters written", host_adam_gbs, ha * 1e3);
        printf("  WHAT-IF step with the host AdamW: %.1f ms (device and transfers %.1f ms + host %.1f ms; the "
               "transfers %.1f%% of it; the engine overlaps the update's copies with the host AdamW unit by unit: "
               "an upper bound on that part)\n", (step + ha) * 1e3, step * 1e3, ha * 1e3, 100 * ts / (step + ha));
    } else {
        printf("  host AdamW: %.3f GB a step (%.0f bytes, %.0f elements) LEFT OUT of the step above (the host's "
               "memory bandwidth is the site's: --assume host_adam=GB/s times it)\n", hb / 1e9, hb, n);
    }
}

static int report(const cm_calib *cal, const cm_shape *sh, const cm_run_opts *o, int top, int nlaunch) {
    zt_status st;
    memset(&st, 0, sizeof st);
    cm_counts cn;
    if (cm_count_step(sh, o, zt_backend_count(), &cn, &st) != ZT_OK) {
        fprintf(stderr, "costmodel: shape %s: %s\n", sh->name, st.msg);
        return 1;
    }
    double pc[ZT_CC_N];
    const double step = cm_step_s(cal, cn.k, cn.nk, &cn.tot, pc);
    /* launches of classes the calibration has no efficiency for (cuDNN's
     * attention before a bench_gpu table of a cuDNN build): left out */
    long ul[ZT_CC_N] = {0}, att_cudnn = 0, nuncal = 0;
    for (size_t i = 0; i < cn.nk; i++) {
        if (cn.k[i].cls == ZT_CC_CUDNN_FWD || cn.k[i].cls == ZT_CC_CUDNN_BWD) att_cudnn += cn.k[i].launches;
        if (cm_uncalibrated(cal, cn.k[i].cls)) ul[cn.k[i].cls] += cn.k[i].launches, nuncal += cn.k[i].launches;
    }
    char uncal[160] = "";
    for (int c = 0; c < ZT_CC_N; c++)
        if (ul[c]) {
            const size_t l = strlen(uncal);
            snprintf(uncal + l, sizeof uncal - l, "%s%s x%ld", l ? ", " : "", zt_count_class_name(c), ul[c]);
        }
    char key[96];
    cm_shape_key(sh, key, sizeof key);
    if (sh->llama && sh->E)
        printf("shape %s: llama MoE L=%d NH=%d NKV=%d C=%d%s E=%d K=%d Im=%d S=%d V=%d %s, B=%d T=%d", sh->name, sh->L,
               sh->NH, sh->NKV, sh->C, sh->qk_norm ? " qk_norm" : "", sh->E, sh->K, sh->Im, sh->S, sh->V,
               sh->untied ? "untied" : "tied", sh->B, sh->T);
    else if (sh->llama)
        printf("shape %s: llama L=%d NH=%d NKV=%d C=%d I=%d V=%d %s, B=%d T=%d", sh->name, sh->L, sh->NH,
               sh->NKV, sh->C, sh->I, sh->V, sh->untied ? "untied" : "tied", sh->B, sh->T);
    else
        printf("shape %s: gpt2 L=%d H=%d C=%d V=%d, B=%d T=%d", sh->name, sh->L, sh->NH, sh->C, sh->V, sh->B,
               sh->T);
    printf("; %s, stage %d%s, 1 rank; %.1fM params\n", o->fp32 ? "fp32" : "bf16", o->stage,
           o->offload == CM_OFFLOAD_PARAMS ? ", offload params" : o->offload ? ", offload optimizer" : "",
           cn.params / 1e6);
    if (o->act_ckpt[0])
        printf("  activation checkpointing %s: the backward's recomputed forwards counted and timed; MFU counts "
               "the model's FLOPs only\n", o->act_ckpt);
    if (o->lora_r > 0)
        printf("  LoRA r=%d on %s, the base frozen in %s: %.0f trained parameters; MFU counts 6 FLOPs a "
               "trained parameter and 4 a frozen one (no weight gradient) a token\n",
               o->lora_r, o->lora_targets[0] ? o->lora_targets : "the default targets",
               o->lora_base[0] ? o->lora_base : (o->fp32 ? "fp32" : "bf16"), cn.trained);
    if (att_cudnn)
        printf("  attention: cuDNN's fused attention (a build with cuDNN; %ld graph executions)\n", att_cudnn);
    else if (zt_count_cudnn() || o->attention == CM_ATT_CUDNN)
        printf("  attention: ztrain's kernels (cuDNN's rule takes no attention call of this step: fp32 matmuls, "
               "a soft-cap, a head size cuDNN does not take, or ZT_CUDA_DETERMINISTIC)\n");
    else
        printf("  attention: ztrain's kernels (a build without cuDNN, or --attention ztrain)\n");
    if (att_cudnn && (cal->cls[ZT_CC_CUDNN_FWD].assumed || cal->cls[ZT_CC_CUDNN_BWD].assumed))
        printf("  WHAT-IF cuDNN attention at an assumed efficiency (--assume): cudnn_fwd %.3g, cudnn_bwd %.3g of "
               "the bf16 peak; no bench_gpu row timed them: not a fit, not a prediction\n",
               cal->cls[ZT_CC_CUDNN_FWD].eff, cal->cls[ZT_CC_CUDNN_BWD].eff);
    if (o->stage > 0)
        printf("  one rank: a shard group of one rank runs no collective (no gather, no reduce-scatter)\n");
    if (o->whatif)
        printf("  WHAT-IF%s%s: a model of planned changes, not of today's backend\n",
               o->whatif & ZT_COUNT_WHATIF_BF16_OPERANDS ? " bf16-operands" : "",
               o->whatif & ZT_COUNT_WHATIF_FUSED_XENT ? " fused-xent" : "");
    const double tokens = (double)sh->B * sh->T;
    /* a Mixture of Experts: a token runs K of the E routed experts of every
     * block (3 C Im each): the active parameters (the others' weights are
     * neither read nor trained by its FLOPs) */
    const double idle = sh->E ? (double)sh->L * (sh->E - sh->K) * 3.0 * sh->C * sh->Im : 0;
    const double active = cn.params - idle;
    if (sh->E)
        printf("  Mixture of Experts: routing as the counting backend's balanced one (each expert NK / E of the "
               "NK = %.0f routed rows a block; count.c); MFU counts the ACTIVE parameters, %.1fM of %.1fM (the "
               "routed experts' K of E)\n",
               tokens * sh->K, active / 1e6, cn.params / 1e6);
    /* bench/README.md's FLOPs a token, the library's (zt_ctx_flops_per_token:
     * 6 a trained parameter, 4 a frozen one, the active experts only; what
     * the progress line's MFU counts) */
    const double mflops = cn.fpt;
    printf("  MFU's FLOPs a token: %.0f (zt_ctx_flops_per_token, as the progress line's: 6 a trained parameter, "
           "4 a frozen one, the routed experts' K of E, + 6 L n_head head_dim T)\n", mflops);
    if (nuncal) {
        /* no time for the step: the part that has one, and what is left out */
        printf("  UNCALIBRATED: %s (no bench_gpu row of %s timed them; bench/costmodel --calibrate fits them "
               "from a table of a build with cuDNN): left out of the step below\n", uncal, cal->source);
        printf("  predicted step without attention %.1f ms (the uncalibrated launches left out; the attention's "
               "conversions and memsets in it); %ld launches, %ld host syncs, %ld transfers (%.2f MB); %.1f "
               "TFLOP, %.1f GB moved\n",
               step * 1e3, cn.tot.launches, cn.tot.syncs, cn.tot.transfers, cn.tot.host_bytes / 1e6,
               cn.tot.flops / 1e12, cn.tot.bytes / 1e9);
    } else {
        const int whatif_att =
            att_cudnn && (cal->cls[ZT_CC_CUDNN_FWD].assumed || cal->cls[ZT_CC_CUDNN_BWD].assumed);
        printf("  %s %.1f ms (%.0f tokens/s, MFU %.1f%% of %.0f TFLOP/s); %ld launches, %ld host "
               "syncs, %ld transfers (%.2f MB); %.1f TFLOP, %.1f GB moved\n",
               whatif_att ? "WHAT-IF step (cuDNN attention at the assumed efficiency)" : "predicted step", step * 1e3, tokens / step, 100.0 * mflops * tokens / step / (cal->peak_bf16 * 1e12),
               cal->peak_bf16, cn.tot.launches, cn.tot.syncs, cn.tot.transfers, cn.tot.host_bytes / 1e6,
               cn.tot.flops / 1e12, cn.tot.bytes / 1e9);
    }
    if (offload_asked) offload_report(cal, &cn, o, step, nuncal != 0);
    for (int i = 0; i < cal->nmeasured; i++) {
        if (strcmp(cal->measured[i].what, sh->llama ? "llama" : "gpt2") || strcmp(cal->measured[i].shape, key) ||
            o->stage != 0 || o->fp32 || o->whatif || o->lora_r > 0)
            continue;
        /* the recorded runs computed the LM head in one chunk (they predate the chunked head),
         * and ran the kernels of before dout's one rounding and the bf16 weights (count.h
         * ZT_COUNT_AS_RECORDED) */
        double one = step;
        const int rows = sh->B * sh->T;
        {
            cm_run_opts o1 = *o;
            o1.head_rows = rows;
            o1.whatif = ZT_COUNT_AS_RECORDED;
            o1.attention = CM_ATT_ZTRAIN;   /* no recorded run had cuDNN */
            cm_counts c1;
            if (cm_count_step(sh, &o1, zt_backend_count(), &c1, &st) != ZT_OK) {
                fprintf(stderr, "costmodel: shape %s: %s\n", sh->name, st.msg);
                cm_counts_free(&cn);
                return 1;
            }
            one = cm_step_s(cal, c1.k, c1.nk, &c1.tot, NULL);
            cm_counts_free(&c1);
            printf("  the recorded run computed the LM head in one chunk (--classifier-chunk-rows %d) with the "
                   "kernels of then (dout rounded per GEMM, weights rounded, the norm backward in two kernels): "
                   "predicted %.1f ms for it\n",
                   rows, one * 1e3);
        }
        printf("  measured %.1f ms (engine step recorded in %s): predicted / measured %.3f\n",
               cal->measured[i].ms, cal->source, one * 1e3 / cal->measured[i].ms);
    }
    printf("  %-10s %9s %6s %9s %9s %9s %16s\n", "class", "ms", "%", "launches", "GFLOP", "GB", "achieved");
    double cf[ZT_CC_N] = {0}, cb[ZT_CC_N] = {0};
    long cl[ZT_CC_N] = {0};
    for (size_t i = 0; i < cn.nk; i++) {
        cf[cn.k[i].cls] += cn.k[i].flops * cn.k[i].launches;
        cb[cn.k[i].cls] += cn.k[i].bytes * cn.k[i].launches;
        cl[cn.k[i].cls] += cn.k[i].launches;
    }
    for (int c = 0; c < ZT_CC_N; c++) {
        if (!cl[c]) continue;
        char r[32];
        rate(r, sizeof r, c, cf[c], cb[c], pc[c]);
        if (cm_uncalibrated(cal, c)) {
            printf("  %-10s %9s %6s %9ld %9.1f %9.2f %16s\n", zt_count_class_name(c), "-", "-", cl[c], cf[c] / 1e9,
                   cb[c] / 1e9, "uncalibrated");
            continue;
        }
        printf("  %-10s %9.3f %5.1f%% %9ld %9.1f %9.2f %16s\n", zt_count_class_name(c), pc[c] * 1e3,
               100 * pc[c] / step, cl[c], cf[c] / 1e9, cb[c] / 1e9, c == ZT_CC_HOST ? "(bus)" : r);
    }
    const double sy = (double)cn.tot.syncs * cal->sync_us * 1e-6;
    printf("  %-10s %9.3f %5.1f%% %9ld\n", "host syncs", sy * 1e3, 100 * sy / step, cn.tot.syncs);
    /* by kernel name */
    agg *a = calloc(cn.nk ? cn.nk : 1, sizeof *a);
    size_t na = 0;
    for (size_t i = 0; a && i < cn.nk; i++) {
        size_t j = 0;
        while (j < na && strcmp(a[j].name, cn.k[i].name)) j++;
        if (j == na) a[na++] = (agg){cn.k[i].name, cn.k[i].cls, 0, 0, 0, 0};
        a[j].launches += cn.k[i].launches;
        a[j].flops += cn.k[i].flops * cn.k[i].launches;
        a[j].bytes += cn.k[i].bytes * cn.k[i].launches;
        a[j].s += cm_kernel_s(cal, cn.k[i].cls, cn.k[i].flops, cn.k[i].bytes) * cn.k[i].launches;
    }
    if (a) {
        qsort(a, na, sizeof *a, by_time);
        printf("  %-38s %-10s %9s %6s %8s %9s %9s %16s\n", "kernel", "class", "ms", "%", "launches", "GFLOP",
               "GB", "achieved");
        /* the uncalibrated first (no time to sort them by), then the rest by time */
        for (size_t j = 0; j < na; j++)
            if (cm_uncalibrated(cal, a[j].cls))
                printf("  %-38s %-10s %9s %6s %8ld %9.1f %9.2f %16s\n", a[j].name, zt_count_class_name(a[j].cls),
                       "-", "-", a[j].launches, a[j].flops / 1e9, a[j].bytes / 1e9, "uncalibrated");
        size_t shown = 0, left = 0;
        for (size_t j = 0; j < na; j++) {
            if (cm_uncalibrated(cal, a[j].cls)) continue;
            if (top > 0 && (int)shown >= top) {
                left++;
                continue;
            }
            shown++;
            char r[32];
            rate(r, sizeof r, a[j].cls, a[j].flops, a[j].bytes, a[j].s);
            printf("  %-38s %-10s %9.3f %5.1f%% %8ld %9.1f %9.2f %16s\n", a[j].name,
                   zt_count_class_name(a[j].cls), a[j].s * 1e3, 100 * a[j].s / step, a[j].launches,
                   a[j].flops / 1e9, a[j].bytes / 1e9, a[j].cls == ZT_CC_HOST ? "(bus)" : r);
        }
        if (left) printf("  (%zu more kernels; --kernels 0 lists all)\n", left);
    }
    free(a);
    /* by launch signature (name, FLOPs, bytes): the counting backend's own entries */
    if (nlaunch != 0) {
        agg *e = calloc(cn.nk ? cn.nk : 1, sizeof *e);
        for (size_t i = 0; e && i < cn.nk; i++)
            e[i] = (agg){cn.k[i].name, cn.k[i].cls, cn.k[i].launches, cn.k[i].flops, cn.k[i].bytes,
                         cm_kernel_s(cal, cn.k[i].cls, cn.k[i].flops, cn.k[i].bytes) * cn.k[i].launches};
        if (e) {
            qsort(e, cn.nk, sizeof *e, by_time);
            printf("  %-38s %-10s %9s %6s %8s %12s %12s %16s\n", "launch (per-launch FLOPs and bytes)", "class",
                   "ms", "%", "launches", "MFLOP", "MB", "achieved");
            size_t shown = 0;
            for (size_t j = 0; j < cn.nk; j++) {
                if (cm_uncalibrated(cal, e[j].cls)) continue;
                if (nlaunch > 0 && (int)shown >= nlaunch) break;
                shown++;
                char r[32];
                rate(r, sizeof r, e[j].cls, e[j].flops * e[j].launches, e[j].bytes * e[j].launches, e[j].s);
                printf("  %-38s %-10s %9.3f %5.1f%% %8ld %12.1f %12.2f %16s\n", e[j].name,
                       zt_count_class_name(e[j].cls), e[j].s * 1e3, 100 * e[j].s / step, e[j].launches,
                       e[j].flops / 1e6, e[j].bytes / 1e6, e[j].cls == ZT_CC_HOST ? "(bus)" : r);
            }
            if (shown < cn.nk) printf("  (%zu launch signatures in all; --launches -1 lists all)\n", cn.nk);
        }
        free(e);
    }
    cm_counts_free(&cn);
    return 0;
}

static int rows(const cm_calib *cal, const char *path) {
    cm_table t;
    char err[512];
    if (cm_table_read(path, &t, err, sizeof err)) {
        fprintf(stderr, "costmodel: %s\n", err);
        return 1;
    }
    printf("rows of %s against %s (%s)\n", path, cal->source, cal->device);
    printf("  %-44s %9s %9s %7s  %s\n", "row", "measured", "model", "ratio", "classes");
    for (int i = 0; i < t.nrows; i++) {
        cm_row *r = &t.rows[i];
        if (!r->nk) {
            printf("  %-44s %9.3f %9s %7s  (not replayed: bench_gpu prints no such row now)\n", r->name, r->ms,
                   "-", "-");
            continue;
        }
        const double p = 1e3 * cm_step_s(cal, r->k, r->nk, &r->tot, NULL);
        char cls[128] = "";
        for (size_t j = 0; j < r->nk; j++) {
            const char *n = zt_count_class_name(r->k[j].cls);
            if (!strstr(cls, n) && strlen(cls) + strlen(n) + 2 < sizeof cls) {
                if (cls[0]) strcat(cls, " ");
                strcat(cls, n);
            }
        }
        printf("  %-44s %9.3f %9.3f %7.3f  %s\n", r->name, r->ms, p, p / r->ms, cls);
    }
    cm_table_free(&t);
    return 0;
}

int main(int argc, char **argv) {
    const char *calib = CM_DEFAULT_CALIB, *calibrate = NULL, *rows_of = NULL;
    cm_shape shapes[16];
    int nshapes = 0, top = 25, nlaunch = 0;
    cm_run_opts o = {0, 0, 0, 1, 0, CM_ATT_AS_SET, 0, "", "", "", CM_OFFLOAD_NONE};
    double assume_fwd = 0, assume_bwd = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--shape") && v) {
            if (nshapes == 16 || cm_shape_parse(v, &shapes[nshapes])) {
                fprintf(stderr, "costmodel: bad --shape '%s'\n", v);
                usage();
                return 2;
            }
            nshapes++;
            i++;
        } else if (!strcmp(a, "--calib") && v) {
            calib = v;
            i++;
        } else if (!strcmp(a, "--calibrate") && v) {
            calibrate = v;
            i++;
        } else if (!strcmp(a, "--rows") && v) {
            rows_of = v;
            i++;
        } else if (!strcmp(a, "--stage") && v) {
            o.stage = atoi(v);
            i++;
        } else if (!strcmp(a, "--classifier-chunk-rows") && v) {
            o.head_rows = atoi(v);
            i++;
        } else if (!strcmp(a, "--launches") && v) {
            nlaunch = atoi(v);
            i++;
        } else if (!strcmp(a, "--kernels") && v) {
            top = atoi(v);
            i++;
        } else if (!strcmp(a, "--attention") && v) {
            if (!strcmp(v, "cudnn")) o.attention = CM_ATT_CUDNN;
            else if (!strcmp(v, "ztrain")) o.attention = CM_ATT_ZTRAIN;
            else {
                fprintf(stderr, "costmodel: --attention: '%s' is not cudnn or ztrain\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--assume") && v) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                char k[32];
                double e = 0;
                if (sscanf(t, "%31[a-z_]=%lf", k, &e) == 2 && !strcmp(k, "host_adam")) {
                    if (!(e > 0 && e < 1e6)) {
                        fprintf(stderr, "costmodel: --assume: '%s': host_adam=G takes the host's memory "
                                        "bandwidth for its AdamW in GB/s (> 0)\n", t);
                        return 2;
                    }
                    host_adam_gbs = e;
                    continue;
                }
                if (sscanf(t, "%31[a-z_]=%lf", k, &e) != 2 || !(e > 0 && e <= 1) ||
                    (strcmp(k, "cudnn") && strcmp(k, "cudnn_fwd") && strcmp(k, "cudnn_bwd"))) {
                    fprintf(stderr, "costmodel: --assume: '%s' is not cudnn=E, cudnn_fwd=E or cudnn_bwd=E with "
                                    "0 < E <= 1 (of the bf16 peak), or host_adam=G (GB/s)\n", t);
                    return 2;
                }
                if (strcmp(k, "cudnn_bwd")) assume_fwd = e;
                if (strcmp(k, "cudnn_fwd")) assume_bwd = e;
            }
            i++;
        } else if (!strcmp(a, "--lora") && v) {
            char t[64] = "";
            const int k = sscanf(v, "%d:%63s", &o.lora_r, t);
            if (k < 1 || o.lora_r < 1) {
                fprintf(stderr, "costmodel: --lora: '%s' is not R or R:TARGETS (a rank >= 1; the targets as "
                                "ztrain.lora.targets, e.g. all-linear)\n", v);
                return 2;
            }
            snprintf(o.lora_targets, sizeof o.lora_targets, "%s", t);
            i++;
        } else if (!strcmp(a, "--lora-base") && v) {
            if (strcmp(v, "nf4") && strcmp(v, "nf4-dq")) {
                fprintf(stderr, "costmodel: --lora-base: '%s' is not nf4 or nf4-dq\n", v);
                return 2;
            }
            snprintf(o.lora_base, sizeof o.lora_base, "%s", v);
            i++;
        } else if (!strcmp(a, "--offload") && v) {
            if (!strcmp(v, "none")) o.offload = CM_OFFLOAD_NONE;
            else if (!strcmp(v, "optimizer")) o.offload = CM_OFFLOAD_OPTIMIZER;
            else if (!strcmp(v, "params")) o.offload = CM_OFFLOAD_PARAMS;
            else {
                fprintf(stderr, "costmodel: --offload: '%s' is not none, optimizer or params\n", v);
                return 2;
            }
            offload_asked = 1;
            i++;
        } else if (!strcmp(a, "--act-ckpt") && v) {
            /* (checked by the engine's config: activation_checkpointing.policy) */
            snprintf(o.act_ckpt, sizeof o.act_ckpt, "%s", strcmp(v, "none") ? v : "");
            i++;
        } else if (!strcmp(a, "--fp32")) {
            o.fp32 = 1;
        } else if (!strcmp(a, "--what-if") && v) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                if (!strcmp(t, "bf16-operands")) o.whatif |= ZT_COUNT_WHATIF_BF16_OPERANDS;
                else if (!strcmp(t, "fused-xent")) o.whatif |= ZT_COUNT_WHATIF_FUSED_XENT;
                else {
                    fprintf(stderr, "costmodel: --what-if: unknown '%s' (bf16-operands, fused-xent)\n", t);
                    return 2;
                }
            }
            i++;
        } else {
            usage();
            return 2;
        }
    }
    char err[512];
    if (calibrate) {
        cm_table t;
        if (cm_table_read(calibrate, &t, err, sizeof err)) {
            fprintf(stderr, "costmodel: %s\n", err);
            return 1;
        }
        cm_calib c;
        cm_defaults(&c);
        cm_fit(&c, &t, calibrate);
        cm_write(stdout, &c);
        cm_table_free(&t);
        return 0;
    }
    cm_calib cal;
    if (cm_load(calib, &cal, err, sizeof err)) {
        fprintf(stderr, "costmodel: %s\n", err);
        return 1;
    }
    /* --assume: a stated efficiency for uncalibrated cuDNN classes, marked
     * as such in every report (a fitted class keeps its fit) */
    const double assumed[2] = {assume_fwd, assume_bwd};
    const int acls[2] = {ZT_CC_CUDNN_FWD, ZT_CC_CUDNN_BWD};
    for (int k = 0; k < 2; k++) {
        if (!(assumed[k] > 0)) continue;
        if (!cm_uncalibrated(&cal, acls[k])) {
            fprintf(stderr, "costmodel: --assume: %s is calibrated in %s (rows %d): nothing to assume\n",
                    zt_count_class_name(acls[k]), calib, cal.cls[acls[k]].rows);
            return 2;
        }
        cal.cls[acls[k]] = (cm_class){assumed[k], cal.cls[ZT_CC_STREAM].t0_us, 0, 1};
    }
    if (rows_of) return rows(&cal, rows_of);
    if (cm_offload_check(&o)) {
        fprintf(stderr, "costmodel: %s\n", cm_offload_check(&o));
        return 2;
    }
    if (host_adam_gbs > 0 && !o.offload) {
        fprintf(stderr, "costmodel: --assume host_adam: no host AdamW without --offload optimizer|params\n");
        return 2;
    }
    if (o.lora_base[0] && !o.lora_r) {
        fprintf(stderr, "costmodel: --lora-base %s without --lora R: the base is frozen only under LoRA\n",
                o.lora_base);
        return 2;
    }
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) {
        fprintf(stderr, "costmodel: %s\n", st.msg);
        return 1;
    }
    if (!nshapes) {
        cm_shape_parse("gpt2", &shapes[nshapes++]);
        cm_shape_parse("smollm", &shapes[nshapes++]);
    }
    zt_count_set_device_bytes((size_t)1 << 50);   /* plan any shape: the model is of the kernels */
    printf("cost model %s: fitted on %s (%s), %d kernel rows, rms log error %.3f\n", calib, cal.source,
           cal.device, cal.nrows, cal.rms_log_err);
    int rc = 0;
    for (int i = 0; i < nshapes && !rc; i++) rc = report(&cal, &shapes[i], &o, top, nlaunch);
    zt_finalize();
    return rc;
}
