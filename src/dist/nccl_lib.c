/* NCCL loaded at run time (see nccl_lib.h). */
#include "dist/nccl_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_HOWTO                                                                                              \
    "install NCCL 2.14 or newer (a CUDA 12 build: the nvidia-nccl-cu12 Python wheel ships one under "         \
    "site-packages/nvidia/nccl/lib, and bench/find_nccl.sh prints where it is) and put its directory on "     \
    "LD_LIBRARY_PATH"

/* One symbol into a function pointer (the object-to-function pointer copy POSIX dlsym
 * allows). */
static int bind(void *h, const char *name, void *slot, size_t size, const char **missing) {
    void *p = dlsym(h, name);
    if (!p) {
        if (!*missing) *missing = name;
        return 0;
    }
    memcpy(slot, &p, size);
    return 1;
}
#define BIND(field, name) bind(h, name, &lib->field, sizeof lib->field, &missing)

dt_status dt_nccl_load_from(const char *path, const dt_nccl_lib **out) {
    *out = NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return dt_fail(DT_EUNSUPPORTED, "the NCCL engine: cannot load %s (%s): " NCCL_HOWTO, path, dlerror());
    dt_nccl_lib *lib = calloc(1, sizeof *lib);
    if (!lib) {
        dlclose(h);
        return dt_fail(DT_ENOMEM, "out of memory for the NCCL table");
    }
    const char *missing = NULL;
    BIND(get_version, "ncclGetVersion");
    BIND(get_unique_id, "ncclGetUniqueId");
    BIND(comm_init_rank_config, "ncclCommInitRankConfig");
    BIND(all_reduce, "ncclAllReduce");
    BIND(reduce, "ncclReduce");
    BIND(reduce_scatter, "ncclReduceScatter");
    BIND(all_gather, "ncclAllGather");
    BIND(broadcast, "ncclBroadcast");
    BIND(send, "ncclSend");
    BIND(recv, "ncclRecv");
    BIND(group_start, "ncclGroupStart");
    BIND(group_end, "ncclGroupEnd");
    BIND(comm_get_async_error, "ncclCommGetAsyncError");
    BIND(comm_abort, "ncclCommAbort");
    BIND(comm_destroy, "ncclCommDestroy");
    BIND(get_error_string, "ncclGetErrorString");
    int v = 0;
    if (!missing && lib->get_version(&v) != DT_NCCL_SUCCESS) v = 0;
    if (missing || v < DT_NCCL_MIN_VERSION) {
        char have[32] = "an unknown version";
        if (v > 0) snprintf(have, sizeof have, "version %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
        dt_status st = missing ? dt_fail(DT_EUNSUPPORTED, "the NCCL engine: %s has no %s (not NCCL 2.14 or newer?): "
                                         NCCL_HOWTO, path, missing)
                               : dt_fail(DT_EUNSUPPORTED, "the NCCL engine: %s is %s, older than 2.14 (non-blocking "
                                         "communicators, which every bounded wait needs): " NCCL_HOWTO, path, have);
        free(lib);
        dlclose(h);
        return st;
    }
    lib->version = v;
    snprintf(lib->version_text, sizeof lib->version_text, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    Dl_info info;
    void *sym = NULL;
    memcpy(&sym, &lib->get_version, sizeof sym);
    lib->path = dladdr(sym, &info) && info.dli_fname ? strdup(info.dli_fname) : NULL;
    if (!lib->path) lib->path = path;
    *out = lib; /* kept for the process: NCCL is not unloaded while communicators may live */
    return DT_OK;
}

dt_status dt_nccl_load(const dt_nccl_lib **out) {
    static const dt_nccl_lib *loaded;
    if (loaded) {
        *out = loaded;
        return DT_OK;
    }
    dt_status st = dt_nccl_load_from("libnccl.so.2", out);
    if (st == DT_OK) loaded = *out;
    return st;
}
