/*
 * cpu_strict.c -- "cpu-strict", a debugging backend: the CPU kernels on
 * memory the host cannot touch (see zt_backend_cpu_strict in backend.h).
 *
 * Every block alloc() returns is its own anonymous mapping, PROT_NONE.  Each
 * entry of the table makes every live block readable and writable, checks
 * that the pointers it was given are where they must be (kernel operands and
 * copy/zero targets inside live blocks, the host side of to_host/to_device
 * outside them), runs the CPU backend's entry, and makes the blocks
 * PROT_NONE again.  So the engine computes exactly what it computes on the
 * cpu backend, but
 *   - a host read or write of device memory (a memcpy, a loop, HDF5 or MPI
 *     on a device buffer) faults at once (SIGSEGV at the offending line);
 *   - a host pointer handed to a kernel, or a copy in the wrong direction,
 *     is not run: the first such misuse is kept as the table's error()
 *     ("cpu-strict: <entry>: <operand> ... is not device memory"), which the
 *     engine reports like a CUDA error.
 * The protection changes are process-wide, so this is for tiny models in
 * tests, one thread calling the table at a time (the engine's usage).
 *
 * It can also emulate a device of a given capacity
 * (zt_backend_cpu_strict_set_capacity; ztrain.strict_device_memory): alloc()
 * fails once the live bytes would exceed it and device_memory() reports the
 * rest as free, so the engine's device-memory pre-flight and its
 * out-of-memory paths run on the CPU.  mem_stats() counts the bytes alloc()
 * was asked for; this backend has no buffers of its own.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"

typedef struct region { uintptr_t base; size_t len, map; } region;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static region *g_reg;
static size_t g_n, g_cap;
static size_t g_page;
static char g_err[512];
static int g_have_err;
static int g_depth;           /* nested enter/leave (not expected, but harmless) */
static size_t g_live, g_peak; /* requested bytes of the live blocks, and their peak */
static size_t g_capacity;     /* emulated device capacity, 0 = none */

static const zt_backend *cpu(void) { return zt_backend_cpu(); }

static void set_err(const char *fmt, const char *a, const char *b, const void *p) {
    if (g_have_err) return;
    snprintf(g_err, sizeof g_err, fmt, a, b, p);
    g_have_err = 1;
}

static void protect_all(int prot) {
    for (size_t i = 0; i < g_n; i++)
        if (mprotect((void *)g_reg[i].base, g_reg[i].map, prot) != 0 && !g_have_err) {
            snprintf(g_err, sizeof g_err, "cpu-strict: mprotect of a %zu-byte block failed",
                     g_reg[i].map);
            g_have_err = 1;
        }
}

static void flush_uploads(void);
static void enter(void) {
    pthread_mutex_lock(&g_mu);
    if (g_depth++ == 0) {
        protect_all(PROT_READ | PROT_WRITE);
        flush_uploads();
    }
}
static void leave(void) {
    if (--g_depth == 0) protect_all(PROT_NONE);
    pthread_mutex_unlock(&g_mu);
}

/* size unknown to the wrapper: only the start must lie in a block */
#define UNK ((size_t)-1)

/* 1 when [p, p + bytes) lies inside one live block (0 bytes: nothing to
 * check; UNK: p inside a block). */
static int in_dev(const void *p, size_t bytes) {
    if (bytes == 0) return 1;
    const uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < g_n; i++) {
        const uintptr_t lo = g_reg[i].base, hi = lo + (g_reg[i].len ? g_reg[i].len : 1);
        if (a >= lo && a < hi) return bytes == UNK || bytes <= hi - a;
    }
    return 0;
}
/* 1 when [p, p + bytes) overlaps no live block */
static int in_host(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p, b = a + (bytes ? bytes : 1);
    for (size_t i = 0; i < g_n; i++)
        if (a < g_reg[i].base + g_reg[i].map && g_reg[i].base < b) return 0;
    return 1;
}

/* DEV(who, ptr, bytes): ptr (may be NULL when `nullable`) must be device
 * memory; otherwise note the misuse and make the caller skip the entry. */
#define NEED_DEV(who, name, ptr, bytes)                                                  \
    do {                                                                                 \
        if ((ptr) && !in_dev((ptr), (bytes))) {                                          \
            set_err("cpu-strict: %s: operand %s=%p is not device memory (a host pointer " \
                    "handed to the backend, or past the end of its block)", who, name,    \
                    (const void *)(ptr));                                                \
            ok = 0;                                                                      \
        }                                                                                \
    } while (0)

/* An entry's operands, checked as NEED_DEV checks each, in order:
 * if (NEED_ALL("who", {"name", ptr, bytes}, ...)) cpu()->who(...); */
typedef struct operand {
    const char *name;
    const void *ptr;
    size_t bytes;
} operand;
static int need_all(const char *who, const operand *o, size_t n) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) NEED_DEV(who, o[i].name, o[i].ptr, o[i].bytes);
    return ok;
}
#define NEED_ALL(who, ...)                                   \
    need_all(who, (const operand[]){__VA_ARGS__},            \
             sizeof((const operand[]){__VA_ARGS__}) / sizeof(operand))
/* the bf16 operand x16 (n16 bytes) when given, else the fp32 x (n bytes);
 * neither when !on */
#define OPND_OR(on, x16, n16, x, n)                                                     \
    {(x16) ? #x16 : #x, !(on) ? NULL : (x16) ? (const void *)(x16) : (const void *)(x), \
     (x16) ? (size_t)(n16) : (size_t)(n)}

/* ------------------------------------------------------------ memory */

static void *s_alloc(size_t bytes) {
    if (!g_page) {
        long pg = sysconf(_SC_PAGESIZE);
        g_page = pg > 0 ? (size_t)pg : 4096;
    }
    const size_t map = ((bytes ? bytes : 1) + g_page - 1) / g_page * g_page;
    pthread_mutex_lock(&g_mu);
    if (g_capacity && (bytes > g_capacity || g_live > g_capacity - bytes)) {
        if (!g_have_err) {
            snprintf(g_err, sizeof g_err, "cpu-strict: out of memory on the emulated device: %zu bytes "
                     "requested, %zu of %zu bytes in use (ztrain.strict_device_memory)", bytes,
                     g_live, g_capacity);
            g_have_err = 1;
        }
        pthread_mutex_unlock(&g_mu);
        return NULL;
    }
    pthread_mutex_unlock(&g_mu);
    void *p = mmap(NULL, map, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 64;
        region *r = realloc(g_reg, cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&g_mu);
            munmap(p, map);
            return NULL;
        }
        g_reg = r;
        g_cap = cap;
    }
    g_reg[g_n].base = (uintptr_t)p;
    g_reg[g_n].len = bytes;
    g_reg[g_n].map = map;
    g_n++;
    g_live += bytes;
    if (g_live > g_peak) g_peak = g_live;
    /* a block made while others are open (inside an entry) must be open too */
    if (g_depth) mprotect(p, map, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&g_mu);
    return p;
}

/* alloc_nz: s_alloc's block filled with 0xff bytes (an fp32 or bf16 NaN,
 * NF4 code 15): a read of it before the caller's write shows in the results */
static void *s_alloc_nz(size_t bytes) {
    void *p = s_alloc(bytes);
    if (!p) return NULL;
    const size_t map = ((bytes ? bytes : 1) + g_page - 1) / g_page * g_page;
    pthread_mutex_lock(&g_mu);
    mprotect(p, map, PROT_READ | PROT_WRITE);
    memset(p, 0xff, bytes ? bytes : 1);
    if (!g_depth) mprotect(p, map, PROT_NONE);
    pthread_mutex_unlock(&g_mu);
    return p;
}

static void s_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_n; i++)
        if (g_reg[i].base == (uintptr_t)p) {
            munmap(p, g_reg[i].map);
            g_live -= g_reg[i].len;
            g_reg[i] = g_reg[--g_n];
            if (!g_n) {
                free(g_reg);
                g_reg = NULL;
                g_cap = 0;
            }
            pthread_mutex_unlock(&g_mu);
            return;
        }
    set_err("cpu-strict: %s%s: %p was not allocated by this backend", "free", "", p);
    pthread_mutex_unlock(&g_mu);
}

/* every row inside live device blocks: the extents (height-1) pitch + width */
static void s_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height) {
    int ok = 1;
    enter();
    if (width && height) {
        if (width > dpitch || width > spitch) {
            set_err("cpu-strict: %s%s: width exceeds a pitch (rows would overlap) at %p", "copy2d", "", dst);
            ok = 0;
        }
        NEED_DEV("copy2d", "dst", dst, (height - 1) * dpitch + width);
        NEED_DEV("copy2d", "src", src, (height - 1) * spitch + width);
        if (ok) cpu()->copy2d(dst, dpitch, src, spitch, width, height);
    }
    leave();
}

static void s_copy(void *dst, const void *src, size_t bytes) {
    int ok = 1;
    enter();
    NEED_DEV("copy", "dst", dst, bytes);
    NEED_DEV("copy", "src", src, bytes);
    if (ok) cpu()->copy(dst, src, bytes);
    leave();
}

static void s_to_host(void *host_dst, const void *dev_src, size_t bytes) {
    int ok = 1;
    enter();
    NEED_DEV("to_host", "src", dev_src, bytes);
    if (bytes && !in_host(host_dst, bytes)) {
        set_err("cpu-strict: %s: destination %s%p is device memory (use copy)", "to_host", "",
                host_dst);
        ok = 0;
    }
    if (ok && bytes) memcpy(host_dst, dev_src, bytes);
    leave();
}

static void s_to_device(void *dev_dst, const void *host_src, size_t bytes) {
    int ok = 1;
    enter();
    NEED_DEV("to_device", "dst", dev_dst, bytes);
    if (bytes && !in_host(host_src, bytes)) {
        set_err("cpu-strict: %s: source %s%p is device memory (use copy)", "to_device", "",
                host_src);
        ok = 0;
    }
    if (ok && bytes) memcpy(dev_dst, host_src, bytes);
    leave();
}

static void s_zero(void *p, size_t bytes) {
    int ok = 1;
    enter();
    NEED_DEV("zero", "p", p, bytes);
    if (ok) cpu()->zero(p, bytes);
    leave();
}

/* ---- asynchronous copies, emulated as late as a device may do them ----
 * to_host_async reads the device source at once (its place in the queue)
 * into a private buffer and writes the host destination only in copy_wait:
 * a host that reads the destination before waiting sees stale data.
 * to_device_async reads the host source only when the next entry of the
 * table runs (which a device would queue after the copy) or in copy_wait:
 * a host that changes the source before then uploads the changed data.
 * So results match the cpu backend only if the caller keeps the rules. */
enum { NXFER = 64 };
typedef struct xfer {
    int used, up, pending;    /* up: to_device; pending: not copied yet */
    void *dst;
    const void *src;
    size_t bytes;
    void *tmp;                /* to_host: the device bytes, read at the call */
    unsigned long seq;        /* queue order */
} xfer;
static xfer g_x[NXFER];
static unsigned long g_xseq;

