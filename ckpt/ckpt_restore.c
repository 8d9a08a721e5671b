/*
 * ckpt_restore.c -- restore a checkpoint onto any world size / stage, and
 * resume (auto | never | PATH).
 *
 * one-reader (default): rank 0 opens the file alone, reads each tensor in
 *   pieces of at most CK_CHUNK_ELEMS elements (its only buffer), verifies
 *   the checksum as it streams and sends every piece to the ranks owning
 *   parts of it (point-to-point, straight into their owned buffers).
 * parallel: every rank opens the file through MPI-IO and reads its own
 *   slices (collective hyperslab reads); partial checksums are summed with
 *   one all-reduce and compared.
 * Either way the ranges come from zt_ctx_owned_state of the restoring run,
 * so the layout at save time does not matter (resharding).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "ck_values.h"
#include "ck_values.h"
#include "devmem.h"

static int check_compat(zt_ctx *ctx, const zt_ckpt_info *in, const char *file, zt_status *st) {
    const zt_model_config *mc = &zt_ctx_model(ctx)->cfg;
    /* the trained tensors: with LoRA the adapters */
    const zt_model *tm = zt_ctx_lora_model(ctx) ? zt_ctx_lora_model(ctx) : zt_ctx_model(ctx);
    if (in->n_layer != mc->n_layer || in->n_head != mc->n_head || in->n_embd != mc->n_embd ||
        in->context != mc->context || in->vocab != mc->vocab)
        return zt_fail(st, ZT_EINVAL, "%s: the checkpoint's model (n_layer %d, n_head %d, n_embd %d, "
                       "context %d, vocab %d) differs from the configured one (n_layer %d, "
                       "n_head %d, n_embd %d, context %d, vocab %d)", file, in->n_layer,
                       in->n_head, in->n_embd, in->context, in->vocab, mc->n_layer, mc->n_head,
                       mc->n_embd, mc->context, mc->vocab);
    /* the architecture and the settings it reads (resolved values) */
    const zt_arch *arch = zt_arch_of(mc);
    if (strcmp(in->model.arch, arch->name) != 0)
        return zt_fail(st, ZT_EINVAL, "%s: the checkpoint's model differs from the configured one: "
                       "ztrain.model.arch is %s in the checkpoint, %s configured", file,
                       in->model.arch, arch->name);
    /* outside Gemma, no window (0; checkpoints from before windows existed
     * read as 0) and a window no shorter than the training length compute
     * the same full attention (Mistral's config.json always has 4096) */
    zt_model_config cm = in->model;
    const int T = zt_ctx_config(ctx)->seq_len;
    const int wc = cm.sliding_window >= T ? 0 : cm.sliding_window;
    const int wm = mc->sliding_window >= T ? 0 : mc->sliding_window;
    if (!mc->gemma && !cm.gemma && wc == 0 && wm == 0) {
        cm.sliding_window = mc->sliding_window;
        cm.sliding_pattern = mc->sliding_pattern;
        cm.sliding_from = mc->sliding_from;
    }
    /* the padding row only decides which rows the embedding lookup's
     * backward adds to: the weights are the same model, and the configured
     * one trains on (checkpoints from before it existed read as -1) */
    cm.pad_token_id = mc->pad_token_id;
    char a[32], b[32];
    const zt_arch_setting *d = zt_arch_diff(arch, mc, &cm, b, a, sizeof a);
    if (d)
        return zt_fail(st, ZT_EINVAL, "%s: the checkpoint's model differs from the configured "
                       "one: ztrain.model.%s is %s in the checkpoint, %s configured", file, d->key,
                       a, b);
    if (in->num_params != tm->num_params || in->n_tensors != tm->n_tensors)
        return zt_fail(st, ZT_EDATA, "%s: %llu parameters in %d tensors, expected %zu in %d",
                       file, (unsigned long long)in->num_params, in->n_tensors,
                       tm->num_params, tm->n_tensors);
    return ZT_OK;
}

/* Open the three datasets of tensor t and check their shapes; reads the
 * stored checksums. */
