/*
 * mlp_lm.c -- a model of your own on libtrain's public unit API.
 *
 * A small next-token MLP language model (one token of context):
 *
 *     x      = E[tok]                     E  [V, D]   unit "embed"
 *     h      = tanh(W1 x + b1)            W1 [H, D]   unit "hidden"
 *     logits = W2 h + b2                  W2 [V, H]   unit "head"
 *     loss   = cross-entropy(softmax(logits), next token)
 *
 * It trains with every ZeRO stage and world size the built-in GPT does,
 * because the engine only sees the three units.  Build against an
 * installed libtrain:
 *
 *     cc -O2 mlp_lm.c $(pkg-config --cflags --libs libtrain) -lm -o mlp_lm
 *     mpirun -np 2 ./mlp_lm zero_optimization.stage=3 ztrain.steps=50
 *
 * Arguments are config keys (key=value, DeepSpeed names or ztrain flags).
 * Without ztrain.data.train it trains on a synthetic corpus in which token
 * t is followed by (5 t + 3) mod V, which the model can learn exactly; with
 * it, on llm.c token shards (e.g. the bundled Shakespeare after
 * `ztrain prep`).  Rank 0 prints one line per step: "step N loss L".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ztrain.h>
#include <ztrain_io.h>

typedef struct mlp {
    int V, D, H;
    size_t off_E, off_W1, off_b1, off_W2, off_b2;   /* offsets inside their units */
} mlp;

enum { U_EMBED = 0, U_HIDDEN = 1, U_HEAD = 2 };

/* ---- describe: three units, five tensors ---- */
static int mlp_describe(void *self, zt_layout *L, zt_status *st) {
    mlp *m = self;
    int rc;
    if ((rc = zt_layout_unit(L, "embed", st)) != ZT_OK) return rc;
    if ((rc = zt_layout_tensor(L, "E", m->V, m->D, ZT_INIT_NORMAL, 0.5, ZT_TENSOR_DECAY,
                               &m->off_E, st)) != ZT_OK) return rc;
    if ((rc = zt_layout_unit(L, "hidden", st)) != ZT_OK) return rc;
    if ((rc = zt_layout_tensor(L, "W1", m->H, m->D, ZT_INIT_NORMAL, 1.0 / sqrt(m->D),
                               ZT_TENSOR_DECAY, &m->off_W1, st)) != ZT_OK) return rc;
    if ((rc = zt_layout_tensor(L, "b1", m->H, 1, ZT_INIT_ZEROS, 0, 0, &m->off_b1, st)) != ZT_OK)
        return rc;
    if ((rc = zt_layout_unit(L, "head", st)) != ZT_OK) return rc;
    if ((rc = zt_layout_tensor(L, "W2", m->V, m->H, ZT_INIT_NORMAL, 1.0 / sqrt(m->H),
                               ZT_TENSOR_DECAY, &m->off_W2, st)) != ZT_OK) return rc;
    return zt_layout_tensor(L, "b2", m->V, 1, ZT_INIT_ZEROS, 0, 0, &m->off_b2, st);
}

/* ---- activations: what backward needs, per position ---- */
typedef struct acts {
    int B, T, training, N;             /* N = positions of the last forward */
    const int *inputs, *targets;
    float *x;                           /* [B*T, D] embedded inputs   */
    float *h;                           /* [B*T, H] hidden activations */
    float *p;                           /* [B*T, V] probabilities      */
    float *block;                       /* the one accounted allocation */
} acts;

static int mlp_acts_create(void *self, int B, int T, int training, int category, void **out,
                           zt_status *st) {
    mlp *m = self;
    acts *a = calloc(1, sizeof *a);
    if (!a) return ZT_ENOMEM;
    size_t n = (size_t)B * T;
    a->B = B; a->T = T; a->training = training;
    a->block = zt_alloc(n * (size_t)(m->D + m->H + m->V) * sizeof(float), category, st);
    if (!a->block) { free(a); return st->code; }
    a->x = a->block;
    a->h = a->x + n * m->D;
    a->p = a->h + n * m->H;
    *out = a;
    return ZT_OK;
}

static void mlp_acts_free(void *self, void *p) {
    (void)self;
    acts *a = p;
    if (a) zt_free(a->block);
    free(a);
}

