/* The MoE family's chooser (moe.h). */
#include "ops/moe/moe.h"

dt_moe_path dt_moe_choose(dt_op_id op) {
    return dt_op_variant(op) == DT_VARIANT_DET ? DT_MOE_DET : DT_MOE_FAST;
}
