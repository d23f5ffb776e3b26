/* Fused causal attention on the GPU, flash style (see attention.h, attention_cuda.h): the
 * forward's scores never go through device memory, nor through shared memory. Head size
 * 64, T a multiple of 64, no attention dropout (dt_cu_flash_supported, attention_plan.c); other shapes use
 * the GEMM formulation (attention_cuda.cu).
 *
 * Tiles of 64 rows (queries or keys) x 64 head channels, bf16 in shared memory with a
 * 144-byte row stride (ldmatrix rows land on distinct banks), filled by cp.async a few
 * tiles ahead of their use. Each warp owns 16-row slices of the block's rows; products are
 * bf16 tensor-core mma.sync m16n8k16 with fp32 accumulators held in registers; the
 * accumulator of one product is repacked in registers as the A operand of the next
 * (S -> P -> P V), so scores never leave the warp. Exponentials are ex2.approx with the
 * scale 1/sqrt(64) * log2(e) folded into one multiply.
 *
 * Forward: a block owns 128 query rows (T % 128 == 0; each of 4 warps two 16-row slices,
 * so every K/V fragment read feeds both) or 64 (otherwise); key tiles 0.. in order through
 * a 3-stage cp.async ring with one barrier a tile, online softmax (running max and
 * per-thread partial sums, fp32); the diagonal tiles are masked; writes out (bf16, through
 * shared memory in 16-byte stores) and lse = max + log(sum) (natural log, fp32) per row.
 * Both tilings run the same operations per row (the same bits). Heavy (late) query blocks
 * launch first.
 *
 * Backward (both branches of DT_OP_ATTENTION_BWD run it: no atomics, and faster than the
 * atomic dQ it replaced): a D kernel writes lse * log2(e) and D = rowsum(dO * O) per row;
 * kernel A owns a key block and walks the query blocks qb = kb.. in order (3-stage
 * cp.async pipeline, one barrier a tile), accumulating dK and dV in registers (one owner
 * per element: fixed order); it writes each tile's dS (bf16, the rounding its dK product
 * uses) to a scratch, already laid out as the A fragments of the dQ pass (the one place
 * scores reach device memory: 214 MB at B 16, NH 12, T 1024); the dQ pass owns two query
 * blocks (8 warps sharing each K tile) and sums dS K over key blocks 0..qb in order: one
 * owner per dQ element, a fixed order, one product a tile instead of recomputing three.
 * Both walk heads in groups (dt_flash_bwd_order, flash_layout.h) so that a group's tiles
 * are reused through L2.
 * Both also sum the columns of the bf16 rows they store (the qkv bias gradient, fused so
 * that dqkv is not read back): one partial per (64-row block, column), from registers
 * after the main loop, added by dt_cu_parts_finish in a fixed order.
 * Every reduction inside a kernel has a fixed order (k-steps in order inside mma; quad
 * sums by xor butterflies, which give the same bits on every lane). */
#include "ops/attention/attention_cuda.h"
#include "ops/reduce/reduce_cuda.h"
#include "ops/attention/flash_cuda.cuh"

#include <stdint.h>

#define FD 64   /* head size */
#define FB 64   /* rows of a query or key tile */
#define LDS 72  /* bf16 row stride in shared memory: 144 bytes */
#define NT 128  /* threads per block: 4 warps */
#define TILE (FB * LDS)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* ---- PTX wrappers ------------------------------------------------------------------------ */


static __device__ __forceinline__ void ldm_x4(uint32_t r[4], const bf16 *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
static __device__ __forceinline__ void ldm_x4_t(uint32_t r[4], const bf16 *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
/* c (16x8 fp32) += a (16x16 bf16, row) . b (16x8 bf16, col). */
static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- fragments (the accumulator layout, store_acc and the column sums: flash_cuda.cuh) ---- */

/* A operand fragments of a 16 x 64 row-major tile at `t` (row stride LDS): f[k] for
 * columns 16k..16k+15. */
static __device__ __forceinline__ void load_a(uint32_t f[4][4], const bf16 *t, int lane) {
#pragma unroll
    for (int k = 0; k < 4; k++) ldm_x4(f[k], t + (lane & 15) * LDS + k * 16 + (lane >> 4) * 8);
}

/* acc (16 x 64) = A (16 x 64, fragments) . Bt^T where Bt is a 64 x 64 row-major tile
 * (rows = output columns): S = Q K^T with Bt = K. */
static __device__ __forceinline__ void mm_nt(float acc[8][4], const uint32_t a[4][4], const bf16 *Bt, int lane) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldm_x4(b, Bt + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + k * 16 + ((lane >> 3) & 1) * 8);
            mma(acc[2 * np], a[k], b[0], b[1]);
            mma(acc[2 * np + 1], a[k], b[2], b[3]);
        }
}

