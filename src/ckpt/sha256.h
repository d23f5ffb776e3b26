/* SHA-256 (FIPS 180-4), streaming. Used for the per-tensor digests that checkpoint state
 * files record and that `ckpt verify` and load recompute. */
#ifndef DT_CKPT_SHA256_H
#define DT_CKPT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DT_SHA256_LEN 32

typedef struct dt_sha256 {
    uint32_t h[8];       /* chaining state */
    uint64_t nbytes;     /* message length so far */
    uint8_t block[64];   /* partial block */
    size_t nblock;       /* bytes in block */
} dt_sha256;

void dt_sha256_init(dt_sha256 *s);
void dt_sha256_update(dt_sha256 *s, const void *data, size_t n);
/* Writes the 32-byte digest. The context must be re-initialised before reuse. */
void dt_sha256_final(dt_sha256 *s, uint8_t out[DT_SHA256_LEN]);
/* One-shot digest of a buffer. */
void dt_sha256_buf(const void *data, size_t n, uint8_t out[DT_SHA256_LEN]);
/* Lower-case hex of a digest: 64 characters plus NUL. */
void dt_sha256_hex(const uint8_t d[DT_SHA256_LEN], char out[2 * DT_SHA256_LEN + 1]);

#endif
