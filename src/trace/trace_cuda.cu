/* Tracing device tensors (see trace_cuda.h). */
#include "trace/trace_cuda.h"

#include "ops/cuda/cuda_common.cuh"
#include "trace/digest_cuda.h"

extern "C" {
#include "trace/inject.h"
}

#include <string.h>

static void add(dt_gtrace_set *s, const char *name, const void *dev, int dtype, int64_t rows,
                int64_t cols, int order_sensitive) {
    if (s->n == DT_GTRACE_MAX || (order_sensitive && s->nrows_used)) {
        s->overflow = 1;
        return;
    }
    dt_tensor_ref *r = &s->r[s->n++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->data = dev;
    r->dtype = dtype;
    r->ndim = 2;
    r->shape[0] = rows;
    r->shape[1] = cols;
    r->order_sensitive = order_sensitive;
    if (order_sensitive) s->nrows_used = 1;
}

void dt_gtrace_add(dt_gtrace_set *s, const char *name, const void *dev, int dtype, int64_t rows,
                   int64_t cols) {
    add(s, name, dev, dtype, rows, cols, 0);
}

void dt_gtrace_add_rows(dt_gtrace_set *s, const char *name, const void *dev, int dtype,
                        int64_t rows, int64_t cols) {
    add(s, name, dev, dtype, rows, cols, 1);
}

dt_status dt_gtrace_digest(dt_gtrace_set *s, cudaStream_t st) {
    if (s->overflow)
        return dt_fail(DT_EINVAL, "trace hook with more than %d tensors or two order-sensitive "
                       "ones: a bug in the hook site (raise DT_GTRACE_MAX)", DT_GTRACE_MAX);
    /* one batch (one synchronisation): every tensor's digest, then the row chunks of the
     * order-sensitive one. Static arrays: one host thread drives the hooks (trace.h). */
    enum { MAXP = DT_GTRACE_MAX + DT_TRACE_MAX_ROW_DIGESTS };
    static const void *ptrs[MAXP];
    static size_t sizes[MAXP];
    static uint64_t vals[MAXP];
    size_t np = (size_t)s->n;
    int rows_of = -1;
    int64_t nch = 0;
    for (int i = 0; i < s->n; i++) {
        dt_tensor_ref *r = &s->r[i];
        int64_t numel = r->shape[0] * r->shape[1];
        ptrs[i] = r->data;
        sizes[i] = (size_t)numel * dt_trace_dtype_size(r->dtype);
        if (r->order_sensitive && numel > 0) {
            int64_t rows = 0, per = 0;
            nch = dt_trace_row_chunks(r, &rows, &per);
            if (nch <= 0 || nch > DT_TRACE_MAX_ROW_DIGESTS)
                return dt_fail(DT_EINVAL, "trace tensor %s: %lld rows do not cut into row chunks",
                               r->name, (long long)rows);
            dt_cu_digest_row_pieces(r->data, sizes[i] / (size_t)rows, rows, per, nch, ptrs + np, sizes + np);
            rows_of = i;
        }
    }
    size_t total = np + (size_t)(rows_of >= 0 ? nch : 0);
    dt_status e = dt_cu_digest_batch(ptrs, sizes, total, st, vals);
    if (e != DT_OK) return e;
    for (int i = 0; i < s->n; i++) {
        if (i == rows_of) {
            s->rows[0] = vals[i];
            memcpy(s->rows + 1, vals + np, sizeof(uint64_t) * (size_t)nch);
            s->r[i].digests = s->rows;
        } else {
            s->d[i] = vals[i];
            s->r[i].digests = &s->d[i];
        }
    }
    return DT_OK;
}

dt_status dt_gtrace_begin(dt_trace_op **h, int level, int phase, const char *op,
                          const char *variant, dt_gtrace_set *in, cudaStream_t st) {
    *h = NULL;
    if (!dt_trace_on(level)) return DT_OK;
    dt_status e = dt_gtrace_digest(in, st);
    if (e != DT_OK) return e;
    *h = dt_trace_begin(level, phase, op, variant, in->r, in->n);
    return DT_OK;
}

dt_status dt_gtrace_end(dt_trace_op *h, dt_gtrace_set *out, cudaStream_t st) {
    if (!h) return DT_OK;
    dt_status e = dt_gtrace_digest(out, st);
    if (e != DT_OK) return e;
    dt_trace_end(h, out->r, out->n);
    return DT_OK;
}

/* x ^= 1 on each element's bit pattern (the lowest mantissa bit of a float type). */
template <typename U>
__global__ void flip_lsb(U *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] ^= (U)1;
}

dt_status dt_cu_flip_lsb(void *dev, size_t n, int elem_size, cudaStream_t st) {
    if (n == 0) return DT_OK;
    unsigned grid = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    switch (elem_size) {
    case 2: flip_lsb<<<grid, 256, 0, st>>>((unsigned short *)dev, n); break;
    case 4: flip_lsb<<<grid, 256, 0, st>>>((unsigned int *)dev, n); break;
    case 8: flip_lsb<<<grid, 256, 0, st>>>((unsigned long long *)dev, n); break;
    default: return dt_fail(DT_EINVAL, "dt_cu_flip_lsb: element size %d (2, 4 or 8)", elem_size);
    }
    return dt_cu_check(cudaGetLastError(), "inject: flip launch");
}

dt_status dt_gtrace_inject(const char *op, int64_t step, void *dev, size_t n, int elem_size,
                           cudaStream_t st) {
    if (!dt_inject_should(op, step)) return DT_OK;
    return dt_cu_flip_lsb(dev, n, elem_size, st);
}
