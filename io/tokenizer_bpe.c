/* tokenizer_bpe.c -- the BPE model of a Hugging Face tokenizer.json: a string -> id hash table, a merge-rank
 * hash table over id pairs, BPE over one pre-token with a binary heap (HF's Word::merge_all, merge for merge:
 * lowest rank first, then leftmost; stale entries skipped the same way), and a per-thread cache of
 * pre-token -> ids. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer_int.h"

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}

/* ------------------------------------------------------------ string map */
static int strmap_grow(zt_strmap *m, zt_status *st) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    uint32_t *slot = calloc(cap, sizeof *slot);
    const char **key = realloc(m->key, (cap / 2) * sizeof *key);
    if (key) m->key = key;
    uint32_t *klen = realloc(m->klen, (cap / 2) * sizeof *klen);
    if (klen) m->klen = klen;
    int32_t *val = realloc(m->val, (cap / 2) * sizeof *val);
    if (val) m->val = val;
    if (!slot || !key || !klen || !val) { free(slot); return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); }
    for (size_t i = 0; i < m->n; ++i) {
        size_t h = hash_bytes(m->key[i], m->klen[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = (uint32_t)(i + 1);
    }
    free(m->slot);
    m->slot = slot; m->cap = cap;
    return ZT_OK;
}

int zt_strmap_put(zt_strmap *m, const char *k, size_t kn, int32_t v, zt_status *st) {
    if (2 * (m->n + 1) > m->cap) ZT_TRY(strmap_grow(m, st));
    size_t h = hash_bytes(k, kn) & (m->cap - 1);
    while (m->slot[h]) {
        uint32_t i = m->slot[h] - 1;
        if (m->klen[i] == kn && memcmp(m->key[i], k, kn) == 0) { m->val[i] = v; return ZT_OK; }
        h = (h + 1) & (m->cap - 1);
    }
    m->key[m->n] = k; m->klen[m->n] = (uint32_t)kn; m->val[m->n] = v;
    m->slot[h] = (uint32_t)(++m->n);
    return ZT_OK;
}

int32_t zt_strmap_get(const zt_strmap *m, const char *k, size_t kn) {
    if (!m->cap) return -1;
    size_t h = hash_bytes(k, kn) & (m->cap - 1);
    while (m->slot[h]) {
        uint32_t i = m->slot[h] - 1;
        if (m->klen[i] == kn && memcmp(m->key[i], k, kn) == 0) return m->val[i];
        h = (h + 1) & (m->cap - 1);
    }
    return -1;
}

void zt_strmap_free(zt_strmap *m) {
    free(m->slot); free(m->key); free(m->klen); free(m->val);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ merges */
static inline size_t pair_hash(uint64_t k, size_t cap) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

int zt_bpe_merge_put(zt_bpe *b, int32_t a, int32_t c, uint32_t rank, int32_t new_id, zt_status *st) {
    /* keep the load under 1/2 (ranks are 0..nmerges-1, given in order: rank + 1 bounds the count) */
    if (2 * ((size_t)rank + 1) > b->mcap) {
        size_t cap = b->mcap ? 2 * b->mcap : 4096;
        uint64_t *k = malloc(cap * sizeof *k), *v = malloc(cap * sizeof *v);
        if (!k || !v) { free(k); free(v); return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory (merges)"); }
        memset(k, 0xff, cap * sizeof *k);
        for (size_t i = 0; i < b->mcap; ++i)
            if (b->mkey[i] != UINT64_MAX) {
                size_t h = pair_hash(b->mkey[i], cap);
                while (k[h] != UINT64_MAX) h = (h + 1) & (cap - 1);
                k[h] = b->mkey[i]; v[h] = b->mval[i];
            }
        free(b->mkey); free(b->mval);
        b->mkey = k; b->mval = v; b->mcap = cap;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)c;
    size_t h = pair_hash(key, b->mcap);
    while (b->mkey[h] != UINT64_MAX && b->mkey[h] != key) h = (h + 1) & (b->mcap - 1);
    b->mkey[h] = key; /* a repeated pair: the later rank wins, as HF's HashMap collect */
    b->mval[h] = ((uint64_t)rank << 32) | (uint32_t)new_id;
    return ZT_OK;
}

static inline int merge_get(const zt_bpe *b, int32_t a, int32_t c, uint32_t *rank, int32_t *new_id) {
    if (!b->mcap) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)c;
    size_t h = pair_hash(key, b->mcap);
    while (b->mkey[h] != UINT64_MAX) {
        if (b->mkey[h] == key) { *rank = (uint32_t)(b->mval[h] >> 32); *new_id = (int32_t)(uint32_t)b->mval[h]; return 1; }
        h = (h + 1) & (b->mcap - 1);
    }
    return 0;
}

int zt_ids_push(int32_t **ids, size_t *n, size_t *cap, int32_t v, zt_status *st) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        int32_t *p = realloc(*ids, c * sizeof *p);
        if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        *ids = p; *cap = c;
    }
    (*ids)[(*n)++] = v;
    return ZT_OK;
}

