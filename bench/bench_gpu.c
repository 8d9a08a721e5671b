/*
 * bench_gpu.c -- CUDA backend timings (bench/gpu.sh runs it).
 *
 *  1. kernels: each table entry on GPT-2 124M shapes (ms per call and the
 *     achieved TFLOP/s or GB/s);
 *  2. model: a GPT-2 training step written with the table alone -- forward,
 *     backward and AdamW over all parameters, all activations kept, no
 *     communication -- in fp32 and in bf16 matmul mode: ms/step, tokens/s,
 *     MFU, and peak GPU memory held by the backend.
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

    float *mean = dalloc(N * 4), *rstd = dalloc(N * 4), *g = dalloc((size_t)C * 4);
    dfill(g, C, 0.1f, 1.0f);
    report("layernorm_fwd", TIME(iters, be->layernorm_fwd(z, mean, rstd, x, g, g, (int)N, C)), 0,
           2.0 * N * C * 4);
    report("layernorm_bwd", TIME(iters, be->layernorm_bwd(z, dw, dw, y, x, g, mean, rstd, (int)N, C)), 0,
           3.0 * N * C * 4);
    report("gelu_fwd [N,4C]", TIME(iters, be->gelu_fwd(z, x, N * 4 * C)), 0, 2.0 * N * 4 * C * 4);
    report("gelu_bwd [N,4C]", TIME(iters, be->gelu_bwd(z, x, y, N * 4 * C)), 0, 3.0 * N * 4 * C * 4);
    report("add [N,C]", TIME(iters, be->add(z, x, y, N * C)), 0, 3.0 * N * C * 4);

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

/* parameter offsets of one layer, in floats */
typedef struct {
    size_t ln1w, ln1b, wqkv, bqkv, wproj, bproj, ln2w, ln2b, wfc, bfc, wfcp, bfcp, size;
} layer_off;

static layer_off layer_layout(int C) {
    layer_off o;
    size_t p = 0;
    const size_t c = (size_t)C;
    o.ln1w = p; p += c;
    o.ln1b = p; p += c;
    o.wqkv = p; p += 3 * c * c;
    o.bqkv = p; p += 3 * c;
    o.wproj = p; p += c * c;
    o.bproj = p; p += c;
    o.ln2w = p; p += c;
    o.ln2b = p; p += c;
    o.wfc = p; p += 4 * c * c;
    o.bfc = p; p += 4 * c;
    o.wfcp = p; p += 4 * c * c;
    o.bfcp = p; p += c;
    o.size = p;
    return o;
}

/* activations of one layer */
typedef struct {
    float *ln1, *m1, *r1, *qkv, *att, *lse, *res2, *ln2, *m2, *r2, *fch, *gel, *res3;
} layer_act;

