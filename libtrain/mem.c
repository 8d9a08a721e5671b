/* mem.c -- tagged, accounted allocations (current and peak per category). */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* Each block carries a 64-byte header holding its size and tag, so that the
 * returned pointer stays 64-byte aligned. */
typedef struct mem_hdr { uint64_t bytes; int tag; int magic; } mem_hdr;
#define HDR 64
#define MAGIC 0x5a6d656d

static zt_mem_stats g_mem;

static const char *tag_names[ZT_MEM_NTAGS] = {
    "params", "grads", "optimizer", "gathered-params", "activations",
    "comm-buffers", "workspace", "eval"};

const char *zt_mem_tag_name(int tag) {
    return (tag >= 0 && tag < ZT_MEM_NTAGS) ? tag_names[tag] : "?";
}

void *zt_mem_alloc(size_t bytes, int tag_flags, zt_status *st) {
    const int on_host = (tag_flags & ZT_MEM_ON_HOST) != 0;
    const int tag = tag_flags & ~ZT_MEM_ON_HOST;
    if (tag < 0 || tag >= ZT_MEM_NTAGS) {
        zt_fail(st, ZT_EINTERNAL, "zt_mem_alloc: bad tag %d", tag);
        return NULL;
    }
    size_t total = HDR + ((bytes + 63) & ~(size_t)63);
    void *raw = NULL;
    if (posix_memalign(&raw, 64, total) != 0 || !raw) {
        zt_fail(st, ZT_ENOMEM, "out of memory allocating %zu bytes of %s",
                bytes, tag_names[tag]);
        return NULL;
    }
    memset(raw, 0, total);
    mem_hdr *h = (mem_hdr *)raw;
    h->bytes = bytes;
    h->tag = tag | (on_host ? ZT_MEM_ON_HOST : 0);
    h->magic = MAGIC;
    if (on_host) {
        g_mem.host_cur[tag] += bytes;
        if (g_mem.host_cur[tag] > g_mem.host_peak[tag]) g_mem.host_peak[tag] = g_mem.host_cur[tag];
    }
    g_mem.cur[tag] += bytes;
    g_mem.cur_total += bytes;
    if (g_mem.cur[tag] > g_mem.peak[tag]) g_mem.peak[tag] = g_mem.cur[tag];
    if (g_mem.cur_total > g_mem.peak_total) g_mem.peak_total = g_mem.cur_total;
    return (char *)raw + HDR;
}

void zt_mem_free(void *p) {
    if (!p) return;
    mem_hdr *h = (mem_hdr *)((char *)p - HDR);
    const int tag = h->tag & ~ZT_MEM_ON_HOST;
    if (h->magic == MAGIC && tag >= 0 && tag < ZT_MEM_NTAGS) {
        if (h->tag & ZT_MEM_ON_HOST) g_mem.host_cur[tag] -= h->bytes;
        g_mem.cur[tag] -= h->bytes;
        g_mem.cur_total -= h->bytes;
        h->magic = 0;
    }
    free(h);
}

void zt_mem_get(zt_mem_stats *out) { *out = g_mem; }

void zt_mem_reset_peaks(void) {
    for (int i = 0; i < ZT_MEM_NTAGS; ++i) {
        g_mem.peak[i] = g_mem.cur[i];
        g_mem.host_peak[i] = g_mem.host_cur[i];
    }
    g_mem.peak_total = g_mem.cur_total;
}
