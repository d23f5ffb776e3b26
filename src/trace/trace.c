/* Trace capture: the per-process session, its rank file and write buffer, the scope
 * stack, the occurrence counters and the event hooks (see trace.h for the contract and
 * format.h for the bytes). One host thread drives the hooks; nothing here is shared
 * between ranks. Hooks cannot fail loudly on the hot path: the first error is kept,
 * writing stops, and dt_trace_close returns it. */
#include "trace/trace.h"

#include "core/digest.h"
#include "trace/format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_BUF (8u << 20)   /* 8 MiB: one write() per many events */
#define MAX_NEST 16
#define SCOPE_CAP 1024
#define SCOPE_DEPTH 64

int dt_trace_level_now_ = DT_TRACE_OFF;

/* A pending event: its payload is built in `buf` from begin to end. */
struct dt_trace_op {
    unsigned char *buf;
    size_t len, cap;
    char kernel[1024];
};

/* Occurrence counter table entry: key = scope "\0" op, stored in the key arena. */
typedef struct occ_entry { uint64_t hash; uint32_t off, len, count, used; } occ_entry;

static struct {
    int open;
    int fd;
    char path[4096];
    int level;
    dt_range_list steps;
    unsigned char *buf;
    size_t len;
    dt_status err;
    char errmsg[1024];
    uint64_t nevents;
    int64_t step;
    int micro;
    char scope[SCOPE_CAP];
    size_t scope_len[SCOPE_DEPTH];
    int depth, depth_overflow;
    dt_trace_op ops[MAX_NEST];
    int nops;
    occ_entry *occ;
    uint32_t occ_cap, occ_used;
    char *keys;
    size_t keys_len, keys_cap;
} S;

/* ---- errors and output -------------------------------------------------------------- */

static void set_err(dt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(dt_status code, const char *fmt, ...) {
    if (S.err != DT_OK) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S.errmsg, sizeof S.errmsg, fmt, ap);
    va_end(ap);
    S.err = code;
    dt_trace_level_now_ = DT_TRACE_OFF; /* stop capturing: the file is already incomplete */
}

