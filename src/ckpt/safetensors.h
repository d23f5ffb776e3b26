/* safetensors files: writer and strict reader.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON header, then the data
 * buffer. The header is an object mapping each tensor name to
 * {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} (offsets relative to the data
 * buffer) plus an optional "__metadata__" object of string values. The writer pads the
 * header with spaces so the data starts 8-byte aligned, lays tensors out contiguously in
 * the order given, and writes the file durably (durable.h).
 *
 * The reader trusts nothing: header length within the file and at most 100 MB, strict JSON
 * (core/json_read.h), only known dtypes, integer shapes whose element count times the dtype
 * size equals the offset span, offsets that tile the data buffer exactly (sorted by begin,
 * each begin equals the previous end, no hole, no overlap, nothing after the last tensor),
 * no duplicate names, no unknown fields. Every violation is DT_ECORRUPT naming the file,
 * the tensor and the problem; hostile input never crashes it. */
#ifndef DT_CKPT_SAFETENSORS_H
#define DT_CKPT_SAFETENSORS_H

#include "ckpt/sha256.h"
#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_ST_MAX_DIMS 8
#define DT_ST_MAX_HEADER (100u * 1024u * 1024u)

typedef enum dt_dtype {
    DT_BOOL, DT_U8, DT_I8, DT_F8_E5M2, DT_F8_E4M3, DT_I16, DT_U16, DT_F16, DT_BF16,
    DT_I32, DT_U32, DT_F32, DT_F64, DT_I64, DT_U64, DT_NUM_DTYPES
} dt_dtype;

/* Bytes per element; 0 for an out-of-range value. */
size_t dt_dtype_size(dt_dtype t);
/* safetensors spelling ("F32"); "?" for an out-of-range value. */
const char *dt_dtype_name(dt_dtype t);
/* Parses a safetensors dtype name; 0 if unknown. */
int dt_dtype_parse(const char *name, dt_dtype *out);

/* Produces the bytes of one tensor into dst (nbytes = numel * dtype size), for tensors
 * that are not stored contiguously in memory (e.g. transposed on export). */
typedef dt_status (*dt_st_fill_fn)(const void *ctx, void *dst, size_t nbytes);

/* One tensor to write. Exactly one of data / fill is set. */
typedef struct dt_st_tensor {
    const char *name;
    dt_dtype dtype;
    int ndim;                       /* 0..DT_ST_MAX_DIMS (0: a scalar) */
    int64_t shape[DT_ST_MAX_DIMS];
    const void *data;               /* numel * dtype size bytes, little-endian */
    dt_st_fill_fn fill;
    const void *fill_ctx;
} dt_st_tensor;

/* One "__metadata__" entry; both strings are written JSON-escaped. */
typedef struct dt_st_meta {
    const char *key;
    const char *value;
} dt_st_meta;

/* Writes `path` durably. Names must be unique, non-empty and not "__metadata__".
 * digests: NULL or an array of n digests receiving the SHA-256 of each tensor's bytes as
 * written. Crash points header-written:<base>, tensor-written[:<base>] (durable.h). */
dt_status dt_st_write(const char *path, const dt_st_tensor *tensors, int n,
                      const dt_st_meta *meta, int nmeta, uint8_t (*digests)[DT_SHA256_LEN]);

/* One tensor of a file that was read. */
typedef struct dt_st_entry {
    char *name;
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;            /* byte offsets into the data buffer */
} dt_st_entry;

/* An opened, validated file. Entries are in header order. */
typedef struct dt_st_file {
    char *label;                    /* the path (or the label given to dt_st_parse) */
    int fd;                         /* -1 for a file parsed from memory */
    const uint8_t *mem;             /* whole file, for dt_st_parse; not owned */
    uint64_t size;                  /* file size in bytes */
    uint64_t data_start;            /* 8 + header length */
    int n;
    dt_st_entry *t;
    int nmeta;
    char **meta_keys, **meta_values;
} dt_st_file;

/* Opens and validates `path` (reads only the header; tensor data is read on demand).
 * On failure *f needs no close. */
dt_status dt_st_open(const char *path, dt_st_file *f);
/* Same for a whole file held in memory (the buffer must outlive f). */
dt_status dt_st_parse(const void *buf, size_t n, const char *label, dt_st_file *f);
void dt_st_close(dt_st_file *f);

/* Entry by name, or NULL. */
const dt_st_entry *dt_st_find(const dt_st_file *f, const char *name);
/* Metadata value by key, or NULL. */
const char *dt_st_meta_get(const dt_st_file *f, const char *key);
/* Copies the bytes of tensor e into dst; dst_bytes must equal end - begin. */
dt_status dt_st_read(const dt_st_file *f, const dt_st_entry *e, void *dst, size_t dst_bytes);
/* Copies n bytes starting at byte `off` of tensor e into dst (DT_EINVAL if the range is
 * not inside the tensor). For reading large tensors in pieces. */
dt_status dt_st_read_range(const dt_st_file *f, const dt_st_entry *e, uint64_t off, void *dst, size_t n);
/* Finds `name`, checks its dtype and shape exactly and reads it into dst (sized for that
 * shape). A missing tensor or a different dtype/shape is DT_EMISMATCH naming the file, the
 * tensor, what was expected and what the file holds. */
dt_status dt_st_read_expect(const dt_st_file *f, const char *name, dt_dtype dtype, int ndim,
                            const int64_t *shape, void *dst);
/* SHA-256 of tensor e's bytes as stored. */
dt_status dt_st_digest(const dt_st_file *f, const dt_st_entry *e, uint8_t out[DT_SHA256_LEN]);

#endif
