/*
 * fp_exact.h -- floating-point contraction off for the rest of the file
 * that includes it: no multiply and add fused into one FMA, so each product
 * and sum stays its own IEEE rounding (the order bitsandbytes, torch or a
 * CUDA kernel's __fmul_rn / __fadd_rn round in).  Include it first, right
 * after ztconfig.h, so it also covers the inline functions of the headers
 * that follow (GCC's optimize pragma applies to what is defined after it).
 * Used by kernels/nf4.c, kernels/cpu/cpu_nf4.c and kernels/cpu/cpu_xent16.c.
 */
#ifndef ZT_FP_EXACT_H
#define ZT_FP_EXACT_H

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#endif
