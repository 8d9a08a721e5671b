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

/* height rows of width elements of es bytes, strided in elements
 * (be->copy2d, else row by row) */
static void copy_rows(const zt_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                      size_t width, size_t height, size_t es) {
    if (be->copy2d) {
        be->copy2d(dst, dpitch * es, src, spitch * es, width * es, height);
        return;
    }
    for (size_t r = 0; r < height; ++r)
        zt_xcopy(be, (char *)dst + r * dpitch * es, 1, (const char *)src + r * spitch * es, 1,
                 width * es);
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
                      sl->row, sl->w[s], rows, sizeof(float));
            c += sl->w[s];
        }
    }
    ZT_TRY(sp->g->ops->alltoall(sp->g, send, recv, chunk, ZT_F32, st));
    /* recv[i][b][t][Wl] holds rank i's tokens [i Tl, (i+1) Tl) of sample b */
    const size_t T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    for (int i = 0; i < N; ++i)
        copy_rows(be, full + (size_t)i * Tl * Wl, T * Wl, recv + (size_t)i * chunk, blk, blk, (size_t)B,
                  sizeof(float));
    return ZT_OK;
}

/* full -> send[i][b][t][Wl] (rank i's tokens of this head group), then the
 * exchange into recv[j][r][Wl] (head group j's slices of local row r), in
 * elements of es bytes (dtype t) */
static int to_tokens_exchange(const zt_seqpar *sp, const zt_backend *be, void *send, void *recv,
                              const void *full, int B, int Tl, size_t Wl, zt_dtype t, size_t es,
                              zt_status *st) {
    const int N = sp->n;
    const size_t chunk = (size_t)B * Tl * Wl, T = (size_t)N * Tl, blk = (size_t)Tl * Wl;
    for (int i = 0; i < N; ++i)
        copy_rows(be, (char *)send + (size_t)i * chunk * es, blk, (const char *)full + (size_t)i * blk * es,
                  T * Wl, blk, (size_t)B, es);
    return sp->g->ops->alltoall(sp->g, send, recv, chunk, t, st);
}

/* recv[j][r][Wl] -> loc[r][row]: head group j's slices into their columns */
static void to_tokens_unpack(const zt_backend *be, void *loc, const void *recv, int B, int Tl, int N,
                             const zt_sp_slices *sl, size_t es) {
    const size_t rows = (size_t)B * Tl, Wl = slices_width(sl), chunk = rows * Wl;
    for (int j = 0; j < N; ++j) {
        size_t c = 0;
        for (int s = 0; s < sl->ns; ++s) {
            copy_rows(be, (char *)loc + (sl->off[s] + (size_t)j * sl->w[s]) * es, sl->row,
                      (const char *)recv + ((size_t)j * chunk + c) * es, Wl, sl->w[s], rows, es);
            c += sl->w[s];
        }
    }
}

int zt_sp_to_tokens(const zt_seqpar *sp, const zt_backend *be, float *loc, const float *full,
                    int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    ZT_TRY(to_tokens_exchange(sp, be, send, recv, full, B, Tl, slices_width(sl), ZT_F32, sizeof(float),
                              st));
    to_tokens_unpack(be, loc, recv, B, Tl, sp->n, sl, sizeof(float));
    return ZT_OK;
}

int zt_sp_to_tokens16(const zt_seqpar *sp, const zt_backend *be, uint16_t *loc16, const float *full,
                      int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st) {
    const size_t Wl = slices_width(sl), n = (size_t)sp->n * B * Tl * Wl;
    /* full rounded once into recv's first n bf16 (scratch), packed from there
     * into send, exchanged in bf16 into recv */
    uint16_t *full16 = (uint16_t *)(void *)recv;
    be->to_bf16(full16, full, n);
    ZT_TRY(to_tokens_exchange(sp, be, send, recv, full16, B, Tl, Wl, ZT_BF16, sizeof(uint16_t), st));
    to_tokens_unpack(be, loc16, recv, B, Tl, sp->n, sl, sizeof(uint16_t));
    return ZT_OK;
}

uint64_t zt_sp_alltoall_bytes(int N, int B, int Tl, int L, int recomputed, int katt, size_t QKV,
                              size_t AD, int x16) {
    if (N < 2) return 0;
    const uint64_t rows = (uint64_t)B * (uint64_t)Tl, n1 = (uint64_t)(N - 1);
    /* one exchange of a [rows, W] array of es-byte elements: every head
     * group's chunk but its own */
    const uint64_t qkv = rows * QKV / (uint64_t)N * n1, att = rows * AD / (uint64_t)N * n1;
    const uint64_t att_es = x16 & ZT_SP16_ATT ? 2 : 4, dqkv_es = x16 & ZT_SP16_DQKV ? 2 : 4;
    /* forward: q|k|v fp32, the attention output; backward: the attention
     * output's gradient fp32, q|k|v's */
    const uint64_t fwd = qkv * 4 + att * att_es, bwd = att * 4 + qkv * dqkv_es;
    /* (blocks-attn: a recomputed forward's q|k|v exchange alone) */
    const uint64_t redo = katt ? qkv * 4 : fwd;
    return fwd * (uint64_t)L + redo * (uint64_t)recomputed + bwd * (uint64_t)L;
}