/* ------------------------------------------------------------ per-thread cache */
#define CACHE_SLOTS (1u << 16)       /* entries: at most half of this, then the cache is cleared */
#define CACHE_MAXKEY 256             /* longer pre-tokens are not cached */
typedef struct cache_ent { uint32_t koff, klen, ioff, nid; } cache_ent;
typedef struct tok_cache {
    uint64_t serial;
    uint32_t slot[CACHE_SLOTS];
    cache_ent ent[CACHE_SLOTS / 2]; uint32_t n;
    char *keys; size_t klen, kcap;
    int32_t *ids; size_t nids, icap;
} tok_cache;

static pthread_key_t cache_key;
static void cache_free(void *p) {
    tok_cache *c = p;
    if (c) { free(c->keys); free(c->ids); free(c); }
}
static void cache_key_make(void) { pthread_key_create(&cache_key, cache_free); }
static void cache_clear(tok_cache *c) {
    memset(c->slot, 0, sizeof c->slot);
    c->n = 0; c->klen = 0; c->nids = 0;
}
static tok_cache *cache_get(uint64_t serial) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cache_key_make);
    tok_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return NULL;
        pthread_setspecific(cache_key, c);
    }
    if (c->serial != serial) { cache_clear(c); c->serial = serial; }
    return c;
}
static const cache_ent *cache_find(const tok_cache *c, const char *s, size_t n, uint32_t *slot) {
    uint32_t h = (uint32_t)hash_bytes(s, n) & (CACHE_SLOTS - 1);
    while (c->slot[h]) {
        const cache_ent *e = &c->ent[c->slot[h] - 1];
        if (e->klen == n && memcmp(c->keys + e->koff, s, n) == 0) return e;
        h = (h + 1) & (CACHE_SLOTS - 1);
    }
    *slot = h;
    return NULL;
}
static void cache_put(tok_cache *c, uint32_t slot, const char *s, size_t n, const int32_t *ids, size_t nid) {
    if (c->n >= CACHE_SLOTS / 2 || c->klen + n > ((size_t)1 << 24) || c->nids + nid > ((size_t)1 << 22)) {
        cache_clear(c);
        uint32_t h = (uint32_t)hash_bytes(s, n) & (CACHE_SLOTS - 1);
        slot = h;
    }
    if (c->klen + n > c->kcap) {
        size_t cap = c->kcap ? c->kcap : 65536;
        while (cap < c->klen + n) cap *= 2;
        char *p = realloc(c->keys, cap);
        if (!p) return;                       /* caching is best effort */
        c->keys = p; c->kcap = cap;
    }
    if (c->nids + nid > c->icap) {
        size_t cap = c->icap ? c->icap : 16384;
        while (cap < c->nids + nid) cap *= 2;
        int32_t *p = realloc(c->ids, cap * sizeof *p);
        if (!p) return;
        c->ids = p; c->icap = cap;
    }
    cache_ent *e = &c->ent[c->n];
    e->koff = (uint32_t)c->klen; e->klen = (uint32_t)n; e->ioff = (uint32_t)c->nids; e->nid = (uint32_t)nid;
    memcpy(c->keys + c->klen, s, n); c->klen += n;
    if (nid) memcpy(c->ids + c->nids, ids, nid * sizeof *ids);
    c->nids += nid;
    c->slot[slot] = ++c->n;
}

/* ------------------------------------------------------------ BPE over one word */
typedef struct sym { int32_t id; int32_t prev, next; uint32_t len; } sym;
typedef struct mrg { uint32_t rank; int32_t pos; int32_t new_id; } mrg;

