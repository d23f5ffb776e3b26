/* Run locks on output directories (see runlock.h). */
#include "core/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_LOCKS = 8 };

struct dt_runlock {
    int n;
    int fd[MAX_LOCKS];
    dev_t dev[MAX_LOCKS];
    ino_t ino[MAX_LOCKS];
};

void dt_runlock_release(dt_runlock *lk) {
    if (!lk) return;
    for (int i = 0; i < lk->n; i++) close(lk->fd[i]); /* closing drops the flock */
    free(lk);
}

/* The pid recorded in an open lock file, as text ("unknown" when it holds none). */
static void holder_pid(int fd, char *buf, size_t cap) {
    char text[32];
    ssize_t k = pread(fd, text, sizeof text - 1, 0);
    size_t len = k > 0 ? (size_t)k : 0;
    text[len] = 0;
    len = strspn(text, "0123456789");
    if (len == 0 || len > 10) snprintf(buf, cap, "unknown");
    else snprintf(buf, cap, "%.*s", (int)len, text);
}

/* Locks one directory into lk. */
static dt_status lock_one(dt_runlock *lk, const char *dir, const char *what) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dt_fail(DT_EIO, "%s %s: cannot create the directory: %s (its parent must exist)", what, dir,
                       strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_fail(DT_EIO, "%s %s: not a directory", what, dir);
    for (int i = 0; i < lk->n; i++)
        if (lk->dev[i] == sb.st_dev && lk->ino[i] == sb.st_ino) return DT_OK; /* ours already */
    if (lk->n == MAX_LOCKS) return dt_fail(DT_EINVAL, "more than %d directories to lock", MAX_LOCKS);
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, DT_RUNLOCK_NAME) >= sizeof path)
        return dt_fail(DT_EINVAL, "%s %s: path too long", what, dir);
    /* O_NONBLOCK: a fifo planted under the name must not block the open */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
        return dt_fail(DT_EIO, "%s %s: cannot open the lock file %s: %s", what, dir, path, strerror(errno));
    struct stat fb;
    if (fstat(fd, &fb) != 0 || !S_ISREG(fb.st_mode)) {
        close(fd);
        return dt_fail(DT_EIO, "%s %s: the lock file %s is not a regular file; remove it", what, dir, path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char pid[16];
        holder_pid(fd, pid, sizeof pid);
        close(fd);
        if (err == EWOULDBLOCK)
            return dt_fail(DT_ESTATE, "%s %s is in use by another run (pid %s holds %s): two runs "
                           "writing one directory would interleave their files; wait for it to "
                           "finish, stop it, or choose another %s", what, dir, pid, path, what);
        return dt_fail(DT_EIO, "%s %s: cannot lock %s: %s", what, dir, path, strerror(err));
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        int err = errno;
        close(fd);
        return dt_fail(DT_EIO, "%s %s: cannot write the lock file %s: %s", what, dir, path, strerror(err));
    }
    lk->fd[lk->n] = fd;
    lk->dev[lk->n] = sb.st_dev;
    lk->ino[lk->n] = sb.st_ino;
    lk->n++;
    return DT_OK;
}

dt_status dt_runlock_acquire(dt_runlock **out, const char *const *dirs, const char *const *what, int n) {
    *out = NULL;
    dt_runlock *lk = calloc(1, sizeof *lk);
    if (!lk) return dt_fail(DT_ENOMEM, "out of memory locking the output directories");
    for (int i = 0; i < n; i++) {
        if (!dirs[i]) continue;
        dt_status st = lock_one(lk, dirs[i], what[i]);
        if (st != DT_OK) {
            dt_runlock_release(lk);
            return st;
        }
    }
    if (lk->n == 0) {
        free(lk);
        return DT_OK;
    }
    *out = lk;
    return DT_OK;
}
