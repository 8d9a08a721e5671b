/* prep.c -- text (byte-level tokens, or a Hugging Face tokenizer) or existing
 * token files -> train/val token files (llm.c shards or HDF5), optionally split
 * into shards of a given size.  Streams the input through a bounded buffer (with
 * a tokenizer: batches of documents encoded in parallel, spooled to an unlinked
 * temporary file); every output is written to a temporary file and renamed into
 * place only when all of them were written successfully. */
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "data.h"
#include "fileio.h"
#include "internal.h"
#include "tokenizer.h"
#include "tokens.h"
#ifdef _OPENMP
#include <omp.h>
static int omp_default_threads(void) { return omp_get_max_threads(); }
#else
static int omp_default_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

#define CHUNK ((size_t)1 << 18)

void zt_prep_path(char *buf, size_t n, const char *prefix, const char *split, int shard, int format) {
    const char *ext = format == ZT_FMT_H5 ? "h5" : "bin";
    if (shard < 0) snprintf(buf, n, "%s_%s.%s", prefix, split, ext);
    else snprintf(buf, n, "%s_%s_%06d.%s", prefix, split, shard, ext);
}

/* The input as a stream of tokens: a byte file or a token dataset. */
typedef struct in_stream {
    FILE *fp;                 /* text */
    FILE *spool;              /* tokenizer output: uint32 tokens */
    zt_dataset *ds;           /* tokens_in: files read in order */
    int file;
    size_t pos;               /* token position within ds->files[file] */
    const char *name;
    unsigned char *bytes;
    uint64_t written, to_write;   /* tokens (progress) */
} in_stream;

static int in_next(in_stream *in, uint32_t *buf, size_t want, size_t *got, zt_status *st) {
    *got = 0;
    if (in->spool) {
        size_t n = fread(buf, sizeof *buf, want, in->spool);
        if (n < want && ferror(in->spool)) return zt_fail(st, ZT_EIO, "%s: read error (token spool)", in->name);
        *got = n;
        return ZT_OK;
    }
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
                       int vocab, int elsize, uint32_t *buf, zt_tok_writer **writers, int *nw, int *nfiles,
                       zt_status *st) {
    size_t per = o->shard_tokens > 0 ? o->shard_tokens : total;
    int shard = 0;
    *nfiles = 0;
    for (size_t done = 0; done < total; ++shard) {
        size_t n = total - done < per ? total - done : per;
        char path[1200];
        zt_prep_path(path, sizeof path, o->prefix, split, o->shard_tokens > 0 ? shard : -1, o->format);
        zt_tok_writer *w;
        ZT_TRY(zt_writer_open(path, o->format, elsize, n, vocab, &w, st));
        writers[(*nw)++] = w;
        for (size_t k = 0; k < n;) {
            size_t want = n - k < CHUNK ? n - k : CHUNK, got;
            ZT_TRY(in_next(in, buf, want, &got, st));
            if (got == 0)
                return zt_fail(st, ZT_EIO, "%s: input ended early (did it change while being read?)", in->name);
            ZT_TRY(zt_writer_put(w, buf, got, st));
            k += got;
            in->written += got;
            zt_progress_report(&o->progress, "prep: writing", in->written, in->to_write, "tokens", 0);
        }
        ZT_TRY(zt_writer_close(w, st));
        done += n;
        (*nfiles)++;
    }
    return ZT_OK;
}

/* ---------------------------------------------------------------- tokenizer input */
#define BATCH_BYTES ((size_t)32 << 20)   /* text per parallel batch */
#define BATCH_DOCS 8192

typedef struct doc_batch {
    char **text; size_t *len; long *line; const char **file;
    int n, cap; size_t bytes;
    uint64_t src;                         /* input file bytes these documents came from */
} doc_batch;

typedef struct tok_run {
    const zt_prep_opts *o;
    zt_tokenizer *tk;
    FILE *spool;
    size_t ntok, ndocs;
    int sep;                              /* the separator id, -1 for none */
    uint64_t in_total, in_done;           /* input file bytes: all, encoded (progress) */
    uint64_t lines, docs;                 /* JSON Lines lines read, documents read (progress) */
} tok_run;

/* The progress label with the counts so far: "prep: tokenizing (12 lines,
 * 10 documents, 5120 tokens)" (the lines of JSON Lines input only). */
