/* The launcher's environment read by dist/launch.c: each launcher's set, the order they
 * decide in, and every malformed, out-of-range or inconsistent value refused with a
 * message naming the variable. Environments are tables, read through the env getter. */
#include "dist/launch.h"
#include "dt_test.h"

#include <string.h>

/* An environment: NAME=VALUE entries, NULL-terminated. */
typedef struct env {
    const char *kv[12];
} env;

static const char *env_get(const void *ctx, const char *name) {
    const env *e = ctx;
    size_t n = strlen(name);
    for (int i = 0; e->kv[i]; i++)
        if (!strncmp(e->kv[i], name, n) && e->kv[i][n] == '=') return e->kv[i] + n + 1;
    return NULL;
}

typedef struct good_case {
    env e;
    const char *launcher;
    int rank, size, local, by_mpirun;
    const char *rendezvous;
} good_case;

static void accepted(void) {
    static const good_case cases[] = {
        {{{NULL}}, "none", 0, 1, 0, 0, ""},
        {{{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL}},
         "openmpi", 2, 3, 1, 1, ""},
        {{{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "DETRAIN_RENDEZVOUS=tcp:node01:29500", NULL}},
         "slurm", 5, 8, 1, 0, "tcp:node01:29500"},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=1", "DETRAIN_LOCAL_RANK=0", NULL}}, "detrain", 0, 1, 0, 0, ""},
        {{{"DETRAIN_RANK=3", "DETRAIN_WORLD_SIZE=4", "DETRAIN_LOCAL_RANK=3", "DETRAIN_RENDEZVOUS=file:/shared/rdv",
           NULL}}, "detrain", 3, 4, 3, 0, "file:/shared/rdv"},
        /* mpirun inside a Slurm allocation: the allocation's SLURM_* describe the batch step */
        {{{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "OMPI_COMM_WORLD_RANK=1",
           "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL}}, "openmpi", 1, 2, 1, 1, ""},
        /* detrain's set agreeing with mpirun's */
        {{{"DETRAIN_RANK=1", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", "OMPI_COMM_WORLD_RANK=1",
           "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL}}, "detrain", 1, 2, 0, 1, ""},
        /* detrain's set wins over Slurm's (not compared) */
        {{{"DETRAIN_RANK=1", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=1", "SLURM_PROCID=0", "SLURM_NTASKS=1",
           "SLURM_LOCALID=0", "DETRAIN_RENDEZVOUS=tcp:[fe80::1]:7", NULL}}, "detrain", 1, 2, 1, 0, "tcp:[fe80::1]:7"},
        {{{"DETRAIN_RANK=007", "DETRAIN_WORLD_SIZE=1048576", "DETRAIN_LOCAL_RANK=0", NULL}},
         "detrain", 7, 1048576, 0, 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const good_case *c = &cases[i];
        dt_launch l;
        dt_status st = dt_launch_read(&l, env_get, &c->e);
        CHECKF(st == DT_OK, "case %zu: %s", i, dt_errmsg());
        if (st != DT_OK) continue;
        CHECKF(!strcmp(l.launcher, c->launcher), "case %zu: launcher %s, want %s", i, l.launcher, c->launcher);
        CHECKF(l.rank == c->rank && l.size == c->size && l.local_rank == c->local && l.by_mpirun == c->by_mpirun,
               "case %zu: rank %d size %d local %d mpirun %d", i, l.rank, l.size, l.local_rank, l.by_mpirun);
        CHECKF(!strcmp(l.rendezvous, c->rendezvous), "case %zu: rendezvous '%s'", i, l.rendezvous);
    }
}

typedef struct bad_case {
    env e;
    const char *names[3]; /* words the message must hold */
} bad_case;

static void refused(void) {
    static const bad_case cases[] = {
        {{{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL}}, {"OMPI_COMM_WORLD_SIZE", "is not"}},
        {{{"SLURM_PROCID=0", "SLURM_NTASKS=2", NULL}}, {"SLURM_LOCALID", "come together"}},
        {{{"DETRAIN_RANK=-1", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_RANK='-1'", "decimal"}},
        {{{"DETRAIN_RANK=+1", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_RANK", "decimal"}},
        {{{"DETRAIN_RANK=1 ", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_RANK", "decimal"}},
        {{{"DETRAIN_RANK=", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_RANK", "decimal"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=2x", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_WORLD_SIZE", "decimal"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=99999999", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_WORLD_SIZE", "limit"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=999999999999", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_WORLD_SIZE"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=0", "DETRAIN_LOCAL_RANK=0", NULL}}, {"DETRAIN_WORLD_SIZE=0"}},
        {{{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL}},
         {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2"}},
        {{{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=2", NULL}}, {"SLURM_LOCALID=2", "SLURM_NTASKS=2"}},
        /* a malformed set is refused even when another set decides */
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=1", "DETRAIN_LOCAL_RANK=0", "SLURM_PROCID=x", "SLURM_NTASKS=1",
           "SLURM_LOCALID=0", NULL}}, {"SLURM_PROCID='x'"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", "OMPI_COMM_WORLD_RANK=1",
           "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL}},
         {"DETRAIN_RANK=0", "OMPI_COMM_WORLD_RANK=1", "disagrees"}},
        {{{"DETRAIN_RANK=0", "DETRAIN_WORLD_SIZE=2", "DETRAIN_LOCAL_RANK=0", "OMPI_COMM_WORLD_RANK=0",
           "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL}}, {"DETRAIN_WORLD_SIZE=2", "OMPI_COMM_WORLD_SIZE=3"}},
        {{{"DETRAIN_RENDEZVOUS=file:relative/path", NULL}}, {"DETRAIN_RENDEZVOUS", "absolute"}},
        {{{"DETRAIN_RENDEZVOUS=tcp:host", NULL}}, {"DETRAIN_RENDEZVOUS", "tcp:HOST:PORT"}},
        {{{"DETRAIN_RENDEZVOUS=tcp::29500", NULL}}, {"DETRAIN_RENDEZVOUS", "tcp:HOST:PORT"}},
        {{{"DETRAIN_RENDEZVOUS=tcp:host:0", NULL}}, {"DETRAIN_RENDEZVOUS", "1..65535"}},
        {{{"DETRAIN_RENDEZVOUS=tcp:host:65536", NULL}}, {"DETRAIN_RENDEZVOUS", "1..65535"}},
        {{{"DETRAIN_RENDEZVOUS=tcp:host:29x", NULL}}, {"DETRAIN_RENDEZVOUS", "1..65535"}},
        {{{"DETRAIN_RENDEZVOUS=nfs:/x", NULL}}, {"DETRAIN_RENDEZVOUS", "neither"}},
        {{{"DETRAIN_RENDEZVOUS=", NULL}}, {"DETRAIN_RENDEZVOUS", "neither"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        dt_launch l;
        dt_status st = dt_launch_read(&l, env_get, &c->e);
        CHECKF(st == DT_EINVAL, "case %zu: status %s", i, dt_status_name(st));
        for (int k = 0; k < 3 && c->names[k]; k++)
            CHECKF(strstr(dt_errmsg(), c->names[k]) != NULL, "case %zu: '%s' not in: %s", i, c->names[k], dt_errmsg());
        CHECKF(l.size == 1 && l.rank == 0 && !strcmp(l.launcher, "none"), "case %zu: a refused read left rank %d of %d",
               i, l.rank, l.size);
    }
}

/* The process's own environment goes through the same reader. */
static void from_environ(void) {
    setenv("DETRAIN_RANK", "1", 1);
    setenv("DETRAIN_WORLD_SIZE", "3", 1);
    setenv("DETRAIN_LOCAL_RANK", "1", 1);
    dt_launch l;
    CHECK_OK(dt_launch_from_environ(&l));
    CHECK(!strcmp(l.launcher, "detrain") && l.rank == 1 && l.size == 3 && l.local_rank == 1);
    setenv("DETRAIN_LOCAL_RANK", "3", 1);
    CHECK(dt_launch_from_environ(&l) == DT_EINVAL && strstr(dt_errmsg(), "DETRAIN_LOCAL_RANK=3"));
    unsetenv("DETRAIN_RANK");
    unsetenv("DETRAIN_WORLD_SIZE");
    unsetenv("DETRAIN_LOCAL_RANK");
}

int main(void) {
    RUN(accepted);
    RUN(refused);
    RUN(from_environ);
    return dt_test_report();
}
