/* moe.c -- the Mixture of Experts MLP (moe.h). */
#include <stdlib.h>
#include <string.h>
#include "moe.h"
#include "devmem.h"
#include "model.h"   /* zt_mm_fwd */

size_t zt_moe_recv_rows(const zt_moe_shape *s, size_t N) {
    const size_t K = (size_t)s->K;
    if (s->P <= 1) return N * K;
    const size_t P = (size_t)s->P, El = (size_t)s->E / P;
    return P * N * (K < El ? K : El);
}

void zt_moe_carve(zt_carve *cv, zt_moe_acts *a, const zt_moe_shape *s, size_t N, float *base,
                  const zt_moe_acts *x) {
    const size_t E = (size_t)s->E, K = (size_t)s->K, NK = N * K, C = (size_t)s->C, I = (size_t)s->I;
    const size_t R = zt_moe_recv_rows(s, N);
    float *p[11] = {0};
    p[0] = zt_carve_take(cv, N * E, 1);
    p[1] = zt_carve_take(cv, N * E, 1);
    p[2] = zt_carve_take(cv, NK, 1);
    p[3] = zt_carve_take(cv, NK, 1);   /* int and float are both 4 bytes */
    p[4] = zt_carve_take(cv, NK, 1);
    p[5] = zt_carve_take(cv, NK, 1);
    p[6] = zt_carve_take(cv, NK, 1);
    p[10] = zt_carve_take(cv, E + 1, 1);
    /* (the routed inputs: the shared rows, zt_moe_carve_shared -- xs with
     * expert parallelism, where they are only sent; without, xp, which the
     * backward gathers again from the block's input) */
    uint16_t *gup16 = NULL, *hp16 = NULL;
    if (s->b16) {
        gup16 = zt_carve_take16(cv, R * 2 * I);
        hp16 = zt_carve_take16(cv, R * I);
    } else {
        p[8] = zt_carve_take(cv, R * 2 * I, 0);
        p[9] = zt_carve_take(cv, R * I, 0);
    }
    /* (b16 without expert parallelism: the experts' outputs not kept, the
     * forward's bf16 scratch in the backward's dxp, outputs32) */
    float *yp = NULL;
    uint16_t *yp16 = NULL;   /* (keep_yp: kept in bf16, the test hook; ep_yp16) */
    if (s->b16 && s->P > 1 && s->ex16 && s->ep_yp16) yp16 = zt_carve_take16(cv, NK * C);
    else if (!(s->b16 && s->P <= 1)) yp = zt_carve_take(cv, NK * C, 0);
    else if (s->keep_yp) yp16 = zt_carve_take16(cv, NK * C);
    float *xr = NULL, *yr = yp;
    uint16_t *xr16 = NULL;   /* (ep_x16: the received rows kept in bf16, and no yr:
                              * the outputs go back in bf16 as the GEMMs wrote them) */
    if (s->P > 1) {
        if (s->b16 && s->ex16 && s->ep_x16) {
            xr16 = zt_carve_take16(cv, R * C);
            yr = NULL;
        } else {
            xr = zt_carve_take(cv, R * C, 0);
            yr = zt_carve_take(cv, R * C, 0);
        }
    }
    if (!base) return;
    a->logits = p[0]; a->probs = p[1]; a->wts = p[2];
    a->idx = (int *)(void *)p[3]; a->perm = (int *)(void *)p[4]; a->rows = (int *)(void *)p[5];
    a->off = (int *)(void *)p[10];
    a->xp16 = s->P > 1 ? NULL : x->xp16;
    a->wsel = p[6]; a->xp = s->P > 1 ? x->xs : x->xp; a->gup = p[8]; a->hp = p[9]; a->yp = yp;
    a->xr = s->P > 1 ? xr : a->xp; a->yr = yr; a->rcap = R;
    a->gup16 = gup16; a->hp16 = hp16; a->yp16 = yp16; a->xr16 = xr16;
    a->ex16 = s->b16 && s->ex16 && s->P > 1;
    a->xs = s->P > 1 ? x->xs : NULL;
    a->gperm = s->P > 1 ? x->gperm : NULL;
    a->ginv = s->P > 1 ? x->ginv : NULL;
    a->gcnt = s->P > 1 ? x->gcnt : NULL;
}

void zt_moe_carve_shared(zt_carve *cv, zt_moe_acts *x, const zt_moe_shape *s, size_t N,
                         float *base) {
    if (s->P <= 1) {   /* the routed inputs [NK, C], gathered again by the backward */
        if (s->x16 && s->b16) {   /* (in bf16: zt_moe_acts xp16) */
            uint16_t *xp16 = zt_carve_take16(cv, N * (size_t)s->K * (size_t)s->C);
            if (base) x->xp16 = xp16;
            return;
        }
        float *xp = zt_carve_take(cv, N * (size_t)s->K * (size_t)s->C, 0);
        if (base) x->xp = xp;
        return;
    }
    const size_t R = zt_moe_recv_rows(s, N), C = (size_t)s->C;
    /* (ep_x16 with the bf16 exchanges: no xs, the rows sent gathered in the
     * backward's dyp, free in a forward, and the outputs sent back in bf16) */
    float *xs = s->b16 && s->ex16 && s->ep_x16 ? NULL : zt_carve_take(cv, R * C, 0);
    float *gp = zt_carve_take(cv, R, 1), *gi = zt_carve_take(cv, R, 1);
    float *gc = zt_carve_take(cv, (size_t)s->E, 1);
    if (!base) return;
    x->xs = xs;
    x->gperm = (int *)(void *)gp;
    x->ginv = (int *)(void *)gi;
    x->gcnt = (int *)(void *)gc;
}

void zt_moe_carve_grad(zt_carve *cv, zt_moe_grad *g, const zt_moe_shape *s, size_t N, float *base) {
    const size_t E = (size_t)s->E, K = (size_t)s->K, NK = N * K, C = (size_t)s->C, I = (size_t)s->I;
    const size_t R = zt_moe_recv_rows(s, N);
    float *dyp = zt_carve_take(cv, NK * C, 0), *dxp = zt_carve_take(cv, NK * C, 0);
    float *dhp = zt_carve_take(cv, R * I, 0), *dgup = zt_carve_take(cv, R * 2 * I, 0);
    float *dwsel = zt_carve_take(cv, NK, 1), *dwts = zt_carve_take(cv, NK, 1);
    float *dlogits = zt_carve_take(cv, N * E, 1), *dx = zt_carve_take(cv, N * C, 0);
    float *dyr = dyp, *dxr = dxp;
    if (s->P > 1) {
        dyr = zt_carve_take(cv, R * C, 0);
        dxr = zt_carve_take(cv, R * C, 0);
    }
    if (!base) return;
    *g = (zt_moe_grad){dyp, dxp, dyr, dxr, dhp, dgup, dwsel, dwts, dlogits, dx};
}

