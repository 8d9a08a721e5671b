/* util.c -- small runtime helpers: clocks, normal variates. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

double zt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double zt_normal(uint64_t key, uint64_t counter) {
    uint64_t h1 = zt_hash3(key, counter, 0x6e6f726d616c31ULL);
    uint64_t h2 = zt_hash3(key, counter, 0x6e6f726d616c32ULL);
    double u1 = zt_u01(h1), u2 = zt_u01(h2);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int zt_mkdirs(const char *dir, char *created, size_t n, char *bad, size_t nbad) {
    char buf[4096];
    created[0] = '\0';
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        snprintf(bad, nbad, "%s", dir);
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; ++p) {
        int end = *p == '\0';
        if (!end && *p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) == 0) {
            if (!created[0]) snprintf(created, n, "%s", buf);
        } else {
            struct stat sb;
            int e = errno;
            if (e != EEXIST || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                snprintf(bad, nbad, "%s", buf);
                errno = e == EEXIST ? ENOTDIR : e;
                return -1;
            }
        }
        if (end) break;
        *p = '/';
    }
    return 0;
}

void zt_rmdirs_created(const char *dir, const char *created) {
    if (!created || !created[0]) return;
    char buf[4096];
    size_t cn = strlen(created);
    snprintf(buf, sizeof buf, "%s", dir);
    for (;;) {
        size_t k = strlen(buf);
        while (k > 1 && buf[k - 1] == '/') buf[--k] = '\0';
        if (k < cn || strncmp(buf, created, cn) || rmdir(buf) != 0 || k == cn) return;
        char *sl = strrchr(buf, '/');
        if (!sl || sl == buf) return;
        *sl = '\0';
    }
}

const char *zt_json_error_text(const char *text, char *buf, size_t n) {
    static const char nul[] = "\\u0000 is not allowed without JSON_ALLOW_NUL";
    if (!strncmp(text, nul, sizeof nul - 1)) {
        snprintf(buf, n, "a NUL character (\\u0000) in a string is not allowed%s", text + sizeof nul - 1);
        return buf;
    }
    const char *flag = strstr(text, "JSON_");
    if (flag) {   /* another flag name (none in jansson 2.14): the words before it */
        size_t k = (size_t)(flag - text);
        while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '(')) --k;
        snprintf(buf, n, "%.*s", (int)k, text);
        return buf;
    }
    return text;
}
