/*
 * test_data.c -- the data pipeline: permutation, epoch coverage for world
 * sizes 1-4, resume onto another world size, loader output independent of
 * the worker count, eval order, every bad input, HDF5 round trips, globs,
 * prep sharding.
 *
 * Ranks are simulated in one process: each rank gets its own source (its
 * rank only steers what it prefetches) and is asked exactly what the trainer
 * asks: for step s, micro m: first = rank*B*A + m*B, count B.
 */
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "data.h"
#include "tap.h"
#include "testutil.h"

static char g_dir[256];
static zt_status st;

/* Window k (global id) of an id-encoded dataset: tok[0..1] hold k, the rest
 * a k-dependent pattern, all < 65536. */
static void window_tokens(uint64_t k, int T, uint32_t *w) {
    w[0] = (uint32_t)(k & 0xffff);
    w[1] = (uint32_t)(k >> 16);
    for (int j = 2; j <= T; ++j) w[j] = (uint32_t)((k * 31 + (uint64_t)j * 7) & 0xffff);
}
static uint64_t decode_id(const int *in) { return (uint64_t)in[0] | ((uint64_t)in[1] << 16); }

/* Write file `name` holding windows [k0, k0+nw) of T+1 tokens plus `tail`
 * extra tokens; bin or HDF5 (elsize 2/4). */
static void write_windows(const char *name, uint64_t k0, int nw, int T, int tail, int h5, int elsize) {
    size_t n = (size_t)nw * (T + 1) + tail;
    uint32_t *t = malloc(n * sizeof *t);
    for (int w = 0; w < nw; ++w) window_tokens(k0 + w, T, t + (size_t)w * (T + 1));
    for (int j = 0; j < tail; ++j) t[(size_t)nw * (T + 1) + j] = 65535;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    int rc;
    if (h5) rc = zt_tokens_write_h5(p, t, n, elsize, 65536, &st);
    else {
        uint16_t *u = malloc(n * sizeof *u);
        for (size_t i = 0; i < n; ++i) u[i] = (uint16_t)t[i];
        rc = zt_tokens_write(p, u, n, &st);
        free(u);
    }
    if (rc) tap_diag("write %s: %s", p, st.msg);
    free(t);
}

static zt_data_opts train_opts(const char *pattern, int T, int B, int A, int world, int rank, int workers) {
    zt_data_opts o;
    memset(&o, 0, sizeof o);
    o.pattern = pattern;
    o.kind = ZT_DATA_TRAIN;
    o.vocab = 65536;
    o.T = T;
    o.seed = 1234;
    o.micro_batch = B;
    o.grad_accum = A;
    o.world = world;
    o.rank = rank;
    o.workers = workers;
    return o;
}

/* The global sample sequence seq[g] for steps [s0, s1) as seen by `world`
 * simulated ranks (each with its own source); ids decoded from the tokens.
 * Returns 0 on success. */
static int run_world(const char *pattern, int T, int B, int A, int world, int workers, long s0, long s1,
                     uint64_t *seq) {
    uint64_t G = (uint64_t)B * A * world;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    int rc = 0;
    for (int r = 0; r < world && !rc; ++r) {
        zt_data_opts o = train_opts(pattern, T, B, A, world, r, workers);
        zt_data_source ds;
        if (zt_data_open(&o, &ds, &st) != ZT_OK) { tap_diag("open: %s", st.msg); rc = -1; break; }
        for (long s = s0; s < s1 && !rc; ++s)
            for (int m = 0; m < A && !rc; ++m) {
                uint64_t first = (uint64_t)r * B * A + (uint64_t)m * B;
                if (ds.get(ds.state, s, first, B, T, in, tg, &st) != ZT_OK) { tap_diag("get: %s", st.msg); rc = -1; }
                for (int i = 0; i < B && !rc; ++i)
                    seq[(uint64_t)(s - s0) * G + first + i] = decode_id(in + (size_t)i * T);
            }
        ds.close(ds.state);
    }
    free(in);
    free(tg);
    return rc;
}

static int is_perm_of(const uint64_t *ids, uint64_t n) {
    unsigned char *seen = calloc(n, 1);
    int ok = 1;
    for (uint64_t i = 0; i < n && ok; ++i) {
        if (ids[i] >= n || seen[ids[i]]) ok = 0;
        else seen[ids[i]] = 1;
    }
    free(seen);
    return ok;
}

static int expect_open_fail(const char *pattern, int vocab, int T, int code, const char *n1, const char *n2,
                            const char *what) {
    zt_dataset *d = NULL;
    int rc = zt_dataset_open(pattern, vocab, T, &d, &st);
    int ok = rc == code && d == NULL && strstr(st.msg, n1) && (!n2 || strstr(st.msg, n2));
    if (!ok) tap_diag("%s: rc=%d msg='%s'", what, rc, rc ? st.msg : "");
    else tap_diag("%s", st.msg);
    zt_dataset_close(d);
    return tap_ok(ok, "%s", what);
}

