/* Host-side plans of the CUDA kernels (see cuda_plan.h). Plain C, single-threaded. */
#include "ops/cuda_plan.h"

#include <stdio.h>
#include <string.h>

int dt_cu_colsum_parts(int rows) { return (rows + DT_CU_COLSUM_ROWS - 1) / DT_CU_COLSUM_ROWS; }

int dt_cu_ln_parts(int rows) { return (rows + DT_CU_LN_ROWS - 1) / DT_CU_LN_ROWS; }

size_t dt_cu_ln_bwd_smem(int C, int colsum) {
    return sizeof(float) * (size_t)(2 + (colsum != 0)) * DT_CU_LN_WARPS * (size_t)C;
}

size_t dt_cu_ln_bwd_full_smem(int C, int colsum) { return dt_cu_ln_bwd_smem(C, colsum) + sizeof(float) * (size_t)C; }

int dt_cu_ln_full_rows(int C, int nv) { return nv >= 1 && nv <= 3 && C == 256 * nv; }

int dt_cu_res_slot(int l, int kind) { return DT_CU_RES_STRIDE * l + kind; }

int dt_cu_res_slot_ln(int l, int ln) {
    if (ln == DT_CU_RES_LN2) return dt_cu_res_slot(l, DT_CU_RES_ATTPROJ);
    return l > 0 ? dt_cu_res_slot(l - 1, DT_CU_RES_FCPROJ) : -1;
}

int dt_cu_ln_colsum_fused(int C, int wide) { return !wide || dt_cu_ln_bwd_smem(C, 1) <= DT_CU_LN_SMEM_MAX; }

size_t dt_cu_ln_part_floats(int rows, int C, int colsum) {
    return (size_t)(2 + (colsum != 0)) * (size_t)dt_cu_ln_parts(rows) * (size_t)C;
}

int dt_cu_reduce_blocks(size_t n) {
    size_t per_block = (size_t)DT_CU_RED_THREADS * 8;
    size_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > DT_CU_RED_MAX_BLOCKS) b = DT_CU_RED_MAX_BLOCKS;
    return (int)b;
}

int dt_cu_encoder_buckets(const int *inp, int BT, int Vp, int *count, int *order, int *seg_tok,
                          int *seg_start) {
    memset(count, 0, sizeof(int) * (size_t)Vp);
    for (int i = 0; i < BT; i++) {
        if (inp[i] < 0 || inp[i] >= Vp) return -1;
        count[inp[i]]++;
    }
    /* exclusive prefix sums in id order; distinct ids become segments in id order */
    int nseg = 0, run = 0;
    for (int v = 0; v < Vp; v++) {
        int c = count[v];
        if (c) {
            seg_tok[nseg] = v;
            seg_start[nseg] = run;
            nseg++;
        }
        count[v] = run;
        run += c;
    }
    seg_start[nseg] = BT;
    /* positions visited in increasing order: ties keep position order (stable) */
    for (int i = 0; i < BT; i++) order[count[inp[i]]++] = i;
    return nseg;
}

size_t dt_cu_adamw_chunks(const size_t *offsets, const size_t *numel, int ntensors,
                          size_t chunk, dt_cu_chunk *out, size_t cap) {
    size_t k = 0;
    for (int t = 0; t < ntensors; t++)
        for (size_t s = 0; s < numel[t]; s += chunk) {
            size_t len = numel[t] - s < chunk ? numel[t] - s : chunk;
            if (k < cap) {
                out[k].tensor = (uint32_t)t;
                out[k].len = (uint32_t)len;
                out[k].start = offsets[t] + s;
            }
            k++;
        }
    return k;
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

int dt_cu_ce_vectors_per_thread(int Vp, int threads) {
    int per = 8 * threads;
    return (Vp + per - 1) / per;
}

/* ---- launch log ---------------------------------------------------------------------- */

#define LAUNCH_NOTES 32
static struct {
    int on, n; /* n: launches noted since the last take (may exceed LAUNCH_NOTES) */
    struct { const char *kernel; unsigned g[3], b[3]; size_t smem; } note[LAUNCH_NOTES];
} L;

void dt_cu_launch_log(int on) { L.on = on; }

void dt_cu_launch_note(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t smem) {
    if (!L.on) return;
    if (L.n < LAUNCH_NOTES) {
        L.note[L.n].kernel = kernel;
        L.note[L.n].g[0] = gx; L.note[L.n].g[1] = gy; L.note[L.n].g[2] = gz;
        L.note[L.n].b[0] = bx; L.note[L.n].b[1] = by; L.note[L.n].b[2] = bz;
        L.note[L.n].smem = smem;
    }
    L.n++;
}

int dt_cu_launch_take(char *buf, size_t cap) {
    int n = L.n;
    L.n = 0;
    if (!buf || cap == 0) return n;
    size_t used = 0;
    buf[0] = 0;
    int kept = n < LAUNCH_NOTES ? n : LAUNCH_NOTES;
    for (int i = 0; i < kept && used + 1 < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s<<<(%u,%u,%u),(%u,%u,%u),%zu>>>", i ? "; " : "",
                         L.note[i].kernel, L.note[i].g[0], L.note[i].g[1], L.note[i].g[2],
                         L.note[i].b[0], L.note[i].b[1], L.note[i].b[2], L.note[i].smem);
        used = w < 0 ? cap : used + (size_t)w;
    }
    if (n > kept && used + 1 < cap) snprintf(buf + used, cap - used, "; +%d more", n - kept);
    return n;
}

int dt_cu_reads_note(dt_cu_reads *r, const void *buf) {
    /* a pending buffer keeps its slot (a later event on the in-order stream covers the
     * earlier reads), so no two pending slots name the same buffer */
    int k = -1;
    for (int i = 0; i < DT_CU_READS_MAX && k < 0; i++)
        if (r->pending[i] && r->buf[i] == buf) k = i;
    for (int i = 0; i < DT_CU_READS_MAX && k < 0; i++)
        if (!r->pending[i]) k = i;
    if (k < 0) return -1;
    r->buf[k] = buf;
    r->pending[k] = 1;
    return k;
}

int dt_cu_reads_claim(dt_cu_reads *r, const void *buf) {
    for (int i = 0; i < DT_CU_READS_MAX; i++)
        if (r->pending[i] && r->buf[i] == buf) {
            r->pending[i] = 0;
            return i;
        }
    return -1;
}

void dt_cu_reads_clear(dt_cu_reads *r) {
    for (int i = 0; i < DT_CU_READS_MAX; i++) r->pending[i] = 0;
}

dt_cu_graph_act dt_cu_graph_decide(dt_cu_graph_state *g, int eligible, uint64_t sig) {
    if (!eligible) { /* the streak of identical calls is broken; the graph held stays valid */
        g->have_seen = 0;
        return DT_CU_GRAPH_EAGER;
    }
    if (g->have_captured && g->captured == sig) {
        g->have_seen = 0; /* "consecutive" counts every call */
        return DT_CU_GRAPH_REPLAY;
    }
    if (g->have_seen && g->seen == sig) return DT_CU_GRAPH_CAPTURE;
    g->seen = sig;
    g->have_seen = 1;
    return DT_CU_GRAPH_EAGER;
}

void dt_cu_graph_captured(dt_cu_graph_state *g, uint64_t sig) {
    g->captured = sig;
    g->have_captured = 1;
    g->have_seen = 0;
}

void dt_cu_graph_forget(dt_cu_graph_state *g) { g->have_captured = g->have_seen = 0; }

uint64_t dt_cu_graph_sig(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
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
