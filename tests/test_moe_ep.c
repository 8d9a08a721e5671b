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
    a->xp = take(b, NK * C); a->yp = take(b, NK * C);
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
    const zt_backend *be = zt_backend_cpu();
    zt_config *c = zt_config_new();
    c->model.expert_parallel = 2;
    zt_mesh *m = NULL;
    int rc = zt_mesh_create(c, be, -1, &m, &st);
    if (!tap_ok(rc == ZT_OK, "mesh with an expert group of 2%s%s", rc ? ": " : "", rc ? st.msg : "")) {
        zt_config_free(c);
        zt_finalize();
        return tap_done();
    }
    const zt_moe_shape s1 = {C, E, K, I, 1, 1}, s2 = {C, E, K, I, 1, 2};
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
    if (rc == ZT_OK) rc = zt_moe_forward(&s1, be, &h1, &w, &b1.a, x, y1, N, &st);
    if (rc == ZT_OK) rc = zt_moe_backward(&s1, be, &h1, &w, &gw1, &b1.a, &b1.g, x, dy, NULL, N, &st);
    /* EP 2: each rank passes its own experts' weights and gradients (local
     * expert l at l: the engine's window, shard.h) */
    const size_t gw0 = (size_t)r * (E / 2) * 2 * I * C, dw0 = (size_t)r * (E / 2) * C * I;
    const zt_moe_w wl = {router, gu + gw0, dn + dw0, NULL, NULL, NULL};
    zt_moe_w gwl = {g2r, g2gu + gw0, g2dn + dw0, NULL, NULL, NULL};
    if (rc == ZT_OK) rc = zt_moe_forward(&s2, be, &h2, &wl, &b2.a, x, y2, N, &st);
    if (rc == ZT_OK) rc = zt_moe_backward(&s2, be, &h2, &wl, &gwl, &b2.a, &b2.g, x, dy, NULL, N, &st);
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
    rc = zt_moe_forward(&s2, be, &h2, &wl, &b3.a, x, y3, Nr, &st3);
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
