/* test_run.c -- an embedding program runs a short training through the
 * public zt_run (run/ztrain_run.h) and gets what `ztrain train` gets for the
 * same configuration: the same loss on every step line (as printed), the same
 * metrics records' losses and the same final weights file, bit for bit; a bad
 * configuration comes back as a status, the program goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tap.h"
#include "ztrain.h"
#include "ztrain_run.h"

#define MAXL 64

typedef struct seen {
    char loss[MAXL][32];    /* the step lines' "loss X" fields */
    int nloss, nmetrics, nstartup, nnotes, saved;
    double metric_loss[MAXL];
} seen;

/* the loss field of a "step  N/M | loss X | ..." line into out; 0 if none */
static int loss_field(const char *line, char *out, size_t n) {
    if (strncmp(line, "step ", 5) != 0) return 0;
    const char *p = strstr(line, "| loss ");
    if (!p) return 0;
    p += 7;
    size_t k = strcspn(p, " |\n");
    if (k + 1 > n) return 0;
    memcpy(out, p, k);
    out[k] = '\0';
    return 1;
}

static void on_log(void *user, int level, const char *msg) {
    seen *s = user;
    (void)level;
    if (zt_world_rank() == 0 && s->nloss < MAXL &&
        loss_field(msg, s->loss[s->nloss], sizeof s->loss[0]))
        s->nloss++;
}
static void on_metrics(void *user, const zt_metrics *m) {
    seen *s = user;
    if (m->kind == ZT_METRIC_STEP && s->nmetrics < MAXL) s->metric_loss[s->nmetrics++] = m->loss;
}
static void on_startup(void *user, const zt_run_startup *su) {
    seen *s = user;
    s->nstartup += su->phase_s[ZT_RUN_DATA] >= 0.0 && su->ctx.num_params > 0;
}
static void on_note(void *user, const char *text) {
    seen *s = user;
    s->nnotes++;
    if (!strncmp(text, "saved weights to ", 17)) s->saved = 1;
}

/* the "loss" values of a metrics file (JSON lines), as written */
static int jsonl_losses(const char *path, char out[][32], int max) {
    FILE *fp = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (fp && n < max && fgets(line, sizeof line, fp)) {
        const char *p = strstr(line, "\"loss\": ");
        if (!p) continue;
        p += 8;
        size_t k = strcspn(p, ",}");
        if (k >= 32) k = 31;
        memcpy(out[n], p, k);
        out[n++][k] = '\0';
    }
    if (fp) fclose(fp);
    return n;
}

static int same_file(const char *a, const char *b) {
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int same = x && y, c, d;
    while (same && ((c = getc(x)) != EOF) + ((d = getc(y)) != EOF))
        same = c == d;
    if (x) fclose(x);
    if (y) fclose(y);
    return same;
}

static int set(zt_config *cfg, const char *key, const char *value) {
    zt_status st;
    int rc = zt_config_set(cfg, key, value, ZT_SRC_FLAG, &st);
    if (rc != ZT_OK) tap_diag("%s: %s", key, st.msg);
    return rc;
}

