/*
 * test_spank_opts.c -- unit tests of the ztrain SPANK plugin's option
 * parsing and validation (plugin/zt_opts.c), built without libslurm.
 */
#include "tap.h"
#include "zt_opts.h"

#include <string.h>

static struct zt_site site;
static char canon[ZT_VALLEN], err[ZT_ERRLEN];

static int check(enum zt_opt_id id, const char *val) {
    canon[0] = err[0] = '\0';
    return zt_opt_check(id, val, &site, canon, sizeof canon, err, sizeof err);
}

/* value accepted and canonicalised to want */
static void accept(enum zt_opt_id id, const char *val, const char *want) {
    int rc = check(id, val);
    if (rc) tap_diag("error: %s", err);
    tap_ok(rc == 0 && !strcmp(canon, want), "--%s=%s accepted as '%s' (got '%s')",
           zt_opt_table[id].name, val, want, canon);
}

/* printable copy of a value for a TAP line */
static const char *printable(const char *v) {
    static char b[64];
    size_t i = 0;
    for (; v[i] && i < sizeof b - 4; i++) b[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
    strcpy(b + i, v[i] ? "..." : "");
    return b;
}

/* value refused with a one-line message containing want */
static void refuse(enum zt_opt_id id, const char *val, const char *want) {
    int rc = check(id, val);
    tap_ok(rc == -1 && strstr(err, want) && !strchr(err, '\n') &&
               strstr(err, zt_opt_table[id].name),
           "--%s='%s' refused: %s", zt_opt_table[id].name, printable(val), err);
}

static int site_parse(const char *line) {
    char buf[1024], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 32; t = strtok(NULL, " ")) argv[argc++] = t;
    err[0] = '\0';
    return zt_site_parse(&site, argc, argv, err, sizeof err);
}

static void site_refuse(const char *line, const char *want) {
    int rc = site_parse(line);
    tap_ok(rc == -1 && strstr(err, want) != NULL, "plugstack '%s' refused: %s", line, err);
}

static void gpu(const char *bind, const char *gpus, unsigned id, unsigned n, int want_rc,
                const char *want) {
    struct zt_gpu_bind b;
    char out[256] = "";
    err[0] = '\0';
    if (zt_gpu_bind_parse(bind, &b, err, sizeof err)) {
        tap_ok(0, "gpu-bind %s parses: %s", bind, err);
        return;
    }
    int rc = zt_gpu_assign(&b, gpus, id, n, out, sizeof out, err, sizeof err);
    int ok = rc == want_rc && (rc != 0 || !strcmp(out, want)) && (rc != -1 || strstr(err, want));
    if (!ok) tap_diag("rc %d out '%s' err '%s'", rc, out, err);
    tap_ok(ok, "gpu-bind %s, GPUs '%s', task %u/%u -> %s", bind, gpus ? gpus : "(none)", id, n,
           rc == 0 ? out : rc == 1 ? "untouched" : "error");
}

