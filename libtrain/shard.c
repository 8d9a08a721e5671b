/* shard.c -- the ZeRO sharding engine (see shard.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "count.h"
#include "arch.h"
#include "devmem.h"
#include "profile.h"
#include "shard.h"

int zt_shard_model_flags(int stage) {
    switch (stage) {
    case 0: case 1: return ZT_MODEL_PARAMS | ZT_MODEL_GRADS;
    case 2: return ZT_MODEL_PARAMS;
    default: return 0;
    }
}

int zt_shard_model_flags_prec(int stage, zt_precision prec) {
    int f = zt_shard_model_flags(stage);
    return prec == ZT_PREC_FP32 ? f : f & ~ZT_MODEL_PARAMS;
}

int zt_shard_model_flags_frozen(int stage, zt_precision prec) {
    return zt_shard_model_flags_prec(stage, prec) & ~ZT_MODEL_GRADS;
}

struct zt_units *zt_units_peer(struct zt_units *U) { return U ? U->peer : NULL; }

int zt_units_drop_pass(const struct zt_units *U, long *step, uint64_t *sample0, uint64_t *seed) {
    if (!U || !U->training) return 0;
    *step = U->step;
    *sample0 = U->sample0;
    *seed = U->seed;
    return 1;
}

long zt_units_step(const struct zt_units *U) { return U ? U->step + 1 : 0; }

static int mixed(const zt_shard *sh) { return sh->prec != ZT_PREC_FP32; }

/* The precision whose 16-bit conversions handle element type t. */
static zt_precision prec_of_dtype(zt_dtype t) {
    return t == ZT_BF16 ? ZT_PREC_BF16 : t == ZT_F16 ? ZT_PREC_FP16 : ZT_PREC_FP32;
}

/* Mixed: the 16-bit storage of unit u's owned slice. */
static uint16_t *store_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    return sh->stage == 3 ? sh->pshard16 + us->soff : sh->p16 + us->coff + us->lo;
}

size_t zt_shard_optim_elems(const zt_shard *sh) {
    /* (stage 0: every element this rank stores, the full blocks' count) */
    return sh->shard_total;
}

/* Expert parallelism's size over the mesh (1: off). */
static int mesh_ep(const zt_mesh *mesh) {
    return mesh ? zt_mesh_size(mesh, ZT_AX_EP) : 1;
}

size_t zt_shard_block_elems(const zt_model *m, const zt_mesh *mesh) {
    const int N = mesh_ep(mesh);
    size_t n = m->num_params;
    for (int u = 0; N > 1 && u < m->n_units; ++u)
        if (m->units[u].expert) n -= m->units[u].numel - m->units[u].numel / (size_t)N;
    return n;
}

/* ------------------------------------------------------------ the unit API */

static const char *unit_name(zt_shard *sh, int u) { return sh->m->units[u].name; }
static int rs_finish_oldest(zt_shard *sh, zt_status *st);

/* The step's collectives on device buffers.  Where wait() orders only the
 * device (a group with a fence: NCCL), each is started non-blocking and
 * waited for on the stream at once: the kernels queued after it run after
 * it, the host does not wait, and the step's fence (zt_mesh_fence: its one
 * bounded host wait) confirms it.  Elsewhere (MPI host-staged: the host
 * moves the data) the blocking call. */
static int stream_ordered(const zt_group *g) { return g->ops->fence != NULL; }

static int coll_allreduce(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    if (!stream_ordered(g) || !g->ops->iallreduce_sum)
        return g->ops->allreduce_sum(g, buf, n, t, st);
    zt_request r;
    memset(&r, 0, sizeof r);
    ZT_TRY(g->ops->iallreduce_sum(g, buf, n, t, &r, st));
    return g->ops->wait(g, &r, st);
}

static int coll_reduce_scatter(zt_group *g, const void *send, void *recv, const int *counts,
                               zt_dtype t, zt_status *st) {
    if (!stream_ordered(g)) return g->ops->reduce_scatter_sum(g, send, recv, counts, t, st);
    zt_request r;
    memset(&r, 0, sizeof r);
    ZT_TRY(g->ops->ireduce_scatter_sum(g, send, recv, counts, t, &r, st));
    return g->ops->wait(g, &r, st);
}

static int coll_allgather(zt_group *g, void *buf, const int *counts, const int *displs, zt_dtype t,
                          zt_status *st) {
    if (!stream_ordered(g)) return g->ops->allgather_inplace(g, buf, counts, displs, t, st);
    zt_request r;
    memset(&r, 0, sizeof r);
    ZT_TRY(g->ops->iallgather_inplace(g, buf, counts, displs, t, &r, st));
    return g->ops->wait(g, &r, st);
}

/* Start gathering unit u's parameters (stage 3) unless present or pending. */
static int gather_start(zt_shard *sh, int u, zt_status *st) {
    if (sh->gathered[u] || (sh->view && sh->view[u])) return ZT_OK;
    zt_unit_shard *us = &sh->u[u];
    const size_t es = sh->pes;
    char *buf = zt_mem_alloc(us->n * es, ZT_MEM_GATHERED, st);
    if (!buf) return zt_fail_prefix(st, "gathering unit %s", unit_name(sh, u));
    const void *own = mixed(sh) ? (const void *)(sh->pshard16 + us->soff)
                                : (const void *)(sh->pshard + us->soff);
    if (sh->host_params) sh->be->to_device(buf + us->lo * es, own, us->len * es);
    else sh->be->copy(buf + us->lo * es, own, us->len * es);
    sh->gathered[u] = buf;
    if (us->g == 1) return ZT_OK;   /* a one-rank group: the own slice is the unit */
    zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    return us->dgrp->ops->iallgather_inplace(us->dgrp, buf, us->counts, us->displs, sh->pdt,
                                               &sh->req[u], st);
}

