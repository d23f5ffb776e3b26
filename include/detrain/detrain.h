/* detrain public API: status codes, error messages, deterministic mode.
 *
 * Every fallible library call returns a dt_status. On failure the library records a
 * message naming the bad input and what to do; dt_errmsg() returns it. The library never
 * calls exit(); the CLI prints the message and exits non-zero. */
#ifndef DETRAIN_H
#define DETRAIN_H

#include <stddef.h>
#include <stdint.h>

typedef enum dt_status {
    DT_OK = 0,
    DT_EINVAL,        /* bad argument, flag or value */
    DT_EIO,           /* file system error */
    DT_ECORRUPT,      /* malformed or corrupt file contents */
    DT_ENOMEM,        /* allocation failed */
    DT_EDETERMINISM,  /* would break the deterministic contract */
    DT_EUNSUPPORTED,  /* feature not available in this build or backend */
    DT_ESTATE,        /* call made in the wrong state (e.g. library used too early) */
    DT_EMISMATCH      /* two things that must agree do not (config, checkpoint, ...) */
} dt_status;

/* Records a formatted error message and returns `code` (so `return dt_fail(...)`). */
dt_status dt_fail(dt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the most recent failure in this thread ("" if none). */
const char *dt_errmsg(void);
/* Short name of a status code ("EINVAL"). */
const char *dt_status_name(dt_status code);
/* Prefixes the current message with context: "loading x: <old message>". Returns code. */
dt_status dt_fail_context(dt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