int zt_moe_set_mesh(zt_moe_host *h, const zt_moe_shape *s, const zt_mesh *mesh, zt_status *st) {
    const int P = s->P > 1 ? s->P : 1;
    zt_moe_ep ep = {zt_mesh_size(mesh, ZT_AX_EP), zt_mesh_coord(mesh, ZT_AX_EP),
                    mesh->g[ZT_AX_EP], mesh->dg[ZT_AX_EP]};
    if (ep.n != P || (P > 1 && (!ep.g || !ep.dg || ep.g->size != P || ep.g->rank != ep.rank)))
        return zt_fail(st, ZT_EINTERNAL, "llama: expert parallel group of %d for a model laid out "
                       "for %d", ep.n, P);
    if (P > 1 && !ep.dg->ops->alltoallv)
        return zt_fail(st, ZT_EUNSUPPORTED, "expert_parallel_size=%d: the %s communication "
                       "backend has no all-to-all of variable counts", P, ep.dg->ops->name);
    h->ep = ep;
    h->mesh = mesh;
    /* a device run reads the counts back asynchronously (route_groups):
     * into page-locked memory, allocated once here (memplan.c counts it) */
    if (!h->count && zt_mem_device_backend()) {
        if (!(h->count = zt_mem_alloc((size_t)(s->E + 1) * sizeof(int),
                                      ZT_MEM_WORKSPACE | ZT_MEM_HOST | ZT_MEM_PIN, st)))
            return zt_fail_prefix(st, "expert routing counts");
        h->count_acct = 1;
    }
    return ZT_OK;
}

int zt_moe_check_backend(const zt_backend *be, zt_status *st) {
    if (be && (!be->moe_route_fwd || !be->moe_route_bwd || !be->rows_gather || !be->rows_scatter ||
               !be->rows_dot || !be->moe_permute || !be->moe_regroup || !be->sigmoid_fwd ||
               !be->sigmoid_bwd))
        return zt_fail(st, ZT_EUNSUPPORTED, "llama: the %s backend has no Mixture of Experts kernels "
                       "(ztrain.model.n_experts > 0 runs on the cpu and cuda backends; docs/moe.md)",
                       be->name ? be->name : "?");
    return ZT_OK;
}

double zt_moe_aux(int E, int L, int N, const double *cnt, const double *psum, double scale,
                  float *coef_e) {
    const double rows = (double)L * N;
    double aux = 0;
    for (int e = 0; e < E; ++e) {
        aux += (cnt[e] / rows) * (psum[e] / rows);
        if (coef_e) coef_e[e] = (float)(scale * E * cnt[e] / (rows * rows));
    }
    return aux * E;
}

void zt_moe_host_free(zt_moe_host *h) {
    free(h->idx);
    if (h->count_acct) zt_mem_free(h->count);
    else free(h->count);
    free(h->scnt);
    free(h->rcnt);
    free(h->nloc);
    free(h->sc);
    free(h->sd);
    free(h->rc);
    free(h->rd);
    free(h->all);
    free(h->agc);
    free(h->agd);
    const zt_moe_ep ep = h->ep;   /* (the groups and the message context stay) */
    const zt_mesh *mesh = h->mesh;
    const int layer = h->layer;
    const long step = h->step;
    memset(h, 0, sizeof *h);
    h->ep = ep;
    h->mesh = mesh;
    h->layer = layer;
    h->step = step;
}

/* ZT_TEST_MOE_ROUTE_ALL=e (a test hook, outside the ZTRAIN_ namespace on
 * purpose): every token's k-th routed expert is (e + k) mod E -- a forced
 * imbalance, everything on the same experts.  *e = -1: not set. */
static int forced_expert(int E, int *e, zt_status *st) {
    const char *v = getenv("ZT_TEST_MOE_ROUTE_ALL");
    *e = -1;
    if (!v || !*v) return ZT_OK;
    char *end;
    const long x = strtol(v, &end, 10);
    if (end == v || *end || x < 0 || x >= E)
        return zt_fail(st, ZT_EINVAL, "ZT_TEST_MOE_ROUTE_ALL='%s': expected an integer from 0 to "
                       "%d (an expert)", v, E - 1);
    *e = (int)x;
    return ZT_OK;
}

/* bytes (<= (E + 1) ints) of device memory src into host memory dst, the
 * routing counts' read.  NCCL: queued after collectives waited for on the
 * stream only (a ZeRO-3 gather, an earlier layer's gradient reduce-scatter):
 * the read into the page-locked counts (it returns at once) waits with
 * their bound (mesh.h), no fence (which would wait for this layer's kernels
 * too: they come before the read anyway); dst gets a copy.  Counts that
 * could not be pinned: the fence's bounded wait, then the synchronous read.
 * Else (no fence) the synchronous read. */
static int read_counts(zt_moe_host *h, const zt_backend *be, void *dst, const void *src, size_t bytes,
                       zt_status *st) {
    if (zt_mesh_has_fence(h->mesh) && be->to_host_async && be->copy_wait && h->count_acct &&
        zt_mem_async_into(be, h->count)) {
        ZT_TRY(zt_mesh_copy_wait(h->mesh, be, be->to_host_async(h->count, src, bytes), st));
        if (dst != h->count) memcpy(dst, h->count, bytes);
        return ZT_OK;
    }
    if (zt_mesh_has_fence(h->mesh)) ZT_TRY(zt_mesh_fence(h->mesh, st));
    zt_xcopy(be, dst, 0, src, 1, bytes);
    return ZT_OK;
}

int zt_moe_read_small(zt_moe_host *h, const zt_moe_shape *s, const zt_backend *be, void *dst,
                      const void *src, size_t bytes, zt_status *st) {
    if (bytes > (size_t)(s->E + 1) * sizeof(int))
        return zt_fail(st, ZT_EINTERNAL, "expert routing: a read of %zu bytes (at most %zu)", bytes,
                       (size_t)(s->E + 1) * sizeof(int));
    return read_counts(h, be, dst, src, bytes, st);
}

/* The routing's groups (a->off, a->perm, a->rows: the backend's
 * moe_permute, on its device) and their counts on the host (h->count: a->off
 * copied, E + 1 ints; the only copy back).  fwd: the forced routing of the
 * test hook first (computed here and copied to a->idx). */
