/* Strict JSON reader (see json_strict.h): recursive descent with a depth limit, one
 * malloc'd node array per container, duplicate keys found by sorting (n log n, so a
 * hostile header with millions of keys cannot make the check quadratic). */
#include "ckpt/json_strict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const unsigned char *p, *end, *start;
    const char *what;
    dt_status st;
} parser;

static dt_status perr(parser *ps, const char *problem) {
    if (ps->st == DT_OK)
        ps->st = dt_fail(DT_ECORRUPT, "%s: invalid JSON at byte %zu: %s", ps->what,
                         (size_t)(ps->p - ps->start), problem);
    return ps->st;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

void dt_sjv_free(dt_sjv *v) {
    if (!v) return;
    if (v->items) {
        for (size_t i = 0; i < v->n; i++) dt_sjv_free(&v->items[i]);
        free(v->items);
    }
    if (v->keys) {
        for (size_t i = 0; i < v->n; i++) free(v->keys[i]);
        free(v->keys);
    }
    free(v->str);
    memset(v, 0, sizeof *v);
}

/* Appends one UTF-8 encoded code point. */
static size_t put_utf8(unsigned char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 63)); return 2; }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12); o[1] = (unsigned char)(0x80 | (c >> 6 & 63));
        o[2] = (unsigned char)(0x80 | (c & 63)); return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18); o[1] = (unsigned char)(0x80 | (c >> 12 & 63));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 63)); o[3] = (unsigned char)(0x80 | (c & 63));
    return 4;
}

/* Length of a valid UTF-8 sequence starting at p (1..4), or 0 if invalid (overlong,
 * surrogate, above U+10FFFF, truncated). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static int hex4(const unsigned char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* Parses a string literal at ps->p (the opening quote) into a malloc'd buffer. */
static dt_status parse_string(parser *ps, char **out, size_t *outlen) {
    ps->p++; /* opening quote */
    const unsigned char *q = ps->p;
    /* Decoded text is never longer than the literal, so one pass sizes the buffer. */
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) { ps->p = ps->end; return perr(ps, "unterminated string"); }
    unsigned char *buf = malloc((size_t)(q - ps->p) + 1);
    if (!buf) return ps->st = dt_fail(DT_ENOMEM, "%s: out of memory parsing JSON", ps->what);
    size_t n = 0;
    while (*ps->p != '"') {
        unsigned c = *ps->p;
        if (c < 0x20) { free(buf); return perr(ps, "control byte in string (must be escaped)"); }
        if (c != '\\') {
            size_t k = utf8_len(ps->p, ps->end);
            if (!k) { free(buf); return perr(ps, "invalid UTF-8 in string"); }
            memcpy(buf + n, ps->p, k);
            n += k; ps->p += k;
            continue;
        }
        unsigned e = ps->p[1];
        const char *simple = strchr("\"\\/bfnrt", (int)e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            buf[n++] = (unsigned char)map[simple - "\"\\/bfnrt"];
            ps->p += 2;
            continue;
        }
        if (e != 'u') { free(buf); return perr(ps, "unknown escape in string"); }
        uint32_t cp, lo;
        if (ps->end - ps->p < 6 || !hex4(ps->p + 2, &cp)) { free(buf); return perr(ps, "bad \\u escape"); }
        ps->p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) { free(buf); return perr(ps, "unpaired low surrogate escape"); }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || !hex4(ps->p + 2, &lo) ||
                lo < 0xDC00 || lo > 0xDFFF) { free(buf); return perr(ps, "unpaired high surrogate escape"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            ps->p += 6;
        }
        if (cp == 0) { free(buf); return perr(ps, "\\u0000 in string is not accepted"); }
        n += put_utf8(buf + n, cp);
    }
    ps->p++; /* closing quote */
    buf[n] = 0;
    *out = (char *)buf;
    *outlen = n;
    return DT_OK;
}

static dt_status parse_number(parser *ps, dt_sjv *v) {
    const unsigned char *s = ps->p, *p = ps->p, *e = ps->end;
    if (p < e && *p == '-') p++;
    if (p >= e || *p < '0' || *p > '9') return perr(ps, "bad number");
    if (*p == '0') p++;
    else while (p < e && *p >= '0' && *p <= '9') p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9') { ps->p = p; return perr(ps, "bad number fraction"); }
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') { ps->p = p; return perr(ps, "bad number exponent"); }
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    v->str = strndup((const char *)s, (size_t)(p - s));
    if (!v->str) return ps->st = dt_fail(DT_ENOMEM, "%s: out of memory parsing JSON", ps->what);
    v->len = (size_t)(p - s);
    v->kind = DT_SJ_NUMBER;
    ps->p = p;
    return DT_OK;
}

static dt_status parse_value(parser *ps, dt_sjv *v, int depth);

