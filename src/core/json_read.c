/* Strict JSON parser into a small tree (contract in json_read.h): recursive descent over
 * a byte range with a depth limit checked before each container is entered, one malloc'd
 * member array per container, duplicate keys found by sorting. Every failure names the
 * document and the line, column and byte offset of the offending byte. */
#include "core/json_read.h"

#include "core/regular_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const unsigned char *s;
    size_t len, i;
    const char *what; /* document name for errors, or NULL */
} parser;

/* DT_ECORRUPT "<what>: invalid JSON at line L column C (byte B): <problem>". The line
 * scan runs once, on the error path only. */
static dt_status perr(const parser *p, size_t at, const char *problem) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < p->len; k++) {
        if (p->s[k] == '\n') { line++; col = 1; }
        else col++;
    }
    return dt_fail(DT_ECORRUPT, "%s%sinvalid JSON at line %zu column %zu (byte %zu): %s",
                   p->what ? p->what : "", p->what ? ": " : "", line, col, at, problem);
}

static dt_status oom(const parser *p) {
    return dt_fail(DT_ENOMEM, "%s%sout of memory parsing JSON", p->what ? p->what : "",
                   p->what ? ": " : "");
}

static void skip_ws(parser *p) {
    while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                             p->s[p->i] == '\r'))
        p->i++;
}

static char *dup_range(const void *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Four hex digits at s[at..at+4) within the text: 1 and *out; otherwise 0. */
static int hex4(const parser *p, size_t at, unsigned *out) {
    if (at > p->len || p->len - at < 4) return 0;
    unsigned v = 0;
    for (size_t k = 0; k < 4; k++) {
        unsigned c = p->s[at + k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static size_t utf8_encode(unsigned cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12)); o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length (1..4) of the valid UTF-8 sequence at s[0..avail), or 0 when it is not one
 * (overlong form, UTF-16 surrogate, above U+10FFFF, stray continuation, truncated). */
static size_t utf8_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF; /* lo..hi: allowed second byte */
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong below U+0800 */
        if (c == 0xED) hi = 0x9F; /* surrogates U+D800..DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong below U+10000 */
        if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return n;
}

/* Parses the string literal at p->i (its opening quote) into a malloc'd decoded string. */
static dt_status parse_string(parser *p, char **out, size_t *outlen) {
    size_t start = p->i++, q = p->i;
    /* Find the closing quote first: the decoded text is never longer than the literal
     * (every escape shrinks), so one allocation fits it, and the decode loop below can
     * stop at that quote without bounds checks of its own. */
    while (q < p->len && p->s[q] != '"') q += (p->s[q] == '\\' && q + 1 < p->len) ? 2 : 1;
    if (q >= p->len) return perr(p, start, "unterminated string");
    unsigned char *buf = malloc(q - p->i + 1);
    if (!buf) return oom(p);
    size_t n = 0;
    const char *problem = NULL;
    size_t at = 0;
    while (p->i < q) {
        unsigned c = p->s[p->i];
        if (c < 0x20) { problem = "control character in string (escape it)"; at = p->i; break; }
        if (c != '\\') {
            size_t k = utf8_len(p->s + p->i, q - p->i);
            if (!k) { problem = "invalid UTF-8 in string"; at = p->i; break; }
            memcpy(buf + n, p->s + p->i, k);
            n += k;
            p->i += k;
            continue;
        }
        at = p->i; /* the escape; the pre-scan guarantees a byte follows it before q */
        unsigned char e = p->s[p->i + 1], ch = 0;
        p->i += 2;
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
            /* A hex digit is never '"', so four of them cannot run past q. */
            if (!hex4(p, p->i, &cp)) { problem = "\\u needs 4 hex digits"; break; }
            p->i += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (p->i + 1 >= q || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                    !hex4(p, p->i + 2, &lo) || lo < 0xDC00 || lo >= 0xE000) {
                    problem = "high surrogate not followed by a low surrogate";
                    break;
                }
                p->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                problem = "lone low surrogate";
                break;
            }
            if (cp == 0) { problem = "\\u0000 is not accepted (names are C strings)"; break; }
            n += utf8_encode(cp, buf + n);
            continue;
        }
        default: problem = "unknown escape"; break;
        }
        if (problem) break;
        buf[n++] = ch;
    }
    if (problem) {
        free(buf);
        return perr(p, at, problem);
    }
    p->i = q + 1;
    buf[n] = 0;
    *out = (char *)buf;
    *outlen = n;
    return DT_OK;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Validates the number at p->i and keeps its literal text. */
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
        if (p->i >= p->len || !is_digit(p->s[p->i])) return perr(p, p->i, "digit expected after '.'");
        while (p->i < p->len && is_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->len || !is_digit(p->s[p->i])) return perr(p, p->i, "digit expected in exponent");
        while (p->i < p->len && is_digit(p->s[p->i])) p->i++;
    }
    v->type = DT_JSON_NUMBER;
    v->len = p->i - st;
    v->text = dup_range(p->s + st, v->len);
    return v->text ? DT_OK : oom(p);
}

