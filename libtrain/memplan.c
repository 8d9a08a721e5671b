/* memplan.c -- the memory planner (see memplan.h and docs/memory.md). */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memplan.h"
#include "mesh.h"
#include "moe.h"
#include "seqpar.h"
#include "precision.h"
#include "shard.h"   /* ZT_RS_INFLIGHT */
#include "arch.h"
#include "classifier.h"
#include "lora.h"
#include "backend.h"
#include "cuda/cuda_workspace.h"
#include "state.h"   /* ZT_CKPT_STAGE_ELEMS */
#include "model_acts.h"   /* the checkpoint groups */

/* ------------------------------------------------------------ helpers */

void zt_memplan_fmt_bytes(double b, char *buf, size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (b >= 1024.0 && i < 5) { b /= 1024.0; i++; }
    if (i == 0) snprintf(buf, n, "%.0f B", b);
    else snprintf(buf, n, "%.2f %s", b, u[i]);
}

static uint64_t umax(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t umin(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void zt_memplan_opts_init(zt_memplan_opts *o, int world_size) {
    memset(o, 0, sizeof *o);
    o->world_size = world_size;
    o->ranks_per_node = 0;
    o->target = ZT_MP_TARGET_AUTO;
    o->with_data = -1;
    o->with_eval = -1;
}

/* ------------------------------------------------------------ activations */

/* The architecture's activation block (its model's own carve, every array
 * rounded up to 16 elements; arch.h acts_bytes) plus the batch buffer's
 * token arrays (train.c: inputs and targets, [B, T] ints). */
uint64_t zt_memplan_acts_bytes(const zt_model_config *mc, int B, int T, int training,
                               int ckpt_k, int elem) {
    return zt_arch_of(mc)->acts_bytes(mc, B, T, training, ckpt_k, elem) +
           2 * (uint64_t)B * (uint64_t)T * 4 /* inputs, targets */;
}

/* ------------------------------------------------------------ formulas */

double zt_memplan_formula(int stage, int mixed, double psi, double n) {
    if (n < 1) n = 1;
    if (!mixed) {
        switch (stage) {
        case 0: return 16 * psi;
        case 1: return 8 * psi + 8 * psi / n;
        case 2: return 4 * psi + 12 * psi / n;
        default: return 16 * psi / n;
        }
    }
    switch (stage) {
    case 0: return 16 * psi;
    case 1: return 4 * psi + 12 * psi / n;
    case 2: return 2 * psi + 14 * psi / n;
    default: return 16 * psi / n;
    }
}

double zt_memplan_engine_formula(int stage, int mixed, double psi, double n) {
    if (n < 1) n = 1;
    if (!mixed) return zt_memplan_formula(stage, 0, psi, n);
    /* 16-bit parameters (2), fp32 gradients (4), fp32 master + m + v (12) */
    switch (stage) {
    case 0: return 18 * psi;
    case 1: return 6 * psi + 12 * psi / n;
    case 2: return 2 * psi + 16 * psi / n;
    default: return 18 * psi / n;
    }
}

int zt_memplan_deepspeed(int stage, int offload, double P, double Lp, int world,
                         int ranks_per_node, double *gpu, double *cpu) {
    double N = world > 0 ? world : 1, M = ranks_per_node > 0 ? ranks_per_node : 1;
    *gpu = *cpu = -1;
    if (stage == 2) {
        if (offload == 0) *gpu = 2 * P + 18 * P / N;
        else if (offload == 1) {
            *gpu = 2 * P;
            *cpu = P * fmax(4 * M, 16) * 1.5;
        } else return 0;
        return 1;
    }
    if (stage == 3) {
        if (offload == 0) *gpu = 4 * Lp + 18 * P / N;
        else if (offload == 1) *gpu = 4 * Lp + 2 * P / N;
        else *gpu = 4 * Lp;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ simulation */

typedef struct sim {
    uint64_t cur[ZT_MP_NPLACES][ZT_MEM_NTAGS], pk[ZT_MP_NPLACES][ZT_MEM_NTAGS];
    uint64_t tot[ZT_MP_NPLACES], ptot[ZT_MP_NPLACES];
    uint64_t all, pall;   /* both places together: mem.c's cur_total / peak_total */
    /* what the engine tags ZT_MEM_ON_HOST (offload): mem.c's host_cur/host_peak */
    uint64_t hcur[ZT_MEM_NTAGS], hpk[ZT_MEM_NTAGS];
    const char *phase, *pphase[ZT_MP_NPLACES];
    /* parameter offload: bytes uploaded host -> device by the gathers so far
     * (shard.c gather_start, shard_nf4.c gather: the owned slices) */
    uint64_t h2d;
} sim;

/* or'ed into a place: the engine allocates it with ZT_MEM_ON_HOST */
#define MP_OFFLOADED 0x10

static void s_alloc(sim *s, int place, int tag, uint64_t b) {
    if (place & MP_OFFLOADED) {
        place &= ~MP_OFFLOADED;
        s->hcur[tag] += b;
        if (s->hcur[tag] > s->hpk[tag]) s->hpk[tag] = s->hcur[tag];
    }
    s->cur[place][tag] += b;
    s->tot[place] += b;
    s->all += b;
    if (s->all > s->pall) s->pall = s->all;
    if (s->cur[place][tag] > s->pk[place][tag]) s->pk[place][tag] = s->cur[place][tag];
    if (s->tot[place] > s->ptot[place]) {
        s->ptot[place] = s->tot[place];
        s->pphase[place] = s->phase;
    }
}
static void s_free(sim *s, int place, int tag, uint64_t b) {
    if (place & MP_OFFLOADED) {
        place &= ~MP_OFFLOADED;
        s->hcur[tag] -= b;
    }
    s->cur[place][tag] -= b;
    s->tot[place] -= b;
    s->all -= b;
}

/* comm_staged.c: on a device backend whose collectives are host-staged MPI
 * (cpu-strict; cuda without NCCL or with ztrain.comm_backend=mpi) each
 * device group's blocking collectives go through one host buffer
 * (comm-buffers, host memory) that grows to the largest collective so far
 * (the old one freed first) and is held to the end; each non-blocking one
 * (stage 3 gathers, overlap_comm's reduce-scatters) has its own host buffer
 * from its start to its wait.  The groups (mesh.c): the world, the shard
 * group (the world when G = W), the replica group, the expert shard group,
 * the expert group; each its own buffer. */
enum { MG_WORLD, MG_SHARD, MG_REPLICA, MG_ESHARD, MG_EP, MG_N };
typedef struct mp_staged {
    int on;                 /* device collectives are host-staged */
    int shard_is_world;     /* G = W: the shard group is the world's */
    uint64_t have[MG_N];    /* each group's stage_bytes */
    char held[MG_N];
} mp_staged;

/* comm_staged.c's ensure on group grp for a collective of `bytes` */
static void stg_ensure(sim *s, mp_staged *t, int grp, uint64_t bytes) {
    if (!t || !t->on) return;
    if (grp == MG_SHARD && t->shard_is_world) grp = MG_WORLD;
    if (t->held[grp] && bytes <= t->have[grp]) return;
    if (t->held[grp]) s_free(s, ZT_MP_HOST, ZT_MEM_COMM, umax(t->have[grp], 1));
    s_alloc(s, ZT_MP_HOST, ZT_MEM_COMM, umax(bytes, 1));
    t->have[grp] = bytes;
    t->held[grp] = 1;
}

/* The plan's layout: units and this rank's slices. */
typedef struct layout {
    const zt_memplan *p;
    int nu;                 /* units: embeddings, blocks (with their experts' units), final norm */
    uint64_t *n;            /* elements per unit */
    int L;                  /* blocks */
    int *ub;                /* [L + 1]: block l's first unit, ub[L] the head's (zt_arch_block_unit);
                             * NULL: unit 1 + l (the adapters' layout: unit l) */
    uint64_t *n32;          /* the fp32 copy's elements per unit where the GEMMs read the bf16
                             * storage (shard.c weights16: no GEMM-only tensor), NULL: n */
    uint64_t shard_total;   /* elements this rank owns (group index 0: the most) */
    /* expert parallelism (shard.c): an expert unit's n is this rank's window;
     * win[u] marks them (NULL: none), ug[u] each unit's slicing group (NULL:
     * g at stages 1-3); nblk the full blocks' elements, max_n the largest n */
    char *win;
    uint64_t *ug;
    uint64_t nblk, max_n;
    uint64_t max_len;       /* largest owned slice (>= 1) */
    uint64_t eb;            /* bytes per stored parameter element: 4, or 2 when mixed */
    int place_params, place_optim, place_dev;
    /* unit simulation state: shard.c's engine behind the unit API */
    sim *s;
    uint64_t *gathered;     /* stage 3: bytes of the unit's gather buffer (storage type), 0 none */
    char *view, *bucket, *seen;   /* view: mixed, the unit's fp32 compute copy */
    int pass;
    int tied;               /* the LM head is unit 0 (GPT, tied llama) */
    int headfuse;           /* a training forward's LM head takes its gradient unit
                             * (classifier.h "fused"; model_skel.c) */
    /* overlap_comm: gradient reduce-scatters in flight (shard.c's pend[]) */
    uint64_t g;             /* shard group size at stages 2-3 */
    int overlap, comm16, npend;
    int pend[ZT_RS_INFLIGHT];
    /* LoRA (lora.h): the base is frozen (no gradient buckets, no
     * reductions, no embedding backward) and peer is the adapters' engine,
     * one unit per block, asked for right after its block */
    int frozen;
    struct layout *peer;
    /* QLoRA (shard_nf4.c): per unit the temporaries of its compute copy
     * (the gathered rest, codes and absmax, the 16-bit rounding buffer);
     * NULL without an NF4 base */
    uint64_t *qtmp;
    uint64_t *q16;          /* [nu] with qtmp: the 16-bit rounding buffer (in qtmp's place
                             * where the unit is built in bf16) */
    uint64_t *qup;          /* [nu] with qtmp: the owned slices of the rest, codes and absmax /
                             * qabsmax a compute copy uploads when the store is offloaded */
    char *qplain;           /* [nu] with qtmp: the unit has no NF4 tensor */
    int qw16;               /* with n32: a unit with NF4 tensors is built in bf16 (shard_nf4.c,
                             * zt_shard_prec.nf4w16) */
    int qinplace;           /* with qtmp: the store is read in place, no gathered rest, codes
                             * or absmax (shard_nf4.c: nf4view, not sharded) */
    /* host-staged collectives (the planner's, shared by the engines; NULL:
     * none): req[u] the host buffer of unit u's all-gather in flight (stage
     * 3), preq[] those of the reduce-scatters in flight (pend[]) */
    mp_staged *stg;
    uint64_t *req;
    uint64_t preq[ZT_RS_INFLIGHT];
    int comm_es;            /* bytes per element of a gradient reduction (2: 16-bit) */
} layout;

enum { PASS_FWD = 1, PASS_BWD = 2 };

/* shard.c make_view: the unit's fp32 copy leaves out its GEMM weights
 * (at stage 3 keeping the gathered unit, where that saves memory) */
static int u_w16(const layout *y, int u) {
    if (y->qtmp && !y->qplain[u] && !y->qw16) return 0;   /* (NF4: shard_nf4.c's rule) */
    return y->n32 && y->n32[u] < y->n[u] &&
           (y->p->stage < 3 && !y->qtmp ? 1 : 2 * y->n32[u] <= y->n[u]);
}
/* the elements of the unit's fp32 copy (make_view: at least one, a unit
 * whose tensors are all GEMM-only, an expert unit, too) */
static uint64_t u_copy(const layout *y, int u) {
    return u_w16(y, u) ? umax(y->n32[u], 1) : y->n[u];
}
/* unit u's slicing group at stages 1-3: its size and its staged group */
static uint64_t u_gsize(const layout *y, int u) { return y->ug ? y->ug[u] : y->g; }
static int u_grp(const layout *y, int u) { return y->win && y->win[u] ? MG_ESHARD : MG_SHARD; }
/* comm_staged.c's non-blocking collective: its host buffer */
static uint64_t stg_req(layout *y, uint64_t bytes) {
    if (!y->stg || !y->stg->on) return 0;
    s_alloc(y->s, ZT_MP_HOST, ZT_MEM_COMM, umax(bytes, 1));
    return umax(bytes, 1);
}
static void stg_req_done(layout *y, uint64_t *b) {
    if (*b) s_free(y->s, ZT_MP_HOST, ZT_MEM_COMM, *b);
    *b = 0;
}
/* shard.c's rs_unit (blocking): unit u's gradient reduce-scatter, n + len
 * elements of the reduction's type */
static void stg_rs_unit(layout *y, int u) {
    const uint64_t g = u_gsize(y, u);
    if (g > 1) stg_ensure(y->s, y->stg, u_grp(y, u), (y->n[u] + cdiv(y->n[u], g)) * (uint64_t)y->comm_es);
}
/* shard.c's allreduce_grads of n gradients over group grp: fp32 in pieces
 * of ZT_GRAD_AR_PIECE (2^18) elements, 16-bit in pieces of the largest unit */
static void stg_allreduce_grads(layout *y, int grp, uint64_t n) {
    if (!n) return;
    if (y->comm_es == 4) stg_ensure(y->s, y->stg, grp, umin(n, (uint64_t)1 << 18) * 4);
    else stg_ensure(y->s, y->stg, grp, umin(n, umax(y->max_n, 1)) * 2);
}
/* shard.c's gather_start: stage 3, a gather buffer in the storage type
 * unless the unit is gathered, pending, or (mixed) widened already (and,
 * host-staged, the all-gather's host buffer) */
static void u_gather(layout *y, int u) {
    if (y->gathered[u] || y->view[u]) return;
    /* (offload_param: the owned slice, rank 0's, uploaded into the buffer) */
    if (y->p->gpu && y->p->offload_param) y->s->h2d += cdiv(y->n[u], u_gsize(y, u)) * y->eb;
    y->gathered[u] = y->n[u] * y->eb;
    s_alloc(y->s, y->place_dev, ZT_MEM_GATHERED, y->gathered[u]);
    if (u_gsize(y, u) > 1 && y->req) y->req[u] = stg_req(y, y->n[u] * y->eb);
}
/* shard.c's gather_finish: the wait frees the all-gather's host buffer */
static void u_wait(layout *y, int u) {
    if (y->req) stg_req_done(y, &y->req[u]);
}
/* shard.c's release (fp32: stage 3 only; mixed: every stage) */
static void u_release(layout *y, int u) {
    if (y->p->stage != 3 && !y->p->mixed && !y->qtmp) return;
    if (y->view[u]) {
        y->view[u] = 0;
        s_free(y->s, y->place_dev, ZT_MEM_GATHERED, u_copy(y, u) * 4);
    }
    if (y->gathered[u]) {
        u_wait(y, u);
        s_free(y->s, y->place_dev, ZT_MEM_GATHERED, y->gathered[u]);
        y->gathered[u] = 0;
    }
}
static void u_begin(layout *y, int pass) {
    y->pass = pass;
    memset(y->seen, 0, (size_t)y->nu);
}
static void u_end(layout *y, int release_all) {
    for (int u = 0; release_all && u < y->nu; ++u) u_release(y, u);
}
/* zt_unit_params.  fp32: stage 3 gathers.  Mixed (make_view): an fp32 copy
 * of the unit widened from the 16-bit storage; at stage 3 from the gathered
 * 16-bit unit, whose buffer is freed once widened.  At stage 3, on the first
 * use in a pass, prefetch the next unit in pass order unless it was used. */
static void u_params(layout *y, int u) {
    if (y->qtmp) {   /* NF4 base: the compute copy built at once, no prefetch */
        if (y->view[u]) return;
        y->view[u] = 1;
        if (y->p->gpu && y->p->offload_param) y->s->h2d += y->qup[u];   /* (the store offloaded) */
        /* (a unit without NF4 tensors whose GEMMs read 16-bit weights keeps
         * its gathered 16-bit rest, the whole unit, until the release; one
         * with NF4 tensors is built in a bf16 buffer of its own, kept so) */
        /* (in place: the store's rest, codes and absmax read, nothing
         * gathered; a kept rest is the store's, lent) */
        const int keep = u_w16(y, u), own = keep && !y->qplain[u], lent = keep && !own && y->qinplace;
        const uint64_t tmp = (y->qinplace ? 0 : y->qtmp[u]) + (keep ? 0 : y->q16[u]);
        s_alloc(y->s, y->place_dev, ZT_MEM_GATHERED, u_copy(y, u) * 4);
        if (own) s_alloc(y->s, y->place_dev, ZT_MEM_GATHERED, y->n[u] * y->eb);
        if (tmp) {
            s_alloc(y->s, y->place_dev, ZT_MEM_GATHERED, tmp);
            s_free(y->s, y->place_dev, ZT_MEM_GATHERED, tmp - (keep && !own && !lent ? y->n[u] * y->eb : 0));
        }
        if (keep && !lent) y->gathered[u] = y->n[u] * y->eb;
        return;
    }
    if (!y->p->mixed) {
        if (y->p->stage < 3) return;
        u_gather(y, u);
        u_wait(y, u);
    } else if (!y->view[u]) {
        if (y->p->stage == 3) {
            u_gather(y, u);
            u_wait(y, u);
        }
        y->view[u] = 1;
        s_alloc(y->s, y->place_dev, ZT_MEM_GATHERED, u_copy(y, u) * 4);
        /* (with GEMM weights the gathered unit stays: the GEMMs read it) */
        if (y->p->stage == 3 && !u_w16(y, u)) {
            s_free(y->s, y->place_dev, ZT_MEM_GATHERED, y->gathered[u]);
            y->gathered[u] = 0;
        }
    }
    if (y->p->stage < 3 || y->seen[u]) return;
    y->seen[u] = 1;
    int nx = y->pass == PASS_FWD ? u + 1 : u - 1;
    if (nx >= 0 && nx < y->nu && !y->seen[nx]) u_gather(y, nx);
}
/* zt_unit_grads: a unit-sized fp32 bucket at stages 2-3 (every precision) */
static void u_grads(layout *y, int u) {
    if (y->frozen || y->p->stage < 2 || y->bucket[u]) return;
    y->bucket[u] = 1;
    s_alloc(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 4);
}
/* overlap_comm: the receive buffer of unit u's reduction (shard.c's
 * rs_start: this rank's slice, at least 1 element, in grad_comm's type) */
static uint64_t u_recv_bytes(const layout *y, int u) {
    return umax(cdiv(y->n[u], y->ug ? y->ug[u] : y->g), 1) * (y->comm16 ? 2 : 4);
}
/* shard.c's rs_finish_oldest */
static void u_rs_finish_oldest(layout *y) {
    const int u = y->pend[0];
    stg_req_done(y, &y->preq[0]);
    if (y->comm16) {
        s_free(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 2);
    } else {
        y->bucket[u] = 0;
        s_free(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 4);
    }
    s_free(y->s, y->place_dev, ZT_MEM_COMM, u_recv_bytes(y, u));
    memmove(&y->pend[0], &y->pend[1], (size_t)(y->npend - 1) * sizeof y->pend[0]);
    memmove(&y->preq[0], &y->preq[1], (size_t)(y->npend - 1) * sizeof y->preq[0]);
    y->preq[y->npend - 1] = 0;
    y->npend--;
}
static void u_grads_done(layout *y, int u) {
    if (y->frozen || y->p->stage < 2 || !y->bucket[u]) return;
    /* shard.c's rs_start, for a unit sliced over more than one rank (an
     * expert window over a one-rank expert shard group: the bucket is the
     * reduced slice, added and freed below) */
    if (y->overlap && (y->ug ? y->ug[u] : y->g) > 1) {
        if (y->npend == ZT_RS_INFLIGHT) u_rs_finish_oldest(y);
        if (y->comm16) {
            s_alloc(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 2);
            y->bucket[u] = 0;
            s_free(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 4);
        }
        s_alloc(y->s, y->place_dev, ZT_MEM_COMM, u_recv_bytes(y, u));
        const uint64_t g = u_gsize(y, u);
        y->preq[y->npend] = g > 1 ? stg_req(y, (y->n[u] + cdiv(y->n[u], g)) * (uint64_t)y->comm_es) : 0;
        y->pend[y->npend++] = u;
        return;
    }
    stg_rs_unit(y, u);
    y->bucket[u] = 0;
    s_free(y->s, y->place_dev, ZT_MEM_COMM, y->n[u] * 4);
}

/* block l's units (model_skel.c): parameters in order, released in order
 * (forward); rev: last unit first (backward) */
static void sim_block_params(layout *y, int l, int rev) {
    const int f = y->ub[l], n = y->ub[l + 1] - f;
    for (int i = 0; i < n; ++i) u_params(y, rev ? f + n - 1 - i : f + i);
}
static void sim_block_release(layout *y, int l, int rev) {
    const int f = y->ub[l], n = y->ub[l + 1] - f;
    for (int i = 0; i < n; ++i) u_release(y, rev ? f + n - 1 - i : f + i);
}

/* gpt.c's and llama.c's forward, as unit API calls (zt_shard_forward
 * around it).  Tied head: unit 0 stays from the encoder to the LM head
 * (and into backward when training); untied (llama): unit 0 is released
 * after the encoder and the head's unit (the last) holds the LM head.  A
 * training forward's fused head (classifier.h) takes the head's gradient
 * unit (tied: 0) before the head; the backward then starts at the norm. */
static void sim_forward(layout *y, int training) {
    const int L = y->L, H = y->ub[L];
    layout *a = y->peer;
    u_begin(y, PASS_FWD);
    if (a) u_begin(a, PASS_FWD);
    u_params(y, 0);
    if (!y->tied) u_release(y, 0);
    for (int l = 0; l < L; ++l) {
        sim_block_params(y, l, 0);
        if (a) u_params(a, l);
        if (a) u_release(a, l);
        sim_block_release(y, l, 0);
    }
    const int fuse = training && y->headfuse;
    u_params(y, H);
    if (fuse && !y->tied) u_grads(y, H);
    u_release(y, H);
    if (y->tied) {
        u_params(y, 0);            /* tied LM head */
        if (fuse) u_grads(y, 0);
        if (!training) u_release(y, 0);
    }
    u_end(y, !training);
    if (a) u_end(a, !training);
}

/* gpt.c's and llama.c's backward; with checkpointing group size k, the top
 * block of a group recomputes the blocks below it first (their parameters
 * only), but for the last group with keep (model_skel.c: right after the
 * training forward, precision.h zt_ckptkeep_of). */
static void sim_backward(layout *y, int k, int keep) {
    const int L = y->L, H = y->ub[L];
    layout *a = y->peer;
    if (k > L) k = L;
    u_begin(y, PASS_BWD);
    if (a) u_begin(a, PASS_BWD);
    if (y->tied) {
        if (!y->headfuse) {        /* (fused: the forward's head took them) */
            u_params(y, 0);
            u_grads(y, 0);
        }
        u_release(y, 0);
    }
    u_params(y, H);
    u_grads(y, H);
    u_release(y, H);
    u_grads_done(y, H);
    for (int l = L - 1; l >= 0; --l) {
        const int top = zt_acts_ckpt_top(k, L, l) && zt_acts_ckpt_redo(k, L, l, keep);
        if (top)
            for (int i = (l / k) * k; i < l; ++i) {
                sim_block_params(y, i, 0);
                if (a) u_params(a, i);
                if (a) u_release(a, i);
                sim_block_release(y, i, 0);
            }
        const int f = y->ub[l], n = y->ub[l + 1] - f;
        sim_block_params(y, l, 1);
        for (int i = n - 1; i >= 0; --i) u_grads(y, f + i);
        if (a) {
            u_params(a, l);
            u_grads(a, l);
            u_release(a, l);
            u_grads_done(a, l);
        }
        sim_block_release(y, l, 1);
        for (int i = n - 1; i >= 0; --i) u_grads_done(y, f + i);
    }
    if (!y->frozen) {   /* a frozen embedding has no backward */
        u_params(y, 0);
        u_grads(y, 0);
        u_release(y, 0);
        u_grads_done(y, 0);
    }
    while (y->npend > 0) u_rs_finish_oldest(y);   /* zt_shard_backward: rs_finish_all */
    u_end(y, 1);
    if (a) {   /* then the adapters' engine (end_backward of the peer) */
        while (a->npend > 0) u_rs_finish_oldest(a);
        u_end(a, 1);
    }
}

/* ranks sharing one node's host memory: o->ranks_per_node, at most the world, 1 when unset */
static int opts_ranks_per_node(const zt_memplan_opts *o) {
    const int W = o->world_size;
    return o->ranks_per_node > 0 ? (o->ranks_per_node < W ? o->ranks_per_node : W) : 1;
}

/* The run's axis sizes, from the mesh's shape function (mesh.h: the same
 * sizes the engine's groups get, and its refusal of a shard group that does
 * not divide the world): the world, the shard group (the world at stage 0),
 * the sequence parallel size and the data parallel degree world / sp. */
typedef struct mp_axes {
    int world, shard_group, sp, dp;
    int ep, eshard;   /* expert parallelism and the expert shard group (1: off) */
} mp_axes;

static int plan_axes(const zt_config *c, int world, int ranks_per_node, mp_axes *ax,
                     zt_status *st) {
    zt_mesh_shape ms;
    const int rc = zt_mesh_shape_of(c, world, 0, ranks_per_node, &ms, st);
    ax->world = world;
    ax->shard_group = rc == ZT_OK ? ms.size[ZT_AX_SHARD] : world;
    ax->sp = rc == ZT_OK ? ms.size[ZT_AX_SP] : 1;
    ax->dp = rc == ZT_OK ? ms.size[ZT_AX_DP] : world;
    ax->ep = rc == ZT_OK ? ms.size[ZT_AX_EP] : 1;
    ax->eshard = rc == ZT_OK ? ms.size[ZT_AX_ESHARD] : 1;
    return rc;
}

static int resolve_opts(const zt_config *c, const zt_memplan_opts *o, zt_memplan *p) {
    p->world = o->world_size;
    p->ranks_per_node = opts_ranks_per_node(o);
    /* cpu-strict has device memory too (the engine runs as on a GPU) */
    p->gpu = o->target == ZT_MP_TARGET_AUTO
                 ? strcmp(c->backend, "cuda") == 0 || strcmp(c->backend, "cpu-strict") == 0
                 : o->target == ZT_MP_TARGET_GPU;
    p->with_data = o->with_data < 0 ? c->data_train[0] != '\0' : o->with_data != 0;
    p->with_eval = o->with_eval < 0 ? c->data_val[0] != '\0' : o->with_eval != 0;
    return ZT_OK;
}

/* shard_nf4.c's sizes for unit u of a frozen NF4 base (units: embeddings,
 * L blocks, head): *store its bytes on a rank (group index 0 at stage 3,
 * g = the shard group, else g = 1), of which *a2 the absmax2 (nf4-dq: never
 * offloaded), *tmp the temporaries of its compute copy. */
static void nf4_unit(const zt_arch *a, const zt_model_config *mc, int u, int L, uint64_t g, int es,
                     int dq, int mixed, uint64_t *store, uint64_t *a2, uint64_t *tmp, uint64_t *t16,
                     char *plain, uint64_t *up) {
    const int part = u == 0 ? ZT_AT_EMBED : u <= L ? ZT_AT_BLOCK : ZT_AT_HEAD;
    uint64_t rest = 0, nb = 0, na2 = 0, maxn = 0;
    for (int k = 0; k < a->n_tensors; ++k) {
        int r, c;
        if (a->tensors[k].unit != part) continue;
        a->tensor_shape(mc, u - 1, k, &r, &c);
        if (!r) continue;
        const uint64_t n = (uint64_t)r * (uint64_t)c;
        char nm[64];
        snprintf(nm, sizeof nm, "h0.%s", a->tensors[k].name);
        if (part == ZT_AT_BLOCK && zt_lora_base_quantized(mc, nm)) {
            nb += cdiv(n, 64);
            na2 += cdiv(cdiv(n, 64), 256);
            maxn = umax(maxn, n);
        } else {
            rest += n;
        }
    }
    *plain = nb == 0;
    const uint64_t rlen = umax(cdiv(rest, g), 1), blen = umax(cdiv(nb, g), 1);
    *a2 = dq ? umax(na2, 1) * 4 : 0;
    *store = rlen * (uint64_t)es + 32 * blen + (dq ? blen : blen * 4) + *a2;
    *tmp = umax(rest, 1) * (uint64_t)es + 32 * umax(nb, 1) + umax(nb, 1) * (dq ? 1 : 4);
    *t16 = mixed && maxn ? maxn * 2 : 0;
    /* offloaded, a compute copy uploads the owned slices (rank 0's): the
     * rest, and the codes and absmax / qabsmax of a unit with NF4 tensors */
    *up = (rest ? cdiv(rest, g) * (uint64_t)es : 0) + (nb ? cdiv(nb, g) * (32 + (dq ? 1 : 4)) : 0);
}

/* LoRA's model states (zt_ctx_create with ztrain.lora.r > 0, train.c):
 * the frozen base's model block (fp32 stages 0-2: parameters only), the
 * adapters' model blocks, the frozen engine (shard.c, frozen: 16-bit storage
 * when mixed, the fp32 shard at stage 3; nothing else) and its
 * initialization, then the adapters' engine and initialization exactly as a
 * trainable model's (the same sequence as below for the base without LoRA). */
/* LoRA's initialization transients (shard.c init_units): the frozen
 * base's (mixed: an fp32 buffer of the largest unit, at stage 3 of a slice;
 * on a GPU a host chunk of at most 1 Mi elements) and the adapters' (as a
 * trainable model's) */
static void lora_init_base(sim *s, const zt_memplan *p, const layout *y) {
    const uint64_t Psi = y->nblk;
    const int nf4 = y->qtmp != NULL;
    const int fhp = p->gpu && p->offload_param;   /* frozen shards in host memory */
    if (p->mixed && !nf4) {
        const uint64_t t = (p->stage < 3 ? umax(y->max_n, 1) : y->max_len) * 4;
        const int pl = p->stage == 3 && fhp ? ZT_MP_HOST : y->place_dev;
        s_alloc(s, pl, ZT_MEM_WORKSPACE, t);
        s_free(s, pl, ZT_MEM_WORKSPACE, t);
    }
    if (p->gpu && !nf4 && !(p->stage == 3 && fhp)) {   /* (offloaded shards: initialised on the host) */
        const uint64_t chunk = (uint64_t)1 << 20;
        uint64_t n = p->stage == 3 ? y->max_len : p->mixed || y->win ? umax(y->max_n, 1) : umax(Psi, 1);
        if (n > chunk) n = chunk;
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
        s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
    }
}
static void lora_init_adapters(sim *s, const zt_memplan *p, const layout *y, const layout *ya) {
    const uint64_t Pa = umax(p->lora_params, 1);
    const uint64_t la = ya->nu ? ya->n[0] : 1;
    const int host_opt = p->gpu && p->offload_optimizer, host_params = p->gpu && p->offload_param;
    const int has_master = p->mixed || (host_opt && !host_params);
    if (p->mixed && p->stage < 3) {
        s_alloc(s, y->place_dev, ZT_MEM_WORKSPACE, la * 4);
        s_free(s, y->place_dev, ZT_MEM_WORKSPACE, la * 4);
    }
    if (p->gpu && (p->stage < 3 || (has_master ? !host_opt : !host_params))) {
        const uint64_t chunk = (uint64_t)1 << 20;
        uint64_t n = p->stage == 3 ? ya->max_len : p->mixed ? la : Pa;
        if (n > chunk) n = chunk;
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
        s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
    }
}
/* (deferred: the initialization's transients left to plan_init) */
static void lora_setup(sim *s, zt_memplan *p, layout *y, layout *ya, int param_tag_place,
                       int optim_tag_place, int comm16, uint64_t nf4_bytes, uint64_t nf4_a2,
                       uint64_t moe_counts, int deferred) {
    const uint64_t Psi = y->nblk, own = umax(y->shard_total, 1);   /* (the base's full blocks) */
    const uint64_t Pa = umax(p->lora_params, 1), owna = umax(ya->shard_total, 1);
    const uint64_t la = ya->nu ? ya->n[0] : 1;   /* every adapter unit has the same size */
    const int nf4 = y->qtmp != NULL;
    p->lora_base_bytes = nf4 ? nf4_bytes : (p->stage == 3 ? own : Psi) * (p->mixed ? 2 : 4);
    p->lora_adapter_bytes = (p->stage == 3 ? owna : Pa) * (p->mixed ? 2 : 4);
    /* zt_model_create: base (frozen flags; none with an NF4 base), adapters */
    if (p->stage < 3 && !p->mixed && !nf4) s_alloc(s, y->place_params, ZT_MEM_PARAMS, Psi * 4);
    if (p->stage < 3 && !p->mixed) s_alloc(s, y->place_params, ZT_MEM_PARAMS, Pa * 4);
    if (p->stage < 2) s_alloc(s, y->place_dev, ZT_MEM_GRADS, Pa * 4);
    if (moe_counts) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, moe_counts);   /* (zt_moe_set_mesh) */
    /* the frozen engine and its initialization (NF4: the store, quantized
     * on the host in unaccounted buffers; offload_param: its slices placed
     * and tagged as offloaded parameter shards, the absmax2 on the device) */
    if (nf4 && p->offload_param) {
        s_alloc(s, param_tag_place, ZT_MEM_PARAMS, nf4_bytes - nf4_a2);
        if (nf4_a2) s_alloc(s, y->place_dev, ZT_MEM_PARAMS, nf4_a2);
    } else if (nf4) {
        s_alloc(s, y->place_params, ZT_MEM_PARAMS, nf4_bytes);
    } else if (p->mixed) {
        s_alloc(s, param_tag_place, ZT_MEM_PARAMS, (p->stage == 3 ? own : umax(Psi, 1)) * 2);
    } else if (p->stage == 3) {
        s_alloc(s, param_tag_place, ZT_MEM_PARAMS, own * 4);
    }
    if (!deferred) lora_init_base(s, p, y);
    /* the adapters' engine (shard.c's trainable path) */
    const int host_opt = p->gpu && p->offload_optimizer, host_params = p->gpu && p->offload_param;
    const int has_master = p->mixed || (host_opt && !host_params);
    const uint64_t on = p->stage == 0 ? Pa : owna;
    if (p->mixed) s_alloc(s, param_tag_place, ZT_MEM_PARAMS, (p->stage == 3 ? owna : Pa) * 2);
    if (has_master) s_alloc(s, optim_tag_place, ZT_MEM_OPTIMIZER, on * 4);
    if (host_opt) {
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, 2 * ya->max_len * 4);
        if (p->mixed && !host_params) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, 2 * ya->max_len * 2);
    }
    if (comm16) {
        s_alloc(s, y->place_dev, ZT_MEM_COMM, la * 2);
        if (p->stage >= 1) s_alloc(s, y->place_dev, ZT_MEM_COMM, ya->max_len * 2);
    }
    if (p->stage == 3 && !p->mixed) s_alloc(s, param_tag_place, ZT_MEM_PARAMS, owna * 4);
    if (p->stage >= 2) s_alloc(s, y->place_dev, ZT_MEM_GRADS, owna * 4);
    if (p->stage >= 1) s_alloc(s, y->place_dev, ZT_MEM_COMM, ya->max_len * 4);
    if (!deferred) lora_init_adapters(s, p, y, ya);
}

/* One plan in the making: the finalized configuration, the axes, the
 * layouts and the simulated allocations, shared by the steps below. */
typedef struct planner {
    zt_config *c;                 /* the finalized copy of the configuration */
    const zt_memplan_opts *o;
    zt_memplan *p;
    const zt_model_config *mc;
    const zt_arch *arch;          /* the model's units */
    mp_axes ax;
    int L;                        /* blocks */
    uint64_t T, S, Sl;            /* the model's positions; the window; a sample's tokens on one rank */
    uint64_t g;                   /* the slices' divisor: 1 at stage 0, else the shard group */
    layout y, ya;                 /* the model's units; LoRA: the adapters' (one per block) */
    /* cuda: the device total at the deferred initialization's top where
     * it set a new peak (plan_init; left out of the sim's peaks: the
     * kernel scratch does not exist yet then), else 0 */
    uint64_t init_dev;
    int lora;
    zt_lora lo;
    uint64_t nf4_bytes;           /* QLoRA: the frozen NF4 store on a rank */
    uint64_t nf4_a2;              /* of which the absmax2 (nf4-dq; on the device when offloaded) */
    sim s;
    int comm16;                   /* 16-bit gradient reductions with more than one rank */
    int optim_tag_place, param_tag_place;   /* offloaded: host bytes tagged ZT_MEM_ON_HOST */
    uint64_t on;                  /* elements whose master weights and moments this rank keeps */
    uint64_t sp_cap;              /* sequence parallel: samples' tokens of the host arrays */
    uint64_t moe_counts;          /* a GPU's page-locked MoE routing counts ((E + 1) ints; 0: none) */
    int can_pin;                  /* the target pins host memory (a GPU, not cpu-strict) */
    uint64_t pin_staging;         /* page-locked staging blocks (memplan.h pinned_staging) */
    mp_staged stg;                /* the host-staged collectives' buffers */
} planner;

/* the model computes in fp32 in every precision (precision.h): fp32
 * activation, eval and sample blocks */
enum { PLAN_ELEM = 4 };

static void layout_free(layout *y) {
    free(y->n);
    free(y->ub);
    free(y->n32);
    free(y->qtmp);
    free(y->q16);
    free(y->qup);
    free(y->qplain);
    free(y->win);
    free(y->ug);
    free(y->gathered);
    free(y->view);
    free(y->bucket);
    free(y->seen);
    free(y->req);
}

/* The run's shape in the plan: stage, batch, sequence parallel, eval rows,
 * checkpointing, precision, offload (parameter offload needs stage 3), overlap. */
static int plan_run(planner *q, zt_status *st) {
    const zt_config *c = q->c;
    const zt_model_config *mc = q->mc;
    zt_memplan *p = q->p;
    p->shard_group = q->ax.shard_group;
    p->stage = c->zero_stage;
    p->micro_batch = c->micro_batch;
    p->grad_accum = c->grad_accum;
    /* sequence parallelism (seqpar.h): groups of SP ranks share each sample,
     * SP-th of its tokens each; dp = W / SP data parallel groups */
    p->seq_parallel = q->ax.sp;
    p->expert_parallel = mc->n_experts > 0 && mc->expert_parallel > 1 ? mc->expert_parallel : 1;
    if (p->expert_parallel > 1) {
        const zt_moe_shape ms = {mc->n_embd, mc->n_experts, mc->experts_per_token,
                                 mc->moe_intermediate, 0, p->expert_parallel, 0, 0, 0, 0, 0, 0};
        const size_t N = (size_t)c->micro_batch * (size_t)(c->seq_len / q->ax.sp);
        p->ep_rows_worst = zt_moe_recv_rows(&ms, N);
        p->ep_rows_balanced = (uint64_t)N * (uint64_t)mc->experts_per_token;
    }
    p->eval_batch = zt_config_eval_rows(c, q->ax.dp);   /* rows of an eval forward per rank */
    p->context = mc->context;
    p->ckpt_k = zt_config_act_ckpt_k(c);
    p->mixed = c->bf16_enabled || c->fp16_enabled;
    p->offload_optimizer = strcmp(c->offload_optimizer, "none") != 0;
    p->offload_param = strcmp(c->offload_param, "none") != 0;
    p->overlap_comm = c->overlap_comm && p->stage >= 2 && q->ax.shard_group > 1;
    if (p->offload_param && p->stage != 3)
        return zt_fail(st, ZT_EINVAL, "zero_optimization.offload_param.device=%s needs "
                       "zero_optimization.stage=3 (only sharded parameters can be offloaded)",
                       c->offload_param);
    return ZT_OK;
}

/* model.c's units (embeddings, L blocks, head): their elements, the
 * parameter count, the largest unit and tensor, and this rank's slices
 * (group index 0 owns a full slice of each); where each kind lives. */
static int plan_units(planner *q, zt_status *st) {
    zt_memplan *p = q->p;
    const zt_model_config *mc = q->mc;
    layout *y = &q->y;
    y->p = p;
    y->L = q->L;
    y->nu = zt_arch_n_units(q->arch, mc);
    y->ub = calloc((size_t)q->L + 1, sizeof *y->ub);
    if (!y->ub) return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    for (int l = 0; l <= q->L; ++l) y->ub[l] = zt_arch_block_unit(q->arch, mc, l, NULL);
    y->n = calloc((size_t)y->nu, sizeof *y->n);
    y->gathered = calloc((size_t)y->nu, sizeof *y->gathered);
    y->view = calloc((size_t)y->nu, 1);
    y->bucket = calloc((size_t)y->nu, 1);
    y->seen = calloc((size_t)y->nu, 1);
    if (!y->n || !y->gathered || !y->view || !y->bucket || !y->seen)
        return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    y->tied = zt_arch_tied(q->arch, mc);
    y->headfuse = zt_w16_on(mc, ZT_W16_HEADFUSE);
    for (int u = 0; u < y->nu; ++u) y->n[u] = zt_arch_unit_numel(q->arch, mc, u);
    /* the GEMMs read the bf16 storage (train.c, shard.c zt_shard_weights16) */
    if (p->mixed && q->c->bf16_enabled && zt_weights16_of(q->c)) {
        if (!(y->n32 = calloc((size_t)y->nu, sizeof *y->n32)))
            return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
        for (int u = 0; u < y->nu; ++u) y->n32[u] = zt_arch_unit_numel32(q->arch, mc, u);
    }
    /* expert parallelism: each expert unit stored as this rank's window of
     * n / N, sliced over the expert shard group (shard.c) */
    const int N = q->ax.ep;
    if (N > 1 && (!(y->win = calloc((size_t)y->nu, 1)) ||
                  !(y->ug = calloc((size_t)y->nu, sizeof *y->ug))))
        return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    y->max_len = 1;
    for (int u = 0; u < y->nu; ++u) {
        p->num_params += y->n[u];
        if (zt_arch_unit_expert(q->arch, mc, u)) p->expert_params += y->n[u];
        if (y->n[u] > p->largest_unit) p->largest_unit = y->n[u];
        uint64_t g = q->g;
        if (y->win) {
            y->win[u] = (char)zt_arch_unit_expert(q->arch, mc, u);
            if (y->win[u]) {
                y->n[u] /= (uint64_t)N;
                if (q->c->zero_stage > 0) g = (uint64_t)q->ax.eshard;
            }
            y->ug[u] = q->c->zero_stage > 0 ? g : (uint64_t)q->ax.shard_group;
        }
        y->nblk += y->n[u];
        y->max_n = umax(y->max_n, y->n[u]);
        const uint64_t len = cdiv(y->n[u], g);
        y->shard_total += len;
        if (len > y->max_len) y->max_len = len;
    }
    p->rank_params = y->nblk;
    p->largest_tensor = q->arch->largest_layer(mc);
    p->active_params = p->num_params - (q->arch->inactive_params ? q->arch->inactive_params(mc) : 0);
    y->eb = p->mixed ? 2 : 4;
    y->place_dev = p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST;
    y->place_params = p->gpu && !p->offload_param ? ZT_MP_DEVICE : ZT_MP_HOST;
    y->place_optim = p->gpu && !p->offload_optimizer ? ZT_MP_DEVICE : ZT_MP_HOST;
    y->g = (uint64_t)q->ax.shard_group;
    y->comm16 = strcmp(q->c->comm_dtype, "fp32") != 0 && q->ax.world > 1;
    y->comm_es = y->comm16 ? 2 : 4;
    y->overlap = p->overlap_comm;
    /* mesh.c's choose_comm: device collectives are host-staged MPI on
     * cpu-strict, and on cuda without NCCL or with comm_backend mpi (with
     * NCCL, auto is planned as NCCL: one GPU per rank) */
    q->stg.on = p->gpu && q->ax.world > 1;
#ifdef ZT_HAVE_NCCL
    if (strcmp(q->c->backend, "cuda") == 0 && strcmp(q->c->comm_backend, "mpi") != 0) q->stg.on = 0;
#endif
    q->stg.shard_is_world = q->ax.shard_group == q->ax.world;
    y->stg = &q->stg;
    if (!(y->req = calloc((size_t)y->nu, sizeof *y->req)))
        return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    return ZT_OK;
}

/* QLoRA (ztrain.lora.base nf4 / nf4-dq): shard_nf4.c's layout, the NF4
 * store on a rank (q->nf4_bytes) and each unit's compute temporaries. */
static int plan_qlora(planner *q, zt_status *st) {
    zt_memplan *p = q->p;
    const zt_model_config *mc = q->mc;
    if (!(q->y.qtmp = calloc((size_t)q->y.nu, sizeof *q->y.qtmp)) ||
        !(q->y.q16 = calloc((size_t)q->y.nu, sizeof *q->y.q16)) ||
        !(q->y.qplain = calloc((size_t)q->y.nu, 1)) ||
        !(q->y.qup = calloc((size_t)q->y.nu, sizeof *q->y.qup)))
        return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    q->y.qw16 = q->y.n32 && zt_nf4w16_of();   /* (train.c: zt_shard_prec.nf4w16) */
    /* (train.c: zt_shard_prec.nf4view; shard_nf4.c's inplace: never with
     * the store offloaded, whose slices are uploaded into gathered copies) */
    q->y.qinplace = zt_nf4view_of() && !p->offload_param && (p->stage != 3 || q->ax.shard_group == 1);
    for (int u = 0; u < q->y.nu; ++u) {
        uint64_t b, a2;
        nf4_unit(q->arch, mc, u, q->L, p->stage == 3 ? (uint64_t)q->ax.shard_group : 1, (int)q->y.eb,
                 zt_lora_base_kind(mc, NULL) == 2, p->mixed, &b, &a2, &q->y.qtmp[u], &q->y.q16[u],
                 &q->y.qplain[u], &q->y.qup[u]);
        q->nf4_bytes += b;
        q->nf4_a2 += a2;
    }
    return ZT_OK;
}

/* LoRA (lora.h): the adapters' engine beside the frozen base, one unit of
 * lo.unit_numel elements per block, sliced as the base's units are. */
static int plan_adapters(planner *q, zt_status *st) {
    ZT_TRY(zt_lora_plan(q->mc, &q->lo, st));
    const int L = q->L;
    layout *ya = &q->ya;
    *ya = q->y;
    ya->qtmp = NULL;   /* the adapters are never NF4 */
    ya->q16 = NULL;
    ya->qup = NULL;
    ya->qw16 = 0;
    ya->ub = NULL;     /* (one unit per block, never simulated as the base is) */
    ya->qplain = NULL;
    ya->n32 = NULL;    /* (and have no GEMM-only tensors) */
    ya->win = NULL;    /* (nor expert windows) */
    ya->ug = NULL;
    ya->nu = L;
    ya->n = calloc((size_t)L, sizeof *ya->n);
    ya->gathered = calloc((size_t)L, sizeof *ya->gathered);
    ya->view = calloc((size_t)L, 1);
    ya->bucket = calloc((size_t)L, 1);
    ya->seen = calloc((size_t)L, 1);
    ya->req = calloc((size_t)L, sizeof *ya->req);
    if (!ya->n || !ya->gathered || !ya->view || !ya->bucket || !ya->seen || !ya->req)
        return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    ya->shard_total = 0;
    ya->max_len = 1;
    ya->nblk = (uint64_t)L * q->lo.unit_numel;
    ya->max_n = q->lo.unit_numel;
    for (int u = 0; ya->n && u < L; ++u) {
        ya->n[u] = q->lo.unit_numel;
        ya->shard_total += cdiv(ya->n[u], q->g);
        ya->max_len = umax(ya->max_len, cdiv(ya->n[u], q->g));
    }
    q->y.frozen = 1;
    q->y.peer = ya;
    q->p->lora_params = zt_lora_num_params(&q->lo);
    q->p->lora_r = q->lo.r;
    return ZT_OK;
}

/* Model states at set-up (zt_ctx_create), by stage: the fp32 parameter and
 * gradient blocks the stage keeps, the 16-bit storage and fp32 master
 * weights (optimizer category) when mixed or offloaded, the offload staging
 * slices, the 16-bit reduction buffers, the fp32 shards and the
 * reduce-scatter buffer, then the initialization's transients.  LoRA: the
 * frozen base's and the adapters' (lora_setup). */
static void plan_init_transients(planner *q);
static void plan_states(planner *q) {
    zt_memplan *p = q->p;
    sim *s = &q->s;
    const layout *y = &q->y;
    /* the full blocks: Psi, less the experts a rank does not store (expert
     * parallelism) */
    const uint64_t Psi = y->nblk, own = umax(y->shard_total, 1);
    /* 16-bit gradient reductions (communication_data_type) with more than one rank */
    q->comm16 = strcmp(q->c->comm_dtype, "fp32") != 0 && q->ax.world > 1;
    /* offloaded optimizer state: host bytes, tagged ZT_MEM_ON_HOST */
    q->optim_tag_place = y->place_optim | (p->offload_optimizer ? MP_OFFLOADED : 0);
    /* offloaded parameter shards (stage 3): host bytes, tagged ZT_MEM_ON_HOST */
    q->param_tag_place = y->place_params | (p->offload_param ? MP_OFFLOADED : 0);
    q->on = p->stage == 0 ? umax(Psi, 1) : own;
    const int comm16 = q->comm16, optim_tag_place = q->optim_tag_place,
              param_tag_place = q->param_tag_place;
    const uint64_t on = q->on;
    /* page-locked staging (mem.c ZT_MEM_PIN on host blocks of a GPU run;
     * cpu-strict cannot pin): the MoE routing counts, and with the
     * optimizer offloaded and pinned its gradient (and 16-bit) staging
     * slices; the step's scalars and the token arrays below */
    q->can_pin = p->gpu && strcmp(q->c->backend, "cpu-strict") != 0;
    q->moe_counts = p->gpu && q->mc->n_experts > 0 ? (uint64_t)(q->mc->n_experts + 1) * sizeof(int) : 0;
    if (q->can_pin) {
        const layout *yo = q->lora ? &q->ya : y;
        q->pin_staging += q->moe_counts;
        if (p->offload_optimizer && q->c->pin_optimizer)
            q->pin_staging += 2 * yo->max_len * 4 + (p->mixed && !p->offload_param ? 2 * yo->max_len * 2 : 0);
    }

    s->phase = "setup";
    if (q->lora) {
        lora_setup(s, p, &q->y, &q->ya, param_tag_place, optim_tag_place, comm16, q->nf4_bytes,
                   q->nf4_a2, q->moe_counts, q->o->deferred_init);
        return;
    }
    /* zt_ctx_create: zt_model_create (the full fp32 blocks the stage keeps;
     * mixed: never the parameter block) */
    if (p->stage < 3 && !p->mixed) s_alloc(s, y->place_params, ZT_MEM_PARAMS, Psi * 4);
    if (p->stage < 2) s_alloc(s, y->place_dev, ZT_MEM_GRADS, Psi * 4);
    /* the model's mesh (zt_moe_set_mesh): a GPU's MoE routing counts, host */
    if (q->moe_counts) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, q->moe_counts);
    /* zt_shard_create_ex: mixed 16-bit storage (full block at stages 0-2,
     * owned slices at 3) and fp32 master weights (optimizer category);
     * 16-bit reduction buffers; the fp32 shards; the reduce-scatter buffer */
    /* a GPU with optimizer offload: AdamW runs on the host, so fp32 runs get
     * host master weights too, and one owned gradient slice (and, mixed, one
     * 16-bit slice) is staged on the host (shard.c: host_opt) */
    const int host_opt = p->gpu && p->offload_optimizer;
    /* a GPU with parameter offload (stage 3, with optimizer offload): the
     * owned shards are host memory; fp32 needs no separate master weights
     * (the shard is updated in place) and mixed no 16-bit staging slices */
    const int host_params = p->gpu && p->offload_param;
    const int has_master = p->mixed || (host_opt && !host_params);
    if (p->mixed) s_alloc(s, param_tag_place, ZT_MEM_PARAMS, (p->stage == 3 ? own : umax(Psi, 1)) * 2);
    if (has_master) s_alloc(s, optim_tag_place, ZT_MEM_OPTIMIZER, on * 4);
    if (host_opt) {   /* two staging slices each way (shard.c's update_offloaded) */
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, 2 * y->max_len * 4);
        if (p->mixed && !host_params) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, 2 * y->max_len * 2);
    }
    if (comm16) {
        s_alloc(s, y->place_dev, ZT_MEM_COMM, umax(y->max_n, 1) * 2);
        if (p->stage >= 1) s_alloc(s, y->place_dev, ZT_MEM_COMM, y->max_len * 2);
    }
    if (p->stage == 3 && !p->mixed) s_alloc(s, param_tag_place, ZT_MEM_PARAMS, own * 4);
    if (p->stage >= 2) s_alloc(s, y->place_dev, ZT_MEM_GRADS, own * 4);
    if (p->stage >= 1) s_alloc(s, y->place_dev, ZT_MEM_COMM, y->max_len * 4);
    /* zt_shard_init_params, here unless deferred (plan_init) */
    if (!q->o->deferred_init) plan_init_transients(q);
}

