/* The NCCL engine's stand-in: a binary without the engine refuses NCCL rather than running
 * on another engine. */
#include "dist/comm_nccl.h"

#include <stddef.h>

dt_status dt_comm_create_nccl(dt_comm **out, const dt_nccl_spec *spec) {
    (void)spec;
    *out = NULL;
    return dt_fail(DT_EUNSUPPORTED, "the NCCL engine: this binary has none (build `make cuda` and run build/detrain-cuda)");
}
