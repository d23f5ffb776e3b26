/* Stand-ins for the CUDA training loop and bench in a build without CUDA (see
 * train_cuda.h). The CUDA build (`make cuda`, -DDT_CUDA) compiles the real ones from
 * train_cuda.cu and this file to nothing. */
#include "train/train_cuda.h"

#ifndef DT_CUDA
dt_status dt_train_run_cuda(const dt_train_config *cfg) {
    (void)cfg;
    return dt_fail(DT_EUNSUPPORTED, "--device cuda: this binary was built without CUDA; build "
                   "`make cuda` and run build/detrain-cuda");
}

dt_status dt_bench_cuda(const dt_bench_opts *opts, dt_bench_result *out) {
    (void)opts;
    (void)out;
    return dt_fail(DT_EUNSUPPORTED, "bench: this binary was built without CUDA; build `make cuda` "
                   "and run build/detrain-cuda bench");
}
#else
typedef int dt_train_nocuda_empty; /* ISO C wants a declaration in every file */
#endif
