/* Table-driven option parsing (see options.h). */
#include "config/options.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIELD(o, base, type) ((type *)((char *)(base) + (o)->offset))
#define CFIELD(o, base, type) ((type const *)((const char *)(base) + (o)->offset))

static int is_int_text(const char *v, int allow_minus) {
    const char *p = v;
    if (allow_minus && *p == '-') p++;
    if (!*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* A float as written by a person: an optional '-', digits with an optional '.', an
 * optional exponent; no spaces, no '+', no hex, no nan/inf. */
static int is_float_text(const char *v) {
    const char *p = v;
    int digits = 0;
    if (*p == '-') p++;
    for (; *p >= '0' && *p <= '9'; p++) digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == 0;
}

/* The range's two bounds as text and whether each is open. 0 when it is not "[a,b]". */
static int range_bounds(const char *r, char lo[64], char hi[64], int *lo_open, int *hi_open) {
    size_t n = strlen(r);
    const char *comma = strchr(r, ',');
    if (n < 5 || !comma || (r[0] != '[' && r[0] != '(') || (r[n - 1] != ']' && r[n - 1] != ')')) return 0;
    snprintf(lo, 64, "%.*s", (int)(comma - r - 1), r + 1);
    snprintf(hi, 64, "%.*s", (int)(r + n - 1 - comma - 1), comma + 1);
    *lo_open = r[0] == '(';
    *hi_open = r[n - 1] == ')';
    return 1;
}

const char *dt_opt_choice(const dt_opt *o, int i, char *buf, size_t cap) {
    const char *p = o->range;
    buf[0] = 0;
    for (int k = 0; p; k++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (k == i) {
            snprintf(buf, cap, "%.*s", (int)len, p);
            return buf;
        }
        p = bar ? bar + 1 : NULL;
    }
    return buf;
}

static int choice_index(const dt_opt *o, const char *v) {
    char c[128];
    for (int i = 0; *dt_opt_choice(o, i, c, sizeof c); i++)
        if (!strcmp(c, v)) return i;
    return -1;
}

static const char *kind_word(const dt_opt *o) {
    switch (o->kind) {
    case DT_OPT_I32: case DT_OPT_I64: case DT_OPT_U64: return "a valid integer";
    case DT_OPT_F32: return "a valid finite number";
    default: return "a value";
    }
}

dt_status dt_opt_check(const dt_opt *o, const void *base) {
    char lo[64], hi[64];
    int lo_open, hi_open;
    if (o->kind == DT_OPT_ENUM) {
        char c[128];
        if (!*dt_opt_choice(o, *CFIELD(o, base, int), c, sizeof c))
            return dt_fail(DT_EINVAL, "%s: no such choice; accepted: %s", o->name, o->range);
        return DT_OK;
    }
    if (o->kind == DT_OPT_STR || o->kind == DT_OPT_SWITCH || o->kind == DT_OPT_LIST || !*o->range) return DT_OK;
    if (!range_bounds(o->range, lo, hi, &lo_open, &hi_open))
        return dt_fail(DT_ESTATE, "%s: malformed range '%s' in the flag table", o->name, o->range);
    int bad;
    char val[64];
    if (o->kind == DT_OPT_U64) {
        uint64_t v = *CFIELD(o, base, uint64_t), a = strtoull(lo, NULL, 10), b = strtoull(hi, NULL, 10);
        bad = v < a || v > b;
        snprintf(val, sizeof val, "%" PRIu64, v);
    } else if (o->kind == DT_OPT_F32) {
        double v = *CFIELD(o, base, float), a = strtod(lo, NULL), b = strtod(hi, NULL);
        bad = lo_open ? !(v > a) : !(v >= a);
        bad |= hi_open ? !(v < b) : !(v <= b);
        snprintf(val, sizeof val, "%.9g", v);
    } else {
        int64_t v = o->kind == DT_OPT_I32 ? *CFIELD(o, base, int) : *CFIELD(o, base, int64_t);
        int64_t a = strtoll(lo, NULL, 10), b = strtoll(hi, NULL, 10);
        bad = v < a || v > b;
        snprintf(val, sizeof val, "%" PRId64, v);
    }
    if (bad) return dt_fail(DT_EINVAL, "%s %s is out of range %s", o->name, val, o->range);
    return DT_OK;
}

static dt_status set_value(dt_opt_set *s, const dt_opt *o, const char *v) {
    void *b = s->base;
    if (o->kind == DT_OPT_SWITCH) {
        *FIELD(o, b, int) = 1;
        return DT_OK;
    }
    if (!*v) return dt_fail(DT_EINVAL, "%s '': the value is empty; give one, or leave %s out", o->name, o->name);
    if (strlen(v) > DT_OPT_MAX_VALUE)
        return dt_fail(DT_EINVAL, "%s: the value is %zu characters long; at most %d", o->name, strlen(v),
                       DT_OPT_MAX_VALUE);
    errno = 0;
    switch (o->kind) {
    case DT_OPT_I32: case DT_OPT_I64: {
        long long x = is_int_text(v, 1) ? strtoll(v, NULL, 10) : 0;
        if (!is_int_text(v, 1) || errno || (o->kind == DT_OPT_I32 && (x < INT32_MIN || x > INT32_MAX))) break;
        if (o->kind == DT_OPT_I32) *FIELD(o, b, int) = (int)x;
        else *FIELD(o, b, int64_t) = x;
        return dt_opt_check(o, b);
    }
    case DT_OPT_U64: {
        unsigned long long x = is_int_text(v, 0) ? strtoull(v, NULL, 10) : 0;
        if (!is_int_text(v, 0) || errno) break;
        *FIELD(o, b, uint64_t) = x;
        return dt_opt_check(o, b);
    }
    case DT_OPT_F32: {
        float x = is_float_text(v) ? strtof(v, NULL) : 0.0f;
        if (!is_float_text(v) || errno || !isfinite(x)) break;
        *FIELD(o, b, float) = x;
        return dt_opt_check(o, b);
    }
    case DT_OPT_STR:
        *FIELD(o, b, const char *) = v;
        return DT_OK;
    case DT_OPT_ENUM: {
        int i = choice_index(o, v);
        if (i < 0) return dt_fail(DT_EINVAL, "%s '%s' is not a choice; accepted: %s", o->name, v, o->range);
        *FIELD(o, b, int) = i;
        return DT_OK;
    }
    case DT_OPT_LIST: {
        dt_str_list *l = FIELD(o, b, dt_str_list);
        if (l->n == l->cap) {
            int cap = l->cap ? 2 * l->cap : 8;
            const char **nv = realloc(l->v, sizeof *nv * (size_t)cap);
            if (!nv) return dt_fail(DT_ENOMEM, "%s: out of memory", o->name);
            l->v = nv;
            l->cap = cap;
        }
        l->v[l->n++] = v;
        return DT_OK;
    }
    case DT_OPT_SWITCH:
        break;
    }
    return dt_fail(DT_EINVAL, "%s '%s' is not %s%s", o->name, v, kind_word(o),
                   errno == ERANGE ? " in range" : "");
}

dt_status dt_opt_defaults(dt_opt_set *s) {
    for (int i = 0; i < s->n; i++) {
        if (!*s->opts[i].def) continue;
        dt_status st = set_value(s, &s->opts[i], s->opts[i].def);
        if (st != DT_OK) return dt_fail_context(st, "the flag table's default of %s", s->opts[i].name);
    }
    return DT_OK;
}

static dt_status note_use(dt_opt_set *s, const char *name, const char *value) {
    if (s->nuses == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        dt_flag_use *nu = realloc(s->uses, sizeof *nu * (size_t)cap);
        if (!nu) return dt_fail(DT_ENOMEM, "out of memory for the flags");
        s->uses = nu;
        s->cap = cap;
    }
    s->uses[s->nuses++] = (dt_flag_use){name, value};
    return DT_OK;
}

/* A separate argument taken as a value that is itself a flag ("--x", "-h"; "-1" and "-.5"
 * are numbers). */
static int looks_like_flag(const char *v) {
    return v[0] == '-' && v[1] && !(v[1] >= '0' && v[1] <= '9') && v[1] != '.';
}

dt_status dt_opt_parse(dt_opt_set *s, int argc, char **argv, int *help) {
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            *help = 1;
            return DT_OK;
        }
        if (strncmp(arg, "--", 2))
            return dt_fail(DT_EINVAL, "unexpected argument '%s': flags start with --", arg);
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const dt_opt *o = NULL;
        int k;
        for (k = 0; k < s->n && !o; k++)
            if (strlen(s->opts[k].name) == len && !strncmp(s->opts[k].name, arg, len)) o = &s->opts[k];
        if (!o) return dt_fail(DT_EINVAL, "unknown flag '%.*s'", (int)len, arg);
        int idx = (int)(o - s->opts);
        const char *v;
        if (o->kind == DT_OPT_SWITCH) {
            if (eq) return dt_fail(DT_EINVAL, "%s takes no value (got '%s')", o->name, eq + 1);
            v = "";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
            if (looks_like_flag(v))
                return dt_fail(DT_EINVAL, "%s needs a value, but the next argument '%s' is a flag (write "
                               "%s=%s if that is the value)", o->name, v, o->name, v);
        } else {
            return dt_fail(DT_EINVAL, "%s needs a value", o->name);
        }
        dt_status st = set_value(s, o, v);
        if (st != DT_OK) return st;
        s->given[idx] = 1;
        if ((st = note_use(s, o->name, v)) != DT_OK) return st;
    }
    return DT_OK;
}

