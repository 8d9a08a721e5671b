/*
 * test_fp_exact.c -- kernels/fp_exact.h keeps a * b + c two roundings even
 * where the compiler may fuse it: the function below is built with FMA
 * instructions allowed (x86's target("fma"); aarch64 and others have them
 * anyway) and GNU C's default contraction, and must still round the product
 * before the add, as nf4.c, cpu_nf4.c and cpu_xent16.c need.
 * a = b = 1 + 2^-12, c = -(1 + 2^-11): a * b = 1 + 2^-11 + 2^-24 rounds
 * (a tie, to even) to 1 + 2^-11, so the sum is 0; fused, it is 2^-24.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "fp_exact.h"

#include <math.h>

#include "tap.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FMA_ALLOWED __attribute__((target("fma"), noinline))
#elif defined(__GNUC__)
#define FMA_ALLOWED __attribute__((noinline))
#else
#define FMA_ALLOWED
#endif

static FMA_ALLOWED float mul_add(float a, float b, float c) { return a * b + c; }

int main(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (!__builtin_cpu_supports("fma")) {
        tap_skip_all("this CPU has no FMA instructions");
        return 0;
    }
#endif
    volatile float a = 1.0f + ldexpf(1.0f, -12), c = -(1.0f + ldexpf(1.0f, -11));
    const float fused = fmaf(a, a, c), got = mul_add(a, a, c);
    tap_ok(fused == ldexpf(1.0f, -24), "fmaf(1 + 2^-12, 1 + 2^-12, -(1 + 2^-11)) is 2^-24 (got %a)",
           (double)fused);
    tap_ok(got == 0.0f, "with fp_exact.h, a * b + c is the product rounded, then the sum: 0 (got %a)",
           (double)got);
    return tap_done();
}
