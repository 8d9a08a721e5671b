/* tokens.c -- read/write token files (llm.c shards, HDF5 via h5tokens.c)
 * with full validation, never mapping or reading a whole file. */
#include <endian.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fileio.h"
#include "h5tokens.h"
#include "internal.h"
#include "sft.h"
#include "tokens.h"

/* Tokens per chunk of the validation scan: 256 KiB of uint32 (libtrain/memplan.c
 * plan_data counts this buffer). */
#define SCAN_CHUNK ((size_t)1 << 16)

int zt_open_regular(const char *path, const char *what, zt_status *st) {
    /* O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { zt_fail(st, ZT_EIO, "%s: cannot open %s: %s", path, what, strerror(errno)); return -1; }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        zt_fail(st, ZT_EIO, "%s: cannot stat: %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        zt_fail(st, ZT_EIO, "%s: is %s, not a regular file (a %s must be a regular file)", path,
                S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                : S_ISSOCK(sb.st_mode) ? "a socket" : "a device", what);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int zt_tokens_is_h5(const char *path) {
    size_t n = strlen(path);
    if ((n > 3 && !strcmp(path + n - 3, ".h5")) || (n > 5 && !strcmp(path + n - 5, ".hdf5")))
        return 1;
    zt_status ignored = {0};
    int fd = zt_open_regular(path, "token file", &ignored);
    if (fd < 0) return 0;
    unsigned char sig[8];
    ssize_t got = pread(fd, sig, sizeof sig, 0);
    close(fd);
    return got == 8 && !memcmp(sig, "\211HDF\r\n\032\n", 8);
}

/* ---------------------------------------------------------------- open descriptors (tokens.h) */
static pthread_mutex_t g_fd_lock = PTHREAD_MUTEX_INITIALIZER;
static zt_token_file *g_lru_head, *g_lru_tail;   /* open files, most recently used first */
static int g_nopen;

/* 64, or a quarter of the descriptor limit when that is lower (at least 4); read at each open (the limit
 * may change while the process runs) */
int zt_tokens_open_max(void) {
    struct rlimit rl;
    rlim_t q = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur / 4 : 64;
    return q < 4 ? 4 : q > 64 ? 64 : (int)q;
}
static void lru_unlink(zt_token_file *f) {
    if (!f->listed) return;
    if (f->lru_prev) f->lru_prev->lru_next = f->lru_next; else g_lru_head = f->lru_next;
    if (f->lru_next) f->lru_next->lru_prev = f->lru_prev; else g_lru_tail = f->lru_prev;
    f->lru_prev = f->lru_next = NULL;
    f->listed = 0;
    g_nopen--;
}
static void lru_push(zt_token_file *f) {
    f->lru_prev = NULL; f->lru_next = g_lru_head;
    if (g_lru_head) g_lru_head->lru_prev = f; else g_lru_tail = f;
    g_lru_head = f;
    f->listed = 1;
    g_nopen++;
}
/* close least recently used files nobody is reading until there is room for one more */
static void lru_make_room(void) {
    zt_token_file *v = g_lru_tail;
    int max = zt_tokens_open_max();
    while (g_nopen >= max && v) {
        zt_token_file *prev = v->lru_prev;
        if (v->refs == 0) {
            lru_unlink(v);
            if (v->fd >= 0) close(v->fd);
            v->fd = -1;
            zt_h5_close(v);
            v->parked = 1;
        }
        v = prev;
    }
}
static int reopen(zt_token_file *f, zt_status *st) {
    if (f->direct) {
        int fd = zt_open_regular(f->path, "token file", st);
        if (fd < 0) return st->code;
        struct stat sb;
        memset(&sb, 0, sizeof sb);
        if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != f->fsize) {
            close(fd);
            return zt_fail(st, ZT_EDATA, "%s: the file changed since it was opened (%llu bytes, now %llu)",
                           f->path, (unsigned long long)f->fsize, (unsigned long long)sb.st_size);
        }
        f->fd = fd;
        return ZT_OK;
    }
    zt_token_file t;
    memset(&t, 0, sizeof t);
    snprintf(t.path, sizeof t.path, "%s", f->path);
    t.fd = -1;
    t.h5file = t.h5dset = -1;
    ZT_TRY(zt_h5_open(f->path, &t, st));
    if (t.direct || t.ntok != f->ntok || t.elsize != f->elsize) {
        if (t.fd >= 0) close(t.fd);
        zt_h5_close(&t);
        return zt_fail(st, ZT_EDATA, "%s: the file changed since it was opened", f->path);
    }
    f->h5file = t.h5file;
    f->h5dset = t.h5dset;
    return ZT_OK;
}
int zt_tokens_acquire(const zt_token_file *cf, zt_status *st) {
    zt_token_file *f = (zt_token_file *)cf;   /* only the descriptor state changes, under the lock */
    int rc = ZT_OK;
    pthread_mutex_lock(&g_fd_lock);
    if (f->parked) {
        lru_make_room();
        rc = reopen(f, st);
        if (rc == ZT_OK) { f->parked = 0; lru_push(f); }
    } else if (f->listed && g_lru_head != f) {
        lru_unlink(f);
        lru_push(f);
    }
    if (rc == ZT_OK) f->refs++;
    pthread_mutex_unlock(&g_fd_lock);
    return rc;
}
void zt_tokens_release(const zt_token_file *cf) {
    zt_token_file *f = (zt_token_file *)cf;
    pthread_mutex_lock(&g_fd_lock);
    f->refs--;
    pthread_mutex_unlock(&g_fd_lock);
}

