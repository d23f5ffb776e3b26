/* Durable writes: for every crash point of a write (durable.h) a forked child is stopped
 * there by DT_CRASH_AT, and the parent checks that the final name holds either the
 * complete old file (points before the rename) or the complete new one (after). Also the
 * tracker, the @N occurrence syntax, SIGKILL mode, abort, and error messages. */
#include "ckpt/durable.h"
#include "ckpt/tracker.h"
#include "dt_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int read_all(const char *path, char *buf, size_t cap, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    *n = fread(buf, 1, cap, f);
    fclose(f);
    return 1;
}

static int file_is(const char *path, const char *want) {
    char buf[4096];
    size_t n;
    if (!read_all(path, buf, sizeof buf, &n)) return 0;
    return n == strlen(want) && memcmp(buf, want, n) == 0;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static const char OLD[] = "old contents, complete\n";
static const char NEW1[] = "new contents part one / ";
static const char NEW2[] = "part two, complete\n";

/* Runs fn in a child with DT_CRASH_AT=point (and DT_CRASH_MODE=mode if not NULL);
 * returns the wait status. */
static int run_crashing(const char *point, const char *mode, void (*fn)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("DT_CRASH_AT", point, 1);
        if (mode) setenv("DT_CRASH_MODE", mode, 1);
        fn();
        _exit(0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    return ws;
}

static char target[512];

static void write_new(void) {
    dt_buf parts[2] = {{NEW1, strlen(NEW1)}, {NEW2, strlen(NEW2)}};
    if (dt_durable_write_parts(target, parts, 2) != DT_OK) _exit(3);
}

static void test_crash_points(void) {
    static const struct { const char *point; int new_expected; } cases[] = {
        {"after-open:f.bin", 0},      {"partial-write:f.bin", 0},
        {"partial-write:f.bin@2", 0}, {"before-fsync:f.bin", 0},
        {"before-rename:f.bin", 0},   {"after-rename:f.bin", 1},
        {"after-dirsync:f.bin", 1},
    };
    snprintf(target, sizeof target, "%s/f.bin", dir);
    char want_new[256];
    snprintf(want_new, sizeof want_new, "%s%s", NEW1, NEW2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int kill_mode = 0; kill_mode < 2; kill_mode++) {
            CHECK_OK(dt_durable_write_file(target, OLD, strlen(OLD)));
            int ws = run_crashing(cases[i].point, kill_mode ? "kill" : NULL, write_new);
            if (kill_mode)
                CHECKF(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "%s: child not killed", cases[i].point);
            else
                CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 77, "%s: child did not stop there (status %d)",
                       cases[i].point, ws);
            const char *want = cases[i].new_expected ? want_new : OLD;
            CHECKF(file_is(target, want), "%s (mode %s): final file is neither intact old nor "
                   "complete new as expected", cases[i].point, kill_mode ? "kill" : "exit");
        }
    }
    /* A point that is never reached: the child completes and the new file is there. */
    int ws = run_crashing("partial-write:f.bin@3", NULL, write_new);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK(file_is(target, want_new));
    /* The temp file left by a crash is replaced by the next write. */
    ws = run_crashing("before-rename:f.bin", NULL, write_new);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", target);
    CHECK(exists(tmp));
    CHECK_OK(dt_durable_write_file(target, OLD, strlen(OLD)));
    CHECK(file_is(target, OLD));
    CHECK(!exists(tmp));
}

static void write_tracker_7(void) {
    if (dt_ckpt_tracker_write(dir, 7) != DT_OK) _exit(3);
}

static void test_tracker(void) {
    int64_t it;
    int found;
    char sub[300];
    snprintf(sub, sizeof sub, "%s/empty", dir);
    CHECK_OK(dt_durable_mkdir(sub));
    CHECK_OK(dt_durable_mkdir(sub)); /* existing is fine */
    CHECK_OK(dt_ckpt_tracker_read(sub, &it, &found));
    CHECK(found == 0);
    CHECK_OK(dt_ckpt_tracker_write(dir, 5));
    static const char *points[] = {"before-tracker", "before-rename:latest_checkpointed_iteration.txt",
                                   "after-rename:latest_checkpointed_iteration.txt", "after-tracker"};
    static const int64_t want[] = {5, 5, 7, 7};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(dt_ckpt_tracker_write(dir, 5));
        int ws = run_crashing(points[i], NULL, write_tracker_7);
        CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 77, "%s not reached", points[i]);
        CHECK_OK(dt_ckpt_tracker_read(dir, &it, &found));
        CHECKF(found && it == want[i], "%s: tracker says %lld", points[i], (long long)it);
    }
    char path[400], name[300];
    CHECK_OK(dt_ckpt_iter_dir(name, sizeof name, "/s", 100));
    CHECK(strcmp(name, "/s/iter_0000100") == 0);
    CHECK(dt_ckpt_iter_dir(name, 10, "/s", 100) == DT_EINVAL);
    snprintf(path, sizeof path, "%s/%s", dir, DT_TRACKER_NAME);
    static const char *bad[] = {"", "\n", "12x\n", "-3\n", "1 2\n", "12\n\n", "1234567890123456\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_OK(dt_durable_write_file(path, bad[i], strlen(bad[i])));
        dt_status st = dt_ckpt_tracker_read(dir, &it, &found);
        CHECKF(st == DT_ECORRUPT && !found, "tracker '%s' accepted", bad[i]);
        CHECK(strstr(dt_errmsg(), DT_TRACKER_NAME) != NULL);
    }
    CHECK_OK(dt_durable_write_file(path, "42", 2)); /* newline optional */
    CHECK_OK(dt_ckpt_tracker_read(dir, &it, &found));
    CHECK(found && it == 42);
}

static void test_errors_and_abort(void) {
    CHECK(dt_durable_write_file("/nonexistent-dir-dt/x.bin", "a", 1) == DT_EIO);
    CHECK(strstr(dt_errmsg(), "/nonexistent-dir-dt/x.bin.tmp") != NULL);
    char path[300], tmp[310];
    snprintf(path, sizeof path, "%s/ab.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK_OK(dt_durable_write_file(path, OLD, strlen(OLD)));
    dt_durable_file f;
    CHECK_OK(dt_durable_open(&f, path));
    CHECK_OK(dt_durable_write(&f, "partial", 7));
    dt_durable_abort(&f);
    dt_durable_abort(&f); /* second abort is a no-op */
    CHECK(file_is(path, OLD));
    CHECK(!exists(tmp));
}

int main(void) {
    dt_test_scratch(dir, sizeof dir, "durable");
    RUN(test_crash_points);
    RUN(test_tracker);
    RUN(test_errors_and_abort);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
