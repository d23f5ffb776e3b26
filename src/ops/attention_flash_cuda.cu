/* Fused causal attention on the GPU, flash style (see attention.h, ops_cuda.h): scores
 * never go through device memory, nor through shared memory. Head size 64, T a multiple
 * of 64, no attention dropout (dt_cu_flash_supported); other shapes use the GEMM
 * formulation (attention_cuda.cu).
 *
 * Tiles of 64 rows (queries or keys) x 64 head channels, bf16 in shared memory with a
 * 144-byte row stride (ldmatrix rows land on distinct banks), filled by cp.async with the
 * next tile in flight while the current one is used (double buffering). Each of 4 warps
 * owns 16 rows of the block's tile; products are bf16 tensor-core mma.sync m16n8k16 with
 * fp32 accumulators held in registers; the accumulator of one product is repacked in
 * registers as the A operand of the next (S -> P -> P V), so scores never leave the warp.
 * Exponentials are exp2f with the scale 1/sqrt(64) * log2(e) folded into one multiply.
 *
 * Forward: per query block, key blocks 0..qb in order with an online softmax (running max
 * and per-thread partial sums, fp32); the diagonal block is masked; writes out (bf16) and
 * lse = max + log(sum) (natural log, fp32) per row. Heavy (late) query blocks launch first.
 * Backward: D = rowsum(dO * O); kernel A owns a key block and walks the query blocks
 * qb = kb.. in order, accumulating dK and dV in registers (one owner per element: fixed
 * order). dQ (DT_OP_ATTENTION_BWD):
 *   det  — kernel B owns a query block and walks the key blocks 0..qb in order, recomputing
 *          the probabilities: one owner per dQ element, a fixed order, no atomics;
 *   fast — kernel A stages dS of each (key block, query block) pair in shared memory, each
 *          warp multiplies its 16 query rows by K and adds them into an fp32 buffer with
 *          float4 atomicAdd (order of arrival), converted to bf16 afterwards; the key blocks
 *          of a head run side by side and walk the query blocks from the last one.
 * Every reduction inside a kernel has a fixed order (k-steps in order inside mma; quad
 * sums by xor butterflies, which give the same bits on every lane). */
#include "ops/ops_cuda.h"

#include <stdint.h>

#define FD 64   /* head size */
#define FB 64   /* rows of a query or key tile */
#define LDS 72  /* bf16 row stride in shared memory: 144 bytes */
#define NT 128  /* threads per block: 4 warps x 16 rows */
#define TILE (FB * LDS)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

int dt_cu_flash_supported(int C, int NH, int T, const dt_dropout *drop) {
    return C / NH == FD && T % FB == 0 && !dt_dropout_on(drop);
}

