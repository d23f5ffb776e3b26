/* Row-major bf16 GEMMs with fused epilogues on Hopper's warpgroup MMA (wgmma.mma_async,
 * sm_90a) fed by the tensor memory accelerator (TMA): dt_cu_gemm_wgmma (gemm_cuda.h), for the
 * model's activation GEMMs whose shapes tile exactly (dt_cu_gemm_wgmma_fits, gemm_plan.c):
 * the linears' forward (B = W stored (N, K): K-major) and input gradient (B = W stored
 * (K, N): MN-major), with the bias, GELU (aux out), dGELU (aux in) and DOT (aux in: the
 * attention output; the flash backward's D of each row and head out) epilogues of
 * dt_cu_gemm_args. Built for sm_90a only (Makefile: WGMMA_OBJ).
 *
 * The plan (tiles, ring, tile order, tensor maps) is gemm_tma_plan.h. A block of 384
 * threads is persistent (one an SM) and claims its tiles one at a time from a counter that
 * the launch's blocks share (atomicAdd), so that blocks which start late (their SM still
 * held by another stream's kernel) take fewer tiles rather than end the launch late:
 *  - warpgroup 0, the producer, gives most of its registers away (setmaxnreg) and one of its
 *    threads claims the tiles (the next one with the current tile's fourth-last load, which
 *    hides the atomic's round trip: claimed when the previous loads were done, the 768-deep
 *    tiles took up to 8% longer than in the static order on the H200), posts each in a
 *    small queue in shared memory (an mbarrier a slot) for the consumers, and issues the TMA
 *    loads (cp.async.bulk.tensor, 128-byte
 *    swizzle) of A and B into a ring of stages, each with a "full" mbarrier (the loads' bytes
 *    arrive on it) and an "empty" one (the consumers' warps arrive when their products have
 *    read the stage). It runs ahead through the tile boundaries, so the next tile's first
 *    stages load while the consumers run the epilogue; for dGELU it also prefetches the
 *    tile's aux rows into L2;
 *  - warpgroups 1 and 2, the consumers, issue wgmma m64n{bn}k16 with both operands in shared
 *    memory and keep one stage's products in flight while releasing the stage before.
 *    Cooperative (128 x 256 tiles, or 128 x 128), they take rows 0..63 and 64..127 of each
 *    tile and run its epilogue together, the tensor cores idle meanwhile (at K = 768 a
 *    128 x 256 tile's GELU epilogue, 3.5-4 us, beside 8.5 us of products). Ping-pong, they
 *    take alternate tiles and a turn barrier orders their K loops, so one warpgroup's
 *    epilogue runs under the other's products: 128 x 128 tiles, each warpgroup owning a
 *    whole tile (two m64n128k16 a k16 step on one B, 128 fp32 accumulators a thread: 232
 *    registers a consumer thread, 40 the producer's), the rule except for deep products
 *    (gemm_tma_plan.h: dt_gt_schedule); 64 x 256 (forced, for benchmarks) loads B for
 *    every 64 rows. Shared-memory reads: a m64n128k16 reads 2 KB
 *    of A and 4 KB of B in its 64 cycles at the full bf16 rate (4096 flop a cycle an SM),
 *    96 B a cycle against the SM's ~128 (m64n256k16: 10 KB in 128 cycles, 80 B); L2 reads,
 *    384 KB a 128 x 128 x 768 tile against 576 KB a 128 x 256 one, are 1.33x as many a flop;
 *  - the epilogue goes from registers into swizzled 64 x 64 staging buffers (two or four a
 *    consumer warpgroup) and out by TMA stores (bf16 pairs stored straight from the
 *    accumulator layout, 16 bytes a row per warp instruction, made the GELU GEMM take
 *    0.29 ms instead of 0.15 on the H200), each warp its own 16 rows of a buffer by its own
 *    store, waited for only when the warp writes the buffer again; dGELU's and DOT's aux
 *    comes in by TMA the same way, warp by warp. No warpgroup barrier: a warp never waits
 *    for another in the epilogue. The GELU uses the hardware tanh.
 *
 * Determinism: one block owns each output tile (one consumer warpgroup each of its rows) and
 * each output element is one dot product over K, reduced in K order inside the tensor core
 * (the same instruction sequence on every launch, whichever block or warpgroup takes the
 * tile and whatever the SM count); the epilogue is elementwise, its sums (CSUM, DOT) in fixed
 * orders within a warp. No split of K; the one atomic is the tile counter, which decides
 * only who computes a tile, never its numbers. */
#include "ops/gemm/gemm_cuda.h"
#include "ops/reduce/reduce_cuda.h"
#include "ops/gemm/gemm_tma_plan.h"
#include "ops/attention/flash_layout.h"
#include "ops/cuda/wgmma_desc.h"
#include "ops/cuda/wgmma_sync.cuh"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from the runtime */
#include <limits.h>
#include <stdint.h>

#define GELU_K 0.7978845608028654f /* sqrt(2/pi), as gelu_cuda.cu */

/* ---- mbarriers and TMA ---------------------------------------------------------------- */
/* (mbar_expect_tx, mbar_arrive, mbar_wait: mbarrier.cuh, through wgmma_sync.cuh) */
/* The 2-D box at (c0 innermost, c1) of the tensor map into shared memory at dst (1024-byte
 * aligned), its bytes counted on barrier bar. */
static __device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
/* The 2-D box at (c0, c1) of the tensor map from shared memory at src (1024-byte aligned),
 * in this thread's current bulk group. */
