/*
 * test_safetensors.c -- the safetensors reader and writer (ckpt/safetensors.h):
 * a written file reads back (F32 exactly, BF16 rounded to nearest even),
 * header padded to 8 bytes, element ranges of any offset and length; F16
 * files (hand-made) convert exactly; every malformed file is refused with a
 * message naming the file (and the tensor where there is one): short file,
 * header length beyond the file, bad JSON, offsets outside the data, begin >
 * end, size not matching shape x dtype, overlapping tensors, unknown dtype;
 * reading an I64 tensor is refused naming file, tensor and dtype; a failed
 * write leaves no file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "half.h"
#include "safetensors.h"
#include "tap.h"

static char dir[64];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

/* A file with the given header text and data bytes. */
static void raw_file(const char *p, const char *hdr, uint64_t hlen_claim, const void *data,
                     size_t n) {
    FILE *fp = fopen(p, "wb");
    uint64_t hl = hlen_claim ? hlen_claim : strlen(hdr);
    uint8_t le[8];
    for (int k = 0; k < 8; ++k) le[k] = (uint8_t)(hl >> (8 * k));
    fwrite(le, 1, 8, fp);
    fwrite(hdr, 1, strlen(hdr), fp);
    if (n) fwrite(data, 1, n, fp);
    fclose(fp);
}

