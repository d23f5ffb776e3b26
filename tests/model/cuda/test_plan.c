/* The CUDA model's plan (src/model/cuda/plan.c, plan.h): the residual-gradient slots of the
 * batched weight gradients, the second stream's pending reads, and when a phase runs from a
 * CUDA graph. Runs on the CPU (CI). */
#include "model/cuda/plan.h"

#include "dt_test.h"

#include <string.h>

/* The backward's table of buffers a second stream still reads (dt_cu_reads_*). */
static void test_pending_reads(void) {
    dt_cu_reads r;
    memset(&r, 0, sizeof r);
    int a = 0, b = 0, c = 0, bufs[DT_CU_READS_MAX + 1] = {0}; /* only their addresses matter */
    CHECK(dt_cu_reads_claim(&r, &a) == -1); /* nothing pending: no wait */
    int ka = dt_cu_reads_note(&r, &a);
    CHECK(ka >= 0 && ka < DT_CU_READS_MAX);
    CHECK(dt_cu_reads_note(&r, &a) == ka); /* a second read of a keeps its slot (later event) */
    int kb = dt_cu_reads_note(&r, &b);
    CHECK(kb >= 0 && kb != ka);
    CHECK(dt_cu_reads_claim(&r, &c) == -1); /* c was never read */
    CHECK(dt_cu_reads_claim(&r, &a) == ka); /* the write of a waits for a's event ... */
    CHECK(dt_cu_reads_claim(&r, &a) == -1); /* ... once */
    CHECK(dt_cu_reads_claim(&r, &b) == kb);
    /* the table fills: DT_CU_READS_MAX distinct pending buffers fit, one more does not */
    memset(&r, 0, sizeof r);
    int seen[DT_CU_READS_MAX] = {0};
    for (int i = 0; i < DT_CU_READS_MAX; i++) {
        int k = dt_cu_reads_note(&r, &bufs[i]);
        CHECK(k >= 0 && k < DT_CU_READS_MAX && !seen[k]);
        if (k >= 0 && k < DT_CU_READS_MAX) seen[k] = 1;
    }
    CHECK(dt_cu_reads_note(&r, &bufs[DT_CU_READS_MAX]) == -1);
    CHECK(dt_cu_reads_note(&r, &bufs[2]) >= 0); /* a pending one still re-notes */
    int k3 = dt_cu_reads_claim(&r, &bufs[3]);
    CHECK(k3 >= 0);
    CHECK(dt_cu_reads_note(&r, &bufs[DT_CU_READS_MAX]) == k3); /* the freed slot is reused */
    dt_cu_reads_clear(&r);
    for (int i = 0; i <= DT_CU_READS_MAX; i++) CHECK(dt_cu_reads_claim(&r, &bufs[i]) == -1);
}

/* --dw-batch's residual-gradient slots, in the backward's order: lnf, then for l = L - 1
 * down to 0 fcproj reads, LN2 writes, attproj reads, LN1 writes. Each linear reads the slot
 * the LayerNorm backward just before it wrote; every slot of the 2 L is written once, so
 * each still holds its layer's dout when the batched GEMMs read them after the layers; a
 * kind's slots are its first plus l strides; layer 0's LN1 writes the embedding's buffer. */
