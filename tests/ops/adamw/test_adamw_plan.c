/* The fused AdamW's CUDA plan (src/ops/adamw/adamw_plan.c, adamw_plan.h): the chunks cover
 * every parameter exactly once without crossing a tensor. Runs on the CPU (CI). */
#include "ops/adamw/adamw_plan.h"

#include "dt_test.h"

static void test_adamw_chunks(void) {
    size_t numel[4] = {10, 1, 0, 25}, offs[4] = {0, 10, 11, 11};
    size_t n = dt_cu_adamw_chunks(offs, numel, 4, 8, NULL, 0);
    CHECK(n == 2 + 1 + 0 + 4);
    dt_cu_chunk ch[16];
    CHECK(dt_cu_adamw_chunks(offs, numel, 4, 8, ch, 16) == n);
    int cover[36] = {0}, bad = 0;
    for (size_t k = 0; k < n; k++) {
        if (ch[k].len == 0 || ch[k].len > 8) bad++;
        size_t t = ch[k].tensor;
        if (ch[k].start < offs[t] || ch[k].start + ch[k].len > offs[t] + numel[t]) bad++;
        for (uint32_t j = 0; j < ch[k].len; j++) cover[ch[k].start + j]++;
    }
    for (int i = 0; i < 36; i++) bad += cover[i] != 1;
    CHECKF(bad == 0, "%d chunk violations", bad);
}

int main(void) {
    RUN(test_adamw_chunks);
    return dt_test_report();
}
