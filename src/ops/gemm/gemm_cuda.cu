/* GEMMs through cuBLASLt (see gemm.h, gemm_cuda.h): one handle, one fixed workspace, an fp32
 * workspace for the K chunks of our own split-K, and a cache of plans (descriptors + pinned
 * algorithm + chunk count) keyed by shape, types, epilogue and branch.
 *
 * Why det is deterministic: for a fixed shape the algorithm is chosen once, without timing:
 * the static plan table's entry (gemm_table.c: a configuration measured offline and
 * recorded in source, det-eligible, validated by cublasLtMatmulAlgoCheck), else the
 * heuristic list, restricted by CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
 * to algorithms without split-K or with a workspace split-K reduction (partials stored,
 * then added in a separate fixed step; never the in-place scheme), and reused for every
 * call; with a fixed workspace and algorithm cuBLASLt computes each output element in a
 * fixed order. Our own split-K (dt_cu_gemm_splits) runs each K chunk as one batch of such a
 * pinned call into its own workspace slice, then splitk_sum_kernel adds the slices in
 * chunk order, one thread per output element: the order is fixed by the indices. The bias
 * gradient epilogue (BGRAD) writes one partial vector per chunk (no accumulation inside
 * cuBLASLt across calls), added in chunk order by dt_cu_parts_finish. The replay tests
 * (tests/gpu/test_gpu_replays.cu) check every epilogue and the split path under contention. */
#include "ops/gemm/gemm_cuda.h"
#include "ops/reduce/reduce_cuda.h"

