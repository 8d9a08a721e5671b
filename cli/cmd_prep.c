/* cmd_prep.c -- `ztrain prep`: text -> token files (llm.c shards or HDF5) with
 * byte-level tokens or a Hugging Face tokenizer, optionally split into shards;
 * or re-shard existing token files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "tokens.h"

static void help(void) {
    printf("usage: ztrain prep (--input TEXT | --tokens-in FILES) --output PREFIX\n"
           "                   [--tokenizer PATH [--jsonl | --text] [--doc-sep eos|bos|none]\n"
           "                    [--threads N]]\n"
           "                   [--val-fraction F] [--format bin|hdf5] [--shard-tokens N]\n"
           "                   [--dtype uint16|uint32]\n"
           "Tokenizes TEXT with byte-level tokens (vocab 256), or with a Hugging Face\n"
           "tokenizer.json (--tokenizer), or reads existing token files (a path or a quoted\n"
           "glob: llm.c shards and/or HDF5), and writes the first 1-F of the tokens to\n"
           "PREFIX_train.EXT and the last F (default 0.1 for text, 0 for --tokens-in) to\n"
           "PREFIX_val.EXT.  Missing directories in PREFIX are created.\n"
           "  --tokenizer PATH  tokenizer.json, or a directory holding it (and optionally\n"
           "                  tokenizer_config.json naming bos_token/eos_token); TEXT may\n"
           "                  then be a quoted glob.  Each plain text file is one document;\n"
           "                  JSON Lines files (*.jsonl, or --jsonl) hold one document per\n"
           "                  line in its \"text\" string.  --text: plain text whatever the name\n"
           "  --doc-sep eos   the tokenizer's EOS after each document (default);\n"
           "                  bos: its BOS before each document; none: no separator\n"
           "  --threads N     encoding threads (default: OpenMP's, OMP_NUM_THREADS)\n"
           "  --format bin    llm.c token shards (default; EXT = bin): uint16 (magic\n"
           "                  20240520) for vocabularies up to 65536, else llm.c's Llama-3\n"
           "                  layout, uint32 (magic 20240801, version 7)\n"
           "  --format hdf5   HDF5 files with a 1-D dataset /tokens (EXT = h5)\n"
           "  --shard-tokens N  split each part into files of at most N tokens:\n"
           "                  PREFIX_train_000000.EXT, PREFIX_train_000001.EXT, ...\n"
           "                  (train with --train 'PREFIX_train_*.EXT')\n"
           "  --dtype uint32  token width (default: uint16, or uint32 when the vocabulary\n"
           "                  needs it)\n"
           "Nothing is written unless the whole input was converted.  See docs/data.md and\n"
           "docs/tokenizers.md.\n");
}

int cmd_prep(int argc, char **argv) {
    const char *input = NULL, *tokens_in = NULL, *output = NULL, *vf = NULL, *fmt = "bin",
               *shard = NULL, *dtype = NULL, *tokenizer = NULL, *docsep = NULL, *threads = NULL, *v;
    int jsonl = 0;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return ZT_EXIT_OK; }
        if (!strcmp(argv[i], "--jsonl")) { jsonl = 1; continue; }
        if (!strcmp(argv[i], "--text")) { jsonl = 2; continue; }
        if ((r = cli_opt(argc, argv, &i, "input", &v))) { if (r < 0) goto missing; input = v; }
        else if ((r = cli_opt(argc, argv, &i, "tokenizer", &v))) { if (r < 0) goto missing; tokenizer = v; }
        else if ((r = cli_opt(argc, argv, &i, "doc-sep", &v))) { if (r < 0) goto missing; docsep = v; }
        else if ((r = cli_opt(argc, argv, &i, "threads", &v))) { if (r < 0) goto missing; threads = v; }
        else if ((r = cli_opt(argc, argv, &i, "tokens-in", &v))) { if (r < 0) goto missing; tokens_in = v; }
        else if ((r = cli_opt(argc, argv, &i, "output", &v))) { if (r < 0) goto missing; output = v; }
        else if ((r = cli_opt(argc, argv, &i, "val-fraction", &v))) { if (r < 0) goto missing; vf = v; }
        else if ((r = cli_opt(argc, argv, &i, "format", &v))) { if (r < 0) goto missing; fmt = v; }
        else if ((r = cli_opt(argc, argv, &i, "shard-tokens", &v))) { if (r < 0) goto missing; shard = v; }
        else if ((r = cli_opt(argc, argv, &i, "dtype", &v))) { if (r < 0) goto missing; dtype = v; }
        else { cli_error("prep: unknown option '%s'", argv[i]); return ZT_EXIT_USAGE; }
        continue;
    missing:
        cli_error("prep: option '%s' needs a value", argv[i]);
        return ZT_EXIT_USAGE;
    }
    if ((!input && !tokens_in) || !output) {
        cli_error("prep: --input (or --tokens-in) and --output are required");
        return ZT_EXIT_USAGE;
    }
    if (input && tokens_in) { cli_error("prep: give either --input or --tokens-in, not both"); return ZT_EXIT_USAGE; }
    if (!tokenizer && (jsonl || docsep || threads)) {
        cli_error("prep: --jsonl, --text, --doc-sep and --threads need --tokenizer");
        return ZT_EXIT_USAGE;
    }
    if (tokenizer && tokens_in) { cli_error("prep: --tokenizer needs --input (text), not --tokens-in"); return ZT_EXIT_USAGE; }
    zt_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = input;
    o.tokenizer = tokenizer;
    o.jsonl = jsonl;
    if (docsep) {
        if (!strcmp(docsep, "eos")) o.doc_sep = ZT_DOCSEP_EOS;
        else if (!strcmp(docsep, "bos")) o.doc_sep = ZT_DOCSEP_BOS;
        else if (!strcmp(docsep, "none")) o.doc_sep = ZT_DOCSEP_NONE;
        else { cli_error("prep: --doc-sep must be eos, bos or none, got '%s'", docsep); return ZT_EXIT_USAGE; }
    }
    if (threads) {
        char *e;
        long t = strtol(threads, &e, 10);
        if (*e || e == threads || t < 1 || t > 4096) {
            cli_error("prep: --threads must be a positive integer, got '%s'", threads);
            return ZT_EXIT_USAGE;
        }
        o.threads = (int)t;
    }
    o.tokens_in = tokens_in;
    o.prefix = output;
    char *end;
    if (!vf) vf = input ? "0.1" : "0";
    o.val_fraction = strtod(vf, &end);
    if (*end || end == vf) { cli_error("prep: --val-fraction '%s' is not a number", vf); return ZT_EXIT_USAGE; }
    if (!strcmp(fmt, "bin")) o.format = ZT_FMT_BIN;
    else if (!strcmp(fmt, "hdf5") || !strcmp(fmt, "h5")) o.format = ZT_FMT_H5;
    else { cli_error("prep: --format must be bin or hdf5, got '%s'", fmt); return ZT_EXIT_USAGE; }
    if (dtype) {
        if (!strcmp(dtype, "uint16")) o.elsize = 2;
        else if (!strcmp(dtype, "uint32")) o.elsize = 4;
        else { cli_error("prep: --dtype must be uint16 or uint32, got '%s'", dtype); return ZT_EXIT_USAGE; }
    }
    if (shard) {
        errno = 0;
        unsigned long long n = strtoull(shard, &end, 10);
        if (*end || end == shard || errno || n < 1 || shard[0] == '-') {
            cli_error("prep: --shard-tokens must be a positive integer, got '%s'", shard);
            return ZT_EXIT_USAGE;
        }
        o.shard_tokens = (size_t)n;
    }
    zt_status st;
    zt_prep_result r;
    if (zt_prep(&o, &r, &st) != ZT_OK) {
        cli_error("%s", st.msg);
        return cli_exit_code(st.code);
    }
    char p[1200];
    const char *ext = o.format == ZT_FMT_H5 ? "h5" : "bin";
    if (o.shard_tokens) {
        printf("wrote %zu train tokens to %d shard%s (%s_train_*.%s)", r.ntrain, r.train_files,
               r.train_files == 1 ? "" : "s", output, ext);
        if (r.nval) printf(" and %zu val tokens to %d shard%s (%s_val_*.%s)", r.nval, r.val_files,
                           r.val_files == 1 ? "" : "s", output, ext);
    } else {
        zt_prep_path(p, sizeof p, output, "train", -1, o.format);
        printf("wrote %s (%zu tokens)", p, r.ntrain);
        zt_prep_path(p, sizeof p, output, "val", -1, o.format);
        if (r.nval) printf(" and %s (%zu tokens)", p, r.nval);
    }
    if (tokenizer)
        printf("; %zu document%s, vocab %d, %s tokens", r.ndocs, r.ndocs == 1 ? "" : "s", r.vocab,
               r.elsize == 4 ? "uint32" : "uint16");
    printf("\n");
    return ZT_EXIT_OK;
}
