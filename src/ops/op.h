/* The op catalog's dispatch point (DESIGN §3). Every op that has a choice between a
 * deterministic and a default path asks dt_op_variant() which branch to run; the answer
 * comes from the global deterministic flag (core/determinism.h) unless an explicit
 * per-op override (`--op-variant NAME=det|fast`) was set. Deterministic mode rejects
 * `=fast` overrides before any op runs, so in that mode every op runs its det branch. */
#ifndef DT_OPS_OP_H
#define DT_OPS_OP_H

#include "detrain/detrain.h"

typedef enum dt_op_id {
    DT_OP_GEMM,            /* every matrix product (ops/gemm.h) */
    DT_OP_ENCODER_BWD,     /* token + position embedding backward */
    DT_OP_LAYERNORM_BWD,   /* dweight / dbias */
    DT_OP_BIAS_BWD,        /* matmul bias gradient */
    DT_OP_ATTENTION_BWD,   /* dQ accumulation */
    DT_OP_CROSSENTROPY,    /* fused softmax cross-entropy: mean-loss reduction */
    DT_OP_NORM,            /* global grad norm, param norm */
    DT_OP_MOE_COMBINE,     /* MoE combine and un-dispatch: the K rows of a token added */
    DT_OP_MOE_DPROB,       /* MoE gate gradient: one dot product per (token, k) */
    DT_OP_COUNT
} dt_op_id;

typedef enum dt_variant { DT_VARIANT_DET = 0, DT_VARIANT_FAST = 1 } dt_variant;

const char *dt_op_name(dt_op_id op);
/* The branch this op runs now. */
dt_variant dt_op_variant(dt_op_id op);
/* Parses "NAME=det" or "NAME=fast" (NAME from dt_op_name) and records the override. */
dt_status dt_op_override(const char *spec);
void dt_op_clear_overrides(void);

#endif
