/*
 * test_moe_ep.c -- expert parallelism's dispatch (libtrain/moe.h) on 2 ranks
 * (tests/moe_ep.sh runs it under mpirun; rank 0 prints TAP).
 *
 * A MoE layer of 4 experts, top-2, expert parallel size 2 on the cpu
 * backend, every rank with the same weights:
 *  - with its own tokens (and its own two experts' weights, as the engine
 *    stores them), each rank's output y and input gradient dx equal
 *    the same layer run on that rank alone with every expert (P = 1) within
 *    1e-6, and the expert weight gradients summed over the two ranks equal
 *    the sum of the two ranks' P = 1 gradients;
 *  - one GEMM a local expert over its rows from both ranks (the rows
 *    regrouped by expert after the all-to-all): the forward's matmul_fwd
 *    calls are 1 (the router) + 2 per local expert with rows, the
 *    backward's matmul_bwd calls the same (counted through a wrapped cpu
 *    table), where the (rank, expert) pieces are more than the experts;
 *  - the routing's groups on the backend (moe_permute, moe_regroup): the
 *    table counted as a device backend (host_memory 0), a forward and a
 *    backward each copy E + 1 ints to the host (the counts) and, at P = 1,
 *    nothing to the device; at P = 2 the E received counts to the device;
 *  - a routing beyond a buffer: rank 0 with 2 tokens (a buffer of
 *    zt_moe_recv_rows = 2 x 2 x 2 = 8 rows), rank 1 with 6, every token routed
 *    to experts 0 and 1 (rank 0's; ZT_TEST_MOE_ROUTE_ALL=0): 16 rows for
 *    rank 0's 8 -- refused on both ranks before any row moves, naming the
 *    step, the layer and the rank, and the canaries after every received-row
 *    buffer are intact.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "mesh.h"
#include "moe.h"
#include "runtime.h"
#include "tap.h"

enum { C = 8, E = 4, K = 2, I = 6, CANARY = 64 };
static const float CAN = 12345.0f;

typedef struct bufs {
    zt_moe_acts a;
    zt_moe_grad g;
    float *blk[32];
    size_t len[32];
    int n;
} bufs;

static float *take(bufs *b, size_t n) {
    float *p = malloc((n + CANARY) * sizeof(float));
    for (size_t i = 0; i < n + CANARY; ++i) p[i] = i < n ? 0.0f : CAN;
    b->blk[b->n] = p;
    b->len[b->n++] = n;
    return p;
}
static int canaries_ok(const bufs *b) {
    for (int k = 0; k < b->n; ++k)
        for (size_t i = 0; i < CANARY; ++i)
            if (b->blk[k][b->len[k] + i] != CAN) return 0;
    return 1;
}
static void bufs_free(bufs *b) {
    for (int k = 0; k < b->n; ++k) free(b->blk[k]);
}

static void alloc_bufs(bufs *b, const zt_moe_shape *s, size_t N) {
    memset(b, 0, sizeof *b);
    const size_t NK = N * K, R = zt_moe_recv_rows(s, N);
    zt_moe_acts *a = &b->a;
    a->logits = take(b, N * E); a->probs = take(b, N * E); a->wts = take(b, NK);
    a->idx = (int *)(void *)take(b, NK); a->perm = (int *)(void *)take(b, NK);
    a->rows = (int *)(void *)take(b, NK); a->wsel = take(b, NK);
    a->off = (int *)(void *)take(b, E + 1);
    if (s->P > 1) {   /* (zt_moe_carve_shared's) */
        a->xs = take(b, R * C);
        a->gperm = (int *)(void *)take(b, R); a->ginv = (int *)(void *)take(b, R);
        a->gcnt = (int *)(void *)take(b, E);
    }
    a->xp = s->P > 1 ? a->xs : take(b, NK * C); a->yp = take(b, NK * C);
    a->xr = s->P > 1 ? take(b, R * C) : a->xp;
    a->yr = s->P > 1 ? take(b, R * C) : a->yp;
    a->gup = take(b, R * 2 * I); a->hp = take(b, R * I); a->rcap = R;
    zt_moe_grad *g = &b->g;
    g->dyp = take(b, NK * C); g->dxp = take(b, NK * C);
    g->dyr = s->P > 1 ? take(b, R * C) : g->dyp;
    g->dxr = s->P > 1 ? take(b, R * C) : g->dxp;
    g->dhp = take(b, R * I); g->dgup = take(b, R * 2 * I);
    g->dwsel = take(b, NK); g->dwts = take(b, NK); g->dlogits = take(b, N * E); g->dx = take(b, N * C);
}

