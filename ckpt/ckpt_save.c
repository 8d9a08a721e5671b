/*
 * ckpt_save.c -- write a checkpoint collectively and commit it.
 *
 * Every rank writes the slices it owns (zt_ctx_owned_state) of every tensor
 * into one shared HDF5 file through MPI-IO, as hyperslabs of the tensor's
 * full logical shape.  Checksums are computed per tensor over the logical
 * tensor: each writer sums its slices (zt_ckpt_checksum), one all-reduce adds
 * the partial sums.  The commit (rank 0) is described in docs/checkpoints.md:
 *
 *   step-N.tmp/state.h5  written, H5Fflush (MPI_File_sync), closed
 *   fsync(state.h5), fsync(step-N.tmp)
 *   rename step-N.tmp -> step-N, fsync(dir)          <- the commit point
 *   latest.tmp = "step-N\n", fsync, rename -> latest, fsync(dir)
 *   prune: older than the newest `keep`, and any newer than N (an abandoned
 *          timeline), each renamed to step-K.del.tmp, fsync(dir), removed
 */
#define _GNU_SOURCE
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
#include "devmem.h"
#include "optim.h"

static float *fam_ptr(const zt_owned_range *r, int f) {
    return f == CK_PARAMS ? r->param : f == CK_M ? r->m : r->v;
}

/* This rank's range holding flat elements [a, b). */
static const zt_owned_range *range_of(const zt_train_state *s, uint64_t a, uint64_t b) {
    for (int i = 0; i < s->n_ranges; ++i)
        if (s->ranges[i].lo <= a && b <= s->ranges[i].hi) return &s->ranges[i];
    return NULL;
}

/* Partial checksums of this rank's slices, per family and tensor (device
 * state: read through the host buffer h in pieces). */
static void partial_checksums(const zt_train_state *s, uint64_t *cs, float *h) {
    ck_partial_checksums(s, cs, h, 0, NULL, NULL);
}

void ck_partial_checksums(const zt_train_state *s, uint64_t *cs, float *h, int serial,
                          void (*progress)(void *), void *user) {
    const zt_model *m = s->model;
    int nt = m->n_tensors;
    if (!s->writer) return;
    for (int i = 0; i < s->n_ranges; ++i) {
        const zt_owned_range *r = &s->ranges[i];
        for (int t = 0; t < nt; ++t) {
            const zt_tensor_info *ti = &m->tensors[t];
            uint64_t a = r->lo > ti->offset ? r->lo : ti->offset;
            uint64_t b = r->hi < ti->offset + ti->numel ? r->hi : ti->offset + ti->numel;
            if (a >= b) continue;
            for (int f = 0; f < CK_NFAM; ++f) {
                if (!h && serial) {
                    /* in pieces of at most 4 blocks: zt_ckpt_checksum's
                     * OpenMP loop stays serial (a background thread) */
                    const uint64_t P = (uint64_t)4 << 16;
                    for (uint64_t x = a; x < b; x += P) {
                        const uint64_t y = b - x > P ? x + P : b;
                        cs[f * nt + t] += zt_ckpt_checksum(fam_ptr(r, f) + (x - r->lo), y - x,
                                                           x - ti->offset);
                    }
                    if (progress) progress(user);
                    continue;
                }
                if (!h) {
                    cs[f * nt + t] += zt_ckpt_checksum(fam_ptr(r, f) + (a - r->lo), b - a,
                                                       a - ti->offset);
                    continue;
                }
                for (uint64_t x = a; x < b; x += CK_CHUNK_ELEMS) {
                    const uint64_t y = b - x > CK_CHUNK_ELEMS ? x + CK_CHUNK_ELEMS : b;
                    s->be->to_host(h, fam_ptr(r, f) + (x - r->lo), (y - x) * sizeof(float));
                    cs[f * nt + t] += zt_ckpt_checksum(h, y - x, x - ti->offset);
                }
            }
        }
    }
}

/* Enter phase `name` of a save: named in communication errors and bounded
 * by the watchdog (ck_watch). */