void dt_opt_set_free(dt_opt_set *s) {
    for (int i = 0; i < s->n; i++)
        if (s->opts[i].kind == DT_OPT_LIST) {
            dt_str_list *l = FIELD(&s->opts[i], s->base, dt_str_list);
            free(l->v);
            memset(l, 0, sizeof *l);
        }
    free(s->uses);
    s->uses = NULL;
    s->nuses = s->cap = 0;
}

void dt_opt_help(const dt_opt *opts, int n, FILE *f) {
    for (int i = 0; i < n; i++) {
        const dt_opt *o = &opts[i];
        const char *arg = o->kind == DT_OPT_SWITCH ? "" : o->kind == DT_OPT_I32 || o->kind == DT_OPT_I64 ||
                          o->kind == DT_OPT_U64 || o->kind == DT_OPT_F32 ? " N" : " S";
        char left[64], extra[160] = "";
        snprintf(left, sizeof left, "%s%s", o->name, arg);
        snprintf(extra, sizeof extra, "%s%s%s%s%s", *o->def ? " [" : "", o->def, *o->def ? "]" : "",
                 *o->range ? (o->kind == DT_OPT_ENUM ? " one of " : " range ") : "", o->range);
        fprintf(f, "  %-28s %s%s%s\n", left, o->help, extra, o->group == DT_GROUP_CUDA ? " (cuda)" : "");
    }
}

