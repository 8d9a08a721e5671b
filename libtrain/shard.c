/* shard.c -- the ZeRO sharding engine (see shard.h). */
#include <stdlib.h>
#include <string.h>
#include "shard.h"

int zt_shard_model_flags(int stage) {
    switch (stage) {
    case 0: case 1: return ZT_MODEL_PARAMS | ZT_MODEL_GRADS;
    case 2: return ZT_MODEL_PARAMS;
    default: return 0;
    }
}

size_t zt_shard_optim_elems(const zt_shard *sh) {
    return sh->stage == 0 ? sh->m->num_params : sh->shard_total;
}

/* ------------------------------------------------------------ the unit API */

static const char *unit_name(zt_shard *sh, int u) { return sh->m->units[u].name; }

/* Start gathering unit u's parameters (stage 3) unless present or pending. */
static int gather_start(zt_shard *sh, int u, zt_status *st) {
    if (sh->gathered[u]) return ZT_OK;
    zt_unit_shard *us = &sh->u[u];
    float *buf = zt_mem_alloc(us->n * sizeof(float), ZT_MEM_GATHERED, st);
    if (!buf) return zt_fail_prefix(st, "gathering unit %s", unit_name(sh, u));
    memcpy(buf + us->lo, sh->pshard + us->soff, us->len * sizeof(float));
    sh->gathered[u] = buf;
    zt_group_where(sh->shard, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    return sh->shard->ops->iallgather_inplace(sh->shard, buf, us->counts, us->displs, ZT_F32,
                                              &sh->req[u], st);
}

static int gather_finish(zt_shard *sh, int u, zt_status *st) {
    ZT_TRY(gather_start(sh, u, st));
    zt_group_where(sh->shard, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    return sh->shard->ops->wait(sh->shard, &sh->req[u], st);
}

static int release(zt_shard *sh, int u, zt_status *st) {
    if (!sh->gathered[u]) return ZT_OK;
    if (sh->req[u].active) ZT_TRY(sh->shard->ops->wait(sh->shard, &sh->req[u], st));
    zt_mem_free(sh->gathered[u]);
    sh->gathered[u] = NULL;
    return ZT_OK;
}

static int release_all(zt_shard *sh, zt_status *st) {
    int rc = ZT_OK;
    for (int u = 0; sh->stage == 3 && u < sh->nu; ++u) {
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

float *zt_unit_params(zt_units *U, int u, zt_status *st) {
    if (check_unit(U, u, "zt_unit_params", st) != ZT_OK) return NULL;
    zt_shard *sh = U;
    if (sh->stage < 3) return sh->m->params + sh->u[u].off;
    if (gather_finish(sh, u, st) != ZT_OK) return NULL;
    if (!sh->seen[u]) {
        /* first use in this pass: prefetch the next unit in pass order */
        sh->seen[u] = 1;
        int nx = sh->pass == ZT_PASS_FWD ? u + 1 : u - 1;
        if (nx >= 0 && nx < sh->nu && !sh->seen[nx] && gather_start(sh, nx, st) != ZT_OK)
            return NULL;
    }
    return sh->gathered[u];
}

int zt_unit_release(zt_units *U, int u, zt_status *st) {
    ZT_TRY(check_unit(U, u, "zt_unit_release", st));
    return U->stage == 3 ? release(U, u, st) : ZT_OK;
}

float *zt_unit_grads(zt_units *U, int u, zt_status *st) {
    if (check_unit(U, u, "zt_unit_grads", st) != ZT_OK) return NULL;
    zt_shard *sh = U;
    if (sh->pass != ZT_PASS_BWD) {
        zt_fail(st, ZT_EINVAL, "zt_unit_grads(unit %s): gradients exist only in backward",
                unit_name(sh, u));
        return NULL;
    }
    sh->gopen[u] = 1;
    if (sh->stage < 2) return sh->m->grads + sh->u[u].off;
    if (!sh->bucket[u]) {
        sh->bucket[u] = zt_mem_alloc(sh->u[u].n * sizeof(float), ZT_MEM_COMM, st);
        if (!sh->bucket[u]) {
            zt_fail_prefix(st, "gradient bucket for unit %s", unit_name(sh, u));
            return NULL;
        }
    }
    return sh->bucket[u];
}

int zt_unit_grads_done(zt_units *U, int u, zt_status *st) {
    ZT_TRY(check_unit(U, u, "zt_unit_grads_done", st));
    zt_shard *sh = U;
    if (!sh->gopen[u])
        return zt_fail(st, ZT_EINVAL, "zt_unit_grads_done(unit %s) without zt_unit_grads",
                       unit_name(sh, u));
    sh->gopen[u] = 0;
    if (sh->stage < 2) return ZT_OK;
    zt_unit_shard *us = &sh->u[u];
    zt_group_where(sh->shard, "step %ld, unit %s", sh->step + 1, unit_name(sh, u));
    ZT_TRY(sh->shard->ops->reduce_scatter_sum(sh->shard, sh->bucket[u], sh->rs_buf, us->counts,
                                              ZT_F32, st));
    float *dst = sh->gshard + us->soff;
    for (size_t i = 0; i < us->len; ++i) dst[i] += sh->rs_buf[i];
    zt_mem_free(sh->bucket[u]);
    sh->bucket[u] = NULL;
    return ZT_OK;
}

int zt_units_count(const zt_units *U) { return U ? U->nu : 0; }
size_t zt_unit_numel(const zt_units *U, int u) {
    return U && u >= 0 && u < U->nu ? U->u[u].n : 0;
}

static void begin_pass(zt_shard *sh, int pass) {
    sh->pass = pass;
    memset(sh->seen, 0, (size_t)sh->nu);
    memset(sh->gopen, 0, (size_t)sh->nu);
}

int zt_shard_forward(zt_shard *sh, void *acts, const int *inputs, const int *targets, int B,
                     int T, int training, double *loss_sum, zt_status *st) {
    zt_model *m = sh->m;
    begin_pass(sh, ZT_PASS_FWD);
    int rc = m->ops->forward(m->self, sh, acts, inputs, targets, B, T, loss_sum, st);
    if (!training || rc != ZT_OK) {
        zt_status tmp;
        int r2 = release_all(sh, rc == ZT_OK ? st : &tmp);
        if (rc == ZT_OK) rc = r2;
    }
    sh->pass = ZT_PASS_NONE;
    return rc;
}

int zt_shard_backward(zt_shard *sh, void *acts, float dloss, zt_status *st) {
    zt_model *m = sh->m;
    begin_pass(sh, ZT_PASS_BWD);
    int rc = m->ops->backward(m->self, sh, acts, dloss, st);
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

/* ------------------------------------------------------------ lifecycle */

int zt_shard_create(zt_model *m, int stage, int G, zt_group *world, zt_shard **out, zt_status *st) {
    *out = NULL;
    if (!world && stage != 0)
        return zt_fail(st, ZT_EINVAL, "ZeRO stage %d needs a communication group", stage);
    int W = world ? world->size : 1;
    if (stage == 0) G = W;
    if (G < 1 || G > W || W % G)
        return zt_fail(st, ZT_EINVAL, "zero_optimization.shard_group_size=%d must divide the world size %d", G, W);
    zt_shard *sh = calloc(1, sizeof *sh);
    if (!sh) return zt_fail(st, ZT_ENOMEM, "out of memory (shard plan)");
    sh->stage = stage;
    sh->m = m;
    sh->be = m->be;
    sh->world = world;
    sh->G = G;
    sh->R = W / G;
    sh->r = world ? world->rank % G : 0;
    sh->rr = world ? world->rank / G : 0;
    sh->nu = m->n_units;
    int rc = ZT_OK;
    if (G == W) sh->shard = world;
    else if ((rc = zt_group_split(world, sh->rr, sh->r, "shard", &sh->shard, st)) != ZT_OK) goto fail;
    if (sh->R > 1 && stage > 0 &&
        (rc = zt_group_split(world, sh->r, sh->rr, "replica", &sh->replica, st)) != ZT_OK) goto fail;
    sh->u = calloc((size_t)sh->nu, sizeof *sh->u);
    sh->gathered = calloc((size_t)sh->nu, sizeof *sh->gathered);
    sh->req = calloc((size_t)sh->nu, sizeof *sh->req);
    sh->bucket = calloc((size_t)sh->nu, sizeof *sh->bucket);
    sh->seen = calloc((size_t)sh->nu, 1);
    sh->gopen = calloc((size_t)sh->nu, 1);
    if (!sh->u || !sh->gathered || !sh->req || !sh->bucket || !sh->seen || !sh->gopen) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto fail; }
    int g = stage == 0 ? 1 : G, r = stage == 0 ? 0 : sh->r;
    size_t soff = 0, max_len = 1;
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        us->n = m->units[u].numel;
        us->off = m->units[u].offset;
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
    if (stage == 3 && !(sh->pshard = zt_mem_alloc((soff ? soff : 1) * sizeof(float), ZT_MEM_PARAMS, st))) { rc = st->code; goto fail; }
    if (stage >= 2 && !(sh->gshard = zt_mem_alloc((soff ? soff : 1) * sizeof(float), ZT_MEM_GRADS, st))) { rc = st->code; goto fail; }
    if (stage >= 1 && !(sh->rs_buf = zt_mem_alloc(max_len * sizeof(float), ZT_MEM_COMM, st))) { rc = st->code; goto fail; }
    *out = sh;
    return ZT_OK;
fail:
    zt_shard_free(sh);
    return rc;
}

void zt_shard_free(zt_shard *sh) {
    if (!sh) return;
    for (int u = 0; sh->u && u < sh->nu; ++u) {
        free(sh->u[u].counts);
        free(sh->u[u].displs);
        if (sh->gathered && sh->gathered[u]) {
            zt_status st;
            if (sh->req[u].active) sh->shard->ops->wait(sh->shard, &sh->req[u], &st);
            zt_mem_free(sh->gathered[u]);
        }
        if (sh->bucket && sh->bucket[u]) zt_mem_free(sh->bucket[u]);
    }
    zt_mem_free(sh->pshard);
    zt_mem_free(sh->gshard);
    zt_mem_free(sh->rs_buf);
    if (sh->shard && sh->shard != sh->world) zt_group_free(sh->shard);
    zt_group_free(sh->replica);
    free(sh->u);
    free(sh->gathered);
    free(sh->req);
    free(sh->bucket);
    free(sh->seen);
    free(sh->gopen);
    free(sh);
}

void zt_shard_init_params(zt_shard *sh, uint64_t seed) {
    if (sh->stage < 3) {
        zt_model_init_range(sh->m, seed, 0, sh->m->num_params, sh->m->params);
        return;
    }
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        zt_model_init_range(sh->m, seed, us->off + us->lo, us->off + us->lo + us->len, sh->pshard + us->soff);
    }
}

void zt_shard_zero_grads(zt_shard *sh) {
    if (sh->m->grads) sh->be->zero(sh->m->grads, sh->m->num_params * sizeof(float));
    if (sh->gshard) sh->be->zero(sh->gshard, sh->shard_total * sizeof(float));
}

/* ------------------------------------------------------------ the step */

int zt_shard_reduce_grads(zt_shard *sh, zt_status *st) {
    zt_model *m = sh->m;
    if (sh->stage == 0) {
        if (!sh->world || sh->world->size == 1) return ZT_OK;
        zt_group_where(sh->world, "step %ld, gradient reduction", sh->step + 1);
        ZT_TRY(sh->world->ops->allreduce_sum(sh->world, m->grads, m->num_params, ZT_F32, st));
        return ZT_OK;
    }
    if (sh->stage == 1) {
        /* reduce-scatter each unit; the owned slice lands in place */
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            float *g = m->grads + us->off;
            zt_group_where(sh->shard, "step %ld, unit %s", sh->step + 1, m->units[u].name);
            if (sh->G > 1) {
                ZT_TRY(sh->shard->ops->reduce_scatter_sum(sh->shard, g, sh->rs_buf, us->counts, ZT_F32, st));
                memcpy(g + us->lo, sh->rs_buf, us->len * sizeof(float));
            }
            if (sh->replica) {
                zt_group_where(sh->replica, "step %ld, unit %s", sh->step + 1, m->units[u].name);
                ZT_TRY(sh->replica->ops->allreduce_sum(sh->replica, g + us->lo, us->len, ZT_F32, st));
            }
        }
        return ZT_OK;
    }
    /* stages 2-3: slices were reduce-scattered during backward */
    if (sh->replica) {
        zt_group_where(sh->replica, "step %ld, gradient shards", sh->step + 1);
        ZT_TRY(sh->replica->ops->allreduce_sum(sh->replica, sh->gshard, sh->shard_total, ZT_F32, st));
    }
    return ZT_OK;
}

/* Owned gradient slice of unit u. */
static float *grad_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    return sh->stage >= 2 ? sh->gshard + us->soff : sh->m->grads + us->off + us->lo;
}
static float *param_slice(zt_shard *sh, int u) {
    zt_unit_shard *us = &sh->u[u];
    return sh->stage == 3 ? sh->pshard + us->soff : sh->m->params + us->off + us->lo;
}

int zt_shard_grad_sumsq(zt_shard *sh, double *out, zt_status *st) {
    if (sh->stage == 0) {
        *out = sh->be->sumsq(sh->m->grads, sh->m->num_params);
        return ZT_OK;
    }
    double s = 0.0;
    for (int u = 0; u < sh->nu; ++u) s += sh->be->sumsq(grad_slice(sh, u), sh->u[u].len);
    if (sh->G > 1) {
        zt_group_where(sh->shard, "step %ld, gradient norm", sh->step + 1);
        ZT_TRY(sh->shard->ops->allreduce_sum(sh->shard, &s, 1, ZT_F64, st));
    }
    *out = s;
    return ZT_OK;
}

int zt_shard_update(zt_shard *sh, zt_adamw *o, double lr, double grad_scale, zt_status *st) {
    zt_model *m = sh->m;
    zt_adamw_begin(o);
    if (sh->stage == 0) {
        zt_adamw_range(o, m, 0, m->num_params, m->params, m->grads, o->m, o->v, lr, grad_scale);
        return ZT_OK;
    }
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        if (!us->len) continue;
        zt_adamw_range(o, m, us->off + us->lo, us->off + us->lo + us->len, param_slice(sh, u),
                       grad_slice(sh, u), o->m + us->soff, o->v + us->soff, lr, grad_scale);
    }
    if (sh->stage <= 2 && sh->G > 1) {
        for (int u = 0; u < sh->nu; ++u) {
            zt_unit_shard *us = &sh->u[u];
            zt_group_where(sh->shard, "step %ld, unit %s", sh->step + 1, m->units[u].name);
            ZT_TRY(sh->shard->ops->allgather_inplace(sh->shard, m->params + us->off, us->counts,
                                                     us->displs, ZT_F32, st));
        }
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ export */

int zt_shard_full_params(zt_shard *sh, float **out, int *owned, zt_status *st) {
    if (sh->stage < 3) {
        *out = sh->m->params;
        *owned = 0;
        return ZT_OK;
    }
    float *full = zt_mem_alloc(sh->m->num_params * sizeof(float), ZT_MEM_WORKSPACE, st);
    if (!full) return zt_fail_prefix(st, "gathering full parameters");
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        memcpy(full + us->off + us->lo, sh->pshard + us->soff, us->len * sizeof(float));
        if (sh->G > 1) {
            int rc = sh->shard->ops->allgather_inplace(sh->shard, full + us->off, us->counts, us->displs, ZT_F32, st);
            if (rc != ZT_OK) { zt_mem_free(full); return rc; }
        }
    }
    *out = full;
    *owned = 1;
    return ZT_OK;
}

void zt_shard_set_full_params(zt_shard *sh, const float *full) {
    if (sh->stage < 3) {
        if (sh->m->params != full) memcpy(sh->m->params, full, sh->m->num_params * sizeof(float));
        return;
    }
    for (int u = 0; u < sh->nu; ++u) {
        zt_unit_shard *us = &sh->u[u];
        memcpy(sh->pshard + us->soff, full + us->off + us->lo, us->len * sizeof(float));
    }
}
