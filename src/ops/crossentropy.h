/* Fused softmax cross-entropy over vocabulary chunks.
 * Shapes: logits (N,Vp) of which the first V columns are real; targets (N) in [0,V);
 * losses, lse (N). Per row, the log-sum-exp is built from chunks of DT_CE_CHUNK columns,
 * each chunk's (max, sum) merged into the running pair in chunk order: deterministic by
 * nature on the CPU, where one thread owns a row.
 * The mean loss (DT_OP_CROSSENTROPY) reduces over rows:
 *  det  — dt_sum_det: fixed chunks, fixed order.
 *  fast — dt_sum_fast: OpenMP reduction, unordered. */
#ifndef DT_OPS_CROSSENTROPY_H
#define DT_OPS_CROSSENTROPY_H

#include "ops/op.h"

#define DT_CE_CHUNK 256

void dt_crossentropy_fwd(float *losses, float *lse, const float *logits, const int *targets,
                         int N, int V, int Vp);
/* Mean of losses[0..N). */
double dt_crossentropy_mean(const float *losses, int N);
/* In place: logits become dlogits = (softmax - onehot(target)) * dloss; padded columns 0. */
void dt_crossentropy_bwd(float *logits, const float *lse, const int *targets, float dloss,
                         int N, int V, int Vp);

#endif
