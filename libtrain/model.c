/* model.c -- layouts (the describe() builder), creation, initialization. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

struct zt_layout {
    zt_model *m;
    int cap_tensors, cap_units;
    int open;            /* a unit is open */
};

static int close_unit(zt_layout *L) {
    if (!L->open) return ZT_OK;
    zt_model *m = L->m;
    zt_unit_info *u = &m->units[m->n_units - 1];
    u->numel = m->num_params - u->offset;
    u->n_tensors = m->n_tensors - u->first_tensor;
    L->open = 0;
    return ZT_OK;
}

static int check_name(const char *what, const char *name, size_t cap, zt_status *st) {
    if (!name || !name[0] || strlen(name) >= cap)
        return zt_fail(st, ZT_EINVAL, "%s name '%s' must have 1 to %zu characters", what,
                       name ? name : "(null)", cap - 1);
    return ZT_OK;
}

int zt_layout_unit(zt_layout *L, const char *name, zt_status *st) {
    zt_model *m = L->m;
    ZT_TRY(check_name("unit", name, sizeof m->units[0].name, st));
    if (L->open && m->units[m->n_units - 1].first_tensor == m->n_tensors)
        return zt_fail(st, ZT_EINVAL, "unit '%s' has no tensors", m->units[m->n_units - 1].name);
    close_unit(L);
    if (m->n_units == L->cap_units) {
        int cap = L->cap_units ? 2 * L->cap_units : 16;
        zt_unit_info *u = realloc(m->units, (size_t)cap * sizeof *u);
        if (!u) return zt_fail(st, ZT_ENOMEM, "out of memory (model layout)");
        m->units = u;
        L->cap_units = cap;
    }
    zt_unit_info *u = &m->units[m->n_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->offset = m->num_params;
    u->first_tensor = m->n_tensors;
    L->open = 1;
    return ZT_OK;
}

int zt_layout_tensor(zt_layout *L, const char *name, int rows, int cols, zt_init_kind init,
                     double std, unsigned flags, size_t *offset, zt_status *st) {
    zt_model *m = L->m;
    if (!L->open) return zt_fail(st, ZT_EINVAL, "tensor '%s' added before any zt_layout_unit", name ? name : "(null)");
    ZT_TRY(check_name("tensor", name, sizeof m->tensors[0].name, st));
    if (rows < 1 || cols < 1)
        return zt_fail(st, ZT_EINVAL, "tensor '%s': shape [%d, %d] must be positive", name, rows, cols);
    if (init < ZT_INIT_ZEROS || init > ZT_INIT_UNIFORM ||
        ((init == ZT_INIT_NORMAL || init == ZT_INIT_UNIFORM) && !(std >= 0)))
        return zt_fail(st, ZT_EINVAL, "tensor '%s': bad initialization (%d, std %g)", name, (int)init, std);
    if (zt_model_find_tensor(m, name))
        return zt_fail(st, ZT_EINVAL, "tensor name '%s' used twice", name);
    if (m->n_tensors == L->cap_tensors) {
        int cap = L->cap_tensors ? 2 * L->cap_tensors : 64;
        zt_tensor_info *t = realloc(m->tensors, (size_t)cap * sizeof *t);
        if (!t) return zt_fail(st, ZT_ENOMEM, "out of memory (model layout)");
        m->tensors = t;
        L->cap_tensors = cap;
    }
    zt_tensor_info *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->unit = m->n_units - 1;
    t->offset = m->num_params;
    t->ndim = cols > 1 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->numel = (size_t)rows * (size_t)cols;
    t->decay = (flags & ZT_TENSOR_DECAY) != 0;
    t->gemm = (flags & ZT_TENSOR_GEMM) != 0;
    t->init = init;
    t->init_std = std;
    if (offset) *offset = t->offset - m->units[t->unit].offset;
    m->num_params += t->numel;
    return ZT_OK;
}

int zt_model_create(const zt_model_ops *ops, void *self, const zt_model_config *mc,
                    const zt_backend *be, int flags, zt_model **out, zt_status *st) {
    *out = NULL;
    if (!ops || !ops->describe || !ops->acts_create || !ops->acts_free || !ops->forward ||
        !ops->backward)
        return zt_fail(st, ZT_EINVAL, "model operations incomplete: describe, acts_create, "
                       "acts_free, forward and backward are required");
    zt_model *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    m->ops = ops;
    m->self = self;
    m->cfg = *mc;
    m->be = be;
    zt_layout L = {m, 0, 0, 0};
    int rc = ops->describe(self, &L, st);
    if (rc == ZT_OK && L.open && m->units[m->n_units - 1].first_tensor == m->n_tensors)
        rc = zt_fail(st, ZT_EINVAL, "unit '%s' has no tensors", m->units[m->n_units - 1].name);
    close_unit(&L);
    if (rc == ZT_OK && m->n_units == 0)
        rc = zt_fail(st, ZT_EINVAL, "describe() listed no units");
    if (rc != ZT_OK) {
        zt_fail_prefix(st, "model '%s'", ops->name ? ops->name : "?");
        zt_model_free(m, 0);
        return rc;
    }
    if ((rc = zt_model_alloc_blocks(m, flags, m->num_params, st)) != ZT_OK) {
        zt_model_free(m, 0);
        return rc;
    }
    *out = m;
    return ZT_OK;
}

int zt_model_alloc_blocks(zt_model *m, int flags, size_t n, zt_status *st) {
    if (m->params || m->grads)
        return zt_fail(st, ZT_EINTERNAL, "model '%s': its blocks exist already",
                       m->ops && m->ops->name ? m->ops->name : "?");
    m->block_elems = n;
    if (flags & ZT_MODEL_PARAMS) {
        m->params = zt_mem_alloc(n * sizeof(float), ZT_MEM_PARAMS, st);
        if (!m->params) return st ? st->code : ZT_ENOMEM;
    }
    if (flags & ZT_MODEL_GRADS) {
        m->grads = zt_mem_alloc(n * sizeof(float), ZT_MEM_GRADS, st);
        if (!m->grads) return st ? st->code : ZT_ENOMEM;
    }
    return ZT_OK;
}

void zt_layout_mark_expert(zt_layout *L) {
    if (L->open) L->m->units[L->m->n_units - 1].expert = 1;
}

void zt_model_free(zt_model *m, int own_self) {
    if (!m) return;
    if (own_self && m->ops && m->ops->destroy) m->ops->destroy(m->self);
    zt_mem_free(m->params);
    zt_mem_free(m->grads);
    free(m->tensors);
    free(m->units);
    free(m);
}

const zt_tensor_info *zt_model_find_tensor(const zt_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; ++i)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* FNV-1a of a name: the per-tensor RNG key. */
static uint64_t name_key(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void zt_model_init_range(const zt_model *m, uint64_t seed, size_t lo, size_t hi, float *dst) {
    for (int i = 0; i < m->n_tensors; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        float *p = dst + (a - lo);
        size_t n = b - a, j0 = a - t->offset;
        if (t->init == ZT_INIT_UNIFORM) {
            /* U(-b, b) as b * (2 u - 1), u in [0, 1) */
            const double s = t->init_std;
            const uint64_t key = zt_hash3(seed, name_key(t->name), 0x756e6966ULL);
            #pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j)
                p[j] = (float)(s * (2.0 * zt_u01(zt_hash3(key, j0 + j, 0)) - 1.0));
        } else if (t->init != ZT_INIT_NORMAL) {
            float v = t->init == ZT_INIT_ONES ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; ++j) p[j] = v;
        } else {
            double s = t->init_std;
            uint64_t key = zt_hash3(seed, name_key(t->name), 0x696e6974ULL);
            #pragma omp parallel for schedule(static)
            for (size_t j = 0; j < n; ++j) p[j] = (float)(s * zt_normal(key, j0 + j));
        }
    }
}

/* ------------------------------------------------------------ public helpers */

void *zt_alloc(size_t bytes, int category, zt_status *st) {
    return zt_mem_alloc(bytes, category, st);
}
void zt_free(void *p) { zt_mem_free(p); }
