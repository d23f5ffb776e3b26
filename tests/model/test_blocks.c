/* The model's blocks (src/model/blocks.c): in forward order, every float of the parameter
 * slab owned by exactly one block, each layer's attention block and MLP slot owning that
 * layer's slices, and the MLP slot's kind chosen per layer: dense presets, and MoE models
 * (every layer, every second layer, a pattern) whose MoE slots own ln2 and their moe_*
 * slices and whose dense slots own their fc* slices, by the index among their kind. */
#include "dt_test.h"
#include "model/blocks.h"

#include <stdlib.h>

static void every_float_one_owner(void) {
    dt_gpt_config cfgs[6];
    CHECK_OK(dt_gpt_preset("tiny", &cfgs[0]));
    CHECK_OK(dt_gpt_preset("small", &cfgs[1]));
    CHECK_OK(dt_gpt_preset("gpt2-124m", &cfgs[2]));
    static const char *freq[3] = {"1", "2", "0,1,1,0"};
    for (int c = 3; c < 6; c++) {
        CHECK_OK(dt_gpt_preset("tiny", &cfgs[c]));
        CHECK_OK(dt_gpt_set_moe(&cfgs[c], 4, 2, freq[c - 3]));
    }
    for (int c = 0; c < 6; c++) {
        dt_gpt_config *cfg = &cfgs[c];
        CHECK_OK(dt_gpt_config_finish(cfg));
        dt_param_desc pd[DT_NUM_PARAM_TENSORS];
        size_t n = dt_gpt_param_table(cfg, pd);
        int L = cfg->num_layers;
        dt_block *b = calloc((size_t)(2 * L + 2), sizeof *b);
        unsigned char *owner = calloc(n, 1);
        if (!b || !owner) { free(b); free(owner); CHECK(0); return; }
        CHECK(dt_gpt_blocks(cfg, pd, b, 2 * L + 1) == -1);
        int nb = dt_gpt_blocks(cfg, pd, b, 2 * L + 2);
        CHECK(nb == 2 * L + 2);
        CHECK(b[0].kind == DT_BLOCK_EMBED && b[nb - 1].kind == DT_BLOCK_HEAD);
        for (int k = 0; k < nb; k++) {
            if (k > 0 && k < nb - 1) {
                int l = (k - 1) / 2;
                CHECKF(b[k].layer == l, "block %d layer %d", k, b[k].layer);
                CHECK(b[k].kind == ((k - 1) % 2 ? dt_gpt_mlp_kind(cfg, l) : DT_BLOCK_ATTENTION));
                if ((k - 1) % 2) {
                    int moe = b[k].kind == DT_BLOCK_MLP_MOE;
                    CHECK(moe == dt_gpt_is_moe(cfg, l));
                    CHECKF(b[k].nslices == (moe ? 7 : 6), "layer %d MLP slot: %d slices", l, b[k].nslices);
                    CHECK(b[k].slice[2].tensor == (moe ? DT_P_MOE_WR : DT_P_FCW));
                }
            }
            for (int s = 0; s < b[k].nslices; s++) {
                const dt_param_slice *sl = &b[k].slice[s];
                const dt_param_desc *d = &pd[sl->tensor];
                CHECKF(sl->offset >= d->offset && sl->offset + sl->numel <= d->offset + d->numel,
                       "block %d slice %d outside tensor %s", k, s, d->name);
                for (size_t i = sl->offset; i < sl->offset + sl->numel; i++) owner[i]++;
            }
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += owner[i] != 1;
        CHECKF(bad == 0, "config %d: %zu floats without exactly one owner", c, bad);
        if (c >= 3) {
            int Lm = dt_gpt_num_moe_layers(cfg);
            CHECK(Lm == (c == 3 ? 4 : 2));
            CHECK(pd[DT_P_MOE_W1].shape[0] == Lm && pd[DT_P_FCW].shape[0] == L - Lm);
            CHECK(pd[DT_P_MOE_W1].numel == (size_t)Lm * 4 * 512 * 128);
        } else {
            CHECK(pd[DT_P_MOE_WR].numel == 0 && pd[DT_P_FCW].shape[0] == L);
        }
        free(b);
        free(owner);
    }
}

/* --moe-layer-freq: N, a pattern, and the named errors. */
static void moe_layer_choice(void) {
    dt_gpt_config c;
    CHECK_OK(dt_gpt_preset("tiny", &c));
    CHECK_OK(dt_gpt_set_moe(&c, 4, 2, "3"));
    CHECK(dt_gpt_is_moe(&c, 0) && !dt_gpt_is_moe(&c, 1) && !dt_gpt_is_moe(&c, 2) && dt_gpt_is_moe(&c, 3));
    CHECK(dt_gpt_mlp_index(&c, 3) == 1 && dt_gpt_mlp_index(&c, 2) == 1);
    CHECK_OK(dt_gpt_config_finish(&c));
    CHECK_OK(dt_gpt_set_moe(&c, 4, 2, "1,0,0,1"));
    CHECK(dt_gpt_num_moe_layers(&c) == 2 && dt_gpt_is_moe(&c, 3));
    CHECK(dt_gpt_set_moe(&c, 4, 2, "1,0,1") == DT_EINVAL && strstr(dt_errmsg(), "3 entries"));
    CHECK(dt_gpt_set_moe(&c, 4, 2, "1,2,1,0") == DT_EINVAL && strstr(dt_errmsg(), "0 or 1"));
    CHECK(dt_gpt_set_moe(&c, 4, 2, "0") == DT_EINVAL && strstr(dt_errmsg(), "N >= 1"));
    CHECK_OK(dt_gpt_set_moe(&c, 4, 2, "0,0,0,0"));
    CHECK(dt_gpt_config_finish(&c) == DT_EINVAL && strstr(dt_errmsg(), "selects no layer"));
    CHECK_OK(dt_gpt_set_moe(&c, 4, 5, "1"));
    CHECK(dt_gpt_config_finish(&c) == DT_EINVAL && strstr(dt_errmsg(), "--moe-router-topk 5"));
    CHECK_OK(dt_gpt_set_moe(&c, 0, 2, "1"));
    CHECK_OK(dt_gpt_config_finish(&c));
    CHECK(dt_gpt_num_moe_layers(&c) == 0 && dt_gpt_mlp_kind(&c, 0) == DT_BLOCK_MLP_DENSE);
}

int main(void) {
    RUN(every_float_one_owner);
    RUN(moe_layer_choice);
    return dt_test_report();
}
