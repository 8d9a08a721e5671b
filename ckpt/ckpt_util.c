/* ckpt_util.c -- checkpoint helpers: checksum, HDF5, files, agreement
 * (the I/O watchdog: ckpt_watchdog.c). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "h5util.h"

const char *const ck_family_group[CK_NFAM] = {"params", "optimizer/m", "optimizer/v"};
const char *const ck_family_what[CK_NFAM] = {"weights", "AdamW m", "AdamW v"};

/* ================================================================ checksum */

/* The inner loop, vectorized and compiled for AVX-512 / AVX2 / baseline
 * (integer arithmetic: every variant gives the same result). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__gnu_linux__) && !defined(ZT_NO_TARGET_CLONES)
#define CK_CLONES __attribute__((optimize("tree-vectorize"), \
                                 target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CK_CLONES
#endif
CK_CLONES static uint64_t sum_block_c(const uint32_t *w, size_t n, uint64_t first) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; ++i) s += zt_mix64(((first + (uint64_t)i) << 32) | (uint64_t)w[i]);
    return s;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__gnu_linux__) && !defined(ZT_NO_TARGET_CLONES)
/* AVX2 without AVX-512 has no 64-bit multiply: the vectorized loop above
 * emulates each of zt_mix64's two multiplications with three 32x32->64
 * multiplies.  Here: x * c mod 2^64 = lo(x) * lo(c) + ((lo(x) * hi(c) +
 * hi(x) * lo(c)) mod 2^32) << 32, the cross terms from one 32-bit multiply
 * against c with its halves swapped; two independent chains of 4 lanes.
 * Integer arithmetic: the same value as sum_block_c (tests/test_ckpt.c). */
#include <immintrin.h>
#define CK_AVX2 1
__attribute__((target("avx2"))) static inline __m256i mul64c(__m256i x, __m256i clo, __m256i cswap,
                                                             __m256i hi_mask) {
    __m256i lo = _mm256_mul_epu32(x, clo);                /* lo(x) * lo(c), 64-bit */
    __m256i p = _mm256_mullo_epi32(x, cswap);             /* [lo(x) * hi(c), hi(x) * lo(c)] */
    __m256i cross = _mm256_and_si256(_mm256_add_epi64(p, _mm256_slli_epi64(p, 32)), hi_mask);
    return _mm256_add_epi64(lo, cross);
}
__attribute__((target("avx2"))) static uint64_t sum_block_avx2(const uint32_t *w, size_t n,
                                                               uint64_t first) {
    const uint64_t C1 = 0xBF58476D1CE4E5B9ULL, C2 = 0x94D049BB133111EBULL;
    const __m256i k0 = _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ULL);
    const __m256i c1lo = _mm256_set1_epi64x((long long)(C1 & 0xffffffffULL));
    const __m256i c2lo = _mm256_set1_epi64x((long long)(C2 & 0xffffffffULL));
    const __m256i c1sw = _mm256_set1_epi64x((long long)((C1 << 32) | (C1 >> 32)));
    const __m256i c2sw = _mm256_set1_epi64x((long long)((C2 << 32) | (C2 >> 32)));
    const __m256i him = _mm256_set1_epi64x((long long)0xffffffff00000000ULL);
    const __m256i step = _mm256_set1_epi64x((long long)(8ULL << 32));
    __m256i i0 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_set1_epi64x((long long)first),
                                                    _mm256_setr_epi64x(0, 1, 2, 3)), 32);
    __m256i i1 = _mm256_add_epi64(i0, _mm256_set1_epi64x((long long)(4ULL << 32)));
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t i = 0;
#define CK_MIX(x)                                                           \
    do {                                                                    \
        x = _mm256_add_epi64(x, k0);                                        \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 30));                  \
        x = mul64c(x, c1lo, c1sw, him);                                     \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 27));                  \
        x = mul64c(x, c2lo, c2sw, him);                                     \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));                  \
    } while (0)
    for (; i + 8 <= n; i += 8) {
        __m256i x0 = _mm256_or_si256(i0, _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(w + i))));
        __m256i x1 = _mm256_or_si256(i1, _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(w + i + 4))));
        CK_MIX(x0);
        CK_MIX(x1);
        a0 = _mm256_add_epi64(a0, x0);
        a1 = _mm256_add_epi64(a1, x1);
        i0 = _mm256_add_epi64(i0, step);
        i1 = _mm256_add_epi64(i1, step);
    }
