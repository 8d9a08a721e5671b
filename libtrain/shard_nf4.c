/* shard_nf4.c -- a frozen NF4 base (QLoRA) in the ZeRO engine (shard.h,
 * docs/lora.md "QLoRA").
 *
 * Layout of one unit u (n elements, tensors t_0 .. t_k):
 *   quantized tensors  each quantized whole (bitsandbytes' quantize_4bit,
 *                      blocks of 64 from the tensor's first element); the
 *                      unit's blocks are the tensors' blocks one after the
 *                      other: block j has code bytes [32 j, 32 j + 32) (a
 *                      tensor's last, short block is padded) and absmax[j]
 *                      (nf4) or qabsmax[j] (nf4-dq; absmax2 and the offset
 *                      of each tensor are kept whole on every rank: 1 float
 *                      per 16384 weights)
 *   rest               the unit's other elements in layout order, compact,
 *                      in the storage precision (fp32 or 16-bit)
 * Stages 0-2 keep everything on every rank.  Stage 3 cuts the blocks and
 * the rest each into G contiguous slices (ceil(nb / G) blocks, ceil(rest /
 * G) elements) and all-gathers them per unit (bytes for the codes and
 * qabsmax, fp32 for the absmax, the storage type for the rest) when the
 * unit is asked for; the compute copy is then built and the gathered
 * buffers freed.  No prefetch: the gathers are blocking.
 *
 * Compute copy: the rest widened (fp32: copied) to its places, every
 * quantized tensor dequantized by the backend's nf4_dequant in fp32 and,
 * with bf16 / fp16 storage, rounded to it (what dequantize_4bit gives in a
 * model loaded in that dtype).  Where the GEMMs read bf16 weights
 * (zt_shard_weights16, zt_shard_prec.nf4w16) a unit with NF4 tensors is
 * instead built in bf16 whole -- the rest copied to its places, the NF4
 * tensors dequantized straight into bf16 (nf4_dequant's out_bf16: the same
 * rounding) -- kept as zt_unit_params16's until the release, and its fp32
 * copy holds only the tensors other than the GEMM-only ones, widened from
 * it: no fp32 copy of the NF4 matrices, bitwise the same values.  A bf16 / fp16 base is rounded to 16 bits
 * before it is quantized, as transformers quantizes the weights it loaded
 * in the model's dtype.  The double-quantization offset is torch's mean
 * with one thread (zt_nf4_torch NULL).
 *
 * Temporaries (zt_shard_prec.nf4view; the test hook ZT_TEST_NO_NF4VIEW
 * restores the zero-filled gathered copies): every buffer of the compute
 * copy is wholly overwritten before it is read, so it is allocated without
 * the zero fill (ZT_MEM_NOZERO; the unit's fp32 copy and bf16 copy only
 * where its rest segments and NF4 tensors tile it, `tiled`, checked at
 * creation), and where the store is not sharded (stages 0-2, a one-rank
 * group: the rank holds every block and the whole rest) the copy reads the
 * store's codes, absmax / qabsmax and rest in place: no gathered copies.
 * A unit kept as its 16-bit rest (below, `keep`) then lends the store's
 * rest as zt_unit_params16's (`lent`: the release does not free it).
 *
 * Parameter offload (zero_optimization.offload_param, stage 3 only:
 * shard.c refuses it elsewhere): each rank's slices of the store -- rest,
 * codes, absmax / qabsmax -- are host memory, tagged as shard.c tags its
 * offloaded shards (ZT_MEM_PARAMS | ZT_MEM_ON_HOST, | ZT_MEM_PIN with
 * offload_param.pin_memory); absmax2 (nf4-dq: whole on every rank, 4 bytes
 * per 16384 weights) stays device memory, read by nf4_dequant.  The
 * quantization writes the slices with memcpy; the compute copy uploads the
 * own slices into the gathered device buffers (be->to_device) before the
 * all-gathers, and is never built from host memory: the store is not read
 * in place (no `inplace`) even where it is not sharded (a one-rank group),
 * so the rest, codes and absmax / qabsmax are always gathered copies.  On
 * the cpu backend host memory is its memory: the same buffers and tags,
 * plain copies.
 */
#include <stdlib.h>
#include <string.h>
#include "devmem.h"
#include "nf4.h"
#include "shard.h"

