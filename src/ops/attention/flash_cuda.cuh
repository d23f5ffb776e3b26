/* Pieces shared by the flash-attention kernels on mma.sync (attention_flash_cuda.cu) and on
 * warpgroup MMA (attention_wgmma_cuda.cu, attention_wgmma_bwd_cuda.cu,
 * attention_wgmma_bwd_q128_cuda.cu): the elementwise math of both directions, written once
 * so that every kernel computes the same values in the same order (the forward's online
 * softmax step, the rescale of o, the packing of P; the backward's P^T and dS^T elements),
 * which is why the wgmma kernels give the mma.sync kernels' bits; the stores of the
 * backward's kernels A, which write the same dS scratch for the same dQ pass and the same
 * rows and bias partials (flash_store_kv); the programmatic dependent launch of the wgmma
 * backward's kernels (pdl_trigger, pdl_wait, dt_cu_launch_pdl).
 *
 * Accumulator of a 16x8 product, lane = 4g + t: c[0], c[1] at row g, columns 2t, 2t+1;
 * c[2], c[3] at row g + 8. A 16 x 64 warp tile is acc[8][4] (8 column groups of 8); a warp's
 * rows of a wgmma m64n64 accumulator d[32] are the same, d[4n + i] = acc[n][i]. */
#ifndef DT_OPS_FLASH_CUDA_CUH
#define DT_OPS_FLASH_CUDA_CUH

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/attention/flash_layout.h"
}

/* ---- elementwise math of every flash kernel ---------------------------------------------
 * A warp's 16 x 64 fp32 accumulator is 8 column groups of the m16n8 layout; element (n, i)
 * of lane 4g + t is row g + 8 (i >> 1), column 8n + 2t + (i & 1). mma.sync's kernels hold
 * it as acc[8][4] (acc[n][i]), the wgmma kernels as a warp's rows of an m64n64 accumulator
 * d[32] (d[4n + i]); flash_acc names the element either way, so the functions below are one
 * code for both. Every operation is an explicit _rn intrinsic (no contraction left to the
 * compiler), so every kernel that inlines them computes the same bits. */
static __device__ __forceinline__ float &flash_acc(float (*a)[4], int n, int i) { return a[n][i]; }
static __device__ __forceinline__ float &flash_acc(float *a, int n, int i) { return a[4 * n + i]; }
static __device__ __forceinline__ float flash_acc(const float (*a)[4], int n, int i) { return a[n][i]; }
static __device__ __forceinline__ float flash_acc(const float *a, int n, int i) { return a[4 * n + i]; }

/* 2^x (one MUFU op, no subnormal fix-up: a probability below 2^-126 flushes to 0, and it
 * weighs nothing against the row maximum's 1, nor moves a bf16 gradient). */