static const char *tok_label(const tok_run *r, uint64_t tokens, char *buf, size_t n) {
    char l[48] = "";
    if (r->lines) snprintf(l, sizeof l, "%llu line%s, ", (unsigned long long)r->lines, r->lines == 1 ? "" : "s");
    snprintf(buf, n, "prep: tokenizing (%s%llu document%s, %llu token%s)", l, (unsigned long long)r->docs,
             r->docs == 1 ? "" : "s", (unsigned long long)tokens, tokens == 1 ? "" : "s");
    return buf;
}

static void batch_clear(doc_batch *b) {
    for (int i = 0; i < b->n; ++i) free(b->text[i]);
    b->n = 0; b->bytes = 0; b->src = 0;
}

static int batch_add(doc_batch *b, char *text, size_t len, const char *file, long line, zt_status *st) {
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 256;
        char **t = realloc(b->text, (size_t)cap * sizeof *t);
        if (t) b->text = t;
        size_t *l = realloc(b->len, (size_t)cap * sizeof *l);
        if (l) b->len = l;
        long *ln = realloc(b->line, (size_t)cap * sizeof *ln);
        if (ln) b->line = ln;
        const char **f = realloc(b->file, (size_t)cap * sizeof *f);
        if (f) b->file = f;
        if (!t || !l || !ln || !f) { free(text); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
        b->cap = cap;
    }
    b->text[b->n] = text; b->len[b->n] = len; b->line[b->n] = line; b->file[b->n] = file;
    b->n++;
    b->bytes += len;
    return ZT_OK;
}

/* Encode a batch in parallel, then append it to the spool in document order. */
static int batch_flush(tok_run *r, doc_batch *b, zt_status *st) {
    if (b->n == 0) return ZT_OK;
    int32_t **ids = calloc((size_t)b->n, sizeof *ids);
    size_t *nid = calloc((size_t)b->n, sizeof *nid);
    int *rcs = calloc((size_t)b->n, sizeof *rcs);
    int rc = ZT_OK;
    if (!ids || !nid || !rcs) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) {
        const int n = b->n;
        const int nth = r->o->threads > 0 ? r->o->threads : 0;
        /* progress: the input bytes behind the text encoded so far, told by
         * the first thread only (the callback is not thread-safe) */
        const double scale = b->bytes ? (double)b->src / (double)b->bytes : 0;
        uint64_t enc = 0, ntok = r->ntok;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth > 0 ? nth : omp_default_threads())
        for (int i = 0; i < n; ++i) {
            rcs[i] = zt_tok_encode(r->tk, b->text[i], b->len[i], 0, &ids[i], &nid[i], NULL);
            uint64_t e, k, add = nid[i] + (r->sep >= 0);
#pragma omp atomic capture
            e = enc += b->len[i];
#pragma omp atomic capture
            k = ntok += add;
            if (omp_get_thread_num() == 0) {
                char label[160];
                zt_progress_report(&r->o->progress, tok_label(r, k, label, sizeof label),
                                   r->in_done + (uint64_t)((double)e * scale), r->in_total, "B", 0);
            }
        }
        r->in_done += b->src;
    }
    for (int i = 0; i < b->n && rc == ZT_OK; ++i) {
        if (rcs[i] != ZT_OK) {
            /* again, serially, for the message (the first failing document, whatever the threads) */
            int32_t *x = NULL; size_t nx;
            rc = zt_tok_encode(r->tk, b->text[i], b->len[i], 0, &x, &nx, st);
            free(x);
            if (rc == ZT_OK) rc = zt_fail(st, ZT_EINTERNAL, "encoding failed once and then succeeded");
            if (b->line[i] > 0) zt_fail_prefix(st, "%s:%ld", b->file[i], b->line[i]);
            else zt_fail_prefix(st, "%s", b->file[i]);
            break;
        }
        uint32_t sep = (uint32_t)r->sep;
        if (r->sep >= 0 && r->o->doc_sep == ZT_DOCSEP_BOS && fwrite(&sep, 4, 1, r->spool) != 1) rc = ZT_EIO;
        if (rc == ZT_OK && nid[i] && fwrite(ids[i], 4, nid[i], r->spool) != nid[i]) rc = ZT_EIO;
        if (rc == ZT_OK && r->sep >= 0 && r->o->doc_sep == ZT_DOCSEP_EOS && fwrite(&sep, 4, 1, r->spool) != 1) rc = ZT_EIO;
        if (rc == ZT_EIO) { rc = zt_fail(st, ZT_EIO, "%s: cannot write the token spool: %s", r->o->prefix, strerror(errno)); break; }
        r->ntok += nid[i] + (r->sep >= 0);
        r->ndocs++;
    }
    for (int i = 0; ids && i < b->n; ++i) free(ids[i]);
    free(ids); free(nid); free(rcs);
    batch_clear(b);
    if (rc == ZT_OK) {   /* the batch written (whichever threads encoded it) */
        char label[160];
        zt_progress_report(&r->o->progress, tok_label(r, r->ntok, label, sizeof label), r->in_done, r->in_total,
                           "B", 0);
    }
    return rc;
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

