/*
 * test_sft.c -- instruction data with loss masks: the chat templates'
 * renderings against transformers' (tests/data/sft/render.json, made by
 * scripts/make_sft_fixtures.py), the SFT window file (round trip,
 * validation errors), the loader's masked targets and counts, and the
 * trainer: the loss is the mean over the counted targets, and masked
 * targets get no gradient.
 */
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>
#include "ctx.h"
#include "data.h"
#include "sft.h"
#include "sft_ref.h"
#include "tap.h"
#include "testutil.h"
#include "ztrain_ckpt.h"
#include "ztrain_io.h"

/* ---------------------------------------------------------------- renderings */

static void test_renderings(void) {
    const char *src = getenv("ZT_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/sft/render.json", src && *src ? src : ".");
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!tap_ok(root != NULL, "read %s", path)) { tap_diag("%s", err.text); return; }
    json_t *cases = json_object_get(root, "cases");
    size_t i;
    json_t *c;
    int seen[ZT_TMPL_COUNT] = {0};
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "template"));
        int tmpl = zt_chat_template(name);
        json_t *msgs = json_object_get(c, "messages");
        zt_chat_msg m[16];
        int n = (int)json_array_size(msgs);
        for (int k = 0; k < n && k < 16; ++k) {
            json_t *e = json_array_get(msgs, (size_t)k);
            m[k].role = zt_chat_role(json_string_value(json_object_get(e, "role")));
            m[k].content = json_string_value(json_object_get(e, "content"));
            m[k].len = json_string_length(json_object_get(e, "content"));
        }
        zt_chat_text r;
        zt_status st;
        int rc = zt_chat_render(tmpl, m, n, json_string_value(json_object_get(c, "bos")),
                                json_string_value(json_object_get(c, "eos")), &r, &st);
        json_t *text = json_object_get(c, "text"), *spans = json_object_get(c, "spans");
        int same = rc == ZT_OK && r.len == json_string_length(text) && !memcmp(r.text, json_string_value(text), r.len);
        int sp = rc == ZT_OK && (size_t)r.nspan == json_array_size(spans);
        for (int k = 0; sp && k < r.nspan; ++k) {
            json_t *s = json_array_get(spans, (size_t)k);
            sp = r.span[k].begin == (size_t)json_integer_value(json_array_get(s, 0)) &&
                 r.span[k].end == (size_t)json_integer_value(json_array_get(s, 1));
        }
        if (tmpl >= 0) seen[tmpl]++;
        tap_ok(tmpl >= 0 && same && sp, "template %s, case %zu: rendering%s and trained spans match "
               "transformers", name, i, same ? "" : " (DIFFERS)");
        if (!same && rc == ZT_OK) tap_diag("got: %s", r.text);
        if (rc != ZT_OK) tap_diag("%s", st.msg);
        if (rc == ZT_OK) zt_chat_text_free(&r);
    }
    for (int t = 0; t < ZT_TMPL_COUNT; ++t)
        tap_ok(seen[t] >= 4, "fixtures cover template %s (%d cases)", zt_chat_template_name(t), seen[t]);
    json_decref(root);

    /* the mistral template's own errors */
    zt_chat_msg uu[2] = {{ZT_ROLE_USER, "a", 1}, {ZT_ROLE_USER, "b", 1}};
    zt_chat_msg su[3] = {{ZT_ROLE_USER, "a", 1}, {ZT_ROLE_ASSISTANT, "b", 1}, {ZT_ROLE_SYSTEM, "c", 1}};
    zt_chat_text r;
    zt_status st;
    int rc = zt_chat_render(ZT_TMPL_MISTRAL, uu, 2, "<s>", "</s>", &r, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "must alternate"), "mistral: user after user is refused (%s)", st.msg);
    rc = zt_chat_render(ZT_TMPL_MISTRAL, su, 3, "<s>", "</s>", &r, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "alternate"), "mistral: a system message after the first is "
           "refused (%s)", st.msg);
    rc = zt_chat_render(ZT_TMPL_LLAMA3, uu, 2, NULL, NULL, &r, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "BOS"), "llama3 without a BOS token is refused (%s)", st.msg);
    tap_ok(zt_chat_template("vicuna") == -1, "unknown template name -> -1");
}

