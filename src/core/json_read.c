/* Strict JSON parser into a small tree (see json_read.h). Recursive descent over a byte
 * range; every failure reports line, column and byte offset. */
#include "core/json_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DT_JSON_MAX_DEPTH = 64 };

typedef struct parser {
    const char *s;
    size_t len, i;
} parser;

static dt_status perr(const parser *p, size_t at, const char *what) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < p->len; k++) {
        if (p->s[k] == '\n') { line++; col = 1; }
        else col++;
    }
    return dt_fail(DT_ECORRUPT, "JSON line %zu column %zu (byte %zu): %s", line, col, at, what);
}

static void skip_ws(parser *p) {
    while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                             p->s[p->i] == '\r'))
        p->i++;
}

/* Growable byte buffer for decoded strings. */
typedef struct sbuf { char *p; size_t n, cap; } sbuf;

static int sbuf_put(sbuf *b, const char *src, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}

static char *dup_range(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static int hex4(const parser *p, size_t at, unsigned *out) {
    if (at + 4 > p->len) return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[at + (size_t)k];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static size_t utf8_encode(unsigned cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string literal at p->i (the opening quote) into a malloc'd decoded string. */
static dt_status parse_string(parser *p, char **out, size_t *outlen) {
    sbuf b = {0};
    size_t start = p->i++;
    if (!sbuf_put(&b, "", 0)) return dt_fail(DT_ENOMEM, "JSON: out of memory");
    for (;;) {
        if (p->i >= p->len) { free(b.p); return perr(p, start, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; break; }
        if (c < 0x20) { free(b.p); return perr(p, p->i, "control character in string (escape it)"); }
        if (c != '\\') {
            size_t run = p->i;
            while (run < p->len && p->s[run] != '"' && p->s[run] != '\\' &&
                   (unsigned char)p->s[run] >= 0x20)
                run++;
            if (!sbuf_put(&b, p->s + p->i, run - p->i)) goto oom;
            p->i = run;
            continue;
        }
        size_t esc = p->i++;
        if (p->i >= p->len) { free(b.p); return perr(p, esc, "unterminated escape"); }
        char e = p->s[p->i++], ch = 0;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!hex4(p, p->i, &cp)) { free(b.p); return perr(p, esc, "\\u needs 4 hex digits"); }
            p->i += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (p->i + 6 > p->len || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                    !hex4(p, p->i + 2, &lo) || lo < 0xDC00 || lo >= 0xE000) {
                    free(b.p);
                    return perr(p, esc, "high surrogate not followed by a low surrogate");
                }
                p->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(b.p);
                return perr(p, esc, "lone low surrogate");
            }
            if (cp == 0) { free(b.p); return perr(p, esc, "\\u0000 is not accepted"); }
            char u[4];
            if (!sbuf_put(&b, u, utf8_encode(cp, u))) goto oom;
            continue;
        }
        default: free(b.p); return perr(p, esc, "unknown escape");
        }
        if (!sbuf_put(&b, &ch, 1)) goto oom;
    }
    *out = b.p;
    *outlen = b.n;
    return DT_OK;
oom:
    free(b.p);
    return dt_fail(DT_ENOMEM, "JSON: out of memory");
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static dt_status parse_number(parser *p, dt_json_value *v) {
    size_t st = p->i;
    if (p->i < p->len && p->s[p->i] == '-') p->i++;
    if (p->i >= p->len || !is_digit(p->s[p->i])) return perr(p, st, "bad number");
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->len && is_digit(p->s[p->i])) return perr(p, st, "leading zero in number");
    } else {
        while (p->i < p->len && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->len && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->len || !is_digit(p->s[p->i])) return perr(p, st, "digit expected after '.'");
        while (p->i < p->len && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->len || !is_digit(p->s[p->i])) return perr(p, st, "digit expected in exponent");
        while (p->i < p->len && is_digit(p->s[p->i])) p->i++;
    }
    v->type = DT_JSON_NUMBER;
    v->len = p->i - st;
    v->text = dup_range(p->s + st, v->len);
    return v->text ? DT_OK : dt_fail(DT_ENOMEM, "JSON: out of memory");
}

