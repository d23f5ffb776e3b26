/* The model's blocks (see blocks.h). */
#include "model/blocks.h"

dt_block_kind dt_gpt_mlp_kind(const dt_gpt_config *cfg, int layer) {
    (void)cfg;
    (void)layer;
    return DT_BLOCK_MLP_DENSE;
}

const char *dt_block_kind_name(dt_block_kind k) {
    static const char *names[DT_BLOCK_KINDS] = {"embed", "attention", "mlp_dense", "head"};
    return k >= 0 && k < DT_BLOCK_KINDS ? names[k] : "?";
}

/* Layer l's slice of each listed tensor. */
static void layer_slices(dt_block *b, const dt_param_desc *params, const int *tensors, int n, int l) {
    b->nslices = n;
    for (int i = 0; i < n; i++) {
        const dt_param_desc *d = &params[tensors[i]];
        size_t per_layer = d->numel / (size_t)d->shape[0];
        b->slice[i] = (dt_param_slice){tensors[i], d->offset + (size_t)l * per_layer, per_layer};
    }
}

int dt_gpt_blocks(const dt_gpt_config *cfg, const dt_param_desc params[DT_NUM_PARAM_TENSORS], dt_block *out,
                  int cap) {
    static const int attn[] = {DT_P_LN1W, DT_P_LN1B, DT_P_QKVW, DT_P_QKVB, DT_P_ATTPROJW, DT_P_ATTPROJB};
    static const int mlp[] = {DT_P_LN2W, DT_P_LN2B, DT_P_FCW, DT_P_FCB, DT_P_FCPROJW, DT_P_FCPROJB};
    int L = cfg->num_layers, n = 0;
    if (cap < 2 * L + 2) return -1;
    out[n] = (dt_block){DT_BLOCK_EMBED, -1, 2, {{DT_P_WTE, params[DT_P_WTE].offset, params[DT_P_WTE].numel},
                                                {DT_P_WPE, params[DT_P_WPE].offset, params[DT_P_WPE].numel}}};
    n++;
    for (int l = 0; l < L; l++) {
        out[n] = (dt_block){DT_BLOCK_ATTENTION, l, 0, {{0, 0, 0}}};
        layer_slices(&out[n++], params, attn, 6, l);
        dt_block_kind k = dt_gpt_mlp_kind(cfg, l);
        out[n] = (dt_block){k, l, 0, {{0, 0, 0}}};
        layer_slices(&out[n++], params, mlp, 6, l);
    }
    out[n] = (dt_block){DT_BLOCK_HEAD, -1, 2, {{DT_P_LNFW, params[DT_P_LNFW].offset, params[DT_P_LNFW].numel},
                                               {DT_P_LNFB, params[DT_P_LNFB].offset, params[DT_P_LNFB].numel}}};
    return n + 1;
}
