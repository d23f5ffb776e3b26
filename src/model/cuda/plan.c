/* The CUDA model's plan (see plan.h). Plain C, single-threaded. */
#include "model/cuda/plan.h"

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