typedef struct nf4_tensor {
    size_t uoff, n;      /* in the unit */
    size_t b0;           /* its first block among the unit's blocks */
    size_t a2off;        /* nf4-dq: its absmax2 in the unit's absmax2 array */
    float offset;        /* nf4-dq */
} nf4_tensor;

typedef struct nf4_unit {
    int nt;
    nf4_tensor *t;
    size_t nb, na2;           /* blocks; absmax2 entries (dq) */
    size_t rest_n;
    int nseg;                 /* rest segments: [soff[i], soff[i] + sn[i]) of the unit */
    size_t *soff, *sn;
    int tiled;                /* the segments and the NF4 tensors tile [0, numel) */
    int lent;                 /* sh->gathered[u] is rest, lent (in place, keep) */
    int *rc, *rd;             /* stage 3: rest counts / displacements (elements) */
    int *cc, *cd;             /* stage 3: code bytes counts / displacements */
    int *bc, *bd;             /* stage 3: blocks counts / displacements */
    size_t rlo, rlen, blo, blen;   /* this rank's rest elements and blocks */
    void *rest;               /* [rlen] storage type, backend memory */
    uint8_t *codes;           /* [32 blen] */
    float *absmax;            /* [blen] (nf4) */
    uint8_t *qabsmax;         /* [blen] (nf4-dq) */
    float *absmax2;           /* [na2] (nf4-dq) */
} nf4_unit;

struct zt_nf4_store {
    int dq;
    int w16;                  /* zt_shard_prec.nf4w16 */
    int nz;                   /* zt_shard_prec.nf4view: temporaries unzeroed (ZT_MEM_NOZERO) */
    int inplace;              /* nf4view, not sharded, not offloaded: the store read in place */
    int host;                 /* offload_param: the slices are host memory (absmax2 is not) */
    nf4_unit *u;
    size_t bytes;
    size_t host_bytes;        /* of bytes, in host memory (host) */
};

static int mixed(const zt_shard *sh) { return sh->prec != ZT_PREC_FP32; }

static int slices(size_t n, int g, int **c, int **d, size_t unit) {
    *c = calloc((size_t)g, sizeof(int));
    *d = calloc((size_t)g, sizeof(int));
    if (!*c || !*d) return ZT_ENOMEM;
    const size_t S = (n + (size_t)g - 1) / (size_t)g;
    for (int i = 0; i < g; ++i) {
        size_t a = (size_t)i * S, b = a + S;
        if (a > n) a = n;
        if (b > n) b = n;
        (*c)[i] = (int)((b - a) * unit);
        (*d)[i] = (int)(a * unit);
    }
    return ZT_OK;
}

