/* model_skel.c -- the unit skeleton of the built-in models (model_skel.h). */
#include "model_skel.h"
#include <string.h>
#include "classifier.h"
#include "model_acts.h"
#include "precision.h"

int zt_skel_init(zt_skel *sk, const zt_skel_ops *ops, void *self, const zt_model_config *mc,
                 const zt_backend *be, int tied, zt_status *st) {
    sk->ops = ops;
    sk->self = self;
    sk->be = be;
    sk->L = mc->n_layer;
    sk->tied = tied != 0;
    sk->lora = 0;
    sk->headfuse = zt_w16_on(mc, ZT_W16_HEADFUSE);
    sk->fused = 0;
    sk->ckkeep = zt_ckptkeep_of();
    sk->kept = NULL;
    sk->redo = 0;
    if (mc->lora_r > 0) {
        ZT_TRY(zt_lora_plan(mc, &sk->lo, st));
        /* (as the models' keep_if: a backend without matmul_dinp_acc) */
        if (!be->matmul_dinp_acc) sk->lo.acc = 0;
        sk->lo.bt2d = zt_w16_on(mc, ZT_W16_LORABT);
        sk->lo.swap = zt_w16_on(mc, ZT_W16_LORASWAP) && be->matmul_fwd_acc;
        sk->lo.bswap = zt_w16_on(mc, ZT_W16_BWDSWAP) && be->matmul_bwd_acc;
        sk->lo.w16 = zt_w16_on(mc, ZT_W16_LORA16) && be->matmul_fwd_w16 && be->matmul_bwd_w16 &&
                     be->matmul_fwd_a16;
        sk->lora = 1;
    }
    return ZT_OK;
}

int zt_skel_seqpar(const zt_mesh *mesh, int n, const char *name, zt_seqpar *out, zt_status *st) {
    zt_seqpar sp;
    zt_seqpar_of(mesh, &sp);
    if (sp.n != n || sp.rank < 0 || sp.rank >= sp.n || (sp.n > 1 && !sp.g))
        return zt_fail(st, ZT_EINTERNAL, "%s: sequence parallel group of %d for a model laid "
                       "out for %d", name, sp.n, n);
    *out = sp;
    return ZT_OK;
}

/* ------------------------------------------------------------ units */

/* Bind unit u's parameters, or its gradient buffer (the engine's), into
 * the model's views. */
static int params(zt_skel *sk, zt_units *U, int u, zt_status *st) {
    float *b = zt_unit_params(U, u, st);
    if (!b) return st->code;
    /* with the bf16 storage the engine's fp32 copy holds the other tensors only */
    const uint16_t *b16 = zt_unit_params16(U, u);
    sk->ops->bind(sk->self, u, b, b16 ? ZT_BIND_PARAMS32 : ZT_BIND_PARAMS);
    if (sk->ops->bind16) sk->ops->bind16(sk->self, u, b16);
    return ZT_OK;
}
static int grads(zt_skel *sk, zt_units *U, int u, zt_status *st) {
    float *b = zt_unit_grads(U, u, st);
    if (!b) return st->code;
    sk->ops->bind(sk->self, u, b, 1);
    return ZT_OK;
}
/* LoRA: the base is frozen -- its gradient view points nowhere (the
 * model's frozen hook) and no zt_unit_grads_done */
static int grads_or_frozen(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, int u,
                           zt_status *st) {
    if (!sk->lora) return grads(sk, U, u, st);
    sk->ops->frozen(sk->self, sa->acts, u);
    return ZT_OK;
}
static int grads_done(const zt_skel *sk, zt_units *U, int u, zt_status *st) {
    return sk->lora ? ZT_OK : zt_unit_grads_done(U, u, st);
}

/* Block l's units: *first and the count (l = L: the head's unit). */
static int units_of(const zt_skel *sk, int l, int *first) {
    if (sk->ops->block_units) return sk->ops->block_units(sk->self, l, first);
    *first = 1 + l;
    return 1;
}
/* Every unit of block l: parameters (forward order), gradients, release and
 * grads_done (backward: last unit first) */
static int block_params(zt_skel *sk, zt_units *U, int l, int rev, zt_status *st) {
    int f, n = units_of(sk, l, &f);
    for (int i = 0; i < n; ++i) ZT_TRY(params(sk, U, rev ? f + n - 1 - i : f + i, st));
    return ZT_OK;
}
static int block_release(zt_skel *sk, zt_units *U, int l, int rev, zt_status *st) {
    int f, n = units_of(sk, l, &f);
    for (int i = 0; i < n; ++i) ZT_TRY(zt_unit_release(U, rev ? f + n - 1 - i : f + i, st));
    return ZT_OK;
}