static void test_res_slots(void) {
    for (int L = 1; L <= 5; L++) {
        int written[16] = {0}, last = dt_cu_res_slot_ln(L, DT_CU_RES_LN1); /* lnf */
        CHECK(last == dt_cu_res_slot(L - 1, DT_CU_RES_FCPROJ));
        written[last]++;
        for (int l = L - 1; l >= 0; l--) {
            CHECK(dt_cu_res_slot(l, DT_CU_RES_FCPROJ) == last);
            last = dt_cu_res_slot_ln(l, DT_CU_RES_LN2);
            CHECK(last >= 0 && last < 2 * L);
            if (last >= 0 && last < 16) written[last]++;
            CHECK(dt_cu_res_slot(l, DT_CU_RES_ATTPROJ) == last);
            last = dt_cu_res_slot_ln(l, DT_CU_RES_LN1);
            CHECK(l > 0 ? last >= 0 && last < 2 * L : last == -1);
            if (last >= 0 && last < 16) written[last]++;
            for (int kind = DT_CU_RES_ATTPROJ; kind <= DT_CU_RES_FCPROJ; kind++)
                CHECK(dt_cu_res_slot(l, kind) == dt_cu_res_slot(0, kind) + l * DT_CU_RES_STRIDE);
        }
        for (int k = 0; k < 2 * L; k++) CHECKF(written[k] == 1, "L %d: slot %d written %d times", L, k, written[k]);
    }
}

/* When a phase runs eagerly, is captured into a CUDA graph, or replays it (dt_cu_graph_*). */
static void test_graph_decide(void) {
    dt_cu_graph_state g;
    memset(&g, 0, sizeof g);
    uint64_t a = dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "a", 1), b = dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "b", 1);
    CHECK(a != b && a != DT_CU_GRAPH_SIG0);
    CHECK(dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "a", 1) == a); /* a function of the bytes only */
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);   /* first call: plans made eagerly */
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE); /* second identical call */
    dt_cu_graph_captured(&g, a);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    /* an ineligible call (tracing, profiling) runs eagerly and keeps the graph */
    CHECK(dt_cu_graph_decide(&g, 0, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    /* a new signature: eager once, then a new capture; the old graph is not replayed */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY); /* a's graph is still held */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_EAGER);  /* b's streak was broken by a */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_CAPTURE);
    dt_cu_graph_captured(&g, b);
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_REPLAY);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER); /* one graph a phase: a's is gone */
    /* an ineligible call between two identical ones breaks the streak */
    CHECK(dt_cu_graph_decide(&g, 0, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE);
    /* a failed capture forgets everything: eager, then capture again */
    dt_cu_graph_forget(&g);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE);
}

/* The backward's plan: every combination of the model's choices gives a plan in which each
 * gradient has exactly one maker that exists (dt_cu_bwd_plan_check), and the named
 * configurations give the makers the backward has always used. */
