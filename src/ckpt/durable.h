/* Crash-safe file writes and the test-only crash hook.
 *
 * A durable write creates `<path>.tmp` in the same directory, writes it, fsyncs it,
 * renames it over `<path>` and fsyncs the directory. A crash at any moment leaves either
 * the old `<path>` (possibly with a stale `.tmp` beside it, which readers ignore and the
 * next write replaces) or the complete new one, never a torn file under the final name.
 * Directories are renamed, exchanged and removed the same way (dt_durable_rename,
 * dt_durable_exchange, dt_durable_remove_dir).
 *
 * Crash hook (tests only): DT_CRASH_AT=<point> makes the process stop abruptly the first
 * time it reaches that point; DT_CRASH_AT=<point>@N the N-th time (N >= 1). The stop is
 * _exit(77) (no atexit handlers, no stdio flush), or raise(SIGKILL) when
 * DT_CRASH_MODE=kill. Unset, dt_crash_point costs one getenv. Not thread-safe (the
 * occurrence counter is process-global): saves run on one thread.
 *
 * Points, where <base> is the final file name without directory
 * ("model.safetensors", "latest_checkpointed_iteration.txt"):
 *   after-open:<base>      temp file created, empty                      (durable.c)
 *   partial-write:<base>   after each dt_durable_write call on the file   (durable.c)
 *   before-fsync:<base>    all bytes written, temp not yet fsync'd        (durable.c)
 *   before-rename:<base>   temp fsync'd and closed, not renamed           (durable.c)
 *   after-rename:<base>    renamed, directory not yet fsync'd             (durable.c)
 *   after-dirsync:<base>   the file is durable under its final name       (durable.c)
 *   header-written:<base>  safetensors header written, no tensor data yet (safetensors.c)
 *   tensor-written:<base>  after each tensor's bytes (use @N for the N-th) (safetensors.c)
 *   tensor-written         same, any file                                (safetensors.c)
 *   dir-created:<base>     dt_durable_mkdir made directory <base>         (durable.c)
 *   after-rename:<base>, after-dirsync:<base>
 *                          also for directories renamed or exchanged by
 *                          dt_durable_rename / dt_durable_exchange          (durable.c)
 *   removing:<base>        dt_durable_remove_dir removed the first entry  (durable.c)
 *   removed:<base>         the directory is gone, its parent fsync'd      (durable.c)
 *   before-publish:iter_N  a save's temporary directory is complete       (ckpt.c)
 *   old-aside:iter_N       fallback replace: old iter_N renamed aside      (ckpt.c)
 *   before-tracker         checkpoint complete, tracker not yet written   (tracker.c)
 *   after-tracker          tracker durable                                (tracker.c)
 * Callers may add their own points; list them here. */
#ifndef DT_CKPT_DURABLE_H
#define DT_CKPT_DURABLE_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

/* Test hook: stops the process if DT_CRASH_AT names this point (see above). */
void dt_crash_point(const char *name);
/* dt_crash_point("<prefix>:<base>") without building the string at the call site. */
void dt_crash_point2(const char *prefix, const char *base);

/* One file being written durably. Fields are private to durable.c. */
typedef struct dt_durable_file {
    int fd;
    char *path;       /* final name */
    char *tmp;        /* "<path>.tmp" */
    const char *base; /* points into path */
    uint64_t written;
} dt_durable_file;

/* Creates `<path>.tmp` (mode 0644) afresh: a stale entry of that name, whatever it is,
 * is unlinked first and the new file is created exclusively. On failure nothing is left
 * open. */
dt_status dt_durable_open(dt_durable_file *f, const char *path);
/* Appends n bytes (retries short writes and EINTR). On failure the caller must still
 * call dt_durable_abort. */
dt_status dt_durable_write(dt_durable_file *f, const void *buf, size_t n);
/* fsync, close, rename over the final name, fsync the directory. Always releases f; on
 * failure the temp file is removed and the old final file is untouched. */
dt_status dt_durable_commit(dt_durable_file *f);
/* Closes and removes the temp file; the final file is untouched. Safe after a failed
 * open or commit (does nothing then). */
void dt_durable_abort(dt_durable_file *f);

/* One buffer of a file written in pieces. */
typedef struct dt_buf {
    const void *data;
    size_t n;
} dt_buf;

/* Durably writes one buffer / the concatenation of `nparts` buffers as `path`. */
dt_status dt_durable_write_file(const char *path, const void *data, size_t n);
dt_status dt_durable_write_parts(const char *path, const dt_buf *parts, int nparts);

/* Renames from over to (same directory: a file, or a directory over a missing or empty
 * one) and fsyncs the directory. Crash points after-rename:<base of to>,
 * after-dirsync:<base of to>. */
dt_status dt_durable_rename(const char *from, const char *to);
/* Atomically swaps the two existing entries a and b (renameat2 RENAME_EXCHANGE: no moment
 * at which either name is missing) and fsyncs their directory (they must share it). Crash
 * points after-rename:<base of b>, after-dirsync:<base of b>. DT_EUNSUPPORTED when the file
 * system cannot do it, or when DT_CKPT_NO_EXCHANGE is set to anything but 0 (test hook
 * for the fallback path); nothing has changed then. */
dt_status dt_durable_exchange(const char *a, const char *b);
/* Removes dir: every file and symlink in it (a subdirectory is refused, DT_EIO naming it),
 * then dir itself, then fsyncs its parent. A missing dir is DT_OK. Crash points
 * removing:<base> (after the first entry is gone) and removed:<base>. */
dt_status dt_durable_remove_dir(const char *dir);

/* fsyncs a directory so renames and creations inside it survive a crash. */
dt_status dt_fsync_dir(const char *dir);
/* Creates `dir` (an existing directory is fine) and fsyncs its parent. Not recursive. */
dt_status dt_durable_mkdir(const char *dir);

#endif
