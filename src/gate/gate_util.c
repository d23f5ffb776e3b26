/* Helpers for the registry and the gate: string lists, file reads, paths. */
#include "gate/gate_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static dt_status push(dt_strlist *l, char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(s);
            return dt_fail(DT_ENOMEM, "out of memory growing a string list to %d items", cap);
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = s;
    return DT_OK;
}

dt_status dt_strlist_addf(dt_strlist *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return dt_fail(DT_EINVAL, "bad format string '%s'", fmt);
    char *s = malloc((size_t)len + 1);
    if (!s) return dt_fail(DT_ENOMEM, "out of memory for a %d-byte string", len + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return push(l, s);
}

dt_status dt_strlist_add_unique(dt_strlist *l, const char *s) {
    if (dt_strlist_has(l, s)) return DT_OK;
    return dt_strlist_addf(l, "%s", s);
}

int dt_strlist_has(const dt_strlist *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->items[i], s)) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void dt_strlist_sort(dt_strlist *l) {
    if (l->n > 1) qsort(l->items, (size_t)l->n, sizeof *l->items, cmp_str);
}

void dt_strlist_free(dt_strlist *l) {
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = l->cap = 0;
}

dt_status dt_read_file(const char *path, char **buf, size_t *n) {
    *buf = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return dt_fail(DT_EIO, "cannot open '%s' for reading", path);
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    if (!b) {
        fclose(f);
        return dt_fail(DT_ENOMEM, "out of memory reading '%s'", path);
    }
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                fclose(f);
                return dt_fail(DT_ENOMEM, "out of memory reading '%s' (%zu bytes so far)", path, len);
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(b);
        return dt_fail(DT_EIO, "error reading '%s'", path);
    }
    b[len] = 0;
    *buf = b;
    *n = len;
    return DT_OK;
}

int dt_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

dt_status dt_path_join(char *out, size_t cap, const char *root, const char *rel) {
    int len = (!root[0] || !strcmp(root, ".")) ? snprintf(out, cap, "%s", rel)
                                               : snprintf(out, cap, "%s/%s", root, rel);
    if (len < 0 || (size_t)len >= cap)
        return dt_fail(DT_EINVAL, "path '%s/%s' is longer than %zu bytes", root, rel, cap - 1);
    return DT_OK;
}

const char *dt_path_base(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}
