/* gpt.c -- the built-in GPT-2 on the public unit API: layout, activations,
 * forward, backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devmem.h"
#include "gpt.h"
#include "model_acts.h"
#include "model_skel.h"
#include <jansson.h>
#include "arch.h"
#include "seqpar.h"
#include "cuda/cuda_workspace.h"

/* The tensor table (arch.h), in layout order: the embedding unit, one
 * block (zt_gpt_layer's field order), the final norm. */
enum { E_WTE, E_WPE, T_LN1W, T_LN1B, T_QKVW, T_QKVB, T_PROJW, T_PROJB, T_LN2W, T_LN2B,
       T_FCW, T_FCB, T_FCPW, T_FCPB, E_LNFW, E_LNFB, GPT_NT };
#define HB(x) "transformer.h.%d." x
static const zt_arch_tensor gpt_tensors[GPT_NT] = {
    {"wte", "transformer.wte.weight", ZT_AT_EMBED, ZT_AT_NORMAL, 0},
    {"wpe", "transformer.wpe.weight", ZT_AT_EMBED, ZT_AT_NORMAL, 0},
    {"ln1.w", HB("ln_1.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"ln1.b", HB("ln_1.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"attn.qkv.w", HB("attn.c_attn.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 1},
    {"attn.qkv.b", HB("attn.c_attn.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"attn.proj.w", HB("attn.c_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL_RESID, 1},
    {"attn.proj.b", HB("attn.c_proj.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"ln2.w", HB("ln_2.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"ln2.b", HB("ln_2.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"mlp.fc.w", HB("mlp.c_fc.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 1},
    {"mlp.fc.b", HB("mlp.c_fc.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"mlp.proj.w", HB("mlp.c_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL_RESID, 1},
    {"mlp.proj.b", HB("mlp.c_proj.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"lnf.w", "transformer.ln_f.weight", ZT_AT_HEAD, ZT_AT_ONES, 0},
    {"lnf.b", "transformer.ln_f.bias", ZT_AT_HEAD, ZT_AT_ZEROS, 0},
};
#undef HB

static void gpt_tensor_shape(const zt_model_config *mc, int l, int k, int *rows, int *cols) {
    (void)l;
    const int C = mc->n_embd;
    int r = C, c = 1;   /* norms and the [C] biases */
    switch (k) {
    case E_WTE: r = mc->vocab; c = C; break;
    case E_WPE: r = mc->context; c = C; break;
    case T_QKVW: r = 3 * C; c = C; break;
    case T_QKVB: r = 3 * C; break;
    case T_PROJW: c = C; break;
    case T_FCW: r = 4 * C; c = C; break;
    case T_FCB: r = 4 * C; break;
    case T_FCPW: c = 4 * C; break;
    default: break;
    }
    *rows = r;
    *cols = c;
}

/* zt_arch.gemm_weight: the block's four matrices (block_fwd / block_bwd
 * read them through zt_mm_*) and wte (the encoder's zt_enc_fwd, the tied
 * head's classifier) */
static int gpt_gemm_weight(const zt_model_config *mc, int k) {
    (void)mc;
    return k == E_WTE || k == T_QKVW || k == T_PROJW || k == T_FCW || k == T_FCPW;
}

struct zt_gpt {
    zt_skel sk;                        /* the unit skeleton, LoRA's adapters (model_skel.h) */
    zt_model_config cfg;
    const zt_backend *be;
    size_t off[GPT_NT];                /* in its unit (block tensors: in every block unit) */
    size_t off32[GPT_NT];              /* the same in the fp32 copy without the GEMM weights */
    zt_gpt_params p, g;                /* views, bound unit by unit */
    int ckpt;                          /* activation checkpointing group size, 0 = none */
    int spn;                           /* sequence parallel group size (1: off) ... */
    zt_seqpar sp;                      /* ... and its group */
    zt_sp_slices qkv_sl, att_sl;       /* its exchanges: q|k|v rows, attention rows */
    const uint16_t **p16;              /* [L + 2]: each unit's bf16 bits (zt_unit_params16), or NULL */
};

/* set_mesh (arch.h): sequence parallelism's group (seqpar.h) */
static int gpt_set_mesh(void *self, const zt_mesh *mesh, zt_status *st) {
    zt_gpt *g = self;
    ZT_TRY(zt_skel_seqpar(mesh, g->spn, "gpt2", &g->sp, st));
    const size_t C = (size_t)g->cfg.n_embd, Cl = C / (size_t)g->sp.n;
    g->qkv_sl = (zt_sp_slices){3, 3 * C, {0, C, 2 * C}, {Cl, Cl, Cl}};
    g->att_sl = (zt_sp_slices){1, C, {0, 0, 0}, {Cl, 0, 0}};
    return ZT_OK;
}

/* LoRA's groups: the block's matmuls (lora.h) */
enum { LG_QKV, LG_PROJ, LG_FC, LG_FCPROJ };
/* (gpt16, ZT_W16_GPT16: with LoRA, a matmul without adapters takes the bf16
 * paths of no LoRA, and one whose adapters read the bf16 output gradient
 * (lora.h dy16, ZT_W16_LORABT) the bf16 gradient paths: the same values.
 * lora_off: group grp has no adapters (or there is no LoRA); lora_dy16:
 * its adapters need no fp32 output gradient) */
static int lora_off(const zt_gpt *g, int grp) {
    return !g->sk.lora || (zt_w16_on(&g->cfg, ZT_W16_GPT16) && !zt_skel_lora_on(&g->sk, grp));
}
static int lora_dy16(const zt_gpt *g, int grp) {
    return lora_off(g, grp) || (zt_w16_on(&g->cfg, ZT_W16_GPT16) && g->sk.lo.bt2d);
}

/* gbranch16 (config.h ZT_W16_GBRANCH16): a projection of group grp
 * (the attention's LG_PROJ, the MLP's LG_FCPROJ) without adapters writing
 * its [N, C] output, the residual branch, in bf16 (matmul_fwd_o16, the
 * bias in the epilogue) into the bytes of the fp32 scratch (d4b the cpu
 * backends' staging and cuda's fallback), and the residual add fused with
 * the next norm reading it widened (add_layernorm_fwd16b): the
 * attention's into ln_2, the MLP's, with the add folded (ZT_W16_ADDFOLD),
 * into the next block's ln_1 or the final norm.  The caller checks the
 * block's bf16 activations and the norms writing bf16 (ZT_W16_N16), so
 * the reading norm takes its bf16 path. */
static int gbr16_on(const zt_gpt *g, int grp) {
    return zt_w16_on(&g->cfg, ZT_W16_GBRANCH16) && zt_w16_on(&g->cfg, ZT_W16_N16) &&
           g->be->add_layernorm_fwd16b && g->be->matmul_fwd_o16 && lora_off(g, grp);
}

/* gptn16 (config.h ZT_W16_GPTN16) and lnsum (ZT_W16_LNSUM): full
 * fine-tuning with the bf16 gradients (the residual gradient's bf16 copy,
 * dres16) and a backend with layernorm_bwd16d (and matmul_bwd_o16 for
 * gptn16).  gptn16: fc's input gradient (its output gradient dpre16 in
 * bf16, ZT_W16_G16) and q|k|v's (dq16, cuDNN's path) written in bf16 by
 * the GEMM, fc's into d4b (free once matmul_dgelu_bwd_o16 has run), q|k|v's
 * into d4a (free once the attention backward has run), dbuf the GEMM's
 * fp32 scratch, and read by ln_2's / ln_1's backward.  lnsum: the attention
 * projection's bias gradient summed by ln_2's backward (dsum) over the
 * residual gradient it leaves, which is that projection's output gradient
 * (bitwise the projection's column sum).  No buffer added or dropped; the
 * kernel scratch of layernorm_bwd16d's sums is gpt_kernel_ws's. */
static int gptn16_on(const zt_model_config *mc, const zt_backend *be) {
    return mc->lora_r <= 0 && zt_w16_on(mc, ZT_W16_GPTN16) && zt_w16_on(mc, ZT_W16_D16) && be &&
           be->layernorm_bwd16d && be->matmul_bwd_o16;
}
/* (the config half of a bias summed by a norm's backward, bit
 * ZT_W16_LNSUM or ZT_W16_MLPSUM: full fine-tuning with the bf16 gradients;
 * gpt_kernel_ws plans layernorm_bwd16d's sum scratch from it alone) */
static int bsum_cfg(const zt_model_config *mc, uint64_t bit) {
    return mc->lora_r <= 0 && zt_w16_on(mc, bit) && zt_w16_on(mc, ZT_W16_D16);
}
static int lnsum_on(const zt_model_config *mc, const zt_backend *be) {
    return bsum_cfg(mc, ZT_W16_LNSUM) && be && be->layernorm_bwd16d;
}
/* mlpsum (ZT_W16_MLPSUM): the MLP projection's bias gradient of block l is
 * the column sum of the residual gradient the norm above it leaves (block
 * l + 1's ln_1, or the final norm), which runs before block l's gradient
 * unit is bound (stages 2-3: a bucket of its own): that norm's backward
 * sums it (layernorm_bwd16d's dsum, bitwise the projection's column sum)
 * into row l of the activations' mlpsum [L, C], zeroed by the final norm's
 * backward, and block l adds the row to the bias gradient.  The row of
 * block l where the step takes the path (the buffer, carved by bsum_cfg,
 * the bf16 gradients and the entry), else NULL */
static float *mlpsum_row(const zt_gpt *g, const zt_gpt_acts *a, int l) {
    if (!a->mlpsum || !a->dres16 || !g->be->layernorm_bwd16d || !bsum_cfg(&g->cfg, ZT_W16_MLPSUM))
        return NULL;
    return a->mlpsum + (size_t)l * g->cfg.n_embd;
}

/* gpt.h: the config's lora_off / lora_dy16 of the attention's groups (the
 * model's own gates are those; sk->lo.bt2d is ZT_W16_LORABT, model_skel.c) */
int zt_gpt_lora_att16(const zt_model_config *mc, int do16) {
    zt_lora lo;
    if (mc->lora_r <= 0) return 1;
    if (!zt_w16_on(mc, ZT_W16_GPT16) || zt_lora_plan(mc, &lo, NULL) != ZT_OK) return 0;
    if (do16) return lo.groups[LG_PROJ].n == 0;
    return lo.groups[LG_QKV].n == 0 || zt_w16_on(mc, ZT_W16_LORABT);
}

/* gpt.h: the config's gate of c_proj's bf16 dO (arch.h zt_do16_of): c_proj
 * without adapters on the path of no LoRA (zt_gpt_lora_att16), or (lo16,
 * ZT_W16_LO16) with adapters whose share of dO goes first in bf16 and the
 * frozen base GEMM adds into it (model_skel.h zt_skel_lora_lin_bwd16): no
 * dropout, the swapped order (model_skel.c lo.bswap: ZT_W16_BWDSWAP and
 * matmul_bwd_acc), matmul_bwd_acc16 and matmul_bwd_o16 -- every condition
 * under which block_bwd takes it, so the planner's cuDNN workspace is the
 * engine's; the LoRA scratch h is always carved (zt_carve_lora). */
int zt_gpt_lora_do16(const zt_model_config *mc, const zt_backend *be) {
    zt_lora lo;
    if (mc->lora_r <= 0 || zt_gpt_lora_att16(mc, 1)) return 1;
    if (!zt_w16_on(mc, ZT_W16_GPT16) || zt_lora_plan(mc, &lo, NULL) != ZT_OK) return 0;
    return zt_w16_on(mc, ZT_W16_LO16) && zt_w16_on(mc, ZT_W16_BWDSWAP) && mc->lora_dropout <= 0 &&
           be && be->matmul_bwd_acc && be->matmul_bwd_acc16 && be->matmul_bwd_o16;
}

void zt_gpt_set_checkpointing(zt_gpt *g, int k) { g->ckpt = k > 0 ? k : 0; }

/* ------------------------------------------------------------ layout */

static int gpt_describe(void *self, zt_layout *L, zt_status *st) {
    zt_gpt *g = self;
    zt_arch_offsets32(&zt_arch_gpt2, &g->cfg, g->off32);
    return zt_arch_describe(&zt_arch_gpt2, &g->cfg, L, g->off, st);
}

/* Point the tensors of unit u in a view (grads: the gradients') at a
 * unit-sized buffer (zt_skel_ops.bind). */
static void bind_unit(void *self, int u, float *base, int grads) {
    zt_gpt *g = self;
    zt_gpt_params *v = grads == ZT_BIND_GRADS ? &g->g : &g->p;
    const int c32 = grads == ZT_BIND_PARAMS32;
    const size_t *o = c32 ? g->off32 : g->off;
    int L = g->cfg.n_layer;
    if (u == 0) {
        v->wte = c32 ? NULL : base + o[E_WTE];
        v->wpe = base + o[E_WPE];
    } else if (u == L + 1) {
        v->lnfw = base + o[E_LNFW];
        v->lnfb = base + o[E_LNFB];
    } else {
        float **f = (float **)&v->h[u - 1];   /* zt_gpt_layer: the block's pointers in order */
        for (int k = T_LN1W; k <= T_FCPB; ++k)
            f[k - T_LN1W] = c32 && gpt_gemm_weight(&g->cfg, k) ? NULL : base + o[k];
    }
}

/* zt_skel_ops.bind16 */
static void bind16_unit(void *self, int u, const uint16_t *base16) {
    zt_gpt *g = self;
    g->p16[u] = base16;
}

static const zt_skel_ops gpt_skel;

int zt_gpt_new(const zt_model_config *mc, const zt_backend *be, zt_gpt **out, zt_status *st) {
    *out = NULL;
    if (mc->n_layer < 1 || mc->n_head < 1 || mc->n_embd < 1 || mc->context < 1 ||
        mc->vocab < 2 || mc->n_embd % mc->n_head)
        return zt_fail(st, ZT_EINVAL, "invalid model shape (n_layer %d, n_head %d, "
                       "n_embd %d, context %d, vocab %d)", mc->n_layer, mc->n_head,
                       mc->n_embd, mc->context, mc->vocab);
    zt_gpt *g = calloc(1, sizeof *g);
    if (!g) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    g->cfg = *mc;
    /* (a backend without the bf16-input or the bf16-logits entries) */
    if (!zt_acts16_ok(be) || !zt_l16_ok(be)) g->cfg.acts16 = 0;
    /* the bf16-output paths, decided once (model.h; precision.h zt_out16_of) */
    zt_w16_keep_if(&g->cfg, ZT_W16_O16, zt_o16_ok(be));
    zt_w16_keep_if(&g->cfg, ZT_W16_N16, zt_n16_ok(be));
    zt_w16_keep_if(&g->cfg, ZT_W16_R16, zt_r16_ok(be));
    zt_w16_keep_if(&g->cfg, ZT_W16_AO16, zt_ao16_ok(be));
    zt_w16_keep_if(&g->cfg, ZT_W16_D16, zt_d16_ok(be));
    zt_w16_keep_if(&g->cfg, ZT_W16_G16, zt_w16_on(&g->cfg, ZT_W16_D16) && zt_g16_ok(be));
    /* (each block's last residual add in the next norm: arch.h addfold) */
    zt_w16_keep_if(&g->cfg, ZT_W16_ADDFOLD, be->add_layernorm_fwd &&
                   (!zt_w16_on(&g->cfg, ZT_W16_N16) || be->add_layernorm_fwd16));
    /* (LoRA's products added by their GEMMs: the activations' d, lora.h) */
    zt_w16_keep_if(&g->cfg, ZT_W16_LORAACC, be->matmul_dinp_acc != NULL);
    g->be = be;
    g->spn = mc->seq_parallel > 1 ? mc->seq_parallel : 1;
    g->sp.n = 1;
    if (mc->n_head % g->spn) {
        free(g);
        return zt_fail(st, ZT_EINVAL, "gpt2: sequence parallel size %d must divide the %d heads",
                       mc->seq_parallel, mc->n_head);
    }
    int rc = zt_skel_init(&g->sk, &gpt_skel, g, mc, be, 1, st);
    if (rc != ZT_OK) {
        free(g);
        return rc;
    }
    g->p.h = calloc((size_t)mc->n_layer, sizeof(zt_gpt_layer));
    g->g.h = calloc((size_t)mc->n_layer, sizeof(zt_gpt_layer));
    g->p16 = calloc((size_t)mc->n_layer + 2, sizeof *g->p16);
    if (!g->p.h || !g->g.h || !g->p16) {
        zt_gpt_free(g);
        return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    }
    *out = g;
    return ZT_OK;
}

void zt_gpt_free(zt_gpt *g) {
    if (!g) return;
    free(g->p.h);
    free(g->g.h);
    free(g->p16);
    free(g);
}

static void gpt_destroy(void *self) { zt_gpt_free(self); }

/* ------------------------------------------------------------ activations */

/* Carve the activation block.  With base == NULL only sizes are computed.
 * Residual stream: zt_acts_carve_res; a training block keeps L layer
 * slots, or k with checkpointing group size k.  Returns the carve (bytes:
 * zt_carve_bytes). */
static zt_carve carve(const zt_model_config *mc, int B, int T, int training, int ckpt,
                      zt_gpt_acts *a, float *base) {
    size_t N = (size_t)B * T, C = (size_t)mc->n_embd;
    size_t NH = (size_t)mc->n_head, L = (size_t)mc->n_layer;
    size_t k = zt_acts_ckpt_group(ckpt, training, L);
    size_t slots = zt_acts_n_slots(training, k, L);
    const int spn = mc->seq_parallel > 1 ? mc->seq_parallel : 1;
    zt_carve cv = {base, 0, 0};
    /* (bf16 activations; their fp32 values staged in d4a, free in the forward) */
    const int a16 = training && zt_acts16_on(mc);
    /* (blocks-attn: each layer's attention output and lse, model_acts.h) */
    const int katt = zt_acts_katt_on(mc, training, k);
#define TAKE(ptr, n) do { float *p_ = zt_carve_take(&cv, (n), 0); if (base) (ptr) = p_; } while (0)
#define TAKES(ptr, n) do { float *p_ = zt_carve_take(&cv, (n), 1); if (base) (ptr) = p_; } while (0)
#define TAKE16(ptr, n) do { uint16_t *p_ = zt_carve_take16(&cv, (n)); if (base) (ptr) = p_; } while (0)
    /* (blocks-attn: first, at the block's aligned start; bf16 where the
     * slot's atty16 would be, a16 without sequence parallel; sequence
     * parallel: fp32, and the head-sharded atth too) */
    if (katt) zt_carve_katt(&cv, &a->katt, L, a16 && spn <= 1, N * C, (size_t)B * NH * T, spn);
    cv.off = zt_acts_carve_res(a->res, base, cv.off, training, L, k, N * C);
    for (size_t s = 0; s < slots; ++s) {
        struct zt_layer_acts *la = &a->layer[base ? s : 0];
        if (a16) TAKE16(la->ln116, N * C); else TAKE(la->ln1, N * C);
        TAKES(la->ln1_mean, N); TAKES(la->ln1_rstd, N);
        /* (sequence parallel: qkv head-sharded [B, N_sp T, 3C/N_sp], atth
         * [B, N_sp T, C/N_sp], lse [B, NH/N_sp, N_sp T]: the same counts) */
        /* (bf16 GEMM outputs: q|k|v, the attention output, fc's output,
         * without sequence parallel for the first two) */
        const int o16 = a16 && spn <= 1;
        if (o16) TAKE16(la->qkv16, N * 3 * C); else TAKE(la->qkv, N * 3 * C);
        if (!katt) {   /* (blocks-attn: carved per layer at the block's start) */
            if (o16) TAKE16(la->atty16, N * C); else TAKE(la->atty, N * C);
            TAKES(la->lse, (size_t)B * NH * T);
            if (spn > 1) TAKE(la->atth, N * C);
        }
        TAKE(la->res2, N * C);
        if (a16) TAKE16(la->ln216, N * C); else TAKE(la->ln2, N * C);
        TAKES(la->ln2_mean, N); TAKES(la->ln2_rstd, N);
        if (a16) TAKE16(la->fch16, N * 4 * C); else TAKE(la->fch, N * 4 * C);
        if (a16) TAKE16(la->fchg16, N * 4 * C); else TAKE(la->fch_gelu, N * 4 * C);
        zt_carve_lora_keep(&cv, la->lora_h, mc, N, training);
    }
    TAKE(a->scratch, N * C);
    if (spn > 1) {   /* the all-to-alls' buffers and the local q|k|v rows */
        TAKE(a->sp_send, N * 3 * C); TAKE(a->sp_recv, N * 3 * C); TAKE(a->sp_h, N * 3 * C);
    }
    /* (the LM head's input: in bf16 alone with the bf16 activations, the
     * final norm writing it, ZT_W16_X16; the residual gradient's bf16 copy
     * over it) */
    const int x16 = a16 && zt_w16_on(mc, ZT_W16_X16);
    size_t lnf_off, lnf_n;
    zt_carve_lnf(&cv, x16, N * C, &a->lnf, &a->lnf16, &lnf_off, &lnf_n);
    TAKES(a->lnf_mean, N); TAKES(a->lnf_rstd, N);
    zt_classifier_carve(&cv, &a->cls, mc, N, training, 0);
    if (base) a->cls.x16 = a->lnf16;
    /* int and float are both 4 bytes: the -1 targets share the block */
    float *nt = zt_carve_take(&cv, N, 1);
    if (base) a->no_targets = (int *)(void *)nt;
    if (training) {
        TAKE(a->dres, N * C); TAKE(a->dbuf, N * C); TAKE(a->dqkv, N * 3 * C);
        TAKE(a->d4a, N * 4 * C); TAKE(a->d4b, N * 4 * C);
        /* (over lnf / lnf16, which the LM head's backward was the last to read) */
        if (a16 && !zt_carve_over16(&cv, lnf_off, lnf_n, N * C, &a->dres16))
            TAKE16(a->dres16, N * C);
        if (a16 && bsum_cfg(mc, ZT_W16_MLPSUM)) TAKES(a->mlpsum, L * C);
    }
    zt_carve_lora(&cv, &a->lora, &a->dnorm, mc, N, training, 2 * C);
#undef TAKE
#undef TAKE16
#undef TAKES
    return cv;
}

/* Sizes only: a scratch struct with one slot to carve into. */
static size_t acts_bytes(const zt_model_config *mc, int B, int T, int training, int ckpt, int elem) {
    zt_gpt_acts a;
    struct zt_layer_acts one;
    memset(&a, 0, sizeof a);
    a.layer = &one;
    zt_carve cv = carve(mc, B, T, training, ckpt, &a, NULL);
    return zt_carve_bytes(&cv, elem);
}

size_t zt_gpt_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt) {
    return acts_bytes(mc, B, T, training, ckpt, (int)sizeof(float));
}

size_t zt_gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training) {
    return zt_gpt_acts_bytes_ckpt(mc, B, T, training, 0);
}

static void gpt_acts_free(void *self, void *acts) {
    (void)self;
    zt_gpt_acts *a = acts;
    ZT_ACTS_FREE(a);
}

static int gpt_acts_create(void *self, int B, int T, int training, int mem_tag, void **out,
                           zt_status *st) {
    const zt_gpt *g = self;
    *out = NULL;
    zt_gpt_acts *a;
    ZT_ACTS_NEW(a, B, T, training, g->ckpt, g->cfg.n_layer, g->cfg.context, st);
    if (!a->res || !a->layer) { gpt_acts_free(self, a); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    ZT_ACTS_ALLOC(a, zt_gpt_acts_bytes_ckpt(&g->cfg, B, T, training, g->ckpt), mem_tag,
                  gpt_acts_free, self, st);
    carve(&g->cfg, B, T, training, g->ckpt, a, a->block);
    /* the -1 targets of a forward without targets (device memory: staged) */
    zt_acts_fill_no_targets(g->be, a->no_targets, (size_t)B * T);
    *out = a;
    return ZT_OK;
}

/* ------------------------------------------------------------ forward */

/* The frozen base's gradient view of unit u (LoRA; zt_skel_ops.frozen):
 * matmul weight and bias gradients are skipped, the LayerNorms' go to a
 * discarded [2C]. */
static void frozen_grads(void *self, void *acts, int u) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    zt_gpt_params *v = &g->g;
    if (u == 0) {
        v->wte = v->wpe = NULL;
    } else if (u == g->cfg.n_layer + 1) {
        v->lnfw = a->dnorm;
        v->lnfb = a->dnorm + g->cfg.n_embd;
    } else {
        zt_gpt_layer *h = &v->h[u - 1];
        memset(h, 0, sizeof *h);
        h->ln1w = h->ln2w = a->dnorm;
        h->ln1b = h->ln2b = a->dnorm + g->cfg.n_embd;
    }
}

/* Token and position embeddings into res[0]; sequence parallel: this
 * rank's positions start at rank x T. */
static void embed_fwd(void *self, void *acts) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int B = a->fB, T = a->fT, C = g->cfg.n_embd;
    const size_t pos0 = (size_t)g->sp.rank * (size_t)T;
    zt_enc_fwd(g->be, ZT_ACTS_RES(a, 0), a->inputs, g->p.wte,
               g->p16[0] ? g->p16[0] + g->off[E_WTE] : NULL, g->p.wpe + pos0 * C, B, T, C);
    a->fold = 0;   /* (a pass starts with no residual add pending: arch.h addfold) */
    a->fold16 = 0;
}

/* Block l's forward from res[l] into its slot and res[l+1] (the block's
 * parameters are bound in g->p).  Backward runs it again to recompute a
 * checkpointed block: same kernels, same inputs, bitwise the same values. */
static int block_fwd(void *self, void *acts, int l, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const zt_backend *be = g->be;
    const zt_skel *sk = &g->sk;
    int B = a->fB, T = a->fT, C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    const zt_gpt_layer *w = &g->p.h[l];
    struct zt_layer_acts *s = ZT_ACTS_SLOT(a, l);
    a->lora.keep = s->lora_h;   /* (LoRA's kept h, lora.h) */
    /* (blocks-attn: layer l's kept attention output and lse, which the
     * backward's recompute (sk->redo) reads as the forward left them) */
    const int katt = a->training && a->katt.lse;
    if (katt) zt_acts_katt_at(&a->katt, l, &s->atty, &s->atty16, &s->lse, &s->atth);
    const int skip = katt && sk->redo;
    float *x = ZT_ACTS_RES(a, l), *y = ZT_ACTS_RES(a, l + 1);
    const uint16_t *u16 = g->p16[l + 1];   /* the block's bf16 bits (zt_mm_fwd), or NULL */
#define W16(t) (u16 ? u16 + g->off[t] : NULL)
    /* attention sub-block: res2 = x + proj(attn(qkv(ln1(x)))) */
    /* (bf16 activations: each staged in d4a, rounded once) */
    float *f32 = a->d4a;
    /* (n16: the norms write the bf16 ln1 / ln2 themselves, f32 the cpu
     * backends' staging: the same values) */
    const int n16 = zt_w16_on(&g->cfg, ZT_W16_N16);
    /* (addfold: block l - 1 left x = its res2 + scratch pending, added here
     * by the fused norm, which writes x as the add did: arch.h) */
    const int fold = l > 0 && a->fold == l;
    const float *pa = fold ? ZT_ACTS_SLOT(a, l - 1)->res2 : NULL;
    a->fold = 0;
    const int fold16 = fold && a->fold16;
    a->fold16 = 0;
    if (s->ln116 && n16) {
        if (fold16)   /* (gbranch16: the MLP projection's bf16 output pending) */
            be->add_layernorm_fwd16b(x, s->ln116, f32, s->ln1_mean, s->ln1_rstd, pa,
                                     (const uint16_t *)(const void *)a->scratch, w->ln1w, w->ln1b,
                                     N, C);
        else if (fold)
            be->add_layernorm_fwd16(x, s->ln116, f32, s->ln1_mean, s->ln1_rstd, pa, a->scratch,
                                    w->ln1w, w->ln1b, N, C);
        else
            be->layernorm_fwd16(s->ln116, f32, s->ln1_mean, s->ln1_rstd, x, w->ln1w, w->ln1b, N,
                                C);
    } else {
        float *ln1 = s->ln116 ? f32 : s->ln1;
        if (fold)
            be->add_layernorm_fwd(x, ln1, s->ln1_mean, s->ln1_rstd, pa, a->scratch, w->ln1w,
                                  w->ln1b, N, C);
        else
            be->layernorm_fwd(ln1, s->ln1_mean, s->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
        if (s->ln116) be->to_bf16(s->ln116, f32, (size_t)N * C);
    }
    if (g->spn > 1) {
        /* sequence parallel (seqpar.h): local rows' q|k|v exchanged for all
         * T positions of NH/N_sp heads, the output exchanged back */
        const int P = g->spn;
        zt_mm_fwd_x(be, a->sp_h, s->ln1, s->ln116, w->qkvw, W16(T_QKVW), w->qkvb, N, C, 3 * C);
        zt_skel_lora_fwd16(sk, LG_QKV, s->ln1, s->ln116, a->sp_h, N, &a->lora);
        zt_group_where(g->sp.g, "block %d attention, forward", l);
        ZT_TRY(zt_sp_to_heads(&g->sp, be, s->qkv, a->sp_h, B, T, &g->qkv_sl, a->sp_send,
                              a->sp_recv, st));
        /* (blocks-attn's recompute: the head-sharded output and lse, and
         * the token-sharded output, kept from the forward: neither the
         * attention nor the output's exchange runs) */
        if (!skip) {
            be->attention_fwd(s->atth, s->lse, s->qkv, B, T * P, C / P, NH / P);
            ZT_TRY(zt_sp_to_tokens(&g->sp, be, s->atty, s->atth, B, T, &g->att_sl, a->sp_send,
                                   a->sp_recv, st));
        }
    } else {
        /* (bf16 GEMM outputs: q|k|v made in dqkv and the attention output in
         * d4b, free in the forward, then rounded once) */
        float *qkv = s->qkv16 ? a->dqkv : s->qkv, *atty = s->atty16 ? a->d4b : s->atty;
        /* (o16: the attention reads the bf16 q|k|v itself, gqa_ext_fwd16 with
         * attention_fwd's options; qkv the cpu backends' fp32 staging) */
        const int o16 = s->qkv16 && zt_w16_on(&g->cfg, ZT_W16_O16);
        if (o16 && lora_off(g, LG_QKV)) {
            /* (the GEMM writes the bf16 q|k|v itself: the same values) */
            be->matmul_fwd_o16(s->qkv16, qkv, s->ln1, s->ln116, w->qkvw, W16(T_QKVW), w->qkvb, N,
                               C, 3 * C);
        } else {
            zt_mm_fwd_x(be, qkv, s->ln1, s->ln116, w->qkvw, W16(T_QKVW), w->qkvb, N, C, 3 * C);
            zt_skel_lora_fwd16(sk, LG_QKV, s->ln1, s->ln116, qkv, N, &a->lora);
            if (s->qkv16) {   /* (the attention reads q|k|v rounded: the same values) */
                be->to_bf16(s->qkv16, qkv, (size_t)N * 3 * C);
                if (!o16) be->from_bf16(qkv, s->qkv16, (size_t)N * 3 * C);
            }
        }
        if (skip) {
            /* (blocks-attn's recompute: the attention output kept) */
        } else if (o16 && s->atty16 && zt_w16_on(&g->cfg, ZT_W16_AO16)) {
            /* (the attention writes its bf16 output itself, atty its fp32
             * staging: the same values) */
            const zt_attn_opts ao = {1.0f / sqrtf((float)(C / NH)), 0.0f, 0};
            be->gqa_ext_fwd16o(s->atty16, atty, s->lse, s->qkv16, qkv, B, T, NH, NH, C / NH, &ao);
        } else {
            if (o16) {
                const zt_attn_opts ao = {1.0f / sqrtf((float)(C / NH)), 0.0f, 0};
                be->gqa_ext_fwd16(atty, s->lse, s->qkv16, qkv, B, T, NH, NH, C / NH, &ao);
            } else {
                be->attention_fwd(atty, s->lse, qkv, B, T, C, NH);
            }
            if (s->atty16) be->to_bf16(s->atty16, atty, (size_t)N * C);
        }
    }
    /* (gbranch16: the output in bf16 over scratch, d4b its fp32 staging,
     * free once the attention output is written; gbr16_on) */
    uint16_t *br16 = s->ln216 && n16 && gbr16_on(g, LG_PROJ) ? (uint16_t *)(void *)a->scratch : NULL;
    if (br16) {
        be->matmul_fwd_o16(br16, a->d4b, s->atty, s->atty16, w->attprojw, W16(T_PROJW),
                           w->attprojb, N, C, C);
    } else {
        zt_mm_fwd_x(be, a->scratch, s->atty, s->atty16, w->attprojw, W16(T_PROJW), w->attprojb,
                    N, C, C);
        zt_skel_lora_fwd16(sk, LG_PROJ, s->atty, s->atty16, a->scratch, N, &a->lora);
    }
    /* MLP sub-block: y = res2 + proj(gelu(fc(ln2(res2)))) */
    float *ln2 = s->ln216 ? f32 : s->ln2;
    if (s->ln216 && n16 && br16) {
        be->add_layernorm_fwd16b(s->res2, s->ln216, f32, s->ln2_mean, s->ln2_rstd, x, br16,
                                 w->ln2w, w->ln2b, N, C);
    } else if (s->ln216 && n16) {   /* (ln2 written in bf16 by the fused kernel) */
        be->add_layernorm_fwd16(s->res2, s->ln216, f32, s->ln2_mean, s->ln2_rstd, x, a->scratch,
                                w->ln2w, w->ln2b, N, C);
    } else {
        if (be->add_layernorm_fwd) {   /* the residual add and ln2 in one kernel */
            be->add_layernorm_fwd(s->res2, ln2, s->ln2_mean, s->ln2_rstd, x, a->scratch, w->ln2w,
                                  w->ln2b, N, C);
        } else {
            be->add(s->res2, x, a->scratch, (size_t)N * C);
            be->layernorm_fwd(ln2, s->ln2_mean, s->ln2_rstd, s->res2, w->ln2w, w->ln2b, N, C);
        }
        if (s->ln216) be->to_bf16(s->ln216, f32, (size_t)N * C);
    }
    float *gl = s->fchg16 ? f32 : s->fch_gelu;
    if (be->matmul_gelu_fwd && !sk->lora && !s->fch16) {
        /* fc and the GELU in one call (cuda: a cuBLASLt epilogue; fch its aux output) */
        zt_mm_gelu_fwd_x(be, gl, s->fch, s->ln2, s->ln216, w->fcw, W16(T_FCW), w->fcb, N, C, 4 * C);
    } else if (s->fch16 && s->fchg16 && zt_w16_on(&g->cfg, ZT_W16_O16)) {
        /* (bf16 GEMM outputs: fc writes the bf16 fch16 itself (LoRA: the fp32
         * output with its adapters' delta, rounded once), the GELU reads it
         * and writes the bf16 fchg16 itself; d4b and d4a the cpu backends'
         * fp32 staging: the same values as below, without their fp32 round
         * trip) */
        int glur = 0, fused = 0;
        if (lora_off(g, LG_FC) && be->matmul_gelu_fwd_o16 && zt_w16_on(&g->cfg, ZT_W16_GELUE)) {
            /* (gelue: fc and the GELU in one bf16 GEMM, both outputs
             * rounded from the fp32 pre, config.h ZT_W16_GELUE; d4b the
             * cpu backends' staging and cuda's fallback) */
            be->matmul_gelu_fwd_o16(s->fchg16, s->fch16, a->d4b, s->ln2, s->ln216, w->fcw,
                                    W16(T_FCW), w->fcb, N, C, 4 * C);
            fused = 1;
        } else if (lora_off(g, LG_FC)) {
            be->matmul_fwd_o16(s->fch16, a->d4b, s->ln2, s->ln216, w->fcw, W16(T_FCW), w->fcb, N,
                               C, 4 * C);
        } else {
            zt_mm_fwd_x(be, a->d4b, s->ln2, s->ln216, w->fcw, W16(T_FCW), w->fcb, N, C, 4 * C);
            zt_skel_lora_fwd16(sk, LG_FC, s->ln2, s->ln216, a->d4b, N, &a->lora);
            /* (the rounding and the GELU in one entry: d4b read once, fch16
             * written beside fchg16; config.h ZT_W16_GLUROUND) */
            glur = be->gelu_fwd16r && zt_w16_on(&g->cfg, ZT_W16_GLUROUND);
            if (!glur) be->to_bf16(s->fch16, a->d4b, (size_t)N * 4 * C);
        }
        if (fused) ;
        else if (glur) be->gelu_fwd16r(s->fchg16, s->fch16, a->d4b, f32, (size_t)N * 4 * C);
        else be->gelu_fwd16(s->fchg16, s->fch16, f32, (size_t)N * 4 * C);
        gl = NULL;   /* (fchg16 written) */
    } else {
        /* (bf16 GEMM outputs: fc's output made in d4b, free in the forward,
         * rounded once, and the GELU reading the rounded values) */
        float *fch = s->fch16 ? a->d4b : s->fch;
        zt_mm_fwd_x(be, fch, s->ln2, s->ln216, w->fcw, W16(T_FCW), w->fcb, N, C, 4 * C);
        zt_skel_lora_fwd16(sk, LG_FC, s->ln2, s->ln216, fch, N, &a->lora);
        if (s->fch16) {
            be->to_bf16(s->fch16, fch, (size_t)N * 4 * C);
            be->from_bf16(fch, s->fch16, (size_t)N * 4 * C);
        }
        be->gelu_fwd(gl, fch, (size_t)N * 4 * C);
    }
    if (s->fchg16 && gl) be->to_bf16(s->fchg16, f32, (size_t)N * 4 * C);
    /* (gbranch16: the output in bf16 over scratch where the add is folded
     * into a norm that writes bf16: the next block's ln_1 (the same
     * activations as this block's) or the final norm's lnf16) */
    const int afold = zt_w16_on(&g->cfg, ZT_W16_ADDFOLD);
    const int mbr = afold && s->fchg16 && s->ln216 && n16 && gbr16_on(g, LG_FCPROJ) &&
                    (l + 1 < g->cfg.n_layer || a->lnf16);
    if (mbr) {
        be->matmul_fwd_o16((uint16_t *)(void *)a->scratch, a->d4b, s->fch_gelu, s->fchg16,
                           w->fcprojw, W16(T_FCPW), w->fcprojb, N, 4 * C, C);
    } else {
        zt_mm_fwd_x(be, a->scratch, s->fch_gelu, s->fchg16, w->fcprojw, W16(T_FCPW), w->fcprojb,
                    N, 4 * C, C);
        zt_skel_lora_fwd16(sk, LG_FCPROJ, s->fch_gelu, s->fchg16, a->scratch, N, &a->lora);
    }
    /* (addfold: y = res2 + scratch, the next norm adds it) */
    if (afold) {
        a->fold = l + 1;
        a->fold16 = mbr;
    } else {
        be->add(y, s->res2, a->scratch, (size_t)N * C);
    }
    return ZT_OK;
#undef W16
}

/* Final LayerNorm: lnf = ln_f(res[L]); with lnf16 (the bf16 activations)
 * written in bf16 alone, as the blocks' ln1 (d4a: the cpu backends' fp32
 * staging, free in the forward) */
static void norm_fwd(void *self, void *acts) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int N = a->fB * a->fT, C = g->cfg.n_embd, L = g->cfg.n_layer;
    const zt_backend *be = g->be;
    /* (addfold: the last block's res2 + scratch added here into res[L]) */
    const int fold = L > 0 && a->fold == L, fold16 = fold && a->fold16;
    const float *pa = fold ? ZT_ACTS_SLOT(a, L - 1)->res2 : NULL;
    float *res = ZT_ACTS_RES(a, L);
    a->fold = 0;
    a->fold16 = 0;
    if (a->lnf16 && zt_w16_on(&g->cfg, ZT_W16_N16)) {
        if (fold16)   /* (gbranch16: the last block's bf16 branch) */
            be->add_layernorm_fwd16b(res, a->lnf16, a->d4a, a->lnf_mean, a->lnf_rstd, pa,
                                     (const uint16_t *)(const void *)a->scratch, g->p.lnfw,
                                     g->p.lnfb, N, C);
        else if (fold)
            be->add_layernorm_fwd16(res, a->lnf16, a->d4a, a->lnf_mean, a->lnf_rstd, pa,
                                    a->scratch, g->p.lnfw, g->p.lnfb, N, C);
        else
            be->layernorm_fwd16(a->lnf16, a->d4a, a->lnf_mean, a->lnf_rstd, res, g->p.lnfw,
                                g->p.lnfb, N, C);
    } else {
        float *lnf = a->lnf16 ? a->d4a : a->lnf;
        if (fold)
            be->add_layernorm_fwd(res, lnf, a->lnf_mean, a->lnf_rstd, pa, a->scratch, g->p.lnfw,
                                  g->p.lnfb, N, C);
        else
            be->layernorm_fwd(lnf, a->lnf_mean, a->lnf_rstd, res, g->p.lnfw, g->p.lnfb, N, C);
        if (a->lnf16) be->to_bf16(a->lnf16, a->d4a, (size_t)N * C);
    }
}

/* Tied LM head and loss, chunk by chunk (classifier.h): logits = lnf @
 * wte^T (lnf16: a->cls.x16, lnf NULL); fuse: with head_bwd's gradients
 * (dlnf into dbuf, dwte +=) */
static void head_fwd(void *self, void *acts, int has_targets, double *loss_sum, double *loss_acc,
                     const float *fuse) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int N = a->fB * a->fT, C = g->cfg.n_embd, V = g->cfg.vocab;
    a->cls.w16 = g->p16[0] ? g->p16[0] + g->off[E_WTE] : NULL;   /* the tied head: wte */
    if (fuse) {
        zt_classifier_forward_fused(g->be, &a->cls, a->dbuf, g->g.wte, a->lnf, g->p.wte, a->targets,
                                    *fuse, N, C, V, 0.0f, loss_sum, loss_acc);
        return;
    }
    zt_classifier_forward(g->be, &a->cls, a->lnf, g->p.wte, a->targets, N, C, V, 0.0f,
                          has_targets, loss_sum, loss_acc);
}

static int gpt_forward(void *self, zt_units *U, void *acts, const int *inputs,
                       const int *targets, int B, int T, double *loss_sum, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    ZT_ACTS_FORWARD_BEGIN(a, B, T, inputs, targets, st);
    return zt_skel_forward(&g->sk, U, ZT_SKEL_ACTS(a), targets != NULL, loss_sum, st);
}

/* A pointer into the activations: device memory on a device backend. */
static const float *gpt_probs(void *self, void *acts, int b, int t) {
    const zt_gpt *g = self;
    const zt_gpt_acts *a = acts;
    return zt_classifier_probs(&a->cls, (long)b * a->fT + t, g->cfg.vocab);
}

/* ------------------------------------------------------------ backward */

/* LM head (tied), chunk by chunk: dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
static void head_bwd(void *self, void *acts, float dloss) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int N = a->fB * a->fT, C = g->cfg.n_embd, V = g->cfg.vocab;
    a->cls.w16 = g->p16[0] ? g->p16[0] + g->off[E_WTE] : NULL;
    zt_classifier_backward(g->be, &a->cls, a->dbuf, g->g.wte, a->lnf, g->p.wte, a->targets, dloss, N,
                           C, V, 0.0f);
}

/* Final LayerNorm: dres = ln_f'(dlnf) */
static void norm_bwd(void *self, void *acts) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int N = a->fB * a->fT, C = g->cfg.n_embd, L = g->cfg.n_layer;
    g->be->zero(a->dres, (size_t)N * C * sizeof(float));
    /* (mlpsum: the last block's MLP projection bias sums, row L - 1; every
     * row zeroed first, the norms above each block adding into it) */
    float *msum = mlpsum_row(g, a, L - 1);
    if (msum) {
        g->be->zero(a->mlpsum, (size_t)L * C * sizeof(float));
        g->be->layernorm_bwd16d(a->dres, a->dres16, g->g.lnfw, g->g.lnfb, msum, a->dbuf, NULL,
                                a->res[L], g->p.lnfw, a->lnf_mean, a->lnf_rstd, N, C);
    } else if (a->dres16 && zt_w16_on(&g->cfg, ZT_W16_D16))   /* (and its bf16 copy: block_bwd) */
        g->be->layernorm_bwd16(a->dres, a->dres16, g->g.lnfw, g->g.lnfb, a->dbuf, a->res[L],
                               g->p.lnfw, a->lnf_mean, a->lnf_rstd, N, C);
    else
        g->be->layernorm_bwd(a->dres, g->g.lnfw, g->g.lnfb, a->dbuf, a->res[L], g->p.lnfw,
                             a->lnf_mean, a->lnf_rstd, N, C);
}

/* Block l's backward: dres of res[l+1] in, dres of res[l] out (its
 * activations forward's or recomputed). */
static int block_bwd(void *self, void *acts, int l, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const zt_backend *be = g->be;
    const zt_skel *sk = &g->sk;
    int B = a->fB, T = a->fT, C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    const zt_gpt_layer *w = &g->p.h[l];
    zt_gpt_layer *gw = &g->g.h[l];
    struct zt_layer_acts *s = ZT_ACTS_SLOT(a, l);
    a->lora.keep = s->lora_h;   /* (the forward's kept h, lora.h) */
    /* (blocks-attn: layer l's kept attention output and lse; block_fwd of
     * layer l, the recompute or the forward's last block, pointed the slot
     * at them already: bound again so the backward reads layer l's whatever
     * ran before it) */
    if (a->katt.lse) zt_acts_katt_at(&a->katt, l, &s->atty, &s->atty16, &s->lse, &s->atth);
    const zt_lora_scratch *ls = &a->lora;
    const uint16_t *u16 = g->p16[l + 1];
    a->fold = 0;   /* (a recomputed block's next reads its kept input: arch.h addfold) */
    a->fold16 = 0;
#define W16(t) (u16 ? u16 + g->off[t] : NULL)
    /* (d16: the residual gradient's bf16 copy, written by the norm backward
     * that adds into it, final or ln1 of block l + 1 and ln2 here, is the
     * projections' GEMM operand) */
    const uint16_t *dres16 = a->dres16 && zt_w16_on(&g->cfg, ZT_W16_D16) ? a->dres16 : NULL;
    /* (gptn16: the norms' output gradient in bf16, dn16; lnsum: the
     * attention projection's bias gradient summed by ln_2's backward,
     * bsum; gptn16_on, lnsum_on) */
    const int n16 = dres16 && gptn16_on(&g->cfg, be);
    float *bsum = dres16 && lnsum_on(&g->cfg, be) ? gw->attprojb : NULL;
    /* (mlpsum: the MLP projection's bias sums the norm above left in row l,
     * and ln_1's into row l - 1 for the block below; mlpsum_row) */
    const float *msum = mlpsum_row(g, a, l);
    float *msum1 = msum && l > 0 ? mlpsum_row(g, a, l - 1) : NULL;
    float *fcprojb = msum ? NULL : gw->fcprojb;
    uint16_t *dn16 = NULL;
    /* MLP: dres flows to res2 unchanged and into the projection */
    uint16_t *dfc16 = NULL;   /* (fc's bf16 output gradient the GEMMs read: g16's, or gpt16's) */
    if (s->fch16 && dres16 && zt_w16_on(&g->cfg, ZT_W16_G16) && lora_off(g, LG_FCPROJ) &&
        lora_dy16(g, LG_FC)) {
        /* (g16: the projection's input gradient through the GELU written in
         * bf16, d4a's room, from the bf16 fc output as it is, and fc's bias
         * gradient the fp32 values' column sums (cuda: cuBLASLt's
         * DGELU_BGRAD with a bf16 D and aux); the fc GEMMs read that bf16
         * gradient, the values they rounded d4b to otherwise; d4b the fp32
         * scratch of the entry) */
        uint16_t *dpre16 = dfc16 = (uint16_t *)(void *)a->d4a;
        be->matmul_dgelu_bwd_o16(dpre16, a->d4b, gw->fcb, gw->fcprojw, fcprojb, a->dres, dres16,
                                 s->fch_gelu, s->fchg16, s->fch16, w->fcprojw, W16(T_FCPW), N,
                                 4 * C, C);
        if (n16) {   /* (gptn16: ln_2's output gradient in bf16, d4b; dbuf the fp32 scratch) */
            dn16 = (uint16_t *)(void *)a->d4b;
            be->matmul_bwd_o16(dn16, a->dbuf, gw->fcw, NULL, NULL, dpre16, s->ln2, s->ln216, w->fcw,
                               W16(T_FCW), N, C, 4 * C);
        } else {
            zt_mm_bwd_d(be, a->dbuf, gw->fcw, NULL, NULL, dpre16, s->ln2, s->ln216, w->fcw,
                        W16(T_FCW), N, C, 4 * C);
        }
    } else if (be->matmul_dgelu_bwd && !sk->lora) {
        /* the projection's input gradient through the GELU, and fc's bias
         * gradient, in its GEMM (cuda: a cuBLASLt epilogue); bf16 fc output:
         * its values widened into d4a */
        const float *fch = s->fch;
        if (s->fch16) {
            be->from_bf16(a->d4a, s->fch16, (size_t)N * 4 * C);
            fch = a->d4a;
        }
        zt_mm_dgelu_bwd_d(be, a->d4b, gw->fcb, gw->fcprojw, fcprojb, a->dres, dres16,
                          s->fch_gelu, s->fchg16, fch, w->fcprojw, W16(T_FCPW), N, 4 * C, C);
        zt_mm_bwd_x(be, a->dbuf, gw->fcw, NULL, a->d4b, s->ln2, s->ln216, w->fcw, W16(T_FCW), N, C,
                    4 * C);
    } else {
        zt_mm_bwd_d(be, a->d4a, gw->fcprojw, fcprojb, a->dres, dres16, s->fch_gelu, s->fchg16,
                    w->fcprojw, W16(T_FCPW), N, 4 * C, C);
        zt_skel_lora_bwd16(sk, LG_FCPROJ, s->fch_gelu, s->fchg16, a->dres, dres16, a->d4a, N, ls);
        /* (bf16 fc output: its values widened into d4b, the gradient made in place) */
        const float *fch = s->fch;
        if (s->fch16) {
            be->from_bf16(a->d4b, s->fch16, (size_t)N * 4 * C);
            fch = a->d4b;
        }
        be->gelu_bwd(a->d4b, fch, a->d4a, (size_t)N * 4 * C);
        /* (gpt16: fc's adapters reading the bf16 gradient, it is rounded
         * once, into d4a's room, free now, and the GEMMs and the adapters
         * read that: the values each rounded d4b to; the bias gradient from
         * the fp32 values) */
        if (dres16 && zt_skel_lora_on(sk, LG_FC) && !lora_off(g, LG_FCPROJ) && lora_dy16(g, LG_FC)) {
            dfc16 = (uint16_t *)(void *)a->d4a;
            be->to_bf16(dfc16, a->d4b, (size_t)N * 4 * C);
        }
        zt_mm_bwd_d(be, a->dbuf, gw->fcw, gw->fcb, a->d4b, dfc16, s->ln2, s->ln216, w->fcw,
                    W16(T_FCW), N, C, 4 * C);
    }
    if (msum) be->add(gw->fcprojb, gw->fcprojb, msum, (size_t)C);
    /* (with dfc16 the adapters read it alone: lora_dy16) */
    zt_skel_lora_bwd16(sk, LG_FC, s->ln2, s->ln216, dfc16 ? NULL : a->d4b, dfc16, a->dbuf, N, ls);
    if (dn16 || bsum)
        be->layernorm_bwd16d(a->dres, a->dres16, gw->ln2w, gw->ln2b, bsum, dn16 ? NULL : a->dbuf,
                             dn16, s->res2, w->ln2w, s->ln2_mean, s->ln2_rstd, N, C);
    else if (dres16)
        be->layernorm_bwd16(a->dres, a->dres16, gw->ln2w, gw->ln2b, a->dbuf, s->res2, w->ln2w,
                            s->ln2_mean, s->ln2_rstd, N, C);
    else
        be->layernorm_bwd(a->dres, gw->ln2w, gw->ln2b, a->dbuf, s->res2, w->ln2w,
                          s->ln2_mean, s->ln2_rstd, N, C);
    /* attention */
    /* (do16: the output's gradient written in bf16 into dbuf's memory,
     * [N, C] bf16, read by the attention backward as its dO: arch.h
     * zt_do16_of; no fp32 copy) */
    const zt_attn_opts dao = {1.0f / sqrtf((float)(C / NH)), 0.0f, 0};
    /* (LoRA: c_proj without adapters on the path of no LoRA, or (lo16,
     * ZT_W16_LO16) with adapters whose share goes first in bf16, the frozen
     * base adding into it: zt_gpt_lora_do16, zt_do16_of's gate; d4a the
     * share's fp32 scratch, as matmul_bwd_o16's; a decline, which that gate
     * rules out, the fp32 dO) */
    uint16_t *do16 = NULL;
    if (dres16 && s->qkv16 && s->atty16 && zt_do16_of(&g->cfg, be, 1, g->spn) &&
        be->att_do16(B, T, NH, NH, C / NH, &dao))
        do16 = (uint16_t *)a->dbuf;
    if (do16 && zt_skel_lora_on(sk, LG_PROJ)) {
        if (!zt_skel_lora_lin_bwd16(sk, be, LG_PROJ, do16, a->d4a, gw->attprojw, a->dres, dres16, s->atty,
                                    s->atty16, w->attprojw, W16(T_PROJW), N, C, C, ls))
            do16 = NULL;
    } else if (do16) {
        be->matmul_bwd_o16(do16, a->d4a, gw->attprojw, bsum ? NULL : gw->attprojb, a->dres, dres16,
                           s->atty, s->atty16, w->attprojw, W16(T_PROJW), N, C, C);
    }
    if (!do16) {
        zt_mm_bwd_d(be, a->dbuf, gw->attprojw, bsum ? NULL : gw->attprojb, a->dres, dres16, s->atty,
                    s->atty16, w->attprojw, W16(T_PROJW), N, C, C);
        zt_skel_lora_bwd16(sk, LG_PROJ, s->atty, s->atty16, a->dres, dres16, a->dbuf, N, ls);
    }
    float *dq = a->dqkv;   /* the local rows' q|k|v gradient */
    uint16_t *dq16 = NULL;   /* (or its bf16 values, gqa_ext_bwd16d's) */
    if (g->spn > 1) {
        /* sequence parallel: the forward's exchanges in reverse */
        const int P = g->spn;
        zt_group_where(g->sp.g, "block %d attention, backward", l);
        ZT_TRY(zt_sp_to_heads(&g->sp, be, a->sp_h, a->dbuf, B, T, &g->att_sl, a->sp_send,
                              a->sp_recv, st));
        be->attention_bwd(a->dqkv, a->sp_h, s->qkv, s->atth, s->lse, B, T * P, C / P, NH / P);
        ZT_TRY(zt_sp_to_tokens(&g->sp, be, a->sp_h, a->dqkv, B, T, &g->qkv_sl, a->sp_send,
                               a->sp_recv, st));
        dq = a->sp_h;
    } else {
        /* (bf16 q|k|v and attention output: widened into d4a and d4b, free now) */
        const float *qkv = s->qkv, *atty = s->atty;
        const int o16 = s->qkv16 && zt_w16_on(&g->cfg, ZT_W16_O16);   /* (q|k|v read in bf16: d4a staging) */
        if (s->qkv16 && !o16) {
            be->from_bf16(a->d4a, s->qkv16, (size_t)N * 3 * C);
            qkv = a->d4a;
        }
        /* (ao16: the backward reads the bf16 output itself, d4b its staging) */
        const int ao16 = o16 && s->atty16 && zt_w16_on(&g->cfg, ZT_W16_AO16);
        if (s->atty16 && !ao16) {
            be->from_bf16(a->d4b, s->atty16, (size_t)N * C);
            atty = a->d4b;
        }
        /* (ab16: the backward writes the q|k|v gradient in bf16 where its
         * path makes it so, cuDNN's, into dq16: d4b past the output's
         * staging [N, C], 256-byte aligned where that fits; the GEMM
         * below reads it as it is) */
        if (ao16 && lora_dy16(g, LG_QKV) && zt_att_in16_of(&g->cfg, be, 1, g->spn) == ZT_ATT_IN16OD) {
            const uintptr_t lo = (uintptr_t)(a->d4b + (size_t)N * C), hi = (uintptr_t)(a->d4b + (size_t)N * 4 * C);
            const size_t need = (size_t)N * 3 * C * 2;
            uintptr_t p = (lo + 255) & ~(uintptr_t)255;
            if (p + need > hi) p = (lo + 15) & ~(uintptr_t)15;
            if (p + need <= hi) dq16 = (uint16_t *)p;
        }
        if (ao16) {
            const zt_attn_opts ao = {1.0f / sqrtf((float)(C / NH)), 0.0f, 0};
            if (do16) {
                if (!be->gqa_ext_bwd16do(a->dqkv, dq16, do16, s->qkv16, a->d4a, s->atty16, a->d4b,
                                         s->lse, B, T, NH, NH, C / NH, &ao))
                    dq16 = NULL;   /* (the fp32 gradient in dqkv) */
            } else if (dq16) {
                if (!be->gqa_ext_bwd16d(a->dqkv, dq16, a->dbuf, s->qkv16, a->d4a, s->atty16, a->d4b,
                                        s->lse, B, T, NH, NH, C / NH, &ao))
                    dq16 = NULL;   /* (the fp32 gradient in dqkv) */
            } else {
                be->gqa_ext_bwd16o(a->dqkv, a->dbuf, s->qkv16, a->d4a, s->atty16, a->d4b, s->lse, B,
                                   T, NH, NH, C / NH, &ao);
            }
        } else if (o16) {
            const zt_attn_opts ao = {1.0f / sqrtf((float)(C / NH)), 0.0f, 0};
            be->gqa_ext_bwd16(a->dqkv, a->dbuf, s->qkv16, a->d4a, atty, s->lse, B, T, NH, NH, C / NH,
                              &ao);
        } else {
            be->attention_bwd(a->dqkv, a->dbuf, qkv, atty, s->lse, B, T, C, NH);
        }
    }
    dn16 = NULL;
    if (dq16 && n16) {   /* (gptn16: ln_1's output gradient in bf16, d4a; dbuf the fp32 scratch) */
        dn16 = (uint16_t *)(void *)a->d4a;
        be->matmul_bwd_o16(dn16, a->dbuf, gw->qkvw, gw->qkvb, NULL, dq16, s->ln1, s->ln116, w->qkvw,
                           W16(T_QKVW), N, C, 3 * C);
    } else if (dq16)   /* (the bias gradient from the bf16 values too: bitwise) */
        be->matmul_bwd_d16(a->dbuf, gw->qkvw, gw->qkvb, NULL, dq16, s->ln1, s->ln116, w->qkvw,
                           W16(T_QKVW), N, C, 3 * C);
    else
        zt_mm_bwd_x(be, a->dbuf, gw->qkvw, gw->qkvb, dq, s->ln1, s->ln116, w->qkvw, W16(T_QKVW), N,
                    C, 3 * C);
#undef W16
    /* (with dq16 the adapters read it alone: lora_dy16) */
    zt_skel_lora_bwd16(sk, LG_QKV, s->ln1, s->ln116, dq16 ? NULL : dq, dq16, a->dbuf, N, ls);
    if (dn16 || msum1)   /* (block 0's: no bf16 copy, the embedding reads the fp32 value) */
        be->layernorm_bwd16d(a->dres, l > 0 ? a->dres16 : NULL, gw->ln1w, gw->ln1b, msum1,
                             dn16 ? NULL : a->dbuf, dn16, a->res[l], w->ln1w, s->ln1_mean,
                             s->ln1_rstd, N, C);
    else if (dres16 && l > 0)   /* (block 0's: the embedding reads the fp32 value) */
        be->layernorm_bwd16(a->dres, a->dres16, gw->ln1w, gw->ln1b, a->dbuf, a->res[l], w->ln1w,
                            s->ln1_mean, s->ln1_rstd, N, C);
    else
        be->layernorm_bwd(a->dres, gw->ln1w, gw->ln1b, a->dbuf, a->res[l], w->ln1w,
                          s->ln1_mean, s->ln1_rstd, N, C);
    return ZT_OK;
}

/* Embeddings: dwte, dwpe (this rank's positions) += dres (the encoder's
 * backward reads no parameters). */
static void embed_bwd(void *self, void *acts) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const int B = a->fB, T = a->fT, C = g->cfg.n_embd;
    g->be->encoder_bwd(g->g.wte, g->g.wpe + (size_t)g->sp.rank * (size_t)T * C, a->dres, a->inputs,
                       B, T, C);
}

static int gpt_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    ZT_ACTS_BACKWARD_BEGIN(a, st);
    return zt_skel_backward(&g->sk, U, ZT_SKEL_ACTS(a), dloss, st);
}

static const zt_skel_ops gpt_skel = {
    bind_unit, frozen_grads, embed_fwd, block_fwd, norm_fwd, head_fwd,
    head_bwd, norm_bwd, block_bwd, embed_bwd, bind16_unit, NULL,
};

static const zt_model_ops gpt_ops = {
    "gpt2", gpt_describe, gpt_acts_create, gpt_acts_free, gpt_forward, gpt_backward,
    gpt_probs, gpt_destroy,
};

const zt_model_ops *zt_gpt_ops(void) { return &gpt_ops; }
int zt_model_is_gpt(const zt_model *m) { return m->ops == &gpt_ops; }

/* ------------------------------------------------------------ descriptor (arch.h) */

/* The GPT-2 has one shape: the Llama family's choices must be absent or
 * give the same (config.c asks after the keys' own ranges). */
static int gpt_check(const zt_model_config *m, zt_status *st) {
    if (m->n_embd % m->n_head != 0)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.n_embd=%d must be divisible by "
                       "ztrain.model.n_head=%d", m->n_embd, m->n_head);
    if (!m->tie_embeddings)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.tie_embeddings=false: the gpt2 "
                       "architecture always ties its LM head to the token embedding");
    const char *bad = (m->n_kv_head && m->n_kv_head != m->n_head) ? "n_kv_head"
                    : (m->head_dim && m->head_dim * m->n_head != m->n_embd) ? "head_dim"
                    : m->intermediate && m->intermediate != 4 * m->n_embd ? "intermediate_size"
                    : m->attention_bias ? "attention_bias"
                    : m->qk_norm ? "qk_norm"
                    : m->gemma ? "gemma"
                    : m->pad_token_id != -1 ? "pad_token_id"
                    : strcmp(m->rope_scaling, "none") ? "rope_scaling" : NULL;
    if (bad)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.%s is a llama setting; the gpt2 "
                       "architecture has no such choice (set ztrain.model.arch=llama)", bad);
    char why[160];
    if (!zt_arch_hf_export(m, NULL, why, sizeof why)) return zt_fail(st, ZT_EINVAL, "%s", why);
    return ZT_OK;
}

