/*
 * bench_gpu.c -- CUDA backend timings (bench/gpu.sh runs it).
 *
 *  1. kernels: each table entry on GPT-2 124M shapes (ms per call and the
 *     achieved TFLOP/s or GB/s);
 *  2. model: a GPT-2 training step written with the table alone
 *     (tests/table_gpt.h: forward, backward, clipping and AdamW over all
 *     parameters, all activations kept, no communication; the step reads its
 *     loss back to the host, as training does for logging) in fp32 and in
 *     bf16 matmul mode: ms/step, tokens/s, MFU, and peak GPU memory held by
 *     the backend.
 *
 * MFU uses the training-FLOP estimate of bench/README.md (6 x params +
 * 6 x L x C x T per token) over the GPU's dense peak for the matmul
 * precision (--peak-tflops F32,BF16 overrides the built-in table).
 *
 *   bench/bench_gpu [--what kernels|model|all] [--shape L,H,C,V,B,T]
 *                   [--steps N] [--peak-tflops F32,BF16]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "backend.h"
#include "gpu.h"
#include "table_gpt.h"
#include "zt_cuda.h"

static const zt_backend *be;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
    const char *e = be ? be->error() : NULL;
    fprintf(stderr, "bench_gpu: %s%s%s\n", what, e ? ": " : "", e ? e : "");
    exit(1);
}

static void *dalloc(size_t bytes) {
    void *p = be->alloc(bytes);
    if (!p) die("out of GPU memory");
    return p;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
/* d[n] = scale * uniform(-1, 1) (+ bias), in chunks through the host */
static void dfill(float *d, size_t n, float scale, float bias) {
    const size_t chunk = (size_t)1 << 22;
    float *h = malloc(chunk * sizeof(float));
    if (!h) die("out of host memory");
    for (size_t off = 0; off < n; off += chunk) {
        const size_t m = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < m; i++) h[i] = scale * frand() + bias;
        be->to_device(d + off, h, m * sizeof(float));
    }
    free(h);
}
static int *dtokens(size_t n, int V) {
    int *h = malloc(n * sizeof(int));
    if (!h) die("out of host memory");
    for (size_t i = 0; i < n; i++) h[i] = (int)((frand() * 0.5f + 0.5f) * (float)V) % V;
    int *d = dalloc(n * sizeof(int));
    be->to_device(d, h, n * sizeof(int));
    free(h);
    return d;
}

/* run STMT `iters` times after one warm-up call; seconds per call */
#define TIME(iters, STMT)                                          \
    ({                                                             \
        STMT;                                                      \
        be->synchronize();                                         \
        const double t0_ = now_s();                                \
        for (int it_ = 0; it_ < (iters); it_++) { STMT; }          \
        be->synchronize();                                         \
        (now_s() - t0_) / (double)(iters);                         \
    })

static void report(const char *name, double s, double flops, double bytes) {
    printf("  %-44s %9.3f ms", name, s * 1e3);
    if (flops > 0) printf("  %8.1f TFLOP/s", flops / s * 1e-12);
    if (bytes > 0) printf("  %8.1f GB/s", bytes / s * 1e-9);
    printf("\n");
    const char *e = be->error();
    if (e) {
        fprintf(stderr, "bench_gpu: %s: %s\n", name, e);
        exit(1);
    }
}

typedef struct { int L, H, C, V, B, T; } shape;

/* ------------------------------------------------------------ kernels */

/* cuda_sdpa.cu's switches back as the environment sets them (cuDNN on,
 * deterministic mode from ZT_CUDA_DETERMINISTIC) */
static void cudnn_restore(void) {
    const char *e = getenv("ZT_CUDA_DETERMINISTIC");
    zt_cuda_att_cudnn_for_test(1, e && *e && strcmp(e, "0") != 0);
}

/* the (query, key) pairs of a causal head: T (T + 1) / 2 (count.c's
 * convention for cuDNN's useful FLOPs) */
static double causal_pairs(int T) { return (double)T * (T + 1) / 2; }

/* Attention at the models' shapes, bf16 matmul mode, on ztrain's kernels
 * and on cuDNN's fused attention (a build with cuDNN), forward and
 * backward; FLOPs: 4 hs (forward) and 10 hs (backward) per seen pair and q
 * head.  bench/costmodel replays the rows by their names (gqa_fwd bf16
 * B=.. T=.. NH=.. NKV=.. hs=.. (cuDNN) / (ztrain's kernels)) and fits
 * cudnn_fwd / cudnn_bwd on the cuDNN ones.  A cuDNN row that did not run
 * on cuDNN (a build without it, or a shape cuDNN declined) prints why
 * instead of a time. */
