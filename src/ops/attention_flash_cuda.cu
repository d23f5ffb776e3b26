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
 * Backward (both branches of DT_OP_ATTENTION_BWD run it: no atomics, and faster than the
 * atomic dQ it replaced): a D kernel writes lse * log2(e) and D = rowsum(dO * O) per row;
 * kernel A owns a key block and walks the query blocks qb = kb.. in order (3-stage
 * cp.async pipeline, one barrier a tile), accumulating dK and dV in registers (one owner
 * per element: fixed order); it writes each tile's dS (bf16, the rounding its dK product
 * uses) to a scratch, already laid out as the A fragments of the dQ pass (the one place
 * scores reach device memory: 214 MB at B 16, NH 12, T 1024); the dQ pass owns two query
 * blocks (8 warps sharing each K tile) and sums dS K over key blocks 0..qb in order: one
 * owner per dQ element, a fixed order, one product a tile instead of recomputing three.
 * Both walk heads in groups (bwd_order) so that a group's tiles are reused through L2.
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

/* ---- forward ----------------------------------------------------------------------------- */

#define FWD_SMEM (5 * TILE * 2) /* Q, K x 2, V x 2 */

__global__ void __launch_bounds__(NT) flash_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int NH,
                                                       float sl2) {
    __shared__ __align__(128) bf16 sm[5 * TILE];
    bf16 *Qs = sm, *Ks = sm + TILE, *Vs = sm + 3 * TILE;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int bh = blockIdx.x, b = bh / NH, h = bh % NH, qb = T / FB - 1 - (int)blockIdx.y;
    int C = NH * FD, C3 = 3 * C;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    cp_tile(Qs, base + (size_t)qb * FB * C3, C3);
    cp_tile(Ks, base + C, C3);
    cp_tile(Vs, base + 2 * C, C3);
    cp_commit();
    uint32_t qf[4][4];
    float o[8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[n][i] = 0.0f;
    for (int kb = 0; kb <= qb; kb++) {
        int cur = kb & 1;
        if (kb < qb) { /* the next tiles: their buffers were last read before the previous barrier */
            cp_tile(Ks + (cur ^ 1) * TILE, base + C + (size_t)(kb + 1) * FB * C3, C3);
            cp_tile(Vs + (cur ^ 1) * TILE, base + 2 * C + (size_t)(kb + 1) * FB * C3, C3);
        }
        cp_commit();
        cp_wait1();
        __syncthreads();
        if (kb == 0) load_a(qf, Qs + warp * 16 * LDS, lane);
        float s[8][4];
        mm_nt(s, qf, Ks + cur * TILE, lane);
        /* scale to log2 units; mask keys after the query on the diagonal block */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float v = s[n][i] * sl2;
                if (kb == qb && n * 8 + 2 * t + (i & 1) > warp * 16 + g + 8 * (i >> 1)) v = -INFINITY;
                s[n][i] = v;
                mx[i >> 1] = fmaxf(mx[i >> 1], v);
            }
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            float mn = fmaxf(m[r], mx[r]); /* finite: key 0 is visible to every query */
            corr[r] = exp2f(m[r] - mn);    /* 0 on the first block (m = -inf) */
            m[r] = mn;
            l[r] *= corr[r];
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float p = exp2f(s[n][i] - m[i >> 1]);
                s[n][i] = p;
                l[i >> 1] += p;
                o[n][i] *= corr[i >> 1];
            }
        mm_pn(o, s, Vs + cur * TILE, lane);
        __syncthreads(); /* this iteration's buffers are free for the loads two steps on */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) { /* xor butterfly: the same bits on the 4 lanes of a row */
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    int q0 = qb * FB + warp * 16;
    bf16 *dst = out + ((size_t)b * T + q0) * C + h * FD;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float inv = 1.0f / l[r];
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(g + 8 * r) * C + n * 8 + 2 * t) =
                __floats2bfloat162_rn(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
        }
    if (t == 0)
#pragma unroll
        for (int r = 0; r < 2; r++) lse[(size_t)bh * T + q0 + g + 8 * r] = (m[r] + log2f(l[r])) * LN2;
}

