/* XXH64, written from the algorithm's specification, as inline functions that compile for
 * the host and (under nvcc) for the device, so a GPU digest and its CPU reference are the
 * same code (core/digest.h says why this hash). Four accumulator lanes consume 32-byte
 * stripes, the lanes are merged, the tail is mixed in 8, 4 and 1 bytes at a time, and a
 * final avalanche spreads every input bit. */
#ifndef DT_CORE_XXH64_H
#define DT_CORE_XXH64_H

#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

#define DT_XXH_P1 0x9E3779B185EBCA87ULL
#define DT_XXH_P2 0xC2B2AE3D27D4EB4FULL
#define DT_XXH_P3 0x165667B19E3779F9ULL
#define DT_XXH_P4 0x85EBCA77C2B2AE63ULL
#define DT_XXH_P5 0x27D4EB2F165667C5ULL

static inline DT_HD uint64_t dt_xxh_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Little-endian loads, byte by byte: portable and alignment-free; compilers turn them into
 * single loads on little-endian hosts. */
static inline DT_HD uint64_t dt_xxh_load64(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}
/* The stripe loads: on the device, where nvcc keeps byte loads as byte loads, one 8-byte
 * load when the data is 8-byte aligned (the device is little-endian, so the value is the
 * same); on the host the byte form, which compilers already turn into one load. */
static inline DT_HD uint64_t dt_xxh_load64a(const unsigned char *p, int aligned) {
#ifdef __CUDA_ARCH__
    if (aligned) return *(const uint64_t *)(const void *)p;
#endif
    (void)aligned;
    return dt_xxh_load64(p);
}
static inline DT_HD uint64_t dt_xxh_load32(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static inline DT_HD uint64_t dt_xxh_round(uint64_t acc, uint64_t word) {
    acc += word * DT_XXH_P2;
    acc = dt_xxh_rotl64(acc, 31);
    return acc * DT_XXH_P1;
}

static inline DT_HD uint64_t dt_xxh_merge(uint64_t acc, uint64_t lane) {
    acc ^= dt_xxh_round(0, lane);
    return acc * DT_XXH_P1 + DT_XXH_P4;
}

static inline DT_HD uint64_t dt_xxh64_inline(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = (const unsigned char *)data;
    const unsigned char *end = p + n;
    const int aligned = ((uintptr_t)p & 7u) == 0;
    uint64_t acc;
    if (n >= 32) {
        uint64_t v1 = seed + DT_XXH_P1 + DT_XXH_P2, v2 = seed + DT_XXH_P2, v3 = seed, v4 = seed - DT_XXH_P1;
        const unsigned char *limit = end - 32;
        do {
            v1 = dt_xxh_round(v1, dt_xxh_load64a(p, aligned));
            v2 = dt_xxh_round(v2, dt_xxh_load64a(p + 8, aligned));
            v3 = dt_xxh_round(v3, dt_xxh_load64a(p + 16, aligned));
            v4 = dt_xxh_round(v4, dt_xxh_load64a(p + 24, aligned));
            p += 32;
        } while (p <= limit);
        acc = dt_xxh_rotl64(v1, 1) + dt_xxh_rotl64(v2, 7) + dt_xxh_rotl64(v3, 12) + dt_xxh_rotl64(v4, 18);
        acc = dt_xxh_merge(acc, v1);
        acc = dt_xxh_merge(acc, v2);
        acc = dt_xxh_merge(acc, v3);
        acc = dt_xxh_merge(acc, v4);
    } else {
        acc = seed + DT_XXH_P5;
    }
    acc += (uint64_t)n;
    while (end - p >= 8) {
        acc ^= dt_xxh_round(0, dt_xxh_load64a(p, aligned));
        acc = dt_xxh_rotl64(acc, 27) * DT_XXH_P1 + DT_XXH_P4;
        p += 8;
    }
    if (end - p >= 4) {
        acc ^= dt_xxh_load32(p) * DT_XXH_P1;
        acc = dt_xxh_rotl64(acc, 23) * DT_XXH_P2 + DT_XXH_P3;
        p += 4;
    }
    while (p < end) {
        acc ^= (uint64_t)*p * DT_XXH_P5;
        acc = dt_xxh_rotl64(acc, 11) * DT_XXH_P1;
        p++;
    }
    acc ^= acc >> 33;
    acc *= DT_XXH_P2;
    acc ^= acc >> 29;
    acc *= DT_XXH_P3;
    acc ^= acc >> 32;
    return acc;
}

#endif