static int tokens_read_open(const zt_token_file *f, uint64_t start, size_t n, int vocab, uint32_t *out,
                            zt_status *st);
int zt_tokens_read(const zt_token_file *f, uint64_t start, size_t n, int vocab,
                   uint32_t *out, zt_status *st) {
    if (n == 0) return ZT_OK;
    ZT_TRY(zt_tokens_acquire(f, st));
    int rc = tokens_read_open(f, start, n, vocab, out, st);
    zt_tokens_release(f);
    return rc;
}

static int tokens_read_open(const zt_token_file *f, uint64_t start, size_t n, int vocab, uint32_t *out,
                            zt_status *st) {
    if (n == 0) return ZT_OK;
    if (start > f->ntok || n > f->ntok - start)
        return zt_fail(st, ZT_EINTERNAL, "%s: read of tokens [%llu, +%zu) past the end (%zu tokens)",
                       f->path, (unsigned long long)start, n, f->ntok);
    if (f->format == ZT_FMT_SFT) return zt_sft_read_tokens(f, start, n, vocab, out, st);
    if (f->direct) {
        uint64_t off = f->data_off + start * (uint64_t)f->elsize;
        if (f->elsize == 2) {
            /* read the uint16 tokens into the upper half of out, then widen
             * forward in place (each write lands below the next read) */
            unsigned char *raw = (unsigned char *)out + 2 * n;
            ZT_TRY(zt_pread_full(f->fd, raw, 2 * n, off, f->path, st));
            for (size_t i = 0; i < n; ++i) {
                uint16_t v;
                memcpy(&v, raw + 2 * i, 2);
                out[i] = le16toh(v);
            }
        } else {
            ZT_TRY(zt_pread_full(f->fd, out, 4 * n, off, f->path, st));
            for (size_t i = 0; i < n; ++i) out[i] = le32toh(out[i]);
        }
    } else {
        ZT_TRY(zt_h5_read(f, start, n, out, st));
    }
    if (vocab > 0 && !(f->elsize == 2 && vocab >= 65536)) {
        for (size_t i = 0; i < n; ++i)
            if (out[i] >= (uint32_t)vocab) {
                uint64_t idx = start + i;
                if (f->direct)
                    return zt_fail(st, ZT_EDATA, "%s: token %u at byte offset %llu (token %llu) is >= vocab %d",
                                   f->path, out[i], (unsigned long long)(f->data_off + idx * (uint64_t)f->elsize),
                                   (unsigned long long)idx, vocab);
                return zt_fail(st, ZT_EDATA, "%s: token %u at element %llu of /tokens is >= vocab %d",
                               f->path, out[i], (unsigned long long)idx, vocab);
            }
    }
    return ZT_OK;
}

