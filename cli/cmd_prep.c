/* cmd_prep.c -- `ztrain prep`: text -> token files (llm.c shards or HDF5) with
 * byte-level tokens or a Hugging Face tokenizer, optionally split into shards;
 * or re-shard existing token files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "sft.h"
#include "tokens.h"

static void help(void) {
    printf("usage: ztrain prep (--input TEXT | --tokens-in FILES) --output PREFIX\n"
           "                   [--tokenizer PATH [--jsonl | --text] [--doc-sep eos|bos|none]\n"
           "                    [--threads N] [--max-line-bytes N]]\n"
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
           "  --max-line-bytes N  the longest JSON Lines line, in bytes (default 67108864,\n"
           "                  64 MiB): a longer line is an error naming it\n"
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
           "docs/tokenizers.md.\n"
           "\n"
           "usage: ztrain prep --sft --input FILE.jsonl --tokenizer PATH [--template NAME]\n"
           "                   --seq-len N --output PREFIX [--mask assistant|all|last]\n"
           "                   [--allow-split | --truncate] [--val-fraction F] [--pad-id ID]\n"
           "                   [--template-var NAME=VALUE ...] [--max-line-bytes N]\n"
           "Instruction / chat data: JSON Lines of {\"messages\": [{\"role\", \"content\"}...]}\n"
           "or {\"prompt\", \"completion\"}, rendered with a chat template, tokenized with PATH\n"
           "(a tokenizer.json or a directory holding one) and packed into windows of N + 1\n"
           "tokens with a loss mask: PREFIX_train.sft (and PREFIX_val.sft with the last\n"
           "F of the examples; default F = 0).  Train with --seq-len N.\n"
           "  --template auto   the tokenizer's own chat template (chat_template.jinja or\n"
           "                    tokenizer_config.json's chat_template; the default), rendered as\n"
           "                    transformers' apply_chat_template does; any role the template knows\n"
           "  --template FILE.jinja  a template file, rendered the same way\n"
           "  --template NAME   a built-in template: llama3, chatml, qwen2 (Qwen2; use auto for\n"
           "                    Qwen2.5), mistral (roles system, user, assistant)\n"
           "  --template-var NAME=VALUE  a template variable (auto / FILE), e.g. date_string\n"
           "  --mask assistant  train on every assistant turn (content + end of turn; default)\n"
           "  --mask last       only on the last assistant turn\n"
           "  --mask all        on every token of the example\n"
           "  --allow-split     let examples cross windows (default: an example starts a new\n"
           "                    window when it does not fit the current one)\n"
           "  --truncate        cut an example longer than a window (default: an error)\n"
           "  --pad-id ID       token that fills window tails (default: the tokenizer's EOS)\n"
           "  --max-line-bytes N  the longest line, in bytes (default 67108864, 64 MiB)\n"
           "See docs/sft.md.\n");
}

/* --max-line-bytes: 1 to 2^40 bytes; 0 when not given (the default). */
static int max_line_bytes(const char *v, size_t *out) {
    *out = 0;
    if (!v) return 0;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end || end == v || errno || v[0] == '-' || n < 1 || n > (1ULL << 40)) {
        cli_error("prep: --max-line-bytes must be a number of bytes from 1 to 1099511627776, got '%s'", v);
        return -1;
    }
    *out = (size_t)n;
    return 0;
}

