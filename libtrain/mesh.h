/*
 * mesh.h -- the rank layout: one mesh built once from the configuration.
 *
 * The world's W ranks are laid out on named axes:
 *   sp       sequence parallelism (seqpar.h): groups of sp consecutive ranks
 *            share their samples, coordinate rank % sp;
 *   dp       data parallelism: dp = W / sp groups, coordinate rank / sp
 *            (which samples a rank reads);
 *   shard    ZeRO's shard group (shard.h): G consecutive ranks, coordinate
 *            rank % G (G = W at stage 0);
 *   replica  the R = W / G replicas of each shard, coordinate rank / G
 *            (hybrid sharding);
 *   ep       expert parallelism (moe.h): groups of ep consecutive ranks split
 *            every MoE block's experts, coordinate rank % ep;
 *   eshard   the expert shard group (ep > 1, else size 1): the G / ep ranks of
 *            this rank's shard group with its ep coordinate (so they hold the
 *            same experts), coordinate (rank % G) / ep; at stage 0 (G = W)
 *            the expert-data-parallel group, ranks with the same ep coordinate;
 *   tp       tensor parallelism: size 1 for now (room for it).
 * The shape (sizes and coordinates) is a pure function of the configuration,
 * the world size and the rank (zt_mesh_shape_of), which the memory planner
 * reads too.  The mesh adds one communicator per axis that something uses
 * (shard, replica, sequence, expert, expert shard) and the world, each with its device twin: the
 * group that moves device buffers (NCCL or MPI staged through host memory
 * on a device backend, the MPI group itself otherwise).
 *
 * Only this file asks the comm backends for groups (zt_group_mpi, _split,
 * _nccl, _host_staged); tests/arrows.sh checks it.  docs/units.md "Adding a
 * parallelism" says what a new axis touches.
 */
#ifndef ZT_MESH_H
#define ZT_MESH_H
#include "backend.h"
#include "comm.h"
#include "config.h"

typedef enum zt_mesh_axis {
    ZT_AX_DP = 0, ZT_AX_SP, ZT_AX_SHARD, ZT_AX_REPLICA, ZT_AX_EP, ZT_AX_ESHARD, ZT_AX_TP, ZT_AX_N
} zt_mesh_axis;
const char *zt_mesh_axis_name(int axis);

typedef struct zt_mesh_shape {
    int world, rank;
    int size[ZT_AX_N];         /* every axis >= 1 */
    int coord[ZT_AX_N];        /* this rank's place on each, 0 .. size - 1 */
} zt_mesh_shape;

/* The sizes and this rank's coordinates for a configuration on `world`
 * ranks with ranks_per_node ranks per node (shard_group_size "node").
 * Fails when the shard group does not divide the world. */
int zt_mesh_shape_of(const zt_config *c, int world, int rank, int ranks_per_node,
                     zt_mesh_shape *out, zt_status *st);

/* How collectives move device buffers (ztrain.comm_backend). */
enum { ZT_MESH_COMM_STAGED = 0, ZT_MESH_COMM_NCCL = 1 };

typedef struct zt_mesh {
    zt_mesh_shape shape;
    const zt_backend *be;
    int device;                /* cuda: this rank's device, else -1 */
    int comm_kind;             /* ZT_MESH_COMM_*: collectives on device buffers */
    int dev;                   /* the backend's memory is not host memory */
    zt_group *world, *dworld;  /* all ranks (NULL: one process without communication) */
    /* per axis: the MPI group and its device twin; NULL where nothing uses
     * the axis' group (dp, tp; replica with R = 1; sequence with sp = 1;
     * expert and expert shard with ep = 1; expert shard of one rank);
     * shard with G = W is the world itself */
    zt_group *g[ZT_AX_N], *dg[ZT_AX_N];
    int own_world;             /* world was made here (freed with the mesh) */
} zt_mesh;

/* Ranks sharing this rank's device (device: cuda's ordinal, -1: none): 1
 * when the plugin bound each task to its own GPU (or on cpu-strict, whose
 * emulated device is per process); else the node's ranks over its visible
 * devices, rounded up. */
int zt_mesh_ranks_on_device(int device);
/* shard_group_size "node": groups of consecutive ranks must be nodes. */
int zt_mesh_check_topology(const zt_config *c, zt_status *st);
/* A world group for a start-up agreement before the mesh exists (the
 * configuration, the auto micro batch); free with zt_group_free. */
int zt_mesh_world_group(double timeout_s, zt_group **out, zt_status *st);

/* The mesh of a training context: the world group, the communication
 * backend (the same answer on every rank, agreed over the world: "nccl",
 * "mpi" or "auto"), and the axis groups.  Collective over the world. */
int zt_mesh_create(const zt_config *c, const zt_backend *be, int device, zt_mesh **out,
                   zt_status *st);
/* A mesh over an existing world group (borrowed; NULL: one process) with
 * shard groups of G ranks at ZeRO stage `stage` (shard.h's zt_shard_create_ex):
 * comm_kind and device as in zt_mesh. */
int zt_mesh_over(zt_group *world, int stage, int G, const zt_backend *be, int comm_kind,
                 int device, zt_mesh **out, zt_status *st);
void zt_mesh_free(zt_mesh *m);

/* Bytes this rank sent of one kind over the mesh's groups (each once). */
uint64_t zt_mesh_comm_bytes(const zt_mesh *m, int kind);
/* The host's bounded check of the device groups' collectives waited for on
 * the stream only (comm.h fence; NCCL): each group once.  1 when some group
 * has a fence (the caller's next host read should come after it). */
int zt_mesh_fence(const zt_mesh *m, zt_status *st);
int zt_mesh_has_fence(const zt_mesh *m);
/* Wait for the asynchronous copy h of backend be (be->copy_wait, which
 * releases h; NULL: nothing) with the fence's bound: while the copy has not
 * completed (be->copy_done), the groups with a fence are polled (comm.h
 * poll), so a hung or failed collective queued before the copy is reported
 * by name, its communicator aborted, instead of the wait hanging.  No fence
 * before it (the host does not wait for what was queued after the copy).
 * Without fenced groups, or without copy_done: be->copy_wait alone. */
int zt_mesh_copy_wait(const zt_mesh *m, const zt_backend *be, void *h, zt_status *st);

static inline int zt_mesh_size(const zt_mesh *m, int axis) { return m->shape.size[axis]; }
static inline int zt_mesh_coord(const zt_mesh *m, int axis) { return m->shape.coord[axis]; }

#endif
