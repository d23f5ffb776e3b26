/* Dropout with the counter-based RNG: element i of a tensor is kept when
 * dt_rng_uniform(seed, purpose, step, layer, i) >= p, and kept elements are scaled by
 * 1/(1-p). The mask is a pure function of (seed, purpose, step, layer, i): the backward
 * pass recomputes it instead of storing it, and a resumed run draws the same masks.
 * One path, deterministic by nature (no chooser): elementwise, one writer per element. On
 * the GPU every kernel that fuses dropout draws the same word (cuda_common.cuh's
 * dt_cu_drop_factor); dropout_cuda.h has the standalone masked copy. */
#ifndef DT_OPS_DROPOUT_H
#define DT_OPS_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_dropout {
    float p;         /* drop probability; 0 disables */
    uint64_t seed;
    uint32_t step;   /* global micro-batch counter */
} dt_dropout;

/* The factor for element i: 0 (dropped) or 1/(1-p). */
float dt_dropout_factor(const dt_dropout *d, uint32_t purpose, uint32_t layer, uint64_t i);
/* x[i] *= factor(i) for i in [0, n): the forward and the backward are the same call. */
void dt_dropout_apply(float *x, size_t n, const dt_dropout *d, uint32_t purpose, uint32_t layer);
/* 1 when d drops anything. */
static inline int dt_dropout_on(const dt_dropout *d) { return d && d->p > 0.0f; }

#endif
