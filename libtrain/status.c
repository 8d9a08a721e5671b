/* status.c -- error status helpers: one line of text plus a code. */
#include <stdio.h>
#include <string.h>
#include "internal.h"

const char *zt_code_name(int code) {
    switch (code) {
    case ZT_OK: return "ok";
    case ZT_EINVAL: return "invalid argument";
    case ZT_EIO: return "I/O error";
    case ZT_EDATA: return "bad data";
    case ZT_ENOMEM: return "out of memory";
    case ZT_ECOMM: return "communication error";
    case ZT_EUNSUPPORTED: return "not supported";
    case ZT_EINTERNAL: return "internal error";
    case ZT_EPREEMPTED: return "preempted";
    default: return "unknown error";
    }
}

void zt_status_clear(zt_status *st) {
    if (!st) return;
    st->code = ZT_OK;
    st->msg[0] = '\0';
}

/* Keep the message on one line: newlines become spaces. */
static void one_line(char *s) {
    for (; *s; ++s)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

int zt_fail(zt_status *st, int code, const char *fmt, ...) {
    if (st) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->msg, sizeof st->msg, fmt, ap);
        va_end(ap);
        one_line(st->msg);
        st->code = code;
    }
    return code;
}

int zt_fail_prefix(zt_status *st, const char *fmt, ...) {
    if (!st) return ZT_EINTERNAL;
    char prefix[512], old[sizeof st->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, st->msg, sizeof old);
    snprintf(st->msg, sizeof st->msg, "%.500s: %.500s", prefix, old);
    one_line(st->msg);
    return st->code;
}
