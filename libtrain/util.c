/* util.c -- small runtime helpers: clocks, normal variates. */
#include <math.h>
#include <time.h>
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
