/* The fuzz drivers' random source: xorshift64*, a fixed sequence per seed, so a failing
 * mutation is replayed by rerunning with the same seed. Header-only: each driver is built
 * standalone by its shell test. */
#ifndef DT_FUZZ_RNG_H
#define DT_FUZZ_RNG_H

#include <stddef.h>
#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
static inline size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

#endif