/* Uploads still pending, in queue order (lock held, blocks open). */
static void flush_uploads(void) {
    for (;;) {
        xfer *first = NULL;
        for (int i = 0; i < NXFER; i++)
            if (g_x[i].used && g_x[i].up && g_x[i].pending && (!first || g_x[i].seq < first->seq))
                first = &g_x[i];
        if (!first) return;
        memcpy(first->dst, first->src, first->bytes);
        first->pending = 0;
    }
}

static xfer *xfer_slot(void) {
    for (int i = 0; i < NXFER; i++)
        if (!g_x[i].used) {
            memset(&g_x[i], 0, sizeof g_x[i]);
            g_x[i].used = 1;
            g_x[i].seq = ++g_xseq;
            return &g_x[i];
        }
    return NULL;
}

static void *s_to_host_async(void *host_dst, const void *dev_src, size_t bytes) {
    int ok = 1;
    xfer *x = NULL;
    enter();
    NEED_DEV("to_host_async", "src", dev_src, bytes);
    if (bytes && !in_host(host_dst, bytes)) {
        set_err("cpu-strict: %s: destination %s%p is device memory (use copy)", "to_host_async",
                "", host_dst);
        ok = 0;
    }
    if (ok && bytes) {
        x = xfer_slot();
        void *tmp = x ? malloc(bytes) : NULL;
        if (tmp) {
            memcpy(tmp, dev_src, bytes);
            x->dst = host_dst;
            x->bytes = bytes;
            x->tmp = tmp;
        } else {   /* no slot or no memory: copy now, nothing to wait for */
            if (x) x->used = 0;
            x = NULL;
            memcpy(host_dst, dev_src, bytes);
        }
    }
    leave();
    return x;
}

static void *s_to_device_async(void *dev_dst, const void *host_src, size_t bytes) {
    int ok = 1;
    xfer *x = NULL;
    enter();
    NEED_DEV("to_device_async", "dst", dev_dst, bytes);
    if (bytes && !in_host(host_src, bytes)) {
        set_err("cpu-strict: %s: source %s%p is device memory (use copy)", "to_device_async", "",
                host_src);
        ok = 0;
    }
    if (ok && bytes) {
        if ((x = xfer_slot())) {
            x->up = x->pending = 1;
            x->dst = dev_dst;
            x->src = host_src;
            x->bytes = bytes;
        } else {
            memcpy(dev_dst, host_src, bytes);
        }
    }
    leave();
    return x;
}

static void s_copy_wait(void *h) {
    xfer *x = h;
    if (!x) return;
    enter();   /* runs the pending uploads, in order */
    if (x < g_x || x >= g_x + NXFER || !x->used) {
        set_err("cpu-strict: %s%s: %p is not a pending copy", "copy_wait", "", h);
    } else {
        if (!x->up) {
            memcpy(x->dst, x->tmp, x->bytes);
            free(x->tmp);
        }
        x->used = 0;
    }
    leave();
}

/* the copies are done by copy_wait itself, which never waits */
static int s_copy_done(void *h) {
    (void)h;
    return 1;
}

void zt_backend_cpu_strict_set_capacity(size_t bytes) {
    pthread_mutex_lock(&g_mu);
    g_capacity = bytes;
    pthread_mutex_unlock(&g_mu);
}

static int s_device_memory(size_t *free_bytes, size_t *total_bytes, char *name, size_t n) {
    pthread_mutex_lock(&g_mu);
    const size_t cap = g_capacity, live = g_live;
    pthread_mutex_unlock(&g_mu);
    if (free_bytes) *free_bytes = cap > live ? cap - live : 0;
    if (total_bytes) *total_bytes = cap;
    if (name && n) {
        if (cap) snprintf(name, n, "cpu-strict emulated device of %zu bytes", cap);
        else snprintf(name, n, "cpu-strict device (host memory, no emulated capacity)");
    }
    return cap ? 0 : -1;
}

static void s_mem_stats(size_t *cur, size_t *peak) {
    pthread_mutex_lock(&g_mu);
    if (cur) *cur = g_live;
    if (peak) *peak = g_peak;
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------ plumbing */

static void s_set_threads(int n) { cpu()->set_threads(n); }

static const char *s_error(void) {
    static char out[512];
    pthread_mutex_lock(&g_mu);
    const int have = g_have_err;
    if (have) {
        memcpy(out, g_err, sizeof out);
        g_have_err = 0;
    }
    pthread_mutex_unlock(&g_mu);
    if (have) return out;
    return cpu()->error();
}

static void s_synchronize(void) { cpu()->synchronize(); }
static void s_set_matmul_precision(int mode) { cpu()->set_matmul_precision(mode); }

/* ------------------------------------------------------------ kernels */

#define F sizeof(float)

static void s_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16,
                              const float *wpe, int B, int T, int C) {
    const size_t N = (size_t)B * T;
    enter();
    if (NEED_ALL("encoder_fwd_w16", {"out", out, N * C * F}, {"inp", inp, N * sizeof(int)},
                 {"wte16", wte16, UNK}, {"wpe", wpe, (size_t)T * C * F}))
        cpu()->encoder_fwd_w16(out, inp, wte16, wpe, B, T, C);
    leave();
}
static void s_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe,
                          int B, int T, int C) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("encoder_fwd", "out", out, N * C * F);
    NEED_DEV("encoder_fwd", "inp", inp, N * sizeof(int));
    NEED_DEV("encoder_fwd", "wte", wte, UNK);
    NEED_DEV("encoder_fwd", "wpe", wpe, (size_t)T * C * F);
    if (ok) cpu()->encoder_fwd(out, inp, wte, wpe, B, T, C);
    leave();
}

static void s_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                          int T, int C) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("encoder_bwd", "dwte", dwte, UNK);
    NEED_DEV("encoder_bwd", "dwpe", dwpe, (size_t)T * C * F);
    NEED_DEV("encoder_bwd", "dout", dout, N * C * F);
    NEED_DEV("encoder_bwd", "inp", inp, N * sizeof(int));
    if (ok) cpu()->encoder_bwd(dwte, dwpe, dout, inp, B, T, C);
    leave();
}

static void s_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("layernorm_fwd", "out", out, NC);
    NEED_DEV("layernorm_fwd", "mean", mean, (size_t)N * F);
    NEED_DEV("layernorm_fwd", "rstd", rstd, (size_t)N * F);
    NEED_DEV("layernorm_fwd", "inp", inp, NC);
    NEED_DEV("layernorm_fwd", "w", w, (size_t)C * F);
    NEED_DEV("layernorm_fwd", "b", b, (size_t)C * F);
    if (ok) cpu()->layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    leave();
}

static void s_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, const float *mean,
                            const float *rstd, int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("layernorm_bwd", "dinp", dinp, NC);
    NEED_DEV("layernorm_bwd", "dw", dw, (size_t)C * F);
    NEED_DEV("layernorm_bwd", "db", db, (size_t)C * F);
    NEED_DEV("layernorm_bwd", "dout", dout, NC);
    NEED_DEV("layernorm_bwd", "inp", inp, NC);
    NEED_DEV("layernorm_bwd", "w", w, (size_t)C * F);
    NEED_DEV("layernorm_bwd", "mean", mean, (size_t)N * F);
    NEED_DEV("layernorm_bwd", "rstd", rstd, (size_t)N * F);
    if (ok) cpu()->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    leave();
}

static void s_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                         int C, int OC) {
    int ok = 1;
    enter();
    NEED_DEV("matmul_fwd", "out", out, (size_t)N * OC * F);
    NEED_DEV("matmul_fwd", "inp", inp, (size_t)N * C * F);
    NEED_DEV("matmul_fwd", "w", w, (size_t)OC * C * F);
    NEED_DEV("matmul_fwd", "bias", bias, (size_t)OC * F);
    if (ok) cpu()->matmul_fwd(out, inp, w, bias, N, C, OC);
    leave();
}

static void s_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int N, int C, int OC) {
    int ok = 1;
    enter();
    NEED_DEV("matmul_bwd", "dinp", dinp, (size_t)N * C * F);
    NEED_DEV("matmul_bwd", "dw", dw, (size_t)OC * C * F);
    NEED_DEV("matmul_bwd", "dbias", dbias, (size_t)OC * F);
    NEED_DEV("matmul_bwd", "dout", dout, (size_t)N * OC * F);
    NEED_DEV("matmul_bwd", "inp", inp, (size_t)N * C * F);
    NEED_DEV("matmul_bwd", "w", w, (size_t)OC * C * F);
    if (ok) cpu()->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
    leave();
}

static void s_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C,
                              int OC) {
    int ok = 1;
    enter();
    NEED_DEV("matmul_dinp_acc", "dinp", dinp, (size_t)N * C * F);
    NEED_DEV("matmul_dinp_acc", "dout", dout, (size_t)N * OC * F);
    NEED_DEV("matmul_dinp_acc", "w", w, (size_t)OC * C * F);
    if (ok) cpu()->matmul_dinp_acc(dinp, dout, w, N, C, OC);
    leave();
}

static void s_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                              const float *bias, int N, int C, int OC) {
    int ok = 1;
    enter();
    NEED_DEV("matmul_gelu_fwd", "out", out, (size_t)N * OC * F);
    NEED_DEV("matmul_gelu_fwd", "pre", pre, (size_t)N * OC * F);
    NEED_DEV("matmul_gelu_fwd", "inp", inp, (size_t)N * C * F);
    NEED_DEV("matmul_gelu_fwd", "w", w, (size_t)OC * C * F);
    NEED_DEV("matmul_gelu_fwd", "bias", bias, (size_t)OC * F);
    if (ok) cpu()->matmul_gelu_fwd(out, pre, inp, w, bias, N, C, OC);
    leave();
}

static void s_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                               const float *dout, const float *inp, const float *pre,
                               const float *w, int N, int C, int OC) {
    int ok = 1;
    enter();
    NEED_DEV("matmul_dgelu_bwd", "dpre", dpre, (size_t)N * C * F);
    NEED_DEV("matmul_dgelu_bwd", "dpre_bias", dpre_bias, (size_t)C * F);
    NEED_DEV("matmul_dgelu_bwd", "dw", dw, (size_t)OC * C * F);
    NEED_DEV("matmul_dgelu_bwd", "dbias", dbias, (size_t)OC * F);
    NEED_DEV("matmul_dgelu_bwd", "dout", dout, (size_t)N * OC * F);
    NEED_DEV("matmul_dgelu_bwd", "inp", inp, (size_t)N * C * F);
    NEED_DEV("matmul_dgelu_bwd", "pre", pre, (size_t)N * C * F);
    NEED_DEV("matmul_dgelu_bwd", "w", w, (size_t)OC * C * F);
    if (ok) cpu()->matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, N, C, OC);
    leave();
}

