/* Durable writes (temp + fsync + rename + directory fsync) and the crash hook; see
 * durable.h for the guarantees and the list of crash points. */
#include "ckpt/durable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long crash_hits; /* times the armed point has been reached so far */

void dt_crash_point(const char *name) {
    const char *spec = getenv("DT_CRASH_AT");
    if (!spec || !*spec) return;
    const char *at = strrchr(spec, '@');
    size_t len = at ? (size_t)(at - spec) : strlen(spec);
    long want = 1;
    if (at) {
        char *end;
        want = strtol(at + 1, &end, 10);
        if (*end || want < 1) want = 1;
    }
    if (strlen(name) != len || memcmp(name, spec, len) != 0) return;
    if (++crash_hits < want) return;
    const char *mode = getenv("DT_CRASH_MODE");
    static const char msg[] = "detrain: DT_CRASH_AT reached, stopping the process\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do: we are about to die */ }
    if (mode && strcmp(mode, "kill") == 0) raise(SIGKILL);
    _exit(77);
}

void dt_crash_point2(const char *prefix, const char *base) {
    if (!getenv("DT_CRASH_AT")) return;
    char name[512];
    snprintf(name, sizeof name, "%s:%s", prefix, base);
    dt_crash_point(name);
}

/* Copies the directory part of path ("." when there is none). Caller frees. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

dt_status dt_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return dt_fail(DT_EIO, "cannot open directory '%s' to fsync it: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* Some file systems refuse fsync on directories (EINVAL); their renames are
     * already ordered, so that is not an error. */
    if (rc != 0 && err != EINVAL)
        return dt_fail(DT_EIO, "fsync of directory '%s' failed: %s", dir, strerror(err));
    return DT_OK;
}

dt_status dt_durable_mkdir(const char *dir) {
    if (mkdir(dir, 0755) != 0) {
        struct stat st;
        if (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return dt_fail(DT_EIO, "cannot create directory '%s': %s", dir, strerror(errno));
    }
    char *parent = dir_of(dir);
    if (!parent) return dt_fail(DT_ENOMEM, "out of memory creating '%s'", dir);
    dt_status st = dt_fsync_dir(parent);
    free(parent);
    if (st == DT_OK) {
        const char *slash = strrchr(dir, '/');
        dt_crash_point2("dir-created", slash ? slash + 1 : dir);
    }
    return st;
}

dt_status dt_durable_open(dt_durable_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    size_t n = strlen(path);
    f->path = strdup(path);
    f->tmp = malloc(n + 5);
    if (!f->path || !f->tmp) {
        free(f->path); free(f->tmp);
        memset(f, 0, sizeof *f);
        f->fd = -1;
        return dt_fail(DT_ENOMEM, "out of memory opening '%s'", path);
    }
    memcpy(f->tmp, path, n);
    memcpy(f->tmp + n, ".tmp", 5);
    const char *slash = strrchr(f->path, '/');
    f->base = slash ? slash + 1 : f->path;
    /* A stale temp file is replaced, never opened: whatever sits under that name (a fifo
     * would block the open, a symlink would redirect the write) the new file is a fresh
     * regular file. */
    if (unlink(f->tmp) != 0 && errno != ENOENT) {
        dt_status st = dt_fail(DT_EIO, "cannot remove the stale temporary file '%s': %s", f->tmp,
                               strerror(errno));
        free(f->path); free(f->tmp);
        memset(f, 0, sizeof *f);
        f->fd = -1;
        return st;
    }
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        dt_status st = dt_fail(DT_EIO, "cannot create '%s': %s (is the directory writable?)",
                               f->tmp, strerror(errno));
        free(f->path); free(f->tmp);
        memset(f, 0, sizeof *f);
        f->fd = -1;
        return st;
    }
    dt_crash_point2("after-open", f->base);
    return DT_OK;
}

dt_status dt_durable_write(dt_durable_file *f, const void *buf, size_t n) {
    if (f->fd < 0) return dt_fail(DT_ESTATE, "durable write to a file that is not open");
    const char *p = buf;
    while (n) {
        ssize_t k = write(f->fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return dt_fail(DT_EIO, "writing '%s' failed after %llu bytes: %s", f->tmp,
                           (unsigned long long)f->written, strerror(errno));
        }
        p += k; n -= (size_t)k; f->written += (uint64_t)k;
    }
    dt_crash_point2("partial-write", f->base);
    return DT_OK;
}

static void release(dt_durable_file *f) {
    free(f->path);
    free(f->tmp);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

void dt_durable_abort(dt_durable_file *f) {
    if (!f->tmp) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp);
    release(f);
}

