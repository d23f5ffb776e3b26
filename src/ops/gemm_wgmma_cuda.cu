/* Row-major bf16 GEMMs with fused epilogues on Hopper's warpgroup MMA (wgmma.mma_async,
 * sm_90a): dt_cu_gemm_wgmma (ops_cuda.h), for the model's activation GEMMs whose shapes
 * tile exactly (dt_cu_gemm_wgmma_fits, cuda_plan.c): the linears' forward (B = W stored
 * (N, K): K-major) and input gradient (B = W stored (K, N): MN-major), with the bias, GELU
 * (aux out) and dGELU (aux in) epilogues of dt_cu_gemm_args. This file alone with
 * attention_wgmma_cuda.cu is compiled for sm_90a (Makefile: WGMMA_OBJ).
 *
 * A block computes a 128 x 128 tile of C with two consumer warpgroups (rows 0..63 and
 * 64..127), each issuing wgmma m64n128k16 with both operands in shared memory, walking K in
 * 64-wide steps through a 3-stage cp.async ring (each thread fences its copies into the
 * async proxy before the barrier that publishes them; a step's products stay in flight
 * while the stage of the step before is refilled). Tiles of 128-byte rows in the 128-byte
 * swizzle (wgmma_desc.h): A and a K-major B as rows of 64 k; an MN-major B as two 64 k x
 * 64 n halves (LBO = one half). 96 KB of shared memory and at most 128 registers a thread:
 * two blocks an SM, so one block's epilogue and barriers overlap the other's products. The
 * epilogue goes through shared memory so that C and aux move in 16-byte pieces; its GELU
 * uses the hardware tanh approximation.
 *
 * Determinism: one block owns each output element; its products reduce over the K steps in
 * order inside the tensor core (the same instruction sequence on every launch, whatever the
 * GPU's SM count); the epilogue is elementwise. No atomics, no split of K. */
#include "ops/ops_cuda.h"
#include "ops/cuda_plan.h"
#include "ops/wgmma_desc.h"

#include <stdint.h>

#define GB 128                    /* rows and columns of a block's C tile */
#define GK 64                     /* K per step: one 128-byte row of bf16 */
#define GSTAGES 3
#define GHALF 8192                /* bytes of 64 rows x 128 bytes */
#define GSTAGE (4 * GHALF)        /* A (128 x 64) + B (128 x 64 or 64 x 128) */
#define GSMEM (GSTAGES * GSTAGE + 1024)
#define GELU_K 0.7978845608028654f /* sqrt(2/pi), as gelu_cuda.cu */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
static __device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_wait1(void) { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
static __device__ __forceinline__ void cp_wait0(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
static __device__ __forceinline__ void fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_wait0(void) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_wait1(void) {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
static __device__ __forceinline__ void reg_fence(float d[64]) {
#pragma unroll
    for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_D64                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                          \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_R8(k, o) k(d[o]), k(d[o + 1]), k(d[o + 2]), k(d[o + 3]), k(d[o + 4]), k(d[o + 5]), k(d[o + 6]), k(d[o + 7])
#define WG_REGS64(k)                                                                                           \
    WG_R8(k, 0), WG_R8(k, 8), WG_R8(k, 16), WG_R8(k, 24), WG_R8(k, 32), WG_R8(k, 40), WG_R8(k, 48), WG_R8(k, 56)

/* d (64 x 128 fp32: 64 a thread) = A B (+ d when accumulate), A (64 x 16) K-major and B
 * (16 x 128) K-major (TB = 0) or MN-major (TB = 1), both in shared memory. */
template <int TB>
static __device__ __forceinline__ void wgmma_128(float d[64], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_D64 ", %64, %65, p, 1, 1, 0, %67;\n}\n"
                 : WG_REGS64("+f")
                 : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}

/* One K step's tiles into stage memory st (1024-byte aligned): A rows m0.. (128 x 64), B
 * K-major rows n0.. (128 x 64) or MN-major rows k0.. (64 x 128, two 64-column halves).
 * 256 threads, 8 16-byte copies each. */
template <int TB>
static __device__ __forceinline__ void load_step(unsigned char *st, const bf16 *A, int lda, const bf16 *B, int ldb,
                                                 int m0, int n0, int k0) {
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int u = 0; u < 4; u++) {
        int i = tid + 256 * u, r = i >> 3, c = i & 7; /* r 0..127 */
        cp_async16(st + dt_wgmma_sw128((uint32_t)r, (uint32_t)c), A + (size_t)(m0 + r) * lda + k0 + c * 8);
    }
    unsigned char *sb = st + 2 * GHALF;
    if (TB == 0) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int i = tid + 256 * u, r = i >> 3, c = i & 7;
            cp_async16(sb + dt_wgmma_sw128((uint32_t)r, (uint32_t)c), B + (size_t)(n0 + r) * ldb + k0 + c * 8);
        }
    } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int i = tid + 256 * u, r = i >> 4, c = i & 15; /* r: k row 0..63, c: 16-byte chunk of n */
            cp_async16(sb + (c >> 3) * GHALF + dt_wgmma_sw128((uint32_t)r, (uint32_t)(c & 7)),
                       B + (size_t)(k0 + r) * ldb + n0 + c * 8);
        }
    }
}

