/* Bitwise comparison of two metric series and of two environment fingerprints (see
 * compare.h for the rules). */
#include "metrics/compare.h"

#include "core/json.h"
#include "core/json_read.h"
#include "metrics/metrics.h"

#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

/* Wall-clock fields, and the marker a resumed run puts on its first line (metrics.h): how
 * the process ran, not what it computed. */
static const char *const ignored_keys[] = {"step_ms", "step_ms_hex", "tok_per_s", "tok_per_s_hex",
                                           "resumed"};

int dt_compare_ignored_key(const char *key) {
    for (size_t k = 0; k < sizeof ignored_keys / sizeof ignored_keys[0]; k++)
        if (key[0] == ignored_keys[k][0] && !strcmp(key, ignored_keys[k])) return 1;
    return 0;
}

static int ends_with_hex(const char *key) {
    size_t n = strlen(key);
    return n > 4 && !strcmp(key + n - 4, "_hex");
}

/* Member `key` of obj, looked up first at index k: the lines of one log hold their keys in
 * the same order, so this nearly always hits and a line costs no quadratic scan. */
static const dt_json_value *member_at(const dt_json_value *obj, size_t k, const char *key) {
    if (k < obj->n && !strcmp(obj->keys[k], key)) return &obj->items[k];
    return dt_json_get(obj, key);
}

/* A decimal float (key k of line) whose _hex sibling exists: the hex is compared instead.
 * The writer puts the sibling right after it. */
static int has_hex_sibling(const dt_json_value *line, size_t k) {
    const char *key = line->keys[k];
    size_t n = strlen(key);
    for (size_t j = 0; j < line->n; j++) {
        size_t i = (k + 1 + j) % line->n; /* from the next key on */
        if (!strncmp(line->keys[i], key, n) && !strcmp(line->keys[i] + n, "_hex")) return 1;
    }
    return 0;
}

static void show(char *buf, size_t n, const dt_json_value *line, const char *key) {
    const dt_json_value *v = dt_json_get(line, key);
    uint64_t bits;
    if (!v) snprintf(buf, n, "(absent)");
    else if (ends_with_hex(key) && !dt_json_get_hex64(line, key, &bits))
        snprintf(buf, n, "0x%016" PRIx64 " (%.17g)", bits, dt_f64_from_bits(bits));
    else if (v->type == DT_JSON_STRING) snprintf(buf, n, "\"%.100s\"", v->text);
    else if (v->text) snprintf(buf, n, "%.120s", v->text);
    else snprintf(buf, n, "(%s)", v->type == DT_JSON_OBJECT ? "object" : "array");
}

static void set_diff(dt_compare_report *r, int64_t step, const char *key, const dt_json_value *la,
                     const dt_json_value *lb) {
    r->identical = 0;
    r->diff_step = step;
    size_t n = strlen(key);
    if (ends_with_hex(key)) n -= 4;
    if (n >= sizeof r->diff_metric) n = sizeof r->diff_metric - 1;
    memcpy(r->diff_metric, key, n);
    r->diff_metric[n] = 0;
    show(r->a_value, sizeof r->a_value, la, key);
    show(r->b_value, sizeof r->b_value, lb, key);
}

/* Compares one key of `from` against `other`; returns 1 when it differs. */
static int key_differs(const dt_json_value *from, const dt_json_value *other, size_t k) {
    const char *key = from->keys[k];
    if (!strcmp(key, "step") || dt_compare_ignored_key(key)) return 0;
    if (!ends_with_hex(key) && has_hex_sibling(from, k)) return 0;
    const dt_json_value *o = member_at(other, k, key);
    return !o || !dt_json_equal(&from->items[k], o);
}

/* 1 when both lines hold the same keys in the same order (the common case: one writer). */
static int same_keys(const dt_json_value *la, const dt_json_value *lb) {
    if (la->n != lb->n) return 0;
    for (size_t k = 0; k < la->n; k++)
        if (strcmp(la->keys[k], lb->keys[k])) return 0;
    return 1;
}

/* Returns 1 and fills r when the two lines of `step` differ. Keys are checked in A's order,
 * then keys only B has (none when both hold the same keys). */
static int lines_differ(dt_compare_report *r, int64_t step, const dt_json_value *la,
                        const dt_json_value *lb) {
    for (size_t k = 0; k < la->n; k++)
        if (key_differs(la, lb, k)) { set_diff(r, step, la->keys[k], la, lb); return 1; }
    if (same_keys(la, lb)) return 0;
    for (size_t k = 0; k < lb->n; k++)
        if (key_differs(lb, la, k)) { set_diff(r, step, lb->keys[k], la, lb); return 1; }
    return 0;
}