static int gather_finish(zt_shard *sh, int u, zt_status *st) {
    ZT_TRY(gather_start(sh, u, st));
    if (!sh->req[u].active) return ZT_OK;
    zt_group *g = sh->u[u].dgrp;
    zt_group_where(g, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    return g->ops->wait(g, &sh->req[u], st);
}

static int release(zt_shard *sh, int u, zt_status *st) {
    if (sh->view && sh->view[u]) {
        zt_mem_free(sh->view[u]);
        sh->view[u] = NULL;
    }
    if (!sh->gathered[u]) return ZT_OK;
    if (sh->req[u].active) ZT_TRY(sh->u[u].dgrp->ops->wait(sh->u[u].dgrp, &sh->req[u], st));
    if (!zt_nf4s_lent(sh, u)) zt_mem_free(sh->gathered[u]);   /* (lent: the NF4 store's) */
    sh->gathered[u] = NULL;
    return ZT_OK;
}

static int release_all(zt_shard *sh, zt_status *st) {
    int rc = ZT_OK;
    for (int u = 0; (sh->stage == 3 || mixed(sh) || sh->q) && u < sh->nu; ++u) {
        int r = release(sh, u, st);
        if (rc == ZT_OK) rc = r;
    }
    return rc;
}

static int check_unit(zt_units *U, int u, const char *fn, zt_status *st) {
    if (!U) return zt_fail(st, ZT_EINVAL, "%s: no engine", fn);
    if (u < 0 || u >= U->nu)
        return zt_fail(st, ZT_EINVAL, "%s: unit %d out of range (the model has %d units)", fn, u, U->nu);
    if (U->pass == ZT_PASS_NONE)
        return zt_fail(st, ZT_EINVAL, "%s(unit %s): called outside forward/backward", fn,
                       U->m->units[u].name);
    return ZT_OK;
}

/* The GEMMs read the 16-bit storage itself (zt_unit_params16: stages 0-2
 * the whole storage, stage 3 the gathered unit, an NF4 base a unit's
 * gathered 16-bit rest or, with NF4 tensors, its bf16 copy (shard_nf4.c)): bf16, asked for (zt_shard_prec.w16), a
 * backend with the bf16-weight entries; a frozen base too (LoRA). */
int zt_shard_weights16(const zt_shard *sh) {
    const zt_backend *be = sh->be;
    return sh->w16 && sh->prec == ZT_PREC_BF16 && (sh->stage == 3 || sh->q || sh->p16) &&
           be->matmul_fwd_w16 && be->matmul_bwd_w16 && be->matmul_gelu_fwd_w16 &&
           be->matmul_dgelu_bwd_w16 && be->encoder_fwd_w16;
}

/* Mixed: unit u's fp32 compute copy, widened from the 16-bit storage (at
 * stage 3 from the gathered unit, whose 16-bit buffer is freed then).
 * Where the GEMMs read the 16-bit storage (weights16) the copy leaves out
 * the GEMM-only tensors (ZT_TENSOR_GEMM): the others in layout order; at
 * stage 3 the gathered unit stays until the release (the GEMMs read it)
 * where that saves memory. */
static int make_view(zt_shard *sh, int u, zt_status *st) {
    if (sh->view[u]) return ZT_OK;
    zt_unit_shard *us = &sh->u[u];
    const uint16_t *src = sh->p16 ? sh->p16 + us->coff : NULL;
    if (sh->stage == 3) {
        ZT_TRY(gather_finish(sh, u, st));
        src = sh->gathered[u];
    }
    const zt_unit_info *ui = &sh->m->units[u];
    const zt_tensor_info *t = sh->m->tensors + ui->first_tensor;
    size_t n32 = 0;
    for (int i = 0; i < ui->n_tensors; ++i) n32 += t[i].gemm ? 0 : t[i].numel;
    if (us->win && n32) n32 = us->n;   /* (a window: only a GEMM-only unit takes the path) */
    /* (stage 3: only where keeping the gathered unit costs no more than the
     * fp32 copy of its GEMM weights would, 2 n <= 4 (n - n32)) */
    if (zt_shard_weights16(sh) && n32 < us->n && (sh->stage < 3 || 2 * n32 <= us->n)) {
        /* (at least one element: an expert unit has no other tensor) */
        float *v = zt_mem_alloc((n32 ? n32 : 1) * sizeof(float), ZT_MEM_GATHERED, st);
        if (!v) return zt_fail_prefix(st, "fp32 copy of unit %s", unit_name(sh, u));
        /* runs of adjacent tensors in one pass each; in bf16 the runs of
         * up to 32 at a time in one call (backend.h from_bf16_runs) */
        const int runs = sh->prec == ZT_PREC_BF16 && sh->be->from_bf16_runs && sh->widen_runs;
        size_t o = 0, roff[32], rn[32];
        int nr = 0;
        for (int i = 0; i < ui->n_tensors;) {
            if (t[i].gemm) {
                ++i;
                continue;
            }
            const size_t from = t[i].offset;
            size_t n = 0;
            for (; i < ui->n_tensors && !t[i].gemm; ++i) n += t[i].numel;
            if (!runs) {
                zt_prec_widen(sh->be, sh->prec, v + o, src + (from - ui->offset), n);
                o += n;
                continue;
            }
            roff[nr] = from - ui->offset;
            rn[nr++] = n;
            if (nr == 32) {
                sh->be->from_bf16_runs(v + o, src, roff, rn, nr);
                for (int r = 0; r < nr; ++r) o += rn[r];
                nr = 0;
            }
        }
        if (nr) sh->be->from_bf16_runs(v + o, src, roff, rn, nr);
        sh->view[u] = v;
        return ZT_OK;
    }
    float *v = zt_mem_alloc(us->n * sizeof(float), ZT_MEM_GATHERED, st);
    if (!v) return zt_fail_prefix(st, "fp32 copy of unit %s", unit_name(sh, u));
    zt_prec_widen(sh->be, sh->prec, v, src, us->n);
    sh->view[u] = v;
    if (sh->stage == 3) {
        zt_mem_free(sh->gathered[u]);
        sh->gathered[u] = NULL;
    }
    return ZT_OK;
}

static float *zt_unit_params_impl(zt_units *U, int u, zt_status *st) {
    if (check_unit(U, u, "zt_unit_params", st) != ZT_OK) return NULL;
    zt_shard *sh = U;
    if (sh->q) {   /* a frozen NF4 base: dequantized (gathered at stage 3, no prefetch) */
        return zt_nf4s_view(sh, u, st) == ZT_OK ? sh->view[u] : NULL;
    }
    if (mixed(sh)) {
        if (make_view(sh, u, st) != ZT_OK) return NULL;
    } else {
        if (sh->stage < 3) return sh->m->params + sh->u[u].coff;
        if (gather_finish(sh, u, st) != ZT_OK) return NULL;
    }
    if (sh->stage == 3 && !sh->seen[u]) {
        /* first use in this pass: prefetch the next unit in pass order */
        sh->seen[u] = 1;
        int nx = sh->pass == ZT_PASS_FWD ? u + 1 : u - 1;
        if (nx >= 0 && nx < sh->nu && !sh->seen[nx] && gather_start(sh, nx, st) != ZT_OK)
            return NULL;
    }
    return mixed(sh) ? sh->view[u] : (float *)sh->gathered[u];
}

static int zt_unit_release_impl(zt_units *U, int u, zt_status *st) {
    ZT_TRY(check_unit(U, u, "zt_unit_release", st));
    return U->stage == 3 || mixed(U) || U->q ? release(U, u, st) : ZT_OK;
}

static float *zt_unit_grads_impl(zt_units *U, int u, zt_status *st) {
    if (check_unit(U, u, "zt_unit_grads", st) != ZT_OK) return NULL;
    zt_shard *sh = U;
    if (sh->frozen) {
        zt_fail(st, ZT_EINVAL, "zt_unit_grads(unit %s): the parameters are frozen (LoRA's base)",
                unit_name(sh, u));
        return NULL;
    }
    /* (and in a training forward told its backward's dloss: the fused LM
     * head, classifier.h; the unit stays open into the backward) */
    const int fwd = sh->pass == ZT_PASS_FWD && sh->training && sh->fwd_dloss_set;
    if (sh->pass != ZT_PASS_BWD && !fwd) {
        zt_fail(st, ZT_EINVAL, "zt_unit_grads(unit %s): gradients exist only in backward",
                unit_name(sh, u));
        return NULL;
    }
    if (fwd) sh->fwd_grads = 1;
    sh->gopen[u] = 1;
    if (sh->stage < 2) return sh->m->grads + sh->u[u].coff;
    /* asked again after its grads_done while its reduction is in flight:
     * finish that first (its bucket is being sent), then a fresh bucket */
    for (int i = 0; i < sh->npend; ++i)
        if (sh->pend[i].u == u) {
            for (int k = 0; k <= i; ++k)
                if (rs_finish_oldest(sh, st) != ZT_OK) return NULL;
            break;
        }
    if (!sh->bucket[u]) {
        sh->bucket[u] = zt_mem_alloc(sh->u[u].n * sizeof(float), ZT_MEM_COMM, st);
        if (!sh->bucket[u]) {
            zt_fail_prefix(st, "gradient bucket for unit %s", unit_name(sh, u));
            return NULL;
        }
    }
    return sh->bucket[u];
}

/* Sum unit u's gradient g[n] over the shard group in the gradient dtype;
 * this rank's slice (fp32) into out[len]. */
static int rs_unit(zt_shard *sh, int u, const float *g, float *out, zt_status *st) {
    zt_unit_shard *us = &sh->u[u];
    zt_group *gr = us->dgrp;
    if (us->g == 1) {   /* nothing to sum (no collective, no rounding) */
        sh->be->copy(out, g + us->lo, us->len * sizeof(float));
        return ZT_OK;
    }
    zt_group_where(gr, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    if (sh->gdt == ZT_F32)
        return coll_reduce_scatter(gr, g, out, us->counts, ZT_F32, st);
    const zt_precision p = prec_of_dtype(sh->gdt);
    zt_prec_narrow(sh->be, p, sh->g16, g, us->n);
    ZT_TRY(coll_reduce_scatter(gr, sh->g16, sh->rs16, us->counts, sh->gdt, st));
    zt_prec_widen(sh->be, p, out, sh->rs16, us->len);
    return ZT_OK;
}

/* fp32 gradient all-reduces go in pieces of this many elements (1 MiB):
 * measured on 2 ranks of one node (Open MPI 4.1, shared memory), one
 * 124M-element MPI_Iallreduce took 380-520 ms and the same sum in 1 MiB
 * pieces 140 ms (each piece stays in cache while it is reduced).  Each
 * element is still summed by one collective over the same ranks. */
#define ZT_GRAD_AR_PIECE ((size_t)1 << 18)

/* In-place sum of gradients buf[n] over group g in the gradient dtype (a
 * 16-bit dtype goes through g16 in pieces of max_unit elements). */
static int allreduce_grads(zt_shard *sh, zt_group *g, float *buf, size_t n, zt_status *st) {
    if (sh->gdt == ZT_F32) {
        for (size_t off = 0; off < n; off += ZT_GRAD_AR_PIECE) {
            const size_t c = n - off < ZT_GRAD_AR_PIECE ? n - off : ZT_GRAD_AR_PIECE;
            ZT_TRY(coll_allreduce(g, buf + off, c, ZT_F32, st));
        }
        return ZT_OK;
    }
    if (g->size == 1) return ZT_OK;
    const zt_precision p = prec_of_dtype(sh->gdt);
    const size_t cap = sh->max_unit ? sh->max_unit : 1;
    for (size_t off = 0; off < n; off += cap) {
        const size_t c = n - off < cap ? n - off : cap;
        zt_prec_narrow(sh->be, p, sh->g16, buf + off, c);
        ZT_TRY(coll_allreduce(g, sh->g16, c, sh->gdt, st));
        zt_prec_widen(sh->be, p, buf + off, sh->g16, c);
    }
    return ZT_OK;
}

/* overlap_comm: finish the oldest reduce-scatter in flight: wait for it,
 * add its slice into the owned gradients (widened from 16 bits through
 * rs_buf), free its buffers.  On a failed wait the entry stays (its buffers
 * may still be in use; zt_shard_free finishes it). */
static int rs_finish_oldest(zt_shard *sh, zt_status *st) {
    zt_rs_pending *p = &sh->pend[0];
    const int u = p->u;
    zt_unit_shard *us = &sh->u[u];
    zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    ZT_TRY(us->dgrp->ops->wait(us->dgrp, &p->req, st));
    float *dst = sh->gshard + us->soff;
    if (p->send16) {
        zt_prec_widen(sh->be, prec_of_dtype(sh->gdt), sh->rs_buf, p->recv, us->len);
        sh->be->add(dst, dst, sh->rs_buf, us->len);
        zt_mem_free(p->send16);
    } else {
        sh->be->add(dst, dst, p->recv, us->len);
        zt_mem_free(sh->bucket[u]);
        sh->bucket[u] = NULL;
    }
    zt_mem_free(p->recv);
    memmove(&sh->pend[0], &sh->pend[1], (size_t)(sh->npend - 1) * sizeof sh->pend[0]);
    sh->npend--;
    return ZT_OK;
}

/* Finish every reduce-scatter in flight (the end of a backward pass). */
static int rs_finish_all(zt_shard *sh, zt_status *st) {
    while (sh->npend > 0) ZT_TRY(rs_finish_oldest(sh, st));
    return ZT_OK;
}

/* overlap_comm: start unit u's gradient reduce-scatter from its bucket
 * (16-bit grad_comm: narrowed into a send buffer first, and the fp32 bucket
 * freed); the oldest in flight is finished first when ZT_RS_INFLIGHT are. */
static int rs_start(zt_shard *sh, int u, zt_status *st) {
    if (sh->npend == ZT_RS_INFLIGHT) ZT_TRY(rs_finish_oldest(sh, st));
    zt_unit_shard *us = &sh->u[u];
    zt_rs_pending *p = &sh->pend[sh->npend];
    memset(p, 0, sizeof *p);
    p->u = u;
    const void *send = sh->bucket[u];
    if (sh->gdt != ZT_F32) {
        if (!(p->send16 = zt_mem_alloc(us->n * 2, ZT_MEM_COMM, st)))
            return zt_fail_prefix(st, "gradient reduction of unit %s", unit_name(sh, u));
        zt_prec_narrow(sh->be, prec_of_dtype(sh->gdt), p->send16, sh->bucket[u], us->n);
        zt_mem_free(sh->bucket[u]);
        sh->bucket[u] = NULL;
        send = p->send16;
    }
    const size_t rlen = us->len ? us->len : 1;
    if (!(p->recv = zt_mem_alloc(rlen * zt_dtype_size(sh->gdt), ZT_MEM_COMM, st))) {
        zt_mem_free(p->send16);
        return zt_fail_prefix(st, "gradient reduction of unit %s", unit_name(sh, u));
    }
    zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    int rc = us->dgrp->ops->ireduce_scatter_sum(us->dgrp, send, p->recv, us->counts, sh->gdt,
                                                  &p->req, st);
    if (rc != ZT_OK) {
        zt_mem_free(p->send16);
        zt_mem_free(p->recv);
        return rc;
    }
    sh->npend++;
    return ZT_OK;
}

static int zt_unit_grads_done_impl(zt_units *U, int u, zt_status *st) {
    ZT_TRY(check_unit(U, u, "zt_unit_grads_done", st));
    zt_shard *sh = U;
    if (!sh->gopen[u])
        return zt_fail(st, ZT_EINVAL, "zt_unit_grads_done(unit %s) without zt_unit_grads",
                       unit_name(sh, u));
    sh->gopen[u] = 0;
    if (sh->stage < 2) return ZT_OK;
    zt_unit_shard *us = &sh->u[u];
    if (sh->overlap && us->g > 1) return rs_start(sh, u, st);
    float *dst = sh->gshard + us->soff;
    if (us->g == 1) {   /* a one-rank group: the bucket is the reduced slice */
        sh->be->add(dst, dst, sh->bucket[u] + us->lo, us->len);
    } else {
        ZT_TRY(rs_unit(sh, u, sh->bucket[u], sh->rs_buf, st));
        sh->be->add(dst, dst, sh->rs_buf, us->len);   /* dst += this micro-step's slice */
    }
    zt_mem_free(sh->bucket[u]);
    sh->bucket[u] = NULL;
    return ZT_OK;
}

/* The unit API as the model sees it: each call is an engine phase of
 * bench_train --breakdown (ZeRO-3 gathers, the reduce-scatters of stages
 * 2-3 and their bookkeeping: "comm + engine", exclusive of kernels), timed
 * here, in one place. */
typedef enum { UNIT_PARAMS, UNIT_RELEASE, UNIT_GRADS, UNIT_GRADS_DONE } unit_call;

static int unit_call_timed(zt_units *U, int u, unit_call call, float **out, zt_status *st) {
    zt_prof_mark pm;
    zt_prof_begin(&pm);
    int rc = ZT_OK;
    switch (call) {
    case UNIT_PARAMS: *out = zt_unit_params_impl(U, u, st); break;
    case UNIT_RELEASE: rc = zt_unit_release_impl(U, u, st); break;
    case UNIT_GRADS: *out = zt_unit_grads_impl(U, u, st); break;
    case UNIT_GRADS_DONE: rc = zt_unit_grads_done_impl(U, u, st); break;
    }
    zt_prof_end(&pm, ZT_PROF_COMM);
    return rc;
}

float *zt_unit_params(zt_units *U, int u, zt_status *st) {
    float *r = NULL;
    unit_call_timed(U, u, UNIT_PARAMS, &r, st);
    return r;
}

int zt_unit_release(zt_units *U, int u, zt_status *st) {
    return unit_call_timed(U, u, UNIT_RELEASE, NULL, st);
}

/* The 16-bit storage itself (weights16). */
const uint16_t *zt_unit_params16(zt_units *U, int u) {
    const zt_shard *sh = U;
    if (!sh || u < 0 || u >= sh->nu || !zt_shard_weights16(sh) || sh->pass == ZT_PASS_NONE) return NULL;
    /* stage 3: the gathered unit, kept by make_view where it has GEMM
     * weights; NF4: the unit's 16-bit rest or bf16 copy, kept by zt_nf4s_view */
    if (sh->stage == 3 || sh->q) return sh->view[u] ? (const uint16_t *)sh->gathered[u] : NULL;
    return sh->p16 + sh->u[u].coff;
}

float *zt_unit_grads(zt_units *U, int u, zt_status *st) {
    float *r = NULL;
    unit_call_timed(U, u, UNIT_GRADS, &r, st);
    return r;
}

int zt_unit_grads_done(zt_units *U, int u, zt_status *st) {
    return unit_call_timed(U, u, UNIT_GRADS_DONE, NULL, st);
}

int zt_units_fwd_dloss(zt_units *U, float *dloss) {
    if (!U || U->pass != ZT_PASS_FWD || !U->training || !U->fwd_dloss_set) return 0;
    *dloss = U->fwd_dloss;
    return 1;
}

double *zt_units_loss_acc(zt_units *U) {
    if (!U || U->pass != ZT_PASS_FWD || !U->training || !U->loss_acc) return NULL;
    U->loss_taken++;
    return U->loss_acc;
}

int zt_units_count(const zt_units *U) { return U ? U->nu : 0; }
size_t zt_unit_numel(const zt_units *U, int u) {
    return U && u >= 0 && u < U->nu ? U->u[u].n : 0;
}

static void begin_pass(zt_shard *sh, int pass) {
    sh->pass = pass;
    memset(sh->seen, 0, (size_t)sh->nu);
    /* a forward's gradient units that no backward closed (the step failed
     * between the passes): their buckets' partial sums are dropped, not
     * added to by the next pass */
    if (pass == ZT_PASS_FWD && sh->fwd_grads)
        for (int u = 0; u < sh->nu; ++u)
            if (sh->gopen[u] && sh->bucket[u]) {
                zt_mem_free(sh->bucket[u]);
                sh->bucket[u] = NULL;
            }
    /* (a backward keeps the gradient units its forward opened: the fused
     * LM head's, classifier.h) */
    if (pass != ZT_PASS_BWD || !sh->fwd_grads) memset(sh->gopen, 0, (size_t)sh->nu);
    sh->fwd_grads = 0;
}

int zt_shard_forward(zt_shard *sh, void *acts, const int *inputs, const int *targets, int B,
                     int T, int training, double *loss_sum, zt_status *st) {
    zt_model *m = sh->m;
    /* parameters no load wrote get their initial values now (deferred) */
    if (zt_shard_init_pending(sh) != ZT_OK || zt_shard_init_pending(sh->peer) != ZT_OK)
        return zt_fail(st, ZT_ENOMEM, "out of memory initializing the parameters");
    begin_pass(sh, ZT_PASS_FWD);
    if (sh->peer) begin_pass(sh->peer, ZT_PASS_FWD);
    sh->training = training;
    int rc = m->ops->forward(m->self, sh, acts, inputs, targets, B, T, loss_sum, st);
    if (!training || rc != ZT_OK) {
        zt_status tmp;
        int r2 = release_all(sh, rc == ZT_OK ? st : &tmp);
        if (rc == ZT_OK) rc = r2;
        if (sh->peer) {
            r2 = release_all(sh->peer, rc == ZT_OK ? st : &tmp);
            if (rc == ZT_OK) rc = r2;
        }
        /* a forward without backward (evaluation, sampling) is followed
         * by a host read: the gathers it waited for on the stream are
         * confirmed first, bounded (NCCL; nothing elsewhere) */
        r2 = zt_mesh_fence(sh->mesh, rc == ZT_OK ? st : &tmp);
        if (rc == ZT_OK) rc = r2;
    }
    sh->pass = ZT_PASS_NONE;
    if (sh->peer) sh->peer->pass = ZT_PASS_NONE;
    return rc;
}

/* The end of a backward pass on one engine: reductions finished, every
 * gradient unit closed, gathered units released. */
static int end_backward(zt_shard *sh, int rc, zt_status *st) {
    zt_model *m = sh->m;
    if (rc == ZT_OK) rc = rs_finish_all(sh, st);
    else {
        zt_status tmp;
        rs_finish_all(sh, &tmp);
    }
    for (int u = 0; rc == ZT_OK && u < sh->nu; ++u)
        if (sh->gopen[u])
            rc = zt_fail(st, ZT_EINVAL, "model '%s': backward ended without zt_unit_grads_done "
                         "for unit %s", m->ops->name ? m->ops->name : "?", unit_name(sh, u));
    zt_status tmp;
    int r2 = release_all(sh, rc == ZT_OK ? st : &tmp);
    if (rc == ZT_OK) rc = r2;
    sh->pass = ZT_PASS_NONE;
    return rc;
}

int zt_shard_backward(zt_shard *sh, void *acts, float dloss, zt_status *st) {
    zt_model *m = sh->m;
    sh->grads_zero = 0;
    if (sh->peer) sh->peer->grads_zero = 0;
    begin_pass(sh, ZT_PASS_BWD);
    if (sh->peer) begin_pass(sh->peer, ZT_PASS_BWD);
    int rc = m->ops->backward(m->self, sh, acts, dloss, st);
    rc = end_backward(sh, rc, st);
    if (sh->peer) {
        zt_status tmp;
        int r2 = end_backward(sh->peer, rc, rc == ZT_OK ? st : &tmp);
        if (rc == ZT_OK) rc = r2;
    }
    return rc;
}

/* ------------------------------------------------------------ lifecycle */

int zt_shard_create(zt_model *m, int stage, int G, zt_group *world, zt_shard **out, zt_status *st) {
    return zt_shard_create_ex(m, stage, G, world, NULL, out, st);
}

int zt_shard_create_ex(zt_model *m, int stage, int G, zt_group *world, const zt_shard_prec *prec,
                       zt_shard **out, zt_status *st) {
    *out = NULL;
    if (!world && stage != 0)
        return zt_fail(st, ZT_EINVAL, "ZeRO stage %d needs a communication group", stage);
    zt_mesh *mesh;
    ZT_TRY(zt_mesh_over(world, stage, G, m->be, prec ? prec->comm : ZT_SHARD_COMM_STAGED,
                        prec ? prec->device : -1, &mesh, st));
    int rc = zt_shard_create_on(m, stage, mesh, ZT_AX_SHARD, ZT_AX_REPLICA, prec, out, st);
    if (rc != ZT_OK) zt_mesh_free(mesh);
    else (*out)->own_mesh = mesh;
    return rc;
}

int zt_shard_create_on(zt_model *m, int stage, const zt_mesh *mesh, int shard_axis,
                       int replica_axis, const zt_shard_prec *prec, zt_shard **out, zt_status *st) {
    *out = NULL;
    zt_group *world = mesh->world;
    if (!world && stage != 0)
        return zt_fail(st, ZT_EINVAL, "ZeRO stage %d needs a communication group", stage);
    const int G = zt_mesh_size(mesh, shard_axis), R = zt_mesh_size(mesh, replica_axis);
    if (stage == 0 && R != 1)
        return zt_fail(st, ZT_EINTERNAL, "ZeRO stage 0 over %d replicas", R);
    zt_shard *sh = calloc(1, sizeof *sh);
    if (!sh) return zt_fail(st, ZT_ENOMEM, "out of memory (shard plan)");
    sh->stage = stage;
    sh->m = m;
    sh->be = m->be;
    sh->widen_runs = zt_widen_runs_of();
    sh->mesh = mesh;
    sh->world = world;
    sh->G = G;
    sh->R = R;
    sh->r = zt_mesh_coord(mesh, shard_axis);
    sh->rr = zt_mesh_coord(mesh, replica_axis);
    sh->nu = m->n_units;
    sh->prec = prec ? prec->prec : ZT_PREC_FP32;
    sh->pes = zt_precision_elem_size(sh->prec);
    sh->pdt = zt_precision_dtype(sh->prec);
    sh->gdt = prec ? prec->grad_comm : ZT_F32;
    sh->frozen = prec && prec->frozen;
    sh->w16 = prec && prec->w16;
    sh->overlap = stage >= 2 && G > 1 && prec && prec->overlap_comm && !sh->frozen;
    int rc = ZT_OK;
    if (mixed(sh) && m->params) {
        rc = zt_fail(st, ZT_EINTERNAL, "mixed precision: the model must not keep an fp32 "
                     "parameter block (zt_shard_model_flags_prec)");
        goto fail;
    }
    sh->dev = zt_be_device(sh->be);
    sh->host_opt = sh->dev && prec && prec->offload_optimizer && !sh->frozen;
    const int offp = prec && prec->offload_param;
    if (offp && (stage != 3 || !prec->offload_optimizer)) {
        rc = zt_fail(st, ZT_EINVAL, "offloading parameters needs ZeRO stage 3 and the optimizer "
                     "state offloaded too (zero_optimization.offload_param.device=cpu with "
                     "offload_optimizer.device=cpu)");
        goto fail;
    }
    /* on a device backend the owned parameter shards then live in host memory */
    sh->host_params = sh->dev && offp;
    const int ptag = ZT_MEM_PARAMS | (offp ? ZT_MEM_ON_HOST | (prec->pin_param ? ZT_MEM_PIN : 0) : 0);
    /* the mesh's groups (mesh.h), and their twins for device buffers */
    sh->shard = mesh->g[shard_axis];
    sh->replica = R > 1 ? mesh->g[replica_axis] : NULL;
    sh->dworld = mesh->dworld;
    sh->dshard = mesh->dg[shard_axis];
    sh->dreplica = R > 1 ? mesh->dg[replica_axis] : NULL;
    sh->u = calloc((size_t)sh->nu, sizeof *sh->u);
    sh->gathered = calloc((size_t)sh->nu, sizeof *sh->gathered);
    sh->req = calloc((size_t)sh->nu, sizeof *sh->req);
    sh->bucket = calloc((size_t)sh->nu, sizeof *sh->bucket);
    sh->seen = calloc((size_t)sh->nu, 1);
    sh->gopen = calloc((size_t)sh->nu, 1);
    const int nf4 = sh->frozen && prec->nf4;
    if (mixed(sh) || nf4) sh->view = calloc((size_t)sh->nu, sizeof *sh->view);
    if (!sh->u || !sh->gathered || !sh->req || !sh->bucket || !sh->seen || !sh->gopen ||
        ((mixed(sh) || nf4) && !sh->view)) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto fail; }
    /* expert parallelism: each expert unit's window on this rank, sliced
     * over the expert shard group (stage 0: held by the expert-data-parallel
     * group, the ranks with the same expert coordinate) */
    sh->epn = mesh_ep(mesh);
    sh->epc = sh->epn > 1 ? zt_mesh_coord(mesh, ZT_AX_EP) : 0;
    sh->ep = sh->epn > 1 ? mesh->g[ZT_AX_EP] : NULL;
    sh->dep = sh->epn > 1 ? mesh->dg[ZT_AX_EP] : NULL;
    const int EG = zt_mesh_size(mesh, ZT_AX_ESHARD), ER = zt_mesh_coord(mesh, ZT_AX_ESHARD);
    size_t soff = 0, max_len = 1, coff = 0;
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        const int win = sh->epn > 1 && m->units[u].expert;
        const size_t N = (size_t)sh->epn;
        if (win && (m->units[u].numel % N || (stage > 0 && G % sh->epn) ||
                    (sh->epn > 1 && (!sh->ep || !sh->dep)))) {
            rc = zt_fail(st, ZT_EINTERNAL, "unit %s: %zu elements over an expert group of %d "
                         "(shard group %d)", m->units[u].name, m->units[u].numel, sh->epn, G);
            goto fail;
        }
        us->win = win;
        us->n = win ? m->units[u].numel / N : m->units[u].numel;
        us->w0 = win ? (size_t)sh->epc * us->n : 0;
        us->off = m->units[u].offset + us->w0;
        us->coff = coff;
        coff += us->n;
        if (win) sh->win = 1;
        const int g = stage == 0 ? 1 : win ? EG : G;
        const int r = stage == 0 ? 0 : win ? ER : sh->r;
        us->g = g;
        us->r = r;
        us->grp = win ? mesh->g[ZT_AX_ESHARD] : sh->shard;
        us->dgrp = win ? mesh->dg[ZT_AX_ESHARD] : sh->dshard;
        if (g > 1 && (!us->grp || !us->dgrp || us->grp->size != g)) {
            rc = zt_fail(st, ZT_EINTERNAL, "unit %s: no group of %d ranks to shard it over",
                         m->units[u].name, g);
            goto fail;
        }
        /* stage 0: the holders of the same values */
        us->hg = win ? EG : world ? world->size : 1;
        us->hr = win ? ER : world ? world->rank : 0;
        us->hgrp = us->hg > 1 ? (win ? mesh->g[ZT_AX_ESHARD] : world) : NULL;
        us->hdgrp = us->hg > 1 ? (win ? mesh->dg[ZT_AX_ESHARD] : sh->dworld) : NULL;
        size_t S = (us->n + (size_t)g - 1) / (size_t)g;
        us->counts = calloc((size_t)g, sizeof(int));
        us->displs = calloc((size_t)g, sizeof(int));
        if (!us->counts || !us->displs) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto fail; }
        if (us->n > 0x7fffffffu) { rc = zt_fail(st, ZT_EUNSUPPORTED, "unit %s has %zu elements; at most 2^31-1 per unit", m->units[u].name, us->n); goto fail; }
        for (int i = 0; i < g; ++i) {
            size_t a = (size_t)i * S, b = a + S;
            if (a > us->n) a = us->n;
            if (b > us->n) b = us->n;
            us->displs[i] = (int)a;
            us->counts[i] = (int)(b - a);
        }
        us->lo = (size_t)us->displs[r];
        us->len = (size_t)us->counts[r];
        us->soff = soff;
        soff += us->len;
        if (us->len > max_len) max_len = us->len;
        if (us->n > sh->max_unit) sh->max_unit = us->n;
    }
    sh->shard_total = soff;
    sh->max_len = max_len;
    sh->nblk = coff;
    if ((m->params || m->grads) && m->block_elems != coff) {
        rc = zt_fail(st, ZT_EINTERNAL, "model '%s': blocks of %zu elements for an engine that "
                     "stores %zu (zt_shard_block_elems)", m->ops && m->ops->name ? m->ops->name : "?",
                     m->block_elems, coff);
        goto fail;
    }
    if (nf4 && sh->win) {
        rc = zt_fail(st, ZT_EUNSUPPORTED, "a 4-bit (NF4) base with expert parallelism is not "
                     "implemented");
        goto fail;
    }
    if (nf4) {   /* QLoRA: the NF4 store alone (shard_nf4.c) */
        if (m->params) {
            rc = zt_fail(st, ZT_EINTERNAL, "an NF4 base: the model must not keep a parameter block");
            goto fail;
        }
        if ((rc = zt_nf4s_create(sh, prec, st)) != ZT_OK) goto fail;
        *out = sh;
        return ZT_OK;
    }
    if (sh->frozen) {
        /* parameters only: the 16-bit storage when mixed (no master weights) */
        if (mixed(sh)) {
            const size_t np = coff ? coff : 1;
            if (stage == 3) sh->pshard16 = zt_mem_alloc((soff ? soff : 1) * 2, ptag, st);
            else sh->p16 = zt_mem_alloc(np * 2, ZT_MEM_PARAMS, st);
            if (!(sh->p16 || sh->pshard16)) { rc = st->code; goto fail; }
        } else if (stage == 3 &&
                   !(sh->pshard = zt_mem_alloc((soff ? soff : 1) * sizeof(float), ptag, st))) {
            rc = st->code;
            goto fail;
        }
        *out = sh;
        return ZT_OK;
    }
    if (mixed(sh) || (sh->host_opt && !sh->host_params)) {
        /* 16-bit storage, fp32 master weights (compact, like the AdamW state);
         * offloaded on a device backend, fp32 too gets host master weights,
         * which AdamW updates on the host (unless the parameter shards are
         * offloaded too: then they are the master weights) */
        const size_t np = coff ? coff : 1;
        const int mtag = ZT_MEM_OPTIMIZER | (prec->offload_optimizer ? ZT_MEM_ON_HOST : 0) |
                         (prec->offload_optimizer && prec->pin_optimizer ? ZT_MEM_PIN : 0);
        if (mixed(sh)) {
            if (stage == 3) sh->pshard16 = zt_mem_alloc((soff ? soff : 1) * 2, ptag, st);
            else sh->p16 = zt_mem_alloc(np * 2, ZT_MEM_PARAMS, st);
            if (!(sh->p16 || sh->pshard16)) { rc = st->code; goto fail; }
        }
        if (!(sh->master = zt_mem_alloc((soff ? soff : 1) * sizeof(float), mtag, st))) {
            rc = st->code;
            goto fail;
        }
    }
    /* the offloaded update's staging slices: page-locked with the state
     * (offload_optimizer.pin_memory), so the gradient slices come down
     * asynchronously; pageable, they come down synchronously (down_async) */
    const int stag = ZT_MEM_WORKSPACE | ZT_MEM_HOST | (prec && prec->pin_optimizer ? ZT_MEM_PIN : 0);
    if (sh->host_opt &&
        (!(sh->hgrad = zt_mem_alloc(2 * max_len * sizeof(float), stag, st)) ||
         (mixed(sh) && !sh->host_params &&
          !(sh->h16 = zt_mem_alloc(2 * max_len * 2, stag, st))))) {
        rc = st->code;
        goto fail;
    }
    if (sh->gdt != ZT_F32 && world && world->size > 1 &&
        (!(sh->g16 = zt_mem_alloc((sh->max_unit ? sh->max_unit : 1) * 2, ZT_MEM_COMM, st)) ||
         (stage >= 1 && !(sh->rs16 = zt_mem_alloc(max_len * 2, ZT_MEM_COMM, st))))) {
        rc = st->code;
        goto fail;
    }
    if (stage == 3 && !mixed(sh) && !(sh->pshard = zt_mem_alloc((soff ? soff : 1) * sizeof(float), ptag, st))) { rc = st->code; goto fail; }
    if (stage >= 2 && !(sh->gshard = zt_mem_alloc((soff ? soff : 1) * sizeof(float), ZT_MEM_GRADS, st))) { rc = st->code; goto fail; }
    if (stage >= 1 && !(sh->rs_buf = zt_mem_alloc(max_len * sizeof(float), ZT_MEM_COMM, st))) { rc = st->code; goto fail; }
    /* host memory comes zeroed (zt_mem_alloc) and untouched: the first
     * step's zero_grads need not fault it in only to write zeros again */
    sh->grads_zero = !sh->dev;
    *out = sh;
    return ZT_OK;
