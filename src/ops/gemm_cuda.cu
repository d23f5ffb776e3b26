/* GEMMs through cuBLASLt (see ops_cuda.h): one handle, one fixed workspace, and a cache of
 * plans (descriptors + pinned algorithm) keyed by shape, types, epilogue and branch.
 *
 * Why det is deterministic: for a fixed shape the algorithm is chosen once, from the
 * heuristic list alone (no timing), restricted by CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
 * to algorithms without split-K or with a workspace split-K reduction (partials stored,
 * then added in a separate fixed step; never the in-place scheme), and reused for every
 * call; with a fixed workspace and algorithm cuBLASLt computes each output element in a
 * fixed order. The replay tests (tests/gpu) check this on weight-gradient shapes. */
#include "ops/ops_cuda.h"

extern "C" {
#include "core/determinism.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLANS 96

typedef struct plan {
    int ta, tb, M, N, K, lda, ldb, ldc, c_f32, batch, has_bias, det;
    long long sA, sB, sC;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int algo_id, tile, stages, split_k, scheme;
} plan;

struct dt_cu_blas {
    cublasLtHandle_t lt;
    void *ws;
    plan plans[MAX_PLANS];
    int nplans;
    int last;  /* plan of the latest dt_cu_gemm call (-1: none yet) */
};

static dt_status lt_check(cublasStatus_t st, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return DT_OK;
    return dt_fail(DT_EUNSUPPORTED, "%s: cuBLASLt status %d", what, (int)st);
}
#define LT_TRY(call)                                             \
    do {                                                         \
        dt_status lt_st_ = lt_check((call), #call);              \
        if (lt_st_ != DT_OK) return lt_st_;                      \
    } while (0)

dt_status dt_cu_blas_create(dt_cu_blas **out) {
    *out = NULL;
    dt_runtime_mark(DT_LIB_CUDA | DT_LIB_CUBLAS);
    dt_cu_blas *h = (dt_cu_blas *)calloc(1, sizeof *h);
    if (!h) return dt_fail(DT_ENOMEM, "out of memory for the cuBLASLt handle");
    if (cublasLtCreate(&h->lt) != CUBLAS_STATUS_SUCCESS) {
        free(h);
        return dt_fail(DT_EUNSUPPORTED, "cublasLtCreate failed: is a CUDA GPU visible?");
    }
    if (cudaMalloc(&h->ws, DT_CU_GEMM_WORKSPACE) != cudaSuccess) {
        cublasLtDestroy(h->lt);
        free(h);
        return dt_fail(DT_ENOMEM, "cudaMalloc of the %u-byte GEMM workspace failed",
                       DT_CU_GEMM_WORKSPACE);
    }
    h->last = -1;
    *out = h;
    return DT_OK;
}

void dt_cu_blas_free(dt_cu_blas *h) {
    if (!h) return;
    for (int i = 0; i < h->nplans; i++) {
        plan *p = &h->plans[i];
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->desc);
    }
    cudaFree(h->ws);
    cublasLtDestroy(h->lt);
    free(h);
}

void dt_cu_blas_describe(const dt_cu_blas *h, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "[");
    for (int i = 0; i < h->nplans; i++) {
        const plan *p = &h->plans[i];
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0,
                              "%s{\"shape\":\"%s%s %dx%dx%d b%d %s%s\",\"det\":%d,\"algo\":%d,"
                              "\"tile\":%d,\"stages\":%d,\"split_k\":%d,\"scheme\":%d}",
                              i ? "," : "", p->ta ? "T" : "N", p->tb ? "T" : "N", p->M, p->N, p->K,
                              p->batch, p->c_f32 ? "f32" : "bf16", p->has_bias ? "+bias" : "",
                              p->det, p->algo_id, p->tile, p->stages, p->split_k, p->scheme);
    }
    snprintf(buf + n, n < cap ? cap - n : 0, "]");
}

void dt_cu_gemm_describe_last(const dt_cu_blas *h, char *buf, size_t cap) {
    if (h->last < 0) {
        snprintf(buf, cap, "no GEMM yet");
        return;
    }
    const plan *p = &h->plans[h->last];
    snprintf(buf, cap, "cublasLt %s %s%s %dx%dx%d b%d algo=%d tile=%d stages=%d split_k=%d scheme=%d",
             p->det ? "det" : "fast", p->ta ? "T" : "N", p->tb ? "T" : "N", p->M, p->N, p->K, p->batch,
             p->algo_id, p->tile, p->stages, p->split_k, p->scheme);
}

static int same(const plan *p, const dt_cu_gemm_args *a, int det) {
    return p->ta == a->ta && p->tb == a->tb && p->M == a->M && p->N == a->N && p->K == a->K &&
           p->lda == a->lda && p->ldb == a->ldb && p->ldc == a->ldc && p->c_f32 == a->c_f32 &&
           p->batch == a->batch && p->has_bias == (a->bias != NULL) && p->det == det &&
           (a->batch <= 1 || (p->sA == a->sA && p->sB == a->sB && p->sC == a->sC));
}