extern "C" {
#include "core/determinism.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLANS 128
#define POLICY_CANDS 8 /* heuristic results the policy looks at */
#define FORCE_CANDS 16 /* ... and a forced candidate index may reach (benchmarks) */

static const char *epi_names[DT_CU_EPI_COUNT] = {"", "gelu_aux", "dgelu", "bgrad", "dot"};

typedef struct plan {
    int ta, tb, M, N, K, lda, ldb, ldc, c_f32, batch, has_bias, det, epi;
    int force_cand, force_splits; /* the force in effect when the plan was made */
    int table_on, forced_cfg;     /* ... the table switch, and whether force_cfg applied */
    dt_cu_gemm_cfg force_cfg;
    long long sA, sB, sC;
    int splits;                   /* our K chunks (1: none) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    dt_cu_gemm_cfg cfg;           /* the algorithm's configuration, read back from it */
    const char *source;           /* "heuristic", "table", "forced" */
    char note[160];               /* why a table entry was not taken (empty: none) */
} plan;

/* The cuBLASLt epilogue's name in env.json: none, bias, gelu_aux(_bias), dgelu, bgrad. */
static const char *epi_name(const plan *p) {
    if (p->epi == DT_CU_EPI_GELU) return p->has_bias ? "gelu_aux_bias" : "gelu_aux";
    return p->epi ? epi_names[p->epi] : p->has_bias ? "bias" : "none";
}

/* One GEMM noted during a graph capture (dt_cu_blas_capture_begin): the capture's
 * dependency nodes before cuBLASLt's launches and after them (nb, na: -1 unknown). */
struct cap_note {
    cudaGraphNode_t before[4], after[4];
    int nb, na;
    int half; /* the workspace half the GEMM used */
};

struct dt_cu_blas {
    cublasLtHandle_t lt;
    /* two workspaces of DT_CU_GEMM_WORKSPACE bytes, taken in turn by successive GEMMs: a
     * GEMM's workspace is then free from the end of the GEMM two calls back, so in a
     * recorded graph cuBLASLt's memset into it need not wait for the GEMM just before
     * (dt_cu_blas_graph_relax). Scratch only: the results do not depend on the address. */
    void *ws;
    int half;
    float *split_ws;  /* chunk partials of our split-K */
    size_t split_bytes;
    plan plans[MAX_PLANS];
    int nplans;
    int last;  /* plan of the latest dt_cu_gemm call (-1: none yet) */
    int force_cand, force_splits;
    int forced_cfg;            /* force_cfg in effect (benchmarks) */
    dt_cu_gemm_cfg force_cfg;
    int table_on;              /* the plan table in use (dt_cu_blas_use_table, benchmarks) */
    int cc;                    /* the device's compute capability, major * 10 + minor */
    /* while a graph is captured (dt_cu_blas_capture_begin): per GEMM, the capture's
     * dependency nodes before cuBLASLt's launches and after them */
    int capturing, ncap, capcap;
    struct cap_note *cap;
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
    int cc = dt_cu_device_cc();
    if (cc < 0) return dt_fail(DT_EUNSUPPORTED, "cannot read the CUDA device's compute capability: is a GPU visible?");
    dt_cu_blas *h = (dt_cu_blas *)calloc(1, sizeof *h);
    if (!h) return dt_fail(DT_ENOMEM, "out of memory for the cuBLASLt handle");
    h->table_on = 1;
    h->cc = cc;
    if (cublasLtCreate(&h->lt) != CUBLAS_STATUS_SUCCESS) {
        free(h);
        return dt_fail(DT_EUNSUPPORTED, "cublasLtCreate failed: is a CUDA GPU visible?");
    }
    if (cudaMalloc(&h->ws, 2 * (size_t)DT_CU_GEMM_WORKSPACE) != cudaSuccess) {
        cublasLtDestroy(h->lt);
        free(h);
        return dt_fail(DT_ENOMEM, "cudaMalloc of the two %u-byte GEMM workspaces failed",
                       DT_CU_GEMM_WORKSPACE);
    }
    h->last = -1;
    h->force_cand = -1;
    *out = h;
    return DT_OK;
}

static void plan_free(plan *p) {
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    memset(p, 0, sizeof *p);
}

void dt_cu_blas_free(dt_cu_blas *h) {
    if (!h) return;
    for (int i = 0; i < h->nplans; i++) plan_free(&h->plans[i]);
    cudaFree(h->ws);
    cudaFree(h->split_ws);
    cublasLtDestroy(h->lt);
    free(h->cap);
    free(h);
}

void dt_cu_blas_capture_begin(dt_cu_blas *h) {
    h->capturing = 1;
    h->ncap = 0;
}

/* The capture's current dependency nodes on s into out[4] (-1: not capturing, or more than
 * 4 nodes: the GEMM is then left as captured). */
static int capture_deps(cudaStream_t s, cudaGraphNode_t out[4]) {
    cudaStreamCaptureStatus cs;
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    if (cudaStreamGetCaptureInfo(s, &cs, NULL, NULL, &deps, NULL, &nd) != cudaSuccess ||
        cs != cudaStreamCaptureStatusActive || nd > 4)
        return -1;
    for (size_t i = 0; i < nd; i++) out[i] = deps[i];
    return (int)nd;
}

/* Notes a GEMM's dependencies before (when = 0; half: its workspace) or after (1) its
 * cuBLASLt launches. */
static void capture_note(dt_cu_blas *h, cudaStream_t s, int when, int half) {
    if (!h->capturing) return;
    if (when == 0) {
        if (h->ncap == h->capcap) {
            int cap = h->capcap ? 2 * h->capcap : 64;
            struct cap_note *p = (struct cap_note *)realloc(h->cap, sizeof *p * (size_t)cap);
            if (!p) { /* this GEMM and the later ones stay as captured */
                h->capturing = 0;
                return;
            }
            h->cap = p;
            h->capcap = cap;
        }
        struct cap_note *c = &h->cap[h->ncap];
        c->nb = capture_deps(s, c->before);
        c->na = -1;
        c->half = half;
        h->ncap++;
    } else if (h->ncap > 0) {
        struct cap_note *c = &h->cap[h->ncap - 1];
        c->na = capture_deps(s, c->after);
    }
}

static int same_nodes(const cudaGraphNode_t *a, int na, const cudaGraphNode_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* The memset into the GEMM's workspace half that depends on exactly c->before (cuBLASLt's
 * first launch of that GEMM), or NULL. */
static cudaGraphNode_t ws_memset(const dt_cu_blas *h, const struct cap_note *c) {
    if (c->nb < 1) return NULL;
    cudaGraphNode_t kids[16];
    size_t nk = 0;
    if (cudaGraphNodeGetDependentNodes(c->before[0], NULL, NULL, &nk) != cudaSuccess || nk > 16 ||
        cudaGraphNodeGetDependentNodes(c->before[0], kids, NULL, &nk) != cudaSuccess)
        return NULL;
    for (size_t i = 0; i < nk; i++) {
        cudaGraphNodeType t;
        cudaMemsetParams mp;
        if (cudaGraphNodeGetType(kids[i], &t) != cudaSuccess || t != cudaGraphNodeTypeMemset) continue;
        if (cudaGraphMemsetNodeGetParams(kids[i], &mp) != cudaSuccess) continue;
        const char *d = (const char *)mp.dst, *w = (const char *)h->ws + (size_t)c->half * DT_CU_GEMM_WORKSPACE;
        size_t row = (size_t)mp.elementSize * mp.width, rows = mp.height ? mp.height : 1;
        size_t bytes = rows > 1 ? mp.pitch * (rows - 1) + row : row; /* the extent it writes */
        if (d < w || d + bytes > w + DT_CU_GEMM_WORKSPACE) continue;
        cudaGraphNode_t deps[4];
        size_t nd = 4;
        if (cudaGraphNodeGetDependencies(kids[i], deps, NULL, &nd) != cudaSuccess || nd > 4) continue;
        if (same_nodes(deps, (int)nd, c->before, c->nb)) return kids[i];
    }
    return NULL;
}

int dt_cu_blas_graph_relax(dt_cu_blas *h, cudaGraph_t g) {
    h->capturing = 0;
    if (!g) return 0;
    int moved = 0;
    const struct cap_note *last[2] = {NULL, NULL}; /* the previous GEMM on each workspace half */
    for (int i = 0; i < h->ncap; i++) {
        const struct cap_note *c = &h->cap[i], *prev = last[c->half];
        if (c->na < 0 || (prev && prev->na < 0))
            break; /* a GEMM's last node is unknown: leave the rest as captured */
        last[c->half] = c;
        cudaGraphNode_t m = ws_memset(h, c);
        /* back to back with the half's previous GEMM, the memset already follows it */
        if (!m || (prev && same_nodes(prev->after, prev->na, c->before, c->nb))) continue;
        cudaGraphNode_t kids[16];
        size_t nk = 0; /* counted first: every dependent must take over the edge */
        if (cudaGraphNodeGetDependentNodes(m, NULL, NULL, &nk) != cudaSuccess) return -1;
        if (nk > 16) continue;
        if (cudaGraphNodeGetDependentNodes(m, kids, NULL, &nk) != cudaSuccess) return -1;
        /* the GEMM still waits for the op before it; the memset for the half's previous GEMM
         * (none: a root of the graph, which starts after all earlier work) */
        for (size_t k = 0; k < nk; k++)
            for (int b = 0; b < c->nb; b++)
                if (cudaGraphAddDependencies(g, &c->before[b], &kids[k], NULL, 1) != cudaSuccess) return -1;
        for (int a = 0; prev && a < prev->na; a++)
            if (cudaGraphAddDependencies(g, &prev->after[a], &m, NULL, 1) != cudaSuccess) return -1;
        for (int b = 0; b < c->nb; b++)
            if (cudaGraphRemoveDependencies(g, &c->before[b], &m, NULL, 1) != cudaSuccess) return -1;
        moved++;
    }
    return moved;
}

void dt_cu_blas_force(dt_cu_blas *h, int cand, int splits) {
    h->force_cand = cand;
    h->force_splits = splits;
}

void dt_cu_blas_force_cfg(dt_cu_blas *h, const dt_cu_gemm_cfg *cfg) {
    h->forced_cfg = cfg != NULL;
    if (cfg) h->force_cfg = *cfg;
    else memset(&h->force_cfg, 0, sizeof h->force_cfg);
}

void dt_cu_blas_use_table(dt_cu_blas *h, int on) { h->table_on = on != 0; }

void dt_cu_blas_forget(dt_cu_blas *h) {
    for (int i = 0; i < h->nplans; i++) plan_free(&h->plans[i]);
    h->nplans = 0;
    h->last = -1;
}

/* "NT 768x768x16384 b1 f32+bgrad" */
static void shape_name(const plan *p, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s %dx%dx%d b%d %s%s%s%s", p->ta ? "T" : "N", p->tb ? "T" : "N", p->M, p->N,
             p->K, p->batch, p->c_f32 ? "f32" : "bf16", p->has_bias ? "+bias" : "", p->epi ? "+" : "",
             epi_names[p->epi]);
}

