/*
 * hf_export.c -- `ztrain ckpt export PATH --hf OUTDIR`: a checkpoint as a
 * Hugging Face model directory (zt_ckpt_export_hf, docs/huggingface.md).
 *
 * Serial, no model code: the tensors come from the checkpoint's /params
 * table (checksums verified while reading), the model settings from its
 * stored configuration JSON (/config), the Hugging Face names and family
 * from the architecture's descriptor (arch.h).  Everything is written into OUTDIR.tmp, which is renamed to
 * OUTDIR at the end.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "config.h"
#include "arch.h"
#include "json_py.h"

/* The model keys of a stored configuration JSON ({"ztrain": {"model":
 * {...}, "init_from": ...}}) into cfg; absent keys keep their defaults (a
 * checkpoint written before the llama keys existed is a GPT-2). */
static int model_from_json(const char *file, const char *json, zt_config *cfg, int *has_fp,
                           zt_status *st) {
    /* the common shape, the architecture and its class, every architecture
     * setting (arch.h) */
    static const char *const common[] = {"n_layer", "n_head", "n_embd", "context", "vocab",
                                         "arch", "hf_architecture"};
    const size_t nc = sizeof common / sizeof common[0];
    int ns;
    const zt_arch_setting *set = zt_arch_settings(&ns);
    json_error_t je;
    json_t *root = json ? json_loads(json, 0, &je) : NULL;
    if (!root) return zt_fail(st, ZT_EDATA, "%s: no readable configuration JSON (/config)", file);
    json_t *zt = json_object_get(root, "ztrain"), *m = json_object_get(zt, "model");
    int rc = json_is_object(m) ? ZT_OK
                               : zt_fail(st, ZT_EDATA, "%s: /config has no ztrain.model", file);
    for (size_t i = 0; i < nc + (size_t)ns && rc == ZT_OK; ++i) {
        const char *name = i < nc ? common[i] : set[i - nc].key;
        json_t *v = json_object_get(m, name);
        char key[96], val[64];
        snprintf(key, sizeof key, "ztrain.model.%s", name);
        if (!v) continue;
        if (json_is_integer(v)) snprintf(val, sizeof val, "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v)) snprintf(val, sizeof val, "%.17g", json_real_value(v));
        else if (json_is_boolean(v)) snprintf(val, sizeof val, "%s", json_is_true(v) ? "true" : "false");
        else if (!json_is_string(v)) continue;
        /* (a string whole: longrope's factors, mlp_only_layers) */
        rc = zt_config_set(cfg, key, json_is_string(v) ? json_string_value(v) : val, ZT_SRC_FILE, st);
        if (rc != ZT_OK) zt_fail_prefix(st, "%s: /config", file);
    }
    json_t *init = json_object_get(zt, "init_from");
    if (rc == ZT_OK && json_is_string(init))
        rc = zt_config_set(cfg, "ztrain.init_from", json_string_value(init), ZT_SRC_FILE, st);
    json_t *fp = json_object_get(zt, "init_from_files");   /* absent: before ztrain recorded it */
    *has_fp = json_is_string(fp);
    if (rc == ZT_OK && *has_fp)
        rc = zt_config_set(cfg, "ztrain.init_from_files", json_string_value(fp), ZT_SRC_FILE, st);
    json_decref(root);
    return rc;
}

/* ---------------------------------------------------------------- config.json */

/* 15 significant digits when they give back every real in j, else 17. */
static int real_precision(const json_t *j) {
    if (json_is_real(j)) {
        char b[40];
        snprintf(b, sizeof b, "%.15g", json_real_value(j));
        return strtod(b, NULL) == json_real_value(j) ? 15 : 17;
    }
    int p = 15;
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_object(j))
        json_object_foreach((json_t *)j, k, v) if (real_precision(v) > p) p = 17;
    if (json_is_array(j))
        json_array_foreach(j, i, v) if (real_precision(v) > p) p = 17;
    return p;
}

/* Keys carried over from the original config.json (init_from) when present. */
static void carry(json_t *out, json_t *orig, const char *const *keys, size_t n) {
    for (size_t i = 0; orig && i < n; ++i) {
        json_t *v = json_object_get(orig, keys[i]);
        if (v) json_object_set(out, keys[i], v);
    }
}

