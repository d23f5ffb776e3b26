/* The MPI engine (see comm_mpi.h): build/libdetrain-mpi.so, built with mpicc. Everything
 * it needs from detrain comes through the host table (dt_mpi_host).
 *
 * Reductions:
 *   - DT_REDUCE_LIBRARY: MPI_Iallreduce / MPI_Ireduce_scatter with MPI_SUM, in the order
 *     OpenMPI's collective component picks for this allocation;
 *   - DT_REDUCE_RANK_ORDERED (fp32/fp64): MPI_Ialltoallv sends chunk j (dt_comm_chunk with
 *     DT_COMM_ALIGN) of every rank's buffer to rank j; rank j adds the N contributions in
 *     logical rank order (host->sum_f32/f64: ((c0 + c1) + c2) + ...); MPI_Iallgatherv
 *     copies the summed chunks back to every rank. MPI only moves bytes here, so neither
 *     the algorithm OpenMPI picks nor any OMPI_MCA_coll* setting can change the sum; the
 *     communicator is split from MPI_COMM_WORLD keyed by logical rank, so contribution r
 *     is logical rank r's whatever the placement of processes. Int64 sums are exact in
 *     any order and take the library's reduction in both modes.
 * Deterministic mode never hands floating-point data to an MPI reduction: a library
 * reduction of fp32/fp64 asked for in deterministic mode is refused (DT_EDETERMINISM). */
#include "dist/comm_mpi.h"

#include <mpi.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mpi_impl {
    dt_mpi_impl_head head;      /* first: the host reads the record through it */
    const dt_mpi_host *host;
    MPI_Comm comm;
    double timeout_sec;
    int failed;                 /* 1 after a failed collective: every later call refuses */
    char failed_call[160];
    void *scratch;
    size_t scratch_bytes;
    int *scount, *sdispl, *rcount, *rdispl; /* size entries each */
} mpi_impl;

static int g_users;             /* live communicators: MPI is finalised with the last one */
static const dt_mpi_host *g_host;

static dt_status fail(dt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static dt_status fail(dt_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return g_host->fail(code, msg);
}

static double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *dtype_name(dt_comm_dtype t) { return t == DT_COMM_F32 ? "fp32" : t == DT_COMM_F64 ? "fp64" : "int64"; }
static MPI_Datatype mpi_type(dt_comm_dtype t) {
    return t == DT_COMM_F32 ? MPI_FLOAT : t == DT_COMM_F64 ? MPI_DOUBLE : MPI_INT64_T;
}
static size_t elem_size(dt_comm_dtype t) { return t == DT_COMM_F32 ? 4 : 8; }

static dt_status mpi_error(mpi_impl *m, const char *call, int rc) {
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS) snprintf(err, sizeof err, "error %d", rc);
    m->failed = 1;
    snprintf(m->failed_call, sizeof m->failed_call, "%s", call);
    return fail(DT_EIO, "the MPI engine: %s failed: %s", call, err);
}

/* Polls req until it completes, an error, or the timeout. Spins briefly, then sleeps
 * between tests, so waiting ranks leave the cores to the ranks still computing. */
