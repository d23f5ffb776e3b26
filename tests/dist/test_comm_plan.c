/* The device engines' host logic (src/dist/comm_plan.c): the rank-ordered reduction's send
 * and staging tables (a whole N-rank reduction simulated through them, bytes against the
 * rank-ordered sum), ZeRO-1's shard of a tensor, rendezvous parsing, and the id exchange
 * through a real file and real TCP sockets between forked processes (timeouts, stale
 * files, world sizes that disagree). */
#include "dist/comm.h"
#include "dist/comm_plan.h"
#include "dt_test.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* The tables agree between ranks: what rank r sends to rank j is rank j's own chunk; slots
 * are aligned and disjoint. Then an N-rank reduction run through the tables equals the
 * rank-ordered sum bit for bit. */
static void plan_tables(void) {
    const size_t ns[] = {0, 1, 63, 64, 65, 1000, 4099};
    const int sizes[] = {1, 2, 3, 5, 8};
    const size_t aligns[] = {1, 64};
    for (size_t ia = 0; ia < 2; ia++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
            for (size_t is = 0; is < sizeof sizes / sizeof sizes[0]; is++) {
                size_t n = ns[in], align = aligns[ia];
                int N = sizes[is];
                dt_comm_plan p[8];
                for (int r = 0; r < N; r++) CHECK_OK(dt_comm_plan_make(&p[r], n, r, N, align));
                for (int r = 0; r < N; r++) {
                    CHECK(p[r].staging >= (size_t)N * p[r].own_len);
                    for (int s = 0; s < N; s++) {
                        size_t slot = dt_comm_plan_slot(&p[r], s);
                        CHECKF(slot % align == 0, "n %zu N %d: slot %d at %zu", n, N, s, slot);
                        CHECK(slot + p[r].own_len <= p[r].staging);
                        if (s + 1 < N) CHECK(dt_comm_plan_slot(&p[r], s + 1) >= slot + p[r].own_len);
                    }
                    for (int j = 0; j < N; j++) {
                        size_t off, len;
                        dt_comm_plan_send(&p[r], j, &off, &len);
                        CHECKF(off == p[j].own_off && len == p[j].own_len, "n %zu N %d: rank %d sends [%zu,+%zu) to "
                               "rank %d, which owns [%zu,+%zu)", n, N, r, off, len, j, p[j].own_off, p[j].own_len);
                    }
                }
                /* the reduction through the tables */
                float *buf[8], *stage[8], *want = malloc(sizeof(float) * (n + 1));
                const float *contrib[8];
                for (int r = 0; r < N; r++) {
                    buf[r] = malloc(sizeof(float) * (n + 1));
                    stage[r] = malloc(sizeof(float) * (p[r].staging + 1));
                    for (size_t i = 0; i < n; i++)
                        buf[r][i] = (float)((i * 2654435761u + (unsigned)r * 977u) % 10007) * (r % 2 ? 1e-4f : 1e3f);
                    contrib[r] = buf[r];
                }
                dt_comm_sum_ranks_f32(want, contrib, N, n);
                for (int r = 0; r < N; r++) /* the grouped sends: chunk j of rank r into rank j's slot r */
                    for (int j = 0; j < N; j++) {
                        size_t off, len;
                        dt_comm_plan_send(&p[r], j, &off, &len);
                        memcpy(stage[j] + dt_comm_plan_slot(&p[j], r), buf[r] + off, sizeof(float) * len);
                    }
                for (int j = 0; j < N; j++) { /* the rank-ordered sum of the slots, into the own chunk */
                    const float *slots[8];
                    for (int s = 0; s < N; s++) slots[s] = stage[j] + dt_comm_plan_slot(&p[j], s);
                    dt_comm_sum_ranks_f32(buf[j] + p[j].own_off, slots, N, p[j].own_len);
                }
                for (int r = 0; r < N; r++) /* the gather: every rank's chunk to every rank */
                    for (int j = 0; j < N; j++)
                        if (j != r) memcpy(buf[r] + p[j].own_off, buf[j] + p[j].own_off, sizeof(float) * p[j].own_len);
                for (int r = 0; r < N; r++) {
                    CHECKF(n == 0 || !memcmp(buf[r], want, sizeof(float) * n), "n %zu N %d align %zu: rank %d", n, N,
                           align, r);
                    free(buf[r]);
                    free(stage[r]);
                }
                free(want);
            }
    dt_comm_plan p;
    CHECK(dt_comm_plan_make(&p, 10, 2, 2, 1) == DT_EINVAL);
    CHECK(dt_comm_plan_make(&p, 10, -1, 2, 1) == DT_EINVAL);
    CHECK(dt_comm_plan_make(&p, 10, 0, 0, 1) == DT_EINVAL);
    CHECK(dt_comm_plan_make(&p, 10, 0, 1, 0) == DT_EINVAL);
}

/* Over the ranks, a tensor's shard parts tile it exactly, in rank order. */
static void shard_in_tensor(void) {
    const size_t n = 10000;
    const size_t tensors[][2] = {{0, 10000}, {0, 1}, {0, 64}, {63, 2}, {100, 3333}, {9999, 1}, {5000, 0}};
    for (int N = 1; N <= 7; N++)
        for (size_t t = 0; t < sizeof tensors / sizeof tensors[0]; t++) {
            size_t next = tensors[t][0], end = tensors[t][0] + tensors[t][1];
            for (int r = 0; r < N; r++) {
                size_t lo, hi, off, len;
                dt_comm_shard_in_tensor(n, N, r, tensors[t][0], tensors[t][1], &lo, &hi);
                dt_comm_chunk(n, N, r, DT_COMM_ALIGN, &off, &len);
                CHECK(lo <= hi);
                if (lo == hi) continue;
                CHECKF(lo == next, "N %d tensor %zu rank %d: starts %zu, not %zu", N, t, r, lo, next);
                CHECK(lo >= off && hi <= off + len);
                next = hi;
            }
            CHECKF(next == end, "N %d tensor %zu: the parts end at %zu, not %zu", N, t, next, end);
        }
}

static void parse(void) {
    dt_rendezvous rv;
    CHECK_OK(dt_rendezvous_parse("file:/tmp/x/rv", &rv));
    CHECK(rv.kind == DT_RV_FILE && !strcmp(rv.path, "/tmp/x/rv"));
    CHECK_OK(dt_rendezvous_parse("file:rel:with:colons", &rv));
    CHECK(rv.kind == DT_RV_FILE && !strcmp(rv.path, "rel:with:colons"));
    CHECK_OK(dt_rendezvous_parse("tcp:node-07.cluster:29500", &rv));
    CHECK(rv.kind == DT_RV_TCP && !strcmp(rv.host, "node-07.cluster") && rv.port == 29500);
    CHECK_OK(dt_rendezvous_parse("tcp:127.0.0.1:1", &rv));
    CHECK(rv.port == 1 && !strcmp(rv.host, "127.0.0.1"));
    CHECK_OK(dt_rendezvous_parse("tcp:[::1]:65535", &rv));
    CHECK(rv.kind == DT_RV_TCP && !strcmp(rv.host, "::1") && rv.port == 65535);
    const struct { const char *text, *says; } bad[] = {
        {"", "empty"}, {"file:", "names no file"}, {"tcp:", "names no port"}, {"tcp:host", "names no port"},
        {"tcp::29500", "names no host"}, {"tcp:host:0", "not a number in 1-65535"},
        {"tcp:host:65536", "not a number in 1-65535"}, {"tcp:host:29x", "not a number"}, {"tcp:host:", "not a number"},
        {"tcp:host:-5", "not a number"}, {"tcp:host:+5", "not a number"}, {"tcp:::1:5", "in brackets"},
        {"tcp:[::1]5", "[ADDRESS]:PORT"}, {"tcp:[::1", "[ADDRESS]:PORT"}, {"http://host:1", "neither file: nor tcp:"},
        {"/tmp/rv", "neither file: nor tcp:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_status st = dt_rendezvous_parse(bad[i].text, &rv);
        CHECKF(st == DT_EINVAL, "'%s' -> %s", bad[i].text, dt_status_name(st));
        CHECKF(strstr(dt_errmsg(), bad[i].says) != NULL, "'%s': %s", bad[i].text, dt_errmsg());
        CHECKF(strstr(dt_errmsg(), "file:PATH") != NULL || strstr(dt_errmsg(), "too long"), "'%s': %s", bad[i].text,
               dt_errmsg());
    }
    CHECK(dt_rendezvous_parse(NULL, &rv) == DT_EINVAL);
}

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void id_of_run(unsigned char *id, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) id[i] = (unsigned char)((i * 131u + seed * 7u) ^ (i >> 3));
}

enum { ID_BYTES = 128, ID_WRONG = 100 };

/* A child process as rank `rank` of `size`: after delay_ms, receives the id; exits with the
 * exchange's status, or ID_WRONG when it received other bytes. */
static pid_t spawn_rank(const char *text, int rank, int size, int delay_ms, int timeout_ms, unsigned seed) {
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (delay_ms) usleep((useconds_t)delay_ms * 1000u);
    dt_rendezvous rv;
    if (dt_rendezvous_parse(text, &rv) != DT_OK) _exit(99);
    unsigned char id[ID_BYTES], want[ID_BYTES];
    memset(id, 0, sizeof id);
    id_of_run(want, sizeof want, seed);
    dt_status st = dt_rendezvous_exchange(&rv, rank, size, id, sizeof id, timeout_ms);
    if (st != DT_OK) fprintf(stderr, "  (rank %d, as expected or not: %s)\n", rank, dt_errmsg());
    _exit(st != DT_OK ? (int)st : memcmp(id, want, sizeof id) ? ID_WRONG : 0);
}

static int wait_rank(pid_t pid) {
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* Rank 0 in this process, ranks 1..size-1 forked, each started after its delay. */
static void exchange_ok(const char *text, int size, const int *delays, int rank0_delay, unsigned seed) {
    pid_t kids[8];
    for (int r = 1; r < size; r++) kids[r] = spawn_rank(text, r, size, delays[r], 5000, seed);
    usleep((useconds_t)rank0_delay * 1000u);
    dt_rendezvous rv;
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    unsigned char id[ID_BYTES];
    id_of_run(id, sizeof id, seed);
    CHECK_OK(dt_rendezvous_exchange(&rv, 0, size, id, sizeof id, 5000));
    for (int r = 1; r < size; r++) {
        int rc = wait_rank(kids[r]);
        CHECKF(rc == 0, "%s: rank %d of %d exited %d", text, r, size, rc);
    }
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void file_exchange(void) {
    char dir[256], text[400], path[300];
    dt_test_scratch(dir, sizeof dir, "rv_file");
    snprintf(path, sizeof path, "%s/rv", dir);
    snprintf(text, sizeof text, "file:%s", path);
    const int late_readers[] = {0, 0, 0, 0}, early_readers[] = {0, 200, 50, 0};
    exchange_ok(text, 4, late_readers, 0, 1); /* readers poll before rank 0 writes */
    CHECKF(!exists(path), "rank 0 left %s behind", path);
    exchange_ok(text, 4, early_readers, 0, 2); /* readers come after */
    exchange_ok(text, 2, late_readers, 300, 3);
    /* the run leaves nothing behind: a following run can use the same path */
    char ack[400];
    snprintf(ack, sizeof ack, "%s.ack.1", path);
    CHECK(!exists(path) && !exists(ack));

    unsigned char id[ID_BYTES];
    id_of_run(id, sizeof id, 4);
    dt_rendezvous rv;
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    /* one rank alone needs no file */
    CHECK_OK(dt_rendezvous_exchange(&rv, 0, 1, id, sizeof id, 100));
    CHECK(!exists(path));
    /* an earlier run's file: rank 0 refuses it, naming the file */
    FILE *f = fopen(path, "w");
    if (f) { fputs("stale", f); fclose(f); }
    dt_status st = dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 200);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "exists already") && strstr(dt_errmsg(), path), "%s: %s",
           dt_status_name(st), dt_errmsg());
    /* ... and a reader refuses a file that is not a rendezvous file of this build */
    st = dt_rendezvous_exchange(&rv, 1, 2, id, 4, 200);
    CHECKF(st == DT_ECORRUPT, "%s: %s", dt_status_name(st), dt_errmsg());
    remove(path);

    /* rank 0 times out, naming the ranks that never came, within the bound */
    double t0 = ms_now();
    pid_t kid = spawn_rank(text, 2, 4, 0, 3000, 4);
    st = dt_rendezvous_exchange(&rv, 0, 4, id, sizeof id, 400);
    double took = ms_now() - t0;
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "ranks 1, 3 (2 of 3) never read it"), "%s: %s", dt_status_name(st),
           dt_errmsg());
    CHECKF(took < 2000, "rank 0 gave up after %.0f ms (timeout 400)", took);
    CHECK(!exists(path)); /* removed on the way out: the next run may start */
    CHECKF(wait_rank(kid) == 0, "the rank that came still got its id");
    /* a reader with no rank 0 times out */
    t0 = ms_now();
    st = dt_rendezvous_exchange(&rv, 1, 2, id, sizeof id, 300);
    took = ms_now() - t0;
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "rank 0 never wrote it"), "%s: %s", dt_status_name(st), dt_errmsg());
    CHECKF(took >= 290 && took < 2000, "the reader gave up after %.0f ms (timeout 300)", took);
    /* world sizes that disagree: the reader names both */
    kid = spawn_rank(text, 1, 3, 0, 3000, 4);
    st = dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 600);
    CHECK(st == DT_EIO);
    CHECKF(wait_rank(kid) == (int)DT_EMISMATCH, "a reader launched with another world size accepted the file");
    /* a directory that does not exist */
    char bad[400];
    snprintf(bad, sizeof bad, "file:%s/no/such/dir/rv", dir);
    CHECK_OK(dt_rendezvous_parse(bad, &rv));
    st = dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 100);
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "directory must exist"), "%s: %s", dt_status_name(st), dt_errmsg());
    dt_test_scratch_remove(dir);
}