static int route_groups(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h,
                        const zt_moe_acts *a, int N, int fwd, zt_status *st) {
    const size_t NK = (size_t)N * s->K;
    const int P = s->P > 1 ? s->P : 1;
    if (NK > h->cap) {   /* (the test hook's routing: [NK]) */
        free(h->idx);
        h->idx = NULL;
        h->cap = NK;
    }
    if (!h->count && !(h->count = malloc((size_t)(s->E + 1) * sizeof(int))))
        return zt_fail(st, ZT_ENOMEM, "out of memory (expert routing)");
    if (!h->scnt) {   /* [E] and [P] arrays: once */
        h->scnt = malloc((size_t)s->E * sizeof(int32_t));
        h->rcnt = malloc((size_t)s->E * sizeof(int32_t));
        h->nloc = malloc((size_t)s->E * sizeof(int));
        h->sc = malloc((size_t)P * sizeof(size_t));
        h->sd = malloc((size_t)P * sizeof(size_t));
        h->rc = malloc((size_t)P * sizeof(size_t));
        h->rd = malloc((size_t)P * sizeof(size_t));
        h->all = malloc((size_t)P * (size_t)(s->E + 1) * sizeof(int32_t));
        h->agc = malloc((size_t)P * sizeof(int));
        h->agd = malloc((size_t)P * sizeof(int));
        if (!h->scnt || !h->rcnt || !h->nloc || !h->sc || !h->sd || !h->rc || !h->rd || !h->all ||
            !h->agc || !h->agd) {
            zt_moe_host_free(h);
            return zt_fail(st, ZT_ENOMEM, "out of memory (expert routing)");
        }
    }
    int force = -1;
    if (fwd) ZT_TRY(forced_expert(s->E, &force, st));
    if (force >= 0) {
        if (!h->idx && !(h->idx = malloc(h->cap * sizeof(int))))
            return zt_fail(st, ZT_ENOMEM, "out of memory (expert routing)");
        for (size_t i = 0; i < NK; ++i) h->idx[i] = (int)((force + (int)(i % (size_t)s->K)) % s->E);
        zt_xcopy(be, a->idx, 1, h->idx, 0, NK * sizeof(int));
    }
    if (fwd) be->moe_permute(a->off, a->perm, a->rows, a->idx, N, s->K, s->E);
    ZT_TRY(read_counts(h, be, h->count, a->off, (size_t)(s->E + 1) * sizeof(int), st));
    if (h->count[0] != 0 || h->count[s->E] != (int)NK)
        return zt_fail(st, ZT_EINTERNAL, "expert routing: %d of %zu routed rows have an expert "
                       "in [0, %d)", h->count[s->E] - h->count[0], NK, s->E);
    return ZT_OK;
}

/* The rows of the exchanges (expert parallelism): scnt from this rank's
 * routing; every rank's counts and buffer capacity agreed over the group (an
 * all-gather of E + 1 host ints each), so rcnt, and whether every rank's
 * buffer holds what it receives (else the same refusal on every rank,
 * before any row moves); the counts and displacements of the row exchanges
 * (C floats a row) and the rows this rank's experts run, *R.  Without
 * expert parallelism rcnt = scnt: every expert here. */
static int exchange_counts(const zt_moe_shape *s, zt_moe_host *h, size_t cap, size_t *R,
                           zt_status *st) {
    const int E = s->E, P = s->P > 1 ? s->P : 1, El = E / P, me = P > 1 ? h->ep.rank : 0;
    for (int e = 0; e < E; ++e) h->scnt[e] = h->count[e + 1] - h->count[e];
    if (P > 1) {
        if (!h->ep.g || !h->ep.dg)
            return zt_fail(st, ZT_EINTERNAL, "expert parallelism: the model has no expert group "
                           "(no mesh was set)");
        const int W1 = E + 1;
        memcpy(h->all + (size_t)me * W1, h->scnt, (size_t)E * sizeof(int32_t));
        h->all[(size_t)me * W1 + E] = cap > INT32_MAX ? INT32_MAX : (int32_t)cap;
        for (int i = 0; i < P; ++i) {
            h->agc[i] = W1;
            h->agd[i] = i * W1;
        }
        zt_group_where(h->ep.g, "step %ld, MoE layer %d: expert routing counts", h->step, h->layer);
        ZT_TRY(h->ep.g->ops->allgather_inplace(h->ep.g, h->all, h->agc, h->agd, ZT_I32, st));
        for (int j = 0; j < P; ++j) {   /* every rank's rows against its buffer */
            size_t in = 0;
            for (int i = 0; i < P; ++i)
                for (int l = 0; l < El; ++l) {
                    const int32_t c = h->all[(size_t)i * W1 + j * El + l];
                    if (c < 0)
                        return zt_fail(st, ZT_EINTERNAL, "expert routing: rank %d of the expert "
                                       "group sent a count of %d", i, (int)c);
                    in += (size_t)c;
                    if (j == me) h->rcnt[i * El + l] = c;
                }
            const size_t jcap = (size_t)h->all[(size_t)j * W1 + E];
            if (in > jcap)
                return zt_fail(st, ZT_ENOMEM, "expert parallelism: step %ld, MoE layer %d: %zu "
                               "routed rows go to the %d experts of rank %d of the expert group, "
                               "more than its buffer of %zu rows (the ranks' micro batches differ "
                               "in size?)", h->step, h->layer, in, El, j, jcap);
        }
    } else {
        memcpy(h->rcnt, h->scnt, (size_t)E * sizeof(int32_t));
    }
    size_t so = 0, ro = 0;
    for (int j = 0; j < P; ++j) {
        size_t sn = 0, rn = 0;
        for (int l = 0; l < El; ++l) {
            sn += (size_t)h->scnt[j * El + l];
            rn += (size_t)h->rcnt[j * El + l];
        }
        h->sc[j] = sn * (size_t)s->C;
        h->sd[j] = so * (size_t)s->C;
        h->rc[j] = rn * (size_t)s->C;
        h->rd[j] = ro * (size_t)s->C;
        so += sn;
        ro += rn;
    }
    *R = ro;
    if (ro > cap)   /* (checked above with the group; kept as the guard of the writes) */
        return zt_fail(st, ZT_EINTERNAL, "expert parallelism: step %ld, MoE layer %d: %zu rows "
                       "for a buffer of %zu", h->step, h->layer, ro, cap);
    return ZT_OK;
}

/* Rows [*, C] over the expert group: send[sc, sd] -> recv[rc, rd] (ns and
 * nr elements sent and received).  In fp32, or with send16 and recv16 (ex16,
 * moe.h) in bf16: send rounded into send16, exchanged, widened from recv16
 * into recv (ns 0: send16 holds the rows already; recv NULL: they stay in
 * recv16); exact where every value sent is a bf16 value already or every
 * reader rounds it to bf16 (the counts and displacements are elements
 * either way). */
static int exchange_rows(const zt_moe_host *h, const zt_backend *be, const float *send, size_t ns,
                         uint16_t *send16, const size_t *sc, const size_t *sd, float *recv,
                         uint16_t *recv16, size_t nr, const size_t *rc, const size_t *rd,
                         const char *what, zt_status *st) {
    zt_group *g = h->ep.dg;
    zt_group_where(g, "step %ld, MoE layer %d: %s", h->step, h->layer, what);
    if (!send16 || !recv16) return g->ops->alltoallv(g, send, sc, sd, recv, rc, rd, ZT_F32, st);
    if (ns) be->to_bf16(send16, send, ns);
    ZT_TRY(g->ops->alltoallv(g, send16, sc, sd, recv16, rc, rd, ZT_BF16, st));
    if (nr && recv) be->from_bf16(recv, recv16, nr);
    return ZT_OK;
}

/* A's bf16 rows in the bytes of the fp32 scratch p (ex16), else NULL */
static uint16_t *rows16(const zt_moe_acts *a, float *p) { return a->ex16 ? (uint16_t *)(void *)p : NULL; }