static dt_status wait_req(mpi_impl *m, MPI_Request *req, const char *call) {
    double t0 = now_sec();
    for (long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_error(m, call, rc);
        if (done) return DT_OK;
        double waited = now_sec() - t0;
        if (waited > m->timeout_sec) {
            int rank = -1, size = 0;
            MPI_Comm_rank(m->comm, &rank);
            MPI_Comm_size(m->comm, &size);
            m->failed = 1;
            snprintf(m->failed_call, sizeof m->failed_call, "%s", call);
            return fail(DT_EIO, "the MPI engine: %s did not complete within --dist-timeout-sec %g s (rank %d of %d "
                        "waited %.1f s): another rank died, stalled or left the job", call, m->timeout_sec, rank,
                        size, waited);
        }
        if (spin > 256) {
            struct timespec ts = {0, spin > 4096 ? 500000 : 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Starts a non-blocking call (rc, req) and waits for it. */
static dt_status finish(mpi_impl *m, int rc, MPI_Request *req, const char *call) {
    if (rc != MPI_SUCCESS) return mpi_error(m, call, rc);
    return wait_req(m, req, call);
}

static dt_status usable(mpi_impl *m, const char *op, size_t n) {
    if (m->failed)
        return fail(DT_ESTATE, "the MPI engine: %s after the failure of %s: this communicator cannot be used again "
                    "(the job must stop)", op, m->failed_call);
    if (n > INT_MAX)
        return fail(DT_EINVAL, "the MPI engine: %s of %zu elements: at most %d per call (MPI counts are int)", op, n,
                    INT_MAX);
    return DT_OK;
}

static dt_status scratch(mpi_impl *m, size_t bytes, void **out) {
    if (bytes > m->scratch_bytes) {
        void *p = realloc(m->scratch, bytes);
        if (!p) return fail(DT_ENOMEM, "the MPI engine: out of memory for %zu bytes of receive buffer", bytes);
        m->scratch = p;
        m->scratch_bytes = bytes;
    }
    *out = m->scratch;
    return DT_OK;
}

/* The chunks of n elements: counts and offsets per rank (MPI's ints; n <= INT_MAX). */
static void chunk_counts(mpi_impl *m, int size, size_t n, int *count, int *displ) {
    for (int j = 0; j < size; j++) {
        size_t off, len;
        m->host->chunk(n, size, j, DT_COMM_ALIGN, &off, &len);
        count[j] = (int)len;
        displ[j] = (int)off;
    }
}

/* Rank-ordered: every rank's chunk `rank` into scratch (rank r's at r * len), then the sum
 * in logical rank order into buf at the chunk's offset. */
static dt_status sum_own_chunk(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, const char *call) {
    mpi_impl *m = c->impl;
    int size = c->layout.size, rank = c->layout.rank;
    chunk_counts(m, size, n, m->scount, m->sdispl);
    int len = m->scount[rank];
    if ((size_t)len * (size_t)size > INT_MAX)
        return fail(DT_EINVAL, "the MPI engine: %s: %d ranks x %d elements exceed MPI's int counts", call, size, len);
    for (int r = 0; r < size; r++) {
        m->rcount[r] = len;
        m->rdispl[r] = r * len;
    }
    size_t es = elem_size(t);
    void *recv = NULL;
    dt_status st = scratch(m, (size_t)len * (size_t)size * es + es, &recv);
    if (st != DT_OK) return st;
    MPI_Request req;
    char what[160];
    snprintf(what, sizeof what, "%s (MPI_Ialltoallv of %zu %s elements)", call, n, dtype_name(t));
    int rc = MPI_Ialltoallv(buf, m->scount, m->sdispl, mpi_type(t), recv, m->rcount, m->rdispl, mpi_type(t), m->comm,
                            &req);
    if ((st = finish(m, rc, &req, what)) != DT_OK) return st;
    const void **parts = malloc(sizeof *parts * (size_t)size);
    if (!parts) return fail(DT_ENOMEM, "the MPI engine: out of memory for %d contributions", size);
    for (int r = 0; r < size; r++) parts[r] = (const char *)recv + (size_t)r * (size_t)len * es;
    char *own = (char *)buf + (size_t)m->sdispl[rank] * es;
    if (t == DT_COMM_F32) m->host->sum_f32((float *)own, (const float *const *)parts, size, (size_t)len);
    else m->host->sum_f64((double *)own, (const double *const *)parts, size, (size_t)len);
    free(parts);
    return DT_OK;
}

static dt_status refuse_library_float(dt_comm_dtype t, const char *call) {
    if (t != DT_COMM_I64 && g_host->det())
        return fail(DT_EDETERMINISM, "the MPI engine: %s of %s data through MPI's own reduction in deterministic "
                    "mode: its order of additions is OpenMPI's choice for this allocation (and OMPI_MCA_coll* "
                    "settings); deterministic mode reduces floating-point data rank-ordered", call, dtype_name(t));
    return DT_OK;
}

static dt_status mpi_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode, void *stream) {
    (void)stream;
    mpi_impl *m = c->impl;
    dt_status st = usable(m, "allreduce", n);
    if (st != DT_OK || n == 0) return st;
    if (mode == DT_REDUCE_RANK_ORDERED && t != DT_COMM_I64) {
        if ((st = sum_own_chunk(c, buf, n, t, "allreduce")) != DT_OK) return st;
        /* every rank's summed chunk to every rank: a copy */
        MPI_Request req;
        char what[160];
        snprintf(what, sizeof what, "allreduce (MPI_Iallgatherv of %zu %s elements)", n, dtype_name(t));
        int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, m->scount, m->sdispl, mpi_type(t), m->comm,
                                 &req);
        return finish(m, rc, &req, what);
    }
    if ((st = refuse_library_float(t, "allreduce")) != DT_OK) return st;
    MPI_Request req;
    char what[160];
    snprintf(what, sizeof what, "allreduce (MPI_Iallreduce of %zu %s elements)", n, dtype_name(t));
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(t), MPI_SUM, m->comm, &req);
    return finish(m, rc, &req, what);
}

static dt_status mpi_reduce_scatter(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode mode,
                                    void *stream) {
    (void)stream;
    mpi_impl *m = c->impl;
    dt_status st = usable(m, "reduce_scatter", n);
    if (st != DT_OK || n == 0) return st;
    if (mode == DT_REDUCE_RANK_ORDERED && t != DT_COMM_I64) return sum_own_chunk(c, buf, n, t, "reduce_scatter");
    if ((st = refuse_library_float(t, "reduce_scatter")) != DT_OK) return st;
    int rank = c->layout.rank;
    chunk_counts(m, c->layout.size, n, m->scount, m->sdispl);
    size_t es = elem_size(t), len = (size_t)m->scount[rank];
    void *recv = NULL;
    if ((st = scratch(m, len * es + es, &recv)) != DT_OK) return st;
    MPI_Request req;
    char what[160];
    snprintf(what, sizeof what, "reduce_scatter (MPI_Ireduce_scatter of %zu %s elements)", n, dtype_name(t));
    int rc = MPI_Ireduce_scatter(buf, recv, m->scount, mpi_type(t), MPI_SUM, m->comm, &req);
    if ((st = finish(m, rc, &req, what)) != DT_OK) return st;
    memcpy((char *)buf + (size_t)m->sdispl[rank] * es, recv, len * es);
    return DT_OK;
}

static dt_status mpi_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    (void)stream;
    mpi_impl *m = c->impl;
    dt_status st = usable(m, "allgather", n);
    if (st != DT_OK || n == 0) return st;
    chunk_counts(m, c->layout.size, n, m->scount, m->sdispl);
    MPI_Request req;
    char what[160];
    snprintf(what, sizeof what, "allgather (MPI_Iallgatherv of %zu %s elements)", n, dtype_name(t));
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, m->scount, m->sdispl, mpi_type(t), m->comm, &req);
    return finish(m, rc, &req, what);
}

