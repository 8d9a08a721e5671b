/* testutil.h -- helpers shared by the C tests (header-only). */
#ifndef ZT_TESTUTIL_H
#define ZT_TESTUTIL_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "ztrain.h"
#include "tokens.h"

/* A fresh temporary directory (removed by tu_rmdir). */
static inline char *tu_tmpdir(void) {
    static char buf[256];
    const char *base = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/zttest.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(buf);
}
static inline void tu_rmdir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", dir);
}

/* Set a config key from a printf-formatted value (as a flag). */
static inline int tu_set(zt_config *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int tu_set(zt_config *c, const char *key, const char *fmt, ...) {
    char v[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    zt_status st;
    int rc = zt_config_set(c, key, v, ZT_SRC_FLAG, &st);
    if (rc) printf("# tu_set %s=%s: %s\n", key, v, st.msg);
    return rc;
}

/* A tiny model config: L layers, NH heads, C wide, context T, vocab V. */
static inline zt_config *tu_tiny_config(int L, int NH, int C, int T, int V, int B) {
    zt_config *c = zt_config_new();
    tu_set(c, "ztrain.model.n_layer", "%d", L);
    tu_set(c, "ztrain.model.n_head", "%d", NH);
    tu_set(c, "ztrain.model.n_embd", "%d", C);
    tu_set(c, "ztrain.model.context", "%d", T);
    tu_set(c, "ztrain.model.vocab", "%d", V);
    tu_set(c, "train_micro_batch_size_per_gpu", "%d", B);
    tu_set(c, "ztrain.data.train", "%s", "");
    tu_set(c, "ztrain.data.val", "%s", "");
    tu_set(c, "ztrain.threads", "%d", 1);
    return c;
}

/* Write a deterministic pseudo-text token file of n tokens below V. */
static inline int tu_write_tokens(const char *path, size_t n, int V, unsigned seed) {
    uint16_t *t = malloc(n * sizeof *t);
    unsigned x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x = x * 1103515245u + 12345u;
        /* some structure: mostly a repeating pattern plus noise */
        t[i] = (uint16_t)(((i % 7) * 3 + ((x >> 16) % 3)) % (unsigned)V);
    }
    zt_status st;
    int rc = zt_tokens_write(path, t, n, &st);
    if (rc) printf("# tu_write_tokens: %s\n", st.msg);
    free(t);
    return rc;
}
#endif
