/* The communicator's engine-independent parts and the single-process engine (see
 * comm.h). */
#include "dist/comm.h"

#include "ops/op.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

dt_reduce_mode dt_comm_reduce_mode(void) {
    /* the gradient reduction is a reduction like the norms: the same switch picks it */
    return dt_op_variant(DT_OP_NORM) == DT_VARIANT_DET ? DT_REDUCE_RANK_ORDERED : DT_REDUCE_LIBRARY;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Adds the time since t0 to c's collective time; returns st. */
static dt_status timed(dt_comm *c, double t0, dt_status st) {
    c->busy_ms += now_ms() - t0;
    c->calls++;
    return st;
}

dt_status dt_comm_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    double t0 = now_ms();
    return timed(c, t0, c->ops->allreduce(c, buf, n, t, dt_comm_reduce_mode(), stream));
}
dt_status dt_comm_reduce_scatter(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    double t0 = now_ms();
    return timed(c, t0, c->ops->reduce_scatter(c, buf, n, t, dt_comm_reduce_mode(), stream));
}
dt_status dt_comm_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    double t0 = now_ms();
    return timed(c, t0, c->ops->allgather(c, buf, n, t, stream));
}
dt_status dt_comm_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream) {
    if (root < 0 || root >= c->layout.size)
        return dt_fail(DT_EINVAL, "broadcast from rank %d of %d", root, c->layout.size);
    double t0 = now_ms();
    return timed(c, t0, c->ops->broadcast(c, buf, bytes, root, stream));
}
dt_status dt_comm_barrier(dt_comm *c) {
    double t0 = now_ms();
    return timed(c, t0, c->ops->barrier(c));
}

void dt_comm_free(dt_comm *c) {
    if (!c) return;
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}

void dt_comm_chunk(size_t n, int size, int j, size_t align, size_t *off, size_t *len) {
    if (align < 1) align = 1;
    size_t units = (n + align - 1) / align, base = units / (size_t)size, extra = units % (size_t)size;
    size_t uj = (size_t)j;
    size_t start = (uj * base + (uj < extra ? uj : extra)) * align;
    size_t end = ((uj + 1) * base + (uj + 1 < extra ? uj + 1 : extra)) * align;
    if (start > n) start = n;
    if (end > n) end = n;
    *off = start;
    *len = end - start;
}

/* Deterministic by construction: one thread per element range, each element summed over
 * the ranks in logical order. */
void dt_comm_sum_ranks_f32(float *out, const float *const *contrib, int size, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = contrib[0][i];
        for (int r = 1; r < size; r++) s += contrib[r][i];
        out[i] = s;
    }
}

void dt_comm_sum_ranks_f64(double *out, const double *const *contrib, int size, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        double s = contrib[0][i];
        for (int r = 1; r < size; r++) s += contrib[r][i];
        out[i] = s;
    }
}

/* ---- the single-process engine: one rank holds the sum already ------------------------ */

static dt_status single_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode,
                                  void *stream) {
    (void)c; (void)buf; (void)n; (void)t; (void)mode; (void)stream;
    return DT_OK;
}
static dt_status single_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    (void)c; (void)buf; (void)n; (void)t; (void)stream;
    return DT_OK;
}
static dt_status single_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream) {
    (void)c; (void)buf; (void)bytes; (void)root; (void)stream;
    return DT_OK;
}
static dt_status single_barrier(dt_comm *c) {
    (void)c;
    return DT_OK;
}

static const dt_comm_ops single_ops = {"single",         0,
                                       single_allreduce, single_allreduce,
                                       single_allgather, single_broadcast,
                                       single_barrier,   NULL};

dt_status dt_comm_create_single(dt_comm **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return dt_fail(DT_ENOMEM, "out of memory for the communicator");
    (*out)->ops = &single_ops;
    (*out)->layout = (dt_layout){0, 1};
    return DT_OK;
}