static int open_tensor(hid_t f, const zt_tensor_info *t, const char *file, hid_t d[CK_NFAM],
                       uint64_t stored[CK_NFAM], zt_status *st) {
    for (int k = 0; k < CK_NFAM; ++k) d[k] = -1;
    for (int k = 0; k < CK_NFAM; ++k) {
        char name[128];
        ck_dataset_name(name, sizeof name, k, t->name);
        d[k] = H5Dopen2(f, name, H5P_DEFAULT);
        if (d[k] < 0) return ck_h5_fail(st, ZT_EDATA, "%s: tensor %s missing", file, name);
        hid_t sp = H5Dget_space(d[k]);
        hsize_t dims[2] = {0, 0};
        int nd = sp >= 0 ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
        if (sp >= 0) H5Sclose(sp);
        hsize_t want0 = t->ndim == 1 ? t->numel : (hsize_t)t->shape[0];
        if (nd != t->ndim || dims[0] != want0 || (nd == 2 && dims[1] != (hsize_t)t->shape[1]))
            return zt_fail(st, ZT_EDATA, "%s: tensor %s has the wrong shape", file, name);
        if (ck_attr_get_u64(d[k], "checksum", &stored[k]) != 0)
            return zt_fail(st, ZT_EDATA, "%s: tensor %s has no checksum attribute", file, name);
    }
    return ZT_OK;
}

static void close_tensor(hid_t d[CK_NFAM]) {
    for (int k = 0; k < CK_NFAM; ++k)
        if (d[k] >= 0) H5Dclose(d[k]);
}

static int mismatch(zt_status *st, const char *file, int fam, const char *tname,
                    uint64_t stored, uint64_t got) {
    char name[128];
    ck_dataset_name(name, sizeof name, fam, tname);
    return zt_fail(st, ZT_EDATA, "%s: tensor %s: checksum mismatch (stored %016llx, computed "
                   "%016llx): the checkpoint is corrupt", file, name,
                   (unsigned long long)stored, (unsigned long long)got);
}

/* rank 0: bytes of the checkpoint read so far (parameters, moments) */
static void restore_progress(zt_ctx *ctx, uint64_t params_done, uint64_t params, int final) {
    uint64_t per = CK_NFAM * sizeof(float);
    zt_progress_report(zt_ctx_progress(ctx), "restore", params_done * per, params * per, "B", final);
}

static int bcast_info(zt_ctx *ctx, zt_ckpt_info *in, zt_status *st) {
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    char *json = in->config_json;
    in->config_json = NULL;
    int ok = MPI_Bcast(in, (int)sizeof *in, MPI_BYTE, 0, ck_comm(ctx)) == MPI_SUCCESS;
    if (zt_ctx_rank(ctx) == 0) in->config_json = json;
    if (!ok) return zt_fail(st, ZT_ECOMM, "checkpoint restore: MPI_Bcast failed");
    return ZT_OK;
}

