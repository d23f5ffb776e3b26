/* The NCCL engine's stand-in in the CPU build (the CUDA build has the engine,
 * comm_nccl.cu): a binary without the engine refuses NCCL rather than running on another
 * engine. */
#include "dist/comm_nccl.h"

#ifndef DT_CUDA

#include <stddef.h>

dt_status dt_comm_create_nccl(dt_comm **out, const dt_nccl_spec *spec) {
    (void)spec;
    *out = NULL;
    return dt_fail(DT_EUNSUPPORTED, "the NCCL engine: this binary has none (build `make cuda` and run build/detrain-cuda)");
}

const char *dt_comm_nccl_record(void) { return ""; }
#else
typedef int dt_comm_nccl_stub_unused; /* the CUDA build: comm_nccl.cu defines dt_comm_create_nccl */
#endif
