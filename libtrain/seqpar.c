/* seqpar.c -- the all-to-all exchanges of sequence parallelism (seqpar.h). */
#include <string.h>
#include "seqpar.h"
#include "devmem.h"

void zt_seqpar_of(const zt_mesh *mesh, zt_seqpar *out) {
    out->n = zt_mesh_size(mesh, ZT_AX_SP);
    out->rank = zt_mesh_coord(mesh, ZT_AX_SP);
    out->g = out->n > 1 ? mesh->dg[ZT_AX_SP] : NULL;
}

void zt_sp_slice_tokens(const zt_seqpar *sp, int B, int T, const int *in_full, const int *tg_full,
                        int *in, int *tg) {
    const int Tl = T / sp->n;
    for (int b = 0; b < B; ++b) {
        const size_t src = (size_t)b * T + (size_t)sp->rank * Tl, dst = (size_t)b * Tl;
        memcpy(in + dst, in_full + src, sizeof(int) * (size_t)Tl);
        memcpy(tg + dst, tg_full + src, sizeof(int) * (size_t)Tl);
    }
}

/* height rows of width floats, strided (be->copy2d, else row by row) */
static void copy_rows(const zt_backend *be, float *dst, size_t dpitch, const float *src, size_t spitch,
                      size_t width, size_t height) {
    const size_t fs = sizeof(float);
    if (be->copy2d) {
        be->copy2d(dst, dpitch * fs, src, spitch * fs, width * fs, height);
        return;
    }
    for (size_t r = 0; r < height; ++r)
        zt_xcopy(be, dst + r * dpitch, 1, src + r * spitch, 1, width * fs);
}

static size_t slices_width(const zt_sp_slices *sl) {
    size_t w = 0;
    for (int s = 0; s < sl->ns; ++s) w += sl->w[s];
    return w;
}

int zt_sp_to_heads(const zt_seqpar *sp, const zt_backend *be, float *full, const float *loc,
                   int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    const int N = sp->n;
    const size_t rows = (size_t)B * Tl, Wl = slices_width(sl), chunk = rows * Wl;
    /* send[j][r][Wl]: head group j's slices of local row r */
    for (int j = 0; j < N; ++j) {
        size_t c = 0;
        for (int s = 0; s < sl->ns; ++s) {
            copy_rows(be, send + (size_t)j * chunk + c, Wl, loc + sl->off[s] + (size_t)j * sl->w[s],
                      sl->row, sl->w[s], rows);
            c += sl->w[s];
        }
    }
    ZT_TRY(sp->g->ops->alltoall(sp->g, send, recv, chunk, ZT_F32, st));
    /* recv[i][b][t][Wl] holds rank i's tokens [i Tl, (i+1) Tl) of sample b */
    const size_t T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    for (int i = 0; i < N; ++i)
        copy_rows(be, full + (size_t)i * Tl * Wl, T * Wl, recv + (size_t)i * chunk, blk, blk, (size_t)B);
    return ZT_OK;
}

int zt_sp_to_tokens(const zt_seqpar *sp, const zt_backend *be, float *loc, const float *full,
                    int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    const int N = sp->n;
    const size_t rows = (size_t)B * Tl, Wl = slices_width(sl), chunk = rows * Wl;
    const size_t T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    /* send[i][b][t][Wl]: rank i's tokens of this head group */
    for (int i = 0; i < N; ++i)
        copy_rows(be, send + (size_t)i * chunk, blk, full + (size_t)i * Tl * Wl, T * Wl, blk, (size_t)B);
    ZT_TRY(sp->g->ops->alltoall(sp->g, send, recv, chunk, ZT_F32, st));
    /* recv[j][r][Wl]: head group j's slices of local row r */
    for (int j = 0; j < N; ++j) {
        size_t c = 0;
        for (int s = 0; s < sl->ns; ++s) {
            copy_rows(be, loc + sl->off[s] + (size_t)j * sl->w[s], sl->row,
                      recv + (size_t)j * chunk + c, Wl, sl->w[s], rows);
            c += sl->w[s];
        }
    }
    return ZT_OK;
}

uint64_t zt_sp_alltoall_bytes(int N, int B, int Tl, int L, int recomputed, size_t QKV, size_t AD,
                              size_t es) {
    if (N < 2) return 0;
    const uint64_t rows = (uint64_t)B * (uint64_t)Tl;
    /* one exchange of a [rows, W] array: every head group's chunk but its own */
    const uint64_t fwd = (rows * QKV / (uint64_t)N + rows * AD / (uint64_t)N) * (uint64_t)(N - 1) * es;
    return fwd * (uint64_t)(2 * L + recomputed);   /* forward + backward (same sizes) + recompute */
}