/* The initialization's transients (shard.c init_units): mixed stages 0-2
 * initialize unit by unit through an fp32 buffer of the largest unit; on a
 * GPU the initial values are staged through a host chunk of at most 1 Mi
 * elements; at stage 3 only when they go to device memory (not to host
 * master weights or offloaded shards).  (Not LoRA: lora_setup's own.) */
static void plan_init_transients(planner *q) {
    const zt_memplan *p = q->p;
    sim *s = &q->s;
    const layout *y = &q->y;
    const uint64_t Psi = y->nblk;
    const int host_opt = p->gpu && p->offload_optimizer, host_params = p->gpu && p->offload_param;
    const int has_master = p->mixed || (host_opt && !host_params);
    if (p->mixed && p->stage < 3) {
        s_alloc(s, y->place_dev, ZT_MEM_WORKSPACE, umax(y->max_n, 1) * 4);
        s_free(s, y->place_dev, ZT_MEM_WORKSPACE, umax(y->max_n, 1) * 4);
    }
    if (p->gpu && (p->stage < 3 || (has_master ? !host_opt : !host_params))) {
        const uint64_t chunk = (uint64_t)1 << 20;
        /* (expert windows: fp32 too unit by unit) */
        uint64_t n = p->stage == 3 ? y->max_len : p->mixed || y->win ? umax(y->max_n, 1) : umax(Psi, 1);
        if (n > chunk) n = chunk;
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
        s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, n * 4);
    }
}