/* b16 without expert parallelism: the experts' outputs not kept (moe.h
 * zt_moe_acts yp), written in bf16 into dxp's bytes by the forward */
static int outputs16(const zt_moe_acts *a) { return a->gup16 && !a->yp; }

/* The forward's experts' outputs [NK, C] in fp32: a->yp, or (outputs16)
 * the bf16 outputs in dxp's bytes widened into dyp, free in a forward */
/* (the bf16 outputs: kept in yp16 (keep_yp), else in dxp's bytes) */
static const uint16_t *outputs16_at(const zt_moe_acts *a, const zt_moe_grad *g) {
    return a->yp16 ? a->yp16 : (const uint16_t *)(const void *)g->dxp;
}
static const float *outputs32(const zt_backend *be, const zt_moe_acts *a, const zt_moe_grad *g,
                              size_t n) {
    if (!outputs16(a)) return a->yp;
    be->from_bf16(g->dyp, outputs16_at(a, g), n);
    return g->dyp;
}

/* An expert that received no rows: no dW GEMM writes its gradient n
 * elements at dw + o, so where the backend writes the weight gradients
 * fresh (backend.h dw_fresh; the first micro-batch of a step whose
 * zeroing left them out, shard.h zt_shard_fresh_range) it is zeroed here;
 * else its GEMMs add nothing and it stays as it is. */
static void empty_expert(const zt_backend *be, float *dw, size_t o, size_t n) {
    if (dw && be->dw_fresh && be->dw_fresh(dw + o)) be->zero(dw + o, n * sizeof(float));
}

/* expert weights at element offset o: fp32 (NULL where only the bf16 bits
 * are bound) and bf16 (model.h zt_mm_fwd) */
#define W(f, o) (w->f ? w->f + (o) : NULL)
#define W16(f, o) (w->f ? w->f + (o) : NULL)

/* Expert parallelism: the received rows' regrouping (a->gperm: by expert
 * <- by rank; a->ginv: by rank <- by expert) from h->rcnt, and the rows
 * each local expert runs, n[El] (every rank's together).  Without: n[l] =
 * the rows of expert l. */
static void local_rows(const zt_moe_shape *s, const zt_backend *be, const zt_moe_host *h,
                       const zt_moe_acts *a, int *n) {
    const int P = s->P > 1 ? s->P : 1, El = s->E / P;
    for (int l = 0; l < El; ++l) {
        n[l] = 0;
        for (int i = 0; i < P; ++i) n[l] += h->rcnt[i * El + l];
    }
    if (P > 1) {
        zt_xcopy(be, a->gcnt, 1, h->rcnt, 0, (size_t)s->E * sizeof(int32_t));
        be->moe_regroup(a->gperm, a->ginv, a->gcnt, P, El);
    }
}

int zt_moe_forward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h, const zt_moe_w *w,
                   zt_moe_acts *a, const zt_moe_grad *g, const float *x, float *y, int N,
                   zt_status *st) {
    const int C = s->C, E = s->E, K = s->K, I = s->I, NK = N * K;
    const int P = s->P > 1 ? s->P : 1, El = E / P;
    /* (x16: the bf16 input and routed rows, zt_moe_acts) */
    const uint16_t *x16 = a->xp16 ? a->x16 : NULL;
    if (a->xp16 && (!x16 || !a->gup16 || P > 1 || !be->rows_gather16))
        return zt_fail(st, ZT_EINTERNAL, "MoE forward: the bf16 routed rows without the bf16 input, "
                       "the bf16 experts or the backend's rows_gather16 (or with expert parallelism)");
    zt_mm_fwd_x(be, a->logits, x, x16, w->router, w->router16, NULL, N, C, E);
    be->moe_route_fwd(a->wts, a->idx, a->probs, a->logits, N, E, K, s->norm);
    if (a->gup16 && (!g || !g->dgup || !g->dhp))
        return zt_fail(st, ZT_EINTERNAL, "MoE forward: the bf16 experts' path without its scratch");
    ZT_TRY(route_groups(s, be, h, a, N, 1, st));
    size_t R = 0;
    ZT_TRY(exchange_counts(s, h, a->rcap, &R, st));
    if (x16) be->rows_gather16(a->xp16, x16, a->rows, NK, C);
    /* (xr16 without xs: the rows to send gathered in dyp, free in a forward) */
    float *xsend = P > 1 && a->xr16 && !a->xp ? g->dyp : a->xp;
    if (!x16) be->rows_gather(xsend, x, a->rows, NULL, NK, C);
    be->rows_gather(a->wsel, a->wts, a->perm, NULL, NK, 1);
    int *nl = h->nloc;
    local_rows(s, be, h, a, nl);
    /* (r16: the rows at the experts in bf16: the routed rows (x16), or
     * with expert parallelism the received ones (xr16); else NULL, xr) */
    const uint16_t *r16 = P > 1 ? a->xr16 : x16 ? a->xp16 : NULL;
    if (a->xr16 && (!a->ex16 || !a->gup16 || !be->rows_gather16))
        return zt_fail(st, ZT_EINTERNAL, "MoE forward: the bf16 received rows without the bf16 exchanges, "
                       "the bf16 experts or the backend's rows_gather16");
    if (P > 1) {   /* the rows by rank into yr, then by expert into xr */
        /* (ex16: in bf16, the experts' GEMMs round them; dxr, dyr the bf16 rows;
         * xr16: by expert in bf16 as they came, not widened) */
        ZT_TRY(exchange_rows(h, be, xsend, (size_t)NK * C, rows16(a, g->dxr), h->sc, h->sd, a->yr,
                             rows16(a, g->dyr), a->xr16 ? 0 : R * C, h->rc, h->rd, "expert inputs", st));
        if (a->xr16) be->rows_gather16(a->xr16, rows16(a, g->dyr), a->gperm, (int)R, C);
        else be->rows_gather(a->xr, a->yr, a->gperm, NULL, (int)R, C);
    }
    /* this rank's experts, one GEMM each over its rows from every rank */
    size_t o = 0;
    if (a->gup16) {
        /* (bf16: each expert's gate|up rounded once by its GEMM, then
         * SwiGLU over every row at once, then the down GEMMs; scratch: the
         * backward's dgup and dhp, free in a forward; with the bf16
         * expert weights bound and the backend's grouped GEMM, one call
         * for every expert: the same bits on the cpu backends) */
        const int grp = be->matmul_grouped_o16 && w->gate_up16 && w->down16;
        if (grp) {
            be->matmul_grouped_o16(a->gup16, r16 ? NULL : a->xr, r16, w->gate_up16, nl, El, C, 2 * I);
            for (int l = 0; l < El; ++l) o += (size_t)nl[l];
        }
        for (int l = 0; l < El && !grp; ++l) {
            const int c = nl[l];
            if (c == 0) continue;
            const size_t gu = (size_t)l * 2 * I * C;
            be->matmul_fwd_o16(a->gup16 + o * 2 * I, g->dgup + o * 2 * I, r16 ? NULL : a->xr + o * C,
                               r16 ? r16 + o * C : NULL, W(gate_up, gu), W16(gate_up16, gu),
                               NULL, c, C, 2 * I);
            o += (size_t)c;
        }
        if (o) be->swiglu_fwd16(a->hp16, a->gup16, g->dgup, g->dhp, (int)o, I);
        /* (each output rounded once: into dxp's bytes (outputs16), or
         * with expert parallelism into dyr's, widened into yr after, the
         * values every layout sends back; dyp / dxr the cpu backends'
         * staging) */
        /* (with expert parallelism the R received rows, by expert: into
         * dyr's bytes, widened into yr; ep_yp16's yp16 holds the NK rows
         * the exchange brings back) */
        const int o16 = outputs16(a) && P <= 1;
        uint16_t *y16 = a->yp16 && P <= 1 ? a->yp16 : (uint16_t *)(void *)(o16 ? g->dxp : g->dyr);
        float *ytmp = o16 ? g->dyp : g->dxr;
        o = 0;
        if (grp) {
            be->matmul_grouped_o16(y16, NULL, a->hp16, w->down16, nl, El, I, C);
            for (int l = 0; l < El; ++l) o += (size_t)nl[l];
        }
        for (int l = 0; l < El && !grp; ++l) {
            const int c = nl[l];
            if (c == 0) continue;
            const size_t dn = (size_t)l * C * I;
            be->matmul_fwd_o16(y16 + o * C, ytmp + o * C, NULL, a->hp16 + o * I, W(down, dn),
                               W16(down16, dn), NULL, c, I, C);
            o += (size_t)c;
        }
        if (!o16 && o && !a->xr16) be->from_bf16(a->yr, y16, o * (size_t)C);
    }
    for (int l = 0; l < El && !a->gup16; ++l) {
        const int c = nl[l];
        if (c == 0) continue;
        const size_t e = (size_t)l;   /* (w: this rank's experts, local l) */
        const size_t gu = e * 2 * I * C, dn = e * C * I;
        zt_mm_fwd(be, a->gup + o * 2 * I, a->xr + o * C, W(gate_up, gu), W16(gate_up16, gu), NULL,
                  c, C, 2 * I);
        be->swiglu_fwd(a->hp + o * I, a->gup + o * 2 * I, c, I);
        zt_mm_fwd(be, a->yr + o * C, a->hp + o * I, W(down, dn), W16(down16, dn), NULL, c, I, C);
        o += (size_t)c;
    }
    if (P > 1) {   /* the outputs by rank, back */
        /* (ex16: in bf16, the down GEMMs rounded them; xr16: gathered by
         * rank in bf16 from dyr's bytes into dxr's, not widened into yr;
         * ep_yp16: received into yp16 and kept so, not widened) */
        if (a->yp16 && !a->ex16)
            return zt_fail(st, ZT_EINTERNAL, "MoE forward: the bf16 kept outputs without the bf16 exchanges");
        uint16_t *s16 = rows16(a, g->dxr);
        if (a->xr16) be->rows_gather16(s16, (const uint16_t *)(const void *)g->dyr, a->ginv, (int)R, C);
        else be->rows_gather(a->xs, a->yr, a->ginv, NULL, (int)R, C);
        ZT_TRY(exchange_rows(h, be, a->xr16 ? NULL : a->xs, a->xr16 ? 0 : R * C, s16, h->rc, h->rd, a->yp,
                             a->yp16 ? a->yp16 : rows16(a, g->dyr), a->yp16 ? 0 : (size_t)NK * C, h->sc,
                             h->sd, "expert outputs", st));
    }
    be->zero(y, (size_t)N * C * sizeof(float));
    /* (bf16 outputs: rows_scatter16 reads them as they are, or rows_sum16
     * by token, the inverse permutation in dwsel's bytes, free in a
     * forward; a table without either widens them into dyp, free too) */
    if (outputs16(a) && be->rows_sum16)
        be->rows_sum16(y, outputs16_at(a, g), a->perm, (int *)(void *)g->dwsel, a->wsel, NK, N, K, C);
    else if (outputs16(a) && be->rows_scatter16)
        be->rows_scatter16(y, outputs16_at(a, g), a->rows, a->wsel, NK, C);
    else
        be->rows_scatter(y, outputs32(be, a, g, (size_t)NK * C), a->rows, a->wsel, NK, C);
    return ZT_OK;
}