/* The token ids and assistant masks of tests/data/sft/tokens.json
 * (transformers' tokenizer(text, add_special_tokens=False) and
 * return_assistant_tokens_mask) on the tokenizer fixtures. */
static void test_tokens(void) {
    const char *src = getenv("ZT_SRCDIR");
    src = src && *src ? src : ".";
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/sft/tokens.json", src);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!tap_ok(root != NULL, "read %s", path)) { tap_diag("%s", err.text); return; }
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "template"));
        char tpath[1200];
        snprintf(tpath, sizeof tpath, "%s/%s", src, json_string_value(json_object_get(c, "tokenizer")));
        zt_tokenizer *tok = NULL;
        zt_status st;
        if (!tap_ok(zt_tok_load(tpath, &tok, &st) == ZT_OK, "load %s", tpath)) { tap_diag("%s", st.msg); continue; }
        json_t *msgs = json_object_get(c, "messages");
        zt_chat_msg m[16];
        int n = (int)json_array_size(msgs);
        for (int k = 0; k < n && k < 16; ++k) {
            json_t *e = json_array_get(msgs, (size_t)k);
            m[k].role = zt_chat_role(json_string_value(json_object_get(e, "role")));
            m[k].content = json_string_value(json_object_get(e, "content"));
            m[k].len = json_string_length(json_object_get(e, "content"));
        }
        int b = zt_tok_bos_id(tok), e = zt_tok_eos_id(tok), nspan;
        int32_t *ids = NULL;
        uint8_t *mask = NULL;
        size_t len = 0;
        int rc = zt_sft_encode_chat(tok, zt_chat_template(name), b >= 0 ? zt_tok_token_str(tok, b) : NULL,
                                    e >= 0 ? zt_tok_token_str(tok, e) : NULL, m, n, ZT_SFT_MASK_ASSISTANT, &ids,
                                    &mask, &len, &nspan, &st);
        json_t *wid = json_object_get(c, "ids"), *wm = json_object_get(c, "mask");
        int same_ids = rc == ZT_OK && len == json_array_size(wid), same_mask = same_ids;
        for (size_t k = 0; same_ids && k < len; ++k) same_ids = ids[k] == json_integer_value(json_array_get(wid, k));
        for (size_t k = 0; same_mask && k < len; ++k) same_mask = mask[k] == json_integer_value(json_array_get(wm, k));
        tap_ok(same_ids && same_mask, "template %s, case %zu: token ids%s and assistant mask%s match transformers",
               name, i, same_ids ? "" : " (DIFFER)", same_mask ? "" : " (DIFFERS)");
        if (rc != ZT_OK) tap_diag("%s", st.msg);
        free(ids);
        free(mask);
        zt_tok_free(tok);
    }
    json_decref(root);
}

/* ---------------------------------------------------------------- masks: linear, unchanged
 * (against the by-definition reference of sft_ref.h) */

/* Conversations of tricky contents (white space at the ends, newlines, non-ASCII, the templates' own special
 * tokens and markers inside the content, empty turns): the masks and ids equal the definition's for every
 * template and mode; and a conversation of 1600 turns costs the encoder a bounded multiple of its rendering
 * (each trained span used to re-encode its whole prefix: about 800 renderings' worth). */
