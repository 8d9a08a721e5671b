/*
 * bench_train.c -- training throughput against an sgemm baseline measured in
 * the same run.
 *
 *   bench_train [--steps N] [--threads N] [--breakdown] [--stage 0-3]
 *               [--shape gpt2-124m|default|smollm-4l|L,H,C,V,B,T|llama:L,H,KV,C,I,V,B,T]...
 *
 * smollm-4l: the Llama-family shape of bench/llama_cpu.sh (SmolLM-135M cut
 * to 4 layers: 9 heads / 3 KV heads of 64, hidden 576, SwiGLU 1536, vocab
 * 49152, tied), B=2, T=128; llama:... gives another (I = intermediate size).
 *
 * For each shape: tokens/s over N timed steps (after one warm-up step) on
 * synthetic tokens, achieved model GFLOP/s with the llm.c estimate of
 * training FLOPs per token, 6*P + 6*L*C*T (P parameters), and the ratio to the
 * sgemm GFLOP/s of this machine (best of a few GEMM shapes typical of the
 * model, timed right before).  It also times, with the same cblas_sgemm,
 * every GEMM of one training step at the model's own shapes (forward NT,
 * backward NN for dinp and TN for dweight, the LM head included) and gives
 * the step-GEMM GFLOP/s: their FLOPs over their summed time.
 *
 * --breakdown: the per-phase breakdown of the timed steps (kernels/profile.h):
 * each kernel family's ms/step, share of the step, GFLOP/s or GB/s, the
 * engine's communication + bookkeeping and data time, and what is left
 * unaccounted (the engine's own work between kernels).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "profile.h"
#include "runtime.h"

#ifdef ZT_HAVE_OPENBLAS
void openblas_set_num_threads(int);
#endif

typedef struct shape { const char *name; int L, H, C, V, B, T, llama, KV, FF; } shape;

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
    zt_data_source d = {v, synth_get, free, NULL};
    return d;
}

/* Seconds of C[M,N] = op(A) op(B) (+ beta C), best of reps.  ta: A is
 * stored [K,M] (transposed); tb: B is stored [N,K]. */
static double sgemm_time(int M, int N, int K, int ta, int tb, float beta, int reps) {
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K);
    float *c = calloc((size_t)M * N, sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; ++i) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; ++i) b[i] = (float)(i % 5) * 0.01f;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        double t0 = zt_now_s();
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N, beta, c, N);
        double dt = zt_now_s() - t0;
        if (dt < best) best = dt;
    }
    free(a); free(b); free(c);
    return best;
}

/* GFLOP/s of C[M,N] = A[M,K] B[K,N]^T, best of reps. */
static double sgemm_gflops(int M, int N, int K, int reps) {
    return 2.0 * M * N * K / sgemm_time(M, N, K, 0, 1, 0.0f, reps) / 1e9;
}

/* The GEMMs of one training step at the model's shapes (N = B*T): per
 * layer the linears [N,in]x[in,out] -- GPT-2: qkv (C -> 3C), attn proj,
 * fc (C -> 4C), fc proj (4C -> C); Llama: qkv (C -> (H + 2 KV) hd), o proj,
 * gate|up (C -> 2I), down (I -> C) -- each as forward NT, dinp NN and
 * dweight TN (+=); the tied LM head [N,C]x[C,V] likewise.  GFLOP/s =
 * FLOPs / summed best times. */
static double step_sgemm_gflops(const shape *sh, int reps) {
    int N = sh->B * sh->T, C = sh->C, hd = sh->C / sh->H;
    int lin[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, sh->V}};   /* {in, out} */
    if (sh->llama) {
        lin[0][1] = (sh->H + 2 * sh->KV) * hd;
        lin[1][0] = sh->H * hd;
        lin[2][1] = 2 * sh->FF;
        lin[3][0] = sh->FF;
    }
    double flops = 0.0, secs = 0.0;
    for (int k = 0; k < 5; ++k) {
        int in = lin[k][0], out = lin[k][1];
        double n = k < 4 ? sh->L : 1, f = 2.0 * N * in * out;
        secs += n * (sgemm_time(N, out, in, 0, 1, 0.0f, reps) +    /* out = inp w^T */
                     sgemm_time(N, in, out, 0, 0, 0.0f, reps) +    /* dinp = dout w */
                     sgemm_time(out, in, N, 1, 0, 1.0f, reps));    /* dw += dout^T inp */
        flops += n * 3.0 * f;
    }
    return flops / secs / 1e9;
}