dt_status dt_durable_commit(dt_durable_file *f) {
    if (f->fd < 0 || !f->tmp) return dt_fail(DT_ESTATE, "durable commit of a file that is not open");
    dt_crash_point2("before-fsync", f->base);
    if (fsync(f->fd) != 0) {
        dt_status st = dt_fail(DT_EIO, "fsync of '%s' failed: %s", f->tmp, strerror(errno));
        dt_durable_abort(f);
        return st;
    }
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        dt_status st = dt_fail(DT_EIO, "closing '%s' failed: %s", f->tmp, strerror(errno));
        dt_durable_abort(f);
        return st;
    }
    dt_crash_point2("before-rename", f->base);
    if (rename(f->tmp, f->path) != 0) {
        dt_status st = dt_fail(DT_EIO, "renaming '%s' to '%s' failed: %s", f->tmp, f->path,
                               strerror(errno));
        dt_durable_abort(f);
        return st;
    }
    dt_crash_point2("after-rename", f->base);
    char *dir = dir_of(f->path);
    dt_status st = dir ? dt_fsync_dir(dir) : dt_fail(DT_ENOMEM, "out of memory");
    free(dir);
    if (st == DT_OK) dt_crash_point2("after-dirsync", f->base);
    release(f);
    return st;
}

dt_status dt_durable_write_parts(const char *path, const dt_buf *parts, int nparts) {
    dt_durable_file f;
    dt_status st = dt_durable_open(&f, path);
    if (st != DT_OK) return st;
    for (int i = 0; i < nparts && st == DT_OK; i++)
        st = dt_durable_write(&f, parts[i].data, parts[i].n);
    if (st != DT_OK) {
        dt_durable_abort(&f);
        return st;
    }
    return dt_durable_commit(&f);
}

dt_status dt_durable_write_file(const char *path, const void *data, size_t n) {
    dt_buf b = {data, n};
    return dt_durable_write_parts(path, &b, 1);
}

/* The last path component of path (path itself when it has no slash). */
static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

dt_status dt_durable_rename(const char *from, const char *to) {
    if (rename(from, to) != 0)
        return dt_fail(DT_EIO, "renaming '%s' to '%s' failed: %s", from, to, strerror(errno));
    dt_crash_point2("after-rename", base_of(to));
    char *dir = dir_of(to);
    dt_status st = dir ? dt_fsync_dir(dir) : dt_fail(DT_ENOMEM, "out of memory");
    free(dir);
    if (st == DT_OK) dt_crash_point2("after-dirsync", base_of(to));
    return st;
}

dt_status dt_durable_exchange(const char *a, const char *b) {
    const char *off = getenv("DT_CKPT_NO_EXCHANGE");
    if (off && *off && strcmp(off, "0") != 0)
        return dt_fail(DT_EUNSUPPORTED, "exchanging '%s' and '%s': disabled by DT_CKPT_NO_EXCHANGE "
                       "(test hook)", a, b);
    if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0) {
        int err = errno;
        /* kernels or file systems without the flag (NFS, some FUSE and old kernels) */
        if (err == EINVAL || err == ENOSYS || err == ENOTSUP || err == EOPNOTSUPP)
            return dt_fail(DT_EUNSUPPORTED, "this file system cannot exchange '%s' and '%s' "
                           "atomically (renameat2 RENAME_EXCHANGE: %s)", a, b, strerror(err));
        return dt_fail(DT_EIO, "exchanging '%s' and '%s' failed: %s", a, b, strerror(err));
    }
    dt_crash_point2("after-rename", base_of(b));
    char *dir = dir_of(b);
    dt_status st = dir ? dt_fsync_dir(dir) : dt_fail(DT_ENOMEM, "out of memory");
    free(dir);
    if (st == DT_OK) dt_crash_point2("after-dirsync", base_of(b));
    return st;
}

dt_status dt_durable_remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return DT_OK;
        return dt_fail(DT_EIO, "cannot open directory '%s' to remove it: %s", dir, strerror(errno));
    }
    dt_status st = DT_OK;
    int removed = 0;
    struct dirent *e;
    while (st == DT_OK && (errno = 0, e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = dt_fail(DT_EIO, "cannot stat '%s/%s': %s", dir, e->d_name, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            st = dt_fail(DT_EIO, "'%s' holds a directory '%s': it is not a checkpoint this save "
                         "may remove; remove it by hand", dir, e->d_name);
        } else if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            st = dt_fail(DT_EIO, "cannot remove '%s/%s': %s", dir, e->d_name, strerror(errno));
        } else if (removed++ == 0) {
            dt_crash_point2("removing", base_of(dir));
        }
    }
    if (st == DT_OK && errno != 0) st = dt_fail(DT_EIO, "cannot list '%s': %s", dir, strerror(errno));
    closedir(d);
    if (st == DT_OK && rmdir(dir) != 0)
        st = dt_fail(DT_EIO, "cannot remove directory '%s': %s", dir, strerror(errno));
    if (st != DT_OK) return st;
    char *parent = dir_of(dir);
    st = parent ? dt_fsync_dir(parent) : dt_fail(DT_ENOMEM, "out of memory");
    free(parent);
    if (st == DT_OK) dt_crash_point2("removed", base_of(dir));
    return st;
}
