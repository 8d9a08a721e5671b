/* sftfile.c -- SFT window files (tokens + loss mask per window; layout in
 * sft.h and docs/data.md): header check, validation scan, window reads and
 * the streaming writer. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "fileio.h"
#include "sft.h"

/* Mask bytes examined per pread (stack buffer of the window reader). */
#define MASK_CHUNK 4096

static uint64_t rec_off(const zt_token_file *f, uint64_t w) { return f->data_off + w * f->rec_bytes; }

int zt_sft_open_header(const char *path, const int32_t *h, uint64_t size, zt_token_file *f,
                       zt_status *st) {
    if (h[1] != ZT_SFT_VERSION)
        return zt_fail(st, ZT_EDATA, "%s: unsupported SFT file version %d at offset 4 (expected %d)", path,
                       h[1], ZT_SFT_VERSION);
    if (h[2] < 0) return zt_fail(st, ZT_EDATA, "%s: negative window count %d at offset 8", path, h[2]);
    if (h[3] < 2)
        return zt_fail(st, ZT_EDATA, "%s: window length %d at offset 12 (expected at least 2 tokens)", path,
                       h[3]);
    if (h[4] != 2 && h[4] != 4)
        return zt_fail(st, ZT_EDATA, "%s: token width %d at offset 16 (expected 2 or 4 bytes)", path, h[4]);
    uint64_t rec = 4 + (uint64_t)h[3] * (uint64_t)h[4] + (uint64_t)h[3];
    uint64_t want = ZT_SHARD_HEADER_BYTES + (uint64_t)h[2] * rec;
    if (size != want) {
        uint64_t have = size > ZT_SHARD_HEADER_BYTES ? (size - ZT_SHARD_HEADER_BYTES) / rec : 0;
        return zt_fail(st, ZT_EDATA, "%s: %s: header says %d windows of %d tokens (%llu bytes) but the file "
                       "has %llu bytes (%llu whole windows)", path, size < want ? "truncated" : "size mismatch",
                       h[2], h[3], (unsigned long long)want, (unsigned long long)size,
                       (unsigned long long)have);
    }
    if (h[2] == 0) return zt_fail(st, ZT_EDATA, "%s: the SFT file holds no windows", path);
    f->format = ZT_FMT_SFT;
    f->elsize = h[4];
    f->window = h[3];
    f->rec_bytes = rec;
    f->ntok = (size_t)h[2] * (size_t)h[3];
    f->vocab_attr = h[5] > 0 ? h[5] : 0;
    f->direct = 1;
    f->data_off = ZT_SHARD_HEADER_BYTES;
    return ZT_OK;
}

/* n tokens of window w from its token k into out (as uint32). */
static int read_run(const zt_token_file *f, uint64_t w, uint64_t k, size_t n, uint32_t *out, zt_status *st) {
    uint64_t off = rec_off(f, w) + 4 + k * (uint64_t)f->elsize;
    if (f->elsize == 4) {
        ZT_TRY(zt_pread_full(f->fd, out, 4 * n, off, f->path, st));
        for (size_t i = 0; i < n; ++i) out[i] = le32toh(out[i]);
        return ZT_OK;
    }
    /* uint16 into the upper half of out, widened forward in place */
    unsigned char *raw = (unsigned char *)out + 2 * n;
    ZT_TRY(zt_pread_full(f->fd, raw, 2 * n, off, f->path, st));
    for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        memcpy(&v, raw + 2 * i, 2);
        out[i] = le16toh(v);
    }
    return ZT_OK;
}

int zt_sft_read_tokens(const zt_token_file *f, uint64_t start, size_t n, int vocab, uint32_t *out,
                       zt_status *st) {
    if (n == 0) return ZT_OK;
    if (start > f->ntok || n > f->ntok - start)
        return zt_fail(st, ZT_EINTERNAL, "%s: read of tokens [%llu, +%zu) past the end (%zu tokens)",
                       f->path, (unsigned long long)start, n, f->ntok);
    const uint64_t W = (uint64_t)f->window;
    const uint64_t start0 = start;
    uint32_t *const out0 = out;
    const size_t n0 = n;
    while (n > 0) {
        uint64_t w = start / W, k = start % W;
        size_t m = (size_t)(W - k) < n ? (size_t)(W - k) : n;
        ZT_TRY(read_run(f, w, k, m, out, st));
        out += m;
        start += m;
        n -= m;
    }
    if (vocab > 0 && !(f->elsize == 2 && vocab >= 65536)) {
        for (size_t i = 0; i < n0; ++i)
            if (out0[i] >= (uint32_t)vocab) {
                uint64_t idx = start0 + i;
                uint64_t w = idx / (uint64_t)f->window, k = idx % (uint64_t)f->window;
                return zt_fail(st, ZT_EDATA, "%s: token %u at byte offset %llu (window %llu, token %llu) "
                               "is >= vocab %d", f->path, out0[i],
                               (unsigned long long)(f->data_off + w * f->rec_bytes + 4 + k * (uint64_t)f->elsize),
                               (unsigned long long)w, (unsigned long long)k, vocab);
            }
    }
    return ZT_OK;
}

