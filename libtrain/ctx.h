/* ctx.h -- the training context (internal layout of zt_ctx). */
#ifndef ZT_CTX_H
#define ZT_CTX_H
#include <stdio.h>
#include "comm.h"
#include "config.h"
#include "model.h"
#include "optim.h"
#include "shard.h"
#include "state.h"

struct zt_ctx {
    zt_config *cfg;              /* finalized copy */
    zt_callbacks cb;
    const zt_backend *be;
    zt_group *world;
    int rank, nranks, threads;
    zt_gpt *model;
    zt_shard *sh;                /* the ZeRO engine */
    zt_gpt_acts acts;            /* training [micro_batch, context] */
    zt_gpt_acts eval_acts;       /* forward-only [eval_batch_size, context] */
    zt_gpt_acts sample_acts;     /* forward-only [1, context] */
    zt_adamw opt;
    zt_data_source train, val;
    int has_train, has_val;
    long step;
    double train_time_s;         /* wall time inside train steps */
    FILE *metrics_fp;            /* rank 0 */
    double last_val_loss;
    zt_owned_range *owned;       /* zt_ctx_owned_state's ranges */
    int n_owned;
    zt_step_hook hook;
    void *hook_user;
};

/* Log through the callback (printf-style). */
void zt_log(const zt_ctx *ctx, int level, const char *fmt, ...) ZT_PRINTF(3, 4);

#endif