int zt_nf4s_create(zt_shard *sh, const zt_shard_prec *p, zt_status *st) {
    zt_model *m = sh->m;
    struct zt_nf4_store *q = calloc(1, sizeof *q);
    if (!q) return zt_fail(st, ZT_ENOMEM, "out of memory (NF4 base)");
    sh->q = q;
    q->dq = p->nf4 == 2;
    q->w16 = p->nf4w16;
    q->nz = p->nf4view;
    q->host = p->offload_param;   /* (stage 3: shard.c checked it) */
    q->inplace = p->nf4view && !q->host && (sh->stage != 3 || sh->G == 1);
    /* the slices' tag: offloaded as shard.c's host_params shards (ptag) */
    const int tag = ZT_MEM_PARAMS |
                    (q->host ? ZT_MEM_ON_HOST | (p->pin_param ? ZT_MEM_PIN : 0) : 0);
    if (!(q->u = calloc((size_t)sh->nu, sizeof *q->u))) return zt_fail(st, ZT_ENOMEM, "out of memory");
    const int g = sh->stage == 3 ? sh->G : 1, r = sh->stage == 3 ? sh->r : 0;
    for (int u = 0; u < sh->nu; ++u) {
        nf4_unit *qu = &q->u[u];
        const zt_unit_info *ui = &m->units[u];
        const int nt = ui->n_tensors;
        qu->t = calloc((size_t)nt + 1, sizeof *qu->t);
        qu->soff = calloc((size_t)nt + 1, sizeof(size_t));
        qu->sn = calloc((size_t)nt + 1, sizeof(size_t));
        if (!qu->t || !qu->soff || !qu->sn) return zt_fail(st, ZT_ENOMEM, "out of memory");
        size_t at = 0;   /* tiled: each tensor starts where the one before ends */
        qu->tiled = 1;
        for (int ti = ui->first_tensor; ti < ui->first_tensor + nt; ++ti) {
            const zt_tensor_info *t = &m->tensors[ti];
            const size_t uoff = t->offset - ui->offset;
            if (uoff != at) qu->tiled = 0;
            at = uoff + t->numel;
            if (p->nf4_tensor && p->nf4_tensor[ti]) {
                nf4_tensor *x = &qu->t[qu->nt++];
                x->uoff = uoff;
                x->n = t->numel;
                x->b0 = qu->nb;
                x->a2off = qu->na2;
                qu->nb += zt_nf4_blocks(t->numel);
                qu->na2 += zt_nf4_blocks2(t->numel);
            } else if (qu->nseg && qu->soff[qu->nseg - 1] + qu->sn[qu->nseg - 1] == uoff) {
                qu->sn[qu->nseg - 1] += t->numel;   /* adjacent: one segment */
                qu->rest_n += t->numel;
            } else {
                qu->soff[qu->nseg] = uoff;
                qu->sn[qu->nseg++] = t->numel;
                qu->rest_n += t->numel;
            }
        }
        if (at != ui->numel) qu->tiled = 0;
        if (slices(qu->rest_n, g, &qu->rc, &qu->rd, 1) || slices(qu->nb, g, &qu->cc, &qu->cd, 32) ||
            slices(qu->nb, g, &qu->bc, &qu->bd, 1))
            return zt_fail(st, ZT_ENOMEM, "out of memory");
        qu->rlo = (size_t)qu->rd[r];
        qu->rlen = (size_t)qu->rc[r];
        qu->blo = (size_t)qu->bd[r];
        qu->blen = (size_t)qu->bc[r];
        const size_t rb = (qu->rlen ? qu->rlen : 1) * sh->pes, bl = qu->blen ? qu->blen : 1;
        if (!(qu->rest = zt_mem_alloc(rb, tag, st)) ||
            !(qu->codes = zt_mem_alloc(32 * bl, tag, st)) ||
            (!q->dq && !(qu->absmax = zt_mem_alloc(bl * sizeof(float), tag, st))) ||
            (q->dq && !(qu->qabsmax = zt_mem_alloc(bl, tag, st))) ||
            (q->dq && !(qu->absmax2 = zt_mem_alloc((qu->na2 ? qu->na2 : 1) * sizeof(float),
                                                   ZT_MEM_PARAMS, st))))
            return zt_fail_prefix(st, "NF4 base, unit %s", ui->name);
        const size_t sl = rb + 32 * bl + (q->dq ? bl : bl * sizeof(float));   /* the slices */
        q->bytes += sl + (q->dq ? (qu->na2 ? qu->na2 : 1) * sizeof(float) : 0);
        if (q->host) q->host_bytes += sl;
    }
    return ZT_OK;
}

void zt_nf4s_free(zt_shard *sh) {
    struct zt_nf4_store *q = sh->q;
    if (!q) return;
    for (int u = 0; q->u && u < sh->nu; ++u) {
        nf4_unit *qu = &q->u[u];
        free(qu->t); free(qu->soff); free(qu->sn);
        free(qu->rc); free(qu->rd); free(qu->cc); free(qu->cd); free(qu->bc); free(qu->bd);
        zt_mem_free(qu->rest); zt_mem_free(qu->codes); zt_mem_free(qu->absmax);
        zt_mem_free(qu->qabsmax); zt_mem_free(qu->absmax2);
    }
    free(q->u);
    free(q);
    sh->q = NULL;
}

size_t zt_nf4s_bytes(const zt_shard *sh) { return sh->q ? sh->q->bytes : 0; }

size_t zt_nf4s_host_bytes(const zt_shard *sh) { return sh->q ? sh->q->host_bytes : 0; }

int zt_nf4s_lent(const zt_shard *sh, int u) { return sh->q && sh->q->u && sh->q->u[u].lent; }

int zt_nf4s_tiled(const zt_shard *sh, int u) { return sh->q && sh->q->u && sh->q->u[u].tiled; }

