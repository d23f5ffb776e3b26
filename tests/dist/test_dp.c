/* Data parallel in the loop (src/dist/dp.c), the parts one process can check: the global
 * batch split (every rank's micro-batches together are the single-process order, window
 * for window, and every rank's cursor is the global one, across epoch boundaries), the
 * loader's skip (the cursor reading would leave), the global micro-batch index, the batch
 * arithmetic's refusal, the statistics' chunk partials (one chunk: the single-process
 * statistics bit for bit), ZeRO-1's sharded AdamW update (shards of any size: the whole
 * update's bits), and the single-rank gathers. The multi-rank paths run with real OpenMPI
 * processes in tests/e2e/test_dp_mpi.sh. */
#include "data/dataset.h"
#include "data/shard.h"
#include "dist/dp.h"
#include "ops/adamw/adamw.h"
#include "optim/optim.h"
#include "dt_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
enum { T = 4, WIN = T + 1, NWIN = 23 }; /* 23 windows: batches straddle epochs */

static const char *shard_path(void) {
    static char p[128];
    snprintf(p, sizeof p, "%s/count.bin", dir);
    return p;
}

/* Window w's first token is w * WIN: a batch row names its window. */
static void make_shard(void) {
    uint16_t t[NWIN * WIN];
    for (int i = 0; i < NWIN * WIN; i++) t[i] = (uint16_t)i;
    CHECK_OK(dt_shard_write(shard_path(), t, NWIN * WIN));
}

static dt_dataset *open_ds(int B) {
    dt_dataset *ds = NULL;
    CHECK_OK(dt_dataset_open(&ds, shard_path(), 65536, 77, 0.0f, B, T));
    return ds;
}

static int same_cursor(dt_data_cursor a, dt_data_cursor b) { return a.epoch == b.epoch && a.position == b.position; }

/* Skipping n windows leaves the cursor (and the next batch) reading n windows leaves. */
static void skip_is_reading(void) {
    for (uint64_t n = 0; n < 3 * NWIN + 2; n += 1 + n / 4) {
        dt_dataset *a = open_ds(1), *b = open_ds(1);
        if (!a || !b) return;
        int in[T], tg[T], in2[T];
        dt_dataset_skip_train(a, 3); /* from a position inside the epoch */
        for (int i = 0; i < 3; i++) CHECK_OK(dt_dataset_next_train(b, in, tg));
        dt_dataset_skip_train(a, n);
        for (uint64_t i = 0; i < n; i++) CHECK_OK(dt_dataset_next_train(b, in, tg));
        CHECKF(same_cursor(dt_dataset_get_cursor(a), dt_dataset_get_cursor(b)), "n %llu", (unsigned long long)n);
        CHECK_OK(dt_dataset_next_train(a, in, tg));
        CHECK_OK(dt_dataset_next_train(b, in2, tg));
        CHECKF(in[0] == in2[0], "n %llu: window %d after the skip, %d after reading", (unsigned long long)n, in[0] / WIN,
               in2[0] / WIN);
        dt_dataset_free(a);
        dt_dataset_free(b);
    }
}

/* N ranks of A micro-batches of B windows read, in global micro-batch order k = m N + r,
 * exactly the windows one process reads with A N micro-batches, and every rank's cursor
 * after each step is that process's. */
static void split_is_single_order(void) {
    const int Ns[] = {1, 2, 3, 4}, As[] = {1, 2, 3};
    enum { B = 2, STEPS = 9 };
    for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
        for (size_t ai = 0; ai < sizeof As / sizeof As[0]; ai++) {
            int N = Ns[ni], A = As[ai];
            int in[B * T], tg[B * T], want[B * T];
            /* the single order as a list of windows, and its cursor after each step */
            dt_dataset *one = open_ds(B);
            if (!one) return;
            int total = STEPS * A * N * B, *order = malloc(sizeof *order * (size_t)total);
            for (int i = 0; one && i < total / B; i++) {
                CHECK_OK(dt_dataset_next_train(one, want, tg));
                for (int b = 0; b < B; b++) order[i * B + b] = want[b * T] / WIN;
            }
            dt_data_cursor single_after[STEPS + 1];
            dt_dataset_free(one);
            one = open_ds(B);
            for (int s = 1; one && s <= STEPS; s++) {
                for (int i = 0; i < A * N; i++) CHECK_OK(dt_dataset_next_train(one, want, tg));
                single_after[s] = dt_dataset_get_cursor(one);
            }
            dt_dataset_free(one);
            for (int r = 0; r < N; r++) {
                dt_dataset *d = open_ds(B);
                int match = d != NULL, cursors = 1;
                for (int s = 1; d && s <= STEPS; s++) {
                    for (int m = 0; m < A; m++) {
                        CHECK_OK(dt_dp_next_micro(d, B, r, N, in, tg));
                        uint64_t k = dt_dp_micro_index(s, m, A, N, r);
                        for (int b = 0; b < B; b++) match &= in[b * T] / WIN == order[k * B + (uint64_t)b];
                    }
                    cursors &= same_cursor(dt_dataset_get_cursor(d), single_after[s]);
                }
                CHECKF(match, "N %d A %d rank %d: a micro-batch is not the single order's global micro-batch", N, A, r);
                CHECKF(cursors, "N %d A %d rank %d: the cursor after a step is not the global one", N, A, r);
                dt_dataset_free(d);
            }
            free(order);
        }
}

