/*
 * test_overlap.c -- overlap_comm: stage-2/3 gradient reduce-scatters run
 * while the backward of the next units computes (run under mpirun by
 * tests/zero_mpi.sh; rank 0 prints TAP).
 *
 * A model of five units of uneven sizes (slices differ across ranks) whose
 * backward writes rank- and unit-dependent gradients that are small
 * integers, so every sum is exact in fp32 and bf16.  For stages 2 and 3,
 * fp32 and bf16 reductions, and with overlap on and off, one backward pass
 * (two micro-steps, and a unit asked for again after its grads_done) must
 * leave exactly the expected owned gradients, identical with and without
 * overlap; with overlap, reductions are in flight (up to ZT_RS_INFLIGHT)
 * when the next unit's backward starts, and none after the pass.
 *
 * A forward told its backward's dloss takes the last unit's gradients
 * itself (as the fused LM head does, classifier.h "fused"), and they stay
 * open into the backward.  When a step fails between the passes (a
 * told forward with no backward), the next step's forward drops that
 * unit's bucket (shard.c begin_pass): its owned gradients are then again
 * the exact sums, not the sums plus the failed step's contribution.
 */
#include <string.h>
#include "classifier.h"
#include "comm.h"
#include "model.h"
#include "runtime.h"
#include "shard.h"
#include "tap.h"

#define NU 5
static const int sizes[NU] = {13, 7, 29, 5, 17};

typedef struct toy {
    int again;                /* backward asks for unit 3's gradients a second time */
    int seen_inflight[NU];    /* reductions in flight when unit u's backward started */
    int rank;
    int fwd_last;             /* a told forward takes the last unit's gradients (kept open) */
} toy;

static int toy_describe(void *self, zt_layout *L, zt_status *st) {
    (void)self;
    char name[8];
    for (int u = 0; u < NU; ++u) {
        snprintf(name, sizeof name, "u%d", u);
        ZT_TRY(zt_layout_unit(L, name, st));
        name[0] = 'w';
        ZT_TRY(zt_layout_tensor(L, name, (size_t)sizes[u], 1, ZT_INIT_ZEROS, 0, 0, NULL, st));
    }
    return ZT_OK;
}
static int toy_acts_create(void *self, int B, int T, int training, int cat, void **out,
                           zt_status *st) {
    (void)self; (void)training;
    *out = zt_alloc((size_t)B * T * sizeof(float), cat, st);
    return *out ? ZT_OK : st->code;
}
static void toy_acts_free(void *self, void *a) { (void)self; zt_free(a); }
/* the gradient this rank contributes to element i of unit u */
static float contrib(int rank, int u, int i) { return (float)((rank + 1) * (u + 2) + i % 5); }

static int toy_forward(void *self, zt_units *U, void *acts, const int *in, const int *tg, int B,
                       int T, double *loss, zt_status *st) {
    toy *t = self;
    (void)acts; (void)in; (void)tg; (void)B; (void)T;
    for (int u = 0; u < NU; ++u) {
        if (!zt_unit_params(U, u, st)) return st->code;
        ZT_TRY(zt_unit_release(U, u, st));
    }
    float dl;
    if (t->fwd_last && zt_units_fwd_dloss(U, &dl)) {   /* the last unit's, left open */
        float *g = zt_unit_grads(U, NU - 1, st);
        if (!g) return st->code;
        for (int i = 0; i < sizes[NU - 1]; ++i) g[i] += contrib(t->rank, NU - 1, i);
    }
    *loss = 0;
    return ZT_OK;
}

static int toy_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    toy *t = self;
    (void)acts; (void)dloss;
    for (int u = NU - 1; u >= 0; --u) {
        t->seen_inflight[u] = ((zt_shard *)U)->npend;
        float *g = zt_unit_grads(U, u, st);
        if (!g) return st->code;
        if (!(t->fwd_last && u == NU - 1))   /* (else the forward added it) */
            for (int i = 0; i < sizes[u]; ++i) g[i] += contrib(t->rank, u, i);
        ZT_TRY(zt_unit_grads_done(U, u, st));
        if (t->again && u == 3) {   /* again, while its reduction may be in flight */
            if (!(g = zt_unit_grads(U, u, st))) return st->code;
            for (int i = 0; i < sizes[u]; ++i) g[i] += 1.0f;
            ZT_TRY(zt_unit_grads_done(U, u, st));
        }
    }
    return ZT_OK;
}
static const zt_model_ops toy_ops = {"overlap-toy", toy_describe, toy_acts_create, toy_acts_free,
                                     toy_forward, toy_backward, NULL, NULL};
static zt_model_config mc = {.n_layer = 1, .n_head = 1, .n_embd = 1, .context = 4, .vocab = 8};

/* Two micro-steps of backward at (stage, gdt, overlap); the owned
 * gradients into out[] (shard order).  Returns the number of owned
 * elements, -1 on failure (message in st).  With t->fwd_last the forwards
 * are told the dloss, and `failed` runs one told forward without its
 * backward first (a step that failed between the passes). */