/* ZT_CTX_DEFER_INIT (zt_memplan_opts deferred_init): the initial values
 * owed are written after the weights are loaded (run.c load_weights,
 * zt_ctx_init_pending), on top of the activations and the moments; a Hugging
 * Face load (not LoRA) writes every unit, and init_units then allocates
 * nothing */
/* cuda: the backend's own device memory (plan_kernel_ws) exists; not
 * cpu-strict, which has none */
static int kernel_ws_target(const planner *q) {
    return q->p->gpu && strcmp(q->c->backend, "cpu-strict") != 0;
}
static void plan_init(planner *q) {
    /* (the base, LoRA's too, unless it came from Hugging Face; LoRA's
     * adapters unless they came from a PEFT directory) */
    const int base = !q->c->init_from[0], adapters = q->lora && !q->mc->lora_from[0];
    if (!q->o->deferred_init || (!base && !adapters)) return;
    sim *s = &q->s;
    s->phase = "initializing the parameters";
    /* (cuda: the backend then holds its cuBLAS workspace but not yet the
     * scratch the first kernels grow, which plan_kernel_ws adds to every
     * other device peak: this one is set apart and added its cuBLAS
     * workspace alone) */
    const int ws = kernel_ws_target(q);
    const uint64_t pt = s->ptot[ZT_MP_DEVICE];
    const char *ph = s->pphase[ZT_MP_DEVICE];
    if (!q->lora) {
        plan_init_transients(q);
    } else {
        if (base) lora_init_base(s, q->p, &q->y);
        if (adapters) lora_init_adapters(s, q->p, &q->y, &q->ya);
    }
    if (ws && s->ptot[ZT_MP_DEVICE] > pt) {
        q->init_dev = s->ptot[ZT_MP_DEVICE];
        s->ptot[ZT_MP_DEVICE] = pt;
        s->pphase[ZT_MP_DEVICE] = ph;
    }
}

