/* The built-in corpus: English-like text from a small probabilistic grammar (our own word
 * lists: people and animals doing things in places, with subject-verb agreement, past and
 * present tense, questions, dialogue and paragraphs), so `train` runs with no downloads
 * and a small model visibly learns (byte-level loss far below ln 256).
 *
 * Generated, not stored: every choice is dt_rng_u32(DT_CORPUS_SEED, DT_RNG_CORPUS, 0, 0, k)
 * for k = 0, 1, 2, ... reduced with integer arithmetic only, so the bytes are the same on
 * every machine and compiler. Tokens are the bytes (vocabulary 256). A digest of the text
 * is pinned in tests/data/test_corpus.c: any change to the grammar is a visible change. */
#ifndef DT_DATA_CORPUS_H
#define DT_DATA_CORPUS_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_CORPUS_BYTES 1048576u
#define DT_CORPUS_SEED 0x6465747261696e31ull /* "detrain1" */
#define DT_CORPUS_VOCAB 256

/* Fills buf[0..n) with the first n bytes of the corpus. The text is generated sentence by
 * sentence, so a shorter n gives a prefix of a longer one. n may exceed DT_CORPUS_BYTES
 * (the grammar goes on); the built-in dataset uses exactly DT_CORPUS_BYTES. */
void dt_corpus_fill(uint8_t *buf, size_t n);

/* Allocates the built-in corpus (DT_CORPUS_BYTES bytes) as uint16 tokens; the caller
 * frees *out with free(). */
dt_status dt_corpus_tokens(uint16_t **out, uint64_t *n);

#endif
