/* XXH64 (see digest.h for why this hash). Written from the algorithm's specification:
 * four accumulator lanes consume 32-byte stripes, the lanes are merged, the tail is mixed
 * in 8, 4 and 1 bytes at a time, and a final avalanche spreads every input bit. */
#include "core/digest.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Little-endian loads, byte by byte: portable and alignment-free; compilers turn them into
 * single loads on little-endian hosts. */
static inline uint64_t load64(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}
static inline uint64_t load32(const unsigned char *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static inline uint64_t lane_round(uint64_t acc, uint64_t word) {
    acc += word * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static inline uint64_t merge_lane(uint64_t acc, uint64_t lane) {
    acc ^= lane_round(0, lane);
    return acc * P1 + P4;
}

uint64_t dt_xxh64(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = (const unsigned char *)data;
    const unsigned char *end = p + n;
    uint64_t acc;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char *limit = end - 32;
        do {
            v1 = lane_round(v1, load64(p));
            v2 = lane_round(v2, load64(p + 8));
            v3 = lane_round(v3, load64(p + 16));
            v4 = lane_round(v4, load64(p + 24));
            p += 32;
        } while (p <= limit);
        acc = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        acc = merge_lane(acc, v1);
        acc = merge_lane(acc, v2);
        acc = merge_lane(acc, v3);
        acc = merge_lane(acc, v4);
    } else {
        acc = seed + P5;
    }
    acc += (uint64_t)n;
    while (end - p >= 8) {
        acc ^= lane_round(0, load64(p));
        acc = rotl64(acc, 27) * P1 + P4;
        p += 8;
    }
    if (end - p >= 4) {
        acc ^= load32(p) * P1;
        acc = rotl64(acc, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        acc ^= (uint64_t)*p * P5;
        acc = rotl64(acc, 11) * P1;
        p++;
    }
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}
