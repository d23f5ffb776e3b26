/* The NCCL engine (comm_nccl.h): one rank per GPU, device buffers on the caller's stream.
 *
 * NCCL is loaded at run time (nccl_lib.h). The communicator is non-blocking, so that no
 * call can wait without bound: every call that NCCL is still progressing, and every
 * collective's completion on the stream, is polled (ncclCommGetAsyncError, cudaEventQuery)
 * against the spec's timeout; past it the communicator is aborted (ncclCommAbort) and the
 * error names the call, the rank and the timeout. A collective returns once its work on the
 * stream is done (the timeout counts the stream's earlier work too).
 *
 * The communicator's ranks are the logical ranks (ncclCommInitRank gets layout.rank), so
 * the rank-ordered reduction's slot r is logical rank r whatever GPU or host it runs on:
 *   default mode        ncclAllReduce; reduce_scatter: ncclReduceScatter where every chunk
 *                       has the same length, else one ncclReduce a chunk (root: its rank);
 *   deterministic mode  grouped ncclSend of chunk j to rank j and ncclRecv of every rank's
 *                       contribution to this rank's chunk into slot r of a staging buffer
 *                       (comm_plan.h), the slots added in logical rank order by
 *                       dt_comm_nccl_sum_slots, then the gather;
 *   gather              ncclAllGather where every chunk has the same length, else one
 *                       ncclBroadcast a chunk (root: its rank): copies either way. */
#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "core/determinism.h"
#include "dist/comm_nccl.h"
#include "dist/comm_nccl_cuda.h"
#include "dist/comm_plan.h"
#include "dist/nccl_lib.h"
}

#include <time.h>

#define TRY(x) do { dt_status st_ = (x); if (st_ != DT_OK) return st_; } while (0)

typedef struct nccl_engine {
    const dt_nccl_lib *lib;
    dt_nccl_comm_t comm;      /* NULL once aborted or destroyed */
    int device, timeout_ms;
    char aborted[384];        /* why the communicator was aborted ("" while it works) */
    cudaEvent_t done;         /* recorded after each collective's work */
    cudaStream_t own;         /* barrier's stream */
    void *stage;              /* the rank-ordered reduction's staging buffer */
    size_t stage_bytes;
    int *flag;                /* barrier's one device int */
} nccl_engine;

static nccl_engine *eng(const dt_comm *c) { return (nccl_engine *)c->impl; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void pause_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* ---- the rank-ordered sum of the staging slots ----------------------------------------- */

/* Deterministic: one thread per element (four for the vector form), each element's slots
 * added in slot order; no element is split between threads. */
template <typename T>
__global__ void sum_slots_kernel(T *out, const T *stage, size_t stride, int size, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        T s = stage[i];
        for (int r = 1; r < size; r++) s += stage[(size_t)r * stride + i];
        out[i] = s;
    }
}

__global__ void sum_slots_f32x4_kernel(float4 *out, const float4 *stage, size_t stride4, int size, size_t n4) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 s = stage[i];
        for (int r = 1; r < size; r++) {
            float4 v = stage[(size_t)r * stride4 + i];
            s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
        }
        out[i] = s;
    }
}

static unsigned grid_for(size_t n) {
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

extern "C" dt_status dt_comm_nccl_sum_slots(void *out, const void *stage, size_t stride, int size, size_t n,
                                            dt_comm_dtype t, void *stream) {
    if (n == 0) return DT_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == DT_COMM_F32) {
        size_t n4 = n / 4;
        int vec = n4 > 0 && stride % 4 == 0 && (uintptr_t)out % 16 == 0 && (uintptr_t)stage % 16 == 0;
        if (vec) {
            sum_slots_f32x4_kernel<<<dt_cu_noted(grid_for(n4), 256, 0, "sum_slots_f32x4"), 256, 0, s>>>(
                (float4 *)out, (const float4 *)stage, stride / 4, size, n4);
        }
        size_t done = vec ? n4 * 4 : 0;
        if (done < n) /* the tail (or everything, unaligned) */
            sum_slots_kernel<float><<<dt_cu_noted(grid_for(n - done), 256, 0, "sum_slots_f32"), 256, 0, s>>>(
                (float *)out + done, (const float *)stage + done, stride, size, n - done);
    } else if (t == DT_COMM_F64) {
        sum_slots_kernel<double><<<dt_cu_noted(grid_for(n), 256, 0, "sum_slots_f64"), 256, 0, s>>>(
            (double *)out, (const double *)stage, stride, size, n);
    } else { /* integers: unsigned adds wrap as two's complement, exactly, in any order */
        sum_slots_kernel<unsigned long long><<<dt_cu_noted(grid_for(n), 256, 0, "sum_slots_i64"), 256, 0, s>>>(
            (unsigned long long *)out, (const unsigned long long *)stage, stride, size, n);
    }
    return dt_cu_check(cudaGetLastError(), "the NCCL engine's rank-ordered sum");
}

