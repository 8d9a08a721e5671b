/* lora.c -- LoRA adapters: targets, the adapter model's layout, and the
 * adapter matmuls beside a base matmul (lora.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arch.h"
#include "internal.h"
#include "lora.h"
#include "model.h"

/* ------------------------------------------------------------ targets */

/* PEFT's rule for a string target: the module's full name equals it or
 * ends with "." + it.  Our paths are relative to a block, so a target
 * matches a path that equals it or ends with "." + it. */
static int target_matches(const char *path, const char *t, size_t tn) {
    size_t pn = strlen(path);
    if (pn == tn) return !strncmp(path, t, tn);
    return pn > tn && path[pn - tn - 1] == '.' && !strncmp(path + pn - tn, t, tn);
}

int zt_lora_plan(const zt_model_config *mc, zt_lora *lo, zt_status *st) {
    memset(lo, 0, sizeof *lo);
    const zt_arch *a = zt_arch_of(mc);
    if (mc->lora_r < 1)
        return zt_fail(st, ZT_EINVAL, "ztrain.lora.r=%d: the adapter rank must be >= 1",
                       mc->lora_r);
    if (!a->lora_mods)
        return zt_fail(st, ZT_EUNSUPPORTED, "LoRA is not available for ztrain.model.arch=%s",
                       a->name);
    zt_lora_mod all[ZT_LORA_MAX_MODS];
    int ng = 0;
    const int na = a->lora_mods(mc, all, &ng);
    int want[ZT_LORA_MAX_MODS] = {0};
    const char *spec = mc->lora_targets[0] ? mc->lora_targets : a->lora_default;
    if (!strcmp(spec, "all-linear")) {
        for (int i = 0; i < na; ++i) want[i] = 1;
    } else {
        for (const char *p = spec; *p;) {
            const char *e = strchr(p, ',');
            size_t tn = e ? (size_t)(e - p) : strlen(p);
            while (tn && p[0] == ' ') { ++p; --tn; }
            while (tn && p[tn - 1] == ' ') --tn;
            if (!tn)
                return zt_fail(st, ZT_EINVAL, "ztrain.lora.targets='%s': an empty module name",
                               spec);
            int hit = 0;
            for (int i = 0; i < na; ++i)
                if (target_matches(all[i].path, p, tn)) want[i] = hit = 1;
            if (!hit) {
                char names[256] = "";
                size_t k = 0;
                for (int i = 0; i < na && k < sizeof names; ++i) {
                    int dup = 0;   /* gpt2's two c_proj */
                    for (int j = 0; j < i; ++j) dup |= !strcmp(all[j].name, all[i].name);
                    if (!dup)
                        k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "",
                                              all[i].name);
                }
                return zt_fail(st, ZT_EINVAL, "ztrain.lora.targets: '%.*s' matches no module of "
                               "a %s block (its linear layers: %s; or all-linear)", (int)tn, p,
                               a->name, names);
            }
            p += tn;
            while (*p == ' ') ++p;
            if (*p == ',') ++p;
        }
    }
    lo->r = mc->lora_r;
    lo->dropout = (float)mc->lora_dropout;
    lo->acc = zt_w16_on(mc, ZT_W16_LORAACC);
    lo->L = mc->n_layer;
    lo->scale = (float)(mc->lora_rslora ? mc->lora_alpha / sqrt((double)mc->lora_r)
                                        : mc->lora_alpha / (double)mc->lora_r);
    lo->n_groups = ng;
    /* layout: group by group, its A's then its B^T's */
    size_t off = 0;
    const size_t r = (size_t)lo->r;
    for (int g = 0; g < ng; ++g) {
        zt_lora_group *G = &lo->groups[g];
        G->first = lo->n;
        for (int i = 0; i < na; ++i) {
            if (!want[i] || all[i].group != g) continue;
            G->in = all[i].in;
            lo->mods[lo->n++] = all[i];
            G->n++;
        }
        if (!G->n) continue;
        G->aoff = off;
        for (int j = 0; j < G->n; ++j) {
            const zt_lora_mod *m = &lo->mods[G->first + j];
            G->OUT = m->ooff + m->out > G->OUT ? m->ooff + m->out : G->OUT;
            off += r * (size_t)m->in;
        }
        for (int j = 0; j < G->n; ++j) {
            lo->boff[G->first + j] = off;
            off += r * (size_t)lo->mods[G->first + j].out;
        }
        /* the group's full output width: the widest module end of all its
         * modules, targeted or not */
        for (int i = 0; i < na; ++i)
            if (all[i].group == g && all[i].ooff + all[i].out > G->OUT) G->OUT = all[i].ooff + all[i].out;
        const size_t nr = r * (size_t)G->n;
        if (nr > lo->max_nr) lo->max_nr = nr;
        if ((size_t)G->OUT > lo->max_out) lo->max_out = (size_t)G->OUT;
        if ((size_t)G->OUT > lo->max_w) lo->max_w = (size_t)G->OUT;
        if ((size_t)G->in > lo->max_w) lo->max_w = (size_t)G->in;
    }
    lo->unit_numel = off;
    zt_lora_label_list(all, na, want, lo->targets, sizeof lo->targets);
    return ZT_OK;
}

