/* mem.c -- tagged, accounted allocations (current and peak per category).
 *
 * Two kinds of blocks:
 *   host blocks    calloc'd (zero, and not written when the pages are fresh:
 *                  untouched until first use), with a 256-byte header in
 *                  front holding the size and tag (the returned pointer is
 *                  256-byte aligned, as cudaMalloc's: the models' carves
 *                  place the bf16 arrays the GEMMs read in place 256-byte
 *                  aligned in their block, which needs the block aligned so;
 *                  with 64 the counting backend over the cpu one saw another
 *                  alignment, and so other kernels, as the heap's layout
 *                  varied from run to run);
 *   device blocks  from the device backend's alloc() (zt_mem_set_backend with
 *                  a backend whose host_memory is 0).  Device memory cannot
 *                  carry a header the host could read, so these are recorded
 *                  in a host-side hash table keyed by the (disguised) pointer.
 * A block is a device block when a device backend is set and the tag has
 * neither ZT_MEM_ON_HOST nor ZT_MEM_HOST.  With the cpu backend (or none)
 * every block is a host block, as before the device split existed.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "backend.h"
#include "internal.h"

/* Linux 5.14's madvise advice (older headers lack the name; older kernels
 * answer EINVAL and nothing is pre-faulted) */
#if !defined(MADV_POPULATE_WRITE) && defined(__linux__)
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE (-1)
#endif

typedef struct mem_hdr {
    uint64_t bytes;
    int tag;
    int magic;
    const zt_backend *pin_be;   /* page-locked through this backend's host_register, or NULL */
    uint64_t pin_bytes;         /* the registered span (from the header on) */
    void *raw;                  /* what calloc returned (the header is aligned within it) */
    int prefault;               /* queued for the pre-fault thread (may still be) */
} mem_hdr;
/* the header's bytes: every block's alignment (ZT_MEM_ALIGN) */
#define HDR ZT_MEM_ALIGN
#define MAGIC 0x5a6d656d

static zt_mem_stats g_mem;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const zt_backend *g_dev;        /* device backend, NULL: host only */

/* Device blocks: open addressing, linear probing.  Keys are the pointers
 * XOR a constant, so the table does not hold references that would hide a
 * leaked block from a leak checker. */
#define KEY_MIX ((uintptr_t)0xa5a5a5a55a5a5a5aULL)
typedef struct dev_ent {
    uintptr_t key;
    uint64_t bytes;
    const zt_backend *be;   /* the backend that allocated it (frees it) */
    int tag, used;
} dev_ent;
static dev_ent *g_tab;
/* pin_memory: the first registration failure not yet reported, and the
 * bytes that stayed pageable */
static char g_pin_why[320];
static int g_pin_failed;
static size_t g_tab_cap, g_tab_n, g_tab_tomb;

static const char *tag_names[ZT_MEM_NTAGS] = {
    "params", "grads", "optimizer", "gathered-params", "activations",
    "comm-buffers", "workspace", "eval"};

const char *zt_mem_tag_name(int tag) {
    return (tag >= 0 && tag < ZT_MEM_NTAGS) ? tag_names[tag] : "?";
}

void zt_mem_set_backend(const zt_backend *be) {
    pthread_mutex_lock(&g_mu);
    g_dev = be && !be->host_memory ? be : NULL;
    pthread_mutex_unlock(&g_mu);
}

const zt_backend *zt_mem_device_backend(void) { return g_dev; }

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 64 ? (size_t)p : 4096;
}

static size_t slot_of(uintptr_t key, size_t cap) {
    uint64_t h = zt_mix64((uint64_t)key);
    return (size_t)(h & (cap - 1));
}