static void phase(zt_ctx *ctx, const char *name) {
    zt_group_where(zt_ctx_world(ctx), "checkpoint save: %s", name);
    ck_watch(ctx, "checkpoint save at step %ld: %s", zt_ctx_step(ctx), name);
}

/* One metadata attribute: its name, kind (i64, u64, f64, string) and value. */
typedef struct ck_meta_attr {
    const char *name;
    char kind;                 /* 'i', 'u', 'f', 's' */
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
} ck_meta_attr;
#define A_I(n, v) {(n), 'i', (int64_t)(v), 0, 0, NULL}
#define A_U(n, v) {(n), 'u', 0, (uint64_t)(v), 0, NULL}
#define A_F(n, v) {(n), 'f', 0, 0, (double)(v), NULL}
#define A_S(n, v) {(n), 's', 0, 0, 0, (v)}
#define NA(t) (sizeof (t) / sizeof (t)[0])

/* Write attributes a[0..n) on obj, in order; nonzero if one failed. */
static int put_attrs(hid_t obj, const ck_meta_attr *a, size_t n) {
    int bad = 0;
    for (size_t k = 0; k < n; ++k)
        switch (a[k].kind) {
        case 'i': bad |= ck_attr_put_i64(obj, a[k].name, a[k].i); break;
        case 'u': bad |= ck_attr_put_u64(obj, a[k].name, a[k].u); break;
        case 'f': bad |= ck_attr_put_f64(obj, a[k].name, a[k].d); break;
        default: bad |= ck_attr_put_str(obj, a[k].name, a[k].s); break;
        }
    return bad;
}

/* Group /name with attributes a[0..n); *bad |= a failed write. */
static int put_group(hid_t f, const char *name, const ck_meta_attr *a, size_t n, int *bad,
                     const char *file, zt_status *st) {
    hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ck_h5_fail(st, ZT_EIO, "%s: cannot create /%s", file, name);
    *bad |= put_attrs(g, a, n);
    H5Gclose(g);
    return ZT_OK;
}