/* Grows a container's arrays to hold at least n+1 members. */
static int grow(dt_sjv *v, size_t *cap, int with_keys) {
    if (v->n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 8;
    dt_sjv *it = realloc(v->items, nc * sizeof *it);
    if (!it) return 0;
    v->items = it;
    if (with_keys) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return 0;
        v->keys = k;
    }
    *cap = nc;
    return 1;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static dt_status check_duplicates(parser *ps, const dt_sjv *v) {
    if (v->n < 2) return DT_OK;
    char **sorted = malloc(v->n * sizeof *sorted);
    if (!sorted) return ps->st = dt_fail(DT_ENOMEM, "%s: out of memory parsing JSON", ps->what);
    memcpy(sorted, v->keys, v->n * sizeof *sorted);
    qsort(sorted, v->n, sizeof *sorted, key_cmp);
    for (size_t i = 1; i < v->n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            ps->st = dt_fail(DT_ECORRUPT, "%s: invalid JSON: duplicate key \"%.200s\"", ps->what, sorted[i]);
            free(sorted);
            return ps->st;
        }
    }
    free(sorted);
    return DT_OK;
}

static dt_status parse_container(parser *ps, dt_sjv *v, int depth, int is_obj) {
    size_t cap = 0;
    v->kind = is_obj ? DT_SJ_OBJECT : DT_SJ_ARRAY;
    ps->p++; /* [ or { */
    skip_ws(ps);
    unsigned char close = is_obj ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return DT_OK; }
    for (;;) {
        if (!grow(v, &cap, is_obj)) return ps->st = dt_fail(DT_ENOMEM, "%s: out of memory parsing JSON", ps->what);
        if (is_obj) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return perr(ps, "expected a quoted key");
            char *key = NULL;
            size_t klen;
            if (parse_string(ps, &key, &klen) != DT_OK) return ps->st;
            v->keys[v->n] = key;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                memset(&v->items[v->n], 0, sizeof v->items[0]);
                v->n++;
                return perr(ps, "expected ':' after key");
            }
            ps->p++;
        }
        dt_status st = parse_value(ps, &v->items[v->n], depth + 1);
        v->n++; /* the failed member is a NULL value (or partly freed): safe to free */
        if (st != DT_OK) return st;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; break; }
        return perr(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    return is_obj ? check_duplicates(ps, v) : DT_OK;
}

static int literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
    ps->p += n;
    return 1;
}

static dt_status parse_value(parser *ps, dt_sjv *v, int depth) {
    memset(v, 0, sizeof *v);
    if (depth > DT_SJ_MAX_DEPTH) return perr(ps, "nesting too deep");
    skip_ws(ps);
    if (ps->p >= ps->end) return perr(ps, "unexpected end of document");
    switch (*ps->p) {
    case '{': return parse_container(ps, v, depth, 1);
    case '[': return parse_container(ps, v, depth, 0);
    case '"':
        if (parse_string(ps, &v->str, &v->len) != DT_OK) return ps->st;
        v->kind = DT_SJ_STRING;
        return DT_OK;
    case 't': if (literal(ps, "true")) { v->kind = DT_SJ_TRUE; return DT_OK; } break;
    case 'f': if (literal(ps, "false")) { v->kind = DT_SJ_FALSE; return DT_OK; } break;
    case 'n': if (literal(ps, "null")) { v->kind = DT_SJ_NULL; return DT_OK; } break;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps, v);
    }
    return perr(ps, "unexpected character");
}

dt_status dt_sjson_parse(const char *text, size_t len, const char *what, dt_sjv *root) {
    parser ps = {(const unsigned char *)text, (const unsigned char *)text + len,
                 (const unsigned char *)text, what, DT_OK};
    dt_status st = parse_value(&ps, root, 0);
    if (st == DT_OK) {
        skip_ws(&ps);
        if (ps.p != ps.end) st = perr(&ps, "trailing bytes after the document");
    }
    if (st != DT_OK) dt_sjv_free(root);
    return st;
}

const dt_sjv *dt_sjv_get(const dt_sjv *obj, const char *key) {
    if (!obj || obj->kind != DT_SJ_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

int dt_sjv_as_i64(const dt_sjv *v, int64_t *out) {
    if (!v || v->kind != DT_SJ_NUMBER || strpbrk(v->str, ".eE")) return 0;
    errno = 0;
    char *end;
    long long x = strtoll(v->str, &end, 10);
    if (errno || *end) return 0;
    *out = x;
    return 1;
}

int dt_sjv_as_f64(const dt_sjv *v, double *out) {
    if (!v || v->kind != DT_SJ_NUMBER) return 0;
    errno = 0;
    char *end;
    double x = strtod(v->str, &end);
    if (errno == ERANGE || *end) return 0;
    *out = x;
    return 1;
}
