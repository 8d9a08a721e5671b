/* cmd_ckpt.c -- `ztrain ckpt list | inspect | verify | export`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "config.h"
#include "arch.h"
#include "ztrain_ckpt.h"

static void ckpt_usage(FILE *fp) {
    fprintf(fp,
            "usage: ztrain ckpt <command> [options]\n"
            "\n"
            "  list [DIR]                  checkpoints in DIR (default: $ZTRAIN_CKPT_DIR or\n"
            "                              ./checkpoints), newest first, * = latest; the run\n"
            "                              using DIR, if any\n"
            "  inspect PATH [--tensors] [--no-config]\n"
            "                              header, saved-by world size / stage, data position,\n"
            "                              effective configuration; --tensors: every dataset\n"
            "                              with its shape and checksum\n"
            "  verify PATH                 recompute every tensor checksum and the metadata\n"
            "                              checksums; names each bad tensor or attribute;\n"
            "                              exit 1 if any does not verify\n"
            "  export PATH --output FILE [--dtype fp32|bf16]\n"
            "                              parameters as safetensors with GPT-2 (Hugging Face)\n"
            "                              names (docs/checkpoints.md)\n"
            "  export PATH --peft OUTDIR   a LoRA checkpoint's adapters as a PEFT adapter\n"
            "                              directory (adapter_config.json,\n"
            "                              adapter_model.safetensors; docs/lora.md)\n"
            "  export PATH --hf OUTDIR --merge [--dtype fp32|bf16]\n"
            "                              a LoRA checkpoint merged into its base: W + scale B A\n"
            "  export PATH --hf OUTDIR [--dtype fp32|bf16] [--max-shard-size SIZE]\n"
            "                [--tokenizer-from DIR | --no-tokenizer]\n"
            "                              a Hugging Face model directory: config.json,\n"
            "                              model.safetensors (or shards of at most SIZE, default\n"
            "                              5G, + model.safetensors.index.json), the tokenizer\n"
            "                              files of ztrain.init_from as training recorded them\n"
            "                              (refused when they changed or are gone), or those of\n"
            "                              DIR, or none (docs/huggingface.md)\n"
            "\n"
            "PATH is a checkpoint (a step-N directory or its state.h5) or a checkpoint\n"
            "directory (then: its newest committed checkpoint; verify checks all of them).\n"
            "Exit codes: 0 success, 1 failure (corrupt or unreadable checkpoint), 2 usage.\n");
}

static const char *state_name(int s) {
    return s == 0 ? "committed" : s == 1 ? "incomplete (removed at the next start)" : "corrupt (quarantined)";
}

static int do_list(int argc, char **argv) {
    const char *dir = getenv("ZTRAIN_CKPT_DIR");
    if (!dir || !*dir) dir = "checkpoints";
    if (argc > 2) { cli_error("ckpt list: too many arguments"); return ZT_EXIT_USAGE; }
    if (argc == 2) dir = argv[1];
    zt_ckpt_entry *e;
    int n;
    zt_status st;
    if (zt_ckpt_list(dir, &e, &n, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    printf("%s: %d entr%s\n", dir, n, n == 1 ? "y" : "ies");
    char who[1024];
    int held = zt_ckpt_lock_holder(dir, who, sizeof who);
    if (held == 1) printf("  in use by a run: %s (it holds %s/.ztrain.lock)\n", who, dir);
    else if (held == 2)
        printf("  %s/.ztrain.lock names a run that ended without removing it: %s (the next run "
               "takes it over)\n", dir, who);
    else if (held == 3)
        printf("  %s/.ztrain.lock names a run: %s (this file system does not support locks: "
               "whether it is still running cannot be checked)\n", dir, who);
    for (int i = 0; i < n; ++i) {
        char when[64] = "";
        zt_ckpt_info in;
        char p[4600];
        snprintf(p, sizeof p, "%s/%s", dir, e[i].name);
        zt_status s2;
        int have = e[i].state == 0 && zt_ckpt_read_info(p, &in, &s2) == ZT_OK;
        if (have) {
            time_t t = (time_t)in.created_unix;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        }
        printf("%c %-28s step %-8ld %10.1f MiB  %s", e[i].is_latest ? '*' : ' ', e[i].name,
               e[i].step, e[i].bytes / 1048576.0, state_name(e[i].state));
        if (have) printf("  saved %s by %d rank%s, stage %d", when, in.world_size,
                         in.world_size == 1 ? "" : "s", in.zero_stage);
        else if (e[i].state == 0) printf("  (unreadable: %s)", s2.msg);
        printf("\n");
        if (have) zt_ckpt_info_free(&in);
    }
    free(e);
    return ZT_EXIT_OK;
}

static void print_tensor(void *user, const zt_ckpt_tensor *t) {
    (void)user;
    char shape[64];
    if (t->ndim == 2) snprintf(shape, sizeof shape, "[%llu, %llu]", (unsigned long long)t->shape[0],
                               (unsigned long long)t->shape[1]);
    else snprintf(shape, sizeof shape, "[%llu]", (unsigned long long)t->shape[0]);
    printf("  %-36s %-14s checksum %016llx\n", t->dataset, shape, (unsigned long long)t->stored);
}

static int do_inspect(int argc, char **argv) {
    const char *path = NULL;
    int tensors = 0, config = 1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--tensors")) tensors = 1;
        else if (!strcmp(argv[i], "--no-config")) config = 0;
        else if (argv[i][0] == '-') { cli_error("ckpt inspect: unknown option '%s'", argv[i]); return ZT_EXIT_USAGE; }
        else if (!path) path = argv[i];
        else { cli_error("ckpt inspect: more than one PATH"); return ZT_EXIT_USAGE; }
    }
    if (!path) { cli_error("ckpt inspect: PATH missing (see 'ztrain ckpt --help')"); return ZT_EXIT_USAGE; }
    char p[4096];
    int is_dir;
    if (cli_ckpt_pick(path, p, sizeof p, &is_dir) != 0) { cli_error("%s: no committed checkpoint", path); return ZT_EXIT_FAIL; }
    zt_ckpt_info in;
    zt_status st;
    if (zt_ckpt_read_info(p, &in, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    char when[64];
    time_t t = (time_t)in.created_unix;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    printf("checkpoint   %s\n", p);
    printf("format       %s version %d, checksums %s\n", ZT_CKPT_FORMAT, in.format_version,
           in.checksum_algorithm);
    printf("step         %ld (AdamW updates %ld)\n", in.step, in.adam_t);
    printf("saved        %s by ztrain %s: %d rank%s, ZeRO stage %d, shard group %d\n", when,
           in.ztrain_version, in.world_size, in.world_size == 1 ? "" : "s", in.zero_stage,
           in.shard_group);
    char model[512];
    zt_arch_of(&in.model)->summary(&in.model, ZT_ARCH_SUM_INSPECT, model, sizeof model);
    printf("model        %s; %llu parameters in %d tensors\n", model,
           (unsigned long long)in.num_params, in.n_tensors);
    printf("master copy  %s\n", in.has_master ? "yes (/master)" : "no (params are the fp32 training values)");
    if (in.scaler_present)
        printf("loss scaler  fp16: scale %g, %ld overflow-free steps, hysteresis left %d\n",
               in.loss_scale, in.scaler_good_steps, in.scaler_hysteresis_left);
    printf("data         seed %llu, train_batch_size %ld, next sample %llu\n",
           (unsigned long long)in.seed, in.train_batch_size, (unsigned long long)in.sample_position);
    int rc = ZT_EXIT_OK;
    if (tensors) {
        printf("tensors:\n");
        if (zt_ckpt_tensors(p, print_tensor, NULL, &st) != ZT_OK) {
            cli_error("%s", st.msg);
            rc = ZT_EXIT_FAIL;
        }
    }
    if (config && in.config_json) printf("configuration:\n%s\n", in.config_json);
    zt_ckpt_info_free(&in);
    return rc;
}

typedef struct vstate { int bad, total; } vstate;
static void verify_cb(void *user, const zt_ckpt_tensor *t) {
    vstate *v = user;
    v->total++;
    if (!t->ok) {
        v->bad++;
        printf("  BAD %s: %s\n", t->dataset, t->error ? t->error : "?");
    }
}

static int verify_one(const char *p) {
    vstate v = {0, 0};
    zt_status st;
    int rc = zt_ckpt_verify(p, verify_cb, &v, &st);
    if (rc == ZT_OK) {
        zt_ckpt_info in;
        int meta = zt_ckpt_read_info(p, &in, &st) == ZT_OK && in.meta_checksums;
        if (st.code == ZT_OK) zt_ckpt_info_free(&in);
        printf("%s: OK (%d tensors%s verified)\n", p, v.total, meta ? " and the metadata" : "");
        if (!meta)
            fprintf(stderr, "ztrain: warning: %s: no metadata checksums (written by an older "
                    "ztrain): its attributes and configuration are not verified\n", p);
        return 0;
    }
    printf("%s: FAILED (%d of %d tensors do not verify)\n", p, v.bad, v.total);
    fflush(stdout);
    cli_error("%s", st.msg);
    return 1;
}

static int do_verify(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        cli_error("ckpt verify: exactly one PATH expected (see 'ztrain ckpt --help')");
        return ZT_EXIT_USAGE;
    }
    const char *path = argv[1];
    char p[4096];
    int is_dir;
    if (cli_ckpt_pick(path, p, sizeof p, &is_dir) != 0 && !is_dir) {
        cli_error("%s: no committed checkpoint", path);
        return ZT_EXIT_FAIL;
    }
    if (!is_dir) return verify_one(p) ? ZT_EXIT_FAIL : ZT_EXIT_OK;
    zt_ckpt_entry *e;
    int n, bad = 0, checked = 0;
    zt_status st;
    if (zt_ckpt_list(path, &e, &n, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    for (int i = 0; i < n; ++i) {
        if (e[i].state != 0) continue;
        char q[4600];
        snprintf(q, sizeof q, "%s/%s", path, e[i].name);
        bad += verify_one(q);
        checked++;
    }
    free(e);
    if (!checked) { cli_error("%s: no committed checkpoint", path); return ZT_EXIT_FAIL; }
    return bad ? ZT_EXIT_FAIL : ZT_EXIT_OK;
}

static int do_export(int argc, char **argv) {
    const char *path = NULL, *out = NULL, *hf = NULL, *dtype = "fp32", *shard = "5G", *tok = NULL;
    const char *peft = NULL;
    int merge = 0;
    for (int i = 1; i < argc; ++i) {
        const char *v;
        int r;
        if (!strcmp(argv[i], "--merge")) {
            merge = 1;
        } else if ((r = cli_opt(argc, argv, &i, "peft", &v))) {
            if (r < 0) { cli_error("option '--peft' needs a value"); return ZT_EXIT_USAGE; }
            peft = v;
        } else if ((r = cli_opt(argc, argv, &i, "output", &v))) {
            if (r < 0) { cli_error("option '--output' needs a value"); return ZT_EXIT_USAGE; }
            out = v;
        } else if ((r = cli_opt(argc, argv, &i, "hf", &v))) {
            if (r < 0) { cli_error("option '--hf' needs a value"); return ZT_EXIT_USAGE; }
            hf = v;
        } else if (!strcmp(argv[i], "--no-tokenizer")) {
            tok = "";
        } else if ((r = cli_opt(argc, argv, &i, "tokenizer-from", &v))) {
            if (r < 0) { cli_error("option '--tokenizer-from' needs a value"); return ZT_EXIT_USAGE; }
            tok = v;
        } else if ((r = cli_opt(argc, argv, &i, "max-shard-size", &v))) {
            if (r < 0) { cli_error("option '--max-shard-size' needs a value"); return ZT_EXIT_USAGE; }
            shard = v;
        } else if ((r = cli_opt(argc, argv, &i, "dtype", &v))) {
            if (r < 0) { cli_error("option '--dtype' needs a value"); return ZT_EXIT_USAGE; }
            dtype = v;
        } else if (argv[i][0] == '-') {
            cli_error("ckpt export: unknown option '%s'", argv[i]);
            return ZT_EXIT_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            cli_error("ckpt export: more than one PATH");
            return ZT_EXIT_USAGE;
        }
    }
    if (!path || (out != NULL) + (hf != NULL) + (peft != NULL) != 1) {
        cli_error("ckpt export: PATH and one of --output FILE, --hf OUTDIR or --peft OUTDIR are "
                  "required");
        return ZT_EXIT_USAGE;
    }
    if (merge && !hf) {
        cli_error("--merge goes with --hf OUTDIR (the base with the LoRA adapters merged in)");
        return ZT_EXIT_USAGE;
    }
    unsigned long long max_shard = 0;
    if (zt_parse_size(shard, &max_shard) != 0 || max_shard == 0) {
        cli_error("--max-shard-size must be a size such as 5G or 500M, got '%s'", shard);
        return ZT_EXIT_USAGE;
    }
    int bf16;
    if (!strcmp(dtype, "fp32") || !strcmp(dtype, "f32")) bf16 = 0;
    else if (!strcmp(dtype, "bf16")) bf16 = 1;
    else { cli_error("--dtype must be fp32 or bf16, got '%s'", dtype); return ZT_EXIT_USAGE; }
    char p[4096];
    int is_dir;
    if (cli_ckpt_pick(path, p, sizeof p, &is_dir) != 0) { cli_error("%s: no committed checkpoint", path); return ZT_EXIT_FAIL; }
    zt_status st;
    if (tok && !hf) { cli_error("--tokenizer-from and --no-tokenizer go with --hf"); return ZT_EXIT_USAGE; }
    if (peft || merge) {   /* LoRA checkpoints (docs/lora.md) */
        int rc = peft ? zt_ckpt_export_peft(p, peft, &st) : zt_ckpt_export_merged(p, hf, bf16, &st);
        if (rc != ZT_OK) {
            cli_error("%s", st.msg);
            return cli_exit_code(st.code);
        }
        if (peft) printf("exported %s to %s (PEFT LoRA adapter, F32)\n", p, peft);
        else printf("exported %s to %s (Hugging Face model directory, LoRA merged, %s)\n", p, hf,
                    bf16 ? "BF16" : "F32");
        return ZT_EXIT_OK;
    }
    if (hf) {
        zt_hf_export_opts o;
        memset(&o, 0, sizeof o);
        o.bf16 = bf16;
        o.max_shard_bytes = max_shard;
        o.tokenizer_from = tok;
        cli_progress pr;
        o.progress = cli_progress_init(&pr, "export");
        int rc = zt_ckpt_export_hf(p, hf, &o, &st);
        cli_progress_end(&pr);
        if (o.warning[0]) fprintf(stderr, "ztrain: warning: %s\n", o.warning);
        if (rc != ZT_OK) {
            cli_error("%s", st.msg);
            return cli_exit_code(st.code);
        }
        printf("exported %s to %s (Hugging Face model directory, %s)\n", p, hf, bf16 ? "BF16" : "F32");
        return ZT_EXIT_OK;
    }
    if (zt_ckpt_export_safetensors(p, out, bf16, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    printf("exported %s to %s (safetensors, %s)\n", p, out, bf16 ? "BF16" : "F32");
    return ZT_EXIT_OK;
}

int cmd_ckpt(int argc, char **argv) {
    if (argc < 2) { ckpt_usage(stderr); return ZT_EXIT_USAGE; }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) { ckpt_usage(stdout); return ZT_EXIT_OK; }
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { ckpt_usage(stdout); return ZT_EXIT_OK; }
    if (!strcmp(sub, "list")) return do_list(argc - 1, argv + 1);
    if (!strcmp(sub, "inspect")) return do_inspect(argc - 1, argv + 1);
    if (!strcmp(sub, "verify")) return do_verify(argc - 1, argv + 1);
    if (!strcmp(sub, "export")) return do_export(argc - 1, argv + 1);
    cli_error("ckpt: unknown command '%s' (list, inspect, verify, export)", sub);
    return ZT_EXIT_USAGE;
}
