/* Tracing device tensors (DESIGN §6, issue 5): the glue between the trace session
 * (trace.h), the device digests (digest_cuda.h) and fault injection (inject.h) for the CUDA
 * backend. A hook site collects its tensors as device pointers in a dt_gtrace_set; begin and
 * end digest them on the GPU, on the producer's stream (so a digest never reads a buffer
 * before the op that wrote it finished), and hand the digests to the trace as precomputed
 * values: the host never reads device memory.
 *
 *     dt_trace_op *h = NULL;
 *     if (dt_trace_on(DT_TRACE_OP)) {
 *         dt_gtrace_set in = {};
 *         dt_gtrace_add(&in, "x", x_dev, DT_DT_BF16, N, C);
 *         TRY(dt_gtrace_begin(&h, DT_TRACE_OP, DT_PHASE_FWD, "gelu_fwd", NULL, &in, s));
 *     }
 *     ... launch the op on s ...
 *     TRY(dt_gtrace_inject("gelu_fwd", step, y_dev, n, 2, s));
 *     if (h) { dt_gtrace_set out = {}; dt_gtrace_add(&out, "y", ...); TRY(dt_gtrace_end(h, &out, s)); }
 *
 * Work a stream other than s produced (side-stream reductions) must be joined into s
 * before begin/end. Each digest synchronises s: tracing trades speed for exactness, and
 * costs nothing when it is off (the caller's dt_trace_on test). */
#ifndef DT_TRACE_TRACE_CUDA_H
#define DT_TRACE_TRACE_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "trace/trace.h"

/* Tensors of one side (inputs or outputs) of an event; at most one order-sensitive one. */
#define DT_GTRACE_MAX 32
typedef struct dt_gtrace_set {
    dt_tensor_ref r[DT_GTRACE_MAX];
    uint64_t d[DT_GTRACE_MAX];
    uint64_t rows[1 + DT_TRACE_MAX_ROW_DIGESTS]; /* the order-sensitive tensor's digests */
    int n, overflow, nrows_used;
} dt_gtrace_set;

/* Appends a (rows, cols) device tensor; cols == 0 or rows == 0 gives an empty one. The
 * name is kept by pointer and must outlive the event. A set that is full records the
 * overflow, and begin/end then fail (a hook site with too many tensors is a bug). */
void dt_gtrace_add(dt_gtrace_set *s, const char *name, const void *dev, int dtype, int64_t rows,
                   int64_t cols);
/* As dt_gtrace_add, for an order-sensitive tensor (per-row/chunk digests, trace.h). */
void dt_gtrace_add_rows(dt_gtrace_set *s, const char *name, const void *dev, int dtype,
                        int64_t rows, int64_t cols);

/* Digests the set on stream st and opens the event (dt_trace_begin). *h is NULL when
 * `level` is not captured now. */
dt_status dt_gtrace_begin(dt_trace_op **h, int level, int phase, const char *op,
                          const char *variant, dt_gtrace_set *in, cudaStream_t st);
/* Digests the outputs on st and writes the event (dt_trace_end). h may be NULL. */
dt_status dt_gtrace_end(dt_trace_op *h, dt_gtrace_set *out, cudaStream_t st);
/* Digests every tensor of the set on st (fills the refs' precomputed digests). */
dt_status dt_gtrace_digest(dt_gtrace_set *s, cudaStream_t st);

/* --inject-nondeterminism on the device: when dt_inject_should(op, step), flips the lowest
 * bit of every element (elem_size 2: bf16, 4: fp32, 8: fp64) of the n elements at dev, on
 * stream st, after the op that wrote them. */
dt_status dt_gtrace_inject(const char *op, int64_t step, void *dev, size_t n, int elem_size,
                           cudaStream_t st);
/* The flip itself (also used by tests). */
dt_status dt_cu_flip_lsb(void *dev, size_t n, int elem_size, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