void dt_cu_blas_describe(const dt_cu_blas *h, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "[");
    for (int i = 0; i < h->nplans; i++) {
        const plan *p = &h->plans[i];
        const dt_cu_gemm_cfg *c = &p->cfg;
        char shape[96];
        shape_name(p, shape, sizeof shape);
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0,
                              "%s{\"shape\":\"%s\",\"epilogue\":\"%s\",\"det\":%d,\"source\":\"%s\",\"algo\":%d,"
                              "\"tile\":%d,\"stages\":%d,\"split_k\":%d,\"scheme\":%d,\"swizzle\":%d,\"custom\":%d,"
                              "\"inner\":%d,\"cluster\":%d,\"k_chunks\":%d%s%s%s}",
                              i ? "," : "", shape, epi_name(p), p->det, p->source, c->algo_id, c->tile, c->stages,
                              c->split_k, c->scheme, c->swizzle, c->custom, c->inner, c->cluster, p->splits,
                              p->note[0] ? ",\"table_note\":\"" : "", p->note, p->note[0] ? "\"" : "");
    }
    snprintf(buf + n, n < cap ? cap - n : 0, "]");
}

void dt_cu_blas_table_describe(const dt_cu_blas *h, char *buf, size_t cap) {
    int used = 0, fell = 0;
    for (int i = 0; i < h->nplans; i++) {
        used += !strcmp(h->plans[i].source, "table");
        fell += h->plans[i].note[0] != 0;
    }
    snprintf(buf, cap, "{\"on\":%s,\"entries\":%d,\"tuned_cublaslt\":%d,\"sm\":%d,\"plans_from_table\":%d,"
             "\"entries_rejected\":%d}", h->table_on ? "true" : "false", dt_cu_gemm_table_size(), DT_CU_GEMM_TABLE_LT,
             h->cc, used, fell);
}