static void test_linear_masks(void) {
    static const char *pool[] = {
        "Hello there.", " leading space", "trailing space ", "  both  ", "line one\nline two\n\n", "",
        "caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve \xf0\x9f\x99\x82", "<|im_end|> inside", "x<|eot_id|>y", "</s>",
        "[INST] not a turn [/INST]", "<s> bos in text", "numbers 12345 and 3.14", "\t tab\t", "a",
        "<|start_header_id|>assistant<|end_header_id|>", "ends with newline\n", "\n starts with newline",
    };
    const int np = (int)(sizeof pool / sizeof *pool);
    const char *src = getenv("ZT_SRCDIR");
    src = src && *src ? src : ".";
    static const struct { const char *tmpl, *tok; } cases[] = {
        {"chatml", "tests/data/sft/chatml"}, {"qwen2", "tests/data/sft/chatml"},
        {"llama3", "tests/fixtures/tok/llama3"}, {"mistral", "tests/fixtures/tok/llama2"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; ++c) {
        char tpath[1200];
        snprintf(tpath, sizeof tpath, "%s/%s", src, cases[c].tok);
        zt_tokenizer *tok = NULL;
        zt_status st;
        if (!tap_ok(zt_tok_load(tpath, &tok, &st) == ZT_OK, "load %s", tpath)) { tap_diag("%s", st.msg); continue; }
        int tmpl = zt_chat_template(cases[c].tmpl), b = zt_tok_bos_id(tok), e = zt_tok_eos_id(tok);
        const char *bos = b >= 0 ? zt_tok_token_str(tok, b) : NULL, *eos = e >= 0 ? zt_tok_token_str(tok, e) : NULL;
        int same = 1, convs = 0;
        uint64_t seed = 12345 + c;
        zt_chat_msg m[41];
        for (int it = 0; it < 60 && same; ++it) {
            int n = 1 + it % 40, sys = tmpl != ZT_TMPL_MISTRAL || it % 3 == 0;
            for (int k = 0; k < n; ++k) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                const char *txt = pool[(seed >> 33) % (uint64_t)np];
                m[k].role = k == 0 && sys && it % 2 ? ZT_ROLE_SYSTEM
                          : (k - (sys && it % 2)) % 2 == 0 ? ZT_ROLE_USER : ZT_ROLE_ASSISTANT;
                m[k].content = txt;
                m[k].len = strlen(txt);
            }
            for (int mode = ZT_SFT_MASK_ALL; mode <= ZT_SFT_MASK_LAST && same; ++mode) {
                int32_t *i1 = NULL, *i2 = NULL;
                uint8_t *m1 = NULL, *m2 = NULL;
                size_t l1 = 0, l2 = 0;
                int nspan;
                int r1 = zt_sft_encode_chat(tok, tmpl, bos, eos, m, n, mode, &i1, &m1, &l1, &nspan, &st);
                int r2 = zt_sft_ref_encode(tok, tmpl, bos, eos, m, n, mode, &i2, &m2, &l2, NULL, &st);
                same = r1 == r2 && (r1 != ZT_OK || (l1 == l2 && !memcmp(i1, i2, l1 * sizeof *i1) && !memcmp(m1, m2, l1)));
                if (!same) tap_diag("%s: conversation %d (%d messages), mode %d: rc %d/%d, %zu/%zu ids", cases[c].tmpl,
                                    it, n, mode, r1, r2, l1, l2);
                convs += r1 == ZT_OK;
                free(i1); free(i2); free(m1); free(m2);
            }
        }
        tap_ok(same && convs > 0, "template %s: ids and masks of %d conversations equal those of encoding every "
               "prefix from byte 0", cases[c].tmpl, convs);
        /* 1600 turns: the encoder's work stays within 3 renderings */
        enum { TURNS = 1600 };
        zt_chat_msg *big = malloc(TURNS * sizeof *big);
        for (int k = 0; k < TURNS; ++k) {
            big[k].role = k % 2 ? ZT_ROLE_ASSISTANT : ZT_ROLE_USER;
            big[k].content = pool[k % 5];
            big[k].len = strlen(pool[k % 5]);
        }
        zt_chat_text r;
        int32_t *ids = NULL;
        uint8_t *mask = NULL;
        size_t len = 0;
        int nspan = 0, rc = zt_chat_render(tmpl, big, TURNS, bos, eos, &r, &st);
        uint64_t w0 = zt_tok_work();
        if (rc == ZT_OK) rc = zt_sft_encode_chat(tok, tmpl, bos, eos, big, TURNS, ZT_SFT_MASK_ASSISTANT, &ids, &mask,
                                                 &len, &nspan, &st);
        uint64_t work = zt_tok_work() - w0;
        tap_ok(rc == ZT_OK && nspan == TURNS / 2 && work <= 3 * (uint64_t)r.len,
               "template %s: 1600 turns (%zu bytes rendered) cost the encoder %llu bytes (%.2f renderings)",
               cases[c].tmpl, rc == ZT_OK ? r.len : 0, (unsigned long long)work,
               rc == ZT_OK && r.len ? (double)work / (double)r.len : 0.0);
        if (rc != ZT_OK) tap_diag("%s", st.msg);
        if (r.text) zt_chat_text_free(&r);
        free(ids); free(mask); free(big);
        zt_tok_free(tok);
    }
}

/* ---------------------------------------------------------------- file format */

/* Write an SFT file of nw windows of W tokens: token (w*31 + k*7) % V,
 * mask from maskfn. */
