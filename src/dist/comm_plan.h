/* The host logic of the device engines (dist/comm_nccl.h), tested on the CPU:
 *
 *   - the rank-ordered reduction's tables: the chunks a rank sends (chunk j of the buffer to
 *     logical rank j), the staging buffer it receives its own chunk into (one slot per
 *     contributing rank, slot r holding logical rank r's contribution), and ZeRO-1's shard of
 *     a rank within one tensor of the parameter slab;
 *   - the rendezvous a launcher without MPI names ("file:PATH" or "tcp:HOST:PORT"), and the
 *     exchange of a small identity (NCCL's unique id) from rank 0 to every rank through it:
 *     a file written under a temporary name and renamed, or a TCP listener on rank 0; every
 *     wait has a timeout and a failure names the rendezvous, the ranks and what to do.
 *
 * The communicator ranks an engine creates are the logical ranks (ncclCommInitRank is given
 * the logical rank), so "rank j" means logical rank j whatever GPU or host it runs on. */
#ifndef DT_DIST_COMM_PLAN_H
#define DT_DIST_COMM_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

/* ---- the rank-ordered reduction -------------------------------------------------------- */

/* One rank's view of the rank-ordered reduction of n elements over size ranks, chunks by
 * dt_comm_chunk(n, size, j, align). */
typedef struct dt_comm_plan {
    size_t n, align;
    int rank, size;
    size_t own_off, own_len;  /* this rank's chunk: the elements it sums */
    size_t slot_stride;       /* elements between two slots of the staging buffer (aligned) */
    size_t staging;           /* elements of the staging buffer: size slots */
} dt_comm_plan;

/* Fills p for rank of size over n elements; DT_EINVAL on rank outside [0, size) or size < 1,
 * align < 1. */
dt_status dt_comm_plan_make(dt_comm_plan *p, size_t n, int rank, int size, size_t align);
/* The chunk this rank sends to rank j: [*off, *off + *len) of the buffer. */
void dt_comm_plan_send(const dt_comm_plan *p, int j, size_t *off, size_t *len);
/* Where logical rank r's contribution to this rank's chunk lands in the staging buffer
 * (own_len elements from there). */
size_t dt_comm_plan_slot(const dt_comm_plan *p, int r);

/* ZeRO-1: the part of rank's shard (dt_comm_chunk with DT_COMM_ALIGN over the slab of n
 * elements) inside one tensor of the slab at [t_off, t_off + t_len): [*lo, *hi) in slab
 * elements (*lo == *hi when they do not meet). */
void dt_comm_shard_in_tensor(size_t n, int size, int rank, size_t t_off, size_t t_len, size_t *lo, size_t *hi);

/* ---- the rendezvous -------------------------------------------------------------------- */

enum { DT_RV_PATH_MAX = 4096, DT_RV_HOST_MAX = 256, DT_RV_ID_MAX = 1024 };

typedef enum dt_rv_kind { DT_RV_FILE, DT_RV_TCP } dt_rv_kind;

typedef struct dt_rendezvous {
    dt_rv_kind kind;
    char path[DT_RV_PATH_MAX];  /* DT_RV_FILE */
    char host[DT_RV_HOST_MAX];  /* DT_RV_TCP: a name or address ("[::1]" written without brackets) */
    int port;                   /* DT_RV_TCP: 1..65535 */
} dt_rendezvous;

/* Parses "file:PATH" (PATH non-empty) or "tcp:HOST:PORT" (an IPv6 HOST in brackets:
 * "tcp:[::1]:29500"); DT_EINVAL naming the text and the accepted forms otherwise. */
dt_status dt_rendezvous_parse(const char *text, dt_rendezvous *out);

/* Rank 0 hands `bytes` bytes of id (<= DT_RV_ID_MAX) to every other rank of size; the
 * others receive them into id. Each side waits at most timeout_ms in all. A file
 * rendezvous: rank 0 refuses a PATH that exists already (an earlier run's), writes
 * PATH.tmp.<pid> and renames it to PATH, then waits for every rank's acknowledgement
 * (PATH.ack.<rank>) and removes them and PATH; a reader polls for PATH, checks its header
 * (world size, length) and acknowledges. A TCP rendezvous: rank 0 listens on HOST:PORT and
 * answers each rank that connects and says its rank (once each); the others retry their
 * connection until it listens. On timeout the error names the rendezvous and, on rank 0,
 * the ranks that never came. */
dt_status dt_rendezvous_exchange(const dt_rendezvous *rv, int rank, int size, void *id, size_t bytes,
                                 int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