int zt_lora_check(const zt_model_config *mc, zt_status *st) {
    zt_lora lo;
    ZT_TRY(zt_lora_plan(mc, &lo, st));
    return zt_lora_base_kind(mc, st) < 0 ? st->code : ZT_OK;
}

int zt_lora_base_kind(const zt_model_config *mc, zt_status *st) {
    const char *b = mc->lora_base;
    const int k = !b[0] ? 0 : !strcmp(b, "nf4") ? 1 : !strcmp(b, "nf4-dq") ? 2 : -1;
    if (k < 0) {
        zt_fail(st, ZT_EINVAL, "ztrain.lora.base='%s': one of \"\" (the compute dtype), nf4, nf4-dq", b);
        return -1;
    }
    if (k && strcmp(zt_arch_of(mc)->name, "llama")) {
        zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.base=%s: a 4-bit base is implemented for llama-family "
                "models (q,k,v,o,gate,up,down quantized), not for ztrain.model.arch=%s", b,
                zt_arch_of(mc)->name);
        return -1;
    }
    return k;
}

int zt_lora_base_quantized(const zt_model_config *mc, const char *tensor) {
    static const char *const q[] = {"q.w", "k.w", "v.w", "o.w", "gate.w", "up.w", "down.w"};
    int l, used = 0;
    if (zt_lora_base_kind(mc, NULL) <= 0 || sscanf(tensor, "h%d.%n", &l, &used) != 1 || !used) return 0;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i)
        if (!strcmp(tensor + used, q[i])) return 1;
    return 0;
}

void zt_lora_label_list(const zt_lora_mod *all, int na, const int *want, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < na && k < n; ++i) {
        if (!want[i]) continue;
        int dup = 0, whole = 1;   /* every module of this name targeted: the name */
        for (int j = 0; j < na; ++j)
            if (j != i && !strcmp(all[j].name, all[i].name)) {
                whole &= want[j] != 0;
                dup |= j < i && want[j];
            }
        if (whole && dup) continue;
        k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", whole ? all[i].name : all[i].path);
    }
}

void zt_lora_target_list(const zt_lora *lo, char *buf, size_t n) { snprintf(buf, n, "%s", lo->targets); }

size_t zt_lora_num_params(const zt_lora *lo) { return lo->unit_numel * (size_t)lo->L; }

size_t zt_lora_d_numel(const zt_lora *lo, size_t N) {
    if (!lo->acc) return N * lo->max_w;
    if (lo->dropout <= 0) return 0;
    size_t in = 0;
    for (int g = 0; g < lo->n_groups; ++g)
        if (lo->groups[g].n && (size_t)lo->groups[g].in > in) in = (size_t)lo->groups[g].in;
    return N * in;
}

/* ------------------------------------------------------------ the adapter model */

typedef struct lora_self {
    zt_lora lo;
} lora_self;

