/* The MPI engine of the communicator (dist/comm.h): one rank per CPU process, host
 * buffers, started by mpirun.
 *
 * The engine lives in a plugin, build/libdetrain-mpi.so (src/dist/comm_mpi.c, built with
 * mpicc by `make mpi`), so detrain's binaries run on machines without OpenMPI: the plugin
 * is loaded (dlopen) only when a run asks for the engine. The plugin calls back into
 * detrain through a table (dt_mpi_host), never by symbol, so the same plugin serves
 * build/detrain, build/detrain-cuda and the test drivers, and the arithmetic of the
 * rank-ordered reduction is the host's dt_comm_sum_ranks_* (the same code every engine
 * runs).
 *
 * Logical rank: launcher process i (MPI_COMM_WORLD rank i) is logical rank order[i]; the
 * engine's communicator is split from MPI_COMM_WORLD keyed by logical rank, so the
 * rank-ordered reduction adds in logical order whatever the placement of processes.
 *
 * Every collective is non-blocking, polled with MPI_Test against the timeout: a rank that
 * died or stalls makes the others fail with an error naming the engine, the call and the
 * timeout, never a hang. After such a failure the communicator refuses every call and its
 * destroy skips MPI_Finalize (whose synchronisation would wait for the dead rank); the
 * process then exits non-zero and mpirun ends the job. */
#ifndef DT_DIST_COMM_MPI_H
#define DT_DIST_COMM_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

#include "dist/comm.h"
#include "dist/launch.h"

typedef struct dt_mpi_spec {
    const dt_launch *launch;  /* the launcher's view: MPI's world must agree with it */
    const int *order;         /* launch->size entries: process i is logical rank order[i]; NULL: identity */
    double timeout_sec;       /* every collective, and the start, gives up after this */
    const char *plugin;       /* the plugin's path; NULL: libdetrain-mpi.so beside the executable */
} dt_mpi_spec;

/* Loads the plugin, initialises MPI and makes the communicator. Refuses (naming the file and
 * `make mpi`) when the plugin is missing, and when MPI's world differs from the launcher's
 * (size, rank). Free with dt_comm_free, which finalises MPI. */
dt_status dt_comm_create_mpi(dt_comm **out, const dt_mpi_spec *spec);
/* The plugin's default path (beside the executable) into buf. */
void dt_comm_mpi_default_plugin(char *buf, size_t cap);
/* What the MPI engine records in env.json, as JSON members (no braces): the library
 * (MPI_Get_library_version), the OpenMPI collective settings in effect. "" for another
 * engine. */
const char *dt_comm_mpi_record(const dt_comm *c);

/* ---- the plugin's interface (host and plugin compile it alike) ------------------------ */

enum { DT_MPI_PLUGIN_ABI = 1 };

/* What detrain lends the plugin. */
typedef struct dt_mpi_host {
    int abi;                  /* DT_MPI_PLUGIN_ABI */
    size_t comm_size, ops_size; /* sizeof(dt_comm), sizeof(dt_comm_ops) */
    dt_status (*fail)(dt_status code, const char *msg); /* records msg as the error; returns code */
    int (*det)(void);         /* 1 in deterministic mode */
    void (*chunk)(size_t n, int size, int j, size_t align, size_t *off, size_t *len);
    void (*sum_f32)(float *out, const float *const *contrib, int size, size_t n);
    void (*sum_f64)(double *out, const double *const *contrib, int size, size_t n);
} dt_mpi_host;

/* The arguments of the plugin's create (the host has checked the order is a permutation). */
typedef struct dt_mpi_args {
    int size, rank;           /* the launcher's world size and this process's rank */
    const int *order;         /* size entries, never NULL */
    double timeout_sec;
} dt_mpi_args;

/* The plugin's one exported symbol, "dt_mpi_plugin_create": checks host's ABI, initialises
 * MPI, makes the communicator into *out (calloc'd; dt_comm_free frees it). */
typedef dt_status (*dt_mpi_plugin_create_fn)(const dt_mpi_host *host, const dt_mpi_args *args, dt_comm **out);
dt_status dt_mpi_plugin_create(const dt_mpi_host *host, const dt_mpi_args *args, dt_comm **out);

/* The plugin's record for env.json sits in the engine state's first member. */
typedef struct dt_mpi_impl_head {
    char record[8192];
} dt_mpi_impl_head;

#ifdef __cplusplus
}
#endif

#endif