static int read_jsonl(tok_run *r, doc_batch *b, const char *path, zt_status *st) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", path, strerror(errno));
    zt_lines lr;
    zt_lines_init(&lr, fp, path, r->o->max_line_bytes);
    size_t n;
    int rc;
    while ((rc = zt_lines_next(&lr, &n, st)) == ZT_OK && n > 0) {
        const char *line = lr.buf;
        const unsigned long long ln = (unsigned long long)lr.lineno;
        r->lines++;
        b->src += (uint64_t)n;
        if (is_blank(line, n)) continue;
        json_error_t je;
        json_t *j = json_loadb(line, n, JSON_ALLOW_NUL, &je);
        json_t *t = json_is_object(j) ? json_object_get(j, "text") : NULL;
        if (!j) {
            char why[200];
            rc = zt_fail(st, ZT_EDATA, "%s:%llu: not valid JSON (column %d: %s)", path, ln, je.column,
                         zt_json_error_text(je.text, why, sizeof why));
        } else if (!json_is_string(t)) {
            rc = zt_fail(st, ZT_EDATA, "%s:%llu: no \"text\" string in this JSON line", path, ln);
        } else {
            size_t len = json_string_length(t);
            char *d = malloc(len + 1);
            if (!d) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
            else {
                memcpy(d, json_string_value(t), len + 1);
                rc = batch_add(b, d, len, path, (long)ln, st);
                if (rc == ZT_OK) r->docs++;
            }
        }
        json_decref(j);
        if (rc == ZT_OK && (b->bytes >= BATCH_BYTES || b->n >= BATCH_DOCS)) rc = batch_flush(r, b, st);
        if (rc != ZT_OK) break;
    }
    zt_lines_free(&lr);
    fclose(fp);
    return rc;
}

static int read_text(tok_run *r, doc_batch *b, const char *path, zt_status *st) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) { fclose(fp); return zt_fail(st, ZT_EIO, "%s: not a regular file", path); }
    size_t n = (size_t)sb.st_size;
    char *d = malloc(n + 1);
    if (!d) { fclose(fp); return zt_fail(st, ZT_ENOMEM, "%s: out of memory for %zu bytes", path, n); }
    size_t got = fread(d, 1, n, fp);
    int bad = got != n || ferror(fp);
    fclose(fp);
    if (bad) { free(d); return zt_fail(st, ZT_EIO, "%s: read error (did it change while being read?)", path); }
    d[n] = 0;
    b->src += n;
    ZT_TRY(batch_add(b, d, n, path, 0, st));
    r->docs++;
    return b->bytes >= BATCH_BYTES || b->n >= BATCH_DOCS ? batch_flush(r, b, st) : ZT_OK;
}

static int has_ext(const char *p, const char *ext) {
    size_t n = strlen(p), e = strlen(ext);
    return n > e && !strcmp(p + n - e, ext);
}