dt_status dt_compare_series(const dt_metrics_series *a, const char *name_a,
                            const dt_metrics_series *b, const char *name_b, dt_compare_report *r) {
    memset(r, 0, sizeof *r);
    if (a->n == 0 || b->n == 0) return dt_fail(DT_EMISMATCH, "%s holds no steps", a->n == 0 ? name_a : name_b);
    r->a_first = a->steps[0]; r->a_last = a->steps[a->n - 1];
    r->b_first = b->steps[0]; r->b_last = b->steps[b->n - 1];
    r->first = r->a_first > r->b_first ? r->a_first : r->b_first;
    r->last = r->a_last < r->b_last ? r->a_last : r->b_last;
    if (r->first > r->last)
        return dt_fail(DT_EMISMATCH, "the logs share no step: %s holds steps %" PRId64 "-%" PRId64
                       ", %s holds steps %" PRId64 "-%" PRId64, name_a, r->a_first, r->a_last,
                       name_b, r->b_first, r->b_last);
    r->identical = 1;
    size_t i = 0, j = 0;
    while (i < a->n && a->steps[i] < r->first) i++;
    while (j < b->n && b->steps[j] < r->first) j++;
    /* Walk both logs in step order over the range; a step one log lacks is a difference. */
    for (;;) {
        int64_t sa = i < a->n && a->steps[i] <= r->last ? a->steps[i] : INT64_MAX;
        int64_t sb = j < b->n && b->steps[j] <= r->last ? b->steps[j] : INT64_MAX;
        if (sa == INT64_MAX && sb == INT64_MAX) break;
        if (sa != sb) {
            int64_t s = sa < sb ? sa : sb;
            r->identical = 0;
            r->diff_step = s;
            snprintf(r->diff_metric, sizeof r->diff_metric, "step");
            snprintf(r->a_value, sizeof r->a_value, "%s", s == sa ? "present" : "(absent)");
            snprintf(r->b_value, sizeof r->b_value, "%s", s == sb ? "present" : "(absent)");
            break;
        }
        if (lines_differ(r, sa, a->lines[i], b->lines[j])) break;
        r->nsteps++;
        i++;
        j++;
    }
    return DT_OK;
}

dt_status dt_compare_metrics(const char *path_a, const char *path_b, dt_compare_report *r) {
    memset(r, 0, sizeof *r);
    dt_metrics_series a, b;
    dt_status st = dt_metrics_read(path_a, &a);
    if (st) return st;
    st = dt_metrics_read(path_b, &b);
    if (st) { dt_metrics_series_free(&a); return st; }
    st = dt_compare_series(&a, path_a, &b, path_b, r);
    dt_metrics_series_free(&a);
    dt_metrics_series_free(&b);
    return st;
}

static void append_key(char *keys, size_t n, int *ndiff, const char *key) {
    size_t used = strlen(keys);
    if (used < n) snprintf(keys + used, n - used, "%s%s", *ndiff ? ", " : "", key);
    (*ndiff)++;
}

dt_status dt_compare_fingerprint_section(const char *env_a, const char *env_b, const char *section,
                                         char *keys, size_t n, int *ndiff) {
    *ndiff = 0;
    if (n) keys[0] = 0;
    dt_json_value *ja = NULL, *jb = NULL;
    dt_status st = dt_json_read_file(env_a, &ja);
    if (!st) st = dt_json_read_file(env_b, &jb);
    const dt_json_value *ca = st ? NULL : dt_json_get(ja, section);
    const dt_json_value *cb = st ? NULL : dt_json_get(jb, section);
    if (!st && (!ca || ca->type != DT_JSON_OBJECT || !cb || cb->type != DT_JSON_OBJECT))
        st = dt_fail(DT_ECORRUPT, "%s has no \"%s\" object",
                     !ca || ca->type != DT_JSON_OBJECT ? env_a : env_b, section);
    if (!st) {
        for (size_t k = 0; k < ca->n; k++) {
            const dt_json_value *o = dt_json_get(cb, ca->keys[k]);
            if (!o || !dt_json_equal(&ca->items[k], o)) append_key(keys, n, ndiff, ca->keys[k]);
        }
        for (size_t k = 0; k < cb->n; k++)
            if (!dt_json_get(ca, cb->keys[k])) append_key(keys, n, ndiff, cb->keys[k]);
        /* the flags that bind the trajectory: two runs with different ones are two recipes */
        const dt_json_value *fa = dt_json_get(ja, "config"), *fb = dt_json_get(jb, "config");
        fa = fa ? dt_json_get(fa, "binding") : NULL;
        fb = fb ? dt_json_get(fb, "binding") : NULL;
        if (fa && fb && fa->type == DT_JSON_OBJECT && fb->type == DT_JSON_OBJECT) {
            char name[96];
            for (size_t k = 0; k < fa->n; k++) {
                const dt_json_value *o = dt_json_get(fb, fa->keys[k]);
                snprintf(name, sizeof name, "config.%s", fa->keys[k]);
                if (!o || !dt_json_equal(&fa->items[k], o)) append_key(keys, n, ndiff, name);
            }
            for (size_t k = 0; k < fb->n; k++) {
                snprintf(name, sizeof name, "config.%s", fb->keys[k]);
                if (!dt_json_get(fa, fb->keys[k])) append_key(keys, n, ndiff, name);
            }
        }
    }
    dt_json_free(ja);
    dt_json_free(jb);
    return st;
}

dt_status dt_compare_fingerprints(const char *env_a, const char *env_b, char *keys, size_t n,
                                  int *ndiff) {
    return dt_compare_fingerprint_section(env_a, env_b, "contract", keys, n, ndiff);
}

/* The argument rule of `detrain compare` (compare.h). */
void dt_compare_paths(const char *arg, char *metrics, char *env, size_t n) {
    struct stat sb;
    if (!stat(arg, &sb) && S_ISDIR(sb.st_mode)) {
        snprintf(metrics, n, "%s/metrics.jsonl", arg);
        snprintf(env, n, "%s/env.json", arg);
        return;
    }
    snprintf(metrics, n, "%s", arg);
    const char *slash = strrchr(arg, '/');
    if (slash) snprintf(env, n, "%.*s/env.json", (int)(slash - arg), arg);
    else snprintf(env, n, "env.json");
}