static __device__ __forceinline__ void tma_store(const CUtensorMap *map, uint32_t src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"((uint64_t)map), "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
static __device__ __forceinline__ void bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* Until at most N of this thread's bulk groups still read their shared memory. */
template <int N> static __device__ __forceinline__ void bulk_wait_read(void) {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void bulk_wait_all(void) { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
static __device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

/* ---- wgmma ------------------------------------------------------------------------------ */
template <int R> static __device__ __forceinline__ void reg_fence(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_D64                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                          \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_D128                                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "              \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "               \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "               \
    "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "               \
    "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "               \
    "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "                  \
    "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "                \
    "%123, %124, %125, %126, %127}"
#define WG_R8(k, o) k(d[o]), k(d[o + 1]), k(d[o + 2]), k(d[o + 3]), k(d[o + 4]), k(d[o + 5]), k(d[o + 6]), k(d[o + 7])
#define WG_REGS64(k, o)                                                                                        \
    WG_R8(k, o), WG_R8(k, o + 8), WG_R8(k, o + 16), WG_R8(k, o + 24), WG_R8(k, o + 32), WG_R8(k, o + 40),      \
        WG_R8(k, o + 48), WG_R8(k, o + 56)

/* d (64 x BN fp32: BN / 2 a thread) = A B (+ d when accumulate), A (64 x 16) K-major and B
 * (16 x BN) K-major (MN 0) or MN-major (MN 1), both in shared memory. */
template <int MN>
static __device__ __forceinline__ void wgmma_n(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_D128 ", %128, %129, p, 1, 1, 0, %131;\n}\n"
                 : WG_REGS64("+f", 0), WG_REGS64("+f", 64)
                 : "l"(da), "l"(db), "r"(accumulate), "n"(MN));
}
template <int MN>
static __device__ __forceinline__ void wgmma_n(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_D64 ", %64, %65, p, 1, 1, 0, %67;\n}\n"
                 : WG_REGS64("+f", 0)
                 : "l"(da), "l"(db), "r"(accumulate), "n"(MN));
}

/* ---- the epilogue math ------------------------------------------------------------------ */
/* tanh by the hardware approximation (tanh.approx.f32: relative error about 2^-11, below the
 * bf16 rounding of the outputs; one instruction instead of tanhf's ~20, which would cost the
 * epilogue as much as the products). */
static __device__ __forceinline__ float tanh_fast(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
/* gelu.h's tanh form, factored for few instructions (the epilogue's arithmetic runs beside
 * the other warpgroup's products and slows them): u = x (K + K c x^2), GELU = h + h tanh(u)
 * with h = x / 2, and GELU' = (1 + tanh) / 2 + h (1 - tanh^2) (K + 3 K c x^2), with explicit
 * fused multiply-adds (fixed rounding, not left to the compiler). In GELU' the halving moves
 * from h onto the factor (K + 3 K c x^2) / 2, made from the halved constants: halving is
 * exact in binary floating point, so each rounding sees the same value halved and the
 * result has the bits of the form above (away from fp32's subnormals, where a term that
 * small vanishes beside (1 + tanh) / 2 either way), one multiplication fewer. */
#define GELU_KC 0.035677408136300125f  /* K c, c = 0.044715 */
#define GELU_3KC 0.10703222440890037f  /* 3 K c */
static __device__ __forceinline__ float gelu_f(float x) {
    const float u = __fmul_rn(x, __fmaf_rn(GELU_KC, __fmul_rn(x, x), GELU_K)), h = __fmul_rn(0.5f, x);
    return __fmaf_rn(h, tanh_fast(u), h);
}
static __device__ __forceinline__ float gelu_grad(float x) {
    const float x2 = __fmul_rn(x, x), th = tanh_fast(__fmul_rn(x, __fmaf_rn(GELU_KC, x2, GELU_K)));
    const float s = __fmul_rn(x, __fmaf_rn(-th, th, 1.0f)); /* 2 h (1 - tanh^2) */
    return __fmaf_rn(s, __fmaf_rn(0.5f * GELU_3KC, x2, 0.5f * GELU_K), __fmaf_rn(0.5f, th, 0.5f));
}
/* A bf16 pair (low element first) as two floats: the bits moved into place (bf16 is the
 * upper half of an fp32), two instructions where the conversion intrinsic takes three. */
static __device__ __forceinline__ float2 bf16x2_floats(uint32_t p) {
    return make_float2(__uint_as_float(p << 16), __uint_as_float(p & 0xffff0000u));
}

/* One step of the column sums' halving across g (gemm_tma_plan.h: dt_gt_csum_keep): of the
 * first 2 H values, this lane keeps H and sends the other H to its partner at lane mask
 * 16 >> STEP, and adds what it receives. */
template <int H, int STEP, int NV> static __device__ __forceinline__ void csum_halve(float (&cs)[NV], int lane) {
#pragma unroll
    for (int i = 0; i < H; i++) {
        const int hi = dt_gt_csum_keep(lane, STEP, i, H) != i;
        const float keep = hi ? cs[i + H] : cs[i], send = hi ? cs[i] : cs[i + H];
        cs[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 16 >> STEP));
    }
}

/* DOT: row gm = b T + t of C, head h (64 columns): the row's index (b NH + h) T + t in the
 * attention's (B NH, T) order (lse's and, through dt_flash_ld_at_row, LD's). */
static __device__ __forceinline__ int dot_row(int gm, int h, int NH, int T) {
    const int b = gm / T;
    return (b * NH + h) * T + (gm - b * T);
}
/* DOT: a row's D of one head from this lane's chain v (the fused multiply-adds of its 16
 * channels 8 j + 2 t, + 1 in j order, from 0), added across the quad's lanes t in a fixed
 * tree, (S0 + S1) + (S2 + S3) (two xor shuffles: every lane gets the same bits), into LD's
 * pair layout beside lse log2(e) by lane t = 0 (dt_cu_flash_bwd's LD). lse_v and r: the
 * row's lse and index (dot_row), loaded and computed before the tile's products: a load here
 * would stall the warp's epilogue on its round trip once a chunk (0.0465 against 0.0414 ms
 * a call at the 124M shape on the H200). */
static __device__ __forceinline__ void dot_store(float *ld, float lse_v, float v, int r, int lane) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
    if (lane & 3) return;
    float *q = ld + dt_flash_ld_at_row((size_t)r); /* T even: the launcher refuses odd T */
    q[0] = lse_v * DT_FLASH_LD_LOG2E;
    q[2] = v;
}

