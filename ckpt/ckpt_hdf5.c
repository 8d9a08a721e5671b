/*
 * ckpt_hdf5.c -- a checkpoint file's HDF5 side: errors, selections,
 * attributes, the serial open, the metadata checksums (/meta_checksums) and
 * the header (ck_read_header).  docs/checkpoints.md "HDF5 layout",
 * "Metadata checksums".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "h5util.h"

const char *const ck_family_group[CK_NFAM] = {"params", "optimizer/m", "optimizer/v"};
const char *const ck_family_what[CK_NFAM] = {"weights", "AdamW m", "AdamW v"};

void ck_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static herr_t first_desc(unsigned n, const H5E_error2_t *e, void *user) {
    char *buf = user;
    if (n == 0 && e && e->desc) snprintf(buf, 256, "%s", e->desc);
    return 0;
}

int ck_h5_fail(zt_status *st, int code, const char *fmt, ...) {
    char msg[900], h5[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_desc, h5);
    H5Eclear2(H5E_DEFAULT);
    /* the sec2 driver's "file write failed: time = ..., filename = ...,
     * errno = 28, error message = 'No space left on device', buf = ...":
     * its first words and the system's message */
    const char *em = strstr(h5, "error message = '"), *colon = strchr(h5, ':');
    if (em && colon && colon < em) {
        char sys[128];
        em += strlen("error message = '");
        size_t k = strcspn(em, "'");
        snprintf(sys, sizeof sys, "%.*s", (int)(k < sizeof sys ? k : sizeof sys - 1), em);
        snprintf(h5 + (colon - h5), sizeof h5 - (size_t)(colon - h5), ": %s", sys);
    }
    if (h5[0]) return zt_fail(st, code, "%s (HDF5: %s)", msg, h5);
    return zt_fail(st, code, "%s", msg);
}

int ck_select_flat(hid_t space, int ndim, const uint64_t *dims, uint64_t a, uint64_t b) {
    if (a >= b) return H5Sselect_none(space) < 0 ? -1 : 0;
    if (ndim == 1) {
        hsize_t off = a, cnt = b - a;
        return H5Sselect_hyperslab(space, H5S_SELECT_SET, &off, NULL, &cnt, NULL) < 0 ? -1 : 0;
    }
    hsize_t C = dims[1];
    hsize_t r0 = a / C, c0 = a % C, r1 = b / C, c1 = b % C;
    int first = 1;
#define CK_SEL(R, Cc, NR, NC)                                                        \
    do {                                                                              \
        hsize_t o_[2] = {(R), (Cc)}, n_[2] = {(NR), (NC)};                            \
        if (H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, o_,    \
                                NULL, n_, NULL) < 0)                                  \
            return -1;                                                                \
        first = 0;                                                                    \
    } while (0)
    if (r0 == r1) {
        CK_SEL(r0, c0, 1, c1 - c0);
        return 0;
    }
    hsize_t rs = r0;
    if (c0 > 0) { CK_SEL(r0, c0, 1, C - c0); rs = r0 + 1; }
    if (r1 > rs) CK_SEL(rs, 0, r1 - rs, C);
    if (c1 > 0) CK_SEL(r1, 0, 1, c1);
#undef CK_SEL
    return 0;
}

static int attr_put(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (a >= 0) {
        rc = H5Awrite(a, mtype, v) < 0 ? -1 : 0;
        H5Aclose(a);
    }
    H5Sclose(sp);
    return rc;
}

