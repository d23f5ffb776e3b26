/* Causal multi-head self-attention on packed qkv.
 * Shapes: qkv (B,T,3C) holding [q | k | v] per token, head h in columns h*HS..h*HS+HS-1 of
 * each part; att (B,NH,T,T) softmax probabilities (upper triangle zero); out (B,T,C).
 * Scale 1/sqrt(HS). Attention dropout (drop != NULL, p > 0): out = dropout(att) @ v, the
 * mask of element (bh, t, j) drawn with purpose DT_RNG_DROPOUT_ATTN, layer `layer`, element
 * bh*T*T + t*T + j; att keeps the probabilities before dropout and backward recomputes the
 * mask. dqkv (B,T,3C) is overwritten by the backward.
 *
 * Paths (dt_attention_path), one chosen per call by dt_attention_choose:
 *  CPU forward — each (b,h) is owned by one task, blocked GEMMs that skip the masked half:
 *        deterministic by nature.
 *  DT_ATTENTION_HEADS (CPU backward, det branch of DT_OP_ATTENTION_BWD, and the fast one
 *        with enough heads) — one task per (b,h) computes dQ, dK, dV from the whole dS of
 *        that head: every output row has one owner and a fixed reduction order.
 *  DT_ATTENTION_KEYBLOCKS (CPU backward, fast branch, B*NH < 2 * threads) — the work of a
 *        head is split over key blocks, flash-attention style, and each key block adds its
 *        dQ contribution with `omp atomic`: unordered across key blocks, so it may race.
 *  DT_ATTENTION_GEMM (CUDA, attention_cuda.cu; every shape, attention dropout included) —
 *        batched cuBLASLt GEMMs (pinned in det mode: gemm.h) and a row softmax owned by one
 *        warp; dQ = dS k is one GEMM: no atomics, both branches coincide.
 *  DT_ATTENTION_FLASH (CUDA, attention_flash_cuda.cu; dt_cu_flash_supported shapes) —
 *        mma.sync flash kernels: one owner per output row walking its key (query) tiles in
 *        order; the backward writes dS to a scratch and a dQ pass sums dS K over key blocks
 *        in order: no atomics, both branches coincide.
 *  DT_ATTENTION_FLASH_WGMMA (CUDA on sm_90, attention_wgmma*_cuda.cu) — the flash kernels
 *        on warpgroup MMA: the same owners, the same products in the same k order and the
 *        same elementwise code (flash_cuda.cuh), so the bits of DT_ATTENTION_FLASH. */
#ifndef DT_OPS_ATTENTION_H
#define DT_OPS_ATTENTION_H

#include "ops/dropout/dropout.h"
#include "ops/op.h"

typedef enum dt_attention_path {
    DT_ATTENTION_HEADS = 0,
    DT_ATTENTION_KEYBLOCKS,
    DT_ATTENTION_GEMM,
    DT_ATTENTION_FLASH,
    DT_ATTENTION_FLASH_WGMMA
} dt_attention_path;
#define DT_ATTENTION_ON_CPU 0
/* The path of an attention call (attention_plan.c). cc DT_ATTENTION_ON_CPU: the CPU backward's
 * path (HEADS in det mode or with DT_OP_ATTENTION_BWD=det, else dt_attention_fast_cpu);
 * otherwise cc is the CUDA device's compute capability (90: H100/H200) and the answer the
 * path of both directions: the fastest of GEMM < FLASH < FLASH_WGMMA that the shape
 * (dt_cu_flash_supported) and the device allow, at most cap (the GPU model's DT_ATTENTION
 * setting: FLASH_WGMMA by default, FLASH for flash-mma, GEMM for gemm; ignored on the CPU). */
dt_attention_path dt_attention_choose(int B, int T, int C, int NH, const dt_dropout *drop, int cc,
                                      dt_attention_path cap);
/* What the CPU backward's fast branch runs: KEYBLOCKS when B*NH < 2 * omp_get_max_threads()
 * (too few heads to keep the threads busy), else HEADS (then the fastest). */
dt_attention_path dt_attention_fast_cpu(int B, int NH);

void dt_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *att,
                      const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd_det(float *dqkv, const float *dout, const float *qkv, const float *att,
                          int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
void dt_attention_bwd_fast(float *dqkv, const float *dout, const float *qkv, const float *att,
                           const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);
/* The key-block path of the fast variant, callable directly by tests (always splits). */
void dt_attention_bwd_keyblocks(float *dqkv, const float *dout, const float *qkv,
                                const float *att, const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer);

#endif