static int put_meta(zt_ctx *ctx, hid_t f, const zt_train_state *s, const char *json,
                    double created, const char *file, zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    const zt_model_config *mc = &s->model->cfg;
    int bad = 0;
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", ZTRAIN_VERSION_MAJOR, ZTRAIN_VERSION_MINOR,
             ZTRAIN_VERSION_PATCH);
    const ck_meta_attr root[] = {
        A_S("format", ZT_CKPT_FORMAT), A_I("format_version", ZT_CKPT_FORMAT_VERSION),
        A_I("step", s->step), A_I("adam_t", s->adam_t), A_I("world_size", s->world),
        A_I("zero_stage", s->stage), A_I("shard_group", s->shard_group), A_I("has_master", 0),
        A_I("n_tensors", s->model->n_tensors), A_U("num_params", s->model->num_params),
        A_F("created_unix", created), A_S("ztrain_version", ver),
        A_S("checksum_algorithm", ZT_CKPT_CHECKSUM_ALGORITHM),
    };
    bad |= put_attrs(f, root, NA(root));

    /* effective configuration, JSON */
    if (ck_put_str_dataset(f, "config", json, zt_ctx_rank(ctx)) < 0) bad = 1;
    /* LoRA: the settings and the frozen base's fingerprint (ckpt_lora.c) */
    if (zt_ctx_lora_model(ctx)) {
        char *lj = ck_lora_json(ctx);
        if (!lj || ck_put_str_dataset(f, "lora", lj, zt_ctx_rank(ctx)) < 0) bad = 1;
        free(lj);
    }

    /* the model: its shape, architecture and every architecture setting,
     * resolved (ck_read_header reads them back; older checkpoints without
     * them are GPT-2s) */
    const zt_arch *arch = zt_arch_of(mc);
    int ns;
    const zt_arch_setting *set = zt_arch_settings(&ns);
    ck_meta_attr model[48] = {
        A_S("architecture", arch->name), A_I("n_layer", mc->n_layer), A_I("n_head", mc->n_head),
        A_I("n_embd", mc->n_embd), A_I("context", mc->context), A_I("vocab", mc->vocab),
        A_U("num_params", s->model->num_params),
        A_S("tied_lm_head", zt_arch_tied(arch, mc) ? arch->tensors[0].name : "none"),
    };
    size_t nm = 8;
    for (int k = 0; k < ns && nm < NA(model); ++k, ++nm) {
        const zt_arch_setting *a = &set[k];
        if (a->type == ZT_AS_STR) model[nm] = (ck_meta_attr)A_S(a->key, zt_arch_setting_str(a, mc));
        else if (a->type == ZT_AS_DOUBLE) model[nm] = (ck_meta_attr)A_F(a->key, zt_arch_setting_double(a, mc));
        else model[nm] = (ck_meta_attr)A_I(a->key, zt_arch_setting_int(a, mc));
    }
    ZT_TRY(put_group(f, "model", model, nm, &bad, file, st));

    const ck_meta_attr sched[] = {
        A_S("type", c->scheduler_type), A_F("lr", c->lr), A_I("warmup_num_steps", c->warmup_steps),
        A_I("total_num_steps", c->total_steps), A_F("warmup_min_ratio", c->warmup_min_ratio),
        A_F("cos_min_ratio", c->cos_min_ratio), A_S("warmup_type", c->warmup_type),
        A_I("step", s->step), A_I("updates", s->adam_t), A_F("next_lr", zt_lr_at(c, s->adam_t)),
        A_S("note", "the learning rate is a pure function of the number of updates applied "
                    "(/optimizer t; fp16 steps skipped on overflow do not count, as in DeepSpeed) "
                    "and these values; no other schedule state exists"),
    };
    ZT_TRY(put_group(f, "scheduler", sched, NA(sched), &bad, file, st));

    const int sc = s->has_scaler;
    const ck_meta_attr scaler[] = {
        A_I("version", 1), A_I("present", sc), A_F("scale", sc ? s->scaler.scale : 0.0),
        A_I("good_steps", sc ? s->scaler.good_steps : 0),
        A_I("hysteresis_left", sc ? s->scaler.hysteresis_left : 0),
        A_S("note", sc ? "fp16 dynamic loss scaling (DeepSpeed semantics): current scale, "
                         "overflow-free steps since the last overflow or growth, overflows left "
                         "before the scale halves"
                       : "no loss scaling (not an fp16 run); present = 0"),
    };
    ZT_TRY(put_group(f, "loss_scaler", scaler, NA(scaler), &bad, file, st));

    const ck_meta_attr rng[] = {
        A_S("kind", "counter-based"), A_U("seed", c->seed),
        A_S("note", "every random number (initialization, data sampling) is a pure function of "
                    "(seed, step, index); no other RNG state exists"),
    };
    ZT_TRY(put_group(f, "rng", rng, NA(rng), &bad, file, st));

    const ck_meta_attr data[] = {
        A_I("step", s->step), A_I("train_batch_size", c->train_batch_size),
        A_U("sample_position", (uint64_t)s->step * (uint64_t)c->train_batch_size),
        A_U("seed", c->seed), A_S("train", c->data_train), A_S("val", c->data_val),
    };
    ZT_TRY(put_group(f, "data", data, NA(data), &bad, file, st));

    const ck_meta_attr optim[] = {
        A_S("type", "AdamW"), A_I("t", s->adam_t), A_F("beta1", c->beta1), A_F("beta2", c->beta2),
        A_F("eps", c->eps), A_F("weight_decay", c->weight_decay),
    };
    ZT_TRY(put_group(f, "optimizer", optim, NA(optim), &bad, file, st));
    if (bad) return ck_h5_fail(st, ZT_EIO, "%s: cannot write checkpoint metadata", file);
    return ZT_OK;
}

/* Two passes, each collective over the tensors in the same order on every
 * rank: create (write = 0: the datasets with their space allocated and
 * their attributes; no tensor data) and write (write = 1: the pieces this
 * rank owns, into the datasets opened again).  The metadata is flushed
 * between the two, so that a write error of the tensor data (a disk that
 * fills up) leaves no dirty metadata behind: the abandoned file then closes
 * on every rank, where flushing metadata onto a full disk fails on some
 * ranks only and leaves the others in HDF5's collective sync points. */
