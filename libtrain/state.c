/* state.c -- owned training state for checkpoints (see state.h). */
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "devmem.h"

void zt_ctx_set_step_hook(zt_ctx *ctx, zt_step_hook fn, void *user) {
    ctx->hook = fn;
    ctx->hook_user = user;
}

void zt_ctx_set_state_fence(zt_ctx *ctx, zt_state_fence fn, void *user) {
    ctx->fence = fn;
    ctx->fence_user = user;
}

int zt_ctx_owned_state(zt_ctx *ctx, zt_train_state *out, zt_status *st) {
    /* the caller may write through the ranges (a restore, a load) */
    zt_ctx_fence(ctx);
    /* the caller reads them: the last step's collectives, waited for on the
     * stream only (NCCL: the stage 1-2 all-gathers after the update), are
     * confirmed first, bounded (nothing left: no wait) */
    ZT_TRY(zt_mesh_fence(ctx->mesh, st));
    /* the trained parameters: with LoRA the adapters (the base is reloaded
     * from ztrain.init_from, not checkpointed) */
    const zt_model *m = zt_ctx_tmodel(ctx);
    zt_shard *sh = zt_ctx_tsh(ctx);
    if (!ctx->owned) {
        ctx->owned = calloc((size_t)m->n_units, sizeof *ctx->owned);
        if (!ctx->owned) return zt_fail(st, ZT_ENOMEM, "out of memory (owned state)");
    }
    int n = 0;
    for (int u = 0; u < m->n_units; ++u) {
        const zt_unit_shard *us = &sh->u[u];
        zt_owned_range *o = &ctx->owned[n];
        if (sh->stage == 0) {
            /* replicated: split the writing over the ranks holding the
             * same values anyway (the world; an expert window: its
             * expert-data-parallel group) */
            size_t S = zt_shard_len(us->n, us->hg);
            size_t a = (size_t)us->hr * S, b = a + S;
            if (b > us->n) b = us->n;
            if (a >= b) continue;
            o->lo = us->off + a;
            o->hi = us->off + b;
            /* stage 0 keeps the master weights (mixed) like the moments:
             * the unit at its place in the full blocks */
            o->param = (sh->master ? sh->master : m->params) + us->coff + a;
            o->m = ctx->opt.m + us->soff + a;
            o->v = ctx->opt.v + us->soff + a;
        } else {
            if (!us->len) continue;
            o->lo = us->off + us->lo;
            o->hi = o->lo + us->len;
            o->param = zt_shard_param_slice(sh, u);
            o->m = ctx->opt.m + us->soff;
            o->v = ctx->opt.v + us->soff;
        }
        n++;
    }
    ctx->n_owned = n;
    memset(out, 0, sizeof *out);
    out->model = m;
    out->n_ranges = n;
    out->ranges = ctx->owned;
    out->writer = sh->stage == 0 ? 1 : sh->rr == 0;
    out->step = ctx->step;
    out->adam_t = ctx->opt.t;
    out->world = ctx->nranks;
    out->stage = sh->stage;
    out->shard_group = sh->stage == 0 ? ctx->nranks : sh->G;
    out->has_scaler = ctx->scaler.enabled;
    out->scaler = ctx->scaler.s;
    out->be = ctx->be;
    out->on_device = zt_be_device(ctx->be) && zt_shard_state_on_device(sh);
    return ZT_OK;
}

int zt_ctx_scaler_restored(zt_ctx *ctx, const zt_scaler_state *s, zt_status *st) {
    if (!ctx->scaler.enabled) return ZT_OK;
    return zt_scaler_set_state(&ctx->scaler, s, st);
}

int zt_ctx_moments_fresh(const zt_ctx *ctx) { return ctx->opt.fresh; }

int zt_ctx_state_restored(zt_ctx *ctx, long step, long adam_t, zt_status *st) {
    zt_train_state s;
    ZT_TRY(zt_ctx_owned_state(ctx, &s, st));
    zt_model *m = zt_ctx_tmodel(ctx);
    zt_shard *sh = zt_ctx_tsh(ctx);
    if (sh->stage == 0 && ctx->nranks > 1) {
        /* every rank restored its owned slice of each unit (the split of
         * zt_ctx_owned_state over the unit's holders): all-gather the
         * slices in place */
        int W = ctx->nranks;
        int *counts = malloc(sizeof(int) * (size_t)W), *displs = malloc(sizeof(int) * (size_t)W);
        if (!counts || !displs) {
            free(counts);
            free(displs);
            return zt_fail(st, ZT_ENOMEM, "out of memory (restore)");
        }
        float *bufs[3] = {sh->master ? sh->master : m->params, ctx->opt.m, ctx->opt.v};
        int rc = ZT_OK;
        for (int u = 0; rc == ZT_OK && u < m->n_units; ++u) {
            const zt_unit_shard *us = &sh->u[u];
            const int H = us->hg;
            if (H == 1) continue;
            size_t n = us->n, S = zt_shard_len(n, H);
            for (int i = 0; i < H; ++i) {
                size_t a = (size_t)i * S < n ? (size_t)i * S : n, b = a + S < n ? a + S : n;
                displs[i] = (int)a;
                counts[i] = (int)(b - a);
            }
            /* stage 0: the three buffers are in the backend's memory (the
             * unit at coff = soff in each) */
            zt_group *g = us->hdgrp;
            zt_group_where(g, "restoring checkpoint, unit %s", m->units[u].name);
            for (int k = 0; rc == ZT_OK && k < 3; ++k)
                rc = g->ops->allgather_inplace(g, bufs[k] + us->coff, counts, displs, ZT_F32, st);
        }
        free(counts);
        free(displs);
        ZT_TRY(rc);
    }
    if (sh->master) {
        /* mixed (or offloaded on a device): the parameters are the master
         * weights rounded (copied) */
        ZT_TRY(zt_shard_refresh_params(sh, st));
    } else if (sh->stage == 1 || sh->stage == 2) {
        /* parameters are replicated at stages 1-2: assemble them */
        for (int u = 0; u < sh->nu; ++u) {
            const zt_unit_shard *us = &sh->u[u];
            if (us->g == 1) continue;
            zt_group_where(us->dgrp, "restoring checkpoint, unit %s", m->units[u].name);
            ZT_TRY(us->dgrp->ops->allgather_inplace(us->dgrp, m->params + us->coff, us->counts,
                                                    us->displs, ZT_F32, st));
        }
    }
    ZT_TRY(zt_be_check(ctx->be, "restoring checkpoint", st));
    /* every parameter and moment this rank keeps was written by the load */
    zt_shard_params_written(sh, -1);
    ctx->opt.fresh = 0;
    ctx->step = step;
    ctx->opt.t = adam_t;
    return ZT_OK;
}
