/*
 * ckpt_agree.c -- the cross-rank agreement that ends every phase of a save
 * and a restore (docs/checkpoints.md "Failure model"): the lowest failing
 * rank's status to every rank (ck_agree), rank 0's status (ck_root_status),
 * rank 0's bytes (ck_bcast_buf, ck_bcast_str).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt_internal.h"

MPI_Comm ck_comm(zt_ctx *ctx) { return zt_ctx_world(ctx)->comm; }

/* The agreements go through the world group's collectives (comm.h), every
 * wait bounded by its timeout (ztrain.comm_timeout_s): a rank that died,
 * stopped or hangs in another collective becomes ZT_ECOMM naming the
 * operation and the phase (zt_group_where) instead of a hang. */
static int ck_bcast(zt_ctx *ctx, void *buf, size_t n, zt_dtype t, int root, zt_status *st) {
    zt_group *g = zt_ctx_world(ctx);
    return g->ops->bcast(g, buf, n, t, root, st);
}

int ck_agree(zt_ctx *ctx, int rc, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return rc;
    zt_group *g = zt_ctx_world(ctx);
    const int nr = zt_ctx_nranks(ctx), me = zt_ctx_rank(ctx);
    /* the lowest failed rank as a maximum: nranks - rank where it failed, 0 where not */
    int32_t v = rc != ZT_OK ? nr - me : 0;
    ZT_TRY(g->ops->allreduce_max(g, &v, 1, ZT_I32, st));
    if (v == 0) return ZT_OK;
    const int low = nr - v;
    struct { int code; char msg[sizeof st->msg]; } b;
    memset(&b, 0, sizeof b);
    if (me == low) {
        b.code = st ? st->code : rc;
        if (b.code == ZT_OK) b.code = rc;
        if (st) snprintf(b.msg, sizeof b.msg, "%s", st->msg);
    }
    ZT_TRY(ck_bcast(ctx, &b, sizeof b, ZT_U8, low, st));
    if (me != low) {
        if (low > 0) zt_fail(st, b.code, "rank %d: %s", low, b.msg);
        else zt_fail(st, b.code, "%s", b.msg);
    }
    return b.code;
}

int ck_bcast_buf(zt_ctx *ctx, void *buf, size_t n, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    return ck_bcast(ctx, buf, n, ZT_U8, 0, st);
}

int ck_root_status(zt_ctx *ctx, int rc, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return rc;
    int32_t code = zt_ctx_rank(ctx) == 0 ? rc : 0;
    ZT_TRY(ck_bcast(ctx, &code, 1, ZT_I32, 0, st));
    if (code == ZT_OK) return ZT_OK;
    char msg[sizeof st->msg];
    memset(msg, 0, sizeof msg);
    if (zt_ctx_rank(ctx) == 0 && st) snprintf(msg, sizeof msg, "%s", st->msg);
    ZT_TRY(ck_bcast(ctx, msg, sizeof msg, ZT_U8, 0, st));
    if (zt_ctx_rank(ctx) != 0) zt_fail(st, code, "%s", msg);
    return code;
}

int ck_bcast_str(zt_ctx *ctx, char **s, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    int64_t len = zt_ctx_rank(ctx) == 0 && *s ? (int64_t)strlen(*s) : 0;
    ZT_TRY(ck_bcast(ctx, &len, 1, ZT_I64, 0, st));
    if (zt_ctx_rank(ctx) != 0) {
        free(*s);
        *s = calloc(1, (size_t)len + 1);
        if (!*s) return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    if (len > 0) ZT_TRY(ck_bcast(ctx, *s, (size_t)len, ZT_U8, 0, st));
    return ZT_OK;
}