static int restore_one_reader(zt_ctx *ctx, const char *file, const zt_train_state *s,
                              const ck_plan *p, zt_ckpt_info *in, zt_status *st) {
    const zt_model *m = s->model;
    int rc = ZT_OK, root = zt_ctx_rank(ctx) == 0;
    hid_t f = -1;
    float *buf = NULL;
    MPI_Request *reqs = NULL;
    int hfail = 0;
    float *h = root ? NULL : ck_stage_buf(s, &hfail, st);   /* device state, receivers */
    if ((rc = ck_agree(ctx, hfail ? st->code : ZT_OK, st)) != ZT_OK) goto out;
    if (root) {
        f = ck_open_serial(file, st);
        if (f < 0) rc = st->code;
        if (rc == ZT_OK) rc = ck_read_header(f, file, in, 0, st);
        if (rc == ZT_OK) rc = ck_lora_check(ctx, f, file, st);
        if (rc == ZT_OK) rc = check_compat(ctx, in, file, st);
        if (rc == ZT_OK) {
            /* (device state: accounted, as the receivers' buffer is: the
             * memory plan counts one on every rank) */
            buf = s->on_device ? zt_mem_alloc(CK_CHUNK_ELEMS * sizeof(float),
                                              ZT_MEM_WORKSPACE | ZT_MEM_HOST, st)
                               : malloc(CK_CHUNK_ELEMS * sizeof(float));
            reqs = malloc((size_t)(p->total > 0 ? p->total : 1) * sizeof *reqs);
            if (!buf || !reqs) rc = zt_fail(st, ZT_ENOMEM, "out of memory (restore buffer)");
        }
    }
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;
    if ((rc = bcast_info(ctx, in, st)) != ZT_OK) goto out;

    for (int ti = 0; ti < m->n_tensors; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        ck_watch(ctx, "checkpoint restore of %s: tensor %s", file, t->name);
        hid_t d[CK_NFAM] = {-1, -1, -1};
        uint64_t stored[CK_NFAM] = {0}, got[CK_NFAM] = {0};
        uint64_t dims[2] = {t->ndim == 1 ? t->numel : (uint64_t)t->shape[0], (uint64_t)t->shape[1]};
        if (root) rc = open_tensor(f, t, file, d, stored, st);
        if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) { close_tensor(d); goto out; }
        for (uint64_t a = 0; a < t->numel && rc == ZT_OK; a += CK_CHUNK_ELEMS) {
            uint64_t b = t->numel - a > CK_CHUNK_ELEMS ? a + CK_CHUNK_ELEMS : t->numel;
            for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam) {
                if (root) {
                    hid_t fs = H5Dget_space(d[fam]);
                    hsize_t len = b - a;
                    hid_t ms = H5Screate_simple(1, &len, NULL);
                    if (ck_select_flat(fs, t->ndim, dims, a, b) < 0 ||
                        H5Dread(d[fam], H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf) < 0) {
                        char name[128];
                        ck_dataset_name(name, sizeof name, fam, t->name);
                        rc = ck_h5_fail(st, ZT_EDATA, "%s: cannot read tensor %s", file, name);
                    } else {
                        got[fam] += zt_ckpt_checksum(buf, b - a, a);
                        rc = ck_check_values(buf, b - a, a, fam == CK_V, ck_family_what[fam], file,
                                             t->name, st);
                    }
                    H5Sclose(ms);
                    H5Sclose(fs);
                }
                rc = ck_root_status(ctx, rc, st);
                if (rc == ZT_OK)
                    rc = ck_scatter(ctx, s, p, t->offset + a, t->offset + b, buf, fam, reqs, h,
                                    "checkpoint restore", st);
            }
        }
        close_tensor(d);
        if (rc != ZT_OK) goto out;
        if (root)
            for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam)
                if (got[fam] != stored[fam]) rc = mismatch(st, file, fam, t->name, stored[fam], got[fam]);
        if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;
        if (root) restore_progress(ctx, t->offset + t->numel, m->num_params, 0);
    }
    if (root) restore_progress(ctx, m->num_params, m->num_params, 1);
out:
    if (f >= 0) H5Fclose(f);
    if (s->on_device) zt_mem_free(buf);
    else free(buf);
    free(reqs);
    zt_mem_free(h);
    return rc;
}