/* tanh by the hardware approximation (tanh.approx.f32: max relative error about 2^-11, far
 * below the bf16 rounding of the outputs; one instruction instead of tanhf's ~20, which
 * would cost the epilogue as much as the products). */
static __device__ __forceinline__ float tanh_fast(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanh_fast(GELU_K * (x + 0.044715f * x * x * x)));
}
static __device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x), th = tanh_fast(u), sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Grid (N / 128, M / 128): block (x, y) owns C rows 128 y.., columns 128 x..; 256 threads,
 * GSMEM bytes of dynamic shared memory. EPI: DT_CU_EPI_DEFAULT (bias may be NULL),
 * DT_CU_EPI_GELU, DT_CU_EPI_DGELU. */
template <int TB, int EPI>
__global__ void __launch_bounds__(256, 2)
    gemm_wgmma_kernel(bf16 *C, int ldc, const bf16 *A, int lda, const bf16 *B, int ldb, int K, const bf16 *bias,
                      bf16 *aux) {
    extern __shared__ __align__(1024) unsigned char gsm_raw[];
    const uint32_t raw = smem_u32(gsm_raw), pad = (1024u - (raw & 1023u)) & 1023u;
    unsigned char *sm = gsm_raw + pad;
    const uint32_t s0 = raw + pad;
    const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
              t = lane & 3;
    const int m0 = (int)blockIdx.y * GB, n0 = (int)blockIdx.x * GB, nk = K / GK;
    load_step<TB>(sm, A, lda, B, ldb, m0, n0, 0);
    cp_commit();
    if (nk > 1) load_step<TB>(sm + GSTAGE, A, lda, B, ldb, m0, n0, GK);
    cp_commit();
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    reg_fence(d);
    /* Step kt: wait for its tiles, issue its products, then wait until only they are in
     * flight (step kt - 1's are done in both warpgroups after the second barrier) and
     * refill kt - 1's stage with step kt + 2. */
    int st = 0;
    for (int kt = 0; kt < nk; kt++) {
        cp_wait1();          /* this thread's copies of step kt are done */
        fence_proxy_async(); /* ... and ordered before the tensor cores' reads */
        __syncthreads();     /* everyone's are */
        const uint32_t sa = s0 + (uint32_t)(st * GSTAGE) + (uint32_t)(wg * GHALF), sb = s0 + (uint32_t)(st * GSTAGE) + 2 * GHALF;
        /* A: K-major, SBO 1024 (8 rows of 128 bytes), a 16-wide k step +32 bytes (+2 encoded).
         * B K-major: the same over its 128 n rows; MN-major: LBO = one 64-column half, SBO
         * 1024 (8 k rows), a k step +16 rows = 2048 bytes (+128 encoded). */
        const uint64_t da = dt_wgmma_desc(sa, 16, 1024, DT_WGMMA_SWIZZLE_128B);
        const uint64_t db = TB ? dt_wgmma_desc(sb, GHALF, 1024, DT_WGMMA_SWIZZLE_128B)
                               : dt_wgmma_desc(sb, 16, 1024, DT_WGMMA_SWIZZLE_128B);
        wg_fence(); /* (no register fence on d here: products of step kt - 1 may be in flight) */
#pragma unroll
        for (int k = 0; k < 4; k++)
            wgmma_128<TB>(d, da + (uint64_t)(2 * k), db + (uint64_t)(TB ? 128 * k : 2 * k), kt > 0 || k > 0);
        wg_commit();
        wg_wait1();      /* this warpgroup's step kt - 1 is done */
        __syncthreads(); /* both warpgroups': its stage may be refilled */
        if (kt + 2 < nk) load_step<TB>(sm + (st == 0 ? 2 : st - 1) * GSTAGE, A, lda, B, ldb, m0, n0, (kt + 2) * GK);
        cp_commit(); /* possibly empty: one group a step keeps the wait count fixed */
        st = st == GSTAGES - 1 ? 0 : st + 1;
    }
    wg_wait0();
    reg_fence(d);
    cp_wait0();
    __syncthreads(); /* every product is done: the stages are free for the epilogue */
    /* Epilogue through shared memory: the fp32 tile (rows of GB + 8 floats: the 8 rows of a
     * store land 8 banks apart) is written from the accumulator layout (thread holds
     * d[4 n + i] at row 16 warp + g + 8 (i >> 1), column 8 n + 2 t + (i & 1) of its
     * warpgroup's 64 x 128), then read back 8 columns a thread so that C, aux and bias
     * move in 16-byte pieces, a 256-byte row per half warp. */
    float *tile = reinterpret_cast<float *>(sm);
    const int ldt = GB + 8;
#pragma unroll
    for (int n = 0; n < 16; n++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++)
            *reinterpret_cast<float2 *>(tile + (wg * 64 + warp * 16 + g + 8 * hf) * ldt + 8 * n + 2 * t) =
                make_float2(d[4 * n + 2 * hf], d[4 * n + 2 * hf + 1]);
    __syncthreads();
#pragma unroll 4
    for (int u = 0; u < GB * GB / 8 / 256; u++) {
        const int i = tid + 256 * u, r = i >> 4, c = (i & 15) * 8;
        const size_t off = (size_t)(m0 + r) * ldc + n0 + c;
        float x[8];
        const float4 lo = *reinterpret_cast<const float4 *>(tile + r * ldt + c);
        const float4 hi = *reinterpret_cast<const float4 *>(tile + r * ldt + c + 4);
        x[0] = lo.x; x[1] = lo.y; x[2] = lo.z; x[3] = lo.w; x[4] = hi.x; x[5] = hi.y; x[6] = hi.z; x[7] = hi.w;
        if (EPI != DT_CU_EPI_DGELU && bias) {
            dt_bf16x8 bv = dt_ld8(bias + n0 + c);
#pragma unroll
            for (int k = 0; k < 8; k++) x[k] = __fadd_rn(x[k], __bfloat162float(bv.v[k]));
        }
        dt_bf16x8 o;
        if (EPI == DT_CU_EPI_GELU) {
            dt_bf16x8 pre;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                pre.v[k] = __float2bfloat16(x[k]);
                o.v[k] = __float2bfloat16(gelu_f(x[k]));
            }
            dt_st8(aux + off, pre);
        } else if (EPI == DT_CU_EPI_DGELU) {
            dt_bf16x8 pre = dt_ld8(aux + off);
#pragma unroll
            for (int k = 0; k < 8; k++) o.v[k] = __float2bfloat16(__fmul_rn(x[k], gelu_grad(__bfloat162float(pre.v[k]))));
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) o.v[k] = __float2bfloat16(x[k]);
        }
        dt_st8(C + off, o);
    }
}

