/* GPU bit-exact replays (DESIGN §4, §5) through the kernel harness's CUDA backend
 * (kernels/harness.h, kernels/harness_cuda.h): every det/fast op of the GPU model and the
 * whole model's forward + backward + step, each case replayed on fresh device buffers
 * (inputs uploaded, outputs and scratch poisoned with NaN bytes before every replay,
 * downloaded and compared byte for byte), with side-stream GEMMs contending for the SMs.
 *
 * Per case, both branches (deterministic mode on, then off, with no per-op overrides):
 *  - det: 3 replays byte-identical, every output element written, no write into a gap;
 *  - fast, by the case's `fast` class:
 *      FAST_EXACT  no reduction to race (elementwise, row-owned; flash attention, whose
 *                  branches coincide): 3 replays byte-identical;
 *      FAST_RACES  an atomic default path: the negative control, at least one of up to
 *                  CONTROL_REPLAYS replays must differ (the strict check can see the race);
 *      FAST_MAY    the fast path may race (cuBLASLt's first heuristic may split K in place;
 *                  few atomics): the replays are reported, not failed.
 * Sizes follow the rule in kernels/harness.h, at full GPT-2 124M sizes where the race needs
 * them (B*T = 16384 rows, K = 16384, 100M elements, a 50304-row embedding); views are
 * padded (GEMM leading dimensions), batched (strided GEMM batches) and broadcast (the
 * GEMM bias, stride 0 over rows).
 * Accuracy against the CPU is tests/gpu/test_gpu_ops.cu's job, not this file's.
 * Sources covered (src/ops/<family>/): gemm_cuda.cu (and every entry of gemm_table.c), encoder_cuda.cu,
 * layernorm_cuda.cu, reduce_cuda.cu and colsum_cuda.cuh, attention_cuda.cu, attention_flash_cuda.cu,
 * crossentropy_cuda.cu, gelu_cuda.cu, dropout_cuda.cu, adamw_cuda.cu, src/ops/cuda/cuda_common.cuh, and
 * the GPU model (src/model/cuda/: model.cuh, create.cu, linear.cu, forward.cu, backward.cu,
 * step.cu, graphs.cu, streams.cu, trace.cu, describe.cu). */
#include "kernels/harness.h"
#include "kernels/harness_cuda.h"
#include "ops/ops_cuda.h"

#include "model/gpt_cuda.h"
extern "C" {
#include "core/philox.h"
#include "ops/op.h"
#include "dt_test.h"
}

#include <initializer_list>
#include <time.h>
#include <vector>

enum { FAST_EXACT, FAST_RACES, FAST_MAY };
enum { DET_REPLAYS = 3, CONTROL_REPLAYS = 10, CONTENTION = 8 };

typedef struct gcase gcase;
struct gcase {
    const char *op, *config;
    long long p[9];
    void (*setup)(dt_kset *s, gcase *c);
    dt_kh_fn run;
    int fast;
    int aux, aux2; /* set by setup: host-side counts the launcher needs (chunks, runs) */
    void *state;   /* set by setup, freed by teardown (the model case's host model) */
    void (*teardown)(gcase *c);
};

static dt_cu_blas *g_blas; /* a fresh handle (plan cache) per case */
static cudaStream_t g_fin; /* the second stream det finishes run on, as in the model */

/* Adds a view: contiguous when `stride` is empty. */
static dt_kview *add(dt_kset *s, const char *name, dt_kh_dtype dt, dt_kh_role role,
                     std::initializer_list<int64_t> shape, std::initializer_list<int64_t> stride = {},
                     size_t offset = 0) {
    int64_t sh[DT_KH_MAXDIM], st[DT_KH_MAXDIM];
    int nd = 0;
    for (int64_t x : shape) sh[nd++] = x;
    int ns = 0;
    for (int64_t x : stride) st[ns++] = x;
    return dt_kv_role(dt_kset_add(s, name, dt, nd, sh, ns ? st : NULL, offset), role);
}
#define F(s, n) dt_kv_f32(dt_kset_get(s, n))
#define I(s, n) dt_kv_i32(dt_kset_get(s, n))
#define D(s, n) dt_kv_f64(dt_kset_get(s, n))
#define H(s, n) ((bf16 *)dt_kv_bf16(dt_kset_get(s, n)))
#define CASE(ctx) const gcase *c = (const gcase *)(ctx); (void)be
static int det_of(dt_op_id op) { return dt_op_variant(op) == DT_VARIANT_DET; }
static dt_dropout drop_of(long long permille) {
    dt_dropout d = {(float)permille / 1000.0f, 1234, 7};
    return d;
}

/* ---- GEMM: C = op(A) op(B) (+ C) (+ bias) (+ an epilogue), p: M N K ta tb flags batch ---
 * Epilogue flags: G_GELU the GELU_AUX_BIAS forward (writes aux), G_DGELU the dGELU input
 * gradient (reads aux), G_BGRAD the bias gradient of a weight-gradient GEMM (dbias +=, its
 * per-chunk partials finished on the second stream). fp32 outputs take gemm_cuda.cu's own
 * K chunks by dt_cu_gemm_splits (768x768 and 256x256 with K = 16384: 2 and 8 chunks).
 * G_TABLE: the call's plan must come from the GEMM plan table (gemm_table.c); one such case
 * per entry of this device's compute capability (test_plan_table). */
