/* Data parallel in the training loop (loop.c): how the global batch is split over the
 * ranks of the run's communicator (dist/comm.h), and how every per-rank value the loop
 * reports is combined across ranks in a fixed order.
 *
 * The split. N ranks, micro-batch B, A micro-batches per rank and step: the global batch
 * G = B A N (checked by dt_dp_accum). The data loader's global order (data/dataset.h: the
 * seeded epoch permutations, one after another) is cut into global micro-batches of B
 * windows; step s (1-based) takes global micro-batches (s-1) A N .. s A N - 1, and rank r's
 * micro-batch m of that step is global micro-batch
 *     k = (s-1) A N + m N + r,   its windows [k B, k B + B) of the global order.
 * The data order therefore depends only on the seed and the global sample index; every
 * rank's cursor is the same global cursor after a step (each rank skips the windows of the
 * others), so consumed samples, consumed tokens and the checkpoint's data position stay
 * global, and rank r's next window follows from (cursor, r, B). With N = 1 this is the
 * single-process order exactly.
 *
 * The micro-batch's dropout key is k (the global micro-batch index), so the same sample
 * gets the same masks whatever N; its loss scale is 1/(A N), so the sum over ranks of
 * each rank's accumulated gradient is the gradient of the global mean loss.
 *
 * Values across ranks. Each rank's values are gathered to every rank (dt_dp_gather_f64:
 * an all-gather, a copy) and added on every rank in one fixed order in fp64, so every rank
 * holds the same bits: the step loss in global micro-batch order, eval losses in batch
 * order, gradient statistics in chunk order (dt_dp_grad_stats). */
#ifndef DT_DIST_DP_H
#define DT_DIST_DP_H

#ifdef __cplusplus
extern "C" {
#endif

#include "dist/comm.h"
#include "model/gpt.h"
#include "optim/optim.h"

#include <stdint.h>

/* A = G / (B N): DT_EINVAL naming the three numbers when G is not a multiple of B N. */
dt_status dt_dp_accum(int global_batch, int micro_batch, int size, int *accum);

/* The global micro-batch index k of rank `rank`'s micro-batch `micro` of step `step`
 * (1-based) with `accum` micro-batches per rank and `size` ranks (see above). */
static inline uint64_t dt_dp_micro_index(int64_t step, int micro, int accum, int size, int rank) {
    return ((uint64_t)(step - 1) * (uint64_t)accum + (uint64_t)micro) * (uint64_t)size + (uint64_t)rank;
}

/* Reads rank `rank`'s next micro-batch of the global order into inputs/targets (B T each):
 * skips the windows of the ranks before it, reads its B windows, skips those of the ranks
 * after it, so the loader's cursor moves by N B windows, to the same place on every rank. */
struct dt_dataset;
dt_status dt_dp_next_micro(struct dt_dataset *ds, int B, int rank, int size, int *inputs, int *targets);

/* Every rank's k values to every rank: all[r k + i] = rank r's mine[i] (all holds size k
 * doubles). k <= DT_DP_MAX_VALUES. */
enum { DT_DP_MAX_VALUES = 4096 };
dt_status dt_dp_gather_f64(dt_comm *c, const double *mine, int k, double *all);

/* The step's mean loss: each rank's `accum` micro-batch losses (its own, in order) gathered
 * and added in global micro-batch order (m N + r), divided by A N. */
dt_status dt_dp_mean_loss(dt_comm *c, const double *micro_losses, int accum, double *mean);

/* The mean of n eval-batch losses where rank r computed the batches i with i % N == r
 * (losses[i] set for those, ignored for the others): added in batch order. */
dt_status dt_dp_mean_eval(dt_comm *c, const double *losses, int n, double *mean);

/* Gradient statistics over the ranks' chunks of the slabs (dt_comm_chunk with
 * DT_COMM_ALIGN over the N ranks): each chunk's partial sums (optim.h), added in chunk
 * order. sharded 0: every rank holds the whole reduced gradient and computes every chunk;
 * sharded 1 (ZeRO-1): a rank holds the reduced gradient of its own chunk only, computes
 * that chunk's partials, and the partials are gathered. Both give the same bits; with one
 * rank it is dt_grad_stats_compute. */
dt_status dt_dp_grad_stats(dt_comm *c, const dt_gpt *m, int sharded, dt_grad_stats *gs);

/* A per-rank mean (each rank's over its own A micro-batches) and a per-rank count combined
 * over the ranks, in rank order on every rank: *mean = (sum of the ranks' means) / N, the
 * global mean since every rank has A micro-batches; *total = the sum of the counts. One
 * rank: the values themselves. (The MoE aux loss and dropped assignments.) */
dt_status dt_dp_mean_and_total(dt_comm *c, double mean_mine, int64_t count_mine, double *mean, int64_t *total);

/* The first non-zero of the ranks' `mine` values in rank order (0: every rank's is 0), the
 * same on every rank: how the ranks agree to stop after a step, since a signal reaches
 * the processes at different times and a wall-clock limit is read on one rank's clock. */
dt_status dt_dp_agree(dt_comm *c, int mine, int *agreed);

#ifdef __cplusplus
}
#endif

#endif
