/* The environment fingerprint (env.json) written into every run's log directory.
 *
 * Two objects: "contract" holds what binds the bitwise contract (build id and flags,
 * compiler, BLAS build and kernel, CPU model, deterministic mode, the environment
 * variables that change numerics, and — in default mode only — the thread counts);
 * "info" holds what does not (host name, start time, and the thread counts in
 * deterministic mode, whose paths are thread-count independent). `detrain compare` warns
 * when the two runs' "contract" objects differ. */
#ifndef DT_CORE_FINGERPRINT_H
#define DT_CORE_FINGERPRINT_H

#include "detrain/detrain.h"

/* Writes dir/env.json (atomically). extra_json, if not NULL, is a JSON object text merged
 * into "contract" under the key "run" (e.g. the backend's device description). */
dt_status dt_fingerprint_write(const char *dir, const char *extra_json);
/* The build's git revision (`git describe --always --dirty` at build time, "unknown"
 * outside a checkout), as env.json records it. */
const char *dt_build_rev(void);

#endif
