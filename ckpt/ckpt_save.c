/*
 * ckpt_save.c -- write a checkpoint and commit it (every rank calls it).
 *
 * Rank 0 writes the file's metadata alone (create_file: attributes,
 * /config, every dataset with its space allocated, the metadata checksums);
 * then every rank writes the slices it owns (zt_ctx_owned_state) of every
 * tensor with pwrite at the datasets' file addresses (contiguous, full
 * logical shape: a flat range is one byte range) and fsyncs them.  No HDF5
 * or MPI-IO collective is involved, so an I/O error on any rank in any
 * phase ends the phase's agreement and the save on every rank within
 * seconds (docs/checkpoints.md, "Failure model").  Checksums are computed
 * per tensor over the logical tensor: each writer sums its slices
 * (zt_ckpt_checksum), one all-reduce adds the partial sums.  Then rank 0
 * commits (ck_commit, ckpt_commit.c):
 *
 *   step-N.tmp/state.h5  metadata (rank 0), tensor data (every writer), fsync'ed by each
 *   commit: fsync, rename step-N.tmp -> step-N, `latest`, prune
 *
 * A background save (ckpt_async.c) runs the same phases on its snapshot
 * through a ck_deferred (ckpt_internal.h): the save takes the snapshot and
 * its checksums from there and lists the tensor data's pieces into it for
 * the background writer; this file calls nothing of the background save's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "devmem.h"
#include "optim.h"

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
    if (ck_put_str_dataset(f, "config", json) < 0) bad = 1;
    /* LoRA: the settings and the frozen base's fingerprint (ckpt_lora.c) */
    if (zt_ctx_lora_model(ctx)) {
        char *lj = ck_lora_json(ctx);
        if (!lj || ck_put_str_dataset(f, "lora", lj) < 0) bad = 1;
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
    if (bad) return ck_h5_fail(st, ZT_EIO, "%s: cannot write the checkpoint metadata (attributes, "
                               "/config)", file);
    return ZT_OK;
}

/* Rank 0, serially: the groups and every tensor dataset with its space
 * allocated (contiguous layout, no fill value: nothing of the tensor data is
 * written here) and its attributes; offs[fam * nt + t] receives each
 * dataset's file address (H5Dget_offset), where the ranks write its data. */