static dt_status mpi_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream) {
    (void)stream;
    mpi_impl *m = c->impl;
    dt_status st = usable(m, "broadcast", 0);
    for (size_t done = 0; st == DT_OK && done < bytes;) {
        size_t piece = bytes - done > (size_t)1 << 30 ? (size_t)1 << 30 : bytes - done;
        MPI_Request req;
        char what[160];
        snprintf(what, sizeof what, "broadcast (MPI_Ibcast of %zu bytes from rank %d)", bytes, root);
        int rc = MPI_Ibcast((char *)buf + done, (int)piece, MPI_BYTE, root, m->comm, &req);
        st = finish(m, rc, &req, what);
        done += piece;
    }
    return st;
}

static dt_status mpi_barrier(dt_comm *c) {
    mpi_impl *m = c->impl;
    dt_status st = usable(m, "barrier", 0);
    if (st != DT_OK) return st;
    MPI_Request req;
    return finish(m, MPI_Ibarrier(m->comm, &req), &req, "barrier (MPI_Ibarrier)");
}

static void impl_free(mpi_impl *m) {
    free(m->scratch);
    free(m->scount);
    free(m->sdispl);
    free(m->rcount);
    free(m->rdispl);
    free(m);
}

/* A communicator whose collective failed is left as it is: freeing it or finalising MPI
 * would wait for the rank that is gone. */
static void mpi_destroy(dt_comm *c) {
    mpi_impl *m = c->impl;
    if (!m) return;
    if (!m->failed) {
        MPI_Comm_free(&m->comm);
        if (--g_users == 0) MPI_Finalize();
    }
    impl_free(m);
    c->impl = NULL;
}

