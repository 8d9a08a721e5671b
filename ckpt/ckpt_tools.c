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
#include "arch.h"
#include "safetensors.h"

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

static herr_t collect(hid_t g, const char *name, const H5L_info_t *li, void *user) {
    (void)li;
    ck_tlist *L = user;
    if (L->n == L->cap) {
        int nc = L->cap ? 2 * L->cap : 64;
        ck_tinfo *nt = realloc(L->t, (size_t)nc * sizeof *nt);
        if (!nt) return -1;
        L->t = nt;
        L->cap = nc;
    }
    ck_tinfo *t = &L->t[L->n];
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
    const ck_tinfo *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The tensors of /params in offset order, checked against the header and
 * against the optimizer families. */
static int tensor_table(hid_t f, const char *file, const zt_ckpt_info *in, ck_tlist *L,
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

int ck_open_table(const char *path, char *file, size_t n, hid_t *f, zt_ckpt_info *in,
                  int with_config, ck_tlist *L, zt_status *st) {
    memset(in, 0, sizeof *in);
    memset(L, 0, sizeof *L);
    ZT_TRY(open_path(path, file, n, st));
    *f = ck_open_serial(file, st);
    if (*f < 0) return st->code;
    int rc = ck_read_header(*f, file, in, with_config, st);
    if (rc == ZT_OK) rc = tensor_table(*f, file, in, L, st);
    if (rc != ZT_OK) {
        free(L->t);
        L->t = NULL;
        zt_ckpt_info_free(in);
        H5Fclose(*f);
    }
    return rc;
}

int zt_ckpt_tensors(const char *path, zt_ckpt_tensor_fn fn, void *user, zt_status *st) {
    zt_status_clear(st);
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    ck_tlist L = {0};
    int rc = ck_open_table(path, file, sizeof file, &f, &in, 0, &L, st);
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
int ck_read_checksum(hid_t f, const char *file, const char *name, const ck_tinfo *t, float *buf,
                     uint64_t *sum, ck_piece_fn sink, void *user, zt_status *st) {
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
    ck_tlist L = {0};
    int rc = ck_open_table(path, file, sizeof file, &f, &in, 0, &L, st);
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
            int r = ck_read_checksum(f, file, name, &L.t[i], buf, &t.computed, NULL, NULL, &ts);
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

int ck_check_sum(hid_t f, const char *file, const char *name, uint64_t sum, zt_status *st) {
    uint64_t stored = 0;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    int has = d >= 0 && ck_attr_get_u64(d, "checksum", &stored) == 0;
    if (d >= 0) H5Dclose(d);
    H5Eclear2(H5E_DEFAULT);
    if (has && stored == sum) return ZT_OK;
    return zt_fail(st, ZT_EDATA, "%s: tensor %s: checksum mismatch (stored %016llx, computed "
                   "%016llx): the checkpoint is corrupt; nothing exported", file, name,
                   (unsigned long long)stored, (unsigned long long)sum);
}

typedef struct sink_ctx { zt_st_writer *w; zt_status *st; } sink_ctx;
static int sink_write(void *user, const float *x, uint64_t first, uint64_t n) {
    (void)first;
    sink_ctx *c = user;
    return zt_st_write_values(c->w, x, n, c->st);
}
typedef struct gather_ctx { float *dst; } gather_ctx;
static int sink_gather(void *user, const float *x, uint64_t first, uint64_t n) {
    gather_ctx *g = user;
    memcpy(g->dst + first, x, n * sizeof(float));
    return ZT_OK;
}

int ck_export_tensor(hid_t f, const char *file, const ck_tinfo *t, int transpose, float *buf,
                     float *whole, zt_st_writer *w, zt_status *st) {
    char name[160];
    ck_dataset_name(name, sizeof name, CK_PARAMS, t->name);
    uint64_t sum = 0;
    sink_ctx sc = {w, st};
    if (!(t->ndim == 2 && transpose))
        return ck_read_checksum(f, file, name, t, buf, &sum, sink_write, &sc, st) != ZT_OK
                   ? st->code : ck_check_sum(f, file, name, sum, st);
    /* ours [R, C] -> the file's [C, R]: whole tensor, then row c of the
     * transpose in pieces */
    gather_ctx g = {whole};
    ZT_TRY(ck_read_checksum(f, file, name, t, buf, &sum, sink_gather, &g, st));
    ZT_TRY(ck_check_sum(f, file, name, sum, st));
    uint64_t R = t->dims[0], C = t->dims[1];
    for (uint64_t c = 0; c < C; ++c)
        for (uint64_t r = 0; r < R; r += CK_CHUNK_ELEMS) {
            uint64_t k = R - r < CK_CHUNK_ELEMS ? R - r : CK_CHUNK_ELEMS;
            for (uint64_t j = 0; j < k; ++j) buf[j] = whole[(r + j) * C + c];
            ZT_TRY(zt_st_write_values(w, buf, k, st));
        }
    return ZT_OK;
}

/* The shape a tensor has in the exported file. */
void ck_export_shape(const ck_tinfo *t, int transpose, zt_st_spec *sp) {
    sp->ndim = t->ndim;
    sp->shape[0] = t->dims[0];
    sp->shape[1] = t->ndim == 2 ? t->dims[1] : 0;
    if (t->ndim == 2 && transpose) {
        sp->shape[0] = t->dims[1];
        sp->shape[1] = t->dims[0];
    }
}

int zt_ckpt_export_safetensors(const char *path, const char *out_file, int bf16, zt_status *st) {
    zt_status_clear(st);
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    ck_tlist L = {0};
    int rc = ck_open_table(path, file, sizeof file, &f, &in, 0, &L, st);
    if (rc != ZT_OK) return rc;
    zt_st_spec *specs = calloc((size_t)(L.n ? L.n : 1), sizeof *specs);
    char (*names)[160] = calloc((size_t)(L.n ? L.n : 1), sizeof *names);
    int *tr = calloc((size_t)(L.n ? L.n : 1), sizeof *tr);
    float *buf = malloc(CK_CHUNK_ELEMS * sizeof(float)), *whole = NULL;
    uint64_t maxw = 0;
    zt_st_writer w;
    memset(&w, 0, sizeof w);
    if (!specs || !names || !tr || !buf) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto out; }
    for (int i = 0; i < L.n; ++i) {
        /* names as in the original GPT-2 files: without "transformer." */
        char hn[200];
        if (zt_arch_hf_name(&zt_arch_gpt2, L.t[i].name, hn, sizeof hn, &tr[i]) != 0)
            snprintf(hn, sizeof hn, "%s", L.t[i].name);
        const char *pfx = "transformer.";
        snprintf(names[i], sizeof names[i], "%s",
                 strncmp(hn, pfx, strlen(pfx)) ? hn : hn + strlen(pfx));
        specs[i].name = names[i];
        ck_export_shape(&L.t[i], tr[i], &specs[i]);
        if (tr[i] && L.t[i].numel > maxw) maxw = L.t[i].numel;
    }
    if (maxw && !(whole = malloc(maxw * sizeof(float)))) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
        goto out;
    }
    char v[6][32];
    snprintf(v[0], sizeof v[0], "%ld", in.step);
    snprintf(v[1], sizeof v[1], "%d", in.n_layer);
    snprintf(v[2], sizeof v[2], "%d", in.n_head);
    snprintf(v[3], sizeof v[3], "%d", in.n_embd);
    snprintf(v[4], sizeof v[4], "%d", in.context);
    snprintf(v[5], sizeof v[5], "%d", in.vocab);
    const char *meta[] = {"format", "pt", "source", "ztrain", "layout",
                          "gpt2 (Hugging Face names; Conv1D weights stored [in, out]); lm_head "
                          "tied to wte", "step", v[0], "n_layer", v[1], "n_head", v[2],
                          "n_embd", v[3], "n_positions", v[4], "vocab_size", v[5]};
    rc = zt_st_write_begin(&w, out_file, specs, L.n, bf16 ? ZT_ST_BF16 : ZT_ST_F32, meta,
                           (int)(sizeof meta / sizeof meta[0] / 2), st);
    for (int i = 0; i < L.n && rc == ZT_OK; ++i)
        rc = ck_export_tensor(f, file, &L.t[i], tr[i], buf, whole, &w, st);
    if (rc == ZT_OK) rc = zt_st_write_end(&w, st);
out:
    zt_st_write_abort(&w);
    free(specs);
    free(names);
    free(tr);
    free(buf);
    free(whole);
    free(L.t);
    H5Fclose(f);
    return rc;
}