/* ---- forward ----------------------------------------------------------------------------- *
 * A block owns M 64-row query blocks (M = 2 when T % 128 == 0, else 1): warp w owns the
 * 16-row m-tiles w, w + 4 (.., one per 64-row query block), so each K and V fragment read
 * from shared memory feeds M products and each tile fill serves 64 M query rows. K, V tiles
 * of 64 keys go through a 3-stage cp.async ring (two tiles in flight while one is used),
 * one barrier per tile. Every m-tile walks the key tiles 0.. up to its own diagonal tile in
 * order with the same operations in the same order for either M, so a row's out and lse do
 * not depend on M: both kernels give the same bits (tests/gpu/test_gpu_ops.cu and
 * bench_attention.cu compare them). Heavy (late) query blocks of every head launch first.
 * The kernel can also take the heads in groups (heavy first inside a group, so a group's K
 * and V stay in L2); on an H200 at B 16 NH 12 T 1024, groups of 8..96 heads were slower
 * than one group of all heads (0.110 ms at 32, 0.107 at 192: L2 misses are not the
 * limit), so the launcher passes all heads. */

#define FWD_STAGES 3
#define FWD_SMEM(M) (((M) + 2 * FWD_STAGES) * TILE * 2) /* Q (M tiles), then K, V per stage */

/* cp_tile with the trip count spelled out (NT = 128 threads: rows tid / 8 + 16 u, u < 4,
 * 16-byte piece tid % 8), so that the copy is straight-line code. */
static __device__ __forceinline__ void fwd_cp_tile(bf16 *dst, const bf16 *src, size_t ld) {
    int r = threadIdx.x >> 3, v = (threadIdx.x & 7) * 8;
#pragma unroll
    for (int u = 0; u < 4; u++) cp_async16(dst + (r + 16 * u) * LDS + v, src + (size_t)(r + 16 * u) * ld + v);
}

/* Issues cp.async for key tile kt's K and V (64 rows each) into a stage (K, then V). */
static __device__ __forceinline__ void fwd_load_kv(bf16 *stage, const bf16 *base, int kt, int C, int C3) {
    fwd_cp_tile(stage, base + C + (size_t)kt * FB * C3, C3);
    fwd_cp_tile(stage + TILE, base + 2 * C + (size_t)kt * FB * C3, C3);
}

/* S (16 x 64 per m-tile) = Q K^T for the m-tiles j >= first (constant after inlining); each
 * K fragment is loaded once for all of them. */
template <int M>
static __device__ __forceinline__ void fwd_scores(float s[M][8][4], const uint32_t qf[M][4][4], const bf16 *Kt,
                                                  int first, int lane) {
#pragma unroll
    for (int j = 0; j < M; j++)
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[j][n][i] = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldm_x4(b, Kt + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + k * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int j = 0; j < M; j++)
                if (j >= first) {
                    mma(s[j][2 * np], qf[j][k], b[0], b[1]);
                    mma(s[j][2 * np + 1], qf[j][k], b[2], b[3]);
                }
        }
}

/* P (fp32, 16 x 64 per m-tile) as bf16 A fragments: p[j][k] for keys 16k..16k+15. */
template <int M>
static __device__ __forceinline__ void fwd_pack(uint32_t p[M][4][4], const float s[M][8][4]) {
#pragma unroll
    for (int j = 0; j < M; j++) flash_pack(p[j], s[j]);
}

/* O += P V for the m-tiles j >= first; each V fragment is loaded once for all of them. */
template <int M>
static __device__ __forceinline__ void fwd_pv(float o[M][8][4], const uint32_t p[M][4][4], const bf16 *Vt, int first,
                                              int lane) {
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldm_x4_t(b, Vt + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + np * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < M; j++)
                if (j >= first) {
                    mma(o[j][2 * np], p[j][k], b[0], b[1]);
                    mma(o[j][2 * np + 1], p[j][k], b[2], b[3]);
                }
        }
}

/* One key tile (K, V at Kt, Kt + TILE) for a warp's M m-tiles: m-tiles j < first skip it
 * (all its keys follow all their queries), m-tile diag (-1: none) is on the diagonal; both
 * constants after inlining. */
