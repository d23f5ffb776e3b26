/* The chunk-tree digest (core/digest.h), the host reference of the GPU digest
 * (trace/digest_cuda.cu): equal to XXH64 up to one chunk; above, XXH64 of the chunk
 * digests, recursively; a one-bit change anywhere changes it; the chunk boundary is
 * part of the definition (a buffer one byte longer is a different tree). */
#include "core/digest.h"
#include "dt_test.h"

static void fill(unsigned char *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

static void test_small_is_xxh64(void) {
    unsigned char b[DT_DIGEST_CHUNK];
    fill(b, sizeof b, 1);
    const size_t sizes[] = {0, 1, 31, 32, 100, 4095, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK(dt_digest_tree(b, sizes[i]) == dt_xxh64(b, sizes[i], 0));
}

static void test_definition(void) {
    /* two levels: 600 chunks (the last one short) -> 4800 bytes of digests -> 2 chunks */
    size_t n = 599 * (size_t)DT_DIGEST_CHUNK + 123;
    unsigned char *b = malloc(n);
    fill(b, n, 7);
    uint64_t d1[600], d2[2];
    for (size_t i = 0; i < 600; i++)
        d1[i] = dt_xxh64(b + i * DT_DIGEST_CHUNK, i < 599 ? DT_DIGEST_CHUNK : 123, 0);
    d2[0] = dt_xxh64(d1, 512 * 8, 0);
    d2[1] = dt_xxh64(d1 + 512, 88 * 8, 0);
    uint64_t want = dt_xxh64(d2, sizeof d2, 0);
    CHECK(dt_digest_tree(b, n) == want);
    CHECK(dt_digest_tree(b, n) != dt_xxh64(b, n, 0)); /* a different function above a chunk */
    /* any flipped bit changes it */
    for (size_t pos = 0; pos < n; pos += n / 7) {
        b[pos] ^= 0x10;
        CHECK(dt_digest_tree(b, n) != want);
        b[pos] ^= 0x10;
    }
    CHECK(dt_digest_tree(b, n) == want);
    CHECK(dt_digest_tree(b, n - 1) != want);
    free(b);
}

int main(void) {
    RUN(test_small_is_xxh64);
    RUN(test_definition);
    return dt_test_report();
}
