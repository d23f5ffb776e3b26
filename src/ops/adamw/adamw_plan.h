/* Host-side plan of the fused multi-tensor AdamW launch (adamw_cuda.cu), in plain C so CI
 * tests it: how the update walks the parameter slab, one block a chunk. A function of the
 * tensors' sizes only. */
#ifndef DT_OPS_ADAMW_PLAN_H
#define DT_OPS_ADAMW_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>

/* Elements per chunk of the multi-tensor AdamW launch. */
#define DT_CU_ADAMW_CHUNK 65536

/* One chunk of the multi-tensor AdamW launch: elements [start, start + len) of the slab,
 * all in tensor `tensor`. */
typedef struct dt_cu_chunk {
    uint32_t tensor;
    uint32_t len;
    uint64_t start;
} dt_cu_chunk;
/* Cuts tensors (given by offsets[i], numel[i], i < ntensors, in slab order) into chunks of
 * at most chunk elements, never crossing a tensor boundary. Writes up to cap chunks;
 * returns the number needed (call with cap 0 to size). */
size_t dt_cu_adamw_chunks(const size_t *offsets, const size_t *numel, int ntensors,
                          size_t chunk, dt_cu_chunk *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
