/* cmd_prep.c -- `ztrain prep`: text -> byte-level token shards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "tokens.h"

int cmd_prep(int argc, char **argv) {
    const char *input = NULL, *output = NULL, *vf = "0.1", *v;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ztrain prep --input TEXT --output PREFIX [--val-fraction F]\n"
                   "Writes PREFIX_train.bin and PREFIX_val.bin (the last F of the bytes,\n"
                   "default 0.1) as llm.c token shards with byte-level tokens (vocab 256).\n");
            return ZT_EXIT_OK;
        }
        if ((r = cli_opt(argc, argv, &i, "input", &v))) { if (r < 0) goto missing; input = v; }
        else if ((r = cli_opt(argc, argv, &i, "output", &v))) { if (r < 0) goto missing; output = v; }
        else if ((r = cli_opt(argc, argv, &i, "val-fraction", &v))) { if (r < 0) goto missing; vf = v; }
        else { cli_error("prep: unknown option '%s'", argv[i]); return ZT_EXIT_USAGE; }
        continue;
    missing:
        cli_error("prep: option '%s' needs a value", argv[i]);
        return ZT_EXIT_USAGE;
    }
    if (!input || !output) { cli_error("prep: --input and --output are required"); return ZT_EXIT_USAGE; }
    char *end;
    double f = strtod(vf, &end);
    if (*end || end == vf) { cli_error("prep: --val-fraction '%s' is not a number", vf); return ZT_EXIT_USAGE; }
    zt_status st;
    size_t nt = 0, nv = 0;
    if (zt_prep_text(input, output, f, &nt, &nv, &st) != ZT_OK) {
        cli_error("%s", st.msg);
        return cli_exit_code(st.code);
    }
    printf("wrote %s_train.bin (%zu tokens)", output, nt);
    if (nv) printf(" and %s_val.bin (%zu tokens)", output, nv);
    printf("\n");
    return ZT_EXIT_OK;
}