template <int M>
static __device__ __forceinline__ void fwd_tile(float o[M][8][4], float m[M][2], float l[M][2],
                                                const uint32_t qf[M][4][4], const bf16 *Kt, int first, int diag,
                                                int row, int lane, float sl2) {
    float s[M][8][4];
    fwd_scores<M>(s, qf, Kt, first, lane);
#pragma unroll
    for (int j = 0; j < M; j++)
        if (j >= first) { /* the online softmax step, then o rescaled by its change of the max */
            float corr[2];
            flash_softmax<false>(s[j], m[j], l[j], corr, j == diag, row, lane & 3, sl2);
            flash_rescale(o[j], corr);
        }
    uint32_t p[M][4][4];
    fwd_pack<M>(p, s);
    fwd_pv<M>(o, p, Kt + TILE, first, lane);
}

/* Grid (B NH T / (64 M)), NT threads, FWD_SMEM(M) bytes of dynamic shared memory. Block i
 * owns head bh, query rows 64 j0 .. 64 (j0 + M) - 1: heads in groups of hg, inside a group
 * the heavy (late) query blocks of all its heads first. Writes out (B, T, C) bf16 and lse
 * (B NH, T) fp32. */
template <int M>
__global__ void __launch_bounds__(NT, M == 1 ? 3 : 2) flash_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, int T,
                                                                       int NH, int hg, float sl2) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *KV = Qs + M * TILE; /* stage i: K at KV + 2 i TILE, V after it */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int nqb = T / (M * FB), h0 = (int)blockIdx.x / (hg * nqb) * hg, gs = min(hg, (int)gridDim.x / nqb - h0);
    int r = (int)blockIdx.x - h0 * nqb, bh = h0 + r % gs, b = bh / NH, h = bh % NH;
    int j0 = (nqb - 1 - r / gs) * M, nk = j0 + M; /* key tiles 0..nk-1 */
    int C = NH * FD, C3 = 3 * C, row = warp * 16 + g;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
#pragma unroll
    for (int j = 0; j < M; j++) fwd_cp_tile(Qs + j * TILE, base + (size_t)(j0 + j) * FB * C3, C3);
    fwd_load_kv(KV, base, 0, C, C3);
    cp_commit();
    if (nk > 1) fwd_load_kv(KV + 2 * TILE, base, 1, C, C3);
    cp_commit();
    uint32_t qf[M][4][4];
    float o[M][8][4], m[M][2], l[M][2];
#pragma unroll
    for (int j = 0; j < M; j++) {
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) o[j][n][i] = 0.0f;
        m[j][0] = m[j][1] = -INFINITY;
        l[j][0] = l[j][1] = 0.0f;
    }
    int st = 0; /* stage of tile kt */
    for (int kt = 0; kt < nk; kt++) {
        cp_wait1(); /* this thread's copies of tile kt (and of Q) are done, tile kt + 1 may be in flight */
        __syncthreads(); /* everyone's are; everyone is done with tile kt - 1, whose stage is refilled next */
        if (kt + 2 < nk) fwd_load_kv(KV + (st == 0 ? 2 : st - 1) * 2 * TILE, base, kt + 2, C, C3);
        cp_commit(); /* possibly empty: one group per tile keeps the wait count fixed */
        if (kt == 0)
#pragma unroll
            for (int j = 0; j < M; j++) load_a(qf[j], Qs + j * TILE + warp * 16 * LDS, lane);
        const bf16 *Kt = KV + st * 2 * TILE;
        if (kt < j0) fwd_tile<M>(o, m, l, qf, Kt, 0, -1, row, lane, sl2);
        else if (M == 1 || kt == j0) fwd_tile<M>(o, m, l, qf, Kt, 0, 0, row, lane, sl2);
        else fwd_tile<M>(o, m, l, qf, Kt, 1, 1, row, lane, sl2); /* M == 2: the last tile */
        st = st == FWD_STAGES - 1 ? 0 : st + 1;
    }
    cp_wait0();
    /* Row sums by xor butterfly (the same bits on the 4 lanes of a row); the bf16 rows go
     * to the warp's own rows of Qs (only this warp read them), then out in 16-byte pieces,
     * a whole 128-byte row per quarter warp. */
#pragma unroll
    for (int j = 0; j < M; j++)
#pragma unroll
        for (int r2 = 0; r2 < 2; r2++) {
            float lr = l[j][r2];
            lr = __fadd_rn(lr, __shfl_xor_sync(0xffffffffu, lr, 1));
            lr = __fadd_rn(lr, __shfl_xor_sync(0xffffffffu, lr, 2));
            float inv = __frcp_rn(lr);
            bf16 *srow = Qs + j * TILE + (row + 8 * r2) * LDS + 2 * t;
#pragma unroll
            for (int n = 0; n < 8; n++)
                *reinterpret_cast<__nv_bfloat162 *>(srow + n * 8) =
                    __floats2bfloat162_rn(__fmul_rn(o[j][n][2 * r2], inv), __fmul_rn(o[j][n][2 * r2 + 1], inv));
            if (t == 0)
                lse[(size_t)bh * T + (j0 + j) * FB + row + 8 * r2] =
                    __fmul_rn(__fadd_rn(__fmul_rn(m[j][r2], sl2), log2f(lr)), LN2);
        }
    __syncwarp();