/* the grouped weight gradients' conditions on a projection's shape: an
 * expert's gradient [OC, IN] of at most ZT_MOE_GW_MAX elements (larger
 * ones' GEMMs run well alone, and the bf16 products' round trip, 4 bytes
 * an element more than a GEMM writing the fp32 gradient itself, would cost
 * more than the launches it saves: Mixtral's 58.7M-element down,
 * bench/costmodel; docs/moe.md), and dyp ([NK, C]
 * fp32, 2 NK C bf16 elements) holds at least one expert's bf16 product */
#define ZT_MOE_GW_MAX ((size_t)1 << 23)
static int grouped_dw_fits(int NK, int C, int OC, int IN) {
    return (size_t)OC * IN <= ZT_MOE_GW_MAX && (size_t)NK * C * 2 >= (size_t)OC * IN;
}

/* outputs16's down projection backward (the outputs yp = W_e hp not
 * kept): with g_i = W_e^T dy[row_i], dy[row_i] . yp_i = g_i . hp_i, so
 * the input-gradient GEMMs run on the unweighted rows dy[row_i] (in dyp),
 * d wsel_i = g_i . hp_i and dhp_i = wsel_i g_i in one pass (rows_dot16;
 * a table without it: hp16 widened into dgup, free until SwiGLU's
 * backward, rows_dot, rows_gather in place); the weight gradients' GEMMs on the
 * weighted rows wsel_i dy[row_i] (gathered again into dyp), as the fp32
 * path's.  Each bf16 GEMM rounds its own dout: the input gradients round
 * dy[row_i], the weight gradients wsel_i dy[row_i]. */
/* (gb: the input gradients g_i in bf16 by one grouped GEMM into dhp's
 * bytes (tmp dgup, free until SwiGLU's backward), then rows_dot16h: the
 * dot over bf16 g_i, wsel_i g_i rounded back in place, the bf16 dh that
 * swiglu_bwd_dd16 reads) */
