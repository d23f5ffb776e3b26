/* The GEMM family's chooser (gemm.h) and the host-side plans of its CUDA paths
 * (gemm_plan.h). Plain C, single-threaded. */
#include "ops/gemm/gemm_plan.h"

#include "ops/gemm/gemm.h"

#include <stdint.h>

dt_gemm_path dt_gemm_choose(void) {
    return dt_op_variant(DT_OP_GEMM) == DT_VARIANT_DET ? DT_GEMM_DET : DT_GEMM_FAST;
}

int dt_cu_gemm_pick(const dt_cu_gemm_cand *c, int n, int det, size_t ws_limit) {
    for (int i = 0; i < n; i++) {
        if (!c[i].ok || c[i].workspace > ws_limit) continue;
        /* det: no in-place split-K reduction (partials added into the output buffer) and
         * no split without a named scheme; workspace schemes reduce in a separate fixed step */
        if (det && (c[i].reduction_scheme & DT_CU_SCHEME_INPLACE)) continue;
        if (det && c[i].split_k > 1 && !(c[i].reduction_scheme & DT_CU_SCHEMES_DET)) continue;
        return i;
    }
    return -1;
}

int dt_cu_gemm_splits(int M, int N, int K) {
    int S = 1;
    while (2 * S <= DT_CU_SPLITK_MAX && (size_t)M * (size_t)N * (size_t)S < DT_CU_SPLITK_TARGET &&
           K % (2 * S) == 0 && (K / (2 * S)) % 8 == 0 && K / (2 * S) >= DT_CU_SPLITK_MIN_CHUNK)
        S *= 2;
    return S;
}

int dt_cu_gemm_wgmma_fits(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int c_f32, float alpha,
                          float beta, int batch, int epi, const void *A, const void *B, const void *C,
                          const void *bias, const void *aux) {
    if (ta || c_f32 || alpha != 1.0f || beta != 0.0f || batch != 1) return 0;
    if (epi != DT_CU_EPI_DEFAULT && epi != DT_CU_EPI_GELU && epi != DT_CU_EPI_DGELU && epi != DT_CU_EPI_DOT) return 0;
    if (M <= 0 || N <= 0 || K <= 0 || M % 128 || N % 128 || K % 64) return 0;
    /* the operands' extents along their rows */
    if (lda % 8 || ldb % 8 || ldc % 8 || lda < K || ldb < (tb ? K : N) || ldc < N) return 0;
    if ((uintptr_t)A % 16 || (uintptr_t)B % 16 || (uintptr_t)C % 16 || !A || !B || !C) return 0;
    if (bias && (uintptr_t)bias % 16) return 0;
    if (epi != DT_CU_EPI_DEFAULT && (!aux || (uintptr_t)aux % 16)) return 0;
    if ((epi == DT_CU_EPI_DGELU || epi == DT_CU_EPI_DOT) && bias) return 0;
    return 1;
}
