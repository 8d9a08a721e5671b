/*
 * weights.c -- model weights in llm.c's fp32 model-file format (interim
 * save/load until HDF5 checkpoints; also llm.c interop).
 *
 * Header: 256 x int32: [0] 20240326 magic, [1] 3 (fp32) or 5 (bf16), [2] max_seq_len,
 * [3] vocab, [4] n_layer, [5] n_head, [6] n_embd, [7] padded vocab.
 * Then fp32 tensors family by family across layers, llm.c's order:
 * wte[Vp,C] wpe[T,C] ln1w[L,C] ln1b qkvw[L,3C,C] qkvb attprojw attprojb
 * ln2w ln2b fcw fcb fcprojw fcprojb lnfw[C] lnfb[C].  Our block is laid out
 * layer by layer, so tensors are gathered/scattered per family.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "arch.h"
#include "engine.h"
#include "devmem.h"
#include "half.h"
#include "ck_values.h"
#include "ztrain_ckpt.h"

#define LLMC_MAGIC 20240326
#define LLMC_FP32 3
#define LLMC_BF16 5
#define BF16_CHUNK 16384
#define PER_LAYER 12

/* Visit every tensor in file order: fn(tensor, rows-to-skip-after). */
typedef int (*visit_fn)(void *u, const zt_tensor_info *t, size_t pad_elems);

static int visit_file_order(const zt_model *m, int Vp, visit_fn fn, void *u) {
    int L = m->cfg.n_layer;
    size_t C = (size_t)m->cfg.n_embd;
    ZT_TRY(fn(u, &m->tensors[0], (size_t)(Vp - m->cfg.vocab) * C));  /* wte + padding */
    ZT_TRY(fn(u, &m->tensors[1], 0));                                /* wpe */
    for (int k = 0; k < PER_LAYER; ++k)
        for (int l = 0; l < L; ++l) ZT_TRY(fn(u, &m->tensors[2 + l * PER_LAYER + k], 0));
    ZT_TRY(fn(u, &m->tensors[2 + L * PER_LAYER], 0));
    ZT_TRY(fn(u, &m->tensors[3 + L * PER_LAYER], 0));
    return ZT_OK;
}

/* params: the full block in the backend's memory; on a device backend every
 * tensor moves through the bounded host buffer h[hcap]. */
typedef struct io_ctx {
    FILE *fp;
    float *params;
    const char *path;
    zt_status *st;
    const zt_backend *be;
    float *h;                 /* device backends: host staging, else NULL */
    size_t hcap;
    int bf16;                 /* version 5 file: 2-byte elements */
} io_ctx;

/* k fp32 values to the file: as they are, or rounded to bf16 (nearest even) */
static int write_elems(io_ctx *c, const float *src, size_t k) {
    if (!c->bf16) {
        if (fwrite(src, sizeof(float), k, c->fp) == k) return ZT_OK;
    } else {
        uint16_t b[BF16_CHUNK];
        size_t i = 0;
        while (i < k) {
            size_t n = k - i < BF16_CHUNK ? k - i : BF16_CHUNK;
            for (size_t j = 0; j < n; ++j) b[j] = src ? zt_f32_to_bf16(src[i + j]) : 0;
            if (fwrite(b, sizeof(uint16_t), n, c->fp) != n) break;
            i += n;
        }
        if (i == k) return ZT_OK;
    }
    return zt_fail(c->st, ZT_EIO, "%s: write failed: %s", c->path, strerror(errno));
}

