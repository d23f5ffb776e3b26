/* The static GEMM plan table and its lookup (see gemm_table.h). Plain C, single-threaded,
 * no state: the table is constant data. */
#include "ops/gemm_table.h"

#include "ops/cuda_plan.h"

#include <stdio.h>
#include <string.h>

/* Measured 2026-11-30 on one H200 (sm_90, 132 SMs, cuBLASLt 130100) by tests/gpu/tune_gemm.cu
 * (commit 6e412de, TUNE_GEMM_SECONDS=95): the heuristic's det pick against the best of
 * ~350-680 det-eligible configurations per shape, each the median of 7 rounds of 10
 * back-to-back calls; kept where it was more than 3% faster, accurate (output within 1.2e-5
 * rel. L2 of the heuristic's, bitwise equal for the bf16 outputs) and bitwise repeatable.
 * The GPT-2 124M step at B*T = 16384 (C 768, Vp 50304), the model's epilogues; the
 * plain fcproj input gradient serves DT_GEMM_EPILOGUES=off. */
static const dt_cu_gemm_entry table[] = {
    {{90, 0, 0, 16384, 3072, 768, 768, 3072, 3072, 0, 1, 1, "dgelu"}, {39, 20, 35, 1, 0, 0, 0, 0, 5},
     "fcproj dx (dGELU epilogue): heuristic algo 39 tile 20 split_k 1 custom 0 cluster 7 0.1610 ms, this 0.1448 ms"},
    {{90, 0, 1, 16384, 768, 768, 768, 768, 768, 0, 1, 1, "bias"}, {66, 407, 35, 1, 0, 0, 3, 0, 3},
     "attproj fwd: heuristic algo 66 tile 24 split_k 1 custom 7 cluster 5 0.0329 ms, this 0.0292 ms"},
    {{90, 0, 1, 16384, 2304, 768, 768, 768, 2304, 0, 1, 1, "bias"}, {66, 412, 35, 1, 0, 0, 5, 0, 3},
     "qkv fwd: heuristic algo 66 tile 209 split_k 1 custom 4 cluster 3 0.0888 ms, this 0.0846 ms"},
    {{90, 0, 0, 16384, 768, 768, 768, 768, 768, 0, 1, 1, "none"}, {66, 407, 35, 1, 0, 0, 3, 0, 3},
     "attproj dx: heuristic algo 66 tile 24 split_k 1 custom 7 cluster 5 0.0322 ms, this 0.0288 ms"},
    {{90, 1, 0, 768, 3072, 16384, 768, 3072, 3072, 1, 1, 1, "none"}, {66, 29, 35, 1, 0, 0, 5, 0, 4},
     "fcproj dW: heuristic algo 66 tile 209 split_k 2 custom 6 cluster 5 0.1160 ms, this 0.1051 ms"},
    {{90, 0, 1, 16384, 768, 3072, 3072, 3072, 768, 0, 1, 1, "bias"}, {66, 23, 35, 1, 0, 0, 7, 0, 5},
     "fcproj fwd: heuristic algo 66 tile 24 split_k 1 custom 7 cluster 5 0.1129 ms, this 0.1016 ms"},
    {{90, 1, 0, 3072, 768, 16384, 3072, 768, 768, 1, 1, 1, "none"}, {66, 29, 35, 1, 0, 0, 1, 0, 9},
     "fc dW: heuristic algo 66 tile 209 split_k 2 custom 6 cluster 5 0.1163 ms, this 0.1056 ms"},
    {{90, 0, 0, 16384, 3072, 768, 768, 3072, 3072, 0, 1, 1, "none"}, {66, 408, 35, 1, 0, 0, 1, 0, 2},
     "fcproj dx plain (no epilogue): heuristic algo 66 tile 24 split_k 1 custom 7 cluster 5 0.1099 ms, this 0.1023 ms"},
    {{90, 0, 1, 16384, 50304, 768, 768, 768, 50304, 0, 1, 1, "none"}, {66, 197, 35, 1, 0, 0, 2, 0, 5},
     "head fwd: heuristic algo 66 tile 209 split_k 1 custom 4 cluster 3 2.3598 ms, this 1.8774 ms"},
    {{90, 1, 0, 50304, 768, 16384, 50304, 768, 768, 1, 1, 1, "none"}, {66, 23, 35, 1, 0, 0, 5, 0, 3},
     "head dW: heuristic algo 66 tile 209 split_k 1 custom 6 cluster 5 1.8922 ms, this 1.8282 ms"},
};
static const int table_n = (int)(sizeof table / sizeof table[0]);

static int same_key(const dt_cu_gemm_key *a, const dt_cu_gemm_key *b) {
    return a->cc == b->cc && a->ta == b->ta && a->tb == b->tb && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->c_f32 == b->c_f32 &&
           a->batch == b->batch && a->k_chunks == b->k_chunks && a->epilogue && b->epilogue &&
           !strcmp(a->epilogue, b->epilogue);
}

const dt_cu_gemm_entry *dt_cu_gemm_table_find(const dt_cu_gemm_key *k) {
    for (int i = 0; i < table_n; i++)
        if (same_key(&table[i].key, k)) return &table[i];
    return NULL;
}

int dt_cu_gemm_table_size(void) { return table_n; }

const dt_cu_gemm_entry *dt_cu_gemm_table_at(int i) { return i >= 0 && i < table_n ? &table[i] : NULL; }

int dt_cu_gemm_cfg_det(const dt_cu_gemm_cfg *c) {
    if (c->scheme & DT_CU_SCHEME_INPLACE) return 0;
    return c->split_k <= 1 || (c->scheme & DT_CU_SCHEMES_DET) != 0;
}

int dt_cu_gemm_cfg_str(const dt_cu_gemm_cfg *c, char *buf, size_t cap) {
    return snprintf(buf, cap, "algo=%d tile=%d stages=%d split_k=%d scheme=%d swizzle=%d custom=%d inner=%d cluster=%d",
                    c->algo_id, c->tile, c->stages, c->split_k, c->scheme, c->swizzle, c->custom, c->inner,
                    c->cluster);
}

dt_status dt_cu_gemm_table_env(const char *value, int *on) {
    *on = 1;
    if (!value || !strcmp(value, "on")) return DT_OK;
    if (!strcmp(value, "off")) {
        *on = 0;
        return DT_OK;
    }
    return dt_fail(DT_EINVAL, "DT_GEMM_TABLE='%s': accepted: on (the default: the GEMM plan table of "
                   "src/ops/gemm_table.c), off (cuBLASLt's heuristic for every shape)", value);
}
