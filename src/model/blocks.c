/* The model's blocks (see blocks.h). */
#include "model/blocks.h"

dt_block_kind dt_gpt_mlp_kind(const dt_gpt_config *cfg, int layer) {
    return dt_gpt_is_moe(cfg, layer) ? DT_BLOCK_MLP_MOE : DT_BLOCK_MLP_DENSE;
}

const char *dt_block_kind_name(dt_block_kind k) {
    static const char *names[DT_BLOCK_KINDS] = {"embed", "attention", "mlp_dense", "mlp_moe", "head"};
    return k >= 0 && k < DT_BLOCK_KINDS ? names[k] : "?";
}

/* Slice l of each listed tensor, appended to b's slices. */
static void layer_slices(dt_block *b, const dt_param_desc *params, const int *tensors, int n, int l) {
    dt_param_slice *out = b->slice + b->nslices;
    b->nslices += n;
    for (int i = 0; i < n; i++) {
        const dt_param_desc *d = &params[tensors[i]];
        size_t per_layer = d->numel / (size_t)d->shape[0];
        out[i] = (dt_param_slice){tensors[i], d->offset + (size_t)l * per_layer, per_layer};
    }
}

int dt_gpt_blocks(const dt_gpt_config *cfg, const dt_param_desc params[DT_NUM_PARAM_TENSORS], dt_block *out,
                  int cap) {
    static const int attn[] = {DT_P_LN1W, DT_P_LN1B, DT_P_QKVW, DT_P_QKVB, DT_P_ATTPROJW, DT_P_ATTPROJB};
    static const int ln2[] = {DT_P_LN2W, DT_P_LN2B};
    static const int dense[] = {DT_P_FCW, DT_P_FCB, DT_P_FCPROJW, DT_P_FCPROJB};
    static const int moe[] = {DT_P_MOE_WR, DT_P_MOE_W1, DT_P_MOE_B1, DT_P_MOE_W2, DT_P_MOE_B2};
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
        layer_slices(&out[n], params, ln2, 2, l);
        if (k == DT_BLOCK_MLP_MOE) layer_slices(&out[n], params, moe, 5, dt_gpt_mlp_index(cfg, l));
        else layer_slices(&out[n], params, dense, 4, dt_gpt_mlp_index(cfg, l));
        n++;
    }
    out[n] = (dt_block){DT_BLOCK_HEAD, -1, 2, {{DT_P_LNFW, params[DT_P_LNFW].offset, params[DT_P_LNFW].numel},
                                               {DT_P_LNFB, params[DT_P_LNFB].offset, params[DT_P_LNFB].numel}}};
    return n + 1;
}