static int lora_describe(void *self, zt_layout *Lo, zt_status *st) {
    const zt_lora *lo = &((lora_self *)self)->lo;
    const int r = lo->r;
    for (int l = 0; l < lo->L; ++l) {
        char un[24], tn[64];
        snprintf(un, sizeof un, "lora.%d", l);
        ZT_TRY(zt_layout_unit(Lo, un, st));
        for (int g = 0; g < lo->n_groups; ++g) {
            const zt_lora_group *G = &lo->groups[g];
            for (int j = 0; j < G->n; ++j) {   /* A [r, in]: U(-1/sqrt(in), 1/sqrt(in)) */
                const zt_lora_mod *m = &lo->mods[G->first + j];
                snprintf(tn, sizeof tn, "h%d.%s.lora_A", l, m->path);
                ZT_TRY(zt_layout_tensor(Lo, tn, r, m->in, ZT_INIT_UNIFORM, 1.0 / sqrt((double)m->in),
                                        ZT_TENSOR_DECAY, NULL, st));
            }
            for (int j = 0; j < G->n; ++j) {   /* B^T [r, out]: zero */
                const zt_lora_mod *m = &lo->mods[G->first + j];
                snprintf(tn, sizeof tn, "h%d.%s.lora_B", l, m->path);
                ZT_TRY(zt_layout_tensor(Lo, tn, r, m->out, ZT_INIT_ZEROS, 0, ZT_TENSOR_DECAY, NULL,
                                        st));
            }
        }
    }
    return ZT_OK;
}

/* The adapter model is only laid out and trained through its engine: the
 * base model computes with it, so these are never called. */
static int lora_acts_create(void *self, int B, int T, int training, int tag, void **acts,
                            zt_status *st) {
    (void)self; (void)B; (void)T; (void)training; (void)tag;
    *acts = NULL;
    return zt_fail(st, ZT_EINTERNAL, "the LoRA adapter model has no activations of its own");
}
static void lora_acts_free(void *self, void *acts) { (void)self; (void)acts; }
static int lora_forward(void *self, zt_units *U, void *acts, const int *inputs, const int *targets,
                        int B, int T, double *loss_sum, zt_status *st) {
    (void)self; (void)U; (void)acts; (void)inputs; (void)targets; (void)B; (void)T; (void)loss_sum;
    return zt_fail(st, ZT_EINTERNAL, "the LoRA adapter model computes inside its base model");
}
static int lora_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    (void)self; (void)U; (void)acts; (void)dloss;
    return zt_fail(st, ZT_EINTERNAL, "the LoRA adapter model computes inside its base model");
}
static void lora_destroy(void *self) { free(self); }

static const zt_model_ops lora_ops = {
    "lora", lora_describe, lora_acts_create, lora_acts_free, lora_forward, lora_backward, NULL,
    lora_destroy,
};

int zt_lora_model_create(const zt_lora *lo, const zt_model_config *mc, const zt_backend *be,
                         int flags, zt_model **out, zt_status *st) {
    lora_self *s = calloc(1, sizeof *s);
    if (!s) return zt_fail(st, ZT_ENOMEM, "out of memory (LoRA adapters)");
    s->lo = *lo;
    int rc = zt_model_create(&lora_ops, s, mc, be, flags, out, st);
    if (rc != ZT_OK) free(s);
    return rc;
}

/* ------------------------------------------------------------ compute */

/* bt[n r, OUT] = the group's B^T rows at their column offsets (zeros
 * elsewhere); a group of one module spanning the output is its B^T itself.
 * (bt2d: module j's [r, out] placed by one copy2d, else one copy a row)
 * es: the element's bytes -- 4 the fp32 adapters ad, 2 their bf16 bits
 * (lora.h ad16; bf16 zero is 0: the rounding of the fp32 placement's) */