fail:
    zt_shard_free(sh);
    return rc;
}

void zt_shard_free(zt_shard *sh) {
    if (!sh) return;
    for (int i = 0; i < sh->npend; ++i) {   /* after an error: reduce-scatters still in flight */
        zt_rs_pending *p = &sh->pend[i];
        zt_status st;
        if (p->req.active) sh->u[p->u].dgrp->ops->wait(sh->u[p->u].dgrp, &p->req, &st);
        zt_mem_free(p->send16);
        zt_mem_free(p->recv);
    }
    for (int u = 0; sh->u && u < sh->nu; ++u) {
        free(sh->u[u].counts);
        free(sh->u[u].displs);
        if (sh->gathered && sh->gathered[u]) {
            zt_status st;
            if (sh->req[u].active) sh->u[u].dgrp->ops->wait(sh->u[u].dgrp, &sh->req[u], &st);
            if (!zt_nf4s_lent(sh, u)) zt_mem_free(sh->gathered[u]);
        }
        if (sh->bucket && sh->bucket[u]) zt_mem_free(sh->bucket[u]);
        if (sh->view && sh->view[u]) zt_mem_free(sh->view[u]);
    }
    zt_nf4s_free(sh);
    free(sh->init_todo);
    zt_mem_free(sh->pshard);
    zt_mem_free(sh->p16);
    zt_mem_free(sh->pshard16);
    zt_mem_free(sh->master);
    zt_mem_free(sh->g16);
    zt_mem_free(sh->rs16);
    free(sh->view);
    zt_mem_free(sh->gshard);
    zt_mem_free(sh->rs_buf);
    zt_mem_free(sh->hgrad);
    zt_mem_free(sh->h16);
    free(sh->rx);
    free(sh->rn);
    free(sh->seg);
    zt_mesh_free(sh->own_mesh);   /* (the groups are the mesh's) */
    free(sh->u);
    free(sh->gathered);
    free(sh->req);
    free(sh->bucket);
    free(sh->seen);
    free(sh->gopen);
    free(sh);
}