static inline int mrg_less(const mrg *a, const mrg *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}
static void heap_push(mrg *h, size_t *n, mrg v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!mrg_less(&v, &h[p])) break;
        h[i] = h[p]; i = p;
    }
    h[i] = v;
}
static mrg heap_pop(mrg *h, size_t *n) {
    mrg top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const mrg *best = &v;
        if (l < *n && mrg_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && mrg_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m]; i = m;
    }
    if (*n) h[i] = v;
    return top;
}

/* word -> symbols (chars looked up in the vocabulary; byte fallback; unk with fuse_unk) */
static int word_symbols(const zt_bpe *b, const char *s, size_t n, sym *sy, size_t *ns) {
    size_t k = 0, cnt = 0;
    int32_t unk_len = -1;                 /* pending unk run (bytes) */
    while (k < n) {
        uint32_t cp;
        int l = zt_utf8_dec(s + k, &cp);
        int32_t id = zt_strmap_get(&b->vocab, s + k, (size_t)l);
        if (id >= 0) {
            if (unk_len >= 0) { sy[cnt].id = b->unk; sy[cnt].len = (uint32_t)unk_len; ++cnt; unk_len = -1; }
            sy[cnt].id = id; sy[cnt].len = (uint32_t)l; ++cnt;
        } else {
            int all = b->byte_fallback;
            for (int j = 0; j < l && all; ++j) all = b->bytetok[(unsigned char)s[k + j]] >= 0;
            if (all) {
                /* HF leaves a pending unk run pending here (byte tokens go first) */
                for (int j = 0; j < l; ++j) { sy[cnt].id = b->bytetok[(unsigned char)s[k + j]]; sy[cnt].len = 1; ++cnt; }
            } else if (b->unk >= 0) {
                if (unk_len >= 0 && b->fuse_unk) unk_len += l;
                else {
                    if (unk_len >= 0) { sy[cnt].id = b->unk; sy[cnt].len = (uint32_t)unk_len; ++cnt; }
                    unk_len = l;
                }
            }
            /* no unk token: the character is dropped, as HF does */
        }
        k += (size_t)l;
    }
    if (unk_len >= 0) { sy[cnt].id = b->unk; sy[cnt].len = (uint32_t)unk_len; ++cnt; }
    for (size_t i = 0; i < cnt; ++i) { sy[i].prev = (int32_t)i - 1; sy[i].next = i + 1 < cnt ? (int32_t)i + 1 : -1; }
    *ns = cnt;
    return ZT_OK;
}