static int prep_sft(const char *input, const char *output, const char *vf, const char *tokenizer,
                    const char *tmpl, const char *const *tvars, const char *seq, const char *mask, int allow_split,
                    int truncate, const char *pad, const char *maxline) {
    if (!input || !output || !tokenizer || !seq) {
        cli_error("prep --sft: --input, --output, --tokenizer and --seq-len are required");
        return ZT_EXIT_USAGE;
    }
    zt_sft_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = input;
    o.prefix = output;
    o.tokenizer = tokenizer;
    o.template_name = tmpl;   /* NULL: auto */
    o.template_vars = tvars;
    o.allow_split = allow_split;
    o.truncate = truncate;
    o.pad_id = -1;
    if (max_line_bytes(maxline, &o.max_line_bytes)) return ZT_EXIT_USAGE;
    char *end;
    errno = 0;
    long n = strtol(seq, &end, 10);
    if (*end || end == seq || errno || n < 1 || n > 0x7ffffffe) {
        cli_error("prep: --seq-len must be a positive integer, got '%s'", seq);
        return ZT_EXIT_USAGE;
    }
    o.seq_len = (int)n;
    if (pad) {
        errno = 0;
        n = strtol(pad, &end, 10);
        if (*end || end == pad || errno || n < 0 || n > 0x7fffffff) {
            cli_error("prep: --pad-id must be a token id >= 0, got '%s'", pad);
            return ZT_EXIT_USAGE;
        }
        o.pad_id = (int)n;
    }
    o.val_fraction = vf ? strtod(vf, &end) : 0.0;
    if (vf && (*end || end == vf)) { cli_error("prep: --val-fraction '%s' is not a number", vf); return ZT_EXIT_USAGE; }
    if (!mask || !strcmp(mask, "assistant")) o.mask = ZT_SFT_MASK_ASSISTANT;
    else if (!strcmp(mask, "all")) o.mask = ZT_SFT_MASK_ALL;
    else if (!strcmp(mask, "last")) o.mask = ZT_SFT_MASK_LAST;
    else { cli_error("prep: --mask must be assistant, all or last, got '%s'", mask); return ZT_EXIT_USAGE; }
    if (allow_split && truncate) { cli_error("prep: --allow-split and --truncate exclude each other"); return ZT_EXIT_USAGE; }
    zt_status st;
    zt_sft_prep_result r;
    cli_progress pr;
    o.progress = cli_progress_init(&pr, "prep --sft");
    int rc = zt_sft_prep(&o, &r, &st);
    cli_progress_end(&pr);
    if (rc != ZT_OK) {
        cli_error("%s", st.msg);
        return cli_exit_code(st.code);
    }
    char p[1200];
    zt_sft_path(p, sizeof p, output, "train");
    printf("wrote %s (%llu windows of %d tokens, %llu examples)", p, (unsigned long long)r.train_windows,
           o.seq_len + 1, (unsigned long long)r.train_examples);
    if (r.val_windows) {
        zt_sft_path(p, sizeof p, output, "val");
        printf(" and %s (%llu windows, %llu examples)", p, (unsigned long long)r.val_windows,
               (unsigned long long)r.val_examples);
    }
    printf("; %llu example tokens, %llu counted targets, %llu pad tokens (id %d)",
           (unsigned long long)r.tokens, (unsigned long long)r.targets, (unsigned long long)r.pad_tokens,
           r.pad_id);
    if (r.truncated) printf(", %llu examples truncated", (unsigned long long)r.truncated);
    if (r.dropped_windows)
        printf(", %llu windows without a counted target dropped", (unsigned long long)r.dropped_windows);
    printf("\n");
    return ZT_EXIT_OK;
}


