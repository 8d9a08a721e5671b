/*
 * test_mesh.c -- the rank layout (libtrain/mesh.h); run under mpirun at 1-4
 * ranks by tests/mesh_mpi.sh (rank 0 prints TAP).
 *
 * The shape: for worlds of 1-8 ranks, every sequence parallel size and
 * shard group that divides them, at stages 0 and 3, every rank's sizes and
 * coordinates are the layout's definition (sp consecutive ranks share
 * samples, G consecutive ranks a shard group; G = W at stage 0; ep and tp
 * 1), and a shard group that does not divide the world is refused naming
 * the key and the world size.  The groups: on the world this test runs on,
 * each axis group's members are exactly the ranks with the same other
 * coordinate (the sum of their world ranks over the group), its rank is the
 * coordinate and its size the axis size, with the host-memory backend (the
 * twin is the group itself) and on cpu-strict (a twin of its own, the same
 * ranks); the mesh counts each group's bytes once.  Expert parallelism:
 * the expert axis' sizes and coordinates (ep consecutive ranks), its
 * refusals, and its group with its twin (2 consecutive ranks on even
 * worlds); the expert shard axis (the shard group's ranks with the same
 * expert coordinate) and its group, with all ranks and hybrid shard groups
 * of 2.
 */
#include <string.h>
#include "config.h"
#include "devmem.h"
#include "mesh.h"
#include "runtime.h"
#include "tap.h"

static int shape_ok(const zt_mesh_shape *s, int W, int r, int sp, int G) {
    const int want_size[ZT_AX_N] = {W / sp, sp, G, W / G, 1, 1, 1};
    const int want_coord[ZT_AX_N] = {r / sp, r % sp, r % G, r / G, 0, 0, 0};
    return s->world == W && s->rank == r && !memcmp(s->size, want_size, sizeof want_size) &&
           !memcmp(s->coord, want_coord, sizeof want_coord);
}

static void check_shapes(zt_config *c) {
    int bad = 0, n = 0;
    for (int W = 1; W <= 8; ++W)
        for (int sp = 1; sp <= W; ++sp)
            for (int g = 0; g <= W; ++g)
                for (int stage = 0; stage <= 3; stage += 3) {
                    if (W % sp || (g && W % g)) continue;
                    c->model.seq_parallel = sp;
                    c->shard_group_size = g;
                    c->zero_stage = stage;
                    const int G = stage == 0 || g == 0 ? W : g;
                    for (int r = 0; r < W; ++r) {
                        zt_mesh_shape s;
                        zt_status st;
                        ++n;
                        if (zt_mesh_shape_of(c, W, r, 1, &s, &st) != ZT_OK || !shape_ok(&s, W, r, sp, G)) {
                            if (!bad++)
                                tap_diag("W %d rank %d sp %d shard group %d stage %d", W, r, sp, g, stage);
                        }
                    }
                }
    tap_ok(bad == 0 && n > 0, "shape: %d (world, rank, sp, shard group, stage) cases give the "
           "layout's sizes and coordinates (%d wrong)", n, bad);
    /* shard_group_size "node": the ranks per node */
    c->model.seq_parallel = 1;
    c->zero_stage = 3;
    c->shard_group_size = ZT_SHARD_GROUP_NODE;
    zt_mesh_shape s;
    zt_status st;
    int rc = zt_mesh_shape_of(c, 8, 5, 4, &s, &st);
    tap_ok(rc == ZT_OK && shape_ok(&s, 8, 5, 1, 4), "shape: shard group \"node\" of 4 ranks per node on 8");
    rc = zt_mesh_shape_of(c, 8, 0, 3, &s, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "shard_group_size=\"node\" (3 ranks per node) must divide "
                                     "the world size 8"), "shape: \"node\" of 3 on 8 refused: %s", st.msg);
    c->shard_group_size = 3;
    rc = zt_mesh_shape_of(c, 8, 0, 1, &s, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "shard_group_size=3 must divide the world size 8"),
           "shape: shard group 3 on 8 refused: %s", st.msg);
}

/* expert parallelism: ep consecutive ranks, coordinate rank % ep, the
 * other axes as without it; ep not dividing the world or (stage 3) the
 * shard group refused naming it */