static const dt_comm_ops mpi_ops = {"mpi",         0,          mpi_allreduce, mpi_reduce_scatter,
                                    mpi_allgather, mpi_broadcast, mpi_barrier, mpi_destroy};

/* ---- env.json's record: the library and the collective settings in effect ------------- */

static size_t put_json_string(char *buf, size_t cap, size_t n, const char *s) {
    if (n < cap) buf[n] = '"';
    n++;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p < 0x20) snprintf(esc, sizeof esc, "\\u%04x", *p);
        else snprintf(esc, sizeof esc, "%c", *p);
        for (const char *e = esc; *e; e++, n++)
            if (n < cap) buf[n] = *e;
    }
    if (n < cap) buf[n] = '"';
    return n + 1;
}

static size_t put(char *buf, size_t cap, size_t n, const char *s) {
    for (; *s; s++, n++)
        if (n < cap) buf[n] = *s;
    return n;
}

/* The OpenMPI settings that choose collective components and algorithms: the OMPI_MCA_coll*
 * and OMPI_MCA_op* variables of the environment, and the values MPI_T reports for the
 * component selection, their priorities and the tuned component's algorithm choices (which
 * include settings from OpenMPI's parameter files). */
static size_t record_settings(char *buf, size_t cap, size_t n) {
    extern char **environ;
    n = put(buf, cap, n, ",\"openmpi_env\":{");
    int k = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "OMPI_MCA_coll", 13) && strncmp(*e, "OMPI_MCA_op", 11)) continue;
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        if (k++) n = put(buf, cap, n, ",");
        n = put_json_string(buf, cap, n, name);
        n = put(buf, cap, n, ":");
        n = put_json_string(buf, cap, n, eq + 1);
    }
    n = put(buf, cap, n, "},\"openmpi_coll_params\":{");
    int provided, num = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS || MPI_T_cvar_get_num(&num) != MPI_SUCCESS) {
        n = put(buf, cap, n, "}");
        return n;
    }
    k = 0;
    for (int i = 0; i < num; i++) {
        char name[256], desc[8];
        int nlen = sizeof name, dlen = sizeof desc, verb, bind, scope, count;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) != MPI_SUCCESS) continue;
        size_t len = strlen(name);
        int wanted = !strcmp(name, "coll") || !strcmp(name, "coll_tuned_use_dynamic_rules") ||
                     !strcmp(name, "coll_tuned_dynamic_rules_filename") ||
                     (!strncmp(name, "coll_", 5) && len > 9 && !strcmp(name + len - 9, "_priority")) ||
                     (!strncmp(name, "coll_tuned_", 11) && len > 10 && !strcmp(name + len - 10, "_algorithm"));
        if (!wanted || bind != MPI_T_BIND_NO_OBJECT) continue;
        MPI_T_cvar_handle h;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) continue;
        char val[4096] = "";
        int tsize = 0;
        MPI_Type_size(dt, &tsize);
        if (dt == MPI_CHAR && count <= (int)sizeof val) {
            if (MPI_T_cvar_read(h, val) != MPI_SUCCESS) snprintf(val, sizeof val, "(not read)");
            val[sizeof val - 1] = 0;
        } else if (count == 1 && dt == MPI_DOUBLE) {
            double v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(val, sizeof val, "%.17g", v);
        } else if (count == 1 && dt == MPI_INT) {
            int v = 0;
            if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(val, sizeof val, "%d", v);
        } else if (count == 1 && tsize >= 1 && tsize <= 8) { /* unsigned, count and bool values */
            unsigned char raw[8] = {0};
            unsigned long long v = 0;
            if (MPI_T_cvar_read(h, raw) == MPI_SUCCESS) {
                for (int b = tsize - 1; b >= 0; b--) v = v << 8 | raw[b]; /* x86-64: little-endian */
                snprintf(val, sizeof val, "%llu", v);
            }
        } else {
            snprintf(val, sizeof val, "(not read)");
        }
        MPI_T_cvar_handle_free(&h);
        if (k++) n = put(buf, cap, n, ",");
        n = put_json_string(buf, cap, n, name);
        n = put(buf, cap, n, ":");
        n = put_json_string(buf, cap, n, val);
    }
    MPI_T_finalize();
    return put(buf, cap, n, "}");
}

