/* mesh.c -- the rank layout and its communicators (mesh.h). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "mesh.h"
#include "devmem.h"
#include "gpu.h"
#include "runtime.h"

const char *zt_mesh_axis_name(int axis) {
    static const char *const names[ZT_AX_N] = {"data", "sequence", "shard", "replica", "expert",
                                               "expert shard", "tensor"};
    return axis >= 0 && axis < ZT_AX_N ? names[axis] : "?";
}

int zt_mesh_shape_of(const zt_config *c, int world, int rank, int ranks_per_node,
                     zt_mesh_shape *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    const int W = world > 0 ? world : 1;
    out->world = W;
    out->rank = rank;
    for (int a = 0; a < ZT_AX_N; ++a) out->size[a] = 1;
    const int sp = c->model.seq_parallel > 1 ? c->model.seq_parallel : 1;
    const int G = c->zero_stage == 0 ? W : zt_config_shard_group(c, W, ranks_per_node);
    if (G < 1 || G > W || W % G) {
        if (c->shard_group_size == ZT_SHARD_GROUP_NODE)
            return zt_fail(st, ZT_EINVAL, "zero_optimization.shard_group_size=\"node\" (%d ranks per "
                           "node) must divide the world size %d", G, W);
        return zt_fail(st, ZT_EINVAL, "zero_optimization.shard_group_size=%d must divide the "
                       "world size %d", c->shard_group_size, W);
    }
    const int ep = c->model.expert_parallel > 1 ? c->model.expert_parallel : 1;
    if (W % ep || (c->zero_stage > 0 && G % ep))
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d must divide the %s (%d ranks)", ep,
                       W % ep ? "number of ranks" : "ZeRO shard group", W % ep ? W : G);
    out->size[ZT_AX_EP] = ep;
    out->coord[ZT_AX_EP] = rank % ep;
    if (ep > 1) {   /* (ep divides G: the shard group's ranks with this ep coordinate) */
        out->size[ZT_AX_ESHARD] = G / ep;
        out->coord[ZT_AX_ESHARD] = rank % G / ep;
    }
    out->size[ZT_AX_SP] = sp;
    out->size[ZT_AX_DP] = W / sp;
    out->size[ZT_AX_SHARD] = G;
    out->size[ZT_AX_REPLICA] = W / G;
    out->coord[ZT_AX_SP] = rank % sp;
    out->coord[ZT_AX_DP] = rank / sp;
    out->coord[ZT_AX_SHARD] = rank % G;
    out->coord[ZT_AX_REPLICA] = rank / G;
    return ZT_OK;
}

int zt_mesh_ranks_on_device(int device) {
    if (device < 0) return 1;
    if (zt_rt_gpu_bound()) return 1;
    const int nd = zt_cuda_visible_devices(), nl = zt_rt()->local_size;
    return nd > 0 && nl > nd ? (nl + nd - 1) / nd : 1;
}

int zt_mesh_check_topology(const zt_config *c, zt_status *st) {
    if (c->shard_group_size == ZT_SHARD_GROUP_NODE && zt_rt_node_block() == 0) {
        char topo[1024];
        zt_rt_topology(topo, sizeof topo);
        return zt_fail(st, ZT_EINVAL, "zero_optimization.shard_group_size=\"node\" needs the same number "
                       "of consecutive ranks on every node (block placement: srun's default "
                       "distribution, mpirun --map-by slot); here: %s", topo);
    }
    return ZT_OK;
}

int zt_mesh_world_group(double timeout_s, zt_group **out, zt_status *st) {
    return zt_group_mpi(zt_rt()->world_comm, "world", timeout_s, out, st);
}

/* ztrain.comm_backend: how collectives move device buffers.  The same answer
 * on every rank (agreed over the world). */
