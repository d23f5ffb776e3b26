/* Run locks: one training run at a time per output directory (--save, --log-dir).
 *
 * A lock is an flock(LOCK_EX | LOCK_NB) on `<dir>/.detrain.lock`, held through an open
 * descriptor for the run's lifetime. The holder writes its pid into the file so a second
 * run can say who holds it. The kernel drops an flock when its holder's descriptors
 * close, so a lock left by a dead process (kill -9, a crash, a power cut) never blocks:
 * the file stays, its lock does not, and the next run takes it and rewrites the pid. The
 * file is never removed (removing it would let two runs lock two different files of the
 * same name). Locks taken by this process on one directory reached under two spellings
 * (the same device and inode) are taken once. */
#ifndef DT_CORE_RUNLOCK_H
#define DT_CORE_RUNLOCK_H

#include "detrain/detrain.h"

#define DT_RUNLOCK_NAME ".detrain.lock"

typedef struct dt_runlock dt_runlock;

/* Locks each of the n directories dirs[i] that is not NULL, creating it first (one level,
 * mode 0755) when missing. what[i] names it in messages ("--save"). Held by another
 * process: DT_ESTATE "--save DIR is in use by another run (pid P holds DIR/.detrain.lock):
 * ...". On failure nothing stays locked and *out is NULL; on success free with
 * dt_runlock_release (NULL when no directory was given). */
dt_status dt_runlock_acquire(dt_runlock **out, const char *const *dirs, const char *const *what, int n);
/* Releases every lock of lk and frees it (NULL is fine). */
void dt_runlock_release(dt_runlock *lk);

#endif
