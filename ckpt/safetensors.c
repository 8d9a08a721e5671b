/* safetensors.c -- safetensors reader and writer (safetensors.h). */
#define _GNU_SOURCE
#include "safetensors.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "half.h"
#include "ck_values.h"

/* ================================================================ dtypes */

static const struct { const char *name; int size, code; } dtypes[] = {
    {"F32", 4, ZT_ST_F32}, {"BF16", 2, ZT_ST_BF16}, {"F16", 2, ZT_ST_F16},
    {"F64", 8, ZT_ST_OTHER}, {"I64", 8, ZT_ST_OTHER}, {"U64", 8, ZT_ST_OTHER},
    {"I32", 4, ZT_ST_OTHER}, {"U32", 4, ZT_ST_OTHER}, {"I16", 2, ZT_ST_OTHER},
    {"U16", 2, ZT_ST_OTHER}, {"I8", 1, ZT_ST_OTHER}, {"U8", 1, ZT_ST_OTHER},
    {"BOOL", 1, ZT_ST_OTHER}, {"F8_E4M3", 1, ZT_ST_OTHER}, {"F8_E5M2", 1, ZT_ST_OTHER},
};

void zt_st_shape_str(int ndim, const uint64_t *shape, char *buf, size_t n) {
    size_t at = 0;
    at += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; ++i)
        at += (size_t)snprintf(buf + at, n - at, "%s%llu", i ? ", " : "",
                               (unsigned long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* ================================================================ reader */

static int by_name(const void *a, const void *b) {
    return strcmp(((const zt_st_tensor *)a)->name, ((const zt_st_tensor *)b)->name);
}
static int by_begin(const void *a, const void *b) {
    const zt_st_tensor *x = *(const zt_st_tensor *const *)a, *y = *(const zt_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* A non-negative JSON integer. */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* One header entry into t (name already set); offsets relative to the data. */
static int parse_entry(const zt_st_file *f, const char *name, json_t *e, zt_st_tensor *t,
                       zt_status *st) {
    const char *p = f->path;
    if (!json_is_object(e))
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: header entry is not an object", p, name);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
        json_array_size(off) != 2)
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: header entry needs dtype, shape and "
                       "data_offsets [begin, end]", p, name);
    const char *dn = json_string_value(dt);
    int k = -1;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0] && k < 0; ++i)
        if (!strcmp(dn, dtypes[i].name)) k = (int)i;
    if (k < 0)
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: unknown dtype '%s'", p, name, dn);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dn);
    t->dtype = dtypes[k].code;
    t->esize = dtypes[k].size;
    if (json_array_size(sh) > ZT_ST_MAX_DIMS)
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: %zu dimensions (at most %d)", p, name,
                       json_array_size(sh), ZT_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    t->numel = 1;
    for (int i = 0; i < t->ndim; ++i) {
        if (json_u64(json_array_get(sh, (size_t)i), &t->shape[i]) != 0)
            return zt_fail(st, ZT_EDATA, "%s: tensor %s: shape holds a non-integer or negative "
                           "dimension", p, name);
        if (t->shape[i] && t->numel > UINT64_MAX / 16 / t->shape[i])
            return zt_fail(st, ZT_EDATA, "%s: tensor %s: shape too large", p, name);
        t->numel *= t->shape[i];
    }
    uint64_t b, en;
    if (json_u64(json_array_get(off, 0), &b) != 0 || json_u64(json_array_get(off, 1), &en) != 0)
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: data_offsets are not non-negative "
                       "integers", p, name);
    uint64_t region = f->file_size - f->data_start;
    if (b > en || en > region)
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: data_offsets [%llu, %llu] outside the data "
                       "region of %llu bytes (truncated or corrupt file)", p, name,
                       (unsigned long long)b, (unsigned long long)en, (unsigned long long)region);
    if (en - b != t->numel * (uint64_t)t->esize) {
        char s[128];
        zt_st_shape_str(t->ndim, t->shape, s, sizeof s);
        return zt_fail(st, ZT_EDATA, "%s: tensor %s: data_offsets span %llu bytes but shape %s "
                       "of %s needs %llu", p, name, (unsigned long long)(en - b), s, dn,
                       (unsigned long long)(t->numel * (uint64_t)t->esize));
    }
    t->begin = f->data_start + b;
    t->end = f->data_start + en;
    return ZT_OK;
}

