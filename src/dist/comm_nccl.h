/* The NCCL engine of the communicator (dist/comm.h): one rank per GPU, device buffers on
 * the caller's stream. Its unique id reaches every rank through a bootstrap: an existing
 * host communicator (the MPI engine, when the run was launched by mpirun) broadcasts it,
 * or, for launchers without MPI, a rendezvous named by the launch (a shared file or a TCP
 * address; dist/launch.h reads it from the launcher's environment).
 *
 * Default mode reduces with ncclAllReduce (the library's ring or tree); deterministic mode
 * with the rank-ordered path of dist/comm.h: grouped ncclSend/ncclRecv of chunk j to rank
 * j, a kernel that adds the N contributions in logical rank order, then a gather (a copy).
 *
 * The CPU build (plain `make`) has a stand-in that refuses with DT_EUNSUPPORTED. */
#ifndef DT_DIST_COMM_NCCL_H
#define DT_DIST_COMM_NCCL_H

#ifdef __cplusplus
extern "C" {
#endif

#include "dist/comm.h"

typedef struct dt_nccl_spec {
    dt_layout layout;        /* this rank's logical rank among size ranks */
    int local_rank;          /* the GPU this rank drives (cudaSetDevice) */
    dt_comm *bootstrap;      /* a host communicator of the same layout, or NULL */
    const char *rendezvous;  /* without a bootstrap: "file:PATH" or "tcp:HOST:PORT" */
    int timeout_ms;          /* every collective and the bootstrap give up after this */
} dt_nccl_spec;

dt_status dt_comm_create_nccl(dt_comm **out, const dt_nccl_spec *spec);

/* env.json's record of the NCCL library this process runs (JSON object members, e.g.
 * "\"nccl_version\":\"2.21.5\""), once an engine was created; "" before and in the CPU
 * build. The factory adds it to the communicator's "dist" record. */
const char *dt_comm_nccl_record(void);

#ifdef __cplusplus
}
#endif

#endif