#pragma unroll
    for (int c = lane; c < M * 16 * 8; c += 32) {
        int j = c >> 7, rr = warp * 16 + ((c >> 3) & 15), v = c & 7;
        *reinterpret_cast<uint4 *>(out + ((size_t)b * T + (j0 + j) * FB + rr) * C + h * FD + v * 8) =
            *reinterpret_cast<const uint4 *>(Qs + j * TILE + rr * LDS + v * 8);
    }
}

/* ---- backward ---------------------------------------------------------------------------- */

#define BST 3             /* pipeline stages of the backward kernels (one barrier a tile) */
#define DS_TILE (FB * FB) /* bf16 elements of one dS tile in the scratch */

/* cp.async of a 64 x 64 bf16 tile (source rows ld elements apart) by NTH threads. */
template <int NTH>
static __device__ __forceinline__ void cp_tile_by(bf16 *dst, const bf16 *src, size_t ld) {
#pragma unroll
    for (int j = 0; j < FB * 8 / NTH; j++) {
        int i = threadIdx.x + j * NTH, r = i >> 3, v = i & 7;
        cp_async16(dst + r * LDS + v * 8, src + (size_t)r * ld + v * 8);
    }
}
/* acc (16 x 64) += A . Bm with A (16 x 64) given as packed bf16 pairs pk[n][h] (row g + 8h,
 * columns 8n + 2t, 2t + 1: the accumulator layout, packed) and Bm a 64 x 64 row-major tile
 * whose rows are the reduction index. */
static __device__ __forceinline__ void mm_pk(float acc[8][4], const uint32_t pk[8][2], const bf16 *Bm, int lane) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t a[4] = {pk[2 * k][0], pk[2 * k][1], pk[2 * k + 1][0], pk[2 * k + 1][1]};
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldm_x4_t(b, Bm + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + np * 16 + (lane >> 4) * 8);
            mma(acc[2 * np], a, b[0], b[1]);
            mma(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}
/* LD (B*NH*T/2 float4): for each pair of rows 2j, 2j + 1 of a head, {lse * log2(e) of both,
 * D of both}, D = rowsum(dO * O). A 256-thread block owns 64 rows: 8 lanes a row (8
 * channels each, 16-byte loads, all four issued before the sums), rows i and i + 32; an
 * xor butterfly over the 8 lanes (the same bits on each). B NH T % 64 == 0. (4 or 8 rows
 * a thread, fewer blocks: 0.0187 and 0.0216 ms against 0.0181 at B 16 NH 12 T 1024 on the
 * H200.) Launched with dt_cu_launch_pdl it waits for the kernel before it (pdl_wait)
 * before reading anything; it lets the kernel after it (the wgmma kernel A, launched that
 * way) start early: that one waits for LD. */
__global__ void flash_dot_kernel(float *LD, const bf16 *dout, const bf16 *out, const float *lse, int B, int T, int NH) {
    pdl_wait();
    pdl_trigger();
    int part = threadIdx.x & 7, C = NH * FD;
    int r0 = (int)(blockIdx.x * 64 + (threadIdx.x >> 3)), rows[2] = {r0, r0 + 32};
    uint4 x[2], y[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int t = rows[k] % T, bh = rows[k] / T;
        size_t off = ((size_t)(bh / NH) * T + t) * C + (bh % NH) * FD + part * 8;
        x[k] = *reinterpret_cast<const uint4 *>(dout + off);
        y[k] = *reinterpret_cast<const uint4 *>(out + off);
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const __nv_bfloat162 *xp = reinterpret_cast<const __nv_bfloat162 *>(&x[k]);
        const __nv_bfloat162 *yp = reinterpret_cast<const __nv_bfloat162 *>(&y[k]);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 a = __bfloat1622float2(xp[i]), c = __bfloat1622float2(yp[i]);
            s += a.x * c.x;
            s += a.y * c.y;
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        s += __shfl_xor_sync(0xffffffffu, s, 4);
        if (part == 0) {
            int row = rows[k], t = row % T;
            float *p = LD + dt_flash_ld_at(row / T, t, T);
            p[0] = lse[row] * DT_FLASH_LD_LOG2E;
            p[2] = s;
        }
    }
}

