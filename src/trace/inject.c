/* Fault injection (see inject.h). Process-wide state, read by one host thread. */
#include "trace/inject.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static dt_inject g_inject;
static int g_fired;

dt_status dt_inject_parse(const char *spec, dt_inject *out) {
    memset(out, 0, sizeof *out);
    const char *at = spec ? strrchr(spec, '@') : NULL;
    if (!at || at == spec || !at[1])
        return dt_fail(DT_EINVAL, "--inject-nondeterminism '%s': expected OP@STEP, e.g. "
                       "layernorm_bwd@3", spec ? spec : "");
    size_t n = (size_t)(at - spec);
    if (n >= sizeof out->op)
        return dt_fail(DT_EINVAL, "--inject-nondeterminism '%s': op name longer than %zu "
                       "characters", spec, sizeof out->op - 1);
    for (size_t i = 0; i < n; i++)
        if (spec[i] == '@' || isspace((unsigned char)spec[i]) || !isprint((unsigned char)spec[i]))
            return dt_fail(DT_EINVAL, "--inject-nondeterminism '%s': the op name may not "
                           "contain '@' or spaces", spec);
    const char *s = at + 1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return dt_fail(DT_EINVAL, "--inject-nondeterminism '%s': step '%s' is not a "
                           "non-negative integer", spec, s);
    errno = 0;
    long long step = strtoll(s, NULL, 10);
    if (errno == ERANGE)
        return dt_fail(DT_EINVAL, "--inject-nondeterminism '%s': step out of range", spec);
    memcpy(out->op, spec, n);
    out->op[n] = 0;
    out->step = (int64_t)step;
    out->enabled = 1;
    return DT_OK;
}

void dt_inject_set(const dt_inject *cfg) {
    if (cfg && cfg->enabled) g_inject = *cfg;
    else memset(&g_inject, 0, sizeof g_inject);
    g_fired = 0;
}

int dt_inject_should(const char *op, int64_t step) {
    if (!g_inject.enabled || g_fired || step != g_inject.step || strcmp(op, g_inject.op) != 0)
        return 0;
    g_fired = 1;
    return 1;
}

int dt_inject_fired(void) { return g_fired; }

int dt_inject_pending(void) { return g_inject.enabled && !g_fired; }

size_t dt_inject_flip_lsb(float *x, size_t n) {
    if (n == 0) return (size_t)-1;
    size_t best = 0;
    float mag = -1.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > mag) { mag = a; best = i; }
    }
    uint32_t bits;
    memcpy(&bits, &x[best], 4);
    bits ^= 1u;
    memcpy(&x[best], &bits, 4);
    return best;
}

void dt_inject_flip_all(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        b ^= 1u;
        memcpy(&x[i], &b, sizeof b);
    }
}
