/*
 * nccl.cc -- the CUDA simulator's NCCL subset (nccl.h) over MPI
 * (tests/cudasim/README, "NCCL").
 *
 * Communicators: ncclGetUniqueId makes a random id (with the host and the
 * pid); ncclCommInitRank learns the MPI_COMM_WORLD ranks of the members
 * through files in a directory named from the id (${TMPDIR:-/tmp}, so
 * one node only), with no collective over MPI_COMM_WORLD, and then creates
 * an MPI communicator of exactly the members (MPI_Comm_create_group, NCCL
 * rank = its rank).  Two ranks on the same device of a node are refused
 * (ncclInvalidUsage), as NCCL does.
 *
 * Collectives: the call checks its arguments (ncclInvalidArgument: null or
 * non-device buffers (of this process, for their whole extent), datatype,
 * op, root; ncclInvalidUsage: a call on a communicator that failed) and
 * queues the operation on its stream; it runs when the host synchronizes
 * (or polls an event) like every other stream operation.  Running, every
 * member first exchanges the operation's description (kind, count,
 * datatype, op, root, sequence number): any difference is an asynchronous
 * ncclInvalidUsage on every member (ncclCommGetAsyncError) and a failure of
 * the stream (cudaErrorLaunchFailure), and no data moves; otherwise the
 * data moves with non-blocking MPI (bytes) and reductions are computed
 * here, in rank order 0, 1, ..., n-1, each step rounded to the datatype
 * (bf16 / fp16: computed in fp32 and rounded to nearest even, which is the
 * correctly rounded result since fp32 has more than 2p+2 bits).  Every
 * member computes the same result.  An operation whose peers do not take
 * part within ZT_CUDASIM_NCCL_TIMEOUT_S seconds (default 60) is an
 * asynchronous ncclRemoteError.
 *
 * Groups: between ncclGroupStart and the outermost ncclGroupEnd the calls
 * are checked and kept; ncclGroupEnd queues them in call order, or none
 * when one of them failed its checks (that error is returned).
 *
 * Point to point (ncclSend, ncclRecv): checked like the collectives (peer
 * in 0..n-1, the buffer inside one device allocation); not part of the
 * collectives' agreed sequence.  Consecutive send/recv calls of a group
 * (all on one communicator and stream) run as one stream operation that
 * posts every receive and send (non-blocking MPI, one tag, so a pair's
 * messages match in call order) and waits for all of them, bounded by the
 * timeout, so a group's exchanges progress together as NCCL's do; a count
 * that differs between a send and its receive is an asynchronous
 * ncclInvalidUsage.  A call outside a group is such an operation alone.
 */
#include <mpi.h>

#include "nccl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

/* cudasim.cc (zt_sim_enqueue and zt_sim_async_fail: cuda_runtime.h) */
bool zt_sim_is_device(const void *p, size_t bytes);

/* ------------------------------------------------------------ errors */

static std::string g_last;   /* ncclGetLastError (NCCL keeps one per process too) */

static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_last = buf;
    fprintf(stderr, "cudasim: NCCL: %s\n", buf);
    return r;
}

extern "C" const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

extern "C" const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return g_last.c_str();
}

static double now_s(void) {
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}
static double timeout_s(void) {
    const char *s = getenv("ZT_CUDASIM_NCCL_TIMEOUT_S");
    return s && *s && atof(s) > 0 ? atof(s) : 60.0;
}

/* ------------------------------------------------------------ communicators */

struct sim_comm {
    MPI_Comm mc = MPI_COMM_NULL;
    int rank = 0, size = 0, dev = 0;
    bool gone = false;                     /* destroyed or aborted: queued work is dropped */
    ncclResult_t async = ncclSuccess;      /* the first asynchronous error */
    std::string async_msg;
    uint64_t seq = 0;                      /* operations run so far (all members agree) */
    unsigned queued = 0;                   /* queued, not yet run */
};
struct ncclComm {
    std::shared_ptr<sim_comm> c;
};