static int create_datasets(hid_t f, const zt_train_state *s, const uint64_t *cs, const char *file,
                           uint64_t *offs, zt_status *st) {
    const zt_model *m = s->model;
    int nt = m->n_tensors, rc = ZT_OK;
    hid_t g1 = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g2 = H5Gcreate2(f, "optimizer/m", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g3 = H5Gcreate2(f, "optimizer/v", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g1 < 0 || g2 < 0 || g3 < 0) rc = ck_h5_fail(st, ZT_EIO, "%s: cannot create groups", file);
    if (g1 >= 0) H5Gclose(g1);
    if (g2 >= 0) H5Gclose(g2);
    if (g3 >= 0) H5Gclose(g3);
    if (rc) return rc;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    for (int ti = 0; ti < nt && rc == ZT_OK; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        hsize_t hd[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
        if (t->ndim == 1) hd[0] = t->numel;
        for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam) {
            char name[128];
            ck_dataset_name(name, sizeof name, fam, t->name);
            hid_t sp = H5Screate_simple(t->ndim, hd, NULL);
            hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Sclose(sp);
            if (d < 0) {
                rc = ck_h5_fail(st, ZT_EIO, "%s: cannot create dataset %s", file, name);
                break;
            }
            int bad = ck_attr_put_u64(d, "checksum", cs[fam * nt + ti]);
            bad |= ck_attr_put_u64(d, "offset", t->offset);
            bad |= ck_attr_put_str(d, "unit", m->units[t->unit].name);
            haddr_t base = H5Dget_offset(d);
            H5Dclose(d);
            if (bad)
                rc = ck_h5_fail(st, ZT_EIO, "%s: cannot write the attributes of dataset %s", file,
                                name);
            else if (base == HADDR_UNDEF)
                rc = ck_h5_fail(st, ZT_EIO, "%s: dataset %s has no file address", file, name);
            else
                offs[fam * nt + ti] = (uint64_t)base;
        }
    }
    H5Pclose(dcpl);
    return rc;
}

/* An abandoned file (a write failed): HDF5's descriptor of it is moved onto
 * an anonymous memory file before H5Fclose, so that the close's writes of
 * the dirty metadata succeed.  HDF5 1.10 cannot close a file whose metadata
 * it could not write: once a flush failed every later one fails too ("slist
 * already enabled?"), and the failed H5Fclose leaves a dangling handle that
 * crashes the process when HDF5 shuts down. */
static void divert(hid_t f) {
    int *fdp = NULL;
    if (H5Fget_vfd_handle(f, H5P_DEFAULT, (void **)&fdp) < 0 || !fdp || *fdp < 0) return;
    int mfd = memfd_create("ztrain-abandoned-checkpoint", MFD_CLOEXEC);
    if (mfd < 0) return;
    if (dup2(mfd, *fdp) < 0) { /* the close then fails as before */ }
    close(mfd);
}

/* The file HDF5 wrote into the memory file mfd, copied to file: its data
 * extents only (SEEK_DATA/SEEK_HOLE: the metadata; the datasets' space is
 * a hole there and stays one), then the file's full size. */
static int copy_image(int mfd, const char *file, zt_status *st) {
    const off_t size = lseek(mfd, 0, SEEK_END);
    if (size < 0) return zt_fail(st, ZT_EIO, "%s: metadata image: %s", file, strerror(errno));
    int out = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        return zt_fail(st, ZT_EIO, "%s: cannot create checkpoint file: %s", file, strerror(errno));
    const size_t B = (size_t)1 << 20;
    char *buf = malloc(B);
    int rc = buf ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory");
    off_t pos = 0;
    while (rc == ZT_OK && pos < size) {
        off_t d = lseek(mfd, pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO) break;   /* only a hole left */
        off_t e = d < 0 ? -1 : lseek(mfd, d, SEEK_HOLE);
        if (d < 0 || e < 0) {
            rc = zt_fail(st, ZT_EIO, "%s: metadata image: %s", file, strerror(errno));
            break;
        }
        for (off_t o = d; o < e && rc == ZT_OK; o += (off_t)B) {
            const size_t k = (size_t)(e - o) < B ? (size_t)(e - o) : B;
            ssize_t r;
            do r = pread(mfd, buf, k, o); while (r < 0 && errno == EINTR);
            if (r != (ssize_t)k)
                rc = zt_fail(st, ZT_EIO, "%s: metadata image: %s", file,
                             r < 0 ? strerror(errno) : "short read");
            else if (ck_write_all(out, buf, k, (uint64_t)o) != 0)
                rc = zt_fail(st, ZT_EIO, "%s: cannot write the checkpoint metadata (%s)", file,
                             strerror(errno));
        }
        pos = e;
    }
    free(buf);
    if (rc == ZT_OK && ftruncate(out, size) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: cannot extend to %lld bytes: %s", file, (long long)size,
                     strerror(errno));
    if (close(out) != 0 && rc == ZT_OK)
        rc = zt_fail(st, ZT_EIO, "%s: cannot write the checkpoint metadata (close: %s)", file,
                     strerror(errno));
    return rc;
}

/* Rank 0, serially: the whole file but the tensor data -- attributes,
 * /config, the datasets with their space allocated, the metadata checksums.
 * HDF5 (sec2 driver, no MPI-IO) builds it in a memory file (tmpfs,
 * /dev/shm; sparse: only the metadata takes memory), where no write
 * fails, and this rank then
 * copies its metadata into `file` with plain writes.  So a full disk (or
 * EIO) at the metadata is an error of ours, returned at once; HDF5 never
 * meets a failed write, which it handles badly (see divert), and no other
 * rank is inside an HDF5 or MPI-IO collective that the failure would leave
 * waiting (docs/checkpoints.md, "Failure model").  Without /dev/shm (nor
 * $TMPDIR, /tmp) HDF5 writes `file` directly.  The caller sends the status to every rank. */
static int create_file(zt_ctx *ctx, const zt_train_state *s, const char *json, double created,
                       const uint64_t *cs, const char *file, uint64_t *offs, zt_status *st) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return ck_h5_fail(st, ZT_EINTERNAL, "%s: H5Pcreate failed", file);
    H5Pset_fapl_sec2(fapl);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);   /* a file no one else opens */