int zt_nf4s_set_unit_host(zt_shard *sh, int u, const float *vals, zt_status *st) {
    const zt_backend *be = sh->be, *cpu = zt_backend_cpu();
    struct zt_nf4_store *q = sh->q;
    nf4_unit *qu = &q->u[u];
    const zt_unit_info *ui = &sh->m->units[u];
    /* the host staging of this rank's share: rest [rest_n] fp32 then narrowed,
     * codes [32 nb], absmax / qabsmax [nb] */
    float *rest = malloc((qu->rest_n ? qu->rest_n : 1) * sizeof(float));
    uint16_t *r16 = malloc((qu->rest_n ? qu->rest_n : 1) * 2);
    uint8_t *codes = calloc(32 * (qu->nb ? qu->nb : 1), 1), *qam = calloc(qu->nb ? qu->nb : 1, 1);
    float *am = calloc(qu->nb ? qu->nb : 1, sizeof(float));
    float *a2 = calloc(qu->na2 ? qu->na2 : 1, sizeof(float));
    size_t maxn = 1;
    for (int i = 0; i < qu->nt; ++i) if (qu->t[i].n > maxn) maxn = qu->t[i].n;
    float *w = malloc(maxn * sizeof(float));
    uint16_t *w16 = malloc(maxn * 2);
    int rc = ZT_OK;
    if (!rest || !r16 || !codes || !qam || !am || !a2 || !w || !w16) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (quantizing unit %s)", ui->name);
        goto out;
    }
    size_t k = 0;
    for (int i = 0; i < qu->nseg; ++i) {
        memcpy(rest + k, vals + qu->soff[i], qu->sn[i] * sizeof(float));
        k += qu->sn[i];
    }
    for (int i = 0; i < qu->nt && rc == ZT_OK; ++i) {
        nf4_tensor *x = &qu->t[i];
        memcpy(w, vals + x->uoff, x->n * sizeof(float));
        if (mixed(sh)) {   /* quantize the 16-bit weight, as transformers does */
            zt_prec_narrow(cpu, sh->prec, w16, w, x->n);
            zt_prec_widen(cpu, sh->prec, w, w16, x->n);
        }
        zt_nf4 t;
        char err[200];
        if (zt_nf4_alloc(&t, x->n, q->dq) != ZT_NF4_OK) {
            rc = zt_fail(st, ZT_ENOMEM, "out of memory (quantizing unit %s)", ui->name);
            break;
        }
        if (zt_nf4_quantize(&t, w, ZT_NF4_F32, NULL, err, sizeof err) != ZT_NF4_OK) {
            rc = zt_fail(st, ZT_EINVAL, "quantizing %s to NF4: %s",
                         sh->m->tensors[ui->first_tensor].name, err);
        } else {
            const size_t nbt = zt_nf4_blocks(x->n);
            memcpy(codes + 32 * x->b0, t.codes, zt_nf4_code_bytes(x->n));
            if (q->dq) {
                memcpy(qam + x->b0, t.qabsmax, nbt);
                memcpy(a2 + x->a2off, t.absmax2, zt_nf4_blocks2(x->n) * sizeof(float));
                x->offset = t.offset;
            } else {
                memcpy(am + x->b0, t.absmax, nbt * sizeof(float));
            }
        }
        zt_nf4_free(&t);
    }
    if (rc != ZT_OK) goto out;
    /* this rank's slices: into the device store, or (offloaded) host memory */
    const int dv = !q->host;
    if (qu->rlen) {
        if (mixed(sh)) {
            zt_prec_narrow(cpu, sh->prec, r16, rest + qu->rlo, qu->rlen);
            zt_xcopy(be, qu->rest, dv, r16, 0, qu->rlen * 2);
        } else {
            zt_xcopy(be, qu->rest, dv, rest + qu->rlo, 0, qu->rlen * sizeof(float));
        }
    }
    if (qu->blen) {
        zt_xcopy(be, qu->codes, dv, codes + 32 * qu->blo, 0, 32 * qu->blen);
        if (q->dq) zt_xcopy(be, qu->qabsmax, dv, qam + qu->blo, 0, qu->blen);
        else zt_xcopy(be, qu->absmax, dv, am + qu->blo, 0, qu->blen * sizeof(float));
    }
    if (q->dq && qu->na2) be->to_device(qu->absmax2, a2, qu->na2 * sizeof(float));
out:
    free(rest); free(r16); free(codes); free(qam); free(am); free(a2); free(w); free(w16);
    return rc;
}

/* all-gather a slice-sharded array (stage 3, G > 1) into full (own slice
 * copied first: uploaded where the store is host memory, offload_param) */
