/* Error status and thread-local error message (see include/detrain/detrain.h). */
#include "detrain/detrain.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char dt_msg[2048];

dt_status dt_fail(dt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dt_msg, sizeof dt_msg, fmt, ap);
    va_end(ap);
    return code;
}

dt_status dt_fail_context(dt_status code, const char *fmt, ...) {
    char prefix[512], old[sizeof dt_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, dt_msg, sizeof old);
    size_t n = strlen(prefix);
    if (n + 2 >= sizeof dt_msg) return code;
    memcpy(dt_msg, prefix, n);
    memcpy(dt_msg + n, ": ", 2);
    size_t room = sizeof dt_msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(dt_msg + n + 2, old, m);
    dt_msg[n + 2 + m] = 0;
    return code;
}

const char *dt_errmsg(void) { return dt_msg; }

const char *dt_status_name(dt_status code) {
    switch (code) {
    case DT_OK: return "OK";
    case DT_EINVAL: return "EINVAL";
    case DT_EIO: return "EIO";
    case DT_ECORRUPT: return "ECORRUPT";
    case DT_ENOMEM: return "ENOMEM";
    case DT_EDETERMINISM: return "EDETERMINISM";
    case DT_EUNSUPPORTED: return "EUNSUPPORTED";
    case DT_ESTATE: return "ESTATE";
    case DT_EMISMATCH: return "EMISMATCH";
    }
    return "EUNKNOWN";
}
