/* Tiny test helpers. A test binary runs its cases, prints every failed check with file and
 * line, and exits non-zero when any check failed (tests/run.sh counts binaries). */
#ifndef DT_TEST_H
#define DT_TEST_H

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dt_test_failed;
static int dt_test_checks;

#define CHECK(cond) do { dt_test_checks++; if (!(cond)) { dt_test_failed++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { dt_test_checks++; if (!(cond)) { dt_test_failed++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
/* Status-returning call must succeed; prints dt_errmsg() otherwise. */
#define CHECK_OK(call) do { dt_status st_ = (call); dt_test_checks++; if (st_ != DT_OK) { \
    dt_test_failed++; fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, \
    dt_status_name(st_), dt_errmsg()); } } while (0)

#define RUN(test) do { int before_ = dt_test_failed; test(); \
    fprintf(stderr, "%s %s\n", dt_test_failed == before_ ? "ok  " : "FAIL", #test); } while (0)

static inline int dt_test_report(void) {
    fprintf(stderr, "%d checks, %d failed\n", dt_test_checks, dt_test_failed);
    if (dt_test_checks == 0) { fprintf(stderr, "no checks ran\n"); return 1; }
    return dt_test_failed ? 1 : 0;
}

/* Makes a fresh scratch directory $TMPDIR/dt_<tag>_XXXXXX (TMPDIR defaults to /tmp) and
 * writes its path to buf. A test that cannot get one cannot run: it stops with exit 1. */
static inline void dt_test_scratch(char *buf, size_t n, const char *tag) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, n, "%s/dt_%s_XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(buf)) {
        perror(buf);
        exit(1);
    }
}

static inline int dt_test_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb; (void)flag; (void)f;
    return remove(path);
}

/* Removes a scratch directory and everything below it (reports, never fails the test). */
static inline void dt_test_scratch_remove(const char *dir) {
    if (nftw(dir, dt_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* The whole file at path in a malloc'd buffer (one extra NUL byte after it), its size in
 * *n; NULL when it cannot be opened or fully read. */
static inline unsigned char *dt_test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = (unsigned char *)malloc((size_t)len + 1)) != NULL) {
        if (fread(b, 1, (size_t)len, f) == (size_t)len) {
            b[len] = 0;
            *n = (size_t)len;
        } else {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    return b;
}

#endif