static dt_status parse_value(parser *p, dt_json_value *v, int depth);

/* Makes room for member v->n (items, and keys + key offsets for objects). */
static int grow(dt_json_value *v, size_t **kpos, size_t *cap) {
    if (v->n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 4;
    dt_json_value *it = realloc(v->items, nc * sizeof *it);
    if (!it) return 0;
    v->items = it;
    if (v->type == DT_JSON_OBJECT) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return 0;
        v->keys = k;
        size_t *kp = realloc(*kpos, nc * sizeof *kp);
        if (!kp) return 0;
        *kpos = kp;
    }
    *cap = nc;
    return 1;
}

typedef struct key_ref { const char *key; size_t idx; } key_ref;

/* By name, then by document order, so equal names sit together with the first one
 * first whatever qsort's order among equals would be. */
static int key_ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Refuses an object naming a key twice; reports the earliest repetition in the document.
 * Sorting keeps this n log n: a hostile header with a million keys stays cheap. */
static dt_status check_duplicates(const parser *p, const dt_json_value *v, const size_t *kpos) {
    if (v->n < 2) return DT_OK;
    key_ref *r = malloc(v->n * sizeof *r);
    if (!r) return oom(p);
    for (size_t k = 0; k < v->n; k++) r[k] = (key_ref){v->keys[k], k};
    qsort(r, v->n, sizeof *r, key_ref_cmp);
    size_t dup = v->n;
    for (size_t k = 1; k < v->n; k++)
        if (!strcmp(r[k - 1].key, r[k].key) && r[k].idx < dup) dup = r[k].idx;
    free(r);
    if (dup == v->n) return DT_OK;
    char problem[256];
    snprintf(problem, sizeof problem, "duplicate key \"%.200s\" in object", v->keys[dup]);
    return perr(p, kpos[dup], problem);
}

static dt_status parse_container(parser *p, dt_json_value *v, int depth) {
    int is_obj = p->s[p->i] == '{';
    unsigned char close = is_obj ? '}' : ']';
    size_t cap = 0, *kpos = NULL;
    dt_status st = DT_OK;
    v->type = is_obj ? DT_JSON_OBJECT : DT_JSON_ARRAY;
    if (depth >= DT_JSON_MAX_DEPTH) {
        char problem[64];
        snprintf(problem, sizeof problem, "nesting too deep (more than %d levels)", DT_JSON_MAX_DEPTH);
        return perr(p, p->i, problem);
    }
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == close) { p->i++; return DT_OK; }
    for (;;) {
        if (!grow(v, &kpos, &cap)) { st = oom(p); break; }
        dt_json_value *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (is_obj) {
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != '"') { st = perr(p, p->i, "expected a \"key\""); break; }
            size_t at = p->i, klen;
            char *key;
            if ((st = parse_string(p, &key, &klen))) break;
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') {
                free(key);
                st = perr(p, p->i, "expected ':' after key");
                break;
            }
            p->i++;
            v->keys[v->n] = key;
            kpos[v->n] = at;
        }
        st = parse_value(p, item, depth + 1);
        v->n++; /* counted even on failure so dt_json_free releases what was built */
        if (st) break;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->len && p->s[p->i] == close) { p->i++; break; }
        st = perr(p, p->i, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    if (!st && is_obj) st = check_duplicates(p, v, kpos);
    free(kpos);
    return st;
}

