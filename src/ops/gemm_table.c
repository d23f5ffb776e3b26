/* The static GEMM plan table and its lookup (see gemm_table.h). Plain C, single-threaded,
 * no state: the table is constant data. */
#include "ops/gemm_table.h"

#include "ops/cuda_plan.h"

#include <stdio.h>
#include <string.h>

/* Entries: none yet (filled from tests/gpu/tune_gemm.cu's measurements). */
static const dt_cu_gemm_entry table[] = {
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, NULL},
};
/* the placeholder entry above has no epilogue and never matches */
static const int table_n = (int)(sizeof table / sizeof table[0]) - (table[0].key.epilogue == NULL);

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