static int restore_parallel(zt_ctx *ctx, const char *file, const zt_train_state *s,
                            const ck_plan *p, zt_ckpt_info *in, zt_status *st) {
    const zt_model *m = s->model;
    int nt = m->n_tensors, rc = ZT_OK;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dx = H5Pcreate(H5P_DATASET_XFER), f = -1;
    H5Pset_fapl_mpio(fapl, ck_comm(ctx), MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_INDEPENDENT);
    uint64_t *got = calloc((size_t)CK_NFAM * (size_t)nt, sizeof *got);
    uint64_t *stored = calloc((size_t)CK_NFAM * (size_t)nt, sizeof *stored);
    int cap = 64;
    uint64_t (*mine)[2] = malloc((size_t)cap * sizeof *mine);
    int hfail = 0;
    float *h = ck_stage_buf(s, &hfail, st);   /* device state: reads land here first */
    if (!got || !stored || !mine) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (hfail) rc = st->code;
    if (rc == ZT_OK) {
        /* every rank can open the file, agreed before the collective
         * H5Fopen: a rank whose MPI_File_open fails inside it leaves the
         * others waiting in HDF5's own collectives */
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) rc = zt_fail(st, ZT_EIO, "%s: cannot open: %s", file, strerror(errno));
        else close(fd);
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    if (rc == ZT_OK) {
        f = H5Fopen(file, H5F_ACC_RDONLY, fapl);
        if (f < 0) rc = ck_h5_fail(st, ZT_EDATA, "%s: cannot open checkpoint", file);
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    rc = ck_read_header(f, file, in, 0, st);
    if (rc == ZT_OK) rc = ck_lora_check(ctx, f, file, st);
    if (rc == ZT_OK) rc = check_compat(ctx, in, file, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    for (int ti = 0; ti < nt && rc == ZT_OK; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        ck_watch(ctx, "checkpoint restore of %s: tensor %s", file, t->name);
        hid_t d[CK_NFAM];
        uint64_t sv[CK_NFAM] = {0};
        uint64_t dims[2] = {t->ndim == 1 ? t->numel : (uint64_t)t->shape[0], (uint64_t)t->shape[1]};
        rc = open_tensor(f, t, file, d, sv, st);
        if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { close_tensor(d); break; }
        for (int k = 0; k < CK_NFAM; ++k) stored[k * nt + ti] = sv[k];
        int n = ck_pieces(p, zt_ctx_rank(ctx), t, 0, NULL, 0);
        if (n > cap) {
            void *nm = realloc(mine, (size_t)n * sizeof *mine);
            if (!nm) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
            else { mine = nm; cap = n; }
        }
        if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { close_tensor(d); break; }
        ck_pieces(p, zt_ctx_rank(ctx), t, 0, mine, cap);
        /* independent reads: each piece is one contiguous byte range */
        for (int fam = 0; fam < CK_NFAM; ++fam) {
            hid_t fs = H5Dget_space(d[fam]);
            for (int k = 0; k < n && rc == ZT_OK; ++k) {
                uint64_t a = mine[k][0], b = mine[k][1];
                const zt_owned_range *rg = NULL;
                for (int i = 0; i < s->n_ranges && !rg; ++i)
                    if (s->ranges[i].lo <= a && b <= s->ranges[i].hi) rg = &s->ranges[i];
                if (!rg) {
                    rc = zt_fail(st, ZT_EINTERNAL, "checkpoint restore: a piece of %s is in no "
                                 "owned range (a bug: please report it)", t->name);
                    break;
                }
                float *dst = h ? h : ck_fam_ptr(rg, fam) + (a - rg->lo);
                hsize_t len = b - a;   /* a piece: at most CK_CHUNK_ELEMS */
                hid_t ms = H5Screate_simple(1, &len, NULL);
                if (ck_select_flat(fs, t->ndim, dims, a - t->offset, b - t->offset) < 0 ||
                    H5Dread(d[fam], H5T_NATIVE_FLOAT, ms, fs, dx, dst) < 0) {
                    char name[128];
                    ck_dataset_name(name, sizeof name, fam, t->name);
                    rc = ck_h5_fail(st, ZT_EDATA, "%s: cannot read tensor %s", file, name);
                }
                H5Sclose(ms);
                if (rc == ZT_OK)
                    rc = ck_check_values(dst, b - a, a - t->offset, fam == CK_V, ck_family_what[fam],
                                         file, t->name, st);
                if (rc == ZT_OK && h) ck_put_owned(s, rg, fam, a, b, h);
                if (rc == ZT_OK && s->writer)
                    got[fam * nt + ti] += zt_ckpt_checksum(dst, b - a, a - t->offset);
            }
            H5Sclose(fs);
        }
        close_tensor(d);
        rc = ck_agree(ctx, rc, st);
        if (rc == ZT_OK && zt_ctx_rank(ctx) == 0) restore_progress(ctx, t->offset + t->numel, m->num_params, 0);
    }
    if (rc != ZT_OK) goto out;
    if (zt_ctx_nranks(ctx) > 1 &&
        MPI_Allreduce(MPI_IN_PLACE, got, CK_NFAM * nt, MPI_UINT64_T, MPI_SUM, ck_comm(ctx)) != MPI_SUCCESS) {
        rc = zt_fail(st, ZT_ECOMM, "checkpoint restore: checksum all-reduce failed");
        goto out;
    }
    for (int ti = 0; ti < nt && rc == ZT_OK; ++ti)
        for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam)
            if (got[fam * nt + ti] != stored[fam * nt + ti])
                rc = mismatch(st, file, fam, m->tensors[ti].name, stored[fam * nt + ti],
                              got[fam * nt + ti]);
    if (rc == ZT_OK && zt_ctx_rank(ctx) == 0) restore_progress(ctx, m->num_params, m->num_params, 1);
out:
    if (f >= 0) H5Fclose(f);
    H5Pclose(fapl);
    H5Pclose(dx);
    free(got);
    free(stored);
    free(mine);
    zt_mem_free(h);
    return rc;
}

static int restore_body(zt_ctx *ctx, const char *path, int mode, zt_ckpt_info *in, zt_status *st);

/* Restore from a checkpoint path; fills *in (on every rank).  Bounded by
 * the watchdog (HDF5's own collectives in a parallel restore). */
static int restore(zt_ctx *ctx, const char *path, int mode, zt_ckpt_info *in, zt_status *st) {
    zt_group_where(zt_ctx_world(ctx), "checkpoint restore of %s", path);
    ck_watch(ctx, "checkpoint restore of %s", path);
    int rc = restore_body(ctx, path, mode, in, st);
    ck_unwatch();
    zt_group_where(zt_ctx_world(ctx), "%s", "");
    return rc;
}

static int restore_body(zt_ctx *ctx, const char *path, int mode, zt_ckpt_info *in, zt_status *st) {
    zt_status_clear(st);
    ck_h5_quiet();
    memset(in, 0, sizeof *in);
    char file[ZT_PATH_MAX + 64] = "";
    int rc = ZT_OK;
    if (zt_ctx_rank(ctx) == 0 || mode == ZT_CKPT_PARALLEL) {
        int kind = ck_resolve(path, file, sizeof file);
        if (kind < 0) rc = zt_fail(st, ZT_EIO, "%s: no such checkpoint", path);
        else if (kind == 0)
            rc = zt_fail(st, ZT_EINVAL, "%s: a directory without %s (give a step-N directory)",
                         path, ZT_CKPT_FILE);
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    zt_train_state s;
    rc = zt_ctx_owned_state(ctx, &s, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    ck_plan plan;
    rc = ck_plan_build(ctx, &s, &plan, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    if (mode == ZT_CKPT_PARALLEL) rc = restore_parallel(ctx, file, &s, &plan, in, st);
    else rc = restore_one_reader(ctx, file, &s, &plan, in, st);
    ck_plan_free(&plan);
    if (rc != ZT_OK) return rc;
    rc = zt_ctx_state_restored(ctx, in->step, in->adam_t, st);
    if (rc == ZT_OK && in->scaler_present) {
        /* an fp16 run's loss scaler continues where it was (a checkpoint
         * without one leaves the configured initial state) */
        zt_scaler_state ls = {in->loss_scale, in->scaler_good_steps,
                              in->scaler_hysteresis_left, 0};
        rc = zt_ctx_scaler_restored(ctx, &ls, st);
        if (rc != ZT_OK) zt_fail_prefix(st, "%s", file);
    }
    return ck_agree(ctx, rc, st);
}

int zt_ckpt_restore(zt_ctx *ctx, const char *path, int mode, zt_status *st) {
    zt_ckpt_info in;
    return restore(ctx, path, mode, &in, st);
}

/* ================================================================ resume */

static void log_resumed(zt_ctx *ctx, const char *path, const zt_ckpt_info *in, double dt,
                        int mode) {
    const zt_config *c = zt_ctx_config(ctx);
    if (!in->meta_checksums)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s has no metadata checksums (written by an older "
               "ztrain): its attributes and configuration are not verified", path);
    zt_train_state s;
    zt_status tmp;
    int stage = c->zero_stage, group = zt_ctx_nranks(ctx);
    if (zt_ctx_owned_state(ctx, &s, &tmp) == ZT_OK) { stage = s.stage; group = s.shard_group; }
    double bytes = (double)in->num_params * CK_NFAM * sizeof(float);
    zt_log(ctx, ZT_LOG_INFO, "checkpoint: resumed from %s at step %ld (%s restore, %.1f MiB in "
           "%.2f s, %.2f GB/s; every tensor checksum verified)", path, in->step,
           mode == ZT_CKPT_PARALLEL ? "parallel" : "one-reader", bytes / 1048576.0, dt,
           bytes / 1e9 / (dt > 0 ? dt : 1e-9));
    if (in->world_size != zt_ctx_nranks(ctx) || in->zero_stage != stage || in->shard_group != group)
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: resharded: saved by %d ranks at ZeRO stage %d "
               "(shard group %d), now %d ranks at stage %d (shard group %d)", in->world_size,
               in->zero_stage, in->shard_group, zt_ctx_nranks(ctx), stage, group);
    if (in->seed != c->seed)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: ztrain.seed is %llu but the checkpoint was trained "
               "with %llu: the data order from here on differs from the original run",
               (unsigned long long)c->seed, (unsigned long long)in->seed);
    if (in->train_batch_size && in->train_batch_size != c->train_batch_size)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: train_batch_size is %d but the checkpoint was "
               "trained with %ld: the run does not continue exactly", c->train_batch_size,
               in->train_batch_size);
    if (in->step > c->steps)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: the checkpoint is at step %ld, beyond ztrain.steps=%ld",
               in->step, c->steps);
}