/* ---- the kernel ------------------------------------------------------------------------- */
/* Grid dt_gt_grid(tiles, SMs), DT_GT_THREADS threads, dt_gt_smem_bytes(SCH) of dynamic
 * shared memory. SCH: a schedule of gemm_tma_plan.h (not the rule), which sets the tile
 * (BM x BN), whether the consumer warpgroups share each tile or take alternate ones (PP),
 * the rows each computes (WM: MS = WM / 64 m64 products a k step) and its staging buffers
 * (NBUF) beside the ring (STAGES). MN: B is MN-major
 * (stored (K, N)). EPI: DT_CU_EPI_DEFAULT (bias may be NULL), DT_CU_EPI_GELU,
 * DT_CU_EPI_DGELU, DT_CU_EPI_DOT (aux = O; dot_ld, dot_lse, dot_T: dt_cu_gemm_args). CSUM
 * (dGELU only): the column sums of C (its fp32 values, before the bf16 rounding) into csum_part (gemm_tma_plan.h: dt_gt_csum_*; with 256-wide tiles the sums
 * live in a 256-byte stack frame, without spills: ptxas does not keep them in registers).
 * M, N, K tile exactly (dt_cu_gemm_wgmma_fits). */
template <int SCH, int MN, int EPI, int CSUM>
__global__ void __launch_bounds__(DT_GT_THREADS, 1)
    gemm_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_c, const __grid_constant__ CUtensorMap map_x, int ldc,
                    const bf16 *bias, bf16 *aux, int M, int N, int K, int *ctr, float *csum_part, float *dot_ld,
                    const float *dot_lse, int dot_T) {
    constexpr int BM = DT_GT_BM(SCH), BN = DT_GT_BN(SCH), PP = DT_GT_PP(SCH), MS = DT_GT_WM(SCH) / 64;
    constexpr int A_BYTES = BM * 128, STAGES = DT_GT_STAGES(SCH), STAGE = DT_GT_STAGE_BYTES(BM, BN);
    constexpr int NBUF = DT_GT_NBUF(SCH);
    /* a consumer warpgroup's part of a tile leaves in 64 x 64 boxes ("chunks"): chunk c is
     * its rows 64 (c / NCH) .. + 63, columns 64 (c % NCH) .. + 63 */
    constexpr int NCH = BN / 64, CHUNKS = MS * NCH;
    /* dGELU, DOT: the aux chunks that do not fit the buffers at a tile's start load during
     * its epilogue, so the producer prefetches the tile's aux into L2 */
    constexpr int AUX_IN = EPI == DT_CU_EPI_DGELU || EPI == DT_CU_EPI_DOT, AUX_RELOAD = CHUNKS > NBUF;
    extern __shared__ __align__(1024) unsigned char gsm_raw[];
    const uint32_t base = (smem_u32(gsm_raw) + 1023u) & ~1023u;
    const uint32_t stg0 = base + (uint32_t)(STAGES * STAGE); /* epilogue staging, 1024-aligned */
    const uint32_t full0 = stg0 + DT_GT_EPI_BYTES(SCH), empty0 = full0 + 8u * STAGES, ebar0 = empty0 + 8u * STAGES;
    const uint32_t turn0 = ebar0 + 8u * DT_GT_EBARS; /* ping-pong: a consumer warpgroup's products of a tile are issued */
    const uint32_t tqf0 = turn0 + 16u, tqe0 = tqf0 + 8u * DT_GT_TQ, tqv0 = tqe0 + 8u * DT_GT_TQ; /* the tile queue */
    const int tid = (int)threadIdx.x, wg = tid >> 7;
    const int tiles = dt_gt_tiles(M, N, BM, BN), nk = K / DT_GT_BK, grid = (int)gridDim.x;
    /* the first claim goes out before the setup, which hides its round trip to L2 */
    int claim = tid == 0 && ctr ? atomicAdd(ctr, 1) : 0;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full0 + 8u * s, 1);  /* the producer's expect_tx; the bytes do the rest */
            mbar_init(empty0 + 8u * s, PP ? 4 : 8); /* one arrival per warp that reads the stage */
        }
        for (int b = 0; b < 8 * NBUF; b++) mbar_init(ebar0 + 8u * b, 1); /* a warp's aux load into a buffer */
        for (int w = 0; w < 2; w++) mbar_init(turn0 + 8u * w, 1);
        for (int j = 0; j < DT_GT_TQ; j++) {
            mbar_init(tqf0 + 8u * j, 1);            /* the producer's post */
            mbar_init(tqe0 + 8u * j, PP ? 4 : 8); /* one arrival per warp that reads the slot */
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) { /* the producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (tid != 0) return;
        int s = 0;
        uint32_t ph = 0;
        for (int j = 0;; j++) { /* local tile j: claim it, post it in the tile queue, load its stages */
            int tile;
            if (ctr) { /* claim: made at the start, or during the last tile's loads */
                if (dt_gt_claim_last(claim, tiles, grid)) atomicExch(ctr, 0); /* every claim is in: reset */
                tile = dt_gt_claim_tile(claim, tiles);
            } else {
                tile = dt_gt_static_tile((int)blockIdx.x, j, grid, tiles);
            }
            for (int e = 0; e < (tile < 0 ? dt_gt_tq_ends(PP) : 1); e++) {
                const uint32_t slot = (uint32_t)((j + e) % DT_GT_TQ);
                mbar_wait(tqe0 + 8u * slot, (uint32_t)(((j + e) / DT_GT_TQ) & 1) ^ 1u);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(tqv0 + 4u * slot), "r"(tile) : "memory");
                mbar_arrive(tqf0 + 8u * slot); /* releases the store to the slot's readers */
            }
            if (tile < 0) break;
            int m0, n0;
            dt_gt_tile(tile, N, BM, BN, &m0, &n0);
            if (AUX_IN && AUX_RELOAD) /* the epilogue's aux reads, a tile ahead (not unrolled: */