static const void *place_bt(const zt_backend *be, const zt_lora *lo, const zt_lora_group *G,
                            const void *ad, void *bt, size_t es) {
    const zt_lora_mod *m0 = &lo->mods[G->first];
    if (G->n == 1 && m0->ooff == 0 && m0->out == G->OUT)
        return (const char *)ad + lo->boff[G->first] * es;
    const size_t r = (size_t)lo->r, OUT = (size_t)G->OUT;
    be->zero(bt, (size_t)G->n * r * OUT * es);
    for (int j = 0; j < G->n; ++j) {
        const zt_lora_mod *m = &lo->mods[G->first + j];
        const char *b = (const char *)ad + lo->boff[G->first + j] * es;
        const size_t w = (size_t)m->out * es;
        char *dst = (char *)bt + ((size_t)j * r * OUT + (size_t)m->ooff) * es;
        if (lo->bt2d && be->copy2d) {
            be->copy2d(dst, OUT * es, b, w, w, r);
            continue;
        }
        for (size_t i = 0; i < r; ++i) be->copy(dst + i * OUT * es, b + i * w, w);
    }
    return bt;
}

/* A GEMM's weight operand: the fp32 values f, and their bf16 bits h where
 * the block has them (lora.h ad16; NULL: none) -- the GEMMs read h where an
 * entry takes a bf16 weight (the *_w16 / *_a16 entries, bitwise the fp32
 * entry on f, which rounds f to h in bf16 matmul mode), else f.  A placed
 * bf16 B^T has no f. */
typedef struct lora_w {
    const float *f;
    const uint16_t *h;
} lora_w;
static lora_w w_at(lora_w w, size_t o) {
    lora_w r = {w.f ? w.f + o : NULL, w.h ? w.h + o : NULL};
    return r;
}
/* The adapters' elements from offset o (an A) */
static lora_w ad_w(const float *ad, const zt_lora_scratch *sc, size_t o) {
    lora_w r = {ad + o, sc->ad16 ? sc->ad16 + o : NULL};
    return r;
}
/* The group's B^T (place_bt into the scratch bt): bf16 from ad16 where
 * the block has it and the GEMM reading it takes a bf16 weight (want16;
 * matmul_dinp_acc does not), else fp32 */
static lora_w group_btw(const zt_backend *be, const zt_lora *lo, const zt_lora_group *G,
                        const float *ad, const zt_lora_scratch *sc, int want16) {
    lora_w r = {NULL, NULL};
    if (want16 && sc->ad16) r.h = place_bt(be, lo, G, sc->ad16, sc->bt, sizeof(uint16_t));
    else r.f = place_bt(be, lo, G, ad, sc->bt, sizeof(float));
    return r;
}
/* out[N, OC] = inp[N, C] w^T (inp16: inp's bf16 bits, read instead) */
static void w_fwd(const zt_backend *be, float *out, const float *inp, const uint16_t *inp16,
                  lora_w w, int N, int C, int OC) {
    if (inp16) be->matmul_fwd_a16(out, inp16, w.f, w.h, NULL, N, C, OC);
    else if (w.h) be->matmul_fwd_w16(out, inp, w.h, NULL, N, C, OC);
    else be->matmul_fwd(out, inp, w.f, NULL, N, C, OC);
}
/* dinp[N, C] = dout[N, OC] w */
static void w_dinp(const zt_backend *be, float *dinp, const float *dout, lora_w w, int N, int C,
                   int OC) {
    if (w.h) be->matmul_bwd_w16(dinp, NULL, NULL, dout, NULL, w.h, N, C, OC);
    else be->matmul_bwd(dinp, NULL, NULL, dout, NULL, w.f, N, C, OC);
}

/* The group's B^T gradients in gad += their blocks of dbt[n r, OUT]
 * (module j: rows [j r, (j + 1) r), columns [ooff, ooff + out)).  bt2d:
 * each module's block gathered by one copy2d into tmp laid out as the
 * group's B^T's are in gad (adjacent there: zt_lora_plan), then ONE add
 * over all of them -- element by element the additions of before, one add
 * a row and module (tmp: [n r, OUT] floats, the forward's bt, dead here). */