static int bcast_steps(zt_ctx *ctx, long **steps, int *n, int rc, zt_status *st) {
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) return rc;
    if (zt_ctx_nranks(ctx) < 2) return ZT_OK;
    MPI_Bcast(n, 1, MPI_INT, 0, ck_comm(ctx));
    if (zt_ctx_rank(ctx) != 0) {
        *steps = calloc((size_t)(*n > 0 ? *n : 1), sizeof **steps);
        if (!*steps) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    if (*n > 0) MPI_Bcast(*steps, *n, MPI_LONG, 0, ck_comm(ctx));
    return ZT_OK;
}

/* Newest checkpoint in dir that restores and verifies.  quarantine: rename
 * corrupt and unreadable ones to step-N.corrupt-<time> (auto mode on
 * checkpoint.dir). */
static int resume_dir(zt_ctx *ctx, const char *dir, int mode, int quarantine, const char *how,
                      long *step_out, zt_status *st) {
    long *steps = NULL;
    int n = 0, rc = ZT_OK;
    if (zt_ctx_rank(ctx) == 0) rc = ck_scan_steps(dir, &steps, &n, st);
    if ((rc = bcast_steps(ctx, &steps, &n, rc, st)) != ZT_OK) { free(steps); return rc; }
    if (n == 0) {
        zt_ckpt_entry *e = NULL;
        int k = 0, q = 0;
        zt_status tmp;
        if (zt_ctx_rank(ctx) == 0 && zt_ckpt_list(dir, &e, &k, &tmp) == ZT_OK)
            for (int i = 0; i < k; ++i) q += e[i].state == 2;
        free(e);
        if (q)
            zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s: %s holds only %d quarantined (corrupt) "
                   "checkpoint%s; starting from step 0", how, dir, q, q == 1 ? "" : "s");
        else
            zt_log(ctx, ZT_LOG_INFO, "checkpoint: %s: no checkpoint in %s; starting from step 0",
                   how, dir);
        free(steps);
        return ZT_OK;
    }
    char first_err[600] = "";
    for (int i = 0; i < n; ++i) {
        char path[ZT_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/step-%ld", dir, steps[i]);
        double t0 = zt_now_s();
        zt_ckpt_info in;
        rc = restore(ctx, path, mode, &in, st);
        if (rc == ZT_OK) {
            log_resumed(ctx, path, &in, zt_now_s() - t0, mode);
            *step_out = in.step;
            free(steps);
            return ZT_OK;
        }
        if (rc != ZT_EDATA && rc != ZT_EIO) { free(steps); return rc; }
        if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", st->msg);
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s is unusable: %s%s", path, st->msg,
               i + 1 < n ? "; falling back to the previous checkpoint" : "");
        /* quarantine, never delete: a checkpoint that could not be read
         * (EACCES, EIO, a missing file) is moved aside like a corrupt one,
         * so that a later save does not replace or prune it */
        if (quarantine && zt_ctx_rank(ctx) == 0) {
            char q[ZT_PATH_MAX + 64];
            if (ck_quarantine(path, q, sizeof q) == 0)
                zt_log(ctx, ZT_LOG_WARN, "checkpoint: moved it to %s (%s; kept for inspection, "
                       "never resumed from, never pruned)", q,
                       rc == ZT_EDATA ? "corrupt" : "could not be read");
        }
    }
    free(steps);
    return zt_fail(st, ZT_EDATA, "%s: no usable checkpoint in %s (%d tried; newest: %s)",
                   how, dir, n, first_err);
}