int ck_attr_put_i64(hid_t o, const char *n, int64_t v) {
    return attr_put(o, n, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
int ck_attr_put_u64(hid_t o, const char *n, uint64_t v) {
    return attr_put(o, n, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}
int ck_attr_put_f64(hid_t o, const char *n, double v) {
    return attr_put(o, n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}
int ck_attr_put_str(hid_t o, const char *n, const char *v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    int rc = attr_put(o, n, t, t, v);
    H5Tclose(t);
    return rc;
}

static int attr_get(hid_t o, const char *name, hid_t mtype, void *v) {
    if (H5Aexists(o, name) <= 0) return -1;
    hid_t a = H5Aopen(o, name, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = H5Aread(a, mtype, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}
int ck_attr_get_i64(hid_t o, const char *n, int64_t *v) { return attr_get(o, n, H5T_NATIVE_INT64, v); }
int ck_attr_get_u64(hid_t o, const char *n, uint64_t *v) { return attr_get(o, n, H5T_NATIVE_UINT64, v); }
int ck_attr_get_f64(hid_t o, const char *n, double *v) { return attr_get(o, n, H5T_NATIVE_DOUBLE, v); }

int ck_attr_get_str(hid_t o, const char *name, char *buf, size_t n) {
    if (n == 0 || H5Aexists(o, name) <= 0) return -1;
    hid_t a = H5Aopen(o, name, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = zt_h5_attr_text(a, buf, n);
    H5Aclose(a);
    return rc;
}

hid_t ck_open_serial(const char *file, zt_status *st) {
    ck_h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return ck_h5_fail(st, ZT_EINTERNAL, "%s: H5Pcreate failed", file), -1;
    H5Pset_fapl_sec2(fapl);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);   /* a committed checkpoint is never written again */
#endif
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        int code = access(file, R_OK) == 0 ? ZT_EDATA : ZT_EIO;
        if (code == ZT_EIO)
            return zt_fail(st, code, "%s: cannot open: %s", file, strerror(errno)), -1;
        return ck_h5_fail(st, code, "%s: not a readable HDF5 checkpoint", file), -1;
    }
    return f;
}

/* ================================================================ metadata checksums */

typedef struct meta_walk {
    char *buf;
    size_t len, cap;
    const char *obj;     /* the object being walked ("/", "/model", ...) */
    int bad;
} meta_walk;

static uint64_t meta_hash(const char *key, const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a over key, NUL, bytes */
    for (const char *k = key; *k; ++k) h = (h ^ (unsigned char)*k) * 0x100000001b3ull;
    h *= 0x100000001b3ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return zt_mix64(h ^ (uint64_t)n);
}

static void meta_add(meta_walk *w, const char *key, const void *p, size_t n) {
    size_t need = strlen(key) + 20;
    if (w->len + need + 1 > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4096;
        while (cap < w->len + need + 1) cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) { w->bad = 1; return; }
        w->buf = nb;
        w->cap = cap;
    }
    w->len += (size_t)snprintf(w->buf + w->len, w->cap - w->len, "%016llx %s\n",
                               (unsigned long long)meta_hash(key, p, n), key);
}

/* The raw (file-type) bytes of attribute or dataset object id. */
static void *meta_raw(hid_t id, int attr, size_t *n) {
    hid_t t = attr ? H5Aget_type(id) : H5Dget_type(id);
    hid_t sp = attr ? H5Aget_space(id) : H5Dget_space(id);
    void *b = NULL;
    *n = 0;
    if (t >= 0 && sp >= 0 && !H5Tis_variable_str(t)) {
        hssize_t np = H5Sget_simple_extent_npoints(sp);
        size_t sz = H5Tget_size(t) * (size_t)(np > 0 ? np : 0);
        b = calloc(1, sz ? sz : 1);
        if (b && (attr ? H5Aread(id, t, b) : H5Dread(id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b)) < 0) {
            free(b);
            b = NULL;
        }
        *n = sz;
    }
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    return b;
}

static herr_t meta_attr(hid_t obj, const char *name, const H5A_info_t *ai, void *user) {
    (void)ai;
    meta_walk *w = user;
    char key[512];
    snprintf(key, sizeof key, "%s@%s", w->obj, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    size_t n = 0;
    void *b = a >= 0 ? meta_raw(a, 1, &n) : NULL;
    if (a >= 0) H5Aclose(a);
    if (!b) { w->bad = 1; return -1; }
    meta_add(w, key, b, n);
    free(b);
    return 0;
}

static int meta_object(hid_t f, const char *path, meta_walk *w) {
    hid_t o = H5Oopen(f, path, H5P_DEFAULT);
    if (o < 0) return -1;
    char key[512];
    snprintf(key, sizeof key, "%s%s", path[0] == '/' ? "" : "/", path);
    w->obj = key;
    hsize_t idx = 0;
    if (H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, meta_attr, w) < 0) w->bad = 1;
    if (!w->bad && H5Iget_type(o) == H5I_DATASET &&
        (!strcmp(key, "/config") || !strcmp(key, "/lora"))) {
        size_t n = 0;
        void *b = meta_raw(o, 0, &n);   /* the configuration JSON itself */
        if (!b) w->bad = 1;
        else meta_add(w, key, b, n);
        free(b);
    }
    H5Oclose(o);
    return w->bad ? -1 : 0;
}

static herr_t meta_link(hid_t g, const char *name, const H5L_info_t *li, void *user) {
    (void)li;
    if (!strcmp(name, ZT_CKPT_META_DATASET)) return 0;
    return meta_object(g, name, user) < 0 ? -1 : 0;
}

char *ck_meta_lines(hid_t f, const char *file, zt_status *st) {
    meta_walk w = {0};
    if (meta_object(f, "/", &w) == 0 &&
        H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, meta_link, &w) < 0)
        w.bad = 1;
    if (w.bad || !w.buf) {
        free(w.buf);
        ck_h5_fail(st, ZT_EDATA, "%s: cannot read the checkpoint's attributes", file);
        return NULL;
    }
    return w.buf;
}

/* A scalar string dataset `name` holding s (serial: a save's rank 0). */
int ck_put_str_dataset(hid_t f, const char *name, const char *s) {
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    int bad = 0;
    H5Tset_size(t, strlen(s) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hid_t d = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0) bad = 1;
    else {
        if (H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) bad = 1;
        H5Dclose(d);
    }
    H5Sclose(sp);
    H5Tclose(t);
    return bad ? -1 : 0;
}

char *ck_get_str_dataset(hid_t f, const char *name) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return NULL;
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    size_t sz = t >= 0 ? H5Tget_size(t) : 0;
    char *s = calloc(1, sz + 1);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, sz ? sz : 1);
    if (s && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) {
        free(s);
        s = NULL;
    }
    H5Tclose(mt);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    H5Eclear2(H5E_DEFAULT);
    return s;
}

int ck_put_meta_checksums(hid_t f, const char *lines, const char *file, zt_status *st) {
    if (ck_put_str_dataset(f, ZT_CKPT_META_DATASET, lines) < 0)
        return ck_h5_fail(st, ZT_EIO, "%s: cannot write /%s", file, ZT_CKPT_META_DATASET);
    return ZT_OK;
}

/* The line of key in lines ("<hex> <key>\n"), or NULL. */
static const char *meta_find(const char *lines, const char *key, size_t klen) {
    for (const char *p = lines; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 17 + klen && p[16] == ' ' && !strncmp(p + 17, key, klen)) return p;
        if (!e) break;
        p = e + 1;
    }
    return NULL;
}

