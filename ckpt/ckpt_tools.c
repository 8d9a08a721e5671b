/*
 * ckpt_tools.c -- serial checkpoint tools: list, info, tensors, verify,
 * safetensors export.  They read the file alone (sec2 driver), need no MPI
 * and no model code: the tensor table comes from the datasets themselves
 * (their "offset" attributes give the order).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "half.h"

/* ================================================================ list */

static int entry_cmp(const void *pa, const void *pb) {
    const zt_ckpt_entry *a = pa, *b = pb;
    if (a->state != b->state) return a->state - b->state;
    if (a->step != b->step) return a->step < b->step ? 1 : -1;
    return strcmp(a->name, b->name);
}

int zt_ckpt_list(const char *dir, zt_ckpt_entry **out, int *n, zt_status *st) {
    zt_status_clear(st);
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return zt_fail(st, ZT_EIO, "%s: cannot list: %s", dir, strerror(errno));
    char latest[300] = "";
    char lp[ZT_PATH_MAX + 32];
    snprintf(lp, sizeof lp, "%s/%s", dir, ZT_CKPT_LATEST);
    FILE *fp = fopen(lp, "r");
    if (fp) {
        if (fgets(latest, sizeof latest, fp)) latest[strcspn(latest, "\r\n")] = '\0';
        fclose(fp);
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "step-", 5) != 0 || strlen(e->d_name) >= sizeof((*out)->name)) continue;
        zt_ckpt_entry en;
        memset(&en, 0, sizeof en);
        snprintf(en.name, sizeof en.name, "%s", e->d_name);
        char digits[32];
        size_t k = 0;
        for (const char *p = e->d_name + 5; *p >= '0' && *p <= '9' && k + 1 < sizeof digits; ++p)
            digits[k++] = *p;
        digits[k] = '\0';
        if (!k) continue;
        en.step = atol(digits);
        if (ck_parse_step(e->d_name, &en.step) == 0) en.state = 0;
        else if (strstr(e->d_name, ".corrupt")) en.state = 2;
        else en.state = 1;
        en.is_latest = !strcmp(en.name, latest);
        char p[ZT_PATH_MAX + 600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/%s", dir, e->d_name, ZT_CKPT_FILE);
        if (stat(p, &sb) == 0) en.bytes = (uint64_t)sb.st_size;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            zt_ckpt_entry *ne = realloc(*out, (size_t)cap * sizeof *ne);
            if (!ne) {
                closedir(d);
                free(*out);
                *out = NULL;
                *n = 0;
                return zt_fail(st, ZT_ENOMEM, "out of memory");
            }
            *out = ne;
        }
        (*out)[(*n)++] = en;
    }
    closedir(d);
    if (*n > 1) qsort(*out, (size_t)*n, sizeof **out, entry_cmp);
    return ZT_OK;
}

/* ================================================================ info */

static int open_path(const char *path, char *file, size_t n, zt_status *st) {
    int kind = ck_resolve(path, file, n);
    if (kind < 0) return zt_fail(st, ZT_EIO, "%s: no such checkpoint", path);
    if (kind == 0)
        return zt_fail(st, ZT_EINVAL, "%s: a directory without %s (give a step-N directory or "
                       "its %s)", path, ZT_CKPT_FILE, ZT_CKPT_FILE);
    return ZT_OK;
}

int zt_ckpt_read_info(const char *path, zt_ckpt_info *info, zt_status *st) {
    zt_status_clear(st);
    memset(info, 0, sizeof *info);
    char file[ZT_PATH_MAX + 64];
    ZT_TRY(open_path(path, file, sizeof file, st));
    hid_t f = ck_open_serial(file, st);
    if (f < 0) return st->code;
    int rc = ck_read_header(f, file, info, 1, st);
    H5Fclose(f);
    return rc;
}

/* ================================================================ tensor table */

typedef struct tinfo {
    char name[128];
    int ndim;
    hsize_t dims[2];
    uint64_t numel, offset;
} tinfo;

typedef struct tlist { tinfo *t; int n, cap; } tlist;

