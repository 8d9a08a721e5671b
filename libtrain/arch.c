/* arch.c -- the architecture registry, the setting table and the helpers
 * that only read descriptors (arch.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "arch.h"
#include "internal.h"
#include "model.h"   /* zt_layout_mark_expert */
#include "model_acts.h"   /* zt_acts16_on */
#include "gpt.h"   /* zt_gpt_lora_att16 */
#include "llama.h"   /* zt_llama_lora_do16 */
#include "backend.h"
#include "cuda/cuda_workspace.h"

static const zt_arch *const archs[] = {&zt_arch_llama, &zt_arch_gpt2, NULL};

const zt_arch *const *zt_arch_all(void) { return archs; }

const zt_arch *zt_arch_find(const char *name) {
    for (int i = 0; name && archs[i]; ++i)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

const zt_arch *zt_arch_of(const zt_model_config *mc) {
    const zt_arch *a = zt_arch_find(mc->arch);
    return a ? a : &zt_arch_gpt2;
}

const zt_arch *zt_arch_of_ops(const zt_model_ops *ops) {
    for (int i = 0; ops && archs[i]; ++i)
        if (archs[i]->model_ops == ops) return archs[i];
    return NULL;
}

int zt_model_arch(const zt_model_config *mc) { return zt_arch_of(mc)->id; }

/* ------------------------------------------------------------ settings */

static int is_llama3(const zt_model_config *mc) { return !strcmp(mc->rope_scaling, "llama3"); }
static int is_yarn(const zt_model_config *mc) { return !strcmp(mc->rope_scaling, "yarn"); }
static int is_longrope(const zt_model_config *mc) { return !strcmp(mc->rope_scaling, "longrope"); }
static int has_attention_factor(const zt_model_config *mc) { return is_yarn(mc) || is_longrope(mc); }
static int has_factor(const zt_model_config *mc) { return strcmp(mc->rope_scaling, "none") != 0; }
static int is_gemma(const zt_model_config *mc) { return mc->gemma != 0; }
static int is_moe(const zt_model_config *mc) { return mc->n_experts > 0; }
static int has_qk_norm(const zt_model_config *mc) { return mc->qk_norm != 0; }
/* a window (any llama; older checkpoints without one store 0) */
static int has_window(const zt_model_config *mc) { return mc->gemma != 0 || mc->sliding_window != 0; }
static int has_original(const zt_model_config *mc) { return is_llama3(mc) || is_yarn(mc) || is_longrope(mc); }

#define MC(f) offsetof(zt_model_config, f), sizeof(((zt_model_config *)0)->f)
#define GPT2 (1u << ZT_ARCH_GPT2)
#define LLAMA (1u << ZT_ARCH_LLAMA)
static const zt_arch_setting settings[] = {
    {"n_kv_head", ZT_AS_INT, MC(n_kv_head), zt_model_kv_heads, NULL, LLAMA},
    {"head_dim", ZT_AS_INT, MC(head_dim), zt_model_head_dim, NULL, LLAMA},
    {"intermediate_size", ZT_AS_INT, MC(intermediate), zt_model_intermediate, NULL, LLAMA},
    {"rms_norm_eps", ZT_AS_DOUBLE, MC(norm_eps), NULL, NULL, LLAMA},
    {"rope_theta", ZT_AS_DOUBLE, MC(rope_theta), NULL, NULL, LLAMA},
    {"rope_scaling", ZT_AS_STR, MC(rope_scaling), NULL, NULL, LLAMA},
    {"rope_factor", ZT_AS_DOUBLE, MC(rope_factor), NULL, has_factor, LLAMA},
    {"rope_low_freq_factor", ZT_AS_DOUBLE, MC(rope_low_freq_factor), NULL, is_llama3, LLAMA},
    {"rope_high_freq_factor", ZT_AS_DOUBLE, MC(rope_high_freq_factor), NULL, is_llama3, LLAMA},
    {"rope_original_max_positions", ZT_AS_INT, MC(rope_original_max), NULL, has_original, LLAMA},
    {"rope_attention_factor", ZT_AS_DOUBLE, MC(rope_attention_factor), NULL, has_attention_factor, LLAMA},
    {"rope_beta_fast", ZT_AS_DOUBLE, MC(rope_beta_fast), NULL, is_yarn, LLAMA},
    {"rope_beta_slow", ZT_AS_DOUBLE, MC(rope_beta_slow), NULL, is_yarn, LLAMA},
    {"rope_truncate", ZT_AS_BOOL, MC(rope_truncate), NULL, is_yarn, LLAMA},
    {"rope_short_factor", ZT_AS_STR, MC(rope_short_factor), NULL, is_longrope, LLAMA},
    {"rope_long_factor", ZT_AS_STR, MC(rope_long_factor), NULL, is_longrope, LLAMA},
    {"attention_bias", ZT_AS_BOOL, MC(attention_bias), NULL, NULL, LLAMA},
    {"qk_norm", ZT_AS_BOOL, MC(qk_norm), NULL, NULL, LLAMA},
    {"qk_norm_full", ZT_AS_BOOL, MC(qk_norm_full), NULL, has_qk_norm, LLAMA},
    {"gemma", ZT_AS_INT, MC(gemma), NULL, NULL, LLAMA},
    {"query_pre_attn_scalar", ZT_AS_DOUBLE, MC(query_pre_attn_scalar), NULL, is_gemma, LLAMA},
    {"attn_softcap", ZT_AS_DOUBLE, MC(attn_softcap), NULL, is_gemma, LLAMA},
    {"final_softcap", ZT_AS_DOUBLE, MC(final_softcap), NULL, is_gemma, LLAMA},
    {"sliding_window", ZT_AS_INT, MC(sliding_window), NULL, has_window, LLAMA},
    {"sliding_pattern", ZT_AS_INT, MC(sliding_pattern), NULL, has_window, LLAMA},
    {"sliding_from", ZT_AS_INT, MC(sliding_from), NULL, has_window, LLAMA},
    {"rope_local_theta", ZT_AS_DOUBLE, MC(rope_local_theta), NULL, is_gemma, LLAMA},
    {"n_experts", ZT_AS_INT, MC(n_experts), NULL, NULL, LLAMA},
    {"experts_per_token", ZT_AS_INT, MC(experts_per_token), NULL, is_moe, LLAMA},
    {"moe_intermediate_size", ZT_AS_INT, MC(moe_intermediate), NULL, is_moe, LLAMA},
    {"moe_norm_topk", ZT_AS_BOOL, MC(moe_norm_topk), NULL, is_moe, LLAMA},
    {"shared_expert_size", ZT_AS_INT, MC(shared_expert), NULL, is_moe, LLAMA},
    {"decoder_sparse_step", ZT_AS_INT, MC(decoder_sparse_step), NULL, is_moe, LLAMA},
    {"mlp_only_layers", ZT_AS_STR, MC(mlp_only_layers), NULL, is_moe, LLAMA},
    {"router_aux_loss_coef", ZT_AS_DOUBLE, MC(router_aux_loss_coef), NULL, is_moe, LLAMA},
    {"tie_embeddings", ZT_AS_BOOL, MC(tie_embeddings), NULL, NULL, GPT2 | LLAMA},
    {"pad_token_id", ZT_AS_INT, MC(pad_token_id), NULL, NULL, LLAMA},
};
#undef MC

const zt_arch_setting *zt_arch_settings(int *n) {
    *n = (int)(sizeof settings / sizeof settings[0]);
    return settings;
}

int zt_arch_uses(const zt_arch *a, const zt_arch_setting *s, const zt_model_config *mc) {
    return (s->archs & (1u << a->id)) && (!s->applies || s->applies(mc));
}

int zt_arch_setting_int(const zt_arch_setting *s, const zt_model_config *mc) {
    if (s->resolve) return s->resolve(mc);
    const int v = *(const int *)(const void *)((const char *)mc + s->offset);
    return s->type == ZT_AS_BOOL ? v != 0 : v;
}
double zt_arch_setting_double(const zt_arch_setting *s, const zt_model_config *mc) {
    return *(const double *)(const void *)((const char *)mc + s->offset);
}
const char *zt_arch_setting_str(const zt_arch_setting *s, const zt_model_config *mc) {
    return (const char *)mc + s->offset;
}

const zt_arch_setting *zt_arch_diff(const zt_arch *a, const zt_model_config *x,
                                    const zt_model_config *y, char *xs, char *ys, size_t n) {
    for (size_t k = 0; k < sizeof settings / sizeof settings[0]; ++k) {
        const zt_arch_setting *s = &settings[k];
        if (!zt_arch_uses(a, s, x)) continue;
        if (s->type == ZT_AS_STR) {
            if (!strcmp(zt_arch_setting_str(s, x), zt_arch_setting_str(s, y))) continue;
            snprintf(xs, n, "%s", zt_arch_setting_str(s, x));
            snprintf(ys, n, "%s", zt_arch_setting_str(s, y));
        } else if (s->type == ZT_AS_DOUBLE) {
            double u = zt_arch_setting_double(s, x), v = zt_arch_setting_double(s, y);
            if (u == v) continue;
            snprintf(xs, n, "%g", u);
            snprintf(ys, n, "%g", v);
            if (!strcmp(xs, ys)) {   /* too close for %g: every digit */
                snprintf(xs, n, "%.17g", u);
                snprintf(ys, n, "%.17g", v);
            }
        } else {
            int u = zt_arch_setting_int(s, x), v = zt_arch_setting_int(s, y);
            if (u == v) continue;
            snprintf(xs, n, "%d", u);
            snprintf(ys, n, "%d", v);
        }
        return s;
    }
    return NULL;
}

/* ------------------------------------------------------------ tensors */

int zt_arch_tied(const zt_arch *a, const zt_model_config *mc) {
    return a->tied_head && mc->tie_embeddings;
}

/* Is block entry k of block l in a unit of its own (and present)? */
static int own_unit(const zt_arch *a, const zt_model_config *mc, int l, int k) {
    if (!a->own_unit || a->tensors[k].unit != ZT_AT_BLOCK || !a->own_unit(k)) return 0;
    int r, c;
    a->tensor_shape(mc, l, k, &r, &c);
    return r > 0;
}

int zt_arch_block_unit(const zt_arch *a, const zt_model_config *mc, int l, int *n) {
    int u = 1;
    for (int i = 0; i < l && i < mc->n_layer; ++i) {
        u++;
        for (int k = 0; k < a->n_tensors; ++k) u += own_unit(a, mc, i, k);
    }
    int c = 1;
    if (l < mc->n_layer)
        for (int k = 0; k < a->n_tensors; ++k) c += own_unit(a, mc, l, k);
    if (n) *n = c;
    return u;
}

int zt_arch_n_units(const zt_arch *a, const zt_model_config *mc) {
    return zt_arch_block_unit(a, mc, mc->n_layer, NULL) + 1;
}

static int gemm_only(const zt_arch *a, const zt_model_config *mc, int k) {
    return a->gemm_weight && a->gemm_weight(mc, k);
}

/* Unit u's part, block and (an own unit) table entry, else -1. */
static void unit_place(const zt_arch *a, const zt_model_config *mc, int u, int *part, int *blk,
                       int *entry) {
    int want = ZT_AT_EMBED, l = -1, own = -1;
    if (u > 0) {
        want = ZT_AT_HEAD;
        l = mc->n_layer;
        for (int i = 0, b = 1; i < mc->n_layer && want == ZT_AT_HEAD; ++i) {
            if (u == b) { want = ZT_AT_BLOCK; l = i; break; }
            b++;
            for (int k = 0; k < a->n_tensors; ++k)
                if (own_unit(a, mc, i, k) && u == b++) { want = ZT_AT_BLOCK; l = i; own = k; break; }
        }
    }
    *part = want;
    *blk = l;
    *entry = own;
}

int zt_arch_unit_expert(const zt_arch *a, const zt_model_config *mc, int u) {
    int part, l, own;
    unit_place(a, mc, u, &part, &l, &own);
    return own >= 0;
}

/* Elements of unit u, less its GEMM-only tensors with w32 */
static uint64_t unit_numel(const zt_arch *a, const zt_model_config *mc, int u, int w32) {
    /* which part, block and (own units) entry */
    int want, l, own;
    unit_place(a, mc, u, &want, &l, &own);
    uint64_t n = 0;
    for (int k = 0; k < a->n_tensors; ++k) {
        if (a->tensors[k].unit != want || (w32 && gemm_only(a, mc, k))) continue;
        if (want == ZT_AT_BLOCK && (own >= 0 ? k != own : own_unit(a, mc, l, k))) continue;
        int r, c;
        a->tensor_shape(mc, l, k, &r, &c);
        n += (uint64_t)r * (uint64_t)c;
    }
    return n;
}

uint64_t zt_arch_unit_numel(const zt_arch *a, const zt_model_config *mc, int u) {
    return unit_numel(a, mc, u, 0);
}

uint64_t zt_arch_unit_numel32(const zt_arch *a, const zt_model_config *mc, int u) {
    return unit_numel(a, mc, u, 1);
}

void zt_arch_offsets32(const zt_arch *a, const zt_model_config *mc, size_t *off32) {
    for (int part = ZT_AT_EMBED; part <= ZT_AT_HEAD; ++part)
        for (int l = 0; l < (part == ZT_AT_BLOCK ? mc->n_layer : 1); ++l) {
            const int kind = part == ZT_AT_BLOCK && a->block_kind ? a->block_kind(mc, l) : 0;
            size_t o = 0;
            for (int k = 0; k < a->n_tensors; ++k) {
                int rows, cols;
                if (a->tensors[k].unit != part) continue;
                a->tensor_shape(mc, l, k, &rows, &cols);
                if (!rows || gemm_only(a, mc, k)) continue;
                if (part == ZT_AT_BLOCK && own_unit(a, mc, l, k)) {
                    off32[kind * a->n_tensors + k] = 0;   /* alone in its unit's copy */
                    continue;
                }
                off32[kind * a->n_tensors + k] = o;
                o += (size_t)rows * (size_t)cols;
            }
        }
}

int zt_arch_describe(const zt_arch *a, const zt_model_config *mc, zt_layout *L, size_t *off,
                     zt_status *st) {
    const double std = 0.02, resid = 0.02 / sqrt(2.0 * mc->n_layer);   /* GPT-2 scaled residual */
    for (int part = ZT_AT_EMBED; part <= ZT_AT_HEAD; ++part)
        for (int l = 0; l < (part == ZT_AT_BLOCK ? mc->n_layer : 1); ++l) {
            char un[80], tn[64];   /* (zt_layout_unit checks the name's length) */
            if (part == ZT_AT_BLOCK) snprintf(un, sizeof un, "block.%d", l);
            ZT_TRY(zt_layout_unit(L, part == ZT_AT_EMBED ? "embeddings"
                                     : part == ZT_AT_HEAD ? a->head_unit : un, st));
            /* pass 0: the unit's entries; pass 1: the own_unit entries, each
             * in a unit of its own */
            for (int pass = 0; pass < (part == ZT_AT_BLOCK ? 2 : 1); ++pass)
                for (int k = 0; k < a->n_tensors; ++k) {
                    const zt_arch_tensor *t = &a->tensors[k];
                    int rows, cols;
                    if (t->unit != part) continue;
                    if (part == ZT_AT_BLOCK && own_unit(a, mc, l, k) != pass) continue;
                    a->tensor_shape(mc, l, k, &rows, &cols);
                    if (!rows) continue;
                    if (pass) {
                        snprintf(un, sizeof un, "block.%d.%s", l, a->own_unit(k));
                        ZT_TRY(zt_layout_unit(L, un, st));
                        zt_layout_mark_expert(L);   /* (expert parallelism: a window a rank) */
                    }
                    /* matrices are decayed; norms ones, biases zeros */
                    const int ti = a->tensor_init ? a->tensor_init(mc, k) : t->init;
                    const zt_init_kind init = ti == ZT_AT_ONES    ? ZT_INIT_ONES
                                            : ti == ZT_AT_ZEROS ? ZT_INIT_ZEROS
                                                                : ZT_INIT_NORMAL;
                    const double s = ti == ZT_AT_NORMAL ? std : ti == ZT_AT_NORMAL_RESID ? resid : 0;
                    if (part == ZT_AT_BLOCK) snprintf(tn, sizeof tn, "h%d.%s", l, t->name);
                    else snprintf(tn, sizeof tn, "%s", t->name);
                    const int kind = part == ZT_AT_BLOCK && a->block_kind ? a->block_kind(mc, l) : 0;
                    const unsigned fl = (cols > 1 ? ZT_TENSOR_DECAY : 0u) |
                                        (gemm_only(a, mc, k) ? ZT_TENSOR_GEMM : 0u);
                    ZT_TRY(zt_layout_tensor(L, tn, rows, cols, init, s, fl,
                                            &off[kind * a->n_tensors + k], st));
                }
        }
    return ZT_OK;
}

int zt_arch_hf_name(const zt_arch *a, const char *ours, char *out, size_t n, int *transpose) {
    *transpose = 0;
    int l, used = 0;
    const char *rest = NULL;
    if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used > 0) rest = ours + used;
    for (int k = 0; k < a->n_tensors; ++k) {
        const zt_arch_tensor *t = &a->tensors[k];
        if (!t->hf) continue;
        if (t->unit == ZT_AT_BLOCK ? !rest || strcmp(rest, t->name) : strcmp(ours, t->name))
            continue;
        if (t->unit == ZT_AT_BLOCK) snprintf(out, n, t->hf, l);
        else snprintf(out, n, "%s", t->hf);
        *transpose = t->transpose;
        return 0;
    }
    return -1;
}

