/*
 * test_startup.c -- start-up does only the work the run needs (issue 32),
 * at the world size it is launched with (1 rank directly, 2 ranks from
 * tests/startup.sh; rank 0 prints TAP), for GPT-2 and Llama, fp32 and
 * bf16, ZeRO stages 0-3, and LoRA:
 *  - ZT_CTX_DEFER_INIT computes no initial values at creation (the count
 *    zt_ctx_startup reports is 0); what is owed and then read (export,
 *    training) is the eager initialization bit for bit: the parameters, and
 *    the losses of 3 steps;
 *  - a load that writes every parameter (zt_shard_set_full_params, as
 *    zt_load_weights does) leaves nothing owed: 0 parameters ever get
 *    random values; a unit written by a load keeps its loaded values while
 *    the others get the eager ones (count: the rest);
 *  - the AdamW moments are fresh (the allocation's zeros, nothing wrote
 *    them) until the first update; zt_mem_alloc's large blocks are zero;
 *  - pre-faulting (mem.c): the gradient and optimizer blocks allocated
 *    between zt_mem_prefault_begin and _start are resident afterwards
 *    (mincore), still zero, and a block written while the thread
 *    populates it keeps what was written.
 */
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ctx.h"
#include "tap.h"
#include "testutil.h"

enum { B = 2, T = 8, V = 29 };

static int synth_get(void *s, long step, uint64_t first, int count, int Tq, int *in, int *tg,
                     zt_status *st) {
    for (int i = 0; i < count * Tq; ++i) {
        uint64_t h = zt_hash3((uint64_t)step, first + (uint64_t)(i / Tq), (uint64_t)(i % Tq));
        in[i] = (int)(h % V);
        tg[i] = (int)((h >> 20) % V);
    }
    return ZT_OK;
}

static zt_config *config(const char *arch, int stage, int bf16, int lora) {
    zt_config *c = tu_tiny_config(2, 4, 16, T, V, B);
    tu_set(c, "ztrain.model.arch", "%s", arch);
    if (!strcmp(arch, "llama")) {
        tu_set(c, "ztrain.model.n_kv_head", "2");
        tu_set(c, "ztrain.model.intermediate_size", "24");
    }
    tu_set(c, "gradient_accumulation_steps", "1");
    tu_set(c, "zero_optimization.stage", "%d", stage);
    tu_set(c, "bf16.enabled", "%s", bf16 ? "true" : "false");
    tu_set(c, "scheduler.type", "none");
    tu_set(c, "optimizer.params.lr", "1e-2");
    tu_set(c, "ztrain.seed", "4242");
    if (lora) {
        tu_set(c, "ztrain.lora.r", "2");
        tu_set(c, "ztrain.lora.alpha", "3");
        tu_set(c, "ztrain.lora.targets", "all-linear");
    }
    return c;
}

static zt_ctx *make(const zt_config *c, unsigned flags) {
    zt_ctx *ctx = NULL;
    zt_status st;
    if (zt_ctx_create_ex(c, NULL, flags, &ctx, &st) != ZT_OK) {
        tap_diag("create: %s", st.msg);
        return NULL;
    }
    zt_data_source src = {NULL, synth_get, NULL, NULL}, none = {0};
    zt_ctx_set_data(ctx, src, none, &st);
    return ctx;
}

static uint64_t init_count(const zt_ctx *ctx) {
    zt_startup su;
    zt_ctx_startup(ctx, &su);
    return su.init_params;
}

/* Every parameter of engine sh on every rank (collective): a copy. */
static float *full_copy(zt_shard *sh) {
    float *full = NULL;
    int owned = 0;
    zt_status st;
    if (zt_shard_full_params(sh, &full, &owned, &st) != ZT_OK) return NULL;
    size_t n = sh->m->num_params;
    float *c = malloc((n ? n : 1) * sizeof(float));
    if (c) memcpy(c, full, n * sizeof(float));
    if (owned) zt_mem_free(full);
    return c;
}

static int losses(zt_ctx *ctx, double *l, int n) {
    zt_status st;
    for (int i = 0; i < n; ++i) {
        zt_metrics m;
        if (zt_train_step(ctx, &m, &st) != ZT_OK) { tap_diag("step: %s", st.msg); return -1; }
        l[i] = m.loss;
    }
    return 0;
}