static herr_t collect(hid_t g, const char *name, const H5L_info_t *li, void *user) {
    (void)li;
    tlist *L = user;
    if (L->n == L->cap) {
        int nc = L->cap ? 2 * L->cap : 64;
        tinfo *nt = realloc(L->t, (size_t)nc * sizeof *nt);
        if (!nt) return -1;
        L->t = nt;
        L->cap = nc;
    }
    tinfo *t = &L->t[L->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t sp = H5Dget_space(d);
    t->ndim = sp >= 0 ? H5Sget_simple_extent_dims(sp, t->dims, NULL) : -1;
    if (sp >= 0) H5Sclose(sp);
    int bad = t->ndim < 1 || t->ndim > 2 || ck_attr_get_u64(d, "offset", &t->offset) != 0;
    H5Dclose(d);
    if (bad) return -1;
    t->numel = t->dims[0] * (t->ndim == 2 ? t->dims[1] : 1);
    L->n++;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    const tinfo *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The tensors of /params in offset order, checked against the header and
 * against the optimizer families. */
static int tensor_table(hid_t f, const char *file, const zt_ckpt_info *in, tlist *L,
                        zt_status *st) {
    memset(L, 0, sizeof *L);
    hid_t g = H5Gopen2(f, "params", H5P_DEFAULT);
    if (g < 0) return ck_h5_fail(st, ZT_EDATA, "%s: group /params missing", file);
    hsize_t idx = 0;
    herr_t e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, L);
    H5Gclose(g);
    if (e < 0)
        return ck_h5_fail(st, ZT_EDATA, "%s: a dataset in /params is unreadable or has no offset",
                          file);
    if (L->n > 1) qsort(L->t, (size_t)L->n, sizeof *L->t, by_offset);
    uint64_t at = 0;
    for (int i = 0; i < L->n; ++i) {
        if (L->t[i].offset != at)
            return zt_fail(st, ZT_EDATA, "%s: tensor params/%s at offset %llu, expected %llu",
                           file, L->t[i].name, (unsigned long long)L->t[i].offset,
                           (unsigned long long)at);
        at += L->t[i].numel;
    }
    if (L->n != in->n_tensors || at != in->num_params)
        return zt_fail(st, ZT_EDATA, "%s: /params holds %d tensors with %llu parameters; the "
                       "header says %d with %llu", file, L->n, (unsigned long long)at,
                       in->n_tensors, (unsigned long long)in->num_params);
    return ZT_OK;
}

/* Open the state file of checkpoint `path`, read its header and tensor
 * table.  On success *f is open (H5Fclose it) and L->t is allocated (free
 * it); on failure nothing is left open. */
static int open_table(const char *path, char *file, size_t n, hid_t *f, zt_ckpt_info *in,
                      tlist *L, zt_status *st) {
    ZT_TRY(open_path(path, file, n, st));
    *f = ck_open_serial(file, st);
    if (*f < 0) return st->code;
    int rc = ck_read_header(*f, file, in, 0, st);
    if (rc == ZT_OK) rc = tensor_table(*f, file, in, L, st);
    if (rc != ZT_OK) {
        free(L->t);
        L->t = NULL;
        H5Fclose(*f);
    }
    return rc;
}

int zt_ckpt_tensors(const char *path, zt_ckpt_tensor_fn fn, void *user, zt_status *st) {
    zt_status_clear(st);
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    tlist L = {0};
    int rc = open_table(path, file, sizeof file, &f, &in, &L, st);
    if (rc != ZT_OK) return rc;
    for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam)
        for (int i = 0; i < L.n && rc == ZT_OK; ++i) {
            char name[160];
            ck_dataset_name(name, sizeof name, fam, L.t[i].name);
            zt_ckpt_tensor t;
            memset(&t, 0, sizeof t);
            t.dataset = name;
            t.ndim = L.t[i].ndim;
            t.shape[0] = L.t[i].dims[0];
            t.shape[1] = L.t[i].dims[1];
            t.ok = 1;
            hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
            if (d < 0 || ck_attr_get_u64(d, "checksum", &t.stored) != 0)
                rc = ck_h5_fail(st, ZT_EDATA, "%s: tensor %s missing or without checksum", file, name);
            if (d >= 0) H5Dclose(d);
            if (rc == ZT_OK && fn) fn(user, &t);
        }
    free(L.t);
    H5Fclose(f);
    return rc;
}

/* ================================================================ verify */

/* Read dataset `name` (shape of t) in pieces; checksum; optionally hand each
 * piece to sink. */
typedef int (*piece_fn)(void *user, const float *x, uint64_t first, uint64_t n);

