/* json_py.c -- JSON as Python's json module reads it (json_py.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_py.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* a token that jansson refuses, at s[0, n): its replacement (NULL: keep; QUOTE: the token itself in
 * quotes), *len its length */
static const char QUOTE[] = "\"";
static const char *rewrite(const char *s, size_t n, size_t *len) {
    static const char *const consts[] = {"-Infinity", "Infinity", "NaN"};
    for (int k = 0; k < 3; ++k) {
        size_t m = strlen(consts[k]);
        if (n >= m && !memcmp(s, consts[k], m)) { *len = m; return QUOTE; }
    }
    size_t i = 0;
    if (s[i] == '-') ++i;
    size_t d0 = i;
    while (i < n && is_digit(s[i])) ++i;
    size_t ndig = i - d0;
    int isint = 1, isexp = 0;
    if (i < n && s[i] == '.') { isint = 0; ++i; while (i < n && is_digit(s[i])) ++i; }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        isint = 0;
        isexp = 1;
        ++i;
        if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
        while (i < n && is_digit(s[i])) ++i;
    }
    *len = i;
    if (!ndig) return NULL;   /* not a number: jansson's own error */
    /* does it fit where jansson puts it (a 64-bit integer, a finite double)? */
    if (isint && ndig < 19) return NULL;
    if (!isint && !isexp && ndig < 300) return NULL;
    char tmp[64];
    if (isint && ndig <= 20 && i < sizeof tmp) {
        memcpy(tmp, s, i);
        tmp[i] = 0;
        errno = 0;
        (void)strtoll(tmp, NULL, 10);
        if (errno != ERANGE) return NULL;
    }
    /* the nearest double (strtod rounds correctly, as Python's float()) */
    char *num = malloc(i + 1);
    if (!num) return NULL;
    memcpy(num, s, i);
    num[i] = 0;
    errno = 0;
    double v = strtod(num, NULL);
    int over = errno == ERANGE && isinf(v);
    free(num);
    if (over) return isint ? QUOTE : v < 0 ? "\"-Infinity\"" : "\"Infinity\"";
    return isint ? ".0" : NULL;   /* ".0": appended (the integer read as a real) */
}

json_t *zt_json_loadb_py(const char *buf, size_t n, size_t flags, json_error_t *err) {
    char *out = NULL;
    size_t on = 0, done = 0;   /* buf[0, done) copied to out */
    int instr = 0;
    for (size_t i = 0; i < n;) {
        char ch = buf[i];
        if (instr) {
            if (ch == '\\') i += 2;
            else { if (ch == '"') instr = 0; ++i; }
            continue;
        }
        if (ch == '"') { instr = 1; ++i; continue; }
        if (!(ch == '-' || is_digit(ch) || ch == 'N' || ch == 'I')) { ++i; continue; }
        if (i > 0 && (is_digit(buf[i - 1]) || is_alpha(buf[i - 1]))) { ++i; continue; }   /* inside a word */
        size_t len;
        const char *rep = rewrite(buf + i, n - i, &len);
        if (!len) len = 1;
        if (rep) {
            /* ".0" appended; QUOTE: the token between quotes; else the token replaced */
            size_t keep = rep[0] == '.' || rep == QUOTE ? len : 0, rl = strlen(rep);
            char *no = realloc(out, on + (i - done) + keep + 2 * rl + 1);
            if (!no) { free(out); out = NULL; break; }
            out = no;
            memcpy(out + on, buf + done, i - done);
            on += i - done;
            if (rep == QUOTE) out[on++] = '"';
            memcpy(out + on, buf + i, keep);
            on += keep;
            memcpy(out + on, rep, rl);
            on += rl;
            done = i + len;
        }
        i += len;
    }
    if (!out) return json_loadb(buf, n, flags, err);
    char *no = realloc(out, on + (n - done) + 1);
    if (!no) { free(out); return json_loadb(buf, n, flags, err); }
    out = no;
    memcpy(out + on, buf + done, n - done);
    on += n - done;
    json_t *j = json_loadb(out, on, flags, err);
    free(out);
    return j;
}

json_t *zt_json_load_file_py(const char *path, size_t flags, json_error_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return json_load_file(path, flags, err);   /* its error */
    size_t n = 0, cap = 1 << 16;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) { free(b); b = NULL; }
        else b = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) { free(b); return json_load_file(path, flags, err); }
    json_t *j = zt_json_loadb_py(b, n, flags, err);
    free(b);
    return j;
}