typedef int (*mask_fn)(int w, int k);
static int write_sft(const char *path, int nw, int W, int V, mask_fn mf,
                     uint32_t (*tokfn)(int w, int k)) {
    zt_sft_writer *w;
    zt_status st;
    if (zt_sft_writer_open(path, W, 2, V, 0, ZT_SFT_MASK_ASSISTANT, 0, &w, &st)) {
        printf("# %s\n", st.msg);
        return -1;
    }
    uint32_t tok[512];
    uint8_t mask[512];
    int rc = ZT_OK;
    for (int i = 0; i < nw && rc == ZT_OK; ++i) {
        for (int k = 0; k < W; ++k) {
            tok[k] = tokfn(i, k);
            mask[k] = (uint8_t)(k > 0 && mf(i, k));
        }
        rc = zt_sft_writer_put(w, tok, mask, &st);
    }
    if (rc == ZT_OK) rc = zt_sft_writer_close(w, (uint64_t)nw, &st);
    if (rc == ZT_OK) rc = zt_sft_writer_commit(w, &st);
    zt_sft_writer_free(w);
    if (rc) printf("# %s\n", st.msg);
    return rc;
}

static int V_ = 16;
static uint32_t tok_basic(int w, int k) { return (uint32_t)((w * 31 + k * 7) % V_); }
static int mask_half(int w, int k) { return (k + w) % 2; }
static int mask_all(int w, int k) { (void)w; (void)k; return 1; }
static int mask_var(int w, int k) { return k % (w + 2) == 0; }   /* counts differ per window */

/* patch bytes at off in path */
static void patch(const char *path, long off, const void *b, size_t n) {
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    fwrite(b, 1, n, f);
    fclose(f);
}

/* Opening path (a file or a glob) fails with ZT_EDATA, a message holding
 * want and naming the file `name`. */
static int open_err(const char *path, const char *name, int T, const char *want) {
    zt_dataset *d = NULL;
    zt_status st;
    int rc = zt_dataset_open(path, V_, T, &d, &st);
    zt_dataset_close(d);
    int ok = rc == ZT_EDATA && strstr(st.msg, want) && strstr(st.msg, name);
    if (!ok) tap_diag("rc %d: %s", rc, st.msg);
    return ok;
}

