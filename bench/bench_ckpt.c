/*
 * bench_ckpt.c -- checkpoint write and restore bandwidth (GB/s).
 *
 *   mpirun -np N bench/bench_ckpt [--shape L,H,C,V,T] [--stage S] [--dir DIR]
 *                                 [--repeat R] [--keep-files]
 *
 * Default shape: GPT-2 124M (12 layers, 12 heads, 768 wide, vocab 50257,
 * context 1024).  A checkpoint holds params, AdamW m and v in fp32: 12 bytes
 * per parameter.  Write = zt_ckpt_save (checksums, collective HDF5 write,
 * flush, fsync, rename, latest, prune).  Restore = zt_ckpt_restore in both
 * modes, each timed after the file's pages were dropped from the page cache
 * (posix_fadvise DONTNEED on clean pages: a cold read as far as this process
 * can arrange it) and once more warm.  GB = 1e9 bytes of tensor data.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "ztrain.h"
#include "ztrain_ckpt.h"

static double now(void) { return MPI_Wtime(); }

static void drop_cache(const char *file) {
    int fd = open(file, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static int set(zt_config *c, const char *k, const char *v) {
    zt_status st;
    if (zt_config_set(c, k, v, ZT_SRC_FLAG, &st) != ZT_OK) {
        fprintf(stderr, "bench_ckpt: %s\n", st.msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { fprintf(stderr, "bench_ckpt: %s\n", st.msg); return 1; }
    int rank = zt_world_rank(), world = zt_world_size();
    int L = 12, H = 12, C = 768, V = 50257, T = 1024, repeat = 3, keep_files = 0;
    const char *dir = NULL, *stage = "0";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d,%d,%d", &L, &H, &C, &V, &T) != 5) {
                if (!rank) fprintf(stderr, "bench_ckpt: --shape L,H,C,V,T\n");
                zt_finalize();
                return 2;
            }
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--stage") && i + 1 < argc) stage = argv[++i];
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep-files")) keep_files = 1;
        else {
            if (!rank) fprintf(stderr, "usage: bench_ckpt [--shape L,H,C,V,T] [--stage S] [--dir DIR] "
                               "[--repeat R] [--keep-files]\n");
            zt_finalize();
            return 2;
        }
    }
    char tmpl[256] = "";
    if (!dir) {
        if (rank == 0) {
            snprintf(tmpl, sizeof tmpl, "%s/bench_ckpt.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            if (!mkdtemp(tmpl)) { perror("mkdtemp"); tmpl[0] = 0; }
        }
        MPI_Bcast(tmpl, sizeof tmpl, MPI_CHAR, 0, MPI_COMM_WORLD);
        dir = tmpl;
    }
    zt_config *c = zt_config_new();
    char v[64];
    int bad = 0;
#define SETI(k, x) (snprintf(v, sizeof v, "%d", (x)), bad |= set(c, k, v))
    SETI("ztrain.model.n_layer", L);
    SETI("ztrain.model.n_head", H);
    SETI("ztrain.model.n_embd", C);
    SETI("ztrain.model.vocab", V);
    SETI("ztrain.model.context", T);
    SETI("train_micro_batch_size_per_gpu", 1);
    SETI("gradient_accumulation_steps", 1);
    bad |= set(c, "zero_optimization.stage", stage);
    bad |= set(c, "ztrain.data.train", "");
    bad |= set(c, "ztrain.data.val", "");
    zt_ctx *ctx = NULL;
    if (bad || zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) {
        if (!rank) fprintf(stderr, "bench_ckpt: %s\n", bad ? "bad option" : st.msg);
        zt_config_free(c);
        zt_finalize();
        return 1;
    }
    double P = (double)zt_ctx_num_params(ctx), bytes = P * 12.0;
    if (!rank)
        printf("bench_ckpt: %.1fM parameters (L%d H%d C%d V%d T%d), %d rank%s, stage %s, "
               "%.2f GB of tensors per checkpoint, dir %s\n",
               P / 1e6, L, H, C, V, T, world, world > 1 ? "s" : "", stage, bytes / 1e9, dir);
    double wbest = 1e30, wsum = 0;
    char path[1200], file[1300];
    for (int r = 0; r < repeat; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if (zt_ckpt_save(ctx, dir, 2, &st) != ZT_OK) { if (!rank) fprintf(stderr, "save: %s\n", st.msg); break; }
        MPI_Barrier(MPI_COMM_WORLD);
        double dt = now() - t0;
        wsum += dt;
        if (dt < wbest) wbest = dt;
        if (!rank) printf("  write %d: %.3f s  %.2f GB/s\n", r + 1, dt, bytes / 1e9 / dt);
    }
    snprintf(path, sizeof path, "%s/step-%ld", dir, zt_ctx_step(ctx));
    snprintf(file, sizeof file, "%s/%s", path, ZT_CKPT_FILE);
    const char *names[2] = {"one-reader", "parallel"};
    double rbest[2][2];
    for (int mode = 0; mode < 2; ++mode)
        for (int cold = 1; cold >= 0; --cold) {
            rbest[mode][cold] = 1e30;
            for (int r = 0; r < repeat; ++r) {
                if (cold && !rank) drop_cache(file);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now();
                if (zt_ckpt_restore(ctx, path, mode, &st) != ZT_OK) {
                    if (!rank) fprintf(stderr, "restore: %s\n", st.msg);
                    break;
                }
                MPI_Barrier(MPI_COMM_WORLD);
                double dt = now() - t0;
                if (dt < rbest[mode][cold]) rbest[mode][cold] = dt;
                if (!rank) printf("  restore %-10s %-4s %d: %.3f s  %.2f GB/s\n", names[mode],
                                  cold ? "cold" : "warm", r + 1, dt, bytes / 1e9 / dt);
            }
        }
    if (!rank) {
        printf("summary (best of %d): write %.2f GB/s (mean %.2f); restore one-reader %.2f GB/s cold, "
               "%.2f warm; parallel %.2f GB/s cold, %.2f warm\n", repeat, bytes / 1e9 / wbest,
               bytes / 1e9 / (wsum / repeat), bytes / 1e9 / rbest[0][1], bytes / 1e9 / rbest[0][0],
               bytes / 1e9 / rbest[1][1], bytes / 1e9 / rbest[1][0]);
        if (!keep_files && tmpl[0]) {
            char cmd[600];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
            if (system(cmd) != 0) fprintf(stderr, "bench_ckpt: could not remove %s\n", tmpl);
        }
    }
    zt_ctx_free(ctx);
    zt_config_free(c);
    zt_finalize();
    return 0;
}