static double model_step_s(shape s, int mode, int steps, size_t *peak_bytes, double *loss_out,
                           size_t *nparams) {
    const int L = s.L, NH = s.H, C = s.C, V = s.V, B = s.B, T = s.T;
    const size_t N = (size_t)B * T, c = (size_t)C;
    const layer_off lo = layer_layout(C);
    const size_t off_wte = 0, off_wpe = off_wte + (size_t)V * c, off_layers = off_wpe + (size_t)T * c;
    const size_t off_lnf = off_layers + (size_t)L * lo.size, P = off_lnf + 2 * c;
    *nparams = P;
    be->set_matmul_precision(mode);
    zt_cuda_mem_reset_peak();

    float *params = dalloc(P * 4), *grads = dalloc(P * 4), *mom = dalloc(P * 4), *var = dalloc(P * 4);
    dfill(params, P, 0.02f, 0.0f);
    for (int l = 0; l < L; l++) {   /* LayerNorm weights 1, biases 0 */
        float *lp = params + off_layers + (size_t)l * lo.size;
        dfill(lp + lo.ln1w, c, 0.0f, 1.0f);
        dfill(lp + lo.ln2w, c, 0.0f, 1.0f);
        be->zero(lp + lo.ln1b, c * 4);
        be->zero(lp + lo.ln2b, c * 4);
    }
    dfill(params + off_lnf, c, 0.0f, 1.0f);
    be->zero(params + off_lnf + c, c * 4);

    layer_act *a = calloc((size_t)L, sizeof *a);
    float *x0 = dalloc(N * c * 4);
    for (int l = 0; l < L; l++) {
        a[l].ln1 = dalloc(N * c * 4); a[l].m1 = dalloc(N * 4); a[l].r1 = dalloc(N * 4);
        a[l].qkv = dalloc(3 * N * c * 4); a[l].att = dalloc(N * c * 4);
        a[l].lse = dalloc((size_t)B * NH * T * 4); a[l].res2 = dalloc(N * c * 4);
        a[l].ln2 = dalloc(N * c * 4); a[l].m2 = dalloc(N * 4); a[l].r2 = dalloc(N * 4);
        a[l].fch = dalloc(4 * N * c * 4); a[l].gel = dalloc(4 * N * c * 4); a[l].res3 = dalloc(N * c * 4);
    }
    float *lnf = dalloc(N * c * 4), *mf = dalloc(N * 4), *rf = dalloc(N * 4);
    float *logits = dalloc(N * (size_t)V * 4), *losses = dalloc(N * 4);
    float *dres = dalloc(N * c * 4), *dbuf = dalloc(N * c * 4), *d4 = dalloc(4 * N * c * 4);
    float *d4b = dalloc(4 * N * c * 4), *dqkv = dalloc(3 * N * c * 4);
    int *tok = dtokens(N, V), *tgt = dtokens(N, V);
    float *hl = malloc(N * 4);

    double t0 = 0.0;
    const int warm = 2;
    for (int step = 0; step < warm + steps; step++) {
        if (step == warm) {
            be->synchronize();
            t0 = now_s();
        }
        /* ---- forward */
        float *wte = params + off_wte, *wpe = params + off_wpe;
        be->encoder_fwd(x0, tok, wte, wpe, B, T, C);
        const float *res = x0;
        for (int l = 0; l < L; l++) {
            float *lp = params + off_layers + (size_t)l * lo.size;
            layer_act *q = &a[l];
            be->layernorm_fwd(q->ln1, q->m1, q->r1, res, lp + lo.ln1w, lp + lo.ln1b, (int)N, C);
            be->matmul_fwd(q->qkv, q->ln1, lp + lo.wqkv, lp + lo.bqkv, (int)N, C, 3 * C);
            be->attention_fwd(q->att, q->lse, q->qkv, B, T, C, NH);
            be->matmul_fwd(dbuf, q->att, lp + lo.wproj, lp + lo.bproj, (int)N, C, C);
            be->add(q->res2, res, dbuf, N * c);
            be->layernorm_fwd(q->ln2, q->m2, q->r2, q->res2, lp + lo.ln2w, lp + lo.ln2b, (int)N, C);
            be->matmul_fwd(q->fch, q->ln2, lp + lo.wfc, lp + lo.bfc, (int)N, C, 4 * C);
            be->gelu_fwd(q->gel, q->fch, 4 * N * c);
            be->matmul_fwd(dbuf, q->gel, lp + lo.wfcp, lp + lo.bfcp, (int)N, 4 * C, C);
            be->add(q->res3, q->res2, dbuf, N * c);
            res = q->res3;
        }
        be->layernorm_fwd(lnf, mf, rf, res, params + off_lnf, params + off_lnf + c, (int)N, C);
        be->matmul_fwd(logits, lnf, wte, NULL, (int)N, C, V);   /* tied embedding */
        be->xent_fwd(losses, logits, logits, tgt, (int)N, V);

        /* ---- backward */
        be->zero(grads, P * 4);
        be->xent_bwd(logits, logits, tgt, 1.0f / (float)N, (int)N, V);
        float *g_wte = grads + off_wte, *g_wpe = grads + off_wpe;
        be->matmul_bwd(dbuf, g_wte, NULL, logits, lnf, wte, (int)N, C, V);
        be->zero(dres, N * c * 4);
        be->layernorm_bwd(dres, grads + off_lnf, grads + off_lnf + c, dbuf, res, params + off_lnf, mf, rf,
                          (int)N, C);
        for (int l = L - 1; l >= 0; l--) {
            float *lp = params + off_layers + (size_t)l * lo.size;
            float *gp = grads + off_layers + (size_t)l * lo.size;
            layer_act *q = &a[l];
            const float *res_in = l ? a[l - 1].res3 : x0;
            /* res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
            be->matmul_bwd(d4, gp + lo.wfcp, gp + lo.bfcp, dres, q->gel, lp + lo.wfcp, (int)N, 4 * C, C);
            be->gelu_bwd(d4b, q->fch, d4, 4 * N * c);
            be->matmul_bwd(dbuf, gp + lo.wfc, gp + lo.bfc, d4b, q->ln2, lp + lo.wfc, (int)N, C, 4 * C);
            be->layernorm_bwd(dres, gp + lo.ln2w, gp + lo.ln2b, dbuf, q->res2, lp + lo.ln2w, q->m2, q->r2,
                              (int)N, C);
            /* res2 = res_in + proj(attn(qkv(ln1(res_in)))) */
            be->matmul_bwd(dbuf, gp + lo.wproj, gp + lo.bproj, dres, q->att, lp + lo.wproj, (int)N, C, C);
            be->attention_bwd(dqkv, dbuf, q->qkv, q->att, q->lse, B, T, C, NH);
            be->matmul_bwd(dbuf, gp + lo.wqkv, gp + lo.bqkv, dqkv, q->ln1, lp + lo.wqkv, (int)N, C, 3 * C);
            be->layernorm_bwd(dres, gp + lo.ln1w, gp + lo.ln1b, dbuf, res_in, lp + lo.ln1w, q->m1, q->r1,
                              (int)N, C);
        }
        be->encoder_bwd(g_wte, g_wpe, dres, tok, B, T, C);

        /* ---- clip + AdamW */
        const double norm = sqrt(be->sumsq(grads, P));
        const float clip = norm > 1.0 ? (float)(1.0 / norm) : 1.0f;
        const int t = step + 1;
        be->adamw(params, grads, mom, var, P, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                  1.0f - powf(0.9f, (float)t), 1.0f - powf(0.95f, (float)t), clip);
        const char *e = be->error();
        if (e) {
            fprintf(stderr, "bench_gpu: model step %d: %s\n", step, e);
            exit(1);
        }
    }
    be->synchronize();
    const double per = (now_s() - t0) / steps;
    be->to_host(hl, losses, N * 4);
    double loss = 0;
    for (size_t i = 0; i < N; i++) loss += hl[i];
    *loss_out = loss / (double)N;
    zt_cuda_mem(NULL, peak_bytes);

    be->free(params); be->free(grads); be->free(mom); be->free(var); be->free(x0);
    for (int l = 0; l < L; l++) {
        be->free(a[l].ln1); be->free(a[l].m1); be->free(a[l].r1); be->free(a[l].qkv); be->free(a[l].att);
        be->free(a[l].lse); be->free(a[l].res2); be->free(a[l].ln2); be->free(a[l].m2); be->free(a[l].r2);
        be->free(a[l].fch); be->free(a[l].gel); be->free(a[l].res3);
    }
    free(a);
    be->free(lnf); be->free(mf); be->free(rf); be->free(logits); be->free(losses); be->free(dres);
    be->free(dbuf); be->free(d4); be->free(d4b); be->free(dqkv); be->free(tok); be->free(tgt);
    free(hl);
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