static int read_checksum(hid_t f, const char *file, const char *name, const tinfo *t,
                         float *buf, uint64_t *sum, piece_fn sink, void *user, zt_status *st) {
    *sum = 0;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return ck_h5_fail(st, ZT_EDATA, "%s: tensor %s missing", file, name);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
    int rc = ZT_OK;
    if (nd != t->ndim || dims[0] != t->dims[0] || (nd == 2 && dims[1] != t->dims[1]))
        rc = zt_fail(st, ZT_EDATA, "%s: tensor %s: shape differs from params/%s", file, name, t->name);
    uint64_t dd[2] = {t->dims[0], t->dims[1]};
    for (uint64_t a = 0; a < t->numel && rc == ZT_OK; a += CK_CHUNK_ELEMS) {
        uint64_t b = t->numel - a > CK_CHUNK_ELEMS ? a + CK_CHUNK_ELEMS : t->numel;
        hsize_t len = b - a;
        hid_t ms = H5Screate_simple(1, &len, NULL);
        if (ck_select_flat(sp, t->ndim, dd, a, b) < 0 ||
            H5Dread(d, H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT, buf) < 0)
            rc = ck_h5_fail(st, ZT_EDATA, "%s: cannot read tensor %s", file, name);
        H5Sclose(ms);
        if (rc == ZT_OK) {
            *sum += zt_ckpt_checksum(buf, b - a, a);
            if (sink) rc = sink(user, buf, a, b - a);
        }
    }
    H5Sclose(sp);
    H5Dclose(d);
    return rc;
}

int zt_ckpt_verify(const char *path, zt_ckpt_tensor_fn fn, void *user, zt_status *st) {
    zt_status_clear(st);
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    tlist L = {0};
    int rc = open_table(path, file, sizeof file, &f, &in, &L, st);
    if (rc != ZT_OK) return rc;
    float *buf = malloc(CK_CHUNK_ELEMS * sizeof(float));
    if (!buf) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    int bad = 0;
    char first_bad[160] = "", first_msg[600] = "";
    for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam)
        for (int i = 0; i < L.n && rc == ZT_OK; ++i) {
            char name[160];
            ck_dataset_name(name, sizeof name, fam, L.t[i].name);
            zt_ckpt_tensor t;
            memset(&t, 0, sizeof t);
            t.dataset = name;
            t.ndim = L.t[i].ndim;
            t.shape[0] = L.t[i].dims[0];
            t.shape[1] = L.t[i].dims[1];
            zt_status ts;
            zt_status_clear(&ts);
            int r = read_checksum(f, file, name, &L.t[i], buf, &t.computed, NULL, NULL, &ts);
            hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
            int has = d >= 0 && ck_attr_get_u64(d, "checksum", &t.stored) == 0;
            if (d >= 0) H5Dclose(d);
            H5Eclear2(H5E_DEFAULT);
            char why[600] = "";
            if (r != ZT_OK) snprintf(why, sizeof why, "%s", ts.msg);
            else if (!has) snprintf(why, sizeof why, "no checksum attribute");
            else if (t.stored != t.computed)
                snprintf(why, sizeof why, "checksum mismatch (stored %016llx, computed %016llx)",
                         (unsigned long long)t.stored, (unsigned long long)t.computed);
            t.ok = !why[0];
            t.error = t.ok ? NULL : why;
            if (!t.ok && !bad++) {
                snprintf(first_bad, sizeof first_bad, "%s", name);
                snprintf(first_msg, sizeof first_msg, "%s", why);
            }
            if (fn) fn(user, &t);
        }
    if (rc == ZT_OK && bad)
        rc = zt_fail(st, ZT_EDATA, "%s: tensor %s: %s%s", file, first_bad, first_msg,
                     bad > 1 ? " (and more tensors do not verify)" : "");
    free(buf);
    free(L.t);
    H5Fclose(f);
    return rc;
}

/* ================================================================ export */

/* GPT-2 (Hugging Face) name for one of ours; *transpose: stored [in, out]
 * (Conv1D) where ours is [out, in]. */