static void check_ep_shapes(zt_config *c) {
    int bad = 0, n = 0;
    c->model.seq_parallel = 1;
    for (int W = 1; W <= 8; ++W)
        for (int ep = 1; ep <= W; ++ep)
            for (int g = 0; g <= W; ++g)
                for (int stage = 0; stage <= 3; stage += 3) {
                    const int G = stage == 0 || g == 0 ? W : g;
                    if (W % ep || (g && W % g) || G % ep) continue;
                    c->model.expert_parallel = ep;
                    c->shard_group_size = g;
                    c->zero_stage = stage;
                    for (int r = 0; r < W; ++r) {
                        zt_mesh_shape s;
                        zt_status st;
                        ++n;
                        /* expert shard: the shard group's ranks with r's ep
                         * coordinate (size 1 without ep) */
                        const int want_size[ZT_AX_N] = {W, 1, G, W / G, ep, ep > 1 ? G / ep : 1, 1};
                        const int want_coord[ZT_AX_N] = {r, 0, r % G, r / G, r % ep,
                                                         ep > 1 ? r % G / ep : 0, 0};
                        if (zt_mesh_shape_of(c, W, r, 1, &s, &st) != ZT_OK ||
                            memcmp(s.size, want_size, sizeof want_size) ||
                            memcmp(s.coord, want_coord, sizeof want_coord)) {
                            if (!bad++) tap_diag("W %d rank %d ep %d shard group %d stage %d", W, r, ep, g, stage);
                        }
                    }
                }
    tap_ok(bad == 0 && n > 0, "shape: %d (world, rank, ep, shard group, stage) cases give the "
           "expert and expert shard axes' sizes and coordinates (%d wrong)", n, bad);
    zt_mesh_shape s;
    zt_status st;
    c->model.expert_parallel = 4;
    c->zero_stage = 3;
    c->shard_group_size = 2;
    int rc = zt_mesh_shape_of(c, 8, 0, 1, &s, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "expert_parallel_size=4 must divide the ZeRO shard group (2 ranks)"),
           "shape: ep 4 with shard groups of 2 refused: %s", st.msg);
    c->model.expert_parallel = 3;
    c->shard_group_size = 0;
    rc = zt_mesh_shape_of(c, 8, 0, 1, &s, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "expert_parallel_size=3 must divide the number of ranks (8 ranks)"),
           "shape: ep 3 on 8 ranks refused: %s", st.msg);
    c->model.expert_parallel = 1;
}

/* the sum of the world ranks over g == the sum over the ranks whose
 * coordinate on `other` is this rank's */
static int members_ok(zt_group *g, int W, int r, int other_size_div, int by_div, zt_status *st) {
    int64_t sum = r, want = 0;
    if (g->ops->allreduce_sum(g, &sum, 1, ZT_I64, st) != ZT_OK) return 0;
    for (int q = 0; q < W; ++q)
        want += (by_div ? q / other_size_div == r / other_size_div
                        : q % other_size_div == r % other_size_div) ? q : 0;
    return sum == want;
}

static void check_groups(zt_config *c, const zt_backend *be, const char *bn) {
    const int W = zt_world_size(), r = zt_world_rank();
    c->model.seq_parallel = W % 2 == 0 ? 2 : 1;
    c->shard_group_size = W % 2 == 0 ? 2 : 0;
    c->zero_stage = 3;
    zt_mesh *m = NULL;
    zt_status st;
    int rc = zt_mesh_create(c, be, -1, &m, &st);
    if (!tap_ok(rc == ZT_OK, "%s: mesh on %d ranks%s%s", bn, W, rc ? ": " : "", rc ? st.msg : ""))
        return;
    const int sp = c->model.seq_parallel, G = c->shard_group_size ? c->shard_group_size : W;
    tap_ok(shape_ok(&m->shape, W, r, sp, G) && m->world->size == W && m->world->rank == r,
           "%s: the mesh's shape is zt_mesh_shape_of's (sp %d, shard group %d)", bn, sp, G);
    const int dev = zt_be_device(be);
    int ok = 1;
    /* sequence: sp consecutive ranks (same r / sp); shard: G consecutive
     * (same r / G); replica: same r % G */
    struct { int axis, div, by_div; } ax[] = {
        {ZT_AX_SP, sp, 1}, {ZT_AX_SHARD, G, 1}, {ZT_AX_REPLICA, G, 0}};
    for (int i = 0; i < 3; ++i) {
        const int a = ax[i].axis, n = zt_mesh_size(m, a);
        zt_group *g = m->g[a], *d = m->dg[a];
        if (n == 1 && a != ZT_AX_SHARD) {   /* nothing uses a group of one */
            ok &= !g && !d;
            continue;
        }
        ok &= g && d && g->size == n && g->rank == zt_mesh_coord(m, a) && d->size == n &&
              d->rank == g->rank && (dev ? d != g : d == g);
        ok &= g && members_ok(g, W, r, ax[i].div, ax[i].by_div, &st);
        if (!ok) { tap_diag("%s: axis %s", bn, zt_mesh_axis_name(a)); break; }
    }
    ok &= !m->g[ZT_AX_DP] && !m->g[ZT_AX_EP] && !m->g[ZT_AX_ESHARD] && !m->g[ZT_AX_TP];
    ok &= (G == W) == (m->g[ZT_AX_SHARD] == m->world);
    tap_ok(ok, "%s: every axis group holds the ranks of its coordinates, its rank the coordinate, "
           "with its device twin", bn);
    /* bytes: one all-reduce over the shard group, counted once */
    const uint64_t before = zt_mesh_comm_bytes(m, ZT_COMM_ALLREDUCE);
    zt_group *sg = m->g[ZT_AX_SHARD];
    const uint64_t own_before = sg->bytes[ZT_COMM_ALLREDUCE];
    float x[8] = {0};
    rc = sg->ops->allreduce_sum(sg, x, 8, ZT_F32, &st);
    const uint64_t own = sg->bytes[ZT_COMM_ALLREDUCE] - own_before;
    tap_ok(rc == ZT_OK && zt_mesh_comm_bytes(m, ZT_COMM_ALLREDUCE) - before == own,
           "%s: the mesh counts a shard-group all-reduce once (%llu bytes)", bn,
           (unsigned long long)own);
    zt_mesh_free(m);
}

