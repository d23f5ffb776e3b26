/* The embedding family's chooser (encoder.h) and the host-side plan of its det CUDA kernels
 * (encoder_plan.h). Plain C, single-threaded. */
#include "ops/encoder/encoder_plan.h"

#include "ops/encoder/encoder.h"

#include <string.h>

dt_encoder_path dt_encoder_choose(void) {
    return dt_op_variant(DT_OP_ENCODER_BWD) == DT_VARIANT_DET ? DT_ENCODER_DET : DT_ENCODER_FAST;
}

int dt_cu_encoder_buckets(const int *inp, int BT, int Vp, int *count, int *order, int *seg_tok,
                          int *seg_start) {
    memset(count, 0, sizeof(int) * (size_t)Vp);
    for (int i = 0; i < BT; i++) {
        if (inp[i] < 0 || inp[i] >= Vp) return -1;
        count[inp[i]]++;
    }
    /* exclusive prefix sums in id order; distinct ids become segments in id order */
    int nseg = 0, run = 0;
    for (int v = 0; v < Vp; v++) {
        int c = count[v];
        if (c) {
            seg_tok[nseg] = v;
            seg_start[nseg] = run;
            nseg++;
        }
        count[v] = run;
        run += c;
    }
    seg_start[nseg] = BT;
    /* positions visited in increasing order: ties keep position order (stable) */
    for (int i = 0; i < BT; i++) order[count[inp[i]]++] = i;
    return nseg;
}
