/* TensorBoard event files: TFRecord framing, CRC-32C, a hand-written protobuf encoder for
 * Event/Summary/TensorProto and a decoder for reading them back (see tfevents.h). */
#include "metrics/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- CRC-32C ---- */

/* Bitwise form: a few KB per training step, so a table buys nothing, and this form has no
 * shared state to initialise. */
uint32_t dt_crc32c(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t dt_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protobuf encoding ---- */

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
    int oom;
} pb;

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static void pb_put(pb *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_put(b, t, n);
}

static void pb_key(pb *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_le(pb *b, uint64_t v, int bytes) {
    uint8_t t[8];
    for (int k = 0; k < bytes; k++) t[k] = (uint8_t)(v >> (8 * k));
    pb_put(b, t, (size_t)bytes);
}

static void pb_double(pb *b, unsigned field, double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    pb_key(b, field, WIRE_I64);
    pb_le(b, u, 8);
}

static void pb_bytes(pb *b, unsigned field, const void *s, size_t n) {
    pb_key(b, field, WIRE_LEN);
    pb_varint(b, n);
    pb_put(b, s, n);
}

static void pb_sub(pb *b, unsigned field, const pb *inner) {
    if (inner->oom) b->oom = 1;
    pb_bytes(b, field, inner->p, inner->n);
}

/* Summary.Value for the float32 dashboard copy. */
static void enc_simple(pb *out, const char *tag, double x) {
    pb v = {0};
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    pb_bytes(&v, 1, tag, strlen(tag));
    pb_key(&v, 2, WIRE_I32);
    pb_le(&v, u, 4);
    pb_sub(out, 1, &v);
    free(v.p);
}

/* Summary.Value for the exact copy: a rank-0 DT_DOUBLE TensorProto. */
static void enc_f64(pb *out, const char *tag, double x, int with_metadata) {
    pb v = {0}, t = {0}, md = {0}, plugin = {0};
    uint64_t u;
    memcpy(&u, &x, 8);
    char name[160];
    snprintf(name, sizeof name, "%s/f64", tag);
    pb_bytes(&v, 1, name, strlen(name));
    pb_key(&t, 1, WIRE_VARINT);
    pb_varint(&t, 2);                 /* DT_DOUBLE */
    pb_bytes(&t, 2, "", 0);           /* tensor_shape: no dims = scalar */
    pb_key(&t, 6, WIRE_LEN);          /* double_val, packed */
    pb_varint(&t, 8);
    pb_le(&t, u, 8);
    pb_sub(&v, 8, &t);
    if (with_metadata) {
        pb_bytes(&plugin, 1, "scalars", 7);
        pb_sub(&md, 1, &plugin);
        pb_key(&md, 4, WIRE_VARINT);
        pb_varint(&md, 1);            /* DATA_CLASS_SCALAR */
        pb_sub(&v, 9, &md);
    }
    pb_sub(out, 1, &v);
    free(v.p); free(t.p); free(md.p); free(plugin.p);
}

/* ---- writer ---- */

struct dt_tfevents {
    FILE *f;
    char path[4096];
    char **seen;      /* tags whose f64 value already carried its metadata */
    size_t nseen, capseen;
    dt_status err;
};

/* 1 the first time a tag is seen by this writer (it then records it). TensorBoard keeps a
 * tag's metadata from its first value, so later values need not repeat it. */
static int first_sight(dt_tfevents *w, const char *tag) {
    for (size_t k = 0; k < w->nseen; k++)
        if (!strcmp(w->seen[k], tag)) return 0;
    if (w->nseen == w->capseen) {
        size_t nc = w->capseen ? w->capseen * 2 : 16;
        char **q = realloc(w->seen, nc * sizeof *q);
        if (!q) return 1; /* repeating metadata is harmless */
        w->seen = q;
        w->capseen = nc;
    }
    char *d = strdup(tag);
    if (d) w->seen[w->nseen++] = d;
    return 1;
}

static dt_status write_record(dt_tfevents *w, const pb *payload) {
    if (payload->oom) return dt_fail(DT_ENOMEM, "%s: out of memory encoding an event", w->path);
    uint8_t head[12], tail[4];
    uint64_t len = payload->n;
    for (int k = 0; k < 8; k++) head[k] = (uint8_t)(len >> (8 * k));
    uint32_t c = dt_crc32c_mask(dt_crc32c(0, head, 8));
    for (int k = 0; k < 4; k++) head[8 + k] = (uint8_t)(c >> (8 * k));
    c = dt_crc32c_mask(dt_crc32c(0, payload->p, payload->n));
    for (int k = 0; k < 4; k++) tail[k] = (uint8_t)(c >> (8 * k));
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(payload->p, 1, payload->n, w->f) != payload->n ||
        fwrite(tail, 1, 4, w->f) != 4 || fflush(w->f))
        return dt_fail(DT_EIO, "writing %s: %s", w->path, strerror(errno));
    return DT_OK;
}