/* Tokenize every input document into r->spool. */
static int tokenize_inputs(tok_run *r, zt_status *st) {
    const zt_prep_opts *o = r->o;
    glob_t g;
    memset(&g, 0, sizeof g);
    int globbed = strpbrk(o->input, "*?[") != NULL;
    if (globbed) {
        int grc = glob(o->input, 0, NULL, &g);
        if (grc == GLOB_NOMATCH) return zt_fail(st, ZT_EIO, "%s: no file matches", o->input);
        if (grc != 0) return zt_fail(st, ZT_EIO, "%s: cannot expand the pattern", o->input);
    }
    size_t nf = globbed ? g.gl_pathc : 1;
    for (size_t i = 0; i < nf; ++i) {
        struct stat sb;
        if (stat(globbed ? g.gl_pathv[i] : o->input, &sb) == 0) r->in_total += (uint64_t)sb.st_size;
    }
    doc_batch b;
    memset(&b, 0, sizeof b);
    int rc = ZT_OK;
    for (size_t i = 0; i < nf && rc == ZT_OK; ++i) {
        const char *path = globbed ? g.gl_pathv[i] : o->input;
        int jl = o->jsonl == 1 ? 1 : o->jsonl == 2 ? 0 : has_ext(path, ".jsonl");
        rc = jl ? read_jsonl(r, &b, path, st) : read_text(r, &b, path, st);
    }
    if (rc == ZT_OK) rc = batch_flush(r, &b, st);
    char label[160];
    if (rc == ZT_OK)
        zt_progress_report(&o->progress, tok_label(r, r->ntok, label, sizeof label), r->in_done, r->in_total, "B", 1);
    batch_clear(&b);
    free(b.text); free(b.len); free(b.line); free(b.file);
    if (globbed) globfree(&g);
    return rc;
}

/* mkdir -p of the directory part of prefix (tokens.h) */
int zt_prep_make_dirs(const char *prefix, char *created, size_t n, zt_status *st) {
    char d[1200], bad[1200];
    created[0] = '\0';
    snprintf(d, sizeof d, "%s", prefix);
    char *sl = strrchr(d, '/');
    if (!sl || sl == d) return ZT_OK;
    *sl = 0;
    if (zt_mkdirs(d, created, n, bad, sizeof bad) != 0)
        return errno == ENOTDIR ? zt_fail(st, ZT_EIO, "%s: exists and is not a directory", bad)
                                : zt_fail(st, ZT_EIO, "%s: cannot create the output directory: %s", bad,
                                          strerror(errno));
    return ZT_OK;
}

void zt_prep_remove_dirs(const char *prefix, const char *created) {
    char d[1200];
    snprintf(d, sizeof d, "%s", prefix);
    char *sl = strrchr(d, '/');
    if (!sl || sl == d) return;
    *sl = 0;
    zt_rmdirs_created(d, created);
}