static void group_dbt_add(const zt_backend *be, const zt_lora *lo, const zt_lora_group *G,
                          float *gad, const float *dbt, float *tmp) {
    const size_t r = (size_t)lo->r, OUT = (size_t)G->OUT, b0 = lo->boff[G->first];
    if (lo->bt2d && be->copy2d) {
        for (int j = 0; j < G->n; ++j) {
            const zt_lora_mod *m = &lo->mods[G->first + j];
            const size_t w = (size_t)m->out * sizeof(float);
            be->copy2d(tmp + (lo->boff[G->first + j] - b0), w,
                       dbt + (size_t)j * r * OUT + (size_t)m->ooff, OUT * sizeof(float), w, r);
        }
        const zt_lora_mod *ml = &lo->mods[G->first + G->n - 1];
        const size_t n = lo->boff[G->first + G->n - 1] + r * (size_t)ml->out - b0;
        be->add(gad + b0, gad + b0, tmp, n);
        return;
    }
    for (int j = 0; j < G->n; ++j) {
        const zt_lora_mod *m = &lo->mods[G->first + j];
        float *gb = gad + lo->boff[G->first + j];
        for (size_t i = 0; i < r; ++i)
            be->add(gb + i * (size_t)m->out, gb + i * (size_t)m->out,
                    dbt + ((size_t)j * r + i) * OUT + (size_t)m->ooff, (size_t)m->out);
    }
}

/* dw[nr, OUT] (+=) = h^T dy, and dh[N, nr] = dy bt^T (bt: B^T [nr, OUT]);
 * dy16: dy's bf16 copy, the GEMMs' dy operand as it is (the *_a16 entries,
 * bitwise the fp32 entries, which round dy to it) */
static void lora_hdy(const zt_backend *be, float *dw, const float *h, const float *dy,
                     const uint16_t *dy16, int N, int OUT, int nr) {
    if (dy16) be->matmul_bwd_a16(NULL, dw, NULL, h, dy16, NULL, NULL, N, OUT, nr);
    else be->matmul_bwd(NULL, dw, NULL, h, dy, NULL, N, OUT, nr);
}
static void lora_dyb(const zt_backend *be, float *dh, const float *dy, const uint16_t *dy16,
                     lora_w bt, int N, int OUT, int nr) {
    w_fwd(be, dh, dy, dy16, bt, N, OUT, nr);
}

/* ------------------------------------------------------------ dropout */

void zt_lora_drop_at(zt_lora_scratch *sc, const zt_lora *lo, const struct zt_units *U, int l,
                     int T) {
    long step;
    uint64_t sample0, seed;
    sc->drop.on = lo->dropout > 0 && zt_units_drop_pass(U, &step, &sample0, &seed);
    if (!sc->drop.on) return;
    sc->drop.key = zt_hash3(seed ^ 0x4c6f5241447270ULL, (uint64_t)step, (uint64_t)l);
    sc->drop.row0 = sample0 * (uint64_t)T;
}

uint64_t zt_lora_drop_key(const zt_lora_drop *d, int i) {
    return zt_hash3(d->key, (uint64_t)i, 0x632be59bd9b4e019ULL);
}

/* out[N, C] += dout[N, OC] w[OC, C]: lo->acc, the GEMM adds it
 * (matmul_dinp_acc); else the product into d, then add (bitwise the same) */
static void acc_product(const zt_backend *be, const zt_lora *lo, float *out, float *d,
                        const float *dout, lora_w w, int N, int C, int OC) {
    if (lo->acc) {   /* (fp32 w: matmul_dinp_acc has no bf16 weight) */
        be->matmul_dinp_acc(out, dout, w.f, N, C, OC);
        return;
    }
    w_dinp(be, d, dout, w, N, C, OC);
    be->add(out, out, d, (size_t)N * C);
}

/* The group's forward with dropout: module by module (each its own mask,
 * as PEFT's per-module nn.Dropout), d = dropout(x); h = s d A_j^T; out +=
 * h B_j (B_j: rows [j r, (j+1) r) of the group's B^T). */