enum { G_F32 = 1, G_ACC = 2, G_BIAS = 4, G_PAD = 8, G_GELU = 16, G_DGELU = 32, G_BGRAD = 64, G_TABLE = 128 };
static void gemm_setup(dt_kset *s, gcase *c) {
    long long M = c->p[0], N = c->p[1], K = c->p[2], ta = c->p[3], tb = c->p[4], fl = c->p[5];
    long long nb = c->p[6] < 1 ? 1 : c->p[6], pad = fl & G_PAD ? 8 : 0;
    long long ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    dt_kv_fill(add(s, "A", DT_KH_BF16, DT_KH_IN, {nb, ar, ac}, {ar * (ac + pad), ac + pad, 1}), 1, -1, 1);
    dt_kv_fill(add(s, "B", DT_KH_BF16, DT_KH_IN, {nb, br, bc}, {br * (bc + pad), bc + pad, 1}), 2, -1, 1);
    dt_kview *C = add(s, "C", fl & G_F32 ? DT_KH_F32 : DT_KH_BF16, fl & G_ACC ? DT_KH_IN : DT_KH_OUT,
                      {nb, M, N}, {M * (N + pad), N + pad, 1});
    if (fl & G_ACC) dt_kv_fill(C, 3, -1, 1);
    if (fl & G_BIAS) dt_kv_fill(add(s, "bias", DT_KH_BF16, DT_KH_IN, {M, N}, {0, 1}), 4, -1, 1);
    if (fl & (G_GELU | G_DGELU)) {
        dt_kview *x = add(s, "aux", DT_KH_BF16, fl & G_DGELU ? DT_KH_IN : DT_KH_OUT, {nb, M, N}, {M * (N + pad), N + pad, 1});
        if (fl & G_DGELU) dt_kv_fill(x, 37, -4, 4);
    }
    if (fl & G_BGRAD) {
        dt_kv_fill(add(s, "dbias", DT_KH_F32, DT_KH_IN, {M}), 38, -1, 1);
        add(s, "dbias_part", DT_KH_F32, DT_KH_SCRATCH, {(int64_t)DT_CU_BGRAD_PART_FLOATS(M)});
    }
}
static void gemm_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_kview *A = dt_kset_get(s, "A"), *B = dt_kset_get(s, "B"), *C = dt_kset_get(s, "C");
    int nb = c->p[6] < 1 ? 1 : (int)c->p[6], fl = (int)c->p[5];
    dt_cu_gemm_args a = {(int)c->p[3], (int)c->p[4], (int)c->p[0], (int)c->p[1], (int)c->p[2],
                         H(s, "A"), (int)A->stride[1], nb > 1 ? A->stride[0] : 0,
                         H(s, "B"), (int)B->stride[1], nb > 1 ? B->stride[0] : 0,
                         C->base, (int)C->stride[1], nb > 1 ? C->stride[0] : 0,
                         fl & G_F32, 1.0f, fl & G_ACC ? 1.0f : 0.0f, nb,
                         fl & G_BIAS ? H(s, "bias") : NULL,
                         fl & G_GELU ? DT_CU_EPI_GELU : fl & G_DGELU ? DT_CU_EPI_DGELU
                         : fl & G_BGRAD ? DT_CU_EPI_BGRAD : DT_CU_EPI_DEFAULT,
                         fl & (G_GELU | G_DGELU) ? dt_kset_get(s, "aux")->base : NULL,
                         fl & G_BGRAD ? F(s, "dbias") : NULL, fl & G_BGRAD ? F(s, "dbias_part") : NULL};
    CHECK_OK(dt_cu_gemm_fin(g_blas, &a, 0, g_fin));
    if (fl & G_TABLE) { /* the case must replay the table's configuration, not the heuristic's */
        char d[512];
        dt_cu_gemm_describe_last(g_blas, d, sizeof d);
        CHECKF(strstr(d, " src=table ") != NULL, "%s [%s]: the plan is not the table's: %s", c->op, c->config, d);
    }
}

/* ---- embedding, p: B T C Vp ntok dropout‰ ----------------------------------------------- */
/* p[4] distinct tokens; with p[6] > 0, token 1 takes every p[6]-th position as well (a real
 * text's skew: a few tokens take a large share of every batch). */
static void enc_inputs(dt_kset *s, const gcase *c) {
    int *inp = dt_kv_i32(add(s, "inp", DT_KH_I32, DT_KH_IN, {c->p[0], c->p[1]}));
    dt_kv_fill_int(dt_kset_get(s, "inp"), 5, 0, (int)c->p[4]);
    if (c->p[6] > 0)
        for (long long i = 0; i < c->p[0] * c->p[1]; i += c->p[6]) inp[i] = 1;
}
static void enc_fwd_setup(dt_kset *s, gcase *c) {
    enc_inputs(s, c);
    dt_kv_fill(add(s, "wte", DT_KH_F32, DT_KH_IN, {c->p[3], c->p[2]}), 6, -1, 1);
    dt_kv_fill(add(s, "wpe", DT_KH_F32, DT_KH_IN, {c->p[1], c->p[2]}), 7, -1, 1);
    add(s, "out", DT_KH_BF16, DT_KH_OUT, {c->p[0], c->p[1], c->p[2]});
}
static void enc_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_dropout d = drop_of(c->p[5]);
    dt_cu_encoder_fwd(H(s, "out"), I(s, "inp"), F(s, "wte"), F(s, "wpe"), (int)c->p[0], (int)c->p[1],
                      (int)c->p[2], &d, DT_RNG_DROPOUT_HIDDEN, 0, 0);
}
/* The det branch's token buckets are inputs, made on the host as the model makes them. */
static void enc_bwd_setup(dt_kset *s, gcase *c) {
    int BT = (int)(c->p[0] * c->p[1]), Vp = (int)c->p[3];
    enc_inputs(s, c);
    std::vector<int> cnt(Vp), order(BT), tok(BT), start(BT + 1);
    int nseg = dt_cu_encoder_buckets(dt_kv_i32(dt_kset_get(s, "inp")), BT, Vp, cnt.data(), order.data(),
                                     tok.data(), start.data());
    CHECK(nseg > 0);
    int nm = dt_cu_encoder_max_multi(BT) + 1, nmulti = 0;
    std::vector<int> cs(BT + 1), cd(BT), mt(nm), ms(nm);
    c->aux = dt_cu_encoder_chunks(tok.data(), start.data(), nseg, cs.data(), cd.data(), mt.data(), ms.data(), &nmulti);
    c->aux2 = nmulti;
    memcpy(dt_kv_i32(add(s, "order", DT_KH_I32, DT_KH_IN, {BT})), order.data(), sizeof(int) * BT);
    memcpy(dt_kv_i32(add(s, "chunk_start", DT_KH_I32, DT_KH_IN, {BT + 1})), cs.data(), sizeof(int) * (BT + 1));
    memcpy(dt_kv_i32(add(s, "chunk_dst", DT_KH_I32, DT_KH_IN, {BT})), cd.data(), sizeof(int) * BT);
    memcpy(dt_kv_i32(add(s, "multi_tok", DT_KH_I32, DT_KH_IN, {nm})), mt.data(), sizeof(int) * nm);
    memcpy(dt_kv_i32(add(s, "multi_slot", DT_KH_I32, DT_KH_IN, {nm})), ms.data(), sizeof(int) * nm);
    add(s, "partial", DT_KH_F32, DT_KH_SCRATCH, {dt_cu_encoder_max_slots(BT), c->p[2]});
    dt_kv_fill(add(s, "dout", DT_KH_BF16, DT_KH_IN, {c->p[0], c->p[1], c->p[2]}), 8, -1, 1);
    dt_kv_fill(add(s, "dwte", DT_KH_F32, DT_KH_IN, {c->p[3], c->p[2]}), 9, -1, 1);
    dt_kv_fill(add(s, "dwpe", DT_KH_F32, DT_KH_IN, {c->p[1], c->p[2]}), 10, -1, 1);
}
static void enc_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_dropout d = drop_of(c->p[5]);
    const dt_cu_encoder_work w = {I(s, "order"), I(s, "chunk_start"), I(s, "chunk_dst"), I(s, "multi_tok"),
                                  I(s, "multi_slot"), c->aux, c->aux2, F(s, "partial")};
    dt_cu_encoder_bwd(F(s, "dwte"), F(s, "dwpe"), H(s, "dout"), I(s, "inp"), &w, (int)c->p[0], (int)c->p[1],
                      (int)c->p[2], &d, DT_RNG_DROPOUT_HIDDEN, 0, 0);
}