/* ---- backward ---------------------------------------------------------------------------- */

#define BST 3             /* pipeline stages of the backward kernels (one barrier a tile) */
#define DS_TILE (FB * FB) /* bf16 elements of one dS tile in the scratch */

/* 2^x on the MUFU unit, subnormal results flushed to zero (probabilities below 2^-126 do
 * not move a bf16 gradient); one instruction instead of exp2f's subnormal-safe sequence. */
static __device__ __forceinline__ float ex2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
/* Transposes an 8 x 8 bf16 matrix held as one register per lane (lane 4g + t: row g,
 * columns 2t, 2t + 1). */
static __device__ __forceinline__ uint32_t movtrans(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}
/* An L2 policy for data read once (the dS tiles): evicted first, so that they do not push
 * out the K tiles that 16 query blocks share. */
static __device__ __forceinline__ uint64_t l2_evict_first(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
static __device__ __forceinline__ void cp_async16_hint(void *dst, const void *src, uint64_t pol) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "l"(pol));
}
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
/* The order in which the blocks of a backward grid (one per (head bh, 64-row block)) start:
 * CTA i of the 1-D grid takes the heads in groups of grp; inside a group, rank j (the
 * blocks with the most work first) of every head of the group, then rank j + 1. The
 * heads of a group share their tiles through L2 while the ranks balance the tail. */
static __device__ __forceinline__ void bwd_order(int grp, int nqb, int *bh, int *rank) {
    int i = (int)blockIdx.x, gs = grp * nqb, r = i % gs;
    *bh = i / gs * grp + r % grp;
    *rank = r / grp;
}

/* LD (B*NH*T/2 float4): for each pair of rows 2j, 2j + 1 of a head, {lse * log2(e) of both,
 * D of both}, D = rowsum(dO * O). A 256-thread block owns 64 rows: 8 lanes a row (8
 * channels each, 16-byte loads, all four issued before the sums), rows i and i + 32; an
 * xor butterfly over the 8 lanes (the same bits on each). B NH T % 64 == 0. */
__global__ void flash_dot_kernel(float *LD, const bf16 *dout, const bf16 *out, const float *lse, int B, int T, int NH) {
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
            float *p = LD + ((size_t)row - (t & 1)) * 2 + (t & 1);
            p[0] = lse[row] * LOG2E;
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
            float v = ex2_ftz(s[n][i] * sl2 - l2[i & 1]);
            if (DIAG && n * 8 + 2 * t + (i & 1) < warp * 16 + g + 8 * (i >> 1)) v = 0.0f;
            pv[i] = v;
            sv[i] = v * (dp[n][i] - dd[i & 1]);
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

/* Kernel A: a key block kb (rank kb in bwd_order: the most work first); walks query blocks
 * kb.. in order; dK, dV in registers (one owner, a fixed order). Each tile's dS goes to
 * the scratch dS (bf16; the tiles of a head in lower-triangular order, qb(qb+1)/2 + kb)
 * laid out as the A fragments of the dQ pass, [query group m][key group w][lane] x 8 bf16,
 * so that both sides move 16 bytes a lane and the dQ pass needs no shuffles. */
__global__ void __launch_bounds__(NT, 2) flash_bwd_kv_kernel(bf16 *dqkv, bf16 *dS, const bf16 *qkv, const bf16 *dout,
                                                             const float *LD, int T, int NH, float scale, int grp) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + TILE, *Qs = Vs + TILE, *dOs = Qs + BST * TILE;
    float *LDs = (float *)(dOs + BST * TILE);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int nqb = T / FB, bh, kb;
    bwd_order(grp, nqb, &bh, &kb);
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
    bf16 *dst = dqkv + ((size_t)b * T + kb * FB + warp * 16) * C3 + h * FD;
    store_acc(dst + C, C3, dk, scale, lane);
    store_acc(dst + 2 * C, C3, dv, 1.0f, lane);
}

#define DQ_NT 256                                        /* 8 warps: two query blocks */
#define BWDQ_SMEM (BST * (TILE + 2 * DS_TILE) * 2) /* K and two dS tiles per stage */