static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
/* Two floats as a bf16 pair (round to nearest), lo in the low half. */
static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* The forward's online softmax step on one key tile, S alone: s (raw Q K^T scores of the
 * thread's rows row, row + 8 x 64 keys) becomes the probabilities exp2(s sl2 - max sl2);
 * the running max m (raw units) and the per-thread partial row sums l are updated, and corr
 * is the factor of the change of the max, by which the output accumulator is rescaled
 * (flash_rescale) before this tile's P V adds to it. diag (a constant after inlining): the
 * diagonal tile, key column c visible to the local row r iff c <= r (row: this thread's
 * first local row). TREE: the maxima as a tree, 4 steps deep instead of 16 (a max is exact,
 * so any order gives the same value, a zero's sign aside, which no later value sees). */
template <bool TREE, typename A>
static __device__ __forceinline__ void flash_softmax(A s, float m[2], float l[2], float corr[2], int diag, int row,
                                                     int t, float sl2) {
    float mx[2] = {-INFINITY, -INFINITY};
    if (TREE) {
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (diag && n * 8 + 2 * t + (i & 1) > row + 8 * (i >> 1)) flash_acc(s, n, i) = -INFINITY;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float a[8]; /* a[n]: columns 8n + 2t, + 1 */
#pragma unroll
            for (int n = 0; n < 8; n++) a[n] = fmaxf(flash_acc(s, n, 2 * r), flash_acc(s, n, 2 * r + 1));
#pragma unroll
            for (int n = 0; n < 4; n++) a[n] = fmaxf(a[n], a[n + 4]);
            mx[r] = fmaxf(fmaxf(a[0], a[2]), fmaxf(a[1], a[3]));
        }
    } else {
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (diag && n * 8 + 2 * t + (i & 1) > row + 8 * (i >> 1)) flash_acc(s, n, i) = -INFINITY;
                mx[i >> 1] = fmaxf(mx[i >> 1], flash_acc(s, n, i));
            }
    }
    float ms[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        float mn = fmaxf(m[r], mx[r]); /* finite: key 0 is visible to every query */
        ms[r] = __fmul_rn(mn, sl2);
        corr[r] = ex2(__fsub_rn(__fmul_rn(m[r], sl2), ms[r])); /* 0 on the first tile (m = -inf) */
        m[r] = mn;
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) flash_acc(s, n, i) = ex2(__fmaf_rn(flash_acc(s, n, i), sl2, -ms[i >> 1]));
#pragma unroll
    for (int r = 0; r < 2; r++) { /* this tile's row sums: pairs, then a tree (short chains) */
        float ps[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            ps[q] = __fadd_rn(__fadd_rn(flash_acc(s, 2 * q, 2 * r), flash_acc(s, 2 * q, 2 * r + 1)),
                              __fadd_rn(flash_acc(s, 2 * q + 1, 2 * r), flash_acc(s, 2 * q + 1, 2 * r + 1)));
        l[r] = __fadd_rn(__fmul_rn(l[r], corr[r]), __fadd_rn(__fadd_rn(ps[0], ps[1]), __fadd_rn(ps[2], ps[3])));
    }
}

/* o (the output accumulator) rescaled by the change of the max (flash_softmax's corr). */
template <typename A>
static __device__ __forceinline__ void flash_rescale(A o, const float corr[2]) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) flash_acc(o, n, i) = __fmul_rn(flash_acc(o, n, i), corr[i >> 1]);
}

/* The accumulator's values as bf16 A fragments of the next product (no shuffles: the
 * m16n8k16 A fragment is the accumulator's layout), p[k] for columns 16k..16k+15: P for
 * P V (forward), P^T and dS^T for dV and dK (kernels A): the rounding every product and the
 * dS scratch use. */
template <typename A>
static __device__ __forceinline__ void flash_pack(uint32_t p[4][4], A s) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        p[k][0] = pack(flash_acc(s, 2 * k, 0), flash_acc(s, 2 * k, 1));         /* row g, columns 16k + 2t, +1 */
        p[k][1] = pack(flash_acc(s, 2 * k, 2), flash_acc(s, 2 * k, 3));         /* row g + 8 */
        p[k][2] = pack(flash_acc(s, 2 * k + 1, 0), flash_acc(s, 2 * k + 1, 1)); /* row g, columns 16k + 8 + 2t, +1 */
        p[k][3] = pack(flash_acc(s, 2 * k + 1, 2), flash_acc(s, 2 * k + 1, 3)); /* row g + 8 */
    }
}

/* The backward's elements (kernels A): P^T = exp2(S^T sl2 - lse2) (lse2: the query's lse
 * log2(e)), and dS^T = P^T (dP^T - D). */
static __device__ __forceinline__ float flash_bwd_p(float s, float sl2, float lse2) {
    return ex2(__fmaf_rn(s, sl2, -lse2));
}
static __device__ __forceinline__ float flash_bwd_ds(float p, float dp, float d) { return __fmul_rn(p, __fsub_rn(dp, d)); }

/* Programmatic dependent launch (sm_90): a kernel launched with dt_cu_launch_pdl may start
 * while the kernel before it on the stream is still running, once every block of that one
 * has called pdl_trigger (or exited); it must call pdl_wait before it reads anything the
 * earlier kernel writes (the wait returns when that kernel has completed and its writes are
 * visible). Both are no-ops in a kernel launched the ordinary way. Only the schedule
 * changes: what every thread computes, and from which values, stays the same. */
