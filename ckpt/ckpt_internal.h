/* ckpt_internal.h -- shared internals of the checkpoint code (not installed). */
#ifndef ZT_CKPT_INTERNAL_H
#define ZT_CKPT_INTERNAL_H
#include <hdf5.h>
#include "ctx.h"
#include "ztrain_ckpt.h"

/* Elements per I/O and transfer piece: bounds the reader's buffer in
 * one-reader restores (16 MiB of fp32) and every single HDF5 read/write. */
#ifndef CK_CHUNK_ELEMS
#define CK_CHUNK_ELEMS ((size_t)4 << 20)
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

/* The three per-tensor families and their HDF5 groups. */
enum { CK_PARAMS = 0, CK_M = 1, CK_V = 2, CK_NFAM = 3 };
extern const char *const ck_family_group[CK_NFAM];

/* ---------------------------------------------------------------- HDF5 */
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

/* Read and check the header attributes of an open file. */
int ck_read_header(hid_t f, const char *file, zt_ckpt_info *info, int with_config,
                   zt_status *st);

/* Dataset name of family f for tensor name: "params/wte" etc. */
void ck_dataset_name(char *buf, size_t n, int fam, const char *tensor);

/* ---------------------------------------------------------------- files */
/* "<dir>/step-<N>" -> N; only exact committed names match. */
int ck_parse_step(const char *name, long *step);
/* Resolve a checkpoint path (step dir or file) to its state.h5 path.
 * Returns 1 if path is a checkpoint, 0 if it is a directory without a
 * state.h5 (a directory of checkpoints), -1 if it does not exist. */
int ck_resolve(const char *path, char *file, size_t n);
int ck_fsync_path(const char *path, int dir, zt_status *st);
int ck_rmtree(const char *path);
int ck_mkdir_p(const char *dir, zt_status *st);
/* Committed step numbers in dir, newest first (malloc'ed; *n may be 0). */
int ck_scan_steps(const char *dir, long **steps, int *n, zt_status *st);
/* Remove stale step-*.tmp and latest.tmp in dir; returns how many. */
int ck_clean_stale(const char *dir, char *report, size_t n);

/* ---------------------------------------------------------------- MPI */
MPI_Comm ck_comm(zt_ctx *ctx);
/* Agreement: all ranks end with the status of the lowest failing rank
 * (message prefixed "rank N: " when N > 0); returns its code. */
int ck_agree(zt_ctx *ctx, int rc, zt_status *st);
/* Rank 0's status to all ranks; returns its code. */
int ck_root_status(zt_ctx *ctx, int rc, zt_status *st);
int ck_bcast_str(zt_ctx *ctx, char **s, zt_status *st);

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

/* ---------------------------------------------------------------- test hooks */
/* ZT_CKPT_CRASH_AT=<phase>[@<step>]: SIGKILL this process at that point
 * (test-only fault injection; docs/checkpoints.md). */
void ck_crash_point(const char *phase, long step);

#endif
