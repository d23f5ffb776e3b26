/* The host-side plan of the fused AdamW launch (see adamw_plan.h). Plain C, single-threaded. */
#include "ops/adamw/adamw_plan.h"

size_t dt_cu_adamw_chunks(const size_t *offsets, const size_t *numel, int ntensors,
                          size_t chunk, dt_cu_chunk *out, size_t cap) {
    size_t k = 0;
    for (int t = 0; t < ntensors; t++)
        for (size_t s = 0; s < numel[t]; s += chunk) {
            size_t len = numel[t] - s < chunk ? numel[t] - s : chunk;
            if (k < cap) {
                out[k].tensor = (uint32_t)t;
                out[k].len = (uint32_t)len;
                out[k].start = offsets[t] + s;
            }
            k++;
        }
    return k;
}