#undef CK_MIX
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)(void *)t, _mm256_add_epi64(a0, a1));
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; ++i) s += zt_mix64(((first + (uint64_t)i) << 32) | (uint64_t)w[i]);
    return s;
}
/* AVX2 but not AVX-512 (there the compiler's own vpmullq loop is used) */
static int ck_use_avx2(void) {
    static int use = -1;   /* (the checksum's OpenMP threads may ask at once) */
    int u = __atomic_load_n(&use, __ATOMIC_RELAXED);
    if (u < 0) {
        __builtin_cpu_init();
        u = __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512dq");
        __atomic_store_n(&use, u, __ATOMIC_RELAXED);
    }
    return u;
}
#endif

static uint64_t sum_block(const uint32_t *w, size_t n, uint64_t first) {
#ifdef CK_AVX2
    if (ck_use_avx2()) return sum_block_avx2(w, n, first);
#endif
    return sum_block_c(w, n, first);
}

uint64_t zt_ckpt_checksum(const float *x, size_t n, uint64_t first) {
    const uint32_t *w = (const uint32_t *)(const void *)x;
    const size_t B = (size_t)1 << 16;
    size_t nb = (n + B - 1) / B;
    uint64_t s = 0;
    /* Unsigned addition mod 2^64 is associative and commutative: the
     * result does not depend on the thread split or the sharding. */
#pragma omp parallel for reduction(+ : s) schedule(static) if (nb > 4)
    for (size_t b = 0; b < nb; ++b) {
        size_t a = b * B, e = a + B < n ? a + B : n;
        s += sum_block(w + a, e - a, first + a);
    }
    return s;
}

/* ================================================================ HDF5 */

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

/* ================================================================ files */

int ck_parse_step(const char *name, long *step) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    if (!*p) return -1;
    long v = 0;
    for (; *p; ++p) {
        if (*p < '0' || *p > '9' || v > (LONG_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 0;
}

int ck_resolve(const char *path, char *file, size_t n) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (S_ISREG(sb.st_mode)) { snprintf(file, n, "%s", path); return 1; }
    if (!S_ISDIR(sb.st_mode)) return -1;
    snprintf(file, n, "%s/%s", path, ZT_CKPT_FILE);
    if (stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
    long step;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* a committed step directory without its file is a broken checkpoint */
    if (ck_parse_step(base, &step) == 0) return 1;
    return 0;
}

int ck_write_all(int fd, const void *buf, size_t n, uint64_t off) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) { errno = EIO; return -1; }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int ck_fsync_path(const char *path, int dir, zt_status *st) {
    int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot open for fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && !(dir && (e == EINVAL || e == EBADF)))  /* some file systems refuse dir fsync */
        return zt_fail(st, ZT_EIO, "%s: fsync failed: %s", path, strerror(e));
    return ZT_OK;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) != 0 && errno != ENOENT ? -1 : 0;
}

int ck_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return unlink(path);
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int ck_mkdir_p(const char *dir, zt_status *st) {
    char buf[ZT_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return zt_fail(st, ZT_EINVAL, "%s: path too long", dir);
    for (char *p = buf + 1; *p; ++p) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return zt_fail(st, ZT_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return zt_fail(st, ZT_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
    return ZT_OK;
}

static int cmp_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ck_scan_steps(const char *dir, long **steps, int *n, zt_status *st) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return ZT_OK;
        return zt_fail(st, ZT_EIO, "%s: cannot list checkpoint directory: %s", dir, strerror(errno));
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        if (ck_parse_step(e->d_name, &s) != 0) continue;
        char p[ZT_PATH_MAX + 300];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nl = realloc(*steps, (size_t)cap * sizeof *nl);
            if (!nl) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                *n = 0;
                return zt_fail(st, ZT_ENOMEM, "out of memory listing %s", dir);
            }
            *steps = nl;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n > 1) qsort(*steps, (size_t)*n, sizeof **steps, cmp_desc);
    return ZT_OK;
}