static int gather(zt_shard *sh, void *full, const void *own, size_t lo_bytes, size_t len_bytes,
                  const int *counts, const int *displs, zt_dtype dt, const char *what, int u,
                  zt_status *st) {
    if (len_bytes) zt_xcopy(sh->be, (char *)full + lo_bytes, 1, own, !sh->q->host, len_bytes);
    if (sh->stage != 3 || sh->G == 1) return ZT_OK;
    zt_group_where(sh->dshard, "step %ld, unit %s (NF4 %s)", sh->step + 1, sh->m->units[u].name, what);
    return sh->dshard->ops->allgather_inplace(sh->dshard, full, counts, displs, dt, st);
}

int zt_nf4s_view(zt_shard *sh, int u, zt_status *st) {
    if (sh->view[u]) return ZT_OK;
    const zt_backend *be = sh->be;
    struct zt_nf4_store *q = sh->q;
    nf4_unit *qu = &q->u[u];
    const zt_unit_info *ui = &sh->m->units[u];
    const size_t es = sh->pes, nb = qu->nb ? qu->nb : 1;
    /* a unit without NF4 tensors whose GEMMs (or embedding lookup) read
     * 16-bit weights (the embeddings, an untied LM head): its gathered
     * rest is the unit in bf16, kept as
     * zt_unit_params16's until the release, and the fp32 copy leaves the
     * GEMM-only tensors out (shard.c make_view) where that saves memory */
    const zt_tensor_info *t = sh->m->tensors + ui->first_tensor;
    size_t n32 = 0;
    for (int i = 0; i < ui->n_tensors; ++i) n32 += t[i].gemm ? 0 : t[i].numel;
    const int keep = zt_shard_weights16(sh) && qu->nt == 0 && qu->nseg == 1 && qu->soff[0] == 0 &&
                     qu->rest_n == ui->numel && n32 < ui->numel && 2 * n32 <= ui->numel;
    /* (at least one element: keep's n32 is 0 where the unit is GEMM-only,
     * a tied embedding's; zt_nf4s_view's caller reads sh->view[u]) */
    /* a unit with NF4 tensors whose GEMMs read 16-bit weights: built in
     * bf16 whole (b16, kept until the release), the fp32 copy as keep's */
    const int d16 = q->w16 && zt_shard_weights16(sh) && qu->nt > 0 && n32 < ui->numel &&
                    2 * n32 <= ui->numel;
    const size_t nv = keep || d16 ? n32 : ui->numel;
    /* ZT_MEM_NOZERO where each buffer is wholly written before it is read:
     * v by the widened runs (keep, d16: n32 elements) or by the segments
     * and tensors (tiled); b16 by them (tiled); the gathered arrays by the
     * own slice and the all-gather; t16 by each narrowing before its widening */
    const int nz = q->nz ? ZT_MEM_NOZERO : 0;
    const int vz = keep || d16 || qu->tiled ? nz : 0, bz = qu->tiled ? nz : 0;
    float *v = zt_mem_alloc((nv ? nv : 1) * sizeof(float), ZT_MEM_GATHERED | vz, st);
    uint16_t *b16 = d16 ? zt_mem_alloc(ui->numel * 2, ZT_MEM_GATHERED | bz, st) : NULL;
    /* the rest, codes and absmax / qabsmax gathered (offloaded: uploaded
     * and gathered), or (in place) the store's */
    const int inpl = q->inplace;
    char *rest = inpl ? NULL : zt_mem_alloc((qu->rest_n ? qu->rest_n : 1) * es, ZT_MEM_GATHERED | nz, st);
    uint8_t *codes = inpl ? NULL : zt_mem_alloc(32 * nb, ZT_MEM_GATHERED | nz, st);
    void *am = inpl ? NULL : zt_mem_alloc(nb * (q->dq ? 1 : sizeof(float)), ZT_MEM_GATHERED | nz, st);
    const char *rs = inpl ? (const char *)qu->rest : rest;
    const uint8_t *cs = inpl ? qu->codes : codes;
    const void *as = !inpl ? (const void *)am : q->dq ? (const void *)qu->qabsmax : (const void *)qu->absmax;
    size_t maxn = 1;
    for (int i = 0; i < qu->nt; ++i) if (qu->t[i].n > maxn) maxn = qu->t[i].n;
    const int need16 = mixed(sh) && qu->nt && !d16;
    uint16_t *t16 = need16 ? zt_mem_alloc(maxn * 2, ZT_MEM_GATHERED | nz, st) : NULL;
    int rc = ZT_OK;
    if (!v || (d16 && !b16) || (!inpl && (!rest || !codes || !am)) || (need16 && !t16)) {
        rc = zt_fail_prefix(st, "fp32 copy of the NF4 unit %s", ui->name);
        goto out;
    }
    if (!inpl)
        rc = gather(sh, rest, qu->rest, qu->rlo * es, qu->rlen * es, qu->rc, qu->rd, sh->pdt, "rest",
                    u, st);
    if (!inpl && rc == ZT_OK && qu->nb)
        rc = gather(sh, codes, qu->codes, 32 * qu->blo, 32 * qu->blen, qu->cc, qu->cd, ZT_U8,
                    "codes", u, st);
    if (!inpl && rc == ZT_OK && qu->nb)
        rc = q->dq ? gather(sh, am, qu->qabsmax, qu->blo, qu->blen, qu->bc, qu->bd, ZT_U8,
                            "qabsmax", u, st)
                   : gather(sh, am, qu->absmax, qu->blo * sizeof(float), qu->blen * sizeof(float),
                            qu->bc, qu->bd, ZT_F32, "absmax", u, st);
    if (rc != ZT_OK) goto out;
    if (d16) {   /* the unit in bf16: the rest to its places, the NF4 tensors dequantized */
        size_t k = 0;
        for (int i = 0; i < qu->nseg; ++i) {
            be->copy(b16 + qu->soff[i], rs + k * 2, qu->sn[i] * 2);
            k += qu->sn[i];
        }
        for (int i = 0; i < qu->nt; ++i) {
            const nf4_tensor *x = &qu->t[i];
            be->nf4_dequant(b16 + x->uoff, 1, cs + 32 * x->b0,
                            q->dq ? NULL : (const float *)as + x->b0,
                            q->dq ? (const uint8_t *)as + x->b0 : NULL,
                            q->dq ? qu->absmax2 + x->a2off : NULL, x->offset, x->n);
        }
    }
    if (keep || d16) {   /* the other tensors widened, in runs of adjacent ones */
        const uint16_t *src = d16 ? b16 : (const uint16_t *)rs;
        size_t o = 0;
        for (int i = 0; i < ui->n_tensors;) {
            if (t[i].gemm) {
                ++i;
                continue;
            }
            const size_t from = t[i].offset - ui->offset;
            size_t n = 0;
            for (; i < ui->n_tensors && !t[i].gemm; ++i) n += t[i].numel;
            zt_prec_widen(be, sh->prec, v + o, src + from, n);
            o += n;
        }
        sh->view[u] = v;
        v = NULL;
        if (d16) {
            sh->gathered[u] = b16;
            b16 = NULL;
        } else {   /* (in place: the store's rest, lent) */
            sh->gathered[u] = inpl ? qu->rest : rest;
            rest = NULL;
        }
        qu->lent = !d16 && inpl;
        goto out;
    }
    size_t k = 0;
    for (int i = 0; i < qu->nseg; ++i) {
        if (mixed(sh)) zt_prec_widen(be, sh->prec, v + qu->soff[i], rs + k * es, qu->sn[i]);
        else be->copy(v + qu->soff[i], rs + k * es, qu->sn[i] * sizeof(float));
        k += qu->sn[i];
    }
    for (int i = 0; i < qu->nt; ++i) {
        const nf4_tensor *x = &qu->t[i];
        float *o = v + x->uoff;
        be->nf4_dequant(o, 0, cs + 32 * x->b0, q->dq ? NULL : (const float *)as + x->b0,
                        q->dq ? (const uint8_t *)as + x->b0 : NULL,
                        q->dq ? qu->absmax2 + x->a2off : NULL, x->offset, x->n);
        if (mixed(sh)) {   /* the dequantized weight in the storage dtype */
            zt_prec_narrow(be, sh->prec, t16, o, x->n);
            zt_prec_widen(be, sh->prec, o, t16, x->n);
        }
    }
    sh->view[u] = v;
    v = NULL;
out:
    zt_mem_free(v); zt_mem_free(b16); zt_mem_free(rest); zt_mem_free(codes); zt_mem_free(am);
    zt_mem_free(t16);
    return rc;
}
