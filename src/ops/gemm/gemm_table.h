/* The static GEMM plan table: cuBLASLt algorithm configurations chosen offline (by timing
 * on the GPU machine, tests/gpu/tune_gemm.cu) for the GEMMs of a known step, recorded in
 * source so that a run never times anything: the same shape gets the same configuration on
 * every run. gemm_cuda.cu looks a call up before it asks the heuristic, validates the entry
 * with cublasLtMatmulAlgoCheck and falls back to the heuristic (saying so in env.json) when
 * the entry does not fit this device or library. Plain C, so CI tests the lookup.
 *
 * Every entry is det-eligible (no split-K, or a workspace reduction scheme), so the table
 * serves both branches: the fastest configuration measured is also a deterministic one. */
#ifndef DT_OPS_GEMM_TABLE_H
#define DT_OPS_GEMM_TABLE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>

/* One cuBLASLt algorithm configuration: the values of cublasLtMatmulAlgoConfigAttributes_t
 * (all of them but the read-only ones), enough to rebuild the algorithm with
 * cublasLtMatmulAlgoInit + cublasLtMatmulAlgoConfigSetAttribute. */
typedef struct dt_cu_gemm_cfg {
    int algo_id;  /* CUBLASLT_ALGO_CONFIG_ID */
    int tile;     /* TILE_ID (cublasLtMatmulTile_t) */
    int stages;   /* STAGES_ID (cublasLtMatmulStages_t) */
    int split_k;  /* SPLITK_NUM (1: none) */
    int scheme;   /* REDUCTION_SCHEME (cublasLtReductionScheme_t; 0: none) */
    int swizzle;  /* CTA_SWIZZLING (0 or 1) */
    int custom;   /* CUSTOM_OPTION */
    int inner;    /* INNER_SHAPE_ID (cublasLtMatmulInnerShape_t) */
    int cluster;  /* CLUSTER_SHAPE_ID (cublasLtClusterShape_t; 0: auto) */
} dt_cu_gemm_cfg;

/* A row-major call as dt_cu_gemm_args states it (gemm_cuda.h), on a device of compute
 * capability cc (major * 10 + minor), with the K chunks gemm_cuda.cu cuts it into and the
 * epilogue by its env.json name: "none", "bias", "gelu_aux", "gelu_aux_bias", "dgelu",
 * "bgrad". */
typedef struct dt_cu_gemm_key {
    int cc;
    int ta, tb, M, N, K, lda, ldb, ldc;
    int c_f32, batch, k_chunks;
    const char *epilogue;
} dt_cu_gemm_key;

typedef struct dt_cu_gemm_entry {
    dt_cu_gemm_key key;
    dt_cu_gemm_cfg cfg;
    const char *why; /* what it was measured against (the heuristic's pick, ms) */
} dt_cu_gemm_entry;

/* The cuBLASLt version (cublasLtGetVersion()) the entries were measured with; recorded in
 * env.json next to the run's own version. */
#define DT_CU_GEMM_TABLE_LT 130100

/* The entry whose key equals k in every field (epilogue compared as a string), or NULL. */
const dt_cu_gemm_entry *dt_cu_gemm_table_find(const dt_cu_gemm_key *k);
/* The entries, in source order: i in [0, dt_cu_gemm_table_size()). */
int dt_cu_gemm_table_size(void);
const dt_cu_gemm_entry *dt_cu_gemm_table_at(int i);

/* Whether a configuration may serve det mode: no split-K, or split-K whose partials are
 * reduced by a workspace scheme (compute or output type), never in place. The policy of
 * gemm_plan.h's dt_cu_gemm_pick. */
int dt_cu_gemm_cfg_det(const dt_cu_gemm_cfg *c);
/* "algo=66 tile=20 stages=15 split_k=1 scheme=0 swizzle=0 custom=0 inner=0 cluster=0";
 * returns what snprintf returns. */
int dt_cu_gemm_cfg_str(const dt_cu_gemm_cfg *c, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
