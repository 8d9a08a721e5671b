/* cuda_fp16.h (CUDA simulator): the raw half storage type. */
#ifndef ZT_CUDASIM_FP16_H
#define ZT_CUDASIM_FP16_H
#include "cuda_runtime.h"
typedef struct __half_raw {
    unsigned short x;
} __half_raw;
#endif
