/*
 * zt_opts.c -- option parsing and validation for the ztrain SPANK plugin.
 * No Slurm headers here: see zt_opts.h.
 */
#include "zt_opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

const struct zt_opt_desc zt_opt_table[ZT_OPT_COUNT] = {
    [ZT_OPT_STAGE] = {
        "ztrain-stage", "0..3",
        ZT_TAG " ZeRO sharding stage: 0 (plain data parallel), 1 (optimizer states), "
        "2 (+gradients), 3 (+parameters)",
        ZTRAIN_ENV_STAGE },
    [ZT_OPT_DATALOADERS] = {
        "ztrain-dataloaders", "N",
        ZT_TAG " data loader threads per rank (1.." STR(ZTRAIN_DATALOADERS_MAX)
        "); OMP_NUM_THREADS gets the remaining CPUs of the task",
        ZTRAIN_ENV_DATALOADERS },
    [ZT_OPT_GPU_BIND] = {
        "ztrain-gpu-bind", "none|local|map:LIST",
        ZT_TAG " GPU binding per task: none, local (split the step's GPUs by local "
        "task id) or map:ID,ID,... (local task i gets ID number i)",
        ZTRAIN_ENV_GPU_BIND },
    [ZT_OPT_RESUME] = {
        "ztrain-resume", "auto|never|PATH",
        ZT_TAG " resume from the newest checkpoint (auto), start fresh (never) or "
        "from the checkpoint at PATH",
        ZTRAIN_ENV_RESUME },
    [ZT_OPT_CKPT_DIR] = {
        "ztrain-ckpt-dir", "PATH",
        ZT_TAG " checkpoint directory (default: <ckpt_root or submit dir>/ztrain-<jobid>)",
        ZTRAIN_ENV_CKPT_DIR },
    [ZT_OPT_CKPT_EVERY] = {
        "ztrain-ckpt-every", "N",
        ZT_TAG " save a checkpoint every N optimizer steps (0 = only on signal/exit)",
        ZTRAIN_ENV_CKPT_EVERY },
    [ZT_OPT_OFFLOAD] = {
        "ztrain-offload", "none|optimizer|params",
        ZT_TAG " offload optimizer states, or optimizer states and parameters, to host memory",
        ZTRAIN_ENV_OFFLOAD },
    [ZT_OPT_PRECISION] = {
        "ztrain-precision", "fp32|bf16|fp16",
        ZT_TAG " training precision",
        ZTRAIN_ENV_PRECISION },
};

const char zt_site_keys[] =
    "default_stage, max_stage, default_dataloaders, max_dataloaders, "
    "default_precision, default_offload, default_gpu_bind, default_resume, "
    "default_ckpt_every, ckpt_root";

static const char *const precisions[] = { "fp32", "bf16", "fp16", NULL };
static const char *const offloads[] = { "none", "optimizer", "params", NULL };
static const char *const resumes[] = { "auto", "never", NULL };

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Copy with truncation check; -1 if it does not fit. */
static int copy(char *dst, size_t dstlen, const char *src) {
    size_t n = strlen(src);
    if (n >= dstlen) return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

int zt_parse_ulong(const char *s, unsigned long max, unsigned long *out) {
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

unsigned long zt_restart_count(const char *env_value) {
    unsigned long v;
    if (zt_parse_ulong(env_value, 1000000000UL, &v)) return 0;
    return v;
}

static int in_list(const char *v, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(v, *list)) return 1;
    return 0;
}

/* A value that is shown in a message: keep it short and printable. */
static const char *shown(const char *v, char *buf, size_t len) {
    size_t i = 0;
    for (; v[i] && i + 4 < len && i < 64; i++)
        buf[i] = isprint((unsigned char)v[i]) ? v[i] : '?';
    if (v[i]) { buf[i++] = '.'; buf[i++] = '.'; buf[i++] = '.'; }
    buf[i] = '\0';
    return buf;
}

/* Paths: non-empty, shorter than ZT_VALLEN, no control characters. */
static int path_ok(const char *v, const char **why) {
    if (!*v) { *why = "empty path"; return 0; }
    if (strlen(v) >= ZT_VALLEN) { *why = "path too long"; return 0; }
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f) { *why = "control character in path"; return 0; }
    return 1;
}

