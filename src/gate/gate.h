/* The kernel determinism gate (DESIGN §4) over a git diff.
 *
 * Changed files are those that differ between the merge base of REF and HEAD and the
 * working tree (committed since the merge base, staged, or unstaged), plus untracked files
 * that git does not ignore, so the gate works before committing. Deleted files are not
 * "changed" here (a deleted registered path is caught by the registry check).
 *
 * Rule 1 (cannot be waived): a changed kernel-bearing file (see scan.h) must be a source of
 * some registry entry.
 * Rule 2: a changed registered source must come with a change to at least one of its entry's
 * tests, unless every commit in REF..HEAD that touches it carries a
 * `Determinism-Exempt: <reason>` trailer and it has no uncommitted changes; then the
 * exemption is logged ("exempt: FILE: commits ...: reason") and the rule passes. An entry
 * registered with `exempt:` (no tests yet) has no test to change: the change passes with a
 * logged note naming the entry's exempt reason, so the debt is printed on every run. */
#ifndef DT_GATE_GATE_H
#define DT_GATE_GATE_H

#include "gate/gate_util.h"

#define DT_EXEMPT_TRAILER "Determinism-Exempt"

/* Runs the gate for the git checkout containing `dir` against `base_ref`. The registry is
 * `registry_path`, or kernels.registry at the top of the checkout when NULL. Appends rule
 * violations (and registry format problems) to *problems and informational lines
 * (exemptions, notes, the change summary) to *log.
 * Returns DT_OK when the gate ran: it passed iff no problems were added. DT_EINVAL when
 * `dir` is not in a git repository or base_ref does not name a commit; DT_EIO when the
 * registry cannot be read or git cannot run. */
dt_status dt_gate_run(const char *dir, const char *registry_path, const char *base_ref,
                      dt_strlist *problems, dt_strlist *log);

#endif
