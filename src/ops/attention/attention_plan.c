/* The attention family's chooser (attention.h) and the host-side plan of its CUDA paths
 * (attention_plan.h). Plain C, single-threaded. */
#include "ops/attention/attention_plan.h"

#include "ops/attention/attention.h"

#include <omp.h>

int dt_cu_flash_supported(int C, int NH, int T, const dt_dropout *drop) {
    return C / NH == 64 && T % 64 == 0 && !dt_dropout_on(drop);
}

dt_attention_path dt_attention_fast_cpu(int B, int NH) {
    return B * NH < 2 * omp_get_max_threads() ? DT_ATTENTION_KEYBLOCKS : DT_ATTENTION_HEADS;
}

dt_attention_path dt_attention_choose(int B, int T, int C, int NH, const dt_dropout *drop, int cc,
                                      dt_attention_path cap) {
    if (cc == DT_ATTENTION_ON_CPU)
        return dt_op_variant(DT_OP_ATTENTION_BWD) == DT_VARIANT_DET ? DT_ATTENTION_HEADS : dt_attention_fast_cpu(B, NH);
    /* on the GPU both branches of DT_OP_ATTENTION_BWD coincide in every path (no atomics) */
    if (cap == DT_ATTENTION_GEMM || !dt_cu_flash_supported(C, NH, T, drop)) return DT_ATTENTION_GEMM;
    return cc == 90 && cap == DT_ATTENTION_FLASH_WGMMA ? DT_ATTENTION_FLASH_WGMMA : DT_ATTENTION_FLASH;
}