static void one(const char *arch, int stage, int bf16, int lora) {
    char name[96];
    snprintf(name, sizeof name, "%s stage %d %s%s", arch, stage, bf16 ? "bf16" : "fp32",
             lora ? " LoRA" : "");
    zt_config *c = config(arch, stage, bf16, lora);
    zt_ctx *eager = make(c, 0), *lazy = make(c, ZT_CTX_DEFER_INIT), *tr = make(c, ZT_CTX_DEFER_INIT);
    if (!eager || !lazy || !tr) {
        tap_ok(0, "%s: contexts", name);
        goto out;
    }
    const uint64_t P = (uint64_t)eager->model->num_params + (lora ? eager->lmodel->num_params : 0);
    tap_ok(init_count(eager) == P && init_count(lazy) == 0,
           "%s: eager init counts %llu of %llu parameters, deferred 0 (got %llu)", name,
           (unsigned long long)init_count(eager), (unsigned long long)P,
           (unsigned long long)init_count(lazy));
    /* the owed values, read by an export: the eager ones */
    float *a = full_copy(zt_ctx_tsh(eager)), *b = full_copy(zt_ctx_tsh(lazy));
    const size_t n = zt_ctx_tmodel(eager)->num_params;
    tap_ok(a && b && memcmp(a, b, n * sizeof(float)) == 0,
           "%s: deferred initial values == eager, bit for bit (%zu parameters)", name, n);
    tap_ok(zt_ctx_moments_fresh(tr) == 1, "%s: the AdamW moments are fresh after creation", name);
    /* training reads them first: the same losses */
    double le[3] = {0}, ll[3] = {0};
    int ok = losses(eager, le, 3) == 0 && losses(tr, ll, 3) == 0;
    tap_ok(ok && memcmp(le, ll, sizeof le) == 0,
           "%s: 3 steps from deferred init == from eager, bitwise (%.9g %.9g %.9g)", name, ll[0],
           ll[1], ll[2]);
    tap_ok(zt_ctx_moments_fresh(tr) == 0 && init_count(tr) == P,
           "%s: after the steps the moments are not fresh; %llu parameters initialized", name,
           (unsigned long long)init_count(tr));
    free(a);
    free(b);
out:
    zt_ctx_free(eager);
    zt_ctx_free(lazy);
    zt_ctx_free(tr);
    zt_config_free(c);
}

/* A load that writes every parameter: nothing owed, nothing computed. */
static void loaded(const char *arch, int stage, int bf16) {
    zt_config *c = config(arch, stage, bf16, 0);
    zt_ctx *src = make(c, 0), *dst = make(c, ZT_CTX_DEFER_INIT);
    zt_status st;
    if (!src || !dst) { tap_ok(0, "load %s stage %d: contexts", arch, stage); goto out; }
    double l[2];
    losses(src, l, 2);   /* trained: not the initial values */
    float *w = full_copy(src->sh);
    const size_t n = src->model->num_params;
    float *dev = w ? zt_mem_alloc(n * sizeof(float), ZT_MEM_WORKSPACE, &st) : NULL;
    if (dev) memcpy(dev, w, n * sizeof(float));
    if (dev) zt_shard_set_full_params(dst->sh, dev);
    int rc = zt_ctx_init_pending(dst, &st);
    float *got = full_copy(dst->sh);
    tap_ok(dev && rc == ZT_OK && init_count(dst) == 0 && got && memcmp(got, w, n * sizeof(float)) == 0,
           "load %s stage %d %s: every parameter loaded, 0 random initial values computed (%llu)",
           arch, stage, bf16 ? "bf16" : "fp32", (unsigned long long)init_count(dst));
    zt_mem_free(dev);
    free(w);
    free(got);
out:
    zt_ctx_free(src);
    zt_ctx_free(dst);
    zt_config_free(c);
}