/* the bf16-weight entries (w16: OC * C bf16 values) */
static void s_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16, const float *bias,
                             int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_fwd_w16", {"out", out, (size_t)N * OC * F},
                 {"inp", inp, (size_t)N * C * F}, {"w16", w16, (size_t)OC * C * 2},
                 {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_fwd_w16(out, inp, w16, bias, N, C, OC);
    leave();
}
static void s_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                             const float *inp, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_w16", {"dinp", dinp, (size_t)N * C * F},
                 {"dw", dw, (size_t)OC * C * F}, {"dbias", dbias, (size_t)OC * F},
                 {"dout", dout, (size_t)N * OC * F}, {"inp", inp, (size_t)N * C * F},
                 {"w16", w16, (size_t)OC * C * 2}))
        cpu()->matmul_bwd_w16(dinp, dw, dbias, dout, inp, w16, N, C, OC);
    leave();
}
static void s_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_gelu_fwd_w16", {"out", out, (size_t)N * OC * F},
                 {"pre", pre, (size_t)N * OC * F}, {"inp", inp, (size_t)N * C * F},
                 {"w16", w16, (size_t)OC * C * 2}, {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_gelu_fwd_w16(out, pre, inp, w16, bias, N, C, OC);
    leave();
}
static void s_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const float *inp, const float *pre,
                                   const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_dgelu_bwd_w16", {"dpre", dpre, (size_t)N * C * F},
                 {"dpre_bias", dpre_bias, (size_t)C * F}, {"dw", dw, (size_t)OC * C * F},
                 {"dbias", dbias, (size_t)OC * F}, {"dout", dout, (size_t)N * OC * F},
                 {"inp", inp, (size_t)N * C * F}, {"pre", pre, (size_t)N * C * F},
                 {"w16", w16, (size_t)OC * C * 2}))
        cpu()->matmul_dgelu_bwd_w16(dpre, dpre_bias, dw, dbias, dout, inp, pre, w16, N, C, OC);
    leave();
}

/* the bf16-input entries (inp16: N * C bf16 values; w: OC * C floats, or
 * w16: OC * C bf16 values) */
#define OPND_W(on) OPND_OR(on, w16, (size_t)OC * C * 2, w, (size_t)OC * C * F)
static void s_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                             const float *bias, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_fwd_a16", {"out", out, (size_t)N * OC * F},
                 {"inp16", inp16, (size_t)N * C * 2}, OPND_W(1), {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_fwd_a16(out, inp16, w, w16, bias, N, C, OC);
    leave();
}
/* (out read and written; the input inp16 or inp, the weight w16 or w) */
static void s_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                             const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_fwd_acc", {"out", out, (size_t)N * OC * F},
                 OPND_OR(1, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F), OPND_W(1)))
        cpu()->matmul_fwd_acc(out, inp, inp16, w, w16, N, C, OC);
    leave();
}
/* (out16 read and written; the input inp16 or inp, the weight w16 or w) */
static void s_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_fwd_acc16", {"out16", out16, (size_t)N * OC * 2},
                 OPND_OR(1, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F), OPND_W(1)))
        cpu()->matmul_fwd_acc16(out16, inp, inp16, w, w16, N, C, OC);
    leave();
}
/* (dinp read and written; the gradient dout16 or dout, the weight w16 or w) */
static void s_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_acc", {"dinp", dinp, (size_t)N * C * F},
                 OPND_OR(1, dout16, (size_t)N * OC * 2, dout, (size_t)N * OC * F), OPND_W(1)))
        cpu()->matmul_bwd_acc(dinp, dout, dout16, w, w16, N, C, OC);
    leave();
}
/* (dinp16 read and written; the gradient dout16 or dout, the weight w16 or w) */
static void s_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_acc16", {"dinp16", dinp16, (size_t)N * C * 2},
                 OPND_OR(1, dout16, (size_t)N * OC * 2, dout, (size_t)N * OC * F), OPND_W(1)))
        cpu()->matmul_bwd_acc16(dinp16, dout, dout16, w, w16, N, C, OC);
    leave();
}
/* (out16 [rows, OC] written; the input inp16 or inp [rows, C]; w16 [G, OC,
 * C]; n: host ints) */
static void s_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                 const uint16_t *w16, const int *n, int G, int C, int OC) {
    enter();
    size_t rows = 0;
    for (int g = 0; n && g < G; ++g) rows += n[g] > 0 ? (size_t)n[g] : 0;
    if (rows && NEED_ALL("matmul_grouped_o16", {"out16", out16, rows * OC * 2},
                         OPND_OR(1, inp16, rows * C * 2, inp, rows * C * F),
                         {"w16", w16, (size_t)G * OC * C * 2}))
        cpu()->matmul_grouped_o16(out16, inp, inp16, w16, n, G, C, OC);
    leave();
}
/* (dinp16 [rows, C] written, tmp [rows, C] fp32 scratch; dout16 [rows,
 * OC]; w16 [G, OC, C]; n: host ints) */
static void s_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16,
                                     const uint16_t *w16, const int *n, int G, int C, int OC) {
    enter();
    size_t rows = 0;
    for (int g = 0; n && g < G; ++g) rows += n[g] > 0 ? (size_t)n[g] : 0;
    if (rows && C > 0 &&
        NEED_ALL("matmul_grouped_bwd_o16", {"dinp16", dinp16, rows * C * 2}, {"tmp", tmp, rows * C * F},
                 {"dout16", dout16, rows * OC * 2}, {"w16", w16, (size_t)G * OC * C * 2}))
        cpu()->matmul_grouped_bwd_o16(dinp16, tmp, dout16, w16, n, G, C, OC);
    leave();
}
/* (dw [G, OC, C] read and written, tmp16 [tmp_n] bf16 scratch, at least
 * one block's OC C as cuda asks; dout16 [rows, OC], inp16 [rows, C]; n:
 * host ints) */
static void s_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                  const uint16_t *inp16, const int *n, int G, int C, int OC) {
    enter();
    size_t rows = 0;
    for (int g = 0; n && g < G; ++g) rows += n[g] > 0 ? (size_t)n[g] : 0;
    if (rows && C > 0 && OC > 0 && tmp_n < (size_t)OC * C)
        set_err("cpu-strict: %s: %s smaller than one block's product (%p)", "matmul_grouped_dw16", "tmp16",
                tmp16);
    else if (rows && C > 0 && OC > 0 &&
             NEED_ALL("matmul_grouped_dw16", {"dw", dw, (size_t)G * OC * C * F}, {"tmp16", tmp16, tmp_n * 2},
                      {"dout16", dout16, rows * OC * 2}, {"inp16", inp16, rows * C * 2}))
        cpu()->matmul_grouped_dw16(dw, tmp16, tmp_n, dout16, inp16, n, G, C, OC);
    leave();
}
/* (a question about a pointer: nothing read) */
static int s_dw_fresh(const float *dw) { return cpu()->dw_fresh(dw); }
/* (the gradients g[n] the dW GEMMs may overwrite: device memory; g NULL:
 * none) */
static void s_set_dw_fresh(float *g, size_t n) {
    enter();
    if (NEED_ALL("set_dw_fresh", {"g", n ? g : NULL, n * F})) cpu()->set_dw_fresh(g, n);
    leave();
}
static void s_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                             int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_a16", {"dinp", dinp, (size_t)N * C * F},
                 {"dw", dw, (size_t)OC * C * F}, {"dbias", dbias, (size_t)OC * F},
                 {"dout", dout, (size_t)N * OC * F}, {"inp16", inp16, (size_t)N * C * 2},
                 OPND_W(dinp)))
        cpu()->matmul_bwd_a16(dinp, dw, dbias, dout, inp16, w, w16, N, C, OC);
    leave();
}
static void s_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                  const uint16_t *w16, const float *bias, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_gelu_fwd_a16", {"out", out, (size_t)N * OC * F},
                 {"pre", pre, (size_t)N * OC * F}, {"inp16", inp16, (size_t)N * C * 2}, OPND_W(1),
                 {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_gelu_fwd_a16(out, pre, inp16, w, w16, bias, N, C, OC);
    leave();
}
static void s_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *inp16, const float *pre,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_dgelu_bwd_a16", {"dpre", dpre, (size_t)N * C * F},
                 {"dpre_bias", dpre_bias, (size_t)C * F}, {"dw", dw, (size_t)OC * C * F},
                 {"dbias", dbias, (size_t)OC * F}, {"dout", dout, (size_t)N * OC * F},
                 {"inp16", inp16, (size_t)N * C * 2}, {"pre", pre, (size_t)N * C * F}, OPND_W(1)))
        cpu()->matmul_dgelu_bwd_a16(dpre, dpre_bias, dw, dbias, dout, inp16, pre, w, w16, N, C, OC);
    leave();
}

static void s_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                const float *b, const float *w, const float *bias, int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("add_layernorm_fwd", "res", res, NC);
    NEED_DEV("add_layernorm_fwd", "out", out, NC);
    NEED_DEV("add_layernorm_fwd", "mean", mean, (size_t)N * F);
    NEED_DEV("add_layernorm_fwd", "rstd", rstd, (size_t)N * F);
    NEED_DEV("add_layernorm_fwd", "a", a, NC);
    NEED_DEV("add_layernorm_fwd", "b", b, NC);
    NEED_DEV("add_layernorm_fwd", "w", w, (size_t)C * F);
    NEED_DEV("add_layernorm_fwd", "bias", bias, (size_t)C * F);
    if (ok) cpu()->add_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    leave();
}

static void s_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                              const float *w, float eps, int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("add_rmsnorm_fwd", "res", res, NC);
    NEED_DEV("add_rmsnorm_fwd", "out", out, NC);
    NEED_DEV("add_rmsnorm_fwd", "rstd", rstd, (size_t)N * F);
    NEED_DEV("add_rmsnorm_fwd", "a", a, NC);
    NEED_DEV("add_rmsnorm_fwd", "b", b, NC);
    NEED_DEV("add_rmsnorm_fwd", "w", w, (size_t)C * F);
    if (ok) cpu()->add_rmsnorm_fwd(res, out, rstd, a, b, w, eps, N, C);
    leave();
}

static void s_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int C,
                            int NH) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("attention_fwd", "out", out, N * C * F);
    NEED_DEV("attention_fwd", "lse", lse, N * NH * F);
    NEED_DEV("attention_fwd", "qkv", qkv, N * 3 * C * F);
    if (ok) cpu()->attention_fwd(out, lse, qkv, B, T, C, NH);
    leave();
}

static void s_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int C, int NH) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("attention_bwd", "dqkv", dqkv, N * 3 * C * F);
    NEED_DEV("attention_bwd", "dout", dout, N * C * F);
    NEED_DEV("attention_bwd", "qkv", qkv, N * 3 * C * F);
    NEED_DEV("attention_bwd", "out", out, N * C * F);
    NEED_DEV("attention_bwd", "lse", lse, N * NH * F);
    if (ok) cpu()->attention_bwd(dqkv, dout, qkv, out, lse, B, T, C, NH);
    leave();
}

