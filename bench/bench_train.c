/*
 * bench_train.c -- training throughput against an sgemm baseline measured in
 * the same run.
 *
 *   bench_train [--steps N] [--threads N] [--shape gpt2-124m|default|L,H,C,V,B,T]...
 *
 * For each shape: tokens/s over N timed steps (after one warm-up step) on
 * synthetic tokens, achieved model GFLOP/s with the llm.c estimate of
 * training FLOPs per token, 6*P + 6*L*C*T (P parameters), and the ratio to the
 * sgemm GFLOP/s of this machine (best of a few GEMM shapes typical of the
 * model, timed right before).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "runtime.h"

typedef struct shape { const char *name; int L, H, C, V, B, T; } shape;

static zt_data_source synth(int V);
static int synth_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    int V = *(int *)s;
    for (int i = 0; i < count * T; ++i) {
        uint64_t h = zt_hash3((uint64_t)step, first, (uint64_t)i);
        in[i] = (int)(h % (uint64_t)V);
        tg[i] = (int)((h >> 24) % (uint64_t)V);
    }
    return ZT_OK;
}
static zt_data_source synth(int V) {
    int *v = malloc(sizeof *v);
    *v = V;
    zt_data_source d = {v, synth_get, free};
    return d;
}

/* GFLOP/s of C[M,N] = A[M,K] B[K,N]^T, best of reps. */
static double sgemm_gflops(int M, int N, int K, int reps) {
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K);
    float *c = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; ++i) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; ++i) b[i] = (float)(i % 5) * 0.01f;
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        double t0 = zt_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = zt_now_s() - t0;
        double g = 2.0 * M * N * K / dt / 1e9;
        if (g > best) best = g;
    }
    free(a); free(b); free(c);
    return best;
}

int main(int argc, char **argv) {
    int steps = 5, threads = 0, nshapes = 0;
    shape shapes[8];
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8) {
            const char *s = argv[++i];
            shape sh = {s, 0, 0, 0, 0, 0, 0};
            if (!strcmp(s, "gpt2-124m")) sh = (shape){"gpt2-124m", 12, 12, 768, 50257, 4, 64};
            else if (!strcmp(s, "default")) sh = (shape){"default", 4, 4, 128, 256, 16, 128};
            else if (sscanf(s, "%d,%d,%d,%d,%d,%d", &sh.L, &sh.H, &sh.C, &sh.V, &sh.B, &sh.T) != 6) {
                fprintf(stderr, "bench_train: bad --shape '%s'\n", s);
                return 2;
            }
            shapes[nshapes++] = sh;
        } else {
            fprintf(stderr, "usage: bench_train [--steps N] [--threads N] [--shape gpt2-124m|default|L,H,C,V,B,T]...\n");
            return 2;
        }
    }
    if (!nshapes) {
        shapes[nshapes++] = (shape){"gpt2-124m", 12, 12, 768, 50257, 4, 64};
        shapes[nshapes++] = (shape){"default", 4, 4, 128, 256, 16, 128};
    }
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { fprintf(stderr, "%s\n", st.msg); return 1; }
    if (threads <= 0) threads = zt_rt_default_threads();
    zt_backend_cpu()->set_threads(threads);
    printf("threads per rank: %d\n", threads);
    for (int s = 0; s < nshapes; ++s) {
        shape sh = shapes[s];
        int N = sh.B * sh.T;
        /* baseline: the model's own GEMM shapes */
        double g1 = sgemm_gflops(N, 4 * sh.C, sh.C, 5), g2 = sgemm_gflops(N, 3 * sh.C, sh.C, 5);
        double g3 = sgemm_gflops(N, sh.V < 8192 ? sh.V : 8192, sh.C, 3);
        double base = g1 > g2 ? g1 : g2;
        if (g3 > base) base = g3;
        zt_config *c = zt_config_new();
        char v[64];
#define SET(k, fmt, x) do { snprintf(v, sizeof v, fmt, x); if (zt_config_set(c, k, v, ZT_SRC_FLAG, &st)) { fprintf(stderr, "%s\n", st.msg); return 1; } } while (0)
        SET("ztrain.model.n_layer", "%d", sh.L);
        SET("ztrain.model.n_head", "%d", sh.H);
        SET("ztrain.model.n_embd", "%d", sh.C);
        SET("ztrain.model.vocab", "%d", sh.V);
        SET("ztrain.model.context", "%d", sh.T);
        SET("train_micro_batch_size_per_gpu", "%d", sh.B);
        SET("ztrain.threads", "%d", threads);
        SET("ztrain.data.val", "%s", "");
#undef SET
        zt_ctx *ctx;
        if (zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) { fprintf(stderr, "%s\n", st.msg); return 1; }
        zt_data_source none = {0};
        zt_ctx_set_data(ctx, synth(sh.V), none, &st);
        zt_metrics m;
        zt_train_step(ctx, &m, &st);   /* warm-up */
        double t0 = zt_now_s();
        for (int i = 0; i < steps; ++i)
            if (zt_train_step(ctx, &m, &st) != ZT_OK) { fprintf(stderr, "%s\n", st.msg); return 1; }
        double dt = zt_now_s() - t0;
        double P = (double)zt_ctx_num_params(ctx);
        double tokens = (double)N * zt_world_size() * steps;
        double tps = tokens / dt;
        double flops_tok = 6.0 * P + 6.0 * sh.L * sh.C * sh.T;
        double gflops = tps * flops_tok / 1e9 / zt_world_size();
        if (zt_world_rank() == 0) {
            printf("%-10s L%d H%d C%d V%d B%d T%d: %.1fM params | %9.0f tokens/s | %7.1f ms/step | "
                   "%6.1f GFLOP/s per rank | sgemm %6.1f GFLOP/s | ratio %.2f\n",
                   sh.name, sh.L, sh.H, sh.C, sh.V, sh.B, sh.T, P / 1e6, tps, dt / steps * 1e3,
                   gflops, base, gflops / base);
        }
        zt_ctx_free(ctx);
        zt_config_free(c);
    }
    zt_finalize();
    return 0;
}
