/* The token + position embedding on the GPU (encoder_cuda.cu). The math and each path's
 * determinism class are in encoder.h; this header gives the launchers and the GPU dtypes.
 * Include from .cu files only. */
#ifndef DT_OPS_ENCODER_CUDA_H
#define DT_OPS_ENCODER_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/dropout/dropout.h"
#include "ops/encoder/encoder.h"
#include "ops/encoder/encoder_plan.h"
}

/* out (B,T,C) bf16 = wte[inp] + wpe[t], wte/wpe fp32; with hidden dropout on the sum. */
void dt_cu_encoder_fwd(bf16 *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                       int C, const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                       cudaStream_t s);
/* The det token-table backward's device work (encoder_plan.h's chunks of the buckets). */
typedef struct dt_cu_encoder_work {
    const int *order, *chunk_start, *chunk_dst, *multi_tok, *multi_slot;
    int nchunk, nmulti;
    float *partial;     /* dt_cu_encoder_max_slots(B T) x C */
} dt_cu_encoder_work;

/* dwte (Vp,C), dwpe (maxT,C) fp32 += gradient of dout (B,T,C) bf16, multiplied by the
 * dropout mask of (drop, purpose, layer) when drop is on.
 * det: w, the chunks of the token buckets (device copies): one thread a (chunk, channel)
 *      sums its positions in order into its token's row (a run of one chunk) or its slot,
 *      then one owner per (token, channel) of a longer run adds its slots in order; one owner
 *      per (t, channel) sums over b in order.
 * fast: one atomicAdd per (b, t, channel) into both tables (w unused). */
void dt_cu_encoder_bwd(float *dwte, float *dwpe, const bf16 *dout, const int *inp, const dt_cu_encoder_work *w,
                       int B, int T, int C, const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                       cudaStream_t s);

#endif
