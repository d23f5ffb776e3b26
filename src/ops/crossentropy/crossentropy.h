/* Fused softmax cross-entropy over vocabulary chunks.
 * Shapes: logits (N,Vp) of which the first V columns are real; targets (N) in [0,V);
 * losses, lse (N). CPU: fp32 logits; CUDA (crossentropy_cuda.h): bf16 logits, overwritten
 * by dlogits (the backward fused into the forward), fp32 losses.
 * Per row one owner merges the running (max, sum) pairs in a fixed order: on the CPU the
 * row's thread over chunks of DT_CE_CHUNK columns in chunk order, on the GPU one block a row
 * (per-thread pairs in column order, merged by fixed butterflies): deterministic by nature.
 * The mean loss reduces over rows, a whole-buffer sum of the reduce family; its path
 * (DT_OP_CROSSENTROPY) is dt_crossentropy_choose:
 *  det  — CPU dt_sum_det, GPU dt_cu_reduce det: fixed chunks (blocks), fixed order.
 *  fast — CPU dt_sum_fast (OpenMP reduction), GPU dt_cu_reduce fast (atomics): unordered. */
#ifndef DT_OPS_CROSSENTROPY_H
#define DT_OPS_CROSSENTROPY_H

#include "ops/op.h"
#include "ops/reduce/reduce.h"

#define DT_CE_CHUNK 256

/* The mean loss's path now: dt_reduce_choose(DT_OP_CROSSENTROPY) (crossentropy_plan.c). */
dt_reduce_path dt_crossentropy_choose(void);

void dt_crossentropy_fwd(float *losses, float *lse, const float *logits, const int *targets,
                         int N, int V, int Vp);
/* Mean of losses[0..N). */
double dt_crossentropy_mean(const float *losses, int N);
/* In place: logits become dlogits = (softmax - onehot(target)) * dloss; padded columns 0. */
void dt_crossentropy_bwd(float *logits, const float *lse, const int *targets, float dloss,
                         int N, int V, int Vp);

#endif