/* ---- PTX wrappers ------------------------------------------------------------------------ */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
static __device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_wait1(void) { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
static __device__ __forceinline__ void cp_wait0(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

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
static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* ---- fragments ---------------------------------------------------------------------------
 * Accumulator of a 16x8 product, lane = 4g + t: c[0], c[1] at row g, columns 2t, 2t+1;
 * c[2], c[3] at row g + 8. A 16 x 64 warp tile is acc[8][4] (8 column groups of 8). */

/* Issues cp.async for a 64 x 64 bf16 tile (source rows ld elements apart). */
static __device__ __forceinline__ void cp_tile(bf16 *dst, const bf16 *src, size_t ld) {
#pragma unroll
    for (int i = threadIdx.x; i < FB * 8; i += NT) {
        int r = i >> 3, v = i & 7;
        cp_async16(dst + r * LDS + v * 8, src + (size_t)r * ld + v * 8);
    }
}

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

/* acc (16 x 64) += P . Bm where P (16 x 64) is given as fp32 accumulators (rounded to bf16
 * here) and Bm is a 64 x 64 row-major tile (rows = the reduction index): O += P V. */
static __device__ __forceinline__ void mm_pn(float acc[8][4], const float p[8][4], const bf16 *Bm, int lane) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t a[4] = {pack(p[2 * k][0], p[2 * k][1]), pack(p[2 * k][2], p[2 * k][3]),
                         pack(p[2 * k + 1][0], p[2 * k + 1][1]), pack(p[2 * k + 1][2], p[2 * k + 1][3])};
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b[4];
            ldm_x4_t(b, Bm + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + np * 16 + (lane >> 4) * 8);
            mma(acc[2 * np], a, b[0], b[1]);
            mma(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
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

/* 2^x (one MUFU op, no subnormal fix-up: a probability below 2^-126 flushes to 0, and it
 * weighs nothing against the row maximum's 1). */
static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

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

/* Online softmax step of one m-tile: s (raw Q K^T scores of its 16 rows x 64 keys) becomes
 * the probabilities exp2(s sl2 - max sl2); the running max m (raw units), the per-thread
 * partial row sums l and the output accumulator o are rescaled by the change of the max.
 * diag: the diagonal tile, key column c visible to the local row r iff c <= r (row: this
 * thread's first local row, the second is row + 8). Explicit _rn operations: no
 * contraction, so every kernel that inlines this computes the same bits. */
static __device__ __forceinline__ void fwd_softmax(float s[8][4], float o[8][4], float m[2], float l[2], int diag,
                                                   int row, int t, float sl2) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (diag && n * 8 + 2 * t + (i & 1) > row + 8 * (i >> 1)) s[n][i] = -INFINITY;
            mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
        }
    float ms[2], corr[2];
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
        for (int i = 0; i < 4; i++) s[n][i] = ex2(__fmaf_rn(s[n][i], sl2, -ms[i >> 1]));
#pragma unroll
    for (int r = 0; r < 2; r++) { /* this tile's row sums: pairs, then a tree (short chains) */
        float ps[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            ps[q] = __fadd_rn(__fadd_rn(s[2 * q][2 * r], s[2 * q][2 * r + 1]),
                              __fadd_rn(s[2 * q + 1][2 * r], s[2 * q + 1][2 * r + 1]));
        l[r] = __fadd_rn(__fmul_rn(l[r], corr[r]), __fadd_rn(__fadd_rn(ps[0], ps[1]), __fadd_rn(ps[2], ps[3])));
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[n][i] = __fmul_rn(o[n][i], corr[i >> 1]);
}

/* P (fp32, 16 x 64 per m-tile) as bf16 A fragments: p[j][k] for keys 16k..16k+15. */
template <int M>
static __device__ __forceinline__ void fwd_pack(uint32_t p[M][4][4], const float s[M][8][4]) {
#pragma unroll
    for (int j = 0; j < M; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
            p[j][k][0] = pack(s[j][2 * k][0], s[j][2 * k][1]);
            p[j][k][1] = pack(s[j][2 * k][2], s[j][2 * k][3]);
            p[j][k][2] = pack(s[j][2 * k + 1][0], s[j][2 * k + 1][1]);
            p[j][k][3] = pack(s[j][2 * k + 1][2], s[j][2 * k + 1][3]);
        }
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
        if (j >= first) fwd_softmax(s[j], o[j], m[j], l[j], j == diag, row, lane & 3, sl2);
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

/* D[bh, t] = sum_d dO[t, d] O[t, d] (one warp per row, butterfly sum). */
__global__ void flash_dot_kernel(float *D, const bf16 *dout, const bf16 *out, int B, int T, int NH) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= B * NH * T) return;
    int t = row % T, bh = row / T, b = bh / NH, h = bh % NH, C = NH * FD;
    size_t off = ((size_t)b * T + t) * C + h * FD + lane * 2;
    float s = __bfloat162float(dout[off]) * __bfloat162float(out[off]) +
              __bfloat162float(dout[off + 1]) * __bfloat162float(out[off + 1]);
    s = dt_warp_sum(s);
    if (lane == 0) D[row] = s;
}

/* Shared memory of kernel A: K, V, Q x 2, dO x 2, dS (fast), then lse and D x 2 (fp32). */
#define BWDA_SMEM (7 * TILE * 2 + 4 * FB * 4)

/* Issues cp.async for 64 floats (threads 0..15). */
static __device__ __forceinline__ void cp_row64(float *dst, const float *src) {
    if (threadIdx.x < 16) cp_async16(dst + threadIdx.x * 4, src + threadIdx.x * 4);
}

/* Kernel A: a key block; dK, dV in registers; fast: atomic dQ into dq (fp32, B,T,C). */
__global__ void __launch_bounds__(NT) flash_bwd_kv_kernel(bf16 *dqkv, float *dq, const bf16 *qkv,
                                                          const bf16 *dout, const float *lse, const float *D,
                                                          int T, int NH, float scale, int rev) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + TILE, *Qs = Vs + TILE, *dOs = Qs + 2 * TILE, *dSs = dOs + 2 * TILE;
    float *Ls = (float *)(dSs + TILE), *Dsm = Ls + 2 * FB;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    /* det: grid (bh, kb), the key blocks with the most work launch first. fast (rev): grid
     * (kb, bh), the key blocks of one head side by side, walking the query blocks from the
     * last one, so that they add into the same dQ rows at the same time: the atomics'
     * order of arrival is not steered by the schedule, and replays show it (the negative
     * control of the GPU tests). */
    int bh = rev ? blockIdx.y : blockIdx.x, kb = rev ? blockIdx.x : blockIdx.y;
    int b = bh / NH, h = bh % NH, nqb = T / FB;
    int C = NH * FD, C3 = 3 * C;
    float sl2 = scale * LOG2E;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    const bf16 *dbase = dout + (size_t)b * T * C + h * FD;
    cp_tile(Ks, base + C + (size_t)kb * FB * C3, C3);
    cp_tile(Vs, base + 2 * C + (size_t)kb * FB * C3, C3);
    int nit = nqb - kb, q0 = rev ? nqb - 1 : kb, qd = rev ? -1 : 1; /* query block i: q0 + i qd */
    cp_tile(Qs, base + (size_t)q0 * FB * C3, C3);
    cp_tile(dOs, dbase + (size_t)q0 * FB * C, C);
    cp_row64(Ls, lse + (size_t)bh * T + q0 * FB);
    cp_row64(Dsm, D + (size_t)bh * T + q0 * FB);
    cp_commit();
    uint32_t kf[4][4], vf[4][4];
    float dk[8][4], dv[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk[n][i] = dv[n][i] = 0.0f;
    int krow = warp * 16 + g; /* this thread's key rows (local): krow, krow + 8 */
    for (int it = 0; it < nit; it++) {
        int cur = it & 1, qb = q0 + it * qd, nx = qb + qd;
        if (it + 1 < nit) {
            cp_tile(Qs + (cur ^ 1) * TILE, base + (size_t)nx * FB * C3, C3);
            cp_tile(dOs + (cur ^ 1) * TILE, dbase + (size_t)nx * FB * C, C);
            cp_row64(Ls + (cur ^ 1) * FB, lse + (size_t)bh * T + nx * FB);
            cp_row64(Dsm + (cur ^ 1) * FB, D + (size_t)bh * T + nx * FB);
        }
        cp_commit();
        cp_wait1();
        __syncthreads();
        if (it == 0) {
            load_a(kf, Ks + warp * 16 * LDS, lane);
            load_a(vf, Vs + warp * 16 * LDS, lane);
        }
        const bf16 *Qc = Qs + cur * TILE, *dOc = dOs + cur * TILE;
        const float *Lc = Ls + cur * FB, *Dc = Dsm + cur * FB;
        /* P^T (16 keys x 64 queries) = exp(S^T * scale - lse[q]), zero above the diagonal */
        float p[8][4];
        mm_nt(p, kf, Qc, lane);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int qc = n * 8 + 2 * t + (i & 1);
                float v = exp2f(p[n][i] * sl2 - Lc[qc] * LOG2E);
                p[n][i] = (qb == kb && qc < krow + 8 * (i >> 1)) ? 0.0f : v;
            }
        mm_pn(dv, p, dOc, lane); /* dV += P^T dO */
        /* dS^T = P^T * (dP^T - D[q]), dP^T = V dO^T */
        float ds[8][4];
        mm_nt(ds, vf, dOc, lane);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) ds[n][i] = p[n][i] * (ds[n][i] - Dc[n * 8 + 2 * t + (i & 1)]);
        mm_pn(dk, ds, Qc, lane); /* dK += dS^T Q (scaled at the end) */
        if (dq) { /* fast: dQ[q] += scale * sum over this block's keys dS[q, key] K[key] */
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    *reinterpret_cast<uint32_t *>(dSs + (krow + 8 * r) * LDS + j * 8 + 2 * t) =
                        pack(ds[j][2 * r], ds[j][2 * r + 1]);
            __syncthreads();
            float acc[8][4];
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) { /* keys 16k..: A = dS (queries x keys) = (dS^T)^T */
                uint32_t a[4];
                ldm_x4_t(a, dSs + (k * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + warp * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t bb[4];
                    ldm_x4_t(bb, Ks + (k * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + np * 16 + (lane >> 4) * 8);
                    mma(acc[2 * np], a, bb[0], bb[1]);
                    mma(acc[2 * np + 1], a, bb[2], bb[3]);
                }
            }
            /* float4 atomics: lane pairs (t even, t + 1) swap halves so that the even lane holds
             * row g, columns 2t..2t+3 and the odd lane row g + 8, columns 2t-2..2t+1 */
            int odd = t & 1;
            float *dst = dq + ((size_t)b * T + qb * FB + warp * 16 + g + 8 * odd) * C + h * FD + 2 * (t - odd);
#pragma unroll
            for (int n = 0; n < 8; n++) {
                float s0 = odd ? acc[n][0] : acc[n][2], s1 = odd ? acc[n][1] : acc[n][3];
                float r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
                float4 v = odd ? make_float4(r0, r1, acc[n][2], acc[n][3]) : make_float4(acc[n][0], acc[n][1], r0, r1);
                v.x *= scale; v.y *= scale; v.z *= scale; v.w *= scale;
                atomicAdd(reinterpret_cast<float4 *>(dst + n * 8), v);
            }
        }
        __syncthreads(); /* this iteration's buffers (and dS) are free */
    }
    cp_wait0();
    bf16 *dst = dqkv + ((size_t)b * T + kb * FB + warp * 16) * C3 + h * FD;
    store_acc(dst + C, C3, dk, scale, lane);
    store_acc(dst + 2 * C, C3, dv, 1.0f, lane);
}

#define BWDQ_SMEM (6 * TILE * 2) /* Q, dO, K x 2, V x 2 */

/* Kernel B (det): a query block; key blocks in order; dQ in registers. */
__global__ void __launch_bounds__(NT) flash_bwd_q_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout,
                                                         const float *lse, const float *D, int T, int NH,
                                                         float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *dOs = Qs + TILE, *Ks = dOs + TILE, *Vs = Ks + 2 * TILE;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int bh = blockIdx.x, b = bh / NH, h = bh % NH, qb = T / FB - 1 - (int)blockIdx.y;
    int C = NH * FD, C3 = 3 * C;
    float sl2 = scale * LOG2E;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    cp_tile(Qs, base + (size_t)qb * FB * C3, C3);
    cp_tile(dOs, dout + ((size_t)b * T + (size_t)qb * FB) * C + h * FD, C);
    cp_tile(Ks, base + C, C3);
    cp_tile(Vs, base + 2 * C, C3);
    cp_commit();
    int qrow = warp * 16 + g; /* local query rows qrow, qrow + 8 */
    float L2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        L2[r] = lse[(size_t)bh * T + qb * FB + qrow + 8 * r] * LOG2E;
        Dr[r] = D[(size_t)bh * T + qb * FB + qrow + 8 * r];
    }
    uint32_t qf[4][4], of[4][4];
    float dqa[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) dqa[n][i] = 0.0f;
    for (int kb = 0; kb <= qb; kb++) {
        int cur = kb & 1;
        if (kb < qb) {
            cp_tile(Ks + (cur ^ 1) * TILE, base + C + (size_t)(kb + 1) * FB * C3, C3);
            cp_tile(Vs + (cur ^ 1) * TILE, base + 2 * C + (size_t)(kb + 1) * FB * C3, C3);
        }
        cp_commit();
        cp_wait1();
        __syncthreads();
        if (kb == 0) {
            load_a(qf, Qs + warp * 16 * LDS, lane);
            load_a(of, dOs + warp * 16 * LDS, lane);
        }
        const bf16 *Kc = Ks + cur * TILE, *Vc = Vs + cur * TILE;
        float p[8][4], ds[8][4];
        mm_nt(p, qf, Kc, lane);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float v = exp2f(p[n][i] * sl2 - L2[i >> 1]);
                p[n][i] = (kb == qb && n * 8 + 2 * t + (i & 1) > qrow + 8 * (i >> 1)) ? 0.0f : v;
            }
        mm_nt(ds, of, Vc, lane); /* dP = dO V^T */
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) ds[n][i] = p[n][i] * (ds[n][i] - Dr[i >> 1]);
        mm_pn(dqa, ds, Kc, lane); /* dQ += dS K */
        __syncthreads();
    }
    cp_wait0();
    store_acc(dqkv + ((size_t)b * T + qb * FB + warp * 16) * C3 + h * FD, C3, dqa, scale, lane);
}

