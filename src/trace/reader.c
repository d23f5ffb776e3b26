/* Trace file reader (see reader.h; the bytes are described in format.h). */
#include "trace/reader.h"

#include "core/digest.h"
#include "core/regular_file.h"
#include "trace/format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bounds-checked cursor over one record's payload. `bad` is set on the first overrun. */
typedef struct cur {
    const unsigned char *p, *end;
    int bad;
} cur;

static const unsigned char *take(cur *c, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) { c->bad = 1; return NULL; }
    const unsigned char *r = c->p;
    c->p += n;
    return r;
}
static uint8_t get8(cur *c) { const unsigned char *p = take(c, 1); return p ? *p : 0; }
static uint16_t get16(cur *c) { const unsigned char *p = take(c, 2); return p ? dt_get_u16(p) : 0; }
static uint32_t get32(cur *c) { const unsigned char *p = take(c, 4); return p ? dt_get_u32(p) : 0; }
static uint64_t get64(cur *c) { const unsigned char *p = take(c, 8); return p ? dt_get_u64(p) : 0; }
static const char *getstr(cur *c) {
    uint16_t n = get16(c);
    const unsigned char *s = take(c, (size_t)n + 1);
    if (!s) return "";
    if (s[n] != 0 || memchr(s, 0, n)) { c->bad = 1; return ""; }
    return (const char *)s;
}

static dt_status corrupt(const dt_trace_file *f, uint64_t off, const char *what) {
    return dt_fail(DT_ECORRUPT, "trace %s is malformed at byte offset %llu: %s; the file is "
                   "damaged or truncated, re-capture it", f->path, (unsigned long long)off, what);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap * 2 : 1024;
    while (c < need) c *= 2;
    void *n = realloc(*p, c * elem);
    if (!n) return 0;
    *p = n;
    *cap = c;
    return 1;
}

static dt_status parse_tensor(dt_trace_file *f, cur *c, dt_trace_rec_tensor *t) {
    memset(t, 0, sizeof *t);
    t->name = getstr(c);
    t->dtype = get8(c);
    t->ndim = get8(c);
    if (c->bad) return DT_ECORRUPT;
    if (t->ndim > DT_TRACE_MAX_DIMS || dt_trace_dtype_size(t->dtype) == 0) return DT_ECORRUPT;
    for (int d = 0; d < t->ndim; d++) t->shape[d] = (int64_t)get64(c);
    t->numel = (int64_t)get64(c);
    t->digest = get64(c);
    t->rows = (int64_t)get64(c);
    t->rows_per_chunk = (int64_t)get64(c);
    t->nchunks = get32(c);
    if (c->bad || t->numel < 0 || t->rows < 0 || t->rows_per_chunk < 0) return DT_ECORRUPT;
    if (t->nchunks > 0) {
        /* ceil(rows / per) without rows + per overflowing (both are non-negative here) */
        if (t->rows_per_chunk <= 0 ||
            (int64_t)t->nchunks != t->rows / t->rows_per_chunk + (t->rows % t->rows_per_chunk != 0))
            return DT_ECORRUPT;
        t->chunks = take(c, (size_t)t->nchunks * 8);
    }
    (void)f;
    return c->bad ? DT_ECORRUPT : DT_OK;
}

static dt_status parse_event(dt_trace_file *f, cur *c, dt_trace_rec *e, size_t *tcap) {
    e->step = (int64_t)get64(c);
    e->micro = (int32_t)get32(c);
    e->occurrence = get32(c);
    e->level = get8(c);
    e->phase = get8(c);
    e->scope = getstr(c);
    e->op = getstr(c);
    e->variant = getstr(c);
    e->tensor0 = f->ntensors;
    e->nin = get16(c);
    if (c->bad || e->level < DT_TRACE_METRICS || e->level > DT_TRACE_KERNEL ||
        e->phase >= DT_PHASE_COUNT)
        return DT_ECORRUPT;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? e->nin : (e->nout = get16(c));
        if (pass == 1 && c->bad) return DT_ECORRUPT;
        if (!grow((void **)&f->tensors, tcap, f->ntensors + (size_t)n, sizeof *f->tensors))
            return DT_ENOMEM;
        for (int i = 0; i < n; i++)
            if (parse_tensor(f, c, &f->tensors[f->ntensors++])) return DT_ECORRUPT;
        if (pass == 0) e->kernel = getstr(c);
    }
    return c->bad || c->p != c->end ? DT_ECORRUPT : DT_OK;
}

