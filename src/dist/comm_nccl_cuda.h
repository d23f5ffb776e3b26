/* The NCCL engine's device side, for the engine (comm_nccl.cu) and the GPU tests: the
 * kernel of the rank-ordered reduction and the waits every collective ends with. CUDA
 * builds only. */
#ifndef DT_DIST_COMM_NCCL_CUDA_H
#define DT_DIST_COMM_NCCL_CUDA_H

#include "dist/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = ((stage[i] + stage[stride + i]) + stage[2 stride + i]) + ... over `size` slots,
 * in slot (logical rank) order, with fp32 adds for F32, fp64 for F64 and 64-bit integer
 * adds for I64: each element is summed by one thread, so the bits are the host's
 * dt_comm_sum_ranks_f32/f64. out may be slot 0 (then it is read before written). Queued on
 * stream. */
dt_status dt_comm_nccl_sum_slots(void *out, const void *stage, size_t stride, int size, size_t n, dt_comm_dtype t,
                                 void *stream);

/* A kernel that keeps the stream busy for about ms milliseconds (the GPU test of the
 * timeout path: a collective queued behind it cannot finish in time). */
dt_status dt_comm_nccl_test_stall(int ms, void *stream);

#ifdef __cplusplus
}
#endif

#endif
