/* Synthetic metric series for the metrics tests: deterministic, non-round doubles, and on
 * request the special values a log must carry exactly (NaN with a payload, +-inf, -0.0, a
 * subnormal). Header-only so each test binary stays self-contained. */
#ifndef DT_TESTS_METRICS_SYNTH_H
#define DT_TESTS_METRICS_SYNTH_H

#include "core/json.h"
#include "metrics/metrics.h"

#include <math.h>

/* Step `step` of the series. special: steps 3..5 carry NaN/inf/-0.0/subnormal values.
 * wall_offset shifts only the wall-clock fields (a second "run" that was slower). */
static inline dt_step_metrics synth_step(int64_t step, int special, double wall_offset) {
    dt_step_metrics s = {0};
    double t = (double)step;
    s.step = step;
    s.loss = 10.0 / (t + 2.0) + 1.0 / 3.0;
    s.grad_norm = sqrt(t) * 0.1;
    s.param_norm = 100.0 + t / 7.0;
    s.num_zeros = step * 13 % 17;
    s.lr = 6e-4 * (t < 10 ? t / 10.0 : 1.0);
    s.consumed_samples = step * 8;
    s.consumed_tokens = step * 8 * 64;
    s.has_eval = step % 5 == 0;
    s.eval_loss = s.loss + 0.01 / t;
    s.n_aux = 1;
    s.aux[0].name = "moe_aux";
    s.aux[0].value = 0.01 / t;
    s.step_ms = 100.0 + t / 3.0 + wall_offset;
    s.tok_per_s = 512.0 * 1000.0 / s.step_ms;
    if (special && step == 3) {
        s.grad_norm = dt_f64_from_bits(0x7ff8000000000123ull); /* NaN with a payload */
        s.param_norm = -0.0;
        s.lr = INFINITY;
    }
    if (special && step == 4) {
        s.loss = -INFINITY;
        s.grad_norm = dt_f64_from_bits(0xfff0000000000001ull); /* signalling-pattern NaN */
        s.lr = 1e300;                                          /* overflows float32 */
    }
    if (special && step == 5) {
        s.param_norm = 4.9406564584124654e-324;                /* smallest subnormal */
        s.eval_loss = -1e-310;                                 /* subnormal, flushes in f32 */
    }
    return s;
}

#endif