dt_status dt_trace_file_load(const char *path, int allow_unclosed, dt_trace_file *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *fp;
    dt_status ost = dt_fopen_regular(path, &fp, NULL);
    if (ost != DT_OK) return dt_fail_context(ost, "trace");
    if (fseek(fp, 0, SEEK_END) != 0) { fclose(fp); return dt_fail(DT_EIO, "cannot seek trace %s", path); }
    long sz = ftell(fp);
    rewind(fp);
    f->size = sz > 0 ? (size_t)sz : 0;
    f->data = malloc(f->size ? f->size : 1);
    if (!f->data) { fclose(fp); return dt_fail(DT_ENOMEM, "cannot hold trace %s (%zu bytes) in memory", path, f->size); }
    size_t got = fread(f->data, 1, f->size, fp);
    fclose(fp);
    if (got != f->size) { dt_trace_file_free(f); return dt_fail(DT_EIO, "short read on trace %s", path); }

    dt_status st = DT_OK;
    if (f->size < DT_TRACE_PREAMBLE || memcmp(f->data, DT_TRACE_MAGIC, 8) != 0) {
        st = corrupt(f, 0, "not a detrain trace (bad magic)");
        goto fail;
    }
    if (dt_get_u32(f->data + 8) != DT_TRACE_VERSION) {
        char msg[128];
        snprintf(msg, sizeof msg, "format version %u, this build reads version %u",
                 dt_get_u32(f->data + 8), DT_TRACE_VERSION);
        st = corrupt(f, 8, msg);
        goto fail;
    }
    if (dt_get_u32(f->data + 12) != 0) { st = corrupt(f, 12, "reserved preamble field is not zero"); goto fail; }
    size_t ecap = 0, tcap = 0, off = DT_TRACE_PREAMBLE;
    int have_header = 0;
    while (off < f->size) {
        if (f->closed) { st = corrupt(f, off, "data after the END record"); goto fail; }
        /* A record the file ends inside is torn (the writer died mid-append): with
         * allow_unclosed the complete records before it are the trace. */
        if (f->size - off < DT_TRACE_REC_HEAD) {
            if (allow_unclosed && have_header) { f->torn = f->size - off; break; }
            st = corrupt(f, off, "truncated record header (the file ends inside it; --allow-unclosed "
                                 "reads the complete records before it)");
            goto fail;
        }
        uint32_t len = dt_get_u32(f->data + off), type = dt_get_u32(f->data + off + 4);
        if (len > DT_TRACE_MAX_RECORD) { st = corrupt(f, off, "record length out of range"); goto fail; }
        if (f->size - off < DT_TRACE_REC_HEAD + (size_t)len + DT_TRACE_REC_TAIL) {
            if (allow_unclosed && have_header) { f->torn = f->size - off; break; }
            st = corrupt(f, off, "truncated record (the file ends inside it; --allow-unclosed reads "
                                 "the complete records before it)");
            goto fail;
        }
        const unsigned char *payload = f->data + off + DT_TRACE_REC_HEAD;
        if (dt_xxh64(f->data + off, DT_TRACE_REC_HEAD + (size_t)len, 0) != dt_get_u64(payload + len)) {
            st = corrupt(f, off, "record checksum mismatch");
            goto fail;
        }
        cur c = {payload, payload + len, 0};
        if (!have_header && type != DT_REC_HEADER) { st = corrupt(f, off, "first record is not the header"); goto fail; }
        if (type == DT_REC_HEADER) {
            if (have_header) { st = corrupt(f, off, "second header record"); goto fail; }
            have_header = 1;
            f->rank = (int)get32(&c);
            f->level = (int)get32(&c);
            f->steps_spec = getstr(&c);
            f->ranks_spec = getstr(&c);
            f->digest = getstr(&c);
            if (c.bad || c.p != c.end) { st = corrupt(f, off, "bad header record"); goto fail; }
        } else if (type == DT_REC_EVENT) {
            if (!grow((void **)&f->events, &ecap, f->nevents + 1, sizeof *f->events)) {
                st = dt_fail(DT_ENOMEM, "out of memory reading trace %s", path);
                goto fail;
            }
            dt_trace_rec *e = &f->events[f->nevents];
            memset(e, 0, sizeof *e);
            e->offset = off;
            dt_status pe = parse_event(f, &c, e, &tcap);
            if (pe == DT_ENOMEM) { st = dt_fail(DT_ENOMEM, "out of memory reading trace %s", path); goto fail; }
            if (pe) { st = corrupt(f, off, "bad event record"); goto fail; }
            f->nevents++;
        } else if (type == DT_REC_END) {
            uint64_t n = get64(&c);
            if (c.bad || c.p != c.end || n != f->nevents) {
                st = corrupt(f, off, "END record does not match the number of events");
                goto fail;
            }
            f->closed = 1;
        } else {
            st = corrupt(f, off, "unknown record type");
            goto fail;
        }
        off += DT_TRACE_REC_HEAD + (size_t)len + DT_TRACE_REC_TAIL;
    }
    if (!have_header) { st = corrupt(f, off, "no header record"); goto fail; }
    if (!f->closed && !allow_unclosed) {
        st = corrupt(f, off, "no END record (truncated, or the run stopped before closing "
                             "the trace; --allow-unclosed accepts the complete records)");
        goto fail;
    }
    return DT_OK;
fail:
    dt_trace_file_free(f);
    return st;
}

void dt_trace_file_free(dt_trace_file *f) {
    free(f->data);
    free(f->events);
    free(f->tensors);
    f->data = NULL;
    f->events = NULL;
    f->tensors = NULL;
    f->nevents = f->ntensors = 0;
}

uint64_t dt_trace_chunk_digest(const dt_trace_rec_tensor *t, uint32_t i) {
    return i < t->nchunks ? dt_get_u64(t->chunks + 8 * (size_t)i) : 0;
}