int zt_prep(const zt_prep_opts *o, zt_prep_result *res, zt_status *st) {
    if (res) memset(res, 0, sizeof *res);
    if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
        return zt_fail(st, ZT_EINVAL, "val fraction must be in [0, 1), got %g", o->val_fraction);
    if (!o->prefix || !*o->prefix) return zt_fail(st, ZT_EINVAL, "no output prefix");
    if ((!o->input) == (!o->tokens_in)) return zt_fail(st, ZT_EINVAL, "give exactly one input (text or tokens)");
    if (o->tokenizer && !o->input) return zt_fail(st, ZT_EINVAL, "a tokenizer needs a text input");
    if (!o->tokenizer && o->jsonl == 1) return zt_fail(st, ZT_EINVAL, "JSON Lines input needs a tokenizer");
    if (o->format != ZT_FMT_BIN && o->format != ZT_FMT_H5)
        return zt_fail(st, ZT_EINVAL, "unknown output format %d", o->format);
    if (o->doc_sep < ZT_DOCSEP_EOS || o->doc_sep > ZT_DOCSEP_NONE)
        return zt_fail(st, ZT_EINVAL, "unknown document separator %d", o->doc_sep);
    if (o->elsize != 0 && o->elsize != 2 && o->elsize != 4)
        return zt_fail(st, ZT_EINVAL, "token width must be 2 or 4 bytes, got %d", o->elsize);
    if (o->shard_tokens > 0x7fffffff && o->format == ZT_FMT_BIN)
        return zt_fail(st, ZT_EINVAL, "shard size %zu exceeds an llm.c shard's limit of 2147483647 tokens",
                       o->shard_tokens);
    in_stream in;
    memset(&in, 0, sizeof in);
    size_t total = 0, ndocs = 0;
    char made[1200] = "";   /* the directories this prep created */
    int vocab = 256, rc = ZT_OK;
    int elsize = o->elsize ? o->elsize : 2;
    if (o->tokenizer) {
        zt_tokenizer *tk;
        ZT_TRY(zt_tok_load(o->tokenizer, &tk, st));
        vocab = zt_tok_vocab_size(tk);
        if (!o->elsize) elsize = vocab > 65536 ? 4 : 2;
        tok_run r = {o, tk, NULL, 0, 0, -1, 0, 0, 0, 0};
        if (elsize == 2 && vocab > 65536)
            rc = zt_fail(st, ZT_EINVAL, "%s: a vocabulary of %d does not fit uint16 tokens (use uint32)", o->tokenizer, vocab);
        if (rc == ZT_OK && o->doc_sep != ZT_DOCSEP_NONE) {
            r.sep = o->doc_sep == ZT_DOCSEP_EOS ? zt_tok_eos_id(tk) : zt_tok_bos_id(tk);
            if (r.sep < 0)
                rc = zt_fail(st, ZT_EINVAL, "%s: the tokenizer defines no %s token (name it in a tokenizer_config.json "
                             "beside tokenizer.json, or choose another document separator)", o->tokenizer,
                             o->doc_sep == ZT_DOCSEP_EOS ? "EOS" : "BOS");
        }
        if (rc == ZT_OK) rc = zt_prep_make_dirs(o->prefix, made, sizeof made, st);
        if (rc == ZT_OK) {
            /* the spool lives beside the outputs, unlinked at once: nothing is left behind */
            char sp[1200];
            snprintf(sp, sizeof sp, "%s.spool.%d", o->prefix, (int)getpid());
            r.spool = fopen(sp, "w+b");
            if (!r.spool) rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", sp, strerror(errno));
            else unlink(sp);
        }
        if (rc == ZT_OK) rc = tokenize_inputs(&r, st);
        zt_tok_free(tk);
        if (rc == ZT_OK && r.ntok < 2)
            rc = zt_fail(st, ZT_EDATA, "%s: the input gave %zu tokens; need at least 2", o->input, r.ntok);
        if (rc == ZT_OK && fflush(r.spool) != 0) rc = zt_fail(st, ZT_EIO, "token spool: write failed: %s", strerror(errno));
        if (rc == ZT_OK) rewind(r.spool);
        if (rc != ZT_OK) {
            if (r.spool) fclose(r.spool);
            zt_prep_remove_dirs(o->prefix, made);
            return rc;
        }
        in.spool = r.spool;
        in.name = o->input;
        total = r.ntok;
        ndocs = r.ndocs;
    } else if (o->input) {
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
            if (in.ds->files[i]->elsize == 4 && !o->elsize) elsize = 4;
        }
    }
    if (rc == ZT_OK && !o->tokenizer) rc = zt_prep_make_dirs(o->prefix, made, sizeof made, st);
    size_t nv = (size_t)((double)total * o->val_fraction);
    size_t nt = total - nv;
    uint32_t *buf = malloc(CHUNK * sizeof *buf);
    size_t maxw = 2 + (o->shard_tokens > 0 ? total / o->shard_tokens + 2 : 0);
    zt_tok_writer **writers = calloc(maxw, sizeof *writers);
    int nw = 0, tf = 0, vf = 0;
    if (rc == ZT_OK && (!buf || !writers)) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    in.to_write = total;
    if (rc == ZT_OK) rc = write_split(&in, o, "train", nt, vocab, elsize, buf, writers, &nw, &tf, st);
    if (rc == ZT_OK && nv > 0) rc = write_split(&in, o, "val", nv, vocab, elsize, buf, writers, &nw, &vf, st);
    if (rc == ZT_OK) zt_progress_report(&o->progress, "prep: writing", in.written, in.to_write, "tokens", 1);
    for (int i = 0; i < nw && rc == ZT_OK; ++i) rc = zt_writer_commit(writers[i], st);
    for (int i = 0; i < nw; ++i) zt_writer_free(writers[i]);
    free(writers);
    free(buf);
    free(in.bytes);
    if (in.fp) fclose(in.fp);
    if (in.spool) fclose(in.spool);
    zt_dataset_close(in.ds);
    if (rc != ZT_OK) zt_prep_remove_dirs(o->prefix, made);   /* the writers removed their files */
    if (rc == ZT_OK && res) {
        res->ntrain = nt;
        res->nval = nv;
        res->train_files = tf;
        res->val_files = vf;
        res->ndocs = ndocs;
        res->vocab = vocab;
        res->elsize = elsize;
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