/* ---- LayerNorm, p: N C dropout‰ ------------------------------------------------------- */
static void ln_fwd_setup(dt_kset *s, gcase *c) {
    long long N = c->p[0], C = c->p[1];
    dt_kv_fill(add(s, "a", DT_KH_BF16, DT_KH_IN, {N, C}), 11, -2, 3);
    dt_kv_fill(add(s, "b", DT_KH_BF16, DT_KH_IN, {N, C}), 12, -1, 1);
    dt_kv_fill(add(s, "w", DT_KH_F32, DT_KH_IN, {C}), 13, 0.5, 1.5);
    dt_kv_fill(add(s, "bias", DT_KH_F32, DT_KH_IN, {C}), 14, -0.5, 0.5);
    add(s, "out", DT_KH_BF16, DT_KH_OUT, {N, C});
    add(s, "res", DT_KH_BF16, DT_KH_OUT, {N, C});
    add(s, "mean", DT_KH_F32, DT_KH_OUT, {N});
    add(s, "rstd", DT_KH_F32, DT_KH_OUT, {N});
}
static void ln_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_dropout d = drop_of(c->p[2]);
    dt_cu_layernorm_fwd(H(s, "out"), F(s, "mean"), F(s, "rstd"), H(s, "res"), H(s, "a"), H(s, "b"),
                        F(s, "w"), F(s, "bias"), (int)c->p[0], (int)c->p[1], &d,
                        DT_RNG_DROPOUT_HIDDEN, 3, 0);
}
/* p: N C flags. LN_SUM: the fused column sums of dinp16 into "sum" (its det partials
 * finished on the second stream); LN_UNALIGNED: the weights 4-byte aligned only (the wide
 * kernel); LN_FIRST: acc 0 (dinp16 written, not read: an output). */
enum { LN_SUM = 1, LN_UNALIGNED = 2, LN_FIRST = 4 };
static void ln_bwd_setup(dt_kset *s, gcase *c) {
    long long N = c->p[0], C = c->p[1], fl = c->p[2];
    dt_kv_fill(add(s, "dout", DT_KH_BF16, DT_KH_IN, {N, C}), 15, -1, 1);
    dt_kv_fill(add(s, "inp", DT_KH_BF16, DT_KH_IN, {N, C}), 16, -2, 2);
    dt_kv_fill(add(s, "w", DT_KH_F32, DT_KH_IN, {C}, {}, fl & LN_UNALIGNED ? 1 : 0), 17, 0.5, 1.5);
    dt_kv_fill(add(s, "mean", DT_KH_F32, DT_KH_IN, {N}), 18, -0.1, 0.1);
    dt_kv_fill(add(s, "rstd", DT_KH_F32, DT_KH_IN, {N}), 19, 0.5, 2);
    if (fl & LN_FIRST) add(s, "dinp16", DT_KH_BF16, DT_KH_OUT, {N, C});
    else dt_kv_fill(add(s, "dinp16", DT_KH_BF16, DT_KH_IN, {N, C}), 20, -1, 1);
    dt_kv_fill(add(s, "dw", DT_KH_F32, DT_KH_IN, {C}), 21, -1, 1);
    dt_kv_fill(add(s, "db", DT_KH_F32, DT_KH_IN, {C}), 22, -1, 1);
    if (fl & LN_SUM) dt_kv_fill(add(s, "sum", DT_KH_F32, DT_KH_IN, {C}), 39, -1, 1);
    add(s, "part", DT_KH_F32, DT_KH_SCRATCH, {(int64_t)dt_cu_ln_part_floats((int)N, (int)C, fl & LN_SUM)});
}
static void ln_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    int acc = !(c->p[2] & LN_FIRST);
    if (c->p[2] & LN_SUM)
        dt_cu_layernorm_bwd_colsum(H(s, "dinp16"), acc, F(s, "dw"), F(s, "db"), F(s, "sum"), F(s, "part"),
                                   H(s, "dout"), H(s, "inp"), F(s, "w"), F(s, "mean"), F(s, "rstd"),
                                   (int)c->p[0], (int)c->p[1], 0, g_fin);
    else
        dt_cu_layernorm_bwd(H(s, "dinp16"), acc, F(s, "dw"), F(s, "db"), F(s, "part"),
                            H(s, "dout"), H(s, "inp"), F(s, "w"), F(s, "mean"), F(s, "rstd"),
                            (int)c->p[0], (int)c->p[1], 0, g_fin);
}

/* ---- bias gradient (column sums), p: rows cols ----------------------------------------- */
static void colsum_setup(dt_kset *s, gcase *c) {
    long long R = c->p[0], C = c->p[1];
    dt_kv_fill(add(s, "x", DT_KH_BF16, DT_KH_IN, {R, C}), 23, -1, 1);
    dt_kv_fill(add(s, "acc", DT_KH_F32, DT_KH_IN, {C}), 24, -1, 1);
    add(s, "part", DT_KH_F32, DT_KH_SCRATCH, {dt_cu_colsum_parts((int)R) * C});
}
static void colsum_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_cu_colsum(F(s, "acc"), F(s, "part"), H(s, "x"), (int)c->p[0], (int)c->p[1], 0, g_fin);
}

