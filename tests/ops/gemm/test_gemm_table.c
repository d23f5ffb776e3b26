/* The GEMM plan table (src/ops/gemm_table.c, gemm_table.h), on the CPU (CI): every entry is
 * det-eligible, well formed and reachable (its key is what gemm_cuda.cu builds for the
 * model's call: natural leading dimensions, the K chunks of dt_cu_gemm_splits), keys are
 * unique, a lookup finds an entry by its exact key and nothing when any one field differs;
 * the det rule on configurations. */
#include "ops/gemm/gemm_table.h"

#include "ops/gemm/gemm_plan.h"

#include "dt_test.h"

#include <string.h>

static const char *epilogues[] = {"none", "bias", "gelu_aux", "gelu_aux_bias", "dgelu", "bgrad"};

static void test_entries(void) {
    int n = dt_cu_gemm_table_size();
    CHECKF(n > 0, "the table has %d entries", n);
    CHECK(dt_cu_gemm_table_at(-1) == NULL && dt_cu_gemm_table_at(n) == NULL);
    for (int i = 0; i < n; i++) {
        const dt_cu_gemm_entry *e = dt_cu_gemm_table_at(i);
        const dt_cu_gemm_key *k = &e->key;
        char cs[200];
        dt_cu_gemm_cfg_str(&e->cfg, cs, sizeof cs);
        CHECKF(dt_cu_gemm_cfg_det(&e->cfg), "entry %d (%s) is not det-eligible", i, cs);
        CHECKF(e->cfg.split_k >= 1 && e->cfg.algo_id >= 0 && e->cfg.swizzle >= 0 && e->cfg.swizzle <= 1,
               "entry %d: %s", i, cs);
        int known = 0;
        for (size_t j = 0; j < sizeof epilogues / sizeof epilogues[0]; j++) known |= !strcmp(k->epilogue, epilogues[j]);
        CHECKF(known, "entry %d: unknown epilogue '%s'", i, k->epilogue);
        CHECKF(k->cc >= 70 && k->M > 0 && k->N > 0 && k->K > 0 && k->batch == 1, "entry %d: key out of range", i);
        /* reachable: the leading dimensions of the model's row-major operands, the K chunks
         * gemm_cuda.cu cuts an fp32 output into (none for bf16 outputs) */
        CHECKF(k->lda == (k->ta ? k->M : k->K) && k->ldb == (k->tb ? k->K : k->N) && k->ldc == k->N,
               "entry %d: leading dimensions %d %d %d are not the model's", i, k->lda, k->ldb, k->ldc);
        int chunks = k->c_f32 ? dt_cu_gemm_splits(k->M, k->N, k->K) : 1;
        CHECKF(k->k_chunks == chunks, "entry %d: %d K chunks, gemm_cuda.cu makes %d", i, k->k_chunks, chunks);
        CHECKF(e->why && e->why[0], "entry %d says nothing of what it was measured against", i);
        for (int j = 0; j < i; j++) {
            const dt_cu_gemm_key *o = &dt_cu_gemm_table_at(j)->key;
            CHECKF(!(o->cc == k->cc && o->ta == k->ta && o->tb == k->tb && o->M == k->M && o->N == k->N &&
                     o->K == k->K && o->c_f32 == k->c_f32 && o->k_chunks == k->k_chunks &&
                     !strcmp(o->epilogue, k->epilogue)), "entries %d and %d have the same key", j, i);
        }
    }
}

/* Each entry is found by a copy of its key (another string with the same epilogue), and a
 * key that differs in any one field finds no entry or another one, never this one. */
static void test_lookup(void) {
    int n = dt_cu_gemm_table_size();
    for (int i = 0; i < n; i++) {
        const dt_cu_gemm_entry *e = dt_cu_gemm_table_at(i);
        dt_cu_gemm_key k = e->key;
        char epi[32];
        snprintf(epi, sizeof epi, "%s", e->key.epilogue);
        k.epilogue = epi;
        CHECKF(dt_cu_gemm_table_find(&k) == e, "entry %d not found by its key", i);
        for (int f = 0; f < 13; f++) {
            dt_cu_gemm_key d = k;
            int *fields[] = {&d.cc, &d.ta, &d.tb, &d.M, &d.N, &d.K, &d.lda, &d.ldb, &d.ldc, &d.c_f32, &d.batch,
                             &d.k_chunks};
            if (f < 12) *fields[f] += f == 1 || f == 2 || f == 9 ? (*fields[f] ? -1 : 1) : 8;
            else d.epilogue = strcmp(epi, "none") ? "none" : "bias";
            const dt_cu_gemm_entry *got = dt_cu_gemm_table_find(&d);
            CHECKF(got != e, "entry %d found with field %d changed", i, f);
        }
    }
    dt_cu_gemm_key none = {90, 0, 0, 3, 5, 7, 7, 5, 5, 0, 1, 1, "none"};
    CHECK(dt_cu_gemm_table_find(&none) == NULL);
    none.epilogue = NULL;
    CHECK(dt_cu_gemm_table_find(&none) == NULL);
}

static void test_cfg(void) {
    dt_cu_gemm_cfg c = {66, 20, 15, 1, 0, 1, 0, 0, 2};
    CHECK(dt_cu_gemm_cfg_det(&c));
    c.split_k = 3;
    CHECK(!dt_cu_gemm_cfg_det(&c)); /* a split without a named scheme */
    c.scheme = 2;
    CHECK(dt_cu_gemm_cfg_det(&c));  /* compute-type workspace reduction */
    c.scheme = 4;
    CHECK(dt_cu_gemm_cfg_det(&c));  /* output-type workspace reduction */
    c.scheme = DT_CU_SCHEME_INPLACE;
    CHECK(!dt_cu_gemm_cfg_det(&c)); /* partials added into the output in place */
    c.split_k = 1;
    CHECK(!dt_cu_gemm_cfg_det(&c));
    c.scheme = 0;
    char b[200];
    dt_cu_gemm_cfg_str(&c, b, sizeof b);
    CHECKF(!strcmp(b, "algo=66 tile=20 stages=15 split_k=1 scheme=0 swizzle=1 custom=0 inner=0 cluster=2"), "%s", b);
}

int main(void) {
    RUN(test_entries);
    RUN(test_lookup);
    RUN(test_cfg);
    return dt_test_report();
}