/* the cpu table with its GEMMs counted */
static long n_fwd, n_bwd, n_th, b_th, n_td, b_td;
static void count_to_host(void *dst, const void *src, size_t bytes) {
    n_th++;
    b_th += (long)bytes;
    zt_backend_cpu()->to_host(dst, src, bytes);
}
static void count_to_device(void *dst, const void *src, size_t bytes) {
    n_td++;
    b_td += (long)bytes;
    zt_backend_cpu()->to_device(dst, src, bytes);
}
static void count_fwd(float *out, const float *inp, const float *w, const float *bias, int N, int C,
                      int OC) {
    n_fwd++;
    zt_backend_cpu()->matmul_fwd(out, inp, w, bias, N, C, OC);
}
static void count_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                      const float *w, int N, int C, int OC) {
    n_bwd++;
    zt_backend_cpu()->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
}

static float frand(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*x >> 40) & 0xffff) / 65536.0f - 0.5f;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    if (zt_world_rank() != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    const int W = zt_world_size(), r = zt_world_rank();
    if (W != 2) {
        printf("1..0 # SKIP needs 2 ranks (%d)\n", W);
        zt_finalize();
        return 0;
    }
    zt_backend counting = *zt_backend_cpu();
    counting.matmul_fwd = count_fwd;
    counting.matmul_bwd = count_bwd;
    counting.to_host = count_to_host;   /* (as a device backend: zt_xcopy calls them) */
    counting.to_device = count_to_device;
    counting.host_memory = 0;
    const zt_backend *be = &counting;
    zt_config *c = zt_config_new();
    c->model.expert_parallel = 2;
    zt_mesh *m = NULL;
    int rc = zt_mesh_create(c, zt_backend_cpu(), -1, &m, &st);   /* (exchanges uncounted) */
    if (!tap_ok(rc == ZT_OK, "mesh with an expert group of 2%s%s", rc ? ": " : "", rc ? st.msg : "")) {
        zt_config_free(c);
        zt_finalize();
        return tap_done();
    }
    const zt_moe_shape s1 = {C, E, K, I, 1, 1, 0, 0, 0, 0, 0, 0}, s2 = {C, E, K, I, 1, 2, 0, 0, 0, 0, 0, 0};
    /* the same weights everywhere; tokens and output gradients per rank */
    uint64_t seed = 7;
    float router[E * C], gu[E * 2 * I * C], dn[E * C * I];
    for (int i = 0; i < E * C; ++i) router[i] = frand(&seed);
    for (int i = 0; i < E * 2 * I * C; ++i) gu[i] = frand(&seed);
    for (int i = 0; i < E * C * I; ++i) dn[i] = frand(&seed);
    const zt_moe_w w = {router, gu, dn, NULL, NULL, NULL};
    enum { N = 5 };
    float x[6 * C], dy[N * C];   /* (6 tokens: the refusal's rank 1) */
    seed = 100 + (uint64_t)r;
    for (int i = 0; i < 6 * C; ++i) x[i] = frand(&seed);
    for (int i = 0; i < N * C; ++i) dy[i] = frand(&seed);

    /* P = 1 on this rank alone, then P = 2 over the group */
    float y1[N * C], y2[N * C], dx1[N * C], dx2[N * C];
    float g1r[E * C] = {0}, g1gu[E * 2 * I * C] = {0}, g1dn[E * C * I] = {0};
    float g2r[E * C] = {0}, g2gu[E * 2 * I * C] = {0}, g2dn[E * C * I] = {0};
    zt_moe_w gw1 = {g1r, g1gu, g1dn, NULL, NULL, NULL};
    zt_moe_host h1, h2;
    memset(&h1, 0, sizeof h1);
    memset(&h2, 0, sizeof h2);
    bufs b1, b2;
    alloc_bufs(&b1, &s1, N);
    alloc_bufs(&b2, &s2, N);
    rc = zt_moe_set_mesh(&h2, &s2, m, &st);
    /* the transfers per call: [P = 1 forward, backward, P = 2 forward, backward] x
     * {to_host calls, bytes, to_device calls, bytes} */
    long xf[4][4];
#define XFER(k) (xf[k][0] = n_th, xf[k][1] = b_th, xf[k][2] = n_td, xf[k][3] = b_td)
#define XFER_END(k) (xf[k][0] = n_th - xf[k][0], xf[k][1] = b_th - xf[k][1], \
                     xf[k][2] = n_td - xf[k][2], xf[k][3] = b_td - xf[k][3])
    XFER(0);
    if (rc == ZT_OK) rc = zt_moe_forward(&s1, be, &h1, &w, &b1.a, &b1.g, x, y1, N, &st);
    XFER_END(0);
    XFER(1);
    if (rc == ZT_OK) rc = zt_moe_backward(&s1, be, &h1, &w, &gw1, &b1.a, &b1.g, x, dy, NULL, N, &st);
    XFER_END(1);
    /* EP 2: each rank passes its own experts' weights and gradients (local
     * expert l at l: the engine's window, shard.h) */
    const size_t gw0 = (size_t)r * (E / 2) * 2 * I * C, dw0 = (size_t)r * (E / 2) * C * I;
    const zt_moe_w wl = {router, gu + gw0, dn + dw0, NULL, NULL, NULL};
    zt_moe_w gwl = {g2r, g2gu + gw0, g2dn + dw0, NULL, NULL, NULL};
    long f0 = n_fwd, f1 = 0, k0 = 0, k1 = 0;
    XFER(2);
    if (rc == ZT_OK) rc = zt_moe_forward(&s2, be, &h2, &wl, &b2.a, &b2.g, x, y2, N, &st);
    XFER_END(2);
    f1 = n_fwd;
    k0 = n_bwd;
    XFER(3);
    if (rc == ZT_OK) rc = zt_moe_backward(&s2, be, &h2, &wl, &gwl, &b2.a, &b2.g, x, dy, NULL, N, &st);
    XFER_END(3);
    k1 = n_bwd;
    /* the pieces (rank i, local expert l) with rows and the experts with
     * rows, from the agreed counts (h2.all: every rank's rows per expert) */
    int32_t pieces = 0, experts = 0;
    if (rc == ZT_OK)
        for (int l = 0; l < E / 2; ++l) {
            int any = 0;
            for (int i = 0; i < 2; ++i) {
                const int32_t c = h2.all[(size_t)i * (E + 1) + r * (E / 2) + l];
                pieces += c > 0;
                any |= c > 0;
            }
            experts += any;
        }
    memcpy(dx1, b1.g.dx, sizeof dx1);
    memcpy(dx2, b2.g.dx, sizeof dx2);
    double dmax = 0;
    for (int i = 0; i < N * C; ++i) {
        dmax = fmax(dmax, fabs((double)y1[i] - y2[i]));
        dmax = fmax(dmax, fabs((double)dx1[i] - dx2[i]));
    }
    int32_t agree = rc == ZT_OK && dmax <= 1e-6 && canaries_ok(&b1) && canaries_ok(&b2);
    /* the expert weight gradients: sums over the ranks */
    float *sums[2] = {g1gu, g2gu}, *sumd[2] = {g1dn, g2dn};
    if (rc == ZT_OK)
        for (int k = 0; k < 2; ++k) {
            m->world->ops->allreduce_sum(m->world, sums[k], (size_t)E * 2 * I * C, ZT_F32, &st);
            m->world->ops->allreduce_sum(m->world, sumd[k], (size_t)E * C * I, ZT_F32, &st);
        }
    double gmax = 0;
    for (int i = 0; i < E * 2 * I * C; ++i) gmax = fmax(gmax, fabs((double)g1gu[i] - g2gu[i]));
    for (int i = 0; i < E * C * I; ++i) gmax = fmax(gmax, fabs((double)g1dn[i] - g2dn[i]));
    for (int i = 0; i < E * C; ++i) gmax = fmax(gmax, fabs((double)g1r[i] - g2r[i]));
    agree = agree && gmax <= 1e-6;
    int32_t bad = !agree;
    m->world->ops->allreduce_max(m->world, &bad, 1, ZT_I32, &st);
    tap_ok(!bad, "EP 2: y, dx equal one rank's with every expert (max %.2e), the expert gradients' "
           "sums over the ranks equal (max %.2e); canaries intact%s%s", dmax, gmax, rc ? ": " : "",
           rc ? st.msg : "");
    int32_t gemm_bad = !(rc == ZT_OK && f1 - f0 == 1 + 2 * experts && k1 - k0 == 1 + 2 * experts);
    int32_t split = pieces > experts;   /* (some expert's rows come from both ranks) */
    m->world->ops->allreduce_max(m->world, &gemm_bad, 1, ZT_I32, &st);
    m->world->ops->allreduce_max(m->world, &split, 1, ZT_I32, &st);
    tap_ok(!gemm_bad && split, "EP 2: one GEMM a local expert (rank %d: %d experts with rows from "
           "%d (rank, expert) pieces; matmul_fwd %ld, matmul_bwd %ld calls, want %d each)", r,
           (int)experts, (int)pieces, f1 - f0, k1 - k0, 1 + 2 * (int)experts);
    int32_t xfer_bad = rc != ZT_OK;
    for (int k = 0; k < 4; ++k) {
        const long want[4] = {1, (E + 1) * (long)sizeof(int), k < 2 ? 0 : 1,
                              k < 2 ? 0 : E * (long)sizeof(int)};
        for (int j = 0; j < 4; ++j) xfer_bad |= xf[k][j] != want[j];
        if (r == 0)
            tap_diag("%s %s: to_host %ld calls %ld bytes, to_device %ld calls %ld bytes", k < 2 ? "P = 1" :
                     "P = 2", k % 2 ? "backward" : "forward", xf[k][0], xf[k][1], xf[k][2], xf[k][3]);
    }
    m->world->ops->allreduce_max(m->world, &xfer_bad, 1, ZT_I32, &st);
    tap_ok(!xfer_bad, "routing on the backend: a forward or backward copies the E + 1 counts to the "
           "host, to the device nothing at P = 1 and the E received counts at P = 2");
    /* both ranks' tokens on one rank (rank 0's first): the rows of each
     * expert in the order EP 2 runs them, so the same sums -- bitwise */
    {
        float xa[2 * N * C], dya[2 * N * C], ya[2 * N * C];
        float gar[E * C] = {0}, gagu[E * 2 * I * C] = {0}, gadn[E * C * I] = {0};
        zt_moe_w gwa = {gar, gagu, gadn, NULL, NULL, NULL};
        int cnt[2] = {N * C, N * C}, dsp[2] = {0, N * C};
        memcpy(xa + r * N * C, x, sizeof(float) * N * C);
        memcpy(dya + r * N * C, dy, sizeof(float) * N * C);
        m->world->ops->allgather_inplace(m->world, xa, cnt, dsp, ZT_F32, &st);
        m->world->ops->allgather_inplace(m->world, dya, cnt, dsp, ZT_F32, &st);
        bufs ba;
        zt_moe_host ha;
        memset(&ha, 0, sizeof ha);
        alloc_bufs(&ba, &s1, 2 * N);
        int rca = zt_moe_forward(&s1, be, &ha, &w, &ba.a, &ba.g, xa, ya, 2 * N, &st);
        if (rca == ZT_OK)
            rca = zt_moe_backward(&s1, be, &ha, &w, &gwa, &ba.a, &ba.g, xa, dya, NULL, 2 * N, &st);
        /* (g2gu, g2dn: summed over the ranks above, so every expert's from
         * the rank that runs it) */
        const int same = rca == ZT_OK && !memcmp(gagu, g2gu, sizeof gagu) &&
                         !memcmp(gadn, g2dn, sizeof gadn);
        double amax = 0;
        for (int i = 0; i < E * 2 * I * C; ++i) amax = fmax(amax, fabs((double)gagu[i] - g2gu[i]));
        for (int i = 0; i < E * C * I; ++i) amax = fmax(amax, fabs((double)gadn[i] - g2dn[i]));
        int32_t nsame = !same;
        m->world->ops->allreduce_max(m->world, &nsame, 1, ZT_I32, &st);
        tap_ok(!nsame, "EP 2's expert weight gradients bitwise equal to one rank's over both ranks' "
               "tokens (max %.2e)", amax);
        bufs_free(&ba);
        zt_moe_host_free(&ha);
    }
    bufs_free(&b1);
    bufs_free(&b2);
    zt_moe_host_free(&h1);

    /* a routing beyond rank 0's buffer */
    const int Nr = r == 0 ? 2 : 6;
    bufs b3;
    alloc_bufs(&b3, &s2, (size_t)Nr);
    setenv("ZT_TEST_MOE_ROUTE_ALL", "0", 1);
    h2.step = 7;
    h2.layer = 3;
    float y3[6 * C];
    zt_status st3;
    rc = zt_moe_forward(&s2, be, &h2, &wl, &b3.a, &b3.g, x, y3, Nr, &st3);
    unsetenv("ZT_TEST_MOE_ROUTE_ALL");
    int32_t ok3 = rc == ZT_ENOMEM &&
                  strstr(st3.msg, "step 7, MoE layer 3: 16 routed rows go to the 2 experts of rank 0 "
                         "of the expert group, more than its buffer of 8 rows") && canaries_ok(&b3);
    if (!ok3)
        fprintf(stderr, "rank %d: rc %d, canaries %d: %s\n", r, rc, canaries_ok(&b3), st3.msg);
    int32_t nok3 = !ok3;
    m->world->ops->allreduce_max(m->world, &nok3, 1, ZT_I32, &st);
    tap_ok(!nok3, "a routing beyond rank 0's buffer (16 rows for 8) refused on both ranks before any "
           "row moves, nothing written past a buffer: %s", rc ? st3.msg : "(not refused)");
    bufs_free(&b3);
    zt_moe_host_free(&h2);
    zt_mesh_free(m);
    zt_config_free(c);
    zt_finalize();
    return tap_done();
}