struct sim_id {   /* the layout inside ncclUniqueId.internal */
    char magic[16];
    unsigned char rnd[16];
    int32_t pid;
    char host[64];
};
static_assert(sizeof(sim_id) <= NCCL_UNIQUE_ID_BYTES, "ncclUniqueId too small");
static const char ID_MAGIC[16] = "ztsim-nccl-id";

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    sim_id s;
    memset(&s, 0, sizeof s);
    memcpy(s.magic, ID_MAGIC, sizeof s.magic);
    const int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, s.rnd, sizeof s.rnd) != (ssize_t)sizeof s.rnd) {
        if (fd >= 0) close(fd);
        return fail(ncclSystemError, "ncclGetUniqueId: cannot read /dev/urandom");
    }
    close(fd);
    s.pid = (int32_t)getpid();
    gethostname(s.host, sizeof s.host - 1);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &s, sizeof s);
    return ncclSuccess;
}

static std::string rdv_dir(const sim_id &s) {
    const char *t = getenv("TMPDIR");
    std::string d = std::string(t && *t ? t : "/tmp") + "/ztsim-nccl-";
    char h[3];
    for (unsigned char b : s.rnd) {
        snprintf(h, sizeof h, "%02x", b);
        d += h;
    }
    return d + "-" + std::to_string(s.pid);
}

/* one member's entry in the rendezvous directory */
struct member {
    int world = -1, dev = -1;
    long pid = 0;
    char host[64] = {0};
};

static bool read_member(const std::string &path, member *m) {
    FILE *f = fopen(path.c_str(), "r");
    if (!f) return false;
    const bool ok = fscanf(f, "%d %d %ld %63s", &m->world, &m->dev, &m->pid, m->host) == 4;
    fclose(f);
    return ok;
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (!comm) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
    *comm = nullptr;
    if (nranks < 1) return fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d < 1", nranks);
    if (rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d outside 0..%d", rank, nranks - 1);
    sim_id s;
    memcpy(&s, id.internal, sizeof s);
    if (memcmp(s.magic, ID_MAGIC, sizeof s.magic))
        return fail(ncclInvalidArgument, "ncclCommInitRank: the id was not made by ncclGetUniqueId");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) return fail(ncclSystemError, "ncclCommInitRank: the simulator's NCCL runs over MPI: MPI_Init first");
    int dev = 0, world = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return fail(ncclUnhandledCudaError, "ncclCommInitRank: cudaGetDevice failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    for (char *p = host; *p; p++)
        if (*p == ' ') *p = '_';

    /* the rendezvous: my entry, made whole by a rename, then everyone's */
    const std::string dir = rdv_dir(s);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return fail(ncclSystemError, "ncclCommInitRank: mkdir %s: %s", dir.c_str(), strerror(errno));
    const std::string mine = dir + "/" + std::to_string(rank),
                      tmp = dir + "/.tmp-" + std::to_string(getpid());
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f) return fail(ncclSystemError, "ncclCommInitRank: cannot write %s: %s", tmp.c_str(), strerror(errno));
    fprintf(f, "%d %d %ld %s\n", world, dev, (long)getpid(), host);
    fclose(f);
    if (link(tmp.c_str(), mine.c_str()) != 0) {
        const int err = errno;
        unlink(tmp.c_str());
        if (err == EEXIST)
            return fail(ncclInvalidUsage, "ncclCommInitRank: rank %d of this id was initialized twice", rank);
        return fail(ncclSystemError, "ncclCommInitRank: link %s: %s", mine.c_str(), strerror(err));
    }
    unlink(tmp.c_str());
    auto leave = [&]() {
        unlink(mine.c_str());
        rmdir(dir.c_str());   /* the last member's succeeds */
    };
    std::vector<member> m((size_t)nranks);
    const double t0 = now_s(), tmo = timeout_s();
    for (int r = 0; r < nranks;) {
        if (read_member(dir + "/" + std::to_string(r), &m[(size_t)r])) {
            r++;
            continue;
        }
        if (now_s() - t0 > tmo) {
            leave();
            return fail(ncclSystemError, "ncclCommInitRank: rank %d of %d did not join within %.0f s "
                        "(ZT_CUDASIM_NCCL_TIMEOUT_S; the simulator's rendezvous is one node's %s)",
                        r, nranks, tmo, dir.c_str());
        }
        usleep(1000);
    }
    /* what every member sees alike (the same entries): decided after the
     * communicator exists, since an entry may go only once every member
     * has read it */
    char why[512] = "";
    ncclResult_t bad = ncclSuccess;
    for (int r = 0; r < nranks && !bad; r++) {
        if (strcmp(m[(size_t)r].host, host) != 0) {
            bad = ncclInvalidUsage;
            snprintf(why, sizeof why, "ncclCommInitRank: rank %d is on host %s, not %s: the simulator's NCCL "
                     "is one node only", r, m[(size_t)r].host, host);
        }
        for (int q = 0; q < r && !bad; q++) {
            if (m[(size_t)q].world == m[(size_t)r].world) {   /* MPI_Group_incl would be erroneous */
                leave();
                return fail(ncclInvalidUsage, "ncclCommInitRank: ranks %d and %d are the same process "
                            "(world rank %d)", q, r, m[(size_t)r].world);
            }
            if (m[(size_t)q].dev == m[(size_t)r].dev) {
                bad = ncclInvalidUsage;
                snprintf(why, sizeof why, "ncclCommInitRank: duplicate GPU: ranks %d and %d are both on CUDA "
                         "device %d of %s", q, r, m[(size_t)r].dev, host);
            }
        }
    }

    /* an MPI communicator of exactly the members, in NCCL rank order */
    std::vector<int> w((size_t)nranks);
    for (int r = 0; r < nranks; r++) w[(size_t)r] = m[(size_t)r].world;
    MPI_Group wg, g;
    MPI_Comm mc = MPI_COMM_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, nranks, w.data(), &g);
    unsigned tag = 0;
    for (unsigned char b : s.rnd) tag = tag * 31u + b;
    const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, g, (int)(tag % 32767u), &mc);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    leave();   /* every member has read every entry: they all entered MPI_Comm_create_group */
    if (rc != MPI_SUCCESS || mc == MPI_COMM_NULL)
        return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group failed");
    if (bad) {
        MPI_Comm_free(&mc);
        return fail(bad, "%s", why);
    }
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    int mr = -1;
    MPI_Comm_rank(mc, &mr);
    if (mr != rank) {
        MPI_Comm_free(&mc);
        return fail(ncclInternalError, "ncclCommInitRank: MPI rank %d for NCCL rank %d", mr, rank);
    }
    ncclComm *nc = new ncclComm;
    nc->c = std::make_shared<sim_comm>();
    nc->c->mc = mc;
    nc->c->rank = rank;
    nc->c->size = nranks;
    nc->c->dev = dev;
    *comm = nc;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
    if (!comm || !async_error) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
    *async_error = comm->c->async;
    return ncclSuccess;
}

