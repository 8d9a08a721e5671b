/*
 * test_ckpt.c -- checkpoints in one process: the checksum algorithm, the
 * flat-range hyperslab selection, save/restore round trips (one-reader and
 * parallel), the layout, keep/prune rules, stale .tmp cleanup, resume
 * equivalence through the step hook, preemption by a signal, corruption
 * detection, refusals (keep < 2, SIGUSR1, shape mismatch); the architecture
 * attributes (llama stored and compared naming the key; missing = GPT-2).
 */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "ctx.h"
#include "signals.h"
#include "tap.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

/* Independent restatement of the documented checksum. */
static uint64_t ref_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static uint64_t ref_checksum(const float *x, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t w;
        memcpy(&w, &x[i], 4);
        s += ref_mix(((uint64_t)i << 32) | w);
    }
    return s;
}

static uint64_t ref_checksum_from(const float *x, size_t n, uint64_t first) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t w;
        memcpy(&w, &x[i], 4);
        s += ref_mix(((first + i) << 32) | w);
    }
    return s;
}

typedef struct src { int V; int raise_at; } src;
static int src_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                   zt_status *st) {
    src *f = s;
    (void)st;
    if (f->raise_at > 0 && step == f->raise_at) raise(SIGUSR2);
    for (int i = 0; i < count; ++i)
        for (int t = 0; t < T; ++t) {
            uint64_t h = zt_hash3((uint64_t)step, first + (uint64_t)i, (uint64_t)t);
            in[i * T + t] = (int)(h % (uint64_t)f->V);
            tg[i * T + t] = (int)((h >> 20) % (uint64_t)f->V);
        }
    return ZT_OK;
}

static zt_config *cfg_for(const char *dir, int steps) {
    zt_config *c = tu_tiny_config(2, 2, 16, 8, 32, 2);
    tu_set(c, "ztrain.steps", "%d", steps);
    tu_set(c, "ztrain.checkpoint.dir", "%s", dir);
    tu_set(c, "scheduler.params.total_num_steps", "%d", 20);
    tu_set(c, "scheduler.params.warmup_num_steps", "%d", 2);
    tu_set(c, "optimizer.params.lr", "%s", "1e-2");
    return c;
}

static zt_ctx *make_ctx(zt_config *c, src *s) {
    zt_ctx *ctx = NULL;
    zt_status st;
    if (zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) { printf("# ctx: %s\n", st.msg); return NULL; }
    if (s) {
        zt_data_source d = {s, src_get, NULL, NULL}, none = {0};
        zt_ctx_set_data(ctx, d, none, &st);
    }
    return ctx;
}

static int exists(const char *fmt, const char *dir, const char *name) {
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, fmt, dir, name);
    return stat(p, &sb) == 0;
}

static int count_steps(const char *dir) {
    long *s;
    int n;
    zt_status st;
    if (ck_scan_steps(dir, &s, &n, &st) != ZT_OK) return -1;
    free(s);
    return n;
}

/* copy of params / m / v of every owned range, concatenated */
static float *snapshot(zt_ctx *ctx, size_t *n) {
    zt_train_state s;
    zt_status st;
    zt_ctx_owned_state(ctx, &s, &st);
    size_t tot = 0;
    for (int i = 0; i < s.n_ranges; ++i) tot += s.ranges[i].hi - s.ranges[i].lo;
    float *out = malloc(3 * tot * sizeof(float)), *p = out;
    for (int i = 0; i < s.n_ranges; ++i) {
        size_t k = s.ranges[i].hi - s.ranges[i].lo;
        memcpy(p, s.ranges[i].param, k * 4); p += k;
        memcpy(p, s.ranges[i].m, k * 4); p += k;
        memcpy(p, s.ranges[i].v, k * 4); p += k;
    }
    *n = 3 * tot;
    return out;
}
static void scramble(zt_ctx *ctx) {
    zt_train_state s;
    zt_status st;
    zt_ctx_owned_state(ctx, &s, &st);
    for (int i = 0; i < s.n_ranges; ++i)
        for (size_t k = 0; k < s.ranges[i].hi - s.ranges[i].lo; ++k) {
            s.ranges[i].param[k] = 123.0f;
            s.ranges[i].m[k] = -1.0f;
            s.ranges[i].v[k] = 7.0f;
        }
}

