/* Causal self-attention on the GPU: the GEMM formulation (attention_cuda.cu), flash attention
 * on mma.sync (attention_flash_cuda.cu) and on warpgroup MMA (attention_wgmma_cuda.cu, the
 * backward in attention_wgmma_bwd_cuda.cu and attention_wgmma_bwd_q128_cuda.cu). The math,
 * each path's determinism class and the chooser of the path are in attention.h; this header
 * gives the launchers and the GPU dtypes. Include from .cu files only. */
#ifndef DT_OPS_ATTENTION_CUDA_H
#define DT_OPS_ATTENTION_CUDA_H

#include "ops/cuda/cuda_common.cuh"
#include "ops/gemm/gemm_cuda.h"

extern "C" {
#include "ops/attention/attention.h"
#include "ops/attention/attention_plan.h"
#include "ops/dropout/dropout.h"
}

/* Scratch the attention needs for B, T, C, NH (bf16 elements): see dt_cu_attention_scratch. */
size_t dt_cu_attention_scratch(int B, int T, int C, int NH, int dropout);
/* out (B,T,C) bf16; att (B,NH,T,T) bf16 probabilities before dropout (saved for backward).
 * Through cuBLASLt batched GEMMs (q k^T, att v) and a row softmax owned by one warp. */
dt_status dt_cu_attention_fwd(dt_cu_blas *h, bf16 *out, bf16 *att, const bf16 *qkv, bf16 *scratch,
                              int B, int T, int C, int NH, const dt_dropout *drop,
                              uint32_t layer, cudaStream_t s);
/* dqkv (B,T,3C) bf16 overwritten. Every output element is one GEMM output element or one
 * row-owned softmax element: no atomics in either branch (the two branches coincide;
 * dQ is the GEMM dS k, reduced over keys inside one GEMM tile in a fixed order). */
dt_status dt_cu_attention_bwd(dt_cu_blas *h, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                              const bf16 *att, bf16 *scratch, int B, int T, int C, int NH,
                              const dt_dropout *drop, uint32_t layer, cudaStream_t s);

/* Flash-style attention (attention_flash_cuda.cu), for the shapes of dt_cu_flash_supported
 * (attention_plan.h): head size 64, T % 64 == 0, no attention dropout. lse (B,NH,T) fp32 saved for backward.
 * Backward: both branches of DT_OP_ATTENTION_BWD run the same kernels (they coincide): each
 * tile's dS (bf16) goes to the scratch and a dQ pass sums dS K over key blocks in order
 * (one owner per element, no atomics). scratch: dt_cu_flash_bwd_scratch bytes (about 214 MB
 * at B 16, NH 12, T 1024), contents on entry irrelevant. dqkv (B,T,3C) overwritten.
 * Fused bias gradient (the qkv linear's, which would otherwise be dt_cu_colsum of dqkv):
 * when dbias (fp32, 3C) is not NULL, dbias += the column sums of dqkv as stored (bf16
 * values, fp32 sums). The kernels write one partial per 64-row block and column into part
 * (dt_cu_flash_bias_parts(B, T) * 3C floats, required with dbias, contents on entry
 * irrelevant; row b T/64 + j for rows 64 j.. of batch b): rows g and g + 8 of a warp's 16,
 * an xor butterfly over g, then the block's 4 warps in order; dt_cu_parts_finish adds the
 * partials in its fixed order on fs (forked from s with dt_cu_fork when fs != s; `part`
 * must then stay untouched until fs is joined). Deterministic in both branches of
 * DT_OP_BIAS_BWD (one fixed order, no atomics). dbias NULL: part unused, no sums; dqkv has
 * the same bits either way. */
void dt_cu_flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s);
size_t dt_cu_flash_bwd_scratch(int B, int T, int C, int NH);
/* Rows of bias partials of dt_cu_flash_bwd: B T / 64 (each 3C floats). */
int dt_cu_flash_bias_parts(int B, int T);
void dt_cu_flash_bwd(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                     const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                     cudaStream_t fs);
/* dt_cu_flash_bwd with LD already in the scratch (dt_cu_flash_scratch_ld), from the output
 * projection's input-gradient GEMM with the DOT epilogue: no D kernel; out and lse are not
 * read. */
void dt_cu_flash_bwd_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                        int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs);
/* The flash forward on warpgroup MMA (attention_wgmma_cuda.cu, built for sm_90a only; the
 * model's forward on sm_90 GPUs): same contract as dt_cu_flash_fwd (dt_cu_flash_supported
 * shapes; out (B,T,C) bf16, lse (B,NH,T) fp32 natural log, causal; one owner per output
 * row walking key tiles in order: deterministic) and the same bits as dt_cu_flash_fwd (the
 * same products in the same k order and the same softmax code; tests/gpu/test_gpu_wgmma.cu
 * compares the bytes and times the configurations below). On a GPU other than sm_90 the launch fails (no kernel image), reported
 * by the next cudaGetLastError. */
