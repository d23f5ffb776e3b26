/* The MPI engine's test driver, run by tests/dist/test_comm_mpi.sh under real mpirun. It
 * makes its communicator through the factory (dist/comm_factory.c), which loads
 * build/libdetrain-mpi.so (src/dist/comm_mpi.c) like `detrain train` does.
 *
 *   comm_driver PLUGIN check OUTDIR [RANK_ORDER|-] [det]
 *       every collective against values computed here from known per-rank inputs: the
 *       rank-ordered allreduce and reduce_scatter byte for byte (memcmp) against
 *       dt_comm_sum_ranks_* over the logical ranks' inputs, the library's against an fp64
 *       sum within a stated tolerance, int64 sums exactly, allgather and broadcast exactly;
 *       writes each rank's rank-ordered results to OUTDIR/ro_L.bin (L: logical rank) for
 *       the script's cmp across rank orders. With det: deterministic mode on, and a library
 *       reduction of floats refused.
 *   comm_driver PLUGIN stall RANK SECONDS TIMEOUT
 *       launcher process RANK sleeps SECONDS instead of joining an allreduce; every other
 *       rank must fail with the engine's timeout error within TIMEOUT + 2 s and prints
 *       "timeout-ok ELAPSED" and the message.
 *   comm_driver PLUGIN exit RANK TIMEOUT
 *       launcher process RANK exits (status 0, no MPI_Finalize) before an allreduce; the
 *       others fail as with stall.
 *   comm_driver PLUGIN order RANK_ORDER
 *       makes the communicator with that --rank-order text: prints "created" or the error.
 *   comm_driver PLUGIN nccl
 *       the factory's NCCL engine under mpirun (device cuda): the MPI engine starts as its
 *       bootstrap, then the CPU build's NCCL stand-in refuses; prints "refused: MESSAGE" and
 *       whether MPI was finalised (the bootstrap freed with the failure). */
#include "core/determinism.h"
#include "dist/comm_factory.h"
#include "dist/comm_mpi.h"
#include "dt_test.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

static double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Logical rank r's input element i: magnitudes 1e-3..1e5 mixed, so the order of additions
 * shows in the bits. */
static float in_f32(int r, size_t i) {
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + 17u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float v = (float)(h % 100003u) * ((h >> 20) % 3 == 0 ? 1.0f : (h >> 20) % 3 == 1 ? 1e-3f : 1e-8f);
    return (h & 1u) ? -v : v;
}
static double in_f64(int r, size_t i) { return (double)in_f32(r, i) * 1.0000001 + (double)in_f32(r + 7, i) * 1e-9; }
static int64_t in_i64(int r, size_t i) { return (int64_t)(i * 977u) - (int64_t)r * 1000003 + ((int64_t)1 << 40); }

static dt_status make_comm(dt_comm **c, const char *plugin, const char *order, double timeout) {
    dt_comm_spec s;
    memset(&s, 0, sizeof s);
    s.engine = DT_DIST_MPI;
    s.rank_order = order;
    s.timeout_sec = timeout;
    s.mpi_plugin = plugin;
    dt_status st = dt_launch_from_environ(&s.launch);
    return st == DT_OK ? dt_comm_create_spec(c, &s) : st;
}

static const size_t sizes[] = {1, 7, 64, 197, 1000, 100003};