void dt_opt_json(const dt_opt *o, const void *base, char *buf, size_t cap) {
    switch (o->kind) {
    case DT_OPT_I32: snprintf(buf, cap, "%d", *CFIELD(o, base, int)); return;
    case DT_OPT_SWITCH: snprintf(buf, cap, "%d", *CFIELD(o, base, int)); return;
    case DT_OPT_I64: snprintf(buf, cap, "%" PRId64, *CFIELD(o, base, int64_t)); return;
    case DT_OPT_U64: snprintf(buf, cap, "%" PRIu64, *CFIELD(o, base, uint64_t)); return;
    case DT_OPT_F32: snprintf(buf, cap, "%.9g", (double)*CFIELD(o, base, float)); return;
    case DT_OPT_ENUM: {
        char c[128];
        snprintf(buf, cap, "\"%s\"", dt_opt_choice(o, *CFIELD(o, base, int), c, sizeof c));
        return;
    }
    case DT_OPT_STR: case DT_OPT_LIST: break;
    }
    /* strings: JSON-escaped */
    size_t n = 0;
    const dt_str_list *l = o->kind == DT_OPT_LIST ? CFIELD(o, base, dt_str_list) : NULL;
    const char *one = o->kind == DT_OPT_STR ? *CFIELD(o, base, const char *) : NULL;
    int count = l ? l->n : 1;
    if (!l && !one) { snprintf(buf, cap, "null"); return; }
    if (cap < 8) { if (cap) buf[0] = 0; return; }
    if (l) buf[n++] = '[';
    for (int k = 0; k < count; k++) {
        const char *v = l ? l->v[k] : one;
        if (k && n + 1 < cap) buf[n++] = ',';
        if (n + 1 < cap) buf[n++] = '"';
        for (const unsigned char *p = (const unsigned char *)v; *p && n + 8 < cap; p++) {
            if (*p == '"' || *p == '\\') { buf[n++] = '\\'; buf[n++] = (char)*p; }
            else if (*p < 0x20) n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", *p);
            else buf[n++] = (char)*p;
        }
        if (n + 1 < cap) buf[n++] = '"';
    }
    if (l && n + 1 < cap) buf[n++] = ']';
    buf[n < cap ? n : cap - 1] = 0;
}
