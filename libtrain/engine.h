/* engine.h -- the training context as the rooms above the engine (ckpt/,
 * io/) see it: accessors, never its layout.  ctx.h (struct zt_ctx) is the
 * engine's own and stays inside libtrain/. */
#ifndef ZT_ENGINE_H
#define ZT_ENGINE_H
#include "comm.h"
#include "config.h"
#include "gpt.h"
#include "llama.h"
#include "model.h"
#include "optim.h"
#include "shard.h"
#include "state.h"

/* This rank and the world size of the context's world group. */
int zt_ctx_rank(const zt_ctx *ctx);
int zt_ctx_nranks(const zt_ctx *ctx);
/* The world group (collectives of the checkpoint code, where-messages). */
zt_group *zt_ctx_world(const zt_ctx *ctx);
/* The compute backend (ztrain.backend) the context's tensors live on. */
const zt_backend *zt_ctx_backend(const zt_ctx *ctx);
/* The model (layout + operations) and the ZeRO engine over its units. */
zt_model *zt_ctx_model(const zt_ctx *ctx);
zt_shard *zt_ctx_shard(const zt_ctx *ctx);
/* LoRA (lora.h): the adapters' layout and engine -- the trained state a
 * checkpoint holds (zt_ctx_owned_state) -- NULL without LoRA.  The base
 * (zt_ctx_model / zt_ctx_shard) is then frozen. */
zt_model *zt_ctx_lora_model(const zt_ctx *ctx);
zt_shard *zt_ctx_lora_shard(const zt_ctx *ctx);
/* The frozen base's fingerprint, recorded by the loader of its weights
 * (zt_hf_load): one checksum per base tensor (FNV-1a 64 of its fp32 values
 * as loaded; n = zt_ctx_model's n_tensors) and of the config.json. */
void zt_ctx_set_base_fingerprint(zt_ctx *ctx, const uint64_t *tensor_fnv, uint64_t config_fnv);
/* NULL when none was recorded (a random base). */
const uint64_t *zt_ctx_base_fingerprint(const zt_ctx *ctx, uint64_t *config_fnv);

/* One scalar for the run's watchers (ztrain.tensorboard.dir, rank 0; a no-op
 * elsewhere or without it): TAG ("checkpoint/save_s") at STEP. */
void zt_ctx_scalar(zt_ctx *ctx, const char *tag, long step, double value);

/* The caller's progress receiver (zt_callbacks.progress; never NULL). */
const zt_progress *zt_ctx_progress(const zt_ctx *ctx);

/* Log through the context's callback (printf-style). */
void zt_log(const zt_ctx *ctx, int level, const char *fmt, ...) ZT_PRINTF(3, 4);

/* The end of a run (zt_run): after training, before the llm.c weights file
 * (ZT_END_EXPORT) and the text sample (ZT_END_SAMPLE, [1, sample_window]).
 * 1 when that step is predicted to fit the limits the pre-flight check used
 * (the plan recomputed for sample_window; on a GPU target device memory and
 * the host limit), or when nothing is checked: a model of the caller's own,
 * no known limit, or a run started over its limit (ztrain.force).  0: it
 * does not fit; why[n] says how much it needs and the limit ("predicted
 * peak 12.13 GiB per rank exceeds the limit 11.95 GiB (free device memory
 * of ...)").  The figures count zt_ctx_release_activations first. */
enum { ZT_END_EXPORT = 0, ZT_END_SAMPLE = 1 };
int zt_ctx_end_fits(zt_ctx *ctx, int step, int sample_window, char *why, size_t n);

#endif
