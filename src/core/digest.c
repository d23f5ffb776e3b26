/* XXH64 and the chunk-tree digest (see digest.h); the hash itself is core/xxh64.h. */
#include "core/digest.h"

#include "core/xxh64.h"

#include <stdlib.h>

uint64_t dt_xxh64(const void *p, size_t n, uint64_t seed) { return dt_xxh64_inline(p, n, seed); }

uint64_t dt_digest_tree(const void *p, size_t n) {
    if (n <= DT_DIGEST_CHUNK) return dt_xxh64_inline(p, n, 0);
    size_t nchunks = (n + DT_DIGEST_CHUNK - 1) / DT_DIGEST_CHUNK;
    uint64_t *d = malloc(nchunks * sizeof *d);
    if (!d) return 0; /* out of memory: the caller's trace records a zero digest */
    const unsigned char *b = p;
    for (size_t i = 0; i < nchunks; i++) {
        size_t len = i + 1 < nchunks ? DT_DIGEST_CHUNK : n - i * DT_DIGEST_CHUNK;
        d[i] = dt_xxh64_inline(b + i * DT_DIGEST_CHUNK, len, 0);
    }
    /* the chunk digests, as little-endian bytes, digested the same way */
    uint64_t r = dt_digest_tree(d, nchunks * sizeof *d);
    free(d);
    return r;
}