/* Stream every token once through a bounded buffer and check it < vocab. */
static int validate_tokens(zt_token_file *f, int vocab, zt_status *st) {
    /* SFT files: masks and counts are checked whatever the vocabulary */
    if (f->format != ZT_FMT_SFT && (vocab <= 0 || (f->elsize == 2 && vocab >= 65536))) return ZT_OK;
    size_t chunk = f->ntok < SCAN_CHUNK ? f->ntok : SCAN_CHUNK;
    /* the buffer is SCAN_CHUNK tokens whatever the file's size: the size the
     * memory plan counts (libtrain/memplan.c plan_data), so that its peak is
     * the accounted one for short files too */
    uint32_t *buf = zt_mem_alloc(SCAN_CHUNK * sizeof(uint32_t), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
    if (!buf) return ZT_ENOMEM;
    if (f->direct) posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int rc = ZT_OK;
    if (f->format == ZT_FMT_SFT) rc = zt_sft_validate(f, vocab, buf, chunk * sizeof(uint32_t), st);
    for (size_t pos = 0; f->format != ZT_FMT_SFT && pos < f->ntok && rc == ZT_OK; pos += chunk) {
        size_t m = f->ntok - pos < chunk ? f->ntok - pos : chunk;
        rc = tokens_read_open(f, pos, m, vocab, buf, st);
    }
    /* training reads windows at random: no read-ahead */
    if (f->direct) posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
    zt_mem_free(buf);
    return rc;
}

static int open_bin(const char *path, zt_token_file *f, zt_status *st) {
    int fd = zt_open_regular(path, "token file", st);
    if (fd < 0) return st->code;
    f->fd = fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0) return zt_fail(st, ZT_EIO, "%s: cannot stat: %s", path, strerror(errno));
    uint64_t size = (uint64_t)sb.st_size;
    f->fsize = size;
    if (size == 0) return zt_fail(st, ZT_EDATA, "%s: empty file (expected a token shard)", path);
    if (size < ZT_SHARD_HEADER_BYTES)
        return zt_fail(st, ZT_EDATA, "%s: truncated: %llu bytes, shorter than the %d-byte header",
                       path, (unsigned long long)size, ZT_SHARD_HEADER_BYTES);
    int32_t h[ZT_SHARD_HEADER_INTS];
    ZT_TRY(zt_pread_full(fd, h, sizeof h, 0, path, st));
    for (int i = 0; i < ZT_SHARD_HEADER_INTS; ++i) h[i] = (int32_t)le32toh((uint32_t)h[i]);
    if (h[0] == ZT_SFT_MAGIC) return zt_sft_open_header(path, h, size, f, st);
    int elsize = h[0] == ZT_SHARD_MAGIC ? 2 : h[0] == ZT_SHARD32_MAGIC ? 4 : 0;
    if (!elsize)
        return zt_fail(st, ZT_EDATA, "%s: bad magic %d at offset 0 (expected %d or %d: not an llm.c token shard)",
                       path, h[0], ZT_SHARD_MAGIC, ZT_SHARD32_MAGIC);
    int version = elsize == 2 ? ZT_SHARD_VERSION : ZT_SHARD32_VERSION;
    if (h[1] != version)
        return zt_fail(st, ZT_EDATA, "%s: unsupported version %d at offset 4 (expected %d for magic %d)", path, h[1],
                       version, h[0]);
    if (h[2] < 0) return zt_fail(st, ZT_EDATA, "%s: negative token count %d at offset 8", path, h[2]);
    uint64_t want = ZT_SHARD_HEADER_BYTES + (uint64_t)elsize * (uint64_t)h[2];
    if (size != want)
        return zt_fail(st, ZT_EDATA, "%s: %s: header says %d tokens (%llu bytes) but the file has %llu bytes (%llu tokens)",
                       path, size < want ? "truncated" : "size mismatch", h[2], (unsigned long long)want,
                       (unsigned long long)size, (unsigned long long)((size - ZT_SHARD_HEADER_BYTES) / (uint64_t)elsize));
    if (h[2] == 0) return zt_fail(st, ZT_EDATA, "%s: the shard holds no tokens", path);
    f->format = ZT_FMT_BIN;
    f->elsize = elsize;
    f->ntok = (size_t)h[2];
    f->direct = 1;
    f->data_off = ZT_SHARD_HEADER_BYTES;
    return ZT_OK;
}