static void s_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, float eps,
                          int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("rmsnorm_fwd", "out", out, NC);
    NEED_DEV("rmsnorm_fwd", "rstd", rstd, (size_t)N * F);
    NEED_DEV("rmsnorm_fwd", "inp", inp, NC);
    NEED_DEV("rmsnorm_fwd", "w", w, (size_t)C * F);
    if (ok) cpu()->rmsnorm_fwd(out, rstd, inp, w, eps, N, C);
    leave();
}

static void s_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int N, int C) {
    int ok = 1;
    const size_t NC = (size_t)N * C * F;
    enter();
    NEED_DEV("rmsnorm_bwd", "dinp", dinp, NC);
    NEED_DEV("rmsnorm_bwd", "dw", dw, (size_t)C * F);
    NEED_DEV("rmsnorm_bwd", "dout", dout, NC);
    NEED_DEV("rmsnorm_bwd", "inp", inp, NC);
    NEED_DEV("rmsnorm_bwd", "w", w, (size_t)C * F);
    NEED_DEV("rmsnorm_bwd", "rstd", rstd, (size_t)N * F);
    if (ok) cpu()->rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
    leave();
}

/* headnorm_fwd / headnorm_bwd: rows span (N - 1) * stride + n_heads * hd floats */
static void s_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                           int n_heads, int stride, int hd) {
    int ok = 1;
    const size_t R = (size_t)N * n_heads;
    const size_t span = N > 0 ? ((size_t)(N - 1) * stride + (size_t)n_heads * hd) * F : 0;
    enter();
    NEED_DEV("headnorm_fwd", "x", x, span);
    NEED_DEV("headnorm_fwd", "raw", raw, R * hd * F);
    NEED_DEV("headnorm_fwd", "rstd", rstd, R * F);
    NEED_DEV("headnorm_fwd", "w", w, (size_t)hd * F);
    if (ok) cpu()->headnorm_fwd(x, raw, rstd, w, eps, N, n_heads, stride, hd);
    leave();
}

static void s_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                           const float *rstd, int N, int n_heads, int stride, int hd) {
    int ok = 1;
    const size_t R = (size_t)N * n_heads;
    const size_t span = N > 0 ? ((size_t)(N - 1) * stride + (size_t)n_heads * hd) * F : 0;
    enter();
    NEED_DEV("headnorm_bwd", "dx", dx, span);
    NEED_DEV("headnorm_bwd", "dw", dw, (size_t)hd * F);
    NEED_DEV("headnorm_bwd", "raw", raw, R * hd * F);
    NEED_DEV("headnorm_bwd", "w", w, (size_t)hd * F);
    NEED_DEV("headnorm_bwd", "rstd", rstd, R * F);
    if (ok) cpu()->headnorm_bwd(dx, dw, raw, w, rstd, N, n_heads, stride, hd);
    leave();
}

/* rope_fwd / rope_bwd: the rows span (B*T - 1) * stride + n_heads * hd floats */
static void s_rope(int bwd, float *x, const float *inv_freq, int B, int T, int n_heads,
                   int stride, int hd, float scale) {
    int ok = 1;
    const char *who = bwd ? "rope_bwd" : "rope_fwd";
    const size_t N = (size_t)B * T;
    const size_t span = N ? ((N - 1) * (size_t)stride + (size_t)n_heads * hd) * F : 0;
    enter();
    NEED_DEV(who, "x", x, span);
    NEED_DEV(who, "inv_freq", inv_freq, (size_t)(hd / 2) * F);
    if (ok) (bwd ? cpu()->rope_bwd : cpu()->rope_fwd)(x, inv_freq, B, T, n_heads, stride, hd, scale);
    leave();
}
static void s_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                       int hd, float scale) {
    s_rope(0, x, inv_freq, B, T, n_heads, stride, hd, scale);
}
static void s_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                       int hd, float scale) {
    s_rope(1, x, inv_freq, B, T, n_heads, stride, hd, scale);
}

static void s_swiglu_fwd(float *out, const float *gu, int N, int H) {
    int ok = 1;
    const size_t NH = (size_t)N * H * F;
    enter();
    NEED_DEV("swiglu_fwd", "out", out, NH);
    NEED_DEV("swiglu_fwd", "gu", gu, 2 * NH);
    if (ok) cpu()->swiglu_fwd(out, gu, N, H);
    leave();
}

static void s_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    int ok = 1;
    const size_t NH = (size_t)N * H * F;
    enter();
    NEED_DEV("swiglu_bwd", "dgu", dgu, 2 * NH);
    NEED_DEV("swiglu_bwd", "dout", dout, NH);
    NEED_DEV("swiglu_bwd", "gu", gu, 2 * NH);
    if (ok) cpu()->swiglu_bwd(dgu, dout, gu, N, H);
    leave();
}

static void s_gqa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                      int hd) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("gqa_fwd", "out", out, N * NH * hd * F);
    NEED_DEV("gqa_fwd", "lse", lse, N * NH * F);
    NEED_DEV("gqa_fwd", "qkv", qkv, N * (NH + 2 * (size_t)NKV) * hd * F);
    if (ok) cpu()->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hd);
    leave();
}

static void s_gqa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                      const float *lse, int B, int T, int NH, int NKV, int hd) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    const size_t R = N * (NH + 2 * (size_t)NKV) * hd * F;
    enter();
    NEED_DEV("gqa_bwd", "dqkv", dqkv, R);
    NEED_DEV("gqa_bwd", "dout", dout, N * NH * hd * F);
    NEED_DEV("gqa_bwd", "qkv", qkv, R);
    NEED_DEV("gqa_bwd", "out", out, N * NH * hd * F);
    NEED_DEV("gqa_bwd", "lse", lse, N * NH * F);
    if (ok) cpu()->gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd);
    leave();
}

/* the options are a host struct read by the host side of the call */
#define NEED_OPTS(who, o)                                                                \
    do {                                                                                 \
        if (!(o) || !in_host((o), sizeof *(o))) {                                        \
            set_err("cpu-strict: %s: %s=%p is not a host zt_attn_opts", who, "opts",      \
                    (const void *)(o));                                                  \
            ok = 0;                                                                      \
        }                                                                                \
    } while (0)

static void s_gqa_ext_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH,
                          int NKV, int hd, const zt_attn_opts *o) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    enter();
    NEED_DEV("gqa_ext_fwd", "out", out, N * NH * hd * F);
    NEED_DEV("gqa_ext_fwd", "lse", lse, N * NH * F);
    NEED_DEV("gqa_ext_fwd", "qkv", qkv, N * (NH + 2 * (size_t)NKV) * hd * F);
    NEED_OPTS("gqa_ext_fwd", o);
    if (ok) cpu()->gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hd, o);
    leave();
}

static void s_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int B, int T, int NH, int NKV, int hd,
                          const zt_attn_opts *o) {
    int ok = 1;
    const size_t N = (size_t)B * T;
    const size_t R = N * (NH + 2 * (size_t)NKV) * hd * F;
    enter();
    NEED_DEV("gqa_ext_bwd", "dqkv", dqkv, R);
    NEED_DEV("gqa_ext_bwd", "dout", dout, N * NH * hd * F);
    NEED_DEV("gqa_ext_bwd", "qkv", qkv, R);
    NEED_DEV("gqa_ext_bwd", "out", out, N * NH * hd * F);
    NEED_DEV("gqa_ext_bwd", "lse", lse, N * NH * F);
    NEED_OPTS("gqa_ext_bwd", o);
    if (ok) cpu()->gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd, o);
    leave();
}

/* the bf16-input attention */
static void s_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_fwd16", {"out", out, N * NH * hd * F}, {"lse", lse, N * NH * F},
                      {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F});
    NEED_OPTS("gqa_ext_fwd16", o);
    if (ok) cpu()->gqa_ext_fwd16(out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    leave();
}
static void s_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                            const float *out, const float *lse, int B, int T, int NH, int NKV,
                            int hd, const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_bwd16", {"dqkv", dqkv, R * F}, {"dout", dout, N * NH * hd * F},
                      {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F}, {"out", out, N * NH * hd * F},
                      {"lse", lse, N * NH * F});
    NEED_OPTS("gqa_ext_bwd16", o);
    if (ok) cpu()->gqa_ext_bwd16(dqkv, dout, qkv16, tmp, out, lse, B, T, NH, NKV, hd, o);
    leave();
}

