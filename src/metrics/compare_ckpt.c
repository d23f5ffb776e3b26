/* Checkpoint-directory comparison for `detrain compare`: a placeholder hook (see
 * compare.h) until tensor-by-tensor comparison lands. */
#include "metrics/compare.h"

dt_status dt_compare_ckpt(const char *dir_a, const char *dir_b, FILE *out, int *identical) {
    (void)out;
    *identical = 0;
    return dt_fail(DT_EUNSUPPORTED, "comparing checkpoint directories (%s, %s) is not supported "
                   "yet; compare the runs' log directories (metrics.jsonl) instead", dir_a, dir_b);
}