void dt_cu_gemm_describe_last(const dt_cu_blas *h, char *buf, size_t cap) {
    if (h->last < 0) {
        snprintf(buf, cap, "no GEMM yet");
        return;
    }
    const plan *p = &h->plans[h->last];
    char shape[96], cfg[160];
    shape_name(p, shape, sizeof shape);
    dt_cu_gemm_cfg_str(&p->cfg, cfg, sizeof cfg);
    snprintf(buf, cap, "cublasLt %s %s src=%s %s k_chunks=%d%s%s", p->det ? "det" : "fast", shape, p->source, cfg,
             p->splits, p->note[0] ? " table_note=" : "", p->note);
}


static int same(const plan *p, const dt_cu_blas *h, const dt_cu_gemm_args *a, int det) {
    return p->ta == a->ta && p->tb == a->tb && p->M == a->M && p->N == a->N && p->K == a->K &&
           p->lda == a->lda && p->ldb == a->ldb && p->ldc == a->ldc && p->c_f32 == a->c_f32 &&
           p->batch == (a->batch < 1 ? 1 : a->batch) && p->has_bias == (a->bias != NULL) && p->det == det &&
           p->epi == a->epi && p->force_cand == h->force_cand && p->force_splits == h->force_splits &&
           p->table_on == h->table_on && p->forced_cfg == h->forced_cfg &&
           (!h->forced_cfg || !memcmp(&p->force_cfg, &h->force_cfg, sizeof p->force_cfg)) &&
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

/* Our K chunks for this call: a batch-1 product with fp32 output, no epilogue but the bias
 * gradient, 4-column vectors for the sum kernel; then the rule (or the force). */
static int chunks_for(const dt_cu_blas *h, const dt_cu_gemm_args *a) {
    int ok = a->batch <= 1 && a->c_f32 && !a->bias && (a->epi == DT_CU_EPI_DEFAULT || a->epi == DT_CU_EPI_BGRAD) &&
             a->N % 4 == 0 && a->ldc % 4 == 0;
    if (!ok) return 1;
    return h->force_splits > 0 ? h->force_splits : dt_cu_gemm_splits(a->M, a->N, a->K);
}

/* Sets the per-call pointers of the epilogue on the plan's descriptor. */
static dt_status set_pointers(plan *p, const dt_cu_gemm_args *a) {
    if (p->epi == DT_CU_EPI_BGRAD) {
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->dbias_part,
                                              sizeof a->dbias_part));
    } else if (a->bias) {
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias,
                                              sizeof a->bias));
    }
    if (p->epi == DT_CU_EPI_GELU || p->epi == DT_CU_EPI_DGELU)
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &a->aux,
                                              sizeof a->aux));
    return DT_OK;
}

/* The policy's algorithm for the plan's descriptors: the heuristic's list (det: restricted to
 * det reduction schemes), then dt_cu_gemm_pick, or the forced candidate. */