static void merge_all(const zt_bpe *b, sym *sy, size_t ns, mrg *heap) {
    size_t nh = 0;
    for (size_t i = 0; i + 1 < ns; ++i) {
        uint32_t r; int32_t nid;
        if (merge_get(b, sy[i].id, sy[i + 1].id, &r, &nid)) heap_push(heap, &nh, (mrg){r, (int32_t)i, nid});
    }
    while (nh) {
        mrg top = heap_pop(heap, &nh);
        sym *cur = &sy[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        sym *right = &sy[cur->next];
        uint32_t r; int32_t nid;
        if (!merge_get(b, cur->id, right->id, &r, &nid) || nid != top.new_id) continue;
        cur->id = top.new_id;
        cur->len += right->len;
        cur->next = right->next;
        right->len = 0;
        if (cur->next >= 0) sy[cur->next].prev = top.pos;
        if (cur->prev >= 0 && merge_get(b, sy[cur->prev].id, cur->id, &r, &nid))
            heap_push(heap, &nh, (mrg){r, cur->prev, nid});
        if (cur->next >= 0 && merge_get(b, cur->id, sy[cur->next].id, &r, &nid))
            heap_push(heap, &nh, (mrg){r, top.pos, nid});
    }
}

/* ------------------------------------------------------------ Unigram (HF models/unigram/model.rs) */
/* Viterbi over byte positions (encode_optimized): every vocabulary piece that starts at a character
 * boundary scores score + best-so-far (f64, first best kept on ties); a character that starts no
 * one-character piece gets an unk node scoring min_score - 10.  Backtracking fuses adjacent unk nodes
 * (fuse_unk is always on for Unigram); then each piece is its id, or (not in the vocabulary: a fused unk
 * run) its <0xNN> byte tokens with byte_fallback when all exist, else unk_id.  With no unk_id, text that
 * needs it is an error, as HF's. */
typedef struct vnode { double score; int32_t id; int64_t from; } vnode;
static int unigram_tokenize(const zt_bpe *b, const char *s, size_t n, int32_t **ids, size_t *nids, size_t *cap,
                            zt_status *st) {
    vnode nb[257];
    vnode *nd = n + 1 <= 257 ? nb : malloc((n + 1) * sizeof *nd);
    int32_t pb[256];
    int32_t *piece = 2 * n <= 256 ? pb : malloc(2 * (n + 1) * sizeof *piece);  /* (start, end) pairs, reversed */
    if (!nd || !piece) {
        if (nd != nb) free(nd);
        if (piece != pb) free(piece);
        return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i <= n; ++i) { nd[i].score = 0; nd[i].id = -1; nd[i].from = -1; }
    int rc = ZT_OK;
    double unk_score = b->min_score - 10.0;
    for (size_t at = 0; at < n && rc == ZT_OK;) {
        double till = nd[at].score;
        uint32_t cp;
        size_t mb = (size_t)zt_utf8_dec(s + at, &cp);
        int single = 0;
        size_t lim = n - at < b->maxlen ? n - at : b->maxlen;
        for (size_t l = mb; l <= lim;) {
            int32_t id = zt_strmap_get(&b->vocab, s + at, l);
            if (id >= 0) {
                double c = b->score[id] + till;
                vnode *t = &nd[at + l];
                if (t->from < 0 || c > t->score) { t->score = c; t->from = (int64_t)at; t->id = id; }
                if (l == mb) single = 1;
            }
            if (at + l >= n) break;
            l += (size_t)zt_utf8_dec(s + at + l, &cp);
        }
        if (!single) {
            if (b->unk < 0) {
                rc = zt_fail(st, ZT_EDATA, "tokenizer: Unigram model without unk_id meets a character it has no "
                             "piece for (U+%04X)", (unsigned)cp);
                break;
            }
            double c = unk_score + till;
            vnode *t = &nd[at + mb];
            if (t->from < 0 || c > t->score) { t->score = c; t->from = (int64_t)at; t->id = b->unk; }
        }
        at += mb;
    }
    /* backtrack into (start, end) pieces, right to left; adjacent unk nodes fused */
    size_t np = 0;
    int prev_unk = 0;
    for (size_t end = n; end > 0 && rc == ZT_OK;) {
        size_t from = (size_t)nd[end].from;
        int is_unk = b->unk >= 0 && nd[end].id == b->unk;
        if (is_unk && prev_unk) piece[2 * np - 2] = (int32_t)from;
        else { piece[2 * np] = (int32_t)from; piece[2 * np + 1] = (int32_t)end; ++np; }
        prev_unk = is_unk;
        end = from;
    }
    for (size_t k = np; k-- > 0 && rc == ZT_OK;) {
        const char *p = s + piece[2 * k];
        size_t l = (size_t)(piece[2 * k + 1] - piece[2 * k]);
        int32_t id = zt_strmap_get(&b->vocab, p, l);
        if (id >= 0) { rc = zt_ids_push(ids, nids, cap, id, st); continue; }
        int all = b->byte_fallback;
        for (size_t j = 0; j < l && all; ++j) all = b->bytetok[(unsigned char)p[j]] >= 0;
        if (all) {
            for (size_t j = 0; j < l && rc == ZT_OK; ++j) rc = zt_ids_push(ids, nids, cap, b->bytetok[(unsigned char)p[j]], st);
            continue;
        }
        if (b->unk < 0) rc = zt_fail(st, ZT_EDATA, "tokenizer: Unigram model without unk_id meets an unknown piece");
        else rc = zt_ids_push(ids, nids, cap, b->unk, st);
    }
    if (nd != nb) free(nd);
    if (piece != pb) free(piece);
    return rc;
}

/* ------------------------------------------------------------ WordPiece (HF models/wordpiece/mod.rs) */
/* Greedy longest match from the left; pieces after the first carry the continuing_subword_prefix; a word
 * with a part not in the vocabulary, or longer than max_input_chars_per_word characters, is one unk. */
static int wordpiece_tokenize(const zt_bpe *b, const char *s, size_t n, int32_t **ids, size_t *nids, size_t *cap,
                              zt_status *st) {
    size_t nch = 0;
    for (size_t k = 0; k < n; ++k) nch += ((unsigned char)s[k] & 0xC0) != 0x80;
    size_t first = *nids;
    char sbuf[512];
    char *tmp = b->wp_prefixlen + n <= sizeof sbuf ? sbuf : malloc(b->wp_prefixlen + n);
    if (!tmp) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
    memcpy(tmp, b->wp_prefix, b->wp_prefixlen);
    int bad = nch > (size_t)b->wp_maxchars, rc = ZT_OK;
    for (size_t start = 0; start < n && !bad && rc == ZT_OK;) {
        size_t end = n;
        int32_t id = -1;
        while (start < end) {
            if (start > 0) {
                memcpy(tmp + b->wp_prefixlen, s + start, end - start);
                id = zt_strmap_get(&b->vocab, tmp, b->wp_prefixlen + end - start);
            } else id = zt_strmap_get(&b->vocab, s, end);
            if (id >= 0) break;
            do --end; while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80);
        }
        if (id < 0) { bad = 1; break; }
        rc = zt_ids_push(ids, nids, cap, id, st);
        start = end;
    }
    if (tmp != sbuf) free(tmp);
    ZT_TRY(rc);
    if (bad) {
        *nids = first;
        if (b->unk < 0) return zt_fail(st, ZT_EDATA, "tokenizer: WordPiece unk_token is not in the vocabulary");
        return zt_ids_push(ids, nids, cap, b->unk, st);
    }
    return ZT_OK;
}