static int choose_comm(zt_mesh *m, const zt_config *c, zt_status *st) {
    m->comm_kind = ZT_MESH_COMM_STAGED;
    const char *cb = c->comm_backend;
    const int cuda = m->device >= 0;
#ifdef ZT_HAVE_NCCL
    const int built = 1;
#else
    const int built = 0;
#endif
    if (strcmp(cb, "nccl") == 0 && !cuda)
        return zt_fail(st, ZT_EINVAL, "ztrain.comm_backend=nccl needs ztrain.backend=cuda "
                       "(backend is %s)", c->backend);
    if (strcmp(cb, "nccl") == 0 && !built)
        return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.comm_backend=nccl: this build has no NCCL "
                       "(configure --with-cuda with NCCL installed); use mpi");
    if (!cuda || strcmp(cb, "mpi") == 0) return ZT_OK;
    /* one rank per GPU: bound by the plugin (each task sees its own GPUs),
     * or no more ranks on this node than visible devices */
    const int bound = zt_rt_gpu_bound();
    int32_t own = bound || zt_rt()->local_size <= zt_cuda_visible_devices();
    if (m->world->size > 1) {
        zt_group_where(m->world, "choosing the communication backend");
        int32_t any_shared = !own;
        ZT_TRY(m->world->ops->allreduce_max(m->world, &any_shared, 1, ZT_I32, st));
        own = !any_shared;
    }
    if (strcmp(cb, "nccl") == 0) {
        if (!own)
            return zt_fail(st, ZT_EINVAL, "ztrain.comm_backend=nccl needs one GPU per rank, but "
                           "%d ranks on a node share %d visible GPU(s); use "
                           "ztrain.comm_backend=mpi", zt_rt()->local_size,
                           zt_cuda_visible_devices());
        m->comm_kind = ZT_MESH_COMM_NCCL;
    } else if (built && own) {   /* auto */
        m->comm_kind = ZT_MESH_COMM_NCCL;
    }
    return ZT_OK;
}

/* The twin of mpi for device buffers (NULL stays NULL): mpi itself on a
 * host-memory backend, else host-staged MPI or NCCL. */
static int dev_group(const zt_mesh *m, zt_group *mpi, const char *name, zt_group **out,
                     zt_status *st) {
    *out = mpi;
    if (!mpi || !m->dev) return ZT_OK;
#ifdef ZT_HAVE_NCCL
    if (m->comm_kind == ZT_MESH_COMM_NCCL) return zt_group_nccl(mpi, name, m->device, out, st);
#endif
    if (m->comm_kind != ZT_MESH_COMM_STAGED)
        return zt_fail(st, ZT_EUNSUPPORTED, "NCCL communication requested but this build has no "
                       "NCCL (configure --with-cuda with NCCL installed)");
    return zt_group_host_staged(mpi, name, m->be, out, st);
}

/* Axis a's group: ranks with the same coordinates on every other axis of
 * the pair (a, other), ordered by a's coordinate; and its device twin. */
static int axis_group(zt_mesh *m, int a, int other, zt_status *st) {
    const zt_mesh_shape *s = &m->shape;
    ZT_TRY(zt_group_split(m->world, s->coord[other], s->coord[a], zt_mesh_axis_name(a), &m->g[a], st));
    return ZT_OK;
}

/* The groups: shard (the world itself when G = W), replica (R > 1), the
 * world's device twin, the shard's and replica's twins, then sequence
 * (sp > 1) and its twin, then expert (ep > 1) and its twin, then expert
 * shard (ep > 1, of more than one rank) and its twin -- the order in which ranks create them. */
