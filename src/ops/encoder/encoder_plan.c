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

int dt_cu_encoder_max_multi(int BT) { return BT / (DT_CU_ENCODER_CHUNK + 1) + 1; }

/* a run of n > CHUNK positions takes ceil(n / CHUNK) < 2 n / CHUNK slots */
int dt_cu_encoder_max_slots(int BT) { return 2 * BT / DT_CU_ENCODER_CHUNK + 1; }

int dt_cu_encoder_chunks(const int *seg_tok, const int *seg_start, int nseg, int *chunk_start, int *chunk_dst,
                         int *multi_tok, int *multi_slot, int *nmulti) {
    int nchunk = 0, nm = 0, slot = 0;
    for (int s = 0; s < nseg; s++) {
        int a = seg_start[s], b = seg_start[s + 1];
        if (b - a <= DT_CU_ENCODER_CHUNK) {
            chunk_start[nchunk] = a;
            chunk_dst[nchunk++] = seg_tok[s];
            continue;
        }
        multi_tok[nm] = seg_tok[s];
        multi_slot[nm++] = slot;
        for (int j = a; j < b; j += DT_CU_ENCODER_CHUNK) {
            chunk_start[nchunk] = j;
            chunk_dst[nchunk++] = -1 - slot++;
        }
    }
    chunk_start[nchunk] = nseg > 0 ? seg_start[nseg] : 0;
    multi_slot[nm] = slot;
    *nmulti = nm;
    return nchunk;
}