int zt_gpu_bind_parse(const char *val, struct zt_gpu_bind *b, char *err, size_t errlen) {
    char sb[80];
    memset(b, 0, sizeof *b);
    if (!val) val = "";
    if (!strcmp(val, "none")) { b->mode = ZT_GPU_NONE; return 0; }
    if (!strcmp(val, "local")) { b->mode = ZT_GPU_LOCAL; return 0; }
    if (strncmp(val, "map:", 4) != 0) {
        seterr(err, errlen, "'%s' is not none, local or map:LIST", shown(val, sb, sizeof sb));
        return -1;
    }
    const char *p = val + 4;
    if (!*p) { seterr(err, errlen, "map: needs a list of GPU ids (map:0,1)"); return -1; }
    b->mode = ZT_GPU_MAP;
    while (1) {
        const char *q = p;
        while (*q >= '0' && *q <= '9') q++;
        if (q == p || (*q && *q != ',')) {
            seterr(err, errlen, "bad GPU id list '%s' (expected map:ID[,ID...] with ids 0..%d)",
                   shown(val + 4, sb, sizeof sb), ZT_GPU_ID_MAX);
            return -1;
        }
        char num[16];
        size_t n = (size_t)(q - p);
        unsigned long id;
        if (n >= sizeof num) id = (unsigned long)ZT_GPU_ID_MAX + 1;
        else {
            memcpy(num, p, n); num[n] = '\0';
            if (zt_parse_ulong(num, ZT_GPU_ID_MAX, &id)) id = (unsigned long)ZT_GPU_ID_MAX + 1;
        }
        if (id > ZT_GPU_ID_MAX) {
            seterr(err, errlen, "GPU id in '%s' out of range 0..%d", shown(val + 4, sb, sizeof sb),
                   ZT_GPU_ID_MAX);
            return -1;
        }
        if (b->n >= ZT_GPU_MAP_MAX) {
            seterr(err, errlen, "more than %d GPU ids in map:LIST", ZT_GPU_MAP_MAX);
            return -1;
        }
        b->ids[b->n++] = (int)id;
        if (!*q) break;
        p = q + 1;
    }
    return 0;
}

static void gpu_bind_format(const struct zt_gpu_bind *b, char *out, size_t len) {
    if (b->mode == ZT_GPU_NONE) { snprintf(out, len, "none"); return; }
    if (b->mode == ZT_GPU_LOCAL) { snprintf(out, len, "local"); return; }
    size_t o = (size_t)snprintf(out, len, "map:");
    for (int i = 0; i < b->n && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%d", i ? "," : "", b->ids[i]);
}

int zt_opt_lookup(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        if (!strcmp(name, zt_opt_table[i].name)) return i;
        if (!strcmp(name, zt_opt_table[i].name + strlen("ztrain-"))) return i;
    }
    return -1;
}

