/*
 * internal.h -- shared internals of libtrain (not installed).
 * Status helpers, check macros, memory accounting, deterministic RNG.
 */
#ifndef ZT_INTERNAL_H
#define ZT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "ztrain.h"

#if defined(__GNUC__)
#define ZT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ZT_PRINTF(a, b)
#endif

/* Fill st (may be NULL) with code and a formatted one-line message; returns
 * code so callers can write `return zt_fail(st, ZT_EINVAL, "...")`. */
int zt_fail(zt_status *st, int code, const char *fmt, ...) ZT_PRINTF(3, 4);
/* Reset st to ZT_OK / empty. */
void zt_status_clear(zt_status *st);
/* Prefix an existing message: "<prefix>: <old message>". */
int zt_fail_prefix(zt_status *st, const char *fmt, ...) ZT_PRINTF(2, 3);

/* A JSON parser's (jansson's) error text in the user's words: a message
 * naming one of its flags is reworded ("\\u0000 is not allowed without
 * JSON_ALLOW_NUL" -> "a NUL character (\\u0000) in a string is not
 * allowed"); others are returned as they are.  Returns buf or text. */
const char *zt_json_error_text(const char *text, char *buf, size_t n);

/* Internal-invariant check: a failed check is a bug, reported with file:line
 * and returned as ZT_EINTERNAL (never abort). */