static int gpt_create(const zt_model_config *mc, const zt_backend *be, int ckpt_k,
                      const zt_model_ops **ops, void **self, zt_status *st) {
    zt_gpt *g;
    ZT_TRY(zt_gpt_new(mc, be, &g, st));
    zt_gpt_set_checkpointing(g, ckpt_k);
    *ops = &gpt_ops;
    *self = g;
    return ZT_OK;
}

/* DeepSpeed's largest layer: wte, wpe, or the MLP's fc (weight and bias). */
/* LoRA's modules (lora.h), PEFT's names: c_proj is both the attention's
 * and the MLP's output projection. */
static int gpt_lora_mods(const zt_model_config *mc, zt_lora_mod *o, int *n_groups) {
    const int C = mc->n_embd;
    const zt_lora_mod t[] = {
        {"c_attn", "attn.c_attn", LG_QKV, C, 3 * C, 0},
        {"c_proj", "attn.c_proj", LG_PROJ, C, C, 0},
        {"c_fc", "mlp.c_fc", LG_FC, C, 4 * C, 0},
        {"c_proj", "mlp.c_proj", LG_FCPROJ, 4 * C, C, 0},
    };
    for (int i = 0; i < 4; ++i) o[i] = t[i];
    *n_groups = 4;
    return 4;
}

