/* The launcher's environment read into a dt_launch (see launch.h). */
#include "dist/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One launcher's variables: rank, size, local rank. */
typedef struct env_set {
    const char *launcher;
    const char *rank, *size, *local;
} env_set;

static const env_set sets[] = {
    {"detrain", "DETRAIN_RANK", "DETRAIN_WORLD_SIZE", "DETRAIN_LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};
enum { SET_DETRAIN, SET_OPENMPI, SET_SLURM, SET_COUNT };

/* A plain decimal number in [0, DT_LAUNCH_MAX_RANKS]: digits only. */
static dt_status parse_count(const char *name, const char *v, int *out) {
    size_t n = strlen(v);
    if (n == 0 || n > 8 || strspn(v, "0123456789") != n)
        return dt_fail(DT_EINVAL, "%s='%s' is not a rank number: the launcher must set a plain decimal "
                       "number (digits only, no sign or spaces)", name, v);
    long x = strtol(v, NULL, 10);
    if (x > DT_LAUNCH_MAX_RANKS)
        return dt_fail(DT_EINVAL, "%s=%s is above detrain's limit of %d ranks", name, v, DT_LAUNCH_MAX_RANKS);
    *out = (int)x;
    return DT_OK;
}

static int set_present(const env_set *s, dt_env_get_fn get, const void *ctx) {
    return get(ctx, s->rank) || get(ctx, s->size) || get(ctx, s->local);
}

/* Reads and checks one set of variables into rank/size/local. */
static dt_status read_set(const env_set *s, dt_env_get_fn get, const void *ctx, int *rank, int *size, int *local) {
    const char *names[3] = {s->rank, s->size, s->local};
    int *vals[3] = {rank, size, local};
    for (int i = 0; i < 3; i++) {
        const char *v = get(ctx, names[i]);
        if (!v) {
            const char *given = get(ctx, names[(i + 1) % 3]) ? names[(i + 1) % 3] : names[(i + 2) % 3];
            return dt_fail(DT_EINVAL, "%s is set but %s is not: the %s launcher's variables %s, %s and %s "
                           "come together (set all three, or none)", given, names[i], s->launcher, s->rank,
                           s->size, s->local);
        }
        dt_status st = parse_count(names[i], v, vals[i]);
        if (st != DT_OK) return st;
    }
    if (*size < 1)
        return dt_fail(DT_EINVAL, "%s=%d: a job has at least one rank", s->size, *size);
    if (*rank >= *size)
        return dt_fail(DT_EINVAL, "%s=%d is not below %s=%d: ranks are 0..%d", s->rank, *rank, s->size, *size,
                       *size - 1);
    if (*local >= *size)
        return dt_fail(DT_EINVAL, "%s=%d is not below %s=%d: a node holds at most all the ranks", s->local, *local,
                       s->size, *size);
    return DT_OK;
}

dt_status dt_launch_check_rendezvous(const char *v, const char *what) {
    if (!strncmp(v, "file:", 5)) {
        if (v[5] != '/')
            return dt_fail(DT_EINVAL, "%s='%s': a file rendezvous names an absolute path every rank sees "
                           "(file:/shared/dir/rdv)", what, v);
        return DT_OK;
    }
    if (!strncmp(v, "tcp:", 4)) {
        const char *host = v + 4, *colon = strrchr(host, ':');
        if (!colon || colon == host)
            return dt_fail(DT_EINVAL, "%s='%s': a TCP rendezvous is tcp:HOST:PORT (rank 0's address)", what, v);
        const char *port = colon + 1;
        size_t n = strlen(port);
        long p = n && n <= 5 && strspn(port, "0123456789") == n ? strtol(port, NULL, 10) : 0;
        if (p < 1 || p > 65535)
            return dt_fail(DT_EINVAL, "%s='%s': the port '%s' is not a number in 1..65535", what, v, port);
        return DT_OK;
    }
    return dt_fail(DT_EINVAL, "%s='%s' is neither file:PATH nor tcp:HOST:PORT", what, v);
}

dt_status dt_launch_read(dt_launch *out, dt_env_get_fn get, const void *ctx) {
    memset(out, 0, sizeof *out);
    out->launcher = "none";
    out->size = 1;
    int present[SET_COUNT], vals[SET_COUNT][3];
    dt_status st;
    for (int i = 0; i < SET_COUNT; i++) {
        present[i] = set_present(&sets[i], get, ctx);
        if (present[i] && (st = read_set(&sets[i], get, ctx, &vals[i][0], &vals[i][1], &vals[i][2])) != DT_OK)
            return st;
    }
    if (present[SET_DETRAIN] && present[SET_OPENMPI]) {
        const env_set *d = &sets[SET_DETRAIN], *o = &sets[SET_OPENMPI];
        const char *dn[3] = {d->rank, d->size, d->local}, *on[3] = {o->rank, o->size, o->local};
        for (int k = 0; k < 3; k++)
            if (vals[SET_DETRAIN][k] != vals[SET_OPENMPI][k])
                return dt_fail(DT_EINVAL, "%s=%d disagrees with %s=%d: under mpirun leave detrain's variables "
                               "unset or give them mpirun's values", dn[k], vals[SET_DETRAIN][k], on[k],
                               vals[SET_OPENMPI][k]);
    }
    const char *rdv = get(ctx, "DETRAIN_RENDEZVOUS");
    if (rdv) {
        if (strlen(rdv) >= DT_LAUNCH_RENDEZVOUS_MAX)
            return dt_fail(DT_EINVAL, "DETRAIN_RENDEZVOUS is %zu characters long; the limit is %d", strlen(rdv),
                           DT_LAUNCH_RENDEZVOUS_MAX - 1);
        if ((st = dt_launch_check_rendezvous(rdv, "DETRAIN_RENDEZVOUS")) != DT_OK) return st;
    }
    for (int i = 0; i < SET_COUNT; i++)
        if (present[i]) {
            out->launcher = sets[i].launcher;
            out->rank = vals[i][0];
            out->size = vals[i][1];
            out->local_rank = vals[i][2];
            break;
        }
    out->by_mpirun = present[SET_OPENMPI];
    if (rdv) snprintf(out->rendezvous, sizeof out->rendezvous, "%s", rdv);
    return DT_OK;
}

static const char *environ_get(const void *ctx, const char *name) {
    (void)ctx;
    return getenv(name);
}

dt_status dt_launch_from_environ(dt_launch *out) { return dt_launch_read(out, environ_get, NULL); }