/* fast: dqkv's Q part = bf16(dq). */
__global__ void flash_dq_store_kernel(bf16 *dqkv, const float *dq, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    size_t bt = i / C, c = i % C;
    dqkv[bt * 3 * C + c] = __float2bfloat16(dq[i]);
}

static int attrs_set;
static void set_attrs(void) {
    if (attrs_set) return;
    cudaFuncSetAttribute(flash_bwd_kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDA_SMEM);
    cudaFuncSetAttribute(flash_bwd_q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDQ_SMEM);
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

void dt_cu_flash_bwd(bf16 *dqkv, float *dq, float *D, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                     const float *lse, int B, int T, int C, int NH, cudaStream_t s) {
    set_attrs();
    float scale = 1.0f / sqrtf((float)FD);
    int det = dt_op_variant(DT_OP_ATTENTION_BWD) == DT_VARIANT_DET;
    flash_dot_kernel<<<dt_cu_noted(dt_cu_div((size_t)B * NH * T, 8), 256, 0, "flash_dot_kernel"), 256, 0, s>>>(D, dout, out, B, T, NH);
    dim3 g((unsigned)(B * NH), (unsigned)(T / FB));
    if (!det) cudaMemsetAsync(dq, 0, sizeof(float) * (size_t)B * T * C, s);
    dim3 gk = det ? g : dim3((unsigned)(T / FB), (unsigned)(B * NH));
    flash_bwd_kv_kernel<<<dt_cu_noted(gk, NT, BWDA_SMEM, "flash_bwd_kv_kernel"), NT, BWDA_SMEM, s>>>(dqkv, det ? NULL : dq, qkv, dout, lse, D, T, NH, scale, !det);
    if (det)
        flash_bwd_q_kernel<<<dt_cu_noted(g, NT, BWDQ_SMEM, "flash_bwd_q_kernel"), NT, BWDQ_SMEM, s>>>(dqkv, qkv, dout, lse, D, T, NH, scale);
    else
        flash_dq_store_kernel<<<dt_cu_noted(dt_cu_div((size_t)B * T * C, 256), 256, 0, "flash_dq_store_kernel"), 256, 0, s>>>(dqkv, dq, B, T, C);
}
