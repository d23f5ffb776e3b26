/* The communicator factory (see comm_factory.h). */
#include "dist/comm_factory.h"

#include "core/fingerprint.h"
#include "dist/comm_mpi.h"
#include "dist/comm_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *engine_name(int e) {
    static const char *names[] = {"auto", "single", "mpi", "nccl"};
    return e >= 0 && e <= DT_DIST_NCCL ? names[e] : "?";
}

dt_status dt_comm_spec_from_config(dt_comm_spec *s, const dt_train_config *cfg) {
    memset(s, 0, sizeof *s);
    s->engine = cfg->dist_engine;
    s->device = cfg->device;
    s->rank_order = cfg->rank_order;
    s->timeout_sec = cfg->dist_timeout_sec > 0 ? cfg->dist_timeout_sec : 300.0;
    return dt_launch_from_environ(&s->launch);
}

dt_status dt_comm_parse_rank_order(const char *text, int size, int *order) {
    if (!text) {
        for (int i = 0; i < size; i++) order[i] = i;
        return DT_OK;
    }
    unsigned char *seen = calloc((size_t)size, 1);
    if (!seen) return dt_fail(DT_ENOMEM, "out of memory for --rank-order");
    dt_status st = DT_OK;
    const char *p = text;
    int n = 0;
    for (;;) {
        size_t len = strspn(p, "0123456789");
        long v = len && len <= 8 ? strtol(p, NULL, 10) : -1;
        if (len == 0 || len > 8 || (p[len] != ',' && p[len] != 0)) {
            st = dt_fail(DT_EINVAL, "--rank-order %s: entry %d is not a rank number (write the logical ranks of "
                         "processes 0..%d, comma-separated, e.g. %s)", text, n, size - 1, size == 2 ? "1,0" : "2,0,1");
            break;
        }
        if (n >= size || v >= size) {
            st = dt_fail(DT_EINVAL, "--rank-order %s: the job has %d ranks, so it lists each of 0..%d once", text,
                         size, size - 1);
            break;
        }
        if (seen[v]) {
            st = dt_fail(DT_EINVAL, "--rank-order %s: logical rank %ld appears twice (it must be a permutation of "
                         "0..%d)", text, v, size - 1);
            break;
        }
        seen[v] = 1;
        order[n++] = (int)v;
        if (!p[len]) break;
        p += len + 1;
    }
    if (st == DT_OK && n != size)
        st = dt_fail(DT_EINVAL, "--rank-order %s lists %d ranks; the job has %d (list each of 0..%d once)", text, n,
                     size, size - 1);
    free(seen);
    return st;
}

dt_status dt_comm_resolve_engine(const dt_comm_spec *s, int *engine) {
    const dt_launch *l = &s->launch;
    int e = s->engine;
    if (e == DT_DIST_AUTO) {
        if (s->device) e = l->size > 1 ? DT_DIST_NCCL : DT_DIST_SINGLE;
        else if (l->size == 1) e = DT_DIST_SINGLE;
        else if (l->by_mpirun) e = DT_DIST_MPI;
        else
            return dt_fail(DT_EINVAL, "%d ranks on the CPU launched by %s: the CPU engine between processes is MPI; "
                           "launch with mpirun (or give --dist-engine mpi if this launcher starts MPI processes)",
                           l->size, l->launcher);
    }
    if (e == DT_DIST_SINGLE && l->size > 1)
        return dt_fail(DT_EINVAL, "--dist-engine single under %s with %d ranks: each rank would train alone on the "
                       "same data; use --dist-engine auto (or %s), or launch one process", l->launcher, l->size,
                       s->device ? "nccl" : "mpi");
    if (e == DT_DIST_MPI && s->device)
        return dt_fail(DT_EINVAL, "--dist-engine mpi moves host buffers; with --device cuda the engine between GPUs "
                       "is nccl (--dist-engine auto or nccl)");
    if (e == DT_DIST_NCCL && !s->device)
        return dt_fail(DT_EINVAL, "--dist-engine nccl connects GPUs: it needs --device cuda (on the CPU use mpi or "
                       "auto)");
    if (e == DT_DIST_NCCL && l->size > 1 && !l->by_mpirun && !l->rendezvous[0])
        return dt_fail(DT_EINVAL, "--dist-engine nccl with %d ranks launched by %s: the ranks meet through mpirun or "
                       "a rendezvous; set DETRAIN_RENDEZVOUS=file:/shared/path or tcp:HOST:PORT (rank 0's), or "
                       "launch with mpirun", l->size, l->launcher);
    *engine = e;
    return DT_OK;
}

/* ---- NCCL bootstrapped by the MPI engine: the MPI communicator lives as long as NCCL's --- */

typedef struct nccl_over_mpi {
    dt_comm *nccl, *mpi;
} nccl_over_mpi;