#endif
    /* datasets of 1 MiB or more start at a multiple of 1 MiB (stripes) */
    H5Pset_alignment(fapl, (hsize_t)1 << 20, (hsize_t)1 << 20);
    /* no sieve buffer: the string datasets' data is written inside
     * H5Dwrite, whose status then says whether it was (HDF5 1.10 loses the
     * error of a sieve buffer written out later) */
    H5Pset_sieve_buf_size(fapl, 0);
    /* the memory file: a tmpfs file (/dev/shm; else $TMPDIR or /tmp, local
     * and sparse too), unlinked as soon as HDF5 has it open.  (HDF5 needs
     * a real path: it resolves symbolic links, so /proc/self/fd/N of a
     * memfd does not work.) */
    const char *tmpdirs[3] = {"/dev/shm", getenv("TMPDIR"), "/tmp"};
    char mpath[ZT_PATH_MAX];
    int mfd = -1;
    hid_t f = -1;
    for (int i = 0; i < 3 && f < 0; ++i) {
        if (!tmpdirs[i] || !*tmpdirs[i]) continue;
        if (snprintf(mpath, sizeof mpath, "%s/ztrain-checkpoint-XXXXXX", tmpdirs[i]) >=
            (int)sizeof mpath)
            continue;
        if ((mfd = mkostemp(mpath, O_CLOEXEC)) < 0) continue;
        f = H5Fcreate(mpath, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        unlink(mpath);
        if (f < 0) { H5Eclear2(H5E_DEFAULT); close(mfd); mfd = -1; }
    }
    if (f < 0) f = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) return ck_h5_fail(st, ZT_EIO, "%s: cannot create checkpoint file", file);
    int rc = put_meta(ctx, f, s, json, created, file, st);
    if (rc == ZT_OK) rc = create_datasets(f, s, cs, file, offs, st);
    if (rc == ZT_OK) {
        /* the checksums of every attribute and of /config, read back */
        char *lines = ck_meta_lines(f, file, st);
        rc = lines ? ck_put_meta_checksums(f, lines, file, st) : st->code;
        free(lines);
    }
    if (rc == ZT_OK && H5Fflush(f, H5F_SCOPE_GLOBAL) < 0)
        rc = ck_h5_fail(st, ZT_EIO, "%s: cannot write the checkpoint metadata", file);
    if (rc != ZT_OK) divert(f);
    if (H5Fclose(f) < 0 && rc == ZT_OK)
        rc = ck_h5_fail(st, ZT_EIO, "%s: cannot write the checkpoint metadata (close)", file);
    ck_crash_point("save_metadata", s->step);
    if (mfd >= 0) {
        if (rc == ZT_OK) rc = copy_image(mfd, file, st);
        close(mfd);
    }
    return rc;
}

/* One more piece in a deferred save's list (grown to 256, then doubled). */
static int add_piece(ck_wpieces *l, const ck_wpiece *p, zt_status *st) {
    if (l->n == l->cap) {
        const int nc = l->cap ? 2 * l->cap : 256;
        ck_wpiece *r = realloc(l->p, (size_t)nc * sizeof *r);
        if (!r) return zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint pieces)");
        l->p = r;
        l->cap = nc;
    }
    l->p[l->n++] = *p;
    return ZT_OK;
}

/* Every rank: the tensor data of the pieces it owns (writers only), written
 * with pwrite at the datasets' file addresses offs (contiguous datasets, a
 * flat range is one byte range) through *fd (opened here when the rank has
 * pieces; -1 otherwise).  No collective inside: the first error stops this
 * rank's writes, and the caller's agreement reports it on every rank.  With
 * ap (a deferred save's list) the pieces are recorded there for the
 * background writer instead. */