static void attention_shapes(int iters) {
    static const struct { const char *model; int B, T, NH, NKV, hs; } sh[] = {
        {"GPT-2 124M", 8, 1024, 12, 12, 64},
        {"SmolLM-135M", 8, 2048, 9, 3, 64},
        {"Llama-3.2-1B", 4, 2048, 32, 8, 64},
        {"Llama-3.2-3B", 4, 2048, 24, 8, 128},
    };
    char name[128];
    printf("  (attention at the models' shapes: %s, %s, %s, %s)\n", sh[0].model, sh[1].model, sh[2].model,
           sh[3].model);
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const int B = sh[i].B, T = sh[i].T, NH = sh[i].NH, NKV = sh[i].NKV, hs = sh[i].hs;
        const size_t nq = (size_t)B * T * (NH + 2 * NKV) * hs, no = (size_t)B * T * NH * hs;
        float *qkv = dalloc(nq * 4), *dqkv = dalloc(nq * 4), *out = dalloc(no * 4), *dout = dalloc(no * 4);
        float *lse = dalloc((size_t)B * NH * T * 4);
        dfill(qkv, nq, 1.0f, 0.0f);
        dfill(dout, no, 1.0f, 0.0f);
        const double ff = 4.0 * hs * causal_pairs(T) * B * NH, fb = 2.5 * ff;
        be->set_matmul_precision(ZT_MATMUL_BF16);
        for (int cu = 0; cu < 2; cu++) {
            const char *path = cu ? "cuDNN" : "ztrain's kernels";
            if (cu) cudnn_restore();
            else zt_cuda_att_cudnn_for_test(0, 0);
            for (int bwd = 0; bwd < 2; bwd++) {
                snprintf(name, sizeof name, "gqa_%s bf16 B=%d T=%d NH=%d NKV=%d hs=%d (%s)", bwd ? "bwd" : "fwd",
                         B, T, NH, NKV, hs, path);
                long f0 = 0, b0 = 0, d0 = 0, f1 = 0, b1 = 0, d1 = 0;
                zt_cuda_att_cudnn_calls_for_test(&f0, &b0, &d0);
                /* the forward first, so that out and lse are the backward's */
                if (bwd) be->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hs);
                const double t = bwd ? TIME(iters, be->gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs))
                                     : TIME(iters, be->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hs));
                zt_cuda_att_cudnn_calls_for_test(&f1, &b1, &d1);
                const long ran = bwd ? b1 - b0 : f1 - f0;
                if (cu && ran < iters) {
                    printf("  %-44s not timed: %s\n", name,
                           d1 > d0 ? "cuDNN declined this shape (ztrain's kernels ran)"
                                   : "cuDNN did not run it (a build without cuDNN, or ZT_CUDA_DETERMINISTIC)");
                    continue;
                }
                report(name, t, bwd ? fb : ff, 0);
            }
        }
        cudnn_restore();
        be->set_matmul_precision(ZT_MATMUL_FP32);
        be->free(qkv); be->free(dqkv); be->free(out); be->free(dout); be->free(lse);
    }
}