int ck_check_meta(hid_t f, const char *file, int *present, zt_status *st) {
    *present = 0;
    htri_t ex = H5Lexists(f, ZT_CKPT_META_DATASET, H5P_DEFAULT);
    if (ex <= 0) { H5Eclear2(H5E_DEFAULT); return ZT_OK; }
    char *stored = NULL;
    hid_t d = H5Dopen2(f, ZT_CKPT_META_DATASET, H5P_DEFAULT);
    size_t n = 0;
    if (d >= 0) {
        stored = meta_raw(d, 0, &n);
        H5Dclose(d);
    }
    if (!stored) return ck_h5_fail(st, ZT_EDATA, "%s: cannot read /%s", file, ZT_CKPT_META_DATASET);
    char *tmp = realloc(stored, n + 1);
    if (!tmp) { free(stored); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    stored = tmp;
    stored[n] = '\0';
    char *have = ck_meta_lines(f, file, st);
    if (!have) { free(stored); return st->code; }
    int rc = ZT_OK;
    /* every stored entry must be there and match; every present one stored */
    for (int pass = 0; pass < 2 && rc == ZT_OK; ++pass) {
        const char *a = pass ? have : stored, *b = pass ? stored : have;
        for (const char *p = a; *p && rc == ZT_OK;) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            const char *key = len > 17 && p[16] == ' ' ? p + 17 : NULL;
            size_t klen = key ? len - 17 : 0;
            const char *q = key ? meta_find(b, key, klen) : NULL;
            if (!key)
                rc = zt_fail(st, ZT_EDATA, "%s: /%s is malformed: the checkpoint's metadata "
                             "is corrupt", file, ZT_CKPT_META_DATASET);
            else if (!q)
                rc = zt_fail(st, ZT_EDATA, "%s: attribute %.*s: %s: the checkpoint's metadata is "
                             "corrupt", file, (int)klen, key,
                             pass ? "not covered by the metadata checksums"
                                  : "missing (metadata checksum entry without its attribute)");
            else if (strncmp(p, q, 16) != 0)
                rc = zt_fail(st, ZT_EDATA, "%s: attribute %.*s: metadata checksum mismatch "
                             "(stored %.16s, computed %.16s): the checkpoint is corrupt", file,
                             (int)klen, key, pass ? q : p, pass ? p : q);
            if (!e) break;
            p = e + 1;
        }
    }
    free(stored);
    free(have);
    if (rc == ZT_OK) *present = 1;
    return rc;
}

