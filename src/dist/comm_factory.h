/* The communicator a run trains on, chosen from --dist-engine, --device and the launch
 * (dist/launch.h):
 *
 *   auto    one rank (no launcher, or a launcher of size 1): single; more ranks on the CPU
 *           under mpirun: mpi; more ranks with --device cuda: nccl, its unique id shared
 *           through the MPI engine under mpirun, else through DETRAIN_RENDEZVOUS
 *   single  one rank only
 *   mpi     the MPI engine (host buffers: --device cpu), any size, launched by mpirun
 *   nccl    the NCCL engine (--device cuda), any size, one rank included
 *
 * A contradiction is refused with the reason and what to do, never resolved by running
 * on another engine: single under a launcher of several ranks, several ranks on the CPU
 * without mpirun, mpi with --device cuda, nccl on the CPU, nccl with several ranks and
 * neither mpirun nor DETRAIN_RENDEZVOUS, a missing MPI plugin. --rank-order must be a
 * permutation of 0..N-1 (N: the launch's size). */
#ifndef DT_DIST_COMM_FACTORY_H
#define DT_DIST_COMM_FACTORY_H

#ifdef __cplusplus
extern "C" {
#endif

#include "config/train_config.h"
#include "dist/comm.h"
#include "dist/launch.h"

/* --dist-engine's choices, in train_flags.def's order. */
enum { DT_DIST_AUTO, DT_DIST_SINGLE, DT_DIST_MPI, DT_DIST_NCCL };

/* What the factory decides from: the flags and the launch. */
typedef struct dt_comm_spec {
    int engine;               /* DT_DIST_* */
    int device;               /* 0 cpu, 1 cuda */
    const char *rank_order;   /* --rank-order text; NULL: the identity */
    double timeout_sec;       /* --dist-timeout-sec */
    dt_launch launch;
    const char *mpi_plugin;   /* NULL: libdetrain-mpi.so beside the executable */
} dt_comm_spec;

/* The spec of cfg's run: its flags and this process's launch (dt_launch_from_environ). */
dt_status dt_comm_spec_from_config(dt_comm_spec *s, const dt_train_config *cfg);
/* Parses a --rank-order text for `size` ranks into order[size] (a permutation of 0..size-1:
 * process i is logical rank order[i]); NULL text gives the identity. */
dt_status dt_comm_parse_rank_order(const char *text, int size, int *order);
/* The engine spec s names, after every check above. *out is NULL on failure. */
dt_status dt_comm_create_spec(dt_comm **out, const dt_comm_spec *s);
/* dt_comm_create_spec(dt_comm_spec_from_config(cfg)): the loop's communicator. */
dt_status dt_comm_create(dt_comm **out, const dt_train_config *cfg);
/* The engine the spec resolves to (DT_DIST_SINGLE, _MPI or _NCCL), or an error; nothing
 * is started. */
dt_status dt_comm_resolve_engine(const dt_comm_spec *s, int *engine);

/* env.json's record of the communicator, as a JSON object text: "contract" members (engine,
 * world size, the engine's library and settings) when contract is 1, else "info" members
 * (launcher, process rank, logical rank, local rank, rank order). */
void dt_comm_record_json(const dt_comm *c, const dt_comm_spec *s, int contract, char *buf, size_t cap);
/* Both records of c (made for cfg's run) into every env.json written after the call
 * (core/fingerprint.h's dt_fingerprint_set_dist). */
dt_status dt_comm_record_env(const dt_comm *c, const dt_train_config *cfg);

#ifdef __cplusplus
}
#endif

#endif