int main(int argc, char **argv) {
    const char *src = getenv("ZT_SRCDIR"), *build = getenv("ZT_BUILDDIR");
    if (!src) src = ".";
    if (!build) build = src;
    char dir[] = "/tmp/zt_test_run.XXXXXX", cmd[8192], tiny[4096];
    if (!mkdtemp(dir) || chdir(dir) != 0) { tap_skip_all("no temporary directory"); return 0; }
    snprintf(tiny, sizeof tiny, "%s/configs/tiny.json", src);
    const char *common = "--train c_train.bin --val c_val.bin --threads 1 --steps 3 --eval-every 3 "
                         "--log-every 1 --sample-tokens 0";
    /* the CLI's run first (before this process starts MPI) */
    snprintf(cmd, sizeof cmd,
             "head -c 200000 '%s/data/tinyshakespeare.txt' > corpus.txt && "
             "'%s/ztrain' prep --input corpus.txt --output c > /dev/null && "
             "'%s/ztrain' train --config '%s' %s --metrics cli.jsonl --ckpt-dir ckcli > cli.txt 2>&1",
             src, build, build, tiny, common);
    int cli_rc = system(cmd);
    tap_ok(cli_rc == 0, "ztrain train runs 3 steps");
    seen cli;
    memset(&cli, 0, sizeof cli);
    FILE *fp = fopen("cli.txt", "r");
    char line[4096];
    while (fp && cli.nloss < MAXL && fgets(line, sizeof line, fp))
        if (loss_field(line, cli.loss[cli.nloss], sizeof cli.loss[0])) cli.nloss++;
    if (fp) fclose(fp);

    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    seen run;
    memset(&run, 0, sizeof run);
    zt_config *cfg = zt_config_new();
    int rc = set(cfg, "ztrain.data.train", "c_train.bin") | set(cfg, "ztrain.data.val", "c_val.bin") |
             set(cfg, "ztrain.threads", "1") | set(cfg, "ztrain.steps", "3") |
             set(cfg, "ztrain.eval_every", "3") | set(cfg, "ztrain.log_every", "1") |
             set(cfg, "ztrain.metrics", "run.jsonl") | set(cfg, "ztrain.checkpoint.dir", "ckrun");
    tap_ok(rc == ZT_OK, "the embedding program sets its keys");
    zt_run_options o = zt_run_defaults();
    o.config_file = tiny;
    o.cb.log = on_log;
    o.cb.metrics = on_metrics;
    o.cb.user = &run;
    o.startup = on_startup;
    o.note = on_note;
    o.user = &run;
    zt_run_result r;
    rc = zt_run(cfg, &o, &r, &st);
    if (!tap_ok(rc == ZT_OK, "zt_run trains")) tap_diag("%s", st.msg);
    tap_ok(r.step == 3, "3 steps done (%ld)", r.step);
    tap_ok(r.checkpoint[0] != '\0' && strstr(r.checkpoint, "ckrun/step-3") != NULL,
           "the final checkpoint is named (%s)", r.checkpoint);
    tap_ok(run.nstartup == 1, "the startup callback ran once");
    tap_ok(run.nnotes >= 2 && run.saved, "notes: the effective configuration, the weights file");
    tap_ok(run.nmetrics == 3, "3 step metrics (%d)", run.nmetrics);

    tap_ok(cli.nloss == 3 && run.nloss == 3, "3 step lines each (ztrain train %d, zt_run %d)",
           cli.nloss, run.nloss);
    for (int i = 0; i < cli.nloss && i < run.nloss; ++i)
        tap_ok(!strcmp(cli.loss[i], run.loss[i]), "step %d: loss %s printed, %s from zt_run", i + 1,
               cli.loss[i], run.loss[i]);
    char a[MAXL][32], b[MAXL][32];
    int na = jsonl_losses("cli.jsonl", a, MAXL), nb = jsonl_losses("run.jsonl", b, MAXL);
    int same = na == 3 && nb == 3;
    for (int i = 0; same && i < na; ++i) same = !strcmp(a[i], b[i]);
    tap_ok(same, "the metrics files' losses are the same (%d, %d records)", na, nb);
    for (int i = 0; i < run.nmetrics && i < nb; ++i) {
        char f[32];
        snprintf(f, sizeof f, "%.4f", run.metric_loss[i]);
        tap_ok(i >= cli.nloss || !strcmp(f, cli.loss[i]), "step %d: the metrics callback's loss %s",
               i + 1, f);
    }
    tap_ok(same_file("ckcli/model.bin", "ckrun/model.bin"), "the same weights file, bit for bit");

    /* a configuration refused: a status, and this program goes on */
    zt_config *bad = zt_config_new();
    o = zt_run_defaults();
    o.config_file = "no-such-file.json";
    rc = zt_run(bad, &o, &r, &st);
    tap_ok(rc != ZT_OK && r.config_refused && r.report && strstr(st.msg, "no-such-file.json"),
           "a missing configuration file: code %d, refused, \"%s\"", rc, st.msg);
    fp = fopen("bad.json", "w");
    if (fp) { fputs("{\"ztrain\": {\"steps\": -5}}\n", fp); fclose(fp); }
    o.config_file = "bad.json";
    rc = zt_run(bad, &o, &r, &st);
    tap_ok(rc == ZT_EINVAL && r.config_refused && strstr(st.msg, "steps"),
           "ztrain.steps = -5: ZT_EINVAL, \"%s\"", st.msg);
    zt_config_free(bad);
    zt_config_free(cfg);
    zt_finalize();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tap_failed == 0 && system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