void ck_dataset_name(char *buf, size_t n, int fam, const char *tensor) {
    snprintf(buf, n, "%s/%s", ck_family_group[fam], tensor);
}

/* /model's architecture attributes (arch.h: every setting), resolved; a
 * missing one takes the configuration's default (checkpoints from before
 * the Llama family are GPT-2s).  1 when one is malformed. */
static int read_arch(hid_t g, zt_ckpt_info *in) {
    zt_config *d = zt_config_new();
    if (!d) return 1;
    zt_model_config *mc = &in->model;
    *mc = d->model;
    zt_config_free(d);
    mc->n_layer = in->n_layer;
    mc->n_head = in->n_head;
    mc->n_embd = in->n_embd;
    mc->context = in->context;
    mc->vocab = in->vocab;
    int bad = H5Aexists(g, "architecture") > 0 &&
              ck_attr_get_str(g, "architecture", mc->arch, sizeof mc->arch) != 0;
    int ns;
    const zt_arch_setting *set = zt_arch_settings(&ns);
    for (int k = 0; k < ns; ++k) {
        const zt_arch_setting *a = &set[k];
        void *f = (char *)mc + a->offset;
        int64_t v;
        if (H5Aexists(g, a->key) <= 0) continue;
        if (a->type == ZT_AS_STR) bad |= ck_attr_get_str(g, a->key, f, a->size) != 0;
        else if (a->type == ZT_AS_DOUBLE) bad |= ck_attr_get_f64(g, a->key, f) != 0;
        else if (ck_attr_get_i64(g, a->key, &v) != 0) bad = 1;
        else *(int *)f = (int)v;
    }
    for (int k = 0; k < ns; ++k)   /* 0 = derive: the derived value */
        if (set[k].resolve) *(int *)(void *)((char *)mc + set[k].offset) = set[k].resolve(mc);
    H5Eclear2(H5E_DEFAULT);
    return bad;
}

