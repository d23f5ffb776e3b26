/* The communicator factory (src/dist/comm_factory.c): the engine each (--dist-engine,
 * --device, launch) resolves to, every contradiction refused with its reason, --rank-order
 * parsed and refused, the MPI plugin's absence named by the loader (comm_mpi_load.c), and
 * env.json's record. The MPI
 * engine itself runs in tests/dist/test_comm_mpi.sh (real mpirun). */
#include "dist/comm_factory.h"
#include "dist/comm_mpi.h"
#include "dt_test.h"

#include <string.h>

static dt_launch launch(const char *launcher, int rank, int size, int by_mpirun, const char *rdv) {
    dt_launch l;
    memset(&l, 0, sizeof l);
    l.launcher = launcher;
    l.rank = rank;
    l.size = size;
    l.by_mpirun = by_mpirun;
    snprintf(l.rendezvous, sizeof l.rendezvous, "%s", rdv);
    return l;
}

typedef struct engine_case {
    int engine, device;
    const char *launcher;
    int size, by_mpirun;
    const char *rdv;
    int want;            /* the engine, or -1: refused */
    const char *words;   /* the refusal's message holds this */
} engine_case;

static void engines(void) {
    static const engine_case cases[] = {
        {DT_DIST_AUTO, 0, "none", 1, 0, "", DT_DIST_SINGLE, NULL},
        {DT_DIST_AUTO, 1, "none", 1, 0, "", DT_DIST_SINGLE, NULL},
        {DT_DIST_AUTO, 0, "openmpi", 1, 1, "", DT_DIST_SINGLE, NULL},
        {DT_DIST_AUTO, 0, "openmpi", 3, 1, "", DT_DIST_MPI, NULL},
        {DT_DIST_AUTO, 1, "openmpi", 2, 1, "", DT_DIST_NCCL, NULL},
        {DT_DIST_AUTO, 1, "slurm", 8, 0, "tcp:n1:29500", DT_DIST_NCCL, NULL},
        {DT_DIST_AUTO, 0, "slurm", 2, 0, "", -1, "launch with mpirun"},
        {DT_DIST_AUTO, 1, "detrain", 2, 0, "", -1, "DETRAIN_RENDEZVOUS"},
        {DT_DIST_SINGLE, 0, "openmpi", 2, 1, "", -1, "--dist-engine single under openmpi with 2 ranks"},
        {DT_DIST_SINGLE, 1, "slurm", 1, 0, "", DT_DIST_SINGLE, NULL},
        {DT_DIST_MPI, 0, "openmpi", 2, 1, "", DT_DIST_MPI, NULL},
        {DT_DIST_MPI, 0, "slurm", 2, 0, "", DT_DIST_MPI, NULL},
        {DT_DIST_MPI, 1, "openmpi", 2, 1, "", -1, "--device cuda"},
        {DT_DIST_NCCL, 0, "none", 1, 0, "", -1, "needs --device cuda"},
        {DT_DIST_NCCL, 1, "none", 1, 0, "", DT_DIST_NCCL, NULL},
        {DT_DIST_NCCL, 1, "detrain", 4, 0, "file:/x/rdv", DT_DIST_NCCL, NULL},
        {DT_DIST_NCCL, 1, "detrain", 4, 0, "", -1, "DETRAIN_RENDEZVOUS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const engine_case *c = &cases[i];
        dt_comm_spec s = {c->engine, c->device, NULL, 1.0, launch(c->launcher, 0, c->size, c->by_mpirun, c->rdv), NULL};
        int e = -1;
        dt_status st = dt_comm_resolve_engine(&s, &e);
        if (c->want >= 0) {
            CHECKF(st == DT_OK && e == c->want, "case %zu: %s, engine %d want %d", i, dt_errmsg(), e, c->want);
        } else {
            CHECKF(st == DT_EINVAL, "case %zu: not refused (engine %d)", i, e);
            CHECKF(strstr(dt_errmsg(), c->words), "case %zu: '%s' not in: %s", i, c->words, dt_errmsg());
        }
    }
}

static void rank_order(void) {
    int o[4];
    CHECK_OK(dt_comm_parse_rank_order(NULL, 3, o));
    CHECK(o[0] == 0 && o[1] == 1 && o[2] == 2);
    CHECK_OK(dt_comm_parse_rank_order("2,0,3,1", 4, o));
    CHECK(o[0] == 2 && o[1] == 0 && o[2] == 3 && o[3] == 1);
    CHECK_OK(dt_comm_parse_rank_order("0", 1, o));
    static const struct {
        const char *text;
        int size;
        const char *words;
    } bad[] = {
        {"1,0,1", 3, "appears twice"}, {"0,1", 3, "lists 2 ranks; the job has 3"}, {"0,1,2", 2, "each of 0..1 once"},
        {"0,3", 2, "each of 0..1 once"}, {"0,,1", 3, "entry 1 is not a rank number"}, {"0,1,", 2, "entry 2"},
        {"-1,0", 2, "entry 0"}, {"0, 1", 2, "entry 1"}, {"", 1, "entry 0"}, {"a", 1, "entry 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_status st = dt_comm_parse_rank_order(bad[i].text, bad[i].size, o);
        CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "--rank-order") && strstr(dt_errmsg(), bad[i].words),
               "'%s' size %d: %s", bad[i].text, bad[i].size, dt_errmsg());
    }
}