static dt_status heuristic_algo(dt_cu_blas *h, plan *p, const dt_cu_gemm_args *a, int det, const char *epi,
                                int S) {
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = DT_CU_GEMM_WORKSPACE;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (det) {
        uint32_t mask = DT_CU_SCHEMES_DET; /* no split-K, or a workspace reduction */
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                             sizeof mask);
    }
    cublasLtMatmulHeuristicResult_t res[FORCE_CANDS];
    int want = h->force_cand >= 0 ? FORCE_CANDS : POLICY_CANDS, nres = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h->lt, p->desc, p->la, p->lb, p->lc, p->lc,
                                                       pref, want, res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || nres == 0)
        return dt_fail(DT_EUNSUPPORTED, "cuBLASLt has no algorithm for %s%s %dx%dx%d batch %d (%s out, "
                       "epilogue %s, %d K chunks)", a->ta ? "T" : "N", a->tb ? "T" : "N", a->M, a->N, a->K,
                       p->batch, a->c_f32 ? "fp32" : "bf16", epi, S);
    dt_cu_gemm_cand cand[FORCE_CANDS];
    for (int i = 0; i < nres; i++) {
        dt_cu_gemm_cfg c;
        dt_cu_gemm_cfg_read(&res[i].algo, &c);
        cand[i].algo_id = c.algo_id;
        cand[i].split_k = c.split_k;
        cand[i].reduction_scheme = c.scheme;
        cand[i].workspace = res[i].workspaceSize;
        cand[i].ok = res[i].state == CUBLAS_STATUS_SUCCESS;
    }
    int pick;
    if (h->force_cand >= 0) {
        pick = h->force_cand < nres && cand[h->force_cand].ok && cand[h->force_cand].workspace <= DT_CU_GEMM_WORKSPACE
                   ? h->force_cand : -1;
        if (pick < 0)
            return dt_fail(DT_EUNSUPPORTED, "heuristic candidate %d of %d is not usable", h->force_cand, nres);
    } else {
        pick = dt_cu_gemm_pick(cand, nres, det, DT_CU_GEMM_WORKSPACE);
        if (pick < 0)
            return dt_fail(DT_EDETERMINISM, "no cuBLASLt algorithm without split-K reduction for %s%s "
                           "%dx%dx%d batch %d", a->ta ? "T" : "N", a->tb ? "T" : "N", a->M, a->N, a->K,
                           p->batch);
    }
    p->algo = res[pick].algo;
    return DT_OK;
}

void dt_cu_gemm_cfg_read(const cublasLtMatmulAlgo_t *algo, dt_cu_gemm_cfg *c) {
    int32_t id = 0, splitk = 1;
    uint32_t tile = 0, stages = 0, scheme = 0, swizzle = 0, custom = 0;
    uint16_t inner = 0, cluster = 0;
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner, NULL);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, NULL);
    c->algo_id = id;
    c->tile = (int)tile;
    c->stages = (int)stages;
    c->split_k = (int)splitk;
    c->scheme = (int)scheme;
    c->swizzle = (int)swizzle;
    c->custom = (int)custom;
    c->inner = (int)inner;
    c->cluster = (int)cluster;
}

/* Builds the algorithm of configuration c for the plan's types (cublasLtMatmulAlgoInit, then
 * every attribute) and checks it against the plan's descriptors: CUBLAS_STATUS_SUCCESS and
 * the workspace it needs, or the first failing status. */
