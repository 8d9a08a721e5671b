/*
 * test_gradcheck.c -- the GPT backward pass against finite differences of the
 * forward loss, for EVERY parameter tensor: a directional derivative along a
 * random direction restricted to the tensor, plus three single elements.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt.h"
#include "shard.h"
#include "tap.h"

enum { B = 2, T = 5 };
static int inputs[B * T], targets[B * T];

static double loss_of(zt_shard *sh, void *a) {
    double s = 0;
    zt_status st;
    if (zt_shard_forward(sh, a, inputs, targets, B, T, 1, &s, &st) != ZT_OK) return NAN;
    return s / (double)(B * T);
}

int main(void) {
    zt_model_config mc = {.n_layer = 2, .n_head = 2, .n_embd = 8, .context = 6, .vocab = 11};
    zt_status st;
    zt_gpt *gpt;
    zt_model *m;
    zt_shard *sh;
    const zt_backend *be = zt_backend_cpu();
    be->set_threads(1);
    /* the GPT through the unit API, on a one-process stage-0 engine */
    if (zt_gpt_new(&mc, be, &gpt, &st) != ZT_OK ||
        zt_model_create(zt_gpt_ops(), gpt, &mc, be, ZT_MODEL_PARAMS | ZT_MODEL_GRADS, &m, &st) != ZT_OK ||
        zt_shard_create(m, 0, 1, NULL, &sh, &st) != ZT_OK) { tap_ok(0, "create: %s", st.msg); return tap_done(); }
    zt_shard_init_params(sh, 7);
    /* move away from the symmetric init so LN and bias gradients are generic */
    for (size_t i = 0; i < m->num_params; ++i) m->params[i] += (float)(0.1 * zt_normal(99, i));
    void *a;
    if (zt_gpt_ops()->acts_create(gpt, B, T, 1, ZT_MEM_ACTIVATIONS, &a, &st) != ZT_OK) { tap_ok(0, "acts: %s", st.msg); return tap_done(); }
    for (int i = 0; i < B * T; ++i) {
        inputs[i] = (i * 7 + 3) % mc.vocab;
        targets[i] = (i * 5 + 1) % mc.vocab;
    }
    tap_ok(m->n_tensors == 4 + 12 * mc.n_layer, "model has %d parameter tensors", m->n_tensors);

    be->zero(m->grads, m->num_params * sizeof(float));
    double L0 = loss_of(sh, a);
    zt_shard_backward(sh, a, 1.0f / (float)(B * T), &st);
    tap_ok(isfinite(L0) && L0 > 0, "loss is finite and positive (%.4f)", L0);

    const double eps = 1e-2;
    for (int ti = 0; ti < m->n_tensors; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        float *p = m->params + t->offset;
        const float *g = m->grads + t->offset;
        /* direction: random signs, unit norm */
        double *d = malloc(sizeof(double) * t->numel), gd = 0.0;
        double inv = 1.0 / sqrt((double)t->numel);
        for (size_t j = 0; j < t->numel; ++j) {
            d[j] = (zt_hash3(5, (uint64_t)ti, j) & 1 ? 1.0 : -1.0) * inv;
            gd += d[j] * g[j];
        }
        float *save = malloc(sizeof(float) * t->numel);
        memcpy(save, p, sizeof(float) * t->numel);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] + eps * d[j]);
        double Lp = loss_of(sh, a);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] - eps * d[j]);
        double Lm = loss_of(sh, a);
        memcpy(p, save, sizeof(float) * t->numel);
        double fd = (Lp - Lm) / (2 * eps);
        int ok = fabs(fd - gd) <= 2e-5 + 1e-2 * fabs(gd);
        if (!ok || fabs(gd) < 1e-6) tap_diag("%s: analytic %.6e numeric %.6e", t->name, gd, fd);
        tap_ok(ok && fabs(gd) > 1e-4, "gradient of %s (directional, |g.d| = %.2e)", t->name, fabs(gd));
        /* three single elements */
        size_t idx[3] = {0, t->numel / 2, t->numel - 1};
        int eok = 1;
        for (int k = 0; k < 3; ++k) {
            size_t j = idx[k];
            p[j] = save[j] + (float)eps;
            double lp = loss_of(sh, a);
            p[j] = save[j] - (float)eps;
            double lm = loss_of(sh, a);
            p[j] = save[j];
            double efd = (lp - lm) / (2 * eps);
            if (fabs(efd - g[j]) > 3e-5 + 3e-2 * fabs(g[j])) {
                eok = 0;
                tap_diag("%s[%zu]: analytic %.6e numeric %.6e", t->name, j, g[j], efd);
            }
        }
        tap_ok(eok, "gradient of %s (elements first, middle, last)", t->name);
        free(d);
        free(save);
    }
    /* backward accumulates: a second backward doubles the gradients */
    float g0 = m->grads[m->tensors[2].offset];
    loss_of(sh, a);
    zt_shard_backward(sh, a, 1.0f / (float)(B * T), &st);
    tap_close(m->grads[m->tensors[2].offset], 2 * g0, 1e-5, 1e-9, "backward accumulates into the gradient block");

    zt_gpt_ops()->acts_free(gpt, a);
    zt_shard_free(sh);
    zt_model_free(m, 1);
    return tap_done();
}