/* Mixture of Experts: the operands checked; rows / w may be NULL */
static void s_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                            int K, int norm) {
    int ok = 1;
    enter();
    NEED_DEV("moe_route_fwd", "wts", wts, (size_t)N * K * F);
    NEED_DEV("moe_route_fwd", "idx", idx, (size_t)N * K * sizeof(int));
    NEED_DEV("moe_route_fwd", "probs", probs, (size_t)N * E * F);
    NEED_DEV("moe_route_fwd", "logits", logits, (size_t)N * E * F);
    if (ok) cpu()->moe_route_fwd(wts, idx, probs, logits, N, E, K, norm);
    leave();
}
static void s_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                            const float *probs, const int *idx, int N, int E, int K, int norm) {
    int ok = 1;
    enter();
    NEED_DEV("moe_route_bwd", "dlogits", dlogits, (size_t)N * E * F);
    NEED_DEV("moe_route_bwd", "dwts", dwts, (size_t)N * K * F);
    NEED_DEV("moe_route_bwd", "probs", probs, (size_t)N * E * F);
    NEED_DEV("moe_route_bwd", "idx", idx, (size_t)N * K * sizeof(int));
    NEED_DEV("moe_route_bwd", "dprobs", dprobs, (size_t)E * F);
    if (ok) cpu()->moe_route_bwd(dlogits, dwts, dprobs, probs, idx, N, E, K, norm);
    leave();
}
static void s_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_gather", "out", out, (size_t)n * C * F);
    NEED_DEV("rows_gather", "rows", rows, (size_t)n * sizeof(int));
    NEED_DEV("rows_gather", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_gather(out, x, rows, w, n, C);
    leave();
}
static void s_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_gather16", "out", out, (size_t)n * C * 2);
    NEED_DEV("rows_gather16", "rows", rows, (size_t)n * sizeof(int));
    if (ok) cpu()->rows_gather16(out, x, rows, n, C);
    leave();
}
static void s_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_gather_o16", "out16", out16, (size_t)n * C * 2);
    NEED_DEV("rows_gather_o16", "rows", rows, (size_t)n * sizeof(int));
    NEED_DEV("rows_gather_o16", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_gather_o16(out16, x, rows, w, n, C);
    leave();
}
static void s_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_scatter", "x", x, (size_t)n * C * F);
    NEED_DEV("rows_scatter", "rows", rows, (size_t)n * sizeof(int));
    NEED_DEV("rows_scatter", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_scatter(y, x, rows, w, n, C);
    leave();
}
static void s_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_dot", "out", out, (size_t)n * F);
    NEED_DEV("rows_dot", "rows", rows, (size_t)n * sizeof(int));
    NEED_DEV("rows_dot", "b", b, (size_t)n * C * F);
    if (ok) cpu()->rows_dot(out, a, rows, b, n, C);
    leave();
}
static void s_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_dot16", "out", out, (size_t)n * F);
    NEED_DEV("rows_dot16", "a", a, (size_t)n * C * F);
    NEED_DEV("rows_dot16", "b16", b16, (size_t)n * C * 2);
    NEED_DEV("rows_dot16", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_dot16(out, a, b16, w, n, C);
    leave();
}
static void s_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_dot16h", "out", out, (size_t)n * F);
    NEED_DEV("rows_dot16h", "a16", a16, (size_t)n * C * 2);
    NEED_DEV("rows_dot16h", "b16", b16, (size_t)n * C * 2);
    NEED_DEV("rows_dot16h", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_dot16h(out, a16, b16, w, n, C);
    leave();
}
static void s_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                         int K, int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_sum16", "y", y, (size_t)N * C * F);
    NEED_DEV("rows_sum16", "x16", x16, (size_t)n * C * 2);
    NEED_DEV("rows_sum16", "perm", perm, (size_t)n * sizeof(int));
    NEED_DEV("rows_sum16", "pos", pos, (size_t)N * K * sizeof(int));
    NEED_DEV("rows_sum16", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_sum16(y, x16, perm, pos, w, n, N, K, C);
    leave();
}
static void s_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                             int C) {
    int ok = 1;
    enter();
    NEED_DEV("rows_scatter16", "x16", x16, (size_t)n * C * 2);
    NEED_DEV("rows_scatter16", "rows", rows, (size_t)n * sizeof(int));
    NEED_DEV("rows_scatter16", "w", w, (size_t)n * F);
    if (ok) cpu()->rows_scatter16(y, x16, rows, w, n, C);
    leave();
}
static void s_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E) {
    int ok = 1;
    enter();
    NEED_DEV("moe_permute", "off", off, (size_t)(E + 1) * sizeof(int));
    NEED_DEV("moe_permute", "perm", perm, (size_t)N * K * sizeof(int));
    NEED_DEV("moe_permute", "rows", rows, (size_t)N * K * sizeof(int));
    NEED_DEV("moe_permute", "idx", idx, (size_t)N * K * sizeof(int));
    if (ok) cpu()->moe_permute(off, perm, rows, idx, N, K, E);
    leave();
}
static void s_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El) {
    int ok = 1;
    enter();
    NEED_DEV("moe_regroup", "cnt", cnt, (size_t)P * El * sizeof(int));
    if (ok) {   /* (the rows: from the counts, in device memory) */
        size_t R = 0;
        for (int j = 0; j < P * El; ++j) R += (size_t)(cnt[j] > 0 ? cnt[j] : 0);
        NEED_DEV("moe_regroup", "perm", perm, R * sizeof(int));
        NEED_DEV("moe_regroup", "inv", inv, R * sizeof(int));
    }
    if (ok) cpu()->moe_regroup(perm, inv, cnt, P, El);
    leave();
}
static void s_sigmoid_fwd(float *y, const float *x, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("sigmoid_fwd", "y", y, n * F);
    NEED_DEV("sigmoid_fwd", "x", x, n * F);
    if (ok) cpu()->sigmoid_fwd(y, x, n);
    leave();
}
static void s_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("sigmoid_bwd", "dx", dx, n * F);
    NEED_DEV("sigmoid_bwd", "dy", dy, n * F);
    NEED_DEV("sigmoid_bwd", "y", y, n * F);
    if (ok) cpu()->sigmoid_bwd(dx, dy, y, n);
    leave();
}

static void s_geglu_fwd(float *out, const float *gu, int N, int H) {
    int ok = 1;
    const size_t NH = (size_t)N * H * F;
    enter();
    NEED_DEV("geglu_fwd", "out", out, NH);
    NEED_DEV("geglu_fwd", "gu", gu, 2 * NH);
    if (ok) cpu()->geglu_fwd(out, gu, N, H);
    leave();
}

static void s_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    int ok = 1;
    const size_t NH = (size_t)N * H * F;
    enter();
    NEED_DEV("geglu_bwd", "dgu", dgu, 2 * NH);
    NEED_DEV("geglu_bwd", "dout", dout, NH);
    NEED_DEV("geglu_bwd", "gu", gu, 2 * NH);
    if (ok) cpu()->geglu_bwd(dgu, dout, gu, N, H);
    leave();
}

static void s_softcap_fwd(float *y, const float *x, size_t n, float cap) {
    int ok = 1;
    enter();
    NEED_DEV("softcap_fwd", "y", y, n * F);
    NEED_DEV("softcap_fwd", "x", x, n * F);
    if (ok) cpu()->softcap_fwd(y, x, n, cap);
    leave();
}

static void s_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
    int ok = 1;
    enter();
    NEED_DEV("softcap_bwd", "dx", dx, n * F);
    NEED_DEV("softcap_bwd", "dy", dy, n * F);
    NEED_DEV("softcap_bwd", "y", y, n * F);
    if (ok) cpu()->softcap_bwd(dx, dy, y, n, cap);
    leave();
}

static void s_gelu_fwd(float *out, const float *inp, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("gelu_fwd", "out", out, n * F);
    NEED_DEV("gelu_fwd", "inp", inp, n * F);
    if (ok) cpu()->gelu_fwd(out, inp, n);
    leave();
}

static void s_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("gelu_bwd", "dinp", dinp, n * F);
    NEED_DEV("gelu_bwd", "inp", inp, n * F);
    NEED_DEV("gelu_bwd", "dout", dout, n * F);
    if (ok) cpu()->gelu_bwd(dinp, inp, dout, n);
    leave();
}

static void s_add(float *out, const float *a, const float *b, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("add", "out", out, n * F);
    NEED_DEV("add", "a", a, n * F);
    NEED_DEV("add", "b", b, n * F);
    if (ok) cpu()->add(out, a, b, n);
    leave();
}

static void s_xent_fwd(float *losses, float *probs, const float *logits, const int *targets,
                       int N, int V) {
    int ok = 1;
    enter();
    NEED_DEV("xent_fwd", "losses", losses, (size_t)N * F);
    NEED_DEV("xent_fwd", "probs", probs, (size_t)N * V * F);
    NEED_DEV("xent_fwd", "logits", logits, (size_t)N * V * F);
    NEED_DEV("xent_fwd", "targets", targets, (size_t)N * sizeof(int));
    if (ok) cpu()->xent_fwd(losses, probs, logits, targets, N, V);
    leave();
}

static void s_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss,
                       int N, int V) {
    int ok = 1;
    enter();
    NEED_DEV("xent_bwd", "dlogits", dlogits, (size_t)N * V * F);
    NEED_DEV("xent_bwd", "probs", probs, (size_t)N * V * F);
    NEED_DEV("xent_bwd", "targets", targets, (size_t)N * sizeof(int));
    if (ok) cpu()->xent_bwd(dlogits, probs, targets, dloss, N, V);
    leave();
}

static void s_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
                         int V) {
    int ok = 1;
    enter();
    NEED_DEV("xent_fused", "losses", losses, (size_t)N * F);
    NEED_DEV("xent_fused", "logits", logits, (size_t)N * V * F);
    NEED_DEV("xent_fused", "targets", targets, (size_t)N * sizeof(int));
    if (ok) cpu()->xent_fused(losses, logits, targets, dloss, N, V);
    leave();
}

static void s_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                    float b1, float b2, float eps, float wd, float bc1, float bc2,
                    float grad_scale) {
    int ok = 1;
    enter();
    NEED_DEV("adamw", "p", p, n * F);
    NEED_DEV("adamw", "grad", grad, n * F);
    NEED_DEV("adamw", "m", m, n * F);
    NEED_DEV("adamw", "v", v, n * F);
    if (ok) cpu()->adamw(p, grad, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, grad_scale);
    leave();
}

static double s_sumsq(const float *x, size_t n) {
    int ok = 1;
    double r = 0.0;
    enter();
    NEED_DEV("sumsq", "x", x, n * F);
    if (ok) r = cpu()->sumsq(x, n);
    leave();
    return r;
}

static double s_sum(const float *x, size_t n) {
    int ok = 1;
    double r = 0.0;
    enter();
    NEED_DEV("sum", "x", x, n * F);
    if (ok) r = cpu()->sum(x, n);
    leave();
    return r;
}

static void s_scale(float *x, size_t n, float s) {
    int ok = 1;
    enter();
    NEED_DEV("scale", "x", x, n * F);
    if (ok) cpu()->scale(x, n, s);
    leave();
}

static void s_dropout(float *y, const float *x, size_t rows, size_t C, uint64_t key,
                      uint64_t row0, float p) {
    int ok = 1;
    enter();
    NEED_DEV("dropout", "y", y, rows * C * F);
    NEED_DEV("dropout", "x", x, rows * C * F);
    if (ok) cpu()->dropout(y, x, rows, C, key, row0, p);
    leave();
}

static void s_to_bf16(uint16_t *out, const float *in, size_t n) {
    enter();
    if (NEED_ALL("to_bf16", {"out", out, n * 2}, {"in", in, n * F}))
        cpu()->to_bf16(out, in, n);
    leave();
}
static void s_from_bf16(float *out, const uint16_t *in, size_t n) {
    enter();
    if (NEED_ALL("from_bf16", {"out", out, n * F}, {"in", in, n * 2}))
        cpu()->from_bf16(out, in, n);
    leave();
}
static void s_from_bf16_runs(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr) {
    int ok = 1;
    size_t all = 0;
    enter();
    for (int r = 0; r < nr; ++r) {
        if (n[r]) NEED_DEV("from_bf16_runs", "in", in + off[r], n[r] * 2);
        all += n[r];
    }
    if (all) NEED_DEV("from_bf16_runs", "out", out, all * F);
    if (ok) cpu()->from_bf16_runs(out, in, off, n, nr);
    leave();
}
static void s_to_f16(uint16_t *out, const float *in, size_t n) {
    enter();
    if (NEED_ALL("to_f16", {"out", out, n * 2}, {"in", in, n * F}))
        cpu()->to_f16(out, in, n);
    leave();
}
static void s_from_f16(float *out, const uint16_t *in, size_t n) {
    enter();
    if (NEED_ALL("from_f16", {"out", out, n * F}, {"in", in, n * 2}))
        cpu()->from_f16(out, in, n);
    leave();
}

static size_t s_nonfinite(const float *x, size_t n) {
    int ok = 1;
    size_t r = 0;
    enter();
    NEED_DEV("nonfinite", "x", x, n * F);
    if (ok) r = cpu()->nonfinite(x, n);
    leave();
    return r;
}