#pragma unroll 1                        /* the producer has 40 registers) */
                for (int r = 0; r < BM; r++) prefetch_l2(aux + (size_t)(m0 + r) * ldc + n0, BN * 2);
            for (int kt = 0; kt < nk; kt++) {
                const uint32_t full = full0 + 8u * s, sa = base + (uint32_t)(s * STAGE), sb = sa + A_BYTES;
                /* the next tile's claim, its round trip to L2 under this tile's last loads */
                if (ctr && kt == (nk > DT_GT_CLAIM_AHEAD ? nk - DT_GT_CLAIM_AHEAD : 0)) claim = atomicAdd(ctr, 1);
                mbar_wait(empty0 + 8u * s, ph ^ 1u);
                mbar_expect_tx(full, (uint32_t)STAGE);
                tma_load(sa, &map_a, full, kt * DT_GT_BK, m0);
                if (MN == 0) tma_load(sb, &map_b, full, kt * DT_GT_BK, n0);
                else
#pragma unroll
                    for (int c = 0; c < BN / 64; c++) tma_load(sb + 8192u * c, &map_b, full, n0 + 64 * c, kt * DT_GT_BK);
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1u;
                }
            }
        }
        return;
    }

    /* the consumers (232 registers: with the producer's 40, the 64 K of the SM's file) */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int lead = (tid & 127) == 0, wlead = lane == 0; /* the ping-pong turn; this warp's epilogue TMA */
    /* This warp's part of its warpgroup's NBUF staging buffers (64 rows x 128 bytes, 128-byte
     * swizzle): rows 16 warp .. + 15 of each, 2 KB at byte 2048 warp (1024-aligned, so the
     * swizzle of row r is r % 8 = g as before), and the barriers its aux loads arrive on. */
    const uint32_t stg = stg0 + (uint32_t)(cw * NBUF * 8192 + warp * DT_GT_EPI_ROWS * 128);
    const uint32_t ebar = ebar0 + 8u * (uint32_t)((cw * 4 + warp) * NBUF);
    uint32_t eph = 0; /* bit b: the parity of staging buffer b's next aux load */
    float d[MS][BN / 2];
    constexpr int NV = CSUM ? DT_GT_CSUM_VALUES(BN) : 1; /* dGELU's column sums (CSUM) */
    float cs[NV];
    /* The block's local tiles, from the tile queue: cooperative, every one; ping-pong,
     * every other one. Local tile j's K steps are the ring's fills q = j nk .. j nk + nk - 1,
     * the producer's order. */
    for (int j = PP ? cw : 0;; j += PP ? 2 : 1) {
        const uint32_t slot = (uint32_t)(j % DT_GT_TQ);
        /* at most one phase ahead: slot j % TQ's post j - TQ was read by this warpgroup, and
         * post j + TQ waits until every reader of post j has arrived */
        mbar_wait(tqf0 + 8u * slot, (uint32_t)((j / DT_GT_TQ) & 1));
        int tile = 0;
        if (lane == 0) {
            asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(tile) : "r"(tqv0 + 4u * slot) : "memory");
            mbar_arrive(tqe0 + 8u * slot);
        }
        tile = __shfl_sync(0xffffffffu, tile, 0);
        if (tile < 0) break;
        int q = j * nk;
        int m0, n0;
        dt_gt_tile(tile, N, BM, BN, &m0, &n0);
        const int mrow = PP ? m0 : m0 + cw * 64; /* this warpgroup's first row */
        /* DOT: the index and lse of this thread's rows of each chunk (lane t = 0 of a quad;
         * the others hold 0), the loads in flight during the products */
        int row_r[EPI == DT_CU_EPI_DOT ? CHUNKS : 1][2];
        float lse_r[EPI == DT_CU_EPI_DOT ? CHUNKS : 1][2];
        if (EPI == DT_CU_EPI_DOT)
#pragma unroll
            for (int c = 0; c < CHUNKS; c++)
#pragma unroll
                for (int h8 = 0; h8 < 2; h8++) {
                    const int r = lane & 3 ? 0 : dot_row(mrow + 64 * (c / NCH) + DT_GT_EPI_ROWS * warp + g + 8 * h8,
                                                         (n0 + 64 * (c % NCH)) / 64, N / 64, dot_T);
                    row_r[c][h8] = r;
                    lse_r[c][h8] = lane & 3 ? 0.0f : __ldg(dot_lse + r);
                }
        if (AUX_IN && wlead) { /* the first aux chunks load during the products */
            bulk_wait_read<0>();              /* this warp's stores of the last tile have read the buffers */
#pragma unroll
            for (int b = 0; b < (NBUF < CHUNKS ? NBUF : CHUNKS); b++) {
                mbar_expect_tx(ebar + 8u * b, DT_GT_EPI_ROWS * 128);
                tma_load(stg + 8192u * b, &map_x, ebar + 8u * b, n0 + 64 * (b % NCH),
                         mrow + 64 * (b / NCH) + DT_GT_EPI_ROWS * warp);
            }
        }
        /* the bias of this thread's columns 8 n + 2 t, + 1 (bf16 pairs), in flight during the
         * products: loaded once a tile, not once a chunk and output */
        constexpr int NB = AUX_IN ? 1 : BN / 8;
        uint32_t bw[NB];
        if (!AUX_IN && bias)
