/* Token shards in llm.c's format: a header of 256 little-endian int32
 *   [0] = 20240520 (magic), [1] = 1 (version: uint16 tokens), [2] = token count,
 *   [3..255] = 0
 * followed by exactly `count` little-endian uint16 tokens. Nothing else is accepted: a
 * wrong magic or version, a file size that does not match the count, or a token outside
 * the vocabulary is an error naming the file and the problem (DT_ECORRUPT).
 *
 * Ownership: dt_shard_open maps the file read-only; dt_shard_close unmaps and frees. */
#ifndef DT_DATA_SHARD_H
#define DT_DATA_SHARD_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_SHARD_MAGIC 20240520
#define DT_SHARD_VERSION 1
#define DT_SHARD_HEADER_INTS 256
#define DT_SHARD_HEADER_BYTES (DT_SHARD_HEADER_INTS * 4)
/* The header's count is an int32. */
#define DT_SHARD_MAX_TOKENS 2147483647ull

typedef struct dt_shard_header {
    int32_t magic;
    int32_t version;
    int32_t ntokens;
    uint64_t file_bytes; /* size of the file on disk */
} dt_shard_header;

typedef struct dt_shard {
    char *path;
    const uint16_t *tokens; /* ntokens tokens, valid until dt_shard_close */
    uint64_t ntokens;
    uint16_t max_token;     /* largest token present (0 when empty) */
    void *map;              /* the whole mapped file (NULL when empty) */
    size_t map_bytes;
} dt_shard;

/* Reads and checks only the header and the file size (magic, version, non-negative count,
 * size == 1024 + 2 * count). Cheap; does not read the tokens. */
dt_status dt_shard_read_header(const char *path, dt_shard_header *h);

/* Opens a shard: checks the header as above, maps the tokens, and checks every token is
 * < vocab_size (1 <= vocab_size <= 65536). On success *out owns the mapping. */
dt_status dt_shard_open(dt_shard **out, const char *path, int vocab_size);
void dt_shard_close(dt_shard *s);

/* Writes n tokens (n <= DT_SHARD_MAX_TOKENS) as a shard at `path`, atomically: a
 * temporary file in the same directory, fsync, rename over `path`, fsync the directory.
 * A crash leaves either the old file or the complete new one. */
dt_status dt_shard_write(const char *path, const uint16_t *tokens, uint64_t n);

#endif