/* Insert (lock held).  0 on success. */
static int tab_put(uintptr_t key, uint64_t bytes, int tag, const zt_backend *be) {
    if ((g_tab_n + g_tab_tomb + 1) * 2 > g_tab_cap) {
        size_t cap = g_tab_cap ? g_tab_cap : 256;
        while ((g_tab_n + 1) * 4 > cap) cap *= 2;   /* live entries <= 1/4 after a rehash */
        dev_ent *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < g_tab_cap; ++i)
            if (g_tab[i].used == 1) {
                size_t j = slot_of(g_tab[i].key, cap);
                while (t[j].used) j = (j + 1) & (cap - 1);
                t[j] = g_tab[i];
            }
        free(g_tab);
        g_tab = t;
        g_tab_cap = cap;
        g_tab_tomb = 0;
    }
    size_t j = slot_of(key, g_tab_cap);
    while (g_tab[j].used == 1) j = (j + 1) & (g_tab_cap - 1);
    if (g_tab[j].used == 2) g_tab_tomb--;
    g_tab[j].key = key;
    g_tab[j].bytes = bytes;
    g_tab[j].tag = tag;
    g_tab[j].be = be;
    g_tab[j].used = 1;
    g_tab_n++;
    return 0;
}

/* Find and remove (lock held); 1 when found. */
static int tab_take(uintptr_t key, uint64_t *bytes, int *tag, const zt_backend **be) {
    if (!g_tab_cap) return 0;
    size_t j = slot_of(key, g_tab_cap);
    while (g_tab[j].used) {
        if (g_tab[j].used == 1 && g_tab[j].key == key) {
            *bytes = g_tab[j].bytes;
            *tag = g_tab[j].tag;
            *be = g_tab[j].be;
            g_tab[j].used = 2;   /* tombstone */
            g_tab_n--;
            g_tab_tomb++;
            if (!g_tab_n) {
                free(g_tab);
                g_tab = NULL;
                g_tab_cap = g_tab_tomb = 0;
            }
            return 1;
        }
        j = (j + 1) & (g_tab_cap - 1);
    }
    return 0;
}

/* Count a block in (sign +1) or out (-1) (lock held).  `host` blocks of a
 * device run (and offloaded blocks everywhere) count in the host columns. */
static void count(int tag, uint64_t bytes, int host_col, int sign) {
    if (sign > 0) {
        if (host_col) {
            g_mem.host_cur[tag] += bytes;
            if (g_mem.host_cur[tag] > g_mem.host_peak[tag]) g_mem.host_peak[tag] = g_mem.host_cur[tag];
        }
        g_mem.cur[tag] += bytes;
        g_mem.cur_total += bytes;
        if (g_mem.cur[tag] > g_mem.peak[tag]) g_mem.peak[tag] = g_mem.cur[tag];
        if (g_mem.cur_total > g_mem.peak_total) g_mem.peak_total = g_mem.cur_total;
    } else {
        if (host_col) g_mem.host_cur[tag] -= bytes;
        g_mem.cur[tag] -= bytes;
        g_mem.cur_total -= bytes;
    }
}

/* ------------------------------------------------------------ pre-faulting */

/* The queue (g_pf_mu): blocks not yet populated, each with the bytes done.
 * The thread populates one chunk at a time without the lock; g_pf_busy
 * names the block it is in, and a free of that block waits (g_pf_cv) for
 * the chunk, so no page is freed while the thread works on it. */
typedef struct pf_blk {
    char *p;
    size_t n, done;
    int rank;                    /* order (pf_rank): lowest first */
} pf_blk;
#define PF_MIN ((size_t)256 << 10)   /* smaller blocks: not worth a queue entry */
#define PF_CHUNK ((size_t)2 << 20)
static pthread_mutex_t g_pf_mu = PTHREAD_MUTEX_INITIALIZER;
static pf_blk *g_pf;
static int g_pf_n, g_pf_cap;
static int g_pf_running, g_pf_joinable, g_pf_stop;
static pthread_t g_pf_thread;
static pthread_cond_t g_pf_cv = PTHREAD_COND_INITIALIZER;
static char *g_pf_busy;
static _Thread_local int g_pf_collect;   /* between _begin and _start on this thread */

static char *base_of(mem_hdr *h) { return (char *)h + HDR; }

/* The order the thread takes them: first what nothing before the first
 * step writes (gradients, activations, communication buffers), the AdamW
 * moments last (a checkpoint restore writes them itself). */
static int pf_rank(int tag) {
    switch (tag) {
    case ZT_MEM_GRADS: return 0;
    case ZT_MEM_ACTIVATIONS: return 1;
    case ZT_MEM_COMM: return 2;
    case ZT_MEM_OPTIMIZER: return 3;
    default: return -1;          /* params (the load writes them), workspace, eval */
    }
}