dt_status dt_tfevents_open(dt_tfevents **out, const char *log_dir, double wall_time) {
    static int serial; /* makes names unique when one process opens several writers */
    *out = NULL;
    dt_tfevents *w = calloc(1, sizeof *w);
    if (!w) return dt_fail(DT_ENOMEM, "out of memory");
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    int fd = -1;
    for (int tries = 0; tries < 1000 && fd < 0; tries++) {
        snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s.%ld.%d", log_dir,
                 (long long)wall_time, host, (long)getpid(), serial++);
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        dt_status st = dt_fail(DT_EIO, "cannot create %s: %s (does the log directory exist and "
                               "is it writable?)", w->path, strerror(errno));
        free(w);
        return st;
    }
    w->f = fdopen(fd, "wb");
    if (!w->f) { close(fd); free(w); return dt_fail(DT_EIO, "fdopen failed"); }
    pb e = {0};
    pb_double(&e, 1, wall_time);
    pb_bytes(&e, 3, "brain.Event:2", 13);
    dt_status st = write_record(w, &e);
    free(e.p);
    if (st) {
        fclose(w->f);
        unlink(w->path);
        free(w);
        return st;
    }
    *out = w;
    return DT_OK;
}

/* One Event record at (wall_time, step) carrying `inner` in Event field `field` (5: a
 * Summary, 7: a SessionLog); frees inner. A failed write sticks to the writer. */
static dt_status write_event(dt_tfevents *w, int64_t step, double wall_time, unsigned field, pb *inner) {
    pb e = {0};
    pb_double(&e, 1, wall_time);
    pb_key(&e, 2, WIRE_VARINT);
    pb_varint(&e, (uint64_t)step);
    pb_sub(&e, field, inner);
    dt_status st = write_record(w, &e);
    free(inner->p);
    free(e.p);
    if (st) w->err = st;
    return st;
}

dt_status dt_tfevents_write_step(dt_tfevents *w, int64_t step, double wall_time,
                                 const dt_tf_scalar *vals, int n) {
    if (w->err) return dt_fail(w->err, "%s: an earlier write failed", w->path);
    pb summary = {0};
    for (int k = 0; k < n; k++) {
        if (strlen(vals[k].tag) > 100) {
            free(summary.p);
            return dt_fail(DT_EINVAL, "TensorBoard tag '%s' is longer than 100 bytes", vals[k].tag);
        }
        enc_simple(&summary, vals[k].tag, vals[k].value);
        enc_f64(&summary, vals[k].tag, vals[k].value, first_sight(w, vals[k].tag));
    }
    return write_event(w, step, wall_time, 5, &summary);
}

dt_status dt_tfevents_write_restart(dt_tfevents *w, int64_t step, double wall_time) {
    if (w->err) return dt_fail(w->err, "%s: an earlier write failed", w->path);
    pb slog = {0};
    pb_key(&slog, 1, WIRE_VARINT);
    pb_varint(&slog, 1); /* SessionLog.status = START */
    return write_event(w, step, wall_time, 7, &slog);
}

const char *dt_tfevents_path(const dt_tfevents *w) { return w->path; }

dt_status dt_tfevents_close(dt_tfevents *w) {
    if (!w) return DT_OK;
    dt_status st = w->err;
    if (w->f) {
        if (fflush(w->f) || fsync(fileno(w->f))) {
            if (!st) st = dt_fail(DT_EIO, "flushing %s: %s", w->path, strerror(errno));
        }
        if (fclose(w->f) && !st) st = dt_fail(DT_EIO, "closing %s: %s", w->path, strerror(errno));
    }
    for (size_t k = 0; k < w->nseen; k++) free(w->seen[k]);
    free(w->seen);
    free(w);
    return st;
}

/* ---- reader ---- */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd;