/* A port nothing listens on now (the kernel's pick for port 0). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static void tcp_exchange(void) {
    char text[64];
    const int now[] = {0, 0, 0, 0, 0}, later[] = {0, 150, 0, 300, 20};
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    exchange_ok(text, 5, now, 250, 5); /* the ranks retry until rank 0 listens */
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    exchange_ok(text, 5, later, 0, 6); /* rank 0 waits for late ranks */
    snprintf(text, sizeof text, "tcp:localhost:%d", free_port());
    exchange_ok(text, 2, now, 0, 7);

    unsigned char id[ID_BYTES];
    id_of_run(id, sizeof id, 8);
    dt_rendezvous rv;
    /* rank 0 times out naming the missing rank */
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    pid_t kid = spawn_rank(text, 1, 3, 0, 3000, 8);
    double t0 = ms_now();
    dt_status st = dt_rendezvous_exchange(&rv, 0, 3, id, sizeof id, 500);
    double took = ms_now() - t0;
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "ranks 2 (1 of 2) never connected"), "%s: %s", dt_status_name(st),
           dt_errmsg());
    CHECKF(took < 2500, "rank 0 gave up after %.0f ms (timeout 500)", took);
    CHECKF(wait_rank(kid) == 0, "the rank that came got its id");
    /* a rank with nobody listening times out */
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    t0 = ms_now();
    st = dt_rendezvous_exchange(&rv, 1, 2, id, sizeof id, 300);
    took = ms_now() - t0;
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "waited 300 ms for rank 0"), "%s: %s", dt_status_name(st), dt_errmsg());
    CHECKF(took >= 290 && took < 2500, "the rank gave up after %.0f ms (timeout 300)", took);
    /* world sizes that disagree: both sides stop with the named error */
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    kid = spawn_rank(text, 1, 4, 0, 3000, 8);
    st = dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 3000);
    CHECKF(st == DT_EMISMATCH && strstr(dt_errmsg(), "world size is 4, rank 0 has 2"), "%s: %s", dt_status_name(st),
           dt_errmsg());
    CHECKF(wait_rank(kid) == (int)DT_EMISMATCH, "the rank with another world size was not told");
    /* two processes that say they are rank 1 */
    snprintf(text, sizeof text, "tcp:127.0.0.1:%d", free_port());
    CHECK_OK(dt_rendezvous_parse(text, &rv));
    pid_t a = spawn_rank(text, 1, 3, 0, 3000, 8), b = spawn_rank(text, 1, 3, 100, 3000, 8);
    st = dt_rendezvous_exchange(&rv, 0, 3, id, sizeof id, 3000);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "same DETRAIN_RANK"), "%s: %s", dt_status_name(st), dt_errmsg());
    int ra = wait_rank(a), rb = wait_rank(b);
    CHECKF((ra == 0 && rb == (int)DT_EINVAL) || (rb == 0 && ra == (int)DT_EINVAL), "rank 1 twice: %d, %d", ra, rb);
    /* a host that does not resolve */
    CHECK_OK(dt_rendezvous_parse("tcp:no-such-host.invalid:29500", &rv));
    st = dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 200);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "cannot resolve"), "%s: %s", dt_status_name(st), dt_errmsg());
}

static void bad_arguments(void) {
    dt_rendezvous rv;
    unsigned char id[8] = {0};
    CHECK_OK(dt_rendezvous_parse("file:/tmp/unused", &rv));
    CHECK(dt_rendezvous_exchange(&rv, 2, 2, id, sizeof id, 100) == DT_EINVAL);
    CHECK(dt_rendezvous_exchange(&rv, 0, 0, id, sizeof id, 100) == DT_EINVAL);
    CHECK(dt_rendezvous_exchange(&rv, 0, 2, id, DT_RV_ID_MAX + 1, 100) == DT_EINVAL);
    CHECK(dt_rendezvous_exchange(&rv, 0, 2, id, sizeof id, 0) == DT_EINVAL);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(plan_tables);
    RUN(shard_in_tensor);
    RUN(parse);
    RUN(file_exchange);
    RUN(tcp_exchange);
    RUN(bad_arguments);
    return dt_test_report();
}