static int write_tensors(zt_ctx *ctx, const zt_train_state *s, const ck_plan *p,
                         const uint64_t *offs, float *h, const char *file,
                         ck_wpieces *ap, int *fd, zt_status *st) {
    const zt_model *m = s->model;
    const int nt = m->n_tensors, rank = zt_ctx_rank(ctx);
    int rc = ZT_OK, cap = 64;
    if (!ap) ck_crash_point("save_tensors", zt_ctx_step(ctx));
    uint64_t (*mine)[2] = malloc((size_t)cap * sizeof *mine);
    if (!mine) return zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int ti = 0; ti < nt && rc == ZT_OK; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        int n = ck_pieces(p, rank, t, 1, NULL, 0);
        if (n == 0) continue;
        if (n > cap) {
            void *nm = realloc(mine, (size_t)n * sizeof *mine);
            if (!nm) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
            mine = nm;
            cap = n;
        }
        ck_pieces(p, rank, t, 1, mine, cap);
        if (!ap && *fd < 0 && (*fd = open(file, O_WRONLY | O_CLOEXEC)) < 0) {
            rc = zt_fail(st, ZT_EIO, "%s: cannot open for the tensor data: %s", file,
                         strerror(errno));
            break;
        }
        for (int fam = 0; fam < CK_NFAM && rc == ZT_OK; ++fam) {
            char name[128];
            ck_dataset_name(name, sizeof name, fam, t->name);
            ck_watch(ctx, "checkpoint save at step %ld: tensors (%s)", zt_ctx_step(ctx), name);
            const uint64_t base = offs[fam * nt + ti];
            for (int k = 0; k < n && rc == ZT_OK; ++k) {
                uint64_t a = mine[k][0], b = mine[k][1];
                const zt_owned_range *rg = range_of(s, a, b);
                if (!rg) {
                    rc = zt_fail(st, ZT_EINTERNAL, "checkpoint: a piece of %s is in no owned "
                                 "range (a bug: please report it)", t->name);
                    break;
                }
                const float *src = ck_fam_ptr(rg, fam) + (a - rg->lo);
                const uint64_t off = base + (a - t->offset) * sizeof(float);
                if (ap) {
                    ck_wpiece wp = {off, b - a, src, fam, ti};
                    rc = add_piece(ap, &wp, st);
                    continue;
                }
                if (h) {   /* a piece is at most CK_CHUNK_ELEMS long */
                    s->be->to_host(h, src, (size_t)(b - a) * sizeof(float));
                    src = h;
                }
                if (ck_write_all(*fd, src, (size_t)(b - a) * sizeof(float), off) != 0)
                    rc = zt_fail(st, ZT_EIO, "%s: cannot write dataset %s (%s)", file, name,
                                 strerror(errno));
            }
        }
    }
    free(mine);
    return rc;
}

int zt_ckpt_save(zt_ctx *ctx, const char *dir, int keep, zt_status *st) {
    return ck_save(ctx, dir, keep, NULL, st);
}