/* Initial values of flat elements [lo, hi) into dst (memory of the backend
 * when dst_dev, else host): computed on the host, staged in bounded chunks. */
static int init_into(zt_shard *sh, uint64_t seed, size_t lo, size_t hi, float *dst, int dst_dev) {
    if (!dst_dev || !sh->dev) {
        /* (the counting table takes no values: offloaded host state is left
         * as allocated, zero, never paged in; bench/costmodel --offload) */
        if (!zt_count_bare(sh->be)) zt_model_init_range(sh->m, seed, lo, hi, dst);
        return ZT_OK;
    }
    const size_t n = hi - lo, cap = n < ZT_STAGE_ELEMS ? n : ZT_STAGE_ELEMS;
    if (!n) return ZT_OK;
    float *h = zt_mem_alloc(cap * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, NULL);
    if (!h) return ZT_ENOMEM;
    /* the counting table (kernels/count.h, bench/costmodel) takes no values */
    const int values = !zt_count_bare(sh->be);
    for (size_t a = lo; a < hi; a += cap) {
        const size_t c = hi - a < cap ? hi - a : cap;
        if (values) zt_model_init_range(sh->m, seed, a, a + c, h);
        sh->be->to_device(dst + (a - lo), h, c * sizeof(float));
    }
    zt_mem_free(h);
    return ZT_OK;
}