int main(void) {
    zt_site_init(&site);

    /* option table */
    int usage_ok = 1;
    for (int i = 0; i < ZT_OPT_COUNT; i++)
        if (strncmp(zt_opt_table[i].usage, "[ztrain]", 8) || strncmp(zt_opt_table[i].name, "ztrain-", 7) ||
            !zt_opt_table[i].env || strncmp(zt_opt_table[i].env, "ZTRAIN_", 7))
            usage_ok = 0;
    tap_ok(usage_ok, "every option is --ztrain-*, has a [ztrain] usage and a ZTRAIN_* variable");
    tap_ok(zt_opt_lookup("ztrain-stage") == ZT_OPT_STAGE && zt_opt_lookup("precision") == ZT_OPT_PRECISION &&
               zt_opt_lookup("nope") == -1, "option lookup by name");

    /* --ztrain-stage */
    accept(ZT_OPT_STAGE, "0", "0");
    accept(ZT_OPT_STAGE, "3", "3");
    accept(ZT_OPT_STAGE, "02", "2");
    refuse(ZT_OPT_STAGE, "4", "0..3");
    refuse(ZT_OPT_STAGE, "7", "0..3");
    refuse(ZT_OPT_STAGE, "-1", "0..3");
    refuse(ZT_OPT_STAGE, "+1", "0..3");
    refuse(ZT_OPT_STAGE, "1x", "0..3");
    refuse(ZT_OPT_STAGE, " 1", "0..3");
    refuse(ZT_OPT_STAGE, "", "0..3");
    refuse(ZT_OPT_STAGE, "99999999999999999999999", "0..3");

    /* --ztrain-dataloaders */
    accept(ZT_OPT_DATALOADERS, "1", "1");
    accept(ZT_OPT_DATALOADERS, "256", "256");
    refuse(ZT_OPT_DATALOADERS, "0", "1..256");
    refuse(ZT_OPT_DATALOADERS, "257", "1..256");
    refuse(ZT_OPT_DATALOADERS, "two", "1..256");

    /* --ztrain-gpu-bind */
    accept(ZT_OPT_GPU_BIND, "none", "none");
    accept(ZT_OPT_GPU_BIND, "local", "local");
    accept(ZT_OPT_GPU_BIND, "map:3,1", "map:3,1");
    accept(ZT_OPT_GPU_BIND, "map:007", "map:7");
    refuse(ZT_OPT_GPU_BIND, "map:", "list");
    refuse(ZT_OPT_GPU_BIND, "map:1,,2", "map:ID");
    refuse(ZT_OPT_GPU_BIND, "map:a", "map:ID");
    refuse(ZT_OPT_GPU_BIND, "map:1,", "map:ID");
    refuse(ZT_OPT_GPU_BIND, "map:5000", "out of range");
    refuse(ZT_OPT_GPU_BIND, "closest", "none, local or map:LIST");
    refuse(ZT_OPT_GPU_BIND, "Local", "none, local or map:LIST");

    /* --ztrain-resume, --ztrain-ckpt-dir */
    accept(ZT_OPT_RESUME, "auto", "auto");
    accept(ZT_OPT_RESUME, "never", "never");
    accept(ZT_OPT_RESUME, "/scratch/run1/step_100", "/scratch/run1/step_100");
    refuse(ZT_OPT_RESUME, "", "auto, never or a checkpoint path");
    refuse(ZT_OPT_RESUME, "a\nb", "control character");
    refuse(ZT_OPT_RESUME, "AUTO", "did you mean auto?");
    refuse(ZT_OPT_RESUME, "auto ", "did you mean auto?");
    refuse(ZT_OPT_RESUME, " Never", "did you mean never?");
    accept(ZT_OPT_RESUME, "autosave/step-1", "autosave/step-1");
    accept(ZT_OPT_CKPT_DIR, "ckpt", "ckpt");
    refuse(ZT_OPT_CKPT_DIR, "", "empty path");
    {
        static char longpath[ZT_VALLEN + 10];
        memset(longpath, 'a', sizeof longpath - 1);
        longpath[sizeof longpath - 1] = '\0';
        refuse(ZT_OPT_CKPT_DIR, longpath, "too long");
    }

    /* --ztrain-ckpt-every, --ztrain-offload, --ztrain-precision */
    accept(ZT_OPT_CKPT_EVERY, "0", "0");
    accept(ZT_OPT_CKPT_EVERY, "500", "500");
    refuse(ZT_OPT_CKPT_EVERY, "-5", "number of steps");
    refuse(ZT_OPT_CKPT_EVERY, "1e3", "number of steps");
    accept(ZT_OPT_OFFLOAD, "none", "none");
    accept(ZT_OPT_OFFLOAD, "optimizer", "optimizer");
    accept(ZT_OPT_OFFLOAD, "params", "params");
    refuse(ZT_OPT_OFFLOAD, "cpu", "none, optimizer or params");
    accept(ZT_OPT_PRECISION, "bf16", "bf16");
    accept(ZT_OPT_PRECISION, "fp32", "fp32");
    accept(ZT_OPT_PRECISION, "fp16", "fp16");
    refuse(ZT_OPT_PRECISION, "BF16", "fp32, bf16 or fp16");
    refuse(ZT_OPT_PRECISION, "fp8", "fp32, bf16 or fp16");

    /* plugstack.conf arguments */
    tap_ok(site_parse("") == 0 && site.default_stage == -1 && site.max_stage == 3 &&
               site.max_dataloaders == ZTRAIN_DATALOADERS_MAX && !site.ckpt_root[0],
           "no plugstack arguments: built-in limits, no defaults");
    tap_ok(site_parse("default_stage=2 max_dataloaders=16 ckpt_root=/scratch/ztrain/") == 0 &&
               site.default_stage == 2 && site.max_dataloaders == 16 &&
               !strcmp(site.ckpt_root, "/scratch/ztrain"),
           "default_stage=2 max_dataloaders=16 ckpt_root=/scratch/ztrain/ parsed (%s)", err);
    accept(ZT_OPT_DATALOADERS, "16", "16");
    refuse(ZT_OPT_DATALOADERS, "17", "max_dataloaders=16");
    tap_ok(site_parse("max_stage=1 default_dataloaders=4 default_precision=bf16 default_offload=optimizer "
                      "default_gpu_bind=local default_resume=auto default_ckpt_every=100") == 0,
           "all default_* keys parsed (%s)", err);
    refuse(ZT_OPT_STAGE, "2", "max_stage=1");
    refuse(ZT_OPT_STAGE, "9", "0..1");
    accept(ZT_OPT_STAGE, "1", "1");
    site_refuse("bogus=1", "unknown plugstack.conf key 'bogus'");
    site_refuse("default_stage", "not key=value");
    site_refuse("=3", "not key=value");
    site_refuse("default_stage=4", "default_stage=4");
    site_refuse("default_stage=two", "expected an integer 0..3");
    site_refuse("max_dataloaders=0", "max_dataloaders=0");
    site_refuse("default_precision=fp8", "fp32, bf16 or fp16");
    site_refuse("default_offload=disk", "none, optimizer or params");
    site_refuse("default_resume=/x", "auto or never");
    site_refuse("default_gpu_bind=map:x", "default_gpu_bind");
    site_refuse("ckpt_root=relative/dir", "absolute");
    site_refuse("default_stage=1 default_stage=2", "given twice");
    site_refuse("max_stage=1 default_stage=2", "above max_stage");
    site_refuse("max_dataloaders=2 default_dataloaders=3", "above max_dataloaders");
    site_refuse("default_ckpt_every=-1", "default_ckpt_every");

    /* settings: given options win, site defaults fill in, bad values refused */
    {
        struct zt_settings st;
        const char *raw[ZT_OPT_COUNT] = { 0 };
        site_parse("default_stage=2 default_precision=bf16 max_dataloaders=8");
        raw[ZT_OPT_DATALOADERS] = "3";
        int rc = zt_settings_resolve(&st, raw, &site, err, sizeof err);
        tap_ok(rc == 0 && st.have[ZT_OPT_STAGE] && !strcmp(st.val[ZT_OPT_STAGE], "2") &&
                   st.from_site[ZT_OPT_STAGE] && st.have[ZT_OPT_DATALOADERS] &&
                   !st.from_site[ZT_OPT_DATALOADERS] && !strcmp(st.val[ZT_OPT_PRECISION], "bf16") &&
                   !st.have[ZT_OPT_OFFLOAD] && !st.have[ZT_OPT_GPU_BIND] && !st.have[ZT_OPT_RESUME],
               "site defaults fill in what was not given, nothing else");
        raw[ZT_OPT_STAGE] = "0";
        rc = zt_settings_resolve(&st, raw, &site, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(st.val[ZT_OPT_STAGE], "0") && !st.from_site[ZT_OPT_STAGE],
               "a given option overrides the site default");
        rc = zt_settings_resolve(&st, raw, &site, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(st.val[ZT_OPT_STAGE], "0") && !strcmp(st.val[ZT_OPT_DATALOADERS], "3"),
               "resolving twice gives the same values (idempotent)");
        raw[ZT_OPT_DATALOADERS] = "9";
        rc = zt_settings_resolve(&st, raw, &site, err, sizeof err);
        tap_ok(rc == -1 && strstr(err, "max_dataloaders=8"), "a bad given value fails resolve: %s", err);
        zt_site_init(&site);
    }

    /* GPU assignment */
    gpu("none", "0,1", 0, 2, 1, "");
    gpu("local", "0,1", 0, 2, 0, "0");
    gpu("local", "0,1", 1, 2, 0, "1");
    gpu("local", "0,1,2,3", 0, 2, 0, "0,1");
    gpu("local", "0,1,2,3", 1, 2, 0, "2,3");
    gpu("local", "0,1,2,3,4", 0, 2, 0, "0,1,2");
    gpu("local", "0,1,2,3,4", 1, 2, 0, "3,4");
    gpu("local", "4,6", 1, 2, 0, "6");
    gpu("local", "GPU-aa,GPU-bb", 1, 2, 0, "GPU-bb");
    gpu("local", "0,1", 2, 3, 0, "0");            /* fewer GPUs than tasks: round robin */
    gpu("local", "0,1", 3, 4, 0, "1");
    gpu("local", "0", 0, 1, 0, "0");
    gpu("local", "", 0, 2, -1, "no GPUs");
    gpu("local", NULL, 0, 1, -1, "no GPUs");
    gpu("local", "NoDevFiles", 0, 1, -1, "no GPUs");
    gpu("local", "0,1", 2, 2, -1, "out of range");
    gpu("map:3,1", "0,1,2,3", 0, 2, 0, "3");
    gpu("map:3,1", "0,1,2,3", 1, 2, 0, "1");
    gpu("map:3,1", "0,1,2,3", 2, 4, 0, "3");      /* short list reused cyclically */
    gpu("map:3,1", "", 1, 2, -1, "no GPUs");      /* a step without GPUs: refused */
    gpu("map:5", "0,1", 0, 1, -1, "not allocated");
    gpu("map:1", "00,01", 0, 1, 0, "1");

    /* OMP_NUM_THREADS */
    tap_ok(zt_omp_threads(8, 2) == 6, "8 CPUs, 2 dataloaders -> 6 OpenMP threads");
    tap_ok(zt_omp_threads(4, 0) == 4 && zt_omp_threads(4, -1) == 4, "no dataloaders -> all CPUs");
    tap_ok(zt_omp_threads(2, 5) == 1 && zt_omp_threads(0, 0) == 1, "never below 1");

    /* checkpoint directory */
    {
        char out[256];
        int rc = zt_ckpt_dir_default(out, sizeof out, "/scratch/ztrain", "/home/u", 42, 0, 0, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(out, "/scratch/ztrain/ztrain-42"), "ckpt_root/ztrain-<jobid>: %s", out);
        rc = zt_ckpt_dir_default(out, sizeof out, "", "/home/u/run/", 42, 0, 0, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(out, "/home/u/run/ztrain-42"), "submit dir when no ckpt_root: %s", out);
        rc = zt_ckpt_dir_default(out, sizeof out, NULL, "/home/u", 43, 40, 3, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(out, "/home/u/ztrain-40_3"), "array job: ztrain-<array job>_<task>: %s", out);
        rc = zt_ckpt_dir_default(out, sizeof out, "/", NULL, 7, 0, 0, err, sizeof err);
        tap_ok(rc == 0 && !strcmp(out, "/ztrain-7"), "root '/': %s", out);
        rc = zt_ckpt_dir_default(out, sizeof out, NULL, NULL, 7, 0, 0, err, sizeof err);
        tap_ok(rc == -1, "no root at all: error (%s)", err);
        rc = zt_ckpt_dir_default(out, 12, "/scratch/ztrain", NULL, 7, 0, 0, err, sizeof err);
        tap_ok(rc == -1 && strstr(err, "too long"), "too long: error");
    }

    /* restart count */
    tap_ok(zt_restart_count(NULL) == 0 && zt_restart_count("") == 0 && zt_restart_count("x") == 0 &&
               zt_restart_count("3") == 3 && zt_restart_count("-1") == 0,
           "SLURM_RESTART_COUNT parsing (unset/bad -> 0)");
    unsigned long v;
    tap_ok(zt_parse_ulong("18446744073709551616", (unsigned long)-1, &v) == -1 &&
               zt_parse_ulong("12", 11, &v) == -1 && zt_parse_ulong("11", 11, &v) == 0 && v == 11,
           "strict unsigned parsing with overflow and limit");
    return tap_done();
}