/* One (key block, query block) tile of kernel A for one warp: its 16 keys (local rows
 * 16 warp + g, + 8) x the 64 queries of Qc / dOc. S^T and dP^T from registers kf, vf;
 * P^T = exp(S^T scale - lse) (zero above the diagonal when DIAG); dS^T = P^T (dP^T - D);
 * dV += P^T dO, dK += dS^T Q. Leaves dS^T packed as bf16 in ds (the rounding the dK
 * product uses) for the dQ pass. */
template <bool DIAG>
static __device__ __forceinline__ void kv_tile(float dk[8][4], float dv[8][4], uint32_t ds[8][2],
                                               const uint32_t kf[4][4], const uint32_t vf[4][4],
                                               const bf16 *Qc, const bf16 *dOc, const float *LDc, float sl2,
                                               int warp, int lane) {
    int g = lane >> 2, t = lane & 3;
    float s[8][4], dp[8][4];
    mm_nt(s, kf, Qc, lane);   /* S^T = K Q^T */
    mm_nt(dp, vf, dOc, lane); /* dP^T = V dO^T */
    uint32_t p[8][2];
#pragma unroll
    for (int n = 0; n < 8; n++) {
        float4 ld = *reinterpret_cast<const float4 *>(LDc + (n * 4 + t) * 4); /* queries 8n + 2t, + 1 */
        float l2[2] = {ld.x, ld.y}, dd[2] = {ld.z, ld.w}, pv[4], sv[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float v = flash_bwd_p(s[n][i], sl2, l2[i & 1]);
            if (DIAG && n * 8 + 2 * t + (i & 1) < warp * 16 + g + 8 * (i >> 1)) v = 0.0f;
            pv[i] = v;
            sv[i] = flash_bwd_ds(v, dp[n][i], dd[i & 1]);
        }
        p[n][0] = pack(pv[0], pv[1]);
        p[n][1] = pack(pv[2], pv[3]);
        ds[n][0] = pack(sv[0], sv[1]);
        ds[n][1] = pack(sv[2], sv[3]);
    }
    mm_pk(dv, p, dOc, lane); /* dV += P^T dO */
    mm_pk(dk, ds, Qc, lane); /* dK += dS^T Q (scaled at the end) */
}

/* Shared memory of kernel A: K, V, then Q, dO and LD (128 floats) in BST stages. */
#define BWDA_SMEM ((2 + 2 * BST) * TILE * 2 + BST * 2 * FB * 4)

/* Kernel A: a key block kb (rank kb in dt_flash_bwd_order: the most work first); walks query blocks
 * kb.. in order; dK, dV in registers (one owner, a fixed order). Each tile's dS goes to
 * the scratch dS (bf16; the tiles of a head in lower-triangular order, qb(qb+1)/2 + kb)
 * laid out as the A fragments of the dQ pass, [query group m][key group w][lane] x 8 bf16,
 * so that both sides move 16 bytes a lane and the dQ pass needs no shuffles.
 * part (NULL: none): the column sums of the dK and dV rows it stores (64 rows x 64
 * channels each, the bf16 values) go to row b nqb + kb of part (B T / 64 rows of 3C
 * floats), columns C + 64 h.. and 2C + 64 h..: warp sums (store_acc_colsum), then the 4
 * warps added in warp order by one thread per column. Once per block, after the loop. */