/* ---- attention forward + backward, p: B T C NH dropout‰ -------------------------------- */
static void att_inputs(dt_kset *s, const gcase *c, double qscale) {
    long long B = c->p[0], T = c->p[1], C = c->p[2];
    dt_kv_fill(add(s, "qkv", DT_KH_BF16, DT_KH_IN, {B, T, 3 * C}), 25, -qscale, qscale);
    dt_kv_fill(add(s, "dout", DT_KH_BF16, DT_KH_IN, {B, T, C}), 26, -1, 1);
    add(s, "out", DT_KH_BF16, DT_KH_OUT, {B, T, C});
    add(s, "dqkv", DT_KH_BF16, DT_KH_OUT, {B, T, 3 * C});
}
/* att is an input-role view although the forward writes it: the softmax leaves the entries
 * right of the causal staircase unwritten by design (never read), so they keep the
 * uploaded zeros instead of being poisoned. */
static void att_setup(dt_kset *s, gcase *c) {
    long long B = c->p[0], T = c->p[1], C = c->p[2], NH = c->p[3];
    att_inputs(s, c, 1.0);
    add(s, "att", DT_KH_BF16, DT_KH_IN, {B, NH, T, T});
    add(s, "scratch", DT_KH_BF16, DT_KH_SCRATCH,
        {(int64_t)dt_cu_attention_scratch((int)B, (int)T, (int)C, (int)NH, c->p[4] > 0)});
}
static void att_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    int B = (int)c->p[0], T = (int)c->p[1], C = (int)c->p[2], NH = (int)c->p[3];
    dt_dropout d = drop_of(c->p[4]);
    CHECK_OK(dt_cu_attention_fwd(g_blas, H(s, "out"), H(s, "att"), H(s, "qkv"), H(s, "scratch"), B, T,
                                 C, NH, &d, 3, 0));
    CHECK_OK(dt_cu_attention_bwd(g_blas, H(s, "dqkv"), H(s, "dout"), H(s, "qkv"), H(s, "att"),
                                 H(s, "scratch"), B, T, C, NH, &d, 3, 0));
}
/* The flash backward with its fused qkv bias gradient: dbias (3C, an in/out accumulator)
 * += the column sums of dqkv, block partials in scratch, finished on the second stream. */
static void flash_setup(dt_kset *s, gcase *c) {
    long long B = c->p[0], T = c->p[1], C = c->p[2], NH = c->p[3];
    CHECK(dt_cu_flash_supported((int)C, (int)NH, (int)T, NULL));
    att_inputs(s, c, 2.0);
    add(s, "lse", DT_KH_F32, DT_KH_OUT, {B, NH, T});
    add(s, "scratch", DT_KH_F32, DT_KH_SCRATCH,
        {(int64_t)(dt_cu_flash_bwd_scratch((int)B, (int)T, (int)C, (int)NH) / sizeof(float))});
    dt_kv_fill(add(s, "dbias", DT_KH_F32, DT_KH_IN, {3 * C}), 29, -1, 1);
    add(s, "bias_part", DT_KH_F32, DT_KH_SCRATCH, {(int64_t)dt_cu_flash_bias_parts((int)B, (int)T) * 3 * C});
}
static void flash_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    int B = (int)c->p[0], T = (int)c->p[1], C = (int)c->p[2], NH = (int)c->p[3];
    dt_cu_flash_fwd(H(s, "out"), F(s, "lse"), H(s, "qkv"), B, T, C, NH, 0);
    dt_cu_flash_bwd(H(s, "dqkv"), F(s, "dbias"), F(s, "bias_part"), F(s, "scratch"), H(s, "dout"), H(s, "qkv"),
                    H(s, "out"), F(s, "lse"), B, T, C, NH, 0, g_fin);
}

/* ---- fused cross-entropy forward + backward and the mean loss, p: N V Vp ---------------- */
static void ce_setup(dt_kset *s, gcase *c) {
    long long N = c->p[0], V = c->p[1], Vp = c->p[2];
    dt_kv_fill(add(s, "logits", DT_KH_BF16, DT_KH_IN, {N, Vp}), 27, -4, 4); /* -> dlogits */
    dt_kv_fill_int(add(s, "targets", DT_KH_I32, DT_KH_IN, {N}), 28, 0, (int)V);
    add(s, "losses", DT_KH_F32, DT_KH_OUT, {N});
    add(s, "mean", DT_KH_F64, DT_KH_OUT, {1});
    add(s, "part", DT_KH_F64, DT_KH_SCRATCH, {2 * DT_CU_RED_MAX_BLOCKS});
}
static void ce_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    int N = (int)c->p[0];
    dt_cu_crossentropy(F(s, "losses"), H(s, "logits"), I(s, "targets"), 1.0f / (float)N, N,
                       (int)c->p[1], (int)c->p[2], 0);
    dt_cu_reduce(D(s, "mean"), NULL, D(s, "part"), F(s, "losses"), (size_t)N, 0,
                 det_of(DT_OP_CROSSENTROPY), 0);
}

/* ---- grad norm and num-zeros, p: n ---------------------------------------------------- */
static void norm_setup(dt_kset *s, gcase *c) {
    long long n = c->p[0];
    dt_kview *x = add(s, "x", DT_KH_F32, DT_KH_IN, {n});
    dt_kv_fill(x, 29, -1, 1);
    for (long long i = 0; i < n; i += 97) dt_kv_f32(x)[i] = 0.0f;
    add(s, "sumsq", DT_KH_F64, DT_KH_OUT, {1});
    add(s, "zeros", DT_KH_I64, DT_KH_OUT, {1});
    add(s, "part", DT_KH_F64, DT_KH_SCRATCH, {2 * DT_CU_RED_MAX_BLOCKS});
}
static void norm_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_cu_reduce(D(s, "sumsq"), (long long *)dt_kv_i64(dt_kset_get(s, "zeros")), D(s, "part"),
                 F(s, "x"), (size_t)c->p[0], 1, det_of(DT_OP_NORM), 0);
}