static __device__ __forceinline__ void pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;\n" ::); }
static __device__ __forceinline__ void pdl_wait(void) { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

/* Launches kernel k (grid, block, smem bytes, stream s) with programmatic stream
 * serialization on (see pdl_trigger, pdl_wait); where the runtime refuses that launch, the
 * ordinary one (the same results, no overlap), counted in dt_cu_pdl_refused
 * (attention_flash_cuda.cu; test_gpu_wgmma_bwd prints it). */
int dt_cu_pdl_refused(void);
void dt_cu_pdl_refused_add(void);
template <typename... P, typename... A>
static inline void dt_cu_launch_pdl(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                    A &&...args) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, k, args...) == cudaSuccess) return;
    (void)cudaGetLastError();
    dt_cu_pdl_refused_add();
    k<<<grid, block, smem, s>>>(static_cast<A &&>(args)...);
}

/* Writes acc * f (16 x 64 at rows row0.., columns col0..) as bf16 pairs to dst (row stride ld). */
static __device__ __forceinline__ void store_acc(bf16 *dst, size_t ld, const float acc[8][4], float f, int lane) {
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(g + 8 * h) * ld + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
}

/* store_acc, and the column sums of the bf16 values it stored over the warp's 16 rows (the
 * values of the written tensor, read back exactly): cs[n][j] for column 8n + 2t + j. Why
 * the order is fixed: a lane adds its rows g and g + 8, then an xor butterfly over g (lanes
 * 4, 8, 16 apart) adds pairs, pairs of pairs, halves; both partners of a step add the same
 * two operands, so every lane of a t ends with the same bits:
 * ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)), v_g = x[g] + x[g + 8]. */
static __device__ __forceinline__ void store_acc_colsum(bf16 *dst, size_t ld, const float acc[8][4], float f,
                                                        int lane, float cs[8][2]) {
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(acc[n][0] * f, acc[n][1] * f);
        __nv_bfloat162 hi = __floats2bfloat162_rn(acc[n][2] * f, acc[n][3] * f);
        *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)g * ld + n * 8 + 2 * t) = lo;
        *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(g + 8) * ld + n * 8 + 2 * t) = hi;
        float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
        cs[n][0] = __fadd_rn(a.x, b.x);
        cs[n][1] = __fadd_rn(a.y, b.y);
    }
#pragma unroll
    for (int m = 4; m < 32; m <<= 1)
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int j = 0; j < 2; j++) cs[n][j] = __fadd_rn(cs[n][j], __shfl_xor_sync(0xffffffffu, cs[n][j], m));
}

/* Lanes 0..3 (g = 0) put a warp's column sums (store_acc_colsum) at red[8n + 2t + j]. */
static __device__ __forceinline__ void put_colsum(float *red, const float cs[8][2], int lane) {
    if (lane >= 4) return;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        red[n * 8 + 2 * lane] = cs[n][0];
        red[n * 8 + 2 * lane + 1] = cs[n][1];
    }
}

/* The end of every kernel A (mma.sync and wgmma): the dK (times scale) and dV rows of the
 * key block kb of head h, batch b, from this warp's 16 x 64 accumulators, into dqkv (B, T,
 * 3C) and, when part is not NULL, their column sums as bias partials: store_acc_colsum per
 * warp, then the 4 warps of the warpgroup added in warp order through red ([warp][128]: dK
 * columns, then dV's; 2 KB of shared memory the warpgroup's threads no longer read), one
 * thread a column. before_red: the barrier (with any fence it needs) after which red may be
 * written; after_red: the one after which it may be read. */
template <typename Bar1, typename Bar2>
static __device__ __forceinline__ void flash_store_kv(bf16 *dqkv, float *part, const float dk[8][4],
                                                      const float dv[8][4], float *red, int b, int T, int kb, int h,
                                                      int C, float scale, Bar1 before_red, Bar2 after_red) {
    const int tid = (int)threadIdx.x, warp = (tid >> 5) & 3, lane = tid & 31, C3 = 3 * C;
    bf16 *out = dqkv + ((size_t)b * T + kb * 64 + warp * 16) * C3 + h * 64; /* 64 rows, head size 64 */
    if (!part) {
        store_acc(out + C, C3, dk, scale, lane);
        store_acc(out + 2 * C, C3, dv, 1.0f, lane);
        return;
    }
    float ck[8][2], cv[8][2];
    store_acc_colsum(out + C, C3, dk, scale, lane, ck);
    store_acc_colsum(out + 2 * C, C3, dv, 1.0f, lane, cv);
    before_red();
    put_colsum(red + warp * 128, ck, lane);
    put_colsum(red + warp * 128 + 64, cv, lane);
    after_red();
    const int c = tid & 127; /* one thread per column of the warpgroup's dK, dV */
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(red[c], red[128 + c]), red[256 + c]), red[384 + c]);
    part[((size_t)b * (T / 64) + kb) * C3 + (c < 64 ? C : 2 * C) + h * 64 + (c & 63)] = sum;
}

