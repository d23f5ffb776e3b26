/* safetensors writer and strict reader (see safetensors.h). */
#include "ckpt/safetensors.h"

#include "ckpt/durable.h"
#include "core/json_read.h"
#include "core/json.h"
#include "core/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; size_t size; } DTYPES[DT_NUM_DTYPES] = {
    [DT_BOOL] = {"BOOL", 1}, [DT_U8] = {"U8", 1},   [DT_I8] = {"I8", 1},
    [DT_F8_E5M2] = {"F8_E5M2", 1}, [DT_F8_E4M3] = {"F8_E4M3", 1},
    [DT_I16] = {"I16", 2},   [DT_U16] = {"U16", 2}, [DT_F16] = {"F16", 2},
    [DT_BF16] = {"BF16", 2}, [DT_I32] = {"I32", 4}, [DT_U32] = {"U32", 4},
    [DT_F32] = {"F32", 4},   [DT_F64] = {"F64", 8}, [DT_I64] = {"I64", 8},
    [DT_U64] = {"U64", 8},
};

size_t dt_dtype_size(dt_dtype t) { return (unsigned)t < DT_NUM_DTYPES ? DTYPES[t].size : 0; }
const char *dt_dtype_name(dt_dtype t) { return (unsigned)t < DT_NUM_DTYPES ? DTYPES[t].name : "?"; }

int dt_dtype_parse(const char *name, dt_dtype *out) {
    for (int i = 0; i < DT_NUM_DTYPES; i++)
        if (strcmp(name, DTYPES[i].name) == 0) { *out = (dt_dtype)i; return 1; }
    return 0;
}

/* numel * dtype size, or 0 with *ok = 0 on overflow. */
static uint64_t tensor_bytes(const int64_t *shape, int ndim, dt_dtype t, uint64_t *numel, int *ok) {
    uint64_t n = 1;
    *ok = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[d], &n)) { *ok = 0; return 0; }
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(n, (uint64_t)dt_dtype_size(t), &bytes)) { *ok = 0; return 0; }
    *numel = n;
    return bytes;
}

/* ---------------------------------------------------------------- writer */

static dt_status check_write_args(const char *path, const dt_st_tensor *t, int n, uint64_t *bytes) {
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !*t[i].name || strcmp(t[i].name, "__metadata__") == 0)
            return dt_fail(DT_EINVAL, "writing '%s': tensor %d has an empty or reserved name", path, i);
        if ((unsigned)t[i].dtype >= DT_NUM_DTYPES || t[i].ndim < 0 || t[i].ndim > DT_ST_MAX_DIMS)
            return dt_fail(DT_EINVAL, "writing '%s': tensor '%s' has a bad dtype or rank", path, t[i].name);
        if (!t[i].data == !t[i].fill)
            return dt_fail(DT_EINVAL, "writing '%s': tensor '%s' needs exactly one of data and fill",
                           path, t[i].name);
        uint64_t numel;
        int ok;
        bytes[i] = tensor_bytes(t[i].shape, t[i].ndim, t[i].dtype, &numel, &ok);
        if (!ok) return dt_fail(DT_EINVAL, "writing '%s': tensor '%s' has a negative or overflowing shape",
                                path, t[i].name);
        for (int j = 0; j < i; j++)
            if (strcmp(t[i].name, t[j].name) == 0)
                return dt_fail(DT_EINVAL, "writing '%s': tensor name '%s' appears twice", path, t[i].name);
    }
    return DT_OK;
}