static void test_format(const char *dir) {
    char p[512], q[512], cmd[1200];
    const int W = 9, T = 8, NW = 5;
    snprintf(p, sizeof p, "%s/a.sft", dir);
    tap_ok(write_sft(p, NW, W, V_, mask_half, tok_basic) == 0, "write an SFT file");
    struct stat sb;
    stat(p, &sb);
    tap_ok(sb.st_size == 1024 + NW * (4 + W * 3), "file size 1024 + N (4 + 3W) (%lld)", (long long)sb.st_size);
    zt_dataset *d = NULL;
    zt_status st;
    int rc = zt_dataset_open(p, V_, T, &d, &st);
    tap_ok(rc == ZT_OK && d->masked && d->nsamples == (uint64_t)NW, "opens as a masked dataset of %d windows", NW);
    int good = rc == ZT_OK;
    for (int w = 0; good && w < NW; ++w) {
        uint32_t t[16], c;
        good = zt_dataset_read(d, (uint64_t)w, t, &st) == ZT_OK && zt_dataset_count(d, (uint64_t)w, &c, &st) == 0;
        uint32_t want = 0;
        for (int k = 0; good && k < W; ++k) {
            int m = k > 0 && mask_half(w, k);
            want += (uint32_t)m;
            good = (t[k] & ~ZT_SFT_NOTARGET) == tok_basic(w, k) && !!(t[k] & ZT_SFT_NOTARGET) == !m;
        }
        good = good && c == want;
    }
    tap_ok(good, "windows read back: tokens, mask flags and counts");
    zt_dataset_close(d);

    /* plain tokens of the file, for prep --tokens-in style reads */
    zt_token_file *f;
    rc = zt_tokens_open(p, V_, &f, &st);
    uint32_t all[64];
    good = rc == ZT_OK && f->ntok == (size_t)(NW * W) && zt_tokens_read(f, 3, 20, V_, all, &st) == ZT_OK;
    for (int i = 0; good && i < 20; ++i) good = all[i] == tok_basic((3 + i) / W, (3 + i) % W);
    tap_ok(good, "zt_tokens_read across window records");
    zt_tokens_close(f);

    /* a glob of two SFT files: windows in file order */
    snprintf(q, sizeof q, "%s/b.sft", dir);
    write_sft(q, 3, W, V_, mask_all, tok_basic);
    snprintf(cmd, sizeof cmd, "%s/*.sft", dir);
    rc = zt_dataset_open(cmd, V_, T, &d, &st);
    good = rc == ZT_OK && d->nfiles == 2 && d->nsamples == (uint64_t)NW + 3;
    uint32_t t6[16], c6 = 0;
    good = good && zt_dataset_read(d, NW + 1, t6, &st) == ZT_OK && zt_dataset_count(d, NW + 1, &c6, &st) == ZT_OK &&
           c6 == (uint32_t)(W - 1) && t6[0] == (tok_basic(1, 0) | ZT_SFT_NOTARGET) && t6[3] == tok_basic(1, 3);
    tap_ok(good, "a glob of two SFT files: %d + 3 windows, window %d is the second file's window 1", NW, NW + 1);
    zt_dataset_close(d);
    unlink(q);

    tap_ok(open_err(p, p, 16, "packed for seq_len 8, but the run trains with seq_len 16"),
           "seq_len mismatch names the file and both lengths");
    snprintf(q, sizeof q, "%s/plain.bin", dir);
    tu_write_tokens(q, 100, V_, 1);
    snprintf(cmd, sizeof cmd, "%s/*", dir);
    tap_ok(open_err(cmd, q, T, "cannot mix SFT window files and plain token files"), "mixing SFT and plain files is refused");
    unlink(q);

    /* corruptions, each on a fresh copy */
    snprintf(q, sizeof q, "%s/c.sft", dir);
    struct { long off; uint32_t v; int nbytes; const char *want, *what; } bad[] = {
        {4, 2, 4, "unsupported SFT file version 2", "bad version"},
        {8, 6, 4, "truncated: header says 6 windows", "window count larger than the file"},
        {8, 4, 4, "size mismatch: header says 4 windows", "window count smaller than the file"},
        {1024 + 4 + 2 * 9 + 3, 2, 1, "mask byte 2", "mask byte not 0/1"},
        {1024 + 4 + 2 * 9, 1, 1, "first token", "mask byte set on a window's first token"},
        {1024, 7, 4, "does not match its mask", "count mismatch"},
        {1024 + 4 + 2 * 2, 200, 2, "is >= vocab 16", "token >= vocab"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        write_sft(q, NW, W, V_, mask_half, tok_basic);
        patch(q, bad[i].off, &bad[i].v, (size_t)bad[i].nbytes);
        tap_ok(open_err(q, q, T, bad[i].want), "%s -> error naming the file", bad[i].what);
    }
    write_sft(q, NW, W, V_, mask_half, tok_basic);
    if (truncate(q, 1024 + 2 * (4 + W * 3) + 5) == 0)
        tap_ok(open_err(q, q, T, "truncated: header says 5 windows"), "truncated file -> error naming the file");
    unlink(q);
}

/* ---------------------------------------------------------------- loader */

static void test_loader(const char *dir) {
    char p[512];
    const int W = 9, T = 8, NW = 12;
    snprintf(p, sizeof p, "%s/l.sft", dir);
    write_sft(p, NW, W, V_, mask_half, tok_basic);
    zt_data_opts o = {.pattern = p, .kind = ZT_DATA_TRAIN, .vocab = V_, .T = T, .seed = 7,
                      .micro_batch = 2, .grad_accum = 2, .world = 1, .rank = 0, .workers = 2};
    zt_data_source src;
    zt_status st;
    int rc = zt_data_open(&o, &src, &st);
    if (!tap_ok(rc == ZT_OK && zt_data_masked(&src), "an SFT source is masked")) return;
    int in[2 * 8], tg[2 * 8], good = 1;
    uint64_t total = 0, n;
    for (int micro = 0; micro < 2; ++micro) {
        rc = src.get(src.state, 3, (uint64_t)micro * 2, 2, T, in, tg, &st);
        good = good && rc == ZT_OK;
        for (int i = 0; i < 2 && good; ++i) {
            uint64_t id = zt_data_train_sample(3 * 4 + (uint64_t)micro * 2 + (uint64_t)i, NW, 7);
            for (int t = 0; t < T; ++t) {
                good = good && in[i * T + t] == (int)tok_basic((int)id, t);
                int m = mask_half((int)id, t + 1);
                good = good && tg[i * T + t] == (m ? (int)tok_basic((int)id, t + 1) : -1);
                total += (uint64_t)(tg[i * T + t] >= 0);
            }
        }
    }
    tap_ok(good, "masked targets are -1, inputs and counted targets are the tokens");
    rc = zt_data_count_targets(&src, 3, 0, 4, &n, &st);
    tap_ok(rc == ZT_OK && n == total, "zt_data_count_targets of the step's global batch = targets >= 0 served (%llu)",
           (unsigned long long)total);
    rc = src.get(src.state, 3, 0, 2, T - 1, in, tg, &st);
    tap_ok(rc != ZT_OK, "a masked source serves whole windows only");
    src.close(src.state);
    /* plain sources are not masked: the trainer keeps its old path */
    char q[512];
    snprintf(q, sizeof q, "%s/plain.bin", dir);
    tu_write_tokens(q, 200, V_, 3);
    o.pattern = q;
    rc = zt_data_open(&o, &src, &st);
    tap_ok(rc == ZT_OK && !zt_data_masked(&src), "a plain source is not masked");
    if (rc == ZT_OK) src.close(src.state);
    unlink(q);
    unlink(p);
}

/* ---------------------------------------------------------------- trainer */

static zt_config *sft_config(const char *train, int T, int B) {
    zt_config *c = tu_tiny_config(2, 2, 16, T, V_, B);
    tu_set(c, "ztrain.data.train", "%s", train);
    tu_set(c, "ztrain.data.dataloaders", "1");
    tu_set(c, "gradient_clipping", "0");
    return c;
}

/* One step on `train`; the metrics and the parameters after it. */
static int one_step(const char *train, int T, int B, zt_metrics *m, float **params, size_t *np) {
    zt_config *c = sft_config(train, T, B);
    zt_ctx *ctx = NULL;
    zt_status st;
    int rc = zt_ctx_create(c, NULL, &ctx, &st);
    if (rc == ZT_OK) rc = zt_ctx_open_data(ctx, &st);
    if (rc == ZT_OK) rc = zt_train_step(ctx, m, &st);
    if (rc == ZT_OK) {
        char path[600];
        snprintf(path, sizeof path, "%s.w", train);
        rc = zt_save_weights(ctx, path, &st);
        if (rc == ZT_OK) {
            FILE *f = fopen(path, "rb");
            fseek(f, 0, SEEK_END);
            long sz = ftell(f);
            *np = (size_t)(sz - 1024) / 4;
            *params = malloc(*np * 4);
            fseek(f, 1024, SEEK_SET);
            if (fread(*params, 4, *np, f) != *np) rc = ZT_EIO;
            fclose(f);
            unlink(path);
        }
    }
    if (rc) printf("# %s\n", st.msg);
    zt_ctx_free(ctx);
    zt_config_free(c);
    return rc;
}

static int K_ = 5;   /* the only counted target: token K_+1 of each window */
static int mask_k(int w, int k) { (void)w; return k == K_ + 1; }
static uint32_t tok_a(int w, int k) { return (uint32_t)((w * 5 + k * 3) % V_); }
/* tok_b: equal to tok_a up to token K_+1, different after it */
static uint32_t tok_b(int w, int k) { return k <= K_ + 1 ? tok_a(w, k) : (uint32_t)((w * 11 + k * 13 + 7) % V_); }

static void test_trainer(const char *dir) {
    const int T = 12, W = 13, B = 2;
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/ta.sft", dir);
    snprintf(b, sizeof b, "%s/tb.sft", dir);
    write_sft(a, 4, W, V_, mask_k, tok_a);
    write_sft(b, 4, W, V_, mask_k, tok_b);
    zt_metrics ma, mb;
    float *pa = NULL, *pb = NULL;
    size_t na = 0, nb = 0;
    int ra = one_step(a, T, B, &ma, &pa, &na), rb = one_step(b, T, B, &mb, &pb, &nb);
    tap_ok(ra == 0 && rb == 0 && na == nb && na > 0, "one step on each of two SFT files");
    if (ra || rb || na != nb) { free(pa); free(pb); return; }
    tap_ok(ma.loss == mb.loss && ma.grad_norm == mb.grad_norm && !memcmp(pa, pb, na * 4),
           "only target %d counted: tokens after it (masked targets, later inputs) change neither the loss, "
           "the gradient norm nor the updated parameters", K_);
    free(pa); free(pb);
    /* control: with every target counted the same two files differ */
    write_sft(a, 4, W, V_, mask_all, tok_a);
    write_sft(b, 4, W, V_, mask_all, tok_b);
    ra = one_step(a, T, B, &ma, &pa, &na);
    rb = one_step(b, T, B, &mb, &pb, &nb);
    tap_ok(ra == 0 && rb == 0 && ma.loss != mb.loss && ma.grad_norm != mb.grad_norm && memcmp(pa, pb, na * 4),
           "control: counting every target, the later tokens do change loss and gradients");
    free(pa); free(pb);

    /* the loss is the mean over the counted targets: equals zt_loss on the
     * same windows with -1 targets (the step's forward is before the update) */
    write_sft(a, 4, W, V_, mask_half, tok_a);
    zt_config *c = sft_config(a, T, B);
    zt_ctx *ctx = NULL;
    zt_status st;
    int rc = zt_ctx_create(c, NULL, &ctx, &st);
    if (rc == ZT_OK) rc = zt_ctx_open_data(ctx, &st);
    int in[2 * 12], tg[2 * 12];
    double ref = NAN;
    if (rc == ZT_OK) rc = ctx->train.get(ctx->train.state, 0, 0, B, T, in, tg, &st);
    if (rc == ZT_OK) rc = zt_loss(ctx, in, tg, B, T, &ref, &st);
    zt_metrics m;
    if (rc == ZT_OK) rc = zt_train_step(ctx, &m, &st);
    if (rc) printf("# %s\n", st.msg);
    int cnt = 0;
    for (int i = 0; i < B * T; ++i) cnt += tg[i] >= 0;
    tap_ok(rc == ZT_OK && fabs(m.loss - ref) <= 1e-6 * fabs(ref) && cnt < B * T,
           "step loss %.7f = zt_loss over the %d counted of %d targets %.7f", m.loss, cnt, B * T, ref);
    zt_ctx_free(ctx);
    zt_config_free(c);

    /* evaluation: the mean over the counted targets of all its windows
     * (2 rounds of 2: windows 0-3 in file order), not per round */
    write_sft(a, 4, W, V_, mask_var, tok_a);
    c = sft_config(a, T, B);
    tu_set(c, "ztrain.data.val", "%s", a);
    tu_set(c, "ztrain.eval_batch_size", "2");
    tu_set(c, "ztrain.eval_batches", "2");
    ctx = NULL;
    rc = zt_ctx_create(c, NULL, &ctx, &st);
    if (rc == ZT_OK) rc = zt_ctx_open_data(ctx, &st);
    double vl = NAN, lr[2] = {NAN, NAN};
    int cr[2] = {0, 0};
    for (int r = 0; r < 2 && rc == ZT_OK; ++r) {
        rc = ctx->val.get(ctx->val.state, -1 - r, 0, B, T, in, tg, &st);
        if (rc == ZT_OK) rc = zt_loss(ctx, in, tg, B, T, &lr[r], &st);
        for (int i = 0; i < B * T; ++i) cr[r] += tg[i] >= 0;
    }
    if (rc == ZT_OK) rc = zt_evaluate(ctx, &vl, &st);
    if (rc) printf("# %s\n", st.msg);
    double want = (lr[0] * cr[0] + lr[1] * cr[1]) / (cr[0] + cr[1]);
    tap_ok(rc == ZT_OK && cr[0] != cr[1] && fabs(vl - want) <= 1e-6 * fabs(want),
           "val loss %.7f = the mean over the %d + %d counted targets of its windows %.7f", vl, cr[0], cr[1], want);
    zt_ctx_free(ctx);
    zt_config_free(c);
    unlink(a);
    unlink(b);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    char *dir = tu_tmpdir();
    test_renderings();
    test_tokens();
    test_linear_masks();
    test_format(dir);
    test_loader(dir);
    test_trainer(dir);
    tu_rmdir(dir);
    zt_finalize();
    return tap_done();
}