int cmd_prep(int argc, char **argv) {
    const char *input = NULL, *tokens_in = NULL, *output = NULL, *vf = NULL, *fmt = "bin",
               *shard = NULL, *dtype = NULL, *tokenizer = NULL, *docsep = NULL, *threads = NULL, *v;
    const char *tmpl = NULL, *seq = NULL, *mask = NULL, *pad = NULL, *maxline = NULL;
    const char *tvars[33] = {NULL};
    int ntvars = 0;
    int jsonl = 0, sft = 0, allow_split = 0, truncate = 0, fmt_given = 0;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return ZT_EXIT_OK; }
        if (!strcmp(argv[i], "--jsonl")) { jsonl = 1; continue; }
        if (!strcmp(argv[i], "--text")) { jsonl = 2; continue; }
        if (!strcmp(argv[i], "--sft")) { sft = 1; continue; }
        if (!strcmp(argv[i], "--allow-split")) { allow_split = 1; continue; }
        if (!strcmp(argv[i], "--truncate")) { truncate = 1; continue; }
        if ((r = cli_opt(argc, argv, &i, "input", &v))) { if (r < 0) goto missing; input = v; }
        else if ((r = cli_opt(argc, argv, &i, "tokenizer", &v))) { if (r < 0) goto missing; tokenizer = v; }
        else if ((r = cli_opt(argc, argv, &i, "doc-sep", &v))) { if (r < 0) goto missing; docsep = v; }
        else if ((r = cli_opt(argc, argv, &i, "threads", &v))) { if (r < 0) goto missing; threads = v; }
        else if ((r = cli_opt(argc, argv, &i, "tokens-in", &v))) { if (r < 0) goto missing; tokens_in = v; }
        else if ((r = cli_opt(argc, argv, &i, "output", &v))) { if (r < 0) goto missing; output = v; }
        else if ((r = cli_opt(argc, argv, &i, "val-fraction", &v))) { if (r < 0) goto missing; vf = v; }
        else if ((r = cli_opt(argc, argv, &i, "format", &v))) { if (r < 0) goto missing; fmt = v; fmt_given = 1; }
        else if ((r = cli_opt(argc, argv, &i, "template", &v))) { if (r < 0) goto missing; tmpl = v; }
        else if ((r = cli_opt(argc, argv, &i, "template-var", &v))) {
            if (r < 0) goto missing;
            if (ntvars == 32) { cli_error("prep: at most 32 --template-var"); return ZT_EXIT_USAGE; }
            tvars[ntvars++] = v;
        }
        else if ((r = cli_opt(argc, argv, &i, "seq-len", &v))) { if (r < 0) goto missing; seq = v; }
        else if ((r = cli_opt(argc, argv, &i, "mask", &v))) { if (r < 0) goto missing; mask = v; }
        else if ((r = cli_opt(argc, argv, &i, "pad-id", &v))) { if (r < 0) goto missing; pad = v; }
        else if ((r = cli_opt(argc, argv, &i, "shard-tokens", &v))) { if (r < 0) goto missing; shard = v; }
        else if ((r = cli_opt(argc, argv, &i, "dtype", &v))) { if (r < 0) goto missing; dtype = v; }
        else if ((r = cli_opt(argc, argv, &i, "max-line-bytes", &v))) { if (r < 0) goto missing; maxline = v; }
        else { cli_error("prep: unknown option '%s'", argv[i]); return ZT_EXIT_USAGE; }
        continue;
    missing:
        cli_error("prep: option '%s' needs a value", argv[i]);
        return ZT_EXIT_USAGE;
    }
    if (sft) {
        if (tokens_in || fmt_given || shard || dtype || jsonl || docsep || threads) {
            cli_error("prep --sft: --tokens-in, --format, --shard-tokens, --dtype, --jsonl, --text, --doc-sep "
                      "and --threads do not apply (SFT window files hold uint16 or uint32 tokens as the "
                      "vocabulary needs)");
            return ZT_EXIT_USAGE;
        }
        return prep_sft(input, output, vf, tokenizer, tmpl, tvars, seq, mask, allow_split, truncate, pad, maxline);
    }
    if (tmpl || ntvars || seq || mask || pad || allow_split || truncate) {
        cli_error("prep: --template, --template-var, --seq-len, --mask, --pad-id, --allow-split and --truncate "
                  "need --sft");
        return ZT_EXIT_USAGE;
    }
    if ((!input && !tokens_in) || !output) {
        cli_error("prep: --input (or --tokens-in) and --output are required");
        return ZT_EXIT_USAGE;
    }
    if (input && tokens_in) { cli_error("prep: give either --input or --tokens-in, not both"); return ZT_EXIT_USAGE; }
    if (!tokenizer && (jsonl || docsep || threads || maxline)) {
        cli_error("prep: --jsonl, --text, --doc-sep, --threads and --max-line-bytes need --tokenizer");
        return ZT_EXIT_USAGE;
    }
    if (tokenizer && tokens_in) { cli_error("prep: --tokenizer needs --input (text), not --tokens-in"); return ZT_EXIT_USAGE; }
    zt_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = input;
    o.tokenizer = tokenizer;
    o.jsonl = jsonl;
    if (max_line_bytes(maxline, &o.max_line_bytes)) return ZT_EXIT_USAGE;
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
    cli_progress pr;
    o.progress = cli_progress_init(&pr, "prep");
    int rc = zt_prep(&o, &r, &st);
    cli_progress_end(&pr);
    if (rc != ZT_OK) {
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