/* ---- forward: ask for each unit's parameters, use them, release ---- */
static int mlp_forward(void *self, zt_units *U, void *ap, const int *inputs, const int *targets,
                       int B, int T, double *loss_sum, zt_status *st) {
    mlp *m = self;
    acts *a = ap;
    int D = m->D, H = m->H, V = m->V, N = B * T;
    a->N = N;
    a->inputs = inputs;
    a->targets = targets;

    float *pe = zt_unit_params(U, U_EMBED, st);
    if (!pe) return st->code;
    const float *E = pe + m->off_E;
    for (int i = 0; i < N; ++i) memcpy(a->x + (size_t)i * D, E + (size_t)inputs[i] * D, sizeof(float) * D);
    if (zt_unit_release(U, U_EMBED, st) != ZT_OK) return st->code;

    float *ph = zt_unit_params(U, U_HIDDEN, st);
    if (!ph) return st->code;
    const float *W1 = ph + m->off_W1, *b1 = ph + m->off_b1;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < H; ++j) {
            float s = b1[j];
            for (int k = 0; k < D; ++k) s += W1[(size_t)j * D + k] * a->x[(size_t)i * D + k];
            a->h[(size_t)i * H + j] = tanhf(s);
        }
    if (zt_unit_release(U, U_HIDDEN, st) != ZT_OK) return st->code;

    float *po = zt_unit_params(U, U_HEAD, st);
    if (!po) return st->code;
    const float *W2 = po + m->off_W2, *b2 = po + m->off_b2;
    double sum = 0.0;
    for (int i = 0; i < N; ++i) {
        float *p = a->p + (size_t)i * V, mx = -INFINITY;
        for (int v = 0; v < V; ++v) {
            float s = b2[v];
            for (int j = 0; j < H; ++j) s += W2[(size_t)v * H + j] * a->h[(size_t)i * H + j];
            p[v] = s;
            if (s > mx) mx = s;
        }
        double z = 0.0;
        for (int v = 0; v < V; ++v) z += exp((double)(p[v] - mx));
        for (int v = 0; v < V; ++v) p[v] = (float)(exp((double)(p[v] - mx)) / z);
        if (targets && targets[i] >= 0) sum -= log((double)p[targets[i]] + 1e-30);
    }
    if (zt_unit_release(U, U_HEAD, st) != ZT_OK) return st->code;
    *loss_sum = sum;
    return ZT_OK;
}

/* ---- backward: units in reverse; accumulate (+=) into the grad buffers
 * and report each unit complete as soon as it is ---- */
static int mlp_backward(void *self, zt_units *U, void *ap, float dloss, zt_status *st) {
    mlp *m = self;
    acts *a = ap;
    int D = m->D, H = m->H, V = m->V, N = a->N;
    float *dh = calloc((size_t)N * H, sizeof(float)), *dx = calloc((size_t)N * D, sizeof(float));
    float *dz = malloc(sizeof(float) * (size_t)V);
    int rc = ZT_OK;
    if (!dh || !dx || !dz) { rc = ZT_ENOMEM; goto out; }

    float *po = zt_unit_params(U, U_HEAD, st), *go = po ? zt_unit_grads(U, U_HEAD, st) : NULL;
    if (!go) { rc = st->code; goto out; }
    const float *W2 = po + m->off_W2;
    float *dW2 = go + m->off_W2, *db2 = go + m->off_b2;
    for (int i = 0; i < N; ++i) {
        int t = a->targets ? a->targets[i] : -1;
        const float *p = a->p + (size_t)i * V, *h = a->h + (size_t)i * H;
        for (int v = 0; v < V; ++v) dz[v] = t < 0 ? 0.0f : (p[v] - (v == t)) * dloss;
        for (int v = 0; v < V; ++v) {
            db2[v] += dz[v];
            for (int j = 0; j < H; ++j) {
                dW2[(size_t)v * H + j] += dz[v] * h[j];
                dh[(size_t)i * H + j] += dz[v] * W2[(size_t)v * H + j];
            }
        }
    }
    if ((rc = zt_unit_release(U, U_HEAD, st)) != ZT_OK) goto out;
    if ((rc = zt_unit_grads_done(U, U_HEAD, st)) != ZT_OK) goto out;

    float *ph = zt_unit_params(U, U_HIDDEN, st), *gh = ph ? zt_unit_grads(U, U_HIDDEN, st) : NULL;
    if (!gh) { rc = st->code; goto out; }
    const float *W1 = ph + m->off_W1;
    float *dW1 = gh + m->off_W1, *db1 = gh + m->off_b1;
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < H; ++j) {
            float hv = a->h[(size_t)i * H + j];
            float ds = dh[(size_t)i * H + j] * (1.0f - hv * hv);   /* tanh' */
            db1[j] += ds;
            for (int k = 0; k < D; ++k) {
                dW1[(size_t)j * D + k] += ds * a->x[(size_t)i * D + k];
                dx[(size_t)i * D + k] += ds * W1[(size_t)j * D + k];
            }
        }
    if ((rc = zt_unit_release(U, U_HIDDEN, st)) != ZT_OK) goto out;
    if ((rc = zt_unit_grads_done(U, U_HIDDEN, st)) != ZT_OK) goto out;

    float *ge = zt_unit_grads(U, U_EMBED, st);   /* the lookup reads no parameters */
    if (!ge) { rc = st->code; goto out; }
    float *dE = ge + m->off_E;
    for (int i = 0; i < N; ++i)
        for (int k = 0; k < D; ++k) dE[(size_t)a->inputs[i] * D + k] += dx[(size_t)i * D + k];
    rc = zt_unit_grads_done(U, U_EMBED, st);