#pragma unroll
            for (int n = 0; n < NB; n++) bw[n] = __ldg(reinterpret_cast<const unsigned int *>(bias + n0 + 8 * n + 2 * t));
        /* Ping-pong: the products of local tile j start once the other warpgroup has issued
         * those of tile j - 1 (its (j - 1) / 2-th turn). The tiles' K loops so run one after
         * another, which is what keeps every wait on a full barrier at most one phase ahead
         * of it (a parity wait further ahead would pass on an older phase), and one
         * warpgroup's epilogue runs under the other's products. */
        if (PP && j > 0) mbar_wait(turn0 + 8u * (uint32_t)(cw ^ 1), (uint32_t)((j - 1) >> 1) & 1u);
        int prev = 0;
        for (int kt = 0; kt < nk; kt++, q++) {
            const int s = q % STAGES;
            mbar_wait(full0 + 8u * s, (uint32_t)(q / STAGES) & 1u);
            const uint32_t sa = base + (uint32_t)(s * STAGE) + (uint32_t)(PP ? 0 : cw * 8192), sb = base + (uint32_t)(s * STAGE) + A_BYTES;
            /* A: K-major, SBO 1024 (8 rows of 128 bytes), a 16-wide k step +32 bytes (+2
             * encoded), rows 64..127 (MS 2) 8 KB on. B K-major: the same over its BN rows;
             * MN-major: LBO = one 64-column block (8 KB), SBO 1024 (8 k rows), a k step +16
             * rows = 2048 bytes (+128). Each accumulator d[ms] takes its k steps in order. */
            uint64_t da[MS];
#pragma unroll
            for (int ms = 0; ms < MS; ms++) da[ms] = dt_wgmma_desc(sa + 8192u * ms, 16, 1024, DT_WGMMA_SWIZZLE_128B);
            const uint64_t db = MN ? dt_wgmma_desc(sb, 8192, 1024, DT_WGMMA_SWIZZLE_128B)
                                   : dt_wgmma_desc(sb, 16, 1024, DT_WGMMA_SWIZZLE_128B);
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; k++)
#pragma unroll
                for (int ms = 0; ms < MS; ms++)
                    wgmma_n<MN>(d[ms], da[ms] + (uint64_t)(2 * k), db + (uint64_t)(MN ? 128 * k : 2 * k), kt > 0 || k > 0);
            wg_commit();
            if (kt > 0) { /* the step before is done in this warp: its stage may be refilled */
                wg_wait1();
                if (lane == 0) mbar_arrive(empty0 + 8u * prev);
            }
            prev = s;
        }
        if (PP && lead) mbar_arrive(turn0 + 8u * (uint32_t)cw); /* every full wait of this tile passed */
        wg_wait0();
#pragma unroll
        for (int ms = 0; ms < MS; ms++) reg_fence(d[ms]);
        if (lane == 0) mbar_arrive(empty0 + 8u * prev);

        /* Epilogue, chunk by chunk through the staging buffers, each warp on its own: d[ms][4 n
         * + i] is row 64 ms + 16 warp + g + 8 (i >> 1), column 8 n + 2 t + (i & 1) of this
         * warpgroup's WM x BN; its bf16 pairs go to the buffer in the 128-byte swizzle (the
         * 16-byte piece j of row r at piece j ^ (r % 8): the 32 threads of a warp hit 32
         * banks), then the warp's lane 0 writes the warp's 16 x 64 box by one TMA store, in
         * its own bulk groups: no warp waits for another (one 64 x 64 box a warpgroup would
         * make every warp wait at a barrier before each store).
         * dGELU and DOT load their aux chunk into the buffer by TMA and the output overwrites
         * it in place (each thread the same addresses); DEFAULT and GELU take the buffers in a
         * fixed turn, OUTS a chunk, and wait, before writing, for the stores that read them
         * NBUF stores ago. */
        const uint32_t off0 = (uint32_t)(g * 128 + 4 * t), off1 = off0 + 8u * 128u;
        constexpr int OUTS = EPI == DT_CU_EPI_GELU ? 2 : 1;
        static_assert(AUX_IN || (CHUNKS * OUTS) % NBUF == 0, "a tile's stores end on the last buffer");
