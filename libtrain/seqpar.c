/* seqpar.c -- the all-to-all exchanges of sequence parallelism (seqpar.h). */
#include "seqpar.h"
#include "devmem.h"

static size_t slices_width(const zt_sp_slices *sl) {
    size_t w = 0;
    for (int s = 0; s < sl->ns; ++s) w += sl->w[s];
    return w;
}

int zt_sp_to_heads(const zt_seqpar *sp, const zt_backend *be, float *full, const float *loc,
                   int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    const int N = sp->n;
    const size_t rows = (size_t)B * Tl, Wl = slices_width(sl), chunk = rows * Wl, fs = sizeof(float);
    /* send[j][r][Wl]: head group j's slices of local row r */
    for (int j = 0; j < N; ++j)
        for (size_t r = 0; r < rows; ++r) {
            size_t c = 0;
            for (int s = 0; s < sl->ns; ++s) {
                zt_xcopy(be, send + (size_t)j * chunk + r * Wl + c, 1,
                         loc + r * sl->row + sl->off[s] + (size_t)j * sl->w[s], 1, sl->w[s] * fs);
                c += sl->w[s];
            }
        }
    ZT_TRY(sp->g->ops->alltoall(sp->g, send, recv, chunk, ZT_F32, st));
    /* recv[i][b][t][Wl] holds rank i's tokens [i Tl, (i+1) Tl) of sample b */
    const size_t T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    for (int i = 0; i < N; ++i)
        for (int b = 0; b < B; ++b)
            zt_xcopy(be, full + ((size_t)b * T + (size_t)i * Tl) * Wl, 1,
                     recv + (size_t)i * chunk + (size_t)b * blk, 1, blk * fs);
    return ZT_OK;
}

int zt_sp_to_tokens(const zt_seqpar *sp, const zt_backend *be, float *loc, const float *full,
                    int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    const int N = sp->n;
    const size_t rows = (size_t)B * Tl, Wl = slices_width(sl), chunk = rows * Wl, fs = sizeof(float);
    const size_t T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    /* send[i][b][t][Wl]: rank i's tokens of this head group */
    for (int i = 0; i < N; ++i)
        for (int b = 0; b < B; ++b)
            zt_xcopy(be, send + (size_t)i * chunk + (size_t)b * blk, 1,
                     full + ((size_t)b * T + (size_t)i * Tl) * Wl, 1, blk * fs);
    ZT_TRY(sp->g->ops->alltoall(sp->g, send, recv, chunk, ZT_F32, st));
    /* recv[j][r][Wl]: head group j's slices of local row r */
    for (int j = 0; j < N; ++j)
        for (size_t r = 0; r < rows; ++r) {
            size_t c = 0;
            for (int s = 0; s < sl->ns; ++s) {
                zt_xcopy(be, loc + r * sl->row + sl->off[s] + (size_t)j * sl->w[s], 1,
                         recv + (size_t)j * chunk + r * Wl + c, 1, sl->w[s] * fs);
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
