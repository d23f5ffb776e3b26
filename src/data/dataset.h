/* The training data loader: token sources (the built-in corpus or llm.c shards) cut into
 * windows, a seeded per-epoch shuffle, a fixed-order validation split, and a cursor that
 * resumes exactly.
 *
 * Windows. Each source (shard) is cut, from its start, into non-overlapping windows of
 * T+1 tokens; a shard's tail shorter than T+1 is unused (windows never span shards).
 * Windows are numbered globally in source order (shards in the order given; a glob's
 * matches sorted by byte value). Window w gives inputs = tokens[0..T) and
 * targets = tokens[1..T+1).
 *
 * Split. With W windows, the last V = max(1, floor(W * val_fraction)) windows are the
 * validation split (V = 0 when val_fraction == 0); windows 0..W-V-1 are the training split.
 *
 * Training order. Epoch e visits every training window once, in the permutation
 *   perm = identity; for i = N-1 down to 1:
 *     r = u32(2i) << 32 | u32(2i+1),  j = r mod (i+1),  swap(perm[i], perm[j])
 * where u32(k) = dt_rng_u32(seed, DT_RNG_DATA_SHUFFLE, step = (uint32)e,
 * layer = (uint32)(e >> 32), element = k). It depends only on (seed, e, N): no hidden
 * state. A batch takes the next B windows of the permutation; at the end of an epoch it
 * continues with the next epoch's permutation (a batch may straddle two epochs).
 *
 * Cursor. (epoch, position): the next window drawn is perm_epoch[position]. Saving the
 * cursor after step k and setting it on a fresh dataset replays exactly the same batches.
 *
 * Validation batches take windows in order V0, V1, ... and wrap around; val_reset goes
 * back to the first one.
 *
 * Ownership: dt_dataset_open maps the shards (or generates the corpus) and allocates the
 * permutation; dt_dataset_free releases everything. Not thread-safe. */
#ifndef DT_DATA_DATASET_H
#define DT_DATA_DATASET_H

#include "detrain/detrain.h"

#include <stdint.h>

typedef struct dt_dataset dt_dataset;

typedef struct dt_data_cursor {
    uint64_t epoch;    /* epochs completed */
    uint64_t position; /* windows of this epoch already drawn, in [0, train windows) */
} dt_data_cursor;

/* Opens a dataset.
 *   data_path    NULL or "" (or "builtin"): the built-in corpus (needs vocab_size >= 256);
 *                else a shard file, a glob ("data/train_*.bin"), or a comma-separated list
 *                of files and globs.
 *   vocab_size   every token must be < vocab_size (1..65536); checked at open.
 *   seed         shuffle seed.
 *   val_fraction in [0, 0.5].
 *   B, T         batch size and sequence length (>= 1).
 * Fails (naming the input) when a pattern matches nothing, a shard is malformed, or the
 * data holds fewer than B training windows. Starts at cursor {0, 0}, val at window 0. */
dt_status dt_dataset_open(dt_dataset **out, const char *data_path, int vocab_size,
                          uint64_t seed, float val_fraction, int B, int T);
/* As dt_dataset_open, or (uniform) over 4M synthetic tokens drawn uniformly over the
 * vocabulary, keyed by the seed (data_path must then be NULL). */
dt_status dt_dataset_open_source(dt_dataset **out, const char *data_path, int uniform, int vocab_size,
                                 uint64_t seed, float val_fraction, int B, int T);
void dt_dataset_free(dt_dataset *ds);

/* Fills inputs[B*T] and targets[B*T] (row b = one window) with the next training batch
 * and advances the cursor by B windows. */
dt_status dt_dataset_next_train(dt_dataset *ds, int *inputs, int *targets);

/* Advances the cursor by n training windows without reading them, into the next epochs
 * as needed (the same cursor as reading them would leave). Data parallel: each rank reads
 * its own micro-batches of the global order and skips the other ranks' (dist/dp.h). */
void dt_dataset_skip_train(dt_dataset *ds, uint64_t n);

/* The cursor before the next training batch. */
dt_data_cursor dt_dataset_get_cursor(const dt_dataset *ds);
/* Moves to a saved cursor (recomputes that epoch's permutation). Fails with DT_EINVAL when
 * position >= train windows (e.g. a checkpoint made on different data or T). */
dt_status dt_dataset_set_cursor(dt_dataset *ds, dt_data_cursor c);

/* Validation: back to the first validation window, and the next B windows in order
 * (wrapping). next_val fails with DT_ESTATE when there is no validation split. */
void dt_dataset_val_reset(dt_dataset *ds);
dt_status dt_dataset_next_val(dt_dataset *ds, int *inputs, int *targets);

uint64_t dt_dataset_train_windows(const dt_dataset *ds);
uint64_t dt_dataset_val_windows(const dt_dataset *ds);
/* Tokens in all sources (including unused shard tails). */
uint64_t dt_dataset_tokens(const dt_dataset *ds);
/* Number of validation batches that cover the split once: ceil(V / B). */
uint64_t dt_dataset_val_batches(const dt_dataset *ds);
/* A one-line description for logs: "built-in corpus, 1048576 tokens, ..." (owned by ds). */
const char *dt_dataset_describe(const dt_dataset *ds);

/* The permutation of n training windows for (seed, epoch), as defined above; written to
 * perm[n]. Exposed for tests and tools. */
void dt_dataset_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);

#endif