out:
    free(dh);
    free(dx);
    free(dz);
    return rc;
}

static const float *mlp_probs(void *self, void *ap, int b, int t) {
    mlp *m = self;
    acts *a = ap;
    return a->p + ((size_t)b * a->T + (size_t)t) * m->V;
}

static const zt_model_ops mlp_ops = {
    "mlp_lm", mlp_describe, mlp_acts_create, mlp_acts_free, mlp_forward, mlp_backward,
    mlp_probs, NULL,
};

/* ---- a synthetic, learnable corpus: a pure function of (step, index) ---- */
typedef struct synth { int V; uint64_t seed; } synth;

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static int synth_get(void *state, long step, uint64_t first, int count, int T, int *inputs,
                     int *targets, zt_status *st) {
    (void)st;
    synth *s = state;
    for (int i = 0; i < count; ++i) {
        int tok = (int)(mix(s->seed ^ mix((uint64_t)step * 1000003u + first + (uint64_t)i)) % (uint64_t)s->V);
        for (int t = 0; t < T; ++t) {
            int next = (5 * tok + 3) % s->V;
            inputs[i * T + t] = tok;
            targets[i * T + t] = next;
            tok = next;
        }
    }
    return ZT_OK;
}

static void on_metrics(void *user, const zt_metrics *mt) {
    (void)user;
    if (mt->kind == ZT_METRIC_STEP && zt_world_rank() == 0)
        printf("step %ld loss %.9g\n", mt->step, mt->loss);
}
static void on_log(void *user, int level, const char *msg) {
    (void)user;
    if (level <= ZT_LOG_WARN && zt_world_rank() == 0) fprintf(stderr, "mlp_lm: %s\n", msg);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { fprintf(stderr, "mlp_lm: %s\n", st.msg); return 1; }
    int rc = 1;
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    /* defaults for this model; arguments override them */
    const char *defaults[][2] = {
        {"ztrain.model.vocab", "32"}, {"ztrain.model.context", "8"},
        {"train_batch_size", "16"}, {"ztrain.steps", "40"}, {"optimizer.params.lr", "0.01"},
        {"scheduler.type", "none"}, {"ztrain.data.val", ""}, {"ztrain.eval_every", "0"},
        {"ztrain.data.train", ""}, {"ztrain.log_every", "1000000"},
    };
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; ++i)
        if (zt_config_set(cfg, defaults[i][0], defaults[i][1], ZT_SRC_FILE, &st) != ZT_OK) goto fail;
    if (zt_config_load_env(cfg, &st) != ZT_OK) goto fail;
    for (int i = 1; i < argc; ++i) {
        char *eq = strchr(argv[i], '=');
        if (!eq) { snprintf(st.msg, sizeof st.msg, "argument '%s' is not key=value", argv[i]); goto fail; }
        *eq = '\0';
        if (zt_config_set(cfg, argv[i], eq + 1, ZT_SRC_FLAG, &st) != ZT_OK) goto fail;
    }
    mlp model = {.D = 16, .H = 32};
    char val[4096];
    if (zt_config_get(cfg, "ztrain.model.vocab", val, sizeof val, &st) != ZT_OK) goto fail;
    model.V = atoi(val);
    if (zt_config_get(cfg, "ztrain.data.train", val, sizeof val, &st) != ZT_OK) goto fail;
    int synthetic = val[0] == '\0';
    zt_callbacks cb = {on_log, on_metrics, NULL, {NULL, NULL}};
    if (zt_ctx_create_model(cfg, &mlp_ops, &model, &cb, &ctx, &st) != ZT_OK) goto fail;
    synth syn = {model.V, 1234};
    zt_data_source train = {&syn, synth_get, NULL, NULL}, none = {0};
    if (synthetic ? zt_ctx_set_data(ctx, train, none, &st) : zt_ctx_open_data(ctx, &st)) goto fail;
    if (zt_train(ctx, &st) != ZT_OK) goto fail;
    rc = 0;
    goto done;
fail:
    if (zt_world_rank() == 0) fprintf(stderr, "mlp_lm: %s\n", st.msg);
done:
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    zt_finalize();
    return rc;
}