/* ---- AdamW over a slab of four tensors, p: their sizes ---------------------------------- */
static void adamw_setup(dt_kset *s, gcase *c) {
    size_t offs[4], nums[4], n = 0;
    for (int i = 0; i < 4; i++) {
        offs[i] = n;
        nums[i] = (size_t)c->p[i];
        n += nums[i];
    }
    size_t nch = dt_cu_adamw_chunks(offs, nums, 4, DT_CU_ADAMW_CHUNK, NULL, 0);
    std::vector<dt_cu_chunk> ch(nch);
    dt_cu_adamw_chunks(offs, nums, 4, DT_CU_ADAMW_CHUNK, ch.data(), nch);
    c->aux = (int)nch;
    /* the chunk table travels as raw words (16 bytes a chunk) */
    memcpy(dt_kv_i32(add(s, "chunks", DT_KH_I32, DT_KH_IN, {(int64_t)(4 * nch)})), ch.data(),
           sizeof(dt_cu_chunk) * nch);
    float decay[4] = {0.1f, 0.0f, 0.1f, 0.0f};
    memcpy(dt_kv_f32(add(s, "decay", DT_KH_F32, DT_KH_IN, {4})), decay, sizeof decay);
    dt_kv_f64(add(s, "gnorm", DT_KH_F64, DT_KH_IN, {1}))[0] = 2.5; /* > clip: clipping on */
    dt_kv_fill(add(s, "param", DT_KH_F32, DT_KH_IN, {(int64_t)n}), 30, -0.1, 0.1);
    dt_kv_fill(add(s, "grad", DT_KH_F32, DT_KH_IN, {(int64_t)n}), 31, -1, 1);
    dt_kv_fill(add(s, "m", DT_KH_F32, DT_KH_IN, {(int64_t)n}), 32, -0.01, 0.01);
    dt_kv_fill(add(s, "v", DT_KH_F32, DT_KH_IN, {(int64_t)n}), 33, 0, 1e-4);
    add(s, "param16", DT_KH_BF16, DT_KH_OUT, {(int64_t)n});
    /* the fused parameter norm: the chunks' sums of squares, then their sum */
    add(s, "pnorm_part", DT_KH_F64, DT_KH_OUT, {(int64_t)nch});
    add(s, "pnorm", DT_KH_F64, DT_KH_OUT, {1});
}
static void adamw_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_cu_adamw_args a;
    memset(&a, 0, sizeof a);
    a.lr = 1e-3f;
    a.beta1 = 0.9f;
    a.beta2 = 0.95f;
    a.eps = 1e-8f;
    a.bc1 = 1.0f - 0.9f * 0.9f * 0.9f; /* step 3 */
    a.bc2 = 1.0f - 0.95f * 0.95f * 0.95f;
    a.clip_grad = 1.0f;
    a.grad_norm = D(s, "gnorm");
    a.decay = F(s, "decay");
    a.chunks = (const dt_cu_chunk *)I(s, "chunks");
    a.nchunks = c->aux;
    a.pnorm_part = D(s, "pnorm_part");
    dt_cu_adamw(F(s, "param"), H(s, "param16"), F(s, "grad"), F(s, "m"), F(s, "v"), &a, 0);
    dt_cu_sum_parts(D(s, "pnorm"), a.pnorm_part, a.nchunks, 0);
}

/* ---- elementwise: GELU forward + backward, dropout; p: n (dropout‰) -------------------- */
static void gelu_setup(dt_kset *s, gcase *c) {
    long long n = c->p[0];
    dt_kv_fill(add(s, "x", DT_KH_BF16, DT_KH_IN, {n}), 34, -4, 4);
    dt_kv_fill(add(s, "dout", DT_KH_BF16, DT_KH_IN, {n}), 35, -1, 1);
    add(s, "y", DT_KH_BF16, DT_KH_OUT, {n});
    add(s, "dx", DT_KH_BF16, DT_KH_OUT, {n});
}
static void gelu_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_cu_gelu_fwd(H(s, "y"), H(s, "x"), (size_t)c->p[0], 0);
    dt_cu_gelu_bwd(H(s, "dx"), H(s, "x"), H(s, "dout"), (size_t)c->p[0], 0);
}
static void dropout_setup(dt_kset *s, gcase *c) {
    dt_kv_fill(add(s, "x", DT_KH_BF16, DT_KH_IN, {c->p[0]}), 36, -1, 1);
    add(s, "out", DT_KH_BF16, DT_KH_OUT, {c->p[0]});
}
static void dropout_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    dt_dropout d = drop_of(c->p[1]);
    dt_cu_dropout_bf16(H(s, "out"), H(s, "x"), (size_t)c->p[0], &d, DT_RNG_DROPOUT_HIDDEN, 9, 0);
}

/* ---- the whole model: forward + backward + AdamW step, twice ---------------------------
 * p: L NH C V B T hidden-dropout‰ attention-dropout‰ alternate. Every replay builds the GPU
 * model from the same host model (same initial state), runs MODEL_STEPS steps and writes the
 * parameters, last gradients, optimizer state and every step's loss, grad norm, param norm
 * and num-zeros into the case's outputs. With alternate, the model's calls k = 0, 1, 2, ...
 * (the first run and the replays, det then fast) switch the choices that promise the same
 * bits: --bwd-overlap off on odd k (weight gradients on the main stream instead of the
 * second one) and --attention-impl flash-mma when k & 2 (the mma.sync flash kernels instead of
 * the wgmma ones on sm_90), so the det replays' byte comparison covers all four combinations. */