static int put_tensors(zt_ctx *ctx, hid_t f, const zt_train_state *s, const ck_plan *p,
                       const uint64_t *cs, float *h, const char *file, int write,
                       struct zt_ckpt_async *ap, zt_status *st) {
    const zt_model *m = s->model;
    int nt = m->n_tensors, rc = ZT_OK;
    if (write && !ap) ck_crash_point("save_tensors", zt_ctx_step(ctx));
    if (!write) {
        hid_t g1 = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t g2 = H5Gcreate2(f, "optimizer/m", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t g3 = H5Gcreate2(f, "optimizer/v", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g1 < 0 || g2 < 0 || g3 < 0) rc = ck_h5_fail(st, ZT_EIO, "%s: cannot create groups", file);
        if (g1 >= 0) H5Gclose(g1);
        if (g2 >= 0) H5Gclose(g2);
        if (g3 >= 0) H5Gclose(g3);
        if (rc) return rc;
    }

    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), dx = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    /* Each piece is one contiguous byte range of the file (a flat range of
     * a row-major contiguous dataset), at most CK_CHUNK_ELEMS long: plain
     * independent MPI-IO writes, no two-phase collective buffering (which
     * only copies the data once more).  Dataset creation, attributes and
     * metadata stay collective. */
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_INDEPENDENT);
    int cap = 64, werr = ZT_OK;
    zt_status wst;
    zt_status_clear(&wst);
    uint64_t (*mine)[2] = malloc((size_t)cap * sizeof *mine);
    if (!mine) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int ti = 0; ti < nt && rc == ZT_OK; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        int n = ck_pieces(p, zt_ctx_rank(ctx), t, 1, NULL, 0);
        if (n > cap) {
            void *nm = realloc(mine, (size_t)n * sizeof *mine);
            if (!nm) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
            mine = nm;
            cap = n;
        }
        ck_pieces(p, zt_ctx_rank(ctx), t, 1, mine, cap);
        uint64_t dims[2] = {(uint64_t)t->shape[0], (uint64_t)t->shape[1]};
        if (t->ndim == 1) dims[0] = t->numel;
        hsize_t hd[2] = {dims[0], dims[1]};
        for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam) {
            char name[128];
            ck_dataset_name(name, sizeof name, fam, t->name);
            ck_watch(ctx, "checkpoint save at step %ld: tensors (%s)", zt_ctx_step(ctx), name);
            hid_t sp = H5Screate_simple(t->ndim, hd, NULL);
            hid_t d = write ? H5Dopen2(f, name, H5P_DEFAULT)
                            : H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            if (d < 0) {
                rc = ck_h5_fail(st, ZT_EIO, "%s: cannot %s dataset %s", file,
                                write ? "open" : "create", name);
                H5Sclose(sp);
                break;
            }
            int bad = 0;
            /* asynchronous save (a): this rank's pieces go to the background
             * writer at the dataset's file address (contiguous, allocated
             * at creation: a flat range is one byte range) */
            haddr_t base = ap && write && n > 0 ? H5Dget_offset(d) : 0;
            if (ap && write && n > 0 && base == HADDR_UNDEF) bad = 1;
            if (!write) {
                bad |= ck_attr_put_u64(d, "checksum", cs[fam * nt + ti]);
                bad |= ck_attr_put_u64(d, "offset", t->offset);
                bad |= ck_attr_put_str(d, "unit", m->units[t->unit].name);
            }
            for (int k = 0; write && k < n && !bad; ++k) {
                uint64_t a = mine[k][0], b = mine[k][1];
                const zt_owned_range *rg = range_of(s, a, b);
                if (!rg) { bad = 2; break; }
                hsize_t len = b - a;
                const float *src = fam_ptr(rg, fam) + (a - rg->lo);
                if (ap) {
                    ck_wpiece wp = {(uint64_t)base + (a - t->offset) * sizeof(float), len, src,
                                    fam, ti};
                    if (ck_async_add_piece(ap, &wp, &wst) != ZT_OK) { bad = 3; break; }
                    continue;
                }
                if (h) {   /* a piece is at most CK_CHUNK_ELEMS long */
                    s->be->to_host(h, src, (size_t)len * sizeof(float));
                    src = h;
                }
                hid_t ms = H5Screate_simple(1, &len, NULL);
                if (ck_select_flat(sp, t->ndim, dims, a - t->offset, b - t->offset) < 0 ||
                    H5Dwrite(d, H5T_NATIVE_FLOAT, ms, sp, dx, src) < 0)
                    bad = 1;
                H5Sclose(ms);
            }
            H5Dclose(d);
            H5Sclose(sp);
            /* a local write error must not skip the collective creation of
             * the remaining datasets: note it, agree after the loop */
            if (bad == 3 && werr == ZT_OK)
                werr = wst.code;
            else if (bad == 2 && werr == ZT_OK)
                werr = zt_fail(&wst, ZT_EINTERNAL, "checkpoint: a piece of %s is in no owned "
                               "range (a bug: please report it)", t->name);
            else if (bad && werr == ZT_OK)
                werr = ck_h5_fail(&wst, ZT_EIO, "%s: cannot write dataset %s", file, name);
        }
    }
    if (rc == ZT_OK && werr != ZT_OK) {
        rc = werr;
        if (st) *st = wst;
    }
    free(mine);
    H5Pclose(dcpl);
    H5Pclose(dx);
    return rc;
}