/* The rank-ordered and the library allreduce and reduce_scatter of fp32 n elements. */
static void check_f32(dt_comm *c, size_t n, FILE *out) {
    int R = dt_comm_size(c), me = dt_comm_rank(c);
    float *buf = malloc(n * 4), *want = malloc(n * 4), *rev = malloc(n * 4);
    float **parts = malloc(sizeof *parts * (size_t)R);
    for (int r = 0; r < R; r++) {
        parts[r] = malloc(n * 4);
        for (size_t i = 0; i < n; i++) parts[r][i] = in_f32(r, i);
    }
    dt_comm_sum_ranks_f32(want, (const float *const *)parts, R, n);
    int order_shows = 0;
    for (size_t i = 0; i < n; i++) {
        float s = parts[R - 1][i];
        for (int r = R - 2; r >= 0; r--) s += parts[r][i];
        rev[i] = s;
        order_shows += memcmp(&rev[i], &want[i], 4) != 0;
    }
    /* with 3 ranks or more another order gives other bits (two fp32 adds commute exactly) */
    if (n >= 1000 && R >= 3) CHECKF(order_shows > 0, "n %zu: no element shows the order of additions", n);

    memcpy(buf, parts[me], n * 4);
    CHECK_OK(c->ops->allreduce(c, buf, n, DT_COMM_F32, DT_REDUCE_RANK_ORDERED, NULL));
    CHECKF(!memcmp(buf, want, n * 4), "n %zu: rank-ordered fp32 allreduce differs from the logical-order sum", n);
    if (out) fwrite(buf, 4, n, out);

    memcpy(buf, parts[me], n * 4);
    CHECK_OK(c->ops->reduce_scatter(c, buf, n, DT_COMM_F32, DT_REDUCE_RANK_ORDERED, NULL));
    size_t off, len;
    dt_comm_chunk(n, R, me, DT_COMM_ALIGN, &off, &len);
    CHECKF(!memcmp(buf + off, want + off, len * 4), "n %zu: rank-ordered fp32 reduce_scatter chunk differs", n);
    if (out) fwrite(buf + off, 4, len, out);

    if (!dt_det()) {
        /* the library's order is its own: within 1e-5 of the largest partial magnitude */
        for (int k = 0; k < 2; k++) {
            memcpy(buf, parts[me], n * 4);
            if (k == 0) CHECK_OK(c->ops->allreduce(c, buf, n, DT_COMM_F32, DT_REDUCE_LIBRARY, NULL));
            else CHECK_OK(c->ops->reduce_scatter(c, buf, n, DT_COMM_F32, DT_REDUCE_LIBRARY, NULL));
            size_t lo = k == 0 ? 0 : off, hi = k == 0 ? n : off + len, bad = 0;
            for (size_t i = lo; i < hi; i++) {
                double ref = 0.0, mag = 0.0;
                for (int r = 0; r < R; r++) {
                    ref += (double)parts[r][i];
                    mag += fabs((double)parts[r][i]);
                }
                bad += fabs((double)buf[i] - ref) > 1e-5 * mag + 1e-30;
            }
            CHECKF(bad == 0, "n %zu: library %s: %zu elements off the fp64 sum", n, k ? "reduce_scatter" : "allreduce",
                   bad);
        }
    } else {
        memcpy(buf, parts[me], n * 4);
        dt_status st = c->ops->allreduce(c, buf, n, DT_COMM_F32, DT_REDUCE_LIBRARY, NULL);
        CHECKF(st == DT_EDETERMINISM && strstr(dt_errmsg(), "deterministic mode"), "library fp32 in det mode: %s",
               dt_errmsg());
    }
    for (int r = 0; r < R; r++) free(parts[r]);
    free(parts);
    free(buf);
    free(want);
    free(rev);
}

static void check_f64_i64(dt_comm *c, size_t n, FILE *out) {
    int R = dt_comm_size(c), me = dt_comm_rank(c);
    double *d = malloc(n * 8), *dw = malloc(n * 8);
    double **dp = malloc(sizeof *dp * (size_t)R);
    int64_t *q = malloc(n * 8), *qw = calloc(n, 8);
    for (int r = 0; r < R; r++) {
        dp[r] = malloc(n * 8);
        for (size_t i = 0; i < n; i++) {
            dp[r][i] = in_f64(r, i);
            qw[i] += in_i64(r, i);
        }
    }
    dt_comm_sum_ranks_f64(dw, (const double *const *)dp, R, n);
    memcpy(d, dp[me], n * 8);
    CHECK_OK(dt_comm_allreduce(c, d, n, DT_COMM_F64, NULL));
    if (dt_det()) {
        CHECKF(!memcmp(d, dw, n * 8), "n %zu: rank-ordered fp64 allreduce differs", n);
        if (out) fwrite(d, 8, n, out);
    }
    for (int mode = 0; mode < 2; mode++) {
        for (size_t i = 0; i < n; i++) q[i] = in_i64(me, i);
        CHECK_OK(c->ops->allreduce(c, q, n, DT_COMM_I64, mode ? DT_REDUCE_RANK_ORDERED : DT_REDUCE_LIBRARY, NULL));
        CHECKF(!memcmp(q, qw, n * 8), "n %zu: int64 allreduce (mode %d) is not the exact sum", n, mode);
    }
    /* allgather: each rank's chunk holds its own values; afterwards every chunk is its owner's */
    size_t off, len;
    for (size_t i = 0; i < n; i++) q[i] = -1;
    dt_comm_chunk(n, R, me, DT_COMM_ALIGN, &off, &len);
    for (size_t i = off; i < off + len; i++) q[i] = in_i64(me, i);
    CHECK_OK(dt_comm_allgather(c, q, n, DT_COMM_I64, NULL));
    size_t bad = 0;
    for (int r = 0; r < R; r++) {
        dt_comm_chunk(n, R, r, DT_COMM_ALIGN, &off, &len);
        for (size_t i = off; i < off + len; i++) bad += q[i] != in_i64(r, i);
    }
    CHECKF(bad == 0, "n %zu: allgather: %zu elements not their owner's", n, bad);
    /* broadcast from the last logical rank */
    for (size_t i = 0; i < n; i++) d[i] = dp[me][i];
    CHECK_OK(dt_comm_broadcast(c, d, n * 8, R - 1, NULL));
    CHECKF(!memcmp(d, dp[R - 1], n * 8), "n %zu: broadcast from rank %d differs", n, R - 1);
    for (int r = 0; r < R; r++) free(dp[r]);
    free(dp);
    free(d);
    free(dw);
    free(q);
    free(qw);
}