int zt_opt_check(enum zt_opt_id id, const char *val, const struct zt_site *s,
                 char *canon, size_t canonlen, char *err, size_t errlen) {
    char sb[80], why[ZT_ERRLEN];
    unsigned long v;
    struct zt_site builtin;
    if (!s) { zt_site_init(&builtin); s = &builtin; }
    if ((int)id < 0 || id >= ZT_OPT_COUNT) {
        seterr(err, errlen, "internal error: unknown option %d", (int)id);
        return -1;
    }
    const char *name = zt_opt_table[id].name;
    if (!val) val = "";
    const char *why_path = NULL;

    switch (id) {
    case ZT_OPT_STAGE:
        if (zt_parse_ulong(val, (unsigned long)s->max_stage, &v)) {
            if (s->max_stage < ZTRAIN_STAGE_MAX && !zt_parse_ulong(val, ZTRAIN_STAGE_MAX, &v))
                seterr(err, errlen, "--%s=%s: stage %lu is above this site's limit (max_stage=%d)",
                       name, shown(val, sb, sizeof sb), v, s->max_stage);
            else
                seterr(err, errlen, "--%s=%s: the ZeRO stage must be an integer %d..%d",
                       name, shown(val, sb, sizeof sb), ZTRAIN_STAGE_MIN, s->max_stage);
            return -1;
        }
        snprintf(canon, canonlen, "%lu", v);
        return 0;
    case ZT_OPT_DATALOADERS:
        if (zt_parse_ulong(val, (unsigned long)s->max_dataloaders, &v) || v < ZTRAIN_DATALOADERS_MIN) {
            if (s->max_dataloaders < ZTRAIN_DATALOADERS_MAX &&
                !zt_parse_ulong(val, ZTRAIN_DATALOADERS_MAX, &v) && v >= ZTRAIN_DATALOADERS_MIN)
                seterr(err, errlen,
                       "--%s=%s: %lu data loaders is above this site's limit (max_dataloaders=%d)",
                       name, shown(val, sb, sizeof sb), v, s->max_dataloaders);
            else
                seterr(err, errlen, "--%s=%s: the number of data loaders must be an integer %d..%d",
                       name, shown(val, sb, sizeof sb), ZTRAIN_DATALOADERS_MIN, s->max_dataloaders);
            return -1;
        }
        snprintf(canon, canonlen, "%lu", v);
        return 0;
    case ZT_OPT_GPU_BIND: {
        struct zt_gpu_bind b;
        if (zt_gpu_bind_parse(val, &b, why, sizeof why)) {
            seterr(err, errlen, "--%s=%s: %s", name, shown(val, sb, sizeof sb), why);
            return -1;
        }
        gpu_bind_format(&b, canon, canonlen);
        return 0;
    }
    case ZT_OPT_RESUME:
        if (!ztrain_resume_check(val, &why_path) && (in_list(val, resumes) || path_ok(val, &why_path))) {
            if (copy(canon, canonlen, val)) break;
            return 0;
        }
        seterr(err, errlen, "--%s=%s: expected auto, never or a checkpoint path (%s)",
               name, shown(val, sb, sizeof sb), why_path);
        return -1;
    case ZT_OPT_CKPT_DIR:
        if (!path_ok(val, &why_path)) {
            seterr(err, errlen, "--%s=%s: expected a directory path (%s)", name,
                   shown(val, sb, sizeof sb), why_path);
            return -1;
        }
        if (copy(canon, canonlen, val)) break;
        return 0;
    case ZT_OPT_CKPT_EVERY:
        if (zt_parse_ulong(val, ZT_CKPT_EVERY_MAX, &v)) {
            seterr(err, errlen, "--%s=%s: expected a number of steps 0..%ld (0 = off)", name,
                   shown(val, sb, sizeof sb), ZT_CKPT_EVERY_MAX);
            return -1;
        }
        snprintf(canon, canonlen, "%lu", v);
        return 0;
    case ZT_OPT_OFFLOAD:
        if (!in_list(val, offloads)) {
            seterr(err, errlen, "--%s=%s: expected none, optimizer or params", name,
                   shown(val, sb, sizeof sb));
            return -1;
        }
        snprintf(canon, canonlen, "%s", val);
        return 0;
    case ZT_OPT_PRECISION:
        if (!in_list(val, precisions)) {
            seterr(err, errlen, "--%s=%s: expected fp32, bf16 or fp16", name,
                   shown(val, sb, sizeof sb));
            return -1;
        }
        snprintf(canon, canonlen, "%s", val);
        return 0;
    case ZT_OPT_COUNT:
        break;
    }
    seterr(err, errlen, "--%s: value too long", name);
    return -1;
}

void zt_site_init(struct zt_site *s) {
    memset(s, 0, sizeof *s);
    s->default_stage = -1;
    s->max_stage = ZTRAIN_STAGE_MAX;
    s->default_dataloaders = -1;
    s->max_dataloaders = ZTRAIN_DATALOADERS_MAX;
    s->default_ckpt_every = -1;
}