int ck_quarantine(const char *path, char *q, size_t n) {
    snprintf(q, n, "%s.corrupt-%ld", path, (long)time(NULL));
    if (rename(path, q) != 0) return -1;
    char dir[ZT_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    if (sl) *sl = '\0';
    zt_status tmp;
    ck_fsync_path(sl ? dir : ".", 1, &tmp);
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int ck_clean_stale(const char *dir, char *report, size_t n) {
    if (report && n) report[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    size_t used = 0;
    while ((e = readdir(d))) {
        int stale = (strncmp(e->d_name, "step-", 5) == 0 && ends_with(e->d_name, ".tmp")) ||
                    strcmp(e->d_name, ZT_CKPT_LATEST ".tmp") == 0;
        if (!stale) continue;
        char p[ZT_PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (ck_rmtree(p) == 0) {
            ++count;
            if (report && used + strlen(e->d_name) + 3 < n)
                used += (size_t)snprintf(report + used, n - used, "%s%s", used ? ", " : "", e->d_name);
        }
    }
    closedir(d);
    if (count) {
        zt_status tmp;
        ck_fsync_path(dir, 1, &tmp);
    }
    return count;
}

/* ================================================================ MPI */

MPI_Comm ck_comm(zt_ctx *ctx) { return zt_ctx_world(ctx)->comm; }

/* The agreements go through the world group's collectives (comm.h), every
 * wait bounded by its timeout (ztrain.comm_timeout_s): a rank that died,
 * stopped or hangs in another collective becomes ZT_ECOMM naming the
 * operation and the phase (zt_group_where) instead of a hang. */
static int ck_bcast(zt_ctx *ctx, void *buf, size_t n, zt_dtype t, int root, zt_status *st) {
    zt_group *g = zt_ctx_world(ctx);
    return g->ops->bcast(g, buf, n, t, root, st);
}

int ck_agree(zt_ctx *ctx, int rc, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return rc;
    zt_group *g = zt_ctx_world(ctx);
    const int nr = zt_ctx_nranks(ctx), me = zt_ctx_rank(ctx);
    /* the lowest failed rank as a maximum: nranks - rank where it failed, 0 where not */
    int32_t v = rc != ZT_OK ? nr - me : 0;
    ZT_TRY(g->ops->allreduce_max(g, &v, 1, ZT_I32, st));
    if (v == 0) return ZT_OK;
    const int low = nr - v;
    struct { int code; char msg[sizeof st->msg]; } b;
    memset(&b, 0, sizeof b);
    if (me == low) {
        b.code = st ? st->code : rc;
        if (b.code == ZT_OK) b.code = rc;
        if (st) snprintf(b.msg, sizeof b.msg, "%s", st->msg);
    }
    ZT_TRY(ck_bcast(ctx, &b, sizeof b, ZT_U8, low, st));
    if (me != low) {
        if (low > 0) zt_fail(st, b.code, "rank %d: %s", low, b.msg);
        else zt_fail(st, b.code, "%s", b.msg);
    }
    return b.code;
}

int ck_bcast_buf(zt_ctx *ctx, void *buf, size_t n, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    return ck_bcast(ctx, buf, n, ZT_U8, 0, st);
}

int ck_root_status(zt_ctx *ctx, int rc, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return rc;
    int32_t code = zt_ctx_rank(ctx) == 0 ? rc : 0;
    ZT_TRY(ck_bcast(ctx, &code, 1, ZT_I32, 0, st));
    if (code == ZT_OK) return ZT_OK;
    char msg[sizeof st->msg];
    memset(msg, 0, sizeof msg);
    if (zt_ctx_rank(ctx) == 0 && st) snprintf(msg, sizeof msg, "%s", st->msg);
    ZT_TRY(ck_bcast(ctx, msg, sizeof msg, ZT_U8, 0, st));
    if (zt_ctx_rank(ctx) != 0) zt_fail(st, code, "%s", msg);
    return code;
}

int ck_bcast_str(zt_ctx *ctx, char **s, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    int64_t len = zt_ctx_rank(ctx) == 0 && *s ? (int64_t)strlen(*s) : 0;
    ZT_TRY(ck_bcast(ctx, &len, 1, ZT_I64, 0, st));
    if (zt_ctx_rank(ctx) != 0) {
        free(*s);
        *s = calloc(1, (size_t)len + 1);
        if (!*s) return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    if (len > 0) ZT_TRY(ck_bcast(ctx, *s, (size_t)len, ZT_U8, 0, st));
    return ZT_OK;
}

#define CK_TAG 7301

float *ck_fam_ptr(const zt_owned_range *r, int f) {
    return f == CK_PARAMS ? r->param : f == CK_M ? r->m : r->v;
}

/* Owned elements [x, y) of range rg, family f, from host values src (device
 * state: copied to the device). */
void ck_put_owned(const zt_train_state *s, const zt_owned_range *rg, int f, uint64_t x,
                  uint64_t y, const float *src) {
    float *dst = ck_fam_ptr(rg, f) + (x - rg->lo);
    if (s->on_device) s->be->to_device(dst, src, (y - x) * sizeof(float));
    else memcpy(dst, src, (y - x) * sizeof(float));
}

/* Send flat elements [a, b) of family f from rank 0's buf to their owners;
 * every rank calls it.  h: device state's host buffer (receives land there
 * first), NULL for host state. */
int ck_scatter(zt_ctx *ctx, const zt_train_state *s, const ck_plan *p, uint64_t a,
               uint64_t b, const float *buf, int f, MPI_Request *reqs, float *h,
               const char *what, zt_status *st) {
    MPI_Comm comm = ck_comm(ctx);
    if (zt_ctx_rank(ctx) == 0) {
        int nreq = 0;
        for (int r = 1; r < p->nranks; ++r)
            for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
                uint64_t x = p->lo[i] > a ? p->lo[i] : a, y = p->hi[i] < b ? p->hi[i] : b;
                if (x >= y) continue;
                if (MPI_Isend(buf + (x - a), (int)(y - x), MPI_FLOAT, r, CK_TAG, comm,
                              &reqs[nreq++]) != MPI_SUCCESS)
                    return zt_fail(st, ZT_ECOMM, "%s: MPI_Isend to rank %d failed", what, r);
            }
        for (int i = 0; i < s->n_ranges; ++i) {
            const zt_owned_range *rg = &s->ranges[i];
            uint64_t x = rg->lo > a ? rg->lo : a, y = rg->hi < b ? rg->hi : b;
            if (x < y) ck_put_owned(s, rg, f, x, y, buf + (x - a));
        }
        if (nreq && MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return zt_fail(st, ZT_ECOMM, "%s: MPI_Waitall failed", what);
        return ZT_OK;
    }
    for (int i = 0; i < s->n_ranges; ++i) {
        const zt_owned_range *rg = &s->ranges[i];
        uint64_t x = rg->lo > a ? rg->lo : a, y = rg->hi < b ? rg->hi : b;
        if (x >= y) continue;
        /* at most b - a <= CK_CHUNK_ELEMS elements: fits h */
        if (MPI_Recv(h ? h : ck_fam_ptr(rg, f) + (x - rg->lo), (int)(y - x), MPI_FLOAT, 0, CK_TAG,
                     comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return zt_fail(st, ZT_ECOMM, "%s: MPI_Recv from rank 0 failed", what);
        if (h) ck_put_owned(s, rg, f, x, y, h);
    }
    return ZT_OK;
}

void ck_plan_free(ck_plan *p) {
    free(p->first);
    free(p->count);
    free(p->writer);
    free(p->lo);
    free(p->hi);
    memset(p, 0, sizeof *p);
}

int ck_plan_build(zt_ctx *ctx, const zt_train_state *s, ck_plan *p, zt_status *st) {
    memset(p, 0, sizeof *p);
    int W = zt_ctx_nranks(ctx);
    p->nranks = W;
    p->first = calloc((size_t)W, sizeof(int));
    p->count = calloc((size_t)W, sizeof(int));
    p->writer = calloc((size_t)W, sizeof(int));
    int mine[2] = {s->n_ranges, s->writer};
    int *both = calloc((size_t)W * 2, sizeof(int));
    uint64_t *my = calloc((size_t)(s->n_ranges > 0 ? s->n_ranges : 1) * 2, sizeof(uint64_t));
    int rc = ZT_OK;
    if (!p->first || !p->count || !p->writer || !both || !my) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint plan)");
        goto out;
    }
    if (MPI_Allgather(mine, 2, MPI_INT, both, 2, MPI_INT, ck_comm(ctx)) != MPI_SUCCESS) {
        rc = zt_fail(st, ZT_ECOMM, "checkpoint: MPI_Allgather of owned ranges failed");
        goto out;
    }
    int *counts2 = calloc((size_t)W, sizeof(int)), *displs2 = calloc((size_t)W, sizeof(int));
    for (int r = 0; r < W; ++r) {
        p->count[r] = both[2 * r];
        p->writer[r] = both[2 * r + 1];
        p->first[r] = p->total;
        p->total += p->count[r];
    }
    p->lo = calloc((size_t)(p->total ? p->total : 1), sizeof(uint64_t));
    p->hi = calloc((size_t)(p->total ? p->total : 1), sizeof(uint64_t));
    uint64_t *all = calloc((size_t)(p->total ? p->total : 1) * 2, sizeof(uint64_t));
    if (!counts2 || !displs2 || !p->lo || !p->hi || !all) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint plan)");
    } else {
        for (int r = 0; r < W; ++r) {
            counts2[r] = 2 * p->count[r];
            displs2[r] = 2 * p->first[r];
        }
        for (int i = 0; i < s->n_ranges; ++i) {
            my[2 * i] = s->ranges[i].lo;
            my[2 * i + 1] = s->ranges[i].hi;
        }
        if (MPI_Allgatherv(my, 2 * s->n_ranges, MPI_UINT64_T, all, counts2, displs2,
                           MPI_UINT64_T, ck_comm(ctx)) != MPI_SUCCESS) {
            rc = zt_fail(st, ZT_ECOMM, "checkpoint: MPI_Allgatherv of owned ranges failed");
        } else {
            for (int i = 0; i < p->total; ++i) {
                p->lo[i] = all[2 * i];
                p->hi[i] = all[2 * i + 1];
            }
        }
    }
    free(counts2);
    free(displs2);
    free(all);
    /* The writers' ranges must tile the parameter block exactly once. */
    if (rc == ZT_OK) {
        uint64_t covered = 0, n = s->model->num_params;
        for (int r = 0; r < W; ++r) {
            if (!p->writer[r]) continue;
            for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
                if (p->lo[i] > p->hi[i] || p->hi[i] > n) {
                    rc = zt_fail(st, ZT_EINTERNAL, "checkpoint: rank %d owns a bad range "
                                 "[%llu, %llu) (a bug: please report it)", r,
                                 (unsigned long long)p->lo[i], (unsigned long long)p->hi[i]);
                    break;
                }
                covered += p->hi[i] - p->lo[i];
            }
        }
        if (rc == ZT_OK && covered != n)
            rc = zt_fail(st, ZT_EINTERNAL, "checkpoint: the writers' owned ranges cover %llu "
                         "of %llu parameters (a bug: please report it)",
                         (unsigned long long)covered, (unsigned long long)n);
    }
out:
    free(both);
    free(my);
    if (rc != ZT_OK) ck_plan_free(p);
    return rc;
}

int ck_pieces(const ck_plan *p, int r, const zt_tensor_info *t, int writers_only,
              uint64_t (*out)[2], int cap) {
    if (writers_only && !p->writer[r]) return 0;
    int n = 0;
    uint64_t ta = t->offset, tb = t->offset + t->numel;
    for (int i = p->first[r]; i < p->first[r] + p->count[r]; ++i) {
        uint64_t a = p->lo[i] > ta ? p->lo[i] : ta, b = p->hi[i] < tb ? p->hi[i] : tb;
        for (; a < b; a += CK_CHUNK_ELEMS) {
            uint64_t e = b - a > CK_CHUNK_ELEMS ? a + CK_CHUNK_ELEMS : b;
            if (out && n < cap) { out[n][0] = a; out[n][1] = e; }
            ++n;
        }
    }
    return n;
}

/* ================================================================ test hooks */

/* The phases of ck_crash_point's calls. */
static const char *const crash_phases[] = {"startup", "save_tensors", "save_metadata", "after_data_write",
                                           "before_rename", "after_rename_before_latest", "during_prune", NULL};

/* ZT_CKPT_CRASH_AT's parts: stop, the phase's index, the step (-1: any). */
static int crash_at(const char *v, int *stop, int *phase, long *step) {
    *stop = strncmp(v, "stop:", 5) == 0;
    if (*stop) v += 5;
    *step = -1;
    const char *at = strchr(v, '@');
    size_t n = at ? (size_t)(at - v) : strlen(v);
    for (*phase = 0; crash_phases[*phase]; ++*phase)
        if (strlen(crash_phases[*phase]) == n && !strncmp(v, crash_phases[*phase], n)) break;
    if (!crash_phases[*phase]) return -1;
    if (!at) return 0;
    char *end;
    errno = 0;
    *step = strtol(at + 1, &end, 10);
    return end == at + 1 || *end || errno || *step < 0 || !isdigit((unsigned char)at[1]) ? -1 : 0;
}

int ck_env_check(int world, zt_status *st) {
    const char *v = getenv("ZT_CKPT_CRASH_AT");
    int stop, phase;
    long x;
    if (v && *v && crash_at(v, &stop, &phase, &x) != 0) {
        char list[256];
        size_t k = 0;
        for (int i = 0; crash_phases[i]; i++)
            k += (size_t)snprintf(list + k, k < sizeof list ? sizeof list - k : 0, "%s%s", i ? ", " : "",
                                  crash_phases[i]);
        return zt_fail(st, ZT_EINVAL, "ZT_CKPT_CRASH_AT='%s': expected [stop:]PHASE[@STEP] with PHASE one of "
                       "%s and STEP an integer >= 0", v, list);
    }
    ZT_TRY(zt_env_int("ZT_CKPT_CRASH_RANK", 0, world - 1, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_WRITE_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_COPY_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_STEP_SLEEP_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_WRITER_NICE", 0, 19, 19, &x, st));
    return zt_env_bool("ZT_CKPT_DIRECT_IO", 1, &phase, st);
}

void ck_crash_point(const char *phase, long step) {
    const char *v = getenv("ZT_CKPT_CRASH_AT");
    int stop, k;
    long want, rank;
    if (!v || !*v || crash_at(v, &stop, &k, &want) != 0 || strcmp(crash_phases[k], phase)) return;
    if (want >= 0 && want != step) return;
    zt_env_int("ZT_CKPT_CRASH_RANK", 0, INT_MAX, -1, &rank, NULL);
    if (rank >= 0 && rank != zt_world_rank()) return;
    fprintf(stderr, "ZT_CKPT_CRASH_AT=%s: %s rank %d (pid %ld) at step %ld\n", v,
            stop ? "stopping" : "killing", zt_world_rank(), (long)getpid(), step);
    fflush(stderr);
    raise(stop ? SIGSTOP : SIGKILL);
}