/* fp32 stage 0: unit 0 written by a "load", the rest owed. */
static void partial(void) {
    zt_config *c = config("gpt2", 0, 0, 0);
    zt_ctx *eager = make(c, 0), *part = make(c, ZT_CTX_DEFER_INIT);
    zt_status st;
    if (!eager || !part) { tap_ok(0, "partial: contexts"); goto out; }
    const zt_unit_info *u0 = &part->model->units[0];
    for (size_t i = 0; i < u0->numel; ++i) part->model->params[u0->offset + i] = 0.25f;
    zt_shard_params_written(part->sh, 0);
    int rc = zt_ctx_init_pending(part, &st), same = rc == ZT_OK, kept = rc == ZT_OK;
    for (size_t i = 0; i < part->model->num_params; ++i) {
        const int in0 = i >= u0->offset && i < u0->offset + u0->numel;
        if (in0) kept &= part->model->params[i] == 0.25f;
        else same &= memcmp(&part->model->params[i], &eager->model->params[i], sizeof(float)) == 0;
    }
    tap_ok(kept && same && init_count(part) == part->model->num_params - u0->numel,
           "partial load: unit %s keeps its loaded values, the others get the eager ones; "
           "%llu of %zu parameters initialized", u0->name, (unsigned long long)init_count(part),
           part->model->num_params);
out:
    zt_ctx_free(eager);
    zt_ctx_free(part);
    zt_config_free(c);
}

/* Pages of [p, p + n) resident (mincore), -1 on error. */
static long resident(const void *p, size_t n) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1), z = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);
    size_t np = (z - a) / pg;
    unsigned char *v = malloc(np ? np : 1);
    long r = v && mincore((void *)a, z - a, v) == 0 ? 0 : -1;
    for (size_t i = 0; r >= 0 && i < np; ++i) r += v[i] & 1;
    free(v);
    return r < 0 ? -1 : (long)(r == (long)np ? -2 : r);   /* -2: all */
}

/* Two 8 MiB blocks queued for pre-faulting; the main thread writes one of
 * them while the thread may be populating it. */
static void prefault(void) {
    zt_status st;
    const size_t n = (size_t)8 << 20;
    zt_mem_prefault_begin();
    float *g = zt_mem_alloc(n, ZT_MEM_GRADS, &st), *o = zt_mem_alloc(n, ZT_MEM_OPTIMIZER, &st);
    zt_mem_prefault_start();
    const size_t k = n / sizeof(float);
    for (size_t i = 0; o && i < k; ++i) o[i] = (float)(i % 1000) + 0.5f;
    zt_mem_prefault_wait();
    const long rg = g ? resident(g, n) : -1;   /* before reading it (a read maps the zero page) */
    int zero = g != NULL, kept = o != NULL;
    for (size_t i = 0; zero && i < k; ++i) zero &= g[i] == 0.0f;
    for (size_t i = 0; kept && i < k; ++i) kept &= o[i] == (float)(i % 1000) + 0.5f;
    tap_ok(rg == -2 && zero && kept, "pre-faulting: an 8 MiB gradient block is resident (%s) and zero, an "
           "optimizer block written meanwhile keeps its values", rg == -2 ? "every page" : "not every page");
    zt_mem_free(g);
    zt_mem_free(o);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { printf("not ok 1 - init: %s\n", st.msg); return 1; }
    int rank = zt_world_rank();
    if (rank != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    tap_diag("world size %d", zt_world_size());
    prefault();   /* first: fresh pages from the allocator */
    const char *arch[2] = {"gpt2", "llama"};
    for (int a = 0; a < 2; ++a)
        for (int stage = 0; stage <= 3; ++stage)
            for (int bf16 = 0; bf16 <= 1; ++bf16) one(arch[a], stage, bf16, 0);
    one("llama", 0, 0, 1);
    one("gpt2", 3, 1, 1);
    loaded("gpt2", 0, 0);
    loaded("llama", 3, 1);
    if (zt_world_size() == 1) partial();
    /* zt_mem_alloc: zero (calloc'd, untouched), 256-byte aligned (ZT_MEM_ALIGN) */
    const size_t big = 64u << 20;
    unsigned char *p = zt_mem_alloc(big, ZT_MEM_WORKSPACE, &st);
    int zero = p != NULL && ((uintptr_t)p & 255) == 0;
    for (size_t i = 0; zero && i < big; i += 4096) zero &= p[i] == 0 && p[big - 1 - i] == 0;
    zt_mem_free(p);
    tap_ok(zero, "zt_mem_alloc: a 64 MiB block is zero and 256-byte aligned");
    int rc = tap_done();
    zt_finalize();
    return rc;
}