static int rd_varint(rd *r, uint64_t *v) {
    uint64_t x = 0;
    for (int s = 0; s < 64; s += 7) {
        if (r->i >= r->n) return 0;
        uint8_t b = r->p[r->i++];
        x |= (uint64_t)(b & 0x7F) << s;
        if (!(b & 0x80)) { *v = x; return 1; }
    }
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

/* Reads one field key; for WIRE_LEN fields sets *sub to the payload; for fixed fields
 * *fixed holds the raw bits; for varints *fixed holds the value. 0 on malformed input. */
static int rd_field(rd *r, unsigned *field, unsigned *wire, uint64_t *fixed, rd *sub) {
    uint64_t key, len;
    if (!rd_varint(r, &key)) return 0;
    *field = (unsigned)(key >> 3);
    *wire = (unsigned)(key & 7);
    switch (*wire) {
    case WIRE_VARINT: return rd_varint(r, fixed);
    case WIRE_I64:
        if (r->n - r->i < 8) return 0;
        *fixed = rd_le(r->p + r->i, 8);
        r->i += 8;
        return 1;
    case WIRE_I32:
        if (r->n - r->i < 4) return 0;
        *fixed = rd_le(r->p + r->i, 4);
        r->i += 4;
        return 1;
    case WIRE_LEN:
        if (!rd_varint(r, &len) || len > r->n - r->i) return 0;
        sub->p = r->p + r->i;
        sub->n = (size_t)len;
        sub->i = 0;
        r->i += (size_t)len;
        return 1;
    default: return 0; /* groups (3, 4) are not used by these messages */
    }
}

/* Decodes a TensorProto; returns 1 and the value when it is a rank-0 float/double. */
static int dec_tensor(rd t, int *ok, double *value) {
    unsigned f, w;
    uint64_t x;
    rd sub;
    uint64_t dtype = 0;
    int dims = 0, nvals = 0;
    uint64_t bits = 0;
    *ok = 1;
    while (t.i < t.n) {
        if (!rd_field(&t, &f, &w, &x, &sub)) { *ok = 0; return 0; }
        if (f == 1 && w == WIRE_VARINT) dtype = x;
        else if (f == 2 && w == WIRE_LEN) {
            unsigned f2, w2;
            uint64_t x2;
            rd s2;
            while (sub.i < sub.n) {
                if (!rd_field(&sub, &f2, &w2, &x2, &s2)) { *ok = 0; return 0; }
                if (f2 == 2) dims++;
            }
        } else if ((f == 4 || f == 5 || f == 6) && w == WIRE_LEN) {
            if (sub.n == 8) { bits = rd_le(sub.p, 8); nvals++; }
            else if (sub.n == 4) { bits = rd_le(sub.p, 4); nvals++; }
            else nvals += 2;
        } else if (f == 5 && w == WIRE_I32) { bits = x; nvals++; }
        else if (f == 6 && w == WIRE_I64) { bits = x; nvals++; }
    }
    if (dims || nvals != 1) return 0;
    if (dtype == 2) { memcpy(value, &bits, 8); return 1; }
    if (dtype == 1) {
        uint32_t u = (uint32_t)bits;
        float fl;
        memcpy(&fl, &u, 4);
        *value = fl;
        return 1;
    }
    return 0;
}

static int push(dt_tf_file *out, size_t *cap, const dt_tf_record *r) {
    if (out->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        dt_tf_record *q = realloc(out->rec, nc * sizeof *q);
        if (!q) return 0;
        out->rec = q;
        *cap = nc;
    }
    out->rec[out->n++] = *r;
    return 1;
}

/* Decodes one Event payload, appending its summary values. */
static dt_status dec_event(const char *path, size_t off, rd e, dt_tf_file *out, size_t *cap) {
    unsigned f, w;
    uint64_t x;
    rd sub, summaries[8];
    int ns = 0;
    double wall = 0;
    int64_t step = 0;
    while (e.i < e.n) {
        if (!rd_field(&e, &f, &w, &x, &sub))
            return dt_fail(DT_ECORRUPT, "%s: record at byte %zu is not a valid Event message", path, off);
        if (f == 1 && w == WIRE_I64) memcpy(&wall, &x, 8);
        else if (f == 2 && w == WIRE_VARINT) step = (int64_t)x;
        else if (f == 3 && w == WIRE_LEN) {
            size_t m = sub.n < sizeof out->file_version - 1 ? sub.n : sizeof out->file_version - 1;
            memcpy(out->file_version, sub.p, m);
            out->file_version[m] = 0;
        } else if (f == 5 && w == WIRE_LEN && ns < 8) summaries[ns++] = sub;
        else if (f == 7 && w == WIRE_LEN) out->nrestarts++;
    }
    for (int s = 0; s < ns; s++) {
        rd sm = summaries[s];
        while (sm.i < sm.n) {
            if (!rd_field(&sm, &f, &w, &x, &sub))
                return dt_fail(DT_ECORRUPT, "%s: record at byte %zu: bad Summary", path, off);
            if (f != 1 || w != WIRE_LEN) continue;
            dt_tf_record r = {.step = step, .wall_time = wall};
            int has_simple = 0, has_tensor = 0;
            double tv = 0;
            rd val = sub;
            unsigned f2, w2;
            uint64_t x2;
            rd s2;
            while (val.i < val.n) {
                if (!rd_field(&val, &f2, &w2, &x2, &s2))
                    return dt_fail(DT_ECORRUPT, "%s: record at byte %zu: bad Summary.Value", path, off);
                if (f2 == 1 && w2 == WIRE_LEN) {
                    size_t m = s2.n < sizeof r.tag - 1 ? s2.n : sizeof r.tag - 1;
                    memcpy(r.tag, s2.p, m);
                    r.tag[m] = 0;
                } else if (f2 == 2 && w2 == WIRE_I32) {
                    uint32_t u = (uint32_t)x2;
                    float fl;
                    memcpy(&fl, &u, 4);
                    r.value = fl;
                    has_simple = 1;
                } else if (f2 == 8 && w2 == WIRE_LEN) {
                    int ok;
                    has_tensor = dec_tensor(s2, &ok, &tv);
                    if (!ok)
                        return dt_fail(DT_ECORRUPT, "%s: record at byte %zu: bad TensorProto", path, off);
                }
            }
            if (has_simple) r.kind = DT_TF_SIMPLE;
            else if (has_tensor) { r.kind = DT_TF_F64; r.value = tv; }
            else continue;
            if (!push(out, cap, &r)) return dt_fail(DT_ENOMEM, "%s: out of memory", path);
        }
    }
    return DT_OK;
}

dt_status dt_tfevents_read(const char *path, dt_tf_file *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return dt_fail(DT_EIO, "cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, got;
    uint8_t chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + got > cap) {
            cap = (n + got) * 2;
            uint8_t *q = realloc(buf, cap);
            if (!q) { free(buf); fclose(f); return dt_fail(DT_ENOMEM, "%s: out of memory", path); }
            buf = q;
        }
        memcpy(buf + n, chunk, got);
        n += got;
    }
    fclose(f);
    size_t off = 0, rcap = 0;
    dt_status st = DT_OK;
    while (off < n && !st) {
        if (n - off < 12) {
            st = dt_fail(DT_ECORRUPT, "%s: truncated record header at byte %zu (%zu bytes left, "
                         "need 12)", path, off, n - off);
            break;
        }
        uint64_t len = rd_le(buf + off, 8);
        uint32_t lcrc = (uint32_t)rd_le(buf + off + 8, 4);
        if (dt_crc32c_mask(dt_crc32c(0, buf + off, 8)) != lcrc) {
            st = dt_fail(DT_ECORRUPT, "%s: bad length CRC in record at byte %zu", path, off);
            break;
        }
        if (len > n - off - 12 || n - off - 12 - len < 4) {
            st = dt_fail(DT_ECORRUPT, "%s: truncated record at byte %zu (needs %llu payload "
                         "bytes + 4, file has %zu left)", path, off, (unsigned long long)len,
                         n - off - 12);
            break;
        }
        const uint8_t *payload = buf + off + 12;
        uint32_t dcrc = (uint32_t)rd_le(payload + len, 4);
        if (dt_crc32c_mask(dt_crc32c(0, payload, (size_t)len)) != dcrc) {
            st = dt_fail(DT_ECORRUPT, "%s: bad payload CRC in record at byte %zu", path, off);
            break;
        }
        rd e = {payload, (size_t)len, 0};
        st = dec_event(path, off, e, out, &rcap);
        out->nevents++;
        off += 12 + (size_t)len + 4;
    }
    free(buf);
    if (st) dt_tf_file_free(out);
    return st;
}

void dt_tf_file_free(dt_tf_file *f) {
    free(f->rec);
    f->rec = NULL;
    f->n = 0;
}
