/* Op variant selection (ops/op.c): the global deterministic flag picks det everywhere;
 * --op-variant overrides parse and apply in default mode; =det overrides stay in force in
 * deterministic mode and nothing can select fast there. */
#include "core/determinism.h"
#include "ops/op.h"
#include "dt_test.h"

#include <string.h>

static void test_default_mode_and_overrides(void) {
    dt_determinism_reset_for_tests();
    dt_det_request req = {0, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    dt_op_clear_overrides();
    for (int op = 0; op < DT_OP_COUNT; op++) CHECK(dt_op_variant((dt_op_id)op) == DT_VARIANT_FAST);
    CHECK_OK(dt_op_override("layernorm_bwd=det"));
    CHECK(dt_op_variant(DT_OP_LAYERNORM_BWD) == DT_VARIANT_DET);
    CHECK(dt_op_variant(DT_OP_GEMM) == DT_VARIANT_FAST);
    CHECK_OK(dt_op_override("layernorm_bwd=fast"));
    CHECK(dt_op_variant(DT_OP_LAYERNORM_BWD) == DT_VARIANT_FAST);
    CHECK(dt_op_override("layernorm_bwd") == DT_EINVAL);
    CHECK(dt_op_override("layernorm_bwd=slow") == DT_EINVAL);
    CHECK(dt_op_override("nosuch=det") == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "unknown op") != NULL);
    /* the message lists every op of the table, the MoE ones included */
    for (int op = 0; op < DT_OP_COUNT; op++) CHECKF(strstr(dt_errmsg(), dt_op_name((dt_op_id)op)) != NULL, "%s", dt_op_name((dt_op_id)op));
    CHECK_OK(dt_op_override("moe_combine=det"));
    CHECK(dt_op_variant(DT_OP_MOE_COMBINE) == DT_VARIANT_DET);
    CHECK(dt_op_variant(DT_OP_MOE_DPROB) == DT_VARIANT_FAST);
    CHECK_OK(dt_op_override("moe_dprob=det"));
    CHECK(dt_op_variant(DT_OP_MOE_DPROB) == DT_VARIANT_DET);
    CHECK(dt_op_override("layernorm=det") == DT_EINVAL); /* prefixes do not match */
    for (int op = 0; op < DT_OP_COUNT; op++) CHECK(strcmp(dt_op_name((dt_op_id)op), "?") != 0);
    dt_op_clear_overrides();
}

static void test_deterministic_mode(void) {
    dt_determinism_reset_for_tests();
    dt_det_request req = {1, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    dt_op_clear_overrides();
    for (int op = 0; op < DT_OP_COUNT; op++) CHECK(dt_op_variant((dt_op_id)op) == DT_VARIANT_DET);
    /* even an override recorded behind the validation's back cannot pick fast */
    CHECK_OK(dt_op_override("gemm=fast"));
    CHECK(dt_op_variant(DT_OP_GEMM) == DT_VARIANT_DET);
    dt_op_clear_overrides();
}

int main(void) {
    RUN(test_default_mode_and_overrides);
    RUN(test_deterministic_mode);
    return dt_test_report();
}
