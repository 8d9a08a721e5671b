/*
 * llama_ref.c -- what tests/llama_hf.sh compares with transformers:
 *
 *   llama_ref inv_freq HEAD_DIM THETA none|llama3 [FACTOR LOW HIGH ORIGINAL_MAX]
 *     zt_llama_inv_freq, one value per line, %.9e (exact for fp32)
 *   llama_ref forward DIR L NH NKV C HD H V T TIED BIAS THETA none|llama3
 *     builds the Llama model (seed 11, parameters moved off the symmetric
 *     init), runs a forward on 2 x T pseudo-random tokens and writes into DIR:
 *     params.bin (every tensor, fp32, layout order), manifest.txt (name,
 *     element offset, rows, cols per line), tokens.txt (inputs, then
 *     targets), probs.bin ([2T, V] fp32 softmax) and loss.txt (mean).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
#include "shard.h"

static void base(zt_model_config *mc, int hd, double theta, const char *scaling) {
    snprintf(mc->arch, sizeof mc->arch, "llama");
    snprintf(mc->rope_scaling, sizeof mc->rope_scaling, "%s", scaling);
    mc->head_dim = hd;
    mc->rope_theta = theta;
    mc->norm_eps = 1e-5;
    mc->rope_factor = 8;
    mc->rope_low_freq_factor = 1;
    mc->rope_high_freq_factor = 4;
    mc->rope_original_max = 16;   /* forward: short enough that llama3 scales */
    mc->pad_token_id = -1;        /* none (0 would be token 0) */
}

static int inv_freq(int argc, char **argv) {
    if (argc != 5 && argc != 9) return 2;
    zt_model_config mc = {.n_layer = 1, .n_head = 1, .n_embd = atoi(argv[2]), .context = 1, .vocab = 2};
    base(&mc, 0, atof(argv[3]), argv[4]);
    mc.rope_factor = argc == 9 ? atof(argv[5]) : 8;
    mc.rope_low_freq_factor = argc == 9 ? atof(argv[6]) : 1;
    mc.rope_high_freq_factor = argc == 9 ? atof(argv[7]) : 4;
    mc.rope_original_max = argc == 9 ? atoi(argv[8]) : 8192;
    const int hd = zt_model_head_dim(&mc);
    if (hd < 2 || hd % 2 || hd > 4096) return 2;
    float *f = malloc(sizeof(float) * (size_t)(hd / 2));
    if (!f) return 1;
    zt_llama_inv_freq(&mc, f);
    for (int j = 0; j < hd / 2; ++j) printf("%.9e\n", f[j]);
    free(f);
    return 0;
}

static FILE *open_in(const char *dir, const char *name, const char *mode) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, mode);
    if (!f) fprintf(stderr, "llama_ref: cannot write %s\n", p);
    return f;
}

static int forward(int argc, char **argv) {
    if (argc != 16) return 2;
    const char *dir = argv[2];
    zt_model_config mc = {.n_layer = atoi(argv[3]), .n_head = atoi(argv[4]), .n_embd = atoi(argv[6]),
                          .vocab = atoi(argv[9]), .context = atoi(argv[10])};
    base(&mc, atoi(argv[7]), atof(argv[14]), argv[15]);
    mc.n_kv_head = atoi(argv[5]);
    mc.intermediate = atoi(argv[8]);
    mc.tie_embeddings = atoi(argv[11]);
    mc.attention_bias = atoi(argv[12]);
    (void)argv[13];   /* (reserved) */
    const int B = 2, T = mc.context, N = B * T, V = mc.vocab;
    const zt_backend *be = zt_backend_cpu();
    be->set_threads(1);
    zt_status st;
    zt_llama *lm;
    zt_model *m;
    zt_shard *sh;
    void *a;
    if (zt_llama_new(&mc, be, &lm, &st) != ZT_OK ||
        zt_model_create(zt_llama_ops(), lm, &mc, be, ZT_MODEL_PARAMS | ZT_MODEL_GRADS, &m, &st) != ZT_OK ||
        zt_shard_create(m, 0, 1, NULL, &sh, &st) != ZT_OK ||
        zt_shard_init_params(sh, 11) != ZT_OK ||
        zt_llama_ops()->acts_create(lm, B, T, 0, ZT_MEM_EVAL, &a, &st) != ZT_OK) {
        fprintf(stderr, "llama_ref: %s\n", st.msg);
        return 1;
    }
    /* norms away from ones, biases away from zero, larger weights */
    for (size_t i = 0; i < m->num_params; ++i) m->params[i] += (float)(0.3 * zt_normal(5, i));
    int *in = malloc(sizeof(int) * (size_t)N * 2), *tg = in + N;
    for (int i = 0; i < N; ++i) {
        in[i] = (int)(zt_hash3(3, (uint64_t)i, 0) % (uint64_t)V);
        tg[i] = (int)(zt_hash3(4, (uint64_t)i, 0) % (uint64_t)V);
    }
    double loss = 0;
    if (zt_shard_forward(sh, a, in, tg, B, T, 0, &loss, &st) != ZT_OK) {
        fprintf(stderr, "llama_ref: forward: %s\n", st.msg);
        return 1;
    }
    FILE *fp = open_in(dir, "params.bin", "wb"), *fm = open_in(dir, "manifest.txt", "w");
    FILE *ft = open_in(dir, "tokens.txt", "w"), *fq = open_in(dir, "probs.bin", "wb");
    FILE *fl = open_in(dir, "loss.txt", "w");
    if (!fp || !fm || !ft || !fq || !fl) return 1;
    fwrite(m->params, sizeof(float), m->num_params, fp);
    for (int t = 0; t < m->n_tensors; ++t)
        fprintf(fm, "%s %zu %d %d\n", m->tensors[t].name, m->tensors[t].offset, m->tensors[t].shape[0],
                m->tensors[t].shape[1]);
    for (int i = 0; i < 2 * N; ++i) fprintf(ft, "%d\n", in[i]);
    for (int i = 0; i < N; ++i)
        fwrite(zt_llama_ops()->probs(lm, a, i / T, i % T), sizeof(float), (size_t)V, fq);
    fprintf(fl, "%.9e\n", loss / N);
    fclose(fp); fclose(fm); fclose(ft); fclose(fq); fclose(fl);
    free(in);
    zt_llama_ops()->acts_free(lm, a);
    zt_shard_free(sh);
    zt_model_free(m, 1);
    return 0;
}

int main(int argc, char **argv) {
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "inv_freq")) rc = inv_freq(argc, argv);
    else if (argc >= 2 && !strcmp(argv[1], "forward")) rc = forward(argc, argv);
    if (rc == 2)
        fprintf(stderr, "usage: llama_ref inv_freq HEAD_DIM THETA none|llama3 [FACTOR LOW HIGH ORIG_MAX]\n"
                        "       llama_ref forward DIR L NH NKV C HD H V T TIED BIAS 0 THETA none|llama3\n");
    return rc;
}