static void hf_name(const char *ours, char *out, size_t n, int *transpose) {
    *transpose = 0;
    int l, used = 0;
    char rest[96];
    if (!strcmp(ours, "wte")) { snprintf(out, n, "wte.weight"); return; }
    if (!strcmp(ours, "wpe")) { snprintf(out, n, "wpe.weight"); return; }
    if (!strcmp(ours, "lnf.w")) { snprintf(out, n, "ln_f.weight"); return; }
    if (!strcmp(ours, "lnf.b")) { snprintf(out, n, "ln_f.bias"); return; }
    if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used > 0 &&
        snprintf(rest, sizeof rest, "%s", ours + used) < (int)sizeof rest) {
        static const struct { const char *ours, *hf; int tr; } map[] = {
            {"ln1.w", "ln_1.weight", 0}, {"ln1.b", "ln_1.bias", 0},
            {"attn.qkv.w", "attn.c_attn.weight", 1}, {"attn.qkv.b", "attn.c_attn.bias", 0},
            {"attn.proj.w", "attn.c_proj.weight", 1}, {"attn.proj.b", "attn.c_proj.bias", 0},
            {"ln2.w", "ln_2.weight", 0}, {"ln2.b", "ln_2.bias", 0},
            {"mlp.fc.w", "mlp.c_fc.weight", 1}, {"mlp.fc.b", "mlp.c_fc.bias", 0},
            {"mlp.proj.w", "mlp.c_proj.weight", 1}, {"mlp.proj.b", "mlp.c_proj.bias", 0},
        };
        for (size_t i = 0; i < sizeof map / sizeof map[0]; ++i)
            if (!strcmp(rest, map[i].ours)) {
                snprintf(out, n, "h.%d.%s", l, map[i].hf);
                *transpose = map[i].tr;
                return;
            }
    }
    snprintf(out, n, "%s", ours);
}

typedef struct sink_ctx {
    FILE *fp;
    int bf16;
    const char *out;
    zt_status *st;
} sink_ctx;

static int write_values(sink_ctx *c, const float *x, uint64_t n) {
    if (!c->bf16) {
        if (fwrite(x, sizeof(float), n, c->fp) != n)
            return zt_fail(c->st, ZT_EIO, "%s: write failed: %s", c->out, strerror(errno));
        return ZT_OK;
    }
    uint16_t tmp[4096];
    for (uint64_t i = 0; i < n; i += 4096) {
        uint64_t k = n - i < 4096 ? n - i : 4096;
        for (uint64_t j = 0; j < k; ++j) tmp[j] = zt_f32_to_bf16(x[i + j]);
        if (fwrite(tmp, sizeof(uint16_t), k, c->fp) != k)
            return zt_fail(c->st, ZT_EIO, "%s: write failed: %s", c->out, strerror(errno));
    }
    return ZT_OK;
}

static int sink_write(void *user, const float *x, uint64_t first, uint64_t n) {
    (void)first;
    return write_values(user, x, n);
}

typedef struct gather_ctx { float *dst; } gather_ctx;
static int sink_gather(void *user, const float *x, uint64_t first, uint64_t n) {
    gather_ctx *g = user;
    memcpy(g->dst + first, x, n * sizeof(float));
    return ZT_OK;
}

