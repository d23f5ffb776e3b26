/* Opening regular files only, without blocking on special ones (see regular_file.h). */
#include "core/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a fifo";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    return "a special file";
}

dt_status dt_open_regular(const char *path, int *fd, int *open_errno) {
    *fd = -1;
    if (open_errno) *open_errno = 0;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        int err = errno;
        if (open_errno) *open_errno = err;
        return dt_fail(DT_EIO, "cannot open '%s': %s", path, strerror(err));
    }
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int err = errno;
        close(f);
        return dt_fail(DT_EIO, "cannot stat '%s': %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return dt_fail(DT_EIO, "'%s' is %s, not a regular file: detrain reads only regular files "
                       "here; replace it with the real file", path, kind_of(sb.st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(f);
        return dt_fail(DT_EIO, "cannot set '%s' to blocking reads: %s", path, strerror(err));
    }
    *fd = f;
    return DT_OK;
}

dt_status dt_fopen_regular(const char *path, FILE **f, int *open_errno) {
    *f = NULL;
    int fd;
    dt_status st = dt_open_regular(path, &fd, open_errno);
    if (st != DT_OK) return st;
    *f = fdopen(fd, "rb");
    if (!*f) {
        int err = errno;
        close(fd);
        return dt_fail(DT_EIO, "cannot open '%s': %s", path, strerror(err));
    }
    return DT_OK;
}