/* Block l's adapters are unit l of the peer engine (lora.h,
 * zt_units_peer); no-ops without LoRA.  Acquiring them also draws the
 * block's dropout. */
static int lora_params(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, int l, zt_status *st) {
    if (!sk->lora) return ZT_OK;
    float *b = zt_unit_params(zt_units_peer(U), l, st);
    if (!b) return st->code;
    sk->ad = b;
    /* (their bf16 storage, where the engine has one: lora.h ad16) */
    sa->lora->ad16 = sk->lo.w16 ? zt_unit_params16(zt_units_peer(U), l) : NULL;
    zt_lora_drop_at(sa->lora, &sk->lo, U, l, sa->fT);
    return ZT_OK;
}
static int lora_grads(zt_skel *sk, zt_units *U, int l, zt_status *st) {
    if (!sk->lora) return ZT_OK;
    float *b = zt_unit_grads(zt_units_peer(U), l, st);
    if (!b) return st->code;
    sk->gad = b;
    return ZT_OK;
}
static int lora_release(const zt_skel *sk, zt_units *U, int l, zt_status *st) {
    return sk->lora ? zt_unit_release(zt_units_peer(U), l, st) : ZT_OK;
}
static int lora_grads_done(const zt_skel *sk, zt_units *U, int l, zt_status *st) {
    return sk->lora ? zt_unit_grads_done(zt_units_peer(U), l, st) : ZT_OK;
}

/* Block l's forward with its units and adapters acquired before and
 * released after. */
static int block_fwd_unit(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, int l,
                          zt_status *st) {
    ZT_TRY(block_params(sk, U, l, 0, st));
    ZT_TRY(lora_params(sk, U, sa, l, st));
    ZT_TRY(sk->ops->block_fwd(sk->self, sa->acts, l, st));
    ZT_TRY(lora_release(sk, U, l, st));
    return block_release(sk, U, l, 0, st);
}

/* ------------------------------------------------------------ forward */

int zt_skel_forward(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, int has_targets,
                    double *loss_sum, zt_status *st) {
    const zt_skel_ops *o = sk->ops;
    void *self = sk->self, *a = sa->acts;
    const int L = sk->L;
    int H;   /* the head's unit */
    units_of(sk, L, &H);
    /* the fused head (classifier.h): a training step's forward told its
     * backward's dloss takes the head's gradient unit here and leaves the
     * backward to start at the final norm */
    float fdl = 0.0f;
    const int fuse = sk->headfuse && sa->training && has_targets && zt_units_fwd_dloss(U, &fdl);
    sk->fused = 0;
    /* (set again once every block has run; an eval forward writes its own
     * acts, not a training forward's) */
    if (sa->training) sk->kept = NULL;
    sk->redo = 0;   /* (a backward that failed midway left it set) */
    ZT_TRY(params(sk, U, 0, st));
    o->embed_fwd(self, a);
    if (!sk->tied) ZT_TRY(zt_unit_release(U, 0, st));   /* tied: kept for the LM head */
    for (int l = 0; l < L; ++l) ZT_TRY(block_fwd_unit(sk, U, sa, l, st));
    ZT_TRY(params(sk, U, H, st));
    o->norm_fwd(self, a);
    if (sk->tied) {
        /* the embedding unit is asked for again (at ZeRO-3 it was released
         * after the lookup unless the engine kept it); a training pass keeps
         * it for the head's backward */
        ZT_TRY(zt_unit_release(U, H, st));
        ZT_TRY(params(sk, U, 0, st));
        if (fuse) ZT_TRY(grads_or_frozen(sk, U, sa, 0, st));
        o->head_fwd(self, a, has_targets, loss_sum, zt_units_loss_acc(U), fuse ? &fdl : NULL);
        if (!sa->training) ZT_TRY(zt_unit_release(U, 0, st));
    } else {
        if (fuse) ZT_TRY(grads_or_frozen(sk, U, sa, H, st));
        o->head_fwd(self, a, has_targets, loss_sum, zt_units_loss_acc(U), fuse ? &fdl : NULL);
        ZT_TRY(zt_unit_release(U, H, st));
    }
    if (fuse) {
        sk->fused = 1;
        sk->fused_dloss = fdl;
    }
    /* the last checkpoint group's slots and scratch residuals hold this
     * forward's values (the head and the final norm write neither) */
    if (sa->training && sa->ckpt > 0 && sk->ckkeep) sk->kept = a;
    return ZT_OK;
}

