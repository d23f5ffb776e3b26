/* Each op family's chooser of its path (gemm_plan.c, encoder_plan.c, layernorm_plan.c,
 * reduce_plan.c, crossentropy_plan.c, attention_plan.c, moe_plan.c): in default mode, with per-op =det
 * overrides and in deterministic mode, every chooser answers what its op's dt_op_variant
 * says (the branch every call site took before the choosers); the attention chooser's GPU
 * answer follows the shape, the device and the cap exactly as the GPU model's rule (flash
 * where dt_cu_flash_supported and not capped to GEMM; on warpgroup MMA only on sm_90 and
 * not capped to FLASH), and its CPU answer splits key blocks only in the fast branch with
 * fewer heads than twice the threads. Runs on the CPU (CI). */
#include "core/determinism.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_plan.h"
#include "ops/crossentropy/crossentropy.h"
#include "ops/encoder/encoder.h"
#include "ops/gemm/gemm.h"
#include "ops/layernorm/layernorm.h"
#include "ops/moe/moe.h"
#include "ops/op.h"
#include "ops/reduce/reduce.h"

#include "dt_test.h"

#include <omp.h>

/* Every det/fast chooser against dt_op_variant of its op, in the current mode. */
static void check_variants(const char *mode) {
    int det_gemm = dt_op_variant(DT_OP_GEMM) == DT_VARIANT_DET;
    CHECKF((dt_gemm_choose() == DT_GEMM_DET) == det_gemm, "%s: gemm", mode);
    int det_enc = dt_op_variant(DT_OP_ENCODER_BWD) == DT_VARIANT_DET;
    CHECKF((dt_encoder_choose() == DT_ENCODER_DET) == det_enc, "%s: encoder", mode);
    int det_ln = dt_op_variant(DT_OP_LAYERNORM_BWD) == DT_VARIANT_DET;
    CHECKF((dt_layernorm_choose() == DT_LAYERNORM_DET) == det_ln, "%s: layernorm", mode);
    static const dt_op_id reduced[] = {DT_OP_BIAS_BWD, DT_OP_NORM, DT_OP_CROSSENTROPY};
    for (int i = 0; i < 3; i++)
        CHECKF((dt_reduce_choose(reduced[i]) == DT_REDUCE_DET) == (dt_op_variant(reduced[i]) == DT_VARIANT_DET),
               "%s: reduce for %s", mode, dt_op_name(reduced[i]));
    CHECKF((dt_crossentropy_choose() == DT_REDUCE_DET) == (dt_op_variant(DT_OP_CROSSENTROPY) == DT_VARIANT_DET),
           "%s: crossentropy", mode);
    static const dt_op_id moe_ops[] = {DT_OP_MOE_COMBINE, DT_OP_MOE_DPROB};
    for (int i = 0; i < 2; i++)
        CHECKF((dt_moe_choose(moe_ops[i]) == DT_MOE_DET) == (dt_op_variant(moe_ops[i]) == DT_VARIANT_DET),
               "%s: moe for %s", mode, dt_op_name(moe_ops[i]));
    /* the CPU attention backward: the det branch, else key blocks only with few heads */
    int det_att = dt_op_variant(DT_OP_ATTENTION_BWD) == DT_VARIANT_DET, threads = omp_get_max_threads();
    for (int B = 1; B <= 4; B++)
        for (int NH = 1; NH <= 8; NH *= 2) {
            dt_attention_path want = !det_att && B * NH < 2 * threads ? DT_ATTENTION_KEYBLOCKS : DT_ATTENTION_HEADS;
            CHECKF(dt_attention_choose(B, 64, 64 * NH, NH, NULL, DT_ATTENTION_ON_CPU, DT_ATTENTION_HEADS) == want,
                   "%s: cpu attention B %d NH %d", mode, B, NH);
            CHECK(dt_attention_fast_cpu(B, NH) == (B * NH < 2 * threads ? DT_ATTENTION_KEYBLOCKS : DT_ATTENTION_HEADS));
        }
}