__global__ void stall_kernel(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

extern "C" dt_status dt_comm_nccl_test_stall(int ms, void *stream) {
    int khz = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
    if (khz <= 0) khz = 2000000;
    stall_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((long long)khz * ms);
    return dt_cu_check(cudaGetLastError(), "stall kernel");
}

/* ---- waits, failures, aborts ----------------------------------------------------------- */

static const char *nccl_text(const nccl_engine *e, int rc) {
    const char *s = e->lib->get_error_string ? e->lib->get_error_string(rc) : NULL;
    return s ? s : "unknown NCCL result";
}

/* Aborts the communicator once and records why; every later call fails with it. */
static dt_status abort_with(dt_comm *c, dt_status code, const char *fmt_what, const char *detail) {
    nccl_engine *e = eng(c);
    snprintf(e->aborted, sizeof e->aborted, "%s on rank %d of %d: %s", fmt_what, c->layout.rank, c->layout.size,
             detail);
    if (e->comm) e->lib->comm_abort(e->comm);
    e->comm = NULL;
    return dt_fail(code, "the NCCL engine: %s; the communicator is aborted", e->aborted);
}

static dt_status failed(dt_comm *c, const char *what, int rc) {
    char d[192];
    snprintf(d, sizeof d, "NCCL error %d (%s)%s", rc, nccl_text(eng(c), rc),
             rc == DT_NCCL_REMOTE_ERROR || rc == DT_NCCL_SYSTEM_ERROR ? ": a rank that died, or a network error?" : "");
    char w[96];
    snprintf(w, sizeof w, "%s failed", what);
    return abort_with(c, DT_EIO, w, d);
}

static dt_status timed_out(dt_comm *c, const char *what) {
    char d[192], w[96];
    snprintf(d, sizeof d, "no progress within %d ms (a rank that died or stopped calling collectives? the timeout: "
             "--dist-timeout-sec)", eng(c)->timeout_ms);
    snprintf(w, sizeof w, "%s timed out", what);
    return abort_with(c, DT_EIO, w, d);
}

static dt_status usable(const dt_comm *c) {
    const nccl_engine *e = eng(c);
    if (e->comm) return DT_OK;
    return dt_fail(DT_ESTATE, "the NCCL engine: the communicator was aborted (%s): the run cannot go on; start it "
                   "again from its last checkpoint", e->aborted[0] ? e->aborted : "destroyed");
}

/* A call's result: success, or in progress until NCCL says otherwise or the deadline. */
static dt_status settle(dt_comm *c, int rc, const char *what, double deadline) {
    nccl_engine *e = eng(c);
    while (rc == DT_NCCL_IN_PROGRESS) {
        if (now_ms() > deadline) return timed_out(c, what);
        pause_us(50);
        if (e->lib->comm_get_async_error(e->comm, &rc) != DT_NCCL_SUCCESS) rc = DT_NCCL_INTERNAL_ERROR;
    }
    return rc == DT_NCCL_SUCCESS ? DT_OK : failed(c, what, rc);
}

/* Waits until the stream's work (the collective queued last) is done. */
static dt_status finish(dt_comm *c, cudaStream_t s, const char *what, double deadline) {
    nccl_engine *e = eng(c);
    TRY(dt_cu_check(cudaEventRecord(e->done, s), what));
    for (;;) {
        cudaError_t q = cudaEventQuery(e->done);
        if (q == cudaSuccess) return DT_OK;
        if (q != cudaErrorNotReady) return dt_cu_check(q, what);
        int rc = DT_NCCL_SUCCESS;
        if (e->lib->comm_get_async_error(e->comm, &rc) != DT_NCCL_SUCCESS) rc = DT_NCCL_INTERNAL_ERROR;
        if (rc != DT_NCCL_SUCCESS && rc != DT_NCCL_IN_PROGRESS) return failed(c, what, rc);
        if (now_ms() > deadline) return timed_out(c, what);
        pause_us(20);
    }
}

static int nccl_type(dt_comm_dtype t) {
    return t == DT_COMM_F32 ? DT_NCCL_FLOAT32 : t == DT_COMM_F64 ? DT_NCCL_FLOAT64 : DT_NCCL_INT64;
}
static size_t type_bytes(dt_comm_dtype t) { return t == DT_COMM_F32 ? 4 : 8; }

/* The NCCL engine moves device memory only: a host pointer is the caller's mistake. */
static dt_status device_buffer(const void *buf, const char *what) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, buf) != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        cudaGetLastError();
        return dt_fail(DT_EINVAL, "the NCCL engine: %s of a buffer that is not device memory (%p): the NCCL engine "
                       "reduces GPU buffers only", what, buf);
    }
    return DT_OK;
}

