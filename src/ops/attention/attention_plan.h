/* Host-side plan of the attention family's CUDA paths, in plain C so CI tests it: which
 * shapes the flash kernels take. The path a call runs is dt_attention_choose (attention.h). */
#ifndef DT_OPS_ATTENTION_PLAN_H
#define DT_OPS_ATTENTION_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/dropout/dropout.h"

/* Whether the flash kernels (attention_flash_cuda.cu, attention_wgmma*_cuda.cu) take this
 * shape: head size C / NH = 64, T % 64 == 0, no attention dropout. 1 or 0. */
int dt_cu_flash_supported(int C, int NH, int T, const dt_dropout *drop);

#ifdef __cplusplus
}
#endif

#endif
