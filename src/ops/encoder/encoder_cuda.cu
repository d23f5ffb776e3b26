/* Token + position embedding on the GPU (see encoder.h, encoder_cuda.h). */
#include "ops/encoder/encoder_cuda.h"

__global__ void encoder_fwd_kernel(bf16 *out, const int *inp, const float *wte, const float *wpe,
                                   int BT, int T, int C, dt_dropout d, uint32_t purpose,
                                   uint32_t layer) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C), t = bt % T;
    float x = wte[(size_t)inp[bt] * C + c] + wpe[(size_t)t * C + c];
    if (d.p > 0.0f) x *= dt_cu_drop_factor(d, purpose, layer, i);
    out[i] = __float2bfloat16(x);
}

/* det, token table, first pass: one thread owns (chunk, channel) and adds the chunk's
 * positions in run order (position order: the buckets are stable), then adds the sum to
 * its token's row (a run of one chunk: no other writer) or writes it to the chunk's own
 * slot. Each element's order is fixed by the ids. */
__global__ void encoder_bwd_wte_chunks(float *dwte, float *partial, const bf16 *dout, const int *order,
                                       const int *chunk_start, const int *chunk_dst, int C, dt_dropout d,
                                       uint32_t purpose, uint32_t layer) {
    int k = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int j = chunk_start[k]; j < chunk_start[k + 1]; j++) {
        size_t i = (size_t)order[j] * C + c;
        float g = __bfloat162float(dout[i]);
        if (d.p > 0.0f) g *= dt_cu_drop_factor(d, purpose, layer, i);
        acc += g;
    }
    int dst = chunk_dst[k];
    if (dst >= 0) dwte[(size_t)dst * C + c] += acc;
    else partial[(size_t)(-1 - dst) * C + c] = acc;
}

/* det, token table, second pass (after every first-pass writer): one thread owns (run,
 * channel) of a run of several chunks and adds its slots in slot (= position) order. */
__global__ void encoder_bwd_wte_runs(float *dwte, const float *partial, const int *multi_tok,
                                     const int *multi_slot, int C) {
    int r = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int k = multi_slot[r]; k < multi_slot[r + 1]; k++) acc += partial[(size_t)k * C + c];
    dwte[(size_t)multi_tok[r] * C + c] += acc;
}

/* det, position table: one thread owns (t, channel) and adds over b in order. */
__global__ void encoder_bwd_wpe_det(float *dwpe, const bf16 *dout, int B, int T, int C,
                                    dt_dropout d, uint32_t purpose, uint32_t layer) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)T * C) return;
    float acc = 0.0f;
    for (int b = 0; b < B; b++) {
        size_t i = (size_t)b * T * C + k;
        float g = __bfloat162float(dout[i]);
        if (d.p > 0.0f) g *= dt_cu_drop_factor(d, purpose, layer, i);
        acc += g;
    }
    dwpe[k] += acc;
}

/* fast: atomics; repeated tokens (and every position, over b) race. */
__global__ void encoder_bwd_fast(float *dwte, float *dwpe, const bf16 *dout, const int *inp,
                                 int BT, int T, int C, dt_dropout d, uint32_t purpose,
                                 uint32_t layer) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C), t = bt % T;
    float g = __bfloat162float(dout[i]);
    if (d.p > 0.0f) g *= dt_cu_drop_factor(d, purpose, layer, i);
    atomicAdd(&dwte[(size_t)inp[bt] * C + c], g);
    atomicAdd(&dwpe[(size_t)t * C + c], g);
}

void dt_cu_encoder_fwd(bf16 *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                       int C, const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                       cudaStream_t s) {
    size_t n = (size_t)B * T * C;
    encoder_fwd_kernel<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "encoder_fwd_kernel"), 256, 0, s>>>(out, inp, wte, wpe, B * T, T, C,
                                                         dt_cu_drop_arg(drop), purpose, layer);
}

void dt_cu_encoder_bwd(float *dwte, float *dwpe, const bf16 *dout, const int *inp, const dt_cu_encoder_work *w,
                       int B, int T, int C, const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                       cudaStream_t s) {
    dt_dropout d = dt_cu_drop_arg(drop);
    if (dt_encoder_choose() == DT_ENCODER_DET) {
        unsigned cb = dt_cu_div((size_t)C, 128);
        if (w->nchunk > 0) {
            dim3 g((unsigned)w->nchunk, cb);
            encoder_bwd_wte_chunks<<<dt_cu_noted(g, 128, 0, "encoder_bwd_wte_chunks"), 128, 0, s>>>(
                dwte, w->partial, dout, w->order, w->chunk_start, w->chunk_dst, C, d, purpose, layer);
        }
        if (w->nmulti > 0) {
            dim3 g((unsigned)w->nmulti, cb);
            encoder_bwd_wte_runs<<<dt_cu_noted(g, 128, 0, "encoder_bwd_wte_runs"), 128, 0, s>>>(
                dwte, w->partial, w->multi_tok, w->multi_slot, C);
        }
        encoder_bwd_wpe_det<<<dt_cu_noted(dt_cu_div((size_t)T * C, 256), 256, 0, "encoder_bwd_wpe_det"), 256, 0, s>>>(dwpe, dout, B, T, C, d,
                                                                          purpose, layer);
    } else {
        size_t n = (size_t)B * T * C;
        encoder_bwd_fast<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "encoder_bwd_fast"), 256, 0, s>>>(dwte, dwpe, dout, inp, B * T, T, C, d,
                                                           purpose, layer);
    }
}