static void s_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                          const uint8_t *qabsmax, const float *absmax2, float offset, size_t n) {
    int ok = 1;
    const size_t nb = n / 64 + (n % 64 != 0);
    enter();
    if (n) {
        NEED_DEV("nf4_dequant", "out", out, n * (out_bf16 ? 2 : F));
        NEED_DEV("nf4_dequant", "codes", codes, n / 2 + (n & 1));
        if (qabsmax) {
            NEED_DEV("nf4_dequant", "qabsmax", qabsmax, nb);
            NEED_DEV("nf4_dequant", "absmax2", absmax2, (nb / 256 + (nb % 256 != 0)) * F);
        } else {
            NEED_DEV("nf4_dequant", "absmax", absmax, nb * F);
        }
    }
    if (ok) cpu()->nf4_dequant(out, out_bf16, codes, absmax, qabsmax, absmax2, offset, n);
    leave();
}

/* the step without host reads: the range tables, segments and
 * hyperparameters are host memory, everything they point at device memory */
static void s_sum_to(double *dst, const float *x, size_t n) {
    int ok = 1;
    enter();
    NEED_DEV("sum_to", "dst", dst, sizeof *dst);
    NEED_DEV("sum_to", "x", x, n * F);
    if (ok) cpu()->sum_to(dst, x, n);
    leave();
}

static void s_sumsq_to(double *dst, const float *const *x, const size_t *n, int nr) {
    int ok = 1;
    enter();
    NEED_DEV("sumsq_to", "dst", dst, sizeof *dst);
    for (int r = 0; r < nr; r++) NEED_DEV("sumsq_to", "x[r]", x[r], n[r] * F);
    if (ok) cpu()->sumsq_to(dst, x, n, nr);
    leave();
}

static void s_nonfinite_to(uint64_t *dst, const float *const *x, const size_t *n, int nr) {
    int ok = 1;
    enter();
    NEED_DEV("nonfinite_to", "dst", dst, sizeof *dst);
    for (int r = 0; r < nr; r++) NEED_DEV("nonfinite_to", "x[r]", x[r], n[r] * F);
    if (ok) cpu()->nonfinite_to(dst, x, n, nr);
    leave();
}

static void s_adamw_multi(float *p, const float *grad, float *m, float *v, uint16_t *p16, int hprec,
                          unsigned logical, const zt_adamw_seg *seg, int nseg,
                          const zt_adamw_hyper *h) {
    int ok = 1;
    enter();
    for (int i = 0; i < nseg; i++) {
        const size_t k = seg[i].start, n = seg[i].n, sh = seg[i].shift;
        if (!n) continue;
        NEED_DEV("adamw_multi", "p", p + k + (logical & ZT_ADAMW_P_LOGICAL ? sh : 0), n * F);
        NEED_DEV("adamw_multi", "grad", grad + k + (logical & ZT_ADAMW_G_LOGICAL ? sh : 0), n * F);
        NEED_DEV("adamw_multi", "m", m + k, n * F);
        NEED_DEV("adamw_multi", "v", v + k, n * F);
        if (hprec && p16)
            NEED_DEV("adamw_multi", "p16", p16 + k + (logical & ZT_ADAMW_H_LOGICAL ? sh : 0), n * 2);
    }
    NEED_DEV("adamw_multi", "gate", h->gate, sizeof *h->gate);
    if (ok) cpu()->adamw_multi(p, grad, m, v, p16, hprec, logical, seg, nseg, h);
    leave();
}

/* the bf16-output entries */
static void s_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, const float *bias, int N, int C,
                             int OC) {
    enter();
    if (NEED_ALL("matmul_fwd_o16", {"out16", out16, (size_t)N * OC * 2},
                 {"tmp", tmp, (size_t)N * OC * F},
                 OPND_OR(1, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F),
                 OPND_OR(1, w16, (size_t)OC * C * 2, w, (size_t)OC * C * F),
                 {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_fwd_o16(out16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    leave();
}
static void s_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                  const uint16_t *inp16, const float *w, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_gelu_fwd_o16", {"out16", out16, (size_t)N * OC * 2},
                 {"pre16", pre16, (size_t)N * OC * 2}, {"tmp", tmp, (size_t)N * OC * F},
                 OPND_OR(1, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F),
                 OPND_OR(1, w16, (size_t)OC * C * 2, w, (size_t)OC * C * F),
                 {"bias", bias, (size_t)OC * F}))
        cpu()->matmul_gelu_fwd_o16(out16, pre16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    leave();
}
static void s_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n) {
    enter();
    if (NEED_ALL("gelu_fwd16", {"out16", out16, n * 2}, {"in16", in16, n * 2}, {"tmp", tmp, n * F}))
        cpu()->gelu_fwd16(out16, in16, tmp, n);
    leave();
}
#define S_GLU_FWD16(name)                                                                   \
    static void s_##name(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2,   \
                         int N, int H) {                                                    \
        const size_t NH = (size_t)N * H;                                                    \
        enter();                                                                            \
        if (NEED_ALL(#name, {"out16", out16, NH * 2}, {"gu16", gu16, 2 * NH * 2},           \
                     {"tmp", tmp, 2 * NH * F}, {"tmp2", tmp2, NH * F}))                     \
            cpu()->name(out16, gu16, tmp, tmp2, N, H);                                      \
        leave();                                                                            \
    }
S_GLU_FWD16(swiglu_fwd16)
S_GLU_FWD16(geglu_fwd16)
static void s_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n) {
    enter();
    if (NEED_ALL("gelu_fwd16r", {"out16", out16, n * 2}, {"in16", in16, n * 2}, {"in", in, n * F},
                 {"tmp", tmp, n * F}))
        cpu()->gelu_fwd16r(out16, in16, in, tmp, n);
    leave();
}
#define S_GLU_FWD16R(name)                                                                  \
    static void s_##name(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N,   \
                         int H) {                                                           \
        const size_t NH = (size_t)N * H;                                                    \
        enter();                                                                            \
        if (NEED_ALL(#name, {"out16", out16, NH * 2}, {"gu16", gu16, 2 * NH * 2},           \
                     {"gu", gu, 2 * NH * F}, {"tmp2", tmp2, NH * F}))                       \
            cpu()->name(out16, gu16, gu, tmp2, N, H);                                       \
        leave();                                                                            \
    }
S_GLU_FWD16R(swiglu_fwd16r)
S_GLU_FWD16R(geglu_fwd16r)
#define S_GLU_BWD16(name)                                                                    \
    static void s_##name(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) { \
        const size_t NH = (size_t)N * H;                                                     \
        enter();                                                                             \
        if (NEED_ALL(#name, {"dgu", dgu, 2 * NH * F}, {"dout", dout, NH * F},                \
                     {"gu16", gu16, 2 * NH * 2}))                                            \
            cpu()->name(dgu, dout, gu16, N, H);                                              \
        leave();                                                                             \
    }
S_GLU_BWD16(swiglu_bwd16)
S_GLU_BWD16(geglu_bwd16)

/* the norms writing bf16 */
static void s_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("layernorm_fwd16", {"out16", out16, (size_t)N * C * 2}, {"tmp", tmp, NC},
                 {"mean", mean, (size_t)N * F}, {"rstd", rstd, (size_t)N * F}, {"inp", inp, NC},
                 {"w", w, (size_t)C * F}, {"b", b, (size_t)C * F}))
        cpu()->layernorm_fwd16(out16, tmp, mean, rstd, inp, w, b, N, C);
    leave();
}
static void s_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                            const float *w, float eps, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("rmsnorm_fwd16", {"out16", out16, (size_t)N * C * 2}, {"tmp", tmp, NC},
                 {"rstd", rstd, (size_t)N * F}, {"inp", inp, NC}, {"w", w, (size_t)C * F}))
        cpu()->rmsnorm_fwd16(out16, tmp, rstd, inp, w, eps, N, C);
    leave();
}
static void s_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean,
                                  float *rstd, const float *a, const float *b, const float *w,
                                  const float *bias, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("add_layernorm_fwd16", {"res", res, NC}, {"out16", out16, (size_t)N * C * 2},
                 {"tmp", tmp, NC}, {"mean", mean, (size_t)N * F}, {"rstd", rstd, (size_t)N * F},
                 {"a", a, NC}, {"b", b, NC}, {"w", w, (size_t)C * F},
                 {"bias", bias, (size_t)C * F}))
        cpu()->add_layernorm_fwd16(res, out16, tmp, mean, rstd, a, b, w, bias, N, C);
    leave();
}
static void s_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd,
                                const float *a, const float *b, const float *w, float eps, int N,
                                int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("add_rmsnorm_fwd16", {"res", res, NC}, {"out16", out16, (size_t)N * C * 2},
                 {"tmp", tmp, NC}, {"rstd", rstd, (size_t)N * F}, {"a", a, NC}, {"b", b, NC},
                 {"w", w, (size_t)C * F}))
        cpu()->add_rmsnorm_fwd16(res, out16, tmp, rstd, a, b, w, eps, N, C);
    leave();
}
static void s_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                   const float *a, const uint16_t *b16, const float *w,
                                   const float *bias, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("add_layernorm_fwd16b", {"res", res, NC}, {"out16", out16, (size_t)N * C * 2},
                 {"tmp", tmp, NC}, {"mean", mean, (size_t)N * F}, {"rstd", rstd, (size_t)N * F},
                 {"a", a, NC}, {"b16", b16, (size_t)N * C * 2}, {"w", w, (size_t)C * F},
                 {"bias", bias, (size_t)C * F}))
        cpu()->add_layernorm_fwd16b(res, out16, tmp, mean, rstd, a, b16, w, bias, N, C);
    leave();
}
static void s_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                 const float *a, const uint16_t *b16, const float *w, float eps,
                                 int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("add_rmsnorm_fwd16b", {"res", res, NC}, {"out16", out16, (size_t)N * C * 2},
                 {"tmp", tmp, NC}, {"rstd", rstd, (size_t)N * F}, {"a", a, NC},
                 {"b16", b16, (size_t)N * C * 2}, {"w", w, (size_t)C * F}))
        cpu()->add_rmsnorm_fwd16b(res, out16, tmp, rstd, a, b16, w, eps, N, C);
    leave();
}

/* RoPE writing bf16: x and qkv16 hold B*T whole rows of stride */
static void s_rope_fwd16(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T,
                         int n_heads, int stride, int hd, float scale) {
    const size_t NS = (size_t)B * T * stride;
    enter();
    if (NEED_ALL("rope_fwd16", {"qkv16", qkv16, NS * 2}, {"x", x, NS * F},
                 {"inv_freq", inv_freq, (size_t)(hd / 2) * F}))
        cpu()->rope_fwd16(qkv16, x, inv_freq, B, T, n_heads, stride, hd, scale);
    leave();
}

/* RoPE's backward on the bf16 gradient: x16 B*T whole rows of stride,
 * dbias a row of stride floats */
static void s_rope_bwd16(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T,
                         int n_heads, int stride, int hd, float scale) {
    const size_t NS = (size_t)B * T * stride;
    enter();
    if (NEED_ALL("rope_bwd16", {"x16", x16, NS * 2}, {"dbias", dbias, (size_t)stride * F},
                 {"inv_freq", inv_freq, (size_t)(hd / 2) * F}))
        cpu()->rope_bwd16(x16, dbias, inv_freq, B, T, n_heads, stride, hd, scale);
    leave();
}