static int build_groups(zt_mesh *m, int seq, zt_status *st) {
    const zt_mesh_shape *s = &m->shape;
    if (!m->world) return ZT_OK;
    if (s->size[ZT_AX_SHARD] == s->world) m->g[ZT_AX_SHARD] = m->world;
    else ZT_TRY(axis_group(m, ZT_AX_SHARD, ZT_AX_REPLICA, st));
    if (s->size[ZT_AX_REPLICA] > 1) ZT_TRY(axis_group(m, ZT_AX_REPLICA, ZT_AX_SHARD, st));
    ZT_TRY(dev_group(m, m->world, "world", &m->dworld, st));
    if (m->g[ZT_AX_SHARD] == m->world) m->dg[ZT_AX_SHARD] = m->dworld;
    else ZT_TRY(dev_group(m, m->g[ZT_AX_SHARD], "shard", &m->dg[ZT_AX_SHARD], st));
    ZT_TRY(dev_group(m, m->g[ZT_AX_REPLICA], "replica", &m->dg[ZT_AX_REPLICA], st));
    if (seq && s->size[ZT_AX_SP] > 1) {
        ZT_TRY(axis_group(m, ZT_AX_SP, ZT_AX_DP, st));
        ZT_TRY(dev_group(m, m->g[ZT_AX_SP], "sequence", &m->dg[ZT_AX_SP], st));
    }
    if (seq && s->size[ZT_AX_EP] > 1) {   /* P consecutive ranks: color rank / P */
        ZT_TRY(zt_group_split(m->world, s->rank / s->size[ZT_AX_EP], s->coord[ZT_AX_EP],
                              zt_mesh_axis_name(ZT_AX_EP), &m->g[ZT_AX_EP], st));
        ZT_TRY(dev_group(m, m->g[ZT_AX_EP], "expert", &m->dg[ZT_AX_EP], st));
        /* the shard group's ranks with this ep coordinate: color (replica, ep
         * coordinate), ordered by the expert shard coordinate (none of one
         * rank: nothing to gather or reduce over) */
        const int ep = s->size[ZT_AX_EP];
        if (s->size[ZT_AX_ESHARD] > 1) {
            ZT_TRY(zt_group_split(m->world, s->coord[ZT_AX_REPLICA] * ep + s->coord[ZT_AX_EP],
                                  s->coord[ZT_AX_ESHARD], zt_mesh_axis_name(ZT_AX_ESHARD),
                                  &m->g[ZT_AX_ESHARD], st));
            ZT_TRY(dev_group(m, m->g[ZT_AX_ESHARD], "expert shard", &m->dg[ZT_AX_ESHARD], st));
        }
    }
    return ZT_OK;
}

int zt_mesh_create(const zt_config *c, const zt_backend *be, int device, zt_mesh **out,
                   zt_status *st) {
    *out = NULL;
    zt_mesh *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (mesh)");
    m->be = be;
    m->device = device;
    m->dev = zt_be_device(be);
    m->own_world = 1;
    int rc = zt_group_mpi(zt_rt()->world_comm, "world", c->comm_timeout_s, &m->world, st);
    if (rc == ZT_OK)
        rc = zt_mesh_shape_of(c, m->world->size, m->world->rank, zt_rt()->local_size, &m->shape, st);
    if (rc == ZT_OK) rc = choose_comm(m, c, st);
    if (rc == ZT_OK) rc = build_groups(m, 1, st);
    if (rc != ZT_OK) {
        zt_mesh_free(m);
        return rc;
    }
    *out = m;
    return ZT_OK;
}

int zt_mesh_over(zt_group *world, int stage, int G, const zt_backend *be, int comm_kind,
                 int device, zt_mesh **out, zt_status *st) {
    *out = NULL;
    const int W = world ? world->size : 1, r = world ? world->rank : 0;
    if (stage == 0) G = W;
    if (G < 1 || G > W || W % G)
        return zt_fail(st, ZT_EINVAL, "zero_optimization.shard_group_size=%d must divide the world size %d", G, W);
    zt_mesh *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (mesh)");
    m->be = be;
    m->device = device;
    m->comm_kind = comm_kind;
    m->dev = zt_be_device(be);
    m->world = world;
    zt_mesh_shape *s = &m->shape;
    s->world = W;
    s->rank = r;
    for (int a = 0; a < ZT_AX_N; ++a) s->size[a] = 1;
    s->size[ZT_AX_DP] = W;
    s->coord[ZT_AX_DP] = r;
    s->size[ZT_AX_SHARD] = G;
    s->size[ZT_AX_REPLICA] = W / G;
    s->coord[ZT_AX_SHARD] = r % G;
    s->coord[ZT_AX_REPLICA] = r / G;
    int rc = build_groups(m, 0, st);
    if (rc != ZT_OK) {
        zt_mesh_free(m);
        return rc;
    }
    *out = m;
    return ZT_OK;
}