static void write_all(const unsigned char *p, size_t n) {
    while (n > 0 && S.err == DT_OK) {
        ssize_t w = write(S.fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            set_err(DT_EIO, "writing trace %s: %s", S.path, w < 0 ? strerror(errno) : "short write");
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void flush_buf(void) {
    write_all(S.buf, S.len);
    S.len = 0;
}

static void out_bytes(const unsigned char *p, size_t n) {
    if (S.err != DT_OK) return;
    if (S.len + n > WRITE_BUF) flush_buf();
    if (n > WRITE_BUF) { write_all(p, n); return; }
    memcpy(S.buf + S.len, p, n);
    S.len += n;
}

/* ---- record building ---------------------------------------------------------------- */

static int reserve(dt_trace_op *b, size_t more) {
    if (b->len + more <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    unsigned char *nb = realloc(b->buf, cap);
    if (!nb) { set_err(DT_ENOMEM, "trace: out of memory for an event of %zu bytes", cap); return 0; }
    b->buf = nb;
    b->cap = cap;
    return 1;
}

static void put8(dt_trace_op *b, uint8_t v) { if (reserve(b, 1)) b->buf[b->len++] = v; }
static void put16(dt_trace_op *b, uint16_t v) { if (reserve(b, 2)) { dt_put_u16(b->buf + b->len, v); b->len += 2; } }
static void put32(dt_trace_op *b, uint32_t v) { if (reserve(b, 4)) { dt_put_u32(b->buf + b->len, v); b->len += 4; } }
static void put64(dt_trace_op *b, uint64_t v) { if (reserve(b, 8)) { dt_put_u64(b->buf + b->len, v); b->len += 8; } }
static void putstr(dt_trace_op *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n > 65535) n = 65535;
    put16(b, (uint16_t)n);
    if (n && reserve(b, n)) { memcpy(b->buf + b->len, s, n); b->len += n; }
    put8(b, 0);
}

static void rec_start(dt_trace_op *b) {
    b->len = 0;
    reserve(b, DT_TRACE_REC_HEAD);
    b->len = DT_TRACE_REC_HEAD;
}

/* Frames the payload built since rec_start and appends it to the output. */
static void rec_finish(dt_trace_op *b, uint32_t type) {
    if (S.err != DT_OK || !reserve(b, DT_TRACE_REC_TAIL)) return;
    size_t payload = b->len - DT_TRACE_REC_HEAD;
    if (payload > DT_TRACE_MAX_RECORD) {
        set_err(DT_EINVAL, "trace: an event of %zu bytes exceeds the record limit", payload);
        return;
    }
    dt_put_u32(b->buf, (uint32_t)payload);
    dt_put_u32(b->buf + 4, type);
    dt_put_u64(b->buf + b->len, dt_xxh64(b->buf, b->len, 0));
    b->len += DT_TRACE_REC_TAIL;
    out_bytes(b->buf, b->len);
}

static void put_tensor(dt_trace_op *b, const dt_tensor_ref *t) {
    size_t esz = dt_trace_dtype_size(t->dtype);
    if (esz == 0 || t->ndim < 0 || t->ndim > DT_TRACE_MAX_DIMS) {
        set_err(DT_EINVAL, "trace: tensor '%s' in scope '%s' has dtype %d / ndim %d; use an "
                "enum dt_trace_dtype and 0..%d dims", t->name ? t->name : "", S.scope,
                t->dtype, t->ndim, DT_TRACE_MAX_DIMS);
        return;
    }
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    if (numel < 0 || (numel > 0 && !t->data && !t->digests)) {
        set_err(DT_EINVAL, "trace: tensor '%s' in scope '%s' has a negative shape or no data",
                t->name ? t->name : "", S.scope);
        return;
    }
    size_t nbytes = (size_t)numel * esz;
    putstr(b, t->name);
    put8(b, (uint8_t)t->dtype);
    put8(b, (uint8_t)t->ndim);
    for (int d = 0; d < t->ndim; d++) put64(b, (uint64_t)t->shape[d]);
    put64(b, (uint64_t)numel);
    put64(b, t->digests ? t->digests[0] : dt_xxh64(t->data, nbytes, 0));
    int64_t rows = 0, per = 0, nchunks = dt_trace_row_chunks(t, &rows, &per);
    if (nchunks < 0) {
        set_err(DT_EINVAL, "trace: tensor '%s' in scope '%s': %lld rows do not divide "
                "%lld elements", t->name ? t->name : "", S.scope, (long long)rows,
                (long long)numel);
        return;
    }
    put64(b, (uint64_t)rows);
    put64(b, (uint64_t)per);
    put32(b, (uint32_t)nchunks);
    if (nchunks > 0) {
        size_t row_bytes = nbytes / (size_t)rows;
        const unsigned char *p = t->data;
        for (int64_t c = 0; c < nchunks; c++) {
            int64_t r0 = c * per, r1 = r0 + per < rows ? r0 + per : rows;
            put64(b, t->digests ? t->digests[1 + c]
                                : dt_xxh64(p + (size_t)r0 * row_bytes, (size_t)(r1 - r0) * row_bytes, 0));
        }
    }
}

int64_t dt_trace_row_chunks(const dt_tensor_ref *t, int64_t *rows, int64_t *per) {
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    *rows = *per = 0;
    if (!t->order_sensitive || numel <= 0) return 0;
    *rows = t->rows > 0 ? t->rows : (t->ndim > 0 ? t->shape[0] : 1);
    if (numel % *rows != 0) return -1;
    *per = (*rows + DT_TRACE_MAX_ROW_DIGESTS - 1) / DT_TRACE_MAX_ROW_DIGESTS;
    return (*rows + *per - 1) / *per;
}

/* ---- occurrence counters ------------------------------------------------------------ */

static void occ_reset(void) {
    if (S.occ) memset(S.occ, 0, S.occ_cap * sizeof *S.occ);
    S.occ_used = 0;
    S.keys_len = 0;
}

static int occ_grow(void) {
    uint32_t cap = S.occ_cap ? S.occ_cap * 2 : 1024;
    occ_entry *n = calloc(cap, sizeof *n);
    if (!n) { set_err(DT_ENOMEM, "trace: out of memory for occurrence counters"); return 0; }
    for (uint32_t i = 0; i < S.occ_cap; i++) {
        if (!S.occ[i].used) continue;
        uint32_t j = (uint32_t)S.occ[i].hash & (cap - 1);
        while (n[j].used) j = (j + 1) & (cap - 1);
        n[j] = S.occ[i];
    }
    free(S.occ);
    S.occ = n;
    S.occ_cap = cap;
    return 1;
}

/* Returns the number of earlier events with this (scope, op) in this (step, micro). */
static uint32_t occ_next(const char *op) {
    size_t ls = strlen(S.scope), lo = strlen(op), kl = ls + 1 + lo;
    char key[SCOPE_CAP + 256];
    if (kl >= sizeof key) { set_err(DT_EINVAL, "trace: op name '%s' too long", op); return 0; }
    memcpy(key, S.scope, ls + 1);
    memcpy(key + ls + 1, op, lo);
    uint64_t h = dt_xxh64(key, kl, 0);
    if ((S.occ_used + 1) * 2 > S.occ_cap && !occ_grow()) return 0;
    uint32_t j = (uint32_t)h & (S.occ_cap - 1);
    for (;; j = (j + 1) & (S.occ_cap - 1)) {
        occ_entry *e = &S.occ[j];
        if (!e->used) break;
        if (e->hash == h && e->len == kl && !memcmp(S.keys + e->off, key, kl)) return e->count++;
    }
    if (S.keys_len + kl > S.keys_cap) {
        size_t cap = S.keys_cap ? S.keys_cap * 2 : 65536;
        while (cap < S.keys_len + kl) cap *= 2;
        char *nk = realloc(S.keys, cap);
        if (!nk) { set_err(DT_ENOMEM, "trace: out of memory for occurrence keys"); return 0; }
        S.keys = nk;
        S.keys_cap = cap;
    }
    memcpy(S.keys + S.keys_len, key, kl);
    S.occ[j] = (occ_entry){h, (uint32_t)S.keys_len, (uint32_t)kl, 1, 1};
    S.keys_len += kl;
    S.occ_used++;
    return 0;
}

/* ---- session ------------------------------------------------------------------------ */

static dt_status make_dirs(const char *dir) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return dt_fail(DT_EINVAL, "--trace-dir '%s' is too long", dir);
    for (char *p = tmp + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return dt_fail(DT_EIO, "--trace-dir: cannot create '%s': %s", tmp, strerror(errno));
            *p = c;
            if (c == 0) break;
        }
    }
    return DT_OK;
}

static dt_status parse_config(const dt_trace_config *cfg, dt_range_list *steps,
                              dt_range_list *ranks) {
    dt_status st;
    memset(steps, 0, sizeof *steps);
    memset(ranks, 0, sizeof *ranks);
    if (cfg->level < DT_TRACE_OFF || cfg->level > DT_TRACE_KERNEL)
        return dt_fail(DT_EINVAL, "trace level %d out of range", cfg->level);
    if (cfg->ranks_spec && (st = dt_range_list_parse(cfg->ranks_spec, "--trace-ranks", ranks)))
        return st;
    if (cfg->steps_spec && (st = dt_range_list_parse(cfg->steps_spec, "--trace-steps", steps)))
        return st;
    if (cfg->level != DT_TRACE_OFF && (!cfg->dir || !*cfg->dir))
        return dt_fail(DT_EINVAL, "--trace-level %s needs --trace-dir DIR",
                       dt_trace_level_name(cfg->level));
    return DT_OK;
}

dt_status dt_trace_config_check(const dt_trace_config *cfg) {
    dt_range_list steps, ranks;
    return parse_config(cfg, &steps, &ranks);
}

dt_status dt_trace_precheck(const dt_trace_config *cfg, int rank) {
    dt_range_list ranks, steps;
    dt_status st;
    if ((st = parse_config(cfg, &steps, &ranks))) return st;
    if (cfg->level == DT_TRACE_OFF || !dt_range_list_has(&ranks, rank)) return DT_OK;
    char path[sizeof S.path];
    snprintf(path, sizeof path, "%s/rank_%06d.trace", cfg->dir, rank);
    if (access(path, F_OK) == 0)
        return dt_fail(DT_EIO, "cannot create trace file %s: File exists (traces are never "
                       "overwritten: choose a new --trace-dir or remove the old trace)", path);
    return DT_OK;
}

dt_status dt_trace_open(const dt_trace_config *cfg, int rank) {
    if (S.open) return dt_fail(DT_ESTATE, "dt_trace_open: a trace session is already open (%s)", S.path);
    dt_range_list ranks, steps;
    dt_status st;
    if ((st = parse_config(cfg, &steps, &ranks))) return st;
    if (cfg->level == DT_TRACE_OFF || !dt_range_list_has(&ranks, rank)) return DT_OK;
    if ((st = make_dirs(cfg->dir))) return st;

    memset(&S, 0, sizeof S);
    snprintf(S.path, sizeof S.path, "%s/rank_%06d.trace", cfg->dir, rank);
    S.fd = open(S.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (S.fd < 0) {
        int e = errno;
        return dt_fail(DT_EIO, "cannot create trace file %s: %s%s", S.path, strerror(e),
                       e == EEXIST ? " (traces are never overwritten: choose a new "
                                     "--trace-dir or remove the old trace)" : "");
    }
    S.buf = malloc(WRITE_BUF);
    if (!S.buf) {
        close(S.fd);
        return dt_fail(DT_ENOMEM, "trace: cannot allocate the %u-byte write buffer", WRITE_BUF);
    }
    S.open = 1;
    S.level = cfg->level;
    S.steps = steps;
    S.step = -1;
    S.micro = 0;

    unsigned char pre[DT_TRACE_PREAMBLE] = {0};
    memcpy(pre, DT_TRACE_MAGIC, 8);
    dt_put_u32(pre + 8, DT_TRACE_VERSION);
    out_bytes(pre, sizeof pre);
    dt_trace_op *b = &S.ops[0];
    rec_start(b);
    put32(b, (uint32_t)rank);
    put32(b, (uint32_t)cfg->level);
    putstr(b, cfg->steps_spec ? cfg->steps_spec : "");
    putstr(b, cfg->ranks_spec ? cfg->ranks_spec : "");
    putstr(b, cfg->digest ? cfg->digest : DT_TRACE_DIGEST_FLAT);
    rec_finish(b, DT_REC_HEADER);
    if (S.err) {
        dt_status e = S.err;
        dt_trace_close();
        return dt_fail(e, "%s", S.errmsg);
    }
    return DT_OK;
}

dt_status dt_trace_close(void) {
    if (!S.open) return DT_OK;
    if (S.nops > 0 && S.err == DT_OK)
        set_err(DT_ESTATE, "trace closed with %d event(s) begun but not ended", S.nops);
    dt_trace_op *b = &S.ops[0];
    if (S.err == DT_OK) {
        rec_start(b);
        put64(b, S.nevents);
        rec_finish(b, DT_REC_END);
        flush_buf();
    } else if (S.err != DT_EIO) {
        /* Keep the complete records written before the error (readable with
         * --allow-unclosed); no END record, so the file reads as unfinished. */
        dt_status first = S.err;
        S.err = DT_OK;
        flush_buf();
        if (S.err == DT_OK) S.err = first;
    }
    if (close(S.fd) != 0) set_err(DT_EIO, "closing trace %s: %s", S.path, strerror(errno));
    dt_status err = S.err;
    char msg[sizeof S.errmsg];
    memcpy(msg, S.errmsg, sizeof msg);
    for (int i = 0; i < MAX_NEST; i++) free(S.ops[i].buf);
    free(S.buf);
    free(S.occ);
    free(S.keys);
    memset(&S, 0, sizeof S);
    dt_trace_level_now_ = DT_TRACE_OFF;
    return err ? dt_fail(err, "%s", msg) : DT_OK;
}

const char *dt_trace_path(void) { return S.open ? S.path : NULL; }

void dt_trace_set_step(int64_t step, int micro) {
    if (!S.open) return;
    S.step = step;
    S.micro = micro;
    occ_reset();
    dt_trace_level_now_ = (S.err == DT_OK && dt_range_list_has(&S.steps, step)) ? S.level
                                                                                : DT_TRACE_OFF;
}

void dt_trace_scope_push(const char *name) {
    if (!S.open) return;
    if (S.depth >= SCOPE_DEPTH || S.depth_overflow) { S.depth_overflow++; return; }
    size_t cur = S.depth ? S.scope_len[S.depth - 1] : 0, n = strlen(name);
    if (cur + 1 + n >= SCOPE_CAP) {
        set_err(DT_EINVAL, "trace: scope '%s.%s' is too long", S.scope, name);
        S.depth_overflow++;
        return;
    }
    if (cur) S.scope[cur++] = '.';
    memcpy(S.scope + cur, name, n + 1);
    S.scope_len[S.depth++] = cur + n;
}

void dt_trace_scope_pop(void) {
    if (!S.open) return;
    if (S.depth_overflow) { S.depth_overflow--; return; }
    if (S.depth == 0) { set_err(DT_ESTATE, "trace: scope_pop without a matching push"); return; }
    S.depth--;
    S.scope[S.depth ? S.scope_len[S.depth - 1] : 0] = 0;
}

const char *dt_trace_scope(void) { return S.scope; }

/* ---- events ------------------------------------------------------------------------- */

dt_trace_op *dt_trace_begin(int level, int phase, const char *op, const char *variant,
                            const dt_tensor_ref *ins, int nin) {
    if (!dt_trace_on(level) || level <= DT_TRACE_OFF) return NULL;
    if (S.nops >= MAX_NEST) {
        set_err(DT_ESTATE, "trace: more than %d nested events (missing dt_trace_end?)", MAX_NEST);
        return NULL;
    }
    if (nin < 0 || nin > 65535) { set_err(DT_EINVAL, "trace: op '%s' has %d inputs", op, nin); return NULL; }
    dt_trace_op *b = &S.ops[S.nops++];
    b->kernel[0] = 0;
    rec_start(b);
    put64(b, (uint64_t)S.step);
    put32(b, (uint32_t)S.micro);
    put32(b, occ_next(op));
    put8(b, (uint8_t)level);
    put8(b, (uint8_t)phase);
    putstr(b, S.scope);
    putstr(b, op);
    putstr(b, variant);
    put16(b, (uint16_t)nin);
    for (int i = 0; i < nin; i++) put_tensor(b, &ins[i]);
    if (S.err != DT_OK) { S.nops--; return NULL; }
    return b;
}

void dt_trace_kernel_info(dt_trace_op *h, const char *fmt, ...) {
    if (!h || S.level < DT_TRACE_KERNEL) return;
    /* repeated calls append ("; "-separated); what does not fit is cut */
    size_t used = strlen(h->kernel);
    if (used && used + 2 < sizeof h->kernel) {
        memcpy(h->kernel + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= sizeof h->kernel) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->kernel + used, sizeof h->kernel - used, fmt, ap);
    va_end(ap);
}

void dt_trace_end(dt_trace_op *h, const dt_tensor_ref *outs, int nout) {
    if (!h) return;
    if (S.nops == 0 || h != &S.ops[S.nops - 1]) {
        set_err(DT_ESTATE, "trace: dt_trace_end on an event that is not the innermost open one");
        return;
    }
    S.nops--;
    if (S.err != DT_OK) return;
    if (nout < 0 || nout > 65535) { set_err(DT_EINVAL, "trace: %d outputs", nout); return; }
    putstr(h, h->kernel);
    put16(h, (uint16_t)nout);
    for (int i = 0; i < nout; i++) put_tensor(h, &outs[i]);
    rec_finish(h, DT_REC_EVENT);
    if (S.err == DT_OK) S.nevents++;
}

void dt_trace_event(int level, int phase, const char *op, const char *variant,
                    const dt_tensor_ref *ins, int nin, const dt_tensor_ref *outs, int nout) {
    dt_trace_end(dt_trace_begin(level, phase, op, variant, ins, nin), outs, nout);
}
