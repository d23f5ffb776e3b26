/* Tensor-by-tensor comparison of two safetensors files (`detrain compare` on checkpoints):
 * the first differing tensor and element, both values in hex. Reads in 64 KiB pieces, so
 * files of any size compare in constant memory. */
#ifndef DT_CKPT_ST_COMPARE_H
#define DT_CKPT_ST_COMPARE_H

#include "detrain/detrain.h"

#include <stdint.h>

/* Result of comparing two safetensors files tensor by tensor. */
typedef struct dt_st_diff {
    int identical;      /* 1: same tensor names, dtypes, shapes and bytes */
    int compared;       /* tensors compared before the first difference (or all) */
    char tensor[256];   /* first differing tensor, in the first file's header order */
    int64_t element;    /* its first differing element (flat index); -1 when the tensor
                           is missing from one file or its dtype/shape differ */
    char detail[768];   /* one line, e.g. tensor "w": element 5 [1, 2]: 0x3f800000 (1)
                           vs 0x3f800001 (1.00000012) */
} dt_st_diff;

/* Compares the tensors of a and b (metadata is not compared). Both files must parse
 * (else that error). Tensors of a are taken in header order, then any tensor only in b. */
dt_status dt_st_compare(const char *path_a, const char *path_b, dt_st_diff *out);

#endif
