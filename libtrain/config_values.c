/*
 * config_values.c -- value syntax: a key's value parsed from text (flags,
 * environment, JSON strings) or from a JSON value, range-checked against its
 * table row, and the "must be ..." text of what the key accepts.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"
#include "ztrain_env.h"

/* ================================================================ values */

/* "%.15g" text of x (so typical values print as written), or more digits
 * where 15 do not read back exactly. */
void zt_cfg_fmt_double(double x, char *buf, size_t n) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* make it look like a real number */
    if (!strpbrk(buf, ".eEn")) {
        size_t l = strlen(buf);
        if (l + 2 < n) memcpy(buf + l, ".0", 3);
    }
}

static void fmt_num(double x, char *buf, size_t n) {
    /* range bounds: integers print without ".0" */
    if (x == floor(x) && fabs(x) < 1e15) snprintf(buf, n, "%.0f", x);
    else snprintf(buf, n, "%.15g", x);
}

static void int_limits(const keydef *k, long long *lo, long long *hi) {
    *lo = (long long)k->lo;
    if (k->kf & KF_NO_HI) *hi = k->type == T_LONG ? LONG_MAX : INT_MAX;
    else *hi = (long long)k->hi;
}

/* "must be ..." text of a key's requirement. */
void zt_cfg_requirement(const keydef *k, char *buf, size_t n) {
    char lo[64], hi[64];
    switch (k->type) {
    case T_INT:
    case T_LONG: {
        long long a, b;
        int_limits(k, &a, &b);
        if (k->kf & KF_NO_HI) snprintf(buf, n, "must be an integer >= %lld%s", a,
                                       (k->kf & KF_NODE) ? " or \"node\"" : "");
        else snprintf(buf, n, "must be an integer in [%lld, %lld]", a, b);
        break;
    }
    case T_U64:
        if (k->kf & KF_SIZE)
            snprintf(buf, n, "must be a size in bytes, optionally with a K, M, G or T suffix "
                     "(binary: 8G = 8 GiB), or 0/auto");
        else
            snprintf(buf, n, "must be an integer in [0, %llu]", ULLONG_MAX);
        break;
    case T_DOUBLE:
    case T_PAIR: {
        const char *pre = k->type == T_PAIR
            ? "must be a pair of numbers [b1, b2], each" : "must be a number";
        fmt_num(k->lo, lo, sizeof lo);
        fmt_num(k->hi, hi, sizeof hi);
        if (k->kf & KF_NO_HI)
            snprintf(buf, n, "%s %s %s", pre, (k->kf & KF_LO_OPEN) ? ">" : ">=", lo);
        else
            snprintf(buf, n, "%s in %c%s, %s%c", pre, (k->kf & KF_LO_OPEN) ? '(' : '[',
                     lo, hi, (k->kf & KF_HI_OPEN) ? ')' : ']');
        break;
    }
    case T_BOOL:
        snprintf(buf, n, "must be true or false");
        break;
    case T_ENUM:
    case T_PSEUDO: {
        if (strcmp(k->key, "ztrain.preempt_signal") == 0) {
            snprintf(buf, n, "must be one of: SIGUSR2, SIGTERM, SIGINT, SIGHUP "
                     "(not SIGUSR1: NCCL uses it)");
            break;
        }
        size_t j = (size_t)snprintf(buf, n, "must be one of: ");
        for (const char *p = k->values; *p && j + 2 < n; p++) {
            if (*p == '|') {
                if (j + 3 < n) { buf[j++] = ','; buf[j++] = ' '; }
            } else {
                buf[j++] = *p;
            }
        }
        buf[j < n ? j : n - 1] = '\0';
        break;
    }
    case T_STRING:
        if (k->kf & KF_ACKPT)
            snprintf(buf, n, "must be none, blocks, blocks-attn or every-K with K an integer >= 1");
        else if (k->kf & KF_REPORT)
            snprintf(buf, n, "must be off, end or a step interval N >= 1");
        else if (strcmp(k->key, "ztrain.checkpoint.resume") == 0)
            snprintf(buf, n, "must be auto, never or a checkpoint path");
        else if (k->kf & KF_NONEMPTY)
            snprintf(buf, n, "must be a non-empty string of at most %zu characters",
                     k->size - 1);
        else
            snprintf(buf, n, "must be a string of at most %zu characters", k->size - 1);
        break;
    default:
        snprintf(buf, n, "has an unknown type");
    }
}

/* Result of parsing: 0 ok, ZT_EINVAL (use zt_cfg_requirement()). */

