/* The NCCL engine (src/dist/comm_nccl.cu) on one GPU through the real NCCL:
 *  - the rank-ordered sum kernel (dt_comm_nccl_sum_slots) against the host's
 *    dt_comm_sum_ranks_f32/f64 in bytes, for 1..8 slots, sizes around the vector width,
 *    aligned and unaligned, fp32, fp64 and int64, with inputs whose order shows in the bits;
 *  - one rank: allreduce in both modes (library and rank-ordered), reduce_scatter, allgather,
 *    broadcast and barrier give the host-computed result in bytes (one rank's sum is its
 *    own contribution), for fp32, fp64 and int64;
 *  - refusals: a host buffer, no rendezvous for 2 ranks, a local rank with no GPU;
 *  - the bounded waits: a collective queued behind a stalled stream times out (the error
 *    names the call and the timeout, well before the stall ends) and the aborted
 *    communicator refuses every later call; a 2-rank engine whose second rank never comes
 *    stops at the rendezvous with rank 1 named; a TCP rendezvous for one rank.
 * NCCL must load (tests/gpu/run_gpu_tests.sh puts bench/find_nccl.sh's directory on
 * LD_LIBRARY_PATH); a missing NCCL fails this test with the loader's message. */
#include "dist/comm_nccl_cuda.h"

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "core/determinism.h"
#include "core/philox.h"
#include "dist/comm.h"
#include "dist/comm_nccl.h"
#include "dt_test.h"
}

#include <time.h>
#include <vector>

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "test_gpu_comm: %s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

/* Values spread over many magnitudes, so that another order of the adds gives other bits. */
static float val_f32(int r, size_t i) {
    float u = dt_rng_uniform(31, 7, (uint32_t)r, 0, i) - 0.5f;
    return u * (r % 2 ? 1e-3f : 1e4f) * (float)(1 + (i % 7));
}