/* dQ pass: query blocks 2j and 2j + 1 of a head (pair rank nqb/2 - 1 - j in bwd_order),
 * warps 0-3 the first, 4-7 the second, sharing each K tile (half the K traffic through
 * L2). dQ = scale * sum over key blocks 0..qb in order of dS[qb, kb] K[kb] (one product a
 * tile, no exponentials) in registers: one owner per dQ element, a fixed order, no
 * atomics. The dS tiles arrive as ready-made A fragments. */
__global__ void __launch_bounds__(DQ_NT) flash_bwd_dq_kernel(bf16 *dqkv, const bf16 *dS, const bf16 *qkv, int T, int NH,
                                                             float scale, int grp) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Ss = Ks + BST * TILE; /* stage st, block half: Ss + (2 st + half) DS_TILE */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = warp >> 2, w = warp & 3;
    int nqb = T / FB, npair = (nqb + 1) / 2, bh, rank;
    bwd_order(grp, npair, &bh, &rank);
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
    if (qb < nqb) store_acc(dqkv + ((size_t)b * T + qb * FB + w * 16) * C3 + h * FD, C3, acc, scale, lane);
}

static int attrs_set;
static void set_attrs(void) {
    if (attrs_set) return;
    cudaFuncSetAttribute(flash_bwd_kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDA_SMEM);
    cudaFuncSetAttribute(flash_bwd_dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDQ_SMEM);
    attrs_set = 1;
}

void dt_cu_flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    dim3 g((unsigned)(B * NH), (unsigned)(T / FB));
    flash_fwd_kernel<<<dt_cu_noted(g, NT, 0, "flash_fwd_kernel"), NT, 0, s>>>(out, lse, qkv, T, NH, LOG2E / sqrtf((float)FD));
    (void)C;
}

/* Scratch: LD (B NH T 2 floats, 256-byte aligned end), then the dS tiles (bf16, B NH
 * nqb(nqb+1)/2 tiles of 64 x 64). */
static size_t ld_bytes(int B, int T, int NH) { return ((size_t)B * NH * T * 2 * sizeof(float) + 255) & ~(size_t)255; }

size_t dt_cu_flash_bwd_scratch(int B, int T, int C, int NH) {
    size_t nqb = (size_t)T / FB;
    (void)C;
    return ld_bytes(B, T, NH) + (size_t)B * NH * (nqb * (nqb + 1) / 2) * DS_TILE * sizeof(bf16);
}

/* Both branches of DT_OP_ATTENTION_BWD run this (they coincide): it is the faster one
 * (bench_attention), and it has no atomics. */
void dt_cu_flash_bwd(bf16 *dqkv, void *scratch, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                     const float *lse, int B, int T, int C, int NH, cudaStream_t s) {
    set_attrs();
    float scale = 1.0f / sqrtf((float)FD);
    float *LD = (float *)scratch;
    bf16 *dS = (bf16 *)((unsigned char *)scratch + ld_bytes(B, T, NH));
    int BH = B * NH, grp = 1;
    while (grp < 16 && BH % (2 * grp) == 0) grp *= 2; /* heads per group in bwd_order: 16 or what divides */
    flash_dot_kernel<<<dt_cu_noted((unsigned)(BH * T / 64), 256, 0, "flash_dot_kernel"), 256, 0, s>>>(LD, dout, out, lse, B, T, NH);
    dim3 g((unsigned)(BH * (T / FB))), gq((unsigned)(BH * ((T / FB + 1) / 2))); /* query block pairs */
    flash_bwd_kv_kernel<<<dt_cu_noted(g, NT, BWDA_SMEM, "flash_bwd_kv_kernel"), NT, BWDA_SMEM, s>>>(dqkv, dS, qkv, dout, LD, T, NH, scale, grp);
    flash_bwd_dq_kernel<<<dt_cu_noted(gq, DQ_NT, BWDQ_SMEM, "flash_bwd_dq_kernel"), DQ_NT, BWDQ_SMEM, s>>>(dqkv, dS, qkv, T, NH, scale, grp);
    (void)C;
}