static void fwd_drop(const zt_backend *be, const zt_lora *lo, const zt_lora_group *G,
                     const float *ad, const float *x, float *out, int N, const zt_lora_scratch *sc) {
    const size_t r = (size_t)lo->r, in = (size_t)G->in, OUT = (size_t)G->OUT;
    const lora_w bt = group_btw(be, lo, G, ad, sc, !lo->acc);
    for (int j = 0; j < G->n; ++j) {
        be->dropout(sc->d, x, (size_t)N, in, zt_lora_drop_key(&sc->drop, G->first + j),
                    sc->drop.row0, lo->dropout);
        const lora_w a = ad_w(ad, sc, G->aoff + (size_t)j * r * in);
        w_fwd(be, sc->h, sc->d, NULL, a, N, (int)in, (int)r);
        be->scale(sc->h, (size_t)N * r, lo->scale);
        acc_product(be, lo, out, sc->d, sc->h, w_at(bt, (size_t)j * r * OUT), N, (int)OUT, (int)r);
    }
}

/* Its backward, the same masks regenerated: per module, d = dropout(x),
 * h = s d A_j^T, dB_j^T += h^T dy, dh = s dy B_j, dA_j += dh^T d,
 * dx += dropout(dh A_j) (the product masked before its add: into d, then
 * add, with lo->acc too). */
static void bwd_drop(const zt_backend *be, const zt_lora *lo, const zt_lora_group *G,
                     const float *ad, float *gad, const float *x, const float *dy,
                     const uint16_t *dy16, float *dx, int N, const zt_lora_scratch *sc) {
    const size_t r = (size_t)lo->r, in = (size_t)G->in, OUT = (size_t)G->OUT;
    const zt_lora_mod *m0 = &lo->mods[G->first];
    const int single = G->n == 1 && m0->ooff == 0 && m0->out == G->OUT;
    const lora_w bt = group_btw(be, lo, G, ad, sc, 1);
    if (!single) be->zero(sc->dbt, (size_t)G->n * r * OUT * sizeof(float));
    for (int j = 0; j < G->n; ++j) {
        const uint64_t key = zt_lora_drop_key(&sc->drop, G->first + j);
        const size_t ao = G->aoff + (size_t)j * r * in;
        be->dropout(sc->d, x, (size_t)N, in, key, sc->drop.row0, lo->dropout);
        w_fwd(be, sc->h, sc->d, NULL, ad_w(ad, sc, ao), N, (int)in, (int)r);
        be->scale(sc->h, (size_t)N * r, lo->scale);
        float *gbt = single ? gad + lo->boff[G->first] : sc->dbt + (size_t)j * r * OUT;
        lora_hdy(be, gbt, sc->h, dy, dy16, N, (int)OUT, (int)r);
        lora_dyb(be, sc->dh, dy, dy16, w_at(bt, (size_t)j * r * OUT), N, (int)OUT, (int)r);
        be->scale(sc->dh, (size_t)N * r, lo->scale);
        be->matmul_bwd(NULL, gad + ao, NULL, sc->dh, sc->d, NULL, N, (int)in, (int)r);
        w_dinp(be, sc->d, sc->dh, ad_w(ad, sc, ao), N, (int)in, (int)r);
        be->dropout(sc->d, sc->d, (size_t)N, in, key, sc->drop.row0, lo->dropout);
        be->add(dx, dx, sc->d, (size_t)N * in);
    }
    if (!single) group_dbt_add(be, lo, G, gad, sc->dbt, sc->bt);
}

/* h[N, nr] = x A^T of group G (x16: the bf16 input) */
static void lora_xa(const zt_backend *be, const zt_lora_group *G, const float *ad, const float *x,
                    const uint16_t *x16, float *h, int N, int nr, const zt_lora_scratch *sc) {
    w_fwd(be, h, x, x16, ad_w(ad, sc, G->aoff), N, G->in, nr);
}

/* h[N, nr] = s * x A^T of group G, into the slot's kept h where there is
 * one (sc->keep), else sc->h; returns it */
