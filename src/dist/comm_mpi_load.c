/* Loading the MPI engine's plugin (see comm_mpi.h): the host side, built into every
 * detrain binary; it has no MPI in it. */
#include "dist/comm_mpi.h"

#include "core/determinism.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dt_status host_fail(dt_status code, const char *msg) { return dt_fail(code, "%s", msg); }

static const dt_mpi_host host = {DT_MPI_PLUGIN_ABI, sizeof(dt_comm), sizeof(dt_comm_ops), host_fail,
                                 dt_det, dt_comm_chunk, dt_comm_sum_ranks_f32, dt_comm_sum_ranks_f64};

void dt_comm_mpi_default_plugin(char *buf, size_t cap) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, cap, "libdetrain-mpi.so");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(buf, cap, "%s/libdetrain-mpi.so", exe);
}

dt_status dt_comm_create_mpi(dt_comm **out, const dt_mpi_spec *spec) {
    *out = NULL;
    char path[4200];
    if (spec->plugin) snprintf(path, sizeof path, "%s", spec->plugin);
    else dt_comm_mpi_default_plugin(path, sizeof path);
    if (access(path, R_OK) != 0)
        return dt_fail(DT_EUNSUPPORTED, "the MPI engine's plugin %s is missing: build it with `make mpi` (needs "
                       "mpicc: bash scripts/install-deps.sh installs OpenMPI)", path);
    /* RTLD_GLOBAL: OpenMPI loads its own components later, and they look for libmpi's
     * symbols in the global scope. The plugin is never unloaded (MPI cannot start twice). */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return dt_fail(DT_EUNSUPPORTED, "the MPI engine's plugin %s does not load: %s (rebuild it with `make mpi`; "
                       "the machine needs OpenMPI's libraries: bash scripts/install-deps.sh)", path, dlerror());
    dt_mpi_plugin_create_fn create;
    *(void **)&create = dlsym(h, "dt_mpi_plugin_create");
    if (!create)
        return dt_fail(DT_EUNSUPPORTED, "%s is not detrain's MPI plugin (no dt_mpi_plugin_create): rebuild it with "
                       "`make mpi`", path);
    const dt_launch *l = spec->launch;
    int *order = malloc(sizeof *order * (size_t)l->size);
    if (!order) return dt_fail(DT_ENOMEM, "out of memory for the rank order");
    for (int i = 0; i < l->size; i++) order[i] = spec->order ? spec->order[i] : i;
    dt_mpi_args a = {l->size, l->rank, order, spec->timeout_sec};
    dt_runtime_mark(DT_LIB_MPI);
    dt_status st = create(&host, &a, out);
    free(order);
    return st;
}

const char *dt_comm_mpi_record(const dt_comm *c) {
    if (!c || strcmp(c->ops->engine, "mpi") || !c->impl) return "";
    return ((const dt_mpi_impl_head *)c->impl)->record;
}
