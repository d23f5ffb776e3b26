/* Token + position embedding. out[b,t,:] = wte[inp[b,t],:] + wpe[t,:].
 * Shapes: inp (B,T) int32 token ids < Vp; wte (Vp,C); wpe (maxT,C); out (B,T,C).
 * Forward writes each output row once: deterministic by nature.
 * Backward (DT_OP_ENCODER_BWD) accumulates into dwte (Vp,C) and dwpe (maxT,C):
 *  det  — tokens are bucketed by id with a stable counting sort (positions in (b,t)
 *         order); each id's rows are summed by one owner in that order. dwpe: one owner per
 *         position t sums over b in order.
 *  fast — every (b,t) adds its row into dwte/dwpe with atomics: repeated tokens race. */
#ifndef DT_OPS_ENCODER_H
#define DT_OPS_ENCODER_H

#include "ops/op.h"

void dt_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B,
                    int T, int C);
void dt_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                    int C, int Vp);
void dt_encoder_bwd_det(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                        int T, int C, int Vp);
void dt_encoder_bwd_fast(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                         int T, int C, int Vp);

#endif