#pragma unroll
        for (int i = 0; i < NV; i++) cs[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int ms = c / NCH, ch = c % NCH, row = mrow + 64 * ms + DT_GT_EPI_ROWS * warp, col = n0 + 64 * ch;
            if (AUX_IN) {
                const int b = c % NBUF;
                float dg = 0.0f, dh = 0.0f; /* DOT: this lane's chains of rows g and g + 8 */
                const uint32_t buf = stg + 8192u * b;
                mbar_wait(ebar + 8u * b, (eph >> b) & 1u);
                eph ^= 1u << b;
                /* the thread's aux words of the chunk first, all 16: the loads are ordered
                 * volatile asm, so a load after the last j's stores would hold each j's
                 * arithmetic back behind the one before (one j's 4 chains at a time) */
                uint32_t p[8][2];
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const uint32_t sw = (uint32_t)((j ^ g) << 4);
                    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(p[j][0]) : "r"(buf + off0 + sw));
                    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(p[j][1]) : "r"(buf + off1 + sw));
                }
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int n = ch * 8 + j;
                    const uint32_t sw = (uint32_t)((j ^ g) << 4);
                    const float2 q0 = bf16x2_floats(p[j][0]), q1 = bf16x2_floats(p[j][1]);
                    const int dgelu = EPI == DT_CU_EPI_DGELU; /* else DOT: C as it is */
                    const float v00 = dgelu ? __fmul_rn(d[ms][4 * n], gelu_grad(q0.x)) : d[ms][4 * n];
                    const float v01 = dgelu ? __fmul_rn(d[ms][4 * n + 1], gelu_grad(q0.y)) : d[ms][4 * n + 1];
                    const float v10 = dgelu ? __fmul_rn(d[ms][4 * n + 2], gelu_grad(q1.x)) : d[ms][4 * n + 2];
                    const float v11 = dgelu ? __fmul_rn(d[ms][4 * n + 3], gelu_grad(q1.y)) : d[ms][4 * n + 3];
                    __nv_bfloat162 o0 = __floats2bfloat162_rn(v00, v01), o1 = __floats2bfloat162_rn(v10, v11);
                    if (EPI == DT_CU_EPI_DOT) { /* dO as stored times O */
                        const float2 e0 = bf16x2_floats(*reinterpret_cast<uint32_t *>(&o0));
                        const float2 e1 = bf16x2_floats(*reinterpret_cast<uint32_t *>(&o1));
                        dg = __fmaf_rn(e0.y, q0.y, __fmaf_rn(e0.x, q0.x, dg));
                        dh = __fmaf_rn(e1.y, q1.y, __fmaf_rn(e1.x, q1.x, dh));
                    }
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(buf + off0 + sw), "r"(*reinterpret_cast<uint32_t *>(&o0)));
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(buf + off1 + sw), "r"(*reinterpret_cast<uint32_t *>(&o1)));
                    if (CSUM) { /* the fp32 values before their rounding, row g then row g + 8 */
                        const int i = (16 * ch + 2 * j) % NV;
                        cs[i] = __fadd_rn(__fadd_rn(cs[i], v00), v10);
                        cs[i + 1] = __fadd_rn(__fadd_rn(cs[i + 1], v01), v11);
                    }
                }
                fence_proxy_async();
                __syncwarp();
                if (wlead) {
                    tma_store(&map_c, buf, col, row);
                    bulk_commit();
                    if (c + NBUF < CHUNKS) { /* chunk c + NBUF into this buffer, once read */
                        bulk_wait_read<0>();
                        mbar_expect_tx(ebar + 8u * b, DT_GT_EPI_ROWS * 128);
                        tma_load(buf, &map_x, ebar + 8u * b, n0 + 64 * ((c + NBUF) % NCH),
                                 mrow + 64 * ((c + NBUF) / NCH) + DT_GT_EPI_ROWS * warp);
                    }
                }
                if (EPI == DT_CU_EPI_DOT) { /* the chunk's 64 columns are one head */
                    dot_store(dot_ld, lse_r[c][0], dg, row_r[c][0], lane);
                    dot_store(dot_ld, lse_r[c][1], dh, row_r[c][1], lane);
                }
            } else {
                /* GELU: aux (the pre-activation) into buffer bx, GELU into bc; DEFAULT: C into bc.
                 * One bulk group a chunk: the buffers' last stores are NBUF / OUTS groups ago. */
                const uint32_t bx = stg + 8192u * (uint32_t)((c * OUTS) % NBUF);
                const uint32_t bc = stg + 8192u * (uint32_t)((c * OUTS + OUTS - 1) % NBUF);
                if (wlead) bulk_wait_read<NBUF / OUTS - 1>();
                __syncwarp();
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int n = ch * 8 + j;
                    const uint32_t sw = (uint32_t)((j ^ g) << 4);
                    float a0 = d[ms][4 * n], a1 = d[ms][4 * n + 1], b0 = d[ms][4 * n + 2], b1 = d[ms][4 * n + 3];
                    if (bias) {
                        const float2 bv = bf16x2_floats(bw[n]);
                        a0 = __fadd_rn(a0, bv.x);
                        a1 = __fadd_rn(a1, bv.y);
                        b0 = __fadd_rn(b0, bv.x);
                        b1 = __fadd_rn(b1, bv.y);
                    }
                    if (EPI == DT_CU_EPI_GELU) {
                        __nv_bfloat162 x0 = __floats2bfloat162_rn(a0, a1), x1 = __floats2bfloat162_rn(b0, b1);
                        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(bx + off0 + sw), "r"(*reinterpret_cast<uint32_t *>(&x0)));
                        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(bx + off1 + sw), "r"(*reinterpret_cast<uint32_t *>(&x1)));
                        a0 = gelu_f(a0);
                        a1 = gelu_f(a1);
                        b0 = gelu_f(b0);
                        b1 = gelu_f(b1);
                    }
                    __nv_bfloat162 o0 = __floats2bfloat162_rn(a0, a1), o1 = __floats2bfloat162_rn(b0, b1);
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(bc + off0 + sw), "r"(*reinterpret_cast<uint32_t *>(&o0)));
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(bc + off1 + sw), "r"(*reinterpret_cast<uint32_t *>(&o1)));
                }
                fence_proxy_async();
                __syncwarp();
                if (wlead) {
                    if (EPI == DT_CU_EPI_GELU) tma_store(&map_x, bx, col, row);
                    tma_store(&map_c, bc, col, row);
                    bulk_commit();
                }
            }
        }
        if (CSUM) { /* the warp's column sums: three halving steps across g, then one partial row */
            csum_halve<NV / 2, 0>(cs, lane);
            csum_halve<NV / 4, 1>(cs, lane);
            csum_halve<NV / 8, 2>(cs, lane);
            float *dst = csum_part + (size_t)dt_gt_csum_part(SCH, mrow, warp) * N + n0;
#pragma unroll
            for (int k = 0; k < NV / 8; k += 2)
                *reinterpret_cast<float2 *>(dst + dt_gt_csum_col(BN, g, t, k)) = make_float2(cs[k], cs[k + 1]);
        }
    }
    if (wlead) bulk_wait_all(); /* this warp's stores are done before the block's shared memory goes */
}