/* checkpoint.resume=PATH at a directory without state.h5: fine when it
 * holds checkpoint entries (step-*, latest); otherwise ZT_EINVAL (an empty
 * one too: only checkpoint.resume=auto starts fresh; a Hugging Face model
 * directory: use --init-from). */
static int check_ckpt_dir(const char *dir, zt_status *st) {
    DIR *d = opendir(dir);
    if (!d) return zt_fail(st, ZT_EIO, "checkpoint.resume=%s: cannot list: %s", dir, strerror(errno));
    struct dirent *e;
    int other = 0, ours = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strncmp(e->d_name, "step-", 5) || !strcmp(e->d_name, ZT_CKPT_LATEST)) ours++;
        else other++;
    }
    closedir(d);
    if (ours) return ZT_OK;
    if (!other)
        return zt_fail(st, ZT_EINVAL, "checkpoint.resume=%s: an empty directory holds no "
                       "checkpoint to resume; to start fresh there use checkpoint.resume=auto with "
                       "checkpoint.dir=%s", dir, dir);
    char cj[ZT_PATH_MAX + 16];
    struct stat sb;
    snprintf(cj, sizeof cj, "%s/config.json", dir);
    if (stat(cj, &sb) == 0)
        return zt_fail(st, ZT_EINVAL, "checkpoint.resume=%s: a Hugging Face model directory "
                       "(config.json), not a ztrain checkpoint: start from its weights with "
                       "--init-from %s", dir, dir);
    return zt_fail(st, ZT_EINVAL, "checkpoint.resume=%s: the directory holds no ztrain "
                   "checkpoint (no step-N, no %s) but is not empty; give a checkpoint or a "
                   "checkpoint directory", dir, ZT_CKPT_LATEST);
}