static void test_bwd_plan(void) {
    for (int bits = 0; bits < 128; bits++) {
        dt_cu_bwd_plan_in in = {bits & 1, bits >> 1 & 1, bits >> 2 & 1, bits >> 3 & 1, bits >> 4 & 1, bits >> 5 & 1,
                                bits >> 6 & 1};
        dt_cu_bwd_plan p;
        char why[256] = "";
        dt_cu_bwd_plan_make(&in, &p);
        CHECKF(dt_cu_bwd_plan_check(&in, &p, why, sizeof why) == 0, "choices 0x%02x: %s", bits, why);
    }
    /* the default on the H200: flash, GELU fused, our dGELU and DOT epilogues, batched dW */
    dt_cu_bwd_plan_in def = {1, 1, 0, 0, 1, 1, 1};
    dt_cu_bwd_plan p;
    dt_cu_bwd_plan_make(&def, &p);
    CHECK(p.bias[DT_CU_LIN_QKV] == DT_CU_BIAS_FLASH && p.bias[DT_CU_LIN_ATTPROJ] == DT_CU_BIAS_LN_COLSUM &&
          p.bias[DT_CU_LIN_FC] == DT_CU_BIAS_DGELU_EPILOGUE && p.bias[DT_CU_LIN_FCPROJ] == DT_CU_BIAS_LN_COLSUM);
    CHECK(p.dw_batched[0] && p.dw_batched[1] && p.dw_batched[2] && p.dw_batched[3] && p.keep_res && p.ld_from_dot);
    /* hidden dropout: attproj's and fcproj's dout is a masked copy: column sums of their own,
     * per-layer weight gradients; qkv and fc still batched */
    dt_cu_bwd_plan_in drop = def;
    drop.hidden_dropout = 1;
    dt_cu_bwd_plan_make(&drop, &p);
    CHECK(!p.ln_colsum && p.bias[DT_CU_LIN_ATTPROJ] == DT_CU_BIAS_COLSUM && p.bias[DT_CU_LIN_FCPROJ] == DT_CU_BIAS_COLSUM);
    CHECK(p.dw_batched[DT_CU_LIN_QKV] && p.dw_batched[DT_CU_LIN_FC] && !p.dw_batched[DT_CU_LIN_ATTPROJ] && !p.keep_res);
    /* --gemm-epilogues all: every bias but qkv's from its weight-gradient GEMM, none batched but qkv */
    dt_cu_bwd_plan_in all = def;
    all.fuse_bgrad = 1;
    dt_cu_bwd_plan_make(&all, &p);
    CHECK(p.bias[DT_CU_LIN_QKV] == DT_CU_BIAS_FLASH && p.bias[DT_CU_LIN_ATTPROJ] == DT_CU_BIAS_GEMM_EPILOGUE &&
          p.bias[DT_CU_LIN_FC] == DT_CU_BIAS_GEMM_EPILOGUE && p.bias[DT_CU_LIN_FCPROJ] == DT_CU_BIAS_GEMM_EPILOGUE);
    CHECK(p.dw_batched[DT_CU_LIN_QKV] && !p.dw_batched[DT_CU_LIN_FC] && !p.dw_batched[DT_CU_LIN_FCPROJ]);
    /* GEMM attention, no GELU fusion, --gemm-own off, --dw-batch off */
    dt_cu_bwd_plan_in plain = {0, 0, 0, 0, 0, 0, 0};
    dt_cu_bwd_plan_make(&plain, &p);
    CHECK(p.bias[DT_CU_LIN_QKV] == DT_CU_BIAS_COLSUM && p.bias[DT_CU_LIN_FC] == DT_CU_BIAS_GELU_BWD && !p.ld_from_dot);
    CHECK(!p.dw_batched[0] && !p.dw_batched[1] && !p.dw_batched[2] && !p.dw_batched[3]);
    /* the check can fail: a bias from the epilogue of a GEMM that is batched away, a batched
     * fcproj without the kept residual gradients, the flash sum without flash, LD without it */
    char why[256];
    dt_cu_bwd_plan_make(&all, &p);
    p.dw_batched[DT_CU_LIN_FC] = 1;
    CHECK(dt_cu_bwd_plan_check(&all, &p, why, sizeof why) < 0 && strstr(why, "fc:"));
    dt_cu_bwd_plan_make(&drop, &p);
    p.dw_batched[DT_CU_LIN_FCPROJ] = 1;
    CHECK(dt_cu_bwd_plan_check(&drop, &p, why, sizeof why) < 0 && strstr(why, "fcproj:"));
    dt_cu_bwd_plan_make(&plain, &p);
    p.bias[DT_CU_LIN_QKV] = DT_CU_BIAS_FLASH;
    CHECK(dt_cu_bwd_plan_check(&plain, &p, why, sizeof why) < 0 && strstr(why, "qkv:"));
    dt_cu_bwd_plan_make(&plain, &p);
    p.ld_from_dot = 1;
    CHECK(dt_cu_bwd_plan_check(&plain, &p, why, sizeof why) < 0);
    dt_cu_bwd_plan_make(&def, &p);
    p.bias[DT_CU_LIN_FC] = DT_CU_BIAS_LN_COLSUM;
    CHECK(dt_cu_bwd_plan_check(&def, &p, why, sizeof why) < 0 && strstr(why, "fc:"));
}

int main(void) {
    RUN(test_bwd_plan);
    RUN(test_pending_reads);
    RUN(test_res_slots);
    RUN(test_graph_decide);
    return dt_test_report();
}