/* ---- the launcher ----------------------------------------------------------------------- */
/* cuTensorMapEncodeTiled, from the driver through the runtime (the binaries link the runtime
 * statically and not the driver library). */
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static dt_status encode(CUtensorMap *out, const void *p, dt_gt_map m, const char *what) {
    static encode_fn fn;
    if (!fn) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !f)
            return dt_fail(DT_EUNSUPPORTED, "dt_cu_gemm_wgmma: the driver has no cuTensorMapEncodeTiled (CUDA 12 or "
                                            "newer needed): call dt_cu_gemm");
        fn = (encode_fn)f;
    }
    const cuuint64_t dim[2] = {m.dim[0], m.dim[1]}, stride[1] = {m.stride};
    const cuuint32_t box[2] = {m.box[0], m.box[1]}, estride[2] = {1, 1};
    CUresult r = fn(out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dim, stride, box, estride,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return dt_fail(DT_EUNSUPPORTED, "dt_cu_gemm_wgmma: cuTensorMapEncodeTiled refused %s (%llu x %llu, row "
                       "stride %llu bytes): error %d",
                       what, (unsigned long long)m.dim[1], (unsigned long long)m.dim[0], (unsigned long long)m.stride,
                       (int)r);
    return DT_OK;
}

static int g_force;  /* dt_cu_gemm_wgmma_force: a DT_CU_GEMM_OWN_* schedule */
static int g_static; /* dt_cu_gemm_wgmma_static: tiles in the fixed order, no counter */
/* The tile counters (gemm_tma_plan.h: dynamic tiles), zero when the module loads and put
 * back to zero by the last claim of each launch; g_launches picks the next one (one host
 * thread launches, as for the other settings here). */
__device__ int g_tile_ctr[DT_GT_COUNTERS * DT_GT_COUNTER_STRIDE];
static unsigned g_launches;
static_assert(DT_CU_GEMM_OWN_COOP256 == DT_GT_COOP256 && DT_CU_GEMM_OWN_COOP128 == DT_GT_COOP128 &&
                  DT_CU_GEMM_OWN_PINGPONG256 == DT_GT_PP64 && DT_CU_GEMM_OWN_PINGPONG128 == DT_GT_PP128 &&
                  DT_CU_GEMM_OWN_COUNT == DT_GT_SCHEDULES,
              "gemm_cuda.h's schedule names are gemm_tma_plan.h's values");

void dt_cu_gemm_wgmma_force(int schedule) {
    g_force = schedule > 0 && schedule < DT_CU_GEMM_OWN_COUNT ? schedule : DT_CU_GEMM_OWN_RULE;
}
void dt_cu_gemm_wgmma_static(int on) { g_static = on != 0; }

/* The tensor maps are made per call on the host (a few hundred ns, no device work) and go
 * to the kernel by value as __grid_constant__ parameters: nothing to cache or to go stale
 * when a buffer moves, and a captured CUDA graph holds its own copy. The tile counter's
 * address is a parameter too: a graph replays the launch with the counter it was captured
 * with, which the launch before left at zero. */
template <int SCH, int MN, int EPI, int CSUM>
static dt_status launch(const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs) {
    static const char *const names[DT_GT_SCHEDULES] = {
        "", "gemm_tma_kernel coop 128x256", "gemm_tma_kernel coop 128x128", "gemm_tma_kernel pingpong 64x256",
        "gemm_tma_kernel pingpong 128x128"};
    static int attr_set;
    constexpr int BM = DT_GT_BM(SCH), BN = DT_GT_BN(SCH);
    const int smem = dt_gt_smem_bytes(SCH);
    if (!attr_set) {
        DT_CU_TRY(cudaFuncSetAttribute(gemm_tma_kernel<SCH, MN, EPI, CSUM>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       smem));
        attr_set = 1;
    }
    CUtensorMap ma, mb, mc, mx;
    dt_status st = encode(&ma, a->A, dt_gt_map_a(a->M, a->K, a->lda, BM), "A");
    if (st == DT_OK) st = encode(&mb, a->B, dt_gt_map_b(!MN, a->N, a->K, a->ldb, BN), "B");
    if (st == DT_OK) st = encode(&mc, a->C, dt_gt_map_c(a->M, a->N, a->ldc), "C");
    /* without aux (DEFAULT) the kernel never touches map_x: C's map stands in */
    if (st == DT_OK) st = a->aux ? encode(&mx, a->aux, dt_gt_map_c(a->M, a->N, a->ldc), "aux") : (mx = mc, DT_OK);
    if (st != DT_OK) return st;
    int dev = 0, sms = 0;
    DT_CU_TRY(cudaGetDevice(&dev));
    DT_CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    int *ctr = NULL; /* this device's pool (the symbol has an address on each device) */
    if (!g_static) {
        static int *pool[64];
        if (dev < 0 || dev >= 64) return dt_fail(DT_EUNSUPPORTED, "dt_cu_gemm_wgmma: device %d is past the 64 that have tile counters: call dt_cu_gemm", dev);
        if (!pool[dev]) DT_CU_TRY(cudaGetSymbolAddress((void **)&pool[dev], g_tile_ctr));
        ctr = pool[dev] + (size_t)(g_launches++ % DT_GT_COUNTERS) * DT_GT_COUNTER_STRIDE;
    }
    dim3 grid((unsigned)dt_gt_grid(dt_gt_tiles(a->M, a->N, BM, BN), sms));
    gemm_tma_kernel<SCH, MN, EPI, CSUM><<<dt_cu_noted(grid, DT_GT_THREADS, (size_t)smem, names[SCH]), DT_GT_THREADS,
                                         (size_t)smem, s>>>(ma, mb, mc, mx, a->ldc, a->bias, (bf16 *)a->aux, a->M,
                                                            a->N, a->K, ctr, a->csum_part, a->dot_ld, a->dot_lse,
                                                            a->dot_T);
    if (CSUM) dt_cu_colsum_finish(a->csum, a->csum_part, dt_gt_csum_parts(SCH, a->M), a->N, s, fs);
    return DT_OK;
}