/* k = (s-1) A N + m N + r: each step's A N indices once each, in one block; N = 1 is the
 * single-process counter (s-1) A + m. */
static void micro_index(void) {
    for (int N = 1; N <= 5; N++)
        for (int A = 1; A <= 4; A++)
            for (int64_t s = 1; s <= 3; s++) {
                int seen[64] = {0}, ok = 1;
                for (int m = 0; m < A; m++)
                    for (int r = 0; r < N; r++) {
                        uint64_t k = dt_dp_micro_index(s, m, A, N, r), lo = (uint64_t)(s - 1) * (uint64_t)(A * N);
                        ok &= k >= lo && k < lo + (uint64_t)(A * N) && !seen[k - lo]++;
                    }
                CHECKF(ok, "N %d A %d step %lld", N, A, (long long)s);
            }
    CHECK(dt_dp_micro_index(4, 2, 3, 1, 0) == 3 * 3 + 2);
}

static void batch_arithmetic(void) {
    int A = 0;
    CHECK_OK(dt_dp_accum(24, 4, 3, &A));
    CHECK(A == 2);
    CHECK_OK(dt_dp_accum(8, 8, 1, &A));
    CHECK(A == 1);
    CHECK(dt_dp_accum(16, 4, 3, &A) == DT_EINVAL);
    CHECKF(strstr(dt_errmsg(), "--global-batch-size 16") && strstr(dt_errmsg(), "--micro-batch-size 4") &&
           strstr(dt_errmsg(), "3 data-parallel ranks") && strstr(dt_errmsg(), "12"), "message: %s", dt_errmsg());
    CHECK(dt_dp_accum(6, 4, 1, &A) == DT_EINVAL);
}

static dt_gpt *model(void) {
    dt_gpt_config g;
    dt_gpt *m = NULL;
    if (dt_gpt_preset("tiny", &g) != DT_OK || dt_gpt_config_finish(&g) != DT_OK) return NULL;
    CHECK_OK(dt_gpt_create_params(&m, &g, 5));
    if (!m) return NULL;
    m->grad_mem = malloc(sizeof(float) * m->num_params);
    for (size_t i = 0; m->grad_mem && i < m->num_params; i++)
        m->grad_mem[i] = i % 11 == 0 ? 0.0f : (float)sin((double)i) * 1e-2f;
    return m;
}

/* One chunk is dt_grad_stats_compute bit for bit; N chunks added in order agree with an
 * fp64 reference (1e-12 relative) and with the single-rank dt_dp_grad_stats. */
static void stats_chunks(void) {
    dt_gpt *m = model();
    if (!m || !m->grad_mem) return;
    dt_grad_stats whole, one, n3, viacomm;
    dt_grad_stats_compute(m, &whole);
    dt_grad_partial p[3];
    dt_grad_stats_partial(m, 0, m->num_params, &p[0]);
    dt_grad_stats_finish(p, 1, &one);
    CHECK(!memcmp(&whole.grad_norm, &one.grad_norm, 8) && !memcmp(&whole.param_norm, &one.param_norm, 8) &&
          whole.num_zeros == one.num_zeros);
    dt_comm *c = NULL;
    CHECK_OK(dt_comm_create_single(&c));
    if (c) {
        CHECK_OK(dt_dp_grad_stats(c, m, 0, &viacomm));
        CHECK(!memcmp(&whole.grad_norm, &viacomm.grad_norm, 8) && !memcmp(&whole.param_norm, &viacomm.param_norm, 8));
        CHECK_OK(dt_dp_grad_stats(c, m, 1, &viacomm));
        CHECK(!memcmp(&whole.grad_norm, &viacomm.grad_norm, 8));
    }
    dt_comm_free(c);
    double ref = 0.0;
    int64_t zeros = 0;
    for (int j = 0; j < 3; j++) {
        size_t off, len;
        dt_comm_chunk(m->num_params, 3, j, DT_COMM_ALIGN, &off, &len);
        dt_grad_stats_partial(m, off, len, &p[j]);
    }
    for (size_t i = 0; i < m->num_params; i++) {
        ref += (double)m->grad_mem[i] * m->grad_mem[i];
        zeros += m->grad_mem[i] == 0.0f;
    }
    dt_grad_stats_finish(p, 3, &n3);
    CHECKF(fabs(n3.grad_norm - sqrt(ref)) <= 1e-12 * sqrt(ref), "%.17g vs %.17g", n3.grad_norm, sqrt(ref));
    CHECK(n3.num_zeros == zeros && zeros > 0);
    free(m->grad_mem);
    m->grad_mem = NULL;
    dt_gpt_free(m);
}