static int run(zt_group *world, int stage, zt_dtype gdt, int overlap, toy *t, int failed,
               float *out, int *max_inflight, int *left, zt_status *st) {
    zt_model *m = NULL;
    zt_shard *sh = NULL;
    if (zt_model_create(&toy_ops, t, &mc, zt_backend_cpu(), zt_shard_model_flags(stage), &m, st)
        != ZT_OK)
        return -1;
    const zt_shard_prec prec = {.prec = ZT_PREC_FP32, .grad_comm = gdt, .comm = ZT_SHARD_COMM_STAGED,
                                .overlap_comm = overlap};
    if (zt_shard_create_ex(m, stage, world->size, world, &prec, &sh, st) != ZT_OK) {
        zt_model_free(m, 0);
        return -1;
    }
    int n = -1;
    void *a = NULL;
    int in[4] = {0}, tg[4] = {0};
    double loss;
    if (toy_acts_create(t, 1, 4, 1, ZT_MEM_ACTIVATIONS, &a, st) != ZT_OK) goto out;
    zt_shard_init_params(sh, 1);
    sh->fwd_dloss = 1.0f;
    sh->fwd_dloss_set = t->fwd_last;
    if (failed && zt_shard_forward(sh, a, in, tg, 1, 4, 1, &loss, st) != ZT_OK) goto out;
    zt_shard_zero_grads(sh);
    *max_inflight = 0;
    for (int micro = 0; micro < 2; ++micro) {
        if (zt_shard_forward(sh, a, in, tg, 1, 4, 1, &loss, st) != ZT_OK) goto out;
        if (zt_shard_backward(sh, a, 1.0f, st) != ZT_OK) goto out;
        for (int u = 0; u < NU; ++u)
            if (t->seen_inflight[u] > *max_inflight) *max_inflight = t->seen_inflight[u];
    }
    *left = sh->npend;
    if (zt_shard_reduce_grads(sh, st) != ZT_OK) goto out;
    memcpy(out, sh->gshard, sh->shard_total * sizeof(float));
    n = (int)sh->shard_total;
    for (int u = 0, k = 0; u < NU; ++u)   /* check against the exact sums */
        for (size_t i = 0; i < sh->u[u].len; ++i, ++k) {
            const int e = (int)(sh->u[u].lo + i);
            float want = 0;
            for (int r = 0; r < world->size; ++r) want += 2 * contrib(r, u, e);
            if (t->again && u == 3) want += 2.0f * (float)world->size;
            if (out[k] != want) {
                zt_fail(st, ZT_EINTERNAL, "unit %d element %d: %g, expected %g", u, e, out[k], want);
                n = -1;
                goto out;
            }
        }
out:
    sh->fwd_dloss_set = 0;
    if (a) toy_acts_free(t, a);
    zt_shard_free(sh);
    zt_model_free(m, 0);
    return n;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    int rank = zt_world_rank(), N = zt_world_size();
    if (rank != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    zt_group *world = NULL;
    if (zt_group_mpi(MPI_COMM_WORLD, "world", 60.0, &world, &st) != ZT_OK) {
        printf("not ok 1 - world group: %s\n", st.msg);
        return 1;
    }
    tap_diag("world size %d", N);
    enum { MAXE = 128 };
    for (int stage = 2; stage <= 3; ++stage)
        for (int d = 0; d < 2; ++d)
            for (int again = 0; again < 2; ++again) {
                const zt_dtype gdt = d ? ZT_BF16 : ZT_F32;
                const char *dn = d ? "bf16" : "fp32";
                float a[MAXE], b[MAXE];
                int fa = 0, fb = 0, la = 0, lb = 0;
                toy t1 = {again, {0}, rank, 0}, t2 = {again, {0}, rank, 0};
                int na = run(world, stage, gdt, 1, &t1, 0, a, &fa, &la, &st);
                tap_ok(na >= 0, "N=%d stage %d %s%s, overlap: owned gradients are the exact sums%s%s", N,
                       stage, dn, again ? ", a unit asked for again" : "", na < 0 ? ": " : "",
                       na < 0 ? st.msg : "");
                int nb = run(world, stage, gdt, 0, &t2, 0, b, &fb, &lb, &st);
                tap_ok(nb >= 0 && nb == na && !memcmp(a, b, (size_t)na * sizeof(float)),
                       "N=%d stage %d %s%s: bitwise the same without overlap%s%s", N, stage, dn,
                       again ? ", a unit asked for again" : "", nb < 0 ? ": " : "", nb < 0 ? st.msg : "");
                const int want = N > 1 ? ZT_RS_INFLIGHT : 0;
                tap_ok(fa == want && fb == 0 && la == 0 && lb == 0,
                       "N=%d stage %d %s%s: %d reductions in flight at most while backward runs "
                       "(%d without overlap), none after the pass", N, stage, dn,
                       again ? ", a unit asked for again" : "", fa, fb);
                if (again) continue;
                /* the last unit's gradients taken by the forward: after a
                 * step that failed between the passes, then not */
                for (int failed = 0; failed < 2; ++failed) {
                    toy t3 = {0, {0}, rank, 1};
                    float c[MAXE];
                    int nc = run(world, stage, gdt, 1, &t3, failed, c, &fa, &la, &st);
                    tap_ok(nc == na && !memcmp(a, c, (size_t)na * sizeof(float)),
                           "N=%d stage %d %s, overlap, the last unit's gradients taken by a told "
                           "forward%s: the exact sums, bitwise%s%s",
                           N, stage, dn, failed ? " after a told forward without its backward (a "
                                                   "failed step)" : "",
                           nc < 0 ? ": " : "", nc < 0 ? st.msg : "");
                }
            }
    zt_group_free(world);
    int rc = tap_done();
    zt_finalize();
    return rc;
}