static void bench_kernels(shape s) {
    const int B = s.B, T = s.T, C = s.C, NH = s.H, V = s.V;
    const size_t N = (size_t)B * T;
    const int iters = 20;
    printf("kernels (B=%d T=%d C=%d NH=%d V=%d)\n", B, T, C, NH, V);
    float *x = dalloc(N * 4 * C * 4), *y = dalloc(N * 4 * C * 4), *z = dalloc(N * 4 * C * 4);
    float *w = dalloc((size_t)V * C * 4), *dw = dalloc((size_t)V * C * 4), *bias = dalloc((size_t)V * 4);
    float *logits = dalloc(N * V * 4);
    dfill(x, N * 4 * C, 1.0f, 0.0f);
    dfill(y, N * 4 * C, 1.0f, 0.0f);
    dfill(w, (size_t)V * C, 0.02f, 0.0f);
    dfill(bias, V, 0.02f, 0.0f);
    char name[96];

    struct { const char *what; int oc, c; } mm[] = {
        {"qkv", 3 * C, C}, {"attn proj", C, C}, {"fc", 4 * C, C}, {"fc proj", C, 4 * C}, {"lm head", V, C}};
    for (int mode = 0; mode < 2; mode++) {
        be->set_matmul_precision(mode);
        const char *p = mode ? "bf16" : "fp32";
        for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
            const int oc = mm[k].oc, c = mm[k].c;
            float *out = mm[k].oc == V ? logits : z;
            const double f = 2.0 * (double)N * oc * c;
            snprintf(name, sizeof name, "matmul_fwd %s %s [%zu,%d]x[%d,%d]", p, mm[k].what, N, c, c, oc);
            report(name, TIME(iters, be->matmul_fwd(out, x, w, bias, (int)N, c, oc)), f, 0);
            snprintf(name, sizeof name, "matmul_bwd %s %s (dinp, dw, dbias)", p, mm[k].what);
            report(name, TIME(iters, be->matmul_bwd(y, dw, bias, out, x, w, (int)N, c, oc)), 2 * f, 0);
        }
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);

    /* attention: QK^T and PV, causal half: 2 * 2 * B * NH * T^2/2 * hs */
    const double af = 2.0 * B * (double)T * T * C;
    float *lse = dalloc((size_t)B * NH * T * 4);
    report("attention_fwd", TIME(iters, be->attention_fwd(z, lse, x, B, T, C, NH)), af, 0);
    report("attention_bwd", TIME(iters, be->attention_bwd(y, x, x, z, lse, B, T, C, NH)), 2.5 * af, 0);
    /* bf16 matmul mode: attention on tensor cores (flash kernels at head sizes <= 128); ztrain's
     * kernels, also in a build with cuDNN (its rows: attention_shapes below) */
    zt_cuda_att_cudnn_for_test(0, 0);
    be->set_matmul_precision(ZT_MATMUL_BF16);
    report("attention_fwd bf16 (tensor cores)", TIME(iters, be->attention_fwd(z, lse, x, B, T, C, NH)), af, 0);
    report("attention_bwd bf16 (tensor cores)",
           TIME(iters, be->attention_bwd(y, x, x, z, lse, B, T, C, NH)), 2.5 * af, 0);
    /* the same on the cuBLAS path (score buffers; what head sizes > 128 run) */
    zt_cuda_att_flash_for_test(0);
    report("attention_fwd bf16 (cuBLAS path)", TIME(iters, be->attention_fwd(z, lse, x, B, T, C, NH)), af, 0);
    report("attention_bwd bf16 (cuBLAS path)",
           TIME(iters, be->attention_bwd(y, x, x, z, lse, B, T, C, NH)), 2.5 * af, 0);
    zt_cuda_att_flash_for_test(1);
    be->set_matmul_precision(ZT_MATMUL_FP32);

    float *mean = dalloc(N * 4), *rstd = dalloc(N * 4), *g = dalloc((size_t)C * 4);
    dfill(g, C, 0.1f, 1.0f);
    report("layernorm_fwd", TIME(iters, be->layernorm_fwd(z, mean, rstd, x, g, g, (int)N, C)), 0,
           2.0 * N * C * 4);
    report("layernorm_bwd", TIME(iters, be->layernorm_bwd(z, dw, dw, y, x, g, mean, rstd, (int)N, C)), 0,
           3.0 * N * C * 4);
    report("gelu_fwd [N,4C]", TIME(iters, be->gelu_fwd(z, x, N * 4 * C)), 0, 2.0 * N * 4 * C * 4);
    report("gelu_bwd [N,4C]", TIME(iters, be->gelu_bwd(z, x, y, N * 4 * C)), 0, 3.0 * N * 4 * C * 4);
    report("add [N,C]", TIME(iters, be->add(z, x, y, N * C)), 0, 3.0 * N * C * 4);

    /* the Llama kernels on the same [N, C] (grouped-query attention with
     * NKV = NH/4 kv heads when 4 divides NH; SwiGLU with H = 2C so that
     * gu[N, 2H] fits the [N, 4C] buffers) */
    {
        const int hs = C / NH, NKV = NH % 4 ? NH : NH / 4, H = 2 * C, R = (NH + 2 * NKV) * hs;
        float *f = dalloc((size_t)hs / 2 * 4 + 4);
        dfill(f, (size_t)hs / 2, 0.5f, 0.5f);
        report("rmsnorm_fwd", TIME(iters, be->rmsnorm_fwd(z, rstd, x, g, 1e-5f, (int)N, C)), 0,
               2.0 * N * C * 4);
        report("rmsnorm_bwd", TIME(iters, be->rmsnorm_bwd(z, dw, y, x, g, rstd, (int)N, C)), 0,
               4.0 * N * C * 4);
        snprintf(name, sizeof name, "rope_fwd (q and k heads of [N,%d])", R);
        report(name, TIME(iters, be->rope_fwd(z, f, B, T, NH + NKV, R, hs, 1.0f)), 0,
               2.0 * N * (NH + NKV) * hs * 4);
        snprintf(name, sizeof name, "swiglu_fwd [N,%d]", H);
        report(name, TIME(iters, be->swiglu_fwd(z, x, (int)N, H)), 0, 3.0 * N * H * 4);
        snprintf(name, sizeof name, "swiglu_bwd [N,%d]", H);
        report(name, TIME(iters, be->swiglu_bwd(z, y, x, (int)N, H)), 0, 5.0 * N * H * 4);
        snprintf(name, sizeof name, "gqa_fwd (NKV=%d)", NKV);
        report(name, TIME(iters, be->gqa_fwd(z, lse, x, B, T, NH, NKV, hs)), af, 0);
        snprintf(name, sizeof name, "gqa_bwd (NKV=%d)", NKV);
        report(name, TIME(iters, be->gqa_bwd(y, x, x, z, lse, B, T, NH, NKV, hs)), 2.5 * af, 0);
        be->set_matmul_precision(ZT_MATMUL_BF16);
        snprintf(name, sizeof name, "gqa_fwd bf16 (NKV=%d, tensor cores)", NKV);
        report(name, TIME(iters, be->gqa_fwd(z, lse, x, B, T, NH, NKV, hs)), af, 0);
        snprintf(name, sizeof name, "gqa_bwd bf16 (NKV=%d, tensor cores)", NKV);
        report(name, TIME(iters, be->gqa_bwd(y, x, x, z, lse, B, T, NH, NKV, hs)), 2.5 * af, 0);
        be->set_matmul_precision(ZT_MATMUL_FP32);
        be->free(f);
    }
    cudnn_restore();

    attention_shapes(iters);

    int *tok = dtokens(N, V);
    dfill(logits, N * V, 2.0f, 0.0f);
    report("xent_fwd (in place)", TIME(iters, be->xent_fwd(z, logits, logits, tok, (int)N, V)), 0,
           2.0 * N * V * 4);
    report("xent_bwd (in place)", TIME(iters, be->xent_bwd(logits, logits, tok, 1.0f, (int)N, V)), 0,
           2.0 * N * V * 4);
    report("encoder_fwd", TIME(iters, be->encoder_fwd(z, tok, w, x, B, T, C)), 0, 3.0 * N * C * 4);
    report("encoder_bwd", TIME(iters, be->encoder_bwd(dw, y, x, tok, B, T, C)), 0, 3.0 * N * C * 4);

    const size_t P = 124000000;
    float *p = dalloc(P * 4), *gr = dalloc(P * 4), *m = dalloc(P * 4), *v = dalloc(P * 4);
    report("adamw (124M params)", TIME(iters, be->adamw(p, gr, m, v, P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f,
                                                        0.5f, 1.0f)), 0, 7.0 * P * 4);
    volatile double sink = 0;
    report("sumsq (124M)", TIME(iters, sink += be->sumsq(gr, P)), 0, 1.0 * P * 4);
    report("scale (124M)", TIME(iters, be->scale(gr, P, 1.0f)), 0, 2.0 * P * 4);
    uint16_t *h16 = dalloc(P * 2);
    report("to_bf16 (124M)", TIME(iters, be->to_bf16(h16, p, P)), 0, 6.0 * P);
    report("nonfinite (124M)", TIME(iters, sink += (double)be->nonfinite(p, P)), 0, 4.0 * P);
    (void)sink;

    be->free(x); be->free(y); be->free(z); be->free(w); be->free(dw); be->free(bias); be->free(logits);
    be->free(lse); be->free(mean); be->free(rstd); be->free(g); be->free(tok); be->free(p);
    be->free(gr); be->free(m); be->free(v); be->free(h16);
}