static void sum_kernel(void) {
    const int sizes[] = {1, 2, 3, 5, 8};
    const size_t ns[] = {1, 3, 4, 5, 64, 1000, 4099, ((size_t)1 << 20) + 3};
    for (size_t is = 0; is < sizeof sizes / sizeof sizes[0]; is++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
            for (int shift = 0; shift < 2; shift++) { /* shift 1: unaligned buffers, the scalar path */
                int N = sizes[is];
                size_t n = ns[in], stride = (n + 63) / 64 * 64 + (size_t)shift;
                std::vector<float> h(stride * N + 1), want(n), got(n);
                std::vector<const float *> p(N);
                for (int r = 0; r < N; r++) {
                    for (size_t i = 0; i < n; i++) h[(size_t)shift + r * stride + i] = val_f32(r, i);
                    p[r] = &h[(size_t)shift + r * stride];
                }
                dt_comm_sum_ranks_f32(want.data(), p.data(), N, n);
                float *d = NULL, *out = NULL;
                ok(cudaMalloc(&d, h.size() * 4), "malloc");
                ok(cudaMalloc(&out, (n + 1) * 4), "malloc");
                ok(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice), "upload");
                CHECK_OK(dt_comm_nccl_sum_slots(out + shift, d + shift, stride, N, n, DT_COMM_F32, NULL));
                ok(cudaMemcpy(got.data(), out + shift, n * 4, cudaMemcpyDeviceToHost), "download");
                CHECKF(!memcmp(got.data(), want.data(), n * 4), "f32 N %d n %zu shift %d", N, n, shift);
                /* in place: the sum over slot 0 (as the engine's own chunk may be) */
                CHECK_OK(dt_comm_nccl_sum_slots(d + shift, d + shift, stride, N, n, DT_COMM_F32, NULL));
                ok(cudaMemcpy(got.data(), d + shift, n * 4, cudaMemcpyDeviceToHost), "download");
                CHECKF(!memcmp(got.data(), want.data(), n * 4), "f32 in place N %d n %zu shift %d", N, n, shift);
                cudaFree(d);
                cudaFree(out);
            }
    /* the order shows: 5 slots reversed give other bits for many elements */
    {
        size_t n = 4096;
        std::vector<float> a(n), b(n);
        int differ = 0;
        for (size_t i = 0; i < n; i++) {
            float s = val_f32(0, i), t = val_f32(4, i);
            for (int r = 1; r < 5; r++) s += val_f32(r, i);
            for (int r = 3; r >= 0; r--) t += val_f32(r, i);
            differ += memcmp(&s, &t, 4) != 0;
        }
        CHECKF(differ > 100, "only %d of 4096 elements show the order of the adds", differ);
    }
    /* fp64 and int64 */
    for (int N = 1; N <= 6; N++) {
        size_t n = 3001, stride = 3008;
        std::vector<double> h(stride * N), want(n), got(n);
        std::vector<int64_t> hi(stride * N), wanti(n), goti(n);
        std::vector<const double *> p(N);
        for (int r = 0; r < N; r++) {
            for (size_t i = 0; i < n; i++) {
                h[r * stride + i] = (double)val_f32(r, i) * 1e9 + (double)val_f32(r + 9, i);
                hi[r * stride + i] = (int64_t)dt_rng_u32(3, 3, (uint32_t)r, 0, i) * 4000000007LL * (r % 2 ? -1 : 1);
            }
            p[r] = &h[r * stride];
        }
        dt_comm_sum_ranks_f64(want.data(), p.data(), N, n);
        for (size_t i = 0; i < n; i++) {
            uint64_t s = (uint64_t)hi[i];
            for (int r = 1; r < N; r++) s += (uint64_t)hi[r * stride + i];
            wanti[i] = (int64_t)s;
        }
        double *d = NULL;
        int64_t *di = NULL;
        ok(cudaMalloc(&d, h.size() * 8), "malloc");
        ok(cudaMalloc(&di, hi.size() * 8), "malloc");
        ok(cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice), "upload");
        ok(cudaMemcpy(di, hi.data(), hi.size() * 8, cudaMemcpyHostToDevice), "upload");
        CHECK_OK(dt_comm_nccl_sum_slots(d, d, stride, N, n, DT_COMM_F64, NULL));
        CHECK_OK(dt_comm_nccl_sum_slots(di, di, stride, N, n, DT_COMM_I64, NULL));
        ok(cudaMemcpy(got.data(), d, n * 8, cudaMemcpyDeviceToHost), "download");
        ok(cudaMemcpy(goti.data(), di, n * 8, cudaMemcpyDeviceToHost), "download");
        CHECKF(!memcmp(got.data(), want.data(), n * 8), "f64 N %d", N);
        CHECKF(!memcmp(goti.data(), wanti.data(), n * 8), "i64 N %d", N);
        cudaFree(d);
        cudaFree(di);
    }
}

static dt_comm *one_rank(const char *rendezvous, int timeout_ms) {
    dt_comm *c = NULL;
    dt_nccl_spec spec = {{0, 1}, 0, NULL, rendezvous, timeout_ms};
    dt_status st = dt_comm_create_nccl(&c, &spec);
    CHECKF(st == DT_OK, "one-rank NCCL engine: %s: %s", dt_status_name(st), dt_errmsg());
    return c;
}