static float *lora_fwd_h(const zt_backend *be, const zt_lora *lo, int g, const float *ad,
                         const float *x, const uint16_t *x16, int N, const zt_lora_scratch *sc) {
    const zt_lora_group *G = &lo->groups[g];
    const int nr = G->n * lo->r;
    float *h = sc->keep && sc->keep[g] ? sc->keep[g] : sc->h;
    lora_xa(be, G, ad, x, x16, h, N, nr, sc);
    be->scale(h, (size_t)N * nr, lo->scale);
    return h;
}

void zt_lora_fwd(const zt_backend *be, const zt_lora *lo, int g, const float *ad, const float *x,
                 const uint16_t *x16, float *out, int N, const zt_lora_scratch *sc) {
    const zt_lora_group *G = &lo->groups[g];
    if (!G->n) return;
    if (sc->drop.on) {
        fwd_drop(be, lo, G, ad, x, out, N, sc);
        return;
    }
    const int nr = G->n * lo->r;
    /* h[N, nr] = s * x A^T (into the slot's kept h where there is one);
     * out[N, OUT] += h B (B^T as the matmul's [OC, C] = [nr, OUT]) */
    float *h = lora_fwd_h(be, lo, g, ad, x, x16, N, sc);
    const lora_w bt = group_btw(be, lo, G, ad, sc, !lo->acc);
    acc_product(be, lo, out, sc->d, h, bt, N, G->OUT, nr);
}

int zt_lora_fwd_first(const zt_backend *be, const zt_lora *lo, int g, const float *ad,
                      const float *x, const uint16_t *x16, float *out, int N,
                      const zt_lora_scratch *sc) {
    const zt_lora_group *G = &lo->groups[g];
    if (!lo->swap || !G->n || sc->drop.on) return 0;
    const int nr = G->n * lo->r;
    /* h[N, nr] = s * x A^T (kept as zt_lora_fwd's); out[N, OUT] = h B
     * (zt_lora_fwd's product, beta 0) */
    const float *h = lora_fwd_h(be, lo, g, ad, x, x16, N, sc);
    w_dinp(be, out, h, group_btw(be, lo, G, ad, sc, 1), N, G->OUT, nr);
    return 1;
}

int zt_lora_fwd_first16(const zt_backend *be, const zt_lora *lo, int g, const float *ad,
                        const float *x, const uint16_t *x16, uint16_t *out16, float *tmp,
                        uint16_t *h16, int N, const zt_lora_scratch *sc) {
    const zt_lora_group *G = &lo->groups[g];
    if (!lo->swap || !G->n || sc->drop.on || !be->matmul_bwd_o16) return 0;
    const int nr = G->n * lo->r;
    /* h[N, nr] = s * x A^T (kept as zt_lora_fwd's); h16 = bf16(h), the
     * operand w_dinp's GEMM rounds; out16[N, OUT] = bf16(h16 B) */
    const float *h = lora_fwd_h(be, lo, g, ad, x, x16, N, sc);
    be->to_bf16(h16, h, (size_t)N * nr);
    const lora_w bt = group_btw(be, lo, G, ad, sc, 1);
    be->matmul_bwd_o16(out16, tmp, NULL, NULL, NULL, h16, NULL, NULL, bt.f, bt.h, N, G->OUT, nr);
    return 1;
}

/* zt_lora_bwd, zt_lora_bwd_first and zt_lora_bwd_first16 (first: dx
 * written, not added to; dx16 != NULL: written in bf16 into dx16 instead,
 * tmp its GEMM's fp32 scratch; no dropout then) */