static int parse_header(zt_st_file *f, const char *text, size_t len, zt_status *st) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    char why[200];
    if (!root)
        return zt_fail(st, ZT_EDATA, "%s: header is not valid JSON: %s", f->path,
                       zt_json_error_text(je.text, why, sizeof why));
    int rc = ZT_OK;
    if (!json_is_object(root)) rc = zt_fail(st, ZT_EDATA, "%s: header is not a JSON object", f->path);
    size_t cap = json_is_object(root) ? json_object_size(root) : 0;
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    if (!f->t && rc == ZT_OK) rc = zt_fail(st, ZT_ENOMEM, "out of memory (safetensors header)");
    const char *key;
    json_t *val;
    if (rc == ZT_OK)
        json_object_foreach(root, key, val) {
            if (!strcmp(key, "__metadata__")) {
                if (!json_is_object(val) && !json_is_null(val)) {
                    rc = zt_fail(st, ZT_EDATA, "%s: __metadata__ is not an object", f->path);
                    break;
                }
                continue;
            }
            zt_st_tensor *t = &f->t[f->n];
            if (!(t->name = strdup(key))) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
            f->n++;
            if ((rc = parse_entry(f, key, val, t, st)) != ZT_OK) break;
        }
    json_decref(root);
    if (rc != ZT_OK) return rc;
    /* no two tensors share bytes */
    const zt_st_tensor **o = malloc((size_t)(f->n ? f->n : 1) * sizeof *o);
    if (!o) return zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int i = 0; i < f->n; ++i) o[i] = &f->t[i];
    qsort(o, (size_t)f->n, sizeof *o, by_begin);
    for (int i = 1; i < f->n && rc == ZT_OK; ++i)
        if (o[i]->begin < o[i - 1]->end)
            rc = zt_fail(st, ZT_EDATA, "%s: tensors %s and %s overlap in the data region", f->path,
                         o[i - 1]->name, o[i]->name);
    free(o);
    if (rc == ZT_OK) qsort(f->t, (size_t)f->n, sizeof *f->t, by_name);
    return rc;
}