__global__ void __launch_bounds__(NT, 2) flash_bwd_kv_kernel(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv,
                                                             const bf16 *dout, const float *LD, int T, int NH,
                                                             float scale, int grp) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + TILE, *Qs = Vs + TILE, *dOs = Qs + BST * TILE;
    float *LDs = (float *)(dOs + BST * TILE);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int nqb = T / FB, bh, kb;
    dt_flash_bwd_order((int)blockIdx.x, grp, nqb, &bh, &kb);
    int b = bh / NH, h = bh % NH, C = NH * FD, C3 = 3 * C, nit = nqb - kb;
    float sl2 = scale * LOG2E;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    const bf16 *dbase = dout + (size_t)b * T * C + h * FD;
    const float *ldbase = LD + (size_t)bh * 2 * T;
    auto load = [&](int st, int qb) { /* stage st <- query block qb: Q, dO and 128 floats of LD */
        cp_tile_by<NT>(Qs + st * TILE, base + (size_t)qb * FB * C3, C3);
        cp_tile_by<NT>(dOs + st * TILE, dbase + (size_t)qb * FB * C, C);
        if (threadIdx.x < 32) cp_async16(LDs + st * 2 * FB + threadIdx.x * 4, ldbase + qb * 2 * FB + threadIdx.x * 4);
    };
    cp_tile_by<NT>(Ks, base + C + (size_t)kb * FB * C3, C3);
    cp_tile_by<NT>(Vs, base + 2 * C + (size_t)kb * FB * C3, C3);
    load(0, kb);
    cp_commit();
    if (nit > 1) load(1, kb + 1);
    cp_commit();
    uint32_t kf[4][4], vf[4][4];
    float dk[8][4], dv[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk[n][i] = dv[n][i] = 0.0f;
    /* this warp's 16-byte slot in the dS tiles of this key block: (qb(qb+1)/2 + kb) tiles on */
    uint4 *dsg = reinterpret_cast<uint4 *>(dS + (size_t)bh * (nqb * (nqb + 1) / 2) * DS_TILE) + warp * 32 + lane;
    int st = 0;
    for (int qb = kb; qb < nqb; qb++) {
        /* one barrier a tile: after it, tile qb has landed for every thread, and every
         * thread is done with tile qb - 1, whose stage the loads for qb + 2 reuse */
        cp_wait1();
        __syncthreads();
        if (qb + 2 < nqb) load(st == 0 ? BST - 1 : st - 1, qb + 2);
        cp_commit();
        if (qb == kb) {
            load_a(kf, Ks + warp * 16 * LDS, lane);
            load_a(vf, Vs + warp * 16 * LDS, lane);
        }
        const bf16 *Qc = Qs + st * TILE, *dOc = dOs + st * TILE;
        const float *LDc = LDs + st * 2 * FB;
        uint32_t ds[8][2];
        if (qb == kb)
            kv_tile<true>(dk, dv, ds, kf, vf, Qc, dOc, LDc, sl2, warp, lane);
        else
            kv_tile<false>(dk, dv, ds, kf, vf, Qc, dOc, LDc, sl2, warp, lane);
        /* warp w holds dS^T for keys 16w.. x all queries; its transposed 8 x 8 blocks are
         * the dQ pass's A fragments for (query group m, key group w) */
        uint4 *dst = dsg + (size_t)(qb * (qb + 1) / 2 + kb) * (DS_TILE / 8);
#pragma unroll
        for (int m = 0; m < 4; m++)
            dst[m * 128] = make_uint4(movtrans(ds[2 * m][0]), movtrans(ds[2 * m + 1][0]), movtrans(ds[2 * m][1]),
                                      movtrans(ds[2 * m + 1][1]));
        st = st == BST - 1 ? 0 : st + 1;
    }
    cp_wait0();
    /* red over Ks: every warp is done with it (read at the first tile only) after a barrier */
    flash_store_kv(dqkv, part, dk, dv, reinterpret_cast<float *>(Ks), b, T, kb, h, C, scale,
                   [] { __syncthreads(); }, [] { __syncthreads(); });
}

#define DQ_NT 256                                        /* 8 warps: two query blocks */
#define BWDQ_SMEM (BST * (TILE + 2 * DS_TILE) * 2) /* K and two dS tiles per stage */

/* dQ pass: query blocks 2j and 2j + 1 of a head (pair rank nqb/2 - 1 - j in dt_flash_bwd_order),
 * warps 0-3 the first, 4-7 the second, sharing each K tile (half the K traffic through
 * L2). dQ = scale * sum over key blocks 0..qb in order of dS[qb, kb] K[kb] (one product a
 * tile, no exponentials) in registers: one owner per dQ element, a fixed order, no
 * atomics. The dS tiles arrive as ready-made A fragments.
 * part (NULL: none): as kernel A, the column sums of each of its query blocks' dQ rows
 * (warp sums, then warps 0-3 or 4-7 in order) to row b nqb + qb, columns 64 h... */
