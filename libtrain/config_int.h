/*
 * config_int.h -- what the config_*.c files share (private to libtrain).
 *
 * The configuration (config.h, docs/config.md) is split by concern:
 *
 *   config_keys.c     the key table, one row per key, and the lookups in it
 *                     (key paths, flag aliases, environment names, "did you
 *                     mean" suggestions)
 *   config_values.c   value syntax: a key's value parsed from text or JSON
 *                     and range-checked, its "must be ..." requirement
 *   config_sources.c  sources and their precedence: storing with provenance,
 *                     new/dup/free, zt_config_set (flags), the JSON file, the
 *                     environment
 *   config_ds.c       DeepSpeed / Hugging Face compatibility: keys accepted
 *                     with no effect, "auto" for numbers and switches, keys
 *                     mapped onto ztrain's, and their notes in describe
 *   config_check.c    zt_config_finalize: cross-key validation, site limits,
 *                     the derived values (batch triple, seq_len, ...)
 *   config_output.c   describe, get, to_json and the help text
 *
 * Adding a key = a field in config.h and a row in config_keys.c; a rule
 * between keys goes into config_check.c.
 */
#ifndef ZT_CONFIG_INT_H
#define ZT_CONFIG_INT_H

#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "internal.h"

/* ================================================================ table */

enum ktype {
    T_INT,      /* int field                                   */
    T_LONG,     /* long field                                  */
    T_U64,      /* unsigned long long field                    */
    T_DOUBLE,   /* double field                                */
    T_BOOL,     /* int field, 0/1                              */
    T_STRING,   /* char[] field                                */
    T_ENUM,     /* char[] field, one of `values` (canonical)   */
    T_PAIR,     /* two consecutive double fields (betas)       */
    T_PSEUDO    /* no field: expands into other keys           */
};

/* key flags */
#define KF_LO_OPEN   0x01u  /* lower bound exclusive (numbers)          */
#define KF_HI_OPEN   0x02u  /* upper bound exclusive (numbers)          */
#define KF_NO_HI     0x04u  /* no upper bound (up to the type's max)    */
#define KF_NONEMPTY  0x08u  /* strings: must not be empty               */
#define KF_AUTO      0x10u  /* "auto" accepted: 0 (derive), or -1 with KF_FIT */
#define KF_FIT       0x20u  /* with KF_AUTO: "auto" = fit to the memory limit (-1) */
#define KF_SIZE      0x40u  /* T_U64: a byte size, "8G", "512M", "auto" = 0 */
#define KF_ACKPT     0x80u  /* T_STRING: none | blocks | blocks-attn | every-K */
#define KF_REPORT    0x100u /* T_STRING: off | end | N; a flag may omit the value */
#define KF_NODE      0x200u /* T_INT: "node" accepted (ZT_SHARD_GROUP_NODE) */

typedef struct keydef {
    const char *key;      /* JSON path                                     */
    const char *flags;    /* space-separated short flag aliases (or NULL)  */
    const char *env;      /* short env name besides the generic (or NULL)  */
    const char *json_alias; /* other JSON path accepted in files (or NULL) */
    int type;             /* enum ktype                                    */
    size_t off, size;     /* field                                         */
    double lo, hi;        /* numeric range                                 */
    unsigned kf;          /* KF_*                                          */
    const char *def;      /* default in string syntax (NULL: pseudo-key)   */
    const char *values;   /* T_ENUM / T_PSEUDO: allowed values, '|'-separated */
    const char *help;
} keydef;

#define FLD(f) offsetof(struct zt_config, f), sizeof(((struct zt_config *)0)->f)
#define NOFLD 0, 0

/* A parsed value before it is stored. */
typedef struct kval {
    long long i;            /* T_INT, T_LONG, T_BOOL */
    unsigned long long u;   /* T_U64 */
    double d[2];            /* T_DOUBLE, T_PAIR */
    const char *s;          /* T_STRING, T_ENUM (canonical), T_PSEUDO */
    char canon[32];         /* canonical spelling of an enum value */
} kval;

/* ---- config_keys.c: the table (indexed like zt_config.src) and lookups */
extern const keydef zt_cfg_keys[];
extern const int zt_cfg_nkeys;
#define NKEYS zt_cfg_nkeys

static inline void *fieldp(zt_config *cfg, const keydef *k) { return (char *)cfg + k->off; }
static inline const void *cfieldp(const zt_config *cfg, const keydef *k) {
    return (const char *)cfg + k->off;
}
/* Index of a key path; -1 if none. */
int zt_cfg_key_index(const char *key);
/* A key path, a flag alias (with or without leading "--") or a JSON alias. */
int zt_cfg_lookup(const char *name);
/* Generic environment name of a key: ZTRAIN_ + path upper-cased. */
void zt_cfg_env_generic(const char *key, char *buf, size_t n);
/* Closest known key path for an unknown one, NULL if none is close. */
const char *zt_cfg_suggest_key(const char *name, int with_aliases);
/* 1 if name is a ZTRAIN_ variable the configuration knows or allows. */
int zt_cfg_env_is_known(const char *name);
/* Closest known ZTRAIN_ name into best[n]; returns best or NULL. */
const char *zt_cfg_suggest_env(const char *name, char *best, size_t n);

/* ---- config_values.c: value syntax */
/* "%.15g" of x, more digits where needed to read back exactly. */
void zt_cfg_fmt_double(double x, char *buf, size_t n);
/* "must be ..." text of a key's requirement. */
void zt_cfg_requirement(const keydef *k, char *buf, size_t n);
/* Parse a value from text / from JSON: ZT_OK or ZT_EINVAL (see requirement). */
int zt_cfg_parse_str(const keydef *k, const char *s, kval *out);
int zt_cfg_parse_json(const keydef *k, const json_t *v, kval *out);

/* ---- config_sources.c: storing with precedence */
/* Write a parsed value into its field (no precedence, no provenance). */
void zt_cfg_store_raw(zt_config *cfg, int idx, const kval *v);
/* Store a parsed value honoring precedence; expands pseudo-keys. */
void zt_cfg_store(zt_config *cfg, int idx, const kval *v, int src);
/* Replace dst's contents by tmp's (and free tmp). */
void zt_cfg_commit(zt_config *dst, zt_config *tmp);

/* ---- config_ds.c: DeepSpeed / Hugging Face compatibility */
/* A DeepSpeed key with no ztrain counterpart: accepted (1), refused (-1 with
 * st set), or unknown (0). */
int zt_cfg_ds_compat(zt_config *cfg, const char *file, const char *path, json_t *v,
                     zt_status *st);
/* Hugging Face's "auto" for key idx (-1: not a key) given as v: 1 when it
 * keeps ztrain's own value (and is listed for describe), 0 otherwise. */
int zt_cfg_ds_auto(zt_config *cfg, int idx, const char *path, const json_t *v);
/* out (malloc'ed) with the DeepSpeed notes appended, each listed once. */
char *zt_cfg_describe_ds(const zt_config *cfg, char *out);

#endif /* ZT_CONFIG_INT_H */