void dt_cu_flash_fwd_wgmma(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s);
/* Benchmarks only (tests/gpu/test_gpu_wgmma.cu): later calls of dt_cu_flash_fwd_wgmma run
 * configuration kernel (0: the rule). The bits do not depend on it (tested). */
enum {
    DT_CU_WGFWD_RULE = 0,
    DT_CU_WGFWD_SERIAL, /* each product waited for at once (the reference schedule), two
                         * warpgroups a block where T % 128 == 0 */
    DT_CU_WGFWD_PIPE,   /* S of a tile overlaps P V of the one before, two warpgroups a block
                         * where T % 128 == 0 */
    DT_CU_WGFWD_PIPE_64, /* the pipelined kernel with one warpgroup a block, 3 blocks an SM */
    DT_CU_WGFWD_PONG     /* where T % 128 == 0 the second warpgroup a phase after the first
                          * (its softmax while the first one's products run); else
                          * DT_CU_WGFWD_PIPE: the rule */
};
void dt_cu_flash_fwd_wgmma_force(int kernel);
/* The flash backward on warpgroup MMA (attention_wgmma_bwd_cuda.cu, built for sm_90a only;
 * the model's backward on sm_90 GPUs): kernel A (dK, dV, the dS scratch) and the dQ pass on wgmma,
 * the D kernel shared. The contract of dt_cu_flash_bwd (same arguments, scratch, bias
 * partials and finish; deterministic: one owner per output element, fixed orders, no
 * atomics) and the same bits (the same products in the same k order, the same elementwise
 * code; tests/gpu/test_gpu_wgmma_bwd.cu compares the bytes). 0.270 ms against 0.352 at
 * B 16 NH 12 T 1024 on an H200 (docs/cuda.md). Kernel A and the dQ pass are launched with
 * programmatic dependent launch on s (they may start before the kernel before them ends).
 * On a GPU other than sm_90 the launch fails (no kernel image), reported by the next
 * cudaGetLastError. */
void dt_cu_flash_bwd_wgmma(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                           const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                           cudaStream_t fs);
/* dt_cu_flash_bwd_wgmma with LD already in the scratch (at dt_cu_flash_scratch_ld): written
 * by the output projection's input-gradient GEMM with the DOT epilogue (dt_cu_gemm_args.dot_ld),
 * so no D kernel runs and out, lse are not read. Kernel A is launched the ordinary way (the
 * dQ pass after it still with programmatic dependent launch). */
void dt_cu_flash_bwd_wgmma_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout,
                              const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs);
/* Where LD (B NH T / 2 float4: per pair of rows {lse log2(e) of both, D of both}) lies in a
 * flash backward scratch (its first bytes). */
float *dt_cu_flash_scratch_ld(void *scratch);
/* Benchmarks only (tests/gpu/test_gpu_wgmma_bwd.cu): later calls of dt_cu_flash_bwd_wgmma
 * run kernel A in configuration kernel_a and the dQ pass dq (0 for either: the rule). The
 * bits do not depend on either (tested). */
enum {
    DT_CU_WGBWD_A_RULE = 0,
    DT_CU_WGBWD_A_128, /* two warpgroups (128 keys) a block sharing each Q/dO fill, 1 block an
                        * SM (where T % 128 == 0) */
    DT_CU_WGBWD_A_64,  /* one warpgroup (64 keys) a block, 2 blocks an SM */
    DT_CU_WGBWD_A_Q128, /* 128-query tiles (attention_wgmma_bwd_q128_cuda.cu): two consumer
                         * warpgroups (128 keys) and a producer a block, 1 block an SM (where
                         * T % 128 == 0, else as DT_CU_WGBWD_A_Q128_K64): the rule */
    DT_CU_WGBWD_A_Q128_K64 /* 128-query tiles, one consumer warpgroup (64 keys) and a producer
                            * a block, 2 blocks an SM */
};
enum {
    DT_CU_WGBWD_DQ_RULE = 0,
    DT_CU_WGBWD_DQ_MMA,         /* dt_cu_flash_bwd's mma.sync dQ pass */
    DT_CU_WGBWD_DQ_WGMMA,       /* the dQ pass on wgmma, every kernel launched the ordinary way */
    DT_CU_WGBWD_DQ_WGMMA_PDL,   /* the same with kernel A and the dQ pass launched with
                                 * programmatic dependent launch (each may start while the
                                 * kernel before it ends, and waits for it before reading) */
    DT_CU_WGBWD_DQ_WGMMA_PDL_D, /* DT_CU_WGBWD_DQ_WGMMA_PDL and the D kernel launched that way */
    DT_CU_WGBWD_DQ_WGMMA_PDL_REV /* DT_CU_WGBWD_DQ_WGMMA_PDL with the dQ pass taking the head
                                  * groups last first (dt_flash_bwd_order_rev): the rule */
};
void dt_cu_flash_bwd_wgmma_force(int kernel_a, int dq);

#endif
