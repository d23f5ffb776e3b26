/* Host-side plan of the embedding backward's det CUDA kernels (encoder_cuda.cu), in plain C
 * so CI tests it: the token buckets, a stable counting sort of the batch's token ids, and
 * their chunks, made on the host by the caller and copied to the device. A function of the
 * ids only. */
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

/* The det token-table backward's work: the bucket runs cut into chunks of at most
 * DT_CU_ENCODER_CHUNK positions, so no thread sums a long run alone (in real text a few
 * tokens take a large share of every batch: one thread summing thousands of positions in a
 * row held the whole backward). Each chunk's positions are summed in run order; a run of one
 * chunk adds its sum to its token's row; a longer run's chunks each write a partial to their
 * own slot, and one owner per (token, channel) adds the run's slots in slot order after all
 * writers. The order is fixed by the ids alone.
 * Outputs: chunk_start[nchunk + 1] (indices into the bucket order), chunk_dst[nchunk] (>= 0:
 * the token whose whole run the chunk is; else -1 - slot), multi_tok[nmulti] and
 * multi_slot[nmulti + 1] (the runs of several chunks, their first slots, and the end). Sizes:
 * chunk arrays BT + 1, multi arrays dt_cu_encoder_max_multi(BT) + 1; slots at most
 * dt_cu_encoder_max_slots(BT). Returns nchunk; *nmulti is set. */
#define DT_CU_ENCODER_CHUNK 32
int dt_cu_encoder_chunks(const int *seg_tok, const int *seg_start, int nseg, int *chunk_start, int *chunk_dst,
                         int *multi_tok, int *multi_slot, int *nmulti);
int dt_cu_encoder_max_multi(int BT);
int dt_cu_encoder_max_slots(int BT);

#ifdef __cplusplus
}
#endif

#endif
