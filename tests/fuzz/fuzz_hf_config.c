/* fuzz_hf_config.c -- the Hugging Face config.json mapping (ckpt/hf_model.c): the input as config.json,
 * read into a fresh configuration (zt_hf_read_config), its architecture name, and the check of the
 * configuration it produced against the same file (zt_hf_check_config). */
#include "fuzz.h"
#include "ztrain.h"
#include "ztrain_ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_write("config.json", data, size);
    zt_status st = {0};
    zt_config *cfg = zt_config_new();
    if (!cfg) abort();
    (void)zt_hf_arch_name(p);
    if (zt_hf_read_config(p, cfg, &st) == ZT_OK) (void)zt_hf_check_config(p, cfg, &st);
    zt_config_free(cfg);
    return 0;
}