static int strict_ll(const char *s, long long *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int strict_ull(const char *s, unsigned long long *out) {
    if (!*s || isspace((unsigned char)*s) || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int strict_double(const char *s, double *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int in_range_d(const keydef *k, double v) {
    if (!isfinite(v)) return 0;
    if ((k->kf & KF_LO_OPEN) ? !(v > k->lo) : !(v >= k->lo)) return 0;
    if (!(k->kf & KF_NO_HI) && ((k->kf & KF_HI_OPEN) ? !(v < k->hi) : !(v <= k->hi)))
        return 0;
    return 1;
}

static int check_int(const keydef *k, long long v, kval *out) {
    long long a, b;
    int_limits(k, &a, &b);
    if (v < a || v > b) return ZT_EINVAL;
    out->i = v;
    return ZT_OK;
}

/* Match an enum value case-insensitively; the canonical spelling goes to
 * out->canon and out->s. */
static const char *enum_match(const char *values, const char *s, kval *out) {
    const char *p = values;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (strlen(s) == len && strncasecmp(p, s, len) == 0 && len < sizeof out->canon) {
            memcpy(out->canon, p, len);
            out->canon[len] = '\0';
            return out->s = out->canon;
        }
        p += len;
        if (*p == '|') p++;
    }
    return NULL;
}

static int parse_bool_str(const char *s, long long *out) {
    static const char *const t[] = {"true", "1", "yes"}, *const f[] = {"false", "0", "no"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, t[i]) == 0) { *out = 1; return 0; }
        if (strcasecmp(s, f[i]) == 0) { *out = 0; return 0; }
    }
    return -1;
}

static int parse_pair_str(const char *s, double out[2]) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf;
    while (isspace((unsigned char)*p)) p++;
    char *end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1])) *--end = '\0';
    if (*p == '[') {
        if (end == p || end[-1] != ']') return -1;
        *--end = '\0';
        p++;
    }
    char *sep = strchr(p, ',');
    if (!sep) {
        sep = p;
        while (*sep && !isspace((unsigned char)*sep)) sep++;
        if (!*sep) return -1;
    }
    *sep = '\0';
    char *a = p, *b = sep + 1;
    /* trim both parts */
    while (isspace((unsigned char)*a)) a++;
    for (char *e = a + strlen(a); e > a && isspace((unsigned char)e[-1]);) *--e = '\0';
    while (isspace((unsigned char)*b)) b++;
    for (char *e = b + strlen(b); e > b && isspace((unsigned char)e[-1]);) *--e = '\0';
    if (strict_double(a, &out[0]) || strict_double(b, &out[1])) return -1;
    return 0;
}

/* activation_checkpointing.policy: canonical "none", "blocks", "blocks-attn"
 * or "every-K". */
static int parse_ackpt(const char *s, kval *out) {
    if (strcasecmp(s, "none") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "off") == 0)
        snprintf(out->canon, sizeof out->canon, "none");
    else if (strcasecmp(s, "blocks") == 0 || strcasecmp(s, "true") == 0)
        snprintf(out->canon, sizeof out->canon, "blocks");
    else if (strcasecmp(s, "blocks-attn") == 0)
        snprintf(out->canon, sizeof out->canon, "blocks-attn");
    else if (strncasecmp(s, "every-", 6) == 0) {
        long long k;
        if (strict_ll(s + 6, &k) || k < 1 || k > 4096) return ZT_EINVAL;
        if (k == 1) snprintf(out->canon, sizeof out->canon, "blocks");
        else snprintf(out->canon, sizeof out->canon, "every-%lld", k);
    } else
        return ZT_EINVAL;
    out->s = out->canon;
    return ZT_OK;
}