/* The LM head's chunk (classifier.h): rows per chunk, the chunk's logits
 * (bf16 with the bf16 activations: zt_classifier_l16), and what all rows'
 * [N, V] logits would be in the same type (x2 with a softcap). */
static void plan_classifier(planner *q) {
    const zt_model_config *mc = q->mc;
    zt_memplan *p = q->p;
    const int capped = mc->gemma && mc->final_softcap > 0;
    const long Nl = (long)p->micro_batch * (long)q->Sl;
    p->chunk_rows = zt_classifier_rows(mc, Nl, 1, capped);
    p->logits_bytes = zt_classifier_chunk_bytes(mc, Nl, 1, capped);
    const uint64_t elem = zt_classifier_l16(mc, 1, capped) ? 2 : 4;
    p->full_logits_bytes = (uint64_t)Nl * (uint64_t)mc->vocab * elem * (capped ? 2 : 1);
    p->logits_elem = (int)elem;
}

/* Sequence parallel communication: the all-to-alls' bytes per step around
 * every attention (forward, backward, and the recomputed forwards: q|k|v's
 * alone with blocks-attn, the attention's output kept). */
static void plan_seqpar_comm(planner *q) {
    const zt_model_config *mc = q->mc;
    zt_memplan *p = q->p;
    /* q|k|v and attention widths (GPT-2: n_kv_head = n_head, head dim C / NH) */
    const size_t hd = (size_t)zt_model_head_dim(mc), nh = (size_t)mc->n_head;
    const size_t nkv = (size_t)zt_model_kv_heads(mc);
    const int x16 = q->arch->sp16 ? q->arch->sp16(mc) : 0;   /* (bf16 exchanges) */
    const size_t k = zt_acts_ckpt_group(p->ckpt_k, 1, (size_t)q->L);
    const int katt = zt_acts_katt_on(mc, 1, k);   /* (ckpt_attn: zt_memplan_compute) */
    const int R = zt_acts_ckpt_recomputed((int)k, q->L, zt_ckptkeep_of());
    p->alltoall_bytes = (uint64_t)p->grad_accum *
                        zt_sp_alltoall_bytes(q->ax.sp, p->micro_batch, (int)q->Sl, q->L, R, katt,
                                             (nh + 2 * nkv) * hd, nh * hd, x16);
}

/* Activations of one micro batch (by checkpointing mode: zt_memplan_acts_bytes
 * with ckpt_k), the host token arrays on a GPU, and sequence parallel's host
 * arrays of the whole samples. */
static void plan_activations(planner *q) {
    zt_memplan *p = q->p;
    sim *s = &q->s;
    const int B = p->micro_batch;
    const uint64_t acts = zt_memplan_acts_bytes(q->mc, B, (int)q->Sl, 1, p->ckpt_k, PLAN_ELEM);
    s_alloc(s, q->y.place_dev, ZT_MEM_ACTIVATIONS, acts);
    /* on a GPU the data source writes host token arrays (inputs, targets) */
    if (p->gpu) s_alloc(s, ZT_MP_HOST, ZT_MEM_ACTIVATIONS, (uint64_t)B * q->Sl * 4 * 2);
    if (q->can_pin) q->pin_staging += (uint64_t)B * q->Sl * 4 * 2;   /* (page-locked: uploaded async) */
    /* sequence parallel: host arrays of the whole samples, sliced (train.c) */
    q->sp_cap = q->ax.sp > 1 ? (uint64_t)B * q->S : 0;
    if (q->ax.sp > 1) s_alloc(s, ZT_MP_HOST, ZT_MEM_ACTIVATIONS, q->sp_cap * 4 * 2);
}