int zt_ckpt_resume(zt_ctx *ctx, long *step_out, zt_status *st) {
    zt_status_clear(st);
    *step_out = -1;
    const zt_config *c = zt_ctx_config(ctx);
    int mode = strcmp(c->ckpt_restore, "parallel") == 0 ? ZT_CKPT_PARALLEL : ZT_CKPT_ONE_READER;
    if (strcmp(c->ckpt_resume, "never") == 0) return ZT_OK;
    if (strcmp(c->ckpt_resume, "auto") == 0)
        return resume_dir(ctx, c->ckpt_dir, mode, 1, "checkpoint.resume=auto", step_out, st);
    /* a path: a checkpoint, or a directory of checkpoints */
    char file[ZT_PATH_MAX + 64];
    int kind = 0, rc = ZT_OK;
    if (zt_ctx_rank(ctx) == 0) {
        kind = ck_resolve(c->ckpt_resume, file, sizeof file);
        if (kind < 0) rc = zt_fail(st, ZT_EIO, "checkpoint.resume=%s: no such checkpoint or "
                                   "directory", c->ckpt_resume);
    }
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) return rc;
    if (zt_ctx_nranks(ctx) > 1) MPI_Bcast(&kind, 1, MPI_INT, 0, ck_comm(ctx));
    if (kind == 0) {
        /* a directory of checkpoints; anything else (empty included) is a
         * mistake worth stopping for, not a silent step 0 */
        if (zt_ctx_rank(ctx) == 0) rc = check_ckpt_dir(c->ckpt_resume, st);
        if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) return rc;
        return resume_dir(ctx, c->ckpt_resume, mode, 0, "checkpoint.resume=PATH", step_out, st);
    }
    double t0 = zt_now_s();
    zt_ckpt_info in;
    rc = restore(ctx, c->ckpt_resume, mode, &in, st);
    if (rc != ZT_OK) return zt_fail_prefix(st, "checkpoint.resume=%s", c->ckpt_resume);
    log_resumed(ctx, c->ckpt_resume, &in, zt_now_s() - t0, mode);
    *step_out = in.step;
    return ZT_OK;
}
