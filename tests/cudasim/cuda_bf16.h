/* cuda_bf16.h (CUDA simulator): the raw bf16 storage type the backend uses. */
#ifndef ZT_CUDASIM_BF16_H
#define ZT_CUDASIM_BF16_H
#include "cuda_runtime.h"
typedef struct __nv_bfloat16_raw {
    unsigned short x;
} __nv_bfloat16_raw;
#endif