static void count_tensor(void *user, const zt_ckpt_tensor *t) {
    int *n = user;
    (*n)++;
    (void)t;
}
typedef struct badlist { int bad; char first[160]; } badlist;
static void note_bad(void *user, const zt_ckpt_tensor *t) {
    badlist *b = user;
    if (!t->ok && !b->bad++) snprintf(b->first, sizeof b->first, "%s", t->dataset);
}

/* Delete /model's architecture settings: a checkpoint as written before
 * the Llama family (architecture kept unless drop_arch), and so before the
 * metadata checksums (/meta_checksums deleted too). */
static int drop_arch_attrs(const char *file, int drop_arch) {
    static const char *const keys[] = {
        "n_kv_head", "head_dim", "intermediate_size", "rms_norm_eps", "rope_theta", "rope_scaling",
        "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
        "rope_original_max_positions", "attention_bias", "tie_embeddings", "architecture"};
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = f >= 0 ? H5Gopen2(f, "model", H5P_DEFAULT) : -1;
    int ok = g >= 0;
    for (size_t k = 0; ok && k < sizeof keys / sizeof keys[0] - !drop_arch; ++k)
        ok = H5Adelete(g, keys[k]) >= 0;
    if (ok) ok = H5Ldelete(f, "meta_checksums", H5P_DEFAULT) >= 0;
    if (g >= 0) H5Gclose(g);
    if (f >= 0) H5Fclose(f);
    return ok;
}

/* Delete one /model attribute: a checkpoint as written before the key
 * existed (/meta_checksums deleted too, as drop_arch_attrs). */
static int drop_attr(const char *file, const char *key) {
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = f >= 0 ? H5Gopen2(f, "model", H5P_DEFAULT) : -1;
    int ok = g >= 0 && H5Adelete(g, key) >= 0 && H5Ldelete(f, "meta_checksums", H5P_DEFAULT) >= 0;
    if (g >= 0) H5Gclose(g);
    if (f >= 0) H5Fclose(f);
    return ok;
}

/* ------------------------------------------------------------ watchdog */

static void wd_test_exit(const char *line, void *user) {
    ssize_t k = write(*(int *)user, line, strlen(line));
    (void)k;
    _exit(42);
}

/* A child arms the watchdog (1 s) for "phase A", stops itself (SIGSTOP) and
 * is continued by the parent after 1.6 s; it then calls `after` (1: re-arm
 * for "phase B", 2: disarm, 0: nothing, and no stop at all), waits 0.3 s
 * and exits 0.  Returns the child's exit status (42: the watchdog's handler
 * ran) and its line in line[]. */