/* The kernels need more than 48 KB of shared memory: raised once per kernel. */
template <int TB, int EPI> static void launch(const dt_cu_gemm_args *a, cudaStream_t s) {
    static int attr_set;
    if (!attr_set) {
        cudaFuncSetAttribute(gemm_wgmma_kernel<TB, EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize, GSMEM);
        attr_set = 1;
    }
    dim3 grid((unsigned)(a->N / GB), (unsigned)(a->M / GB));
    gemm_wgmma_kernel<TB, EPI><<<dt_cu_noted(grid, 256, GSMEM, "gemm_wgmma_kernel"), 256, GSMEM, s>>>(
        (bf16 *)a->C, a->ldc, a->A, a->lda, a->B, a->ldb, a->K, a->bias, (bf16 *)a->aux);
}

dt_status dt_cu_gemm_wgmma(const dt_cu_gemm_args *a, cudaStream_t s) {
    if (!dt_cu_gemm_wgmma_fits(a->ta, a->tb, a->M, a->N, a->K, a->lda, a->ldb, a->ldc, a->c_f32, a->alpha, a->beta,
                               a->batch, a->epi, (const void *)a->A, (const void *)a->B, a->C, (const void *)a->bias,
                               a->aux))
        return dt_fail(DT_EINVAL, "dt_cu_gemm_wgmma: a %s %dx%dx%d GEMM (epilogue %d) does not fit the 128 x 128 x 64 "
                       "tiles: call dt_cu_gemm", a->tb ? "NT" : "NN", a->M, a->N, a->K, a->epi);
    if (a->tb) {
        if (a->epi == DT_CU_EPI_GELU) launch<0, DT_CU_EPI_GELU>(a, s);
        else if (a->epi == DT_CU_EPI_DGELU) launch<0, DT_CU_EPI_DGELU>(a, s);
        else launch<0, DT_CU_EPI_DEFAULT>(a, s);
    } else {
        if (a->epi == DT_CU_EPI_GELU) launch<1, DT_CU_EPI_GELU>(a, s);
        else if (a->epi == DT_CU_EPI_DGELU) launch<1, DT_CU_EPI_DGELU>(a, s);
        else launch<1, DT_CU_EPI_DEFAULT>(a, s);
    }
    return DT_OK;
}
