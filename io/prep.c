/* prep.c -- text (byte-level tokens) or existing token files -> train/val
 * token files (llm.c shards or HDF5), optionally split into shards of a
 * given size.  Streams the input through a bounded buffer; every output is
 * written to a temporary file and renamed into place only when all of them
 * were written successfully. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "data.h"
#include "internal.h"
#include "tokens.h"

#define CHUNK ((size_t)1 << 18)

void zt_prep_path(char *buf, size_t n, const char *prefix, const char *split, int shard, int format) {
    const char *ext = format == ZT_FMT_H5 ? "h5" : "bin";
    if (shard < 0) snprintf(buf, n, "%s_%s.%s", prefix, split, ext);
    else snprintf(buf, n, "%s_%s_%06d.%s", prefix, split, shard, ext);
}

/* The input as a stream of tokens: a byte file or a token dataset. */
typedef struct in_stream {
    FILE *fp;                 /* text */
    zt_dataset *ds;           /* tokens_in: files read in order */
    int file;
    size_t pos;               /* token position within ds->files[file] */
    const char *name;
    unsigned char *bytes;
} in_stream;

static int in_next(in_stream *in, uint32_t *buf, size_t want, size_t *got, zt_status *st) {
    *got = 0;
    if (in->fp) {
        size_t n = fread(in->bytes, 1, want, in->fp);
        if (n < want && ferror(in->fp)) return zt_fail(st, ZT_EIO, "%s: read error", in->name);
        for (size_t i = 0; i < n; ++i) buf[i] = in->bytes[i];
        *got = n;
        return ZT_OK;
    }
    while (*got < want && in->file < in->ds->nfiles) {
        zt_token_file *f = in->ds->files[in->file];
        size_t m = f->ntok - in->pos;
        if (m > want - *got) m = want - *got;
        ZT_TRY(zt_tokens_read(f, in->pos, m, 0, buf + *got, st));
        *got += m;
        in->pos += m;
        if (in->pos == f->ntok) { in->file++; in->pos = 0; }
    }
    return ZT_OK;
}

/* Write `total` tokens from the stream into files of one split. */
static int write_split(in_stream *in, const zt_prep_opts *o, const char *split, size_t total,
                       int vocab, uint32_t *buf, zt_tok_writer **writers, int *nw, int *nfiles,
                       zt_status *st) {
    size_t per = o->shard_tokens > 0 ? o->shard_tokens : total;
    int shard = 0;
    *nfiles = 0;
    for (size_t done = 0; done < total; ++shard) {
        size_t n = total - done < per ? total - done : per;
        char path[1200];
        zt_prep_path(path, sizeof path, o->prefix, split, o->shard_tokens > 0 ? shard : -1, o->format);
        zt_tok_writer *w;
        ZT_TRY(zt_writer_open(path, o->format, o->format == ZT_FMT_H5 ? o->elsize : 2, n, vocab, &w, st));
        writers[(*nw)++] = w;
        for (size_t k = 0; k < n;) {
            size_t want = n - k < CHUNK ? n - k : CHUNK, got;
            ZT_TRY(in_next(in, buf, want, &got, st));
            if (got == 0)
                return zt_fail(st, ZT_EIO, "%s: input ended early (did it change while being read?)", in->name);
            ZT_TRY(zt_writer_put(w, buf, got, st));
            k += got;
        }
        ZT_TRY(zt_writer_close(w, st));
        done += n;
        (*nfiles)++;
    }
    return ZT_OK;
}

int zt_prep(const zt_prep_opts *o, zt_prep_result *res, zt_status *st) {
    if (res) memset(res, 0, sizeof *res);
    if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
        return zt_fail(st, ZT_EINVAL, "val fraction must be in [0, 1), got %g", o->val_fraction);
    if (!o->prefix || !*o->prefix) return zt_fail(st, ZT_EINVAL, "no output prefix");
    if ((!o->input) == (!o->tokens_in)) return zt_fail(st, ZT_EINVAL, "give exactly one input (text or tokens)");
    if (o->format != ZT_FMT_BIN && o->format != ZT_FMT_H5)
        return zt_fail(st, ZT_EINVAL, "unknown output format %d", o->format);
    if (o->format == ZT_FMT_BIN && o->elsize == 4)
        return zt_fail(st, ZT_EINVAL, "llm.c shards hold uint16 tokens only (use HDF5 for uint32)");
    if (o->elsize != 0 && o->elsize != 2 && o->elsize != 4)
        return zt_fail(st, ZT_EINVAL, "token width must be 2 or 4 bytes, got %d", o->elsize);
    if (o->shard_tokens > 0x7fffffff && o->format == ZT_FMT_BIN)
        return zt_fail(st, ZT_EINVAL, "shard size %zu exceeds an llm.c shard's limit of 2147483647 tokens",
                       o->shard_tokens);
    in_stream in;
    memset(&in, 0, sizeof in);
    size_t total = 0;
    int vocab = 256, rc = ZT_OK;
    if (o->input) {
        in.name = o->input;
        in.fp = fopen(o->input, "rb");
        if (!in.fp) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", o->input, strerror(errno));
        struct stat sb;
        if (fstat(fileno(in.fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
            fclose(in.fp);
            return zt_fail(st, ZT_EIO, "%s: not a regular file", o->input);
        }
        total = (size_t)sb.st_size;
        if (total < 2) {
            fclose(in.fp);
            return zt_fail(st, ZT_EDATA, "%s: input has %zu bytes; need at least 2", o->input, total);
        }
        in.bytes = malloc(CHUNK);
        if (!in.bytes) { fclose(in.fp); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    } else {
        in.name = o->tokens_in;
        ZT_TRY(zt_dataset_open(o->tokens_in, 0, 0, &in.ds, st));
        vocab = 0;
        for (int i = 0; i < in.ds->nfiles; ++i) {
            total += in.ds->files[i]->ntok;
            if (in.ds->files[i]->vocab_attr > vocab) vocab = in.ds->files[i]->vocab_attr;
        }
    }
    size_t nv = (size_t)((double)total * o->val_fraction);
    size_t nt = total - nv;
    uint32_t *buf = malloc(CHUNK * sizeof *buf);
    size_t maxw = 2 + (o->shard_tokens > 0 ? total / o->shard_tokens + 2 : 0);
    zt_tok_writer **writers = calloc(maxw, sizeof *writers);
    int nw = 0, tf = 0, vf = 0;
    if (!buf || !writers) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) rc = write_split(&in, o, "train", nt, vocab, buf, writers, &nw, &tf, st);
    if (rc == ZT_OK && nv > 0) rc = write_split(&in, o, "val", nv, vocab, buf, writers, &nw, &vf, st);
    for (int i = 0; i < nw && rc == ZT_OK; ++i) rc = zt_writer_commit(writers[i], st);
    for (int i = 0; i < nw; ++i) zt_writer_free(writers[i]);
    free(writers);
    free(buf);
    free(in.bytes);
    if (in.fp) fclose(in.fp);
    zt_dataset_close(in.ds);
    if (rc == ZT_OK && res) {
        res->ntrain = nt;
        res->nval = nv;
        res->train_files = tf;
        res->val_files = vf;
    }
    return rc;
}

int zt_prep_text(const char *input, const char *prefix, double val_fraction,
                 size_t *ntrain, size_t *nval, zt_status *st) {
    zt_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = input;
    o.prefix = prefix;
    o.val_fraction = val_fraction;
    zt_prep_result r;
    ZT_TRY(zt_prep(&o, &r, st));
    if (ntrain) *ntrain = r.ntrain;
    if (nval) *nval = r.nval;
    return ZT_OK;
}