/* Master weights of unit u -> the parameter storage of its owned slice:
 * rounded to 16 bits (mixed) or copied (fp32 with host master weights). */
static void push_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    const float *src = sh->master + us->soff;
    if (!sh->host_opt) {   /* master on the device */
        zt_prec_narrow(sh->be, sh->prec, store_slice(sh, u), src, us->len);
        return;
    }
    if (!mixed(sh)) {
        float *dst = sh->stage == 3 ? sh->pshard + us->soff : sh->m->params + us->coff + us->lo;
        sh->be->to_device(dst, src, us->len * sizeof(float));
        return;
    }
    if (sh->host_params) {   /* the 16-bit shard is host memory too: narrowed in place */
        if (!zt_count_bare(sh->be)) zt_prec_narrow(zt_backend_cpu(), sh->prec, store_slice(sh, u), src, us->len);
        return;
    }
    /* narrowed on the host (the cpu kernels), then moved to the device */
    uint16_t *dst = store_slice(sh, u);
    zt_prec_narrow(zt_backend_cpu(), sh->prec, sh->h16, src, us->len);
    sh->be->to_device(dst, sh->h16, us->len * sizeof(uint16_t));
}

int zt_shard_state_on_device(const zt_shard *sh) { return !sh->host_opt; }

/* The initial values of the units todo names (NULL: every unit). */
static int init_units(zt_shard *sh, uint64_t seed, const unsigned char *todo) {
    const int mdev = !sh->host_opt;   /* where the master weights live */
    if (sh->q) {   /* NF4 base: each unit's values on the host, quantized */
        float *h = malloc((sh->max_unit ? sh->max_unit : 1) * sizeof(float));
        if (!h) return ZT_ENOMEM;
        int rc = ZT_OK;
        for (int u = 0; u < sh->nu && rc == ZT_OK; ++u) {
            if (todo && !todo[u]) continue;
            zt_model_init_range(sh->m, seed, sh->u[u].off, sh->u[u].off + sh->u[u].n, h);
            rc = zt_nf4s_set_unit_host(sh, u, h, NULL);
        }
        free(h);
        return rc;
    }
    if (!mixed(sh) && sh->stage < 3) {
        if (!todo && !sh->win) ZT_TRY(init_into(sh, seed, 0, sh->m->num_params, sh->m->params, 1));
        else
            for (int u = 0; u < sh->nu; ++u)
                if (!todo || todo[u])
                    ZT_TRY(init_into(sh, seed, sh->u[u].off, sh->u[u].off + sh->u[u].n,
                                     sh->m->params + sh->u[u].coff, 1));
        if (sh->master)   /* fp32, offloaded on a device: host master = owned slices */
            for (int u = 0; u < sh->nu; ++u) {
                if (todo && !todo[u]) continue;
                zt_unit_shard *us = &sh->u[u];
                zt_xcopy(sh->be, sh->master + us->soff, mdev, sh->m->params + us->coff + us->lo, 1,
                         us->len * sizeof(float));
            }
        return ZT_OK;
    }
    if (mixed(sh) && sh->stage < 3) {
        /* every rank needs the whole 16-bit block: initialize unit by unit
         * (a pure function of the seed), keep the owned slice as master */
        float *tmp = zt_mem_alloc((sh->max_unit ? sh->max_unit : 1) * sizeof(float),
                                  ZT_MEM_WORKSPACE, NULL);
        if (!tmp) return ZT_ENOMEM;
        int rc = ZT_OK;
        for (int u = 0; u < sh->nu && rc == ZT_OK; ++u) {
            if (todo && !todo[u]) continue;
            zt_unit_shard *us = &sh->u[u];
            rc = init_into(sh, seed, us->off, us->off + us->n, tmp, 1);
            if (rc != ZT_OK) break;
            if (sh->master)
                zt_xcopy(sh->be, sh->master + us->soff, mdev, tmp + us->lo, 1, us->len * sizeof(float));
            zt_prec_narrow(sh->be, sh->prec, sh->p16 + us->coff, tmp, us->n);
        }
        zt_mem_free(tmp);
        return rc;
    }
    if (sh->frozen && mixed(sh)) {   /* stage 3: owned slices, rounded (on the host when the
                                      * shards are offloaded: host_params) */
        const int hp = sh->host_params;
        float *tmp = zt_mem_alloc((sh->max_len ? sh->max_len : 1) * sizeof(float),
                                  ZT_MEM_WORKSPACE | (hp ? ZT_MEM_HOST : 0), NULL);
        if (!tmp) return ZT_ENOMEM;
        int rc = ZT_OK;
        for (int u = 0; u < sh->nu && rc == ZT_OK; ++u) {
            if (todo && !todo[u]) continue;
            zt_unit_shard *us = &sh->u[u];
            rc = init_into(sh, seed, us->off + us->lo, us->off + us->lo + us->len, tmp, !hp);
            if (rc == ZT_OK)
                zt_prec_narrow(hp ? zt_backend_cpu() : sh->be, sh->prec, store_slice(sh, u), tmp,
                               us->len);
        }
        zt_mem_free(tmp);
        return rc;
    }
    for (int u = 0; u < sh->nu; ++u) {
        if (todo && !todo[u]) continue;
        zt_unit_shard *us = &sh->u[u];
        float *dst = sh->master ? sh->master + us->soff : sh->pshard + us->soff;
        ZT_TRY(init_into(sh, seed, us->off + us->lo, us->off + us->lo + us->len, dst,
                         sh->master ? mdev : !sh->host_params));
        if (sh->master) push_slice(sh, u);
    }
    return ZT_OK;
}

/* The parameters of the units todo names (NULL: all), for init_elems. */
static uint64_t units_numel(const zt_shard *sh, const unsigned char *todo) {
    uint64_t n = 0;
    for (int u = 0; u < sh->nu; ++u)
        if (!todo || todo[u]) n += sh->u[u].n;
    return n;
}

int zt_shard_init_params(zt_shard *sh, uint64_t seed) {
    free(sh->init_todo);
    sh->init_todo = NULL;
    ZT_TRY(init_units(sh, seed, NULL));
    sh->init_elems += units_numel(sh, NULL);
    return ZT_OK;
}

