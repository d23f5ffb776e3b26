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

/* 1 when the comma-separated list holds `name`. */
static int list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        while (*p == ' ') p++;
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == ' ' || p[n] == 0)) return 1;
    }
    return 0;
}

dt_status dt_comm_mpi_check_env(dt_env_get_fn get, const void *ctx) {
    const char *v = get(ctx, "OMPI_MCA_coll");
    if (!v || !*v) return DT_OK;
    int exclude = v[0] == '^';
    const char *list = exclude ? v + 1 : v;
    static const char *const need[] = {"libnbc", "basic"};
    for (int i = 0; i < 2; i++)
        if (list_has(list, need[i]) == exclude)
            return dt_fail(DT_EINVAL, "OMPI_MCA_coll='%s' leaves out OpenMPI's '%s' collective component, which the MPI "
                           "engine needs (libnbc: the non-blocking collectives it polls; basic: the blocking ones of "
                           "MPI's start): keep both in the selection, or unset OMPI_MCA_coll", v, need[i]);
    return DT_OK;
}

static const char *environ_get(const void *ctx, const char *name) {
    (void)ctx;
    return getenv(name);
}

dt_status dt_comm_create_mpi(dt_comm **out, const dt_mpi_spec *spec) {
    *out = NULL;
    char path[4200];
    if (spec->plugin) snprintf(path, sizeof path, "%s", spec->plugin);
    else dt_comm_mpi_default_plugin(path, sizeof path);
    dt_status st = dt_comm_mpi_check_env(environ_get, NULL);
    if (st != DT_OK) return st;
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
    st = create(&host, &a, out);
    free(order);
    return st;
}

const char *dt_comm_mpi_record(const dt_comm *c) {
    if (!c || strcmp(c->ops->engine, "mpi") || !c->impl) return "";
    return ((const dt_mpi_impl_head *)c->impl)->record;
}