/* ------------------------------------------------------------ model */

/* seconds per training step (tests/table_gpt.h) after 2 warm-up steps */
static double model_step_s(shape s, int mode, int steps, size_t *peak_bytes, double *loss_out,
                           size_t *nparams) {
    be->set_matmul_precision(mode);
    zt_cuda_mem_reset_peak();
    tg_model m;
    const tg_shape ts = {s.L, s.H, s.C, s.V, s.B, s.T};
    if (!tg_init(&m, be, ts, 1234)) die("model: out of GPU memory");
    *nparams = m.P;
    double t0 = 0.0, loss = 0.0;
    const int warm = 2;
    for (int step = 0; step < warm + steps; step++) {
        if (step == warm) {
            be->synchronize();
            t0 = now_s();
        }
        loss = tg_step(&m, step);
        const char *e = be->error();
        if (e) {
            fprintf(stderr, "bench_gpu: model step %d: %s\n", step, e);
            exit(1);
        }
    }
    be->synchronize();
    const double per = (now_s() - t0) / steps;
    *loss_out = loss;
    zt_cuda_mem(NULL, peak_bytes);
    tg_free(&m);
    be->set_matmul_precision(ZT_MATMUL_FP32);
    return per;
}

int main(int argc, char **argv) {
    shape s = {12, 12, 768, 50304, 8, 1024};   /* GPT-2 124M, vocab padded to 50304 */
    const char *what = "all";
    int steps = 10;
    double peak32 = 0, peak16 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--what") && i + 1 < argc) what = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d,%d,%d,%d", &s.L, &s.H, &s.C, &s.V, &s.B, &s.T) != 6) {
                fprintf(stderr, "bench_gpu: --shape L,H,C,V,B,T\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--peak-tflops") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lf,%lf", &peak32, &peak16) != 2) {
                fprintf(stderr, "bench_gpu: --peak-tflops F32,BF16\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_gpu [--what kernels|model|all] [--shape L,H,C,V,B,T] "
                            "[--steps N] [--peak-tflops F32,BF16]\n");
            return 2;
        }
    }
    zt_status st;
    memset(&st, 0, sizeof st);
    const int dev = zt_cuda_pick_device(0, &st);
    be = dev >= 0 ? zt_backend_cuda() : NULL;
    if (!be) {
        fprintf(stderr, "bench_gpu: %s\n", dev >= 0 ? zt_backend_cuda_why() : st.msg);
        return 1;
    }
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, dev);
    if (peak32 <= 0 && peak16 <= 0) {
        /* dense peaks from NVIDIA's data sheets: fp32 (no tensor cores), bf16 tensor */
        if (strstr(prop.name, "H100") && strstr(prop.name, "PCIe")) peak32 = 51.2, peak16 = 756;
        else if (strstr(prop.name, "H100") || strstr(prop.name, "H200")) peak32 = 66.9, peak16 = 989.4;
        else if (strstr(prop.name, "A100")) peak32 = 19.5, peak16 = 312;
    }
    printf("device %d: %s (sm_%d%d, %d SMs); shape L=%d H=%d C=%d V=%d B=%d T=%d\n", dev, prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, s.L, s.H, s.C, s.V, s.B, s.T);
    if (peak32 > 0) printf("MFU against dense peaks of %.1f (fp32) / %.1f (bf16) TFLOP/s\n", peak32, peak16);
    if (!strcmp(what, "kernels") || !strcmp(what, "all")) bench_kernels(s);
    if (!strcmp(what, "model") || !strcmp(what, "all")) {
        printf("model step (forward + backward + clip + AdamW through the backend table)\n");
        for (int mode = 0; mode < 2; mode++) {
            size_t peak = 0, P = 0;
            double loss = 0;
            const double per = model_step_s(s, mode, steps, &peak, &loss, &P);
            const double tok = (double)s.B * s.T / per;
            const double fpt = 6.0 * (double)P + 6.0 * s.L * (double)s.C * s.T;
            const double pk = mode ? peak16 : peak32;
            printf("  %-4s matmuls: %8.1f ms/step  %9.0f tokens/s  %7.1f TFLOP/s", mode ? "bf16" : "fp32",
                   per * 1e3, tok, fpt * tok * 1e-12);
            if (pk > 0) printf("  MFU %5.1f%% of %.0f", 100.0 * fpt * tok * 1e-12 / pk, pk);
            printf("  peak mem %.2f GiB  params %.1fM  loss %.4f\n", (double)peak / (1u << 30), P / 1e6, loss);
        }
    }
    return 0;
}
