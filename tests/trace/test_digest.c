/* XXH64 (src/core/digest.c) against published known-answer values, plus the properties
 * tracing relies on: alignment independence and avalanche on a one-bit change.
 * Vectors: the empty input and short strings with seed 0 (published in several xxHash
 * ports' test suites), and prefixes of the ASCII run "0123456789:;<=>?@A..." with seeds 0
 * and 0x1234567890abcdef, covering every code path (tail only, exactly one 32-byte stripe,
 * stripes + 8/4/1-byte tails). All were also cross-checked against the reference library. */
#include "core/digest.h"
#include "dt_test.h"

#include <stdint.h>

static void test_strings_seed0(void) {
    static const struct { const char *s; uint64_t h; } v[] = {
        {"", 0xef46db3751d8e999ULL},     {"a", 0xd24ec4f1a98c6e5bULL},
        {"ab", 0x65f708ca92d04a61ULL},   {"abc", 0x44bc2cf5ad770999ULL},
        {"ABC", 0xe66ae7354fcfee98ULL},  {"foo", 0x33bf00a859c4ba3fULL},
        {"xxhash", 0x32dd38952c4bc720ULL},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint64_t h = dt_xxh64(v[i].s, strlen(v[i].s), 0);
        CHECKF(h == v[i].h, "'%s': got %016llx want %016llx", v[i].s, (unsigned long long)h,
               (unsigned long long)v[i].h);
    }
    CHECK(dt_xxh64(NULL, 0, 0) == 0xef46db3751d8e999ULL);
}

static void test_prefixes_two_seeds(void) {
    static const struct { int len; uint64_t h0, hs; } v[] = {
        {0, 0xef46db3751d8e999ULL, 0xa2f5c44d0f46c872ULL},
        {1, 0x633457081244afecULL, 0xf47ebf7f5cb6795bULL},
        {3, 0x1c2dcb4b9024d73dULL, 0x8516f202e563cd06ULL},
        {4, 0x4c33072b45647dcbULL, 0xe19fff0227e3b861ULL},
        {7, 0x97ee4fe4a0ff4dfaULL, 0x281fef0a47387bf4ULL},
        {8, 0xe4ba22a49ad89d3fULL, 0x5981b4a4e0a07d38ULL},
        {9, 0x43ecc9248bc07d20ULL, 0xc2fc855460180ba2ULL},
        {12, 0x884e66bb5a00411dULL, 0x9cc27b0db966c216ULL},
        {15, 0x7a85916d8cac500aULL, 0x021c3690fce15b7dULL},
        {16, 0x6ff4eb62bcec6586ULL, 0xc16a47e0b09708c8ULL},
        {31, 0xc506e23012915790ULL, 0xa2c0eddf74983bfeULL},
        {32, 0x96ee2fa935fdd556ULL, 0x1396bc2a00938b77ULL},
        {33, 0xa5cdc6940c6fde9eULL, 0x65cd9ed37dff8753ULL},
        {63, 0x7daf8f9fdbd4e518ULL, 0x5c0dc6efb801d4fbULL},
        {64, 0x3fe627fabdb30aeaULL, 0xd2ff1b3750571f15ULL},
        {65, 0xeddce6ec01f7e595ULL, 0xb0aa81bc38df17b9ULL},
    };
    char s[80];
    for (int i = 0; i < 80; i++) s[i] = (char)('0' + i);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint64_t h0 = dt_xxh64(s, (size_t)v[i].len, 0);
        uint64_t hs = dt_xxh64(s, (size_t)v[i].len, 0x1234567890abcdefULL);
        CHECKF(h0 == v[i].h0, "len %d seed 0: got %016llx", v[i].len, (unsigned long long)h0);
        CHECKF(hs == v[i].hs, "len %d seeded: got %016llx", v[i].len, (unsigned long long)hs);
    }
}

static void test_alignment_independent(void) {
    unsigned char buf[300], shifted[308];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 37 + 11);
    for (int off = 1; off < 8; off++) {
        memcpy(shifted + off, buf, sizeof buf);
        for (size_t n = 0; n <= sizeof buf; n += 23)
            CHECK(dt_xxh64(shifted + off, n, 7) == dt_xxh64(buf, n, 7));
    }
}

static int popcount64(uint64_t x) { int c = 0; while (x) { c += (int)(x & 1); x >>= 1; } return c; }

/* Flipping any single input bit must change the digest, and on average about half of the
 * output bits (avalanche). Lowest-mantissa-bit flips of floats are what tracing hunts. */
static void test_avalanche(void) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i * 0.37f - 5.0f;
    uint64_t h = dt_xxh64(x, sizeof x, 0);
    long total = 0;
    int flips = 0;
    for (int bit = 0; bit < 64 * 32; bit += 7) {
        unsigned char *p = (unsigned char *)x;
        p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        uint64_t g = dt_xxh64(x, sizeof x, 0);
        p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        int d = popcount64(g ^ h);
        CHECKF(d > 0, "bit %d flip not seen", bit);
        total += d;
        flips++;
    }
    double mean = (double)total / flips;
    CHECKF(mean > 28.0 && mean < 36.0, "mean changed bits %.2f, expected about 32", mean);
    CHECK(dt_xxh64(x, sizeof x, 0) == h);
}

int main(void) {
    RUN(test_strings_seed0);
    RUN(test_prefixes_two_seeds);
    RUN(test_alignment_independent);
    RUN(test_avalanche);
    return dt_test_report();
}