int zt_ckpt_export_safetensors(const char *path, const char *out_file, int bf16, zt_status *st) {
    zt_status_clear(st);
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    tlist L = {0};
    int rc = open_table(path, file, sizeof file, &f, &in, &L, st);
    if (rc != ZT_OK) return rc;
    json_t *hdr = NULL;
    char *hs = NULL;
    FILE *fp = NULL;
    float *buf = NULL, *whole = NULL;
    char tmp[ZT_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", out_file);

    /* header: names, dtypes, shapes, offsets (data in table order) */
    hdr = json_object();
    json_t *meta = json_object();
    char v[64];
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(meta, "source", json_string("ztrain"));
    json_object_set_new(meta, "layout", json_string("gpt2 (Hugging Face names; Conv1D weights "
                                                    "stored [in, out]); lm_head tied to wte"));
    snprintf(v, sizeof v, "%ld", in.step);
    json_object_set_new(meta, "step", json_string(v));
    struct { const char *k; int v; } mk[] = {{"n_layer", in.n_layer}, {"n_head", in.n_head},
        {"n_embd", in.n_embd}, {"n_positions", in.context}, {"vocab_size", in.vocab}};
    for (size_t i = 0; i < sizeof mk / sizeof mk[0]; ++i) {
        snprintf(v, sizeof v, "%d", mk[i].v);
        json_object_set_new(meta, mk[i].k, json_string(v));
    }
    json_object_set_new(hdr, "__metadata__", meta);
    uint64_t at = 0, esz = bf16 ? 2 : 4, maxw = 0;
    for (int i = 0; i < L.n; ++i) {
        tinfo *t = &L.t[i];
        char hn[160];
        int tr;
        hf_name(t->name, hn, sizeof hn, &tr);
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        json_object_set_new(e, "dtype", json_string(bf16 ? "BF16" : "F32"));
        if (t->ndim == 2 && tr) {
            json_array_append_new(shape, json_integer((json_int_t)t->dims[1]));
            json_array_append_new(shape, json_integer((json_int_t)t->dims[0]));
            if (t->numel > maxw) maxw = t->numel;
        } else {
            for (int k = 0; k < t->ndim; ++k)
                json_array_append_new(shape, json_integer((json_int_t)t->dims[k]));
        }
        json_object_set_new(e, "shape", shape);
        json_array_append_new(offs, json_integer((json_int_t)at));
        json_array_append_new(offs, json_integer((json_int_t)(at + t->numel * esz)));
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(hdr, hn, e);
        at += t->numel * esz;
    }
    hs = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    buf = malloc(CK_CHUNK_ELEMS * sizeof(float));
    whole = maxw ? malloc(maxw * sizeof(float)) : NULL;
    if (!hs || !buf || (maxw && !whole)) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto out; }
    size_t hl = strlen(hs), padded = (hl + 7) / 8 * 8;
    fp = fopen(tmp, "wb");
    if (!fp) { rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmp, strerror(errno)); goto out; }
    uint8_t le[8];
    for (int k = 0; k < 8; ++k) le[k] = (uint8_t)((uint64_t)padded >> (8 * k));
    if (fwrite(le, 1, 8, fp) != 8 || fwrite(hs, 1, hl, fp) != hl) rc = ZT_EIO;
    for (size_t k = hl; k < padded && rc == ZT_OK; ++k)
        if (fputc(' ', fp) == EOF) rc = ZT_EIO;
    if (rc != ZT_OK) { rc = zt_fail(st, ZT_EIO, "%s: write failed: %s", tmp, strerror(errno)); goto out; }

    sink_ctx sc = {fp, bf16, tmp, st};
    for (int i = 0; i < L.n && rc == ZT_OK; ++i) {
        tinfo *t = &L.t[i];
        char name[160], hn[160];
        int tr;
        hf_name(t->name, hn, sizeof hn, &tr);
        ck_dataset_name(name, sizeof name, CK_PARAMS, t->name);
        uint64_t sum = 0, stored = 0;
        if (t->ndim == 2 && tr) {
            gather_ctx g = {whole};
            rc = read_checksum(f, file, name, t, buf, &sum, sink_gather, &g, st);
            uint64_t R = t->dims[0], C = t->dims[1];
            for (uint64_t c = 0; c < C && rc == ZT_OK; ++c) {   /* row c of the [C, R] transpose */
                for (uint64_t r = 0; r < R; r += CK_CHUNK_ELEMS) {
                    uint64_t k = R - r < CK_CHUNK_ELEMS ? R - r : CK_CHUNK_ELEMS;
                    for (uint64_t j = 0; j < k; ++j) buf[j] = whole[(r + j) * C + c];
                    if ((rc = write_values(&sc, buf, k)) != ZT_OK) break;
                }
            }
        } else {
            rc = read_checksum(f, file, name, t, buf, &sum, sink_write, &sc, st);
        }
        if (rc != ZT_OK) break;
        hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
        int has = d >= 0 && ck_attr_get_u64(d, "checksum", &stored) == 0;
        if (d >= 0) H5Dclose(d);
        if (!has || stored != sum)
            rc = zt_fail(st, ZT_EDATA, "%s: tensor %s: checksum mismatch (stored %016llx, computed "
                         "%016llx): the checkpoint is corrupt; nothing exported", file, name,
                         (unsigned long long)stored, (unsigned long long)sum);
    }
    if (rc == ZT_OK && (fflush(fp) != 0 || fsync(fileno(fp)) != 0))
        rc = zt_fail(st, ZT_EIO, "%s: flush failed: %s", tmp, strerror(errno));
    if (fclose(fp) != 0 && rc == ZT_OK) rc = zt_fail(st, ZT_EIO, "%s: close failed", tmp);
    fp = NULL;
    if (rc == ZT_OK && rename(tmp, out_file) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: rename failed: %s", out_file, strerror(errno));
out:
    if (fp) fclose(fp);
    if (rc != ZT_OK) unlink(tmp);
    free(hs);
    if (hdr) json_decref(hdr);
    free(buf);
    free(whole);
    free(L.t);
    H5Fclose(f);
    return rc;
}
