/* Where this process sits in a launched job: its rank, the number of ranks, its rank on
 * its node (the GPU it drives) and, for launchers without MPI, the rendezvous the NCCL
 * bootstrap meets at. Read from the launcher's environment (these are inputs describing
 * the job, not knobs that change numbers):
 *
 *   detrain   DETRAIN_RANK, DETRAIN_WORLD_SIZE, DETRAIN_LOCAL_RANK (any other launcher
 *             that sets them: a shell loop, a container scheduler)
 *   openmpi   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (mpirun)
 *   slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun)
 *   none      none of these: rank 0 of 1
 *
 * and DETRAIN_RENDEZVOUS=file:PATH or tcp:HOST:PORT with any launcher.
 *
 * One set decides, in this order: detrain's (set on purpose for this process), OpenMPI's,
 * Slurm's. When detrain's and OpenMPI's are both set they must agree (both are per
 * process under mpirun, so a difference is a wrapper's bug). Slurm's are not compared with
 * OpenMPI's: mpirun inside a Slurm allocation passes on the allocation's SLURM_PROCID and
 * SLURM_NTASKS, which describe the batch step, not this process.
 *
 * Every value is checked: a set's variables come together (rank and size; the local rank
 * too), each is a plain decimal number (no sign, space or suffix), size >= 1, 0 <= rank <
 * size, 0 <= local rank < size; any violation is DT_EINVAL naming the variable. */
#ifndef DT_DIST_LAUNCH_H
#define DT_DIST_LAUNCH_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

enum { DT_LAUNCH_MAX_RANKS = 1 << 20, DT_LAUNCH_RENDEZVOUS_MAX = 1024 };

typedef struct dt_launch {
    const char *launcher;     /* "none", "detrain", "openmpi", "slurm" (static text) */
    int rank, size, local_rank;
    int by_mpirun;            /* 1: OpenMPI's variables are set (mpirun started this process) */
    char rendezvous[DT_LAUNCH_RENDEZVOUS_MAX]; /* "" none; "file:PATH" or "tcp:HOST:PORT" */
} dt_launch;

/* The value of environment variable `name`, or NULL when unset. */
typedef const char *(*dt_env_get_fn)(const void *ctx, const char *name);

/* Fills *out from the variables `get` returns (a pure function of them, for tests). On an
 * error *out is rank 0 of 1 with launcher "none". */
dt_status dt_launch_read(dt_launch *out, dt_env_get_fn get, const void *ctx);
/* dt_launch_read over this process's environment. */
dt_status dt_launch_from_environ(dt_launch *out);

/* Checks a rendezvous text: "file:PATH" (PATH absolute) or "tcp:HOST:PORT" (HOST
 * non-empty, PORT 1..65535). `what` names its source in the message. */
dt_status dt_launch_check_rendezvous(const char *v, const char *what);

#ifdef __cplusplus
}
#endif

#endif
