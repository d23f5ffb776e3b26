/* Causal multi-head self-attention on packed qkv.
 * Shapes: qkv (B,T,3C) holding [q | k | v] per token, head h in columns h*HS..h*HS+HS-1 of
 * each part; att (B,NH,T,T) softmax probabilities (upper triangle zero); out (B,T,C).
 * Scale 1/sqrt(HS). Work is done per (b,h) with blocked GEMMs that skip the masked half.
 * Attention dropout (drop != NULL, p > 0): out = dropout(att) @ v, the mask of element
 * (bh, t, j) drawn with purpose DT_RNG_DROPOUT_ATTN, layer `layer`, element bh*T*T + t*T + j;
 * att keeps the probabilities before dropout and backward recomputes the mask.
 *
 * Forward: each (b,h) is owned by one task: deterministic by nature.
 * Backward (DT_OP_ATTENTION_BWD), dqkv (B,T,3C) is overwritten:
 *  det  — one task per (b,h) computes dQ, dK, dV from the whole dS of that head: every
 *         output row has one owner and a fixed reduction order.
 *  fast — when B*NH is too small to keep the threads busy (B*NH < 2 * threads), the work
 *         of a head is split over key blocks, flash-attention style, and each key block
 *         adds its dQ contribution with atomics (unordered across key blocks). With enough
 *         heads it runs the det algorithm, which is then the fastest. */
#ifndef DT_OPS_ATTENTION_H
#define DT_OPS_ATTENTION_H

#include "ops/dropout.h"
#include "ops/op.h"

void dt_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *att,
                      const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd_det(float *dqkv, const float *dout, const float *qkv, const float *att,
                          int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd_fast(float *dqkv, const float *dout, const float *qkv, const float *att,
                           const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
/* The key-block path of the fast variant, callable directly by tests (always splits). */
void dt_attention_bwd_keyblocks(float *dqkv, const float *dout, const float *qkv,
                                const float *att, const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);

#endif