static cublasStatus_t algo_of(dt_cu_blas *h, const plan *p, const dt_cu_gemm_cfg *c, cublasLtMatmulAlgo_t *algo,
                              size_t *ws) {
    cudaDataType ct = p->c_f32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasStatus_t st = cublasLtMatmulAlgoInit(h->lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, ct,
                                               ct, c->algo_id, algo);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    int32_t splitk = c->split_k;
    uint32_t tile = (uint32_t)c->tile, stages = (uint32_t)c->stages, scheme = (uint32_t)c->scheme,
             swizzle = (uint32_t)c->swizzle, custom = (uint32_t)c->custom;
    uint16_t inner = (uint16_t)c->inner, cluster = (uint16_t)c->cluster;
    struct { cublasLtMatmulAlgoConfigAttributes_t attr; const void *v; size_t n; } set[] = {
        {CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile},
        {CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages},
        {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk},
        {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme},
        {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle},
        {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom},
        {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner},
        {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if ((st = cublasLtMatmulAlgoConfigSetAttribute(algo, set[i].attr, set[i].v, set[i].n)) != CUBLAS_STATUS_SUCCESS)
            return st;
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    st = cublasLtMatmulAlgoCheck(h->lt, p->desc, p->la, p->lb, p->lc, p->lc, algo, &r);
    *ws = r.workspaceSize;
    return st;
}

/* Builds the plan for a row-major call. Row-major C (M,N) is column-major C^T (N,M) =
 * op(B)^T op(A)^T, so cuBLASLt sees m = N, n = M, first operand B, second operand A. With
 * S > 1 K chunks the call becomes S strided batches of K/S (chunk s: rows or columns
 * s K/S.. of the stored operands) writing slice s of the split workspace. */
static dt_status make_plan(dt_cu_blas *h, plan *p, const dt_cu_gemm_args *a, int det) {
    memset(p, 0, sizeof *p);
    p->ta = a->ta; p->tb = a->tb; p->M = a->M; p->N = a->N; p->K = a->K;
    p->lda = a->lda; p->ldb = a->ldb; p->ldc = a->ldc; p->c_f32 = a->c_f32;
    p->batch = a->batch < 1 ? 1 : a->batch; p->has_bias = a->bias != NULL; p->det = det;
    p->epi = a->epi;
    p->force_cand = h->force_cand; p->force_splits = h->force_splits;
    p->sA = a->sA; p->sB = a->sB; p->sC = a->sC;
    if (p->epi < 0 || p->epi >= DT_CU_EPI_COUNT)
        return dt_fail(DT_EINVAL, "dt_cu_gemm: unknown epilogue %d", p->epi);
    const char *epi = epi_name(p);
    if (p->epi == DT_CU_EPI_DOT)
        return dt_fail(DT_EUNSUPPORTED, "dt_cu_gemm: the attention row-dot epilogue (dot) runs on our own kernel "
                       "only: call dt_cu_gemm_wgmma, or dt_cu_gemm without it and the D kernel after");
    if (p->epi != DT_CU_EPI_DEFAULT && p->epi != DT_CU_EPI_GELU && a->bias)
        return dt_fail(DT_EINVAL, "dt_cu_gemm: epilogue %s takes no bias", epi);
    if ((p->epi == DT_CU_EPI_GELU || p->epi == DT_CU_EPI_DGELU) && !a->aux)
        return dt_fail(DT_EINVAL, "dt_cu_gemm: epilogue %s needs aux", epi);
    if (p->epi == DT_CU_EPI_BGRAD && (a->alpha != 1.0f || p->batch != 1 || !a->dbias || !a->dbias_part))
        return dt_fail(DT_EINVAL, "dt_cu_gemm: the bias-gradient epilogue needs alpha 1, batch 1, dbias "
                       "and dbias_part");
    int S = chunks_for(h, a);
    if (S < 1 || S > DT_CU_SPLITK_MAX || a->K % S || (S > 1 && (a->K / S) % 8))
        return dt_fail(DT_EINVAL, "dt_cu_gemm: %d K chunks do not fit %dx%dx%d (K/S must be a multiple of 8)",
                       S, a->M, a->N, a->K);
    p->splits = S;
    int Kc = a->K / S, nb = S > 1 ? S : p->batch;
    /* chunk strides: K runs down the rows of a stored operand that is transposed for A (ta)
     * or plain for B (!tb), along its columns otherwise */
    long long sA = S > 1 ? (a->ta ? (long long)Kc * a->lda : Kc) : a->sA;
    long long sB = S > 1 ? (a->tb ? Kc : (long long)Kc * a->ldb) : a->sB;
    long long sC = S > 1 ? (long long)a->M * a->N : a->sC;
    int ldc = S > 1 ? a->N : a->ldc;
    cublasOperation_t opa = a->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = a->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
    switch (p->epi) {
    case DT_CU_EPI_DEFAULT: e = a->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case DT_CU_EPI_GELU: e = a->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX; break;
    case DT_CU_EPI_DGELU: e = CUBLASLT_EPILOGUE_DGELU; break;
    /* the bias of cuBLASLt's column-major D (N x M) runs over its columns, our rows: the
     * gradient from its second operand, our A */
    case DT_CU_EPI_BGRAD: e = CUBLASLT_EPILOGUE_BGRADB; break;
    }
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    if (p->epi == DT_CU_EPI_GELU || p->epi == DT_CU_EPI_DGELU) {
        int64_t ld = a->ldc;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    if (p->epi == DT_CU_EPI_BGRAD) {
        int64_t bs = a->M; /* chunk s writes its partial at dbias_part + s M */
        cudaDataType bt = CUDA_R_32F;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        if (S > 1)
            LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bs, sizeof bs));
    }
    dt_status st = set_pointers(p, a); /* the heuristic reads their alignment */
    if (st != DT_OK) return st;
    int m = a->N, n = a->M, k = Kc;
    if ((st = layout(&p->la, CUDA_R_16BF, opa == CUBLAS_OP_N ? m : k, opa == CUBLAS_OP_N ? k : m,
                     a->ldb, nb, sB)) != DT_OK) return st;
    if ((st = layout(&p->lb, CUDA_R_16BF, opb == CUBLAS_OP_N ? k : n, opb == CUBLAS_OP_N ? n : k,
                     a->lda, nb, sA)) != DT_OK) return st;
    if ((st = layout(&p->lc, a->c_f32 ? CUDA_R_32F : CUDA_R_16BF, m, n, ldc, nb, sC)) != DT_OK)
        return st;
    p->source = "heuristic";
    p->note[0] = 0;
    p->table_on = h->table_on;
    p->forced_cfg = h->forced_cfg;
    p->force_cfg = h->force_cfg;
    if (h->forced_cfg) {
        char cs[160];
        dt_cu_gemm_cfg_str(&h->force_cfg, cs, sizeof cs);
        if (det && !dt_cu_gemm_cfg_det(&h->force_cfg))
            return dt_fail(DT_EDETERMINISM, "forced GEMM configuration %s splits K without a workspace reduction: "
                           "not allowed in det", cs);
        size_t ws = 0;
        cublasStatus_t c = algo_of(h, p, &h->force_cfg, &p->algo, &ws);
        if (c != CUBLAS_STATUS_SUCCESS || ws > DT_CU_GEMM_WORKSPACE)
            return dt_fail(DT_EUNSUPPORTED, "forced GEMM configuration %s does not fit %s%s %dx%dx%d (%s): "
                           "cublasLtMatmulAlgoCheck status %d, workspace %zu of %u bytes", cs, a->ta ? "T" : "N",
                           a->tb ? "T" : "N", a->M, a->N, a->K, epi, (int)c, ws, DT_CU_GEMM_WORKSPACE);
        p->source = "forced";
    } else if (h->force_cand < 0 && h->table_on) {
        dt_cu_gemm_key key = {h->cc, a->ta, a->tb, a->M, a->N, a->K, a->lda, a->ldb, a->ldc, a->c_f32, p->batch, S, epi};
        const dt_cu_gemm_entry *e = dt_cu_gemm_table_find(&key);
        if (e) {
            size_t ws = 0;
            cublasStatus_t c = algo_of(h, p, &e->cfg, &p->algo, &ws);
            if (c == CUBLAS_STATUS_SUCCESS && ws <= DT_CU_GEMM_WORKSPACE) p->source = "table";
            else /* another library or device: the entry does not apply, the heuristic does */
                snprintf(p->note, sizeof p->note, "entry for cuBLASLt %d rejected (AlgoCheck status %d, "
                         "workspace %zu): heuristic", DT_CU_GEMM_TABLE_LT, (int)c, ws);
        }
    }
    if (!strcmp(p->source, "heuristic") && (st = heuristic_algo(h, p, a, det, epi, S)) != DT_OK) return st;
    dt_cu_gemm_cfg_read(&p->algo, &p->cfg);
    if (S > 1) { /* the chunk partials' workspace, grown (never while a GEMM may read it) */
        size_t need = sizeof(float) * (size_t)S * a->M * a->N;
        if (need > h->split_bytes) {
            if (h->split_ws) {
                DT_CU_TRY(cudaDeviceSynchronize());
                cudaFree(h->split_ws);
                h->split_ws = NULL;
                h->split_bytes = 0;
            }
            if (cudaMalloc((void **)&h->split_ws, need) != cudaSuccess)
                return dt_fail(DT_ENOMEM, "cudaMalloc of %zu bytes for the split-K partials of %dx%dx%d failed",
                               need, a->M, a->N, a->K);
            h->split_bytes = need;
        }
    }
    return DT_OK;
}

static dt_status find_plan(dt_cu_blas *h, const dt_cu_gemm_args *a, plan **out) {
    int det = dt_gemm_choose() == DT_GEMM_DET;
    for (int i = 0; i < h->nplans; i++)
        if (same(&h->plans[i], h, a, det)) {
            *out = &h->plans[i];
            return DT_OK;
        }
    if (h->nplans == MAX_PLANS)
        return dt_fail(DT_ENOMEM, "more than %d GEMM shapes: raise MAX_PLANS in gemm_cuda.cu", MAX_PLANS);
    plan *p = &h->plans[h->nplans];
    dt_status st = make_plan(h, p, a, det);
    if (st != DT_OK) {
        plan_free(p);
        return st;
    }
    h->nplans++;
    *out = p;
    return DT_OK;
}

dt_status dt_cu_gemm_prepare(dt_cu_blas *h, const dt_cu_gemm_args *a) {
    plan *p;
    return find_plan(h, a, &p);
}

dt_status dt_cu_gemm_lt_of(dt_cu_blas *h, const dt_cu_gemm_args *a, dt_cu_gemm_lt *out) {
    plan *p;
    dt_status st = find_plan(h, a, &p);
    if (st != DT_OK) return st;
    out->lt = h->lt;
    out->desc = p->desc;
    out->a = p->la;
    out->b = p->lb;
    out->c = p->lc;
    out->ctype = p->c_f32 ? CUDA_R_32F : CUDA_R_16BF;
    out->cfg = p->cfg;
    out->source = p->source;
    out->epilogue = epi_name(p);
    out->k_chunks = p->splits;
    return DT_OK;
}

dt_status dt_cu_gemm_check_cfg(dt_cu_blas *h, const dt_cu_gemm_args *a, const dt_cu_gemm_cfg *cfg, size_t *ws) {
    plan *p;
    dt_status st = find_plan(h, a, &p);
    if (st != DT_OK) return st;
    cublasLtMatmulAlgo_t algo;
    cublasStatus_t c = algo_of(h, p, cfg, &algo, ws);
    if (c != CUBLAS_STATUS_SUCCESS) return dt_fail(DT_EUNSUPPORTED, "cublasLtMatmulAlgoCheck status %d", (int)c);
    return DT_OK;
}

/* C (M rows of N, row stride ldc) = beta C + (part_0 + part_1 + ... + part_{S-1}), the
 * partials (M, N) contiguous, S apart by M N. One thread owns 4 adjacent elements of a row
 * and adds the chunk partials in chunk order: the order is fixed by the indices. */
__global__ void splitk_sum_kernel(float *C, int ldc, const float *part, int S, int M, int N, float beta) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, mn = (size_t)M * N;
    if (i >= mn) return;
    float4 t = *reinterpret_cast<const float4 *>(part + i);
#pragma unroll 4
    for (int s = 1; s < S; s++) {
        float4 v = *reinterpret_cast<const float4 *>(part + s * mn + i);
        t.x += v.x; t.y += v.y; t.z += v.z; t.w += v.w;
    }
    size_t r = i / (size_t)N, c = i % (size_t)N;
    float4 *cp = reinterpret_cast<float4 *>(C + r * (size_t)ldc + c);
    if (beta != 0.0f) { /* beta = 0 never reads C (it may hold NaN) */
        float4 o = *cp;
        t.x = beta * o.x + t.x; t.y = beta * o.y + t.y; t.z = beta * o.z + t.z; t.w = beta * o.w + t.w;
    }
    *cp = t;
}