static int wd_child(int after, char *line, size_t n) {
    int fds[2];
    line[0] = '\0';
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        zt_watchdog_set_handler(wd_test_exit, &fds[1]);
        zt_watchdog_arm(0, 2, 1.0, "phase A");
        if (after) kill(getpid(), SIGSTOP);
        else usleep(500000);
        if (after == 1) zt_watchdog_arm(0, 2, 1.0, "phase B");
        if (after == 2) zt_watchdog_disarm();
        usleep(300000);
        zt_watchdog_disarm();
        _exit(0);
    }
    close(fds[1]);
    int ws = 0;
    if (after) {
        if (waitpid(pid, &ws, WUNTRACED) != pid || !WIFSTOPPED(ws)) { kill(pid, SIGKILL); waitpid(pid, &ws, 0); close(fds[0]); return -1; }
        usleep(1600000);
        kill(pid, SIGCONT);
    }
    waitpid(pid, &ws, 0);
    ssize_t k = read(fds[0], line, n - 1);
    line[k > 0 ? k : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    close(fds[0]);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

int main(int argc, char **argv) {
    zt_status st;
    /* ---- the watchdog: a process stopped past an armed deadline ends at
     * its next arm or disarm, never re-armed (before MPI: the children
     * fork) ---- */
    {
        char line[512];
        int rc = wd_child(0, line, sizeof line);
        tap_ok(rc == 0 && !line[0], "watchdog: re-armed and disarmed in time: no report (exit %d)", rc);
        rc = wd_child(1, line, sizeof line);
        tap_ok(rc == 42 && strstr(line, "rank 0: phase A: no progress for 1 s"),
               "watchdog: stopped 1.6 s past a 1 s deadline, then re-armed: the phase is reported, "
               "not re-armed (exit %d: %s)", rc, line);
        rc = wd_child(2, line, sizeof line);
        tap_ok(rc == 42 && strstr(line, "rank 0: phase A: no progress for 1 s"),
               "watchdog: stopped past the deadline, then disarmed: reported (exit %d: %s)", rc, line);
    }
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    char *dir0 = tu_tmpdir();
    char dir[512], ck[600];
    snprintf(dir, sizeof dir, "%s", dir0);

    /* ---- checksum ---- */
    {
        float x[1000];
        for (int i = 0; i < 1000; ++i) x[i] = (float)i * 0.37f - 100.0f;
        uint64_t whole = zt_ckpt_checksum(x, 1000, 0);
        tap_ok(whole == ref_checksum(x, 1000), "checksum = sum of splitmix64((i<<32)|bits) mod 2^64");
        uint64_t parts = zt_ckpt_checksum(x, 333, 0) + zt_ckpt_checksum(x + 333, 600, 333) +
                         zt_ckpt_checksum(x + 933, 67, 933);
        tap_ok(parts == whole, "partial checksums of slices add up to the tensor's");
        float y[1000];
        memcpy(y, x, sizeof x);
        ((unsigned char *)y)[4 * 500 + 1] ^= 0x10;
        tap_ok(zt_ckpt_checksum(y, 1000, 0) != whole, "a flipped byte changes the checksum");
        memcpy(y, x, sizeof x);
        y[10] = x[11]; y[11] = x[10];
        tap_ok(zt_ckpt_checksum(y, 1000, 0) != whole, "swapped elements change the checksum");
        float z = 0.0f, nz = -0.0f;
        tap_ok(zt_ckpt_checksum(&z, 1, 0) != zt_ckpt_checksum(&nz, 1, 0), "+0 and -0 differ (bitwise)");
    }
    /* the vectorized paths (AVX2, AVX-512, the compiler's) against the
     * restatement: random bits, every length 0-40 and past the 2^16-element
     * blocks, unaligned starts, element indices past 2^32 (the index wraps
     * out of the top 32 bits) */
    {
        const size_t N = 200003;
        float *r = malloc((N + 8) * sizeof *r);
        uint64_t h = 12345;
        for (size_t i = 0; i < N + 8; ++i) {
            h = h * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t w = (uint32_t)(h >> 32);
            memcpy(&r[i], &w, 4);
        }
        const uint64_t firsts[] = {0, 5, 0xFFFFFFF0ULL, 0x123456789ULL};
        int bad = 0, cases = 0;
        for (int fi = 0; fi < 4; ++fi)
            for (int off = 0; off < 4; ++off) {
                for (size_t n = 0; n <= 40; ++n, ++cases)
                    bad += zt_ckpt_checksum(r + off, n, firsts[fi]) != ref_checksum_from(r + off, n, firsts[fi]);
                bad += zt_ckpt_checksum(r + off, N, firsts[fi]) != ref_checksum_from(r + off, N, firsts[fi]);
                ++cases;
            }
        tap_ok(bad == 0, "checksum equals the restatement for %d lengths, offsets and first indices "
               "(%d differ)", cases, bad);
        free(r);
    }

    /* ---- flat ranges as hyperslabs ---- */
    {
        hsize_t d[2] = {5, 7};
        uint64_t dims[2] = {5, 7};
        hid_t sp = H5Screate_simple(2, d, NULL);
        int good = 1;
        uint64_t cases[][2] = {{0, 35}, {3, 5}, {3, 7}, {3, 14}, {3, 30}, {7, 14}, {7, 35}, {6, 8}, {34, 35}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
            ck_select_flat(sp, 2, dims, cases[c][0], cases[c][1]);
            hssize_t n = H5Sget_select_npoints(sp);
            if (n != (hssize_t)(cases[c][1] - cases[c][0])) good = 0;
            /* every selected element is inside [a, b) */
            hsize_t nb = (hsize_t)H5Sget_select_hyper_nblocks(sp);
            hsize_t *bl = malloc(nb * 4 * sizeof(hsize_t));
            H5Sget_select_hyper_blocklist(sp, 0, nb, bl);
            for (hsize_t k = 0; k < nb; ++k)
                for (hsize_t r = bl[4 * k]; r <= bl[4 * k + 2]; ++r)
                    for (hsize_t q = bl[4 * k + 1]; q <= bl[4 * k + 3]; ++q) {
                        uint64_t flat = r * 7 + q;
                        if (flat < cases[c][0] || flat >= cases[c][1]) good = 0;
                    }
            free(bl);
        }
        ck_select_flat(sp, 2, dims, 4, 4);
        tap_ok(good && H5Sget_select_npoints(sp) == 0,
               "flat element ranges select exactly [a, b) of a 2-D tensor (<= 3 blocks)");
        H5Sclose(sp);
    }

    /* ---- refusals ---- */
    {
        zt_config *c = zt_config_new();
        tap_ok(zt_config_set(c, "ztrain.checkpoint.keep", "1", ZT_SRC_FLAG, &st) == ZT_EINVAL,
               "checkpoint.keep=1 refused (%s)", st.msg);
        int r = zt_config_set(c, "ztrain.preempt_signal", "SIGUSR1", ZT_SRC_FLAG, &st);
        tap_ok(r == ZT_EINVAL && strstr(st.msg, "NCCL"), "preempt_signal=SIGUSR1 refused, naming NCCL (%s)", st.msg);
        tap_ok(zt_config_set(c, "ztrain.preempt_signal", "sigterm", ZT_SRC_FLAG, &st) == ZT_OK,
               "preempt_signal=sigterm accepted");
        tap_ok(zt_config_set(c, "ztrain.checkpoint.restore", "parallel", ZT_SRC_FLAG, &st) == ZT_OK &&
               zt_config_set(c, "ztrain.checkpoint.restore", "two-readers", ZT_SRC_FLAG, &st) == ZT_EINVAL,
               "checkpoint.restore: one-reader | parallel");
        zt_config_free(c);
        int sig = 0;
        tap_ok(zt_signal_from_name("USR1", &sig, &st) == ZT_EINVAL && strstr(st.msg, "NCCL"),
               "zt_signal_from_name refuses SIGUSR1");
        c = zt_config_new();
        tap_ok(strcmp(c->ckpt_resume, "auto") == 0, "checkpoint.resume defaults to auto");
        zt_config_free(c);
    }

    /* ---- signals ---- */
    {
        zt_preempt_install(SIGUSR2, &st);
        raise(SIGUSR2);
        int sig = 0, aux = 5;
        zt_preempt_agree(NULL, &sig, &aux, &st);
        tap_ok(zt_preempt_local() == SIGUSR2 && sig == SIGUSR2 && aux == 5,
               "SIGUSR2 is caught and recorded (the process keeps running)");
        zt_preempt_clear();
        raise(SIGTERM);
        tap_ok(zt_preempt_local() == SIGTERM, "SIGTERM is caught too");
        zt_preempt_clear();
        zt_preempt_uninstall();
    }

    /* ---- save / restore round trip, layout ---- */
    src S = {32, 0};
    zt_config *c = cfg_for(dir, 6);
    zt_ctx *ctx = make_ctx(c, &S);
    if (!ctx) { tap_ok(0, "context"); return tap_done(); }
    for (int i = 0; i < 3; ++i) zt_train_step(ctx, NULL, &st);
    size_t n1;
    float *before = snapshot(ctx, &n1);
    int rc = zt_ckpt_save(ctx, dir, 2, &st);
    tap_ok(rc == ZT_OK, "zt_ckpt_save at step 3 (%s)", st.msg);
    tap_ok(exists("%s/%s", dir, "step-3/state.h5") && !exists("%s/%s", dir, "step-3.tmp"),
           "step-3/state.h5 committed, no step-3.tmp left");
    {
        char p[700], line[64] = "";
        snprintf(p, sizeof p, "%s/latest", dir);
        FILE *fp = fopen(p, "r");
        if (fp) { if (!fgets(line, sizeof line, fp)) line[0] = 0; fclose(fp); }
        tap_ok(strcmp(line, "step-3\n") == 0, "latest names step-3");
    }
    snprintf(ck, sizeof ck, "%s/step-3", dir);
    zt_ckpt_info in;
    rc = zt_ckpt_read_info(ck, &in, &st);
    tap_ok(rc == ZT_OK && in.step == 3 && in.adam_t == 3 && in.world_size == 1 && in.n_layer == 2 &&
           in.num_params == zt_ctx_num_params(ctx) && in.format_version == 1 && in.config_json &&
           strstr(in.config_json, "\"steps\": 6") && in.has_master == 0 && in.train_batch_size == 2 &&
           in.sample_position == 6 && in.meta_checksums == 1,
           "header: step, adam_t, world, model, version, config JSON, data position, metadata checksums verified (%s)", st.msg);
    zt_ckpt_info_free(&in);
    int ntens = 0;
    zt_ckpt_tensors(ck, count_tensor, &ntens, &st);
    tap_ok(ntens == 3 * (4 + 2 * 12), "params, optimizer/m, optimizer/v: one dataset per tensor (%d)", ntens);
    tap_ok(zt_ckpt_verify(ck, NULL, NULL, &st) == ZT_OK, "verify passes (%s)", st.msg);

    for (int mode = 0; mode < 2; ++mode) {
        scramble(ctx);
        rc = zt_ckpt_restore(ctx, ck, mode, &st);
        size_t n2;
        float *after = snapshot(ctx, &n2);
        tap_ok(rc == ZT_OK && n1 == n2 && memcmp(before, after, n1 * 4) == 0 && zt_ctx_step(ctx) == 3,
               "%s restore gives back params, m, v bitwise and the step (%s)",
               mode ? "parallel" : "one-reader", st.msg);
        free(after);
    }
    free(before);

    /* ---- keep / prune / abandoned timeline ---- */
    tap_ok(zt_ckpt_save(ctx, dir, 1, &st) == ZT_EINVAL, "zt_ckpt_save refuses keep=1");
    zt_ctx *pc = ctx;
    for (long s = 4; s <= 7; ++s) {
        pc->step = s;
        zt_ckpt_save(pc, dir, 3, &st);
    }
    tap_ok(count_steps(dir) == 3 && exists("%s/%s", dir, "step-5") && exists("%s/%s", dir, "step-7") &&
           !exists("%s/%s", dir, "step-4"), "keep=3: exactly the newest 3 checkpoints remain");
    pc->step = 6;
    zt_ckpt_save(pc, dir, 3, &st);
    tap_ok(!exists("%s/%s", dir, "step-7") && exists("%s/%s", dir, "step-6") && exists("%s/%s", dir, "step-5"),
           "saving step 6 after step 7 removes step-7 (an abandoned timeline) and replaces step-6");
    zt_ctx_free(ctx);
    zt_config_free(c);

    /* ---- stale .tmp cleaned on start; resume auto; equivalence through the hook ---- */
    {
        char d2[600], p[700];
        snprintf(d2, sizeof d2, "%s/run", dir);
        /* uninterrupted: 10 steps with the hook (final checkpoint at 10) */
        zt_config *ca = cfg_for(d2, 10);
        tu_set(ca, "ztrain.checkpoint.dir", "%s/a", d2);
        zt_ctx *a = make_ctx(ca, &S);
        zt_ckpt_session *sa = NULL;
        rc = zt_ckpt_attach(a, &sa, &st);
        if (rc == ZT_OK) rc = zt_train(a, &st);
        tap_ok(rc == ZT_OK, "10 steps with checkpoints attached (%s)", st.msg);
        zt_ckpt_detach(sa);
        size_t na;
        float *fa = snapshot(a, &na);

        /* interrupted: 5 steps (checkpoint.every=5), then a new context resumes */
        zt_config *cb = cfg_for(d2, 10);
        tu_set(cb, "ztrain.checkpoint.dir", "%s/b", d2);
        tu_set(cb, "ztrain.checkpoint.every", "%d", 5);
        tu_set(cb, "ztrain.steps", "%d", 5);
        zt_ctx *b = make_ctx(cb, &S);
        zt_ckpt_session *sb = NULL;
        rc = zt_ckpt_attach(b, &sb, &st);
        if (rc == ZT_OK) rc = zt_train(b, &st);
        zt_ckpt_detach(sb);
        zt_ctx_free(b);
        snprintf(p, sizeof p, "%s/b/step-99.tmp", d2);
        mkdir(p, 0777);
        snprintf(p, sizeof p, "%s/b/latest.tmp", d2);
        FILE *fp = fopen(p, "w");
        if (fp) fclose(fp);
        tu_set(cb, "ztrain.steps", "%d", 10);
        b = make_ctx(cb, &S);
        rc = zt_ckpt_attach(b, &sb, &st);
        tap_ok(rc == ZT_OK && zt_ctx_step(b) == 5, "resume=auto continues at step 5 (%s)", st.msg);
        snprintf(p, sizeof p, "%s/b", d2);
        tap_ok(!exists("%s/%s", p, "step-99.tmp") && !exists("%s/%s", p, "latest.tmp"),
               "stale step-99.tmp and latest.tmp removed at start");
        if (rc == ZT_OK) rc = zt_train(b, &st);
        zt_ckpt_detach(sb);
        size_t nb;
        float *fb = snapshot(b, &nb);
        tap_ok(rc == ZT_OK && na == nb && memcmp(fa, fb, na * 4) == 0,
               "5 + save + resume + 5 steps == 10 steps, bitwise (params, m, v)");
        tap_ok(exists("%s/%s", p, "step-10") && exists("%s/%s", p, "step-5"),
               "final checkpoint saved at the last step");
        free(fa);
        free(fb);
        zt_ctx_free(a);
        zt_ctx_free(b);

        /* preemption: SIGUSR2 during step 7 -> checkpoint at 7, ZT_EPREEMPTED */
        zt_config *cc = cfg_for(d2, 10);
        tu_set(cc, "ztrain.checkpoint.dir", "%s/c", d2);
        tu_set(cc, "ztrain.requeue", "%s", "false");
        src S7 = {32, 6};   /* step index 6 = the 7th step */
        zt_ctx *cx = make_ctx(cc, &S7);
        zt_ckpt_session *sc = NULL;
        rc = zt_ckpt_attach(cx, &sc, &st);
        if (rc == ZT_OK) rc = zt_train(cx, &st);
        snprintf(p, sizeof p, "%s/c", d2);
        tap_ok(rc == ZT_EPREEMPTED && zt_ctx_step(cx) == 7 && exists("%s/%s", p, "step-7"),
               "SIGUSR2 during step 7: checkpoint step-7 saved, zt_train returns ZT_EPREEMPTED (%s)", st.msg);
        zt_ckpt_detach(sc);
        zt_ctx_free(cx);
        S7.raise_at = 0;
        cx = make_ctx(cc, &S7);
        rc = zt_ckpt_attach(cx, &sc, &st);
        if (rc == ZT_OK) rc = zt_train(cx, &st);
        float *fc = snapshot(cx, &nb);
        a = make_ctx(ca, &S);     /* fresh uninterrupted reference without hooks */
        for (int i = 0; i < 10; ++i) zt_train_step(a, NULL, &st);
        fa = snapshot(a, &na);
        tap_ok(rc == ZT_OK && na == nb && memcmp(fa, fc, na * 4) == 0,
               "after the preemption, resume finishes bitwise equal to an uninterrupted run");
        free(fa);
        free(fc);
        zt_ckpt_detach(sc);
        zt_ctx_free(cx);
        zt_ctx_free(a);

        /* corruption: flip a byte of params/h1.mlp.fc.w in c/step-10 */
        snprintf(p, sizeof p, "%s/c/step-10/state.h5", d2);
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t ds = H5Dopen2(f, "params/h1.mlp.fc.w", H5P_DEFAULT);
        haddr_t off = H5Dget_offset(ds);
        H5Dclose(ds);
        H5Fclose(f);
        fp = fopen(p, "r+b");
        int c0 = -1;
        if (fp && off != HADDR_UNDEF) {
            fseek(fp, (long)off + 101, SEEK_SET);
            c0 = fgetc(fp);
            fseek(fp, (long)off + 101, SEEK_SET);
            fputc(c0 ^ 0x40, fp);
        }
        if (fp) fclose(fp);
        badlist bl = {0, ""};
        snprintf(p, sizeof p, "%s/c/step-10", d2);
        rc = zt_ckpt_verify(p, note_bad, &bl, &st);
        tap_ok(rc == ZT_EDATA && bl.bad == 1 && !strcmp(bl.first, "params/h1.mlp.fc.w") &&
               strstr(st.msg, "params/h1.mlp.fc.w"), "verify names the corrupted tensor (%s)", st.msg);
        char out[700];
        snprintf(out, sizeof out, "%s/x.safetensors", d2);
        tap_ok(zt_ckpt_export_safetensors(p, out, 0, &st) == ZT_EDATA && !exists("%s%s", out, ""),
               "export refuses a corrupt checkpoint and writes nothing");
        cx = make_ctx(cc, &S7);
        rc = zt_ckpt_attach(cx, &sc, &st);
        snprintf(p, sizeof p, "%s/c", d2);
        tap_ok(rc == ZT_OK && zt_ctx_step(cx) == 7 && !exists("%s/%s", p, "step-10"),
               "resume=auto falls back from the corrupt step-10 to step-7 and quarantines it (%s)", st.msg);
        zt_ckpt_detach(sc);
        zt_ctx_free(cx);

        /* shape mismatch */
        zt_config *cd = cfg_for(d2, 10);
        tu_set(cd, "ztrain.model.n_embd", "%d", 32);
        tu_set(cd, "ztrain.checkpoint.dir", "%s/c", d2);
        cx = make_ctx(cd, &S7);
        rc = zt_ckpt_attach(cx, &sc, &st);
        tap_ok(rc == ZT_EINVAL && strstr(st.msg, "differs from the configured one"),
               "resuming a different model shape is refused with both shapes (%s)", st.msg);
        zt_ckpt_detach(sc);
        zt_ctx_free(cx);
        zt_config_free(cd);
        zt_config_free(ca);
        zt_config_free(cb);
        zt_config_free(cc);
    }

    /* ---- the architecture attributes: stored, compared, defaulted ---- */
    {
        char d4[600], p[700];
        snprintf(d4, sizeof d4, "%s/arch", dir);
        src S = {32, 0};
        /* llama (multi-query, untied) */
        zt_config *cl = cfg_for(d4, 2);
        tu_set(cl, "ztrain.model.arch", "llama");
        tu_set(cl, "ztrain.model.n_kv_head", "1");
        tu_set(cl, "ztrain.model.tie_embeddings", "false");
        zt_ctx *cx = make_ctx(cl, &S);
        int rc = cx ? zt_train(cx, &st) : ZT_EINTERNAL;
        if (rc == ZT_OK) rc = zt_ckpt_save(cx, d4, 2, &st);
        snprintf(p, sizeof p, "%s/step-2/state.h5", d4);
        zt_ckpt_info in;
        int rinfo = rc == ZT_OK ? zt_ckpt_read_info(p, &in, &st) : rc;
        tap_ok(rinfo == ZT_OK && !strcmp(in.model.arch, "llama") && in.model.n_kv_head == 1 && in.model.head_dim == 8 &&
                   in.model.intermediate == 64 && in.model.tie_embeddings == 0 && in.model.attention_bias == 0 &&
                   in.model.norm_eps == 1e-5 && in.model.rope_theta == 10000 && !strcmp(in.model.rope_scaling, "none"),
               "a llama checkpoint stores its architecture and settings (%s)", rinfo ? st.msg : "");
        if (rinfo == ZT_OK) zt_ckpt_info_free(&in);
        zt_ctx_free(cx);
        cx = make_ctx(cl, &S);
        tap_ok(cx && zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) == ZT_OK,
               "it restores into the same configuration");
        zt_ctx_free(cx);
        tu_set(cl, "ztrain.model.n_kv_head", "2");
        cx = make_ctx(cl, &S);
        rc = cx ? zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) : ZT_EINTERNAL;
        tap_ok(rc == ZT_EINVAL && strstr(st.msg, "ztrain.model.n_kv_head is 1 in the checkpoint, 2 configured"),
               "another n_kv_head is refused naming the key (%s)", st.msg);
        zt_ctx_free(cx);
        tu_set(cl, "ztrain.model.n_kv_head", "1");
        /* a checkpoint without a window (or from before windows existed):
         * a configured window no shorter than the training length
         * (Mistral's 4096) computes the same and restores; a shorter one
         * (which computes otherwise) is refused */
        tu_set(cl, "ztrain.model.sliding_window", "4096");
        cx = make_ctx(cl, &S);
        rc = cx ? zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) : ZT_EINTERNAL;
        tap_ok(rc == ZT_OK, "a checkpoint without a window restores with a configured window >= the training length (%s)",
               rc ? st.msg : "");
        zt_ctx_free(cx);
        tu_set(cl, "ztrain.model.sliding_window", "3");
        cx = make_ctx(cl, &S);
        rc = cx ? zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) : ZT_EINTERNAL;
        tap_ok(rc == ZT_EINVAL && strstr(st.msg, "ztrain.model.sliding_window is 0 in the checkpoint, 3 configured"),
               "... and is refused with a window shorter than the training length (%s)", st.msg);
        zt_ctx_free(cx);
        tu_set(cl, "ztrain.model.sliding_window", "0");
        cx = make_ctx(cl, &S);
        rc = drop_arch_attrs(p, 1) && cx ? zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) : ZT_EINTERNAL;
        tap_ok(rc == ZT_EINVAL && strstr(st.msg, "ztrain.model.arch is gpt2 in the checkpoint, llama configured"),
               "without the attributes a checkpoint is a GPT-2's: the llama model refuses it (%s)", st.msg);
        zt_ctx_free(cx);
        zt_config_free(cl);
        /* the padding row (pad_token_id): stored; another one, or none in a
         * checkpoint from before the key (which reads as -1), restores: it
         * changes no weight, the configured one trains on */
        snprintf(d4, sizeof d4, "%s/arch-pad", dir);
        cl = cfg_for(d4, 2);
        tu_set(cl, "ztrain.model.arch", "llama");
        tu_set(cl, "ztrain.model.pad_token_id", "3");
        cx = make_ctx(cl, &S);
        rc = cx ? zt_train(cx, &st) : ZT_EINTERNAL;
        if (rc == ZT_OK) rc = zt_ckpt_save(cx, d4, 2, &st);
        zt_ctx_free(cx);
        snprintf(p, sizeof p, "%s/step-2/state.h5", d4);
        rinfo = rc == ZT_OK ? zt_ckpt_read_info(p, &in, &st) : rc;
        tap_ok(rinfo == ZT_OK && in.model.pad_token_id == 3, "a llama checkpoint stores pad_token_id (%d%s%s)",
               rinfo == ZT_OK ? in.model.pad_token_id : -2, rinfo ? ": " : "", rinfo ? st.msg : "");
        if (rinfo == ZT_OK) zt_ckpt_info_free(&in);
        rinfo = drop_attr(p, "pad_token_id") ? zt_ckpt_read_info(p, &in, &st) : ZT_EINTERNAL;
        tap_ok(rinfo == ZT_OK && in.model.pad_token_id == -1,
               "without the attribute (a checkpoint from before it) pad_token_id reads as -1 (%d)",
               rinfo == ZT_OK ? in.model.pad_token_id : -2);
        if (rinfo == ZT_OK) zt_ckpt_info_free(&in);
        cx = make_ctx(cl, &S);
        rc = cx ? zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) : ZT_EINTERNAL;
        tap_ok(rc == ZT_OK, "... and restores into a configuration with pad_token_id 3 (%s)", rc ? st.msg : "");
        zt_ctx_free(cx);
        zt_config_free(cl);
        /* a GPT-2 checkpoint written before the attributes existed */
        snprintf(d4, sizeof d4, "%s/arch-gpt", dir);
        zt_config *cg = cfg_for(d4, 2);
        cx = make_ctx(cg, &S);
        rc = cx ? zt_train(cx, &st) : ZT_EINTERNAL;
        if (rc == ZT_OK) rc = zt_ckpt_save(cx, d4, 2, &st);
        zt_ctx_free(cx);
        snprintf(p, sizeof p, "%s/step-2/state.h5", d4);
        rinfo = rc == ZT_OK && drop_arch_attrs(p, 0) ? zt_ckpt_read_info(p, &in, &st) : ZT_EINTERNAL;
        tap_ok(rinfo == ZT_OK && !strcmp(in.model.arch, "gpt2") && in.model.n_kv_head == 2 && in.model.head_dim == 8 &&
                   in.model.intermediate == 64 && in.model.tie_embeddings == 1 && in.model.rope_original_max == 8192 &&
                   in.model.rope_factor == 8 && !strcmp(in.model.rope_scaling, "none") && in.meta_checksums == 0,
               "a checkpoint without the settings reads as the GPT-2 defaults (and without "
               "metadata checksums: accepted, meta_checksums = 0)");
        if (rinfo == ZT_OK) zt_ckpt_info_free(&in);
        cx = make_ctx(cg, &S);
        tap_ok(cx && zt_ckpt_restore(cx, p, ZT_CKPT_ONE_READER, &st) == ZT_OK,
               "and restores into the GPT (%s)", cx ? st.msg : "");
        zt_ctx_free(cx);
        zt_config_free(cg);
    }

    tu_rmdir(dir);
    zt_finalize();
    return tap_done();
}
