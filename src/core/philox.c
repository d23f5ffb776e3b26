/* Host-only part of the counter-based RNG (see philox.h): the Box–Muller normal, which
 * needs libm. The integer generator itself is inline in philox.h so CUDA can share it. */
#include "core/philox.h"

#include <math.h>

float dt_rng_normal(uint64_t seed, uint32_t purpose, uint32_t step, uint32_t layer,
                    uint64_t element) {
    uint32_t a = dt_rng_u32(seed, purpose, step, layer, 2 * element);
    uint32_t b = dt_rng_u32(seed, purpose, step, layer, 2 * element + 1);
    /* u1 excludes 0 so the log is finite; both are exact in double (33 bits at most). */
    double u1 = ((double)a + 1.0) * 0x1p-32;
    double u2 = (double)b * 0x1p-32;
    const double two_pi = 6.283185307179586476925286766559;
    double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
    return (float)z;
}