static size_t down_bwd16(const zt_moe_shape *s, const zt_backend *be, const zt_moe_w *w,
                       zt_moe_w *gw, const zt_moe_acts *a, zt_moe_grad *g, const float *dy, int N,
                       const int *nl, int gb, int gwg, int gd) {
    const int C = s->C, I = s->I, NK = N * s->K, El = s->E;   /* (no expert parallelism) */
    size_t o = 0;
    /* (d16: the rows rounded once into dxp's bytes, free until gate|up's
     * input gradients; gd: the caller gathered them there in bf16) */
    uint16_t *d16 = a->d16 ? (uint16_t *)(void *)g->dxr : NULL;
    if (d16 && !gd) be->to_bf16(d16, g->dyp, (size_t)NK * C);
    if (gb) {
        uint16_t *dh16 = (uint16_t *)(void *)g->dhp;
        be->matmul_grouped_bwd_o16(dh16, g->dgup, d16, w->down16, nl, El, I, C);
        for (int l = 0; l < El; ++l) o += (size_t)nl[l];
        be->rows_dot16h(g->dwsel, dh16, a->hp16, a->wsel, NK, I);
    }
    for (int l = 0; l < El && !gb; ++l) {   /* g [NK, I] into dhp */
        const int c = nl[l];
        if (c == 0) continue;
        const size_t dn = (size_t)l * C * I;
        if (d16)
            be->matmul_bwd_d16(g->dhp + o * I, NULL, NULL, NULL, d16 + o * C, NULL, a->hp16 + o * I,
                               W(down, dn), W16(down16, dn), c, I, C);
        else
            be->matmul_bwd_a16(g->dhp + o * I, NULL, NULL, g->dyp + o * C, a->hp16 + o * I,
                               W(down, dn), W16(down16, dn), c, I, C);
        o += (size_t)c;
    }
    if (gb) {
        /* (rows_dot16h above) */
    } else if (be->rows_dot16) {   /* one pass over g and hp16 */
        be->rows_dot16(g->dwsel, g->dhp, a->hp16, a->wsel, NK, I);
    } else {   /* (a table without it: hp16 widened into dgup) */
        be->from_bf16(g->dgup, a->hp16, (size_t)NK * I);
        be->rows_dot(g->dwsel, g->dhp, NULL, g->dgup, NK, I);
        be->rows_gather(g->dhp, g->dhp, NULL, a->wsel, NK, I);   /* (in place: row i from row i) */
    }
    be->zero(g->dwts, (size_t)NK * sizeof(float));
    be->rows_scatter(g->dwts, g->dwsel, a->perm, NULL, NK, 1);
    if (!gw->down) return o;   /* (a frozen base, LoRA) */
    if (gd) {
        be->rows_gather_o16(d16, dy, a->rows, a->wsel, NK, C);
    } else {
        be->rows_gather(g->dyp, dy, a->rows, a->wsel, NK, C);
        if (d16) be->to_bf16(d16, g->dyp, (size_t)NK * C);
    }
    o = 0;
    if (gwg && d16 && grouped_dw_fits(NK, C, C, I)) {
        /* (gwg: one grouped call, each expert's product rounded to bf16 in
         * dyp, free after the rounding above, then added) */
        for (int l = 0; l < El; ++l) {
            if (nl[l] == 0) empty_expert(be, gw->down, (size_t)l * C * I, (size_t)C * I);
            o += (size_t)nl[l];
        }
        be->matmul_grouped_dw16(gw->down, (uint16_t *)(void *)g->dyp, (size_t)NK * C * 2, d16, a->hp16, nl, El,
                                I, C);
        return o;
    }
    for (int l = 0; l < El; ++l) {
        const int c = nl[l];
        const size_t dn = (size_t)l * C * I;
        if (c == 0) {
            empty_expert(be, gw->down, dn, (size_t)C * I);
            continue;
        }
        if (d16)
            be->matmul_bwd_d16(NULL, gw->down + dn, NULL, NULL, d16 + o * C, NULL, a->hp16 + o * I,
                               W(down, dn), W16(down16, dn), c, I, C);
        else
            be->matmul_bwd_a16(NULL, gw->down + dn, NULL, g->dyp + o * C, a->hp16 + o * I,
                               W(down, dn), W16(down16, dn), c, I, C);
        o += (size_t)c;
    }
    return o;
}

/* Expert parallelism's experts in grouped bf16 GEMMs (zt_moe_acts epgb16,
 * with epdx's bf16 input gradients).  The received rows d16 (by expert, in
 * dxr's bytes) are weighted already (wsel_i dy[row_i]: the routing
 * weights' gradient was taken at the tokens' ranks from the kept outputs),
 * so the down projection's input gradients need no rows_dot: dh = W_e^T d
 * in bf16 into dhp's bytes by one grouped call (tmp dgup, free until
 * SwiGLU's backward), which swiglu_bwd_dd16 reads (gate|up's gradient in
 * bf16 in place of gup16, as without expert parallelism); gate|up's input
 * gradients in bf16 by expert into dyr's bytes by one grouped call (tmp
 * dxr, free once the down GEMMs read d16), where epdx's per-expert GEMMs
 * wrote them.  The weight gradients: one grouped call a projection where
 * gw16 (the routed rows in bf16 for gate|up) and grouped_dw_fits, each
 * expert's product rounded to bf16 in dyp's bytes (free: the rows sent
 * left it, or were gathered into dxp's), then added; else a GEMM an
 * expert.  Returns the rows the local experts ran. */
static size_t ep_bwd_grouped(const zt_moe_shape *s, const zt_backend *be, const zt_moe_w *w, zt_moe_w *gw,
                             const zt_moe_acts *a, zt_moe_grad *g, const int *nl, const uint16_t *d16,
                             const uint16_t *r16, int NK) {
    const int C = s->C, I = s->I, El = s->E / s->P;
    size_t o = 0;
    for (int l = 0; l < El; ++l) o += (size_t)nl[l];
    uint16_t *dh16 = (uint16_t *)(void *)g->dhp, *dgu16 = a->gup16;
    uint16_t *tmp16 = (uint16_t *)(void *)g->dyp;
    const size_t tmp_n = (size_t)NK * C * 2;
    if (o) be->matmul_grouped_bwd_o16(dh16, g->dgup, d16, w->down16, nl, El, I, C);
    if (gw->down) {   /* (a frozen base, LoRA: no weight gradients) */
        const int grp = a->gw16 && be->matmul_grouped_dw16 && grouped_dw_fits(NK, C, C, I);
        size_t q = 0;
        for (int l = 0; l < El; ++l) {
            const int c = nl[l];
            const size_t dn = (size_t)l * C * I;
            if (c == 0) empty_expert(be, gw->down, dn, (size_t)C * I);
            else if (!grp)
                be->matmul_bwd_d16(NULL, gw->down + dn, NULL, NULL, d16 + q * C, NULL, a->hp16 + q * I,
                                   W(down, dn), W16(down16, dn), c, I, C);
            q += (size_t)c;
        }
        if (grp && o) be->matmul_grouped_dw16(gw->down, tmp16, tmp_n, d16, a->hp16, nl, El, I, C);
    }
    if (o) {
        be->swiglu_bwd_dd16(NULL, dgu16, dh16, a->gup16, (int)o, I);
        be->matmul_grouped_bwd_o16((uint16_t *)(void *)g->dyr, g->dxr, dgu16, w->gate_up16, nl, El, C, 2 * I);
    }
    if (gw->gate_up) {
        const int grp = a->gw16 && r16 && be->matmul_grouped_dw16 && grouped_dw_fits(NK, C, 2 * I, C);
        size_t q = 0;
        for (int l = 0; l < El; ++l) {
            const int c = nl[l];
            const size_t gu = (size_t)l * 2 * I * C;
            if (c == 0) empty_expert(be, gw->gate_up, gu, (size_t)2 * I * C);
            else if (!grp)
                be->matmul_bwd_d16(NULL, gw->gate_up + gu, NULL, NULL, dgu16 + q * 2 * I, r16 ? NULL : a->xr + q * C,
                                   r16 ? r16 + q * C : NULL, W(gate_up, gu), W16(gate_up16, gu), c, C, 2 * I);
            q += (size_t)c;
        }
        if (grp && o) be->matmul_grouped_dw16(gw->gate_up, tmp16, tmp_n, dgu16, r16, nl, El, C, 2 * I);
    }
    return o;
}