/* Destroy: operations already queued complete first (they are stream
 * work: the device synchronizes); then the MPI communicator goes. */
extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
    std::shared_ptr<sim_comm> c = comm->c;
    if (c->queued) cudaDeviceSynchronize();
    c->gone = true;
    if (c->mc != MPI_COMM_NULL) MPI_Comm_free(&c->mc);
    delete comm;
    return ncclSuccess;
}

/* Abort: never waits.  Queued operations are dropped; a member still
 * waiting for this one in an operation fails after its timeout.  The MPI
 * communicator is not freed: a peer's message of an operation that never
 * completed may still arrive for it, and a freed communicator's context
 * would be reused by a later one (Open MPI then crashes). */
extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;   /* NCCL: aborting NULL is a no-op */
    comm->c->gone = true;
    delete comm;
    return ncclSuccess;
}

/* ------------------------------------------------------------ datatypes */

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}
static const char *type_name(int t) {
    static const char *n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                              "float64", "bfloat16"};
    return t >= 0 && t < 10 ? n[t] : "?";
}
static const char *op_name(int o) {
    static const char *n[] = {"sum", "prod", "max", "min"};
    return o >= 0 && o < 4 ? n[o] : "?";
}

/* bf16 / fp16 <-> fp32, round to nearest even, NaN kept quiet */
static float bf16_to_f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t f_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float f16_to_f(uint16_t h) {
    const uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u;
    float f;
    if (e == 31) {
        const uint32_t u = s | 0x7f800000u | (m << 13);
        memcpy(&f, &u, 4);
        return f;
    }
    f = e ? ldexpf((float)(m | 1024u), (int)e - 25) : ldexpf((float)m, -24);
    return s ? -f : f;
}
static uint16_t f_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
    const float a = fabsf(f);
    if (a != a) return (uint16_t)(s | 0x7e00u);
    if (a >= 65520.0f) return (uint16_t)(s | 0x7c00u);   /* rounds to infinity */
    if (a < 6.103515625e-05f) {                          /* subnormal: multiples of 2^-24 */
        const float q = a * 16777216.0f;                 /* exact */
        return (uint16_t)(s | (uint16_t)nearbyintf(q));  /* ties to even (default mode) */
    }
    int e;
    const float fr = frexpf(a, &e);                      /* a = fr * 2^e, fr in [0.5, 1) */
    float mant = nearbyintf(ldexpf(fr, 11));             /* 11 significant bits, ties to even */
    if (mant >= 2048.0f) {
        mant /= 2.0f;
        e++;
    }
    if (e - 1 + 15 >= 31) return (uint16_t)(s | 0x7c00u);
    return (uint16_t)(s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((unsigned)mant - 1024u));
}