/* One rank through the real NCCL: every collective's bytes equal the host's result. */
static void one_rank_collectives(void) {
    char dir[256], rv[300];
    dt_test_scratch(dir, sizeof dir, "gpu_comm");
    snprintf(rv, sizeof rv, "file:%s/rv", dir);
    dt_comm *c = one_rank(rv, 60000);
    if (!c) return;
    CHECK(!strcmp(c->ops->engine, "nccl") && c->ops->device == 1 && dt_comm_size(c) == 1);
    cudaStream_t s;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    const size_t ns[] = {1, 63, 64, 65, 1000003};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        std::vector<float> h(n), got(n);
        for (size_t i = 0; i < n; i++) h[i] = val_f32((int)k, i);
        std::vector<const float *> p(1, h.data());
        std::vector<float> want(n);
        dt_comm_sum_ranks_f32(want.data(), p.data(), 1, n); /* the host's sum of the one contribution */
        float *d = NULL;
        ok(cudaMalloc(&d, n * 4), "malloc");
        const dt_reduce_mode modes[] = {DT_REDUCE_LIBRARY, DT_REDUCE_RANK_ORDERED};
        for (int m = 0; m < 2; m++) {
            const char *mode = m ? "rank-ordered" : "library";
            ok(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice), "upload");
            CHECK_OK(c->ops->allreduce(c, d, n, DT_COMM_F32, modes[m], s));
            ok(cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost), "download");
            CHECKF(!memcmp(got.data(), want.data(), n * 4), "allreduce (%s) n %zu", mode, n);
            ok(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice), "upload");
            CHECK_OK(c->ops->reduce_scatter(c, d, n, DT_COMM_F32, modes[m], s));
            ok(cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost), "download");
            CHECKF(!memcmp(got.data(), want.data(), n * 4), "reduce_scatter (%s) n %zu", mode, n);
        }
        /* the mode-picking entry points too (default mode here) */
        ok(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice), "upload");
        CHECK_OK(dt_comm_allreduce(c, d, n, DT_COMM_F32, s));
        CHECK_OK(dt_comm_allgather(c, d, n, DT_COMM_F32, s));
        CHECK_OK(dt_comm_broadcast(c, d, n * 4, 0, s));
        ok(cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost), "download");
        CHECKF(!memcmp(got.data(), h.data(), n * 4), "allreduce + allgather + broadcast n %zu", n);
        cudaFree(d);
    }
    /* fp64 and int64 through both modes */
    {
        size_t n = 777;
        std::vector<double> hd(n), gd(n);
        std::vector<int64_t> hi(n), gi(n);
        for (size_t i = 0; i < n; i++) {
            hd[i] = (double)val_f32(1, i) * 1e10;
            hi[i] = (int64_t)i * -9000000001LL;
        }
        double *d = NULL;
        int64_t *di = NULL;
        ok(cudaMalloc(&d, n * 8), "malloc");
        ok(cudaMalloc(&di, n * 8), "malloc");
        for (int m = 0; m < 2; m++) {
            dt_reduce_mode mode = m ? DT_REDUCE_RANK_ORDERED : DT_REDUCE_LIBRARY;
            ok(cudaMemcpy(d, hd.data(), n * 8, cudaMemcpyHostToDevice), "upload");
            ok(cudaMemcpy(di, hi.data(), n * 8, cudaMemcpyHostToDevice), "upload");
            CHECK_OK(c->ops->allreduce(c, d, n, DT_COMM_F64, mode, s));
            CHECK_OK(c->ops->allreduce(c, di, n, DT_COMM_I64, mode, s));
            ok(cudaMemcpy(gd.data(), d, n * 8, cudaMemcpyDeviceToHost), "download");
            ok(cudaMemcpy(gi.data(), di, n * 8, cudaMemcpyDeviceToHost), "download");
            CHECKF(!memcmp(gd.data(), hd.data(), n * 8), "f64 allreduce mode %d", m);
            CHECKF(!memcmp(gi.data(), hi.data(), n * 8), "i64 allreduce mode %d", m);
        }
        cudaFree(d);
        cudaFree(di);
    }
    CHECK_OK(dt_comm_barrier(c));
    CHECKF(strstr(dt_comm_nccl_record(), "\"nccl_version\":\"2.") != NULL, "record: %s", dt_comm_nccl_record());
    /* a host buffer is refused, naming the problem */
    float host[4] = {1, 2, 3, 4};
    dt_status st = dt_comm_allreduce(c, host, 4, DT_COMM_F32, s);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "not device memory"), "%s: %s", dt_status_name(st), dt_errmsg());
    cudaStreamDestroy(s);
    dt_comm_free(c);
    dt_test_scratch_remove(dir);
}

