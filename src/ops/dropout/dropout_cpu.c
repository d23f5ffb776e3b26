/* CPU dropout (see dropout.h). */
#include "ops/dropout/dropout.h"

#include "core/philox.h"

float dt_dropout_factor(const dt_dropout *d, uint32_t purpose, uint32_t layer, uint64_t i) {
    return dt_rng_uniform(d->seed, purpose, d->step, layer, i) >= d->p ? 1.0f / (1.0f - d->p) : 0.0f;
}

void dt_dropout_apply(float *x, size_t n, const dt_dropout *d, uint32_t purpose, uint32_t layer) {
    if (!dt_dropout_on(d)) return;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= dt_dropout_factor(d, purpose, layer, i);
}