static int refused(const char *p, int code, const char *needle, const char *what) {
    zt_st_file f;
    zt_status st;
    zt_status_clear(&st);
    int rc = zt_st_open(p, &f, &st);
    if (rc == ZT_OK) zt_st_close(&f);
    int good = rc == code && strstr(st.msg, needle) && strstr(st.msg, p);
    tap_ok(good, "%s: refused (%d) naming the file and '%s'", what, rc, needle);
    if (!good) tap_diag("got %d: %s", rc, st.msg);
    return good;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zt_st_XXXXXX");
    if (!mkdtemp(dir)) tap_skip_all("mkdtemp failed");
    char p[256], q[256];
    zt_status st;

    /* ---------------------------------------------------------- round trip */
    float a[3 * 5], b[7];
    for (int i = 0; i < 15; ++i) a[i] = (float)i * 0.37f - 2.1f;
    for (int i = 0; i < 7; ++i) b[i] = 1.0f / (float)(i + 3);
    zt_st_spec specs[2] = {{"layer.w", 2, {3, 5}}, {"layer.b", 1, {7, 0}}};
    const char *meta[] = {"format", "pt"};
    for (int dt = ZT_ST_F32; dt <= ZT_ST_BF16; ++dt) {
        path_of(p, sizeof p, dt == ZT_ST_F32 ? "f32.safetensors" : "bf16.safetensors");
        zt_st_writer w;
        int rc = zt_st_write_begin(&w, p, specs, 2, dt, meta, 1, &st);
        if (rc == ZT_OK) rc = zt_st_write_values(&w, a, 7, &st);   /* pieces of any size */
        if (rc == ZT_OK) rc = zt_st_write_values(&w, a + 7, 8, &st);
        if (rc == ZT_OK) rc = zt_st_write_values(&w, b, 7, &st);
        if (rc == ZT_OK) rc = zt_st_write_end(&w, &st);
        snprintf(q, sizeof q, "%s.tmp", p);
        tap_ok(rc == ZT_OK && access(p, F_OK) == 0 && access(q, F_OK) != 0,
               "%s written (through .tmp, renamed)", dt == ZT_ST_F32 ? "F32" : "BF16");
        FILE *fp = fopen(p, "rb");
        uint8_t le[8] = {0};
        size_t got = fp ? fread(le, 1, 8, fp) : 0;
        if (fp) fclose(fp);
        uint64_t hl = 0;
        for (int k = 7; k >= 0; --k) hl = hl << 8 | le[k];
        tap_ok(got == 8 && hl % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hl);
        zt_st_file f;
        rc = zt_st_open(p, &f, &st);
        tap_ok(rc == ZT_OK && f.n == 2, "reads back: 2 tensors (%s)", rc ? st.msg : "ok");
        if (rc != ZT_OK) continue;
        const zt_st_tensor *tw = zt_st_find(&f, "layer.w"), *tb = zt_st_find(&f, "layer.b");
        tap_ok(tw && tb && tw->ndim == 2 && tw->shape[0] == 3 && tw->shape[1] == 5 &&
               tb->ndim == 1 && tb->shape[0] == 7 && !zt_st_find(&f, "nope"),
               "names and shapes");
        float out[15];
        int exact = 1;
        for (uint64_t first = 0; first < 15; first += 4) {   /* ranges: 0-3, 4-7, ... */
            uint64_t n = 15 - first < 4 ? 15 - first : 4;
            if (zt_st_read(&f, tw, first, n, out, &st) != ZT_OK) exact = 0;
            for (uint64_t i = 0; i < n; ++i) {
                float want = dt == ZT_ST_F32 ? a[first + i] : zt_bf16_to_f32(zt_f32_to_bf16(a[first + i]));
                if (memcmp(&out[i], &want, 4) != 0) exact = 0;
            }
        }
        tap_ok(exact, "element ranges read back %s", dt == ZT_ST_F32 ? "bit for bit" :
               "as bf16 round-to-nearest-even of the values");
        tap_ok(zt_st_read(&f, tb, 5, 3, out, &st) == ZT_EINTERNAL, "a range past the end is refused");
        zt_st_close(&f);
    }

    /* ---------------------------------------------------------- F16 */
    uint16_t h[4] = {zt_f32_to_f16(1.5f), zt_f32_to_f16(-0.25f), zt_f32_to_f16(65504.0f), 0x0001};
    path_of(p, sizeof p, "f16.safetensors");
    raw_file(p, "{\"x\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 0, h, 8);
    zt_st_file f;
    float out[4];
    int rc = zt_st_open(p, &f, &st);
    if (rc == ZT_OK) rc = zt_st_read(&f, zt_st_find(&f, "x"), 0, 4, out, &st);
    tap_ok(rc == ZT_OK && out[0] == 1.5f && out[1] == -0.25f && out[2] == 65504.0f &&
           out[3] == 5.9604644775390625e-8f, "F16 (unpadded header) converts exactly, subnormal included");
    if (rc == ZT_OK || f.fd >= 0) zt_st_close(&f);

    /* ---------------------------------------------------------- malformed */
    uint8_t data[64] = {0};
    path_of(p, sizeof p, "bad.safetensors");
    FILE *fp = fopen(p, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    refused(p, ZT_EDATA, "shorter than the 8-byte header length", "a 3-byte file");
    raw_file(p, "{}", 4096, NULL, 0);
    refused(p, ZT_EDATA, "does not fit the file", "header length beyond the file");
    raw_file(p, "{\"x\": [", 0, NULL, 0);
    refused(p, ZT_EDATA, "not valid JSON", "bad JSON");
    raw_file(p, "[1, 2]", 0, NULL, 0);
    refused(p, ZT_EDATA, "not a JSON object", "header not an object");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, data, 8);
    refused(p, ZT_EDATA, "tensor t: data_offsets [0, 16] outside the data region", "truncated data");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 0, data, 8);
    refused(p, ZT_EDATA, "tensor t: data_offsets [8, 4]", "begin > end");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 0, data, 16);
    refused(p, ZT_EDATA, "tensor t: data_offsets span 16 bytes but shape [3] of F32 needs 12",
            "size != shape x dtype");
    raw_file(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 0, data, 24);
    refused(p, ZT_EDATA, "tensors a and b overlap", "overlapping tensors");
    raw_file(p, "{\"t\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, data, 4);
    refused(p, ZT_EDATA, "tensor t: unknown dtype 'F33'", "unknown dtype");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, data, 4);
    refused(p, ZT_EDATA, "tensor t: shape holds a non-integer or negative", "negative dimension");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, data, 4);
    refused(p, ZT_EDATA, "tensor t: header entry needs dtype, shape and data_offsets", "no offsets");
    raw_file(p, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, data, 8);
    refused(p, ZT_EDATA, "not valid JSON", "duplicate tensor names");
    path_of(q, sizeof q, "missing.safetensors");
    refused(q, ZT_EIO, "cannot open", "a missing file");

    /* I64: a valid file whose tensor is not readable as fp32 */
    raw_file(p, "{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 0, data, 16);
    rc = zt_st_open(p, &f, &st);
    tap_ok(rc == ZT_OK, "a file with an I64 tensor opens (it is well-formed)");
    if (rc == ZT_OK) {
        zt_status_clear(&st);
        rc = zt_st_read(&f, zt_st_find(&f, "ids"), 0, 2, out, &st);
        tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, p) && strstr(st.msg, "tensor ids has dtype I64"),
               "reading it is refused naming file, tensor and dtype (%s)", st.msg);
        zt_st_close(&f);
    }

    /* a writer that gets fewer values than declared leaves no file */
    path_of(p, sizeof p, "short.safetensors");
    zt_st_writer w;
    rc = zt_st_write_begin(&w, p, specs, 2, ZT_ST_F32, NULL, 0, &st);
    if (rc == ZT_OK) rc = zt_st_write_values(&w, a, 15, &st);
    if (rc == ZT_OK) rc = zt_st_write_end(&w, &st);
    snprintf(q, sizeof q, "%s.tmp", p);
    tap_ok(rc == ZT_EINTERNAL && access(p, F_OK) != 0 && access(q, F_OK) != 0,
           "a short write is refused at the end and leaves neither the file nor .tmp");

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("cleanup of %s failed", dir);
    return tap_done();
}