void zt_mesh_free(zt_mesh *m) {
    if (!m) return;
    for (int a = 0; a < ZT_AX_N; ++a) {
        if (m->dg[a] && m->dg[a] != m->g[a] && m->dg[a] != m->dworld) zt_group_free(m->dg[a]);
        if (m->g[a] && m->g[a] != m->world) zt_group_free(m->g[a]);
    }
    if (m->dworld && m->dworld != m->world) zt_group_free(m->dworld);
    if (m->own_world) zt_group_free(m->world);
    free(m);
}

/* the distinct device groups with a fence, into out[]; how many */
static int fenced_groups(const zt_mesh *m, zt_group **out) {
    int n = 0;
    if (!m) return 0;
    zt_group *all[1 + ZT_AX_N] = {m->dworld};
    for (int a = 0; a < ZT_AX_N; ++a) all[1 + a] = m->dg[a];
    for (int i = 0; i < 1 + ZT_AX_N; ++i) {
        zt_group *g = all[i];
        int dup = !g || !g->ops->fence;
        for (int j = 0; j < n && !dup; ++j) dup = out[j] == g;
        if (!dup) out[n++] = g;
    }
    return n;
}

int zt_mesh_has_fence(const zt_mesh *m) {
    zt_group *g[1 + ZT_AX_N];
    return fenced_groups(m, g) > 0;
}

int zt_mesh_fence(const zt_mesh *m, zt_status *st) {
    zt_group *g[1 + ZT_AX_N];
    const int n = fenced_groups(m, g);
    for (int i = 0; i < n; ++i) ZT_TRY(g[i]->ops->fence(g[i], st));
    return ZT_OK;
}

int zt_mesh_copy_wait(const zt_mesh *m, const zt_backend *be, void *h, zt_status *st) {
    if (!h) return ZT_OK;
    zt_group *g[1 + ZT_AX_N];
    const int n = be->copy_done ? fenced_groups(m, g) : 0;
    int rc = ZT_OK;
    if (n > 0) {
        const double t0 = zt_now_s();
        for (unsigned spins = 0;; spins++) {
            const int done = be->copy_done(h);
            /* the groups' checks every 64 polls, and once the copy is done
             * (a collective that failed before it is reported) */
            if (done || (spins & 63) == 63)
                for (int i = 0; i < n && rc == ZT_OK; ++i)
                    if (g[i]->ops->poll) rc = g[i]->ops->poll(g[i], t0, st);
            if (done || rc != ZT_OK) break;
            if (spins >= 256) sched_yield();
        }
    }
    be->copy_wait(h);   /* (after a failure too: the handle is released, the aborted
                         * communicator lets the copy finish) */
    return rc;
}

uint64_t zt_mesh_comm_bytes(const zt_mesh *m, int kind) {
    if (!m || kind < 0 || kind >= ZT_COMM_NKINDS) return 0;
    const zt_group *seen[2 + 2 * ZT_AX_N];
    int n = 0;
    const zt_group *all[2 + 2 * ZT_AX_N] = {m->world, m->dworld};
    for (int a = 0; a < ZT_AX_N; ++a) {
        all[2 + 2 * a] = m->g[a];
        all[3 + 2 * a] = m->dg[a];
    }
    uint64_t b = 0;
    for (int i = 0; i < 2 + 2 * ZT_AX_N; ++i) {
        const zt_group *g = all[i];
        int dup = !g;
        for (int j = 0; j < n && !dup; ++j) dup = seen[j] == g;
        if (dup) continue;
        seen[n++] = g;
        b += g->bytes[kind];
    }
    return b;
}