int zt_sft_window_count(const zt_token_file *f, uint64_t w, uint32_t *count, zt_status *st) {
    uint32_t c;
    ZT_TRY(zt_pread_full(f->fd, &c, 4, rec_off(f, w), f->path, st));
    *count = le32toh(c);
    return ZT_OK;
}

/* Mask bytes [k, k+n) of window w must be 0 or 1 (mask[0] = 0); adds them
 * to *sum; with tok, flags tok[k+i] where the mask is 0. */
static int scan_mask(uint64_t k, const uint8_t *m, size_t n, uint64_t *sum, uint32_t *tok) {
    for (size_t i = 0; i < n; ++i) {
        if (m[i] > 1 || (k + i == 0 && m[i] != 0)) return (int)i + 1;
        *sum += m[i];
        if (tok && !m[i]) tok[k + i] |= ZT_SFT_NOTARGET;
    }
    return 0;
}

static int mask_error(const zt_token_file *f, uint64_t w, uint64_t k, unsigned v, zt_status *st) {
    uint64_t off = rec_off(f, w) + 4 + (uint64_t)f->window * (uint64_t)f->elsize + k;
    if (k == 0 && v == 1)
        return zt_fail(st, ZT_EDATA, "%s: window %llu: mask byte at byte offset %llu is 1 for the window's "
                       "first token (it is never a target: expected 0)", f->path, (unsigned long long)w,
                       (unsigned long long)off);
    return zt_fail(st, ZT_EDATA, "%s: window %llu: mask byte %u at byte offset %llu (token %llu) is not 0 "
                   "or 1", f->path, (unsigned long long)w, v, (unsigned long long)off, (unsigned long long)k);
}

/* Read window w's mask in chunks through buf (cap bytes); checks and sums
 * it, and flags tok when given. */
static int read_mask(const zt_token_file *f, uint64_t w, uint8_t *buf, size_t cap, uint64_t *sum,
                     uint32_t *tok, zt_status *st) {
    const uint64_t W = (uint64_t)f->window;
    uint64_t base = rec_off(f, w) + 4 + W * (uint64_t)f->elsize;
    *sum = 0;
    for (uint64_t k = 0; k < W;) {
        size_t m = (size_t)(W - k) < cap ? (size_t)(W - k) : cap;
        ZT_TRY(zt_pread_full(f->fd, buf, m, base + k, f->path, st));
        int bad = scan_mask(k, buf, m, sum, tok);
        if (bad) return mask_error(f, w, k + (uint64_t)bad - 1, buf[bad - 1], st);
        k += m;
    }
    return ZT_OK;
}

static int count_error(const zt_token_file *f, uint64_t w, uint32_t c, uint64_t sum, zt_status *st) {
    return zt_fail(st, ZT_EDATA, "%s: window %llu: count %u at byte offset %llu does not match its mask "
                   "(%llu counted targets)", f->path, (unsigned long long)w, c,
                   (unsigned long long)rec_off(f, w), (unsigned long long)sum);
}

int zt_sft_validate(const zt_token_file *f, int vocab, void *buf, size_t cap, zt_status *st) {
    const uint64_t W = (uint64_t)f->window, N = f->ntok / W;
    size_t ntok_chunk = cap / sizeof(uint32_t);
    for (uint64_t w = 0; w < N; ++w) {
        uint32_t c;
        uint64_t sum;
        ZT_TRY(zt_sft_window_count(f, w, &c, st));
        ZT_TRY(read_mask(f, w, buf, cap, &sum, NULL, st));
        if (sum != c) return count_error(f, w, c, sum, st);
        if (vocab > 0)
            for (uint64_t k = 0; k < W;) {
                size_t m = (size_t)(W - k) < ntok_chunk ? (size_t)(W - k) : ntok_chunk;
                ZT_TRY(zt_sft_read_tokens(f, w * W + k, m, vocab, buf, st));
                k += m;
            }
    }
    return ZT_OK;
}

int zt_sft_read_window(const zt_token_file *f, uint64_t w, int vocab, uint32_t *tok, zt_status *st) {
    const uint64_t W = (uint64_t)f->window;
    ZT_TRY(zt_sft_read_tokens(f, w * W, (size_t)W, vocab, tok, st));
    uint8_t m[MASK_CHUNK];
    uint64_t sum;
    ZT_TRY(read_mask(f, w, m, sizeof m, &sum, tok, st));
    uint32_t c;
    ZT_TRY(zt_sft_window_count(f, w, &c, st));
    if (sum != c) return count_error(f, w, c, sum, st);
    return ZT_OK;
}

/* ---------------------------------------------------------------- writer */

struct zt_sft_writer {
    char path[1024], tmp[1100];
    FILE *fp;
    int32_t h[ZT_SHARD_HEADER_INTS];
    int window, elsize, vocab;
    uint64_t windows;
    int closed, committed;
    unsigned char *rec;       /* one record */
};

uint64_t zt_sft_writer_windows(const zt_sft_writer *w) { return w->windows; }

