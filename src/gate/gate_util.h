/* Small helpers shared by the kernel registry and the gate: a growable list of owned
 * strings (problem and log lines), whole-file reads and path tests. */
#ifndef DT_GATE_UTIL_H
#define DT_GATE_UTIL_H

#include "detrain/detrain.h"

#include <stddef.h>

/* A list of heap strings owned by the list. Zero-initialise before use; free with
 * dt_strlist_free. */
typedef struct dt_strlist {
    char **items;
    int n, cap;
} dt_strlist;

/* Appends a formatted string. DT_ENOMEM (with a message) when allocation fails. */
dt_status dt_strlist_addf(dt_strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends `s` unless an equal string is already in the list. */
dt_status dt_strlist_add_unique(dt_strlist *l, const char *s);
/* 1 when the list holds a string equal to `s`. */
int dt_strlist_has(const dt_strlist *l, const char *s);
/* Sorts the list bytewise (strcmp), for deterministic output. */
void dt_strlist_sort(dt_strlist *l);
void dt_strlist_free(dt_strlist *l);

/* Reads a whole file into a NUL-terminated heap buffer (*buf, caller frees; *n excludes the
 * NUL). DT_EIO naming the path when it cannot be opened or read. */
dt_status dt_read_file(const char *path, char **buf, size_t *n);
/* 1 when `path` names an existing regular file. */
int dt_is_file(const char *path);
/* Writes "root/rel" into out (or just rel when root is "" or "."). DT_EINVAL if too long. */
dt_status dt_path_join(char *out, size_t cap, const char *root, const char *rel);
/* The part of `path` after its last '/'. */
const char *dt_path_base(const char *path);

#endif