/* zt_adamw_init: the moments m and v (fp32) of the trained elements this
 * rank updates (LoRA: the adapters'), and the step's scalars (backend
 * memory, optim.h). */
static void plan_moments(planner *q) {
    zt_memplan *p = q->p;
    const uint64_t on_t = q->lora ? (p->stage == 0 ? umax(p->lora_params, 1) : umax(q->ya.shard_total, 1))
                                  : q->on;
    for (int i = 0; i < 2; ++i) s_alloc(&q->s, q->optim_tag_place, ZT_MEM_OPTIMIZER, on_t * 4);
    s_alloc(&q->s, q->y.place_dev, ZT_MEM_WORKSPACE, sizeof(zt_step_scalars));
    /* a GPU's host copy the step reads them into (page-locked) */
    if (q->p->gpu) s_alloc(&q->s, ZT_MP_HOST, ZT_MEM_WORKSPACE, sizeof(zt_step_scalars));
    if (q->can_pin) q->pin_staging += sizeof(zt_step_scalars);
}

/* LoRA's weights at start-up (run.c's load_lora, after zt_ctx_create): the
 * frozen base read from ztrain.init_from unit by unit through a device
 * buffer of the largest unit (hf_load_frozen), then ztrain.lora.from's
 * adapters through a device buffer of all of them (zt_lora_load_peft);
 * both transients, on a device backend only (host runs stage in malloc). */
static void plan_lora_load(planner *q) {
    const zt_memplan *p = q->p;
    if (!q->lora || !p->gpu) return;
    sim *s = &q->s;
    s->phase = "loading the LoRA base";
    if (q->c->init_from[0]) {
        s_alloc(s, ZT_MP_DEVICE, ZT_MEM_WORKSPACE, umax(p->largest_unit, 1) * 4);
        s_free(s, ZT_MP_DEVICE, ZT_MEM_WORKSPACE, umax(p->largest_unit, 1) * 4);
    }
    if (q->mc->lora_from[0]) {
        s_alloc(s, ZT_MP_DEVICE, ZT_MEM_WORKSPACE, umax(p->lora_params, 1) * 4);
        s_free(s, ZT_MP_DEVICE, ZT_MEM_WORKSPACE, umax(p->lora_params, 1) * 4);
    }
}

/* The model states' totals (both places) next to the ZeRO paper's formula
 * and the engine's. */
static void plan_state_totals(planner *q) {
    zt_memplan *p = q->p;
    const sim *s = &q->s;
    p->params_bytes = s->cur[ZT_MP_HOST][ZT_MEM_PARAMS] + s->cur[ZT_MP_DEVICE][ZT_MEM_PARAMS];
    p->grads_bytes = s->cur[ZT_MP_HOST][ZT_MEM_GRADS] + s->cur[ZT_MP_DEVICE][ZT_MEM_GRADS];
    p->optim_bytes = s->cur[ZT_MP_HOST][ZT_MEM_OPTIMIZER] + s->cur[ZT_MP_DEVICE][ZT_MEM_OPTIMIZER];
    const double Psi = (double)p->num_params, G = (double)q->ax.shard_group;
    p->formula_bytes = zt_memplan_formula(p->stage, p->mixed, Psi, G);
    p->engine_formula_bytes = zt_memplan_engine_formula(p->stage, p->mixed, Psi, G);
}

/* zt_ctx_open_data (host): the token validation's scan buffer, a window of
 * tokens, and the loaders' prefetch slots (2 x accumulation + 2 micro
 * batches); with eval data its scan and window too. */
static void plan_data(planner *q) {
    const zt_memplan *p = q->p;
    sim *s = &q->s;
    if (!p->with_data) return;
    const uint64_t scan = q->o->scan_bytes ? q->o->scan_bytes : ((uint64_t)1 << 16) * 4;
    const uint64_t tok = (q->S + 1) * 4;   /* one window of uint32 tokens */
    s->phase = "opening data";
    s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, scan);
    s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, scan);
    s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, tok);
    /* prefetch slots: 2 * accumulation + 2 micro batches */
    for (int i = 0; i < 2 * p->grad_accum + 2; ++i)
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, (uint64_t)p->micro_batch * tok);
    if (p->with_eval) {
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, scan);
        s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, scan);
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, tok);
    }
}

/* zt_ctx_state_restored's all-gathers (host-staged) on the trained engine:
 * stage 0, each unit over its holders (3 fp32 arrays: parameters, m, v);
 * stages 1-2, each unit's storage (the master weights' rounding, or the
 * fp32 parameters) */
static void plan_restored_gathers(planner *q) {
    const zt_memplan *p = q->p;
    layout *y = q->lora ? &q->ya : &q->y;
    if (!q->stg.on) return;
    for (int u = 0; u < y->nu; ++u) {
        const int w = y->win ? y->win[u] : 0;
        if (p->stage == 0 && (!w || q->ax.eshard > 1))
            stg_ensure(y->s, y->stg, w ? MG_ESHARD : MG_WORLD, y->n[u] * 4);
        if ((p->stage == 1 || p->stage == 2) && u_gsize(y, u) > 1)
            stg_ensure(y->s, y->stg, u_grp(y, u), y->n[u] * y->eb);
    }
}

/* The weights at start-up (run.c, after the data are opened): a Hugging
 * Face load (ztrain.init_from, not LoRA) or a checkpoint restore
 * (checkpoint.resume not never: planned whenever a checkpoint may be found)
 * moves them through one host buffer of ZT_CKPT_STAGE_ELEMS floats: a
 * Hugging Face load's reader (rank 0) on every target, and every rank's
 * (reader and receivers, either load) when the state is on the device; then
 * zt_ctx_state_restored's all-gathers (during the Hugging Face load, after
 * the restore's buffer is freed). */
static void plan_load(planner *q) {
    const zt_config *c = q->c;
    const zt_memplan *p = q->p;
    sim *s = &q->s;
    const int hf = c->init_from[0] && !q->lora, restore = strcmp(c->ckpt_resume, "never") != 0;
    if (!hf && !restore) return;
    const uint64_t b = (uint64_t)ZT_CKPT_STAGE_ELEMS * 4;
    const int buf = hf || (p->gpu && !p->offload_optimizer);
    s->phase = "loading weights";
    if (buf) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, b);
    if (hf) plan_restored_gathers(q);
    if (buf) s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, b);
    if (!hf) plan_restored_gathers(q);
}

/* zt_train's eval block: the eval forward's activations (eval_batch rows),
 * its host token arrays on a GPU, sequence parallel's arrays grown to it. */
static void plan_eval(planner *q) {
    const zt_memplan *p = q->p;
    sim *s = &q->s;
    if (!p->with_eval) return;
    s->phase = "setup";
    if (q->ax.sp > 1 && (uint64_t)p->eval_batch * q->S > q->sp_cap) {   /* (train.c's sp_buffers grows) */
        s_free(s, ZT_MP_HOST, ZT_MEM_ACTIVATIONS, q->sp_cap * 4 * 2);
        q->sp_cap = (uint64_t)p->eval_batch * q->S;
        s_alloc(s, ZT_MP_HOST, ZT_MEM_ACTIVATIONS, q->sp_cap * 4 * 2);
    }
    s_alloc(s, q->y.place_dev, ZT_MEM_EVAL,
            zt_memplan_acts_bytes(q->mc, p->eval_batch, (int)q->Sl, 0, 0, PLAN_ELEM));
    if (p->gpu) s_alloc(s, ZT_MP_HOST, ZT_MEM_EVAL, (uint64_t)p->eval_batch * q->Sl * 4 * 2);
}

/* checkpoint.async: the host snapshot (ckpt_async.c), allocated at the
 * first periodic save and freed before the final one: the owned slices
 * of the trained units (rank 0's: the world's split at stage 0, the
 * shard group's at 1-3), params, m and v in fp32 */
static void plan_ckpt_snapshot(planner *q) {
    const zt_config *c = q->c;
    zt_memplan *p = q->p;
    if (!(c->ckpt_async && (c->ckpt_every > 0 || c->ckpt_every_minutes > 0))) return;
    const layout *yt = q->lora ? &q->ya : &q->y;
    const uint64_t gs = p->stage == 0 ? (uint64_t)q->ax.world : (uint64_t)q->ax.shard_group;
    uint64_t e = 0;
    /* (an expert window: over its expert-data-parallel group at stage 0,
     * its expert shard group otherwise) */
    for (int u = 0; u < yt->nu; ++u)
        e += cdiv(yt->n[u], yt->win && yt->win[u] ? (uint64_t)(p->stage == 0 ? q->ax.world / q->ax.ep
                                                                             : q->ax.eshard)
                                                  : gs);
    p->ckpt_snapshot_bytes = e * 3 * 4;
    s_alloc(&q->s, ZT_MP_HOST, ZT_MEM_WORKSPACE, p->ckpt_snapshot_bytes);
}

/* A synchronous checkpoint save during training (ckpt_save.c, from the
 * checkpoint session's step hook: the final save with checkpoint.final,
 * periodic or timed saves with checkpoint.async false, a preemption save
 * after any step but the last, so with 2 steps or more): on a GPU target whose
 * trained state stays on the device (no optimizer offload: zt_train_state's
 * on_device) it moves the state through one host buffer of
 * ZT_CKPT_STAGE_ELEMS floats; checkpoint.async's snapshot is released first. */
static void plan_ckpt_save(planner *q) {
    const zt_config *c = q->c;
    const zt_memplan *p = q->p;
    sim *s = &q->s;
    const int periodic = (c->ckpt_every > 0 && c->ckpt_every < c->steps) || c->ckpt_every_minutes > 0;
    const int preempt = c->steps >= 2;
    if (!p->gpu || p->offload_optimizer || c->steps < 1 ||
        !(c->ckpt_final || (periodic && !c->ckpt_async) || preempt))
        return;
    const uint64_t stage = (uint64_t)ZT_CKPT_STAGE_ELEMS * 4;
    s->phase = "checkpoint save";
    if (p->ckpt_snapshot_bytes) s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, p->ckpt_snapshot_bytes);
    s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, stage);
    s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, stage);
    if (p->ckpt_snapshot_bytes) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, p->ckpt_snapshot_bytes);
}

/* After backward, host-staged (q->stg): the trained engine's
 * zt_shard_reduce_grads (stage 0: the all-reduce over the world, or per run
 * of units with the same holders with expert windows; stage 1: each unit's
 * reduce-scatter; the replica group's all-reduces), then the update's
 * all-gathers of each unit's storage (stages 1-2). */
static void plan_reduce_update(planner *q) {
    const zt_memplan *p = q->p;
    layout *y = q->lora ? &q->ya : &q->y;
    if (!q->stg.on) return;
    const int replica = p->stage > 0 && q->ax.world > q->ax.shard_group;
    if (p->stage == 0) {
        for (int u = 0; u < y->nu;) {
            const int w = y->win ? y->win[u] : 0;
            uint64_t n = 0;
            int v = u;
            for (; v < y->nu && (y->win ? y->win[v] : 0) == w; ++v) n += y->n[v];
            if (!w || q->ax.eshard > 1) stg_allreduce_grads(y, w ? MG_ESHARD : MG_WORLD, n);
            u = v;
        }
    } else if (p->stage == 1) {
        for (int u = 0; u < y->nu; ++u) {
            stg_rs_unit(y, u);
            if (replica) stg_allreduce_grads(y, MG_REPLICA, cdiv(y->n[u], u_gsize(y, u)));
        }
    } else if (replica) {
        stg_allreduce_grads(y, MG_REPLICA, y->shard_total);
    }
    if (p->stage == 1 || p->stage == 2)
        for (int u = 0; u < y->nu; ++u)
            if (u_gsize(y, u) > 1) stg_ensure(y->s, y->stg, u_grp(y, u), y->n[u] * y->eb);
}

/* Host <-> device bytes of offloading, per rank (shard-group index 0's
 * slices), after a micro-step's simulation: the gathers' uploads of a
 * micro-step (offload_param: forward, backward, checkpointing's
 * recomputes), then the offloaded update's (shard.c update_offloaded: each
 * owned fp32 gradient slice down; unless the parameter shards are host
 * memory, each updated slice up in the storage type) */
static void plan_offload_traffic(planner *q) {
    zt_memplan *p = q->p;
    if (!p->gpu || (!p->offload_optimizer && !p->offload_param)) return;
    const layout *y = q->lora ? &q->ya : &q->y;   /* the trained engine */
    p->offload_micro_h2d = q->s.h2d;
    uint64_t own = 0;
    for (int u = 0; u < y->nu; ++u) own += cdiv(y->n[u], u_gsize(y, u));
    if (p->offload_optimizer) {
        p->offload_update_d2h = own * 4;
        p->offload_update_h2d = p->offload_param ? 0 : own * y->eb;
    }
    p->offload_h2d_bytes = (uint64_t)p->grad_accum * p->offload_micro_h2d + p->offload_update_h2d;
    p->offload_d2h_bytes = p->offload_update_d2h;
}

/* The training step (forward, backward: gathered units, gradient buckets,
 * reduce-scatters in flight; the reductions and the update's all-gathers)
 * and an evaluation forward; the peaks per place and category, the
 * offloaded and pinned bytes. */
static void plan_step(planner *q) {
    zt_memplan *p = q->p;
    sim *s = &q->s;
    s->phase = "forward";
    sim_forward(&q->y, 1);
    s->phase = "backward";
    sim_backward(&q->y, p->ckpt_k, zt_ckptkeep_of());
    plan_offload_traffic(q);
    plan_reduce_update(q);
    if (p->with_eval) {
        s->phase = "evaluation";
        sim_forward(&q->y, 0);
    }
    plan_ckpt_save(q);
    for (int pl = 0; pl < ZT_MP_NPLACES; ++pl) {
        p->peak[pl] = s->ptot[pl];
        p->peak_phase[pl] = s->pphase[pl] ? s->pphase[pl] : "setup";
        for (int t = 0; t < ZT_MEM_NTAGS; ++t) p->cat[pl][t] = s->pk[pl][t];
    }
    for (int t = 0; t < ZT_MEM_NTAGS; ++t) p->offloaded[t] = s->hpk[t];
    /* pin_memory: the offloaded blocks live for the whole run; a GPU target
     * page-locks those of the pinned kinds (the AdamW state and master
     * weights / the parameter shards); cpu-strict has no host_register.
     * And the staging of the asynchronous copies, which also lives for the
     * whole run (until the end of run frees the token arrays) */
    p->pinned_staging = q->pin_staging;
    if (q->can_pin)
        p->pinned_bytes = (q->c->pin_optimizer ? s->hpk[ZT_MEM_OPTIMIZER] : 0) +
                          (q->c->pin_param ? s->hpk[ZT_MEM_PARAMS] : 0) + q->pin_staging;
    p->accounted_peak = s->pall;
}