/* Qwen3's q/k norms then RoPE writing bf16: x and qkv16 B*T whole rows of
 * stride, raw the q and k heads' N (NH + NKV) hd floats, rstd N NH floats
 * and then the k norms' N knh, the weights their groups' widths */
static void s_qknorm_rope_fwd16(uint16_t *qkv16, float *x, float *raw, float *rstd,
                                const float *qw, const float *kw, float eps, const float *inv_freq,
                                int B, int T, int NH, int NKV, int qnh, int knh, int stride, int hd,
                                float scale) {
    const size_t N = (size_t)B * T, NS = N * stride;
    enter();
    if (NEED_ALL("qknorm_rope_fwd16", {"qkv16", qkv16, NS * 2}, {"x", x, NS * F},
                 {"raw", raw, N * (size_t)(NH + NKV) * hd * F},
                 {"rstd", rstd, (N * NH + N * knh) * F},
                 {"q weight", qw, (qnh > 0 ? (size_t)NH * hd / qnh : 0) * F},
                 {"k weight", kw, (knh > 0 ? (size_t)NKV * hd / knh : 0) * F},
                 {"inv_freq", inv_freq, (size_t)(hd / 2) * F}))
        cpu()->qknorm_rope_fwd16(qkv16, x, raw, rstd, qw, kw, eps, inv_freq, B, T, NH, NKV, qnh,
                                 knh, stride, hd, scale);
    leave();
}

/* Qwen3's q/k norms' backward on the bf16 gradient: dqkv16 B*T whole rows
 * of stride, raw and rstd as qknorm_rope_fwd16's, the weights and their
 * gradients their groups' widths */
static void s_qknorm_rope_bwd16(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                                const float *rstd, const float *qw, const float *kw,
                                const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                                int knh, int stride, int hd, float scale) {
    const size_t N = (size_t)B * T, NS = N * stride;
    const size_t qg = qnh > 0 ? (size_t)NH * hd / qnh : 0, kg = knh > 0 ? (size_t)NKV * hd / knh : 0;
    enter();
    if (NEED_ALL("qknorm_rope_bwd16", {"dqkv16", dqkv16, NS * 2},
                 {"raw", raw, N * (size_t)(NH + NKV) * hd * F},
                 {"rstd", rstd, (N * NH + N * knh) * F}, {"q weight", qw, qg * F},
                 {"k weight", kw, kg * F}, {"q weight gradient", dqw, qg * F},
                 {"k weight gradient", dkw, kg * F}, {"inv_freq", inv_freq, (size_t)(hd / 2) * F}))
        cpu()->qknorm_rope_bwd16(dqkv16, dqw, dkw, raw, rstd, qw, kw, inv_freq, B, T, NH, NKV, qnh,
                                 knh, stride, hd, scale);
    leave();
}

/* the LM head's bf16 logits */
static void s_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V) {
    enter();
    if (NEED_ALL("xent16_fwd", {"losses", losses, (size_t)N * F},
                 {"logits16", logits16, (size_t)N * V * 2},
                 {"targets", targets, (size_t)N * sizeof(int)}))
        cpu()->xent16_fwd(losses, logits16, targets, N, V);
    leave();
}
static void s_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                           int V) {
    enter();
    if (NEED_ALL("xent16_fused", {"losses", losses, (size_t)N * F},
                 {"logits16", logits16, (size_t)N * V * 2},
                 {"targets", targets, (size_t)N * sizeof(int)}))
        cpu()->xent16_fused(losses, logits16, targets, dloss, N, V);
    leave();
}
static void s_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                                const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                                int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_head16", {"dinp", dinp, (size_t)N * C * F},
                 {"dw", dw, (size_t)OC * C * F}, {"dout16", dout16, (size_t)N * OC * 2},
                 OPND_OR(1, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F),
                 OPND_OR(1, w16, (size_t)OC * C * 2, w, (size_t)OC * C * F)))
        cpu()->matmul_bwd_head16(dinp, dw, dout16, inp, inp16, w, w16, N, C, OC);
    leave();
}
/* the attention's output in bf16 */
static void s_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16,
                             float *tmp, int B, int T, int NH, int NKV, int hd,
                             const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_fwd16o", {"out16", out16, N * NH * hd * 2},
                      {"out", out, N * NH * hd * F}, {"lse", lse, N * NH * F},
                      {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F});
    NEED_OPTS("gqa_ext_fwd16o", o);
    if (ok) cpu()->gqa_ext_fwd16o(out16, out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    leave();
}
static void s_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                             const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_bwd16o", {"dqkv", dqkv, R * F}, {"dout", dout, N * NH * hd * F},
                      {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F},
                      {"out16", out16, N * NH * hd * 2}, {"out", out, N * NH * hd * F},
                      {"lse", lse, N * NH * F});
    NEED_OPTS("gqa_ext_bwd16o", o);
    if (ok) cpu()->gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    leave();
}
static int s_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                            float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_bwd16d", {"dqkv", dqkv, R * F}, {"dqkv16", dqkv16, R * 2},
                      {"dout", dout, N * NH * hd * F}, {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F},
                      {"out16", out16, N * NH * hd * 2}, {"out", out, N * NH * hd * F},
                      {"lse", lse, N * NH * F});
    NEED_OPTS("gqa_ext_bwd16d", o);
    const int r = ok ? cpu()->gqa_ext_bwd16d(dqkv, dqkv16, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV,
                                             hd, o)
                     : 0;
    leave();
    return r;
}
/* the output's gradient in bf16 (no operands to check: the cpu answer) */
static int s_att_do16(int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    int ok = 1;
    NEED_OPTS("att_do16", o);
    return ok ? cpu()->att_do16(B, T, NH, NKV, hd, o) : 0;
}
static int s_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                             float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    const size_t N = (size_t)B * T, R = N * (NH + 2 * (size_t)NKV) * hd;
    enter();
    int ok = NEED_ALL("gqa_ext_bwd16do", {"dqkv", dqkv, R * F}, {"dqkv16", dqkv16, R * 2},
                      {"dout16", dout16, N * NH * hd * 2}, {"qkv16", qkv16, R * 2}, {"tmp", tmp, R * F},
                      {"out16", out16, N * NH * hd * 2}, {"out", out, N * NH * hd * F},
                      {"lse", lse, N * NH * F});
    NEED_OPTS("gqa_ext_bwd16do", o);
    const int r = ok ? cpu()->gqa_ext_bwd16do(dqkv, dqkv16, dout16, qkv16, tmp, out16, out, lse, B, T, NH,
                                              NKV, hd, o)
                     : 0;
    leave();
    return r;
}
/* the bf16-gradient entries */
#define OPNDS_WX(dinp)                                                                  \
    OPND_W(dinp), OPND_OR(dw, inp16, (size_t)N * C * 2, inp, (size_t)N * C * F),          \
        {"dout16", dout16, (size_t)N * OC * 2}, {"dout", dout, (size_t)N * OC * F},       \
        {"dw", dw, (size_t)OC * C * F}, {"dbias", dbias, (size_t)OC * F}
static void s_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_d16", {"dinp", dinp, (size_t)N * C * F}, OPNDS_WX(dinp)))
        cpu()->matmul_bwd_d16(dinp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    leave();
}
static void s_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *dout16, const float *inp,
                                   const uint16_t *inp16, const float *pre, const float *w,
                                   const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_dgelu_bwd_d16", {"dpre", dpre, (size_t)N * C * F},
                 {"dpre_bias", dpre_bias, (size_t)C * F}, {"pre", pre, (size_t)N * C * F},
                 OPNDS_WX(dpre)))
        cpu()->matmul_dgelu_bwd_d16(dpre, dpre_bias, dw, dbias, dout, dout16, inp, inp16, pre, w,
                                    w16, N, C, OC);
    leave();
}
static void s_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                   float *dbias, const float *dout, const uint16_t *dout16,
                                   const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_dgelu_bwd_o16", {"dpre16", dpre16, (size_t)N * C * 2},
                 {"tmp", tmp, (size_t)N * C * F}, {"dpre_bias", dpre_bias, (size_t)C * F},
                 {"pre16", pre16, (size_t)N * C * 2}, OPNDS_WX(dpre16)))
        cpu()->matmul_dgelu_bwd_o16(dpre16, tmp, dpre_bias, dw, dbias, dout, dout16, inp, inp16,
                                    pre16, w, w16, N, C, OC);
    leave();
}
static void s_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    enter();
    if (NEED_ALL("matmul_bwd_o16", {"dinp16", dinp16, (size_t)N * C * 2}, {"tmp", tmp, (size_t)N * C * F},
                 OPNDS_WX(dinp16)))
        cpu()->matmul_bwd_o16(dinp16, tmp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    leave();
}
#undef OPNDS_WX
static void s_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                              const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("layernorm_bwd16", {"dinp", dinp, NC}, {"dinp16", dinp16, (size_t)N * C * 2},
                 {"dw", dw, (size_t)C * F}, {"db", db, (size_t)C * F}, {"dout", dout, NC},
                 {"inp", inp, NC}, {"w", w, (size_t)C * F}, {"mean", mean, (size_t)N * F},
                 {"rstd", rstd, (size_t)N * F}))
        cpu()->layernorm_bwd16(dinp, dinp16, dw, db, dout, inp, w, mean, rstd, N, C);
    leave();
}
static void s_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                            const float *inp, const float *w, const float *rstd, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("rmsnorm_bwd16", {"dinp", dinp, NC}, {"dinp16", dinp16, (size_t)N * C * 2},
                 {"dw", dw, (size_t)C * F}, {"dout", dout, NC}, {"inp", inp, NC},
                 {"w", w, (size_t)C * F}, {"rstd", rstd, (size_t)N * F}))
        cpu()->rmsnorm_bwd16(dinp, dinp16, dw, dout, inp, w, rstd, N, C);
    leave();
}
static void s_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                             const float *inp, const float *w, const float *rstd, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (NEED_ALL("rmsnorm_bwd16d", {"dinp", dinp, NC}, {"dw", dw, (size_t)C * F},
                 {"dout16", dout16, (size_t)N * C * 2}, {"inp", inp, NC}, {"w", w, (size_t)C * F},
                 {"rstd", rstd, (size_t)N * F}) &&
        (!dinp16 || NEED_ALL("rmsnorm_bwd16d", {"dinp16", dinp16, (size_t)N * C * 2})))
        cpu()->rmsnorm_bwd16d(dinp, dinp16, dw, dout16, inp, w, rstd, N, C);
    leave();
}
static void s_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                               const float *dout, const uint16_t *dout16, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C) {
    const size_t NC = (size_t)N * C * F;
    enter();
    if (!dout == !dout16) {
        set_err("cpu-strict: %s: exactly one of dout and dout16 must be given%s%p", "layernorm_bwd16d",
                ", dout16=", dout16);
        leave();
        return;
    }
    if (NEED_ALL("layernorm_bwd16d", {"dinp", dinp, NC}, {"dw", dw, (size_t)C * F},
                 {"db", db, (size_t)C * F}, {"inp", inp, NC}, {"w", w, (size_t)C * F},
                 {"mean", mean, (size_t)N * F}, {"rstd", rstd, (size_t)N * F}) &&
        (dout16 ? NEED_ALL("layernorm_bwd16d", {"dout16", dout16, (size_t)N * C * 2})
                : NEED_ALL("layernorm_bwd16d", {"dout", dout, NC})) &&
        (!dinp16 || NEED_ALL("layernorm_bwd16d", {"dinp16", dinp16, (size_t)N * C * 2})) &&
        (!dsum || NEED_ALL("layernorm_bwd16d", {"dsum", dsum, (size_t)C * F})))
        cpu()->layernorm_bwd16d(dinp, dinp16, dw, db, dsum, dout, dout16, inp, w, mean, rstd, N, C);
    leave();
}
#define S_GLU_BWD_D16(name)                                                                \
    static void s_##name(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16, \
                         int N, int H) {                                                   \
        const size_t NH = (size_t)N * H;                                                   \
        enter();                                                                           \
        if (NEED_ALL(#name, {"dgu", dgu, 2 * NH * F}, {"dgu16", dgu16, 2 * NH * 2},        \
                     {"dout", dout, NH * F}, {"gu16", gu16, 2 * NH * 2}))                  \
            cpu()->name(dgu, dgu16, dout, gu16, N, H);                                     \
        leave();                                                                           \
    }
