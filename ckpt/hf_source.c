/*
 * hf_source.c -- what a run started from: ztrain.init_from as training
 * resolved it (an absolute path) and the fingerprints of its config.json and
 * tokenizer files (ztrain.init_from_files), recorded in the configuration
 * and so in every checkpoint; `ztrain ckpt export --hf` checks them before
 * copying those files into the export (docs/huggingface.md).
 *
 * A fingerprint is FNV-1a 64 over the file's bytes, mixed with its length:
 * it tells a different file from the same one, it is not a signature.  The
 * recorded text is "NAME=HEX16" per file present, space-separated, in the
 * order of ck_hf_side_files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt_internal.h"
#include "config.h"

const char *const ck_hf_side_files[CK_HF_SIDE_FILES] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "tokenizer.model", "vocab.json", "merges.txt", "generation_config.json"};

static int file_hash(const char *path, uint64_t *out, zt_status *st) {
    FILE *f = fopen(path, "rb");
    if (!f) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char buf[65536];
    uint64_t h = 0xcbf29ce484222325ull, n = 0;
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < k; ++i) h = (h ^ buf[i]) * 0x100000001b3ull;
        n += k;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return zt_fail(st, ZT_EIO, "%s: read failed", path);
    *out = zt_mix64(h ^ n);
    return ZT_OK;
}

int ck_hf_fingerprint(const char *dir, char *out, size_t n, zt_status *st) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < CK_HF_SIDE_FILES; ++i) {
        char p[ZT_PATH_MAX + 64];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, ck_hf_side_files[i]);
        if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        uint64_t h;
        ZT_TRY(file_hash(p, &h, st));
        int w = snprintf(out + len, n - len, "%s%s=%016llx", len ? " " : "", ck_hf_side_files[i],
                         (unsigned long long)h);
        if (w < 0 || (size_t)w >= n - len) return zt_fail(st, ZT_EINVAL, "fingerprint buffer too small");
        len += (size_t)w;
    }
    return ZT_OK;
}

/* The value recorded for NAME in a fingerprint text, or NULL (absent). */
static const char *fp_get(const char *fp, const char *name, char val[17]) {
    size_t nl = strlen(name);
    for (const char *p = fp; p && *p;) {
        while (*p == ' ') ++p;
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            snprintf(val, 17, "%.16s", p + nl + 1);
            return val;
        }
        p = strchr(p, ' ');
    }
    return NULL;
}

void ck_hf_fingerprint_diff(const char *want, const char *have, char *out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < CK_HF_SIDE_FILES; ++i) {
        char a[17], b[17];
        const char *x = fp_get(want, ck_hf_side_files[i], a), *y = fp_get(have, ck_hf_side_files[i], b);
        const char *what = x && !y ? "missing" : !x && y ? "not there then" :
                           x && y && strcmp(x, y) ? "changed" : NULL;
        if (!what || len >= n) continue;
        int w = snprintf(out + len, n - len, "%s%s %s", len ? ", " : "", ck_hf_side_files[i], what);
        if (w > 0) len += (size_t)w;
    }
}

int zt_hf_record_init_from(zt_config *cfg, zt_status *st) {
    zt_status_clear(st);
    char abs[PATH_MAX], fp[sizeof cfg->init_from_files];
    fp[0] = '\0';
    if (cfg->init_from[0]) {
        /* unresolvable: left as given, zt_hf_read_config names the problem */
        if (!realpath(cfg->init_from, abs)) return ZT_OK;
        if (strcmp(abs, cfg->init_from)) {
            int src = zt_config_source(cfg, "ztrain.init_from");
            ZT_TRY(zt_config_set(cfg, "ztrain.init_from", abs, src < 0 ? ZT_SRC_FLAG : src, st));
        }
        ZT_TRY(ck_hf_fingerprint(cfg->init_from, fp, sizeof fp, st));
    }
    return zt_config_set(cfg, "ztrain.init_from_files", fp, ZT_SRC_DERIVED, st);
}
