/* Trace file reader: loads one rank file (format.h) fully into memory and validates every
 * record (framing, checksum, field bounds). Any defect is an error naming the file and
 * the byte offset (fail closed): a damaged trace must never produce a diff verdict. */
#ifndef DT_TRACE_READER_H
#define DT_TRACE_READER_H

#include "detrain/detrain.h"
#include "trace/trace.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dt_trace_rec_tensor {
    const char *name;
    int dtype, ndim;
    int64_t shape[DT_TRACE_MAX_DIMS];
    int64_t numel;
    uint64_t digest;
    int64_t rows, rows_per_chunk;     /* 0, 0 unless order-sensitive */
    uint32_t nchunks;
    const unsigned char *chunks;      /* nchunks little-endian u64: dt_trace_chunk_digest */
} dt_trace_rec_tensor;

typedef struct dt_trace_rec {
    int64_t step;
    int32_t micro;
    uint32_t occurrence;
    int level, phase;
    const char *scope, *op, *variant, *kernel;  /* never NULL ("" when empty) */
    int nin, nout;
    size_t tensor0;                   /* f->tensors[tensor0 .. +nin) inputs, then outputs */
    uint64_t offset;                  /* byte offset of the record in the file */
} dt_trace_rec;

typedef struct dt_trace_file {
    char path[4096];
    unsigned char *data;              /* whole file; strings point into it */
    size_t size;
    int rank, level;
    const char *steps_spec, *ranks_spec;
    const char *digest;               /* how tensors were digested (trace.h: dt_trace_config) */
    int closed;                       /* END record present */
    size_t torn;                      /* bytes of a torn last record (allow_unclosed), else 0 */
    dt_trace_rec *events;           /* in the rank's execution (completion) order */
    size_t nevents;
    dt_trace_rec_tensor *tensors;
    size_t ntensors;
} dt_trace_file;

/* Loads and validates `path`. DT_ECORRUPT (naming file and offset) on any defect; a file
 * without its END record is refused unless allow_unclosed (a run that died before
 * dt_trace_close: complete records are still valid evidence). With allow_unclosed a last
 * record the file ends inside (torn by a crash mid-append, after the header record) is
 * left out and its size kept in out->torn; a complete record that fails its checksum or
 * bounds is still corrupt. On failure *out is freed. */
dt_status dt_trace_file_load(const char *path, int allow_unclosed, dt_trace_file *out);
void dt_trace_file_free(dt_trace_file *f);

uint64_t dt_trace_chunk_digest(const dt_trace_rec_tensor *t, uint32_t i);
static inline const dt_trace_rec_tensor *dt_trace_in(const dt_trace_file *f,
                                                 const dt_trace_rec *e, int i) {
    return &f->tensors[e->tensor0 + (size_t)i];
}
static inline const dt_trace_rec_tensor *dt_trace_out(const dt_trace_file *f,
                                                  const dt_trace_rec *e, int i) {
    return &f->tensors[e->tensor0 + (size_t)e->nin + (size_t)i];
}

#endif
