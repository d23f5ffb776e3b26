/* Trace configuration: range lists (--trace-steps, --trace-ranks), level, phase and dtype
 * names. */
#include "trace/trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Reads one non-negative decimal integer at *p; advances *p. 0 on failure. */
static int read_int(const char **p, int64_t *out) {
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return 0;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s) return 0;
    *out = (int64_t)v;
    *p = end;
    return 1;
}

dt_status dt_range_list_parse(const char *s, const char *flag, dt_range_list *out) {
    memset(out, 0, sizeof *out);
    if (!s || !*s)
        return dt_fail(DT_EINVAL, "%s: empty list; expected items like 10-12,20", flag);
    const char *p = s;
    for (;;) {
        int64_t lo, hi;
        const char *item = p;
        if (!read_int(&p, &lo))
            return dt_fail(DT_EINVAL, "%s '%s': expected a non-negative integer at '%s'; "
                           "expected items like 10-12,20", flag, s, item);
        hi = lo;
        if (*p == '-') {
            p++;
            if (!read_int(&p, &hi))
                return dt_fail(DT_EINVAL, "%s '%s': range '%.*s' has no upper bound; "
                               "write A-B with A <= B", flag, s, (int)(p - item), item);
            if (hi < lo)
                return dt_fail(DT_EINVAL, "%s '%s': range %lld-%lld is reversed; write A-B "
                               "with A <= B", flag, s, (long long)lo, (long long)hi);
        }
        if (out->n == DT_RANGE_MAX)
            return dt_fail(DT_EINVAL, "%s '%s': more than %d items; merge them into ranges",
                           flag, s, DT_RANGE_MAX);
        out->lo[out->n] = lo;
        out->hi[out->n] = hi;
        out->n++;
        if (*p == 0) return DT_OK;
        if (*p != ',')
            return dt_fail(DT_EINVAL, "%s '%s': unexpected '%c'; items are A or A-B "
                           "separated by commas, no spaces", flag, s, *p);
        p++;
    }
}

int dt_range_list_has(const dt_range_list *l, int64_t x) {
    if (l->n == 0) return 1;
    for (int i = 0; i < l->n; i++)
        if (x >= l->lo[i] && x <= l->hi[i]) return 1;
    return 0;
}

int dt_range_list_meets(const dt_range_list *l, int64_t lo, int64_t hi) {
    if (lo > hi) return 0;
    if (l->n == 0) return 1;
    for (int i = 0; i < l->n; i++)
        if (l->lo[i] <= hi && l->hi[i] >= lo) return 1;
    return 0;
}

static const char *level_names[] = {"off", "metrics", "semantic", "module", "op", "kernel"};

dt_status dt_trace_level_parse(const char *s, int *level) {
    for (int i = 0; i <= DT_TRACE_KERNEL; i++)
        if (s && !strcmp(s, level_names[i])) { *level = i; return DT_OK; }
    return dt_fail(DT_EINVAL, "--trace-level '%s' is not a level; accepted: off, metrics, "
                   "semantic, module, op, kernel", s ? s : "");
}

const char *dt_trace_level_name(int level) {
    return level >= 0 && level <= DT_TRACE_KERNEL ? level_names[level] : "?";
}

const char *dt_trace_phase_name(int phase) {
    static const char *names[] = {"fwd", "bwd", "opt", "comm", "other"};
    return phase >= 0 && phase < DT_PHASE_COUNT ? names[phase] : "?";
}

static const struct { const char *name; size_t size; } dtypes[DT_DT_COUNT] = {
    [DT_DT_F32] = {"f32", 4}, [DT_DT_BF16] = {"bf16", 2}, [DT_DT_F16] = {"f16", 2},
    [DT_DT_F64] = {"f64", 8}, [DT_DT_I32] = {"i32", 4},   [DT_DT_I64] = {"i64", 8},
    [DT_DT_U16] = {"u16", 2}, [DT_DT_U8] = {"u8", 1},
};

const char *dt_trace_dtype_name(int dtype) {
    return dtype >= 0 && dtype < DT_DT_COUNT ? dtypes[dtype].name : "?";
}

size_t dt_trace_dtype_size(int dtype) {
    return dtype >= 0 && dtype < DT_DT_COUNT ? dtypes[dtype].size : 0;
}
