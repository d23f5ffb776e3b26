/* Device-side digests for tracing the CUDA backend (DESIGN §6): the chunk-tree digest of
 * core/digest.h (dt_digest_tree) computed on the GPU, so a traced device tensor is never
 * copied to the host. One thread digests one DT_DIGEST_CHUNK-byte chunk with the same XXH64
 * code the host uses (core/xxh64.h); levels repeat over the chunk digests until one value
 * is left. Every value is a fixed function of the bytes: no atomics, no reduction whose
 * order could vary. The work is queued on the producer's stream, so the digest reads the
 * buffer only after the op that wrote it; the 8-byte result is copied back asynchronously
 * into pinned memory and read after the stream is synchronised (once for a whole batch). */
#ifndef DT_TRACE_DIGEST_CUDA_H
#define DT_TRACE_DIGEST_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

/* Digests n bytes of device memory at dev on stream s; *out (host) holds the value when
 * the call returns (it synchronises s). Scratch memory is owned by this module and grows
 * as needed; dt_cu_digest_release frees it. */
dt_status dt_cu_digest_tree(const void *dev, size_t n, cudaStream_t s, uint64_t *out);
/* count digests (buffer i: n[i] bytes at dev[i]) queued on s with one synchronisation at
 * the end; out[i] (host) = dt_cu_digest_tree of buffer i. */
dt_status dt_cu_digest_batch(const void *const *dev, const size_t *n, size_t count, cudaStream_t s,
                             uint64_t *out);
/* The (pointer, size) of each row chunk of an order-sensitive tensor: rows of row_bytes
 * each, `per` rows a chunk (dt_trace_row_chunks), nchunks chunks; digest them with
 * dt_cu_digest_batch. */
void dt_cu_digest_row_pieces(const void *dev, size_t row_bytes, int64_t rows, int64_t per,
                             int64_t nchunks, const void **ptrs, size_t *sizes);
void dt_cu_digest_release(void);

#ifdef __cplusplus
}
#endif

#endif
