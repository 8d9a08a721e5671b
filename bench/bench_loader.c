/*
 * bench_loader.c -- data loader throughput against the trainer's consumption,
 * both measured in the same run on the same data.
 *
 *   bench_loader [--config FILE] [--data PATTERN] [--tokens N] [--steps N]
 *                [--train-steps N] [--workers LIST]
 *
 * 1. Loader alone: tokens/s that get() delivers on this rank for the
 *    config's micro-batch, accumulation and context (the trainer's exact
 *    request sequence), synchronously (0 workers) and with each worker count
 *    in LIST (default 1,2,4), no compute in between.
 * 2. Trainer: --train-steps optimizer steps of the config's model on the same
 *    data with the default loader (ztrain.data.dataloaders = auto): tokens/s
 *    consumed per rank, and the time spent waiting in get() (data_wait_ms)
 *    as a fraction of the step time.
 * The ratio loader/trainer says how much faster the loader is than needed.
 * Without --data it writes a synthetic llm.c shard of --tokens tokens
 * (default 32M = 64 MB) to a temporary directory and removes it after.
 * Runs under mpirun too (each rank reads its slice; rank 0 prints).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "data.h"
#include "internal.h"
#include "ztrain_io.h"

typedef struct wait_acc { double wait_ms, step_ms; int n; } wait_acc;

static void on_metrics(void *user, const zt_metrics *m) {
    wait_acc *a = user;
    if (m->kind != ZT_METRIC_STEP || m->step == 1) return;   /* step 1: warm-up */
    a->wait_ms += m->data_wait_ms;
    a->step_ms += m->step_ms;
    a->n++;
}