static dt_status layout(cublasLtMatrixLayout_t *l, cudaDataType t, int rows, int cols, int ld,
                        int batch, long long stride) {
    LT_TRY(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t b = batch;
        int64_t st = stride;
        LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
        LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &st, sizeof st));
    }
    return DT_OK;
}

/* Builds the plan for a row-major call. Row-major C (M,N) is column-major C^T (N,M) =
 * op(B)^T op(A)^T, so cuBLASLt sees m = N, n = M, first operand B, second operand A. */
static dt_status make_plan(dt_cu_blas *h, plan *p, const dt_cu_gemm_args *a, int det) {
    memset(p, 0, sizeof *p);
    p->ta = a->ta; p->tb = a->tb; p->M = a->M; p->N = a->N; p->K = a->K;
    p->lda = a->lda; p->ldb = a->ldb; p->ldc = a->ldc; p->c_f32 = a->c_f32;
    p->batch = a->batch < 1 ? 1 : a->batch; p->has_bias = a->bias != NULL; p->det = det;
    p->sA = a->sA; p->sB = a->sB; p->sC = a->sC;
    cublasOperation_t opa = a->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = a->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (a->bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias,
                                              sizeof a->bias));
    }
    int m = a->N, n = a->M, k = a->K;
    dt_status st;
    if ((st = layout(&p->la, CUDA_R_16BF, opa == CUBLAS_OP_N ? m : k, opa == CUBLAS_OP_N ? k : m,
                     a->ldb, p->batch, a->sB)) != DT_OK) return st;
    if ((st = layout(&p->lb, CUDA_R_16BF, opb == CUBLAS_OP_N ? k : n, opb == CUBLAS_OP_N ? n : k,
                     a->lda, p->batch, a->sA)) != DT_OK) return st;
    if ((st = layout(&p->lc, a->c_f32 ? CUDA_R_32F : CUDA_R_16BF, m, n, a->ldc, p->batch, a->sC)) != DT_OK)
        return st;
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = DT_CU_GEMM_WORKSPACE;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (det) {
        uint32_t mask = DT_CU_SCHEMES_DET; /* no split-K, or a workspace reduction */
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                             sizeof mask);
    }
    cublasLtMatmulHeuristicResult_t res[8];
    int nres = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h->lt, p->desc, p->la, p->lb, p->lc, p->lc,
                                                       pref, 8, res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || nres == 0)
        return dt_fail(DT_EUNSUPPORTED, "cuBLASLt has no algorithm for %s%s %dx%dx%d batch %d (%s out%s)",
                       a->ta ? "T" : "N", a->tb ? "T" : "N", a->M, a->N, a->K, p->batch,
                       a->c_f32 ? "fp32" : "bf16", a->bias ? ", bias" : "");
    dt_cu_gemm_cand cand[8];
    for (int i = 0; i < nres; i++) {
        uint32_t splitk = 1, scheme = 0;
        int id = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                             sizeof splitk, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                             &scheme, sizeof scheme, NULL);
        cand[i].algo_id = id;
        cand[i].split_k = (int)splitk;
        cand[i].reduction_scheme = (int)scheme;
        cand[i].workspace = res[i].workspaceSize;
        cand[i].ok = res[i].state == CUBLAS_STATUS_SUCCESS;
    }
    int pick = dt_cu_gemm_pick(cand, nres, det, DT_CU_GEMM_WORKSPACE);
    if (pick < 0)
        return dt_fail(DT_EDETERMINISM, "no cuBLASLt algorithm without split-K reduction for %s%s "
                       "%dx%dx%d batch %d", a->ta ? "T" : "N", a->tb ? "T" : "N", a->M, a->N, a->K,
                       p->batch);
    p->algo = res[pick].algo;
    p->algo_id = cand[pick].algo_id;
    p->split_k = cand[pick].split_k;
    p->scheme = cand[pick].reduction_scheme;
    uint32_t tile = 0, stages = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, NULL);
    p->tile = (int)tile;
    p->stages = (int)stages;
    return DT_OK;
}

dt_status dt_cu_gemm(dt_cu_blas *h, const dt_cu_gemm_args *a, cudaStream_t s) {
    int det = dt_op_variant(DT_OP_GEMM) == DT_VARIANT_DET;
    plan *p = NULL;
    for (int i = 0; i < h->nplans && !p; i++)
        if (same(&h->plans[i], a, det)) p = &h->plans[i];
    if (!p) {
        if (h->nplans == MAX_PLANS)
            return dt_fail(DT_ENOMEM, "more than %d GEMM shapes: raise MAX_PLANS in gemm_cuda.cu", MAX_PLANS);
        p = &h->plans[h->nplans];
        dt_status st = make_plan(h, p, a, det);
        if (st != DT_OK) return st;
        h->nplans++;
    }
    h->last = (int)(p - h->plans);
    if (a->bias)
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias,
                                              sizeof a->bias));
    LT_TRY(cublasLtMatmul(h->lt, p->desc, &a->alpha, a->B, p->la, a->A, p->lb, &a->beta, a->C, p->lc,
                          a->C, p->lc, &p->algo, h->ws, DT_CU_GEMM_WORKSPACE, s));
    return DT_OK;
}