template <int SCH> static dt_status dispatch(const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs) {
    if (a->tb) {
        if (a->epi == DT_CU_EPI_GELU) return launch<SCH, 0, DT_CU_EPI_GELU, 0>(a, s, fs);
        if (a->epi == DT_CU_EPI_DGELU)
            return a->csum ? launch<SCH, 0, DT_CU_EPI_DGELU, 1>(a, s, fs) : launch<SCH, 0, DT_CU_EPI_DGELU, 0>(a, s, fs);
        if (a->epi == DT_CU_EPI_DOT) return launch<SCH, 0, DT_CU_EPI_DOT, 0>(a, s, fs);
        return launch<SCH, 0, DT_CU_EPI_DEFAULT, 0>(a, s, fs);
    }
    if (a->epi == DT_CU_EPI_GELU) return launch<SCH, 1, DT_CU_EPI_GELU, 0>(a, s, fs);
    if (a->epi == DT_CU_EPI_DGELU)
        return a->csum ? launch<SCH, 1, DT_CU_EPI_DGELU, 1>(a, s, fs) : launch<SCH, 1, DT_CU_EPI_DGELU, 0>(a, s, fs);
    if (a->epi == DT_CU_EPI_DOT) return launch<SCH, 1, DT_CU_EPI_DOT, 0>(a, s, fs);
    return launch<SCH, 1, DT_CU_EPI_DEFAULT, 0>(a, s, fs);
}

size_t dt_cu_gemm_wgmma_csum_floats(int M, int N, int K) {
    const int sch = dt_gt_schedule(N, K, g_force);
    return sch > 0 && M > 0 && N > 0 ? (size_t)dt_gt_csum_parts(sch, M) * (size_t)N : 0;
}

dt_status dt_cu_gemm_wgmma_fin(const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs) {
    if (!dt_cu_gemm_wgmma_fits(a->ta, a->tb, a->M, a->N, a->K, a->lda, a->ldb, a->ldc, a->c_f32, a->alpha, a->beta,
                               a->batch, a->epi, (const void *)a->A, (const void *)a->B, a->C, (const void *)a->bias,
                               a->aux))
        return dt_fail(DT_EINVAL, "dt_cu_gemm_wgmma: a %s %dx%dx%d GEMM (epilogue %d) does not fit the 128 x 128 x 64 "
                       "tiles: call dt_cu_gemm", a->tb ? "NT" : "NN", a->M, a->N, a->K, a->epi);
    if ((a->csum != NULL) != (a->csum_part != NULL) || (a->csum && a->epi != DT_CU_EPI_DGELU) ||
        ((uintptr_t)a->csum_part % 16))
        return dt_fail(DT_EINVAL, "dt_cu_gemm_wgmma: the column sum needs the dGELU epilogue, csum and a 16-byte "
                       "aligned csum_part of dt_cu_gemm_wgmma_csum_floats floats (csum %s, csum_part %s, epilogue %d)",
                       a->csum ? "set" : "NULL", a->csum_part ? "set" : "NULL", a->epi);
    if ((a->epi == DT_CU_EPI_DOT) != (a->dot_ld != NULL) ||
        (a->epi == DT_CU_EPI_DOT && (!a->dot_lse || a->dot_T <= 0 || a->dot_T % 2 || a->M % a->dot_T ||
                                     (long long)a->M * (a->N / 64) > INT_MAX)))
        return dt_fail(DT_EINVAL, "dt_cu_gemm_wgmma: the DOT epilogue needs dot_ld, dot_lse, an even dot_T that "
                       "divides M and fewer than 2^31 rows of heads (dot_ld %s, dot_lse %s, dot_T %d, M %d, epilogue "
                       "%d); other epilogues take no dot_ld",
                       a->dot_ld ? "set" : "NULL", a->dot_lse ? "set" : "NULL", a->dot_T, a->M, a->epi);
    switch (dt_gt_schedule(a->N, a->K, g_force)) {
    case DT_GT_COOP256: return dispatch<DT_GT_COOP256>(a, s, fs);
    case DT_GT_COOP128: return dispatch<DT_GT_COOP128>(a, s, fs);
    case DT_GT_PP64: return dispatch<DT_GT_PP64>(a, s, fs);
    case DT_GT_PP128: return dispatch<DT_GT_PP128>(a, s, fs);
    default:
        return dt_fail(DT_EINVAL, "dt_cu_gemm_wgmma: N %d is not a multiple of the forced schedule's 256-wide tile",
                       a->N);
    }
}

dt_status dt_cu_gemm_wgmma(const dt_cu_gemm_args *a, cudaStream_t s) { return dt_cu_gemm_wgmma_fin(a, s, s); }