enum site_key {
    K_DEFAULT_STAGE, K_MAX_STAGE, K_DEFAULT_DATALOADERS, K_MAX_DATALOADERS,
    K_DEFAULT_PRECISION, K_DEFAULT_OFFLOAD, K_DEFAULT_GPU_BIND, K_DEFAULT_RESUME,
    K_DEFAULT_CKPT_EVERY, K_CKPT_ROOT, K_COUNT
};
static const char *const site_key_names[K_COUNT] = {
    "default_stage", "max_stage", "default_dataloaders", "max_dataloaders",
    "default_precision", "default_offload", "default_gpu_bind", "default_resume",
    "default_ckpt_every", "ckpt_root",
};

int zt_site_parse(struct zt_site *s, int argc, char *const argv[], char *err, size_t errlen) {
    char sb[80], why[ZT_ERRLEN];
    int seen[K_COUNT] = { 0 };
    unsigned long v;
    zt_site_init(s);

    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
            seterr(err, errlen, "plugstack.conf argument '%s' is not key=value (keys: %s)",
                   shown(arg, sb, sizeof sb), zt_site_keys);
            return -1;
        }
        size_t klen = (size_t)(eq - arg);
        const char *val = eq + 1;
        int k;
        for (k = 0; k < K_COUNT; k++)
            if (strlen(site_key_names[k]) == klen && !strncmp(arg, site_key_names[k], klen)) break;
        if (k == K_COUNT) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(klen < 60 ? klen : 60), arg);
            seterr(err, errlen, "unknown plugstack.conf key '%s' (known keys: %s)",
                   shown(key, sb, sizeof sb), zt_site_keys);
            return -1;
        }
        if (seen[k]++) {
            seterr(err, errlen, "plugstack.conf key '%s' given twice", site_key_names[k]);
            return -1;
        }
        const char *bad = NULL;   /* what the value should have been */
        switch (k) {
        case K_DEFAULT_STAGE:
        case K_MAX_STAGE:
            if (zt_parse_ulong(val, ZTRAIN_STAGE_MAX, &v)) { bad = "an integer 0..3"; break; }
            if (k == K_DEFAULT_STAGE) s->default_stage = (int)v; else s->max_stage = (int)v;
            break;
        case K_DEFAULT_DATALOADERS:
        case K_MAX_DATALOADERS:
            if (zt_parse_ulong(val, ZTRAIN_DATALOADERS_MAX, &v) || v < ZTRAIN_DATALOADERS_MIN) {
                bad = "an integer " STR(ZTRAIN_DATALOADERS_MIN) ".." STR(ZTRAIN_DATALOADERS_MAX);
                break;
            }
            if (k == K_DEFAULT_DATALOADERS) s->default_dataloaders = (int)v;
            else s->max_dataloaders = (int)v;
            break;
        case K_DEFAULT_PRECISION:
            if (!in_list(val, precisions)) { bad = "fp32, bf16 or fp16"; break; }
            snprintf(s->default_precision, sizeof s->default_precision, "%s", val);
            break;
        case K_DEFAULT_OFFLOAD:
            if (!in_list(val, offloads)) { bad = "none, optimizer or params"; break; }
            snprintf(s->default_offload, sizeof s->default_offload, "%s", val);
            break;
        case K_DEFAULT_RESUME:
            if (!in_list(val, resumes)) { bad = "auto or never"; break; }
            snprintf(s->default_resume, sizeof s->default_resume, "%s", val);
            break;
        case K_DEFAULT_GPU_BIND: {
            struct zt_gpu_bind b;
            if (zt_gpu_bind_parse(val, &b, why, sizeof why)) {
                seterr(err, errlen, "plugstack.conf %s=%s: %s", site_key_names[k],
                       shown(val, sb, sizeof sb), why);
                return -1;
            }
            gpu_bind_format(&b, s->default_gpu_bind, sizeof s->default_gpu_bind);
            break;
        }
        case K_DEFAULT_CKPT_EVERY:
            if (zt_parse_ulong(val, ZT_CKPT_EVERY_MAX, &v)) { bad = "a number of steps >= 0"; break; }
            s->default_ckpt_every = (long)v;
            break;
        case K_CKPT_ROOT: {
            const char *w = NULL;
            if (val[0] != '/' || !path_ok(val, &w) || strlen(val) > ZT_VALLEN - 64) {
                bad = "an absolute directory path";
                break;
            }
            snprintf(s->ckpt_root, sizeof s->ckpt_root, "%s", val);
            /* drop trailing slashes but keep "/" */
            size_t n = strlen(s->ckpt_root);
            while (n > 1 && s->ckpt_root[n - 1] == '/') s->ckpt_root[--n] = '\0';
            break;
        }
        }
        if (bad) {
            seterr(err, errlen, "plugstack.conf %s=%s: expected %s", site_key_names[k],
                   shown(val, sb, sizeof sb), bad);
            return -1;
        }
    }
    if (s->default_stage > s->max_stage) {
        seterr(err, errlen, "plugstack.conf default_stage=%d is above max_stage=%d",
               s->default_stage, s->max_stage);
        return -1;
    }
    if (s->default_dataloaders > s->max_dataloaders) {
        seterr(err, errlen, "plugstack.conf default_dataloaders=%d is above max_dataloaders=%d",
               s->default_dataloaders, s->max_dataloaders);
        return -1;
    }
    return 0;
}

