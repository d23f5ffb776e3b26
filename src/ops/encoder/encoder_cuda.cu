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

/* det, token table: one thread owns (token, channel) and adds that token's positions in
 * position order (the bucket order of dt_cu_encoder_buckets): a fixed order per element. */
__global__ void encoder_bwd_wte_det(float *dwte, const bf16 *dout, const int *order,
                                    const int *seg_tok, const int *seg_start, int C, dt_dropout d,
                                    uint32_t purpose, uint32_t layer) {
    int s = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int j = seg_start[s]; j < seg_start[s + 1]; j++) {
        size_t i = (size_t)order[j] * C + c;
        float g = __bfloat162float(dout[i]);
        if (d.p > 0.0f) g *= dt_cu_drop_factor(d, purpose, layer, i);
        acc += g;
    }
    dwte[(size_t)seg_tok[s] * C + c] += acc;
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

void dt_cu_encoder_bwd(float *dwte, float *dwpe, const bf16 *dout, const int *inp,
                       const int *order, const int *seg_tok, const int *seg_start, int nseg,
                       int B, int T, int C, const dt_dropout *drop, uint32_t purpose,
                       uint32_t layer, cudaStream_t s) {
    dt_dropout d = dt_cu_drop_arg(drop);
    if (dt_encoder_choose() == DT_ENCODER_DET) {
        dim3 g((unsigned)nseg, dt_cu_div((size_t)C, 128));
        encoder_bwd_wte_det<<<dt_cu_noted(g, 128, 0, "encoder_bwd_wte_det"), 128, 0, s>>>(dwte, dout, order, seg_tok, seg_start, C, d, purpose, layer);
        encoder_bwd_wpe_det<<<dt_cu_noted(dt_cu_div((size_t)T * C, 256), 256, 0, "encoder_bwd_wpe_det"), 256, 0, s>>>(dwpe, dout, B, T, C, d,
                                                                          purpose, layer);
    } else {
        size_t n = (size_t)B * T * C;
        encoder_bwd_fast<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "encoder_bwd_fast"), 256, 0, s>>>(dwte, dwpe, dout, inp, B * T, T, C, d,
                                                           purpose, layer);
    }
}
