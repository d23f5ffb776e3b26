/* The CUDA model's plan (see plan.h). Plain C, single-threaded. */
#include "model/cuda/plan.h"

#include <stdio.h>
#include <string.h>

int dt_cu_res_slot(int l, int kind) { return DT_CU_RES_STRIDE * l + kind; }

int dt_cu_res_slot_ln(int l, int ln) {
    if (ln == DT_CU_RES_LN2) return dt_cu_res_slot(l, DT_CU_RES_ATTPROJ);
    return l > 0 ? dt_cu_res_slot(l - 1, DT_CU_RES_FCPROJ) : -1;
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

/* ---- the backward's plan ------------------------------------------------------------- */

const char *dt_cu_bias_src_name(dt_cu_bias_src s) {
    static const char *n[DT_CU_BIAS_SRC_COUNT] = {"colsum", "gemm_epilogue", "ln_colsum", "dgelu_epilogue",
                                                  "gelu_bwd", "flash"};
    return s >= 0 && s < DT_CU_BIAS_SRC_COUNT ? n[s] : "?";
}

void dt_cu_bwd_plan_make(const dt_cu_bwd_plan_in *in, dt_cu_bwd_plan *p) {
    memset(p, 0, sizeof *p);
    /* the LayerNorm backward's output is the dout of the linear after it, unless dropout
     * masks it first; with the bias-gradient epilogue the GEMMs make the biases instead */
    p->ln_colsum = !in->hidden_dropout && !in->fuse_bgrad;
    dt_cu_bias_src plain = in->fuse_bgrad ? DT_CU_BIAS_GEMM_EPILOGUE : DT_CU_BIAS_COLSUM;
    p->bias[DT_CU_LIN_QKV] = in->flash ? DT_CU_BIAS_FLASH : plain;
    p->bias[DT_CU_LIN_ATTPROJ] = p->bias[DT_CU_LIN_FCPROJ] = p->ln_colsum ? DT_CU_BIAS_LN_COLSUM : plain;
    if (in->fuse_gelu)
        p->bias[DT_CU_LIN_FC] = in->fuse_bgrad ? DT_CU_BIAS_GEMM_EPILOGUE
                              : in->dgelu_csum ? DT_CU_BIAS_DGELU_EPILOGUE : DT_CU_BIAS_COLSUM;
    else
        p->bias[DT_CU_LIN_FC] = in->fuse_bgrad ? DT_CU_BIAS_GEMM_EPILOGUE : DT_CU_BIAS_GELU_BWD;
    /* batched: qkv's needs each layer's dqkv kept and its bias from the flash backward; fc's
     * its bias from anything but the GEMM; fcproj's and attproj's the residual gradients,
     * which are their douts only when no dropout masks them and the LN sums their biases */
    p->dw_batched[DT_CU_LIN_QKV] = in->dw_batch && in->flash;
    p->dw_batched[DT_CU_LIN_FC] = in->dw_batch && !in->fuse_bgrad;
    p->keep_res = in->dw_batch && p->ln_colsum;
    p->dw_batched[DT_CU_LIN_ATTPROJ] = p->dw_batched[DT_CU_LIN_FCPROJ] = p->keep_res;
    p->ld_from_dot = in->dot_ld && in->flash;
}

int dt_cu_bwd_plan_check(const dt_cu_bwd_plan_in *in, const dt_cu_bwd_plan *p, char *why, size_t cap) {
    static const char *lin[DT_CU_LINEARS] = {"qkv", "attproj", "fc", "fcproj"};
    for (int k = 0; k < DT_CU_LINEARS; k++) {
        dt_cu_bias_src b = p->bias[k];
        const char *bad = NULL;
        if (b == DT_CU_BIAS_FLASH && (k != DT_CU_LIN_QKV || !in->flash)) bad = "the flash backward sums only qkv's, with flash attention";
        else if (b == DT_CU_BIAS_DGELU_EPILOGUE && (k != DT_CU_LIN_FC || !in->fuse_gelu || !in->dgelu_csum))
            bad = "the dGELU epilogue sums only fc's, on our kernel with the GELU fusion";
        else if (b == DT_CU_BIAS_GELU_BWD && (k != DT_CU_LIN_FC || in->fuse_gelu)) bad = "the GELU backward runs only unfused, for fc";
        else if (b == DT_CU_BIAS_LN_COLSUM && (!p->ln_colsum || (k != DT_CU_LIN_ATTPROJ && k != DT_CU_LIN_FCPROJ) ||
                                              in->hidden_dropout))
            bad = "a LayerNorm backward sums only the dout of the linear after it, attproj's and fcproj's, without dropout";
        else if (b == DT_CU_BIAS_GEMM_EPILOGUE && (!in->fuse_bgrad || p->dw_batched[k]))
            bad = "the bias-gradient epilogue needs the fusion and the linear's own weight-gradient GEMM";
        else if (b == DT_CU_BIAS_COLSUM && in->fuse_bgrad) bad = "with the bias-gradient epilogue no column sum runs";
        else if (b < 0 || b >= DT_CU_BIAS_SRC_COUNT) bad = "no maker";
        if (!bad && p->dw_batched[k]) {
            if (k == DT_CU_LIN_QKV && !in->flash) bad = "qkv's batched weight gradient needs flash attention";
            if ((k == DT_CU_LIN_ATTPROJ || k == DT_CU_LIN_FCPROJ) && (!p->keep_res || b != DT_CU_BIAS_LN_COLSUM))
                bad = "a batched attproj/fcproj weight gradient reads the kept residual gradients";
            if (!in->dw_batch) bad = "batched without --dw-batch";
        }
        if (bad) {
            snprintf(why, cap, "%s: bias from %s, weight %s: %s", lin[k], dt_cu_bias_src_name(b),
                     p->dw_batched[k] ? "batched" : "per layer", bad);
            return -1;
        }
    }
    if (p->ld_from_dot && (!in->flash || !in->dot_ld)) {
        snprintf(why, cap, "LD from the attproj GEMM needs flash attention and the DOT epilogue");
        return -1;
    }
    if (p->keep_res && !p->ln_colsum) {
        snprintf(why, cap, "the residual slots are kept for the LayerNorm-summed linears only");
        return -1;
    }
    return 0;
}
