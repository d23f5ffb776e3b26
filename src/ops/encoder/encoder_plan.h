/* Host-side plan of the embedding backward's det CUDA kernels (encoder_cuda.cu), in plain C
 * so CI tests it: the token buckets, a stable counting sort of the batch's token ids, made on
 * the host by the caller and copied to the device. A function of the ids only. */
#ifndef DT_OPS_ENCODER_PLAN_H
#define DT_OPS_ENCODER_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

/* Stable counting sort of token ids for the deterministic embedding backward.
 * inp: BT ids in [0, Vp). Outputs: order[BT] positions sorted by id, ties in position
 * order; seg_tok[nseg] the distinct ids in increasing order; seg_start[nseg + 1] the start
 * of each id's run in order (seg_start[nseg] = BT). count: Vp ints of scratch.
 * Returns nseg, or -1 if an id is outside [0, Vp). */
int dt_cu_encoder_buckets(const int *inp, int BT, int Vp, int *count, int *order, int *seg_tok,
                          int *seg_start);

#ifdef __cplusplus
}
#endif

#endif
