/* Checkpoint directory layout: `<save>/iter_%07d/` per checkpoint and
 * `<save>/latest_checkpointed_iteration.txt` (the tracker), which holds the step of the
 * newest complete checkpoint as decimal digits and a newline. The tracker is written last
 * and durably, so it only ever names a checkpoint whose files are all durable. */
#ifndef DT_CKPT_TRACKER_H
#define DT_CKPT_TRACKER_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_TRACKER_NAME "latest_checkpointed_iteration.txt"

/* Writes "<save_dir>/iter_%07lld" into out. DT_EINVAL if it does not fit or iter < 0. */
dt_status dt_ckpt_iter_dir(char *out, size_t cap, const char *save_dir, int64_t iter);
/* Durably writes the tracker naming `iter`. Crash points before-tracker / after-tracker
 * surround it (durable.h). Call only after every file of the checkpoint is durable. */
dt_status dt_ckpt_tracker_write(const char *save_dir, int64_t iter);
/* Reads the tracker. No tracker: DT_OK with *found = 0. Anything but digits and one
 * optional trailing newline (or a value over 10^15): DT_ECORRUPT naming the file. */
dt_status dt_ckpt_tracker_read(const char *save_dir, int64_t *iter, int *found);

/* Lists the iteration directories of save_dir: entries named "iter_" and 7 to 15 digits
 * that are directories (temporary "iter_N.tmp" / "iter_N.old" leftovers of an interrupted
 * save are not listed). *steps (malloc'd, caller frees; NULL when *n is 0) in increasing
 * order. A missing save_dir is DT_OK with *n = 0. */
dt_status dt_ckpt_list_iters(const char *save_dir, int64_t **steps, size_t *n);

#endif
