/* Token + position embedding. out[b,t,:] = wte[inp[b,t],:] + wpe[t,:].
 * Shapes: inp (B,T) int32 token ids < Vp; wte (Vp,C); wpe (maxT,C); out (B,T,C) (fp32 on
 * the CPU; bf16 out from fp32 tables on the GPU, with hidden dropout on the sum: encoder_cuda.h).
 * Forward writes each output row once: deterministic by nature.
 * Backward accumulates into dwte (Vp,C) and dwpe (maxT,C); paths (DT_OP_ENCODER_BWD),
 * chosen by dt_encoder_choose:
 *  det  — tokens are bucketed by id with a stable counting sort (positions in (b,t)
 *         order; on the GPU made on the host, dt_cu_encoder_buckets); each id's rows are
 *         summed by one owner in that order (CPU: a task; GPU: a thread per (id, channel)).
 *         dwpe: one owner per position t (and channel) sums over b in order.
 *  fast — every (b,t) adds its row into dwte/dwpe with atomics (CPU: `omp atomic`; GPU:
 *         atomicAdd per element): repeated tokens race. */
#ifndef DT_OPS_ENCODER_H
#define DT_OPS_ENCODER_H

#include "ops/op.h"

typedef enum dt_encoder_path { DT_ENCODER_DET = 0, DT_ENCODER_FAST = 1 } dt_encoder_path;
/* The embedding backward's path now: det when dt_op_variant(DT_OP_ENCODER_BWD) says det
 * (always in deterministic mode), else fast (encoder_plan.c). The GPU model asks it too,
 * to know whether to make the buckets. */
dt_encoder_path dt_encoder_choose(void);

void dt_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B,
                    int T, int C);
void dt_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                    int C, int Vp);
void dt_encoder_bwd_det(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                        int T, int C, int Vp);
void dt_encoder_bwd_fast(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                         int T, int C, int Vp);

#endif