/* Every chunk of n over size ranks has the same length (NCCL's own reduce-scatter and
 * all-gather need that); *len is it. */
static int even_chunks(size_t n, int size, size_t *len) {
    size_t off, l0;
    dt_comm_chunk(n, size, 0, DT_COMM_ALIGN, &off, &l0);
    for (int j = 1; j < size; j++) {
        size_t lj;
        dt_comm_chunk(n, size, j, DT_COMM_ALIGN, &off, &lj);
        if (lj != l0) return 0;
    }
    *len = l0;
    return (size_t)size * l0 == n;
}

/* ---- the collectives ------------------------------------------------------------------- */

/* Every rank's chunk to every rank (a copy). Queued only. */
static dt_status gather_chunks(dt_comm *c, char *buf, size_t n, dt_comm_dtype t, cudaStream_t s, double deadline) {
    nccl_engine *e = eng(c);
    int size = c->layout.size, rank = c->layout.rank, nt = nccl_type(t);
    size_t es = type_bytes(t), len;
    if (even_chunks(n, size, &len))
        return settle(c, e->lib->all_gather(buf + (size_t)rank * len * es, buf, len, nt, e->comm, s), "ncclAllGather",
                      deadline);
    int rc = e->lib->group_start();
    for (int j = 0; j < size && rc == DT_NCCL_SUCCESS; j++) {
        size_t off;
        dt_comm_chunk(n, size, j, DT_COMM_ALIGN, &off, &len);
        if (len) rc = e->lib->broadcast(buf + off * es, buf + off * es, len, nt, j, e->comm, s);
    }
    int end = e->lib->group_end();
    return settle(c, rc != DT_NCCL_SUCCESS && rc != DT_NCCL_IN_PROGRESS ? rc : end, "ncclBroadcast (the gather)",
                  deadline);
}

/* The rank-ordered reduction of buf's n elements; with gather, every rank gets every chunk. */
static dt_status rank_ordered(dt_comm *c, void *vbuf, size_t n, dt_comm_dtype t, cudaStream_t s, int gather,
                              const char *what, double deadline) {
    nccl_engine *e = eng(c);
    char *buf = (char *)vbuf;
    int size = c->layout.size, nt = nccl_type(t);
    size_t es = type_bytes(t);
    dt_comm_plan p;
    TRY(dt_comm_plan_make(&p, n, c->layout.rank, size, DT_COMM_ALIGN));
    if (p.staging * es > e->stage_bytes) {
        cudaFree(e->stage);
        e->stage = NULL;
        e->stage_bytes = 0;
        TRY(dt_cu_check(cudaMalloc(&e->stage, p.staging * es), "the NCCL engine's staging buffer"));
        e->stage_bytes = p.staging * es;
    }
    char *stage = (char *)e->stage;
    /* chunk j to rank j; rank r's contribution to this rank's chunk into slot r */
    int rc = e->lib->group_start();
    for (int j = 0; j < size && rc == DT_NCCL_SUCCESS; j++) {
        size_t off, len;
        dt_comm_plan_send(&p, j, &off, &len);
        if (len) rc = e->lib->send(buf + off * es, len, nt, j, e->comm, s);
    }
    for (int r = 0; r < size && rc == DT_NCCL_SUCCESS && p.own_len; r++)
        rc = e->lib->recv(stage + dt_comm_plan_slot(&p, r) * es, p.own_len, nt, r, e->comm, s);
    int end = e->lib->group_end();
    char w[96];
    snprintf(w, sizeof w, "ncclSend/ncclRecv (%s)", what);
    TRY(settle(c, rc != DT_NCCL_SUCCESS && rc != DT_NCCL_IN_PROGRESS ? rc : end, w, deadline));
    TRY(dt_comm_nccl_sum_slots(buf + p.own_off * es, stage, p.slot_stride, size, p.own_len, t, s));
    if (gather) TRY(gather_chunks(c, buf, n, t, s, deadline));
    return finish(c, s, what, deadline);
}