enum { MODEL_STEPS = 2 };
typedef struct model_state {
    dt_gpt *host;
    std::vector<int> in, tg;
} model_state;
static void model_setup(dt_kset *s, gcase *c) {
    dt_gpt_config cfg = {(int)c->p[5], (int)c->p[3], 0, (int)c->p[0], (int)c->p[1], (int)c->p[2]};
    CHECK_OK(dt_gpt_config_finish(&cfg));
    int B = (int)c->p[4], T = (int)c->p[5], BT = B * T;
    model_state *ms = new model_state;
    ms->host = NULL;
    CHECK_OK(dt_gpt_create(&ms->host, &cfg, B, T, 42));
    c->state = ms;
    if (!ms->host) return;
    ms->host->hidden_dropout = (float)c->p[6] / 1000.0f;
    ms->host->attn_dropout = (float)c->p[7] / 1000.0f;
    ms->in.resize(BT);
    ms->tg.resize(BT);
    for (int i = 0; i < BT; i++) {
        ms->in[i] = (int)(dt_rng_u32(9, 250, 4, 0, i) % (uint32_t)cfg.vocab_size);
        ms->tg[i] = (int)(dt_rng_u32(9, 250, 5, 0, i) % (uint32_t)cfg.vocab_size);
    }
    int64_t np = (int64_t)ms->host->num_params;
    add(s, "params", DT_KH_F32, DT_KH_OUT, {np});
    add(s, "grads", DT_KH_F32, DT_KH_OUT, {np});
    add(s, "adam_m", DT_KH_F32, DT_KH_OUT, {np});
    add(s, "adam_v", DT_KH_F32, DT_KH_OUT, {np});
    add(s, "loss_gnorm_pnorm", DT_KH_F64, DT_KH_OUT, {MODEL_STEPS, 3});
    add(s, "num_zeros", DT_KH_I64, DT_KH_OUT, {MODEL_STEPS});
}
static void model_teardown(gcase *c) {
    model_state *ms = (model_state *)c->state;
    if (!ms) return;
    if (ms->host) dt_gpt_free(ms->host);
    delete ms;
    c->state = NULL;
}
static void model_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    CASE(ctx);
    model_state *ms = (model_state *)c->state;
    dt_gpt_cuda *g = NULL;
    static int calls;
    int k = calls++;
    dt_gpt_cuda_spec spec = {(int)c->p[4], (int)c->p[5], ms->host->hidden_dropout, ms->host->attn_dropout,
                             dt_cuda_options_default()};
    if (c->p[8]) {
        spec.opt.bwd_overlap = !(k & 1);
        spec.opt.attention = k & 2 ? DT_ATTN_FLASH_MMA : DT_ATTN_FLASH;
    }
    CHECK_OK(dt_gpt_cuda_create(&g, ms->host, &spec));
    if (!g) return;
    int flash = c->p[2] / c->p[1] == 64 && c->p[7] == 0 && c->p[5] % 64 == 0;
    const char *desc = dt_gpt_cuda_describe(g);
    CHECKF(strstr(desc, flash ? "\"attention\":\"flash" : "\"attention\":\"gemm\""), "%s: attention path: %s",
           c->config, desc);
    if (c->p[8]) {
        CHECKF(strstr(desc, k & 1 ? "\"bwd_overlap\":\"off\"" : "\"bwd_overlap\":\"weight gradients"),
               "%s: call %d: bwd_overlap not as set: %s", c->config, k, desc);
        const char *want = k & 2 || dt_cu_device_cc() != 90 ? "\"attention\":\"flash\""
                                                            : "\"attention\":\"flash (wgmma)\"";
        CHECKF(strstr(desc, want), "%s: call %d: expected %s: %s", c->config, k, want, desc);
    }
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    double st[MODEL_STEPS * 3];
    int64_t nz[MODEL_STEPS];
    for (int k = 0; k < MODEL_STEPS; k++) {
        dt_grad_stats gs;
        dt_gpt_cuda_zero_grad(g);
        dt_gpt_cuda_set_mode(g, 1, (uint32_t)(3 + k));
        CHECK_OK(dt_gpt_cuda_forward(g, ms->in.data(), ms->tg.data(), 1.0f));
        CHECK_OK(dt_gpt_cuda_backward(g));
        CHECK_OK(dt_gpt_cuda_loss(g, &st[3 * k]));
        CHECK_OK(dt_gpt_cuda_step(g, &ac, 1e-3f, k + 1, &gs));
        st[3 * k + 1] = gs.grad_norm;
        st[3 * k + 2] = gs.param_norm;
        nz[k] = gs.num_zeros;
    }
    size_t np = ms->host->num_params;
    std::vector<float> a(np), b(np), m(np), v(np);
    CHECK_OK(dt_gpt_cuda_get_params(g, a.data()));
    CHECK_OK(dt_gpt_cuda_get_grads(g, b.data()));
    CHECK_OK(dt_gpt_cuda_get_opt_state(g, m.data(), v.data()));
    dt_gpt_cuda_free(g);
    cudaMemcpy(F(s, "params"), a.data(), sizeof(float) * np, cudaMemcpyHostToDevice);
    cudaMemcpy(F(s, "grads"), b.data(), sizeof(float) * np, cudaMemcpyHostToDevice);
    cudaMemcpy(F(s, "adam_m"), m.data(), sizeof(float) * np, cudaMemcpyHostToDevice);
    cudaMemcpy(F(s, "adam_v"), v.data(), sizeof(float) * np, cudaMemcpyHostToDevice);
    cudaMemcpy(D(s, "loss_gnorm_pnorm"), st, sizeof st, cudaMemcpyHostToDevice);
    cudaMemcpy(dt_kv_i64(dt_kset_get(s, "num_zeros")), nz, sizeof nz, cudaMemcpyHostToDevice);
}

/* ---- the table ------------------------------------------------------------------------- */
#define GEMM(name, cfg, M, N, K, ta, tb, fl, nb) \
    {name, cfg, {M, N, K, ta, tb, fl, nb}, gemm_setup, gemm_run, FAST_MAY, 0, 0, NULL, NULL}
#define OP(name, cfg, setup, run, fast, ...) \
    {name, cfg, {__VA_ARGS__}, setup, run, fast, 0, 0, NULL, NULL}