static uint64_t gpt_largest_layer(const zt_model_config *mc) {
    const uint64_t C = (uint64_t)mc->n_embd, V = (uint64_t)mc->vocab, T = (uint64_t)mc->context;
    uint64_t m = V * C > T * C ? V * C : T * C;
    return m > 4 * C * C + 4 * C ? m : 4 * C * C + 4 * C;
}

static uint64_t gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training, int ckpt_k,
                               int elem) {
    return acts_bytes(mc, B, T, training, ckpt_k, elem);
}

/* The largest scratch request of the CUDA kernels gpt_forward and
 * gpt_backward call (fp32 matmuls: only the loss sum needs scratch in
 * forward), the optimizer's reductions over psi gradients, the eval [E, T]
 * and sample [1, T] forwards. */
static uint64_t gpt_kernel_ws(const zt_model_config *mc, int B, int T, int E, uint64_t psi,
                              int bf16, zt_att_ws *att) {
    const int C = mc->n_embd, NH = mc->n_head, V = mc->vocab, N = B * T;
    /* sequence parallel: attention over all T * SPN tokens for NH / SPN heads */
    const int SPN = mc->seq_parallel > 1 ? mc->seq_parallel : 1;
    /* the attention: NH / SPN heads of C / NH, attention_fwd's options */
    const int AH = NH / SPN, hs = NH > 0 ? C / NH : 0;
    const zt_attn_opts ao = {hs > 0 ? 1.0f / sqrtf((float)hs) : 1.0f, 0.0f, 0};
    /* (the training blocks' attention entries; eval and sample: fp32 q|k|v) */
    const int in16 = zt_att_in16_of(mc, att ? att->be : NULL, 1, SPN);
    uint64_t w = 0;
#define WS(x) do { uint64_t v_ = (uint64_t)(x); if (v_ > w) w = v_; } while (0)
    /* a forward of [Bf, T]: the training step's, eval's [E, T], sample's [1, T] */
#define FWD(Bf, I16, TR)                                                         \
    do {                                                                         \
        const int Nf = (Bf) * T;                                                 \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, C, 3 * C));                           \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, C, C));                               \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, C, 4 * C));                           \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, 4 * C, C));                           \
        /* head chunk (TR: a training block's rows) */                           \
        WS(zt_cuda_ws_matmul_fwd(bf16, (int)zt_classifier_rows(mc, Nf, (TR), 0), C, V)); \
        if (AH > 0) WS(zt_att_ws_of(att, 0, bf16, (I16), (Bf), T * SPN, AH, AH, hs, &ao)); \
    } while (0)
    FWD(B, in16, 1);
    WS(zt_cuda_ws_reduce((size_t)N));
    /* backward */
    /* LM head chunk (bf16 logits: its bf16 gradient read as it is) */
    const int Rh = (int)zt_classifier_rows(mc, N, 1, 0);
    WS(zt_classifier_l16(mc, 1, 0) ? zt_cuda_ws_matmul_bwd_head16(Rh, C, V, 1, 1)
                                   : zt_cuda_ws_matmul_bwd(bf16, Rh, C, V, 1, 1, 0));
    WS(zt_cuda_ws_layernorm_bwd(N, C));
    /* (lnsum, mlpsum: ln_2's, ln_1's and the final norm's backward with the
     * bias sums, either alone; the backend's entry is cuda's here, the gate
     * without it) */
    if (zt_acts16_on(mc) && (bsum_cfg(mc, ZT_W16_LNSUM) || bsum_cfg(mc, ZT_W16_MLPSUM)))
        WS(zt_cuda_ws_layernorm_bwd_sum(N, C));
    WS(zt_cuda_ws_matmul_bwd(bf16, N, 4 * C, C, 1, 1, 1));    /* fcproj */
    WS(zt_cuda_ws_matmul_dgelu_bwd(bf16, N, 4 * C, C, 1, 1));  /* fcproj through the GELU */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, C, 4 * C, 1, 1, 1));    /* fc */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, C, C, 1, 1, 1));        /* attproj */
    /* (do16: cuDNN reads the caller's bf16 dO, no buffer of its own) */
    const int do16 = zt_do16_of(mc, att ? att->be : NULL, 1, SPN) ? ZT_ATT_DO16 : 0;
    if (AH > 0) WS(zt_att_ws_of(att, 1, bf16, in16 | do16, B, T * SPN, AH, AH, hs, &ao));
    WS(zt_cuda_ws_matmul_bwd(bf16, N, C, 3 * C, 1, 1, 1));    /* qkv */
    WS(zt_cuda_ws_encoder_bwd(N, 0));
    /* optimizer: gradient norm, fp16 overflow check */
    WS(zt_cuda_ws_reduce((size_t)psi));
    /* eval and sample forwards */
    if (E > 0) WS(zt_cuda_ws_reduce((size_t)E * (size_t)T));
    if (E > 0) FWD(E, ZT_ATT_IN32, 0);
    FWD(1, ZT_ATT_IN32, 0);