static dt_status nccl_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode, void *stream) {
    TRY(usable(c));
    if (n == 0) return DT_OK;
    TRY(device_buffer(buf, "allreduce"));
    nccl_engine *e = eng(c);
    double deadline = now_ms() + e->timeout_ms;
    cudaStream_t s = (cudaStream_t)stream;
    dt_status st;
    if (mode == DT_REDUCE_RANK_ORDERED) {
        st = rank_ordered(c, buf, n, t, s, 1, "the rank-ordered allreduce", deadline);
    } else {
        st = settle(c, e->lib->all_reduce(buf, buf, n, nccl_type(t), DT_NCCL_SUM, e->comm, s), "ncclAllReduce",
                    deadline);
        if (st == DT_OK) st = finish(c, s, "ncclAllReduce", deadline);
    }
    return st;
}

static dt_status nccl_reduce_scatter(dt_comm *c, void *vbuf, size_t n, dt_comm_dtype t, dt_reduce_mode mode,
                                     void *stream) {
    TRY(usable(c));
    if (n == 0) return DT_OK;
    TRY(device_buffer(vbuf, "reduce_scatter"));
    nccl_engine *e = eng(c);
    double deadline = now_ms() + e->timeout_ms;
    cudaStream_t s = (cudaStream_t)stream;
    char *buf = (char *)vbuf;
    int size = c->layout.size, nt = nccl_type(t);
    size_t es = type_bytes(t), len;
    dt_status st;
    if (mode == DT_REDUCE_RANK_ORDERED) {
        st = rank_ordered(c, buf, n, t, s, 0, "the rank-ordered reduce_scatter", deadline);
    } else if (even_chunks(n, size, &len)) {
        st = settle(c, e->lib->reduce_scatter(buf, buf + (size_t)c->layout.rank * len * es, len, nt, DT_NCCL_SUM,
                                              e->comm, s), "ncclReduceScatter", deadline);
        if (st == DT_OK) st = finish(c, s, "ncclReduceScatter", deadline);
    } else {
        int rc = e->lib->group_start();
        for (int j = 0; j < size && rc == DT_NCCL_SUCCESS; j++) {
            size_t off;
            dt_comm_chunk(n, size, j, DT_COMM_ALIGN, &off, &len);
            if (len) rc = e->lib->reduce(buf + off * es, buf + off * es, len, nt, DT_NCCL_SUM, j, e->comm, s);
        }
        int end = e->lib->group_end();
        st = settle(c, rc != DT_NCCL_SUCCESS && rc != DT_NCCL_IN_PROGRESS ? rc : end, "ncclReduce (reduce_scatter)",
                    deadline);
        if (st == DT_OK) st = finish(c, s, "ncclReduce (reduce_scatter)", deadline);
    }
    return st;
}

static dt_status nccl_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    TRY(usable(c));
    if (n == 0) return DT_OK;
    TRY(device_buffer(buf, "allgather"));
    nccl_engine *e = eng(c);
    double deadline = now_ms() + e->timeout_ms;
    dt_status st = gather_chunks(c, (char *)buf, n, t, (cudaStream_t)stream, deadline);
    if (st == DT_OK) st = finish(c, (cudaStream_t)stream, "allgather", deadline);
    return st;
}