static void print_breakdown(double step_s, int steps) {
    zt_prof_stat ps[ZT_PROF_NFAM];
    zt_prof_get(ps);
    double sum = 0.0;
    printf("  per-phase breakdown (per step; GFLOP/s for compute kernels, GB/s for memory-bound):\n");
    printf("    %-24s %9s %6s %8s %10s\n", "phase", "ms", "%", "calls", "rate");
    for (int f = 0; f < ZT_PROF_NFAM; ++f) {
        const zt_prof_stat *p = &ps[f];
        if (!p->calls) continue;
        sum += p->seconds;
        char rate[32] = "";
        if (p->seconds > 0 && (f <= ZT_PROF_ATTN_BWD))
            snprintf(rate, sizeof rate, "%.1f GFLOP/s", p->flops / p->seconds / 1e9);
        else if (p->seconds > 0 && p->bytes > 0)
            snprintf(rate, sizeof rate, "%.1f GB/s", p->bytes / p->seconds / 1e9);
        printf("    %-24s %9.2f %5.1f%% %8.1f %10s\n", zt_prof_family_name(f),
               p->seconds / steps * 1e3, 100.0 * p->seconds / step_s, (double)p->calls / steps, rate);
    }
    double un = step_s - sum;
    printf("    %-24s %9.2f %5.1f%%\n", "unaccounted", un / steps * 1e3, 100.0 * un / step_s);
    printf("    %-24s %9.2f %5.1f%%  (phases / measured step: %.3f)\n", "sum of phases",
           sum / steps * 1e3, 100.0 * sum / step_s, sum / step_s);
}