S_GLU_BWD_D16(swiglu_bwd_d16)
S_GLU_BWD_D16(geglu_bwd_d16)
#define S_GLU_BWD_DD16(name)                                                               \
    static void s_##name(float *dgu, uint16_t *dgu16, const uint16_t *dout16,              \
                         const uint16_t *gu16, int N, int H) {                             \
        const size_t NH = (size_t)N * H;                                                   \
        enter();                                                                           \
        if (NEED_ALL(#name, {"dgu16", dgu16, 2 * NH * 2}, {"dout16", dout16, NH * 2},      \
                     {"gu16", gu16, 2 * NH * 2}) &&                                        \
            (!dgu || NEED_ALL(#name, {"dgu", dgu, 2 * NH * F})))                           \
            cpu()->name(dgu, dgu16, dout16, gu16, N, H);                                   \
        leave();                                                                           \
    }
S_GLU_BWD_DD16(swiglu_bwd_dd16)
S_GLU_BWD_DD16(geglu_bwd_dd16)

static const zt_backend strict_backend = {
    .name = "cpu-strict",
    .set_threads = s_set_threads,
    .error = s_error,
    .synchronize = s_synchronize,
    .alloc = s_alloc,
    .alloc_nz = s_alloc_nz,
    .free = s_free,
    .copy = s_copy,
    .copy2d = s_copy2d,
    .to_host = s_to_host,
    .to_host_async = s_to_host_async,
    .to_device_async = s_to_device_async,
    .copy_wait = s_copy_wait,
    .copy_done = s_copy_done,
    .to_device = s_to_device,
    .zero = s_zero,
    .device_memory = s_device_memory,
    .mem_stats = s_mem_stats,
    .encoder_fwd = s_encoder_fwd,
    .encoder_fwd_w16 = s_encoder_fwd_w16,
    .encoder_bwd = s_encoder_bwd,
    .layernorm_fwd = s_layernorm_fwd,
    .layernorm_bwd = s_layernorm_bwd,
    .matmul_fwd = s_matmul_fwd,
    .matmul_bwd = s_matmul_bwd,
    .set_matmul_precision = s_set_matmul_precision,
    .attention_fwd = s_attention_fwd,
    .attention_bwd = s_attention_bwd,
    .rmsnorm_fwd = s_rmsnorm_fwd,
    .rmsnorm_bwd = s_rmsnorm_bwd,
    .headnorm_fwd = s_headnorm_fwd,
    .headnorm_bwd = s_headnorm_bwd,
    .rope_fwd = s_rope_fwd,
    .rope_bwd = s_rope_bwd,
    .swiglu_fwd = s_swiglu_fwd,
    .swiglu_bwd = s_swiglu_bwd,
    .gqa_fwd = s_gqa_fwd,
    .gqa_bwd = s_gqa_bwd,
    .gqa_ext_fwd = s_gqa_ext_fwd,
    .gqa_ext_bwd = s_gqa_ext_bwd,
    .geglu_fwd = s_geglu_fwd,
    .moe_route_fwd = s_moe_route_fwd,
    .moe_route_bwd = s_moe_route_bwd,
    .rows_gather = s_rows_gather,
    .rows_scatter = s_rows_scatter,
    .rows_dot = s_rows_dot,
    .moe_permute = s_moe_permute,
    .moe_regroup = s_moe_regroup,
    .sigmoid_fwd = s_sigmoid_fwd,
    .sigmoid_bwd = s_sigmoid_bwd,
    .geglu_bwd = s_geglu_bwd,
    .softcap_fwd = s_softcap_fwd,
    .softcap_bwd = s_softcap_bwd,
    .gelu_fwd = s_gelu_fwd,
    .gelu_bwd = s_gelu_bwd,
    .add = s_add,
    .xent_fwd = s_xent_fwd,
    .xent_bwd = s_xent_bwd,
    .xent_fused = s_xent_fused,
    .adamw = s_adamw,
    .sumsq = s_sumsq,
    .scale = s_scale,
    .dropout = s_dropout,
    .to_bf16 = s_to_bf16,
    .from_bf16 = s_from_bf16,
    .to_f16 = s_to_f16,
    .from_f16 = s_from_f16,
    .nonfinite = s_nonfinite,
    .nf4_dequant = s_nf4_dequant,
    .sum = s_sum,
    .host_memory = 0,
    .sum_to = s_sum_to,
    .sumsq_to = s_sumsq_to,
    .nonfinite_to = s_nonfinite_to,
    .adamw_multi = s_adamw_multi,
    .matmul_gelu_fwd = s_matmul_gelu_fwd,
    .matmul_dgelu_bwd = s_matmul_dgelu_bwd,
    .matmul_fwd_w16 = s_matmul_fwd_w16,
    .matmul_bwd_w16 = s_matmul_bwd_w16,
    .matmul_gelu_fwd_w16 = s_matmul_gelu_fwd_w16,
    .matmul_dgelu_bwd_w16 = s_matmul_dgelu_bwd_w16,
    .matmul_fwd_a16 = s_matmul_fwd_a16,
    .matmul_bwd_a16 = s_matmul_bwd_a16,
    .matmul_gelu_fwd_a16 = s_matmul_gelu_fwd_a16,
    .matmul_dgelu_bwd_a16 = s_matmul_dgelu_bwd_a16,
    .add_layernorm_fwd = s_add_layernorm_fwd,
    .add_rmsnorm_fwd = s_add_rmsnorm_fwd,
    .matmul_fwd_o16 = s_matmul_fwd_o16,
    .gelu_fwd16 = s_gelu_fwd16,
    .swiglu_fwd16 = s_swiglu_fwd16,
    .geglu_fwd16 = s_geglu_fwd16,
    .gelu_fwd16r = s_gelu_fwd16r,
    .matmul_gelu_fwd_o16 = s_matmul_gelu_fwd_o16,
    .swiglu_fwd16r = s_swiglu_fwd16r,
    .geglu_fwd16r = s_geglu_fwd16r,
    .swiglu_bwd16 = s_swiglu_bwd16,
    .geglu_bwd16 = s_geglu_bwd16,
    .gqa_ext_fwd16 = s_gqa_ext_fwd16,
    .gqa_ext_bwd16 = s_gqa_ext_bwd16,
    .layernorm_fwd16 = s_layernorm_fwd16,
    .rmsnorm_fwd16 = s_rmsnorm_fwd16,
    .add_layernorm_fwd16 = s_add_layernorm_fwd16,
    .add_rmsnorm_fwd16 = s_add_rmsnorm_fwd16,
    .add_rmsnorm_fwd16b = s_add_rmsnorm_fwd16b,
    .add_layernorm_fwd16b = s_add_layernorm_fwd16b,
    .rope_fwd16 = s_rope_fwd16,
    .qknorm_rope_fwd16 = s_qknorm_rope_fwd16,
    .xent16_fwd = s_xent16_fwd,
    .xent16_fused = s_xent16_fused,
    .matmul_bwd_head16 = s_matmul_bwd_head16,
    .gqa_ext_fwd16o = s_gqa_ext_fwd16o,
    .gqa_ext_bwd16o = s_gqa_ext_bwd16o,
    .matmul_bwd_d16 = s_matmul_bwd_d16,
    .matmul_dgelu_bwd_d16 = s_matmul_dgelu_bwd_d16,
    .layernorm_bwd16 = s_layernorm_bwd16,
    .rmsnorm_bwd16 = s_rmsnorm_bwd16,
    .rmsnorm_bwd16d = s_rmsnorm_bwd16d,
    .layernorm_bwd16d = s_layernorm_bwd16d,
    .swiglu_bwd_d16 = s_swiglu_bwd_d16,
    .geglu_bwd_d16 = s_geglu_bwd_d16,
    .swiglu_bwd_dd16 = s_swiglu_bwd_dd16,
    .geglu_bwd_dd16 = s_geglu_bwd_dd16,
    .gqa_ext_bwd16d = s_gqa_ext_bwd16d,
    .matmul_dgelu_bwd_o16 = s_matmul_dgelu_bwd_o16,
    .rope_bwd16 = s_rope_bwd16,
    .att_do16 = s_att_do16,
    .matmul_bwd_o16 = s_matmul_bwd_o16,
    .gqa_ext_bwd16do = s_gqa_ext_bwd16do,
    .matmul_dinp_acc = s_matmul_dinp_acc,
    .matmul_fwd_acc = s_matmul_fwd_acc,
    .matmul_fwd_acc16 = s_matmul_fwd_acc16,
    .matmul_bwd_acc = s_matmul_bwd_acc,
    .matmul_bwd_acc16 = s_matmul_bwd_acc16,
    .matmul_grouped_o16 = s_matmul_grouped_o16,
    .rows_gather16 = s_rows_gather16,
    .rows_dot16 = s_rows_dot16,
    .rows_scatter16 = s_rows_scatter16,
    .set_dw_fresh = s_set_dw_fresh,
    .qknorm_rope_bwd16 = s_qknorm_rope_bwd16,
    .matmul_grouped_bwd_o16 = s_matmul_grouped_bwd_o16,
    .rows_dot16h = s_rows_dot16h,
    .dw_fresh = s_dw_fresh,
    .rows_sum16 = s_rows_sum16,
    .matmul_grouped_dw16 = s_matmul_grouped_dw16,
    .rows_gather_o16 = s_rows_gather_o16,
    .from_bf16_runs = s_from_bf16_runs,
};

const zt_backend *zt_backend_cpu_strict(void) { return &strict_backend; }
