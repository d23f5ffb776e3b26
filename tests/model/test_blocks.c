/* The model's blocks (src/model/blocks.c): in forward order, every float of the parameter
 * slab owned by exactly one block, each layer's attention block and MLP slot owning that
 * layer's slices, and the MLP slot's kind chosen per layer. */
#include "dt_test.h"
#include "model/blocks.h"

#include <stdlib.h>

static void every_float_one_owner(void) {
    dt_gpt_config cfgs[3];
    CHECK_OK(dt_gpt_preset("tiny", &cfgs[0]));
    CHECK_OK(dt_gpt_preset("small", &cfgs[1]));
    CHECK_OK(dt_gpt_preset("gpt2-124m", &cfgs[2]));
    for (int c = 0; c < 3; c++) {
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
        CHECKF(bad == 0, "%s: %zu floats without exactly one owner", c ? "gpt2" : "tiny", bad);
        free(b);
        free(owner);
    }
}

int main(void) {
    RUN(every_float_one_owner);
    return dt_test_report();
}