/* Builds the padded header; caller frees *hdr. */
static dt_status build_header(const char *path, const dt_st_tensor *t, int n, const uint64_t *bytes,
                              const dt_st_meta *meta, int nmeta, char **hdr, size_t *hlen) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return dt_fail(DT_ENOMEM, "writing '%s': cannot build the header", path);
    fputc('{', m);
    if (nmeta > 0) {
        fputs("\"__metadata__\":{", m);
        for (int i = 0; i < nmeta; i++) {
            if (i) fputc(',', m);
            dt_json_write_string(m, meta[i].key);
            fputc(':', m);
            dt_json_write_string(m, meta[i].value);
        }
        fputc('}', m);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (i || nmeta > 0) fputc(',', m);
        dt_json_write_string(m, t[i].name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", dt_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++) fprintf(m, "%s%" PRId64, d ? "," : "", t[i].shape[d]);
        fprintf(m, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + bytes[i]);
        off += bytes[i];
    }
    fputc('}', m);
    /* Pad with spaces so the data buffer starts at a multiple of 8 (8 + header length). */
    long pos = ftell(m);
    while (pos >= 0 && pos % 8 != 0) { fputc(' ', m); pos++; }
    if (fclose(m) != 0 || pos < 0) { free(buf); return dt_fail(DT_ENOMEM, "writing '%s': header build failed", path); }
    *hdr = buf;
    *hlen = len;
    return DT_OK;
}

dt_status dt_st_write(const char *path, const dt_st_tensor *t, int n, const dt_st_meta *meta,
                      int nmeta, uint8_t (*digests)[DT_SHA256_LEN]) {
    if (n < 0 || nmeta < 0) return dt_fail(DT_EINVAL, "writing '%s': negative tensor count", path);
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    if (!bytes) return dt_fail(DT_ENOMEM, "writing '%s': out of memory", path);
    char *hdr = NULL;
    size_t hlen = 0;
    dt_status st = check_write_args(path, t, n, bytes);
    if (st == DT_OK) st = build_header(path, t, n, bytes, meta, nmeta, &hdr, &hlen);
    if (st != DT_OK) { free(bytes); return st; }

    size_t scratch_n = 0;
    for (int i = 0; i < n; i++)
        if (t[i].fill && bytes[i] > scratch_n) scratch_n = (size_t)bytes[i];
    void *scratch = scratch_n ? malloc(scratch_n) : NULL;
    if (scratch_n && !scratch) {
        free(bytes); free(hdr);
        return dt_fail(DT_ENOMEM, "writing '%s': out of memory for a %zu-byte tensor", path, scratch_n);
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));

    dt_durable_file f;
    st = dt_durable_open(&f, path);
    if (st == DT_OK) {
        st = dt_durable_write(&f, len8, 8);
        if (st == DT_OK) st = dt_durable_write(&f, hdr, hlen);
        if (st == DT_OK) dt_crash_point2("header-written", base);
        for (int i = 0; i < n && st == DT_OK; i++) {
            const void *src = t[i].data;
            if (t[i].fill) {
                st = t[i].fill(t[i].fill_ctx, scratch, (size_t)bytes[i]);
                if (st != DT_OK) { dt_fail_context(st, "writing tensor '%s' of '%s'", t[i].name, path); break; }
                src = scratch;
            }
            if (digests) dt_sha256_buf(src, (size_t)bytes[i], digests[i]);
            st = dt_durable_write(&f, src, (size_t)bytes[i]);
            if (st == DT_OK) {
                dt_crash_point2("tensor-written", base);
                dt_crash_point("tensor-written");
            }
        }
        if (st == DT_OK) st = dt_durable_commit(&f);
        else dt_durable_abort(&f);
    }
    free(scratch);
    free(bytes);
    free(hdr);
    return st;
}

/* ---------------------------------------------------------------- reader */