int ck_save(zt_ctx *ctx, const char *dir, int keep, const ck_deferred *d, zt_status *st) {
    zt_status_clear(st);
    ck_h5_quiet();
    if (keep < 2)
        return zt_fail(st, ZT_EINVAL, "checkpoint keep=%d: at least 2 checkpoints must be kept "
                       "(the newest may be the one a crash interrupted)", keep);
    double t0 = zt_now_s();
    zt_train_state s;
    int rc = ZT_OK;
    if (d) s = *d->state;   /* the snapshot (host memory) */
    else rc = zt_ctx_owned_state(ctx, &s, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    const zt_model *m = s.model;
    int nt = m->n_tensors;
    long step = s.step;
    const int rank = zt_ctx_rank(ctx);
    char final[ZT_PATH_MAX + 32], tmpd[ZT_PATH_MAX + 48], file[ZT_PATH_MAX + 64];
    snprintf(final, sizeof final, "%s/step-%ld", dir, step);
    snprintf(tmpd, sizeof tmpd, "%s.tmp", final);
    snprintf(file, sizeof file, "%s/%s", tmpd, ZT_CKPT_FILE);

    phase(ctx, "plan and checksums");
    ck_plan plan;
    rc = ck_plan_build(ctx, &s, &plan, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { ck_unwatch(); return rc; }

    uint64_t *cs = calloc((size_t)CK_NFAM * (size_t)nt, sizeof *cs);
    uint64_t *offs = calloc((size_t)CK_NFAM * (size_t)nt, sizeof *offs);
    char *json = NULL;
    int hfail = 0, fd = -1, explain = 0;
    uint64_t need = 0;
    int64_t jlen = 0;
    float *h = ck_stage_buf(&s, &hfail, st);   /* device state: host staging */
    if (!cs || !offs) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (hfail) rc = st->code;
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    if (d) memcpy(cs, d->checksums, (size_t)CK_NFAM * (size_t)nt * sizeof *cs);
    else partial_checksums(&s, cs, h);
    if (zt_ctx_nranks(ctx) > 1 &&
        MPI_Allreduce(MPI_IN_PLACE, cs, CK_NFAM * nt, MPI_UINT64_T, MPI_SUM, ck_comm(ctx)) != MPI_SUCCESS) {
        rc = zt_fail(st, ZT_ECOMM, "checkpoint: checksum all-reduce failed");
        goto out;
    }

    /* rank 0: a fresh step-N.tmp/ (an old one is a crashed attempt) */
    if (rank == 0) {
        rc = ck_mkdir_p(dir, st);
        if (rc == ZT_OK) {
            ck_rmtree(tmpd);
            if (mkdir(tmpd, 0777) != 0)
                rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmpd, strerror(errno));
        }
        json = zt_config_to_json(zt_ctx_config(ctx));
        if (rc == ZT_OK && !json) rc = zt_fail(st, ZT_ENOMEM, "out of memory (config JSON)");
    }
    phase(ctx, "step directory");
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;
    jlen = json ? (int64_t)strlen(json) : 0;
    if ((rc = ck_bcast_buf(ctx, &jlen, sizeof jlen, st)) != ZT_OK) goto out;
    /* room for it on the file system (every rank's view, agreed) */
    phase(ctx, "free space");
    need = ck_save_bytes(m, (size_t)jlen);
    rc = ck_space_check(dir, need, step, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    explain = 1;   /* from here an I/O error on a disk short of room says so */

    if (rank == 0) ck_watch_cleanup(tmpd);
    /* Rank 0 writes the whole file but the tensor data, alone: every HDF5
     * call of a save is serial on rank 0, so an I/O error inside one (a
     * disk that fills while the metadata is written) never leaves another
     * rank inside an HDF5 or MPI-IO collective (the way a full disk used to
     * hang every rank until comm_timeout_s).  Every phase below ends with
     * an agreement, so no rank starts the next one when any rank failed
     * (docs/checkpoints.md, "Failure model"). */
    phase(ctx, "create the file (metadata)");
    if (rank == 0) rc = create_file(ctx, &s, json, (double)time(NULL), cs, file, offs, st);
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;
    if ((rc = ck_bcast_buf(ctx, offs, (size_t)CK_NFAM * (size_t)nt * sizeof *offs, st)) != ZT_OK)
        goto out;

    phase(ctx, "tensors");
    rc = write_tensors(ctx, &s, &plan, offs, h, file, d ? d->pieces : NULL, &fd, st);
    if (rc == ZT_OK) rc = zt_be_check(zt_ctx_backend(ctx), "checkpoint", st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    if (d) goto out;   /* the background writer writes the tensors; ck_commit later */
    if (rank == 0) ck_crash_point("after_data_write", step);

    /* every rank's data durable (each rank fsyncs what it wrote: on a
     * network file system a client flushes only its own writes) */
    phase(ctx, "flush");
    if (fd >= 0) {
        if (fsync(fd) != 0) rc = zt_fail(st, ZT_EIO, "%s: fsync failed: %s", file, strerror(errno));
        if (close(fd) != 0 && rc == ZT_OK)
            rc = zt_fail(st, ZT_EIO, "%s: close failed: %s", file, strerror(errno));
        fd = -1;
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;

    /* (the commit's failures are not about the room the data needs: the
     * data is written) */
    explain = 0;
    phase(ctx, "commit");
    if (rank == 0) rc = ck_commit(ctx, dir, step, keep, tmpd, final, file, st);
    rc = ck_root_status(ctx, rc, st);
    if (rc == ZT_OK) {
        double dt = zt_now_s() - t0;
        double bytes = (double)m->num_params * CK_NFAM * sizeof(float);
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: saved step %ld to %s (%.1f MiB in %.2f s, %.2f GB/s)",
               step, final, bytes / 1048576.0, dt, bytes / 1e9 / (dt > 0 ? dt : 1e-9));
        /* a save in the step: training waits for all of it */
        zt_ctx_scalar(ctx, "checkpoint/save_s", step, dt);
        zt_ctx_scalar(ctx, "checkpoint/stall_s", step, dt);
    }
out:
    if (fd >= 0) close(fd);
    /* an abandoned save leaves nothing behind: the previous committed
     * checkpoint stays `latest` */
    if (rc != ZT_OK) {
        if (rank == 0) ck_rmtree(tmpd);
        if (rc == ZT_EIO && explain) ck_space_explain(dir, need, st);
    }
    ck_unwatch();
    zt_group_where(zt_ctx_world(ctx), "%s", "");
    free(json);
    free(cs);
    free(offs);
    zt_mem_free(h);
    ck_plan_free(&plan);
    return rc;
}