static gcase cases[] = {
    GEMM("gemm", "weight grad 768x768, K=16384 (B*T), fp32 += ", 768, 768, 16384, 1, 0, G_F32 | G_ACC, 1),
    GEMM("gemm", "weight grad 3072x768, K=16384, fp32 +=", 3072, 768, 16384, 1, 0, G_F32 | G_ACC, 1),
    GEMM("gemm", "forward 16384x2304x768, bias broadcast over rows (stride 0)", 16384, 2304, 768, 0, 1,
         G_BIAS, 1),
    GEMM("gemm", "input grad 16384x768x3072, padded leading dims", 16384, 768, 3072, 0, 0, G_PAD, 1),
    GEMM("gemm", "odd rows 1000x776x2056 ta tb, padded, fp32 +=", 1000, 776, 2056, 1, 1,
         G_F32 | G_ACC | G_PAD, 1),
    GEMM("gemm", "batched 48 x 1024x1024x64 (q k^T), strided batches", 1024, 1024, 64, 0, 1, 0, 48),
    GEMM("gemm", "fc forward 16384x3072x768, GELU_AUX_BIAS epilogue (aux out)", 16384, 3072, 768, 0, 1,
         G_BIAS | G_GELU, 1),
    GEMM("gemm", "fcproj input grad 16384x3072x768, dGELU epilogue, padded", 16384, 3072, 768, 0, 0,
         G_DGELU | G_PAD, 1),
    GEMM("gemm", "weight grad 768x768, K=16384, fp32 +=, bias-gradient epilogue (2 K chunks)", 768, 768, 16384,
         1, 0, G_F32 | G_ACC | G_BGRAD, 1),
    GEMM("gemm", "weight grad 256x256, K=16384, fp32 +=, bias-gradient epilogue (8 K chunks)", 256, 256, 16384,
         1, 0, G_F32 | G_ACC | G_BGRAD, 1),
    GEMM("gemm", "weight grad 256x256, K=16384, fp32 += (8 K chunks), padded", 256, 256, 16384, 1, 0,
         G_F32 | G_ACC | G_PAD, 1),
    GEMM("gemm", "weight grad 3072x768, K=16384, fp32 +=, bias-gradient epilogue", 3072, 768, 16384, 1, 0,
         G_F32 | G_ACC | G_BGRAD, 1),
    GEMM("gemm", "weight grad 768x3072, K=16384, fp32 +=, bias-gradient epilogue", 768, 3072, 16384, 1, 0,
         G_F32 | G_ACC | G_BGRAD, 1),
    GEMM("gemm", "weight grad 2304x768, K=16384, fp32 =, bias-gradient epilogue, padded", 2304, 768, 16384, 1, 0,
         G_F32 | G_BGRAD | G_PAD, 1),
    OP("encoder_fwd", "B=16 T=1024 C=768 Vp=50304, dropout 0.1", enc_fwd_setup, enc_fwd_run, FAST_EXACT,
       16, 1024, 768, 50304, 50257, 100),
    OP("encoder_bwd", "B=16 T=1024 C=768 Vp=50304, 50 distinct tokens", enc_bwd_setup, enc_bwd_run,
       FAST_RACES, 16, 1024, 768, 50304, 50, 0),
    OP("encoder_bwd", "B=16 T=1024 C=768 Vp=50304, 50257 tokens, one in every 5 positions (skewed)", enc_bwd_setup,
       enc_bwd_run, FAST_RACES, 16, 1024, 768, 50304, 50257, 0, 5),
    OP("encoder_bwd", "B=8 T=512 C=64 Vp=128, 3 distinct tokens, dropout 0.1", enc_bwd_setup, enc_bwd_run,
       FAST_RACES, 8, 512, 64, 128, 3, 100),
    OP("layernorm_fwd", "N=16384 C=768, fused residual + dropout 0.1", ln_fwd_setup, ln_fwd_run,
       FAST_EXACT, 16384, 768, 100),
    OP("layernorm_fwd", "N=16384 C=768, fused residual, no dropout (the kernel without it)", ln_fwd_setup,
       ln_fwd_run, FAST_EXACT, 16384, 768, 0),
    OP("layernorm_bwd", "N=16384 C=768", ln_bwd_setup, ln_bwd_run, FAST_RACES, 16384, 768),
    OP("layernorm_bwd", "N=65536 C=64 (many rows, few columns)", ln_bwd_setup, ln_bwd_run, FAST_RACES,
       65536, 64),
    OP("layernorm_bwd", "N=16384 C=768, fused column sums of dinp16", ln_bwd_setup, ln_bwd_run, FAST_RACES,
       16384, 768, LN_SUM),
    OP("layernorm_bwd", "N=16384 C=768, the first of a backward (acc 0: dinp16 only written), fused column sums",
       ln_bwd_setup, ln_bwd_run, FAST_RACES, 16384, 768, LN_SUM | LN_FIRST),
    OP("layernorm_bwd", "N=16384 C=1600, fused column sums (accumulators in shared rows)", ln_bwd_setup,
       ln_bwd_run, FAST_RACES, 16384, 1600, LN_SUM),
    OP("layernorm_bwd", "N=16384 C=768, fused column sums, unaligned weights (wide kernel)", ln_bwd_setup,
       ln_bwd_run, FAST_RACES, 16384, 768, LN_SUM | LN_UNALIGNED),
    OP("layernorm_bwd", "N=16384 C=3072, column sums after the wide kernel (dt_cu_colsum)", ln_bwd_setup,
       ln_bwd_run, FAST_RACES, 16384, 3072, LN_SUM),
    OP("bias_bwd", "colsum 4096 x 3072", colsum_setup, colsum_run, FAST_RACES, 4096, 3072),
    OP("bias_bwd", "colsum 16384 x 768", colsum_setup, colsum_run, FAST_RACES, 16384, 768),
    OP("attention (GEMM)", "fwd+bwd B=4 T=1024 C=768 NH=12", att_setup, att_run, FAST_MAY, 4, 1024, 768,
       12, 0),
    OP("attention (GEMM)", "fwd+bwd B=4 T=256 C=256 NH=8, attention dropout 0.1", att_setup, att_run,
       FAST_MAY, 4, 256, 256, 8, 100),
    OP("attention (flash)", "fwd+bwd B=16 T=1024 C=768 NH=12", flash_setup, flash_run, FAST_EXACT, 16,
       1024, 768, 12),
    OP("attention (flash)", "fwd+bwd B=1 T=2048 C=64 NH=1 (one head, 32 key blocks)", flash_setup,
       flash_run, FAST_EXACT, 1, 2048, 64, 1),
    OP("crossentropy", "fused fwd+bwd + mean loss, N=4096 V=50257 Vp=50304", ce_setup, ce_run, FAST_MAY,
       4096, 50257, 50304),
    OP("grad_norm", "sumsq + num-zeros, n=100M", norm_setup, norm_run, FAST_RACES, 100000000),
    OP("adamw", "4 tensors, 6.3M params, clipping on", adamw_setup, adamw_run, FAST_EXACT, 3000000,
       1000017, 768, 2304005),
    OP("gelu", "fwd+bwd n=16M", gelu_setup, gelu_run, FAST_EXACT, 1 << 24),
    OP("dropout", "n=16M p=0.1", dropout_setup, dropout_run, FAST_EXACT, 1 << 24, 100),
    {"model", "GPT L=2 C=128 NH=4 V=512 B=4 T=128, dropout 0.1/0.1 (GEMM attention), 2 steps",
     {2, 4, 128, 512, 4, 128, 100, 100}, model_setup, model_run, FAST_MAY, 0, 0, NULL, model_teardown},
    {"model", "GPT L=2 C=128 NH=2 V=512 B=4 T=128, hidden dropout 0.1 (flash), 2 steps",
     {2, 2, 128, 512, 4, 128, 100, 0}, model_setup, model_run, FAST_MAY, 0, 0, NULL, model_teardown},
    {"model", "GPT-2 widths L=2 C=768 NH=12 V=50257 B=4 T=1024 (flash), 2 steps, replays alternate "
     "--bwd-overlap on/off and the wgmma/mma.sync flash kernels",
     {2, 12, 768, 50257, 4, 1024, 0, 0, 1}, model_setup, model_run, FAST_MAY, 0, 0, NULL, model_teardown},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int g_det_ok, g_controls, g_controls_ok;

static void run_case(gcase *c) {
    double t0 = now();
    CHECK_OK(dt_cu_blas_create(&g_blas));
    dt_kset in;
    memset(&in, 0, sizeof in);
    c->setup(&in, c);
    dt_kh_opts o;
    memset(&o, 0, sizeof o);
    o.replays = DET_REPLAYS;
    o.det = 1;
    o.backend = DT_KH_CUDA;
    o.contention = CONTENTION;
    dt_kh_result r;
    dt_kset first;
    int before = dt_test_failed;
    int same = dt_kh_replay(c->op, c->config, c->run, c, &in, &o, &r, &first);
    CHECKF(same, "%s [%s] det: %d of %d replays differ, %d outputs left unwritten", c->op, c->config,
           r.differing_replays, r.replays, r.unwritten);
    CHECKF(dt_kh_gaps_changed(&in, &first) == 0, "%s [%s] det: wrote outside its views", c->op, c->config);
    dt_kset_free(&first);
    g_det_ok += dt_test_failed == before;
    char fast[160];
    o.det = 0;
    o.quiet = c->fast != FAST_EXACT;
    if (c->fast == FAST_RACES) {
        o.replays = CONTROL_REPLAYS;
        o.stop_at_first_diff = 1;
    }
    int fsame = dt_kh_replay(c->op, c->config, c->run, c, &in, &o, &r, NULL);
    CHECKF(r.unwritten == 0, "%s [%s] fast: %d outputs left unwritten", c->op, c->config, r.unwritten);
    if (c->fast == FAST_EXACT) {
        CHECKF(fsame, "%s [%s] fast: %d of %d replays differ", c->op, c->config, r.differing_replays,
               r.replays);
        snprintf(fast, sizeof fast, "fast bit-exact x%d", r.replays);
    } else if (c->fast == FAST_RACES) {
        g_controls++;
        g_controls_ok += r.differing_replays > 0;
        CHECKF(r.differing_replays > 0, "%s [%s] fast: negative control saw no difference in %d replays "
               "(contention %d side GEMMs)", c->op, c->config, r.replays, CONTENTION);
        if (r.differing_replays)
            snprintf(fast, sizeof fast, "fast differs at replay %d (negative control ok)", r.replays - 1);
        else
            snprintf(fast, sizeof fast, "fast identical in %d replays (negative control FAILED)", r.replays);
    } else {
        snprintf(fast, sizeof fast, "fast %s (%d of %d replays differ; may race, not failed)",
                 r.differing_replays ? "differs" : "bit-exact", r.differing_replays, r.replays);
    }
    fprintf(stderr, "%s cuda %s [%s]: det bit-exact x%d; %s (%.1f s)\n",
            dt_test_failed == before ? "ok  " : "FAIL", c->op, c->config, DET_REPLAYS, fast, now() - t0);
    if (c->teardown) c->teardown(c);
    dt_kset_free(&in);
    dt_cu_blas_free(g_blas);
    g_blas = NULL;
}

static void test_table(void) {
    const char *only = getenv("DT_GPU_CASES"); /* substring of op names to run (debugging) */
    int n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && !strstr(cases[i].op, only)) continue;
        run_case(&cases[i]);
        n++;
    }
    fprintf(stderr, "replays: %d cases, det bit-exact %d/%d, negative controls differed %d/%d\n", n,
            g_det_ok, n, g_controls_ok, g_controls);
}