__global__ void __launch_bounds__(DQ_NT) flash_bwd_dq_kernel(bf16 *dqkv, float *part, const bf16 *dS, const bf16 *qkv,
                                                             int T, int NH, float scale, int grp) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Ss = Ks + BST * TILE; /* stage st, block half: Ss + (2 st + half) DS_TILE */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = warp >> 2, w = warp & 3;
    int nqb = T / FB, npair = (nqb + 1) / 2, bh, rank;
    dt_flash_bwd_order((int)blockIdx.x, grp, npair, &bh, &rank);
    int q0 = 2 * (npair - 1 - rank), last = q0 + 1 < nqb ? q0 + 1 : q0, qb = q0 + half;
    int b = bh / NH, h = bh % NH, C = NH * FD, C3 = 3 * C;
    const bf16 *kbase = qkv + (size_t)b * T * C3 + C + h * FD;
    const bf16 *sbase = dS + (size_t)bh * (nqb * (nqb + 1) / 2) * DS_TILE;
    uint64_t once = l2_evict_first();
    auto load = [&](int st, int kb) { /* stage st <- key block kb: K and the dS tiles of q0, q0 + 1 */
        cp_tile_by<DQ_NT>(Ks + st * TILE, kbase + (size_t)kb * FB * C3, C3);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            int q = q0 + hh;
            if (kb > q || q >= nqb) continue;
            const bf16 *src = sbase + (size_t)(q * (q + 1) / 2 + kb) * DS_TILE;
#pragma unroll
            for (int j = 0; j < DS_TILE / 8 / DQ_NT; j++) {
                int i = (threadIdx.x + j * DQ_NT) * 8;
                cp_async16_hint(Ss + (2 * st + hh) * DS_TILE + i, src + i, once);
            }
        }
    };
    load(0, 0);
    cp_commit();
    if (last > 0) load(1, 1);
    cp_commit();
    float acc[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
    int st = 0;
    for (int kb = 0; kb <= last; kb++) {
        cp_wait1();
        __syncthreads(); /* as in kernel A: one barrier a tile */
        if (kb + 2 <= last) load(st == 0 ? BST - 1 : st - 1, kb + 2);
        cp_commit();
        if (kb <= qb && qb < nqb) {
            const bf16 *Kc = Ks + st * TILE;
            const uint4 *a4 = reinterpret_cast<const uint4 *>(Ss + (2 * st + half) * DS_TILE) + w * 128 + lane;
#pragma unroll
            for (int k = 0; k < 4; k++) { /* keys 16k.. */
                uint4 av = a4[k * 32];
                uint32_t a[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t bb[4];
                    ldm_x4_t(bb, Kc + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + np * 16 + (lane >> 4) * 8);
                    mma(acc[2 * np], a, bb[0], bb[1]);
                    mma(acc[2 * np + 1], a, bb[2], bb[3]);
                }
            }
        }
        st = st == BST - 1 ? 0 : st + 1;
    }
    cp_wait0();
    if (!part) {
        if (qb < nqb) store_acc(dqkv + ((size_t)b * T + qb * FB + w * 16) * C3 + h * FD, C3, acc, scale, lane);
        return;
    }
    float cq[8][2];
    if (qb < nqb) /* warp-uniform: the butterfly's shuffles see all 32 lanes */
        store_acc_colsum(dqkv + ((size_t)b * T + qb * FB + w * 16) * C3 + h * FD, C3, acc, scale, lane, cq);
    float *red = reinterpret_cast<float *>(Ks); /* [warp][64] */
    __syncthreads(); /* every warp is done with the K tiles */
    if (qb < nqb) put_colsum(red + warp * 64, cq, lane);
    __syncthreads();
    int hh = threadIdx.x >> 6, c = threadIdx.x & 63, q = q0 + hh; /* threads 0..127: (block half, column) */
    if (threadIdx.x < 128 && q < nqb) {
        const float *r = red + hh * 256 + c;
        part[((size_t)b * nqb + q) * C3 + h * FD + c] = __fadd_rn(__fadd_rn(__fadd_rn(r[0], r[64]), r[128]), r[192]);
    }
}

static int attrs_set;
static void set_attrs(void) {
    if (attrs_set) return;
    cudaFuncSetAttribute(flash_bwd_kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDA_SMEM);
    cudaFuncSetAttribute(flash_bwd_dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDQ_SMEM);
    attrs_set = 1;
}

/* The forward's two kernels need more than 48 KB of shared memory: raised once. */
static int fwd_attrs_set;

void dt_cu_flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    if (!fwd_attrs_set) {
        cudaFuncSetAttribute(flash_fwd_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, FWD_SMEM(1));
        cudaFuncSetAttribute(flash_fwd_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, FWD_SMEM(2));
        fwd_attrs_set = 1;
    }
    float sl2 = LOG2E / sqrtf((float)FD);
    if (T % (2 * FB) == 0) {
        unsigned g = (unsigned)(B * NH * (T / (2 * FB)));
        flash_fwd_kernel<2><<<dt_cu_noted(g, NT, FWD_SMEM(2), "flash_fwd_kernel<2>"), NT, FWD_SMEM(2), s>>>(
            out, lse, qkv, T, NH, B * NH, sl2);
    } else {
        unsigned g = (unsigned)(B * NH * (T / FB));
        flash_fwd_kernel<1><<<dt_cu_noted(g, NT, FWD_SMEM(1), "flash_fwd_kernel<1>"), NT, FWD_SMEM(1), s>>>(
            out, lse, qkv, T, NH, B * NH, sl2);
    }
    (void)C;
}