static dt_status parse_literal(parser *p, dt_json_value *v, const char *word, dt_json_type t) {
    size_t n = strlen(word);
    if (p->len - p->i < n || memcmp(p->s + p->i, word, n))
        return perr(p, p->i, "expected a value (object, array, string, number, true, false, null)");
    p->i += n;
    v->type = t;
    v->len = n;
    v->text = dup_range(word, n);
    return v->text ? DT_OK : oom(p);
}

static dt_status parse_value(parser *p, dt_json_value *v, int depth) {
    skip_ws(p);
    v->pos = p->i;
    if (p->i >= p->len) return perr(p, p->i, "unexpected end of input, expected a value");
    unsigned char c = p->s[p->i];
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

dt_status dt_json_parse(const char *text, size_t len, const char *what, dt_json_value **out) {
    *out = NULL;
    dt_json_value *v = calloc(1, sizeof *v);
    parser p = {(const unsigned char *)text, len, 0, what};
    if (!v) return oom(&p);
    dt_status st = parse_value(&p, v, 0);
    if (!st) {
        skip_ws(&p);
        if (p.i != p.len) st = perr(&p, p.i, "unexpected text after the value (trailing bytes)");
    }
    if (st) { dt_json_free(v); return st; }
    *out = v;
    return DT_OK;
}

dt_status dt_json_read_file(const char *path, dt_json_value **out) {
    *out = NULL;
    FILE *f;
    dt_status ost = dt_fopen_regular(path, &f, NULL);
    if (ost != DT_OK) return ost;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    int bad = 0;
    for (;;) {
        if (cap - n < 65536) {
            size_t nc = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, nc);
            if (!nb) { bad = 2; break; }
            buf = nb;
            cap = nc;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) { bad = ferror(f) ? 1 : 0; break; }
    }
    fclose(f);
    if (bad) {
        free(buf);
        return bad == 2 ? dt_fail(DT_ENOMEM, "reading %s: out of memory", path)
                        : dt_fail(DT_EIO, "error reading %s", path);
    }
    dt_status st = dt_json_parse(buf ? buf : "", n, path, out);
    free(buf);
    return st;
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

int dt_json_as_i64(const dt_json_value *v, int64_t *out) {
    /* The parser validated the literal, so strtoll sees only [-]digits here. */
    if (!v || v->type != DT_JSON_NUMBER || strpbrk(v->text, ".eE")) return 0;
    errno = 0;
    char *end;
    long long x = strtoll(v->text, &end, 10);
    if (errno || *end) return 0;
    *out = (int64_t)x;
    return 1;
}

int dt_json_as_f64(const dt_json_value *v, double *out) {
    if (!v || v->type != DT_JSON_NUMBER) return 0;
    errno = 0;
    char *end;
    double x = strtod(v->text, &end);
    if (errno == ERANGE || *end) return 0;
    *out = x;
    return 1;
}

int dt_json_as_bool(const dt_json_value *v, int *out) {
    if (!v || v->type != DT_JSON_BOOL) return 0;
    *out = v->text[0] == 't';
    return 1;
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
        return dt_fail(DT_ECORRUPT, "\"%s\" must be an integer, not %.100s", key,
                       v->text ? v->text : (v->type == DT_JSON_ARRAY ? "an array" : "an object"));
    if (!dt_json_as_i64(v, out))
        return dt_fail(DT_ECORRUPT, "\"%s\" = %.100s does not fit int64", key, v->text);
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