int zt_moe_backward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h,
                    const zt_moe_w *w, zt_moe_w *gw, const zt_moe_acts *a, zt_moe_grad *g,
                    const float *x, const float *dy, const float *dprobs, int N, zt_status *st) {
    const int C = s->C, E = s->E, K = s->K, I = s->I, NK = N * K;
    const int P = s->P > 1 ? s->P : 1, El = E / P;
    const uint16_t *x16 = a->xp16 ? a->x16 : NULL;   /* (zt_moe_forward checked it) */
    /* (r16: the rows at the experts in bf16, zt_moe_forward's) */
    const uint16_t *r16 = P > 1 ? a->xr16 : x16 ? a->xp16 : NULL;
    ZT_TRY(route_groups(s, be, h, a, N, 0, st));   /* the forward's counts again */
    size_t R = 0;
    ZT_TRY(exchange_counts(s, h, a->rcap, &R, st));
    const int o16 = outputs16(a) && !a->yp16;   /* (yp16: kept, the test hook) */
    /* (gb: the input gradients in grouped bf16 GEMMs, zt_moe_acts gb16:
     * dh in bf16 in dhp's bytes, gate|up's into dxr's, summed per token
     * by rows_scatter16) */
    const int gb = a->gb16 && a->d16 && o16 && P <= 1 && w->gate_up16 && w->down16 &&
                   be->matmul_grouped_bwd_o16 && be->rows_dot16h && be->swiglu_bwd_dd16 &&
                   be->rows_scatter16;
    /* (gwg: the weight gradients in grouped bf16 GEMMs too, zt_moe_acts
     * gw16, with the bf16 routed rows; each where dyp holds an expert's) */
    const int gwg = gb && a->gw16 && x16 && be->matmul_grouped_dw16;
    /* (epdy, epdx: expert parallelism's output gradients received and
     * regrouped in bf16, and its input gradients written, regrouped and
     * sent back in bf16, zt_moe_acts epdy16, epdx16) */
    const int d16x = P > 1 && a->ex16 && a->gup16 && a->d16 && !o16 && be->rows_gather16;
    const int epdy = d16x && a->epdy16;
    const int epdx = d16x && a->epdx16 && be->matmul_bwd_o16 && be->rows_scatter16;
    /* (epg: and the experts' GEMMs grouped, zt_moe_acts epgb16, ep_bwd_grouped) */
    const int epg = epdx && a->epgb16 && w->gate_up16 && w->down16 && be->matmul_grouped_bwd_o16 &&
                    be->swiglu_bwd_dd16;
    if (!o16) {
        /* the routing weights: d wsel_i = dy[row_i] . yp_i, back to [N, K] order
         * (yp16 widened into dyp, which the next gather overwrites) */
        be->rows_dot(g->dwsel, dy, a->rows, outputs32(be, a, g, (size_t)NK * C), NK, C);
        be->zero(g->dwts, (size_t)NK * sizeof(float));
        be->rows_scatter(g->dwts, g->dwsel, a->perm, NULL, NK, 1);
    }
    /* the experts: dyp_i = wsel_i dy[row_i], to the experts' ranks
     * (outputs16: the unweighted dy[row_i] first, moe_down_bwd16) */
    /* (gx, gd: gathered straight into bf16, rows_gather_o16, bitwise the
     * fp32 gather rounded: gx the bf16 exchange's rows in dxp's bytes, gd
     * the d16 rows the down GEMMs read in dxr's, zt_moe_acts gd16) */
    const int gx = a->gd16 && be->rows_gather_o16 && P > 1 && a->ex16;
    const int gd = a->gd16 && be->rows_gather_o16 && P <= 1 && a->gup16 && a->d16;
    if (gx || gd)
        be->rows_gather_o16((uint16_t *)(void *)(gx ? g->dxp : g->dxr), dy, a->rows, o16 ? NULL : a->wsel,
                            NK, C);
    else
        be->rows_gather(g->dyp, dy, a->rows, o16 ? NULL : a->wsel, NK, C);
    /* (without expert parallelism the routed inputs are the blocks' shared
     * rows, zt_moe_carve_shared: gathered again, the forward's values) */
    if (x16) be->rows_gather16(a->xp16, x16, a->rows, NK, C);
    else if (P <= 1) be->rows_gather(a->xp, x, a->rows, NULL, NK, C);
    int *nl = h->nloc;
    local_rows(s, be, h, a, nl);
    if (P > 1) {   /* by rank into dxr, then by expert into dyr */
        /* (ex16: in bf16, the down GEMMs' backward rounds them; dxp, dyr the bf16 rows) */
        /* (epdy: regrouped as they came, bf16 into dxr's bytes, d16 below) */
        ZT_TRY(exchange_rows(h, be, gx ? NULL : g->dyp, gx ? 0 : (size_t)NK * C, rows16(a, g->dxp), h->sc, h->sd,
                             epdy ? NULL : g->dxr, rows16(a, g->dyr), R * C, h->rc, h->rd,
                             "expert output gradients", st));
        if (epdy)
            be->rows_gather16((uint16_t *)(void *)g->dxr, (const uint16_t *)(const void *)g->dyr,
                              a->gperm, (int)R, C);
        else
            be->rows_gather(g->dyr, g->dxr, a->gperm, NULL, (int)R, C);
    }
    /* one GEMM an expert (each of the three); with expert parallelism the
     * input gradients by expert into dyr (read), then by rank into dxr */
    float *dxe = P > 1 ? g->dyr : g->dxr;
    size_t o = 0;
    if (a->gup16) {
        /* (bf16: the down GEMMs' backward reading hp16, SwiGLU's over every
         * row at once reading gup16, then gate|up's) */
        if (o16) o = down_bwd16(s, be, w, gw, a, g, dy, N, nl, gb, gwg, gd);   /* (o: the rows) */
        /* (d16: the received rows rounded once into dxr's bytes, free
         * after the regroup into dyr, until gate|up's input gradients) */
        uint16_t *d16 = a->d16 && !o16 ? (uint16_t *)(void *)g->dxr : NULL;
        if (d16 && R && !epdy && !gd) be->to_bf16(d16, g->dyr, R * (size_t)C);
        if (epg) o = ep_bwd_grouped(s, be, w, gw, a, g, nl, d16, r16, NK);
        for (int l = 0; l < El && !o16 && !epg; ++l) {
            const int c = nl[l];
            const size_t dn = (size_t)l * C * I;
            if (c == 0) {
                empty_expert(be, gw->down, dn, (size_t)C * I);
                continue;
            }
            if (d16)
                be->matmul_bwd_d16(g->dhp + o * I, gw->down ? gw->down + dn : NULL, NULL, NULL,
                                   d16 + o * C, NULL, a->hp16 + o * I, W(down, dn), W16(down16, dn),
                                   c, I, C);
            else
                be->matmul_bwd_a16(g->dhp + o * I, gw->down ? gw->down + dn : NULL, NULL,
                                   g->dyr + o * C, a->hp16 + o * I, W(down, dn), W16(down16, dn), c,
                                   I, C);
            o += (size_t)c;
        }
        /* (d16: gate|up's gradient in bf16 alone, written in place of
         * gup16, its last reader, as the dense MLP's; the GEMMs read it) */
        uint16_t *dgu16 = a->d16 ? a->gup16 : NULL;
        if (epg) {
            /* (ep_bwd_grouped above) */
        } else if (o && gb) be->swiglu_bwd_dd16(NULL, dgu16, (const uint16_t *)(const void *)g->dhp, a->gup16, (int)o, I);
        else if (o && dgu16) be->swiglu_bwd_d16(NULL, dgu16, g->dhp, a->gup16, (int)o, I);
        else if (o) be->swiglu_bwd16(g->dgup, g->dhp, a->gup16, (int)o, I);
        /* (gb: the input gradients in bf16 into dxr's bytes, tmp dyp;
         * then the weight gradients alone a GEMM an expert) */
        if (o && gb)
            be->matmul_grouped_bwd_o16((uint16_t *)(void *)dxe, g->dyp, dgu16, w->gate_up16, nl, El, C, 2 * I);
        /* (gwg: gate|up's weight gradients in one grouped call, the
         * products in dyp, free again: the grouped call above took it as a
         * fallback's scratch) */
        const int gwu = gwg && gw->gate_up && grouped_dw_fits(NK, C, 2 * I, C);
        if (gwu) {
            for (int l = 0; l < El; ++l)
                if (nl[l] == 0) empty_expert(be, gw->gate_up, (size_t)l * 2 * I * C, (size_t)2 * I * C);
            if (o)
                be->matmul_grouped_dw16(gw->gate_up, (uint16_t *)(void *)g->dyp, (size_t)NK * C * 2, dgu16,
                                        a->xp16, nl, El, C, 2 * I);
        }
        o = 0;
        for (int l = 0; l < El && !gwu && !epg; ++l) {
            const int c = nl[l];
            const size_t gu = (size_t)l * 2 * I * C;
            if (c == 0) {
                empty_expert(be, gw->gate_up, gu, (size_t)2 * I * C);
                continue;
            }
            if (gb && !gw->gate_up) break;   /* (a frozen base: nothing more) */
            /* (epdx: the input gradients in bf16 by expert in dyr's bytes,
             * dxr the cpu backends' fp32 scratch: d16's rows read above) */
            if (epdx)
                be->matmul_bwd_o16((uint16_t *)(void *)g->dyr + o * C, g->dxr,
                                   gw->gate_up ? gw->gate_up + gu : NULL, NULL, NULL,
                                   dgu16 + o * 2 * I, r16 ? NULL : a->xr + o * C,
                                   r16 ? r16 + o * C : NULL, W(gate_up, gu), W16(gate_up16, gu), c,
                                   C, 2 * I);
            else if (dgu16)
                be->matmul_bwd_d16(gb ? NULL : dxe + o * C, gw->gate_up ? gw->gate_up + gu : NULL, NULL, NULL,
                                   dgu16 + o * 2 * I, r16 ? NULL : a->xr + o * C,
                                   r16 ? r16 + o * C : NULL, W(gate_up, gu), W16(gate_up16, gu), c,
                                   C, 2 * I);
            else
                zt_mm_bwd_x(be, dxe + o * C, gw->gate_up ? gw->gate_up + gu : NULL, NULL,
                            g->dgup + o * 2 * I, r16 ? NULL : a->xr + o * C,
                            r16 ? r16 + o * C : NULL, W(gate_up, gu), W16(gate_up16, gu), c, C,
                            2 * I);
            o += (size_t)c;
        }
    }
    for (int l = 0; l < El && !a->gup16; ++l) {
        const int c = nl[l];
        const size_t e = (size_t)l, gu = e * 2 * I * C, dn = e * C * I;
        if (c == 0) {
            empty_expert(be, gw->down, dn, (size_t)C * I);
            empty_expert(be, gw->gate_up, gu, (size_t)2 * I * C);
            continue;
        }
        /* (a frozen base, LoRA: no weight gradients) */
        zt_mm_bwd(be, g->dhp + o * I, gw->down ? gw->down + dn : NULL, NULL, g->dyr + o * C,
                  a->hp + o * I, W(down, dn), W16(down16, dn), c, I, C);
        be->swiglu_bwd(g->dgup + o * 2 * I, g->dhp + o * I, a->gup + o * 2 * I, c, I);
        zt_mm_bwd(be, dxe + o * C, gw->gate_up ? gw->gate_up + gu : NULL, NULL,
                  g->dgup + o * 2 * I, a->xr + o * C, W(gate_up, gu), W16(gate_up16, gu), c, C,
                  2 * I);
        o += (size_t)c;
    }
    if (P > 1 && epdx) {
        /* (bf16 by rank into dxr's bytes, back into dxp's as gb's rows) */
        be->rows_gather16((uint16_t *)(void *)g->dxr, (const uint16_t *)(const void *)g->dyr, a->ginv,
                          (int)R, C);
        ZT_TRY(exchange_rows(h, be, NULL, 0, (uint16_t *)(void *)g->dxr, h->rc, h->rd, NULL,
                             (uint16_t *)(void *)g->dxp, 0, h->sc, h->sd, "expert input gradients", st));
    } else if (P > 1) {
        be->rows_gather(g->dxr, g->dyr, a->ginv, NULL, (int)R, C);
        /* (fp32: the backward sums them per token) */
        ZT_TRY(exchange_rows(h, be, g->dxr, 0, NULL, h->rc, h->rd, g->dxp, NULL, 0, h->sc, h->sd,
                             "expert input gradients", st));
    }
    /* the router: dx = its input gradient, then the experts' summed per token */
    be->moe_route_bwd(g->dlogits, g->dwts, dprobs, a->probs, a->idx, N, E, K, s->norm);
    zt_mm_bwd_x(be, g->dx, gw->router, NULL, g->dlogits, x, x16, w->router, w->router16, N, C, E);
    /* (gb, epdx: the bf16 rows by token, rows_sum16's inverse permutation
     * in dwsel's bytes, free after moe_route_bwd) */
    const uint16_t *dx16 = (const uint16_t *)(const void *)g->dxp;
    if ((gb || epdx) && be->rows_sum16)
        be->rows_sum16(g->dx, dx16, a->perm, (int *)(void *)g->dwsel, NULL, NK, N, K, C);
    else if (gb || epdx) be->rows_scatter16(g->dx, dx16, a->rows, NULL, NK, C);
    else be->rows_scatter(g->dx, g->dxp, a->rows, NULL, NK, C);
    return ZT_OK;
}