static int read_full(int fd, void *buf, size_t n, uint64_t at) {
    char *p = buf;
    while (n) {
        size_t k = n < ((size_t)1 << 26) ? n : ((size_t)1 << 26);   /* bounded single reads */
        ssize_t r = pread(fd, p, k, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r == 0 ? -2 : -1;
        p += r;
        at += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

int zt_st_open(const char *path, zt_st_file *f, zt_status *st) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", path, strerror(errno));
    f->fd = fd;
    struct stat sb;
    int rc = ZT_OK;
    uint8_t le[8];
    char *text = NULL;
    if (fstat(fd, &sb) != 0) {
        rc = zt_fail(st, ZT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto out;
    }
    f->file_size = (uint64_t)sb.st_size;
    if (f->file_size < 8 || read_full(fd, le, 8, 0) != 0) {
        rc = zt_fail(st, ZT_EDATA, "%s: shorter than the 8-byte header length (not a "
                     "safetensors file)", path);
        goto out;
    }
    uint64_t hl = 0;
    for (int k = 7; k >= 0; --k) hl = hl << 8 | le[k];
    if (hl < 2 || hl > ZT_ST_MAX_HEADER || hl > f->file_size - 8) {
        rc = zt_fail(st, ZT_EDATA, "%s: header length %llu does not fit the file of %llu bytes "
                     "(truncated, or not a safetensors file)", path, (unsigned long long)hl,
                     (unsigned long long)f->file_size);
        goto out;
    }
    f->data_start = 8 + hl;
    text = malloc((size_t)hl);
    if (!text) { rc = zt_fail(st, ZT_ENOMEM, "out of memory (safetensors header)"); goto out; }
    if (read_full(fd, text, (size_t)hl, 8) != 0) {
        rc = zt_fail(st, ZT_EIO, "%s: cannot read the header: %s", path, strerror(errno));
        goto out;
    }
    rc = parse_header(f, text, (size_t)hl, st);
out:
    free(text);
    if (rc != ZT_OK) zt_st_close(f);
    return rc;
}

void zt_st_close(zt_st_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    for (int i = 0; i < f->n; ++i) free(f->t[i].name);
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

const zt_st_tensor *zt_st_find(const zt_st_file *f, const char *name) {
    zt_st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = (char *)name;
    return f->n ? bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, by_name) : NULL;
}

int zt_st_check_float(const zt_st_file *f, const zt_st_tensor *t, zt_status *st) {
    if (t->dtype != ZT_ST_OTHER) return ZT_OK;
    return zt_fail(st, ZT_EUNSUPPORTED, "%s: tensor %s has dtype %s; only F32, BF16 and F16 "
                   "can be loaded", f->path, t->name, t->dtype_name);
}

int zt_st_read(const zt_st_file *f, const zt_st_tensor *t, uint64_t first, uint64_t n,
               float *out, zt_status *st) {
    ZT_TRY(zt_st_check_float(f, t, st));
    if (first > t->numel || n > t->numel - first)
        return zt_fail(st, ZT_EINTERNAL, "%s: tensor %s: elements [%llu, %llu) outside its %llu "
                       "(a bug: please report it)", f->path, t->name, (unsigned long long)first,
                       (unsigned long long)(first + n), (unsigned long long)t->numel);
    if (!n) return ZT_OK;
    size_t es = (size_t)t->esize;
    /* the raw bytes land at the end of out; converting front to back never
     * overwrites a 16-bit value before it is read (4i + 4 <= 2n + 2i + 2) */
    uint8_t *raw = (uint8_t *)out + (size_t)n * (4 - es);
    int r = read_full(f->fd, raw, (size_t)n * es, t->begin + first * es);
    if (r != 0)
        return zt_fail(st, r == -2 ? ZT_EDATA : ZT_EIO, "%s: tensor %s: %s", f->path, t->name,
                       r == -2 ? "the file ends inside its data (truncated)" : strerror(errno));
    for (uint64_t i = 0; i < n; ++i) {
        const uint8_t *b = raw + i * es;
        if (t->dtype == ZT_ST_F32) {
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                         (uint32_t)b[3] << 24;
            memcpy(&out[i], &u, 4);
        } else {
            uint16_t h = (uint16_t)(b[0] | b[1] << 8);
            out[i] = t->dtype == ZT_ST_BF16 ? zt_bf16_to_f32(h) : zt_f16_to_f32(h);
        }
    }
    return ck_check_values(out, n, first, 0, "weights", f->path, t->name, st);
}

/* ================================================================ writer */

uint64_t zt_st_data_bytes(const zt_st_spec *specs, int n, int dtype) {
    uint64_t total = 0, es = dtype == ZT_ST_F32 ? 4 : 2;
    for (int i = 0; i < n; ++i) {
        uint64_t k = 1;
        for (int d = 0; d < specs[i].ndim; ++d) k *= specs[i].shape[d];
        total += k * es;
    }
    return total;
}

int zt_st_write_begin(zt_st_writer *w, const char *path, const zt_st_spec *specs, int n,
                      int dtype, const char *const *meta, int nmeta, zt_status *st) {
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    w->dtype = dtype;
    if (dtype != ZT_ST_F32 && dtype != ZT_ST_BF16)
        return zt_fail(st, ZT_EINVAL, "%s: the writer writes F32 or BF16", path);
    json_t *hdr = json_object();
    int rc = hdr ? ZT_OK : ZT_ENOMEM;
    if (nmeta > 0 && rc == ZT_OK) {
        json_t *m = json_object();
        for (int i = 0; m && i < nmeta; ++i)
            json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1]));
        if (!m || json_object_set_new(hdr, "__metadata__", m) != 0) rc = ZT_ENOMEM;
    }
    uint64_t at = 0, es = dtype == ZT_ST_F32 ? 4 : 2;
    for (int i = 0; i < n && rc == ZT_OK; ++i) {
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        uint64_t k = 1;
        for (int d = 0; d < specs[i].ndim; ++d) {
            json_array_append_new(shape, json_integer((json_int_t)specs[i].shape[d]));
            k *= specs[i].shape[d];
        }
        json_array_append_new(offs, json_integer((json_int_t)at));
        json_array_append_new(offs, json_integer((json_int_t)(at + k * es)));
        at += k * es;
        if (!e || !shape || !offs ||
            json_object_set_new(e, "dtype", json_string(dtype == ZT_ST_F32 ? "F32" : "BF16")) ||
            json_object_set_new(e, "shape", shape) || json_object_set_new(e, "data_offsets", offs) ||
            json_object_set_new(hdr, specs[i].name, e))
            rc = ZT_ENOMEM;
    }
    w->expect = at;
    char *hs = rc == ZT_OK ? json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (hdr) json_decref(hdr);
    if (!hs) return zt_fail(st, ZT_ENOMEM, "out of memory (safetensors header)");
    size_t hl = strlen(hs), padded = (hl + 7) / 8 * 8;
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        free(hs);
        return zt_fail(st, ZT_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
    }
    uint8_t le[8];
    for (int k = 0; k < 8; ++k) le[k] = (uint8_t)((uint64_t)padded >> (8 * k));
    int bad = fwrite(le, 1, 8, w->fp) != 8 || fwrite(hs, 1, hl, w->fp) != hl;
    for (size_t k = hl; k < padded && !bad; ++k) bad = fputc(' ', w->fp) == EOF;
    free(hs);
    if (bad) {
        zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
        zt_st_write_abort(w);
        return ZT_EIO;
    }
    return ZT_OK;
}