int zt_arch_hf_part(const zt_arch *a, const zt_arch_hf *f, const zt_model_config *mc,
                    const char *ours, char *out, size_t n, int *transpose, long *row0, long *rows) {
    int l, used = 0, r, c;
    *row0 = 0;
    *rows = 0;
    const char *rest = NULL;
    if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used > 0) rest = ours + used;
    for (int i = 0; f && f->fuse && rest && f->fuse[i].hf; ++i) {
        const zt_arch_fuse *fu = &f->fuse[i];
        int k0 = -1, k1 = -1, me = -1;
        for (int k = 0; k < a->n_tensors; ++k) {
            if (!strcmp(a->tensors[k].name, fu->first)) k0 = k;
            if (!strcmp(a->tensors[k].name, fu->last)) k1 = k;
            if (!strcmp(a->tensors[k].name, rest)) me = k;
        }
        if (k0 < 0 || k1 < k0 || me < k0 || me > k1) continue;
        for (int k = k0; k <= k1; ++k) {
            a->tensor_shape(mc, l, k, &r, &c);
            if (k < me) *row0 += r;
            *rows += r;
        }
        *transpose = 0;
        snprintf(out, n, fu->hf, l);
        return 0;
    }
    for (int i = 0; f && f->rename && rest && f->rename[i].ours; ++i)
        if (!strcmp(f->rename[i].ours, rest) &&
            !(f->rename[i].sparse_only && !zt_model_layer_sparse(mc, l))) {
            for (int k = 0; k < a->n_tensors; ++k)
                if (!strcmp(a->tensors[k].name, rest)) {
                    a->tensor_shape(mc, l, k, &r, &c);
                    *rows = r;
                }
            *transpose = 0;
            snprintf(out, n, f->rename[i].hf, l);
            return 0;
        }
    for (int k = 0; k < a->n_tensors; ++k)
        if (!strcmp(a->tensors[k].name, rest ? rest : ours) &&
            (a->tensors[k].unit == ZT_AT_BLOCK) == (rest != NULL)) {
            a->tensor_shape(mc, rest ? l : -1, k, &r, &c);
            *rows = r;
        }
    return zt_arch_hf_name(a, ours, out, n, transpose);
}