template <class T> static T combine(int op, T a, T b) {
    switch (op) {
    case ncclSum: return (T)(a + b);
    case ncclProd: return (T)(a * b);
    case ncclMax: return a != a ? a : b != b ? b : a < b ? b : a;
    default: return a != a ? a : b != b ? b : b < a ? b : a;
    }
}
/* integer sums and products wrap (as on the device) */
template <class T, class U> static T combine_int(int op, T a, T b) {
    switch (op) {
    case ncclSum: return (T)((U)a + (U)b);
    case ncclProd: return (T)((U)a * (U)b);
    case ncclMax: return a < b ? b : a;
    default: return b < a ? b : a;
    }
}

/* dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i], left to right:
 * src holds n contributions of count elements each, one after another */
template <class T, class F> static void reduce_t(void *dst, const unsigned char *src, int n, size_t count, F f) {
    for (size_t i = 0; i < count; i++) {
        T acc;
        memcpy(&acc, src + i * sizeof(T), sizeof(T));
        for (int q = 1; q < n; q++) {
            T v;
            memcpy(&v, src + ((size_t)q * count + i) * sizeof(T), sizeof(T));
            acc = f(acc, v);
        }
        memcpy((unsigned char *)dst + i * sizeof(T), &acc, sizeof(T));
    }
}
static void reduce(void *dst, const unsigned char *src, int n, size_t count, ncclDataType_t t, int op) {
    switch (t) {
    case ncclInt8: reduce_t<int8_t>(dst, src, n, count, [op](int8_t a, int8_t b) { return combine_int<int8_t, uint8_t>(op, a, b); }); break;
    case ncclUint8: reduce_t<uint8_t>(dst, src, n, count, [op](uint8_t a, uint8_t b) { return combine_int<uint8_t, uint8_t>(op, a, b); }); break;
    case ncclInt32: reduce_t<int32_t>(dst, src, n, count, [op](int32_t a, int32_t b) { return combine_int<int32_t, uint32_t>(op, a, b); }); break;
    case ncclUint32: reduce_t<uint32_t>(dst, src, n, count, [op](uint32_t a, uint32_t b) { return combine_int<uint32_t, uint32_t>(op, a, b); }); break;
    case ncclInt64: reduce_t<int64_t>(dst, src, n, count, [op](int64_t a, int64_t b) { return combine_int<int64_t, uint64_t>(op, a, b); }); break;
    case ncclUint64: reduce_t<uint64_t>(dst, src, n, count, [op](uint64_t a, uint64_t b) { return combine_int<uint64_t, uint64_t>(op, a, b); }); break;
    case ncclFloat32: reduce_t<float>(dst, src, n, count, [op](float a, float b) { return combine<float>(op, a, b); }); break;
    case ncclFloat64: reduce_t<double>(dst, src, n, count, [op](double a, double b) { return combine<double>(op, a, b); }); break;
    case ncclBfloat16:
        reduce_t<uint16_t>(dst, src, n, count, [op](uint16_t a, uint16_t b) {
            return f_to_bf16(combine<float>(op, bf16_to_f(a), bf16_to_f(b)));
        });
        break;
    case ncclFloat16:
        reduce_t<uint16_t>(dst, src, n, count, [op](uint16_t a, uint16_t b) {
            return f_to_f16(combine<float>(op, f16_to_f(a), f16_to_f(b)));
        });
        break;
    }
}

