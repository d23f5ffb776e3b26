/* The cross-entropy family's chooser (crossentropy.h) and the host-side plan of its CUDA
 * kernel (crossentropy_plan.h). Plain C, single-threaded. */
#include "ops/crossentropy/crossentropy_plan.h"

#include "ops/crossentropy/crossentropy.h"

dt_reduce_path dt_crossentropy_choose(void) { return dt_reduce_choose(DT_OP_CROSSENTROPY); }

int dt_cu_ce_vectors_per_thread(int Vp, int threads) {
    int per = 8 * threads;
    return (Vp + per - 1) / per;
}