static void lora_bwd(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                     const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                     float *dx, int N, const zt_lora_scratch *sc, int first, uint16_t *dx16,
                     float *tmp) {
    const zt_lora_group *G = &lo->groups[g];
    if (!G->n) return;
    if (!lo->bt2d) dy16 = NULL;   /* (ZT_TEST_NO_LORABT: the GEMMs round dy) */
    if (sc->drop.on) {
        bwd_drop(be, lo, G, ad, gad, x, dy, dy16, dx, N, sc);
        return;
    }
    const int nr = G->n * lo->r, OUT = G->OUT;
    /* h = s * x A^T: the forward's, kept in the block's slot (sc->keep:
     * the same fp32 values), else recomputed into sc->h */
    const float *h = sc->keep && sc->keep[g] ? sc->keep[g] : sc->h;
    if (h == sc->h) {
        lora_xa(be, G, ad, x, x16, sc->h, N, nr, sc);
        be->scale(sc->h, (size_t)N * nr, lo->scale);
    }
    /* dB^T[nr, OUT] += h^T dy: straight into the gradient when the group is
     * one module spanning the output, else through dbt and the rows taken */
    const zt_lora_mod *m0 = &lo->mods[G->first];
    if (G->n == 1 && m0->ooff == 0 && m0->out == OUT) {
        lora_hdy(be, gad + lo->boff[G->first], h, dy, dy16, N, OUT, nr);
    } else {
        be->zero(sc->dbt, (size_t)nr * OUT * sizeof(float));
        lora_hdy(be, sc->dbt, h, dy, dy16, N, OUT, nr);
        group_dbt_add(be, lo, G, gad, sc->dbt, sc->bt);   /* (bt: placed below) */
    }
    /* dh[N, nr] = s * dy B; dA[nr, in] += dh^T x; dx += dh A */
    const lora_w bt = group_btw(be, lo, G, ad, sc, 1);
    lora_dyb(be, sc->dh, dy, dy16, bt, N, OUT, nr);
    be->scale(sc->dh, (size_t)N * nr, lo->scale);
    if (x16) be->matmul_bwd_a16(NULL, gad + G->aoff, NULL, sc->dh, x16, NULL, NULL, N, G->in, nr);
    else be->matmul_bwd(NULL, gad + G->aoff, NULL, sc->dh, x, NULL, N, G->in, nr);
    /* (first16: dx16 = bf16(dh A): dh rounded to bf16 into h's scratch
     * (h read above, by dB^T's GEMM, and dead now; [N, nr] bf16 in its [N,
     * max_nr] floats), the operand w_dinp's GEMM rounds, then the product
     * written in bf16 by matmul_bwd_o16: to_bf16 of first's dx) */
    if (dx16) {
        uint16_t *dh16 = (uint16_t *)(void *)sc->h;
        be->to_bf16(dh16, sc->dh, (size_t)N * nr);
        const lora_w a = ad_w(ad, sc, G->aoff);
        be->matmul_bwd_o16(dx16, tmp, NULL, NULL, NULL, dh16, NULL, NULL, a.h ? NULL : a.f, a.h, N,
                           G->in, nr);
        return;
    }
    /* (first: dx = dh A, acc_product's product with beta 0) */
    if (first) w_dinp(be, dx, sc->dh, ad_w(ad, sc, G->aoff), N, G->in, nr);
    else acc_product(be, lo, dx, sc->d, sc->dh, ad_w(ad, sc, G->aoff), N, G->in, nr);
}

void zt_lora_bwd(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                 const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                 float *dx, int N, const zt_lora_scratch *sc) {
    lora_bwd(be, lo, g, ad, gad, x, x16, dy, dy16, dx, N, sc, 0, NULL, NULL);
}

int zt_lora_bwd_first(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                      const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                      float *dx, int N, const zt_lora_scratch *sc) {
    if (!lo->bswap || !lo->groups[g].n || sc->drop.on) return 0;
    lora_bwd(be, lo, g, ad, gad, x, x16, dy, dy16, dx, N, sc, 1, NULL, NULL);
    return 1;
}

int zt_lora_bwd_first16(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                        const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                        uint16_t *dx16, float *tmp, int N, const zt_lora_scratch *sc) {
    if (!lo->bswap || !lo->groups[g].n || sc->drop.on || !be->matmul_bwd_o16 || !sc->h) return 0;
    lora_bwd(be, lo, g, ad, gad, x, x16, dy, dy16, NULL, N, sc, 1, dx16, tmp);
    return 1;
}