int zt_arch_hf_ignorable(const zt_arch *a, const zt_model_config *mc, const char *name) {
    size_t n = strlen(name);
    if (zt_arch_tied(a, mc) && !strcmp(name, "lm_head.weight")) return 1;
    for (int i = 0; a->hf_ignore && a->hf_ignore[i]; ++i) {
        size_t k = strlen(a->hf_ignore[i]);
        if (n >= k && !strcmp(name + n - k, a->hf_ignore[i])) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ Hugging Face */

const zt_arch_hf *zt_arch_hf_find(const char *architectures, const char *model_type,
                                  const zt_arch **arch) {
    for (int i = 0; archs[i]; ++i)
        for (int j = 0; j < archs[i]->n_hf; ++j) {
            const zt_arch_hf *f = &archs[i]->hf[j];
            if (architectures ? !strcmp(architectures, f->architectures)
                              : model_type && !strcmp(model_type, f->model_type)) {
                if (arch) *arch = archs[i];
                return f;
            }
        }
    return NULL;
}

const zt_arch_hf *zt_arch_hf_export(const zt_model_config *mc, const char *orig, char *why,
                                    size_t n) {
    const zt_arch *a = zt_arch_of(mc), *fa = NULL;
    const char *stored = mc->hf_architecture[0] ? mc->hf_architecture : NULL;
    const zt_arch_hf *f = stored ? zt_arch_hf_find(stored, NULL, &fa) : NULL;
    if (stored && (!f || fa != a)) {
        snprintf(why, n, "ztrain.model.hf_architecture=%s is not a Hugging Face class of the "
                 "%s architecture", stored, a->name);
        return NULL;
    }
    const char *r = f && a->hf_refuse ? a->hf_refuse(f, mc) : NULL;
    if (r) {
        snprintf(why, n, "ztrain.model.hf_architecture=%s: %s", stored, r);
        return NULL;
    }
    if (f) return f;
    /* none stored (a checkpoint from before the key): the original
     * directory's class when it can express the model, else the default */
    f = orig ? zt_arch_hf_find(orig, NULL, &fa) : NULL;
    if (f && fa == a && !(a->hf_refuse && a->hf_refuse(f, mc))) return f;
    return a->hf_default ? a->hf_default(mc) : &a->hf[0];
}

void zt_arch_hf_list(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; archs[i]; ++i)
        for (int j = 0; j < archs[i]->n_hf && k < n; ++j)
            k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", archs[i]->hf[j].architectures);
}

int zt_att_in16_of(const zt_model_config *mc, const zt_backend *be, int training, int sp) {
    if (!training || sp > 1 || !zt_acts16_on(mc) || !zt_acts16_ok(be) || !zt_l16_ok(be) ||
        !zt_w16_on(mc, ZT_W16_O16) || !zt_o16_ok(be))
        return ZT_ATT_IN32;
    if (!zt_w16_on(mc, ZT_W16_AO16) || !zt_ao16_ok(be)) return ZT_ATT_IN16;
    /* the q|k|v GEMM reads the backward's bf16 gradient (gqa_ext_bwd16d):
     * GPT-2 (no RoPE between them), or with rb16 Llama's blocks without
     * q/k norms (RoPE's backward in bf16 between them, rope_bwd16) or with
     * them and qkb16 (RoPE's and the norms' backward in bf16,
     * qknorm_rope_bwd16; no q|k|v bias: without qkb16 or with a bias the
     * norms' backward reads the fp32 gradient), without adapters or, on
     * Llama's, with adapters reading the bf16 gradient too
     * (zt_lora_dq16_of); GPT-2's where its q|k|v adapters allow it (gpt.h
     * zt_gpt_lora_att16) */
    const int id = zt_arch_of(mc)->id;
    const int rope16 =
        id == ZT_ARCH_LLAMA && zt_w16_on(mc, ZT_W16_RB16) && be->rope_bwd16 &&
        (!mc->qk_norm || (zt_w16_on(mc, ZT_W16_QKB16) && be->qknorm_rope_bwd16 && !mc->attention_bias));
    return zt_w16_on(mc, ZT_W16_AB16) && be->gqa_ext_bwd16d && (id == ZT_ARCH_GPT2 || rope16) &&
                   (id == ZT_ARCH_LLAMA
                        ? zt_lora_dq16_of(mc)
                        : mc->lora_r <= 0 || (id == ZT_ARCH_GPT2 && zt_gpt_lora_att16(mc, 0))) &&
                   zt_d16_ok(be)
               ? ZT_ATT_IN16OD
               : ZT_ATT_IN16O;
}

int zt_lora_dq16_of(const zt_model_config *mc) {
    return mc->lora_r <= 0 || (zt_w16_on(mc, ZT_W16_LORABT) && zt_w16_on(mc, ZT_W16_QKV16));
}

int zt_do16_of(const zt_model_config *mc, const zt_backend *be, int training, int sp) {
    /* (LoRA: where the attention's output projection has no adapters,
     * GPT-2's c_proj, gpt.h zt_gpt_lora_do16; Llama's o_proj, llama.h
     * zt_llama_lora_do16, or where its adapters' share of dO can go first
     * in bf16, ZT_W16_LO16) */
    const int id = zt_arch_of(mc)->id;
    const int lora_ok = mc->lora_r <= 0 || (id == ZT_ARCH_GPT2 && zt_gpt_lora_do16(mc, be)) ||
                        (id == ZT_ARCH_LLAMA && zt_llama_lora_do16(mc, be));
    return be && zt_w16_on(mc, ZT_W16_DO16) && zt_w16_on(mc, ZT_W16_D16) && lora_ok &&
           be->att_do16 && be->matmul_bwd_o16 && be->gqa_ext_bwd16do && zt_d16_ok(be) &&
           zt_att_in16_of(mc, be, training, sp) >= ZT_ATT_IN16O;
}

uint64_t zt_att_ws_of(zt_att_ws *a, int bwd, int bf16, int in16, int B, int T, int NH, int NKV, int hs,
                      const zt_attn_opts *o) {
    if (a && a->be && a->be->att_scratch) {
        int cudnn = 0;
        const size_t b = a->be->att_scratch(bwd, bf16 ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32, in16, B, T, NH, NKV, hs,
                                            o, &cudnn);
        a->asked++;
        a->cudnn += cudnn != 0;
        return (uint64_t)b;
    }
    return bwd ? zt_cuda_ws_gqa_ext_bwd(bf16, B, T, NH, NKV, hs, o->softcap)
               : zt_cuda_ws_gqa_ext_fwd(bf16, B, T, NH, NKV, hs, o->softcap);
}
