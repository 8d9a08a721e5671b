/* fuzz_hf_index.c -- the sharded safetensors index of a Hugging Face model directory (ckpt/hf_model.c,
 * zt_hf_load): the input as model.safetensors.index.json in a directory holding the three shards and the
 * config.json of the tiny Llama fixture (tests/fixtures/hf/llama, linked); the index names which shard
 * holds which tensor, and every shard it names is opened and checked.  The context (the fixture's model)
 * is made once, in LLVMFuzzerInitialize (zt_init starts MPI: run this one without leak detection). */
#include <sys/stat.h>
#include "fuzz.h"
#include "ztrain.h"
#include "ztrain_ckpt.h"

static zt_ctx *ctx;
static char dir[600];
static void done(void) {   /* before fuzz.h's scratch removal (atexit runs in reverse order) */
    zt_ctx_free(ctx);
    zt_finalize();
}

static void set(zt_config *c, const char *k, const char *v) {
    zt_status st = {0};
    if (zt_config_set(c, k, v, ZT_SRC_FLAG, &st) != ZT_OK) { fprintf(stderr, "fuzz: %s: %s\n", k, st.msg); abort(); }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    zt_status st = {0};
    if (zt_init(argc, argv, &st) != ZT_OK) { fprintf(stderr, "fuzz: zt_init: %s\n", st.msg); abort(); }
    char fx[600];
    snprintf(fx, sizeof fx, "%s/tests/fixtures/hf/llama", fz_srcdir());
    snprintf(dir, sizeof dir, "%s/model", fz_tmpdir());
    if (mkdir(dir, 0755) != 0) { perror(dir); abort(); }
    static const char *const files[] = {"config.json", "model-00001-of-00003.safetensors",
                                        "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
    for (int i = 0; i < 4; ++i) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s", fx, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        if (symlink(a, b) != 0) { perror(b); abort(); }
    }
    zt_config *cfg = zt_config_new();
    if (!cfg || zt_hf_read_config(dir, cfg, &st) != ZT_OK) { fprintf(stderr, "fuzz: %s\n", st.msg); abort(); }
    set(cfg, "train_micro_batch_size_per_gpu", "1");
    set(cfg, "gradient_accumulation_steps", "1");
    set(cfg, "ztrain.seq_len", "8");
    set(cfg, "ztrain.threads", "1");
    set(cfg, "ztrain.backend", "cpu");
    set(cfg, "ztrain.data.train", "");
    set(cfg, "ztrain.data.val", "");
    if (zt_ctx_create(cfg, NULL, &ctx, &st) != ZT_OK) { fprintf(stderr, "fuzz: zt_ctx_create: %s\n", st.msg); abort(); }
    zt_config_free(cfg);
    atexit(done);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char name[700];
    snprintf(name, sizeof name, "model/model.safetensors.index.json");
    fz_write(name, data, size);
    zt_status st = {0};
    (void)zt_hf_load(ctx, dir, &st);
    return 0;
}