int zt_bpe_tokenize(const zt_bpe *b, const char *s, size_t n, int32_t **ids, size_t *nids, size_t *cap,
                    zt_status *st) {
    if (n == 0) return ZT_OK;
    if (b->model == ZT_MODEL_UNIGRAM) return unigram_tokenize(b, s, n, ids, nids, cap, st);
    if (b->model == ZT_MODEL_WORDPIECE) return wordpiece_tokenize(b, s, n, ids, nids, cap, st);
    if (b->ignore_merges) {
        int32_t id = zt_strmap_get(&b->vocab, s, n);
        if (id >= 0) return zt_ids_push(ids, nids, cap, id, st);
    }
    tok_cache *c = n <= CACHE_MAXKEY ? cache_get(b->serial) : NULL;
    uint32_t slot = 0;
    if (c) {
        const cache_ent *e = cache_find(c, s, n, &slot);
        if (e) {
            for (uint32_t i = 0; i < e->nid; ++i) ZT_TRY(zt_ids_push(ids, nids, cap, c->ids[e->ioff + i], st));
            return ZT_OK;
        }
    }
    /* symbols: at most one per byte.  Heap: it starts with < ns entries and each merge pops one entry and
     * pushes at most two, other iterations only pop: never more than 2 ns entries. */
    sym sbuf[64]; mrg hbuf[130];
    sym *sy = n <= 64 ? sbuf : malloc(n * sizeof *sy);
    mrg *heap = 2 * n + 2 <= 130 ? hbuf : malloc((2 * n + 2) * sizeof *heap);
    if (!sy || !heap) {
        if (sy != sbuf) free(sy);
        if (heap != hbuf) free(heap);
        return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
    }
    size_t ns;
    word_symbols(b, s, n, sy, &ns);
    merge_all(b, sy, ns, heap);
    size_t first = *nids;
    int rc = ZT_OK;
    for (size_t i = 0; i < ns && rc == ZT_OK; ++i)
        if (sy[i].len) rc = zt_ids_push(ids, nids, cap, sy[i].id, st);
    /* (a word can give no id at all: no unk token, no byte fallback; then *ids may still be NULL) */
    if (rc == ZT_OK && c) cache_put(c, slot, s, n, *nids > first ? *ids + first : NULL, *nids - first);
    if (sy != sbuf) free(sy);
    if (heap != hbuf) free(heap);
    return rc;
}

void zt_bpe_free(zt_bpe *b) {
    zt_strmap_free(&b->vocab);
    free(b->id2tok);                      /* the strings live in the arena */
    free(b->arena);
    free(b->mkey); free(b->mval);
    free(b->score); free(b->wp_prefix);
    memset(b, 0, sizeof *b);
}
