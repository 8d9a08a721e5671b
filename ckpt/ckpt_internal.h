/* ckpt_internal.h -- shared internals of the checkpoint code (not installed). */
#ifndef ZT_CKPT_INTERNAL_H
#define ZT_CKPT_INTERNAL_H
#include <hdf5.h>
#include "engine.h"
#include "ztrain_ckpt.h"
#include "safetensors.h"

/* Elements per I/O and transfer piece: bounds the reader's buffer in
 * one-reader restores (16 MiB of fp32) and every single HDF5 read/write. */
#ifndef CK_CHUNK_ELEMS
#define CK_CHUNK_ELEMS ZT_CKPT_STAGE_ELEMS   /* libtrain/state.h: the plan counts it */
#endif

/* State in the backend's memory (zt_train_state.on_device): owned ranges
 * move through one host buffer of CK_CHUNK_ELEMS floats (accounted,
 * workspace); NULL (and no allocation) when the state is host memory.
 * Free with zt_mem_free.  *failed = 1 when the allocation failed. */
static inline float *ck_stage_buf(const zt_train_state *s, int *failed, zt_status *st) {
    *failed = 0;
    if (!s->on_device) return NULL;
    float *h = zt_mem_alloc(CK_CHUNK_ELEMS * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
    *failed = h == NULL;
    return h;
}

/* The three per-tensor families: params, AdamW m and v. */
enum { CK_PARAMS = 0, CK_M = 1, CK_V = 2, CK_NFAM = 3 };

/* The buffer of family f (CK_PARAMS, CK_M, CK_V) of an owned range. */
static inline float *ck_fam_ptr(const zt_owned_range *r, int f) {
    return f == CK_PARAMS ? r->param : f == CK_M ? r->m : r->v;
}

/* ---------------------------------------------------------------- checksums (ckpt_checksum.c) */
/* zt_ckpt_checksum (ztrain_ckpt.h) is the tensor checksum.  This rank's
 * partial checksums (per family and tensor, added into cs) of the slices of
 * s it writes (device state: read through the host buffer h in pieces);
 * serial = 1: without OpenMP (a background thread), calling progress(user)
 * after each slice. */
void ck_partial_checksums(const zt_train_state *s, uint64_t *cs, float *h, int serial,
                          void (*progress)(void *), void *user);

/* ---------------------------------------------------------------- HDF5: attributes, metadata checksums, the header (ckpt_hdf5.c) */
/* The families' HDF5 groups ("params", "optimizer/m", "optimizer/v") and
 * their names in messages ("weights", "AdamW m", "AdamW v"). */
extern const char *const ck_family_group[CK_NFAM];
extern const char *const ck_family_what[CK_NFAM];
/* Turn off HDF5's automatic error printing (idempotent). */
void ck_h5_quiet(void);
/* zt_fail with " (HDF5: <innermost message>)" appended; clears the stack. */
int ck_h5_fail(zt_status *st, int code, const char *fmt, ...) ZT_PRINTF(3, 4);
/* Select elements [a, b) (row-major, within the tensor) of a tensor's file
 * dataspace as a union of at most three blocks; a == b selects none. */
int ck_select_flat(hid_t space, int ndim, const uint64_t *dims, uint64_t a, uint64_t b);

int ck_attr_put_i64(hid_t obj, const char *name, int64_t v);
int ck_attr_put_u64(hid_t obj, const char *name, uint64_t v);
int ck_attr_put_f64(hid_t obj, const char *name, double v);
int ck_attr_put_str(hid_t obj, const char *name, const char *v);
/* Readers return 0 or -1 (missing or wrong kind). */
int ck_attr_get_i64(hid_t obj, const char *name, int64_t *v);
int ck_attr_get_u64(hid_t obj, const char *name, uint64_t *v);
int ck_attr_get_f64(hid_t obj, const char *name, double *v);
int ck_attr_get_str(hid_t obj, const char *name, char *buf, size_t n);

/* Serial read-only open (sec2 driver, no file locking): >= 0 or -1 + st. */
hid_t ck_open_serial(const char *file, zt_status *st);

/* Metadata checksums: one line "<hex64> <key>\n" per attribute of every
 * object ("/@step", "/model@n_layer", "/params/wte@offset", ...) and one for
 * the /config JSON ("/config"), in HDF5 name order; stored as the string
 * dataset /meta_checksums (ZT_CKPT_META_DATASET).  ck_meta_lines computes
 * them from an open file (malloc'ed string; NULL + st on failure; in a
 * parallel file every rank must call it).  ck_check_meta compares them with
 * the stored ones: ZT_EDATA naming the first attribute that differs;
 * *present = 0 (and ZT_OK) when the file has none (older checkpoints). */
#define ZT_CKPT_META_DATASET "meta_checksums"
int ck_put_str_dataset(hid_t f, const char *name, const char *s);
char *ck_meta_lines(hid_t f, const char *file, zt_status *st);
/* A scalar string dataset's text (malloc'ed), NULL when absent. */
char *ck_get_str_dataset(hid_t f, const char *name);
int ck_check_meta(hid_t f, const char *file, int *present, zt_status *st);
/* Write /meta_checksums (a save's rank 0, serially). */
int ck_put_meta_checksums(hid_t f, const char *lines, const char *file, zt_status *st);

/* Read and check the header attributes of an open file (the metadata
 * checksums first: a corrupt attribute is ZT_EDATA naming it). */
int ck_read_header(hid_t f, const char *file, zt_ckpt_info *info, int with_config,
                   zt_status *st);

/* Dataset name of family f for tensor name: "params/wte" etc. */
void ck_dataset_name(char *buf, size_t n, int fam, const char *tensor);

/* ---------------------------------------------------------------- directories and durability (ckpt_files.c) */
/* "<dir>/step-<N>" -> N; only exact committed names match. */
int ck_parse_step(const char *name, long *step);
/* Resolve a checkpoint path (step dir or file) to its state.h5 path.
 * Returns 1 if path is a checkpoint, 0 if it is a directory without a
 * state.h5 (a directory of checkpoints), -1 if it does not exist. */
int ck_resolve(const char *path, char *file, size_t n);
int ck_fsync_path(const char *path, int dir, zt_status *st);
/* pwrite all n bytes of buf at file offset off (EINTR and short writes
 * retried): 0, or -1 with errno. */
int ck_write_all(int fd, const void *buf, size_t n, uint64_t off);
int ck_rmtree(const char *path);
int ck_mkdir_p(const char *dir, zt_status *st);
/* Committed step numbers in dir, newest first (malloc'ed; *n may be 0). */
int ck_scan_steps(const char *dir, long **steps, int *n, zt_status *st);
/* Rename checkpoint dir/step-N aside to step-N.corrupt-<time> (never
 * resumed from, never pruned); q receives the new name.  0 or -1. */
int ck_quarantine(const char *path, char *q, size_t n);
/* Remove stale step-*.tmp and latest.tmp in dir; returns how many. */
int ck_clean_stale(const char *dir, char *report, size_t n);

/* ---------------------------------------------------------------- one run per directory (ckpt_lock.c) */
/* Rank 0 of a training run: take <dir>/.ztrain.lock as mode
 * (ztrain.checkpoint.lock) says -- "on": an fcntl write lock held until
 * ck_lock_release, refused (ZT_EIO, one line naming the holder and what to
 * do) while another run holds it (an earlier instance of this Slurm job is
 * waited for up to wait_s seconds first); "break": take it over anyway
 * (a warning); "off": no lock (*out = NULL).  A lock file left by a run
 * that ended without releasing it is taken over (logged).  Local (rank 0).
 * docs/checkpoints.md, "One job per directory". */
#define CK_LOCK_FILE ".ztrain.lock"
typedef struct ck_lock ck_lock;
int ck_lock_take(zt_ctx *ctx, const char *dir, const char *mode, double wait_s, ck_lock **out,
                 zt_status *st);
/* Remove the lock file (while it is still this run's) and drop the lock. */
void ck_lock_release(ck_lock *l);

/* ---------------------------------------------------------------- free space (ckpt_space.c) */
/* The bytes a checkpoint of m takes on disk (an upper bound: the fp32
 * params, m and v plus an allowance for the metadata; json_len: the
 * configuration JSON). */
uint64_t ck_save_bytes(const zt_model *m, size_t json_len);
/* ZT_EIO naming dir, its file system's mount point, the bytes free and
 * the bytes needed when the file system of dir has less than need bytes
 * free (statvfs f_bavail). */
int ck_space_check(const char *dir, uint64_t need, long step, zt_status *st);
/* After a write error: when the file system of dir has less than need
 * bytes free, append that (mount point, bytes free, bytes needed) to
 * st->msg. */
void ck_space_explain(const char *dir, uint64_t need, zt_status *st);
/* rank 0, at start-up: warn when the next checkpoint cannot fit */
void ck_space_preflight(zt_ctx *ctx, const char *dir);

/* ---------------------------------------------------------------- cross-rank agreement (ckpt_agree.c) */
MPI_Comm ck_comm(zt_ctx *ctx);
/* Agreement (over the world group's collectives, comm.h, bounded by its
 * timeout): all ranks end with the status of the lowest failing rank
 * (message prefixed "rank N: " when N > 0); returns its code. */
int ck_agree(zt_ctx *ctx, int rc, zt_status *st);
/* Rank 0's status to all ranks; returns its code. */
int ck_root_status(zt_ctx *ctx, int rc, zt_status *st);
int ck_bcast_str(zt_ctx *ctx, char **s, zt_status *st);
/* n bytes of rank 0's buf to every rank (bounded like the agreement). */
int ck_bcast_buf(zt_ctx *ctx, void *buf, size_t n, zt_status *st);

/* ---------------------------------------------------------------- the I/O watchdog (ckpt_watchdog.c) */
/* Arm (or re-arm: progress) the watchdog of the checkpoint I/O phase named
 * by fmt: if no ck_watch or ck_unwatch follows within ztrain.comm_timeout_s,
 * the process prints one error naming the phase and exits 1 (ckpt_watchdog.c).
 * No-op with one rank or no timeout. */
void ck_watch(zt_ctx *ctx, const char *fmt, ...) ZT_PRINTF(2, 3);
void ck_unwatch(void);
/* Until ck_unwatch: the watchdog removes path (rank 0: a save's .tmp)
 * before ending the process. */
void ck_watch_cleanup(const char *path);

/* ---------------------------------------------------------------- owned ranges and their pieces (ckpt_plan.c) */
/* All ranks' owned ranges (world order). */
typedef struct ck_plan {
    int nranks;
    int *first, *count;       /* per rank: index of its first range, how many */
    int *writer;              /* per rank */
    uint64_t *lo, *hi;        /* all ranges */
    int total;
} ck_plan;
int ck_plan_build(zt_ctx *ctx, const zt_train_state *s, ck_plan *p, zt_status *st);
void ck_plan_free(ck_plan *p);
/* The pieces (flat [lo, hi), at most CK_CHUNK_ELEMS each) rank r handles in
 * tensor t: writers only when writers_only.  Returns the count; when out is
 * non-NULL fills at most cap pairs. */
int ck_pieces(const ck_plan *p, int r, const zt_tensor_info *t, int writers_only,
              uint64_t (*out)[2], int cap);

/* Owned elements [x, y) of range rg, family f, from host values src (device
 * state: copied to the device). */
void ck_put_owned(const zt_train_state *s, const zt_owned_range *rg, int f, uint64_t x,
                  uint64_t y, const float *src);
/* Send flat elements [a, b) (b - a <= CK_CHUNK_ELEMS) of family f from rank
 * 0's buf to their owners; every rank calls it.  reqs: p->total requests
 * (rank 0); h: device state's host buffer (receives land there first), NULL
 * for host state; what: names the operation in errors. */
int ck_scatter(zt_ctx *ctx, const zt_train_state *s, const ck_plan *p, uint64_t a,
               uint64_t b, const float *buf, int f, MPI_Request *reqs, float *h,
               const char *what, zt_status *st);

/* ---------------------------------------------------------------- tensor table (serial tools, ckpt_tools.c) */
/* One /params dataset of a checkpoint file, in offset order. */
typedef struct ck_tinfo {
    char name[128];
    int ndim;
    hsize_t dims[2];
    uint64_t numel, offset;
} ck_tinfo;
typedef struct ck_tlist { ck_tinfo *t; int n, cap; } ck_tlist;
/* Open the state file of checkpoint `path` (step dir or state.h5), read its
 * header (with the configuration JSON when with_config) and tensor table.
 * On success *f is open (H5Fclose it), L->t allocated (free it) and
 * in->config_json owned by the caller (zt_ckpt_info_free); on failure
 * nothing is left open. */
int ck_open_table(const char *path, char *file, size_t n, hid_t *f, zt_ckpt_info *in,
                  int with_config, ck_tlist *L, zt_status *st);
/* Read /params (or any family's) dataset `name` of shape t in pieces of at
 * most CK_CHUNK_ELEMS (buf holds that many), compute its checksum into
 * *sum and hand each piece to sink (may be NULL). */
typedef int (*ck_piece_fn)(void *user, const float *x, uint64_t first, uint64_t n);
int ck_read_checksum(hid_t f, const char *file, const char *name, const ck_tinfo *t, float *buf,
                     uint64_t *sum, ck_piece_fn sink, void *user, zt_status *st);
/* Read the stored checksum of dataset `name` and compare with sum:
 * ZT_EDATA naming it when they differ. */
int ck_check_sum(hid_t f, const char *file, const char *name, uint64_t sum, zt_status *st);
/* Export /params dataset t through w (transpose: write ours [R, C] as
 * [C, R], using whole[numel]); the checksum is verified. */
int ck_export_tensor(hid_t f, const char *file, const ck_tinfo *t, int transpose, float *buf,
                     float *whole, zt_st_writer *w, zt_status *st);
/* Its shape in the exported file. */
void ck_export_shape(const ck_tinfo *t, int transpose, zt_st_spec *sp);

/* (Hugging Face tensor names: the architecture's descriptor, arch.h zt_arch_hf_name) */

/* ---------------------------------------------------------------- Hugging Face sources, LoRA, PEFT (hf_model.c, hf_source.c, ckpt_lora.c, peft_config.c) */
/* LoRA (ckpt_lora.c): the /lora dataset's JSON for this context (malloc'ed;
 * NULL without LoRA), and the check of a checkpoint's /lora against the
 * context on restore (a full checkpoint for a LoRA run, adapters for
 * another base or other settings: ZT_EINVAL naming it). */
char *ck_lora_json(zt_ctx *ctx);
/* Every tensor of a Hugging Face model directory's safetensors file(s)
 * (model.safetensors, else the index's shards), file by file. */
typedef int (*ck_hf_tensor_fn)(void *user, const zt_st_file *f, const zt_st_tensor *t,
                               zt_status *st);
int ck_hf_each_tensor(const char *dir, ck_hf_tensor_fn fn, void *user, zt_status *st);
/* A frozen LoRA base's fingerprint as zt_hf_load records it (hf_model.c):
 * FNV-1a 64 of dir/config.json's bytes, and of each tensor of m as loaded
 * from dir (fp32, the same reads) into fnv[m->n_tensors].  Both the resume
 * (ck_lora_check) and `ckpt export --hf --merge` compare it with the
 * checkpoint's /lora base. */
struct zt_model;
int ck_hf_base_config_fnv(const char *dir, uint64_t *config_fnv, zt_status *st);
int ck_hf_base_fingerprint(const struct zt_model *m, const char *dir, uint64_t *fnv, zt_status *st);
int ck_lora_check(zt_ctx *ctx, hid_t f, const char *file, zt_status *st);
/* peft_config.c: a PEFT adapter's adapter_config.json (j, read from file)
 * against the run's LoRA settings mc: ZT_EINVAL naming every key it cannot
 * apply as PEFT does, and every setting that differs. */
struct json_t;
int ck_peft_config_check(const zt_model_config *mc, struct json_t *j, const char *file, zt_status *st);
/* hf_source.c: the config.json and tokenizer files of a Hugging Face model
 * directory that an export copies, and their fingerprints ("NAME=HEX16 ..."
 * for the files present; FNV-1a 64 mixed with the length). */
#define CK_HF_SIDE_FILES 8
extern const char *const ck_hf_side_files[CK_HF_SIDE_FILES];
int ck_hf_fingerprint(const char *dir, char *out, size_t n, zt_status *st);
/* "tokenizer.json changed, vocab.json missing" between two fingerprint texts
 * ("" when equal). */
void ck_hf_fingerprint_diff(const char *want, const char *have, char *out, size_t n);

/* ---------------------------------------------------------------- the save (ckpt_save.c) and its commit (ckpt_commit.c) */
/* One piece of the tensor data: n floats from src to byte offset off of
 * the checkpoint file (a flat range of a contiguous dataset, whose address
 * H5Dget_offset gave); fam, tensor name it in errors. */
typedef struct ck_wpiece {
    uint64_t off, n;
    const float *src;
    int fam, tensor;
} ck_wpiece;
typedef struct ck_wpieces { ck_wpiece *p; int n, cap; } ck_wpieces;
/* A deferred save (a background save, ckpt_async.c, on its snapshot): the
 * state is the host snapshot the caller took, with its partial checksums
 * ([CK_NFAM][n_tensors], ck_partial_checksums); the tensor pass lists its
 * pieces into *pieces (appended; the caller frees pieces->p) instead of
 * writing them, and the save returns after the file's metadata is written
 * on every rank, before the flush and the commit (ck_commit).  The save
 * knows nothing else of its caller: the background save calls the save,
 * never the other way. */
typedef struct ck_deferred {
    const zt_train_state *state;
    const uint64_t *checksums;
    ck_wpieces *pieces;
} ck_deferred;
/* The save of every rank (d = NULL: synchronous, zt_ckpt_save). */
int ck_save(zt_ctx *ctx, const char *dir, int keep, const ck_deferred *d, zt_status *st);
/* rank 0: fsync, rename, `latest`, prune (docs/checkpoints.md) */
int ck_commit(zt_ctx *ctx, const char *dir, long step, int keep, const char *tmpd,
              const char *final, const char *file, zt_status *st);

/* ---------------------------------------------------------------- test hooks (ckpt_hooks.c) */
/* ZT_CKPT_CRASH_AT=[stop:]<phase>[@<step>]: SIGKILL (stop: SIGSTOP) this
 * process at that point; ZT_CKPT_CRASH_RANK=R: only on rank R (test-only
 * fault injection; docs/checkpoints.md). */
void ck_crash_point(const char *phase, long step);
/* The test hooks' variables (ZT_CKPT_CRASH_AT, ZT_CKPT_CRASH_RANK below
 * world, ZT_CKPT_WRITE_DELAY_MS, ZT_CKPT_COPY_DELAY_MS,
 * ZT_CKPT_STEP_SLEEP_MS, ZT_CKPT_WRITER_NICE, ZT_CKPT_DIRECT_IO), checked
 * once when a session opens: a value that is not of its kind is ZT_EINVAL
 * naming the variable, its value and what it takes (zt_env_int). */
int ck_env_check(int world, zt_status *st);
#define CK_ENV_MS_MAX 3600000L   /* the delays and sleeps: at most an hour */

#endif
