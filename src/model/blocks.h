/* The model as blocks: each layer l is an attention block and an MLP slot, and the MLP slot
 * holds the block its kind names, chosen per layer by the config (dt_gpt_mlp_kind): the
 * dense GELU MLP or the mixture-of-experts block (ops/moe/moe.h). The embedding
 * and the final LayerNorm + head are blocks too, so every parameter has one owner.
 *
 * A block owns its parameters' part of the slab: a list of slices of the parameter
 * tensors (model/gpt.h's table keeps one tensor per kind with the layers as its leading
 * dimension, so a layer's block owns slice l of each of its tensors; the MLP tensors are
 * indexed by the layer's index among the layers of its kind, dt_gpt_mlp_index). The backends lay out
 * their buffers and plans per block; dt_gpt_blocks lists them in forward order. */
#ifndef DT_MODEL_BLOCKS_H
#define DT_MODEL_BLOCKS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "model/gpt.h"

typedef enum dt_block_kind {
    DT_BLOCK_EMBED,      /* wte, wpe */
    DT_BLOCK_ATTENTION,  /* ln1, qkv, attproj of layer l */
    DT_BLOCK_MLP_DENSE,  /* ln2, fc, fcproj of layer l */
    DT_BLOCK_MLP_MOE,    /* ln2 of layer l, router and experts of its MoE index */
    DT_BLOCK_HEAD,       /* lnf (the head is tied to wte, which the embedding owns) */
    DT_BLOCK_KINDS
} dt_block_kind;

/* What layer l's MLP slot holds: DT_BLOCK_MLP_MOE where the config's MoE layers say
 * (--num-experts, --moe-layer-freq), else DT_BLOCK_MLP_DENSE. */
dt_block_kind dt_gpt_mlp_kind(const dt_gpt_config *cfg, int layer);

enum { DT_BLOCK_MAX_SLICES = 8 };

/* One slice of a parameter tensor: floats [offset, offset + numel) of the slab. */
typedef struct dt_param_slice {
    int tensor;            /* DT_P_* */
    size_t offset, numel;
} dt_param_slice;

typedef struct dt_block {
    dt_block_kind kind;
    int layer;             /* -1 for the embedding and the head */
    int nslices;
    dt_param_slice slice[DT_BLOCK_MAX_SLICES];
} dt_block;

/* The blocks of a model in forward order (embedding, then per layer its attention block
 * and its MLP slot's block, then the head): 2 L + 2 entries. Returns the count, or -1
 * when cap is too small. */
int dt_gpt_blocks(const dt_gpt_config *cfg, const dt_param_desc params[DT_NUM_PARAM_TENSORS], dt_block *out,
                  int cap);
const char *dt_block_kind_name(dt_block_kind k);

#ifdef __cplusplus
}
#endif

#endif
