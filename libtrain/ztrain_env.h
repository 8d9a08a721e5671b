/*
 * ztrain_env.h -- the ZTRAIN_* environment contract.
 *
 * One header, included by both the Slurm SPANK plugin (plugin/, which SETS
 * these variables per task) and libtrain (which READS them as the
 * "environment" configuration source, between the JSON file and flags).
 * Plain C, no dependencies: the plugin must not pull in MPI, CUDA or libtrain.
 *
 * Every configuration key also has a generic variable: ZTRAIN_ followed by
 * its JSON path in upper case with '.' replaced by '_' and a leading
 * "ztrain." dropped (optimizer.params.lr -> ZTRAIN_OPTIMIZER_PARAMS_LR,
 * ztrain.model.n_layer -> ZTRAIN_MODEL_N_LAYER).  The names below are the
 * short forms the plugin sets; they take the same values as the keys.
 */
#ifndef ZTRAIN_ENV_H
#define ZTRAIN_ENV_H

/* zero_optimization.stage: 0..3 */
#define ZTRAIN_ENV_STAGE        "ZTRAIN_STAGE"
/* ztrain.data.dataloaders: worker threads per rank, >= 1 */
#define ZTRAIN_ENV_DATALOADERS  "ZTRAIN_DATALOADERS"
/* ztrain.checkpoint.resume: auto | never | PATH */
#define ZTRAIN_ENV_RESUME       "ZTRAIN_RESUME"
/* ztrain.checkpoint.dir: PATH */
#define ZTRAIN_ENV_CKPT_DIR     "ZTRAIN_CKPT_DIR"
/* ztrain.checkpoint.every: steps between periodic checkpoints, 0 = off */
#define ZTRAIN_ENV_CKPT_EVERY   "ZTRAIN_CKPT_EVERY"
/* zero_optimization.offload_*: none | optimizer | params */
#define ZTRAIN_ENV_OFFLOAD      "ZTRAIN_OFFLOAD"
/* precision: fp32 | bf16 | fp16 (sets bf16.enabled / fp16.enabled) */
#define ZTRAIN_ENV_PRECISION    "ZTRAIN_PRECISION"
/* activation_checkpointing.policy: none | blocks | every-K */
#define ZTRAIN_ENV_ACT_CKPT     "ZTRAIN_ACT_CKPT"

/* Informational variables set by the plugin (not configuration keys). */
/* GPU binding mode the plugin applied: none | local | map:LIST */
#define ZTRAIN_ENV_GPU_BIND     "ZTRAIN_GPU_BIND"
/* Number of times Slurm requeued/restarted this job (0 on first run). */
#define ZTRAIN_ENV_RESTART_COUNT "ZTRAIN_RESTART_COUNT"
/* Global task rank and node-local task id as Slurm saw them; libtrain
 * checks them against MPI's view. */
#define ZTRAIN_ENV_SLURM_RANK   "ZTRAIN_SLURM_RANK"
#define ZTRAIN_ENV_SLURM_LOCAL  "ZTRAIN_SLURM_LOCALID"
/* Set to "1" by the plugin so libtrain knows the contract was applied. */
#define ZTRAIN_ENV_PLUGIN       "ZTRAIN_PLUGIN"
/* OMP_NUM_THREADS value the plugin computed for the task (max(1, CPUs per
 * task - dataloaders)); marks OMP_NUM_THREADS as the plugin's, so a later
 * step (srun inside a batch script) recomputes it instead of keeping it. */
#define ZTRAIN_ENV_OMP_AUTO     "ZTRAIN_OMP_AUTO"

/* Allowed values, shared so both sides validate identically. */
#define ZTRAIN_STAGE_MIN 0
#define ZTRAIN_STAGE_MAX 3
#define ZTRAIN_DATALOADERS_MIN 1
#define ZTRAIN_DATALOADERS_MAX 256

#endif /* ZTRAIN_ENV_H */
