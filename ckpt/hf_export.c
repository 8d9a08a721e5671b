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
        else if (json_is_string(v)) snprintf(val, sizeof val, "%s", json_string_value(v));
        else continue;
        rc = zt_config_set(cfg, key, val, ZT_SRC_FILE, st);
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

int zt_ckpt_export_hf(const char *path, const char *out_dir, zt_hf_export_opts *o,
                      zt_status *st) {
    zt_status_clear(st);
    o->warning[0] = '\0';
    int bf16 = o->bf16;
    uint64_t max_shard_bytes = o->max_shard_bytes ? o->max_shard_bytes : 5000000000ull;
    char file[ZT_PATH_MAX + 64], tmpdir[ZT_PATH_MAX + 16], p[ZT_PATH_MAX + 128];
    struct stat sb;
    if (strlen(out_dir) >= ZT_PATH_MAX)
        return zt_fail(st, ZT_EINVAL, "%s: output path too long", out_dir);
    if (stat(out_dir, &sb) == 0 && (!S_ISDIR(sb.st_mode) || dir_nonempty(out_dir)))
        return zt_fail(st, ZT_EINVAL, "%s: exists and is not an empty directory (nothing "
                       "overwritten)", out_dir);
    hid_t f;
    zt_ckpt_info in;
    ck_tlist L = {0};
    ZT_TRY(ck_open_table(path, file, sizeof file, &f, &in, 1, &L, st));
    int n = L.n, rc = ZT_OK, made = 0, nshards = 0, has_fp = 0;
    int dtype = bf16 ? ZT_ST_BF16 : ZT_ST_F32;
    uint64_t es = bf16 ? 2 : 4, maxw = 0, total = 0, done = 0;
    zt_config *cfg = zt_config_new();
    zt_st_spec *specs = calloc((size_t)(n ? n : 1), sizeof *specs);
    zt_st_spec *sspec = calloc((size_t)(n ? n : 1), sizeof *sspec);
    char (*names)[200] = calloc((size_t)(n ? n : 1), sizeof *names);
    int *tr = calloc((size_t)(n ? n : 1), sizeof *tr), *shard = calloc((size_t)(n ? n : 1), sizeof *shard);
    float *buf = malloc(CK_CHUNK_ELEMS * sizeof(float)), *whole = NULL;
    json_t *config = NULL, *orig = NULL, *index = NULL;
    zt_st_writer w;
    memset(&w, 0, sizeof w);
    if (!cfg || !specs || !sspec || !names || !tr || !shard || !buf) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = model_from_json(file, in.config_json, cfg, &has_fp, st)) != ZT_OK) goto out;
    {   /* a LoRA checkpoint holds adapters, not a model (docs/lora.md) */
        char *lj = ck_get_str_dataset(f, "lora");
        if (lj) {
            free(lj);
            rc = zt_fail(st, ZT_EINVAL, "%s: a LoRA checkpoint (adapters only): export it with "
                         "--hf OUTDIR --merge (the base with the adapters merged in) or --peft "
                         "OUTDIR (a PEFT adapter)", file);
            goto out;
        }
    }
    const zt_model_config *mc = &cfg->model;
    const zt_arch *arch = zt_arch_of(mc);
    /* the original model directory: tokenizer files, config keys */
    const char *src;
    if ((rc = pick_source(file, cfg, has_fp, o, &src, st)) != ZT_OK) goto out;
    if (src) {
        snprintf(p, sizeof p, "%s/config.json", src);
        orig = json_load_file(p, 0, NULL);
    }
    const char *oarch = NULL;
    json_t *oa = orig ? json_object_get(orig, "architectures") : NULL;
    if (json_is_array(oa)) oarch = json_string_value(json_array_get(oa, 0));
    char why[200];
    const zt_arch_hf *fam = zt_arch_hf_export(mc, oarch, why, sizeof why);
    if (!fam) { rc = zt_fail(st, ZT_EDATA, "%s: %s", file, why); goto out; }
    config = make_config(mc, fam, bf16, orig);
    if (!config) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); goto out; }
    /* names, shapes, shards (greedy in table order, each at most the limit
     * unless one tensor alone is larger); a fused tensor of the family
     * (Phi-3's qkv_proj, gate_up_proj) is written whole from its first part:
     * our parts are adjacent in the table, so their values follow one
     * another (spec[i].name NULL: a continuation, in its first's shard) */
    uint64_t in_shard = 0;
    for (int i = 0; i < n && rc == ZT_OK; ++i) {
        long row0 = 0, rows = 0;
        if (zt_arch_hf_part(arch, fam, mc, L.t[i].name, names[i], sizeof names[i], &tr[i], &row0,
                            &rows) != 0) {
            rc = zt_fail(st, ZT_EDATA, "%s: tensor params/%s has no Hugging Face name for "
                         "architecture %s", file, L.t[i].name, mc->arch);
            break;
        }
        uint64_t b = L.t[i].numel * es;
        const int cont = row0 > 0;
        if (cont && (i == 0 || strcmp(names[i - 1], names[i]) != 0)) {
            rc = zt_fail(st, ZT_EDATA, "%s: tensor params/%s is part of %s but does not follow "
                         "its other parts", file, L.t[i].name, names[i]);
            break;
        }
        specs[i].name = cont ? NULL : names[i];
        ck_export_shape(&L.t[i], tr[i], &specs[i]);
        if (!cont && L.t[i].ndim == 2 && rows > (long)L.t[i].dims[0])
            specs[i].shape[0] = (uint64_t)rows;   /* the fused tensor */
        if (tr[i] && L.t[i].numel > maxw) maxw = L.t[i].numel;
        if (i == 0 || (!cont && in_shard > 0 && in_shard + b > max_shard_bytes)) {
            nshards++;
            in_shard = 0;
        }
        shard[i] = nshards - 1;
        in_shard += b;
        total += b;
    }
    if (rc != ZT_OK) goto out;
    if (maxw && !(whole = malloc(maxw * sizeof(float)))) {
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
        goto out;
    }
    /* the specs of the files: continuations dropped */
    int nspec = 0;
    for (int i = 0; i < n; ++i)
        if (specs[i].name) sspec[nspec++] = specs[i];

    /* OUTDIR.tmp: a crashed export's leftovers (it holds the marker) are
     * removed; anything else there is not ours to delete */
    snprintf(tmpdir, sizeof tmpdir, "%s.tmp", out_dir);
    snprintf(p, sizeof p, "%s/%s", tmpdir, EXPORT_MARKER);
    if (lstat(tmpdir, &sb) == 0) {
        struct stat mb;
        if (!S_ISDIR(sb.st_mode) || lstat(p, &mb) != 0 || !S_ISREG(mb.st_mode)) {
            rc = zt_fail(st, ZT_EINVAL, "%s: exists and is not the leftover of a ztrain export (no "
                         "%s in it): not removed, nothing exported (remove it or choose another "
                         "OUTDIR)", tmpdir, EXPORT_MARKER);
            goto out;
        }
        ck_rmtree(tmpdir);
    }
    if (mkdir(tmpdir, 0777) != 0) {
        rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmpdir, strerror(errno));
        goto out;
    }
    made = 1;
    {
        FILE *mf = fopen(p, "w");
        int bad = !mf || fprintf(mf, "ztrain ckpt export of %s in progress\n", file) < 0;
        if (mf && fclose(mf) != 0) bad = 1;
        if (bad) {
            rc = zt_fail(st, ZT_EIO, "%s: cannot create: %s", p, strerror(errno));
            goto out;
        }
    }
    if (nshards > 1) {
        index = json_object();
        json_t *wm = json_object();
        json_object_set_new(index, "metadata", json_pack("{s:I}", "total_size", (json_int_t)total));
        json_object_set_new(index, "weight_map", wm);
    }
    const char *meta[] = {"format", "pt"};
    for (int s = 0, i = 0, si = 0; s < nshards && rc == ZT_OK; ++s) {
        int first = i, sfirst = si;
        while (i < n && shard[i] == s) si += specs[i++].name != NULL;
        char name[64];
        if (nshards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        snprintf(p, sizeof p, "%s/%s", tmpdir, name);
        rc = zt_st_write_begin(&w, p, sspec + sfirst, si - sfirst, dtype, meta, 1, st);
        for (int k = first; k < i && rc == ZT_OK; ++k) {
            rc = ck_export_tensor(f, file, &L.t[k], tr[k], buf, whole, &w, st);
            done += L.t[k].numel * es;
            zt_progress_report(&o->progress, "export", done, total, "B", 0);
            if (index && specs[k].name)
                json_object_set_new(json_object_get(index, "weight_map"), names[k], json_string(name));
        }
        if (rc == ZT_OK) rc = zt_st_write_end(&w, st);
        zt_st_write_abort(&w);
    }
    if (rc == ZT_OK && index) {
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", tmpdir);
        rc = write_json(index, p, 17, st);
    }
    if (rc == ZT_OK) {
        snprintf(p, sizeof p, "%s/config.json", tmpdir);
        rc = write_json(config, p, real_precision(config), st);
    }
    for (int k = 0; src && rc == ZT_OK && k < CK_HF_SIDE_FILES; ++k) {
        char from[ZT_PATH_MAX + 64];
        if (!strcmp(ck_hf_side_files[k], "config.json")) continue;   /* written above */
        snprintf(from, sizeof from, "%s/%s", src, ck_hf_side_files[k]);
        snprintf(p, sizeof p, "%s/%s", tmpdir, ck_hf_side_files[k]);
        if (stat(from, &sb) == 0) rc = copy_file(from, p, st);
    }
    snprintf(p, sizeof p, "%s/%s", tmpdir, EXPORT_MARKER);
    if (rc == ZT_OK && unlink(p) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: cannot remove: %s", p, strerror(errno));
    if (rc == ZT_OK) rc = ck_fsync_path(tmpdir, 1, st);
    if (rc == ZT_OK && stat(out_dir, &sb) == 0 && rmdir(out_dir) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: cannot replace the empty directory: %s", out_dir, strerror(errno));
    if (rc == ZT_OK && rename(tmpdir, out_dir) != 0)
        rc = zt_fail(st, ZT_EIO, "%s: rename failed: %s", out_dir, strerror(errno));
    if (rc == ZT_OK) {
        char parent[ZT_PATH_MAX + 16];
        snprintf(parent, sizeof parent, "%s", out_dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) *slash = '\0';
        else snprintf(parent, sizeof parent, "%s", slash ? "/" : ".");
        zt_status tmp;
        ck_fsync_path(parent, 1, &tmp);
        made = 0;
        zt_progress_report(&o->progress, "export", done, total, "B", 1);
    }
out:
    zt_st_write_abort(&w);
    if (made) ck_rmtree(tmpdir);
    if (config) json_decref(config);
    if (orig) json_decref(orig);
    if (index) json_decref(index);
    zt_config_free(cfg);
    free(specs);
    free(sspec);
    free(names);
    free(tr);
    free(shard);
    free(buf);
    free(whole);
    free(L.t);
    zt_ckpt_info_free(&in);
    H5Fclose(f);
    return rc;
}