int ck_read_header(hid_t f, const char *file, zt_ckpt_info *in, int with_config, zt_status *st) {
    memset(in, 0, sizeof *in);
    ZT_TRY(ck_check_meta(f, file, &in->meta_checksums, st));
    char fmt[64] = "";
    if (ck_attr_get_str(f, "format", fmt, sizeof fmt) != 0 || strcmp(fmt, ZT_CKPT_FORMAT) != 0)
        return zt_fail(st, ZT_EDATA, "%s: not a ztrain checkpoint (root attribute 'format' is "
                       "missing or not \"%s\")", file, ZT_CKPT_FORMAT);
    int64_t v;
    if (ck_attr_get_i64(f, "format_version", &v) != 0)
        return zt_fail(st, ZT_EDATA, "%s: root attribute 'format_version' missing", file);
    in->format_version = (int)v;
    if (v > ZT_CKPT_FORMAT_VERSION)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: checkpoint format version %lld is newer than "
                       "this build reads (%d): use a newer ztrain", file, (long long)v,
                       ZT_CKPT_FORMAT_VERSION);
    if (v < 1) return zt_fail(st, ZT_EDATA, "%s: bad format_version %lld", file, (long long)v);
    struct { const char *name; long *l; int *i; } iv[] = {
        {"step", &in->step, NULL}, {"adam_t", &in->adam_t, NULL},
        {"world_size", NULL, &in->world_size}, {"zero_stage", NULL, &in->zero_stage},
        {"shard_group", NULL, &in->shard_group}, {"has_master", NULL, &in->has_master},
        {"n_tensors", NULL, &in->n_tensors},
    };
    for (size_t k = 0; k < sizeof iv / sizeof iv[0]; ++k) {
        if (ck_attr_get_i64(f, iv[k].name, &v) != 0)
            return zt_fail(st, ZT_EDATA, "%s: root attribute '%s' missing", file, iv[k].name);
        if (iv[k].l) *iv[k].l = (long)v; else *iv[k].i = (int)v;
    }
    ck_attr_get_f64(f, "created_unix", &in->created_unix);
    ck_attr_get_str(f, "ztrain_version", in->ztrain_version, sizeof in->ztrain_version);
    if (ck_attr_get_str(f, "checksum_algorithm", in->checksum_algorithm,
                        sizeof in->checksum_algorithm) != 0 ||
        strcmp(in->checksum_algorithm, ZT_CKPT_CHECKSUM_ALGORITHM) != 0)
        return zt_fail(st, ZT_EDATA, "%s: unknown checksum algorithm '%s'", file,
                       in->checksum_algorithm);
    hid_t g = H5Gopen2(f, "model", H5P_DEFAULT);
    if (g < 0) return ck_h5_fail(st, ZT_EDATA, "%s: group /model missing", file);
    struct { const char *name; int *i; } mv[] = {
        {"n_layer", &in->n_layer}, {"n_head", &in->n_head}, {"n_embd", &in->n_embd},
        {"context", &in->context}, {"vocab", &in->vocab},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof mv / sizeof mv[0] && !bad; ++k) {
        if (ck_attr_get_i64(g, mv[k].name, &v) != 0) bad = 1;
        else *mv[k].i = (int)v;
    }
    if (!bad && ck_attr_get_u64(g, "num_params", &in->num_params) != 0) bad = 1;
    if (!bad) bad = read_arch(g, in);
    H5Gclose(g);
    if (bad) return zt_fail(st, ZT_EDATA, "%s: /model attributes incomplete", file);
    if ((g = H5Gopen2(f, "rng", H5P_DEFAULT)) >= 0) {
        ck_attr_get_u64(g, "seed", &in->seed);
        H5Gclose(g);
    }
    if ((g = H5Gopen2(f, "loss_scaler", H5P_DEFAULT)) >= 0) {
        int64_t pr = 0, gs = 0, hl = 0;
        double sc = 0;
        int bad_ls = ck_attr_get_i64(g, "present", &pr) != 0;
        if (!bad_ls && pr)
            bad_ls = ck_attr_get_f64(g, "scale", &sc) != 0 ||
                     ck_attr_get_i64(g, "good_steps", &gs) != 0 ||
                     ck_attr_get_i64(g, "hysteresis_left", &hl) != 0;
        H5Gclose(g);
        if (bad_ls) return zt_fail(st, ZT_EDATA, "%s: /loss_scaler attributes incomplete", file);
        in->scaler_present = pr != 0;
        in->loss_scale = sc;
        in->scaler_good_steps = (long)gs;
        in->scaler_hysteresis_left = (int)hl;
    }
    if ((g = H5Gopen2(f, "data", H5P_DEFAULT)) >= 0) {
        if (ck_attr_get_i64(g, "train_batch_size", &v) == 0) in->train_batch_size = (long)v;
        ck_attr_get_u64(g, "sample_position", &in->sample_position);
        H5Gclose(g);
    }
    if (with_config) {
        hid_t d = H5Dopen2(f, "config", H5P_DEFAULT);
        if (d >= 0) {
            hid_t t = H5Dget_type(d);
            size_t sz = t >= 0 ? H5Tget_size(t) : 0;
            in->config_json = calloc(1, sz + 1);
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, sz ? sz : 1);
            if (!in->config_json || H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, in->config_json) < 0) {
                free(in->config_json);
                in->config_json = NULL;
            }
            H5Tclose(mt);
            if (t >= 0) H5Tclose(t);
            H5Dclose(d);
        }
        H5Eclear2(H5E_DEFAULT);
    }
    return ZT_OK;
}

void zt_ckpt_info_free(zt_ckpt_info *in) {
    if (!in) return;
    free(in->config_json);
    in->config_json = NULL;
}
