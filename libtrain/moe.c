/* moe.c -- the Mixture of Experts MLP (moe.h). */
#include <stdlib.h>
#include <string.h>
#include "moe.h"
#include "devmem.h"

void zt_moe_carve(zt_carve *cv, zt_moe_acts *a, const zt_moe_shape *s, size_t N, float *base) {
    const size_t E = (size_t)s->E, K = (size_t)s->K, NK = N * K, C = (size_t)s->C, I = (size_t)s->I;
    float *p[10];
    p[0] = zt_carve_take(cv, N * E, 1);
    p[1] = zt_carve_take(cv, N * E, 1);
    p[2] = zt_carve_take(cv, NK, 1);
    p[3] = zt_carve_take(cv, NK, 1);   /* int and float are both 4 bytes */
    p[4] = zt_carve_take(cv, NK, 1);
    p[5] = zt_carve_take(cv, NK, 1);
    p[6] = zt_carve_take(cv, NK, 1);
    p[7] = zt_carve_take(cv, NK * C, 0);
    p[8] = zt_carve_take(cv, NK * 2 * I, 0);
    p[9] = zt_carve_take(cv, NK * I, 0);
    float *yp = zt_carve_take(cv, NK * C, 0);
    if (!base) return;
    a->logits = p[0]; a->probs = p[1]; a->wts = p[2];
    a->idx = (int *)(void *)p[3]; a->perm = (int *)(void *)p[4]; a->rows = (int *)(void *)p[5];
    a->wsel = p[6]; a->xp = p[7]; a->gup = p[8]; a->hp = p[9]; a->yp = yp;
}

void zt_moe_carve_grad(zt_carve *cv, zt_moe_grad *g, const zt_moe_shape *s, size_t N, float *base) {
    const size_t E = (size_t)s->E, K = (size_t)s->K, NK = N * K, C = (size_t)s->C, I = (size_t)s->I;
    float *dyp = zt_carve_take(cv, NK * C, 0), *dxp = zt_carve_take(cv, NK * C, 0);
    float *dhp = zt_carve_take(cv, NK * I, 0), *dgup = zt_carve_take(cv, NK * 2 * I, 0);
    float *dwsel = zt_carve_take(cv, NK, 1), *dwts = zt_carve_take(cv, NK, 1);
    float *dlogits = zt_carve_take(cv, N * E, 1), *dx = zt_carve_take(cv, N * C, 0);
    if (!base) return;
    *g = (zt_moe_grad){dyp, dxp, dhp, dgup, dwsel, dwts, dlogits, dx};
}

int zt_moe_check_backend(const zt_backend *be, zt_status *st) {
    if (be && (!be->moe_route_fwd || !be->moe_route_bwd || !be->rows_gather || !be->rows_scatter ||
               !be->rows_dot || !be->sigmoid_fwd || !be->sigmoid_bwd))
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
    free(h->perm);
    free(h->rows);
    free(h->count);
    memset(h, 0, sizeof *h);
}

/* The routing's permutation on the host: the routed slots n K + k grouped
 * by expert (in token order within an expert), h->count[e] rows each. */
static int permute(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h, const int *idx,
                   int N, zt_status *st) {
    const size_t NK = (size_t)N * s->K;
    if (NK > h->cap || !h->count) {
        free(h->idx); free(h->perm); free(h->rows); free(h->count);
        h->idx = malloc(NK * sizeof(int));
        h->perm = malloc(NK * sizeof(int));
        h->rows = malloc(NK * sizeof(int));
        h->count = malloc((size_t)(s->E + 1) * sizeof(int));
        h->cap = NK;
        if (!h->idx || !h->perm || !h->rows || !h->count) {
            zt_moe_host_free(h);
            return zt_fail(st, ZT_ENOMEM, "out of memory (expert routing)");
        }
    }
    zt_xcopy(be, h->idx, 0, idx, 1, NK * sizeof(int));
    memset(h->count, 0, (size_t)(s->E + 1) * sizeof(int));
    for (size_t i = 0; i < NK; ++i) {
        if (h->idx[i] < 0 || h->idx[i] >= s->E)
            return zt_fail(st, ZT_EINTERNAL, "expert routing: expert %d of %d", h->idx[i], s->E);
        h->count[h->idx[i] + 1]++;
    }
    for (int e = 0; e < s->E; ++e) h->count[e + 1] += h->count[e];   /* offsets */
    int *at = h->rows;   /* (as the fill positions first) */
    memcpy(at, h->count, (size_t)s->E * sizeof(int));
    for (size_t i = 0; i < NK; ++i) h->perm[at[h->idx[i]]++] = (int)i;
    for (size_t i = 0; i < NK; ++i) h->rows[i] = h->perm[i] / s->K;
    return ZT_OK;
}