/* Write `latest` atomically: temp file, fsync, rename, fsync the directory. */
static int write_latest(const char *dir, long step, zt_status *st) {
    char tmp[ZT_PATH_MAX + 32], dst[ZT_PATH_MAX + 32], body[64];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, ZT_CKPT_LATEST);
    snprintf(dst, sizeof dst, "%s/%s", dir, ZT_CKPT_LATEST);
    int n = snprintf(body, sizeof body, "step-%ld\n", step);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    int ok = write(fd, body, (size_t)n) == n && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0) ok = 0;
    if (!ok) {
        unlink(tmp);
        return zt_fail(st, ZT_EIO, "%s: write failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, dst) != 0) {
        e = errno;
        unlink(tmp);
        return zt_fail(st, ZT_EIO, "%s: rename failed: %s", dst, strerror(e));
    }
    return ck_fsync_path(dir, 1, st);
}

/* Remove one committed checkpoint: rename it out of the committed namespace
 * first (one atomic step), then delete its files. */
static int remove_ckpt(const char *dir, long step, long saving, zt_status *st) {
    char from[ZT_PATH_MAX + 32], to[ZT_PATH_MAX + 48];
    snprintf(from, sizeof from, "%s/step-%ld", dir, step);
    snprintf(to, sizeof to, "%s/step-%ld.del.tmp", dir, step);
    ck_rmtree(to);
    if (rename(from, to) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot rename for removal: %s", from, strerror(errno));
    ZT_TRY(ck_fsync_path(dir, 1, st));
    ck_crash_point("during_prune", saving);
    if (ck_rmtree(to) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot remove: %s", to, strerror(errno));
    return ZT_OK;
}

static int prune(zt_ctx *ctx, const char *dir, long step, int keep, zt_status *st) {
    long *steps;
    int n;
    ZT_TRY(ck_scan_steps(dir, &steps, &n, st));
    int kept = 1, rc = ZT_OK;   /* the one just committed */
    char removed[512] = "";
    size_t used = 0;
    for (int i = 0; i < n && rc == ZT_OK; ++i) {
        long k = steps[i];
        if (k == step) continue;
        if (k < step && kept < keep) { ++kept; continue; }
        if (k > step) {
            /* an abandoned timeline: only a checkpoint that reads (its
             * file opens, its header and metadata checksums verify) may be
             * deleted; one that does not is quarantined.  (Not every
             * tensor: that would read the whole checkpoint inside a save.) */
            char path[ZT_PATH_MAX + 32], q[ZT_PATH_MAX + 64];
            zt_status vst;
            zt_ckpt_info vin;
            snprintf(path, sizeof path, "%s/step-%ld", dir, k);
            int readable = zt_ckpt_read_info(path, &vin, &vst) == ZT_OK;
            if (readable) zt_ckpt_info_free(&vin);
            if (!readable) {
                if (ck_quarantine(path, q, sizeof q) == 0)
                    zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s is newer than step %ld (an abandoned "
                           "run) but does not verify (%s): moved to %s instead of pruning it",
                           path, step, vst.msg, q);
                else
                    zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s is newer than step %ld but does not "
                           "verify (%s) and cannot be moved aside: %s; left in place", path, step,
                           vst.msg, strerror(errno));
                continue;
            }
        }
        rc = remove_ckpt(dir, k, step, st);
        if (rc == ZT_OK && used + 32 < sizeof removed)
            used += (size_t)snprintf(removed + used, sizeof removed - used, "%sstep-%ld%s",
                                     used ? ", " : "", k, k > step ? " (newer: abandoned run)" : "");
    }
    free(steps);
    if (removed[0])
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: pruned %s (keeping %d)", removed, keep);
    return rc;
}

/* Undo a rename of tmpd to final whose commit could not be completed:
 * final goes back to tmpd (removed by the caller), old (when the same step
 * existed before) back to final. */
static void uncommit(zt_ctx *ctx, const char *dir, const char *tmpd, const char *final,
                     const char *old) {
    zt_status tmp;
    if (rename(final, tmpd) != 0)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s: cannot undo the commit (%s): it stays, "
               "complete but not `latest`", final, strerror(errno));
    else if (old && rename(old, final) != 0)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: cannot move %s back to %s: %s", old, final,
               strerror(errno));
    ck_fsync_path(dir, 1, &tmp);
}

