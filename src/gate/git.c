/* git runner for the gate (see git.h). Reads stdout and stderr together with poll() so a
 * chatty stderr cannot fill its pipe and stall git while we wait on stdout. */
#include "gate/git.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static int buf_read(buf *b, int fd) {
    if (b->cap - b->n < 4096) {
        size_t cap = b->cap ? 2 * b->cap : 65536;
        char *np = realloc(b->p, cap);
        if (!np) return -2;
        b->p = np;
        b->cap = cap;
    }
    ssize_t got = read(fd, b->p + b->n, b->cap - b->n - 1);
    if (got > 0) b->n += (size_t)got;
    if (b->p) b->p[b->n] = 0;
    return got > 0 ? 1 : (got == 0 ? 0 : (errno == EINTR ? 1 : -1));
}

dt_status dt_git_run(const char *dir, const char *const *args, dt_git_out *r) {
    memset(r, 0, sizeof *r);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = "git";
    argv[argc++] = "-C";
    argv[argc++] = dir;
    for (int k = 0; args[k]; k++) {
        if (argc >= 63) return dt_fail(DT_EINVAL, "too many git arguments (internal)");
        argv[argc++] = args[k];
    }
    argv[argc] = NULL;
    int po[2], pe[2];
    if (pipe(po)) return dt_fail(DT_EIO, "cannot create a pipe to run git: %s", strerror(errno));
    if (pipe(pe)) {
        close(po[0]);
        close(po[1]);
        return dt_fail(DT_EIO, "cannot create a pipe to run git: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        return dt_fail(DT_EIO, "cannot fork to run git: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        setenv("LC_ALL", "C", 1);
        setenv("GIT_TERMINAL_PROMPT", "0", 1);
        setenv("GIT_PAGER", "cat", 1);
        /* execvp's argv is char *const[] for historical reasons; git does not modify it. */
        execvp("git", (char *const *)(void *)argv);
        fprintf(stderr, "cannot run git: %s\n", strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    buf out = {0}, err = {0};
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2, oom = 0;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int rc = buf_read(k == 0 ? &out : &err, fds[k].fd);
            if (rc == -2) oom = 1;
            if (rc <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
            }
        }
    }
    for (int k = 0; k < 2; k++)
        if (fds[k].fd >= 0) close(fds[k].fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (oom) {
        free(out.p);
        free(err.p);
        return dt_fail(DT_ENOMEM, "out of memory reading git's output");
    }
    r->out = out.p ? out.p : calloc(1, 1);
    r->out_n = out.n;
    r->err = err.p ? err.p : calloc(1, 1);
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!r->out || !r->err) {
        dt_git_out_free(r);
        return dt_fail(DT_ENOMEM, "out of memory reading git's output");
    }
    if (r->exit_code == 127 && strstr(r->err, "cannot run git")) {
        dt_git_out_free(r);
        return dt_fail(DT_EIO, "cannot run git; install git (scripts/install-deps.sh) and make "
                       "sure it is on PATH");
    }
    return DT_OK;
}

void dt_git_out_free(dt_git_out *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

const char *dt_git_err_line(const dt_git_out *r, char *b, size_t cap) {
    const char *s = r->err ? r->err : "";
    while (*s == ' ' || *s == '\n') s++;
    size_t n = strcspn(s, "\n");
    snprintf(b, cap, "%.*s", (int)n, s);
    return b;
}