static void free_members(dt_json_value *v);

static dt_status parse_value(parser *p, dt_json_value *v, int depth);

/* Appends one zeroed slot to v->items (and v->keys for objects). */
static dt_status grow(dt_json_value *v, size_t *cap) {
    if (v->n < *cap) return DT_OK;
    size_t nc = *cap ? *cap * 2 : 4;
    dt_json_value *it = realloc(v->items, nc * sizeof *it);
    if (!it) return dt_fail(DT_ENOMEM, "JSON: out of memory");
    v->items = it;
    if (v->type == DT_JSON_OBJECT) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return dt_fail(DT_ENOMEM, "JSON: out of memory");
        v->keys = k;
    }
    *cap = nc;
    return DT_OK;
}

static dt_status parse_container(parser *p, dt_json_value *v, int depth) {
    int is_obj = p->s[p->i] == '{';
    char close = is_obj ? '}' : ']';
    size_t cap = 0;
    v->type = is_obj ? DT_JSON_OBJECT : DT_JSON_ARRAY;
    if (depth >= DT_JSON_MAX_DEPTH) return perr(p, p->i, "nesting deeper than 64 levels");
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == close) { p->i++; return DT_OK; }
    for (;;) {
        dt_status st = grow(v, &cap);
        if (st) return st;
        dt_json_value *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (is_obj) {
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != '"') return perr(p, p->i, "expected a \"key\"");
            size_t kpos = p->i, klen;
            char *key;
            st = parse_string(p, &key, &klen);
            if (st) return st;
            for (size_t k = 0; k < v->n; k++)
                if (!strcmp(v->keys[k], key)) {
                    free(key);
                    return perr(p, kpos, "duplicate key in object");
                }
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') {
                free(key);
                return perr(p, p->i, "expected ':' after key");
            }
            p->i++;
            v->keys[v->n] = key;
        }
        st = parse_value(p, item, depth + 1);
        v->n++; /* counted even on failure so dt_json_free releases what was built */
        if (st) return st;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->len && p->s[p->i] == close) { p->i++; return DT_OK; }
        return perr(p, p->i, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static dt_status parse_literal(parser *p, dt_json_value *v, const char *word, dt_json_type t) {
    size_t n = strlen(word);
    if (p->i + n > p->len || memcmp(p->s + p->i, word, n))
        return perr(p, p->i, "expected a value (object, array, string, number, true, false, null)");
    p->i += n;
    v->type = t;
    v->len = n;
    v->text = dup_range(word, n);
    return v->text ? DT_OK : dt_fail(DT_ENOMEM, "JSON: out of memory");
}

static dt_status parse_value(parser *p, dt_json_value *v, int depth) {
    skip_ws(p);
    v->pos = p->i;
    if (p->i >= p->len) return perr(p, p->i, "unexpected end of input, expected a value");
    char c = p->s[p->i];
    if (c == '{' || c == '[') return parse_container(p, v, depth);
    if (c == '"') {
        v->type = DT_JSON_STRING;
        return parse_string(p, &v->text, &v->len);
    }
    if (c == '-' || is_digit(c)) return parse_number(p, v);
    if (c == 't') return parse_literal(p, v, "true", DT_JSON_BOOL);
    if (c == 'f') return parse_literal(p, v, "false", DT_JSON_BOOL);
    if (c == 'n') return parse_literal(p, v, "null", DT_JSON_NULL);
    return perr(p, p->i, "expected a value (object, array, string, number, true, false, null)");
}

dt_status dt_json_parse(const char *text, size_t len, dt_json_value **out) {
    *out = NULL;
    dt_json_value *v = calloc(1, sizeof *v);
    if (!v) return dt_fail(DT_ENOMEM, "JSON: out of memory");
    parser p = {text, len, 0};
    dt_status st = parse_value(&p, v, 0);
    if (!st) {
        skip_ws(&p);
        if (p.i != p.len) st = perr(&p, p.i, "unexpected text after the value");
    }
    if (st) { dt_json_free(v); return st; }
    *out = v;
    return DT_OK;
}

dt_status dt_json_read_file(const char *path, dt_json_value **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dt_fail(DT_EIO, "cannot open %s: %s", path, strerror(errno));
    sbuf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!sbuf_put(&b, chunk, got)) { fclose(f); free(b.p); return dt_fail(DT_ENOMEM, "reading %s: out of memory", path); }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b.p); return dt_fail(DT_EIO, "error reading %s", path); }
    dt_status st = dt_json_parse(b.p ? b.p : "", b.n, out);
    free(b.p);
    return st ? dt_fail_context(st, "%s", path) : DT_OK;
}

