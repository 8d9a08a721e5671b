/* tokens.c -- read/write llm.c token shards with full validation. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "tokens.h"

int zt_tokens_open(const char *path, int vocab, zt_token_file **out, zt_status *st) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot open token file: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return zt_fail(st, ZT_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) { close(fd); return zt_fail(st, ZT_EDATA, "%s: empty file (expected a token shard)", path); }
    if (size < ZT_SHARD_HEADER_BYTES) {
        close(fd);
        return zt_fail(st, ZT_EDATA, "%s: truncated: %zu bytes, shorter than the %d-byte header",
                       path, size, ZT_SHARD_HEADER_BYTES);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return zt_fail(st, ZT_EIO, "%s: mmap failed: %s", path, strerror(errno));
    const int32_t *h = (const int32_t *)map;
    int rc = ZT_OK;
    if (h[0] != ZT_SHARD_MAGIC)
        rc = zt_fail(st, ZT_EDATA, "%s: bad magic %d at offset 0 (expected %d: not an llm.c token shard)",
                     path, h[0], ZT_SHARD_MAGIC);
    else if (h[1] != ZT_SHARD_VERSION)
        rc = zt_fail(st, ZT_EDATA, "%s: unsupported version %d at offset 4 (expected %d)", path, h[1],
                     ZT_SHARD_VERSION);
    else if (h[2] < 0)
        rc = zt_fail(st, ZT_EDATA, "%s: negative token count %d at offset 8", path, h[2]);
    else if (size != ZT_SHARD_HEADER_BYTES + 2 * (size_t)(uint32_t)h[2]) {
        size_t have = (size - ZT_SHARD_HEADER_BYTES) / 2;
        rc = zt_fail(st, ZT_EDATA, "%s: %s: header says %d tokens (%zu bytes) but the file has %zu bytes (%zu tokens)",
                     path, size < ZT_SHARD_HEADER_BYTES + 2 * (size_t)h[2] ? "truncated" : "size mismatch",
                     h[2], ZT_SHARD_HEADER_BYTES + 2 * (size_t)h[2], size, have);
    } else if (h[2] == 0)
        rc = zt_fail(st, ZT_EDATA, "%s: the shard holds no tokens", path);
    const uint16_t *tok = (const uint16_t *)((const char *)map + ZT_SHARD_HEADER_BYTES);
    size_t n = rc == ZT_OK ? (size_t)h[2] : 0;
    if (rc == ZT_OK && vocab > 0 && vocab < 65536) {
        for (size_t i = 0; i < n; ++i)
            if (tok[i] >= vocab) {
                rc = zt_fail(st, ZT_EDATA, "%s: token %u at byte offset %zu (token %zu) is >= vocab %d",
                             path, tok[i], ZT_SHARD_HEADER_BYTES + 2 * i, i, vocab);
                break;
            }
    }
    if (rc != ZT_OK) { munmap(map, size); return rc; }
    zt_token_file *f = calloc(1, sizeof *f);
    if (!f) { munmap(map, size); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->map = map;
    f->map_len = size;
    f->tokens = tok;
    f->ntok = n;
    *out = f;
    return ZT_OK;
}

void zt_tokens_close(zt_token_file *f) {
    if (!f) return;
    munmap(f->map, f->map_len);
    free(f);
}

int zt_tokens_write(const char *path, const uint16_t *tok, size_t n, zt_status *st) {
    if (n > 0x7fffffff) return zt_fail(st, ZT_EINVAL, "%s: %zu tokens exceed one shard's limit", path, n);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    int32_t h[ZT_SHARD_HEADER_INTS];
    memset(h, 0, sizeof h);
    h[0] = ZT_SHARD_MAGIC;
    h[1] = ZT_SHARD_VERSION;
    h[2] = (int32_t)n;
    int ok = fwrite(h, sizeof h, 1, fp) == 1 && (n == 0 || fwrite(tok, 2, n, fp) == n);
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    if (fclose(fp) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return zt_fail(st, ZT_EIO, "%s: write failed: %s", path, strerror(e));
    }
    return ZT_OK;
}