/* k elements of the file into dst[k] (fp32), refusing NaN and Inf */
static int read_elems(io_ctx *c, const zt_tensor_info *t, float *dst, size_t k, size_t at) {
    if (!c->bf16) {
        if (fread(dst, sizeof(float), k, c->fp) != k)
            return zt_fail(c->st, ZT_EDATA, "%s: truncated while reading tensor %s", c->path, t->name);
    } else {
        uint16_t b[BF16_CHUNK];
        for (size_t i = 0; i < k;) {
            size_t n = k - i < BF16_CHUNK ? k - i : BF16_CHUNK;
            if (fread(b, sizeof(uint16_t), n, c->fp) != n)
                return zt_fail(c->st, ZT_EDATA, "%s: truncated while reading tensor %s", c->path, t->name);
            for (size_t j = 0; j < n; ++j) dst[i + j] = zt_bf16_to_f32(b[j]);
            i += n;
        }
    }
    return ck_check_values(dst, k, at, 0, "weights", c->path, t->name, c->st);
}

static int write_tensor(void *u, const zt_tensor_info *t, size_t pad) {
    io_ctx *c = u;
    for (size_t a = 0; a < t->numel;) {
        size_t k = c->h ? (t->numel - a < c->hcap ? t->numel - a : c->hcap) : t->numel;
        const float *src = c->params + t->offset + a;
        if (c->h) {
            c->be->to_host(c->h, src, k * sizeof(float));
            src = c->h;
        }
        ZT_TRY(write_elems(c, src, k));
        a += k;
    }
    static const float zero[256];
    while (pad) {
        size_t k = pad < 256 ? pad : 256;
        ZT_TRY(write_elems(c, zero, k));
        pad -= k;
    }
    return ZT_OK;
}

static int read_tensor(void *u, const zt_tensor_info *t, size_t pad) {
    io_ctx *c = u;
    for (size_t a = 0; a < t->numel;) {
        size_t k = c->h ? (t->numel - a < c->hcap ? t->numel - a : c->hcap) : t->numel;
        float *dst = c->h ? c->h : c->params + t->offset + a;
        ZT_TRY(read_elems(c, t, dst, k, a));
        if (c->h) c->be->to_device(c->params + t->offset + a, c->h, k * sizeof(float));
        a += k;
    }
    if (pad && fseek(c->fp, (long)(pad * (c->bf16 ? 2 : sizeof(float))), SEEK_CUR) != 0)
        return zt_fail(c->st, ZT_EDATA, "%s: truncated in padding after %s", c->path, t->name);
    return ZT_OK;
}

static int need_gpt(const zt_ctx *ctx, const char *path, zt_status *st) {
    const zt_arch *a = zt_arch_find(zt_ctx_model(ctx)->ops->name);   /* the built-in model of one */
    if (a && a->llmc_file && a->model_ops == zt_ctx_model(ctx)->ops) return ZT_OK;

    return zt_fail(st, ZT_EUNSUPPORTED, "%s: llm.c model files hold the built-in GPT-2 only; "
                   "model '%s' can be saved in HDF5 checkpoints (ztrain ckpt export)", path,
                   zt_ctx_model(ctx)->ops->name ? zt_ctx_model(ctx)->ops->name : "?");
}

int zt_save_weights(zt_ctx *ctx, const char *path, zt_status *st) {
    return zt_save_weights_dtype(ctx, path, 0, st);
}