int zt_tokens_open(const char *path, int vocab, zt_token_file **out, zt_status *st) {
    *out = NULL;
    zt_token_file *f = calloc(1, sizeof *f);
    if (!f) return zt_fail(st, ZT_ENOMEM, "out of memory");
    if (strlen(path) >= sizeof f->path) {
        free(f);
        return zt_fail(st, ZT_EINVAL, "%.200s...: path too long", path);
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fd = -1;
    f->h5file = f->h5dset = -1;
    int rc = zt_tokens_is_h5(path) ? zt_h5_open(path, f, st) : open_bin(path, f, st);
    if (rc == ZT_OK) rc = validate_tokens(f, vocab, st);
    if (rc != ZT_OK) { zt_tokens_close(f); return rc; }
    pthread_mutex_lock(&g_fd_lock);
    lru_make_room();
    lru_push(f);
    pthread_mutex_unlock(&g_fd_lock);
    *out = f;
    return ZT_OK;
}

void zt_tokens_close(zt_token_file *f) {
    if (!f) return;
    pthread_mutex_lock(&g_fd_lock);
    lru_unlink(f);
    pthread_mutex_unlock(&g_fd_lock);
    if (f->fd >= 0) close(f->fd);
    zt_h5_close(f);
    free(f);
}

/* ---------------------------------------------------------------- writers */

struct zt_tok_writer {
    char path[1024], tmp[1100];
    int format, elsize, vocab;
    size_t ntok, put;
    FILE *fp;                 /* bin */
    int64_t h5f, h5d;         /* HDF5 */
    int open, committed;
    uint32_t buf[4096];
};

const char *zt_writer_path(const zt_tok_writer *w) { return w->path; }

int zt_writer_open(const char *path, int format, int elsize, size_t ntok, int vocab,
                   zt_tok_writer **out, zt_status *st) {
    *out = NULL;
    if (elsize == 0) elsize = 2;
    if (elsize != 2 && elsize != 4)
        return zt_fail(st, ZT_EINVAL, "%s: token width must be 2 or 4 bytes, got %d", path, elsize);
    if (format == ZT_FMT_BIN && ntok > 0x7fffffff)
        return zt_fail(st, ZT_EINVAL, "%s: %zu tokens exceed one llm.c shard's limit of 2147483647 "
                       "(split into shards or use HDF5)", path, ntok);
    zt_tok_writer *w = calloc(1, sizeof *w);
    if (!w) return zt_fail(st, ZT_ENOMEM, "out of memory");
    int rc = zt_io_writer_names(path, w->path, sizeof w->path, w->tmp, sizeof w->tmp, st);
    if (rc != ZT_OK) { free(w); return rc; }
    w->format = format;
    w->elsize = elsize;
    w->vocab = vocab;
    w->ntok = ntok;
    w->h5f = w->h5d = -1;
    if (format == ZT_FMT_BIN) {
        w->fp = fopen(w->tmp, "wb");
        if (!w->fp) rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
        else {
            int32_t h[ZT_SHARD_HEADER_INTS];
            memset(h, 0, sizeof h);
            h[0] = (int32_t)htole32(elsize == 2 ? ZT_SHARD_MAGIC : ZT_SHARD32_MAGIC);
            h[1] = (int32_t)htole32(elsize == 2 ? ZT_SHARD_VERSION : ZT_SHARD32_VERSION);
            h[2] = (int32_t)htole32((uint32_t)ntok);
            if (fwrite(h, sizeof h, 1, w->fp) != 1)
                rc = zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
        }
    } else {
        rc = zt_h5_create(w->tmp, elsize, ntok, vocab, &w->h5f, &w->h5d, st);
    }
    w->open = 1;
    if (rc != ZT_OK) { zt_writer_free(w); return rc; }
    *out = w;
    return ZT_OK;
}

int zt_writer_put(zt_tok_writer *w, const uint32_t *tok, size_t n, zt_status *st) {
    if (!w->open) return zt_fail(st, ZT_EINTERNAL, "%s: write after close", w->path);
    if (n > w->ntok - w->put)
        return zt_fail(st, ZT_EINTERNAL, "%s: more tokens than the %zu announced", w->path, w->ntok);
    uint32_t lim = w->elsize == 2 ? 65536u : 0xffffffffu;
    for (size_t i = 0; i < n; ++i)
        if (tok[i] >= lim || (w->vocab > 0 && tok[i] >= (uint32_t)w->vocab))
            return zt_fail(st, ZT_EDATA, "%s: token %u (token %zu of the output) does not fit %s",
                           w->path, tok[i], w->put + i,
                           tok[i] >= lim ? "16 bits (use uint32 tokens)" : "the vocabulary");
    if (w->format == ZT_FMT_BIN) {
        size_t done = 0;
        while (done < n) {
            size_t m = n - done < 4096 ? n - done : 4096;
            if (w->elsize == 2) {
                uint16_t *b16 = (uint16_t *)w->buf;
                for (size_t i = 0; i < m; ++i) b16[i] = htole16((uint16_t)tok[done + i]);
            } else {
                for (size_t i = 0; i < m; ++i) w->buf[i] = htole32(tok[done + i]);
            }
            if (fwrite(w->buf, (size_t)w->elsize, m, w->fp) != m)
                return zt_fail(st, ZT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
            done += m;
        }
    } else {
        ZT_TRY(zt_h5_write(w->h5d, w->put, tok, n, w->tmp, st));
    }
    w->put += n;
    return ZT_OK;
}

static int fsync_path(const char *path, zt_status *st) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot reopen: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    return rc == 0 ? ZT_OK : zt_fail(st, ZT_EIO, "%s: fsync failed: %s", path, strerror(e));
}

int zt_writer_close(zt_tok_writer *w, zt_status *st) {
    if (!w->open) return ZT_OK;
    w->open = 0;
    int rc = ZT_OK;
    if (w->put != w->ntok)
        rc = zt_fail(st, ZT_EINTERNAL, "%s: %zu of %zu tokens written", w->path, w->put, w->ntok);
    if (w->format == ZT_FMT_BIN) {
        zt_status later;   /* the first failure's message is the one kept */
        int r2 = zt_io_close_synced(&w->fp, w->tmp, rc == ZT_OK ? st : &later);
        if (rc == ZT_OK) rc = r2;
    } else {
        int r2 = zt_h5_finish(&w->h5f, &w->h5d, w->tmp, st);
        if (rc == ZT_OK) rc = r2;
        if (rc == ZT_OK) rc = fsync_path(w->tmp, st);
    }
    return rc;
}

int zt_writer_commit(zt_tok_writer *w, zt_status *st) {
    ZT_TRY(zt_writer_close(w, st));
    ZT_TRY(zt_io_rename(w->tmp, w->path, st));
    w->committed = 1;
    return ZT_OK;
}

void zt_writer_free(zt_tok_writer *w) {
    if (!w) return;
    if (w->fp) fclose(w->fp);
    if (w->h5f >= 0 || w->h5d >= 0) {
        zt_status ignore;
        zt_h5_finish(&w->h5f, &w->h5d, w->tmp, &ignore);
    }
    if (!w->committed) unlink(w->tmp);
    free(w);
}

static int write_all(const char *path, int format, int elsize, int vocab, size_t n,
                     const uint16_t *t16, const uint32_t *t32, zt_status *st) {
    zt_tok_writer *w;
    ZT_TRY(zt_writer_open(path, format, elsize, n, vocab, &w, st));
    uint32_t buf[4096];
    int rc = ZT_OK;
    for (size_t done = 0; done < n && rc == ZT_OK;) {
        size_t m = n - done < 4096 ? n - done : 4096;
        if (t16) {
            for (size_t i = 0; i < m; ++i) buf[i] = t16[done + i];
            rc = zt_writer_put(w, buf, m, st);
        } else {
            rc = zt_writer_put(w, t32 + done, m, st);
        }
        done += m;
    }
    if (rc == ZT_OK) rc = zt_writer_commit(w, st);
    zt_writer_free(w);
    return rc;
}

int zt_tokens_write(const char *path, const uint16_t *tok, size_t n, zt_status *st) {
    return write_all(path, ZT_FMT_BIN, 2, 0, n, tok, NULL, st);
}

int zt_tokens_write_h5(const char *path, const uint32_t *tok, size_t n, int elsize,
                       int vocab, zt_status *st) {
    return write_all(path, ZT_FMT_H5, elsize, vocab, n, NULL, tok, st);
}
