/* Running git for the gate: fork/exec with an argument vector (no shell, so refs and paths
 * need no quoting), capturing stdout and stderr. */
#ifndef DT_GATE_GIT_H
#define DT_GATE_GIT_H

#include "detrain/detrain.h"

#include <stddef.h>

typedef struct dt_git_out {
    char *out;       /* stdout, NUL-terminated (may hold NULs with -z; use out_n) */
    size_t out_n;
    char *err;       /* stderr, NUL-terminated */
    int exit_code;   /* git's exit status; 127 when git could not be started */
} dt_git_out;

/* Runs `git -C dir <args...>` (args is NULL-terminated) with LC_ALL=C and no terminal
 * prompts. Returns DT_OK when git ran, whatever its exit status (see r->exit_code); DT_EIO
 * when it could not be started (git missing from PATH, fork/pipe failure). Free r with
 * dt_git_out_free. */
dt_status dt_git_run(const char *dir, const char *const *args, dt_git_out *r);
void dt_git_out_free(dt_git_out *r);

/* The first line of git's stderr (for error messages), trimmed; "" when empty. Writes into
 * buf. */
const char *dt_git_err_line(const dt_git_out *r, char *buf, size_t cap);

#endif