static dt_comm *inner(dt_comm *c) { return ((nccl_over_mpi *)c->impl)->nccl; }
static dt_status om_allreduce(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode m, void *stream) {
    return inner(c)->ops->allreduce(inner(c), buf, n, t, m, stream);
}
static dt_status om_reduce_scatter(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, dt_reduce_mode m,
                                   void *stream) {
    return inner(c)->ops->reduce_scatter(inner(c), buf, n, t, m, stream);
}
static dt_status om_allgather(dt_comm *c, void *buf, size_t n, dt_comm_dtype t, void *stream) {
    return inner(c)->ops->allgather(inner(c), buf, n, t, stream);
}
static dt_status om_broadcast(dt_comm *c, void *buf, size_t bytes, int root, void *stream) {
    return inner(c)->ops->broadcast(inner(c), buf, bytes, root, stream);
}
static dt_status om_barrier(dt_comm *c) { return inner(c)->ops->barrier(inner(c)); }
static void om_destroy(dt_comm *c) {
    nccl_over_mpi *o = c->impl;
    dt_comm_free(o->nccl);
    dt_comm_free(o->mpi);
    free(o);
    c->impl = NULL;
}
static const dt_comm_ops nccl_over_mpi_ops = {"nccl",         1,          om_allreduce, om_reduce_scatter,
                                              om_allgather,   om_broadcast, om_barrier, om_destroy};

static dt_status create_nccl(dt_comm **out, const dt_comm_spec *s, const int *order, dt_comm *mpi) {
    const dt_launch *l = &s->launch;
    dt_nccl_spec ns = {{order[l->rank], l->size}, l->local_rank, mpi, l->rendezvous[0] ? l->rendezvous : NULL,
                       (int)(s->timeout_sec * 1000.0)};
    if (mpi) ns.layout = mpi->layout;
    dt_comm *nccl = NULL;
    dt_status st = dt_comm_create_nccl(&nccl, &ns);
    if (st != DT_OK) return st;
    if (!mpi) {
        *out = nccl;
        return DT_OK;
    }
    nccl_over_mpi *o = malloc(sizeof *o);
    dt_comm *c = calloc(1, sizeof *c);
    if (!o || !c) {
        free(o);
        free(c);
        dt_comm_free(nccl);
        return dt_fail(DT_ENOMEM, "out of memory for the communicator");
    }
    *o = (nccl_over_mpi){nccl, mpi};
    c->ops = &nccl_over_mpi_ops;
    c->layout = nccl->layout;
    c->impl = o;
    *out = c;
    return DT_OK;
}

dt_status dt_comm_create_spec(dt_comm **out, const dt_comm_spec *s) {
    *out = NULL;
    const dt_launch *l = &s->launch;
    int engine;
    dt_status st = dt_comm_resolve_engine(s, &engine);
    if (st != DT_OK) return st;
    int *order = malloc(sizeof *order * (size_t)l->size);
    if (!order) return dt_fail(DT_ENOMEM, "out of memory for the rank order");
    if ((st = dt_comm_parse_rank_order(s->rank_order, l->size, order)) != DT_OK) {
        free(order);
        return st;
    }
    dt_mpi_spec ms = {l, order, s->timeout_sec, s->mpi_plugin};
    if (engine == DT_DIST_SINGLE) {
        st = dt_comm_create_single(out);
    } else if (engine == DT_DIST_MPI) {
        st = dt_comm_create_mpi(out, &ms);
    } else {
        dt_comm *mpi = NULL;
        if (l->by_mpirun && l->size > 1 && (st = dt_comm_create_mpi(&mpi, &ms)) != DT_OK)
            st = dt_fail_context(st, "the NCCL engine's bootstrap under mpirun");
        if (st == DT_OK && (st = create_nccl(out, s, order, mpi)) != DT_OK) dt_comm_free(mpi);
    }
    free(order);
    return st;
}

dt_status dt_comm_create(dt_comm **out, const dt_train_config *cfg) {
    *out = NULL;
    dt_comm_spec s;
    dt_status st = dt_comm_spec_from_config(&s, cfg);
    return st == DT_OK ? dt_comm_create_spec(out, &s) : st;
}

void dt_comm_record_json(const dt_comm *c, const dt_comm_spec *s, int contract, char *buf, size_t cap) {
    const dt_launch *l = &s->launch;
    if (contract) {
        const char *mpi = dt_comm_mpi_record(c);
        snprintf(buf, cap, "{\"engine\":\"%s\",\"world_size\":%d%s%s}", c->ops->engine, c->layout.size,
                 *mpi ? "," : "", mpi);
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "{\"launcher\":\"%s\",\"process_rank\":%d,\"rank\":%d,\"local_rank\":%d,"
                                "\"engine_asked\":\"%s\",\"rank_order\":[", l->launcher, l->rank, c->layout.rank,
                                l->local_rank, engine_name(s->engine));
    int *order = malloc(sizeof *order * (size_t)l->size);
    if (order && dt_comm_parse_rank_order(s->rank_order, l->size, order) == DT_OK)
        for (int i = 0; i < l->size && n < cap; i++)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d", i ? "," : "", order[i]);
    free(order);
    if (n < cap) snprintf(buf + n, cap - n, "]}");
}

dt_status dt_comm_record_env(const dt_comm *c, const dt_train_config *cfg) {
    dt_comm_spec s;
    dt_status st = dt_comm_spec_from_config(&s, cfg);
    if (st != DT_OK) return st;
    enum { CAP = 16384 };
    char *contract = malloc(CAP), *info = malloc(CAP);
    if (contract && info) {
        dt_comm_record_json(c, &s, 1, contract, CAP);
        dt_comm_record_json(c, &s, 0, info, CAP);
        st = dt_fingerprint_set_dist(contract, info);
    } else {
        st = dt_fail(DT_ENOMEM, "out of memory for the communicator's record");
    }
    free(contract);
    free(info);
    return st;
}