int zt_settings_resolve(struct zt_settings *out, const char *const raw[ZT_OPT_COUNT],
                        const struct zt_site *s, char *err, size_t errlen) {
    memset(out->have, 0, sizeof out->have);
    memset(out->from_site, 0, sizeof out->from_site);
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        out->val[i][0] = '\0';
        if (!raw || !raw[i]) continue;
        if (zt_opt_check((enum zt_opt_id)i, raw[i], s, out->val[i], sizeof out->val[i], err, errlen))
            return -1;
        out->have[i] = 1;
    }
    /* site defaults for what the user did not give */
#define DEF(id, cond, ...) \
    do { if (!out->have[id] && (cond)) { \
        snprintf(out->val[id], sizeof out->val[id], __VA_ARGS__); \
        out->have[id] = 1; out->from_site[id] = 1; } } while (0)
    DEF(ZT_OPT_STAGE, s->default_stage >= 0, "%d", s->default_stage);
    DEF(ZT_OPT_DATALOADERS, s->default_dataloaders >= 0, "%d", s->default_dataloaders);
    DEF(ZT_OPT_GPU_BIND, s->default_gpu_bind[0], "%s", s->default_gpu_bind);
    DEF(ZT_OPT_RESUME, s->default_resume[0], "%s", s->default_resume);
    DEF(ZT_OPT_CKPT_EVERY, s->default_ckpt_every >= 0, "%ld", s->default_ckpt_every);
    DEF(ZT_OPT_OFFLOAD, s->default_offload[0], "%s", s->default_offload);
    DEF(ZT_OPT_PRECISION, s->default_precision[0], "%s", s->default_precision);
#undef DEF
    return 0;
}

/* Split a comma-separated list into at most max tokens (pointers into buf). */
static int split_list(char *buf, char **tok, int max) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        size_t l = strlen(t);
        while (l && t[l - 1] == ' ') t[--l] = '\0';
        if (!*t) continue;
        if (n == max) return -1;
        tok[n++] = t;
    }
    return n;
}

/* Does a GPU list token name the GPU id? ("03" matches 3; UUIDs never do) */
static int same_id(const char *tok, int id) {
    unsigned long v;
    return !zt_parse_ulong(tok, ZT_GPU_ID_MAX, &v) && (int)v == id;
}