int ck_commit(zt_ctx *ctx, const char *dir, long step, int keep, const char *tmpd,
              const char *final, const char *file, zt_status *st) {
    ZT_TRY(ck_fsync_path(file, 0, st));
    ZT_TRY(ck_fsync_path(tmpd, 1, st));
    ck_crash_point("before_rename", step);
    struct stat sb;
    char old[ZT_PATH_MAX + 48];
    int replacing = stat(final, &sb) == 0;
    if (replacing) {
        /* the same step saved before (e.g. by an earlier run): replace it */
        snprintf(old, sizeof old, "%s.replaced.tmp", final);
        ck_rmtree(old);
        if (rename(final, old) != 0)
            return zt_fail(st, ZT_EIO, "%s: cannot move the old checkpoint aside: %s", final,
                           strerror(errno));
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: replacing an existing %s", final);
    }
    if (rename(tmpd, final) != 0) {
        int e = errno;
        if (replacing && rename(old, final) != 0)
            zt_log(ctx, ZT_LOG_WARN, "checkpoint: cannot move %s back to %s: %s", old, final,
                   strerror(errno));
        return zt_fail(st, ZT_EIO, "%s: rename to %s failed: %s", tmpd, final, strerror(e));
    }
    int rc = ck_fsync_path(dir, 1, st);
    if (rc == ZT_OK) ck_crash_point("after_rename_before_latest", step);
    if (rc == ZT_OK) rc = write_latest(dir, step, st);
    if (rc != ZT_OK) {
        /* not durable or not `latest`: abandon it, the previous stays */
        uncommit(ctx, dir, tmpd, final, replacing ? old : NULL);
        return rc;
    }
    if (replacing) ck_rmtree(old);
    /* committed and `latest`: a failed prune leaves old checkpoints behind,
     * nothing is lost; a warning, not a failed save */
    zt_status pst;
    if (prune(ctx, dir, step, keep, &pst) != ZT_OK)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: step %ld saved, but pruning older checkpoints "
               "failed: %s", step, pst.msg);
    return ZT_OK;
}

int zt_ckpt_save(zt_ctx *ctx, const char *dir, int keep, zt_status *st) {
    return ck_save(ctx, dir, keep, NULL, st);
}

