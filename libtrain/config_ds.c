/*
 * config_ds.c -- DeepSpeed and Hugging Face compatibility of config files:
 * DeepSpeed keys accepted with no effect, Hugging Face's "auto" for numbers
 * and switches (ztrain's own value is kept), DeepSpeed keys mapped onto a
 * ztrain key, and the notes zt_config_describe prints about them.  (The
 * batch triple's "auto" is a value of its keys: config_check.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"

/* DeepSpeed keys accepted with no effect in ztrain: bucket sizes (ztrain
 * communicates one model unit at a time), stage-3 prefetch/persistence/live
 * parameter limits (whole units are gathered and released), flags ztrain
 * always behaves as (contiguous gradients, reduce-scatter, partitioned
 * all-gather), and reporting/saving switches. */
static const char *const ds_noeffect_keys[] = {
    "zero_optimization.allgather_partitions", "zero_optimization.allgather_bucket_size",
    "zero_optimization.reduce_bucket_size", "zero_optimization.reduce_scatter",
    "zero_optimization.contiguous_gradients", "zero_optimization.round_robin_gradients",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save",
    "zero_optimization.stage3_gather_fp16_weights_on_model_save",
    "zero_optimization.sub_group_size", "zero_optimization.load_from_fp32_weights",
    "zero_optimization.elastic_checkpoint", "zero_optimization.ignore_unused_parameters",
    "zero_optimization.memory_efficient_linear", "wall_clock_breakdown",
    "optimizer.params.torch_adam", "zero_allow_untested_optimizer", "prescale_gradients",
    "gradient_predivide_factor", "dump_state", "memory_breakdown",
    "flops_profiler.enabled", "tensorboard.enabled", "wandb.enabled", "csv_monitor.enabled",
    NULL,
};

static void note_key(char *list, size_t n, const char *path) {
    size_t l = strlen(list);
    if (l + strlen(path) + 3 < n) snprintf(list + l, n - l, "%s%s", l ? ", " : "", path);
}

/* Hugging Face's "auto" for a number or switch: the value ztrain derives or
 * defaults to (where "auto" is a value of the key, it is one: the batch
 * triple, sizes, enums and strings parse it themselves). */
int zt_cfg_ds_auto(zt_config *cfg, int idx, const char *path, const json_t *v) {
    if (idx >= 0 && !(zt_cfg_keys[idx].kf & (KF_AUTO | KF_SIZE)) && zt_cfg_keys[idx].type != T_ENUM &&
        zt_cfg_keys[idx].type != T_STRING && json_is_string(v) &&
        strcasecmp(json_string_value(v), "auto") == 0) {
        note_key(cfg->ds_auto, sizeof cfg->ds_auto, path);
        return 1;
    }
    return 0;
}

/* A DeepSpeed key with no ztrain counterpart: accepted (1), refused (-1 with
 * st set), or unknown (0). */
int zt_cfg_ds_compat(zt_config *cfg, const char *file, const char *path, json_t *v,
                     zt_status *st) {
    for (int i = 0; ds_noeffect_keys[i]; ++i)
        if (!strcmp(path, ds_noeffect_keys[i])) {
            note_key(cfg->ds_noeffect, sizeof cfg->ds_noeffect, path);
            return 1;
        }
    if (!strcmp(path, "zero_optimization.zero_hpz_partition_size")) {
        /* hpZ (ZeRO++: a secondary parameter partition inside groups of N
         * ranks, the same results): 1 = off; N > 1 = ztrain's hybrid
         * sharding over groups of N (zero_optimization.shard_group_size) */
        if (json_is_integer(v) && json_integer_value(v) == 1) {
            note_key(cfg->ds_noeffect, sizeof cfg->ds_noeffect, path);
            return 1;
        }
        if (json_is_integer(v) && json_integer_value(v) > 1 && json_integer_value(v) < 1048576) {
            char n[32];
            snprintf(n, sizeof n, "%lld", (long long)json_integer_value(v));
            if (zt_config_set(cfg, "zero_optimization.shard_group_size", n, ZT_SRC_FILE, st) != ZT_OK)
                return -1;
            note_key(cfg->ds_mapped, sizeof cfg->ds_mapped,
                     "zero_hpz_partition_size -> zero_optimization.shard_group_size");
            return 1;
        }
        zt_fail(st, ZT_EINVAL, "%s: zero_optimization.zero_hpz_partition_size must be an integer "
                ">= 1 (1 = off; N = hybrid sharding over groups of N ranks)", file);
        return -1;
    }
    return 0;
}

/* The DeepSpeed notes after the table, each listed once. */
char *zt_cfg_describe_ds(const zt_config *cfg, char *out) {
    if (!cfg->ds_noeffect[0] && !cfg->ds_auto[0] && !cfg->ds_mapped[0]) return out;
    size_t n = strlen(out) + strlen(cfg->ds_noeffect) + strlen(cfg->ds_auto) +
               strlen(cfg->ds_mapped) + 200;
    char *r = realloc(out, n);
    if (!r) return out;
    size_t j = strlen(r);
    if (cfg->ds_auto[0])
        j += (size_t)snprintf(r + j, n - j, "  \"auto\" (ztrain's own value above): %s\n", cfg->ds_auto);
    if (cfg->ds_mapped[0])
        j += (size_t)snprintf(r + j, n - j, "  mapped onto ztrain's knob: %s\n", cfg->ds_mapped);
    if (cfg->ds_noeffect[0])
        snprintf(r + j, n - j, "  no effect in ztrain (accepted for DeepSpeed configs): %s\n",
                 cfg->ds_noeffect);
    return r;
}