static void refusals(void) {
    dt_comm *c = (dt_comm *)&c;
    dt_nccl_spec two = {{0, 2}, 0, NULL, NULL, 1000};
    dt_status st = dt_comm_create_nccl(&c, &two);
    CHECKF(st == DT_EINVAL && c == NULL && strstr(dt_errmsg(), "DETRAIN_RENDEZVOUS"), "%s: %s", dt_status_name(st),
           dt_errmsg());
    int ngpu = 0;
    cudaGetDeviceCount(&ngpu);
    dt_nccl_spec far = {{0, 1}, ngpu, NULL, NULL, 1000};
    st = dt_comm_create_nccl(&c, &far);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "GPU"), "%s: %s", dt_status_name(st), dt_errmsg());
    dt_nccl_spec badrv = {{0, 2}, 0, NULL, "nfs:/x", 1000};
    st = dt_comm_create_nccl(&c, &badrv);
    CHECKF(st == DT_EINVAL && strstr(dt_errmsg(), "file:PATH"), "%s: %s", dt_status_name(st), dt_errmsg());
    dt_nccl_spec bad_rank = {{3, 2}, 0, NULL, "file:/tmp/x", 1000};
    CHECK(dt_comm_create_nccl(&c, &bad_rank) == DT_EINVAL);
}

/* A collective that cannot finish in time: aborted, named, and the engine refuses after. */
static void timeout_path(void) {
    dt_comm *c = one_rank(NULL, 300);
    if (!c) return;
    cudaStream_t s;
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    float *d = NULL;
    ok(cudaMalloc(&d, 4096 * 4), "malloc");
    ok(cudaMemset(d, 0, 4096 * 4), "memset");
    CHECK_OK(dt_comm_nccl_test_stall(3000, s)); /* the stream is busy for 3 s */
    double t0 = ms_now();
    dt_status st = c->ops->allreduce(c, d, 4096, DT_COMM_F32, DT_REDUCE_RANK_ORDERED, s);
    double took = ms_now() - t0;
    CHECKF(st == DT_EIO && strstr(dt_errmsg(), "timed out") && strstr(dt_errmsg(), "300 ms") &&
           strstr(dt_errmsg(), "rank-ordered allreduce") && strstr(dt_errmsg(), "aborted"), "%s: %s",
           dt_status_name(st), dt_errmsg());
    /* "timed out" says the wait ended before the stall did; the abort itself may wait for
     * the device (NCCL frees its buffers), so the bound is the stall plus a margin */
    CHECKF(took < 8000, "gave up after %.0f ms (timeout 300, stall 3000)", took);
    fprintf(stderr, "  (the timeout ended the call after %.0f ms, the abort included)\n", took);
    st = c->ops->allreduce(c, d, 4096, DT_COMM_F32, DT_REDUCE_LIBRARY, s);
    CHECKF(st == DT_ESTATE && strstr(dt_errmsg(), "aborted"), "%s: %s", dt_status_name(st), dt_errmsg());
    CHECK(dt_comm_barrier(c) == DT_ESTATE);
    ok(cudaStreamSynchronize(s), "the stall ends");
    cudaStreamDestroy(s);
    cudaFree(d);
    dt_comm_free(c);
}

/* Two ranks, one process: rank 0 stops at the rendezvous, naming rank 1, in bounded time;
 * one rank over TCP needs nobody. */
static void rendezvous_paths(void) {
    char dir[256], rv[300];
    dt_test_scratch(dir, sizeof dir, "gpu_comm_rv");
    snprintf(rv, sizeof rv, "file:%s/rv", dir);
    dt_comm *c = (dt_comm *)&c;
    dt_nccl_spec two = {{0, 2}, 0, NULL, rv, 500};
    double t0 = ms_now();
    dt_status st = dt_comm_create_nccl(&c, &two);
    double took = ms_now() - t0;
    CHECKF(st == DT_EIO && c == NULL && strstr(dt_errmsg(), "ranks 1 (1 of 1) never read it"), "%s: %s",
           dt_status_name(st), dt_errmsg());
    CHECKF(took < 5000, "rank 0 gave up after %.0f ms (timeout 500)", took);
    dt_comm *t = one_rank("tcp:127.0.0.1:29517", 20000);
    if (t) CHECK_OK(dt_comm_barrier(t));
    dt_comm_free(t);
    dt_test_scratch_remove(dir);
}

int main(void) {
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        fprintf(stderr, "test_gpu_comm: no GPU\n");
        return 1;
    }
    dt_det_request req = {0, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    RUN(sum_kernel);
    RUN(refusals);
    RUN(one_rank_collectives);
    RUN(timeout_path);
    RUN(rendezvous_paths);
    return dt_test_report();
}