int zt_shard_defer_init(zt_shard *sh, uint64_t seed) {
    free(sh->init_todo);
    if (!(sh->init_todo = malloc(sh->nu ? (size_t)sh->nu : 1))) return ZT_ENOMEM;
    memset(sh->init_todo, 1, sh->nu ? (size_t)sh->nu : 1);
    sh->init_seed = seed;
    return ZT_OK;
}

void zt_shard_params_written(zt_shard *sh, int u) {
    if (!sh || !sh->init_todo) return;
    if (u >= 0) {
        sh->init_todo[u] = 0;
        return;
    }
    free(sh->init_todo);
    sh->init_todo = NULL;
}

int zt_shard_init_pending(zt_shard *sh) {
    if (!sh || !sh->init_todo) return ZT_OK;
    /* (a load wrote every unit: nothing owed, no buffer; memplan.c plan_init) */
    int any = 0;
    for (int u = 0; u < sh->nu && !any; ++u) any = sh->init_todo[u] != 0;
    if (any) ZT_TRY(init_units(sh, sh->init_seed, sh->init_todo));
    sh->init_elems += units_numel(sh, sh->init_todo);
    free(sh->init_todo);
    sh->init_todo = NULL;
    return ZT_OK;
}

void zt_shard_zero_grads(zt_shard *sh) {
    if (sh->grads_zero) return;   /* still the allocation's zeros */
    if (sh->m->grads) sh->be->zero(sh->m->grads, sh->nblk * sizeof(float));
    if (sh->gshard) sh->be->zero(sh->gshard, sh->shard_total * sizeof(float));
}

/* Is tensor t a block's GEMM weight (zt_shard_fresh_range)? */
static int fresh_tensor(const zt_model *m, int t) {
    const zt_tensor_info *ti = &m->tensors[t];
    return ti->gemm && ti->unit > 0 && ti->unit < m->n_units - 1;
}

int zt_shard_fresh_range(const zt_shard *sh, float **g, size_t *n) {
    const zt_model *m = sh->m;
    *g = NULL;
    *n = 0;
    if (sh->stage > 1 || !m->grads || sh->frozen || !sh->be->set_dw_fresh ||
        !zt_arch_of_ops(m->ops) || (m->cfg.n_experts > 0 && m->cfg.expert_parallel > 1) ||
        (m->cfg.n_experts > 0 && !sh->be->dw_fresh) || m->cfg.lora_r > 0 || m->n_units < 3 ||
        sh->nblk != m->num_params)
        return 0;
    /* (the tensors in layout order, each unit where the model's views of
     * m->grads put it) */
    size_t at = 0;
    for (int t = 0; t < m->n_tensors; ++t) {
        if (m->tensors[t].offset < at) return 0;
        at = m->tensors[t].offset + m->tensors[t].numel;
    }
    for (int u = 0; u < sh->nu; ++u)
        if (sh->u[u].coff != m->units[u].offset || sh->u[u].w0) return 0;
    const size_t lo = m->units[1].offset, hi = m->units[m->n_units - 1].offset;
    if (hi <= lo) return 0;
    *g = m->grads + lo;
    *n = hi - lo;
    return 1;
}

int zt_shard_head_fresh(const zt_shard *sh, float **g, size_t *n) {
    const zt_model *m = sh->m;
    *g = NULL;
    *n = 0;
    float *fg;
    size_t fn;
    const zt_arch *a = zt_arch_of_ops(m->ops);
    if (!zt_shard_fresh_range(sh, &fg, &fn) || !a || !zt_arch_tied(a, &m->cfg) || !sh->be->dw_fresh ||
        m->units[0].n_tensors < 1)
        return -1;
    /* (the embedding: the first tensor of the first unit, [V, C], the
     * head's whole dW) */
    const int t = m->units[0].first_tensor;
    const zt_tensor_info *ti = &m->tensors[t];
    if (ti->unit != 0 || ti->ndim != 2 || ti->shape[0] != m->cfg.vocab ||
        (size_t)ti->shape[0] * (size_t)ti->shape[1] != ti->numel || fresh_tensor(m, t))
        return -1;
    *g = m->grads + ti->offset;
    *n = ti->numel;
    return t;
}

void zt_shard_zero_grads_fresh(zt_shard *sh, int head_t) {
    if (sh->grads_zero) return;   /* still the allocation's zeros */
    const zt_model *m = sh->m;
    size_t at = 0;   /* the start of the run not zeroed yet */
    for (int t = 0; t < m->n_tensors; ++t) {
        if (!fresh_tensor(m, t) && t != head_t) continue;
        const size_t o = m->tensors[t].offset;
        if (o > at) sh->be->zero(m->grads + at, (o - at) * sizeof(float));
        at = o + m->tensors[t].numel;
    }
    if (at < sh->nblk) sh->be->zero(m->grads + at, (sh->nblk - at) * sizeof(float));
}

/* ------------------------------------------------------------ the step */

int zt_shard_reduce_grads(zt_shard *sh, zt_status *st) {
    zt_model *m = sh->m;
    if (sh->stage == 0) {
        if (!sh->world || sh->world->size == 1) return ZT_OK;
        if (!sh->win) {
            zt_group_where(sh->dworld, "step %ld, gradient reduction", sh->step + 1);
            ZT_TRY(allreduce_grads(sh, sh->dworld, m->grads, sh->nblk, st));
            return ZT_OK;
        }
        /* expert windows: each run of adjacent units with the same holders
         * (the world; an expert window's expert-data-parallel group) */
        for (int u = 0; u < sh->nu;) {
            const zt_unit_shard *us = &sh->u[u];
            size_t n = 0;
            int v = u;
            for (; v < sh->nu && sh->u[v].win == us->win; ++v) n += sh->u[v].n;
            if (us->hdgrp) {
                zt_group_where(us->hdgrp, "step %ld, gradient reduction (unit %s)", sh->step + 1,
                               unit_name(sh, u));
                ZT_TRY(allreduce_grads(sh, us->hdgrp, m->grads + us->coff, n, st));
            }
            u = v;
        }
        return ZT_OK;
    }
    if (sh->stage == 1) {
        /* reduce-scatter each unit; the owned slice lands in place */
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            float *g = m->grads + us->coff;
            if (us->g > 1) {
                ZT_TRY(rs_unit(sh, u, g, sh->rs_buf, st));
                sh->be->copy(g + us->lo, sh->rs_buf, us->len * sizeof(float));
            }
            if (sh->dreplica) {
                zt_group_where(sh->dreplica, "step %ld, unit %s", sh->step + 1, m->units[u].name);
                ZT_TRY(allreduce_grads(sh, sh->dreplica, g + us->lo, us->len, st));
            }
        }
        return ZT_OK;
    }
    /* stages 2-3: slices were reduce-scattered during backward */
    if (sh->dreplica) {
        zt_group_where(sh->dreplica, "step %ld, gradient shards", sh->step + 1);
        ZT_TRY(allreduce_grads(sh, sh->dreplica, sh->gshard, sh->shard_total, st));
    }
    return ZT_OK;
}

/* Owned gradient slice of unit u. */
static float *grad_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    return sh->stage >= 2 ? sh->gshard + us->soff : sh->m->grads + us->coff + us->lo;
}
float *zt_shard_param_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    if (sh->master) return sh->master + us->soff;
    return sh->stage == 3 ? sh->pshard + us->soff : sh->m->params + us->coff + us->lo;
}

void zt_shard_poison_grad(zt_shard *sh) {
    sh->grads_zero = 0;
    for (int u = 0; u < sh->nu; ++u) {
        if (!sh->u[u].len) continue;
        const float inf = INFINITY;
        sh->be->to_device(grad_slice(sh, u), &inf, sizeof inf);
        return;
    }
}

/* Stages 1-2 with G > 1: all-gather the parameter storage (16-bit when
 * mixed) from the owned slices. */
static int gather_params(zt_shard *sh, zt_status *st) {
    if (sh->stage >= 1 && sh->stage <= 2) {
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            if (us->g == 1) continue;
            void *blk = mixed(sh) ? (void *)(sh->p16 + us->coff) : (void *)(sh->m->params + us->coff);
            zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
            ZT_TRY(coll_allgather(us->dgrp, blk, us->counts, us->displs, sh->pdt, st));
        }
    }
    return ZT_OK;
}

int zt_shard_refresh_params(zt_shard *sh, zt_status *st) {
    if (!sh->master) return ZT_OK;
    for (int u = 0; u < sh->nu; ++u) push_slice(sh, u);
    return gather_params(sh, st);
}

/* Asynchronous copies where the backend has them (a handle to wait on, or
 * NULL: done).  Down into the staging slices (hgrad) only where they are
 * page-locked (or the backend cannot pin: cpu-strict): into pageable
 * memory CUDA's asynchronous copy returns only once it (and everything
 * queued before it) completed, so it is done synchronously, as what it is. */
static void *down_async(zt_shard *sh, void *h, const void *d, size_t bytes) {
    if (sh->be->to_host_async && zt_mem_async_into(sh->be, sh->hgrad)) return sh->be->to_host_async(h, d, bytes);
    sh->be->to_host(h, d, bytes);
    return NULL;
}
static void *up_async(zt_shard *sh, void *d, const void *h, size_t bytes) {
    if (sh->be->to_device_async) return sh->be->to_device_async(d, h, bytes);
    sh->be->to_device(d, h, bytes);
    return NULL;
}
static void xfer_wait(zt_shard *sh, void **h) {
    if (*h) sh->be->copy_wait(*h);
    *h = NULL;
}

/* The next unit after u with an owned slice, -1 when none. */
static int next_owned(const zt_shard *sh, int u) {
    for (++u; u < sh->nu; ++u)
        if (sh->u[u].len) return u;
    return -1;
}

/* Offloaded AdamW (host_opt): per unit, the owned gradient slice comes down
 * to the host, AdamW updates the host master weights and moments there (the
 * cpu kernels: OpenMP over the slice), and the updated slice goes back up
 * into the parameter storage (narrowed to 16 bits on the host when mixed;
 * with offload_param the storage is host memory and nothing goes up).
 * The copies are asynchronous where the backend has async copies, with two
 * host staging slices each way: unit k+1's gradient comes down while AdamW
 * runs on unit k, and unit k's update goes up while unit k+1's AdamW runs.
 * The master slice of a unit is not written again before its upload is
 * waited on (next step), and a staging slice is reused only after the copy
 * that used it two units earlier completed. */
