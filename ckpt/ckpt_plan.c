/*
 * ckpt_plan.c -- which rank holds which part of the state: every rank's
 * owned ranges (ck_plan_build, one all-gather), the pieces a rank handles in
 * a tensor (ck_pieces), and rank 0's pieces sent to their owners
 * (ck_scatter: the one-reader restore, a Hugging Face load).
 */
#include <stdlib.h>
#include <string.h>
#include "ckpt_internal.h"

#define CK_TAG 7301

/* Owned elements [x, y) of range rg, family f, from host values src (device
 * state: copied to the device). */
void ck_put_owned(const zt_train_state *s, const zt_owned_range *rg, int f, uint64_t x,
                  uint64_t y, const float *src) {
    float *dst = ck_fam_ptr(rg, f) + (x - rg->lo);
    if (s->on_device) s->be->to_device(dst, src, (y - x) * sizeof(float));
    else memcpy(dst, src, (y - x) * sizeof(float));
}

/* Send flat elements [a, b) of family f from rank 0's buf to their owners;
 * every rank calls it.  h: device state's host buffer (receives land there
 * first), NULL for host state. */
int ck_scatter(zt_ctx *ctx, const zt_train_state *s, const ck_plan *p, uint64_t a,
               uint64_t b, const float *buf, int f, MPI_Request *reqs, float *h,
               const char *what, zt_status *st) {
    MPI_Comm comm = ck_comm(ctx);
    if (zt_ctx_rank(ctx) == 0) {
        int nreq = 0;
        for (int r = 1; r < p->nranks; ++r)
            for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
                uint64_t x = p->lo[i] > a ? p->lo[i] : a, y = p->hi[i] < b ? p->hi[i] : b;
                if (x >= y) continue;
                if (MPI_Isend(buf + (x - a), (int)(y - x), MPI_FLOAT, r, CK_TAG, comm,
                              &reqs[nreq++]) != MPI_SUCCESS)
                    return zt_fail(st, ZT_ECOMM, "%s: MPI_Isend to rank %d failed", what, r);
            }
        for (int i = 0; i < s->n_ranges; ++i) {
            const zt_owned_range *rg = &s->ranges[i];
            uint64_t x = rg->lo > a ? rg->lo : a, y = rg->hi < b ? rg->hi : b;
            if (x < y) ck_put_owned(s, rg, f, x, y, buf + (x - a));
        }
        if (nreq && MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return zt_fail(st, ZT_ECOMM, "%s: MPI_Waitall failed", what);
        return ZT_OK;
    }
    for (int i = 0; i < s->n_ranges; ++i) {
        const zt_owned_range *rg = &s->ranges[i];
        uint64_t x = rg->lo > a ? rg->lo : a, y = rg->hi < b ? rg->hi : b;
        if (x >= y) continue;
        /* at most b - a <= CK_CHUNK_ELEMS elements: fits h */
        if (MPI_Recv(h ? h : ck_fam_ptr(rg, f) + (x - rg->lo), (int)(y - x), MPI_FLOAT, 0, CK_TAG,
                     comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return zt_fail(st, ZT_ECOMM, "%s: MPI_Recv from rank 0 failed", what);
        if (h) ck_put_owned(s, rg, f, x, y, h);
    }
    return ZT_OK;
}

void ck_plan_free(ck_plan *p) {
    free(p->first);
    free(p->count);
    free(p->writer);
    free(p->lo);
    free(p->hi);
    memset(p, 0, sizeof *p);
}

int ck_plan_build(zt_ctx *ctx, const zt_train_state *s, ck_plan *p, zt_status *st) {
    memset(p, 0, sizeof *p);
    int W = zt_ctx_nranks(ctx);
    p->nranks = W;
    p->first = calloc((size_t)W, sizeof(int));
    p->count = calloc((size_t)W, sizeof(int));
    p->writer = calloc((size_t)W, sizeof(int));
    int mine[2] = {s->n_ranges, s->writer};
    int *both = calloc((size_t)W * 2, sizeof(int));
    uint64_t *my = calloc((size_t)(s->n_ranges > 0 ? s->n_ranges : 1) * 2, sizeof(uint64_t));
    int rc = ZT_OK;
    if (!p->first || !p->count || !p->writer || !both || !my) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint plan)");
        goto out;
    }
    if (MPI_Allgather(mine, 2, MPI_INT, both, 2, MPI_INT, ck_comm(ctx)) != MPI_SUCCESS) {
        rc = zt_fail(st, ZT_ECOMM, "checkpoint: MPI_Allgather of owned ranges failed");
        goto out;
    }
    int *counts2 = calloc((size_t)W, sizeof(int)), *displs2 = calloc((size_t)W, sizeof(int));
    for (int r = 0; r < W; ++r) {
        p->count[r] = both[2 * r];
        p->writer[r] = both[2 * r + 1];
        p->first[r] = p->total;
        p->total += p->count[r];
    }
    p->lo = calloc((size_t)(p->total ? p->total : 1), sizeof(uint64_t));
    p->hi = calloc((size_t)(p->total ? p->total : 1), sizeof(uint64_t));
    uint64_t *all = calloc((size_t)(p->total ? p->total : 1) * 2, sizeof(uint64_t));
    if (!counts2 || !displs2 || !p->lo || !p->hi || !all) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint plan)");
    } else {
        for (int r = 0; r < W; ++r) {
            counts2[r] = 2 * p->count[r];
            displs2[r] = 2 * p->first[r];
        }
        for (int i = 0; i < s->n_ranges; ++i) {
            my[2 * i] = s->ranges[i].lo;
            my[2 * i + 1] = s->ranges[i].hi;
        }
        if (MPI_Allgatherv(my, 2 * s->n_ranges, MPI_UINT64_T, all, counts2, displs2,
                           MPI_UINT64_T, ck_comm(ctx)) != MPI_SUCCESS) {
            rc = zt_fail(st, ZT_ECOMM, "checkpoint: MPI_Allgatherv of owned ranges failed");
        } else {
            for (int i = 0; i < p->total; ++i) {
                p->lo[i] = all[2 * i];
                p->hi[i] = all[2 * i + 1];
            }
        }
    }
    free(counts2);
    free(displs2);
    free(all);
    /* The writers' ranges must tile the parameter block exactly once. */
    if (rc == ZT_OK) {
        uint64_t covered = 0, n = s->model->num_params;
        for (int r = 0; r < W; ++r) {
            if (!p->writer[r]) continue;
            for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
                if (p->lo[i] > p->hi[i] || p->hi[i] > n) {
                    rc = zt_fail(st, ZT_EINTERNAL, "checkpoint: rank %d owns a bad range "
                                 "[%llu, %llu) (a bug: please report it)", r,
                                 (unsigned long long)p->lo[i], (unsigned long long)p->hi[i]);
                    break;
                }
                covered += p->hi[i] - p->lo[i];
            }
        }
        if (rc == ZT_OK && covered != n)
            rc = zt_fail(st, ZT_EINTERNAL, "checkpoint: the writers' owned ranges cover %llu "
                         "of %llu parameters (a bug: please report it)",
                         (unsigned long long)covered, (unsigned long long)n);
    }
out:
    free(both);
    free(my);
    if (rc != ZT_OK) ck_plan_free(p);
    return rc;
}

int ck_pieces(const ck_plan *p, int r, const zt_tensor_info *t, int writers_only,
              uint64_t (*out)[2], int cap) {
    if (writers_only && !p->writer[r]) return 0;
    int n = 0;
    uint64_t ta = t->offset, tb = t->offset + t->numel;
    for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
        uint64_t a = p->lo[i] > ta ? p->lo[i] : ta, b = p->hi[i] < tb ? p->hi[i] : tb;
        for (; a < b; a += CK_CHUNK_ELEMS) {
            uint64_t e = b - a > CK_CHUNK_ELEMS ? a + CK_CHUNK_ELEMS : b;
            if (out && n < cap) { out[n][0] = a; out[n][1] = e; }
            ++n;
        }
    }
    return n;
}
