/* Philox4x32-10 against the Random123 known-answer vectors (kat_vectors, the three
 * "philox4x32 10" lines), and the keyed helpers: pure functions of their tuple, each
 * field of the tuple selects a different stream, uniform/normal in range with the right
 * moments. */
#include "core/philox.h"
#include "detrain/detrain.h"
#include "dt_test.h"

static void test_known_answers(void) {
    static const struct { uint32_t ctr[4], key[2], want[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        dt_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            CHECKF(out[j] == kat[i].want[j], "vector %zu word %d: got %08x want %08x", i, j,
                   out[j], kat[i].want[j]);
    }
}

/* The documented mapping: dt_rng_u32 is word (element & 3) of philox(ctr, key). */
static void test_mapping(void) {
    uint64_t seed = 0x0123456789abcdefull, element = (0x00abcdef12345678ull << 2) | 2;
    uint32_t key[2] = {0x89abcdefu, 0x01234567u};
    uint32_t ctr[4] = {0x12345678u, 0x00abcdefu | (7u << 24), 11u, 13u};
    uint32_t out[4];
    dt_philox4x32_10(ctr, key, out);
    CHECK(dt_rng_u32(seed, 7, 11, 13, element) == out[2]);
    uint32_t blk[4];
    dt_rng_block(seed, 7, 11, 13, element >> 2, blk);
    CHECK(!memcmp(blk, out, sizeof out));
}

/* Same tuple, same value, regardless of call order or what was drawn before. */
static void test_pure(void) {
    enum { N = 257 };
    uint32_t fwd[N], bwd[N];
    float uf[N], ub[N], nf[N], nb[N];
    for (int i = 0; i < N; i++) {
        fwd[i] = dt_rng_u32(42, DT_RNG_INIT, 3, 1, (uint64_t)i);
        uf[i] = dt_rng_uniform(42, DT_RNG_DROPOUT_HIDDEN, 3, 1, (uint64_t)i);
        nf[i] = dt_rng_normal(42, DT_RNG_INIT, 0, 5, (uint64_t)i);
    }
    for (int i = N - 1; i >= 0; i--) {
        bwd[i] = dt_rng_u32(42, DT_RNG_INIT, 3, 1, (uint64_t)i);
        ub[i] = dt_rng_uniform(42, DT_RNG_DROPOUT_HIDDEN, 3, 1, (uint64_t)i);
        nb[i] = dt_rng_normal(42, DT_RNG_INIT, 0, 5, (uint64_t)i);
    }
    CHECK(!memcmp(fwd, bwd, sizeof fwd));
    CHECK(!memcmp(uf, ub, sizeof uf));
    CHECK(!memcmp(nf, nb, sizeof nf));
    /* pinned values: a change to the mapping or the formula is caught here */
    CHECKF(fwd[0] == 0xdbdbe5b3u, "%08x", fwd[0]);
    uint32_t zb, ubits;
    memcpy(&zb, &nf[3], 4);
    memcpy(&ubits, &uf[9], 4);
    CHECKF(zb == 0x3ec4486eu, "normal bits %08x", zb);
    CHECKF(ubits == 0x3d7d8d70u, "uniform bits %08x", ubits);
}

/* Changing any one field of the tuple gives a different stream. */
static void test_fields_select_streams(void) {
    enum { N = 64 };
    static const struct { uint64_t seed; uint32_t purpose, step, layer; uint64_t off; } t[] = {
        {1, DT_RNG_INIT, 0, 0, 0},
        {2, DT_RNG_INIT, 0, 0, 0},
        {1ull << 32 | 1, DT_RNG_INIT, 0, 0, 0},
        {1, DT_RNG_DROPOUT_HIDDEN, 0, 0, 0},
        {1, DT_RNG_DROPOUT_ATTN, 0, 0, 0},
        {1, DT_RNG_DATA_SHUFFLE, 0, 0, 0},
        {1, DT_RNG_INIT, 1, 0, 0},
        {1, DT_RNG_INIT, 0, 1, 0},
        {1, DT_RNG_INIT, 0, 0, N},
        {1, DT_RNG_INIT, 0, 0, 1ull << 34}, /* block high bits, below the purpose byte */
    };
    enum { S = sizeof t / sizeof t[0] };
    static uint32_t s[S][N];
    for (int k = 0; k < S; k++)
        for (int i = 0; i < N; i++)
            s[k][i] = dt_rng_u32(t[k].seed, t[k].purpose, t[k].step, t[k].layer, t[k].off + (uint64_t)i);
    for (int a = 0; a < S; a++)
        for (int b = a + 1; b < S; b++) {
            int same = 0;
            for (int i = 0; i < N; i++) same += s[a][i] == s[b][i];
            CHECKF(same <= 1, "streams %d and %d share %d of %d words", a, b, same, N);
        }
}

static void test_uniform_and_normal(void) {
    enum { N = 200000 };
    double su = 0, sn = 0, sn2 = 0;
    float umin = 1, umax = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float u = dt_rng_uniform(7, DT_RNG_DROPOUT_ATTN, 1, 2, (uint64_t)i);
        if (!(u >= 0.0f && u < 1.0f)) bad++;
        /* exactly representable as k * 2^-24 */
        if ((float)(uint32_t)(u * 0x1p24f) * 0x1p-24f != u) bad++;
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
        su += u;
        float z = dt_rng_normal(7, DT_RNG_INIT, 0, 0, (uint64_t)i);
        if (!isfinite(z)) bad++;
        sn += z;
        sn2 += (double)z * z;
    }
    CHECK(bad == 0);
    CHECK(umin < 1e-4f && umax > 1.0f - 1e-4f);
    /* mean of U[0,1) is 1/2 with sd 0.29/sqrt(N) = 6.5e-4; 6 sd tolerance */
    CHECKF(fabs(su / N - 0.5) < 4e-3, "uniform mean %g", su / N);
    double mean = sn / N, var = sn2 / N - mean * mean;
    /* N(0,1): sd of the mean 2.2e-3, of the variance 3.2e-3; about 6 sd tolerance */
    CHECKF(fabs(mean) < 0.015, "normal mean %g", mean);
    CHECKF(fabs(var - 1.0) < 0.02, "normal variance %g", var);
}

int main(void) {
    RUN(test_known_answers);
    RUN(test_mapping);
    RUN(test_pure);
    RUN(test_fields_select_streams);
    RUN(test_uniform_and_normal);
    return dt_test_report();
}