/* ztrain.memory_report: canonical "off", "end" or a decimal step interval. */
static int parse_report(const char *s, kval *out) {
    long long n;
    if (strcasecmp(s, "off") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
        snprintf(out->canon, sizeof out->canon, "off");
    else if (strcasecmp(s, "end") == 0 || strcasecmp(s, "true") == 0)
        snprintf(out->canon, sizeof out->canon, "end");
    else if (!strict_ll(s, &n) && n >= 1 && n <= INT_MAX)
        snprintf(out->canon, sizeof out->canon, "%lld", n);
    else
        return ZT_EINVAL;
    out->s = out->canon;
    return ZT_OK;
}

int zt_parse_size(const char *s, unsigned long long *out) {
    if (!s) return -1;
    while (isspace((unsigned char)*s)) s++;
    if (strcasecmp(s, "auto") == 0) { *out = 0; return 0; }
    if (!isdigit((unsigned char)*s) && *s != '.') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    case 'P': mul = 1024.0 * 1024 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    while (isspace((unsigned char)*end)) end++;
    if (*end) return -1;
    double b = v * mul;
    if (b >= 18446744073709551615.0) return -1;
    if (mul == 1 && b != floor(b)) return -1;   /* a fraction of a byte */
    *out = (unsigned long long)(b + 0.5);
    return 0;
}

int zt_cfg_parse_str(const keydef *k, const char *s, kval *out) {
    if ((k->kf & KF_NODE) && strcasecmp(s, "node") == 0) {
        out->i = ZT_SHARD_GROUP_NODE;
        return ZT_OK;
    }
    if ((k->kf & KF_AUTO) && strcasecmp(s, "auto") == 0) {
        out->i = (k->kf & KF_FIT) ? ZT_MICRO_BATCH_AUTO : 0;
        return ZT_OK;
    }
    if (k->kf & KF_ACKPT) return parse_ackpt(s, out);
    if (k->kf & KF_REPORT) return parse_report(s, out);
    if (k->kf & KF_SIZE) return zt_parse_size(s, &out->u) ? ZT_EINVAL : ZT_OK;
    switch (k->type) {
    case T_INT:
    case T_LONG: {
        long long v;
        if (strict_ll(s, &v)) return ZT_EINVAL;
        return check_int(k, v, out);
    }
    case T_U64:
        return strict_ull(s, &out->u) ? ZT_EINVAL : ZT_OK;
    case T_DOUBLE:
        if (strict_double(s, &out->d[0]) || !in_range_d(k, out->d[0])) return ZT_EINVAL;
        return ZT_OK;
    case T_PAIR:
        if (parse_pair_str(s, out->d) || !in_range_d(k, out->d[0]) ||
            !in_range_d(k, out->d[1]))
            return ZT_EINVAL;
        return ZT_OK;
    case T_BOOL:
        return parse_bool_str(s, &out->i) ? ZT_EINVAL : ZT_OK;
    case T_ENUM:
    case T_PSEUDO:
        return enum_match(k->values, s, out) ? ZT_OK : ZT_EINVAL;
    case T_STRING:
        if (strlen(s) >= k->size) return ZT_EINVAL;
        if ((k->kf & KF_NONEMPTY) && !*s) return ZT_EINVAL;
        if (k->off == offsetof(struct zt_config, ckpt_resume)) {
            const char *why;   /* the parser the Slurm plugin uses too */
            if (ztrain_resume_check(s, &why)) return ZT_EINVAL;
        }
        out->s = s;
        return ZT_OK;
    default:
        return ZT_EINVAL;
    }
}

static int json_num(const json_t *v, double *out) {
    if (json_is_integer(v)) { *out = (double)json_integer_value(v); return 0; }
    if (json_is_real(v)) { *out = json_real_value(v); return 0; }
    return -1;
}

int zt_cfg_parse_json(const keydef *k, const json_t *v, kval *out) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strlen(s) != json_string_length(v)) return ZT_EINVAL; /* embedded NUL */
        return zt_cfg_parse_str(k, s, out);
    }
    switch (k->type) {
    case T_INT:
    case T_LONG:
        if (json_is_integer(v)) return check_int(k, (long long)json_integer_value(v), out);
        if (json_is_real(v)) {
            double d = json_real_value(v);
            if (d == floor(d) && fabs(d) < 9e18) return check_int(k, (long long)d, out);
        }
        return ZT_EINVAL;
    case T_U64:
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
            out->u = (unsigned long long)json_integer_value(v);
            return ZT_OK;
        }
        return ZT_EINVAL;
    case T_DOUBLE:
        if (json_num(v, &out->d[0]) || !in_range_d(k, out->d[0])) return ZT_EINVAL;
        return ZT_OK;
    case T_PAIR:
        if (!json_is_array(v) || json_array_size(v) != 2 ||
            json_num(json_array_get(v, 0), &out->d[0]) ||
            json_num(json_array_get(v, 1), &out->d[1]) ||
            !in_range_d(k, out->d[0]) || !in_range_d(k, out->d[1]))
            return ZT_EINVAL;
        return ZT_OK;
    case T_BOOL:
        if (json_is_boolean(v)) { out->i = json_is_true(v); return ZT_OK; }
        return ZT_EINVAL;
    default:
        return ZT_EINVAL;   /* strings, enums: only JSON strings */
    }
}