int zt_save_weights_dtype(zt_ctx *ctx, const char *path, int bf16, zt_status *st) {
    zt_status_clear(st);
    ZT_TRY(need_gpt(ctx, path, st));
    float *full = NULL;
    int full_owned = 0;
    int rc = zt_shard_full_params(zt_ctx_shard(ctx), &full, &full_owned, st);   /* collective at stage 3 */
    if (rc != ZT_OK) return rc;
    float *hs = NULL;   /* device backends: host staging */
    size_t hcap = 0;
    if (zt_ctx_rank(ctx) == 0 && zt_be_device(zt_ctx_backend(ctx))) {
        hcap = zt_ctx_model(ctx)->num_params < ZT_STAGE_ELEMS ? zt_ctx_model(ctx)->num_params : ZT_STAGE_ELEMS;
        hs = zt_mem_alloc((hcap ? hcap : 1) * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
        if (!hs) rc = st ? st->code : ZT_ENOMEM;
    }
    if (zt_ctx_rank(ctx) == 0 && rc == ZT_OK) {
        const zt_model *m = zt_ctx_model(ctx);
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *fp = fopen(tmp, "wb");
        if (!fp) {
            rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        } else {
            int32_t h[256];
            memset(h, 0, sizeof h);
            h[0] = LLMC_MAGIC; h[1] = bf16 ? LLMC_BF16 : LLMC_FP32; h[2] = m->cfg.context; h[3] = m->cfg.vocab;
            h[4] = m->cfg.n_layer; h[5] = m->cfg.n_head; h[6] = m->cfg.n_embd; h[7] = m->cfg.vocab;
            if (fwrite(h, sizeof h, 1, fp) != 1)
                rc = zt_fail(st, ZT_EIO, "%s: write failed: %s", tmp, strerror(errno));
            io_ctx c = {fp, full, tmp, st, zt_ctx_backend(ctx), hs, hcap, bf16 != 0};
            if (rc == ZT_OK) rc = visit_file_order(m, m->cfg.vocab, write_tensor, &c);
            if (rc == ZT_OK && (fflush(fp) != 0 || fsync(fileno(fp)) != 0))
                rc = zt_fail(st, ZT_EIO, "%s: flush failed: %s", tmp, strerror(errno));
            if (fclose(fp) != 0 && rc == ZT_OK)
                rc = zt_fail(st, ZT_EIO, "%s: close failed: %s", tmp, strerror(errno));
            if (rc == ZT_OK && rename(tmp, path) != 0)
                rc = zt_fail(st, ZT_EIO, "%s: rename failed: %s", path, strerror(errno));
            if (rc != ZT_OK) unlink(tmp);
        }
    }
    if (full_owned) zt_mem_free(full);
    zt_mem_free(hs);
    if (rc == ZT_OK) rc = zt_be_check(zt_ctx_backend(ctx), "saving weights", st);
    /* Everybody learns whether rank 0 succeeded. */
    if (zt_ctx_nranks(ctx) > 1) {
        int32_t v = rc;
        zt_status tmpst;
        zt_group *w = zt_ctx_world(ctx);
        if (w->ops->bcast(w, &v, 1, ZT_I32, 0, &tmpst) != ZT_OK) return zt_fail(st, tmpst.code, "%s", tmpst.msg);
        if (v != ZT_OK && zt_ctx_rank(ctx) != 0) return zt_fail(st, v, "%s: rank 0 failed to save weights", path);
    }
    return rc;
}

/* Bytes of a GPT-2 model file with this header (0: too large to be real). */
static uint64_t file_bytes(const int32_t h[256]) {
    uint64_t Vp = (uint64_t)h[7], T = (uint64_t)h[2], L = (uint64_t)h[4], C = (uint64_t)h[6];
    if (C > (1u << 20) || L > (1u << 20) || Vp > (1u << 30) || T > (1u << 30)) return 0;
    /* wte[Vp,C] wpe[T,C], per layer 12 C^2 + 13 C, lnf 2C */
    uint64_t n = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
    return 1024 + n * (h[1] == LLMC_BF16 ? 2 : 4);
}

/* The header, checked against the file's size before anything is allocated. */
static int read_header(const char *path, FILE *fp, int32_t h[256], zt_status *st) {
    if (fread(h, sizeof(int32_t), 256, fp) != 256)
        return zt_fail(st, ZT_EDATA, "%s: truncated header (not an llm.c model file)", path);
    if (h[0] != LLMC_MAGIC)
        return zt_fail(st, ZT_EDATA, "%s: bad magic %d (expected %d: not an llm.c model file)", path, h[0], LLMC_MAGIC);
    if (h[1] != LLMC_FP32 && h[1] != LLMC_BF16)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: model file version %d; fp32 (3) and bf16 (5) are "
                       "supported", path, h[1]);
    if (h[2] < 1 || h[3] < 2 || h[4] < 1 || h[5] < 1 || h[6] < 1 || h[7] < h[3] || h[6] % h[5])
        return zt_fail(st, ZT_EDATA, "%s: invalid model shape in header", path);
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot stat: %s", path, strerror(errno));
    uint64_t want = file_bytes(h);
    if (want == 0 || (uint64_t)sb.st_size != want)
        return zt_fail(st, ZT_EDATA, "%s: %lld bytes, but its header (L%d H%d C%d T%d Vp%d, %s) "
                       "describes a file of %llu bytes", path, (long long)sb.st_size, h[4], h[5],
                       h[6], h[2], h[7], h[1] == LLMC_BF16 ? "bf16" : "fp32",
                       (unsigned long long)want);
    return ZT_OK;
}