dt_status dt_cu_gemm_fin(dt_cu_blas *h, const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs) {
    plan *p = NULL;
    dt_status st = find_plan(h, a, &p);
    if (st != DT_OK) return st;
    h->last = (int)(p - h->plans);
    if ((st = set_pointers(p, a)) != DT_OK) return st;
    int half = h->half; /* the workspaces in turn */
    void *ws = (char *)h->ws + (size_t)half * DT_CU_GEMM_WORKSPACE;
    h->half ^= 1;
    if (p->splits == 1) {
        capture_note(h, s, 0, half);
        LT_TRY(cublasLtMatmul(h->lt, p->desc, &a->alpha, a->B, p->la, a->A, p->lb, &a->beta, a->C, p->lc,
                              a->C, p->lc, &p->algo, ws, DT_CU_GEMM_WORKSPACE, s));
        capture_note(h, s, 1, half);
    } else {
        if ((uintptr_t)a->C % 16)
            return dt_fail(DT_EINVAL, "dt_cu_gemm: a split-K output must be 16-byte aligned");
        const float zero = 0.0f;
        capture_note(h, s, 0, half);
        LT_TRY(cublasLtMatmul(h->lt, p->desc, &a->alpha, a->B, p->la, a->A, p->lb, &zero, h->split_ws, p->lc,
                              h->split_ws, p->lc, &p->algo, ws, DT_CU_GEMM_WORKSPACE, s));
        capture_note(h, s, 1, half);
        size_t vec = (size_t)a->M * a->N / 4;
        splitk_sum_kernel<<<dt_cu_noted(dt_cu_div(vec, 256), 256, 0, "splitk_sum_kernel"), 256, 0, s>>>(
            (float *)a->C, a->ldc, h->split_ws, p->splits, a->M, a->N, a->beta);
    }
    if (p->epi == DT_CU_EPI_BGRAD) { /* the chunks' bias partials, added in chunk order */
        dt_cu_fork(s, fs);
        dt_cu_parts_finish(a->dbias, NULL, a->dbias_part, p->splits, a->M, fs);
    }
    return DT_OK;
}

dt_status dt_cu_gemm(dt_cu_blas *h, const dt_cu_gemm_args *a, cudaStream_t s) { return dt_cu_gemm_fin(h, a, s, s); }