static int update_offloaded(zt_shard *sh, zt_adamw *o, double lr, double grad_scale,
                            zt_status *st) {
    const zt_backend *cpu = zt_backend_cpu();
    /* the counting table (kernels/count.h, bench/costmodel) has no values:
     * the host's AdamW and narrowing are skipped (no device work, nothing
     * counted; the host state stays untouched, never paged in), the copies
     * are made as always */
    const int values = !zt_count_bare(sh->be);
    void *down[2] = {NULL, NULL}, *up[2] = {NULL, NULL};
    int u = next_owned(sh, -1);
    if (u >= 0) down[0] = down_async(sh, sh->hgrad, grad_slice(sh, u), sh->u[u].len * sizeof(float));
    for (int k = 0; u >= 0; ++k) {
        const int b = k & 1;
        zt_unit_shard *us = &sh->u[u];
        const int nx = next_owned(sh, u);
        if (nx >= 0)
            down[b ^ 1] = down_async(sh, sh->hgrad + (size_t)(b ^ 1) * sh->max_len,
                                     grad_slice(sh, nx), sh->u[nx].len * sizeof(float));
        xfer_wait(sh, &down[b]);
        /* the host master weights; with offload_param at fp32 the host
         * parameter shard itself */
        float *master = zt_shard_param_slice(sh, u);
        if (values)
            zt_adamw_range(o, sh->m, cpu, us->off + us->lo, us->off + us->lo + us->len, master,
                           sh->hgrad + (size_t)b * sh->max_len, o->m + us->soff, o->v + us->soff, lr,
                           grad_scale);
        xfer_wait(sh, &up[b]);   /* staging slice b: free again */
        if (sh->host_params) {
            /* the parameter shard is host memory: nothing goes up (the next
             * gather uploads it); mixed: narrowed into it in place */
            if (mixed(sh) && values) zt_prec_narrow(cpu, sh->prec, store_slice(sh, u), master, us->len);
        } else if (!mixed(sh)) {
            float *dst = sh->stage == 3 ? sh->pshard + us->soff : sh->m->params + us->coff + us->lo;
            up[b] = up_async(sh, dst, master, us->len * sizeof(float));
        } else {
            uint16_t *h16 = sh->h16 + (size_t)b * sh->max_len;
            if (values) zt_prec_narrow(cpu, sh->prec, h16, master, us->len);
            up[b] = up_async(sh, store_slice(sh, u), h16, us->len * sizeof(uint16_t));
        }
        u = nx;
    }
    xfer_wait(sh, &up[0]);
    xfer_wait(sh, &up[1]);
    return zt_be_check(sh->be, "offloaded optimizer step", st);
}

int zt_shard_sumsq_reduce(zt_shard *sh, double *sq, zt_status *st) {
    if (sh->stage == 0 && sh->win) {   /* (grad_ranges: the dense part on coordinate 0) */
        zt_group_where(sh->ep, "step %ld, gradient norm", sh->step + 1);
        ZT_TRY(sh->ep->ops->allreduce_sum(sh->ep, sq, 1, ZT_F64, st));
    }
    if (sh->stage > 0 && sh->G > 1) {   /* a host scalar: the host group */
        zt_group_where(sh->shard, "step %ld, gradient norm", sh->step + 1);
        ZT_TRY(sh->shard->ops->allreduce_sum(sh->shard, sq, 1, ZT_F64, st));
    }
    return ZT_OK;
}

/* The owned gradient ranges (the norm's and fp16's check): stage 0 the full
 * block, else the owned slice of every unit.  norm: at stage 0 with expert
 * windows the ones the norm sums over the expert group, every window and the
 * other units on expert coordinate 0 (so each element once). */
static int grad_ranges(zt_shard *sh, int norm, zt_status *st) {
    if (!sh->rx) {
        const size_t k = sh->nu > 0 ? (size_t)sh->nu : 1;
        sh->rx = malloc(k * sizeof *sh->rx);
        sh->rn = malloc(k * sizeof *sh->rn);
        if (!sh->rx || !sh->rn) return zt_fail(st, ZT_ENOMEM, "out of memory (gradient ranges)");
    }
    sh->nr = 0;
    if (sh->stage == 0 && !(sh->win && norm)) {
        sh->rx[0] = sh->m->grads;
        sh->rn[0] = sh->nblk;
        sh->nr = 1;
        return ZT_OK;
    }
    if (sh->stage == 0) {
        for (int u = 0; u < sh->nu; ++u) {
            if (!sh->u[u].win && sh->epc != 0) continue;
            sh->rx[sh->nr] = sh->m->grads + sh->u[u].coff;
            sh->rn[sh->nr++] = sh->u[u].n;
        }
        return ZT_OK;
    }
    for (int u = 0; u < sh->nu; ++u) {
        sh->rx[sh->nr] = grad_slice(sh, u);
        sh->rn[sh->nr++] = sh->u[u].len;
    }
    return ZT_OK;
}

int zt_shard_grad_scalars(zt_shard *sh, float inv_scale, uint64_t *nonfinite, double *sumsq,
                          zt_status *st) {
    ZT_TRY(grad_ranges(sh, 0, st));
    if (nonfinite && inv_scale != 1.0f)
        for (int r = 0; r < sh->nr; ++r)
            if (sh->rn[r]) sh->be->scale((float *)sh->rx[r], sh->rn[r], inv_scale);
    if (sh->stage == 0 && sh->win) ZT_TRY(grad_ranges(sh, 1, st));
    if (nonfinite) sh->be->nonfinite_to(nonfinite, sh->rx, sh->rn, sh->nr);
    sh->be->sumsq_to(sumsq, sh->rx, sh->rn, sh->nr);
    return ZT_OK;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* adamw_multi's segments: every owned element in the compact order of the
 * optimizer state, cut where a tensor or a unit slice ends, adjacent
 * pieces with the same weight decay and shift merged; *logical: the
 * arrays addressed in the logical layout (shift = the slice's logical
 * offset - its compact offset). */
static int build_segs(zt_shard *sh, float wd, int *nseg, zt_status *st) {
    const zt_model *m = sh->m;
    if (!sh->seg && !(sh->seg = malloc(((size_t)m->n_tensors + (size_t)sh->nu + 1) * sizeof *sh->seg)))
        return zt_fail(st, ZT_ENOMEM, "out of memory (optimizer segments)");
    int ns = 0;
    for (int u = 0; u < sh->nu; ++u) {
        const zt_unit_shard *us = &sh->u[u];
        if (!us->len) continue;
        /* (the "logical" arrays are the full blocks: the slice at coff + lo) */
        const size_t a0 = us->off + us->lo, a1 = a0 + us->len, shift = us->coff + us->lo - us->soff;
        for (int i = 0; i < m->n_tensors; ++i) {
            const zt_tensor_info *t = &m->tensors[i];
            const size_t a = t->offset > a0 ? t->offset : a0;
            const size_t b = t->offset + t->numel < a1 ? t->offset + t->numel : a1;
            if (a >= b) continue;
            const float w = t->decay ? wd : 0.0f;
            zt_adamw_seg *p = ns ? &sh->seg[ns - 1] : NULL;
            const size_t start = us->soff + (a - a0);
            if (p && p->shift == shift && same_bits(p->wd, w) && p->start + p->n == start) {
                p->n += b - a;
                continue;
            }
            if (ns == m->n_tensors + sh->nu + 1)   /* (not reached: at most a piece per tensor and cut) */
                return zt_fail(st, ZT_EINTERNAL, "optimizer segments: more pieces than expected");
            sh->seg[ns++] = (zt_adamw_seg){start, b - a, shift, w};
        }
    }
    *nseg = ns;
    return ZT_OK;
}

int zt_shard_update_ex(zt_shard *sh, zt_adamw *o, double lr, double grad_scale,
                       const zt_step_scalars *gate, double max_norm, zt_status *st) {
    zt_model *m = sh->m;
    if (sh->host_opt) {
        if (gate) return zt_fail(st, ZT_EINTERNAL, "offloaded optimizer state: no device gate");
        return zt_shard_update(sh, o, lr, grad_scale, st);
    }
    int ns = 0;
    ZT_TRY(build_segs(sh, (float)o->wd, &ns, st));
    zt_adamw_begin(o);
    /* the arrays: m and v compact; p the master weights (mixed) or the
     * stage 3 shard (compact) or the full block (logical); gradients the
     * shard (stages 2-3, compact) or the full block; the 16-bit storage the
     * stage 3 shard or the full block */
    unsigned logical = 0;
    float *p;
    if (sh->master) p = sh->master;
    else if (sh->stage == 3) p = sh->pshard;
    else {
        p = m->params;
        logical |= ZT_ADAMW_P_LOGICAL;
    }
    const float *g = sh->stage >= 2 ? sh->gshard : m->grads;
    if (sh->stage < 2) logical |= ZT_ADAMW_G_LOGICAL;
    uint16_t *h = NULL;
    int hprec = ZT_ADAMW_H_NONE;
    if (mixed(sh)) {
        h = sh->stage == 3 ? sh->pshard16 : sh->p16;
        if (sh->stage < 3) logical |= ZT_ADAMW_H_LOGICAL;
        hprec = sh->prec == ZT_PREC_BF16 ? ZT_ADAMW_H_BF16 : ZT_ADAMW_H_F16;
    }
    const zt_adamw_hyper hy = {(float)lr, (float)o->b1, (float)o->b2, (float)o->eps, o->bc1, o->bc2,
                               (float)grad_scale, gate, max_norm};
    sh->be->adamw_multi(p, g, o->m, o->v, h, hprec, logical, sh->seg, ns, &hy);
    if (mixed(sh)) return gather_params(sh, st);
    if (sh->stage >= 1 && sh->stage <= 2) {
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            if (us->g == 1) continue;
            zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, m->units[u].name);
            ZT_TRY(coll_allgather(us->dgrp, m->params + us->coff, us->counts, us->displs, ZT_F32,
                                  st));
        }
    }
    return ZT_OK;
}

int zt_shard_update(zt_shard *sh, zt_adamw *o, double lr, double grad_scale, zt_status *st) {
    zt_model *m = sh->m;
    zt_adamw_begin(o);
    if (sh->stage == 0 && !sh->master && !sh->win) {
        zt_adamw_range(o, m, sh->be, 0, m->num_params, m->params, m->grads, o->m, o->v, lr,
                       grad_scale);
        return ZT_OK;
    }
    if (sh->host_opt) {
        ZT_TRY(update_offloaded(sh, o, lr, grad_scale, st));
        return gather_params(sh, st);
    }
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        if (!us->len) continue;
        zt_adamw_range(o, m, sh->be, us->off + us->lo, us->off + us->lo + us->len,
                       zt_shard_param_slice(sh, u), grad_slice(sh, u), o->m + us->soff,
                       o->v + us->soff, lr, grad_scale);
    }
    if (sh->master) return zt_shard_refresh_params(sh, st);
    if (sh->stage <= 2) {
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            if (us->g == 1) continue;
            zt_group_where(us->dgrp, "step %ld, unit %s", sh->step + 1, m->units[u].name);
            ZT_TRY(coll_allgather(us->dgrp, m->params + us->coff, us->counts, us->displs, ZT_F32,
                                  st));
        }
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ export */