static dt_status nccl_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream) {
    TRY(usable(c));
    if (bytes == 0) return DT_OK;
    TRY(device_buffer(buf, "broadcast"));
    nccl_engine *e = eng(c);
    double deadline = now_ms() + e->timeout_ms;
    cudaStream_t s = (cudaStream_t)stream;
    dt_status st = settle(c, e->lib->broadcast(buf, buf, bytes, DT_NCCL_UINT8, root, e->comm, s), "ncclBroadcast",
                          deadline);
    if (st == DT_OK) st = finish(c, s, "ncclBroadcast", deadline);
    return st;
}

/* Every rank has reached the barrier once a one-element all-reduce completes. */
static dt_status nccl_barrier(dt_comm *c) {
    TRY(usable(c));
    nccl_engine *e = eng(c);
    double deadline = now_ms() + e->timeout_ms;
    TRY(settle(c, e->lib->all_reduce(e->flag, e->flag, 1, DT_NCCL_INT32, DT_NCCL_SUM, e->comm, e->own), "barrier",
               deadline));
    return finish(c, e->own, "barrier", deadline);
}

static void nccl_destroy(dt_comm *c) {
    nccl_engine *e = eng(c);
    if (!e) return;
    if (e->comm) e->lib->comm_destroy(e->comm);
    if (e->done) cudaEventDestroy(e->done);
    if (e->own) cudaStreamDestroy(e->own);
    cudaFree(e->stage);
    cudaFree(e->flag);
    free(e);
    c->impl = NULL;
}

static const dt_comm_ops nccl_ops = {"nccl",         1, nccl_allreduce, nccl_reduce_scatter, nccl_allgather,
                                     nccl_broadcast, nccl_barrier, nccl_destroy};

static char g_record[128]; /* env.json's members, once NCCL is loaded */

extern "C" const char *dt_comm_nccl_record(void) { return g_record; }

/* ---- create ---------------------------------------------------------------------------- */

static dt_status check_spec(const dt_nccl_spec *sp) {
    const dt_layout *l = &sp->layout;
    if (l->size < 1 || l->rank < 0 || l->rank >= l->size)
        return dt_fail(DT_EINVAL, "the NCCL engine: rank %d of %d (a rank is 0..size-1)", l->rank, l->size);
    if (sp->timeout_ms < 1) return dt_fail(DT_EINVAL, "the NCCL engine: timeout %d ms (at least 1)", sp->timeout_ms);
    if (sp->local_rank < 0) return dt_fail(DT_EINVAL, "the NCCL engine: local rank %d (a GPU index)", sp->local_rank);
    if (sp->bootstrap) {
        const dt_comm *b = sp->bootstrap;
        if (b->layout.rank != l->rank || b->layout.size != l->size)
            return dt_fail(DT_EINVAL, "the NCCL engine: the bootstrap communicator is rank %d of %d, the NCCL one would "
                           "be rank %d of %d: they must be the same layout", b->layout.rank, b->layout.size, l->rank,
                           l->size);
        if (b->ops->device)
            return dt_fail(DT_EINVAL, "the NCCL engine: the bootstrap communicator (%s) moves device memory; it must be "
                           "a host engine (mpi)", b->ops->engine);
    } else if (l->size > 1 && (!sp->rendezvous || !*sp->rendezvous)) {
        return dt_fail(DT_EINVAL, "the NCCL engine: %d ranks and neither an MPI launch nor a rendezvous to share NCCL's "
                       "id: launch with mpirun, or set DETRAIN_RENDEZVOUS=file:PATH or tcp:HOST:PORT on every rank",
                       l->size);
    }
    return DT_OK;
}