int zt_weights_read_shape(const char *path, zt_config *cfg, zt_status *st) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open weights: %s", path, strerror(errno));
    int32_t h[256];
    int rc = read_header(path, fp, h, st);
    fclose(fp);
    if (rc != ZT_OK) return rc;
    char v[32];
    const char *keys[5] = {"ztrain.model.context", "ztrain.model.vocab", "ztrain.model.n_layer",
                           "ztrain.model.n_head", "ztrain.model.n_embd"};
    int vals[5] = {h[2], h[3], h[4], h[5], h[6]};
    for (int i = 0; i < 5; ++i) {
        snprintf(v, sizeof v, "%d", vals[i]);
        ZT_TRY(zt_config_set(cfg, keys[i], v, ZT_SRC_FILE, st));
    }
    return ZT_OK;
}

int zt_load_weights(zt_ctx *ctx, const char *path, zt_status *st) {
    zt_status_clear(st);
    ZT_TRY(need_gpt(ctx, path, st));
    zt_model *m = zt_ctx_model(ctx);
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open weights: %s", path, strerror(errno));
    int32_t h[256];
    int rc = read_header(path, fp, h, st);
    if (rc == ZT_OK && (h[2] != m->cfg.context || h[3] != m->cfg.vocab || h[4] != m->cfg.n_layer ||
                        h[5] != m->cfg.n_head || h[6] != m->cfg.n_embd))
        rc = zt_fail(st, ZT_EINVAL, "%s: model shape (L%d H%d C%d T%d V%d) differs from the configured one "
                     "(L%d H%d C%d T%d V%d)", path, h[4], h[5], h[6], h[2], h[3], m->cfg.n_layer,
                     m->cfg.n_head, m->cfg.n_embd, m->cfg.context, m->cfg.vocab);
    /* (the model's block as the file's buffer when it is the logical block:
     * not a rank's share under expert parallelism) */
    float *full = m->block_elems == m->num_params ? m->params : NULL;
    if (rc == ZT_OK && !full && !(full = zt_mem_alloc(m->num_params * sizeof(float), ZT_MEM_WORKSPACE, st)))
        rc = st->code;
    float *hs = NULL;   /* device backends: host staging */
    size_t hcap = m->num_params < ZT_STAGE_ELEMS ? m->num_params : ZT_STAGE_ELEMS;
    if (rc == ZT_OK && zt_be_device(zt_ctx_backend(ctx)) &&
        !(hs = zt_mem_alloc((hcap ? hcap : 1) * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st)))
        rc = st->code;
    io_ctx c = {fp, full, path, st, zt_ctx_backend(ctx), hs, hcap, h[1] == LLMC_BF16};
    if (rc == ZT_OK) rc = visit_file_order(m, h[7], read_tensor, &c);
    if (rc == ZT_OK && fgetc(fp) != EOF)
        rc = zt_fail(st, ZT_EDATA, "%s: trailing bytes after the last tensor", path);
    fclose(fp);
    zt_mem_free(hs);
    if (rc == ZT_OK) zt_shard_set_full_params(zt_ctx_shard(ctx), full);
    if (full != m->params) zt_mem_free(full);
    if (rc == ZT_OK) rc = zt_be_check(zt_ctx_backend(ctx), "loading weights", st);
    return rc;
}