#undef FWD
#undef WS
    return w;
}

/* The GPT-2 has no settings beyond the common shape. */
static void gpt_summary(const zt_model_config *mc, int style, char *buf, size_t n) {
    if (style == ZT_ARCH_SUM_INSPECT)
        snprintf(buf, n, "gpt2: %d layers, %d heads, %d wide, context %d, vocab %d", mc->n_layer,
                 mc->n_head, mc->n_embd, mc->context, mc->vocab);
    else
        buf[0] = '\0';
}

/* transformers' GPT2Config defaults; the causal-mask buffers of older files
 * are no parameters; original GPT-2 files omit "transformer." */
static const zt_arch_hf gpt_hf[] = {
    {"GPT2LMHeadModel", "gpt2", 0, 50257, 768, 0, 12, 12, -1, 1024, 1e-5, 1, 0, -1, NULL, NULL, NULL},
};
/* config.json's GPT-2 keys (after architectures and model_type) */
static void gpt_hf_config(const zt_model_config *mc, const zt_arch_hf *f, json_t *c, json_t *orig) {
    (void)f;
    (void)orig;
    json_object_set_new(c, "vocab_size", json_integer(mc->vocab));
    json_object_set_new(c, "n_positions", json_integer(mc->context));
    json_object_set_new(c, "n_embd", json_integer(mc->n_embd));
    json_object_set_new(c, "n_layer", json_integer(mc->n_layer));
    json_object_set_new(c, "n_head", json_integer(mc->n_head));
    json_object_set_new(c, "n_inner", json_null());
    json_object_set_new(c, "activation_function", json_string("gelu_new"));
    json_object_set_new(c, "layer_norm_epsilon", json_real(1e-5));
    json_object_set_new(c, "tie_word_embeddings", json_true());
}

static const char *const gpt_hf_ignore[] = {".attn.bias", ".attn.masked_bias", NULL};

const zt_arch zt_arch_gpt2 = {
    .name = "gpt2",
    .id = ZT_ARCH_GPT2,
    .check = gpt_check,
    .model_ops = &gpt_ops,
    .create = gpt_create,
    .set_mesh = gpt_set_mesh,
    .tensors = gpt_tensors,
    .n_tensors = GPT_NT,
    .tensor_shape = gpt_tensor_shape,
    .gemm_weight = gpt_gemm_weight,
    .head_unit = "final_norm",
    .tied_head = 1,
    .llmc_file = 1,
    .largest_layer = gpt_largest_layer,
    .acts_bytes = gpt_acts_bytes,
    .kernel_ws = gpt_kernel_ws,
    .summary = gpt_summary,
    .hf = gpt_hf,
    .n_hf = 1,
    .hf_ignore = gpt_hf_ignore,
    .hf_optional_prefix = "transformer.",
    .hf_config = gpt_hf_config,
    .lora_mods = gpt_lora_mods,
    .lora_default = "c_attn",
    .hf_block = "transformer.h.%d.",
};