static int die(const char *what, const zt_status *st) {
    fprintf(stderr, "bench_loader: %s: %s\n", what, st->msg);
    zt_finalize();
    return 1;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) return die("init", &st);
    const char *config = NULL, *data = NULL, *wlist = "1,2,4";
    long ntok = 32L * 1000 * 1000, steps = 2000, train_steps = 30;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) ntok = atol(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--train-steps") && i + 1 < argc) train_steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc) wlist = argv[++i];
        else {
            fprintf(stderr, "usage: bench_loader [--config FILE] [--data PATTERN] [--tokens N] [--steps N] "
                            "[--train-steps N] [--workers LIST]\n");
            zt_finalize();
            return 2;
        }
    }
    int rank = zt_world_rank(), world = zt_world_size();
    char cfgpath[1100];
    if (!config) {
        const char *src = getenv("ZT_SRCDIR");
        snprintf(cfgpath, sizeof cfgpath, "%s/configs/default.json", src ? src : ".");
        config = cfgpath;
    }
    zt_config *cfg = zt_config_new();
    if (zt_config_load_file(cfg, config, &st) != ZT_OK) return die(config, &st);
    /* the finalized view (batch triple for this world size) */
    zt_config *fin = zt_config_dup(cfg);
    if (zt_config_finalize(fin, world, &st) != ZT_OK) return die("config", &st);
    int B = fin->micro_batch, A = fin->grad_accum, T = fin->model.context, V = fin->model.vocab;

    char dir[256] = "", path[512];
    if (!data) {
        if (rank == 0) {
            const char *tmp = getenv("TMPDIR");
            snprintf(dir, sizeof dir, "%s/ztbench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
            if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
        }
        MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
        snprintf(path, sizeof path, "%s/synthetic.bin", dir);
        if (rank == 0) {
            zt_tok_writer *w;
            if (zt_writer_open(path, ZT_FMT_BIN, 2, (size_t)ntok, V, &w, &st) != ZT_OK) return die("write", &st);
            uint32_t buf[4096];
            for (long done = 0; done < ntok;) {
                long m = ntok - done < 4096 ? ntok - done : 4096;
                for (long i = 0; i < m; ++i) buf[i] = (uint32_t)(zt_hash3(1, 2, (uint64_t)(done + i)) % (uint64_t)V);
                if (zt_writer_put(w, buf, (size_t)m, &st) != ZT_OK) return die("write", &st);
                done += m;
            }
            if (zt_writer_commit(w, &st) != ZT_OK) return die("write", &st);
            zt_writer_free(w);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        data = path;
    }
    int dflt = zt_data_default_workers();
    if (rank == 0) {
        printf("bench_loader: %s, %d rank%s, B=%d A=%d T=%d (global batch %d), vocab %d, data %s\n", config,
               world, world > 1 ? "s" : "", B, A, T, B * A * world, V, data);
        printf("default loader threads per rank: %d (%ld CPUs online)\n", dflt, sysconf(_SC_NPROCESSORS_ONLN));
    }

    /* 1. loader alone */
    int wk[16], nw = 0;
    wk[nw++] = 0;
    for (const char *p = wlist; *p && nw < 16;) {
        wk[nw++] = atoi(p);
        p = strchr(p, ',');
        if (!p) break;
        ++p;
    }
    double best = 0, dflt_rate = 0;
    int header = 0;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    for (int k = 0; k < nw; ++k) {
        zt_data_opts o;
        memset(&o, 0, sizeof o);
        o.pattern = data;
        o.kind = ZT_DATA_TRAIN;
        o.vocab = V;
        o.T = T;
        o.seed = fin->seed;
        o.micro_batch = B;
        o.grad_accum = A;
        o.world = world;
        o.rank = rank;
        o.workers = wk[k];
        zt_data_source ds;
        double to = zt_now_s();
        if (zt_data_open(&o, &ds, &st) != ZT_OK) return die(data, &st);
        to = zt_now_s() - to;
        if (k == 0 && rank == 0) {
            zt_data_stats ss;
            zt_data_get_stats(&ds, &ss);
            printf("open + validation scan: %.3f s for %llu windows (%.2f GB/s of tokens)\n", to,
                   (unsigned long long)ss.nsamples, (double)ss.nsamples * (T + 1) * 2 / to / 1e9);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = zt_now_s();
        for (long s = 0; s < steps; ++s)
            for (int m = 0; m < A; ++m)
                if (ds.get(ds.state, s, (uint64_t)rank * B * A + (uint64_t)m * B, B, T, in, tg, &st) != ZT_OK)
                    return die("get", &st);
        double dt = zt_now_s() - t0;
        ds.close(ds.state);
        double rate = (double)steps * A * B * T / dt;
        if (rate > best) best = rate;
        if (wk[k] == dflt) dflt_rate = rate;
        if (rank == 0) {
            if (!header++) printf("%-24s %14s %12s\n", "loader (no compute)", "tokens/s/rank", "us/batch");
            char name[64];
            snprintf(name, sizeof name, wk[k] ? "%d worker%s" : "synchronous", wk[k], wk[k] == 1 ? "" : "s");
            printf("%-24s %14.3e %12.1f\n", name, rate, dt / ((double)steps * A) * 1e6);
        }
    }
    free(in);
    free(tg);

    /* 2. the trainer on the same data, default loader */
    zt_config_set(cfg, "ztrain.data.train", data, ZT_SRC_FLAG, &st);
    zt_config_set(cfg, "ztrain.data.val", "", ZT_SRC_FLAG, &st);
    zt_config_set(cfg, "ztrain.metrics", "", ZT_SRC_FLAG, &st);
    char sv[32];
    /* keep the configured schedule (lr as in the real run), stop early */
    snprintf(sv, sizeof sv, "%ld", fin->total_steps > 0 ? (long)fin->total_steps : fin->steps);
    zt_config_set(cfg, "scheduler.params.total_num_steps", sv, ZT_SRC_FLAG, &st);
    snprintf(sv, sizeof sv, "%ld", train_steps);
    zt_config_set(cfg, "ztrain.steps", sv, ZT_SRC_FLAG, &st);
    if (zt_config_load_env(cfg, &st) != ZT_OK) return die("env", &st);
    wait_acc acc = {0, 0, 0};
    zt_callbacks cb = {NULL, on_metrics, &acc, {NULL, NULL}};
    zt_ctx *ctx;
    if (zt_ctx_create(cfg, &cb, &ctx, &st) != ZT_OK) return die("context", &st);
    if (zt_ctx_open_data(ctx, &st) != ZT_OK) return die("data", &st);
    if (zt_train(ctx, &st) != ZT_OK) return die("train", &st);
    int used = zt_ctx_config(ctx)->dataloaders;
    double step_s = acc.step_ms / acc.n / 1e3;
    double consume = (double)B * A * T / step_s;
    if (rank == 0) {
        printf("trainer: %d steps timed, %.2f ms/step, consumes %.3e tokens/s/rank "
               "(loader threads: %d%s)\n", acc.n, step_s * 1e3, consume, used ? used : dflt, used ? "" : ", auto");
        printf("data wait: %.3f ms/step = %.3f%% of step time\n", acc.wait_ms / acc.n,
               100.0 * acc.wait_ms / acc.step_ms);
        printf("loader/trainer: default loader %.0fx, best %.0fx the trainer's consumption\n",
               dflt_rate / consume, best / consume);
    }
    zt_ctx_free(ctx);
    zt_config_free(fin);
    zt_config_free(cfg);
    if (dir[0] && rank == 0) {
        unlink(path);
        rmdir(dir);
    }
    zt_finalize();
    return 0;
}