extern "C" dt_status dt_comm_create_nccl(dt_comm **out, const dt_nccl_spec *sp) {
    *out = NULL;
    TRY(check_spec(sp));
    dt_rendezvous rv;
    if (!sp->bootstrap && sp->rendezvous && *sp->rendezvous) TRY(dt_rendezvous_parse(sp->rendezvous, &rv));
    const dt_nccl_lib *lib = NULL;
    TRY(dt_nccl_load(&lib));
    dt_runtime_mark(DT_LIB_CUDA | DT_LIB_NCCL);
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        cudaGetLastError();
        return dt_fail(DT_EUNSUPPORTED, "the NCCL engine: no CUDA GPU is visible to rank %d (check the driver and "
                       "CUDA_VISIBLE_DEVICES)", sp->layout.rank);
    }
    if (sp->local_rank >= ngpu)
        return dt_fail(DT_EINVAL, "the NCCL engine: rank %d has local rank %d, but this host shows %d GPU%s: launch at "
                       "most one rank per GPU on each host", sp->layout.rank, sp->local_rank, ngpu, ngpu == 1 ? "" : "s");
    TRY(dt_cu_check(cudaSetDevice(sp->local_rank), "the NCCL engine: cudaSetDevice"));

    dt_comm *c = (dt_comm *)calloc(1, sizeof *c);
    nccl_engine *e = (nccl_engine *)calloc(1, sizeof *e);
    if (!c || !e) {
        free(c);
        free(e);
        return dt_fail(DT_ENOMEM, "out of memory for the NCCL engine");
    }
    c->ops = &nccl_ops;
    c->layout = sp->layout;
    c->impl = e;
    e->lib = lib;
    e->device = sp->local_rank;
    e->timeout_ms = sp->timeout_ms;
    double deadline = now_ms() + sp->timeout_ms;
    dt_nccl_unique_id id;
    memset(&id, 0, sizeof id);
    dt_status st = DT_OK;
    if (sp->layout.rank == 0) {
        int rc = lib->get_unique_id(&id);
        if (rc != DT_NCCL_SUCCESS)
            st = dt_fail(DT_EIO, "the NCCL engine: ncclGetUniqueId failed: NCCL error %d (%s)", rc,
                         lib->get_error_string(rc));
    }
    if (st == DT_OK && sp->bootstrap) {
        st = dt_comm_broadcast(sp->bootstrap, &id, sizeof id, 0, NULL);
        if (st != DT_OK) st = dt_fail_context(st, "the NCCL engine: sharing NCCL's id through the %s communicator",
                                              sp->bootstrap->ops->engine);
    } else if (st == DT_OK && sp->layout.size > 1) {
        st = dt_rendezvous_exchange(&rv, sp->layout.rank, sp->layout.size, &id, sizeof id, sp->timeout_ms);
    }
    if (st == DT_OK) {
        dt_nccl_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.size = sizeof cfg;
        cfg.magic = DT_NCCL_CONFIG_MAGIC;
        cfg.version = DT_NCCL_CONFIG_VERSION;
        cfg.blocking = 0; /* every wait is ours, bounded */
        cfg.cga_cluster_size = cfg.min_ctas = cfg.max_ctas = DT_NCCL_UNDEF_INT;
        cfg.net_name = NULL;
        int rc = lib->comm_init_rank_config(&e->comm, sp->layout.size, id, sp->layout.rank, &cfg);
        if (rc != DT_NCCL_SUCCESS && rc != DT_NCCL_IN_PROGRESS) {
            st = dt_fail(DT_EIO, "the NCCL engine: ncclCommInitRankConfig failed on rank %d of %d: NCCL error %d (%s)",
                         sp->layout.rank, sp->layout.size, rc, lib->get_error_string(rc));
            e->comm = NULL;
        } else {
            st = settle(c, rc, "ncclCommInitRankConfig", deadline);
        }
    }
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&e->done, cudaEventDisableTiming), "the NCCL engine");
    if (st == DT_OK) st = dt_cu_check(cudaStreamCreateWithFlags(&e->own, cudaStreamNonBlocking), "the NCCL engine");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&e->flag, sizeof(int)), "the NCCL engine");
    if (st == DT_OK) st = dt_cu_check(cudaMemset(e->flag, 0, sizeof(int)), "the NCCL engine");
    if (st == DT_OK) snprintf(g_record, sizeof g_record, "\"nccl_version\":\"%s\"", lib->version_text);
    if (st != DT_OK) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", dt_errmsg());
        nccl_destroy(c);
        free(c);
        return dt_fail(st, "%s", keep);
    }
    *out = c;
    return DT_OK;
}