/* Queue a fresh host block of `tag` (this thread collecting); 1 if queued. */
static int pf_queue(char *p, size_t n, int tag) {
    const int rank = pf_rank(tag);
    if (!g_pf_collect || rank < 0 || n < PF_MIN || MADV_POPULATE_WRITE < 0) return 0;
    pthread_mutex_lock(&g_pf_mu);
    int ok = g_pf_n < g_pf_cap;
    if (!ok) {
        int cap = g_pf_cap ? 2 * g_pf_cap : 64;
        pf_blk *t = realloc(g_pf, (size_t)cap * sizeof *t);
        if ((ok = t != NULL)) {
            g_pf = t;
            g_pf_cap = cap;
        }
    }
    if (ok) g_pf[g_pf_n++] = (pf_blk){p, n, 0, rank};
    pthread_mutex_unlock(&g_pf_mu);
    return ok;
}

static void pf_remove(int i) { g_pf[i] = g_pf[--g_pf_n]; }

/* A block leaves the queue (its free); waits while the thread populates a
 * chunk of it. */
static void pf_forget(char *p) {
    pthread_mutex_lock(&g_pf_mu);
    for (int i = 0; i < g_pf_n; ++i)
        if (g_pf[i].p == p) { pf_remove(i); break; }
    while (g_pf_busy == p) pthread_cond_wait(&g_pf_cv, &g_pf_mu);
    pthread_mutex_unlock(&g_pf_mu);
}

static void *pf_main(void *arg) {
    (void)arg;
    const size_t page = page_size();
    pthread_mutex_lock(&g_pf_mu);
    while (!g_pf_stop && g_pf_n > 0) {
        int b = 0;
        for (int i = 1; i < g_pf_n; ++i)
            if (g_pf[i].rank < g_pf[b].rank) b = i;
        pf_blk *e = &g_pf[b];
        char *a = e->p + e->done, *z = e->p + e->n;
        if (z - a > (ptrdiff_t)PF_CHUNK) z = a + PF_CHUNK;
        /* whole pages: the block's first page is shared with its header */
        char *pa = (char *)((uintptr_t)a & ~(uintptr_t)(page - 1));
        e->done = (size_t)(z - e->p);
        g_pf_busy = e->p;        /* its free waits for this chunk */
        if (e->done >= e->n) pf_remove(b);
        pthread_mutex_unlock(&g_pf_mu);
        const int r = madvise(pa, (size_t)(z - pa), MADV_POPULATE_WRITE);
        pthread_mutex_lock(&g_pf_mu);
        g_pf_busy = NULL;
        pthread_cond_broadcast(&g_pf_cv);
        if (r != 0) g_pf_n = 0;  /* not supported here (EINVAL), out of memory: the step faults them */
    }
    g_pf_running = 0;
    pthread_mutex_unlock(&g_pf_mu);
    return NULL;
}

void zt_mem_prefault_begin(void) { g_pf_collect = 1; }

void zt_mem_prefault_start(void) {
    g_pf_collect = 0;
    pthread_mutex_lock(&g_pf_mu);
    const int start = g_pf_n > 0 && !g_pf_running;
    const int join = start && g_pf_joinable;   /* an earlier thread, ended */
    if (start) {
        g_pf_running = 1;
        g_pf_joinable = 0;
        g_pf_stop = 0;
    }
    pthread_mutex_unlock(&g_pf_mu);
    if (join) pthread_join(g_pf_thread, NULL);
    if (!start) return;
    pthread_t t;
    const int ok = pthread_create(&t, NULL, pf_main, NULL) == 0;
    pthread_mutex_lock(&g_pf_mu);
    if (ok) {
        g_pf_thread = t;
        g_pf_joinable = 1;
    } else {
        g_pf_running = 0;
        g_pf_n = 0;
    }
    pthread_mutex_unlock(&g_pf_mu);
}