/* Expert windows: every window of each expert unit of full (the logical
 * block, this rank's windows in place) all-gathered over the expert group. */
static int gather_windows(zt_shard *sh, float *full, zt_status *st) {
    const int N = sh->epn;
    if (!sh->win) return ZT_OK;
    int *counts = malloc((size_t)N * sizeof(int)), *displs = malloc((size_t)N * sizeof(int));
    int rc = counts && displs ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory (expert windows)");
    for (int u = 0; rc == ZT_OK && u < sh->nu; ++u) {
        const zt_unit_shard *us = &sh->u[u];
        if (!us->win) continue;
        for (int i = 0; i < N; ++i) {
            counts[i] = (int)us->n;
            displs[i] = (int)((size_t)i * us->n);
        }
        zt_group_where(sh->dep, "gathering the experts of unit %s", unit_name(sh, u));
        rc = sh->dep->ops->allgather_inplace(sh->dep, full + (us->off - us->w0), counts, displs,
                                             ZT_F32, st);
    }
    free(counts);
    free(displs);
    return rc;
}

/* A frozen mixed base: the 16-bit storage widened (gathered at stage 3). */
static int frozen_full_params(zt_shard *sh, float **out, zt_status *st) {
    float *full = zt_mem_alloc(sh->m->num_params * sizeof(float), ZT_MEM_WORKSPACE, st);
    if (!full) return zt_fail_prefix(st, "gathering full parameters");
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        if (sh->stage < 3) {
            zt_prec_widen(sh->be, sh->prec, full + us->off, sh->p16 + us->coff, us->n);
            continue;
        }
        if (sh->host_params) {   /* widened on the host, then moved */
            float *h = zt_mem_alloc((us->len ? us->len : 1) * sizeof(float),
                                    ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
            if (!h) { zt_mem_free(full); return st->code; }
            zt_prec_widen(zt_backend_cpu(), sh->prec, h, store_slice(sh, u), us->len);
            sh->be->to_device(full + us->off + us->lo, h, us->len * sizeof(float));
            zt_mem_free(h);
        } else {
            zt_prec_widen(sh->be, sh->prec, full + us->off + us->lo, store_slice(sh, u), us->len);
        }
        if (us->g > 1) {
            int rc = us->dgrp->ops->allgather_inplace(us->dgrp, full + us->off, us->counts,
                                                      us->displs, ZT_F32, st);
            if (rc != ZT_OK) { zt_mem_free(full); return rc; }
        }
    }
    int rc = gather_windows(sh, full, st);
    if (rc != ZT_OK) { zt_mem_free(full); return rc; }
    *out = full;
    return ZT_OK;
}

/* A frozen NF4 base: every unit's compute copy (collective at stage 3). */
static int nf4_full_params(zt_shard *sh, float **out, zt_status *st) {
    float *full = zt_mem_alloc((sh->m->num_params ? sh->m->num_params : 1) * sizeof(float),
                               ZT_MEM_WORKSPACE, st);
    if (!full) return zt_fail_prefix(st, "gathering full parameters");
    for (int u = 0; u < sh->nu; ++u) {
        int rc = zt_nf4s_view(sh, u, st);
        if (rc != ZT_OK) { zt_mem_free(full); return rc; }
        /* a unit whose fp32 copy leaves its GEMM-only tensors out (the view
         * has fewer elements): widened whole from its 16-bit rest, kept */
        if (sh->gathered[u])
            zt_prec_widen(sh->be, sh->prec, full + sh->u[u].off, sh->gathered[u], sh->u[u].n);
        else
            sh->be->copy(full + sh->u[u].off, sh->view[u], sh->u[u].n * sizeof(float));
        rc = release(sh, u, st);
        if (rc != ZT_OK) { zt_mem_free(full); return rc; }
    }
    *out = full;
    return ZT_OK;
}

int zt_shard_full_params(zt_shard *sh, float **out, int *owned, zt_status *st) {
    if (zt_shard_init_pending(sh) != ZT_OK)
        return zt_fail(st, ZT_ENOMEM, "out of memory initializing the parameters");
    /* the caller reads them: the last step's collectives, waited for on the
     * stream only (NCCL: the stage 1-2 all-gathers after the update), are
     * confirmed first, bounded (nothing left: no wait) */
    ZT_TRY(zt_mesh_fence(sh->mesh, st));
    if (sh->q) {
        *owned = 1;
        return nf4_full_params(sh, out, st);
    }
    if (sh->frozen && mixed(sh)) {
        *owned = 1;
        return frozen_full_params(sh, out, st);
    }
    if (!sh->win && (sh->stage == 0 || (sh->stage < 3 && !mixed(sh)))) {
        /* stage 0 mixed: the master weights are the full block (on the
         * device: offloading needs stage >= 1) */
        *out = mixed(sh) ? sh->master : sh->m->params;
        *owned = 0;
        return ZT_OK;
    }
    float *full = zt_mem_alloc(sh->m->num_params * sizeof(float), ZT_MEM_WORKSPACE, st);
    if (!full) return zt_fail_prefix(st, "gathering full parameters");
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        zt_xcopy(sh->be, full + us->off + us->lo, 1, zt_shard_param_slice(sh, u),
                 zt_shard_state_on_device(sh), us->len * sizeof(float));
        if (us->g > 1) {
            int rc = us->dgrp->ops->allgather_inplace(us->dgrp, full + us->off, us->counts,
                                                      us->displs, ZT_F32, st);
            if (rc != ZT_OK) { zt_mem_free(full); return rc; }
        }
    }
    int rc = gather_windows(sh, full, st);   /* (expert parallelism: every expert) */
    if (rc != ZT_OK) { zt_mem_free(full); return rc; }
    *out = full;
    *owned = 1;
    return ZT_OK;
}

int zt_shard_set_unit_params(zt_shard *sh, int u, const float *vals, zt_status *st) {
    zt_unit_shard *us = &sh->u[u];
    zt_shard_params_written(sh, u);
    vals += us->w0;   /* (an expert window: its part of the unit) */
    if (sh->q) {   /* NF4 base: quantized on the host */
        float *h = sh->dev ? malloc((us->n ? us->n : 1) * sizeof(float)) : NULL;
        if (sh->dev && !h) return zt_fail(st, ZT_ENOMEM, "out of memory (NF4 base)");
        if (h) sh->be->to_host(h, vals, us->n * sizeof(float));
        int rc = zt_nf4s_set_unit_host(sh, u, h ? h : vals, st);
        free(h);
        return rc;
    }
    if (sh->stage < 3) {
        if (mixed(sh)) zt_prec_narrow(sh->be, sh->prec, sh->p16 + us->coff, vals, us->n);
        else sh->be->copy(sh->m->params + us->coff, vals, us->n * sizeof(float));
    } else if (sh->host_params) {   /* the shard is host memory (offload_param) */
        if (!mixed(sh)) {
            sh->be->to_host(sh->pshard + us->soff, vals + us->lo, us->len * sizeof(float));
            return ZT_OK;
        }
        float *h = zt_mem_alloc((us->len ? us->len : 1) * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST,
                                NULL);
        if (!h) return zt_fail(st, ZT_ENOMEM, "out of memory (frozen base)");
        sh->be->to_host(h, vals + us->lo, us->len * sizeof(float));
        zt_prec_narrow(zt_backend_cpu(), sh->prec, store_slice(sh, u), h, us->len);
        zt_mem_free(h);
    } else if (mixed(sh)) {
        zt_prec_narrow(sh->be, sh->prec, store_slice(sh, u), vals + us->lo, us->len);
    } else {
        sh->be->copy(sh->pshard + us->soff, vals + us->lo, us->len * sizeof(float));
    }
    return ZT_OK;
}

void zt_shard_set_full_params(zt_shard *sh, const float *full) {
    zt_shard_params_written(sh, -1);
    if (sh->q) {
        for (int u = 0; u < sh->nu; ++u) zt_shard_set_unit_params(sh, u, full + (sh->u[u].off - sh->u[u].w0), NULL);
        return;
    }
    if (sh->win && sh->stage < 3) {   /* expert windows: the full blocks unit by unit */
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            if (sh->master)
                zt_xcopy(sh->be, sh->master + us->soff, !sh->host_opt, full + us->off + us->lo, 1,
                         us->len * sizeof(float));
            if (mixed(sh)) zt_prec_narrow(sh->be, sh->prec, sh->p16 + us->coff, full + us->off, us->n);
            else sh->be->copy(sh->m->params + us->coff, full + us->off, us->n * sizeof(float));
        }
        return;
    }
    if (sh->frozen && mixed(sh)) {
        if (sh->stage < 3) zt_prec_narrow(sh->be, sh->prec, sh->p16, full, sh->m->num_params);
        else
            for (int u = 0; u < sh->nu; ++u)
                zt_prec_narrow(sh->be, sh->prec, store_slice(sh, u), full + sh->u[u].off + sh->u[u].lo,
                               sh->u[u].len);
        return;
    }
    if (sh->master) {
        const int mdev = !sh->host_opt;
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            zt_xcopy(sh->be, sh->master + us->soff, mdev, full + us->off + us->lo, 1,
                     us->len * sizeof(float));
        }
        if (mixed(sh) && sh->stage < 3) zt_prec_narrow(sh->be, sh->prec, sh->p16, full, sh->m->num_params);
        else if (!mixed(sh) && sh->stage < 3) {
            if (sh->m->params != full) sh->be->copy(sh->m->params, full, sh->m->num_params * sizeof(float));
        }
        else
            for (int u = 0; u < sh->nu; ++u) push_slice(sh, u);
        return;
    }
    if (sh->stage < 3) {
        if (sh->m->params != full) sh->be->copy(sh->m->params, full, sh->m->num_params * sizeof(float));
        return;
    }
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        zt_xcopy(sh->be, sh->pshard + us->soff, !sh->host_params, full + us->off + us->lo, 1,
                 us->len * sizeof(float));
    }
}