/* ------------------------------------------------------------ operations */

/* OP_FAILED + kind: a call of that kind that failed its checks */
enum { OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_SEND, OP_RECV,
       OP_FAILED = 8 };
static const char *kind_name(int k) {
    static const char *n[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclReduceScatter",
                              "ncclAllGather", "ncclSend", "ncclRecv", "?",
                              "a failed ncclAllReduce", "a failed ncclBroadcast", "a failed ncclReduce",
                              "a failed ncclReduceScatter", "a failed ncclAllGather"};
    return k >= 0 && k < 13 ? n[k] : "?";
}

struct sim_op {
    int kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    int red, root;
    cudaStream_t stream;
    std::shared_ptr<sim_comm> c;
};

/* what every member must agree on */
struct op_desc {
    int32_t kind, type, red, root;
    uint64_t count, seq;
};

static void async_fail(sim_comm &c, ncclResult_t r, const std::string &msg) {
    if (c.async == ncclSuccess) {
        c.async = r;
        c.async_msg = msg;
    }
    g_last = msg;
    zt_sim_async_fail("NCCL: %s", msg.c_str());
}

/* complete rq, polling, bounded by the timeout; false (an asynchronous
 * ncclRemoteError) when the peers never came */
static bool wait_req(sim_comm &c, MPI_Request *rq, const char *what) {
    const double t0 = now_s(), tmo = timeout_s();
    for (unsigned spins = 0;; spins++) {
        int done = 0;
        if (MPI_Test(rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            async_fail(c, ncclSystemError, std::string(what) + ": MPI failed");
            return false;
        }
        if (done) return true;
        if ((spins & 255) == 255 && now_s() - t0 > tmo) {
            char b[512];
            snprintf(b, sizeof b, "%s on rank %d of %d: the other ranks did not take part within %.0f s "
                     "(ZT_CUDASIM_NCCL_TIMEOUT_S; with deferred stream work a peer blocked in host code "
                     "never runs its part)", what, c.rank, c.size, tmo);
            async_fail(c, ncclRemoteError, b);
            return false;   /* the request stays pending: the communicator is unusable */
        }
        if (spins > 1000) sched_yield();
    }
}

static bool mpi_bytes(size_t n) { return n <= (size_t)0x7fffffff; }

/* Everything MPI reads or writes lives here, never in the caller's
 * buffers: after a timeout the request stays pending (collectives cannot
 * be cancelled), so this is kept (leaked) rather than freed under it. */
struct xfer {
    op_desc me;
    std::vector<op_desc> all;
    std::vector<unsigned char> sbuf, rbuf;
};

static void run_op(const sim_op &o) {
    sim_comm &c = *o.c;
    c.queued--;
    if (c.gone || c.async != ncclSuccess) return;   /* aborted or failed: dropped */
    const char *what = kind_name(o.kind);
    const int P = c.size, R = c.rank;
    std::unique_ptr<xfer> x(new xfer);
    MPI_Request rq;
    /* 1. every member runs the same operation (a call that failed its
     * checks is a placeholder here: its peers learn of it) */
    x->me = {o.kind, (int32_t)o.type, o.red, o.root, (uint64_t)o.count, c.seq++};
    x->all.resize((size_t)P);
    MPI_Iallgather(&x->me, (int)sizeof x->me, MPI_BYTE, x->all.data(), (int)sizeof x->me, MPI_BYTE, c.mc, &rq);
    if (!wait_req(c, &rq, what)) {
        x.release();
        return;
    }
    const op_desc &me = x->me;
    for (int q = 0; q < P; q++) {
        const op_desc &d = x->all[(size_t)q];
        if (!memcmp(&d, &me, sizeof d)) continue;
        char b[768];
        snprintf(b, sizeof b, "operation %llu of the communicator differs between ranks: rank %d runs %s of "
                 "%llu %s (op %s, root %d), rank %d runs %s of %llu %s (op %s, root %d)",
                 (unsigned long long)me.seq, R, kind_name(me.kind), (unsigned long long)me.count,
                 type_name(me.type), op_name(me.red), me.root, q, kind_name(d.kind),
                 (unsigned long long)d.count, type_name(d.type), op_name(d.red), d.root);
        async_fail(c, ncclInvalidUsage, b);
        return;
    }
    if (o.kind >= OP_FAILED) return;   /* every member's call failed alike: nothing to move */
    /* 2. the data */
    const size_t es = type_size(o.type), bytes = o.count * es;
    if (!mpi_bytes(bytes * (size_t)P)) {
        async_fail(c, ncclInternalError, std::string(what) + ": above the simulator's 2 GiB per operation");
        return;
    }
    const int nb = (int)bytes;
    const unsigned char *src = (const unsigned char *)o.send;
    switch (o.kind) {
    case OP_ALLREDUCE:
    case OP_ALLGATHER:
        x->sbuf.assign(src, src + bytes);
        x->rbuf.resize(bytes * (size_t)P);
        MPI_Iallgather(x->sbuf.data(), nb, MPI_BYTE, x->rbuf.data(), nb, MPI_BYTE, c.mc, &rq);
        break;
    case OP_BROADCAST:
        if (R == o.root) x->rbuf.assign(src, src + bytes);
        else x->rbuf.resize(bytes);
        MPI_Ibcast(x->rbuf.data(), nb, MPI_BYTE, o.root, c.mc, &rq);
        break;
    case OP_REDUCE:
        x->sbuf.assign(src, src + bytes);
        if (R == o.root) x->rbuf.resize(bytes * (size_t)P);
        MPI_Igather(x->sbuf.data(), nb, MPI_BYTE, x->rbuf.data(), nb, MPI_BYTE, o.root, c.mc, &rq);
        break;
    default:   /* OP_REDUCE_SCATTER: count is the per-rank count */
        x->sbuf.assign(src, src + bytes * (size_t)P);
        x->rbuf.resize(bytes * (size_t)P);
        MPI_Ialltoall(x->sbuf.data(), nb, MPI_BYTE, x->rbuf.data(), nb, MPI_BYTE, c.mc, &rq);
        break;
    }
    if (!wait_req(c, &rq, what)) {
        x.release();
        return;
    }
    switch (o.kind) {
    case OP_ALLREDUCE:
    case OP_REDUCE_SCATTER:
        reduce(o.recv, x->rbuf.data(), P, o.count, o.type, o.red);
        break;
    case OP_REDUCE:
        if (R == o.root) reduce(o.recv, x->rbuf.data(), P, o.count, o.type, o.red);
        break;
    default:
        memmove(o.recv, x->rbuf.data(), x->rbuf.size());
        break;
    }
}

/* ------------------------------------------------------------ calls and groups */

static int g_group_depth;
static std::vector<sim_op> g_group_ops;
static ncclResult_t g_group_err = ncclSuccess;

static bool overlap(const void *a, size_t na, const void *b, size_t nb) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* NCCL's argument checks, and the buffers' extents in this process's
 * device memory; the error is returned (and remembered in a group) */
static ncclResult_t check_op(const sim_op &o, ncclComm_t comm) {
    const char *what = kind_name(o.kind);
    if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", what);
    const sim_comm &c = *comm->c;
    if (c.async != ncclSuccess)
        return fail(ncclInvalidUsage, "%s: the communicator has failed (%s): abort it", what, c.async_msg.c_str());
    const size_t es = type_size(o.type);
    if (!es) return fail(ncclInvalidArgument, "%s: invalid datatype %d", what, (int)o.type);
    if ((o.kind == OP_ALLREDUCE || o.kind == OP_REDUCE || o.kind == OP_REDUCE_SCATTER) && (o.red < 0 || o.red > 3))
        return fail(ncclInvalidArgument, "%s: invalid reduction op %d", what, o.red);
    if ((o.kind == OP_BROADCAST || o.kind == OP_REDUCE) && (o.root < 0 || o.root >= c.size))
        return fail(ncclInvalidArgument, "%s: root %d outside 0..%d", what, o.root, c.size - 1);
    if ((o.kind == OP_SEND || o.kind == OP_RECV) && (o.root < 0 || o.root >= c.size))
        return fail(ncclInvalidArgument, "%s: peer %d outside 0..%d", what, o.root, c.size - 1);
    const size_t P = (size_t)c.size, n = o.count * es, R = (size_t)c.rank;
    /* the bytes each buffer covers on this rank (NCCL reads sendbuff only on
     * the root of a broadcast, writes recvbuff only on the root of a reduce) */
    size_t ns = n, nr = n;
    switch (o.kind) {
    case OP_BROADCAST: if (R != (size_t)o.root) ns = 0; break;
    case OP_REDUCE: if (R != (size_t)o.root) nr = 0; break;
    case OP_REDUCE_SCATTER: ns = n * P; break;
    case OP_ALLGATHER: nr = n * P; break;
    case OP_SEND: nr = 0; break;
    case OP_RECV: ns = 0; break;
    }
    if (o.count == 0) return ncclSuccess;
    if (ns && !o.send) return fail(ncclInvalidArgument, "%s: sendbuff is NULL", what);
    if (nr && !o.recv) return fail(ncclInvalidArgument, "%s: recvbuff is NULL", what);
    if (ns && !zt_sim_is_device(o.send, ns))
        return fail(ncclInvalidArgument, "%s: sendbuff %p (%zu bytes) is not inside one device allocation of "
                    "this process", what, o.send, ns);
    if (nr && !zt_sim_is_device(o.recv, nr))
        return fail(ncclInvalidArgument, "%s: recvbuff %p (%zu bytes) is not inside one device allocation of "
                    "this process", what, (void *)o.recv, nr);
    /* in place is the documented form only; any other overlap is refused */
    if (ns && nr && overlap(o.send, ns, o.recv, nr)) {
        const unsigned char *s = (const unsigned char *)o.send, *r = (const unsigned char *)o.recv;
        bool inplace;
        switch (o.kind) {
        case OP_REDUCE_SCATTER: inplace = r == s + R * n; break;
        case OP_ALLGATHER: inplace = s == r + R * n; break;
        default: inplace = s == r; break;
        }
        if (!inplace)
            return fail(ncclInvalidArgument, "%s: sendbuff %p and recvbuff %p overlap but are not the in-place "
                        "form (%s)", what, o.send, (void *)o.recv,
                        o.kind == OP_REDUCE_SCATTER ? "recvbuff = sendbuff + rank * recvcount"
                        : o.kind == OP_ALLGATHER    ? "sendbuff = recvbuff + rank * sendcount"
                                                    : "sendbuff == recvbuff");
    }
    return ncclSuccess;
}

static void enqueue(const sim_op &o) {
    o.c->queued++;
    zt_sim_enqueue(o.stream, [o]() { run_op(o); });
}

/* Consecutive send/recv operations run together (see the top): every
 * receive and send posted, then all waited for. */
struct p2p_xfer {
    std::vector<std::vector<unsigned char>> buf;
    std::vector<MPI_Request> rq;
    std::vector<uint64_t> cnt;   /* the receives' counts as sent by the peers */
};
static const int P2P_TAG = 24680;

static void run_p2p(const std::vector<sim_op> &ops) {
    sim_comm &c = *ops[0].c;
    c.queued--;
    if (c.gone || c.async != ncclSuccess) return;
    std::unique_ptr<p2p_xfer> x(new p2p_xfer);
    const size_t n = ops.size();
    x->buf.resize(n);
    x->cnt.assign(n, 0);
    x->rq.assign(2 * n, MPI_REQUEST_NULL);
    for (size_t i = 0; i < n; i++) {   /* each message: its element count, then the bytes */
        const sim_op &o = ops[i];
        const size_t bytes = o.count * type_size(o.type);
        if (!mpi_bytes(bytes)) {
            async_fail(c, ncclInternalError, std::string(kind_name(o.kind)) + ": above the simulator's 2 GiB per message");
            return;
        }
        if (o.kind == OP_RECV) {
            x->buf[i].resize(bytes);
            MPI_Irecv(&x->cnt[i], 8, MPI_BYTE, o.root, P2P_TAG, c.mc, &x->rq[2 * i]);
            MPI_Irecv(x->buf[i].data(), (int)bytes, MPI_BYTE, o.root, P2P_TAG + 1, c.mc, &x->rq[2 * i + 1]);
        } else {
            const unsigned char *src = (const unsigned char *)o.send;
            x->buf[i].assign(src, src + bytes);
            x->cnt[i] = (uint64_t)o.count;
            MPI_Isend(&x->cnt[i], 8, MPI_BYTE, o.root, P2P_TAG, c.mc, &x->rq[2 * i]);
            MPI_Isend(x->buf[i].data(), (int)bytes, MPI_BYTE, o.root, P2P_TAG + 1, c.mc, &x->rq[2 * i + 1]);
        }
    }
    for (size_t i = 0; i < 2 * n; i++)
        if (!wait_req(c, &x->rq[i], kind_name(ops[i / 2].kind))) {
            x.release();   /* (requests pending: kept) */
            return;
        }
    for (size_t i = 0; i < n; i++) {
        const sim_op &o = ops[i];
        if (o.kind != OP_RECV) continue;
        if (x->cnt[i] != (uint64_t)o.count) {
            char b[256];
            snprintf(b, sizeof b, "ncclRecv of %zu elements on rank %d from rank %d matched an ncclSend of %llu",
                     o.count, c.rank, o.root, (unsigned long long)x->cnt[i]);
            async_fail(c, ncclInvalidUsage, b);
            return;
        }
        memcpy(o.recv, x->buf[i].data(), x->buf[i].size());
    }
}

static void enqueue_p2p(const std::vector<sim_op> &ops) {
    if (ops.empty()) return;
    ops[0].c->queued++;
    zt_sim_enqueue(ops[0].stream, [ops]() { run_p2p(ops); });
}

/* A call that fails its checks launches nothing, but a placeholder takes
 * its place in the communicator's sequence: its peers, whose calls may have
 * passed, then report it (a GPU would wait for this rank forever), and the
 * MPI collectives of the members stay in step.  When every member's call
 * failed alike, the placeholders agree and nothing happens. */
static void enqueue_failed(sim_op o) {
    o.kind += OP_FAILED;
    o.send = nullptr;
    o.recv = nullptr;
    enqueue(o);
}

static ncclResult_t submit(sim_op o, ncclComm_t comm) {
    const ncclResult_t r = check_op(o, comm);
    if (comm && !comm->c->gone) o.c = comm->c;
    if (r != ncclSuccess) {
        if (g_group_depth) {
            if (g_group_err == ncclSuccess) g_group_err = r;
            if (o.c) g_group_ops.push_back(o);
        } else if (o.c && o.c->async == ncclSuccess && o.kind != OP_SEND && o.kind != OP_RECV) {
            enqueue_failed(o);   /* (point to point: nothing; a peer times out) */
        }
        return r;
    }
    if (o.count == 0) return ncclSuccess;   /* nothing to do: NCCL returns at once */
    if (g_group_depth) g_group_ops.push_back(o);
    else if (o.kind == OP_SEND || o.kind == OP_RECV) enqueue_p2p(std::vector<sim_op>(1, o));
    else enqueue(o);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupStart(void) {
    g_group_depth++;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupEnd(void) {
    if (g_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart");
    if (--g_group_depth) return ncclSuccess;
    std::vector<sim_op> ops;
    ops.swap(g_group_ops);
    const ncclResult_t err = g_group_err;
    g_group_err = ncclSuccess;
    if (err != ncclSuccess) {   /* a call of the group failed: none is launched */
        for (const sim_op &o : ops)   /* (point to point: nothing; a peer times out) */
            if (o.c->async == ncclSuccess && o.kind != OP_SEND && o.kind != OP_RECV) enqueue_failed(o);
        return err;
    }
    std::vector<sim_op> p2p;   /* consecutive sends and receives on one communicator and stream */
    for (const sim_op &o : ops) {
        const bool pt = o.kind == OP_SEND || o.kind == OP_RECV;
        if (!p2p.empty() && (!pt || o.c != p2p[0].c || o.stream != p2p[0].stream)) {
            enqueue_p2p(p2p);
            p2p.clear();
        }
        if (pt) p2p.push_back(o);
        else enqueue(o);
    }
    enqueue_p2p(p2p);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, 0, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_BROADCAST, sendbuff, recvbuff, count, datatype, 0, root, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
    return submit({OP_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op, 0, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, 0, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_SEND, sendbuff, nullptr, count, datatype, 0, peer, stream, nullptr}, comm);
}
extern "C" ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
    return submit({OP_RECV, nullptr, recvbuff, count, datatype, 0, peer, stream, nullptr}, comm);
}