int main(int argc, char **argv) {
    int steps = 5, threads = 0, nshapes = 0, breakdown = 0, stage = 0;
    shape shapes[8];
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--breakdown")) breakdown = 1;
        else if (!strcmp(argv[i], "--stage") && i + 1 < argc) stage = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8) {
            const char *s = argv[++i];
            shape sh = {s, 0, 0, 0, 0, 0, 0, 0, 0, 0};
            if (!strcmp(s, "gpt2-124m")) sh = (shape){"gpt2-124m", 12, 12, 768, 50257, 4, 64, 0, 0, 0};
            else if (!strcmp(s, "default")) sh = (shape){"default", 4, 4, 128, 256, 16, 128, 0, 0, 0};
            else if (!strcmp(s, "smollm-4l"))
                sh = (shape){"smollm-4l", 4, 9, 576, 49152, 2, 128, 1, 3, 1536};
            else if (!strncmp(s, "llama:", 6)) {
                sh.llama = 1;
                if (sscanf(s + 6, "%d,%d,%d,%d,%d,%d,%d,%d", &sh.L, &sh.H, &sh.KV, &sh.C, &sh.FF,
                           &sh.V, &sh.B, &sh.T) != 8 || sh.H < 1 || sh.KV < 1 || sh.C % sh.H) {
                    fprintf(stderr, "bench_train: bad --shape '%s'\n", s);
                    return 2;
                }
            } else if (sscanf(s, "%d,%d,%d,%d,%d,%d", &sh.L, &sh.H, &sh.C, &sh.V, &sh.B, &sh.T) != 6 ||
                       sh.H < 1 || sh.C % sh.H) {
                fprintf(stderr, "bench_train: bad --shape '%s'\n", s);
                return 2;
            }
            shapes[nshapes++] = sh;
        } else {
            fprintf(stderr, "usage: bench_train [--steps N] [--threads N] [--breakdown] [--stage 0-3] [--shape "
                            "gpt2-124m|default|smollm-4l|L,H,C,V,B,T|llama:L,H,KV,C,I,V,B,T]...\n");
            return 2;
        }
    }
    if (!nshapes) {
        shapes[nshapes++] = (shape){"gpt2-124m", 12, 12, 768, 50257, 4, 64, 0, 0, 0};
        shapes[nshapes++] = (shape){"default", 4, 4, 128, 256, 16, 128, 0, 0, 0};
    }
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { fprintf(stderr, "%s\n", st.msg); return 1; }
    if (threads <= 0) threads = zt_rt_default_threads();
    zt_backend_cpu()->set_threads(threads);
    printf("threads per rank: %d\n", threads);
    for (int s = 0; s < nshapes; ++s) {
        shape sh = shapes[s];
        int N = sh.B * sh.T;
        /* baseline: the model's own GEMM shapes, with OpenBLAS's own
         * threading on all the rank's threads (the backend may run BLAS
         * single-threaded inside its own parallel regions) */
#ifdef ZT_HAVE_OPENBLAS
        openblas_set_num_threads(threads);
#endif
        int w1 = sh.llama ? 2 * sh.FF : 4 * sh.C, w2 = sh.llama ? (sh.H + 2 * sh.KV) * (sh.C / sh.H) : 3 * sh.C;
        double g1 = sgemm_gflops(N, w1, sh.C, 5), g2 = sgemm_gflops(N, w2, sh.C, 5);
        double g3 = sgemm_gflops(N, sh.V < 8192 ? sh.V : 8192, sh.C, 3);
        double base = g1 > g2 ? g1 : g2;
        if (g3 > base) base = g3;
        double gstep = step_sgemm_gflops(&sh, 2);
        zt_config *c = zt_config_new();
        char v[64];
#define SET(k, fmt, x) do { snprintf(v, sizeof v, fmt, x); if (zt_config_set(c, k, v, ZT_SRC_FLAG, &st)) { fprintf(stderr, "%s\n", st.msg); return 1; } } while (0)
        SET("ztrain.model.n_layer", "%d", sh.L);
        SET("ztrain.model.n_head", "%d", sh.H);
        SET("ztrain.model.n_embd", "%d", sh.C);
        SET("ztrain.model.vocab", "%d", sh.V);
        if (sh.llama) {
            SET("ztrain.model.arch", "%s", "llama");
            SET("ztrain.model.n_kv_head", "%d", sh.KV);
            SET("ztrain.model.intermediate_size", "%d", sh.FF);
            SET("ztrain.model.tie_embeddings", "%s", "true");
        }
        SET("ztrain.model.context", "%d", sh.T);
        SET("train_micro_batch_size_per_gpu", "%d", sh.B);
        SET("ztrain.threads", "%d", threads);
        SET("zero_optimization.stage", "%d", stage);
        SET("ztrain.data.val", "%s", "");
#undef SET
        zt_prof_enable(breakdown);
        zt_ctx *ctx;
        if (zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) { fprintf(stderr, "%s\n", st.msg); return 1; }
        zt_data_source none = {0};
        zt_ctx_set_data(ctx, synth(sh.V), none, &st);
        zt_metrics m;
        zt_train_step(ctx, &m, &st);   /* warm-up */
        zt_prof_reset();
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
                   "%6.1f GFLOP/s per rank | sgemm %6.1f GFLOP/s | ratio %.2f | step-GEMM sgemm "
                   "%6.1f GFLOP/s, ratio %.2f\n",
                   sh.name, sh.L, sh.H, sh.C, sh.V, sh.B, sh.T, P / 1e6, tps, dt / steps * 1e3,
                   gflops, base, gflops / base, gstep, gflops / gstep);
            if (breakdown) print_breakdown(dt, steps);
        }
        zt_ctx_free(ctx);
        zt_config_free(c);
        zt_prof_enable(0);
    }
    zt_finalize();
    return 0;
}