static int write_header(zt_sft_writer *w, zt_status *st) {
    int32_t le[ZT_SHARD_HEADER_INTS];
    for (int i = 0; i < ZT_SHARD_HEADER_INTS; ++i) le[i] = (int32_t)htole32((uint32_t)w->h[i]);
    if (fseek(w->fp, 0, SEEK_SET) != 0 || fwrite(le, sizeof le, 1, w->fp) != 1)
        return zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    return ZT_OK;
}

int zt_sft_writer_open(const char *path, int window, int elsize, int vocab, int pad_id, int mask_mode,
                       int flags, zt_sft_writer **out, zt_status *st) {
    *out = NULL;
    if (window < 2) return zt_fail(st, ZT_EINVAL, "%s: window of %d tokens (need at least 2)", path, window);
    if (elsize != 2 && elsize != 4)
        return zt_fail(st, ZT_EINVAL, "%s: token width must be 2 or 4 bytes, got %d", path, elsize);
    zt_sft_writer *w = calloc(1, sizeof *w);
    if (!w) return zt_fail(st, ZT_ENOMEM, "out of memory");
    int rc = zt_io_writer_names(path, w->path, sizeof w->path, w->tmp, sizeof w->tmp, st);
    if (rc != ZT_OK) { free(w); return rc; }
    w->window = window;
    w->elsize = elsize;
    w->vocab = vocab;
    w->h[0] = ZT_SFT_MAGIC;
    w->h[1] = ZT_SFT_VERSION;
    w->h[3] = window;
    w->h[4] = elsize;
    w->h[5] = vocab;
    w->h[6] = pad_id;
    w->h[8] = mask_mode;
    w->h[9] = flags;
    w->rec = malloc(4 + (size_t)window * ((size_t)elsize + 1));
    if (!w->rec) { free(w); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
        zt_sft_writer_free(w);
        return rc;
    }
    rc = write_header(w, st);
    if (rc != ZT_OK) { zt_sft_writer_free(w); return rc; }
    *out = w;
    return ZT_OK;
}

int zt_sft_writer_put(zt_sft_writer *w, const uint32_t *tok, const uint8_t *mask, zt_status *st) {
    if (w->closed) return zt_fail(st, ZT_EINTERNAL, "%s: write after close", w->path);
    if (w->windows >= 0x7fffffff)
        return zt_fail(st, ZT_EINVAL, "%s: more than 2147483647 windows in one SFT file", w->path);
    const size_t W = (size_t)w->window;
    uint32_t count = 0;
    unsigned char *p = w->rec + 4;
    /* uint32 tokens stay below bit 31, the reader's ZT_SFT_NOTARGET flag */
    const uint32_t lim = w->elsize == 2 ? 65536u : ZT_SFT_NOTARGET;
    for (size_t k = 0; k < W; ++k) {
        if (tok[k] >= lim || (w->vocab > 0 && tok[k] >= (uint32_t)w->vocab))
            return zt_fail(st, ZT_EDATA, "%s: token %u does not fit %s", w->path, tok[k],
                           tok[k] >= lim ? "the token width" : "the vocabulary");
        if (mask[k] > 1 || (k == 0 && mask[k]))
            return zt_fail(st, ZT_EINTERNAL, "%s: mask byte %u at token %zu", w->path, mask[k], k);
        count += mask[k];
        if (w->elsize == 2) {
            uint16_t v = htole16((uint16_t)tok[k]);
            memcpy(p + 2 * k, &v, 2);
        } else {
            uint32_t v = htole32(tok[k]);
            memcpy(p + 4 * k, &v, 4);
        }
    }
    memcpy(p + W * (size_t)w->elsize, mask, W);
    uint32_t c = htole32(count);
    memcpy(w->rec, &c, 4);
    size_t R = 4 + W * ((size_t)w->elsize + 1);
    if (fwrite(w->rec, 1, R, w->fp) != R)
        return zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    w->windows++;
    return ZT_OK;
}

int zt_sft_writer_close(zt_sft_writer *w, uint64_t examples, zt_status *st) {
    if (w->closed) return ZT_OK;
    w->closed = 1;
    w->h[2] = (int32_t)w->windows;
    w->h[7] = examples > 0x7fffffff ? 0x7fffffff : (int32_t)examples;
    int rc = write_header(w, st);
    zt_status later;   /* the first failure's message is the one kept */
    int r2 = zt_io_close_synced(&w->fp, w->tmp, rc == ZT_OK ? st : &later);
    return rc == ZT_OK ? r2 : rc;
}

int zt_sft_writer_commit(zt_sft_writer *w, zt_status *st) {
    if (!w->closed) return zt_fail(st, ZT_EINTERNAL, "%s: commit before close", w->path);
    ZT_TRY(zt_io_rename(w->tmp, w->path, st));
    w->committed = 1;
    return ZT_OK;
}

void zt_sft_writer_free(zt_sft_writer *w) {
    if (!w) return;
    if (w->fp) fclose(w->fp);
    if (!w->committed) unlink(w->tmp);
    free(w->rec);
    free(w);
}
