/* The environment fingerprint (env.json) written into every run's log directory.
 *
 * Two objects: "contract" holds what binds the bitwise contract (build id and flags,
 * compiler, BLAS build and kernel, CPU model, deterministic mode, the environment
 * variables that change numerics, and — in default mode only — the thread counts);
 * "info" holds what does not (host name, start time, and the thread counts in
 * deterministic mode, whose paths are thread-count independent); and, once set, "config":
 * the run's flags (dt_fingerprint_set_config). `detrain compare` warns when the two runs'
 * "contract" objects or binding configs differ. */
#ifndef DT_CORE_FINGERPRINT_H
#define DT_CORE_FINGERPRINT_H

#include "detrain/detrain.h"

/* Writes dir/env.json (atomically). extra_json, if not NULL, is a JSON object text merged
 * into "contract" under the key "run" (e.g. the backend's device description). */
dt_status dt_fingerprint_write(const char *dir, const char *extra_json);
/* The run's config for every env.json this process writes after the call (its log's and
 * its checkpoints'): "config": {"binding": binding_json, "run": run_json}, both JSON object
 * texts (copied; NULL clears). `detrain compare` warns when two runs' binding configs
 * differ, as it does for the contract. */
dt_status dt_fingerprint_set_config(const char *binding_json, const char *run_json);
/* The run's communicator for every env.json this process writes after the call: "dist" in
 * "contract" (contract_json: engine, world size, the engine's library and settings) and in
 * "info" (info_json: launcher, ranks, rank order); JSON object texts (copied; NULL clears). */
dt_status dt_fingerprint_set_dist(const char *contract_json, const char *info_json);
/* The build's git revision (`git describe --always --dirty` at build time, "unknown"
 * outside a checkout), as env.json records it. */
const char *dt_build_rev(void);

#endif
