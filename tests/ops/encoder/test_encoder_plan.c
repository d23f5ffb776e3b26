/* The embedding backward's CUDA plan (src/ops/encoder/encoder_plan.c, encoder_plan.h): the
 * token buckets are a stable sort. Runs on the CPU (CI). */
#include "ops/encoder/encoder_plan.h"

#include "dt_test.h"

static void test_buckets(void) {
    enum { BT = 4000, Vp = 384 };
    static int inp[BT], count[Vp], order[BT], tok[BT], start[BT + 1];
    for (int i = 0; i < BT; i++) inp[i] = (int)((i * 7919u + (unsigned)(i / 13)) % 97u) * 3; /* repeats */
    int nseg = dt_cu_encoder_buckets(inp, BT, Vp, count, order, tok, start);
    CHECK(nseg > 0 && nseg <= 97);
    CHECK(start[0] == 0 && start[nseg] == BT);
    int seen[BT] = {0}, bad = 0;
    for (int s = 0; s < nseg; s++) {
        if (s > 0 && tok[s] <= tok[s - 1]) bad++;                   /* ids increase */
        if (start[s + 1] <= start[s]) bad++;                         /* non-empty runs */
        for (int j = start[s]; j < start[s + 1]; j++) {
            if (inp[order[j]] != tok[s]) bad++;                      /* right bucket */
            if (j > start[s] && order[j] <= order[j - 1]) bad++;     /* stable: position order */
            seen[order[j]]++;
        }
    }
    for (int i = 0; i < BT; i++) bad += seen[i] != 1;
    CHECKF(bad == 0, "%d bucket violations", bad);
    inp[5] = Vp; /* out of range */
    CHECK(dt_cu_encoder_buckets(inp, BT, Vp, count, order, tok, start) == -1);
}

/* The chunks of the buckets: every position of every run in exactly one chunk, in run
 * order; runs of at most DT_CU_ENCODER_CHUNK positions one chunk writing its token's row;
 * longer runs cut into full chunks (the last one the rest) writing their own consecutive
 * slots, listed once as a run with its token and slots; with one token taking a fifth of
 * the batch as in real text. */
static void test_chunks(void) {
    enum { BT = 16384, Vp = 50304 };
    static int inp[BT], count[Vp], order[BT], tok[BT], start[BT + 1], cs[BT + 1], cd[BT], mt[BT], ms[BT];
    for (int i = 0; i < BT; i++) inp[i] = i % 5 == 0 ? 198 : (int)((i * 2654435761u) % 3000u); /* one token: 20% */
    int nseg = dt_cu_encoder_buckets(inp, BT, Vp, count, order, tok, start);
    int nmulti = -1, nchunk = dt_cu_encoder_chunks(tok, start, nseg, cs, cd, mt, ms, &nmulti);
    CHECK(nchunk > nseg && nmulti >= 1 && nmulti <= dt_cu_encoder_max_multi(BT));
    CHECK(cs[0] == 0 && cs[nchunk] == BT && ms[0] == 0 && ms[nmulti] <= dt_cu_encoder_max_slots(BT));
    int bad = 0, s = 0, m = 0, slot = 0;
    for (int k = 0; k < nchunk; k++) {
        int len = cs[k + 1] - cs[k];
        if (len < 1 || len > DT_CU_ENCODER_CHUNK) bad++;
        while (s < nseg && start[s + 1] <= cs[k]) s++;  /* the run chunk k belongs to */
        if (cs[k + 1] > start[s + 1]) bad++;            /* a chunk never crosses runs */
        int runlen = start[s + 1] - start[s];
        if (runlen <= DT_CU_ENCODER_CHUNK) {
            if (cd[k] != tok[s] || cs[k] != start[s] || len != runlen) bad++;
        } else {
            if (cd[k] != -1 - slot) bad++;              /* consecutive slots */
            if (cs[k] == start[s]) {                    /* a run's first chunk: its listing */
                if (m >= nmulti || mt[m] != tok[s] || ms[m] != slot) bad++;
                m++;
            }
            if (cs[k + 1] != start[s + 1] && len != DT_CU_ENCODER_CHUNK) bad++;
            slot++;
        }
    }
    CHECKF(bad == 0 && m == nmulti && ms[nmulti] == slot, "%d chunk violations (%d of %d runs listed)", bad, m, nmulti);
    /* the skewed token's run of BT / 5 positions: ceil(3277 / CHUNK) slots */
    int r = 0;
    while (r < nmulti && mt[r] != 198) r++;
    CHECK(r < nmulti && ms[r + 1] - ms[r] == (BT / 5 + 1 + DT_CU_ENCODER_CHUNK - 1) / DT_CU_ENCODER_CHUNK);
}

int main(void) {
    RUN(test_buckets);
    RUN(test_chunks);
    return dt_test_report();
}