int ck_save(zt_ctx *ctx, const char *dir, int keep, struct zt_ckpt_async *a, zt_status *st) {
    zt_status_clear(st);
    ck_h5_quiet();
    if (keep < 2)
        return zt_fail(st, ZT_EINVAL, "checkpoint keep=%d: at least 2 checkpoints must be kept "
                       "(the newest may be the one a crash interrupted)", keep);
    double t0 = zt_now_s();
    zt_train_state s;
    int rc = ZT_OK;
    if (a) s = *ck_async_state(a);   /* the snapshot (host memory) */
    else rc = zt_ctx_owned_state(ctx, &s, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    const zt_model *m = s.model;
    int nt = m->n_tensors;
    long step = s.step;
    char final[ZT_PATH_MAX + 32], tmpd[ZT_PATH_MAX + 48], file[ZT_PATH_MAX + 64];
    snprintf(final, sizeof final, "%s/step-%ld", dir, step);
    snprintf(tmpd, sizeof tmpd, "%s.tmp", final);
    snprintf(file, sizeof file, "%s/%s", tmpd, ZT_CKPT_FILE);

    phase(ctx, "plan and checksums");
    ck_plan plan;
    rc = ck_plan_build(ctx, &s, &plan, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { ck_unwatch(); return rc; }

    uint64_t *cs = calloc((size_t)CK_NFAM * (size_t)nt, sizeof *cs);
    char *json = NULL;
    double created = 0;
    hid_t fapl = -1, f = -1;
    int hfail = 0;
    float *h = ck_stage_buf(&s, &hfail, st);   /* device state: host staging */
    if (!cs) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (hfail) rc = st->code;
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    if (a) memcpy(cs, ck_async_checksums(a), (size_t)CK_NFAM * (size_t)nt * sizeof *cs);
    else partial_checksums(&s, cs, h);
    if (zt_ctx_nranks(ctx) > 1 &&
        MPI_Allreduce(MPI_IN_PLACE, cs, CK_NFAM * nt, MPI_UINT64_T, MPI_SUM, ck_comm(ctx)) != MPI_SUCCESS) {
        rc = zt_fail(st, ZT_ECOMM, "checkpoint: checksum all-reduce failed");
        goto out;
    }

    /* rank 0: a fresh step-N.tmp/ (an old one is a crashed attempt) */
    if (zt_ctx_rank(ctx) == 0) {
        rc = ck_mkdir_p(dir, st);
        if (rc == ZT_OK) {
            ck_rmtree(tmpd);
            if (mkdir(tmpd, 0777) != 0)
                rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmpd, strerror(errno));
        }
        json = zt_config_to_json(zt_ctx_config(ctx));
        if (rc == ZT_OK && !json) rc = zt_fail(st, ZT_ENOMEM, "out of memory (config JSON)");
        created = (double)time(NULL);
    }
    phase(ctx, "create the file");
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;
    if ((rc = ck_bcast_str(ctx, &json, st)) != ZT_OK) goto out;
    if (zt_ctx_nranks(ctx) > 1) MPI_Bcast(&created, 1, MPI_DOUBLE, 0, ck_comm(ctx));
    /* room for it on the file system (every rank's view, agreed): a full
     * disk found inside HDF5's collectives cannot always be reported */
    phase(ctx, "free space");
    const uint64_t need = ck_save_bytes(m, json ? strlen(json) : 0);
    rc = ck_space_check(dir, need, step, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;

    if (zt_ctx_rank(ctx) == 0) ck_watch_cleanup(tmpd);
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, ck_comm(ctx), MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_alignment(fapl, (hsize_t)1 << 20, (hsize_t)1 << 20);
    f = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0) rc = ck_h5_fail(st, ZT_EIO, "%s: cannot create checkpoint file", file);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    /* Every phase ends with an agreement, so that no rank enters the next
     * collective (dataset creation, the flush, the close) alone when
     * another one failed: the failure-agreement rule (docs/checkpoints.md). */
    phase(ctx, "metadata");
    rc = put_meta(ctx, f, &s, json, created, file, st);
    if ((rc = ck_agree(ctx, rc, st)) == ZT_OK) {
        phase(ctx, "datasets");
        rc = put_tensors(ctx, f, &s, &plan, cs, h, file, 0, a, st);
        rc = ck_agree(ctx, rc, st);
    }
    if (rc == ZT_OK) {
        /* the checksums of every attribute and of /config, read back */
        phase(ctx, "metadata checksums");
        char *lines = ck_meta_lines(f, file, st);
        rc = lines ? ck_put_meta_checksums(f, lines, zt_ctx_rank(ctx), file, st) : st->code;
        free(lines);
        rc = ck_agree(ctx, rc, st);
    }
    if (rc == ZT_OK) {
        /* all metadata on disk before the tensor data (put_tensors) */
        phase(ctx, "metadata flush");
        if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0)
            rc = ck_h5_fail(st, ZT_EIO, "%s: metadata flush failed", file);
        rc = ck_agree(ctx, rc, st);
    }
    if (rc == ZT_OK) {
        phase(ctx, "tensors");
        rc = put_tensors(ctx, f, &s, &plan, cs, h, file, 1, a, st);
        if (rc == ZT_OK) rc = zt_be_check(zt_ctx_backend(ctx), "checkpoint", st);
        rc = ck_agree(ctx, rc, st);
    }
    if (zt_ctx_rank(ctx) == 0 && !a) ck_crash_point("after_data_write", step);
    if (rc == ZT_OK) {
        phase(ctx, "flush");
        if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) rc = ck_h5_fail(st, ZT_EIO, "%s: flush failed", file);
        rc = ck_agree(ctx, rc, st);
    }
    if (rc != ZT_OK) {
        /* abandoned: the .tmp goes first, for HDF5 may not return from
         * closing a file whose writes failed on some ranks (the watchdog
         * then ends the process with this error) */
        if (zt_ctx_rank(ctx) == 0) ck_rmtree(tmpd);
        if (rc == ZT_EIO) ck_space_explain(dir, need, st);
        zt_group_where(zt_ctx_world(ctx), "checkpoint save: close");
        ck_watch(ctx, "%s (checkpoint save at step %ld abandoned; closing its file)", st->msg, step);
    } else {
        phase(ctx, "close");
    }
    {
        zt_status cst;
        int crc = H5Fclose(f) < 0 ? ck_h5_fail(&cst, ZT_EIO, "%s: close failed", file) : ZT_OK;
        if (rc == ZT_OK && crc != ZT_OK) { rc = crc; *st = cst; }
    }
    f = -1;
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;

    if (a) goto out;   /* the background writer writes the tensors; ck_commit later */
    phase(ctx, "commit");
    if (zt_ctx_rank(ctx) == 0) rc = ck_commit(ctx, dir, step, keep, tmpd, final, file, st);
    rc = ck_root_status(ctx, rc, st);
    if (rc == ZT_OK) {
        double dt = zt_now_s() - t0;
        double bytes = (double)m->num_params * CK_NFAM * sizeof(float);
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: saved step %ld to %s (%.1f MiB in %.2f s, %.2f GB/s)",
               step, final, bytes / 1048576.0, dt, bytes / 1e9 / (dt > 0 ? dt : 1e-9));
    }
out:
    if (f >= 0) {   /* created here but not on another rank */
        if (zt_ctx_rank(ctx) == 0) ck_rmtree(tmpd);
        ck_watch(ctx, "%s (checkpoint save at step %ld abandoned; closing its file)", st->msg, step);
        H5Fclose(f);
    }
    /* an abandoned save leaves nothing behind: the previous committed
     * checkpoint stays `latest` */
    if (rc != ZT_OK && zt_ctx_rank(ctx) == 0) ck_rmtree(tmpd);
    ck_unwatch();
    zt_group_where(zt_ctx_world(ctx), "%s", "");
    if (fapl >= 0) H5Pclose(fapl);
    free(json);
    free(cs);
    zt_mem_free(h);
    ck_plan_free(&plan);
    return rc;
}
