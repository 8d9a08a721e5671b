/*
 * test_tbevents.c -- the TensorBoard events writer (libtrain/tbevents.c):
 * CRC-32C known answers (RFC 3720 B.4), and the bytes of an events file with
 * fixed wall times equal to tests/fixtures/tb/scalars.tfevents, written by
 * TensorBoard's own protobuf classes and record writer (tests/tb_fixture.py,
 * whose CASES are TB_CASES here, then a SessionLog START at step 9).
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "tbevents.h"

static const struct { const char *tag; long step; double v, wall; } TB_CASES[] = {
    {"train/loss", 1, 2.5, 1700000000.25},         {"train/lr", 1, 3e-4, 1700000000.25},
    {"train/grad_norm", 0, 0.0, 1700000001.0},      {"perf/tokens_per_s", 200, 12345.6, 1700000002.5},
    {"memory/peak_bytes", 300, 1.5e9, 1700000003.75}, {"train/loss", 70000, -1.25, 1700000004.0},
    {"eval/val_loss", 2147483648L, 7.0, 1700000005.125},
};

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

int main(void) {
    /* RFC 3720 B.4 */
    unsigned char z[32], ff[32], up[32], down[32];
    for (int i = 0; i < 32; ++i) z[i] = 0, ff[i] = 0xFF, up[i] = (unsigned char)i,
                                 down[i] = (unsigned char)(31 - i);
    tap_ok(zt_crc32c("123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = e3069283");
    tap_ok(zt_crc32c(z, 32) == 0x8A9136AAu, "crc32c(32 zero bytes) = 8a9136aa");
    tap_ok(zt_crc32c(ff, 32) == 0x62A8AB43u, "crc32c(32 0xff bytes) = 62a8ab43");
    tap_ok(zt_crc32c(up, 32) == 0x46DD794Eu, "crc32c(0..31) = 46dd794e");
    tap_ok(zt_crc32c(down, 32) == 0x113FDB5Cu, "crc32c(31..0) = 113fdb5c");
    tap_ok(zt_crc32c("", 0) == 0, "crc32c(\"\") = 0");
    /* the mask: rotate right by 15, add 0xa282ead8 */
    tap_ok(zt_crc32c_mask(0) == 0xa282ead8u && zt_crc32c_mask(0x8000u) == 0xa282ead9u,
           "masked crc: rotate right 15 plus a282ead8");

    zt_status st;
    zt_tb tb;
    const char *out = "tbevents_test.tfevents";
    int rc = zt_tb_open_file(&tb, out, 1700000000.0, &st);
    tap_ok(rc == ZT_OK, "open %s", out);
    if (rc != ZT_OK) return tap_done();
    int bad = 0;
    for (size_t i = 0; i < sizeof TB_CASES / sizeof *TB_CASES; ++i)
        bad |= zt_tb_scalar(&tb, TB_CASES[i].tag, TB_CASES[i].step, TB_CASES[i].v, TB_CASES[i].wall);
    bad |= zt_tb_start(&tb, 9, 1700000006.5);
    tap_ok(!bad && zt_tb_close(&tb) == 0, "7 scalars and a restart marker written and closed");
    const char *src = getenv("ZT_SRCDIR");
    char ref[4096];
    snprintf(ref, sizeof ref, "%s/tests/fixtures/tb/scalars.tfevents", src ? src : ".");
    size_t na = 0, nb = 0;
    unsigned char *a = slurp(out, &na), *b = slurp(ref, &nb);
    tap_ok(a && b && na == nb && na > 0 && memcmp(a, b, na) == 0,
           "the events file equals TensorBoard's own bytes (%zu and %zu bytes)", na, nb);
    if (a && b && na == nb)
        for (size_t i = 0; i < na; ++i)
            if (a[i] != b[i]) {
                tap_diag("first difference at byte %zu: %02x, expected %02x", i, a[i], b[i]);
                break;
            }
    free(a);
    free(b);
    remove(out);

    rc = zt_tb_open_file(&tb, "no-such-dir/x.tfevents", 1.0, &st);
    tap_ok(rc == ZT_EIO && strstr(st.msg, "no-such-dir/x.tfevents: cannot write the TensorBoard events file"),
           "an unwritable path: %s", st.msg);
    return tap_done();
}