/* the expert group: ep = 2 consecutive ranks (same r / 2), its rank the
 * coordinate, with its device twin; the expert shard group: the ranks of
 * the shard group (all, or 2 consecutive: hybrid) with the same r % 2, its
 * rank (r % G) / 2 (no group when that is one rank: 2 ranks, hybrid groups
 * of 2 on 4); none of either at ep = 1 (odd worlds) */
static void check_ep_group(zt_config *c, const zt_backend *be, const char *bn) {
    const int W = zt_world_size(), r = zt_world_rank(), ep = W % 2 == 0 ? 2 : 1;
    for (int gs = 0; gs <= 2; gs += 2) {
        if (gs && (ep == 1 || W == 2)) continue;   /* (G = 2 = W: the case gs = 0) */
        const int G = gs ? gs : W;
        c->model.seq_parallel = 1;
        c->model.expert_parallel = ep;
        c->shard_group_size = gs;
        c->zero_stage = 3;
        zt_mesh *m = NULL;
        zt_status st;
        int rc = zt_mesh_create(c, be, -1, &m, &st);
        if (!tap_ok(rc == ZT_OK, "%s: mesh with ep %d, shard group %d on %d ranks%s%s", bn, ep, G,
                    W, rc ? ": " : "", rc ? st.msg : ""))
            continue;
        zt_group *g = m->g[ZT_AX_EP], *d = m->dg[ZT_AX_EP];
        zt_group *e = m->g[ZT_AX_ESHARD], *ed = m->dg[ZT_AX_ESHARD];
        int ok = zt_mesh_size(m, ZT_AX_EP) == ep && zt_mesh_coord(m, ZT_AX_EP) == r % ep;
        if (ep == 1) {
            ok &= !g && !d && !e && !ed && zt_mesh_size(m, ZT_AX_ESHARD) == 1;
        } else {
            ok &= g && d && g->size == ep && g->rank == r % ep && d->size == ep &&
                  d->rank == g->rank && (zt_be_device(be) ? d != g : d == g) &&
                  members_ok(g, W, r, ep, 1, &st);
            ok &= zt_mesh_size(m, ZT_AX_ESHARD) == G / ep && zt_mesh_coord(m, ZT_AX_ESHARD) == r % G / ep;
            if (G / ep == 1) {   /* a group of one rank: none */
                ok &= !e && !ed;
            } else {
                ok &= e && ed && e->size == G / ep && e->rank == r % G / ep && ed->size == e->size &&
                      ed->rank == e->rank && (zt_be_device(be) ? ed != e : ed == e);
                int64_t sum = r, want = 0;   /* same shard group (r / G), same r % ep */
                for (int q = 0; q < W; ++q) want += q / G == r / G && q % ep == r % ep ? q : 0;
                ok &= e && e->ops->allreduce_sum(e, &sum, 1, ZT_I64, &st) == ZT_OK && sum == want;
            }
        }
        tap_ok(ok, "%s: the expert group (ep %d) holds %d consecutive ranks, the expert shard "
               "group (shard group %d) its shard group's ranks with the same expert coordinate, "
               "their ranks the coordinates, with their device twins", bn, ep, ep, G);
        zt_mesh_free(m);
    }
    c->model.expert_parallel = 1;
    c->shard_group_size = 0;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    if (zt_world_rank() != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    tap_diag("world size %d", zt_world_size());
    zt_config *c = zt_config_new();
    check_shapes(c);
    zt_config *c2 = zt_config_new();
    check_groups(c2, zt_backend_cpu(), "cpu");
    check_groups(c2, zt_backend_cpu_strict(), "cpu-strict");
    check_ep_shapes(c);
    check_ep_group(c2, zt_backend_cpu(), "cpu");
    check_ep_group(c2, zt_backend_cpu_strict(), "cpu-strict");
    zt_config_free(c);
    zt_config_free(c2);
    int rc = tap_done();
    zt_finalize();
    return rc;
}
