/* Op variant selection (see op.h). */
#include "ops/op.h"

#include "core/determinism.h"

#include <string.h>

static const char *names[DT_OP_COUNT] = {
    "gemm", "encoder_bwd", "layernorm_bwd", "bias_bwd", "attention_bwd", "crossentropy", "norm",
    "moe_combine", "moe_dprob",
};
static int overrides[DT_OP_COUNT]; /* 0 none, 1 det, 2 fast */

const char *dt_op_name(dt_op_id op) { return (op >= 0 && op < DT_OP_COUNT) ? names[op] : "?"; }

dt_variant dt_op_variant(dt_op_id op) {
    /* Deterministic mode has already refused =fast overrides; dt_det() first keeps the det
     * branch even if one was recorded some other way. Otherwise only =det changes the
     * default (fast). */
    return dt_det() || overrides[op] == 1 ? DT_VARIANT_DET : DT_VARIANT_FAST;
}

dt_status dt_op_override(const char *spec) {
    const char *eq = strchr(spec, '=');
    if (!eq) return dt_fail(DT_EINVAL, "--op-variant '%s': expected NAME=det or NAME=fast", spec);
    size_t n = (size_t)(eq - spec);
    int v = !strcmp(eq + 1, "det") ? 1 : !strcmp(eq + 1, "fast") ? 2 : 0;
    if (!v) return dt_fail(DT_EINVAL, "--op-variant '%s': variant must be det or fast", spec);
    for (int i = 0; i < DT_OP_COUNT; i++)
        if (strlen(names[i]) == n && !strncmp(names[i], spec, n)) {
            overrides[i] = v;
            return DT_OK;
        }
    char known[256] = "";
    for (int i = 0; i < DT_OP_COUNT; i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, names[i], sizeof known - strlen(known) - 1);
    }
    return dt_fail(DT_EINVAL, "--op-variant '%s': unknown op; known: %s", spec, known);
}

void dt_op_clear_overrides(void) { memset(overrides, 0, sizeof overrides); }