/* config.json of the Hugging Face family f (arch.h zt_arch_hf_export). */
static json_t *make_config(const zt_model_config *mc, const zt_arch_hf *f, int bf16, json_t *orig) {
    json_t *c = json_object();
    static const char *const tokens[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    json_object_set_new(c, "architectures", json_pack("[s]", f->architectures));
    json_object_set_new(c, "model_type", json_string(f->model_type));
    zt_arch_of(mc)->hf_config(mc, f, c, orig);   /* the architecture's keys */
    carry(c, orig, tokens, 3);
    /* the llama family's padding row (nn.Embedding padding_idx), as trained:
     * null when none (an absent key would mean Phi-3's or Gemma's default) */
    if (zt_model_arch(mc) == ZT_ARCH_LLAMA)
        json_object_set_new(c, "pad_token_id", mc->pad_token_id >= 0
                                                   ? json_integer(mc->pad_token_id) : json_null());
    json_object_set_new(c, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32"));
    json_object_set_new(c, "ztrain_exported", json_true());
    return c;
}

/* ---------------------------------------------------------------- files */

/* In OUTDIR.tmp while an export builds it: proof that the directory is an
 * export's (a later export may remove it), unlinked before the rename. */
#define EXPORT_MARKER ".ztrain-export-in-progress"

static int copy_file(const char *from, const char *to, zt_status *st) {
    FILE *in = fopen(from, "rb");
    if (!in) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    int rc = out ? ZT_OK : zt_fail(st, ZT_EIO, "%s: cannot create: %s", to, strerror(errno));
    char buf[65536];
    size_t k;
    while (rc == ZT_OK && (k = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, k, out) != k) rc = zt_fail(st, ZT_EIO, "%s: write failed: %s", to, strerror(errno));
    if (rc == ZT_OK && ferror(in)) rc = zt_fail(st, ZT_EIO, "%s: read failed", from);
    if (out && (fflush(out) != 0 || fsync(fileno(out)) != 0) && rc == ZT_OK)
        rc = zt_fail(st, ZT_EIO, "%s: flush failed: %s", to, strerror(errno));
    if (out && fclose(out) != 0 && rc == ZT_OK) rc = zt_fail(st, ZT_EIO, "%s: close failed", to);
    fclose(in);
    return rc;
}

static int write_json(json_t *j, const char *path, int prec, zt_status *st) {
    if (json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(prec)) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot write: %s", path, strerror(errno));
    return ZT_OK;
}

static int dir_nonempty(const char *p) {
    DIR *d = opendir(p);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n > 0;
}

/* ---------------------------------------------------------------- the source */

/* The directory whose config.json keys and tokenizer files the export takes
 * (NULL: none): o->tokenizer_from as given; else the run's init_from, whose
 * files must still be the ones the run started from. */
static int pick_source(const char *file, const zt_config *cfg, int has_fp, zt_hf_export_opts *o,
                       const char **src, zt_status *st) {
    struct stat sb;
    const char *rec = cfg->init_from;
    *src = NULL;
    if (o->tokenizer_from && !o->tokenizer_from[0]) return ZT_OK;   /* none wanted */
    if (o->tokenizer_from) {
        if (stat(o->tokenizer_from, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return zt_fail(st, ZT_EINVAL, "%s: not a directory (--tokenizer-from)", o->tokenizer_from);
        *src = o->tokenizer_from;
        return ZT_OK;
    }
    if (!rec[0]) return ZT_OK;   /* trained from scratch: no tokenizer to copy */
    if (stat(rec, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return zt_fail(st, ZT_EDATA, "%s: the run started from %s (ztrain.init_from), which is "
                       "not a directory here: its tokenizer files cannot be copied (name another "
                       "source with --tokenizer-from DIR, or export none with --no-tokenizer)", file, rec);
    *src = rec;
    if (!has_fp) {
        snprintf(o->warning, sizeof o->warning, "%s records no fingerprints of its tokenizer "
                 "files (written by an older ztrain): the files of %s%s are copied unchecked",
                 file, rec, rec[0] == '/' ? "" : " (relative to the current directory)");
        return ZT_OK;
    }
    char now[sizeof cfg->init_from_files], diff[400];
    ZT_TRY(ck_hf_fingerprint(rec, now, sizeof now, st));
    ck_hf_fingerprint_diff(cfg->init_from_files, now, diff, sizeof diff);
    if (diff[0])
        return zt_fail(st, ZT_EDATA, "%s: the files of %s (ztrain.init_from) are not the ones the "
                       "run started from (%s): not exported with them (name the tokenizer source "
                       "with --tokenizer-from DIR, or export none with --no-tokenizer)", file, rec, diff);
    return ZT_OK;
}

/* ---------------------------------------------------------------- export */

/* One export, from the checkpoint's table to OUTDIR: what its steps share. */
typedef struct hf_export {
    const char *out_dir;
    zt_hf_export_opts *o;
    /* the checkpoint: its file, header, /params table, stored configuration */
    char file[ZT_PATH_MAX + 64];
    hid_t f;
    zt_ckpt_info in;
    ck_tlist L;
    zt_config *cfg;
    int has_fp;                /* /config records the init_from files' fingerprints */
    /* the model directory it came from (NULL: none), its config.json, the
     * Hugging Face family, the exported config.json */
    const char *src;
    json_t *orig, *config;
    const zt_arch_hf *fam;
    /* the tensors: Hugging Face names, shapes, transposes, shards */
    int n, nshards, nspec, dtype;
    uint64_t es, max_shard_bytes, maxw, total, done;
    zt_st_spec *specs, *sspec; /* per table tensor; per exported tensor */
    char (*names)[200];
    int *tr, *shard;
    /* file tensors of each table tensor (0: a fused continuation, 1, or a
     * Mixture of Experts tensor's per-expert ones: xnames from xfirst[i]) */
    int *nfile, *xfirst, nx;
    char (*xnames)[200];
    float *buf, *whole;        /* a read piece; a whole tensor to transpose */
    /* OUTDIR.tmp while it is built */
    char tmpdir[ZT_PATH_MAX + 16];
    int made;
    json_t *index;             /* model.safetensors.index.json (shards only) */
    zt_st_writer w;
} hf_export;

/* OUTDIR is new, or an empty directory (nothing is overwritten). */
static int check_out_dir(const char *out_dir, zt_status *st) {
    struct stat sb;
    if (strlen(out_dir) >= ZT_PATH_MAX)
        return zt_fail(st, ZT_EINVAL, "%s: output path too long", out_dir);
    if (stat(out_dir, &sb) == 0 && (!S_ISDIR(sb.st_mode) || dir_nonempty(out_dir)))
        return zt_fail(st, ZT_EINVAL, "%s: exists and is not an empty directory (nothing "
                       "overwritten)", out_dir);
    return ZT_OK;
}

/* The checkpoint's model settings from its /config; a LoRA checkpoint holds
 * adapters, not a model (docs/lora.md), and is refused. */
static int read_model(hf_export *e, zt_status *st) {
    ZT_TRY(model_from_json(e->file, e->in.config_json, e->cfg, &e->has_fp, st));
    char *lj = ck_get_str_dataset(e->f, "lora");
    if (lj) {
        free(lj);
        return zt_fail(st, ZT_EINVAL, "%s: a LoRA checkpoint (adapters only): export it with "
                       "--hf OUTDIR --merge (the base with the adapters merged in) or --peft "
                       "OUTDIR (a PEFT adapter)", e->file);
    }
    return ZT_OK;
}

/* The original model directory (tokenizer files, config keys), the Hugging
 * Face family to export as, and the config.json to write. */
static int make_family(hf_export *e, zt_status *st) {
    const zt_model_config *mc = &e->cfg->model;
    ZT_TRY(pick_source(e->file, e->cfg, e->has_fp, e->o, &e->src, st));
    if (e->src) {
        char p[ZT_PATH_MAX + 128];
        snprintf(p, sizeof p, "%s/config.json", e->src);
        e->orig = zt_json_load_file_py(p, 0, NULL);
    }
    const char *oarch = NULL;
    json_t *oa = e->orig ? json_object_get(e->orig, "architectures") : NULL;
    if (json_is_array(oa)) oarch = json_string_value(json_array_get(oa, 0));
    char why[200];
    e->fam = zt_arch_hf_export(mc, oarch, why, sizeof why);
    if (!e->fam) return zt_fail(st, ZT_EDATA, "%s: %s", e->file, why);
    e->config = make_config(mc, e->fam, e->o->bf16, e->orig);
    if (!e->config) return zt_fail(st, ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* Table tensor i as the hub's per-expert file tensors of family f (what
 * transformers' save_pretrained writes): experts.gate_up.w as expert e's
 * gate then up [I, C] each, experts.down.w as expert e's down [C, I], and
 * the router under the family's name beside them.  The count of file
 * tensors (0: not an expert tensor); names into out when not NULL. */
static int expert_files(const zt_arch_hf *f, const zt_model_config *mc, const ck_tinfo *t,
                        char (*out)[200], zt_st_spec *sp, char *router, size_t rn) {
    const zt_arch_experts *ex = f->experts;
    int l, used = 0;
    if (!ex || sscanf(t->name, "h%d.%n", &l, &used) != 1 || used == 0) return 0;
    const char *rest = t->name + used;
    if (!strcmp(rest, "router.w")) {
        if (ex->router && router) snprintf(router, rn, ex->router, l);
        return 0;
    }
    const int gu = !strcmp(rest, "experts.gate_up.w");
    if (!gu && strcmp(rest, "experts.down.w")) return 0;
    const int E = mc->n_experts, np = gu ? 2 * E : E;
    for (int p = 0; out && p < np; ++p) {
        snprintf(out[p], sizeof out[p], gu ? (p % 2 ? ex->up : ex->gate) : ex->down, l, gu ? p / 2 : p);
        sp[p].name = out[p];
        sp[p].ndim = 2;
        sp[p].shape[0] = t->dims[0] / (uint64_t)np;
        sp[p].shape[1] = t->dims[1];
    }
    return np;
}

/* Names, shapes, shards (greedy in table order, each at most the limit
 * unless one tensor alone is larger); a fused tensor of the family (Phi-3's
 * qkv_proj, gate_up_proj) is written whole from its first part: our parts
 * are adjacent in the table, so their values follow one another
 * (specs[i].name NULL: a continuation, in its first's shard). */
static int plan_tensors(hf_export *e, zt_status *st) {
    const zt_model_config *mc = &e->cfg->model;
    const zt_arch *arch = zt_arch_of(mc);
    const ck_tinfo *t = e->L.t;
    uint64_t in_shard = 0;
    for (int i = 0; i < e->n; ++i) e->nx += expert_files(e->fam, mc, &t[i], NULL, NULL, NULL, 0);
    if (e->nx) {
        zt_st_spec *s2 = realloc(e->sspec, (size_t)(e->n + e->nx) * sizeof *s2);
        if (s2) e->sspec = s2;
        e->xnames = calloc((size_t)e->nx, sizeof *e->xnames);
        if (!s2 || !e->xnames) return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    for (int i = 0, x = 0; i < e->n; ++i) {
        long row0 = 0, rows = 0;
        if (zt_arch_hf_part(arch, e->fam, mc, t[i].name, e->names[i], sizeof e->names[i],
                            &e->tr[i], &row0, &rows) != 0)
            return zt_fail(st, ZT_EDATA, "%s: tensor params/%s has no Hugging Face name for "
                           "architecture %s", e->file, t[i].name, mc->arch);
        uint64_t b = t[i].numel * e->es;
        const int cont = row0 > 0;
        if (cont && (i == 0 || strcmp(e->names[i - 1], e->names[i]) != 0))
            return zt_fail(st, ZT_EDATA, "%s: tensor params/%s is part of %s but does not follow "
                           "its other parts", e->file, t[i].name, e->names[i]);
        e->specs[i].name = cont ? NULL : e->names[i];
        ck_export_shape(&t[i], e->tr[i], &e->specs[i]);
        e->nfile[i] = !cont;
        e->xfirst[i] = x;
        expert_files(e->fam, mc, &t[i], NULL, NULL, e->names[i], sizeof e->names[i]);
        x += expert_files(e->fam, mc, &t[i], NULL, NULL, NULL, 0);
        if (x > e->xfirst[i]) e->nfile[i] = x - e->xfirst[i];
        if (!cont && t[i].ndim == 2 && rows > (long)t[i].dims[0])
            e->specs[i].shape[0] = (uint64_t)rows;   /* the fused tensor */
        if (e->tr[i] && t[i].numel > e->maxw) e->maxw = t[i].numel;
        if (i == 0 || (!cont && in_shard > 0 && in_shard + b > e->max_shard_bytes)) {
            e->nshards++;
            in_shard = 0;
        }
        e->shard[i] = e->nshards - 1;
        in_shard += b;
        e->total += b;
    }
    if (e->maxw && !(e->whole = malloc(e->maxw * sizeof(float))))
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    /* the specs of the files: continuations dropped, expert tensors per expert */
    for (int i = 0; i < e->n; ++i) {
        const int xe = i + 1 < e->n ? e->xfirst[i + 1] : e->nx;
        if (xe > e->xfirst[i])
            e->nspec += expert_files(e->fam, mc, &t[i], e->xnames + e->xfirst[i], e->sspec + e->nspec,
                                     NULL, 0);
        else if (e->specs[i].name)
            e->sspec[e->nspec++] = e->specs[i];
    }
    return ZT_OK;
}

/* A fresh OUTDIR.tmp holding the marker: a crashed export's leftovers (it
 * holds the marker) are removed; anything else there is not ours to
 * delete. */
static int make_tmpdir(hf_export *e, zt_status *st) {
    char p[ZT_PATH_MAX + 128];
    struct stat sb;
    snprintf(e->tmpdir, sizeof e->tmpdir, "%s.tmp", e->out_dir);
    snprintf(p, sizeof p, "%s/%s", e->tmpdir, EXPORT_MARKER);
    if (lstat(e->tmpdir, &sb) == 0) {
        struct stat mb;
        if (!S_ISDIR(sb.st_mode) || lstat(p, &mb) != 0 || !S_ISREG(mb.st_mode))
            return zt_fail(st, ZT_EINVAL, "%s: exists and is not the leftover of a ztrain export (no "
                           "%s in it): not removed, nothing exported (remove it or choose another "
                           "OUTDIR)", e->tmpdir, EXPORT_MARKER);
        ck_rmtree(e->tmpdir);
    }
    if (mkdir(e->tmpdir, 0777) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot create: %s", e->tmpdir, strerror(errno));
    e->made = 1;
    FILE *mf = fopen(p, "w");
    int bad = !mf || fprintf(mf, "ztrain ckpt export of %s in progress\n", e->file) < 0;
    if (mf && fclose(mf) != 0) bad = 1;
    if (bad) return zt_fail(st, ZT_EIO, "%s: cannot create: %s", p, strerror(errno));
    return ZT_OK;
}

/* The safetensors file(s), shard by shard, each tensor read (checksum
 * verified) and written in table order; the shards' index is filled in. */
static int write_shards(hf_export *e, zt_status *st) {
    if (e->nshards > 1) {
        e->index = json_object();
        json_t *wm = json_object();
        json_object_set_new(e->index, "metadata", json_pack("{s:I}", "total_size", (json_int_t)e->total));
        json_object_set_new(e->index, "weight_map", wm);
    }
    const char *meta[] = {"format", "pt"};
    int rc = ZT_OK;
    for (int s = 0, i = 0, si = 0; s < e->nshards && rc == ZT_OK; ++s) {
        int first = i, sfirst = si;
        while (i < e->n && e->shard[i] == s) si += e->nfile[i++];
        char name[64], p[ZT_PATH_MAX + 128];
        if (e->nshards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, e->nshards);
        snprintf(p, sizeof p, "%s/%s", e->tmpdir, name);
        rc = zt_st_write_begin(&e->w, p, e->sspec + sfirst, si - sfirst, e->dtype, meta, 1, st);
        for (int k = first; k < i && rc == ZT_OK; ++k) {
            rc = ck_export_tensor(e->f, e->file, &e->L.t[k], e->tr[k], e->buf, e->whole, &e->w, st);
            e->done += e->L.t[k].numel * e->es;
            zt_progress_report(&e->o->progress, "export", e->done, e->total, "B", 0);
            const int xe = k + 1 < e->n ? e->xfirst[k + 1] : e->nx;   /* per-expert names */
            for (int x = e->xfirst[k]; e->index && x < xe; ++x)
                json_object_set_new(json_object_get(e->index, "weight_map"), e->xnames[x],
                                    json_string(name));
            if (e->index && e->specs[k].name && xe == e->xfirst[k])
                json_object_set_new(json_object_get(e->index, "weight_map"), e->names[k],
                                    json_string(name));
        }
        if (rc == ZT_OK) rc = zt_st_write_end(&e->w, st);
        zt_st_write_abort(&e->w);
    }
    return rc;
}

/* The shards' index, config.json, and the source's tokenizer files. */
static int write_side_files(hf_export *e, zt_status *st) {
    char p[ZT_PATH_MAX + 128];
    struct stat sb;
    if (e->index) {
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", e->tmpdir);
        ZT_TRY(write_json(e->index, p, 17, st));
    }
    snprintf(p, sizeof p, "%s/config.json", e->tmpdir);
    ZT_TRY(write_json(e->config, p, real_precision(e->config), st));
    for (int k = 0; e->src && k < CK_HF_SIDE_FILES; ++k) {
        char from[ZT_PATH_MAX + 64];
        if (!strcmp(ck_hf_side_files[k], "config.json")) continue;   /* written above */
        snprintf(from, sizeof from, "%s/%s", e->src, ck_hf_side_files[k]);
        snprintf(p, sizeof p, "%s/%s", e->tmpdir, ck_hf_side_files[k]);
        if (stat(from, &sb) == 0) ZT_TRY(copy_file(from, p, st));
    }
    return ZT_OK;
}

/* OUTDIR.tmp becomes OUTDIR: the marker removed, the directory synced, an
 * empty OUTDIR replaced, renamed, the parent synced. */
static int commit(hf_export *e, zt_status *st) {
    char p[ZT_PATH_MAX + 128];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", e->tmpdir, EXPORT_MARKER);
    if (unlink(p) != 0) return zt_fail(st, ZT_EIO, "%s: cannot remove: %s", p, strerror(errno));
    ZT_TRY(ck_fsync_path(e->tmpdir, 1, st));
    if (stat(e->out_dir, &sb) == 0 && rmdir(e->out_dir) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot replace the empty directory: %s", e->out_dir,
                       strerror(errno));
    if (rename(e->tmpdir, e->out_dir) != 0)
        return zt_fail(st, ZT_EIO, "%s: rename failed: %s", e->out_dir, strerror(errno));
    char parent[ZT_PATH_MAX + 16];
    snprintf(parent, sizeof parent, "%s", e->out_dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) *slash = '\0';
    else snprintf(parent, sizeof parent, "%s", slash ? "/" : ".");
    zt_status tmp;
    ck_fsync_path(parent, 1, &tmp);
    e->made = 0;
    zt_progress_report(&e->o->progress, "export", e->done, e->total, "B", 1);
    return ZT_OK;
}

/* Whatever the export holds; an unfinished OUTDIR.tmp is removed. */
static void export_free(hf_export *e) {
    zt_st_write_abort(&e->w);
    if (e->made) ck_rmtree(e->tmpdir);
    if (e->config) json_decref(e->config);
    if (e->orig) json_decref(e->orig);
    if (e->index) json_decref(e->index);
    zt_config_free(e->cfg);
    free(e->specs);
    free(e->sspec);
    free(e->names);
    free(e->tr);
    free(e->shard);
    free(e->nfile);
    free(e->xfirst);
    free(e->xnames);
    free(e->buf);
    free(e->whole);
    free(e->L.t);
    zt_ckpt_info_free(&e->in);
    H5Fclose(e->f);
}

int zt_ckpt_export_hf(const char *path, const char *out_dir, zt_hf_export_opts *o,
                      zt_status *st) {
    zt_status_clear(st);
    o->warning[0] = '\0';
    ZT_TRY(check_out_dir(out_dir, st));
    hf_export e;
    memset(&e, 0, sizeof e);
    e.out_dir = out_dir;
    e.o = o;
    ZT_TRY(ck_open_table(path, e.file, sizeof e.file, &e.f, &e.in, 1, &e.L, st));
    const size_t n1 = (size_t)(e.L.n ? e.L.n : 1);
    e.n = e.L.n;
    e.dtype = o->bf16 ? ZT_ST_BF16 : ZT_ST_F32;
    e.es = o->bf16 ? 2 : 4;
    e.max_shard_bytes = o->max_shard_bytes ? o->max_shard_bytes : 5000000000ull;
    e.cfg = zt_config_new();
    e.specs = calloc(n1, sizeof *e.specs);
    e.sspec = calloc(n1, sizeof *e.sspec);
    e.names = calloc(n1, sizeof *e.names);
    e.tr = calloc(n1, sizeof *e.tr);
    e.shard = calloc(n1, sizeof *e.shard);
    e.nfile = calloc(n1, sizeof *e.nfile);
    e.xfirst = calloc(n1, sizeof *e.xfirst);
    e.buf = malloc(CK_CHUNK_ELEMS * sizeof(float));
    int rc = ZT_OK;
    if (!e.cfg || !e.specs || !e.sspec || !e.names || !e.tr || !e.shard || !e.nfile || !e.xfirst ||
        !e.buf)
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) rc = read_model(&e, st);
    if (rc == ZT_OK) rc = make_family(&e, st);
    if (rc == ZT_OK) rc = plan_tensors(&e, st);
    if (rc == ZT_OK) rc = make_tmpdir(&e, st);
    if (rc == ZT_OK) rc = write_shards(&e, st);
    if (rc == ZT_OK) rc = write_side_files(&e, st);
    if (rc == ZT_OK) rc = commit(&e, st);
    export_free(&e);
    return rc;
}