static void make_record(char *buf, size_t cap) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS) snprintf(lib, sizeof lib, "unknown");
    while (len > 0 && (lib[len - 1] == '\n' || lib[len - 1] == ' ')) lib[--len] = 0;
    MPI_Get_version(&major, &minor);
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d", major, minor);
    size_t n = put(buf, cap, 0, "\"mpi_library\":");
    n = put_json_string(buf, cap, n, lib);
    n = put(buf, cap, n, ",\"mpi_standard\":");
    n = put_json_string(buf, cap, n, ver);
    n = record_settings(buf, cap, n);
    if (n >= cap) { /* too many settings to hold: say so rather than cut the JSON */
        n = put(buf, cap, 0, "\"mpi_library\":");
        n = put_json_string(buf, cap, n, lib);
        n = put(buf, cap, n, ",\"openmpi_settings\":\"(too long to record)\"");
    }
    buf[n < cap ? n : cap - 1] = 0;
}

/* ---- start --------------------------------------------------------------------------- */

dt_status dt_mpi_plugin_create(const dt_mpi_host *host, const dt_mpi_args *a, dt_comm **out) {
    *out = NULL;
    if (host->abi != DT_MPI_PLUGIN_ABI || host->comm_size != sizeof(dt_comm) || host->ops_size != sizeof(dt_comm_ops))
        return host->fail(DT_EUNSUPPORTED, "the MPI engine's plugin was built from another detrain (its interface "
                          "differs): rebuild it with `make mpi`");
    g_host = host;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return fail(DT_ESTATE, "the MPI engine: MPI was finalised in this process and cannot start again");
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return fail(DT_EIO, "the MPI engine: MPI_Init_thread failed (is this process started by mpirun?)");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int wrank = -1, wsize = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wsize != a->size || wrank != a->rank) {
        if (!inited && !g_users) MPI_Finalize();
        return fail(DT_EMISMATCH, "the MPI engine: MPI's world is rank %d of %d but the launcher's variables say "
                    "rank %d of %d: start detrain with mpirun directly (not inside another launcher's process)",
                    wrank, wsize, a->rank, a->size);
    }
    mpi_impl *m = calloc(1, sizeof *m);
    dt_comm *c = calloc(1, sizeof *c);
    size_t sz = sizeof(int) * (size_t)wsize;
    if (m) {
        m->scount = malloc(sz);
        m->sdispl = malloc(sz);
        m->rcount = malloc(sz);
        m->rdispl = malloc(sz);
    }
    if (!m || !c || !m->scount || !m->sdispl || !m->rcount || !m->rdispl) {
        if (m) impl_free(m);
        free(c);
        return fail(DT_ENOMEM, "the MPI engine: out of memory");
    }
    m->host = host;
    m->timeout_sec = a->timeout_sec;
    m->comm = MPI_COMM_WORLD;
    /* every rank has arrived before the (blocking) split: a rank that never comes is a
     * timeout here, not a hang in MPI_Comm_split */
    MPI_Request req;
    dt_status st = finish(m, MPI_Ibarrier(MPI_COMM_WORLD, &req), &req, "the start (MPI_Ibarrier on MPI_COMM_WORLD)");
    if (st == DT_OK) {
        int rc = MPI_Comm_split(MPI_COMM_WORLD, 0, a->order[wrank], &m->comm);
        if (rc != MPI_SUCCESS) {
            m->comm = MPI_COMM_WORLD;
            st = mpi_error(m, "the start (MPI_Comm_split by logical rank)", rc);
        }
    }
    int lrank = -1;
    if (st == DT_OK) {
        MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(m->comm, &lrank);
        if (lrank != a->order[wrank])
            st = fail(DT_ESTATE, "the MPI engine: process %d is rank %d of the split communicator, not logical rank %d",
                      wrank, lrank, a->order[wrank]);
    }
    if (st != DT_OK) {
        impl_free(m);
        free(c);
        return st;
    }
    make_record(m->head.record, sizeof m->head.record);
    g_users++;
    c->ops = &mpi_ops;
    c->layout = (dt_layout){lrank, wsize};
    c->impl = m;
    *out = c;
    return DT_OK;
}