int zt_moe_forward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h, const zt_moe_w *w,
                   zt_moe_acts *a, const float *x, float *y, int N, zt_status *st) {
    const int C = s->C, E = s->E, K = s->K, I = s->I, NK = N * K;
    be->matmul_fwd(a->logits, x, w->router, NULL, N, C, E);
    be->moe_route_fwd(a->wts, a->idx, a->probs, a->logits, N, E, K, s->norm);
    ZT_TRY(permute(s, be, h, a->idx, N, st));
    zt_xcopy(be, a->perm, 1, h->perm, 0, (size_t)NK * sizeof(int));
    zt_xcopy(be, a->rows, 1, h->rows, 0, (size_t)NK * sizeof(int));
    be->rows_gather(a->xp, x, a->rows, NULL, NK, C);
    be->rows_gather(a->wsel, a->wts, a->perm, NULL, NK, 1);
    for (int e = 0; e < E; ++e) {
        const int o = h->count[e], c = h->count[e + 1] - o;
        if (c == 0) continue;
        const float *gu = w->gate_up + (size_t)e * 2 * I * C, *dn = w->down + (size_t)e * C * I;
        be->matmul_fwd(a->gup + (size_t)o * 2 * I, a->xp + (size_t)o * C, gu, NULL, c, C, 2 * I);
        be->swiglu_fwd(a->hp + (size_t)o * I, a->gup + (size_t)o * 2 * I, c, I);
        be->matmul_fwd(a->yp + (size_t)o * C, a->hp + (size_t)o * I, dn, NULL, c, I, C);
    }
    be->zero(y, (size_t)N * C * sizeof(float));
    be->rows_scatter(y, a->yp, a->rows, a->wsel, NK, C);
    return ZT_OK;
}

int zt_moe_backward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h,
                    const zt_moe_w *w, zt_moe_w *gw, const zt_moe_acts *a, zt_moe_grad *g,
                    const float *x, const float *dy, const float *dprobs, int N, zt_status *st) {
    const int C = s->C, E = s->E, K = s->K, I = s->I, NK = N * K;
    ZT_TRY(permute(s, be, h, a->idx, N, st));   /* the forward's groups again */
    /* the routing weights: d wsel_i = dy[row_i] . yp_i, back to [N, K] order */
    be->rows_dot(g->dwsel, dy, a->rows, a->yp, NK, C);
    be->zero(g->dwts, (size_t)NK * sizeof(float));
    be->rows_scatter(g->dwts, g->dwsel, a->perm, NULL, NK, 1);
    /* the experts: dyp_i = wsel_i dy[row_i] */
    be->rows_gather(g->dyp, dy, a->rows, a->wsel, NK, C);
    for (int e = 0; e < E; ++e) {
        const int o = h->count[e], c = h->count[e + 1] - o;
        if (c == 0) continue;
        const size_t gu = (size_t)e * 2 * I * C, dn = (size_t)e * C * I;
        /* (a frozen base, LoRA: no weight gradients) */
        be->matmul_bwd(g->dhp + (size_t)o * I, gw->down ? gw->down + dn : NULL, NULL,
                       g->dyp + (size_t)o * C,
                       a->hp + (size_t)o * I, w->down + dn, c, I, C);
        be->swiglu_bwd(g->dgup + (size_t)o * 2 * I, g->dhp + (size_t)o * I, a->gup + (size_t)o * 2 * I,
                       c, I);
        be->matmul_bwd(g->dxp + (size_t)o * C, gw->gate_up ? gw->gate_up + gu : NULL, NULL,
                       g->dgup + (size_t)o * 2 * I,
                       a->xp + (size_t)o * C, w->gate_up + gu, c, C, 2 * I);
    }
    /* the router: dx = its input gradient, then the experts' summed per token */
    be->moe_route_bwd(g->dlogits, g->dwts, dprobs, a->probs, a->idx, N, E, K, s->norm);
    be->matmul_bwd(g->dx, gw->router, NULL, g->dlogits, x, w->router, N, C, E);
    be->rows_scatter(g->dx, g->dxp, a->rows, NULL, NK, C);
    return ZT_OK;
}