int zt_gpu_assign(const struct zt_gpu_bind *b, const char *step_gpus,
                  unsigned local_id, unsigned local_ntasks,
                  char *out, size_t outlen, char *err, size_t errlen) {
    char buf[ZT_VALLEN];
    char *tok[ZT_GPU_MAP_MAX * 8];
    int ng = 0;

    if (b->mode == ZT_GPU_NONE) return 1;
    if (step_gpus && *step_gpus) {
        if (copy(buf, sizeof buf, step_gpus)) {
            seterr(err, errlen, "GPU list of the step is too long");
            return -1;
        }
        ng = split_list(buf, tok, (int)(sizeof tok / sizeof tok[0]));
        if (ng < 0) {
            seterr(err, errlen, "too many GPUs in the step's GPU list");
            return -1;
        }
        /* Slurm writes "NoDevFiles" when GPUs are allocated without device files */
        if (ng == 1 && !strcmp(tok[0], "NoDevFiles")) ng = 0;
    }
    if (local_ntasks == 0) local_ntasks = 1;
    if (local_id >= local_ntasks) {
        seterr(err, errlen, "local task id %u out of range (%u tasks on this node)", local_id,
               local_ntasks);
        return -1;
    }

    if (b->mode == ZT_GPU_MAP) {
        if (b->n <= 0) { seterr(err, errlen, "empty map:LIST"); return -1; }
        int id = b->ids[local_id % (unsigned)b->n];
        if (ng == 0) {
            seterr(err, errlen, "gpu-bind %s: this step has no GPUs (neither "
                   "CUDA_VISIBLE_DEVICES nor SLURM_STEP_GPUS is set; request GPUs with --gpus or "
                   "--gres=gpu:N)", "map");
            return -1;
        }
        {
            int found = 0;
            for (int i = 0; i < ng && !found; i++) found = same_id(tok[i], id);
            if (!found) {
                seterr(err, errlen, "gpu-bind map: GPU %d for local task %u is not allocated "
                       "to this step (step GPUs: %s)", id, local_id, step_gpus);
                return -1;
            }
        }
        snprintf(out, outlen, "%d", id);
        return 0;
    }

    /* local */
    if (ng == 0) {
        seterr(err, errlen, "gpu-bind local: this step has no GPUs (neither CUDA_VISIBLE_DEVICES "
               "nor SLURM_STEP_GPUS is set; request GPUs with --gpus or --gres=gpu:N)");
        return -1;
    }
    unsigned first, count;
    if ((unsigned)ng >= local_ntasks) {
        unsigned per = (unsigned)ng / local_ntasks, extra = (unsigned)ng % local_ntasks;
        first = local_id * per + (local_id < extra ? local_id : extra);
        count = per + (local_id < extra ? 1 : 0);
    } else {
        first = local_id % (unsigned)ng;
        count = 1;
    }
    size_t o = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < count; i++) {
        int w = snprintf(out + o, outlen - o, "%s%s", i ? "," : "", tok[first + i]);
        if (w < 0 || (size_t)w >= outlen - o) {
            seterr(err, errlen, "GPU list too long");
            return -1;
        }
        o += (size_t)w;
    }
    return 0;
}

int zt_omp_threads(int cpus_per_task, int dataloaders) {
    if (dataloaders < 0) dataloaders = 0;
    int t = cpus_per_task - dataloaders;
    return t < 1 ? 1 : t;
}

int zt_ckpt_dir_default(char *out, size_t outlen, const char *ckpt_root,
                        const char *submit_dir, uint32_t jobid,
                        uint32_t array_job_id, uint32_t array_task_id,
                        char *err, size_t errlen) {
    const char *root = (ckpt_root && *ckpt_root) ? ckpt_root : submit_dir;
    if (!root || !*root) {
        seterr(err, errlen, "no checkpoint root: neither ckpt_root nor SLURM_SUBMIT_DIR is set");
        return -1;
    }
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    const char *sep = (n == 1 && root[0] == '/') ? "" : "/";
    int w;
    if (array_job_id)
        w = snprintf(out, outlen, "%.*s%sztrain-%u_%u", (int)n, root, sep,
                     (unsigned)array_job_id, (unsigned)array_task_id);
    else
        w = snprintf(out, outlen, "%.*s%sztrain-%u", (int)n, root, sep, (unsigned)jobid);
    if (w < 0 || (size_t)w >= outlen) {
        seterr(err, errlen, "checkpoint directory path too long");
        return -1;
    }
    return 0;
}
