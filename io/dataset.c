/* dataset.c -- a glob of token files as a sequence of T+1-token windows. */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data.h"
#include "internal.h"
#include "sft.h"

static int has_glob_chars(const char *p) { return strpbrk(p, "*?[") != NULL; }

static int glob_err(const char *epath, int eerrno) {
    (void)epath;
    (void)eerrno;
    return 0;   /* unreadable directories simply match nothing */
}

int zt_dataset_open(const char *pattern, int vocab, int T, zt_dataset **out, zt_status *st) {
    *out = NULL;
    if (!pattern || !*pattern) return zt_fail(st, ZT_EINVAL, "empty data path");
    if (T < 0) return zt_fail(st, ZT_EINVAL, "sequence length %d < 0", T);
    zt_dataset *d = calloc(1, sizeof *d);
    if (!d) return zt_fail(st, ZT_ENOMEM, "out of memory");
    snprintf(d->pattern, sizeof d->pattern, "%s", pattern);
    d->T = T;
    d->vocab = vocab;
    glob_t g;
    memset(&g, 0, sizeof g);
    int use_glob = 0, rc = ZT_OK;
    char **paths = NULL;
    size_t npaths = 0;
    char *single[1] = {(char *)pattern};
    if (has_glob_chars(pattern)) {
        int gr = glob(pattern, 0, glob_err, &g);
        if (gr == 0 && g.gl_pathc > 0) {
            use_glob = 1;
            paths = g.gl_pathv;
            npaths = g.gl_pathc;
        } else if (gr == GLOB_NOSPACE) {
            rc = zt_fail(st, ZT_ENOMEM, "%s: out of memory expanding the pattern", pattern);
        } else {
            globfree(&g);
            memset(&g, 0, sizeof g);
            rc = zt_fail(st, ZT_EIO, "%s: no files match this pattern (empty glob)", pattern);
        }
    } else {
        paths = single;
        npaths = 1;
    }
    if (rc != ZT_OK) { free(d); return rc; }
    if (npaths > 0x7fffffff) npaths = 0x7fffffff;
    d->files = calloc(npaths, sizeof *d->files);
    d->first = calloc(npaths + 1, sizeof *d->first);
    if (!d->files || !d->first) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto fail; }
    uint64_t n = 0;
    for (size_t i = 0; i < npaths; ++i) {
        zt_token_file *f;
        if ((rc = zt_tokens_open(paths[i], vocab, &f, st)) != ZT_OK) goto fail;
        d->files[d->nfiles++] = f;
        if (i > 0 && (f->format == ZT_FMT_SFT) != d->masked) {
            rc = zt_fail(st, ZT_EDATA, "%s: %s, but %s %s: a dataset cannot mix SFT window files and "
                         "plain token files", f->path, d->masked ? "a plain token file" : "an SFT window file",
                         d->files[0]->path, d->masked ? "is an SFT window file" : "is a plain token file");
            goto fail;
        }
        d->masked = f->format == ZT_FMT_SFT;
        if (d->masked && T == 0) {
            rc = zt_fail(st, ZT_EDATA, "%s: an SFT window file (windows with a loss mask) is not a plain token "
                         "stream; ztrain prep --tokens-in takes llm.c shards and HDF5 token files", f->path);
            goto fail;
        }
        if (d->masked && f->window != T + 1) {
            rc = zt_fail(st, ZT_EDATA, "%s: SFT windows of %d tokens were packed for seq_len %d, but the run "
                         "trains with seq_len %d (train with --seq-len %d, or re-run ztrain prep --sft "
                         "--seq-len %d)", f->path, f->window, f->window - 1, T, f->window - 1, T);
            goto fail;
        }
        if (f->ntok < (size_t)T + 1) {
            rc = zt_fail(st, ZT_EDATA, "%s: %zu tokens, shorter than one sequence of %d (+1) tokens",
                         f->path, f->ntok, T);
            goto fail;
        }
        d->first[i] = n;
        n += T > 0 ? f->ntok / ((uint64_t)T + 1) : 0;
    }
    d->first[npaths] = n;
    d->nsamples = n;
    if (use_glob) globfree(&g);
    *out = d;
    return ZT_OK;
fail:
    if (use_glob) globfree(&g);
    zt_dataset_close(d);
    return rc;
}

void zt_dataset_close(zt_dataset *d) {
    if (!d) return;
    for (int i = 0; i < d->nfiles; ++i) zt_tokens_close(d->files[i]);
    free(d->files);
    free(d->first);
    free(d);
}

/* The file holding window `sample` (last f with first[f] <= sample) and
 * the window's index in it. */
static int locate(const zt_dataset *d, uint64_t sample, uint64_t *w, zt_status *st) {
    if (sample >= d->nsamples)
        return -1 - zt_fail(st, ZT_EINTERNAL, "%s: sample %llu out of range (%llu samples)", d->pattern,
                            (unsigned long long)sample, (unsigned long long)d->nsamples);
    int lo = 0, hi = d->nfiles - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (d->first[mid] <= sample) lo = mid;
        else hi = mid - 1;
    }
    *w = sample - d->first[lo];
    return lo;
}

int zt_dataset_read(const zt_dataset *d, uint64_t sample, uint32_t *tok, zt_status *st) {
    uint64_t w;
    int f = locate(d, sample, &w, st);
    if (f < 0) return -1 - f;
    if (d->masked) {
        ZT_TRY(zt_tokens_acquire(d->files[f], st));
        int rc = zt_sft_read_window(d->files[f], w, d->vocab, tok, st);
        zt_tokens_release(d->files[f]);
        return rc;
    }
    return zt_tokens_read(d->files[f], w * ((uint64_t)d->T + 1), (size_t)d->T + 1, d->vocab, tok, st);
}

int zt_dataset_count(const zt_dataset *d, uint64_t sample, uint32_t *count, zt_status *st) {
    uint64_t w;
    int f = locate(d, sample, &w, st);
    if (f < 0) return -1 - f;
    if (!d->masked) { *count = (uint32_t)d->T; return ZT_OK; }
    ZT_TRY(zt_tokens_acquire(d->files[f], st));
    int rc = zt_sft_window_count(d->files[f], w, count, st);
    zt_tokens_release(d->files[f]);
    return rc;
}