/* The single engine, a refused rank order before anything starts, and a missing plugin. */
static void create(void) {
    dt_comm *c = NULL;
    dt_comm_spec s = {DT_DIST_AUTO, 0, NULL, 1.0, launch("none", 0, 1, 0, ""), NULL};
    CHECK_OK(dt_comm_create_spec(&c, &s));
    CHECK(c && !strcmp(c->ops->engine, "single") && dt_comm_size(c) == 1);
    float x = 1.5f;
    CHECK_OK(dt_comm_allreduce(c, &x, 1, DT_COMM_F32, NULL));
    CHECK_OK(dt_comm_barrier(c));
    CHECK(x == 1.5f && c->calls == 2 && dt_comm_time_ms(c) >= 0.0);
    char rec[512];
    dt_comm_record_json(c, &s, 1, rec, sizeof rec);
    CHECKF(!strcmp(rec, "{\"engine\":\"single\",\"world_size\":1}"), "%s", rec);
    dt_comm_record_json(c, &s, 0, rec, sizeof rec);
    CHECKF(strstr(rec, "\"launcher\":\"none\"") && strstr(rec, "\"rank_order\":[0]"), "%s", rec);
    dt_comm_free(c);

    s.rank_order = "1";
    CHECK(dt_comm_create_spec(&c, &s) == DT_EINVAL && c == NULL);
    s = (dt_comm_spec){DT_DIST_MPI, 0, NULL, 1.0, launch("none", 0, 1, 0, ""), "/nonexistent/libdetrain-mpi.so"};
    CHECK(dt_comm_create_spec(&c, &s) == DT_EUNSUPPORTED && c == NULL);
    CHECKF(strstr(dt_errmsg(), "/nonexistent/libdetrain-mpi.so") && strstr(dt_errmsg(), "make mpi"), "%s", dt_errmsg());
    /* the NCCL engine on this build: the stand-in refuses, no communicator is left */
    s = (dt_comm_spec){DT_DIST_NCCL, 1, NULL, 1.0, launch("none", 0, 1, 0, ""), NULL};
    CHECK(dt_comm_create_spec(&c, &s) == DT_EUNSUPPORTED && c == NULL);
    char path[4200];
    dt_comm_mpi_default_plugin(path, sizeof path);
    CHECKF(strstr(path, "/libdetrain-mpi.so") && path[0] == '/', "%s", path);
}

/* The train config's flags reach the spec. */
static void from_config(void) {
    dt_train_config cfg;
    int help;
    char a0[] = "--dist-engine", a1[] = "mpi", a2[] = "--rank-order", a3[] = "1,0", a4[] = "--dist-timeout-sec",
         a5[] = "2.5";
    char *argv[] = {a0, a1, a2, a3, a4, a5};
    CHECK_OK(dt_train_config_parse(&cfg, 6, argv, &help));
    dt_comm_spec s;
    CHECK_OK(dt_comm_spec_from_config(&s, &cfg));
    CHECK(s.engine == DT_DIST_MPI && !strcmp(s.rank_order, "1,0") && s.timeout_sec == 2.5 && s.device == 0);
    dt_train_config_free(&cfg);
    char b0[] = "--dist-timeout-sec", b1[] = "0";
    char *bad[] = {b0, b1};
    CHECK(dt_train_config_parse(&cfg, 2, bad, &help) == DT_EINVAL && strstr(dt_errmsg(), "--dist-timeout-sec"));
    dt_train_config_free(&cfg);
    char c0[] = "--dist-engine", c1[] = "gloo";
    char *bad2[] = {c0, c1};
    CHECK(dt_train_config_parse(&cfg, 2, bad2, &help) == DT_EINVAL && strstr(dt_errmsg(), "--dist-engine"));
    dt_train_config_free(&cfg);
}

int main(void) {
    RUN(engines);
    RUN(rank_order);
    RUN(create);
    RUN(from_config);
    return dt_test_report();
}
