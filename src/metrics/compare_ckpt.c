/* Checkpoint comparison for `detrain compare` (the hook in compare.h): the tensor-by-tensor
 * comparison is dt_ckpt_compare (ckpt/ckpt.h); this adds the environment check that
 * metrics comparison makes, on the env.json each checkpoint holds. */
#include "metrics/compare.h"

#include "ckpt/ckpt.h"

#include <string.h>

dt_status dt_compare_ckpt(const char *dir_a, const char *dir_b, FILE *out, int *identical) {
    dt_status st = dt_ckpt_compare(dir_a, dir_b, out, identical);
    if (st != DT_OK) return st;
    char ia[4096], ib[4096], ea[4200], eb[4200], keys[1024];
    int ndiff = 0;
    if (dt_ckpt_resolve(dir_a, ia, sizeof ia) != DT_OK || dt_ckpt_resolve(dir_b, ib, sizeof ib) != DT_OK)
        return DT_OK; /* cannot happen after a successful compare; nothing more to say */
    snprintf(ea, sizeof ea, "%s/%s", ia, DT_CKPT_ENV_NAME);
    snprintf(eb, sizeof eb, "%s/%s", ib, DT_CKPT_ENV_NAME);
    if (dt_compare_fingerprints(ea, eb, keys, sizeof keys, &ndiff) != DT_OK)
        fprintf(out, "warning: environments not compared: %s\n", dt_errmsg());
    else if (ndiff)
        fprintf(out, "warning: environment fingerprints differ in %d contract field%s: %s; runs in "
                "different environments are outside the determinism contract\n", ndiff,
                ndiff == 1 ? "" : "s", keys);
    return DT_OK;
}
