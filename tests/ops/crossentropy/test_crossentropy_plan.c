/* The fused cross-entropy's CUDA plan (src/ops/crossentropy/crossentropy_plan.c,
 * crossentropy_plan.h): vectors a thread visits. Runs on the CPU (CI). */
#include "ops/crossentropy/crossentropy_plan.h"

#include "dt_test.h"

static void test_vectors_per_thread(void) {
    CHECK(dt_cu_ce_vectors_per_thread(50304, 256) == 25);
    CHECK(dt_cu_ce_vectors_per_thread(2048, 256) == 1);
}

int main(void) {
    RUN(test_vectors_per_thread);
    return dt_test_report();
}
