/* tbevents.c -- TensorBoard event files written by hand (tbevents.h). */
#define _GNU_SOURCE
#include "tbevents.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

uint32_t zt_crc32c(const void *p, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {   /* (idempotent: a race writes the same values) */
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) c = table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t zt_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protobuf wire format: the few pieces an Event needs */
static size_t put_varint(uint8_t *b, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return n;
}
static size_t put_le(uint8_t *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

size_t zt_tb_event(uint8_t *buf, size_t cap, double wall_time, long step, const char *tag,
                   float value) {
    const size_t tl = tag ? strlen(tag) : 0;
    if (cap < 64 + tl) return 0;
    size_t n = 0;
    uint64_t u;
    buf[n++] = 0x09;   /* Event.wall_time: field 1, 64-bit */
    memcpy(&u, &wall_time, 8);
    n += put_le(buf + n, u, 8);
    if (!tag) {
        static const char ver[] = "brain.Event:2";
        buf[n++] = 0x1a;   /* Event.file_version: field 3, length-delimited */
        n += put_varint(buf + n, sizeof ver - 1);
        memcpy(buf + n, ver, sizeof ver - 1);
        return n + sizeof ver - 1;
    }
    if (step) {   /* (proto3: a zero step is not written) */
        buf[n++] = 0x10;   /* Event.step: field 2, varint (int64) */
        n += put_varint(buf + n, (uint64_t)(int64_t)step);
    }
    /* Summary.Value: tag (field 1, string), simple_value (field 2, float) */
    uint8_t val[16];
    size_t vl = 0;
    uint8_t hdr[16];
    size_t hl = 0;
    hdr[hl++] = 0x0a;
    hl += put_varint(hdr + hl, tl);
    uint32_t f;
    memcpy(&f, &value, 4);
    val[vl++] = 0x15;
    vl += put_le(val + vl, f, 4);
    const size_t value_len = hl + tl + vl;
    uint8_t vh[16];   /* Summary.value: field 1, length-delimited */
    size_t vhl = 0;
    vh[vhl++] = 0x0a;
    vhl += put_varint(vh + vhl, value_len);
    buf[n++] = 0x2a;   /* Event.summary: field 5, length-delimited */
    n += put_varint(buf + n, vhl + value_len);
    memcpy(buf + n, vh, vhl), n += vhl;
    memcpy(buf + n, hdr, hl), n += hl;
    memcpy(buf + n, tag, tl), n += tl;
    memcpy(buf + n, val, vl), n += vl;
    return n;
}

size_t zt_tb_event_start(uint8_t *buf, size_t cap, double wall_time, long step) {
    if (cap < 32) return 0;
    size_t n = 0;
    uint64_t u;
    buf[n++] = 0x09;
    memcpy(&u, &wall_time, 8);
    n += put_le(buf + n, u, 8);
    if (step) {
        buf[n++] = 0x10;
        n += put_varint(buf + n, (uint64_t)(int64_t)step);
    }
    buf[n++] = 0x3a;   /* Event.session_log: field 7, length-delimited */
    buf[n++] = 2;
    buf[n++] = 0x08;   /* SessionLog.status: field 1, varint; START = 1 */
    buf[n++] = 1;
    return n;
}

/* One TFRecord: length, masked CRC of the length, data, masked CRC of it. */
static int put_record(zt_tb *tb, const uint8_t *data, size_t n) {
    uint8_t head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, zt_crc32c_mask(zt_crc32c(head, 8)), 4);
    put_le(tail, zt_crc32c_mask(zt_crc32c(data, n)), 4);
    if (fwrite(head, 1, 12, tb->fp) != 12 || fwrite(data, 1, n, tb->fp) != n ||
        fwrite(tail, 1, 4, tb->fp) != 4) {
        tb->failed = 1;
        return -1;
    }
    return 0;
}

int zt_tb_open_file(zt_tb *tb, const char *path, double wall_time, zt_status *st) {
    memset(tb, 0, sizeof *tb);
    snprintf(tb->path, sizeof tb->path, "%s", path);
    tb->fp = fopen(path, "wb");
    if (!tb->fp)
        return zt_fail(st, ZT_EIO, "%s: cannot write the TensorBoard events file: %s", path,
                       strerror(errno));
    uint8_t buf[64];
    size_t n = zt_tb_event(buf, sizeof buf, wall_time, 0, NULL, 0);
    if (put_record(tb, buf, n) != 0 || zt_tb_flush(tb) != 0) {
        int e = errno;
        zt_tb_close(tb);
        return zt_fail(st, ZT_EIO, "%s: cannot write the TensorBoard events file: %s", path,
                       strerror(e));
    }
    return ZT_OK;
}

int zt_tb_open_dir(zt_tb *tb, const char *dir, double wall_time, zt_status *st) {
    char created[4096], bad[4096];
    if (zt_mkdirs(dir, created, sizeof created, bad, sizeof bad) != 0)
        return zt_fail(st, ZT_EIO, "ztrain.tensorboard.dir '%s': cannot create %s: %s", dir, bad,
                       strerror(errno));
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; ++h)
        if (*h == '/') *h = '_';
    char path[sizeof tb->path];
    /* a name no earlier file of this directory has (a resumed run in the same
     * second and process: the next n) */
    for (int k = 0;; ++k) {
        snprintf(path, sizeof path, "%s/events.out.tfevents.%ld.%s.%ld.%d", dir, (long)wall_time,
                 host, (long)getpid(), k);
        if (access(path, F_OK) != 0) break;
    }
    return zt_tb_open_file(tb, path, wall_time, st);
}

int zt_tb_scalar(zt_tb *tb, const char *tag, long step, double value, double wall_time) {
    if (!tb->fp) return -1;
    uint8_t buf[256];
    size_t n = zt_tb_event(buf, sizeof buf, wall_time, step, tag, (float)value);
    if (!n) return -1;
    return put_record(tb, buf, n);
}

int zt_tb_start(zt_tb *tb, long step, double wall_time) {
    if (!tb->fp) return -1;
    uint8_t buf[32];
    return put_record(tb, buf, zt_tb_event_start(buf, sizeof buf, wall_time, step));
}

int zt_tb_flush(zt_tb *tb) {
    if (!tb->fp) return -1;
    if (fflush(tb->fp) != 0 || ferror(tb->fp)) {
        clearerr(tb->fp);
        tb->failed = 1;
        return -1;
    }
    return 0;
}

int zt_tb_close(zt_tb *tb) {
    if (!tb->fp) return 0;
    int rc = zt_tb_flush(tb);
    if (fclose(tb->fp) != 0) rc = -1;
    tb->fp = NULL;
    return rc;
}
