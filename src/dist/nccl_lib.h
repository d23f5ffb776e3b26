/* NCCL, loaded at run time: the engine (comm_nccl.cu) dlopen()s libnccl.so.2 when a run
 * asks for it, so detrain builds with no NCCL headers or libraries and runs on machines
 * without NCCL until NCCL is asked for.
 *
 * The declarations below are the few types and functions of NCCL's C API the engine calls,
 * written from NCCL's documentation: result codes and data-type and reduction-op values are
 * the documented numbers; enums travel as int (their C ABI); a CUDA stream as void *. The
 * communicator configuration is the documented prefix of ncclConfig_t that NCCL 2.14
 * introduced (size, magic, version, then blocking, cgaClusterSize, minCTAs, maxCTAs,
 * netName); later versions read a shorter, older-versioned struct as such. */
#ifndef DT_DIST_NCCL_LIB_H
#define DT_DIST_NCCL_LIB_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>

typedef struct dt_nccl_comm_opaque *dt_nccl_comm_t;            /* ncclComm_t */
typedef struct dt_nccl_unique_id { char internal[128]; } dt_nccl_unique_id; /* ncclUniqueId */

enum { /* ncclResult_t */
    DT_NCCL_SUCCESS = 0, DT_NCCL_UNHANDLED_CUDA_ERROR = 1, DT_NCCL_SYSTEM_ERROR = 2, DT_NCCL_INTERNAL_ERROR = 3,
    DT_NCCL_INVALID_ARGUMENT = 4, DT_NCCL_INVALID_USAGE = 5, DT_NCCL_REMOTE_ERROR = 6, DT_NCCL_IN_PROGRESS = 7
};
enum { /* ncclDataType_t */
    DT_NCCL_INT8 = 0, DT_NCCL_UINT8 = 1, DT_NCCL_INT32 = 2, DT_NCCL_UINT32 = 3, DT_NCCL_INT64 = 4,
    DT_NCCL_UINT64 = 5, DT_NCCL_FLOAT16 = 6, DT_NCCL_FLOAT32 = 7, DT_NCCL_FLOAT64 = 8, DT_NCCL_BFLOAT16 = 9
};
enum { DT_NCCL_SUM = 0 }; /* ncclRedOp_t */

/* ncclConfig_t as of NCCL 2.14: what NCCL_CONFIG_INITIALIZER fills (size, magic, version),
 * then the fields; a field left at DT_NCCL_UNDEF_INT (NULL for a pointer) keeps NCCL's
 * default. */
#define DT_NCCL_CONFIG_MAGIC 0xcafebeefu
enum { DT_NCCL_CONFIG_VERSION = 21400 /* 2.14.0 */ };
#define DT_NCCL_UNDEF_INT (-2147483647 - 1)
typedef struct dt_nccl_config {
    size_t size;
    unsigned int magic, version;
    int blocking, cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
} dt_nccl_config;

typedef struct dt_nccl_lib {
    const char *path;   /* the file loaded (as the dynamic loader found it) */
    int version;        /* ncclGetVersion: major*10000 + minor*100 + patch */
    char version_text[32];
    int (*get_version)(int *version);
    int (*get_unique_id)(dt_nccl_unique_id *id);
    int (*comm_init_rank_config)(dt_nccl_comm_t *comm, int nranks, dt_nccl_unique_id id, int rank,
                                 dt_nccl_config *config);
    int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, dt_nccl_comm_t comm, void *stream);
    int (*reduce)(const void *send, void *recv, size_t count, int dtype, int op, int root, dt_nccl_comm_t comm,
                  void *stream);
    int (*reduce_scatter)(const void *send, void *recv, size_t recvcount, int dtype, int op, dt_nccl_comm_t comm,
                          void *stream);
    int (*all_gather)(const void *send, void *recv, size_t sendcount, int dtype, dt_nccl_comm_t comm, void *stream);
    int (*broadcast)(const void *send, void *recv, size_t count, int dtype, int root, dt_nccl_comm_t comm,
                     void *stream);
    int (*send)(const void *buf, size_t count, int dtype, int peer, dt_nccl_comm_t comm, void *stream);
    int (*recv)(void *buf, size_t count, int dtype, int peer, dt_nccl_comm_t comm, void *stream);
    int (*group_start)(void);
    int (*group_end)(void);
    int (*comm_get_async_error)(dt_nccl_comm_t comm, int *async_error);
    int (*comm_abort)(dt_nccl_comm_t comm);
    int (*comm_destroy)(dt_nccl_comm_t comm);
    const char *(*get_error_string)(int result);
} dt_nccl_lib;

enum { DT_NCCL_MIN_VERSION = 21400 }; /* non-blocking communicators (ncclCommInitRankConfig) */

/* Loads libnccl.so.2 (the dynamic loader's search: LD_LIBRARY_PATH, the cache) once per
 * process and returns its table; DT_EUNSUPPORTED naming the library, what is missing and
 * how to get it (no library, a missing function, a version older than 2.14). */
dt_status dt_nccl_load(const dt_nccl_lib **out);
/* The same from a named file (tests; a path with no '/' is searched as above). Each call
 * loads anew; the table stays valid for the process. */
dt_status dt_nccl_load_from(const char *path, const dt_nccl_lib **out);

#ifdef __cplusplus
}
#endif

#endif