static int check(const char *plugin, const char *outdir, const char *order, int det) {
    dt_flag_use use = {"--deterministic-mode", ""};
    dt_det_request req = {det, &use, det};
    if (dt_determinism_apply(&req) != DT_OK) {
        fprintf(stderr, "determinism: %s\n", dt_errmsg());
        return 1;
    }
    dt_comm *c = NULL;
    CHECK_OK(make_comm(&c, plugin, order, 30.0));
    if (!c) return dt_test_report();
    CHECK(!strcmp(c->ops->engine, "mpi"));
    const char *rec = dt_comm_mpi_record(c);
    CHECKF(strstr(rec, "\"mpi_library\":\"Open MPI") && strstr(rec, "\"openmpi_coll_params\":{\"coll\":"), "%s", rec);
    char path[4200];
    snprintf(path, sizeof path, "%s/ro_%d.bin", outdir, dt_comm_rank(c));
    FILE *out = fopen(path, "wb");
    CHECKF(out != NULL, "%s: %s", path, strerror(errno));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        check_f32(c, sizes[k], out);
        check_f64_i64(c, sizes[k], out);
    }
    CHECK_OK(dt_comm_barrier(c));
    CHECK(c->calls > 0 && dt_comm_time_ms(c) > 0.0);
    if (out) fclose(out);
    fprintf(stderr, "logical rank %d of %d (process %s): ", dt_comm_rank(c), dt_comm_size(c),
            getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "?");
    dt_comm_free(c);
    return dt_test_report();
}

/* The ranks other than `victim` must fail with the timeout error in time. */
static int lose_a_rank(const char *plugin, int victim, double sleep_sec, double timeout, int exits) {
    dt_comm *c = NULL;
    if (make_comm(&c, plugin, NULL, timeout) != DT_OK) {
        fprintf(stderr, "create: %s\n", dt_errmsg());
        return 1;
    }
    int me = atoi(getenv("OMPI_COMM_WORLD_RANK"));
    if (me == victim) {
        if (exits) _exit(0);
        struct timespec ts = {(time_t)sleep_sec, 0};
        nanosleep(&ts, NULL);
        return 0;
    }
    float x[256] = {0};
    double t0 = now_sec();
    dt_status st = dt_comm_allreduce(c, x, 256, DT_COMM_F32, NULL);
    double elapsed = now_sec() - t0;
    int ok = st == DT_EIO && strstr(dt_errmsg(), "the MPI engine: allreduce") &&
             strstr(dt_errmsg(), "--dist-timeout-sec") && elapsed >= timeout * 0.9 && elapsed <= timeout + 2.0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dt_errmsg());
    /* the communicator refuses from now on */
    dt_status again = dt_comm_barrier(c);
    ok = ok && again == DT_ESTATE && strstr(dt_errmsg(), "cannot be used again");
    fprintf(stderr, "%s %.2f rank %d: %s\n", ok ? "timeout-ok" : "timeout-BAD", elapsed, me, msg);
    fflush(stderr);
    dt_comm_free(c);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[2], "check"))
        return check(argv[1], argv[3], argc > 4 && strcmp(argv[4], "-") ? argv[4] : NULL,
                     argc > 5 && !strcmp(argv[5], "det"));
    if (argc == 6 && !strcmp(argv[2], "stall"))
        return lose_a_rank(argv[1], atoi(argv[3]), atof(argv[4]), atof(argv[5]), 0);
    if (argc == 5 && !strcmp(argv[2], "exit"))
        return lose_a_rank(argv[1], atoi(argv[3]), 0.0, atof(argv[4]), 1);
    if (argc == 4 && !strcmp(argv[2], "order")) {
        dt_comm *c = NULL;
        if (make_comm(&c, argv[1], argv[3], 10.0) != DT_OK) {
            printf("error: %s\n", dt_errmsg());
            return 2;
        }
        printf("created: logical rank %d of %d\n", dt_comm_rank(c), dt_comm_size(c));
        dt_comm_free(c);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[2], "nccl")) {
        dt_comm_spec s;
        memset(&s, 0, sizeof s);
        s.engine = DT_DIST_NCCL;
        s.device = 1;
        s.timeout_sec = 10.0;
        s.mpi_plugin = argv[1];
        dt_comm *c = NULL;
        dt_status st = dt_launch_from_environ(&s.launch);
        if (st == DT_OK) st = dt_comm_create_spec(&c, &s);
        if (st == DT_OK) {
            printf("created an NCCL communicator on a CPU build\n");
            dt_comm_free(c);
            return 1;
        }
        printf("refused (%s, communicator %s): %s\n", dt_status_name(st), c ? "left" : "none", dt_errmsg());
        return c ? 1 : 0;
    }
    fprintf(stderr, "usage: comm_driver PLUGIN check OUTDIR [ORDER|-] [det] | stall RANK SECS TIMEOUT | "
                    "exit RANK TIMEOUT | order ORDER | nccl\n");
    return 2;
}