/* The update over shards of any size, tensors cut anywhere, is the whole update's bits. */
static void sharded_adamw(void) {
    dt_gpt *m = model();
    if (!m || !m->grad_mem) return;
    size_t n = m->num_params;
    float *p0 = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n), *wm = malloc(sizeof(float) * n);
    dt_adamw a, b;
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    CHECK_OK(dt_adamw_init(&a, &ac, n));
    CHECK_OK(dt_adamw_init(&b, &ac, n));
    memcpy(p0, m->param_mem, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) a.m[i] = b.m[i] = (float)cos((double)i) * 1e-3f, a.v[i] = b.v[i] = 1e-6f;
    dt_adamw_step_at(&a, m, 1e-3f, 2.5, 3);
    memcpy(want, m->param_mem, sizeof(float) * n);
    memcpy(wm, a.m, sizeof(float) * n);
    int changed = memcmp(want, p0, sizeof(float) * n) != 0;
    CHECK(changed);
    for (int N = 2; N <= 7; N += 5) {
        memcpy(m->param_mem, p0, sizeof(float) * n);
        for (size_t i = 0; i < n; i++) b.m[i] = (float)cos((double)i) * 1e-3f, b.v[i] = 1e-6f;
        for (int r = 0; r < N; r++) {
            size_t off, len;
            dt_comm_chunk(n, N, r, DT_COMM_ALIGN, &off, &len);
            dt_adamw_step_range(&b, m, 1e-3f, 2.5, 3, off, len);
        }
        CHECKF(!memcmp(m->param_mem, want, sizeof(float) * n), "N %d: parameters differ", N);
        CHECKF(!memcmp(b.m, wm, sizeof(float) * n) && b.t == 3, "N %d: m differs", N);
    }
    dt_adamw_free(&a);
    dt_adamw_free(&b);
    free(p0); free(want); free(wm);
    free(m->grad_mem);
    m->grad_mem = NULL;
    dt_gpt_free(m);
}

/* One rank: the gathers copy, the mean loss is the single-process sum in micro-batch
 * order, eval in batch order, the agreement is the rank's own value. */
static void single_rank(void) {
    dt_comm *c = NULL;
    CHECK_OK(dt_comm_create_single(&c));
    if (!c) return;
    double l[3] = {2.5, 1e-17, 3.25}, all[3], mean = 0;
    CHECK_OK(dt_dp_gather_f64(c, l, 3, all));
    CHECK(!memcmp(l, all, sizeof l));
    CHECK(dt_dp_gather_f64(c, l, 0, all) == DT_EINVAL);
    CHECK_OK(dt_dp_mean_loss(c, l, 3, &mean));
    double want = ((0.0 + l[0]) + l[1]) + l[2];
    want /= 3;
    CHECK(!memcmp(&mean, &want, 8));
    CHECK_OK(dt_dp_mean_eval(c, l, 3, &mean));
    CHECK(!memcmp(&mean, &want, 8));
    double m2 = 0;
    int64_t tot = 0;
    CHECK_OK(dt_dp_mean_and_total(c, 0.125, 17, &m2, &tot));
    CHECK(m2 == 0.125 && tot == 17);
    int agreed = -1;
    CHECK_OK(dt_dp_agree(c, 15, &agreed));
    CHECK(agreed == 15);
    dt_comm_free(c);
}

int main(void) {
    dt_test_scratch(dir, sizeof dir, "test_dp");
    make_shard();
    RUN(skip_is_reading);
    RUN(split_is_single_order);
    RUN(micro_index);
    RUN(batch_arithmetic);
    RUN(stats_chunks);
    RUN(sharded_adamw);
    RUN(single_rank);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
