/* CPU AdamW update (see adamw.h): elementwise under `omp parallel for`, one writer per
 * element and no reduction, so the thread schedule cannot change a bit. */
#include "ops/adamw/adamw.h"

#include <math.h>

void dt_adamw_update(float *param, const float *grad, float *m, float *v, size_t n, const dt_adamw_hparams *h) {
    const float lr = h->lr, beta1 = h->beta1, beta2 = h->beta2, eps = h->eps;
    const float bc1 = h->bc1, bc2 = h->bc2, clip = h->clip, wd = h->wd;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < n; k++) {
        float gk = grad[k] * clip;
        m[k] = beta1 * m[k] + (1.0f - beta1) * gk;
        v[k] = beta2 * v[k] + (1.0f - beta2) * gk * gk;
        float mhat = m[k] / bc1, vhat = v[k] / bc2;
        param[k] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * param[k]);
    }
}