static void test_default_mode(void) {
    dt_determinism_reset_for_tests();
    dt_det_request req = {0, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    dt_op_clear_overrides();
    check_variants("default");
    CHECK(dt_gemm_choose() == DT_GEMM_FAST && dt_encoder_choose() == DT_ENCODER_FAST);
    CHECK(dt_layernorm_choose() == DT_LAYERNORM_FAST && dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_FAST);
    /* each override moves its own op's chooser alone */
    for (int op = 0; op < DT_OP_COUNT; op++) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s=det", dt_op_name((dt_op_id)op));
        dt_op_clear_overrides();
        CHECK_OK(dt_op_override(spec));
        check_variants(spec);
    }
    dt_op_clear_overrides();
}

static void test_deterministic_mode(void) {
    dt_determinism_reset_for_tests();
    dt_det_request req = {1, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    dt_op_clear_overrides();
    check_variants("deterministic");
    CHECK(dt_gemm_choose() == DT_GEMM_DET && dt_encoder_choose() == DT_ENCODER_DET);
    CHECK(dt_layernorm_choose() == DT_LAYERNORM_DET && dt_crossentropy_choose() == DT_REDUCE_DET);
    CHECK(dt_reduce_choose(DT_OP_BIAS_BWD) == DT_REDUCE_DET && dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET);
    CHECK(dt_moe_choose(DT_OP_MOE_COMBINE) == DT_MOE_DET && dt_moe_choose(DT_OP_MOE_DPROB) == DT_MOE_DET);
    dt_op_clear_overrides();
}

/* The GPU attention path over shapes, dropout, devices and caps, against the rule as the GPU
 * model wrote it inline: flash = supported && cap != GEMM; wgmma = flash && cc 90 &&
 * cap == FLASH_WGMMA. The mode does not change it (both branches coincide on the GPU). */
static void test_attention_gpu(void) {
    struct { int C, NH, T; float p; int supported; } shapes[] = {
        {768, 12, 1024, 0.0f, 1}, {128, 2, 64, 0.0f, 1},   /* head size 64, T % 64 == 0 */
        {128, 4, 128, 0.0f, 0},                             /* head size 32 */
        {768, 12, 1000, 0.0f, 0},                           /* T not a multiple of 64 */
        {768, 12, 1024, 0.1f, 0},                           /* attention dropout */
    };
    int ccs[] = {80, 89, 90, 100};
    dt_attention_path caps[] = {DT_ATTENTION_GEMM, DT_ATTENTION_FLASH, DT_ATTENTION_FLASH_WGMMA};
    for (int det = 0; det <= 1; det++) {
        dt_determinism_reset_for_tests();
        dt_det_request req = {det, NULL, 0};
        CHECK_OK(dt_determinism_apply(&req));
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            dt_dropout d = {shapes[s].p, 1, 0};
            CHECK(dt_cu_flash_supported(shapes[s].C, shapes[s].NH, shapes[s].T, &d) == shapes[s].supported);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 3; k++) {
                    int flash = shapes[s].supported && caps[k] != DT_ATTENTION_GEMM;
                    int wgmma = flash && ccs[c] == 90 && caps[k] == DT_ATTENTION_FLASH_WGMMA;
                    dt_attention_path want = wgmma ? DT_ATTENTION_FLASH_WGMMA : flash ? DT_ATTENTION_FLASH : DT_ATTENTION_GEMM;
                    CHECKF(dt_attention_choose(16, shapes[s].T, shapes[s].C, shapes[s].NH, &d, ccs[c], caps[k]) == want,
                           "shape %zu cc %d cap %d det %d", s, ccs[c], (int)caps[k], det);
                }
        }
    }
    CHECK(dt_cu_flash_supported(768, 12, 1024, NULL));
}

int main(void) {
    RUN(test_default_mode);
    RUN(test_deterministic_mode);
    RUN(test_attention_gpu);
    return dt_test_report();
}
