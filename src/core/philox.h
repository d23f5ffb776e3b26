/* Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11) and the keyed helpers
 * every part of detrain draws from (weight init, dropout, data shuffling, the built-in
 * corpus).
 *
 * There is no generator state. A random word is a pure function of the 5-tuple
 * (seed, purpose, step, layer, element), so a resumed run recomputes exactly the numbers
 * the uninterrupted run drew, and a CUDA kernel computes the same word as the CPU.
 *
 * Mapping of the tuple onto Philox (fixed; changing it changes every run's numbers):
 *
 *   key[0] = seed bits  0..31          block = element >> 2    (element < 2^58)
 *   key[1] = seed bits 32..63          word  = element & 3
 *   ctr[0] = block bits 0..31
 *   ctr[1] = block bits 32..55 | purpose << 24     (purpose < 256)
 *   ctr[2] = step
 *   ctr[3] = layer
 *   dt_rng_u32(seed, purpose, step, layer, element) = philox(ctr, key)[word]
 *
 * So four consecutive elements share one Philox call: a kernel that needs four words
 * calls dt_rng_block once and gets elements 4b..4b+3. Different tuples never share a
 * counter (inside the stated ranges), so their streams are independent.
 *
 * The inline functions below are plain integer code usable from CUDA (.cu files get
 * __host__ __device__); dt_rng_normal uses libm in double and is host-only. */
#ifndef DT_CORE_PHILOX_H
#define DT_CORE_PHILOX_H

#include <stdint.h>

#include "core/hd.h"

/* What a random number is for; the `purpose` field of the tuple. Values are part of the
 * numerics: append new ones, never renumber. */
enum {
    DT_RNG_INIT = 1,           /* weight initialisation (element = flat parameter index) */
    DT_RNG_DROPOUT_HIDDEN = 2, /* residual / MLP dropout masks */
    DT_RNG_DROPOUT_ATTN = 3,   /* attention-probability dropout masks */
    DT_RNG_DATA_SHUFFLE = 4,   /* per-epoch window permutation (step/layer = epoch) */
    DT_RNG_CORPUS = 5,         /* built-in corpus generation */
    DT_RNG_UNIFORM_TOKENS = 6  /* synthetic tokens drawn uniformly (element = token index) */
};

/* Philox4x32 round constants (multipliers and Weyl key increments), from the paper. */
#define DT_PHILOX_M0 0xD2511F53u
#define DT_PHILOX_M1 0xCD9E8D57u
#define DT_PHILOX_W0 0x9E3779B9u
#define DT_PHILOX_W1 0xBB67AE85u

/* Philox4x32 with 10 rounds: out = philox(ctr, key). out may alias ctr. Matches the
 * Random123 known-answer vectors (tests/core/test_philox.c). */
static inline DT_HD void dt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                          uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) { /* the key schedule advances before every round but the first */
            k0 += DT_PHILOX_W0;
            k1 += DT_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)DT_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)DT_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four words of one counter block: elements 4*block .. 4*block+3 of the tuple's
 * stream (see the mapping above). block < 2^56. */
static inline DT_HD void dt_rng_block(uint64_t seed, uint32_t purpose, uint32_t step,
                                      uint32_t layer, uint64_t block, uint32_t out[4]) {
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t ctr[4] = {(uint32_t)block,
                       ((uint32_t)(block >> 32) & 0x00FFFFFFu) | ((purpose & 0xFFu) << 24),
                       step, layer};
    dt_philox4x32_10(ctr, key, out);
}

/* One uniformly distributed 32-bit word: element `element` of the tuple's stream. */
static inline DT_HD uint32_t dt_rng_u32(uint64_t seed, uint32_t purpose, uint32_t step,
                                        uint32_t layer, uint64_t element) {
    uint32_t w[4];
    dt_rng_block(seed, purpose, step, layer, element >> 2, w);
    return w[element & 3];
}

/* A uniform float in [0, 1) with 24 random mantissa bits: (u32 >> 8) * 2^-24, exact. */
static inline DT_HD float dt_rng_uniform(uint64_t seed, uint32_t purpose, uint32_t step,
                                         uint32_t layer, uint64_t element) {
    return (float)(dt_rng_u32(seed, purpose, step, layer, element) >> 8) * 0x1p-24f;
}

/* A standard normal float by Box–Muller, computed in double:
 *   a = u32(2*element), b = u32(2*element + 1)
 *   u1 = (a + 1) * 2^-32 in (0, 1],  u2 = b * 2^-32 in [0, 1)
 *   z  = sqrt(-2 ln u1) * cos(2 pi u2), rounded once to float.
 * It consumes words 2e and 2e+1 of the stream, so a purpose should draw either normals or
 * u32/uniforms, not both. element < 2^57. Host-only (libm). */
float dt_rng_normal(uint64_t seed, uint32_t purpose, uint32_t step, uint32_t layer,
                    uint64_t element);

#endif