/* ------------------------------------------------------------ backward */

int zt_skel_backward(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, float dloss,
                     zt_status *st) {
    const zt_skel_ops *o = sk->ops;
    void *self = sk->self, *a = sa->acts;
    const int L = sk->L, k = sa->ckpt;
    /* (keep: right after the training forward of these acts, the last
     * group's blocks run on what it left; a second backward recomputes) */
    const int keep = sk->kept == a;
    sk->kept = NULL;
    int H;   /* the head's unit */
    units_of(sk, L, &H);
    /* the LM head: its weight's unit (tied: the embedding's, released
     * before the final norm's is bound); fused in the forward (classifier.h):
     * its gradients are there, dx in dbuf, the gradient unit open */
    if (sk->fused) {
        sk->fused = 0;
        if (memcmp(&dloss, &sk->fused_dloss, sizeof dloss) != 0)
            return zt_fail(st, ZT_EINVAL, "backward with dloss %g after a forward whose fused LM "
                           "head used %g (classifier.h)", (double)dloss, (double)sk->fused_dloss);
        if (sk->tied) ZT_TRY(zt_unit_release(U, 0, st));
        ZT_TRY(params(sk, U, H, st));
        ZT_TRY(grads_or_frozen(sk, U, sa, H, st));
    } else if (sk->tied) {
        ZT_TRY(params(sk, U, 0, st));
        ZT_TRY(grads_or_frozen(sk, U, sa, 0, st));
        o->head_bwd(self, a, dloss);
        ZT_TRY(zt_unit_release(U, 0, st));
        ZT_TRY(params(sk, U, H, st));
        ZT_TRY(grads_or_frozen(sk, U, sa, H, st));
    } else {
        ZT_TRY(params(sk, U, H, st));
        ZT_TRY(grads_or_frozen(sk, U, sa, H, st));
        o->head_bwd(self, a, dloss);
    }
    o->norm_bwd(self, a);
    ZT_TRY(zt_unit_release(U, H, st));
    ZT_TRY(grads_done(sk, U, H, st));
    for (int l = L - 1; l >= 0; --l) {
        /* checkpointing with group size k: at the top block of a group,
         * recompute the blocks below it from the group's kept input; the
         * top block is recomputed inside its own window below (keep: not
         * the last group, its blocks as the forward left them) */
        const int top = zt_acts_ckpt_top(k, L, l) && zt_acts_ckpt_redo(k, L, l, keep);
        sk->redo = top;   /* (the recomputed forwards' flag: zt_skel.redo) */
        if (top)
            for (int i = zt_acts_ckpt_first(k, l); i < l; ++i)
                ZT_TRY(block_fwd_unit(sk, U, sa, i, st));
        int f, n = units_of(sk, l, &f);   /* (the block's units, last first) */
        ZT_TRY(block_params(sk, U, l, 1, st));
        for (int i = n - 1; i >= 0; --i) ZT_TRY(grads_or_frozen(sk, U, sa, f + i, st));
        ZT_TRY(lora_params(sk, U, sa, l, st));
        ZT_TRY(lora_grads(sk, U, l, st));
        if (top) ZT_TRY(o->block_fwd(self, a, l, st));
        sk->redo = 0;
        ZT_TRY(o->block_bwd(self, a, l, st));
        ZT_TRY(lora_release(sk, U, l, st));
        ZT_TRY(lora_grads_done(sk, U, l, st));
        ZT_TRY(block_release(sk, U, l, 1, st));
        for (int i = n - 1; i >= 0; --i) ZT_TRY(grads_done(sk, U, f + i, st));
    }
    if (sk->lora) return ZT_OK;   /* a frozen embedding: nothing more to compute */
    /* the embedding.  Its backward may read no parameters, but the unit is
     * acquired like every unit before its backward (ZeRO-3's second gather
     * of a unit), which keeps the engine's order uniform. */
    ZT_TRY(params(sk, U, 0, st));
    ZT_TRY(grads(sk, U, 0, st));
    o->embed_bwd(self, a);
    ZT_TRY(zt_unit_release(U, 0, st));
    return zt_unit_grads_done(U, 0, st);
}
