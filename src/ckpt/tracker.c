/* Checkpoint tracker file and iteration directory names (see tracker.h). */
#include "ckpt/tracker.h"

#include "ckpt/durable.h"
#include "core/regular_file.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

dt_status dt_ckpt_iter_dir(char *out, size_t cap, const char *save_dir, int64_t iter) {
    if (iter < 0) return dt_fail(DT_EINVAL, "checkpoint iteration %lld is negative", (long long)iter);
    int n = snprintf(out, cap, "%s/iter_%07lld", save_dir, (long long)iter);
    if (n < 0 || (size_t)n >= cap)
        return dt_fail(DT_EINVAL, "checkpoint path under '%s' is too long", save_dir);
    return DT_OK;
}

static dt_status tracker_path(char *out, size_t cap, const char *save_dir) {
    int n = snprintf(out, cap, "%s/%s", save_dir, DT_TRACKER_NAME);
    if (n < 0 || (size_t)n >= cap)
        return dt_fail(DT_EINVAL, "save directory path '%s' is too long", save_dir);
    return DT_OK;
}

dt_status dt_ckpt_tracker_write(const char *save_dir, int64_t iter) {
    char path[4096], text[32];
    dt_status st = tracker_path(path, sizeof path, save_dir);
    if (st != DT_OK) return st;
    if (iter < 0) return dt_fail(DT_EINVAL, "checkpoint iteration %lld is negative", (long long)iter);
    int n = snprintf(text, sizeof text, "%lld\n", (long long)iter);
    dt_crash_point("before-tracker");
    st = dt_durable_write_file(path, text, (size_t)n);
    if (st == DT_OK) dt_crash_point("after-tracker");
    return st;
}

dt_status dt_ckpt_tracker_read(const char *save_dir, int64_t *iter, int *found) {
    char path[4096], text[32];
    *found = 0;
    *iter = -1;
    dt_status st = tracker_path(path, sizeof path, save_dir);
    if (st != DT_OK) return st;
    FILE *f;
    int oerr;
    if ((st = dt_fopen_regular(path, &f, &oerr)) != DT_OK) return oerr == ENOENT ? DT_OK : st;
    size_t n = fread(text, 1, sizeof text, f);
    int err = ferror(f);
    fclose(f);
    if (err) return dt_fail(DT_EIO, "cannot read '%s'", path);
    if (n > 0 && text[n - 1] == '\n') n--;
    if (n == 0 || n > 15)
        return dt_fail(DT_ECORRUPT, "'%s' must hold one iteration number (1 to 15 digits) "
                       "and a newline; it holds %zu bytes", path, n);
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return dt_fail(DT_ECORRUPT, "'%s' holds a non-digit byte 0x%02x at offset %zu",
                           path, (unsigned char)text[i], i);
        v = v * 10 + (text[i] - '0');
    }
    *iter = v;
    *found = 1;
    return DT_OK;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

dt_status dt_ckpt_list_iters(const char *save_dir, int64_t **steps, size_t *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(save_dir);
    if (!d) {
        if (errno == ENOENT) return DT_OK;
        return dt_fail(DT_EIO, "cannot list '%s': %s", save_dir, strerror(errno));
    }
    size_t cap = 0;
    dt_status st = DT_OK;
    struct dirent *e;
    while ((errno = 0, e = readdir(d)) != NULL) {
        const char *p = e->d_name;
        if (strncmp(p, "iter_", 5) != 0) continue;
        size_t len = strlen(p + 5);
        if (len < 7 || len > 15 || strspn(p + 5, "0123456789") != len) continue;
        struct stat sb;
        if (fstatat(dirfd(d), p, &sb, 0) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            int64_t *ns = realloc(*steps, nc * sizeof *ns);
            if (!ns) { st = dt_fail(DT_ENOMEM, "out of memory listing '%s'", save_dir); break; }
            *steps = ns;
            cap = nc;
        }
        (*steps)[(*n)++] = strtoll(p + 5, NULL, 10);
    }
    if (st == DT_OK && errno != 0) st = dt_fail(DT_EIO, "cannot list '%s': %s", save_dir, strerror(errno));
    closedir(d);
    if (st != DT_OK) {
        free(*steps);
        *steps = NULL;
        *n = 0;
        return st;
    }
    if (*n) qsort(*steps, *n, sizeof **steps, cmp_i64);
    return DT_OK;
}
