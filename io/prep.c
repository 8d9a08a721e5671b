/* prep.c -- text to byte-level token shards with a train/val split. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "tokens.h"

int zt_prep_text(const char *input, const char *prefix, double val_fraction,
                 size_t *ntrain, size_t *nval, zt_status *st) {
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return zt_fail(st, ZT_EINVAL, "val fraction must be in [0, 1), got %g", val_fraction);
    FILE *fp = fopen(input, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", input, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) { fclose(fp); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    for (;;) {
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); fclose(fp); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) { free(buf); return zt_fail(st, ZT_EIO, "%s: read error", input); }
    if (n < 2) { free(buf); return zt_fail(st, ZT_EDATA, "%s: input has %zu bytes; need at least 2", input, n); }
    size_t nv = (size_t)((double)n * val_fraction);
    size_t nt = n - nv;
    uint16_t *tok = malloc(n * sizeof(uint16_t));
    if (!tok) { free(buf); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    for (size_t i = 0; i < n; ++i) tok[i] = buf[i];
    free(buf);
    char path[1100];
    int rc;
    snprintf(path, sizeof path, "%s_train.bin", prefix);
    rc = zt_tokens_write(path, tok, nt, st);
    if (rc == ZT_OK && nv > 0) {
        snprintf(path, sizeof path, "%s_val.bin", prefix);
        rc = zt_tokens_write(path, tok + nt, nv, st);
    }
    free(tok);
    if (rc == ZT_OK) {
        if (ntrain) *ntrain = nt;
        if (nval) *nval = nv;
    }
    return rc;
}