int zt_st_write_values(zt_st_writer *w, const float *x, uint64_t n, zt_status *st) {
    uint64_t es = w->dtype == ZT_ST_F32 ? 4 : 2;
    if (w->written + n * es > w->expect)
        return zt_fail(st, ZT_EINTERNAL, "%s: more data than the header declares (a bug: please "
                       "report it)", w->tmp);
    uint8_t tmp[16384];
    size_t per = sizeof tmp / es;
    for (uint64_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? (size_t)(n - i) : per;
        for (size_t j = 0; j < k; ++j) {
            uint32_t u;
            memcpy(&u, &x[i + j], 4);
            if (es == 2) u = zt_f32_to_bf16(x[i + j]);
            for (uint64_t b = 0; b < es; ++b) tmp[j * es + b] = (uint8_t)(u >> (8 * b));
        }
        if (fwrite(tmp, es, k, w->fp) != k)
            return zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    }
    w->written += n * es;
    return ZT_OK;
}

int zt_st_write_end(zt_st_writer *w, zt_status *st) {
    int rc = ZT_OK;
    if (w->written != w->expect)
        rc = zt_fail(st, ZT_EINTERNAL, "%s: %llu data bytes written, the header declares %llu (a "
                     "bug: please report it)", w->tmp, (unsigned long long)w->written,
                     (unsigned long long)w->expect);
    if (rc == ZT_OK && (fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0))
        rc = zt_fail(st, ZT_EIO, "%s: flush failed: %s", w->tmp, strerror(errno));
    if (fclose(w->fp) != 0 && rc == ZT_OK)
        rc = zt_fail(st, ZT_EIO, "%s: close failed: %s", w->tmp, strerror(errno));
    w->fp = NULL;
    if (rc == ZT_OK && rename(w->tmp, w->path) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: rename failed: %s", w->path, strerror(errno));
    if (rc != ZT_OK) zt_st_write_abort(w);
    else w->tmp[0] = '\0';   /* committed: nothing to remove */
    return rc;
}

void zt_st_write_abort(zt_st_writer *w) {
    if (w->fp) fclose(w->fp);
    w->fp = NULL;
    if (w->tmp[0]) unlink(w->tmp);
}
