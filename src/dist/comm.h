/* The communicator: a run's data-parallel ranks, and the collectives the training loop and
 * the backends need. One interface, several engines: the single-process one here (one rank,
 * every collective a copy or nothing); MPI between CPU processes and NCCL between GPUs add
 * implementations of the same operations.
 *
 * Two reductions, one per mode:
 *   - DT_REDUCE_LIBRARY (default mode): the engine's own all-reduce (MPI_Allreduce,
 *     ncclAllReduce), whose order of additions the library chooses for the allocation;
 *   - DT_REDUCE_RANK_ORDERED (deterministic mode): each rank sends chunk j of the buffer to
 *     rank j (dt_comm_chunk gives the chunks), rank j adds the N contributions in logical
 *     rank order 0..N-1 in fp32 (fp64 for fp64 buffers), then every rank gathers every
 *     chunk (a copy). The sum of each element is the same left-to-right sum whatever ring,
 *     tree or placement the engine would have used: allocation independence (DESIGN §1).
 * dt_comm_reduce_mode() picks the reduction from the deterministic flag.
 *
 * Buffers are host memory for host engines; an engine that moves device memory (NCCL)
 * says so (dt_comm_device) and takes a stream. Every call returns a status; a failed
 * collective (a rank that died, a timeout) is an error naming the engine and the call,
 * never a hang in tests. */
#ifndef DT_DIST_COMM_H
#define DT_DIST_COMM_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

/* Where a rank sits: its logical rank (the order reductions add in) among size ranks. */
typedef struct dt_layout {
    int rank, size;
} dt_layout;

typedef enum dt_reduce_mode { DT_REDUCE_LIBRARY, DT_REDUCE_RANK_ORDERED } dt_reduce_mode;
typedef enum dt_comm_dtype { DT_COMM_F32, DT_COMM_F64, DT_COMM_I64 } dt_comm_dtype;

typedef struct dt_comm dt_comm;

/* The alignment, in elements, of the chunks every engine splits a buffer into (the
 * rank-ordered reduction's chunks, reduce_scatter's and allgather's, ZeRO-1's shards). */
enum { DT_COMM_ALIGN = 64 };

/* An engine's operations (the data-parallel issue adds MPI's and NCCL's). */
typedef struct dt_comm_ops {
    const char *engine;       /* "single", "mpi", "nccl" */
    int device;               /* 1: buffers are device memory (stream given) */
    /* Sums n elements of buf over every rank, in place, on every rank. */
    dt_status (*allreduce)(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode, void *stream);
    /* Sums n elements of buf over every rank; afterwards rank r's chunk of buf (dt_comm_chunk
     * with DT_COMM_ALIGN) holds the sum, the rest of buf is unspecified (ZeRO-1's gradients). */
    dt_status (*reduce_scatter)(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode, void *stream);
    /* Every rank's chunk of n elements (dt_comm_chunk with DT_COMM_ALIGN) at buf + its offset:
     * after the call each rank holds every rank's chunk. */
    dt_status (*allgather)(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream);
    /* Rank `root`'s bytes to every rank. */
    dt_status (*broadcast)(dt_comm *c, void *buf, size_t bytes, int root, void *stream);
    dt_status (*barrier)(dt_comm *c);
    void (*destroy)(dt_comm *c);
} dt_comm_ops;

struct dt_comm {
    const dt_comm_ops *ops;
    dt_layout layout;
    void *impl;               /* the engine's state */
    /* Time spent in this communicator's collectives (the dt_comm_* calls below add it; a
     * device engine's calls return once enqueued, so theirs is host time only). */
    double busy_ms;
    uint64_t calls;
};

/* The single-process communicator: rank 0 of 1. */
dt_status dt_comm_create_single(dt_comm **out);
void dt_comm_free(dt_comm *c);

static inline int dt_comm_rank(const dt_comm *c) { return c->layout.rank; }
static inline int dt_comm_size(const dt_comm *c) { return c->layout.size; }
/* The reduction deterministic mode asks for (rank-ordered) or default mode's (library). */
dt_reduce_mode dt_comm_reduce_mode(void);

dt_status dt_comm_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream);
dt_status dt_comm_reduce_scatter(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream);
dt_status dt_comm_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream);
dt_status dt_comm_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream);
dt_status dt_comm_barrier(dt_comm *c);
/* Milliseconds spent inside the calls above since the communicator was made (the bench's
 * communication time). */
static inline double dt_comm_time_ms(const dt_comm *c) { return c->busy_ms; }

/* Chunk j of n elements split over `size` ranks: [*off, *off + *len). The first n % size
 * chunks hold one element more; every chunk starts at a multiple of `align` elements (its
 * length rounds up to one, the last chunk takes the rest), so device copies stay aligned.
 * The layout depends on (n, size, align) only: ZeRO-1 shards and the rank-ordered
 * reduction's chunks are the same. */
void dt_comm_chunk(size_t n, int size, int j, size_t align, size_t *off, size_t *len);

/* The rank-ordered sum of `size` contributions (contrib[r] is rank r's n elements) into
 * out: out[i] = ((c0[i] + c1[i]) + c2[i]) + ... in logical rank order, fp32 adds for fp32.
 * The arithmetic every engine's DT_REDUCE_RANK_ORDERED path does on its chunk. */
void dt_comm_sum_ranks_f32(float *out, const float *const *contrib, int size, size_t n);
void dt_comm_sum_ranks_f64(double *out, const double *const *contrib, int size, size_t n);

#ifdef __cplusplus
}
#endif

#endif
