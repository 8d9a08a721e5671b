/* cmd_prep.c -- `ztrain prep`: text -> byte-level token files (llm.c shards
 * or HDF5), optionally split into shards; or re-shard existing token files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "tokens.h"

static void help(void) {
    printf("usage: ztrain prep (--input TEXT | --tokens-in FILES) --output PREFIX\n"
           "                   [--val-fraction F] [--format bin|hdf5] [--shard-tokens N]\n"
           "                   [--dtype uint16|uint32]\n"
           "Tokenizes TEXT with byte-level tokens (vocab 256), or reads existing token\n"
           "files (a path or a quoted glob: llm.c shards and/or HDF5), and writes the\n"
           "first 1-F of the tokens to PREFIX_train.EXT and the last F (default 0.1 for\n"
           "text, 0 for --tokens-in) to PREFIX_val.EXT.\n"
           "  --format bin    llm.c token shards, uint16 (default; EXT = bin)\n"
           "  --format hdf5   HDF5 files with a 1-D dataset /tokens (EXT = h5)\n"
           "  --shard-tokens N  split each part into files of at most N tokens:\n"
           "                  PREFIX_train_000000.EXT, PREFIX_train_000001.EXT, ...\n"
           "                  (train with --train 'PREFIX_train_*.EXT')\n"
           "  --dtype uint32  HDF5 token width (default uint16; uint32 for vocab > 65536)\n"
           "Nothing is written unless the whole input was converted.  See docs/data.md.\n");
}

int cmd_prep(int argc, char **argv) {
    const char *input = NULL, *tokens_in = NULL, *output = NULL, *vf = NULL, *fmt = "bin",
               *shard = NULL, *dtype = NULL, *v;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return ZT_EXIT_OK; }
        if ((r = cli_opt(argc, argv, &i, "input", &v))) { if (r < 0) goto missing; input = v; }
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
    zt_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = input;
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
        if (o.elsize == 4 && o.format == ZT_FMT_BIN) {
            cli_error("prep: --dtype uint32 needs --format hdf5 (llm.c shards are uint16)");
            return ZT_EXIT_USAGE;
        }
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
    printf("\n");
    return ZT_EXIT_OK;
}