/* Transposes an 8 x 8 bf16 matrix held as one register per lane (lane 4g + t: row g,
 * columns 2t, 2t + 1). */
static __device__ __forceinline__ uint32_t movtrans(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* The dS scratch tile of a warp: w holds dS^T for keys 16w.. x the tile's 64 queries as
 * packed pairs in A-fragment order (a[k]: queries 16k..16k+15, the register A operand
 * layout of wgmma_cuda.cuh and the mma.sync one); its transposed 8 x 8 blocks are the dQ
 * pass's A fragments for (query group m, key group w), stored at dst[m * 128] (dst: the
 * tile's uint4 slot of warp w and this lane, [m][w][lane] x 8 bf16). */
static __device__ __forceinline__ void store_ds_tile(uint4 *dst, const uint32_t a[4][4]) {
#pragma unroll
    for (int m = 0; m < 4; m++)
        dst[m * 128] = make_uint4(movtrans(a[m][0]), movtrans(a[m][2]), movtrans(a[m][1]), movtrans(a[m][3]));
}

/* An L2 policy for data read once (the dS tiles): evicted first, so that they do not push
 * out the K tiles that 16 query blocks share. */
static __device__ __forceinline__ uint64_t l2_evict_first(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
static __device__ __forceinline__ void cp_async16_hint(void *dst, const void *src, uint64_t pol) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src), "l"(pol));
}

/* ---- the host side shared with attention_wgmma_bwd_cuda.cu (attention_flash_cuda.cu) ---- */
/* The scratch of dt_cu_flash_bwd: LD (B NH T 2 floats, 256-byte aligned end), then the dS
 * tiles (bf16, B NH dt_flash_ds_tiles(T / 64) tiles of 64 x 64). */
/* (dt_cu_flash_scratch_ld, LD's place: attention_cuda.h) */
bf16 *dt_cu_flash_scratch_ds(void *scratch, int B, int T, int NH);
/* The D kernel: LD <- {lse log2(e), D = rowsum(dO * O)} per pair of rows (see the file).
 * pdl: launched with dt_cu_launch_pdl. */
void dt_cu_flash_bwd_prep(float *LD, const bf16 *dout, const bf16 *out, const float *lse, int B, int T, int NH,
                          int pdl, cudaStream_t s);
/* The dQ pass over a dS scratch written in the layout above; part: dt_cu_flash_bwd's bias
 * partials of the dQ columns (NULL: none). Grid order from dt_flash_bwd_order with group
 * dt_flash_bwd_group(B NH). */
void dt_cu_flash_bwd_dq(bf16 *dqkv, float *part, const bf16 *dS, const bf16 *qkv, int B, int T, int NH,
                        cudaStream_t s);
/* Kernel A on 128-query tiles (attention_wgmma_bwd_q128_cuda.cu, sm_90a: a configuration of
 * dt_cu_flash_bwd_wgmma): dK, dV rows of dqkv, the dS scratch and, when part is not NULL,
 * the K and V columns' bias partials, from LD (the D kernel's) and the inputs; the bits of
 * the 64-query kernel A. M = 2 (two consumer warpgroups, 128 keys a block; needs T % 128
 * == 0, else M = 1 runs) or 1. Grid order from dt_flash_bwd_order with group
 * dt_flash_bwd_group(B NH). pdl: launched with dt_cu_launch_pdl (it may start while the D
 * kernel before it runs; it waits for it before anything else), else the ordinary way. */
void dt_cu_flash_bwd_kv_wgmma_q128(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv, const bf16 *dout,
                                   const float *LD, int B, int T, int NH, int M, int pdl, cudaStream_t s);

#endif