static dt_status read_at(const dt_st_file *f, uint64_t off, void *dst, size_t n) {
    if (off > f->size || n > f->size - off)
        return dt_fail(DT_ECORRUPT, "'%s': read of %zu bytes at %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                       f->label, n, off, f->size);
    if (f->mem) { memcpy(dst, f->mem + off, n); return DT_OK; }
    char *p = dst;
    while (n) {
        ssize_t k = pread(f->fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return dt_fail(DT_EIO, "'%s': read failed at byte %" PRIu64 ": %s", f->label, off,
                                   k < 0 ? strerror(errno) : "file shrank while reading");
        p += k; n -= (size_t)k; off += (uint64_t)k;
    }
    return DT_OK;
}

void dt_st_close(dt_st_file *f) {
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->nmeta; i++) { free(f->meta_keys[i]); free(f->meta_values[i]); }
    free(f->t);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->label);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static dt_status bad(const dt_st_file *f, const char *tensor, const char *problem) {
    return dt_fail(DT_ECORRUPT, "'%s': tensor \"%.200s\": %s", f->label, tensor, problem);
}

static dt_status parse_meta(dt_st_file *f, const dt_json_value *m) {
    if (m->type != DT_JSON_OBJECT)
        return dt_fail(DT_ECORRUPT, "'%s': \"__metadata__\" must be an object of strings", f->label);
    f->meta_keys = calloc(m->n + 1, sizeof(char *));
    f->meta_values = calloc(m->n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_values) return dt_fail(DT_ENOMEM, "'%s': out of memory", f->label);
    for (size_t i = 0; i < m->n; i++) {
        if (m->items[i].type != DT_JSON_STRING)
            return dt_fail(DT_ECORRUPT, "'%s': \"__metadata__\" value of \"%.200s\" is not a string",
                           f->label, m->keys[i]);
        f->meta_keys[f->nmeta] = strdup(m->keys[i]);
        f->meta_values[f->nmeta] = strdup(m->items[i].text);
        f->nmeta++;
        if (!f->meta_keys[f->nmeta - 1] || !f->meta_values[f->nmeta - 1])
            return dt_fail(DT_ENOMEM, "'%s': out of memory", f->label);
    }
    return DT_OK;
}

static dt_status parse_entry(dt_st_file *f, const char *name, const dt_json_value *v, dt_st_entry *e) {
    if (v->type != DT_JSON_OBJECT) return bad(f, name, "entry is not an object");
    const dt_json_value *dt = NULL, *shape = NULL, *offs = NULL;
    for (size_t i = 0; i < v->n; i++) {
        if (strcmp(v->keys[i], "dtype") == 0) dt = &v->items[i];
        else if (strcmp(v->keys[i], "shape") == 0) shape = &v->items[i];
        else if (strcmp(v->keys[i], "data_offsets") == 0) offs = &v->items[i];
        else return bad(f, name, "unknown field in entry (expected dtype, shape, data_offsets)");
    }
    if (!dt || dt->type != DT_JSON_STRING) return bad(f, name, "missing or non-string \"dtype\"");
    if (!dt_dtype_parse(dt->text, &e->dtype)) {
        char msg[96];
        snprintf(msg, sizeof msg, "unknown dtype \"%.40s\"", dt->text);
        return bad(f, name, msg);
    }
    if (!shape || shape->type != DT_JSON_ARRAY) return bad(f, name, "missing or non-array \"shape\"");
    if (shape->n > DT_ST_MAX_DIMS) return bad(f, name, "shape has more than 8 dimensions");
    e->ndim = (int)shape->n;
    for (size_t d = 0; d < shape->n; d++)
        if (!dt_json_as_i64(&shape->items[d], &e->shape[d]) || e->shape[d] < 0)
            return bad(f, name, "shape entry is not a non-negative integer");
    if (!offs || offs->type != DT_JSON_ARRAY || offs->n != 2)
        return bad(f, name, "missing \"data_offsets\" or it is not [begin, end]");
    int64_t b, en;
    if (!dt_json_as_i64(&offs->items[0], &b) || !dt_json_as_i64(&offs->items[1], &en) || b < 0 || en < b)
        return bad(f, name, "data_offsets must be integers with 0 <= begin <= end");
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    int ok;
    uint64_t bytes = tensor_bytes(e->shape, e->ndim, e->dtype, &e->numel, &ok);
    if (!ok) return bad(f, name, "shape element count overflows");
    if (bytes != e->end - e->begin) {
        char msg[200];
        snprintf(msg, sizeof msg, "shape and dtype give %" PRIu64 " bytes but data_offsets [%" PRIu64
                 ", %" PRIu64 "] span %" PRIu64, bytes, e->begin, e->end, e->end - e->begin);
        return bad(f, name, msg);
    }
    uint64_t data_len = f->size - f->data_start;
    if (e->end > data_len) {
        char msg[200];
        snprintf(msg, sizeof msg, "data_offsets end %" PRIu64 " is past the data buffer (%" PRIu64
                 " bytes): file truncated?", e->end, data_len);
        return bad(f, name, msg);
    }
    e->name = strdup(name);
    return e->name ? DT_OK : dt_fail(DT_ENOMEM, "'%s': out of memory", f->label);
}

static const dt_st_file *g_sort_file; /* qsort has no context argument */

static int by_offset(const void *a, const void *b) {
    const dt_st_entry *x = &g_sort_file->t[*(const int *)a], *y = &g_sort_file->t[*(const int *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors must tile [0, data_len) exactly: sorted by begin, each starts where the
 * previous one ended, and the last one ends at the end of the file. */
static dt_status check_tiling(dt_st_file *f) {
    uint64_t data_len = f->size - f->data_start;
    int *idx = malloc(((size_t)f->n + 1) * sizeof *idx);
    if (!idx) return dt_fail(DT_ENOMEM, "'%s': out of memory", f->label);
    for (int i = 0; i < f->n; i++) idx[i] = i;
    g_sort_file = f;
    qsort(idx, (size_t)f->n, sizeof *idx, by_offset);
    uint64_t expect = 0;
    dt_status st = DT_OK;
    for (int k = 0; k < f->n && st == DT_OK; k++) {
        const dt_st_entry *e = &f->t[idx[k]];
        if (e->begin != expect) {
            char msg[200];
            snprintf(msg, sizeof msg, "data_offsets begin %" PRIu64 " but the previous tensor ends at %" PRIu64
                     " (%s)", e->begin, expect, e->begin < expect ? "overlap" : "hole");
            st = bad(f, e->name, msg);
        }
        expect = e->end;
    }
    free(idx);
    if (st == DT_OK && expect != data_len)
        st = dt_fail(DT_ECORRUPT, "'%s': %" PRIu64 " bytes after the last tensor (which ends at %" PRIu64
                     " of a %" PRIu64 "-byte data buffer): trailing garbage", f->label,
                     data_len - expect, expect, data_len);
    return st;
}

static dt_status parse_header(dt_st_file *f) {
    if (f->size < 8)
        return dt_fail(DT_ECORRUPT, "'%s': %" PRIu64 " bytes is too short for a safetensors file "
                       "(8-byte header length missing): truncated?", f->label, f->size);
    uint8_t len8[8];
    dt_status st = read_at(f, 0, len8, 8);
    if (st != DT_OK) return st;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > DT_ST_MAX_HEADER || hlen > f->size - 8 || hlen < 2)
        return dt_fail(DT_ECORRUPT, "'%s': header length %" PRIu64 " is impossible for a %" PRIu64
                       "-byte file (must be 2..%u and fit in the file): truncated or not safetensors?",
                       f->label, hlen, f->size, DT_ST_MAX_HEADER);
    f->data_start = 8 + hlen;
    char *hdr = malloc((size_t)hlen);
    if (!hdr) return dt_fail(DT_ENOMEM, "'%s': out of memory for a %" PRIu64 "-byte header", f->label, hlen);
    st = read_at(f, 8, hdr, (size_t)hlen);
    if (st == DT_OK && hdr[0] != '{')
        st = dt_fail(DT_ECORRUPT, "'%s': header does not start with '{'", f->label);
    dt_json_value *root = NULL;
    if (st == DT_OK) {
        char what[300];
        snprintf(what, sizeof what, "safetensors header of '%.250s'", f->label);
        st = dt_json_parse(hdr, (size_t)hlen, what, &root);
    }
    free(hdr);
    if (st != DT_OK) return st;
    if (root->type != DT_JSON_OBJECT) {
        dt_json_free(root);
        return dt_fail(DT_ECORRUPT, "'%s': header is not a JSON object", f->label);
    }
    f->t = calloc(root->n + 1, sizeof *f->t);
    if (!f->t) st = dt_fail(DT_ENOMEM, "'%s': out of memory", f->label);
    for (size_t i = 0; i < root->n && st == DT_OK; i++) {
        if (strcmp(root->keys[i], "__metadata__") == 0) { st = parse_meta(f, &root->items[i]); continue; }
        if (root->keys[i][0] == 0) { st = bad(f, "", "empty tensor name"); continue; }
        st = parse_entry(f, root->keys[i], &root->items[i], &f->t[f->n]);
        if (st == DT_OK) f->n++;
    }
    dt_json_free(root);
    if (st == DT_OK) st = check_tiling(f);
    return st;
}

dt_status dt_st_parse(const void *buf, size_t n, const char *label, dt_st_file *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->mem = buf;
    f->size = n;
    f->label = strdup(label);
    if (!f->label) return dt_fail(DT_ENOMEM, "out of memory");
    dt_status st = parse_header(f);
    if (st != DT_OK) dt_st_close(f);
    return st;
}

dt_status dt_st_open(const char *path, dt_st_file *f) {
    memset(f, 0, sizeof *f);
    dt_status ost = dt_open_regular(path, &f->fd, NULL);
    if (ost != DT_OK) return ost;
    struct stat sb;
    f->label = strdup(path);
    dt_status st;
    if (!f->label) st = dt_fail(DT_ENOMEM, "out of memory");
    else if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = dt_fail(DT_EIO, "'%s' is not a readable regular file", path);
    else {
        f->size = (uint64_t)sb.st_size;
        st = parse_header(f);
    }
    if (st != DT_OK) dt_st_close(f);
    return st;
}

const dt_st_entry *dt_st_find(const dt_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *dt_st_meta_get(const dt_st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

dt_status dt_st_read(const dt_st_file *f, const dt_st_entry *e, void *dst, size_t dst_bytes) {
    if (dst_bytes != e->end - e->begin)
        return dt_fail(DT_EINVAL, "'%s': tensor \"%s\" holds %" PRIu64 " bytes, destination has %zu",
                       f->label, e->name, e->end - e->begin, dst_bytes);
    return read_at(f, f->data_start + e->begin, dst, dst_bytes);
}

dt_status dt_st_read_range(const dt_st_file *f, const dt_st_entry *e, uint64_t off, void *dst, size_t n) {
    uint64_t len = e->end - e->begin;
    if (off > len || n > len - off)
        return dt_fail(DT_EINVAL, "'%s': bytes [%" PRIu64 ", +%zu) are outside tensor \"%s\" (%" PRIu64 " bytes)",
                       f->label, off, n, e->name, len);
    return read_at(f, f->data_start + e->begin + off, dst, n);
}

static void shape_str(char *out, size_t cap, dt_dtype t, int ndim, const int64_t *shape) {
    int k = snprintf(out, cap, "%s[", dt_dtype_name(t));
    for (int d = 0; d < ndim && k > 0 && (size_t)k < cap; d++)
        k += snprintf(out + k, cap - (size_t)k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k > 0 && (size_t)k < cap) snprintf(out + k, cap - (size_t)k, "]");
}

dt_status dt_st_read_expect(const dt_st_file *f, const char *name, dt_dtype dtype, int ndim,
                            const int64_t *shape, void *dst) {
    const dt_st_entry *e = dt_st_find(f, name);
    if (!e) return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" is missing", f->label, name);
    int same = e->dtype == dtype && e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char want[160], got[160];
        shape_str(want, sizeof want, dtype, ndim, shape);
        shape_str(got, sizeof got, e->dtype, e->ndim, e->shape);
        return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" is %s, expected %s", f->label, name, got, want);
    }
    return dt_st_read(f, e, dst, (size_t)(e->end - e->begin));
}

dt_status dt_st_digest(const dt_st_file *f, const dt_st_entry *e, uint8_t out[DT_SHA256_LEN]) {
    dt_sha256 s;
    dt_sha256_init(&s);
    uint8_t buf[1 << 16];
    uint64_t off = e->begin;
    while (off < e->end) {
        size_t k = e->end - off < sizeof buf ? (size_t)(e->end - off) : sizeof buf;
        dt_status st = read_at(f, f->data_start + off, buf, k);
        if (st != DT_OK) return st;
        dt_sha256_update(&s, buf, k);
        off += k;
    }
    dt_sha256_final(&s, out);
    return DT_OK;
}
