/* The CUDA backend's stand-in in a build without CUDA (plain `make`): a CPU binary never
 * trains on the CPU when the GPU was asked for. The CUDA build (`make cuda`, -DDT_CUDA)
 * compiles cuda_backend.cu and this file to nothing. */
#include "backend/backend.h"

#ifndef DT_CUDA
dt_status dt_backend_cuda_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                                 dt_adamw *opt) {
    (void)cfg; (void)comm; (void)host; (void)opt;
    *out = NULL;
    return dt_fail(DT_EUNSUPPORTED, "--device cuda: this binary was built without CUDA; build `make cuda` "
                   "and run build/detrain-cuda");
}
#else
typedef int dt_backend_cuda_stub_empty; /* ISO C wants a declaration in every file */
#endif
