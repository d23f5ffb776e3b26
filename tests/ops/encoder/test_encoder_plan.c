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

int main(void) {
    RUN(test_buckets);
    return dt_test_report();
}
