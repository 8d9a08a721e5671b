/*
 * test_moe_store.c -- expert parallelism's per-rank storage (shard.h, docs/moe.md)
 * under mpirun (tests/moe_ep.sh: 2 and 4 ranks; rank 0 prints TAP).
 *
 * configs/moe-tiny.json (argv[1], else under $ZT_SRCDIR) at 4 experts, every expert_parallel_size N
 * dividing the world and the experts (N = 1 included), ZeRO stages 0-3, fp32
 * (and bf16 at stages 0 and 3): a context is created and this rank's
 * accounted parameter, gradient and optimizer bytes (zt_memory, the blocks
 * the context allocated) are compared with the formula, computed from the
 * model's layout alone: each expert unit (block.<l>.experts_gu /
 * experts_down) holds n / N elements on a rank (its window), sliced by ZeRO
 * over the G / N ranks of its shard group with the same experts; every
 * other unit n, sliced over the G ranks.  With L the rank's stored elements
 * (sum of the windows and the other units) and S its owned slices (sum of
 * min(ceil(n / g), n - r ceil(n / g)) over units): fp32 params 4 L at stages
 * 0-2 (4 S at 3), gradients 4 L at 0-1 (4 S at 2-3), optimizer 8 L at stage
 * 0 (8 S otherwise); bf16 params 2 L / 2 S, gradients as fp32, optimizer
 * 12 L / 12 S (master weights and moments).  The planner predicts the same
 * three figures (its model states).
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "tap.h"
#include "testutil.h"

/* the blocks of the three categories this rank holds now */
static void cats(uint64_t out[3]) {
    zt_memory_report r;
    zt_memory(&r);
    out[0] = r.current[ZT_MEM_PARAMS];
    out[1] = r.current[ZT_MEM_GRADS];
    out[2] = r.current[ZT_MEM_OPTIMIZER];
}

static int all_ok(int ok) {
    int out = ok;
    MPI_Allreduce(&ok, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    const int W = zt_world_size(), rank = zt_world_rank();
    if (rank != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    /* the configuration: argv[1], else $ZT_SRCDIR/configs/moe-tiny.json (make check) */
    char path[4096];
    const char *sd = getenv("ZT_SRCDIR");
    snprintf(path, sizeof path, "%s/configs/moe-tiny.json", sd ? sd : ".");
    const char *cfg = argc > 1 ? argv[1] : path;
    const int E = 4;
    for (int N = 1; N <= W; ++N) {
        if (W % N || E % N) continue;
        for (int prec = 0; prec < 2; ++prec)
            for (int stage = 0; stage <= 3; ++stage) {
                if (prec && stage != 0 && stage != 3) continue;
                zt_config *c = zt_config_new();
                int rc = zt_config_load_file(c, cfg, &st);
                if (rc == ZT_OK) {
                    tu_set(c, "ztrain.model.n_experts", "%d", E);
                    tu_set(c, "expert_parallel_size", "%d", N);
                    tu_set(c, "zero_optimization.stage", "%d", stage);
                    tu_set(c, "train_micro_batch_size_per_gpu", "1");
                    tu_set(c, "train_batch_size", "%d", W);
                    tu_set(c, "ztrain.data.train", "%s", "");
                    tu_set(c, "ztrain.data.val", "%s", "");
                    tu_set(c, "ztrain.threads", "1");
                    if (prec) tu_set(c, "bf16.enabled", "true");
                }
                uint64_t before[3], after[3];
                cats(before);
                zt_ctx *ctx = NULL;
                if (rc == ZT_OK) rc = zt_ctx_create(c, NULL, &ctx, &st);
                int ok = rc == ZT_OK;
                char what[200] = "";
                if (ok) {
                    cats(after);
                    /* the formula, from the model's layout */
                    const zt_model *m = ctx->model;
                    const int G = W;   /* (the shard group: every rank) */
                    uint64_t L = 0, S = 0;
                    for (int u = 0; u < m->n_units; ++u) {
                        const int ex = !strncmp(m->units[u].name, "block.", 6) &&
                                       strstr(m->units[u].name, ".experts_") != NULL;
                        const uint64_t n = ex ? m->units[u].numel / (uint64_t)N : m->units[u].numel;
                        const int g = ex ? G / N : G, r = ex ? rank % G / N : rank % G;
                        const uint64_t sl = (n + (uint64_t)g - 1) / (uint64_t)g, a = (uint64_t)r * sl;
                        L += n;
                        S += a >= n ? 0 : n - a < sl ? n - a : sl;
                    }
                    if (stage == 0) S = L;
                    const uint64_t want[3] = {(prec ? 2 : 4) * (stage < 3 ? L : S),
                                              4 * (stage < 2 ? L : S), (prec ? 12 : 8) * S};
                    const uint64_t got[3] = {after[0] - before[0], after[1] - before[1],
                                             after[2] - before[2]};
                    const zt_memplan *p = &ctx->plan;
                    const uint64_t plan[3] = {p->params_bytes, p->grads_bytes, p->optim_bytes};
                    for (int k = 0; k < 3; ++k)
                        if (got[k] != want[k] || (ctx->have_plan && plan[k] != got[k])) ok = 0;
                    if (!ctx->have_plan) ok = 0;
                    snprintf(what, sizeof what, "rank %d: params/grads/optimizer %llu/%llu/%llu, "
                             "formula %llu/%llu/%llu, planned %llu/%llu/%llu (L %llu, S %llu)", rank,
                             (unsigned long long)got[0], (unsigned long long)got[1],
                             (unsigned long long)got[2], (unsigned long long)want[0],
                             (unsigned long long)want[1], (unsigned long long)want[2],
                             (unsigned long long)plan[0], (unsigned long long)plan[1],
                             (unsigned long long)plan[2], (unsigned long long)L,
                             (unsigned long long)S);
                    if (!ok) fprintf(stderr, "EP %d stage %d %s: %s\n", N, stage, prec ? "bf16" : "fp32",
                                     what);
                } else {
                    fprintf(stderr, "rank %d: EP %d stage %d: %s\n", rank, N, stage, st.msg);
                }
                ok = all_ok(ok);
                tap_ok(ok, "%d ranks, EP %d, stage %d, %s: every rank's accounted params, grads and "
                       "optimizer bytes == the per-rank formula (expert windows of n/%d) == planned; "
                       "%s", W, N, stage, prec ? "bf16" : "fp32", N, rank == 0 ? what : "");
                zt_ctx_free(ctx);
                zt_config_free(c);
            }
    }
    zt_finalize();
    return tap_done();
}
