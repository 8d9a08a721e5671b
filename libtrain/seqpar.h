/*
 * seqpar.h -- sequence parallelism (DeepSpeed-Ulysses) inside the built-in
 * models' attention.
 *
 * sequence_parallel_size = N: consecutive ranks form groups of N; every rank
 * of a group holds the same samples and Tl = T/N consecutive tokens of each
 * (rank r of the group: positions [r Tl, (r+1) Tl)).  Everything outside
 * attention is per token and runs on the Tl local tokens.  Attention needs
 * all T tokens: one all-to-all turns the token-sharded q, k, v rows
 * [B, Tl, (NH + 2 NKV) hd] into head-sharded ones [B, T, (NH + 2 NKV)/N hd]
 * (rank j: q heads [j NH/N, (j+1) NH/N), k and v heads [j NKV/N, ...)),
 * attention runs on all T positions for NH/N heads, and a second all-to-all
 * turns the output [B, T, NH/N hd] back into [B, Tl, NH hd].  The backward
 * runs the same exchanges in reverse on the gradients.  RoPE (Llama) is
 * applied after the exchange, on the full sequence, so positions are the
 * global ones; the GPT's learned positions are read at offset r Tl.
 *
 * The parameters are the same on every rank: gradients of a group's ranks
 * are partial sums over their tokens, and ZeRO's reduction over all ranks
 * (data parallel degree ranks / N) adds them up, as DeepSpeed does.
 */
#ifndef ZT_SEQPAR_H
#define ZT_SEQPAR_H
#include "backend.h"
#include "comm.h"
#include "mesh.h"

typedef struct zt_seqpar {
    int n;            /* group size N (1: off) */
    int rank;         /* this rank's place in its group, 0 .. N-1 */
    zt_group *g;      /* the group (device buffers on a device backend); not owned */
} zt_seqpar;

/* The mesh's sequence axis (mesh.h): its size, this rank's place and the
 * group over device buffers (n = 1, g = NULL without sequence parallelism).
 * The models' set_mesh hooks (arch.h) take it from here. */
void zt_seqpar_of(const zt_mesh *mesh, zt_seqpar *out);

/* Sequence parallel inputs: this rank's tokens [rank Tl, (rank+1) Tl) of B
 * whole samples of T tokens, in_full / tg_full [B, T] -> in / tg [B, T/N]
 * (host arrays). */
void zt_sp_slice_tokens(const zt_seqpar *sp, int B, int T, const int *in_full, const int *tg_full,
                        int *in, int *tg);

/* A row of the token-sharded form [.., row] holds ns slices; slice s of
 * head group j is w[s] elements at off[s] + j w[s].  The head-sharded row
 * is the concatenation of one head group's slices (Wl = sum of w[s]). */
typedef struct zt_sp_slices {
    int ns;
    size_t row, off[3], w[3];
} zt_sp_slices;

/* token-sharded loc[B, Tl, row] -> head-sharded full[B, N Tl, Wl] over the
 * group; send and recv are scratch of B Tl Wl N elements each (loc may be
 * recv: packed into send before the exchange overwrites it; full may be
 * send: written from recv after the exchange).  A failed exchange returns
 * the comm layer's error. */
int zt_sp_to_heads(const zt_seqpar *sp, const zt_backend *be, float *full, const float *loc,
                   int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st);
/* the inverse: head-sharded full[B, N Tl, Wl] -> token-sharded loc[B, Tl,
 * row] (only the slices' columns of loc are written) */
int zt_sp_to_tokens(const zt_seqpar *sp, const zt_backend *be, float *loc, const float *full,
                    int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st);

/* zt_sp_to_tokens in bf16: full rounded to bf16 (nearest even, to_bf16)
 * once, exchanged in bf16 (half the bytes) into loc16[B, Tl, row] (only
 * the slices' columns written); recv's first B Tl Wl N bf16 hold the
 * rounded full first (scratch).  The models send in bf16 what they round to
 * bf16 right after the exchange anyway (ZT_SP16_*): bitwise the same
 * values as zt_sp_to_tokens and to_bf16 of loc. */
int zt_sp_to_tokens16(const zt_seqpar *sp, const zt_backend *be, uint16_t *loc16, const float *full,
                      int B, int Tl, const zt_sp_slices *sl, float *send, float *recv, zt_status *st);

/* The exchanges a model sends in bf16 (arch.h sp16): the attention output
 * in the forward (head-sharded -> token-sharded), the q|k|v gradient in the
 * backward (head-sharded -> token-sharded); the other two stay fp32. */
enum { ZT_SP16_ATT = 1, ZT_SP16_DQKV = 2 };

/* Bytes one rank sends in the all-to-alls of one micro-batch's training
 * pass at B x Tl local tokens of L layers (forward + backward, each layer
 * two exchanges each way), with `recomputed` layers' forwards run twice
 * (activation checkpointing; katt: blocks-attn, model_acts.h
 * zt_acts_katt_on, whose recomputed forwards exchange q|k|v alone, the
 * attention's output kept): per exchange (N-1)/N of the local rows' bytes.
 * QKV, AD: the widths of the qkv row and the attention output ((NH + 2 NKV)
 * hd and NH hd); x16: the exchanges sent in bf16 (ZT_SP16_*), the others
 * fp32. */
uint64_t zt_sp_alltoall_bytes(int N, int B, int Tl, int L, int recomputed, int katt, size_t QKV,
                              size_t AD, int x16);

#endif
