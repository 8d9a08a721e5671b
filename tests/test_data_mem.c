/*
 * test_data_mem.c -- flat memory: reading batches from a 2 GB token dataset
 * does not grow resident memory with the dataset's size.
 *
 * Two sparse llm.c shards (header + ftruncate: no disk blocks, all tokens 0)
 * of 32 MB and 2 GB are opened with prefetching workers (which includes the
 * streaming vocab check over every token) and read for the same number of
 * batches spread over the whole file.  VmRSS (from /proc/self/status) is
 * sampled throughout: its growth must stay under 64 MB for the 2 GB
 * dataset and within 16 MB of the 32 MB dataset's.  Set ZT_DATA_MEM_TOKENS
 * to change the large size (tokens, <= 2^31-1).
 */
#include <fcntl.h>
#include <sys/stat.h>
#include "data.h"
#include "internal.h"
#include "tap.h"
#include "testutil.h"

static long rss_kb(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    if (!fp) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, "VmRSS:", 6)) { kb = atol(line + 6); break; }
    fclose(fp);
    return kb;
}

static int make_sparse(const char *path, long ntok) {
    int32_t h[256];
    memset(h, 0, sizeof h);
    h[0] = ZT_SHARD_MAGIC;
    h[1] = ZT_SHARD_VERSION;
    h[2] = (int32_t)ntok;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int ok = write(fd, h, sizeof h) == (ssize_t)sizeof h && ftruncate(fd, 1024 + 2 * (off_t)ntok) == 0;
    /* a few non-zero tokens spread over the file */
    for (long i = 1; ok && i < 64; ++i) {
        uint16_t v = (uint16_t)(i * 3);
        ok = pwrite(fd, &v, 2, 1024 + 2 * (off_t)(ntok / 64 * i)) == 2;
    }
    close(fd);
    return ok ? 0 : -1;
}

/* Open + read `steps` steps; returns peak RSS growth (kB) over the baseline. */
static long run(const char *path, long steps, double *open_s, double *read_s, int *ok) {
    const int T = 256, B = 16, A = 2;
    long base = rss_kb(), peak = base;
    zt_data_opts o;
    memset(&o, 0, sizeof o);
    o.pattern = path;
    o.kind = ZT_DATA_TRAIN;
    o.vocab = 256;
    o.T = T;
    o.seed = 7;
    o.micro_batch = B;
    o.grad_accum = A;
    o.world = 4;           /* this process plays rank 2 of 4 */
    o.rank = 2;
    o.workers = 2;
    zt_data_source ds;
    zt_status st;
    double t0 = zt_now_s();
    if (zt_data_open(&o, &ds, &st) != ZT_OK) { tap_diag("%s", st.msg); *ok = 0; return -1; }
    *open_s = zt_now_s() - t0;
    long r = rss_kb();
    if (r > peak) peak = r;
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    t0 = zt_now_s();
    *ok = 1;
    for (long s = 0; s < steps && *ok; ++s) {
        for (int m = 0; m < A && *ok; ++m)
            *ok = ds.get(ds.state, s, (uint64_t)2 * B * A + (uint64_t)m * B, B, T, in, tg, &st) == ZT_OK;
        if (s % 100 == 0 && (r = rss_kb()) > peak) peak = r;
    }
    *read_s = zt_now_s() - t0;
    if (!*ok) tap_diag("%s", st.msg);
    if ((r = rss_kb()) > peak) peak = r;
    ds.close(ds.state);
    free(in);
    free(tg);
    return peak - base;
}

int main(void) {
    if (rss_kb() < 0) { tap_skip_all("no /proc/self/status"); return 0; }
    char *dir = tu_tmpdir();
    char small[512], large[512];
    long nlarge = 1000000000L;   /* 2 GB */
    const char *e = getenv("ZT_DATA_MEM_TOKENS");
    if (e && atol(e) > 0 && atol(e) <= 0x7fffffffL) nlarge = atol(e);
    snprintf(small, sizeof small, "%s/small.bin", dir);
    snprintf(large, sizeof large, "%s/large.bin", dir);
    int ok1 = make_sparse(small, 16L * 1000 * 1000) == 0;
    int ok2 = make_sparse(large, nlarge) == 0;
    tap_ok(ok1 && ok2, "sparse shards of 32 MB and %.2f GB created", 2.0 * nlarge / 1e9);
    if (!ok1 || !ok2) { tu_rmdir(dir); return tap_done(); }

    const long steps = 2000;   /* 64,000 windows of 257 tokens, all over the file */
    double os, rs, ol, rl;
    int oks, okl;
    /* warm-up: first-touch costs of the process (libraries, allocator) */
    run(small, 50, &os, &rs, &oks);
    long gs = run(small, steps, &os, &rs, &oks);
    long gl = run(large, steps, &ol, &rl, &okl);
    tap_diag("32 MB dataset: open+scan %.2f s, %ld steps %.2f s, RSS growth %ld kB", os, steps, rs, gs);
    tap_diag("%.2f GB dataset: open+scan %.2f s, %ld steps %.2f s, RSS growth %ld kB", 2.0 * nlarge / 1e9, ol,
             steps, rl, gl);
    tap_ok(oks && okl, "both datasets opened and read (%ld steps x 2 micro-batches x 16 windows)", steps);
    tap_ok(gl >= 0 && gl < 64 * 1024, "RSS growth reading the %.2f GB dataset: %.1f MB < 64 MB",
           2.0 * nlarge / 1e9, gl / 1024.0);
    tap_ok(gl - gs < 16 * 1024, "RSS growth does not scale with the dataset (%.1f MB vs %.1f MB for 32 MB)",
           gl / 1024.0, gs / 1024.0);
    tu_rmdir(dir);
    return tap_done();
}