static void raw_file(const char *path, const int32_t *hdr, const void *body, size_t nbody) {
    FILE *fp = fopen(path, "wb");
    fwrite(hdr, 4, 256, fp);
    if (nbody) fwrite(body, 1, nbody, fp);
    fclose(fp);
}

/* An HDF5 file with dataset `name` of the given type and dims (values 0..). */
static void h5_make(const char *path, const char *name, hid_t type, int ndims, hsize_t n, int chunked,
                    const char *fmt_attr, int version_attr) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {n, 2};
    hid_t sp = H5Screate_simple(ndims, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
        hsize_t ch[1] = {1000};
        H5Pset_chunk(dcpl, 1, ch);
        if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) H5Pset_deflate(dcpl, 4);
    }
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t total = (size_t)n * (ndims == 2 ? 2 : 1);
    uint32_t *v = malloc(total * sizeof *v);
    for (size_t i = 0; i < total; ++i) v[i] = (uint32_t)(i * 7 % 50000);
    H5Dwrite(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    free(v);
    if (fmt_attr) {
        hid_t s1 = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, strlen(fmt_attr));
        hid_t a = H5Acreate2(d, "format", t, s1, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, fmt_attr);
        H5Aclose(a); H5Tclose(t); H5Sclose(s1);
    }
    if (version_attr) {
        hid_t s1 = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(d, "version", H5T_STD_I32LE, s1, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT, &version_attr);
        H5Aclose(a); H5Sclose(s1);
    }
    H5Dclose(d); H5Pclose(dcpl); H5Sclose(sp); H5Fclose(f);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", tu_tmpdir());
    char pat[600], p[600], p2[600];

    /* ------------------------------------------------ permutation */
    {
        static const uint64_t ns[] = {1, 2, 3, 5, 7, 64, 100, 1000, 4097};
        int ok = 1;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; ++k) {
            uint64_t n = ns[k], *ids = malloc(n * sizeof *ids);
            for (uint64_t key = 0; key < 3; ++key) {
                for (uint64_t i = 0; i < n; ++i) ids[i] = zt_data_perm(i, n, key * 977 + 5);
                ok &= is_perm_of(ids, n);
            }
            free(ids);
        }
        tap_ok(ok, "zt_data_perm is a bijection on [0, n) for n in {1,2,3,5,7,64,100,1000,4097}");
        int differ = 0, fixed = 0;
        for (uint64_t i = 0; i < 1000; ++i) {
            differ += zt_data_perm(i, 1000, 1) != zt_data_perm(i, 1000, 2);
            fixed += zt_data_perm(i, 1000, 1) == i;
        }
        tap_ok(differ > 900 && fixed < 20, "different keys give different orders (%d/1000 differ, %d fixed points)",
               differ, fixed);
        tap_ok(zt_data_position(0, 32) == 0 && zt_data_position(7, 32) == 224 &&
               zt_data_position(3000000000L, 1024) == 3072000000000ULL,
               "zt_data_position(step, batch) = step * batch");
        uint64_t ids[2][96];
        for (uint64_t g = 0; g < 192; ++g) ids[g / 96][g % 96] = zt_data_train_sample(g, 96, 1234);
        int same = 0;
        for (int i = 0; i < 96; ++i) same += ids[0][i] == ids[1][i];
        tap_ok(is_perm_of(ids[0], 96) && is_perm_of(ids[1], 96) && same < 20,
               "zt_data_train_sample: each epoch of global indices is a fresh permutation (%d/96 equal)", same);
    }

    /* ------------------------------------------------ dataset: 3 shards, tails */
    const int T = 8;
    write_windows("ep_000.bin", 0, 40, T, 5, 0, 2);
    write_windows("ep_001.bin", 40, 30, T, 8, 0, 2);
    write_windows("ep_002.h5", 70, 26, T, 3, 1, 2);
    snprintf(pat, sizeof pat, "%s/ep_*", g_dir);
    {
        zt_dataset *d = NULL;
        int rc = zt_dataset_open(pat, 65536, T, &d, &st);
        tap_ok(rc == ZT_OK && d && d->nfiles == 3 && d->nsamples == 96,
               "glob of 2 llm.c shards + 1 HDF5 file: 96 windows (tails dropped)");
        if (rc) tap_diag("%s", st.msg);
        int ok = d != NULL;
        uint32_t w[T + 1], e[T + 1];
        for (uint64_t k = 0; ok && k < 96; ++k) {
            window_tokens(k, T, e);
            ok = zt_dataset_read(d, k, w, &st) == ZT_OK && !memcmp(w, e, sizeof w);
        }
        tap_ok(ok, "window k of the dataset is the k-th window in file order");
        zt_dataset_close(d);
    }

    /* ------------------------------------------------ epoch coverage, world 1-4 */
    /* global batch 12 = B*A*world for every world size */
    static const int BA[5][2] = {{0, 0}, {4, 3}, {3, 2}, {2, 2}, {3, 1}};
    const uint64_t G = 12, n = 96;
    const long spe = (long)(n / G);   /* steps per epoch */
    uint64_t *ref = calloc(3 * n, sizeof *ref), *seq = calloc(3 * n, sizeof *seq);
    for (int W = 1; W <= 4; ++W) {
        int B = BA[W][0], A = BA[W][1];
        int rc = run_world(pat, T, B, A, W, W % 2 ? 2 : 0, 0, 2 * spe, seq);
        tap_ok(rc == 0 && is_perm_of(seq, n),
               "world %d (B=%d, A=%d): one epoch covers every sample exactly once", W, B, A);
        int differ = 0;
        for (uint64_t i = 0; i < n; ++i) differ += seq[i] != seq[n + i];
        tap_ok(rc == 0 && is_perm_of(seq + n, n) && differ > (int)n / 2,
               "world %d: epoch 2 covers every sample once, in a different order (%d/%d positions differ)",
               W, differ, (int)n);
        if (W == 1) memcpy(ref, seq, 2 * n * sizeof *ref);
        else tap_ok(!memcmp(ref, seq, 2 * n * sizeof *ref),
                    "world %d: the global sample sequence equals world 1's", W);
    }
    /* n not a multiple of the global batch: epochs straddle steps */
    write_windows("odd_000.bin", 0, 50, T, 0, 0, 2);
    snprintf(p, sizeof p, "%s/odd_000.bin", g_dir);
    {
        int rc = run_world(p, T, 3, 2, 2, 1, 0, 13, seq);   /* 156 >= 3 epochs of 50 */
        tap_ok(rc == 0 && is_perm_of(seq, 50) && is_perm_of(seq + 50, 50) && is_perm_of(seq + 100, 50),
               "50 samples, global batch 12: g in [0,50), [50,100), [100,150) each cover every sample once");
    }

    /* ------------------------------------------------ resume onto another world size */
    {
        const long K = 5, E = 20;   /* resume at step 5 (mid-epoch), run to 20 (2.5 epochs) */
        int rc = run_world(pat, T, 3, 2, 2, 2, 0, E, seq);          /* world 2 from the start */
        uint64_t *res = calloc((size_t)(E - K) * G, sizeof *res);
        int rc2 = run_world(pat, T, 2, 2, 3, 2, K, E, res);         /* world 3 restarts at step K */
        tap_ok(rc == 0 && rc2 == 0 && !memcmp(seq + K * G, res, (size_t)(E - K) * G * sizeof *res),
               "resume at step %ld on world 3 continues world 2's sequence exactly", K);
        /* no repeat and no skip: first epoch = steps before K (world 2) + after (world 3) */
        uint64_t *mix = calloc(n, sizeof *mix);
        memcpy(mix, seq, (size_t)K * G * sizeof *mix);
        memcpy(mix + K * G, res, (n - K * G) * sizeof *mix);
        tap_ok(is_perm_of(mix, n), "steps 0..%ld on world 2 + %ld..%ld on world 3 see each sample exactly once",
               K - 1, K, spe - 1);
        rc2 = run_world(pat, T, 12, 1, 1, 0, K, E, res);            /* world 1, synchronous */
        tap_ok(rc2 == 0 && !memcmp(seq + K * G, res, (size_t)(E - K) * G * sizeof *res),
               "resume at step %ld on world 1 continues it too", K);
        free(mix);
        free(res);
    }

    /* ------------------------------------------------ workers: bitwise identical */
    {
        const int B = 3, A = 2, W = 2, R = 1;
        const long steps = 30;   /* > 3 epochs */
        size_t per = (size_t)B * T, total = (size_t)steps * A * per;
        int *out[4];
        int wk[4] = {0, 1, 4, 4};
        int depth[4] = {0, 0, 0, 1};
        int in[64], tg[64];
        uint64_t pref[4] = {0};
        for (int c = 0; c < 4; ++c) {
            out[c] = calloc(2 * total, sizeof(int));
            zt_data_opts o = train_opts(pat, T, B, A, W, R, wk[c]);
            o.depth = depth[c];
            zt_data_source ds;
            if (zt_data_open(&o, &ds, &st) != ZT_OK) { tap_diag("open: %s", st.msg); continue; }
            for (long s = 0; s < steps; ++s) {
                if (s == 12) {   /* an unexpected request (repeat of step 3) and a jump */
                    ds.get(ds.state, 3, (uint64_t)R * B * A, B, T, in, tg, &st);
                    ds.get(ds.state, 25, (uint64_t)R * B * A + B, B, T, in, tg, &st);
                }
                for (int m = 0; m < A; ++m) {
                    size_t at = ((size_t)s * A + m) * per;
                    ds.get(ds.state, s, (uint64_t)R * B * A + (uint64_t)m * B, B, T, out[c] + at,
                           out[c] + total + at, &st);
                }
            }
            zt_data_stats ss;
            zt_data_get_stats(&ds, &ss);
            pref[c] = ss.prefetched;
            ds.close(ds.state);
        }
        /* the synchronous reference, computed from the definition */
        int ok = 1;
        uint32_t w[T + 1];
        zt_dataset *d;
        zt_dataset_open(pat, 65536, T, &d, &st);
        for (long s = 0; s < steps && ok; ++s)
            for (int m = 0; m < A && ok; ++m)
                for (int i = 0; i < B && ok; ++i) {
                    uint64_t g = (uint64_t)s * B * A * W + (uint64_t)R * B * A + (uint64_t)m * B + i;
                    zt_dataset_read(d, zt_data_train_sample(g, d->nsamples, 1234), w, &st);
                    const int *x = out[0] + ((size_t)s * A + m) * per + (size_t)i * T;
                    const int *y = x + total;
                    for (int t = 0; t < T; ++t) ok &= x[t] == (int)w[t] && y[t] == (int)w[t + 1];
                }
        zt_dataset_close(d);
        tap_ok(ok, "synchronous loader output = the definition (perm of g = step*G + first + i)");
        tap_ok(!memcmp(out[0], out[1], 2 * total * sizeof(int)), "1 worker thread: bitwise identical to synchronous");
        tap_ok(!memcmp(out[0], out[2], 2 * total * sizeof(int)), "4 worker threads: bitwise identical to synchronous");
        tap_ok(!memcmp(out[0], out[3], 2 * total * sizeof(int)), "4 workers, queue depth 1: identical");
        tap_ok(pref[0] == 0 && pref[1] >= (uint64_t)(steps * A - 4) && pref[2] >= (uint64_t)(steps * A - 4),
               "workers served the batches from the prefetch queue (%llu, %llu of %ld)",
               (unsigned long long)pref[1], (unsigned long long)pref[2], steps * A);
        for (int c = 0; c < 4; ++c) free(out[c]);
    }

    /* ------------------------------------------------ eval order */
    {
        zt_data_opts o = train_opts(pat, T, 3, 1, 2, 1, 0);
        o.kind = ZT_DATA_EVAL;
        o.eval_batch = 10;   /* global: 5 per rank on 2 ranks */
        zt_data_source ds;
        int in[5 * T], tg[5 * T], ok = zt_data_open(&o, &ds, &st) == ZT_OK;
        for (int round = 0; ok && round < 12; ++round) {
            ok = ds.get(ds.state, -1 - round, 5, 5, T, in, tg, &st) == ZT_OK;
            for (int i = 0; ok && i < 5; ++i)
                ok = decode_id(in + i * T) == ((uint64_t)round * 10 + 5 + (uint64_t)i) % n;
        }
        tap_ok(ok, "eval round r, rank 1 of 2: samples (r*EB + first + i) mod n (EB global), in file order");
        ds.close(ds.state);
    }

    /* ------------------------------------------------ HDF5 round trips */
    {
        uint32_t tok[5000], back[5000];
        for (int i = 0; i < 5000; ++i) tok[i] = (uint32_t)((i * 7919) % 65536);
        snprintf(p, sizeof p, "%s/rt16.h5", g_dir);
        int rc = zt_tokens_write_h5(p, tok, 5000, 2, 65536, &st);
        zt_token_file *f = NULL;
        rc = rc ? rc : zt_tokens_open(p, 65536, &f, &st);
        int ok = rc == ZT_OK && f->elsize == 2 && f->ntok == 5000 && f->vocab_attr == 65536 &&
                 zt_tokens_read(f, 0, 5000, 0, back, &st) == ZT_OK && !memcmp(tok, back, sizeof tok);
        tap_ok(ok, "HDF5 uint16 round trip (5000 tokens, read with pread at the dataset offset)");
        if (!ok) tap_diag("%s", st.msg);
        zt_tokens_close(f);
        for (int i = 0; i < 5000; ++i) tok[i] = (uint32_t)((i * 104729u) % 100000u);
        snprintf(p, sizeof p, "%s/rt32.hdf5", g_dir);
        rc = zt_tokens_write_h5(p, tok, 5000, 4, 100000, &st);
        rc = rc ? rc : zt_tokens_open(p, 100000, &f, &st);
        ok = rc == ZT_OK && f->elsize == 4 && f->ntok == 5000 && f->vocab_attr == 100000 &&
             zt_tokens_read(f, 0, 5000, 100000, back, &st) == ZT_OK && !memcmp(tok, back, sizeof tok);
        tap_ok(ok, "HDF5 uint32 round trip with vocab 100000 > 65536");
        if (!ok) tap_diag("%s", st.msg);
        zt_tokens_close(f);
        rc = zt_tokens_open(p, 99999, &f, &st);
        tap_ok(rc == ZT_EDATA && strstr(st.msg, "rt32.hdf5") && strstr(st.msg, "byte offset") &&
               strstr(st.msg, "is >= vocab 99999"), "HDF5 uint32 token >= vocab: file and byte offset named");
        tap_diag("%s", st.msg);
        /* a uint32 HDF5 dataset trains through the loader with vocab > 65536 */
        zt_data_opts o = train_opts(p, 15, 2, 1, 1, 0, 2);
        o.vocab = 100000;
        zt_data_source ds;
        int in[30], tg[30];
        ok = zt_data_open(&o, &ds, &st) == ZT_OK;
        for (long s = 0; ok && s < 200; ++s) {
            ok = ds.get(ds.state, s, 0, 2, 15, in, tg, &st) == ZT_OK;
            for (int i = 0; ok && i < 30; ++i) ok = in[i] >= 0 && in[i] < 100000;
        }
        int big = 0;
        for (int i = 0; i < 30; ++i) big |= in[i] >= 65536;
        tap_ok(ok && big, "uint32 dataset through the loader: tokens above 65535 arrive intact");
        if (ok) ds.close(ds.state);
        /* chunked + deflate (e.g. written by h5py): read through the library */
        snprintf(p, sizeof p, "%s/chunked.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_U16LE, 1, 5000, 1, NULL, 0);
        rc = zt_tokens_open(p, 65536, &f, &st);
        ok = rc == ZT_OK && !f->direct && zt_tokens_read(f, 1234, 10, 50000, back, &st) == ZT_OK;
        for (int i = 0; ok && i < 10; ++i) ok = back[i] == (uint32_t)((1234 + i) * 7 % 50000);
        tap_ok(ok, "chunked/compressed /tokens without attributes is read through HDF5");
        zt_tokens_close(f);
        snprintf(p, sizeof p, "%s/bigendian.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_U32BE, 1, 3000, 0, ZT_H5_FORMAT, 1);
        rc = zt_tokens_open(p, 65536, &f, &st);
        ok = rc == ZT_OK && zt_tokens_read(f, 2990, 10, 50000, back, &st) == ZT_OK;
        for (int i = 0; ok && i < 10; ++i) ok = back[i] == (uint32_t)((2990 + i) * 7 % 50000);
        tap_ok(ok, "big-endian uint32 /tokens is converted on read");
        zt_tokens_close(f);
    }

    /* ------------------------------------------------ bad inputs */
    {
        int32_t h[256];
        memset(h, 0, sizeof h);
        uint16_t body[64];
        for (int i = 0; i < 64; ++i) body[i] = (uint16_t)i;
        h[0] = 12345; h[1] = 1; h[2] = 64;
        snprintf(p, sizeof p, "%s/magic.bin", g_dir);
        raw_file(p, h, body, sizeof body);
        expect_open_fail(p, 256, 8, ZT_EDATA, "magic.bin: bad magic 12345 at offset 0", NULL, "wrong magic");
        h[0] = ZT_SHARD_MAGIC; h[1] = 3;
        snprintf(p, sizeof p, "%s/version.bin", g_dir);
        raw_file(p, h, body, sizeof body);
        expect_open_fail(p, 256, 8, ZT_EDATA, "version.bin: unsupported version 3 at offset 4", NULL, "bad version");
        h[1] = 1; h[2] = 100;
        snprintf(p, sizeof p, "%s/trunc.bin", g_dir);
        raw_file(p, h, body, sizeof body);
        expect_open_fail(p, 256, 8, ZT_EDATA, "trunc.bin: truncated: header says 100 tokens", NULL, "truncated shard");
        h[2] = 10;
        snprintf(p, sizeof p, "%s/long.bin", g_dir);
        raw_file(p, h, body, sizeof body);
        expect_open_fail(p, 256, 8, ZT_EDATA, "long.bin: size mismatch: header says 10 tokens", NULL,
                         "size not matching the header");
        h[2] = 64;
        body[37] = 300;
        snprintf(p, sizeof p, "%s/vocab.bin", g_dir);
        raw_file(p, h, body, sizeof body);
        expect_open_fail(p, 256, 8, ZT_EDATA, "vocab.bin: token 300 at byte offset 1098 (token 37)",
                         "is >= vocab 256", "token >= vocab: file and byte offset named");
        body[37] = 37;
        snprintf(p, sizeof p, "%s/short.bin", g_dir);
        raw_file(p, h, body, 6 * 2);
        h[2] = 6;
        raw_file(p, h, body, 6 * 2);
        expect_open_fail(p, 256, 8, ZT_EDATA, "short.bin: 6 tokens, shorter than one sequence of 8", NULL,
                         "shard shorter than one sequence");
        snprintf(p, sizeof p, "%s/nothing_*.bin", g_dir);
        expect_open_fail(p, 256, 8, ZT_EIO, p, "no files match", "empty glob: message names the pattern");
        snprintf(p, sizeof p, "%s/missing.bin", g_dir);
        expect_open_fail(p, 256, 8, ZT_EIO, "missing.bin: cannot open", NULL, "missing file");
        /* one bad shard in a glob is named */
        write_windows("mix_000.bin", 0, 5, 8, 0, 0, 2);
        snprintf(p2, sizeof p2, "%s/vocab.bin", g_dir);
        snprintf(p, sizeof p, "%s/mix_001.bin", g_dir);
        rename(p2, p);
        snprintf(p, sizeof p, "%s/mix_*.bin", g_dir);
        expect_open_fail(p, 256, 8, ZT_EDATA, "mix_001.bin: token 300 at byte offset 1098", NULL,
                         "glob: the bad shard is named");
        /* HDF5 */
        snprintf(p, sizeof p, "%s/notokens.h5", g_dir);
        h5_make(p, "data", H5T_STD_U16LE, 1, 100, 0, NULL, 0);
        expect_open_fail(p, 256, 8, ZT_EDATA, "notokens.h5: no dataset /tokens", NULL, "HDF5 without /tokens");
        snprintf(p, sizeof p, "%s/float.h5", g_dir);
        h5_make(p, "tokens", H5T_IEEE_F32LE, 1, 100, 0, NULL, 0);
        expect_open_fail(p, 256, 8, ZT_EDATA, "float.h5: /tokens has the wrong dtype float32", NULL,
                         "HDF5 float32 tokens: wrong dtype");
        snprintf(p, sizeof p, "%s/int32.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_I32LE, 1, 100, 0, NULL, 0);
        expect_open_fail(p, 256, 8, ZT_EDATA, "int32.h5: /tokens has the wrong dtype int32", NULL,
                         "HDF5 int32 tokens: wrong dtype");
        snprintf(p, sizeof p, "%s/twod.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_U16LE, 2, 100, 0, NULL, 0);
        expect_open_fail(p, 256, 8, ZT_EDATA, "twod.h5: /tokens must be 1-D", NULL, "HDF5 2-D tokens");
        snprintf(p, sizeof p, "%s/ver.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_U16LE, 1, 100, 0, ZT_H5_FORMAT, 2);
        expect_open_fail(p, 65536, 8, ZT_EDATA, "ver.h5: unsupported version 2", NULL, "HDF5 bad version attribute");
        snprintf(p, sizeof p, "%s/fmt.h5", g_dir);
        h5_make(p, "tokens", H5T_STD_U16LE, 1, 100, 0, "something-else", 1);
        expect_open_fail(p, 65536, 8, ZT_EDATA, "fmt.h5: attribute format = 'something-else'", NULL,
                         "HDF5 wrong format attribute");
        uint32_t tk[4000];
        for (int i = 0; i < 4000; ++i) tk[i] = (uint32_t)(i % 200);
        tk[3001] = 250;
        snprintf(p, sizeof p, "%s/h5vocab.h5", g_dir);
        zt_tokens_write_h5(p, tk, 4000, 2, 0, &st);
        expect_open_fail(p, 200, 8, ZT_EDATA, "h5vocab.h5: token 250 at byte offset", "(token 3001) is >= vocab 200",
                         "HDF5 token >= vocab: file and byte offset");
        /* truncate an HDF5 file in its data */
        snprintf(p2, sizeof p2, "%s/h5trunc.h5", g_dir);
        zt_tokens_write_h5(p2, tk, 4000, 2, 0, &st);
        if (truncate(p2, 5000) != 0) tap_diag("truncate failed");
        expect_open_fail(p2, 65536, 8, ZT_EDATA, "h5trunc.h5", "truncated", "truncated HDF5 file");
        snprintf(p, sizeof p, "%s/text.h5", g_dir);
        FILE *fp = fopen(p, "w");
        fputs("this is not HDF5\n", fp);
        fclose(fp);
        expect_open_fail(p, 256, 8, ZT_EDATA, "text.h5: not a readable HDF5 file", NULL, "a .h5 file that is not HDF5");
        zt_data_source ds;
        zt_data_opts o = train_opts(p, 8, 2, 1, 1, 0, 2);
        int rc = zt_data_open(&o, &ds, &st);
        tap_ok(rc == ZT_EDATA && strstr(st.msg, "text.h5"), "zt_data_open passes the error on");
        /* a shard that changes under the loader: error at read time, named */
        write_windows("change.bin", 0, 20, 8, 0, 0, 2);
        snprintf(p, sizeof p, "%s/change.bin", g_dir);
        o = train_opts(p, 8, 2, 1, 1, 0, 2);
        o.vocab = 50000;
        int in[16], tg[16];
        rc = zt_data_open(&o, &ds, &st);
        if (rc == ZT_OK) {
            int fd = open(p, O_WRONLY);
            uint16_t big[180];
            for (int i = 0; i < 180; ++i) big[i] = 60000;
            if (pwrite(fd, big, sizeof big, 1024) != (ssize_t)sizeof big) tap_diag("pwrite");
            close(fd);
            int r2 = ds.get(ds.state, 0, 0, 2, 8, in, tg, &st);
            tap_ok(r2 == ZT_EDATA && strstr(st.msg, "change.bin: token 60000 at byte offset") &&
                   strstr(st.msg, "is >= vocab 50000"), "a token changed after open: caught on read, file and offset named");
            tap_diag("%s", st.msg);
            ds.close(ds.state);
        } else tap_ok(0, "open change.bin: %s", st.msg);
        write_windows("change.bin", 0, 20, 8, 0, 0, 2);
        o.vocab = 65536;
        rc = zt_data_open(&o, &ds, &st);
        if (rc == ZT_OK) {
            if (truncate(p, 1024 + 2 * 50) != 0) tap_diag("truncate");
            int r2 = ZT_OK;
            for (long s = 0; s < 40 && r2 == ZT_OK; ++s) r2 = ds.get(ds.state, s, 0, 2, 8, in, tg, &st);
            tap_ok(r2 == ZT_EDATA && strstr(st.msg, "change.bin") && strstr(st.msg, "truncated"),
                   "a shard truncated after open (prefetching workers): the error names the file");
            tap_diag("%s", st.msg);
            ds.close(ds.state);
        } else tap_ok(0, "reopen change.bin: %s", st.msg);
    }

    /* ------------------------------------------------ prep: shards, formats, re-shard */
    {
        snprintf(p, sizeof p, "%s/corpus.txt", g_dir);
        FILE *fp = fopen(p, "wb");
        for (int i = 0; i < 10007; ++i) fputc("abcdefghij\n"[i % 11], fp);
        fclose(fp);
        char prefix[600];
        snprintf(prefix, sizeof prefix, "%s/sh", g_dir);
        zt_prep_opts po;
        memset(&po, 0, sizeof po);
        po.input = p;
        po.prefix = prefix;
        po.val_fraction = 0.1;
        po.shard_tokens = 2000;
        zt_prep_result r;
        int rc = zt_prep(&po, &r, &st);
        tap_ok(rc == ZT_OK && r.ntrain == 9007 && r.nval == 1000 && r.train_files == 5 && r.val_files == 1,
               "prep --shard-tokens 2000: 9007 train tokens in 5 shards, 1000 val tokens in 1");
        if (rc) tap_diag("%s", st.msg);
        snprintf(pat, sizeof pat, "%s/sh_train_*.bin", g_dir);
        zt_dataset *d = NULL;
        rc = zt_dataset_open(pat, 256, 1, &d, &st);
        int ok = rc == ZT_OK && d->nfiles == 5;
        size_t pos = 0;
        for (int k = 0; ok && k < d->nfiles; ++k) {
            zt_token_file *f = d->files[k];
            ok = f->ntok == (k < 4 ? 2000u : 1007u);
            uint32_t buf[2000];
            ok = ok && zt_tokens_read(f, 0, f->ntok, 256, buf, &st) == ZT_OK;
            for (size_t i = 0; ok && i < f->ntok; ++i, ++pos) ok = buf[i] == (uint32_t)"abcdefghij\n"[pos % 11];
        }
        tap_ok(ok && pos == 9007, "the shards, in glob order, hold the input bytes in order");
        zt_dataset_close(d);
        /* re-shard them into one HDF5 file and compare */
        char prefix2[600];
        snprintf(prefix2, sizeof prefix2, "%s/re", g_dir);
        memset(&po, 0, sizeof po);
        po.tokens_in = pat;
        po.prefix = prefix2;
        po.format = ZT_FMT_H5;
        po.elsize = 4;
        rc = zt_prep(&po, &r, &st);
        snprintf(p2, sizeof p2, "%s/re_train.h5", g_dir);
        zt_token_file *f = NULL;
        ok = rc == ZT_OK && r.ntrain == 9007 && r.nval == 0 && zt_tokens_open(p2, 256, &f, &st) == ZT_OK &&
             f->elsize == 4 && f->ntok == 9007;
        uint32_t *all = malloc(9007 * sizeof *all);
        ok = ok && zt_tokens_read(f, 0, 9007, 256, all, &st) == ZT_OK;
        for (size_t i = 0; ok && i < 9007; ++i) ok = all[i] == (uint32_t)"abcdefghij\n"[i % 11];
        tap_ok(ok, "prep --tokens-in (glob) --format hdf5 --dtype uint32: one HDF5 file, same tokens");
        if (!ok) tap_diag("%s", st.msg);
        free(all);
        zt_tokens_close(f);
        /* failure leaves nothing behind */
        snprintf(prefix2, sizeof prefix2, "%s/nope/x", g_dir);
        memset(&po, 0, sizeof po);
        po.input = p;
        po.prefix = prefix2;
        po.val_fraction = 0.1;
        rc = zt_prep(&po, &r, &st);
        snprintf(p2, sizeof p2, "%s/nope/x_train.bin", g_dir);
        struct stat sb2;
        tap_ok(rc == ZT_OK && stat(p2, &sb2) == 0, "prep into a missing directory creates it");
        if (rc) tap_diag("%s", st.msg);
        /* an output directory that cannot be made: one error naming it, nothing written */
        snprintf(prefix2, sizeof prefix2, "%s/nope/x_train.bin/y/z", g_dir);
        rc = zt_prep(&po, &r, &st);
        tap_ok(rc == ZT_EIO && strstr(st.msg, "x_train.bin: exists and is not a directory"),
               "prep below a file: error names it (%s)", st.msg);
        memset(&po, 0, sizeof po);
        po.input = p;
        po.prefix = prefix;
        po.shard_tokens = 3000000000ULL;
        tap_ok(zt_prep(&po, &r, &st) == ZT_EINVAL, "a bin shard size above 2^31-1 tokens is refused");
    }

    /* ------------------------------------------------ llm.c uint32 shards (magic 20240801, version 7) */
    {
        char p[600];
        snprintf(p, sizeof p, "%s/v7.bin", g_dir);
        uint32_t tok[300];
        for (int i = 0; i < 300; ++i) tok[i] = 70000u + 1000u * (uint32_t)i;
        zt_tok_writer *w = NULL;
        int rc = zt_writer_open(p, ZT_FMT_BIN, 4, 300, 400000, &w, &st);
        if (rc == ZT_OK) rc = zt_writer_put(w, tok, 300, &st);
        if (rc == ZT_OK) rc = zt_writer_commit(w, &st);
        zt_writer_free(w);
        FILE *fp = fopen(p, "rb");
        int32_t h[3] = {0, 0, 0};
        int hok = fp && fread(h, 4, 3, fp) == 3;
        if (fp) fclose(fp);
        struct stat sb;
        tap_ok(rc == ZT_OK && hok && h[0] == 20240801 && h[1] == 7 && h[2] == 300 && stat(p, &sb) == 0 &&
               sb.st_size == 1024 + 4 * 300, "writer: a uint32 bin shard has llm.c's v7 header and 4-byte tokens");
        zt_token_file *f = NULL;
        uint32_t back[300];
        int ok = zt_tokens_open(p, 400000, &f, &st) == ZT_OK && f->elsize == 4 && f->ntok == 300 &&
                 zt_tokens_read(f, 0, 300, 400000, back, &st) == ZT_OK && !memcmp(back, tok, sizeof tok);
        tap_ok(ok, "reader: the v7 shard reads back (tokens above 65535)");
        zt_tokens_close(f);
        expect_open_fail(p, 300000, 8, ZT_EDATA, "v7.bin: token 300000 at byte offset 1944 (token 230) is >= vocab 300000",
                         NULL, "reader: v7 tokens are checked against the vocabulary");
        /* a truncated v7 shard names the 4-byte layout */
        if (truncate(p, 1024 + 4 * 299 + 2) == 0)
            expect_open_fail(p, 400000, 8, ZT_EDATA, "truncated: header says 300 tokens (2224 bytes)", NULL,
                             "reader: a truncated v7 shard is refused");
        else tap_ok(0, "truncate failed");
    }

    /* ------------------------------------------------ issue 31: a FIFO, thousands of shards */
    {
        /* a shard path naming a FIFO: refused by name, never a blocked open (the alarm fails the test) */
        snprintf(p, sizeof p, "%s/fifo.bin", g_dir);
        snprintf(p2, sizeof p2, "%s/fifo.h5", g_dir);
        if (mkfifo(p, 0600) == 0 && mkfifo(p2, 0600) == 0) {
            alarm(60);
            expect_open_fail(p, 256, 8, ZT_EIO, "fifo.bin: is a FIFO, not a regular file", NULL,
                             "a shard path naming a FIFO is refused (no blocking open)");
            expect_open_fail(p2, 256, 8, ZT_EIO, "fifo.h5: is a FIFO, not a regular file", NULL,
                             "an .h5 path naming a FIFO is refused (no blocking open)");
            alarm(0);
        } else tap_ok(0, "mkfifo failed");
        unlink(p); unlink(p2);
        /* 300 shards under a descriptor limit of 64: opened as needed, at most 16 open at once; every window
         * of every shard reads back (in a child: the limit stays there) */
        const int NS = 300;
        char sub[600];
        snprintf(sub, sizeof sub, "%s/many", g_dir);
        mkdir(sub, 0755);
        for (int i = 0; i < NS; ++i) {
            char name[64];
            snprintf(name, sizeof name, "many/s%03d.bin", i);
            write_windows(name, (uint64_t)i * 3, 3, T, 0, 0, 2);
        }
        snprintf(pat, sizeof pat, "%s/many/s*.bin", g_dir);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit rl = {64, 64};
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
            zt_dataset *d = NULL;
            if (zt_dataset_open(pat, 65536, T, &d, &st) != ZT_OK) { printf("# %s\n", st.msg); fflush(stdout); _exit(1); }
            uint32_t w[T + 1], e[T + 1];
            for (uint64_t k = 0; k < d->nsamples; ++k) {
                uint64_t s = (k * 7919) % d->nsamples;     /* scattered over the shards */
                window_tokens(s, T, e);
                if (zt_dataset_read(d, s, w, &st) != ZT_OK) { printf("# %s\n", st.msg); fflush(stdout); _exit(1); }
                if (memcmp(w, e, sizeof w)) { printf("# window %llu differs\n", (unsigned long long)s); fflush(stdout); _exit(1); }
            }
            int fds = 0;
            for (int fd = 0; fd < 64; ++fd) fds += fcntl(fd, F_GETFD) != -1;
            printf("# %llu windows read, %d descriptors open, at most %d shards open\n",
                   (unsigned long long)d->nsamples, fds, zt_tokens_open_max());
            fflush(stdout);
            _exit(d->nsamples == (uint64_t)NS * 3 && zt_tokens_open_max() == 16 && fds <= 16 + 8 ? 0 : 2);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "300 shards under a descriptor limit of 64: every window reads back, at most 16 shards open (exit %d)",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }

    /* ------------------------------------------------ default workers */
    {
        int w = zt_data_default_workers();
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long expect = cores / 2 < 1 ? 1 : (cores / 2 > 4 ? 4 : cores / 2);
        tap_ok(w >= 1 && w <= 4, "default workers %d (cores %ld, expected about %ld)", w, cores, expect);
    }

    free(ref);
    free(seq);
    tu_rmdir(g_dir);
    return tap_done();
}