/* The CLI's end of run, from the state after training: the weights export
 * (zt_shard_full_params: full fp32 parameters gathered on every rank at
 * stage 3, and at stages 1-2 when mixed, from the master slices; host),
 * then the sample ([1, T] forward).  Only an llm.c model file (a GPT-2
 * without LoRA: zt_save_weights) is written at the end of `ztrain train`;
 * the other architectures' and LoRA's weights stay in the final checkpoint.
 * The run frees the training and eval activation blocks before either
 * step (zt_ctx_release_activations).  Each optional step is simulated from
 * the state after that: export_peak and sample_peak are the peaks if that
 * step runs (training's included), end_peak what a default CLI run does
 * (the export when it is written, then the sample). */
static void plan_end_of_run(planner *q) {
    zt_memplan *p = q->p;
    sim *s = &q->s;
    const uint64_t Psi = p->num_params;
    if (p->ckpt_snapshot_bytes) s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, p->ckpt_snapshot_bytes);
    p->export_default = !q->lora && q->arch->llmc_file;
    /* training is over: the run frees the training and eval blocks first
     * (zt_ctx_release_activations); the export and the sample need neither */
    s->phase = "end of run";
    s_free(s, q->y.place_dev, ZT_MEM_ACTIVATIONS,
           zt_memplan_acts_bytes(q->mc, p->micro_batch, (int)q->Sl, 1, p->ckpt_k, PLAN_ELEM));
    if (p->gpu) s_free(s, ZT_MP_HOST, ZT_MEM_ACTIVATIONS, (uint64_t)p->micro_batch * q->Sl * 4 * 2);
    if (p->with_eval) {
        s_free(s, q->y.place_dev, ZT_MEM_EVAL,
               zt_memplan_acts_bytes(q->mc, p->eval_batch, (int)q->Sl, 0, 0, PLAN_ELEM));
        if (p->gpu) s_free(s, ZT_MP_HOST, ZT_MEM_EVAL, (uint64_t)p->eval_batch * q->Sl * 4 * 2);
    }
    const sim trained = *s;
    s->phase = "weights export";
    /* (on a GPU the gathered block is device memory, written out by rank 0
     * through a host chunk of at most 1 Mi elements) */
    const uint64_t wchunk = (Psi < ((uint64_t)1 << 20) ? umax(Psi, 1) : (uint64_t)1 << 20) * 4;
    /* (expert windows: every rank gathers the experts at every stage) */
    const int gather = p->stage == 3 || (p->mixed && p->stage >= 1) || q->y.win;
    if (gather) s_alloc(s, q->y.place_dev, ZT_MEM_WORKSPACE, Psi * 4);
    if (p->gpu) {
        s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, wchunk);
        s_free(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, wchunk);
    }
    if (gather) s_free(s, q->y.place_dev, ZT_MEM_WORKSPACE, Psi * 4);
    for (int pl = 0; pl < ZT_MP_NPLACES; ++pl) p->export_peak[pl] = s->ptot[pl];
    *s = trained;
    /* (sequence or expert parallel: the CLI skips its closing sample) */
    if (q->ax.sp == 1 && q->mc->expert_parallel <= 1) {
        s->phase = "sample";
        /* zt_sample's [1, W] block: W the longest window it forwards */
        const int sw = q->o->sample_window;
        const uint64_t SW = umax(umin(sw > 0 ? (uint64_t)sw : 256, q->T), 1);
        p->sample_window = (int)SW;
        s_alloc(s, q->y.place_dev, ZT_MEM_WORKSPACE,
                zt_memplan_acts_bytes(q->mc, 1, (int)SW, 0, 0, PLAN_ELEM));
        if (p->gpu) s_alloc(s, ZT_MP_HOST, ZT_MEM_WORKSPACE, SW * 4 * 2);
        sim_forward(&q->y, 0);
    }
    for (int pl = 0; pl < ZT_MP_NPLACES; ++pl) {
        p->sample_peak[pl] = s->ptot[pl];
        /* the sample runs after the export has freed its block */
        p->end_peak[pl] = umax(p->sample_peak[pl], p->export_default ? p->export_peak[pl] : 0);
    }
}

/* cuda: the backend's own device memory (cuda_workspace.h), held from
 * the first kernel that needs it to the end: the cuBLAS workspace and
 * the scratch at its final size (an upper bound before that kernel),
 * added to every device peak. */
static void plan_kernel_ws(planner *q) {
    zt_memplan *p = q->p;
    if (!kernel_ws_target(q)) return;
    p->cublas_ws_bytes = ZT_CUDA_CUBLAS_WS_BYTES;
    /* the attention's scratch: the backend's answer at the run's shapes
     * (the pre-flight), else ztrain's kernels' need */
    zt_att_ws att = {q->o->be, 0, 0};
    uint64_t ws = q->arch->kernel_ws(q->mc, p->micro_batch, (int)q->Sl,
                                     p->with_eval ? p->eval_batch : 0, q->y.win ? q->y.nblk : p->num_params,
                                     zt_matmul_bf16_of(q->c, 1), &att);
    p->att_asked = att.asked;
    p->att_cudnn = att.cudnn;
    p->att_path = !att.asked ? "ztrain's kernels (assumed: no device asked; with cuDNN the run's "
                               "pre-flight counts cuDNN's fused attention and its workspace, known "
                               "only at run time)"
                  : att.cudnn == att.asked ? "cuDNN's fused attention (the backend's plans' workspace)"
                  : att.cudnn ? "cuDNN's fused attention and ztrain's kernels (the backend's rule per shape)"
                              : "ztrain's kernels (the backend's rule)";
    /* the gradient norm over the trained engine's owned ranges at stages
     * 1-3 (sumsq_to; stage 0: one range of the trained elements, in
     * kernel_ws) */
    const layout *yt = q->lora ? &q->ya : &q->y;
    if (p->stage > 0) {
        size_t *rn = malloc((size_t)(yt->nu > 0 ? yt->nu : 1) * sizeof *rn);
        if (rn) {
            for (int u = 0; u < yt->nu; ++u)
                rn[u] = (size_t)cdiv(yt->n[u], yt->ug ? yt->ug[u] : (uint64_t)q->ax.shard_group);
            ws = umax(ws, zt_cuda_ws_reduce_ranges(rn, yt->nu));
            free(rn);
        }
    }
    p->scratch_bytes = zt_cuda_ws_scratch_size(ws);
    p->kernel_ws_bytes = p->cublas_ws_bytes + p->scratch_bytes;
    p->peak[ZT_MP_DEVICE] += p->kernel_ws_bytes;
    p->end_peak[ZT_MP_DEVICE] += p->kernel_ws_bytes;
    p->export_peak[ZT_MP_DEVICE] += p->kernel_ws_bytes;
    p->sample_peak[ZT_MP_DEVICE] += p->kernel_ws_bytes;
    /* the deferred initialization's top (plan_init), with the cuBLAS
     * workspace only */
    const uint64_t in = q->init_dev ? q->init_dev + p->cublas_ws_bytes : 0;
    if (in > p->peak[ZT_MP_DEVICE]) {
        p->peak[ZT_MP_DEVICE] = in;
        p->peak_phase[ZT_MP_DEVICE] = "initializing the parameters";
    }
    p->end_peak[ZT_MP_DEVICE] = umax(p->end_peak[ZT_MP_DEVICE], in);
    p->export_peak[ZT_MP_DEVICE] = umax(p->export_peak[ZT_MP_DEVICE], in);
    p->sample_peak[ZT_MP_DEVICE] = umax(p->sample_peak[ZT_MP_DEVICE], in);
}

int zt_memplan_compute(const zt_config *cfg_in, const zt_memplan_opts *o, zt_memplan *out,
                       zt_status *st) {
    memset(out, 0, sizeof *out);
    if (!cfg_in || !o || o->world_size < 1)
        return zt_fail(st, ZT_EINVAL, "memory plan: needs a configuration and a world size >= 1");
    if (cfg_in->micro_batch == ZT_MICRO_BATCH_AUTO)
        return zt_fail(st, ZT_EINVAL, "memory plan: train_micro_batch_size_per_gpu=\"auto\" "
                       "must be resolved first");
    planner q;
    memset(&q, 0, sizeof q);
    q.c = zt_config_dup(cfg_in);
    if (!q.c) return zt_fail(st, ZT_ENOMEM, "out of memory (memory plan)");
    int rc = zt_config_finalize_plan(q.c, o->world_size, st);
    if (rc != ZT_OK) { zt_config_free(q.c); return rc; }
    q.o = o;
    q.p = out;
    q.mc = &q.c->model;
    q.arch = zt_arch_of(q.mc);
    q.L = q.mc->n_layer;
    resolve_opts(q.c, o, out);
    /* the activations in bf16 as the run keeps them (train.c builtin_model;
     * a GPU target: cuda) */
    q.c->model.acts16 =
        zt_acts16_of(q.c, out->gpu ? strcmp(q.c->backend, "cpu-strict") != 0
                                   : strcmp(q.c->backend, "cuda") == 0);
    /* and the bf16-output paths (train.c; the attention entries' scratch,
     * arch.h zt_att_in16_of) */
    zt_out16_of(&q.c->model);
    /* (blocks-attn: the attention kept per layer, as the run's model) */
    q.c->model.ckpt_attn = zt_config_act_ckpt_attn(q.c);
    rc = plan_axes(q.c, out->world, out->ranks_per_node, &q.ax, st);
    /* training / eval windows are seq_len long; T (the model's positions)
     * sizes the position table and the sample's window */
    q.T = (uint64_t)q.mc->context;
    q.S = (uint64_t)q.c->seq_len;
    q.Sl = q.S / (uint64_t)q.ax.sp;
    q.g = q.c->zero_stage == 0 ? 1 : (uint64_t)q.ax.shard_group;
    q.lora = q.mc->lora_r > 0;
    q.y.s = &q.s;
    if (rc == ZT_OK) rc = plan_run(&q, st);
    if (rc == ZT_OK) rc = plan_units(&q, st);
    if (rc == ZT_OK && q.lora && zt_lora_base_kind(q.mc, NULL) > 0) rc = plan_qlora(&q, st);
    if (rc == ZT_OK && q.lora) rc = plan_adapters(&q, st);
    if (rc == ZT_OK) {
        q.ya.s = &q.s;
        plan_states(&q);
        plan_classifier(&q);
        plan_seqpar_comm(&q);
        plan_activations(&q);
        plan_moments(&q);
        plan_lora_load(&q);
        plan_state_totals(&q);
        plan_data(&q);
        plan_load(&q);
        plan_init(&q);
        plan_eval(&q);
        plan_ckpt_snapshot(&q);
        plan_step(&q);
        plan_end_of_run(&q);
        plan_kernel_ws(&q);
        out->peak_bytes = out->peak[out->gpu ? ZT_MP_DEVICE : ZT_MP_HOST];
    }
    layout_free(&q.ya);
    layout_free(&q.y);
    zt_config_free(q.c);
    return rc;
}

/* ------------------------------------------------------------ limits */

uint64_t zt_memplan_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

uint64_t zt_memplan_limit(const zt_config *cfg, int ranks_per_node, char *what, size_t n) {
    if (cfg->memory_limit) {
        if (n) snprintf(what, n, "ztrain.memory_limit");
        return cfg->memory_limit;
    }
    uint64_t avail = zt_memplan_host_available();
    if (ranks_per_node < 1) ranks_per_node = 1;
    if (n && ranks_per_node > 1) snprintf(what, n, "available memory / %d ranks on this node", ranks_per_node);
    else if (n) snprintf(what, n, "available memory");
    return avail / (uint64_t)ranks_per_node;
}

uint64_t zt_memplan_device_reserve(const char *backend, uint64_t total) {
    if (!backend || strcmp(backend, "cuda") != 0) return 0;
    return ZT_MEMPLAN_CUDA_RESERVE_FIXED + (uint64_t)((double)total * ZT_MEMPLAN_CUDA_RESERVE_FRAC);
}

uint64_t zt_memplan_device_usable(const char *backend, uint64_t avail, uint64_t total) {
    const uint64_t reserve = zt_memplan_device_reserve(backend, total);
    /* below the reserve: 1 byte (0 would mean unknown: not checked), so the
     * plan is refused with the reason */
    return avail > reserve ? avail - reserve : 1;
}

uint64_t zt_memplan_device_limit(const zt_config *cfg, const zt_backend *be, int ranks_on_device,
                                 int ranks_per_node, char *what, size_t n) {
    if (n) what[0] = '\0';
    char name[160] = "";
    size_t fr = 0, tot = 0;
    const int known = be && be->device_memory &&
                      be->device_memory(&fr, &tot, name, sizeof name) == 0;
    if (!name[0]) snprintf(name, sizeof name, "%s device", be ? be->name : "?");
    if (cfg->memory_limit) {
        snprintf(what, n, "ztrain.memory_limit, device memory of %s", name);
        return cfg->memory_limit;
    }
    if (!known) {
        if (be && strcmp(be->name, "cpu-strict") == 0) {
            /* no emulated capacity: its "device" memory is host memory */
            char hw[64];
            uint64_t l = zt_memplan_limit(cfg, ranks_per_node, hw, sizeof hw);
            snprintf(what, n, "%s; %s", hw, name);
            return l;
        }
        snprintf(what, n, "free memory of %s: unknown (set ztrain.memory_limit)", name);
        return 0;
    }
    const uint64_t reserve = zt_memplan_device_reserve(be->name, tot);
    /* cuda: what the backend already holds (its cuBLAS workspace, from its
     * start) is used memory to cudaMemGetInfo but also in the plan (kernel
     * workspace): counted once, in the plan.  (Ranks sharing the device
     * add back only their own: conservative.) */
    size_t held = 0, held_peak = 0;
    if (strcmp(be->name, "cuda") == 0 && be->mem_stats) be->mem_stats(&held, &held_peak);
    uint64_t l = zt_memplan_device_usable(be->name, (uint64_t)fr + held, tot);
    if (ranks_on_device < 1) ranks_on_device = 1;
    l /= (uint64_t)ranks_on_device;
    if (!l) l = 1;
    char fb[32], rb[32], hb[32];
    zt_memplan_fmt_bytes((double)fr, fb, sizeof fb);
    zt_memplan_fmt_bytes((double)reserve, rb, sizeof rb);
    zt_memplan_fmt_bytes((double)held, hb, sizeof hb);
    int w = snprintf(what, n, "free device memory of %s: %s", name, fb);
    if (w > 0 && (size_t)w < n && held)
        w += snprintf(what + w, n - (size_t)w, " plus the backend's own %s (in the plan)", hb);
    if (w > 0 && (size_t)w < n && reserve)
        w += snprintf(what + w, n - (size_t)w, " less a %s reserve", rb);
    if (w > 0 && (size_t)w < n && ranks_on_device > 1)
        snprintf(what + w, n - (size_t)w, ", / %d ranks sharing the device", ranks_on_device);
    return l;
}

/* ------------------------------------------------------------ suggestions */