void zt_mem_prefault_wait(void) {
    pthread_mutex_lock(&g_pf_mu);
    const int join = g_pf_joinable;
    g_pf_joinable = 0;
    pthread_mutex_unlock(&g_pf_mu);
    if (join) pthread_join(g_pf_thread, NULL);
}

void zt_mem_prefault_stop(void) {
    g_pf_collect = 0;
    pthread_mutex_lock(&g_pf_mu);
    g_pf_stop = 1;               /* the thread ends after its chunk */
    g_pf_n = 0;
    const int join = g_pf_joinable;
    g_pf_joinable = 0;
    pthread_mutex_unlock(&g_pf_mu);
    if (join) pthread_join(g_pf_thread, NULL);
}

void *zt_mem_alloc(size_t bytes, int tag_flags, zt_status *st) {
    const int on_host = (tag_flags & ZT_MEM_ON_HOST) != 0;
    const int host_only = (tag_flags & ZT_MEM_HOST) != 0;
    const int tag = tag_flags & ~(ZT_MEM_ON_HOST | ZT_MEM_HOST | ZT_MEM_PIN | ZT_MEM_NOZERO);
    if (tag < 0 || tag >= ZT_MEM_NTAGS) {
        zt_fail(st, ZT_EINTERNAL, "zt_mem_alloc: bad tag %d", tag);
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    const zt_backend *dev = g_dev;
    pthread_mutex_unlock(&g_mu);
    if (dev && !on_host && !host_only) {
        void *p = (tag_flags & ZT_MEM_NOZERO) && dev->alloc_nz ? dev->alloc_nz(bytes ? bytes : 1)
                                                              : dev->alloc(bytes ? bytes : 1);
        const char *err = dev->error ? dev->error() : NULL;
        if (!p) {
            zt_fail(st, ZT_ENOMEM, "out of %s device memory allocating %zu bytes of %s%s%s",
                    dev->name, bytes, tag_names[tag], err ? ": " : "", err ? err : "");
            return NULL;
        }
        pthread_mutex_lock(&g_mu);
        int bad = tab_put((uintptr_t)p ^ KEY_MIX, bytes, tag, dev);
        if (!bad) count(tag, bytes, 0, +1);
        pthread_mutex_unlock(&g_mu);
        if (bad) {
            dev->free(p);
            zt_fail(st, ZT_ENOMEM, "out of memory (device allocation table)");
            return NULL;
        }
        return p;
    }
    /* pin_memory (offloaded blocks) and the asynchronous copies' staging
     * (ZT_MEM_HOST): a whole-page block (no page shared with another block,
     * which would register it twice) */
    const int pin = (on_host || host_only) && (tag_flags & ZT_MEM_PIN) && dev && dev->host_register;
    const size_t page = pin && page_size() > ZT_MEM_ALIGN ? page_size() : ZT_MEM_ALIGN;
    size_t total = HDR + ((bytes + 63) & ~(size_t)63);
    if (pin) total = (total + page - 1) / page * page;
    /* calloc, not posix_memalign + memset: a large block comes from fresh
     * anonymous pages, already zero, that calloc does not write -- nothing
     * is touched (page-faulted) until the block is first used, so start-up
     * does not pay for zero-filling buffers (gradients, AdamW moments) that
     * the first step writes anyway.  Same contents as before: all zero. */
    char *raw = calloc(1, total + page);
    if (!raw) {
        zt_fail(st, ZT_ENOMEM, "out of memory allocating %zu bytes of %s",
                bytes, tag_names[tag]);
        return NULL;
    }
    char *base = (char *)(((uintptr_t)raw + page - 1) & ~(uintptr_t)(page - 1));
    mem_hdr *h = (mem_hdr *)base;
    h->raw = raw;
    /* host columns: offloaded blocks always; host blocks of a device run */
    const int host_col = on_host || (host_only && dev);
    h->bytes = bytes;
    h->tag = tag | (host_col ? ZT_MEM_ON_HOST : 0);
    h->magic = MAGIC;
    const char *why = pin ? dev->host_register(base, total) : NULL;
    if (pin && !why) {
        h->pin_be = dev;
        h->pin_bytes = total;
    }
    if (!h->pin_be) h->prefault = pf_queue(base + HDR, bytes, tag);
    pthread_mutex_lock(&g_mu);
    count(tag, bytes, host_col, +1);
    if (h->pin_be) {
        g_mem.pinned_cur += bytes;
        if (g_mem.pinned_cur > g_mem.pinned_peak) g_mem.pinned_peak = g_mem.pinned_cur;
    } else if (why && !g_pin_failed) {
        g_pin_failed = 1;
        if (on_host)
            snprintf(g_pin_why, sizeof g_pin_why, "pin_memory: could not page-lock %zu bytes of %s "
                     "in host memory (%s backend: %s); continuing with pageable memory", bytes,
                     tag_names[tag], dev->name, why);
        else
            snprintf(g_pin_why, sizeof g_pin_why, "could not page-lock a %zu-byte host staging buffer "
                     "(%s; %s backend: %s); its copies from the device are synchronous", bytes,
                     tag_names[tag], dev->name, why);
    }
    pthread_mutex_unlock(&g_mu);
    return base + HDR;
}

void zt_mem_free(void *p) {
    if (!p) return;
    uint64_t bytes;
    int tag;
    const zt_backend *dev = NULL;
    pthread_mutex_lock(&g_mu);
    int found = tab_take((uintptr_t)p ^ KEY_MIX, &bytes, &tag, &dev);
    if (found) count(tag, bytes, 0, -1);
    pthread_mutex_unlock(&g_mu);
    if (found) {
        if (dev) dev->free(p);
        return;
    }
    mem_hdr *h = (mem_hdr *)((char *)p - HDR);
    tag = h->tag & ~ZT_MEM_ON_HOST;
    if (h->magic == MAGIC && tag >= 0 && tag < ZT_MEM_NTAGS) {
        pthread_mutex_lock(&g_mu);
        count(tag, h->bytes, (h->tag & ZT_MEM_ON_HOST) != 0, -1);
        if (h->pin_be) g_mem.pinned_cur -= h->bytes;
        pthread_mutex_unlock(&g_mu);
        h->magic = 0;
        if (h->prefault) pf_forget(base_of(h));   /* waits for a chunk in progress */
        if (h->pin_be) h->pin_be->host_unregister(h);   /* before the memory goes back */
        free(h->raw);
        return;
    }
    free(h);
}

int zt_mem_pinned(const void *p) {
    if (!p || zt_mem_is_device(p)) return 0;
    const mem_hdr *h = (const mem_hdr *)((const char *)p - HDR);
    return h->magic == MAGIC && h->pin_be != NULL;
}

int zt_mem_async_into(const zt_backend *be, const void *p) {
    return be && (!be->host_register || zt_mem_pinned(p));
}

int zt_mem_is_device(const void *p) {
    if (!p) return 0;
    pthread_mutex_lock(&g_mu);
    int found = 0;
    if (g_tab_cap) {
        const uintptr_t key = (uintptr_t)p ^ KEY_MIX;
        size_t j = slot_of(key, g_tab_cap);
        while (g_tab[j].used && !found) {
            found = g_tab[j].used == 1 && g_tab[j].key == key;
            j = (j + 1) & (g_tab_cap - 1);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

void zt_mem_get(zt_mem_stats *out) {
    pthread_mutex_lock(&g_mu);
    *out = g_mem;
    pthread_mutex_unlock(&g_mu);
}

int zt_mem_pin_warning(char *buf, size_t n) {
    pthread_mutex_lock(&g_mu);
    const int have = g_pin_failed == 1;
    if (have) {
        if (n) snprintf(buf, n, "%s", g_pin_why);
        g_pin_failed = 2;   /* reported; later failures stay silent */
    }
    pthread_mutex_unlock(&g_mu);
    return have;
}

void zt_mem_reset_peaks(void) {
    pthread_mutex_lock(&g_mu);
    g_mem.pinned_peak = g_mem.pinned_cur;
    for (int i = 0; i < ZT_MEM_NTAGS; ++i) {
        g_mem.peak[i] = g_mem.cur[i];
        g_mem.host_peak[i] = g_mem.host_cur[i];
    }
    g_mem.peak_total = g_mem.cur_total;
    pthread_mutex_unlock(&g_mu);
}