/* Scratch: LD (B NH T 2 floats, 256-byte aligned end), then the dS tiles (bf16, B NH
 * nqb(nqb+1)/2 tiles of 64 x 64). */
static size_t ld_bytes(int B, int T, int NH) { return ((size_t)B * NH * T * 2 * sizeof(float) + 255) & ~(size_t)255; }

size_t dt_cu_flash_bwd_scratch(int B, int T, int C, int NH) {
    (void)C;
    return ld_bytes(B, T, NH) + (size_t)B * NH * dt_flash_ds_tiles(T / FB) * DS_TILE * sizeof(bf16);
}

int dt_cu_flash_bias_parts(int B, int T) { return B * (T / FB); }

float *dt_cu_flash_scratch_ld(void *scratch) { return (float *)scratch; }
bf16 *dt_cu_flash_scratch_ds(void *scratch, int B, int T, int NH) {
    return (bf16 *)((unsigned char *)scratch + ld_bytes(B, T, NH));
}

static int pdl_refused;
int dt_cu_pdl_refused(void) { return pdl_refused; }
void dt_cu_pdl_refused_add(void) { pdl_refused++; }

void dt_cu_flash_bwd_prep(float *LD, const bf16 *dout, const bf16 *out, const float *lse, int B, int T, int NH,
                          int pdl, cudaStream_t s) {
    const dim3 g = dt_cu_noted((unsigned)(B * NH * T / 64), 256, 0, "flash_dot_kernel");
    if (pdl) dt_cu_launch_pdl(flash_dot_kernel, g, 256, 0, s, LD, dout, out, lse, B, T, NH);
    else flash_dot_kernel<<<g, 256, 0, s>>>(LD, dout, out, lse, B, T, NH);
}

void dt_cu_flash_bwd_dq(bf16 *dqkv, float *part, const bf16 *dS, const bf16 *qkv, int B, int T, int NH,
                        cudaStream_t s) {
    set_attrs();
    int BH = B * NH;
    dim3 gq((unsigned)(BH * ((T / FB + 1) / 2))); /* query block pairs */
    flash_bwd_dq_kernel<<<dt_cu_noted(gq, DQ_NT, BWDQ_SMEM, "flash_bwd_dq_kernel"), DQ_NT, BWDQ_SMEM, s>>>(
        dqkv, part, dS, qkv, T, NH, 1.0f / sqrtf((float)FD), dt_flash_bwd_group(BH));
}

/* Both branches of DT_OP_ATTENTION_BWD run this (they coincide): it is the faster one
 * (bench_attention), and it has no atomics. The bias sums take the fixed-order finish in
 * both branches of DT_OP_BIAS_BWD too: the kernels have one path, so the whole op is
 * deterministic in either mode (the finish runs on fs, off the critical path). */
static void bwd(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                const bf16 *out, const float *lse, int ld_given, int B, int T, int C, int NH, cudaStream_t s,
                cudaStream_t fs) {
    set_attrs();
    float scale = 1.0f / sqrtf((float)FD);
    float *LD = dt_cu_flash_scratch_ld(scratch);
    bf16 *dS = dt_cu_flash_scratch_ds(scratch, B, T, NH);
    int BH = B * NH;
    if (!ld_given) dt_cu_flash_bwd_prep(LD, dout, out, lse, B, T, NH, 0, s);
    dim3 g((unsigned)(BH * (T / FB)));
    float *bp = dbias ? part : NULL;
    flash_bwd_kv_kernel<<<dt_cu_noted(g, NT, BWDA_SMEM, "flash_bwd_kv_kernel"), NT, BWDA_SMEM, s>>>(
        dqkv, dS, bp, qkv, dout, LD, T, NH, scale, dt_flash_bwd_group(BH));
    dt_cu_flash_bwd_dq(dqkv, bp, dS, qkv, B, T, NH, s);
    if (dbias) { /* every (64-row block, column) partial was written once: by kernel A (K, V) or the dQ pass */
        dt_cu_fork(s, fs);
        dt_cu_parts_finish(dbias, NULL, part, dt_cu_flash_bias_parts(B, T), 3 * C, fs);
    }
}

void dt_cu_flash_bwd(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                     const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                     cudaStream_t fs) {
    bwd(dqkv, dbias, part, scratch, dout, qkv, out, lse, 0, B, T, C, NH, s, fs);
}

void dt_cu_flash_bwd_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                        int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs) {
    bwd(dqkv, dbias, part, scratch, dout, qkv, NULL, NULL, 1, B, T, C, NH, s, fs);
}
