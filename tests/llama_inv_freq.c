/* llama_inv_freq.c -- prints zt_llama_inv_freq for a head dim, theta and
 * scaling (tests/llama_hf_rope.sh compares it with transformers'):
 *   llama_inv_freq HEAD_DIM THETA none|llama3 [FACTOR LOW HIGH ORIGINAL_MAX]
 * one value per line, %.9e (exact for fp32). */
#include <stdio.h>
#include <stdlib.h>
#include "llama.h"

int main(int argc, char **argv) {
    if (argc != 4 && argc != 8) {
        fprintf(stderr, "usage: %s HEAD_DIM THETA none|llama3 [FACTOR LOW HIGH ORIGINAL_MAX]\n", argv[0]);
        return 2;
    }
    zt_model_config mc = {.n_layer = 1, .n_head = 1, .n_embd = atoi(argv[1]), .context = 1, .vocab = 2};
    mc.rope_theta = atof(argv[2]);
    snprintf(mc.rope_scaling, sizeof mc.rope_scaling, "%s", argv[3]);
    mc.rope_factor = argc == 8 ? atof(argv[4]) : 8;
    mc.rope_low_freq_factor = argc == 8 ? atof(argv[5]) : 1;
    mc.rope_high_freq_factor = argc == 8 ? atof(argv[6]) : 4;
    mc.rope_original_max = argc == 8 ? atoi(argv[7]) : 8192;
    const int hd = zt_model_head_dim(&mc);
    if (hd < 2 || hd % 2 || hd > 4096) { fprintf(stderr, "bad head dim %d\n", hd); return 2; }
    float *f = malloc(sizeof(float) * (size_t)(hd / 2));
    if (!f) return 1;
    zt_llama_inv_freq(&mc, f);
    for (int j = 0; j < hd / 2; ++j) printf("%.9e\n", f[j]);
    free(f);
    return 0;
}
