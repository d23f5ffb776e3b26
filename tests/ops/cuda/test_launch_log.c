/* The launch log of kernel-level tracing (src/ops/cuda/launch_log.c, launch_log.h). Runs on
 * the CPU (CI). */
#include "ops/cuda/launch_log.h"

#include "dt_test.h"

#include <string.h>

/* The launch log: nothing noted while off; notes formatted in order; a take clears; more
 * launches than kept are counted; a small buffer is cut, never overrun. */
static void test_launch_log(void) {
    char buf[512];
    dt_cu_launch_take(NULL, 0);
    dt_cu_launch_note("ignored", 1, 1, 1, 32, 1, 1, 0);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 0 && buf[0] == 0);
    dt_cu_launch_log(1);
    dt_cu_launch_note("ln_fwd", 4096, 1, 1, 128, 1, 1, 0);
    dt_cu_launch_note("finish", 24, 2, 1, 256, 1, 1, 8192);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 2);
    CHECKF(!strcmp(buf, "ln_fwd<<<(4096,1,1),(128,1,1),0>>>; finish<<<(24,2,1),(256,1,1),8192>>>"), "%s", buf);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 0 && buf[0] == 0);
    for (int i = 0; i < 40; i++) dt_cu_launch_note("k", (unsigned)i, 1, 1, 1, 1, 1, 0);
    char big[4096];
    CHECK(dt_cu_launch_take(big, sizeof big) == 40);
    CHECKF(strstr(big, "; +8 more") != NULL, "%s", big);
    for (int i = 0; i < 40; i++) dt_cu_launch_note("kernel_name", (unsigned)i, 1, 1, 1, 1, 1, 0);
    char small[50];
    memset(small, 'x', sizeof small);
    CHECK(dt_cu_launch_take(small, 40) == 40);
    CHECK(strlen(small) < 40 && small[45] == 'x');
    dt_cu_launch_log(0);
}

int main(void) {
    RUN(test_launch_log);
    return dt_test_report();
}