typedef struct change {
    char label[160];
    char flags[160];
    uint64_t peak;
    uint64_t host_peak;   /* GPU target: the host place's peak (o->host_limit) */
} change;

/* Try cfg with one set of keys changed; returns 1 and fills ch when it
 * computes (whether or not it fits). */
static int try_change(const zt_config *cfg, const zt_memplan_opts *o, const char *const *kv,
                      change *ch) {
    zt_config *c = zt_config_dup(cfg);
    if (!c) return 0;
    zt_status st;
    int ok = 1;
    for (int i = 0; kv[i] && ok; i += 2)
        ok = zt_config_set(c, kv[i], kv[i + 1], ZT_SRC_FLAG, &st) == ZT_OK;
    zt_memplan p;
    if (ok) ok = zt_memplan_compute(c, o, &p, &st) == ZT_OK;
    if (ok) {
        ch->peak = p.peak_bytes;
        ch->host_peak = p.gpu && o->host_limit ? p.peak[ZT_MP_HOST] : 0;
    }
    zt_config_free(c);
    return ok;
}

static int fits(uint64_t peak, uint64_t limit) { return peak <= limit; }
/* a change fits when its binding place fits limit and (GPU target with a
 * host limit) its host place fits the host limit */
static int fits_ch(const change *c, uint64_t limit, const zt_memplan_opts *o) {
    return (!limit || fits(c->peak, limit)) && (!o->host_limit || c->host_peak <= o->host_limit);
}

/* the most divisors an int has (2095133040 has 1600) */
#define MP_MAX_CANDIDATES 1600

/* The divisors of N below N, largest first, in O(sqrt(N)): N/d for d = 2,
 * 3, ... while d*d <= N, then the divisors below sqrt(N). */
static int divisors_below(int N, int *v, int nmax) {
    int nv = 0;
    long d;
    for (d = 2; d * d <= N; ++d)
        if (N % d == 0 && nv < nmax) v[nv++] = (int)(N / d);
    for (long e = d - 1; e >= 1; --e)
        if (N % e == 0 && e * e != N && e < N && nv < nmax) v[nv++] = (int)e;
    return nv;
}

/* One search for the advice: a key whose smaller (or larger) values might
 * fit, tried in order until one does, with a second key that keeps the
 * samples (the accumulation, or the number of eval batches). */
typedef struct search {
    const char *key, *flag;            /* the key searched, and its flag */
    const char *with_key, *with_flag;  /* the key that keeps the samples */
    /* the candidates in the order tried (at most nmax), from the finalized configuration */
    int (*candidates)(const zt_config *fin, const zt_memplan_opts *o, int *v, int nmax);
    long long (*with)(const zt_config *fin, const zt_memplan_opts *o, int v);   /* with_key's value */
    void (*label)(const zt_config *fin, const zt_memplan_opts *o, int v, long long w, char *buf,
                  size_t n);
} search;

/* Micro batch: M' dividing M, the largest first; the accumulation grows
 * by M / M' so the global batch stays. */
static int micro_candidates(const zt_config *fin, const zt_memplan_opts *o, int *v, int nmax) {
    (void)o;
    return divisors_below(fin->micro_batch, v, nmax);
}
static long long micro_with(const zt_config *fin, const zt_memplan_opts *o, int m) {
    (void)o;
    return (long long)fin->grad_accum * (fin->micro_batch / m);
}
static void micro_label(const zt_config *fin, const zt_memplan_opts *o, int m, long long w, char *buf,
                        size_t n) {
    (void)o; (void)w;
    snprintf(buf, n, "micro-batch %d -> %d with accumulation x%d", fin->micro_batch, m,
             fin->micro_batch / m);
}
static const search SEARCH_MICRO = {"train_micro_batch_size_per_gpu", "--micro-batch",
                                    "gradient_accumulation_steps", "--grad-accum",
                                    micro_candidates, micro_with, micro_label};

/* Sequence parallel (seqpar.h): sizes above the current one dividing the
 * world, the training length and the query and key/value heads, the
 * smallest first (the least all-to-all traffic); the accumulation grows by
 * N / N_cur so the global batch stays. */
static int sp_cur(const zt_config *fin) {
    return fin->model.seq_parallel > 1 ? fin->model.seq_parallel : 1;
}
static int sp_candidates(const zt_config *fin, const zt_memplan_opts *o, int *v, int nmax) {
    const zt_model_config *mc = &fin->model;
    const int W = o->world_size, cur = sp_cur(fin), kv = zt_model_kv_heads(mc);
    int nv = 0;
    for (int n = cur + 1; n <= W && nv < nmax; ++n)
        if (!(W % n || n % cur || fin->seq_len % n || mc->n_head % n || kv % n)) v[nv++] = n;
    return nv;
}
static long long sp_with(const zt_config *fin, const zt_memplan_opts *o, int n) {
    (void)o;
    return (long long)fin->grad_accum * (n / sp_cur(fin));
}
static void sp_label(const zt_config *fin, const zt_memplan_opts *o, int n, long long w, char *buf,
                     size_t len) {
    (void)o; (void)w;
    snprintf(buf, len, "sequence parallel %d (each rank holds %d of the %d tokens; accumulation x%d "
             "keeps the batch)", n, fin->seq_len / n, fin->seq_len, n / sp_cur(fin));
}
static const search SEARCH_SP = {"sequence_parallel_size", "--sp",
                                 "gradient_accumulation_steps", "--grad-accum",
                                 sp_candidates, sp_with, sp_label};

/* Eval batch: E' dividing E, the largest first; eval_batches grows by
 * E / E' so the same samples are evaluated. */
static int eval_candidates(const zt_config *fin, const zt_memplan_opts *o, int *v, int nmax) {
    (void)o;
    return divisors_below(fin->eval_batch_size, v, nmax);
}
static long long eval_with(const zt_config *fin, const zt_memplan_opts *o, int e) {
    (void)o;
    return (long long)fin->eval_batches * (fin->eval_batch_size / e);
}
static void eval_label(const zt_config *fin, const zt_memplan_opts *o, int e, long long w, char *buf,
                       size_t n) {
    (void)o;
    snprintf(buf, n, "eval batch %d -> %d with %lld eval batches (the same samples)",
             fin->eval_batch_size, e, w);
}
static const search SEARCH_EVAL = {"ztrain.eval_batch_size", "--eval-batch-size",
                                   "ztrain.eval_batches", "--eval-batches",
                                   eval_candidates, eval_with, eval_label};

/* The first candidate of sk that fits limit, on top of the keys extra (at
 * most 14 entries); its flags after extra_flags.  Returns 1 and fills ch
 * (label, flags, peaks) when one fits. */
static int search_fit(const zt_config *fin, const zt_memplan_opts *o, const search *sk,
                      const char *const *extra, const char *extra_flags, uint64_t limit, change *ch) {
    int v[MP_MAX_CANDIDATES];
    const int nv = sk->candidates(fin, o, v, MP_MAX_CANDIDATES);
    for (int i = 0; i < nv; ++i) {
        const long long w = sk->with(fin, o, v[i]);
        if (w > INT_MAX) continue;
        char a[16], b[24];
        snprintf(a, sizeof a, "%d", v[i]);
        snprintf(b, sizeof b, "%lld", w);
        const char *kv[20];
        int n = 0;
        for (int j = 0; extra && extra[j] && n < 14; ++j) kv[n++] = extra[j];
        kv[n++] = sk->key; kv[n++] = a;
        kv[n++] = sk->with_key; kv[n++] = b;
        kv[n] = NULL;
        change c;
        memset(&c, 0, sizeof c);
        if (!(try_change(fin, o, kv, &c) && fits_ch(&c, limit, o))) continue;
        sk->label(fin, o, v[i], w, ch->label, sizeof ch->label);
        snprintf(ch->flags, sizeof ch->flags, "%s%s%s %d %s %lld", extra_flags ? extra_flags : "",
                 extra_flags ? " " : "", sk->flag, v[i], sk->with_flag, w);
        ch->peak = c.peak;
        ch->host_peak = c.host_peak;
        return 1;
    }
    return 0;
}

/* One change of keys kv: when it computes, fits limit and (below not NULL)
 * brings the peak under *below, it is added to list[*nl] with label and
 * flags.  Returns 1 when added. */
static int offer(const zt_config *fin, const zt_memplan_opts *o, const char *const *kv,
                 uint64_t limit, const uint64_t *below, const char *label, const char *flags,
                 change *list, int *nl) {
    change c;
    memset(&c, 0, sizeof c);
    if (!(try_change(fin, o, kv, &c) && fits_ch(&c, limit, o) && (!below || c.peak < *below)))
        return 0;
    snprintf(c.label, sizeof c.label, "%s", label);
    snprintf(c.flags, sizeof c.flags, "%s", flags);
    list[(*nl)++] = c;
    return 1;
}

/* A search on top of checkpointing and stage s: its row is labelled
 * "activation checkpointing + ZeRO stage s + <the search's label>". */
static int offer_combined(const zt_config *fin, const zt_memplan_opts *o, const search *sk,
                          const char *const *extra, int s, uint64_t limit, change *list, int *nl) {
    change c;
    memset(&c, 0, sizeof c);
    if (!search_fit(fin, o, sk, extra, NULL, limit, &c)) return 0;
    char lab[160], fl[160];
    snprintf(lab, sizeof lab, "activation checkpointing + ZeRO stage %d + %s", s, c.label);
    snprintf(fl, sizeof fl, "--act-ckpt blocks --stage %d %s", s, c.flags);
    snprintf(c.label, sizeof c.label, "%s", lab);
    snprintf(c.flags, sizeof c.flags, "%s", fl);
    list[(*nl)++] = c;
    return 1;
}

/* The single changes, cheapest first: synchronous checkpoints (when the
 * plan holds a snapshot); stages 1-2 (no extra communication); a wider
 * shard group; a smaller eval batch; a smaller micro batch; recomputation
 * (+1 forward); expert parallelism (all-to-alls); stage 3 (1.5x the
 * communication); sequence parallelism; optimizer offload (GPU target,
 * offload_opt). */
static void suggest_singles(const zt_config *fin, const zt_memplan_opts *o, const zt_memplan *cur,
                            uint64_t limit, const mp_axes *ax, int offload_opt, change *list,
                            int *nl) {
    const int W = ax->world, G = ax->shard_group, stage = fin->zero_stage;
    char sv[8], gv[16], lab[160], fl[160];
    /* checkpoint.async's host snapshot: synchronous saves need none (they
     * stop training while they write, but the steps run as before) */
    if (cur->ckpt_snapshot_bytes) {
        const char *kv[] = {"ztrain.checkpoint.async", "false", NULL};
        offer(fin, o, kv, limit, NULL, "synchronous checkpoints", "--ckpt-async false", list, nl);
    }
    for (int s = stage + 1; s <= 2 && W > 1; ++s) {
        snprintf(sv, sizeof sv, "%d", s);
        snprintf(lab, sizeof lab, "ZeRO stage %d", s);
        snprintf(fl, sizeof fl, "--stage %d", s);
        const char *kv[] = {"zero_optimization.stage", sv, NULL};
        if (offer(fin, o, kv, limit, &cur->peak_bytes, lab, fl, list, nl))
            break;   /* the cheaper stage that fits is enough */
    }
    if (stage >= 1 && G < W) {
        snprintf(gv, sizeof gv, "%d", W);
        snprintf(lab, sizeof lab, "shard over all %d ranks", W);
        snprintf(fl, sizeof fl, "--shard-group %d", W);
        const char *kv[] = {"zero_optimization.shard_group_size", gv, NULL};
        offer(fin, o, kv, limit, NULL, lab, fl, list, nl);
    }
    change c;
    memset(&c, 0, sizeof c);
    if (cur->with_eval && search_fit(fin, o, &SEARCH_EVAL, NULL, NULL, limit, &c)) list[(*nl)++] = c;
    memset(&c, 0, sizeof c);
    if (search_fit(fin, o, &SEARCH_MICRO, NULL, NULL, limit, &c)) list[(*nl)++] = c;
    if (zt_config_act_ckpt_k(fin) != 1) {
        const char *kv[] = {"activation_checkpointing.policy", "blocks", NULL};
        offer(fin, o, kv, limit, NULL, "enable activation checkpointing", "--act-ckpt blocks", list, nl);
    } else if (zt_config_act_ckpt_attn(fin)) {
        /* (blocks-attn: blocks drops the L - 1 kept attention outputs and lse) */
        const char *kv[] = {"activation_checkpointing.policy", "blocks", NULL};
        offer(fin, o, kv, limit, NULL, "activation checkpointing recomputing the attention too",
              "--act-ckpt blocks", list, nl);
    }
    /* expert parallelism (a Mixture of Experts): each rank stores E / N of the
     * experts (all-to-alls of the routed rows per MoE layer); the smallest N
     * above the current one dividing the ranks, the experts and (stages 1-3)
     * the shard group */
    const int E = fin->model.n_experts, ep = fin->model.expert_parallel > 1 ? fin->model.expert_parallel : 1;
    for (int n = ep + 1; E > 0 && fin->model.lora_r <= 0 && n <= W && n <= E; ++n) {
        if (W % n || E % n || n % ep || (stage > 0 && G % n)) continue;
        char ev[16];
        snprintf(ev, sizeof ev, "%d", n);
        snprintf(lab, sizeof lab, "expert parallel %d (each rank stores %d of the %d experts)", n,
                 E / n, E);
        snprintf(fl, sizeof fl, "--ep %d", n);
        const char *kv[] = {"expert_parallel_size", ev, NULL};
        if (offer(fin, o, kv, limit, NULL, lab, fl, list, nl)) break;
    }
    if (stage < 3) {
        const char *kv[] = {"zero_optimization.stage", "3", NULL};
        offer(fin, o, kv, limit, NULL, "ZeRO stage 3", "--stage 3", list, nl);
    }
    /* sequence parallelism (all-to-alls around every attention) */
    memset(&c, 0, sizeof c);
    if (search_fit(fin, o, &SEARCH_SP, NULL, NULL, limit, &c)) list[(*nl)++] = c;
    if (offload_opt) {
        const char *kv[] = {"offload", "optimizer", NULL};
        offer(fin, o, kv, limit, NULL, "offload the optimizer state to the host", "--offload optimizer",
              list, nl);
    }
}

/* Combinations, cheapest first, when no single change fits: checkpointing
 * with stage 2 or 3; checkpointing and stage 3 (one rank: the stage) with a
 * smaller micro batch, or else with sequence parallelism; then also micro
 * batch 1 with a smaller eval batch. */
