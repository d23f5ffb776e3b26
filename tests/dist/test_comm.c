/* The communicator's engine-independent logic (src/dist/comm.c): the chunk layout every
 * rank-ordered reduction and ZeRO-1 shard uses, the rank-ordered sum, and the
 * single-process engine. */
#include "dist/comm.h"
#include "dist/comm_nccl.h"
#include "core/determinism.h"
#include "dt_test.h"

#include <string.h>

/* Every element in exactly one chunk, chunks in rank order, starts aligned, sizes within one
 * alignment unit of each other, for sizes that do and do not divide. */
static void chunk_layout(void) {
    const size_t ns[] = {0, 1, 7, 64, 1000, 124475904, 124475905};
    const int sizes[] = {1, 2, 3, 4, 7, 8, 64};
    const size_t aligns[] = {1, 4, 64};
    for (size_t a = 0; a < 3; a++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                size_t n = ns[i], align = aligns[a], next = 0, lo = (size_t)-1, hi = 0;
                int size = sizes[k];
                for (int j = 0; j < size; j++) {
                    size_t off, len;
                    dt_comm_chunk(n, size, j, align, &off, &len);
                    CHECKF(off == next, "n %zu size %d j %d: chunk starts at %zu, not %zu", n, size, j, off, next);
                    CHECKF(off % align == 0 || len == 0, "n %zu size %d j %d: unaligned start %zu", n, size, j, off);
                    next = off + len;
                    if (off + len < n || j == size - 1) { if (len < lo) lo = len; if (len > hi) hi = len; }
                }
                CHECKF(next == n, "n %zu size %d align %zu: chunks end at %zu", n, size, align, next);
                if (n >= (size_t)size * align * 2) CHECKF(hi - lo <= 2 * align, "n %zu size %d: %zu..%zu", n, size, lo, hi);
            }
}

/* out[i] = ((c0 + c1) + c2) + c3 in fp32, for values where the order shows in the bits. */
static void sum_in_rank_order(void) {
    enum { N = 4096, R = 5 };
    static float c[R][N], out[N];
    const float *p[R];
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < N; i++) c[r][i] = (float)((i * 2654435761u + (unsigned)r * 40503u) % 100003) * (r % 2 ? 1e-3f : 1e4f);
        p[r] = c[r];
    }
    dt_comm_sum_ranks_f32(out, p, R, N);
    int order_shows = 0;
    for (int i = 0; i < N; i++) {
        float want = c[0][i];
        for (int r = 1; r < R; r++) want += c[r][i];
        float other = c[R - 1][i];
        for (int r = R - 2; r >= 0; r--) other += c[r][i];
        CHECKF(!memcmp(&want, &out[i], 4), "element %d", i);
        order_shows += memcmp(&want, &other, 4) != 0;
    }
    /* the inputs are such that another order gives other bits: the check above can fail */
    CHECKF(order_shows > 100, "only %d elements show the order", order_shows);
    double d0[3] = {1e16, 1, -1e16}, d1[3] = {1, 1e16, 1}, d2[3] = {-1e16, -1e16, 1e16}, dout[3];
    const double *dp[3] = {d0, d1, d2};
    dt_comm_sum_ranks_f64(dout, dp, 3, 3);
    CHECK(dout[0] == (1e16 + 1) - 1e16 && dout[1] == (1 + 1e16) - 1e16 && dout[2] == (-1e16 + 1) + 1e16);
}

static void single_engine(void) {
    dt_comm *c = NULL;
    CHECK_OK(dt_comm_create_single(&c));
    if (!c) return;
    CHECK(dt_comm_rank(c) == 0 && dt_comm_size(c) == 1 && !strcmp(c->ops->engine, "single"));
    float x[3] = {1.5f, -2.0f, 0.25f}, y[3];
    memcpy(y, x, sizeof x);
    CHECK_OK(dt_comm_allreduce(c, y, 3, DT_COMM_F32, NULL));
    CHECK(!memcmp(x, y, sizeof x));
    CHECK_OK(dt_comm_allgather(c, y, 3, DT_COMM_F32, NULL));
    CHECK(!memcmp(x, y, sizeof x));
    CHECK_OK(dt_comm_broadcast(c, y, sizeof y, 0, NULL));
    CHECK(dt_comm_broadcast(c, y, sizeof y, 1, NULL) == DT_EINVAL);
    CHECK_OK(dt_comm_barrier(c));
    /* the time inside collectives adds up (the bench's communication time) */
    double t0 = dt_comm_time_ms(c);
    for (int i = 0; i < 20000; i++) CHECK_OK(dt_comm_allreduce(c, y, 3, DT_COMM_F32, NULL));
    CHECKF(dt_comm_time_ms(c) > t0 && dt_comm_time_ms(c) < t0 + 60e3, "%g ms then %g ms", t0, dt_comm_time_ms(c));
    /* the reduction follows the deterministic flag */
    CHECK(dt_comm_reduce_mode() == DT_REDUCE_LIBRARY);
    dt_det_request req = {1, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    CHECK(dt_comm_reduce_mode() == DT_REDUCE_RANK_ORDERED);
    dt_determinism_reset_for_tests();
    dt_comm_free(c);
}

/* The CPU build's NCCL stand-in (src/dist/comm_nccl_stub.c) refuses, names what to run
 * instead, and leaves no communicator behind. */
static void nccl_stand_in_refuses(void) {
    dt_comm *c = (dt_comm *)&c;
    dt_nccl_spec spec = {.layout = {.rank = 0, .size = 1}, .rendezvous = "file:/tmp/x", .timeout_ms = 1000};
    dt_status st = dt_comm_create_nccl(&c, &spec);
    CHECKF(st == DT_EUNSUPPORTED, "status %s", dt_status_name(st));
    CHECK(c == NULL);
    CHECKF(strstr(dt_errmsg(), "make cuda") != NULL, "message: %s", dt_errmsg());
    CHECK(!strcmp(dt_comm_nccl_record(), "")); /* no NCCL library to record */
}

int main(void) {
    RUN(chunk_layout);
    RUN(sum_in_rank_order);
    RUN(single_engine);
    RUN(nccl_stand_in_refuses);
    return dt_test_report();
}
