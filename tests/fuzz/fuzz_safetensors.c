/* fuzz_safetensors.c -- the safetensors reader (ckpt/safetensors.c): the input as a .safetensors file;
 * when it opens, every tensor is looked up by name, checked for a float dtype and, when it converts,
 * read back in chunks (at most 64 Ki elements per tensor). */
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_write("model.safetensors", data, size);
    zt_status st = {0};
    zt_st_file f;
    memset(&f, 0, sizeof f);
    if (zt_st_open(p, &f, &st) != ZT_OK) return 0;
    static float buf[4096];
    for (int i = 0; i < f.n; ++i) {
        const zt_st_tensor *t = &f.t[i];
        if (zt_st_find(&f, t->name) != t) abort();      /* names are unique and sorted */
        char shape[256];
        zt_st_shape_str(t->ndim, t->shape, shape, sizeof shape);
        if (zt_st_check_float(&f, t, &st) != ZT_OK) continue;
        uint64_t n = t->numel < 65536 ? t->numel : 65536;
        for (uint64_t k = 0; k < n; k += 4096) {
            uint64_t m = n - k < 4096 ? n - k : 4096;
            if (zt_st_read(&f, t, k, m, buf, &st) != ZT_OK) break;
        }
    }
    zt_st_close(&f);
    return 0;
}