static void suggest_combined(const zt_config *fin, const zt_memplan_opts *o, const zt_memplan *cur,
                             uint64_t limit, const mp_axes *ax, change *list, int *nl) {
    const int W = ax->world, stage = fin->zero_stage;
    char sv[8], lab[160], fl[160];
    static const char *const combo[][7] = {
        {"activation_checkpointing.policy", "blocks", "zero_optimization.stage", "2", NULL},
        {"activation_checkpointing.policy", "blocks", "zero_optimization.stage", "3", NULL},
    };
    for (size_t i = 0; i < sizeof combo / sizeof combo[0] && *nl == 0; ++i) {
        if (atoi(combo[i][3]) < stage || (W == 1 && atoi(combo[i][3]) > 0)) continue;
        snprintf(lab, sizeof lab, "activation checkpointing + ZeRO stage %s", combo[i][3]);
        snprintf(fl, sizeof fl, "--act-ckpt blocks --stage %s", combo[i][3]);
        offer(fin, o, combo[i], limit, NULL, lab, fl, list, nl);
    }
    const int s = W > 1 ? 3 : stage;
    snprintf(sv, sizeof sv, "%d", s);
    if (*nl == 0) {
        const char *extra[] = {"activation_checkpointing.policy", "blocks",
                               "zero_optimization.stage", sv, NULL};
        offer_combined(fin, o, &SEARCH_MICRO, extra, s, limit, list, nl);
        /* the sequence is what does not fit: split it over ranks */
        if (*nl == 0) offer_combined(fin, o, &SEARCH_SP, extra, s, limit, list, nl);
    }
    if (*nl == 0 && cur->with_eval) {
        /* everything: checkpointing, stage 3, micro batch 1, a smaller eval batch */
        const int M = fin->micro_batch, A = fin->grad_accum;
        char mv[16], av[16], efl[96];
        snprintf(mv, sizeof mv, "%d", 1);
        snprintf(av, sizeof av, "%d", A * M);
        snprintf(efl, sizeof efl, "--act-ckpt blocks --stage %d --micro-batch 1 --grad-accum %d", s,
                 A * M);
        const char *extra[] = {"activation_checkpointing.policy", "blocks",
                               "zero_optimization.stage", sv,
                               "train_micro_batch_size_per_gpu", mv,
                               "gradient_accumulation_steps", av, NULL};
        change c;
        memset(&c, 0, sizeof c);
        if (search_fit(fin, o, &SEARCH_EVAL, extra, efl, limit, &c)) {
            snprintf(lab, sizeof lab, "activation checkpointing + ZeRO stage %d + micro-batch "
                     "%d -> 1 + %s", s, M, c.label);
            snprintf(c.label, sizeof c.label, "%s", lab);
            list[(*nl)++] = c;
        }
    }
}

int zt_memplan_suggest(const zt_config *cfg, const zt_memplan_opts *o, const zt_memplan *cur,
                       uint64_t limit, char *buf, size_t n, char *first, size_t nfirst) {
    if (n) buf[0] = '\0';
    if (nfirst) first[0] = '\0';
    zt_config *fin = zt_config_dup(cfg);
    zt_status st;
    if (!fin || zt_config_finalize_plan(fin, o->world_size, &st) != ZT_OK) {
        zt_config_free(fin);
        return 0;
    }
    change list[12];
    int nl = 0;
    mp_axes ax;
    plan_axes(fin, o->world_size, opts_ranks_per_node(o), &ax, &st);   /* checked by compute */
    zt_memplan pl;
    const int gpu = zt_memplan_compute(fin, o, &pl, &st) == ZT_OK && pl.gpu;
    suggest_singles(fin, o, cur, limit, &ax, gpu && !pl.offload_optimizer, list, &nl);
    if (nl == 0) suggest_combined(fin, o, cur, limit, &ax, list, &nl);
    /* the parameters on the host (stage 3 with parameter offload: every unit
     * crosses to the device each step, the dearest change), offered only
     * when nothing above fits: a LoRA run's frozen base, say, that one GPU
     * cannot hold next to its activations */
    if (nl == 0 && gpu && !pl.offload_param) {
        const char *kv[] = {"zero_optimization.stage", "3", "offload", "params", NULL};
        char fl[160];
        snprintf(fl, sizeof fl, "%s--offload params", fin->zero_stage == 3 ? "" : "--stage 3 ");
        offer(fin, o, kv, limit, NULL, "ZeRO stage 3 with the parameters offloaded to the host", fl,
              list, &nl);
    }
    size_t j = 0;
    for (int i = 0; i < nl; ++i) {
        double pct = cur->peak_bytes
                         ? 100.0 * ((double)list[i].peak - (double)cur->peak_bytes) / (double)cur->peak_bytes
                         : 0.0;
        int w = snprintf(buf + j, n > j ? n - j : 0, "%s%s (%s): %.0f%%", i ? "; " : "",
                         list[i].label, list[i].flags, pct);
        if (w > 0) j += (size_t)w;
        if (j >= n) break;
    }
    if (nl && nfirst) snprintf(first, nfirst, "%s", list[0].flags);
    zt_config_free(fin);
    return nl;
}

/* The two largest categories at their peaks, for messages. */
static void top_categories(const zt_memplan *p, int pl, char *buf, size_t n) {
    int a = -1, b = -1;
    for (int t = 0; t < ZT_MEM_NTAGS; ++t) {
        if (!p->cat[pl][t]) continue;
        if (a < 0 || p->cat[pl][t] > p->cat[pl][a]) { b = a; a = t; }
        else if (b < 0 || p->cat[pl][t] > p->cat[pl][b]) b = t;
    }
    char x[32], y[32];
    buf[0] = '\0';
    if (a < 0) return;
    zt_memplan_fmt_bytes((double)p->cat[pl][a], x, sizeof x);
    if (b < 0) { snprintf(buf, n, "%s %s", zt_mem_tag_name(a), x); return; }
    zt_memplan_fmt_bytes((double)p->cat[pl][b], y, sizeof y);
    snprintf(buf, n, "%s %s, %s %s", zt_mem_tag_name(a), x, zt_mem_tag_name(b), y);
}

int zt_memplan_check(const zt_config *cfg, const zt_memplan_opts *o, uint64_t limit,
                     const char *limit_what, zt_memplan *plan, int *forced, zt_status *st) {
    if (forced) *forced = 0;
    zt_memplan local;
    zt_memplan *p = plan ? plan : &local;
    ZT_TRY(zt_memplan_compute(cfg, o, p, st));
    /* the binding place (device on a GPU target) against limit; on a GPU
     * target the host place against o->host_limit too */
    const int over = limit && !fits(p->peak_bytes, limit);
    const int host_over = p->gpu && o->host_limit && p->peak[ZT_MP_HOST] > o->host_limit;
    if (!over && !host_over) return ZT_OK;
    if (cfg->force) {
        if (forced) *forced = 1;
        return ZT_OK;
    }
    const int pl = over ? (p->gpu ? ZT_MP_DEVICE : ZT_MP_HOST) : ZT_MP_HOST;
    const uint64_t lim_b = over ? limit : o->host_limit;
    const char *lw = over ? (limit_what ? limit_what : "ztrain.memory_limit")
                          : (o->host_limit_what ? o->host_limit_what : "host memory limit");
    char pk[32], lim[32], top[96], sug[640], first[160];
    zt_memplan_fmt_bytes((double)p->peak[pl], pk, sizeof pk);
    zt_memplan_fmt_bytes((double)lim_b, lim, sizeof lim);
    top_categories(p, pl, top, sizeof top);
    if (pl == ZT_MP_DEVICE && p->kernel_ws_bytes) {
        char kw[32];
        zt_memplan_fmt_bytes((double)p->kernel_ws_bytes, kw, sizeof kw);
        size_t l = strlen(top);
        snprintf(top + l, sizeof top - l, ", kernel workspace %s", kw);
    }
    int ns = zt_memplan_suggest(cfg, o, p, limit, sug, sizeof sug, first, sizeof first);
    const char *where = !p->gpu ? "memory" : over ? "device memory" : "host memory";
    if (ns > 0)
        return zt_fail(st, ZT_ENOMEM, "predicted peak %s %s per rank (%s; at %s) exceeds the "
                       "limit %s (%s); changes that fit: %s; or --force to start anyway",
                       where, pk, top, p->peak_phase[pl], lim, lw, sug);
    return zt_fail(st, ZT_ENOMEM, "predicted peak %s %s per rank (%s; at %s) exceeds the limit "
                   "%s (%s), and no change of stage, micro batch or activation checkpointing "
                   "fits; use more ranks or a smaller model, or --force to start anyway",
                   where, pk, top, p->peak_phase[pl], lim, lw);
}

/* A checkpointed run that fits: whether it fits the same limit without
 * checkpointing (`none`: no recompute at all), else, with `blocks`,
 * whether `blocks-attn` (the attention output and lse kept per layer, the
 * recompute skipping the attention) does, and what it costs.  A speed
 * hint, not a memory cure; `none` only against a known limit. */
int zt_memplan_speed_hint(const zt_config *cfg, const zt_memplan_opts *o, const zt_memplan *cur,
                          uint64_t limit, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    const int k = zt_config_act_ckpt_k(cfg), attn = zt_config_act_ckpt_attn(cfg);
    if (k < 1 || (limit && !fits(cur->peak_bytes, limit))) return 0;
    zt_config *fin = zt_config_dup(cfg);
    zt_status st;
    if (!fin || zt_config_finalize_plan(fin, o->world_size, &st) != ZT_OK) {
        zt_config_free(fin);
        return 0;
    }
    const int L = fin->model.n_layer;
    /* the block forwards the backward recomputes now (the last group kept) */
    const int R = zt_acts_ckpt_recomputed((int)zt_acts_ckpt_group(k, 1, (size_t)L), L, zt_ckptkeep_of());
    change c;
    memset(&c, 0, sizeof c);
    const char *none[] = {"activation_checkpointing.policy", "none", NULL};
    const char *battn[] = {"activation_checkpointing.policy", "blocks-attn", NULL};
    /* (blocks-attn: a plan that keeps nothing more, one layer say, gains nothing) */
    const int to_none = limit && R > 0 && try_change(fin, o, none, &c) && fits_ch(&c, limit, o);
    const int to_attn = !to_none && k == 1 && !attn && try_change(fin, o, battn, &c) &&
                        fits_ch(&c, limit, o) && c.peak > cur->peak_bytes;
    zt_config_free(fin);
    if (!to_none && !to_attn) return 0;
    char pk[32], d[32], lim[32], lw[48] = "";
    zt_memplan_fmt_bytes((double)c.peak, pk, sizeof pk);
    zt_memplan_fmt_bytes(fabs((double)c.peak - (double)cur->peak_bytes), d, sizeof d);
    zt_memplan_fmt_bytes((double)limit, lim, sizeof lim);
    if (limit) snprintf(lw, sizeof lw, "; limit %s", lim);
    const char sign = c.peak >= cur->peak_bytes ? '+' : '-';
    if (to_none)
        snprintf(buf, n, "--act-ckpt none fits too: predicted peak %s per rank (%c%s%s), and the "
                 "backward recomputes nothing (now %d block forward%s a micro batch%s)", pk, sign, d,
                 lw, R, R == 1 ? "" : "s", attn ? ", their attention skipped" : "");
    else
        snprintf(buf, n, "--act-ckpt blocks-attn %s: predicted peak %s per rank (%c%s%s), and the "
                 "backward's recompute skips the attention (%d attention forward%s fewer a micro "
                 "batch)", limit ? "fits too" : "would cost", pk, sign, d, lw, R, R == 1 ? "" : "s");
    return 1;
}

/* ------------------------------------------------------------ auto micro batch */

int zt_memplan_auto_micro(zt_config *cfg, const zt_memplan_opts *o, uint64_t limit,
                          double margin, char *why, size_t nwhy, zt_status *st) {
    if (nwhy) why[0] = '\0';
    if (cfg->micro_batch != ZT_MICRO_BATCH_AUTO) return ZT_OK;
    const int W = o->world_size;
    long long tbs = cfg->train_batch_size, ga = cfg->grad_accum;
    if (tbs <= 0)   /* no global batch to keep: zt_config_finalize gives ztrain's own
                     * default, exactly as when the key is absent */
        return ZT_OK;
    if (tbs % W)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=\"auto\": "
                       "train_batch_size=%lld is not divisible by the world size %d", tbs, W);
    if (limit == 0)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=\"auto\": no memory "
                       "limit is known; set ztrain.memory_limit");
    long long per = tbs / W;   /* samples per rank per step = micro * accum */
    double budget = (double)limit * (1.0 - margin);
    char lim[32], bud[32];
    zt_memplan_fmt_bytes((double)limit, lim, sizeof lim);
    zt_memplan_fmt_bytes(budget, bud, sizeof bud);
    uint64_t next_peak = 0;
    long long next_m = 0;
    for (long long m = per; m >= 1; --m) {
        if (per % m) continue;
        if (ga > 0 && m * ga != per) continue;   /* accumulation given: micro is fixed */
        zt_config *c = zt_config_dup(cfg);
        if (!c) return zt_fail(st, ZT_ENOMEM, "out of memory (auto micro batch)");
        c->micro_batch = (int)m;
        zt_memplan p;
        int rc = zt_memplan_compute(c, o, &p, st);
        zt_config_free(c);
        if (rc != ZT_OK) return zt_fail_prefix(st, "train_micro_batch_size_per_gpu=\"auto\"");
        if ((double)p.peak_bytes <= budget &&
            (!p.gpu || !o->host_limit ||
             (double)p.peak[ZT_MP_HOST] <= (double)o->host_limit * (1.0 - margin))) {
            cfg->micro_batch = (int)m;
            char pk[32], np[32];
            zt_memplan_fmt_bytes((double)p.peak_bytes, pk, sizeof pk);
            if (next_m) {
                zt_memplan_fmt_bytes((double)next_peak, np, sizeof np);
                snprintf(why, nwhy, "micro batch %lld x accumulation %lld x %d ranks = batch %lld: "
                         "predicted peak %s per rank fits %s (limit %s less a %.0f%% margin); "
                         "micro batch %lld would need %s", m, per / m, W, tbs, pk, bud, lim,
                         margin * 100, next_m, np);
            } else {
                snprintf(why, nwhy, "micro batch %lld x accumulation %lld x %d ranks = batch %lld: "
                         "predicted peak %s per rank fits %s (limit %s less a %.0f%% margin); "
                         "it is the largest micro batch the batch allows", m, per / m, W, tbs, pk,
                         bud, lim, margin * 100);
            }
            return ZT_OK;
        }
        next_peak = p.peak_bytes;
        next_m = m;
    }
    char np[32];
    zt_memplan_fmt_bytes((double)next_peak, np, sizeof np);
    if (ga > 0)
        return zt_fail(st, ZT_ENOMEM, "train_micro_batch_size_per_gpu=\"auto\": "
                       "train_batch_size=%lld with gradient_accumulation_steps=%lld on %d ranks "
                       "leaves only micro batch %lld, predicted to need %s per rank, more than %s "
                       "(limit %s less a %.0f%% margin); leave gradient_accumulation_steps unset "
                       "or \"auto\" so that accumulation can grow", tbs, ga, W, next_m, np, bud,
                       lim, margin * 100);
    return zt_fail(st, ZT_ENOMEM, "train_micro_batch_size_per_gpu=\"auto\": even micro batch 1 "
                   "is predicted to need %s per rank, more than %s (limit %s less a %.0f%% "
                   "margin); enable activation checkpointing or a higher ZeRO stage", np, bud,
                   lim, margin * 100);
}