/* Every entry of the GEMM plan table for this device, replayed as a GEMM case at its key's
 * shape, epilogue and K chunks (the model's leading dimensions, fp32 outputs accumulated as
 * the weight gradients are): the pinned configurations the model runs are the ones checked
 * here under contention. */
static void test_plan_table(void) {
    const char *only = getenv("DT_GPU_CASES");
    if (only && !strstr("gemm (table)", only)) return;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    int cc = prop.major * 10 + prop.minor, n = 0;
    static char names[64][160];
    for (int i = 0; i < dt_cu_gemm_table_size() && n < 64; i++) {
        const dt_cu_gemm_key *k = &dt_cu_gemm_table_at(i)->key;
        if (k->cc != cc) continue;
        const char *e = k->epilogue;
        int fl = G_TABLE | (k->c_f32 ? G_F32 | G_ACC : 0) | (!strcmp(e, "bias") ? G_BIAS : 0) |
                 (!strcmp(e, "gelu_aux_bias") ? G_BIAS | G_GELU : 0) | (!strcmp(e, "gelu_aux") ? G_GELU : 0) |
                 (!strcmp(e, "dgelu") ? G_DGELU : 0) | (!strcmp(e, "bgrad") ? G_BGRAD : 0);
        /* gemm_setup's views have the natural leading dimensions and batch 1 */
        int natural = k->lda == (k->ta ? k->M : k->K) && k->ldb == (k->tb ? k->K : k->N) && k->ldc == k->N &&
                      k->batch == 1;
        CHECKF(natural, "table entry %d (%dx%dx%d %s): leading dimensions %d %d %d or batch %d not replayable here",
               i, k->M, k->N, k->K, e, k->lda, k->ldb, k->ldc, k->batch);
        if (!natural) continue;
        snprintf(names[n], sizeof names[n], "entry %d: %s%s %dx%dx%d %s, %s, %d K chunks", i, k->ta ? "T" : "N",
                 k->tb ? "T" : "N", k->M, k->N, k->K, k->c_f32 ? "fp32 +=" : "bf16", e, k->k_chunks);
        gcase c = {"gemm (table)", names[n], {k->M, k->N, k->K, k->ta, k->tb, fl, 1}, gemm_setup, gemm_run, FAST_MAY,
                   0, 0, NULL, NULL};
        run_case(&c);
        n++;
    }
    fprintf(stderr, "plan table: %d entries for sm_%d replayed\n", n, cc);
}

int main(void) {
    dt_status st = dt_kh_cuda_init();
    if (st != DT_OK) {
        fprintf(stderr, "test_gpu_replays: %s\n", dt_errmsg());
        return 1;
    }
    cudaStreamCreateWithFlags(&g_fin, cudaStreamNonBlocking);
    RUN(test_table);
    RUN(test_plan_table);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    cudaStreamDestroy(g_fin);
    dt_kh_cuda_shutdown();
    return dt_test_report();
}