#define ZT_CHECK(cond, st)                                                    \
    do {                                                                      \
        if (!(cond))                                                          \
            return zt_fail((st), ZT_EINTERNAL, "%s:%d: internal check '%s' " \
                           "failed (a bug: please report it)",                \
                           __FILE__, __LINE__, #cond);                        \
    } while (0)

/* Propagate a non-OK code. */
#define ZT_TRY(expr)                                                          \
    do { int zt_rc_ = (expr); if (zt_rc_ != ZT_OK) return zt_rc_; } while (0)

/* ------------------------------------------------------- memory accounting */

/* Every allocation libtrain makes for training state is tagged with a
 * zt_mem_category (ztrain.h). */
#define ZT_MEM_NTAGS ZT_MEM_CATEGORIES

/* OR'd into a tag: the block is placed in host memory because the
 * configuration offloads it (zero_optimization.offload_optimizer: AdamW state
 * and fp32 master weights; zero_optimization.offload_param: the stage-3
 * parameter shards).  It counts in its category as always, and also
 * in that category's host counters, which the memory report shows. */
#define ZT_MEM_ON_HOST 0x100

/* OR'd into a tag: host memory the host reads and writes itself (staging
 * buffers of a device run: token batches, checkpoint and initialization
 * chunks, loader buffers).  With a device backend it counts in its
 * category's host counters; with the cpu backend nothing changes. */
#define ZT_MEM_HOST 0x200

/* OR'd into a tag with ZT_MEM_ON_HOST (pin_memory) or ZT_MEM_HOST (the
 * staging of asynchronous copies: the step's scalars, the training token
 * arrays, MoE routing counts, the offloaded optimizer's gradient slices):
 * page-lock the block through the device backend's host_register (cuda:
 * cudaHostRegister) so copies to and from the device run at full speed and
 * an asynchronous copy into it returns at once (into pageable memory CUDA
 * returns only once the copy has completed).  Nothing happens on a
 * host-memory backend or one without host_register (cpu, cpu-strict): the
 * block is ordinary pageable memory and counts 0 pinned bytes.  A failed
 * registration is not an error: the block stays pageable (zt_mem_pinned
 * says so) and the first failure is kept for zt_mem_pin_warning. */
#define ZT_MEM_PIN 0x400

/* OR'd into a tag of a device block: the caller wholly overwrites it before
 * it reads it, so the block is made by the device backend's alloc_nz (no
 * zero fill: cuda skips the cudaMemsetAsync of the whole block; cpu-strict
 * fills it with 0xff bytes, NaN, so a read before the write shows).  The
 * accounting is the same: the same tag, the same bytes.  A host block, or a
 * backend without alloc_nz: zero-filled as always. */
#define ZT_MEM_NOZERO 0x800

/* The backend whose alloc() makes the accounted device blocks (process-wide;
 * set by context creation).  A backend with host_memory (cpu) or NULL: every
 * block is host memory, as always.  Otherwise every block whose tag has
 * neither ZT_MEM_ON_HOST nor ZT_MEM_HOST is device memory of that backend,
 * recorded in a host-side table. */
struct zt_backend;
void zt_mem_set_backend(const struct zt_backend *be);
/* The device backend set above, NULL when blocks are host memory. */
const struct zt_backend *zt_mem_device_backend(void);
/* 1 when p is an accounted device block (the start of one). */
int zt_mem_is_device(const void *p);
/* 1 when p (an accounted block's start, or NULL) is page-locked host memory
 * (ZT_MEM_PIN and the registration succeeded). */
int zt_mem_pinned(const void *p);
/* 1 when be's to_host_async into p (an accounted host block, or NULL)
 * returns at once: p is page-locked, or be cannot pin at all (cpu-strict:
 * its asynchronous copies do not depend on it).  0: a cuda copy into p
 * would return only once it, and all work queued before it, completed. */
int zt_mem_async_into(const struct zt_backend *be, const void *p);

const char *zt_mem_tag_name(int tag);
/* The alignment of every accounted block: a host block's (mem.c), and
 * cudaMalloc's (the cuda backend's alloc; cpu_alloc's too).  The models carve
 * their activation blocks on it: a bf16 array the GEMMs read in place
 * (zt_carve_take16) is 256-byte aligned only in a block that is. */
#define ZT_MEM_ALIGN 256
/* Aligned (ZT_MEM_ALIGN), zero-filled, accounted allocation.  NULL + st on
 * failure.  tag: a category, optionally | ZT_MEM_ON_HOST or | ZT_MEM_HOST. */
void *zt_mem_alloc(size_t bytes, int tag, zt_status *st);
/* Free an accounted allocation (NULL is fine). */
void zt_mem_free(void *p);
/* Pre-faulting (mem.c): the host blocks of gradients, optimizer state,
 * activations and communication buffers (256 KiB and more) this thread
 * allocates after _begin are populated by a background thread from _start
 * on (madvise MADV_POPULATE_WRITE: contents unchanged, safe while the blocks
 * are used); _stop ends it (after its current 2 MiB chunk) and drops what is
 * left.  Only time changes, never contents. */
void zt_mem_prefault_begin(void);
void zt_mem_prefault_start(void);
void zt_mem_prefault_stop(void);
/* Wait until the thread has gone through every queued block (tests). */
void zt_mem_prefault_wait(void);
typedef struct zt_mem_stats {
    uint64_t cur[ZT_MEM_NTAGS];
    uint64_t peak[ZT_MEM_NTAGS];
    uint64_t cur_total, peak_total;
    /* the part of each category placed in host memory by offloading */
    uint64_t host_cur[ZT_MEM_NTAGS], host_peak[ZT_MEM_NTAGS];
    /* the part of the host columns that is page-locked (ZT_MEM_PIN, registered) */
    uint64_t pinned_cur, pinned_peak;
} zt_mem_stats;
void zt_mem_get(zt_mem_stats *out);
/* The first failed pin_memory registration since the last call, as one
 * line into buf (1), or 0 when none failed.  Each failure is reported once. */
int zt_mem_pin_warning(char *buf, size_t n);
void zt_mem_reset_peaks(void);

/* ------------------------------------------------------- deterministic RNG */

/* Counter-based: a value is a pure function of (key, counter), so any rank
 * can produce any element of a stream without generating the others. */
static inline uint64_t zt_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static inline uint64_t zt_hash3(uint64_t a, uint64_t b, uint64_t c) {
    return zt_mix64(zt_mix64(zt_mix64(a) ^ b) ^ c);
}
/* Uniform in [0, 1) with 53 bits. */
static inline double zt_u01(uint64_t h) {
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}
/* Standard normal from a key and counter (Box-Muller). */
double zt_normal(uint64_t key, uint64_t counter);

/* ------------------------------------------------------- timing */
double zt_now_s(void);

/* mkdir -p DIR that remembers what it made: *created (n bytes) gets the
 * topmost directory this call created ("" if none), so that a run refused
 * later can take back exactly what it made (zt_rmdirs_created).  0, or -1
 * with errno (*bad: the component that failed). */
int zt_mkdirs(const char *dir, char *created, size_t n, char *bad, size_t nbad);
/* rmdir DIR and its parents up to and including CREATED (from zt_mkdirs),
 * stopping at the first that is not empty: nothing someone put there is
 * removed.  No-op when CREATED is "". */
void zt_rmdirs_created(const char *dir, const char *created);

#endif /* ZT_INTERNAL_H */
