/* 64-bit content digest: XXH64, implemented here from its published specification.
 *
 * Why XXH64: fingerprint tracing (DESIGN §6) hashes every traced tensor at every traced
 * op, so the digest must run near memory bandwidth; XXH64 does (four independent 64-bit
 * lanes, no tables), and it avalanches well, so any flipped bit changes about half of the
 * output bits and a one-ulp difference cannot hide. It is not cryptographic and need not
 * be: nobody forges training tensors. Two different tensors collide with probability about
 * 2^-64 per comparison, so a digest *mismatch* proves the bytes differ and a *match* is
 * strong evidence, not proof, that they are equal; confirm a match that matters with a
 * byte comparison. It is a published, frozen algorithm with known-answer vectors, so trace
 * files written by different builds stay comparable.
 *
 * Also used for the record checksums of trace files (src/trace/format.h). */
#ifndef DT_CORE_DIGEST_H
#define DT_CORE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* XXH64 of n bytes at p with the given seed (0 for the canonical digest). p may be NULL
 * when n == 0. The result does not depend on the host's alignment or byte order: input
 * words are read little-endian, as the specification defines. */
uint64_t dt_xxh64(const void *p, size_t n, uint64_t seed);

/* The chunk-tree digest, for buffers a GPU digests in parallel (src/trace/digest_cuda.h):
 * up to DT_DIGEST_CHUNK bytes it is XXH64 (seed 0); above, the buffer is cut into
 * DT_DIGEST_CHUNK-byte chunks (the last one shorter), each chunk is XXH64'd, and the array
 * of chunk digests (little-endian 64-bit words) is digested by the same rule. This is the
 * host reference of the device digest; both give the same value for the same bytes. */
#define DT_DIGEST_CHUNK 4096
uint64_t dt_digest_tree(const void *p, size_t n);

#endif
