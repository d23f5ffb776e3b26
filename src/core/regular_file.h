/* Opening a file that detrain reads from disk (checkpoints, the tracker, safetensors, JSON,
 * metrics logs): regular files only.
 *
 * A plain open(2) of a fifo blocks until a writer appears and a read of /dev/zero never
 * ends, so a special file planted under a checkpoint's name would hang `ckpt verify` and
 * `--load`. dt_open_regular opens without blocking (O_NONBLOCK; also O_NOCTTY), checks
 * with fstat that the file is a regular file (following symlinks: a symlink to a regular
 * file is fine, one to /dev/zero is not), and only then returns it, in blocking mode. */
#ifndef DT_CORE_REGULAR_FILE_H
#define DT_CORE_REGULAR_FILE_H

#include "detrain/detrain.h"

#include <stdio.h>

/* Opens path read-only into *fd. A special file (fifo, character or block device, socket)
 * or a directory is DT_EIO "'PATH' is a fifo, not a regular file: ...". When open itself
 * fails the status is DT_EIO and *open_errno (may be NULL) gets its errno (ENOENT: the
 * file does not exist), 0 otherwise. On failure nothing stays open. */
dt_status dt_open_regular(const char *path, int *fd, int *open_errno);
/* Same as a stdio stream ("rb"); close with fclose. */
dt_status dt_fopen_regular(const char *path, FILE **f, int *open_errno);

#endif
