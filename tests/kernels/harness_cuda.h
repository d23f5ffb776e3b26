/* The harness's CUDA backend (tests/kernels/harness_cuda.cu): registers DT_KH_CUDA with
 * the harness (kernels/harness.h) so a case's replays run on device buffers, and owns the
 * GPU contention: a non-blocking side stream running large bf16 cuBLASLt GEMMs (its own
 * handle and workspace) that the harness queues before every replay, so they run
 * concurrently with the op under test and take SMs from it.
 * Linked into the GPU test binaries only (built by `make cuda`, compiled in CI by
 * `make cuda-objs`). Plain C interface. */
#ifndef DT_TESTS_KERNELS_HARNESS_CUDA_H
#define DT_TESTS_KERNELS_HARNESS_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

/* Side-stream GEMM size of one contention unit (n x n x n, bf16, fp32 accumulate). */
#define DT_KH_CUDA_SIDE_N 4096

/* Creates the side stream, its cuBLASLt handle and operands, and registers DT_KH_CUDA.
 * Returns DT_OK, or a status naming what failed (no CUDA device, out of memory). */
dt_status dt_kh_cuda_init(void);
/* Unregisters DT_KH_CUDA and frees what init made. */
void dt_kh_cuda_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