static void free_members(dt_json_value *v) {
    for (size_t k = 0; k < v->n; k++) {
        free_members(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
}

void dt_json_free(dt_json_value *v) {
    if (!v) return;
    free_members(v);
    free(v);
}

const dt_json_value *dt_json_get(const dt_json_value *v, const char *key) {
    if (!v || v->type != DT_JSON_OBJECT) return NULL;
    for (size_t k = 0; k < v->n; k++)
        if (!strcmp(v->keys[k], key)) return &v->items[k];
    return NULL;
}

dt_status dt_json_get_hex64(const dt_json_value *obj, const char *key, uint64_t *bits) {
    const dt_json_value *v = dt_json_get(obj, key);
    if (!v) return dt_fail(DT_ECORRUPT, "missing key \"%s\"", key);
    if (v->type != DT_JSON_STRING || v->len != 18 || v->text[0] != '0' || v->text[1] != 'x')
        return dt_fail(DT_ECORRUPT, "\"%s\" must be \"0x\" and 16 hex digits", key);
    uint64_t b = 0;
    for (int k = 2; k < 18; k++) {
        char c = v->text[k];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else return dt_fail(DT_ECORRUPT, "\"%s\" must be \"0x\" and 16 hex digits", key);
        b = b << 4 | d;
    }
    *bits = b;
    return DT_OK;
}

dt_status dt_json_get_i64(const dt_json_value *obj, const char *key, int64_t *out) {
    const dt_json_value *v = dt_json_get(obj, key);
    if (!v) return dt_fail(DT_ECORRUPT, "missing key \"%s\"", key);
    if (v->type != DT_JSON_NUMBER || strpbrk(v->text, ".eE"))
        return dt_fail(DT_ECORRUPT, "\"%s\" must be an integer, not %s", key, v->text);
    errno = 0;
    char *end;
    long long x = strtoll(v->text, &end, 10);
    if (errno || *end) return dt_fail(DT_ECORRUPT, "\"%s\" = %s does not fit int64", key, v->text);
    *out = (int64_t)x;
    return DT_OK;
}

int dt_json_equal(const dt_json_value *a, const dt_json_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case DT_JSON_NULL: return 1;
    case DT_JSON_BOOL:
    case DT_JSON_NUMBER:
    case DT_JSON_STRING: return a->len == b->len && !memcmp(a->text, b->text, a->len);
    case DT_JSON_ARRAY:
        if (a->n != b->n) return 0;
        for (size_t k = 0; k < a->n; k++)
            if (!dt_json_equal(&a->items[k], &b->items[k])) return 0;
        return 1;
    case DT_JSON_OBJECT:
        if (a->n != b->n) return 0; /* keys are unique, so equal counts + all found = same set */
        for (size_t k = 0; k < a->n; k++) {
            const dt_json_value *o = dt_json_get(b, a->keys[k]);
            if (!o || !dt_json_equal(&a->items[k], o)) return 0;
        }
        return 1;
    }
    return 0;
}
