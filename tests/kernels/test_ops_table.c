/* Table-driven op tests: every op of src/ops (and the AdamW step) through
 *  (a) the bit-exact replay check (kernels/harness.h) in both branches, under contention
 *      (spin threads on every core, twice as many OpenMP threads as cores);
 *  (b) an accuracy check against the fp64 reference (support/ref64.h) in both branches,
 *      with a per-case tolerance stated next to the case;
 *  (c) the det branch byte-identical for 1, 2, 3 and 4 threads;
 * plus: tensors an op must not write (its inputs, and every view's gaps) are unchanged.
 * In the fast branch, ops whose default path is known to race (fast_races = 1) are replayed
 * and their differing replays reported but not failed: tests/kernels/test_negative_controls.c
 * asserts that they do race. Every other op must be bit-exact in the fast branch too.
 * Sizes follow the rule in harness.h (many threads on the same outputs).
 * Sources covered: src/ops/<family>/: gemm_cpu.c encoder_cpu.c layernorm_cpu.c matmul_cpu.c
 * attention_cpu.c gelu_cpu.c dropout_cpu.c crossentropy_cpu.c reduce_cpu.c adamw_cpu.c (the
 * AdamW update), src/ops/op.c (dispatch through dt_op_variant, asked by each family's
 * chooser) and src/optim/optim.c (AdamW step, gradient statistics). */
#include "kernels/harness.h"
#include "support/ref64.h"

#include "core/determinism.h"
#include "core/philox.h"
#include "ops/attention/attention.h"
#include "ops/crossentropy/crossentropy.h"
#include "ops/dropout/dropout.h"
#include "ops/encoder/encoder.h"
#include "ops/gelu/gelu.h"
#include "ops/gemm/gemm.h"
#include "ops/layernorm/layernorm.h"
#include "ops/gemm/matmul.h"
#include "ops/reduce/reduce.h"
#include "optim/optim.h"
#include "dt_test.h"

#include <omp.h>

typedef struct op_case op_case;
struct op_case {
    const char *op, *config;
    int p[6];
    void (*setup)(dt_kset *s, const op_case *c);
    dt_kh_fn run;
    /* Fills ref[i] (logical row-major, fp64) for each output tensor, in `outs` order. */
    void (*ref)(const dt_kset *in, double **ref, const op_case *c);
    const char *outs;      /* comma-separated names of the tensors the op writes */
    double atol, rtol;     /* |y - ref| <= atol + rtol |ref|, per element */
    int fast_races;        /* default path known to race for this shape */
};

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define ADD(s, name, dt, nd, shape) dt_kset_add(s, name, dt, nd, shape, NULL, 0)
#define F(s, name) dt_kv_f32(dt_kset_get(s, name))
#define I(s, name) dt_kv_i32(dt_kset_get(s, name))
#define IN64(in, name) dt_kv_to_f64(dt_kset_cget(in, name))
#define CI(in, name) dt_kv_i32(dt_kset_cget(in, name))

/* ---- gemm: C = 0.75 op(A) op(B) + 0.5 C, every operand with padded row strides ------ */
/* p: M N K ta tb */
static void gemm_setup(dt_kset *s, const op_case *c) {
    int M = c->p[0], N = c->p[1], K = c->p[2], ta = c->p[3], tb = c->p[4];
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    dt_kv_fill(dt_kset_add(s, "A", DT_KH_F32, 2, SH(ar, ac), SH(ac + 3, 1), 0), 1, -1, 1);
    dt_kv_fill(dt_kset_add(s, "B", DT_KH_F32, 2, SH(br, bc), SH(bc + 5, 1), 0), 2, -1, 1);
    dt_kv_fill(dt_kset_add(s, "C", DT_KH_F32, 2, SH(M, N), SH(N + 1, 1), 0), 3, -1, 1);
}
static void gemm_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_kview *A = dt_kset_get(s, "A"), *B = dt_kset_get(s, "B"), *C = dt_kset_get(s, "C");
    dt_gemm(c->p[3], c->p[4], c->p[0], c->p[1], c->p[2], 0.75f, dt_kv_f32(A), (int)A->stride[0],
            dt_kv_f32(B), (int)B->stride[0], 0.5f, dt_kv_f32(C), (int)C->stride[0]);
}
static void gemm_ref(const dt_kset *in, double **r, const op_case *c) {
    int M = c->p[0], N = c->p[1], K = c->p[2], ta = c->p[3], tb = c->p[4];
    double *A = IN64(in, "A"), *B = IN64(in, "B");
    r[0] = IN64(in, "C");
    ref64_gemm(ta, tb, M, N, K, 0.75, A, ta ? M : K, B, tb ? K : N, 0.5, r[0]);
    free(A);
    free(B);
}

/* ---- encoder ------------------------------------------------------------------------ */
/* p: B T C Vp ntok. wpe is read as a (B,T,C) view broadcast over b (stride 0). */
static void enc_fwd_setup(dt_kset *s, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2], Vp = c->p[3];
    dt_kv_fill_int(ADD(s, "inp", DT_KH_I32, 2, SH(B, T)), 4, 0, c->p[4]);
    dt_kv_fill(ADD(s, "wte", DT_KH_F32, 2, SH(Vp, C)), 5, -1, 1);
    dt_kv_fill(dt_kset_add(s, "wpe", DT_KH_F32, 3, SH(B, T, C), SH(0, C, 1), 0), 6, -1, 1);
    ADD(s, "out", DT_KH_F32, 3, SH(B, T, C));
}
static void enc_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_encoder_fwd(F(s, "out"), I(s, "inp"), F(s, "wte"), F(s, "wpe"), c->p[0], c->p[1], c->p[2]);
}
static void enc_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2];
    double *wte = IN64(in, "wte"), *wpe = IN64(in, "wpe"); /* wpe: (B,T,C), rows b>0 repeat */
    r[0] = malloc(sizeof(double) * (size_t)B * T * C);
    ref64_encoder_fwd(r[0], CI(in, "inp"), wte, wpe, B, T, C);
    free(wte);
    free(wpe);
}

static void enc_bwd_setup(dt_kset *s, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2], Vp = c->p[3];
    dt_kv_fill_int(ADD(s, "inp", DT_KH_I32, 2, SH(B, T)), 7, 0, c->p[4]);
    dt_kv_fill(ADD(s, "dout", DT_KH_F32, 3, SH(B, T, C)), 8, -1, 1);
    dt_kv_fill(ADD(s, "dwte", DT_KH_F32, 2, SH(Vp, C)), 9, -1, 1);
    dt_kv_fill(ADD(s, "dwpe", DT_KH_F32, 2, SH(T, C)), 10, -1, 1);
}
static void enc_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_encoder_bwd(F(s, "dwte"), F(s, "dwpe"), F(s, "dout"), I(s, "inp"), c->p[0], c->p[1],
                   c->p[2], c->p[3]);
}
static void enc_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *dout = IN64(in, "dout");
    r[0] = IN64(in, "dwte");
    r[1] = IN64(in, "dwpe");
    ref64_encoder_bwd(r[0], r[1], dout, CI(in, "inp"), c->p[0], c->p[1], c->p[2]);
    free(dout);
}

/* ---- layernorm ---------------------------------------------------------------------- */
/* p: N C */
static void ln_fwd_setup(dt_kset *s, const op_case *c) {
    int N = c->p[0], C = c->p[1];
    dt_kv_fill(ADD(s, "inp", DT_KH_F32, 2, SH(N, C)), 11, -2, 3);
    dt_kv_fill(ADD(s, "w", DT_KH_F32, 1, SH(C)), 12, 0.5, 1.5);
    dt_kv_fill(ADD(s, "b", DT_KH_F32, 1, SH(C)), 13, -0.5, 0.5);
    ADD(s, "out", DT_KH_F32, 2, SH(N, C));
    ADD(s, "mean", DT_KH_F32, 1, SH(N));
    ADD(s, "rstd", DT_KH_F32, 1, SH(N));
}
static void ln_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_layernorm_fwd(F(s, "out"), F(s, "mean"), F(s, "rstd"), F(s, "inp"), F(s, "w"), F(s, "b"),
                     c->p[0], c->p[1]);
}
static void ln_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    int N = c->p[0], C = c->p[1];
    double *x = IN64(in, "inp"), *w = IN64(in, "w"), *b = IN64(in, "b");
    r[0] = malloc(sizeof(double) * (size_t)N * C);
    r[1] = malloc(sizeof(double) * (size_t)N);
    r[2] = malloc(sizeof(double) * (size_t)N);
    ref64_layernorm_fwd(r[0], r[1], r[2], x, w, b, N, C);
    free(x); free(w); free(b);
}

static void ln_bwd_setup(dt_kset *s, const op_case *c) {
    ln_fwd_setup(s, c);
    int N = c->p[0], C = c->p[1];
    dt_layernorm_fwd(F(s, "out"), F(s, "mean"), F(s, "rstd"), F(s, "inp"), F(s, "w"), F(s, "b"), N, C);
    dt_kv_fill(ADD(s, "dout", DT_KH_F32, 2, SH(N, C)), 14, -1, 1);
    dt_kv_fill(ADD(s, "dinp", DT_KH_F32, 2, SH(N, C)), 15, -1, 1);
    dt_kv_fill(ADD(s, "dw", DT_KH_F32, 1, SH(C)), 16, -1, 1);
    dt_kv_fill(ADD(s, "db", DT_KH_F32, 1, SH(C)), 17, -1, 1);
}
static void ln_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_layernorm_bwd(F(s, "dinp"), F(s, "dw"), F(s, "db"), F(s, "dout"), F(s, "inp"), F(s, "w"),
                     F(s, "mean"), F(s, "rstd"), c->p[0], c->p[1]);
}
static void ln_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *x = IN64(in, "inp"), *w = IN64(in, "w"), *dy = IN64(in, "dout");
    r[0] = IN64(in, "dinp");
    r[1] = IN64(in, "dw");
    r[2] = IN64(in, "db");
    ref64_layernorm_bwd(r[0], r[1], r[2], dy, x, w, c->p[0], c->p[1]);
    free(x); free(w); free(dy);
}

/* ---- matmul, bias --------------------------------------------------------------------- */
/* p: N IC OC has_bias. The bias is a (N,OC) view broadcast over rows (stride 0). */
static void mm_fwd_setup(dt_kset *s, const op_case *c) {
    int N = c->p[0], IC = c->p[1], OC = c->p[2];
    dt_kv_fill(ADD(s, "inp", DT_KH_F32, 2, SH(N, IC)), 18, -1, 1);
    dt_kv_fill(ADD(s, "w", DT_KH_F32, 2, SH(OC, IC)), 19, -1, 1);
    if (c->p[3]) dt_kv_fill(dt_kset_add(s, "bias", DT_KH_F32, 2, SH(N, OC), SH(0, 1), 0), 20, -1, 1);
    dt_kv_fill(ADD(s, "out", DT_KH_F32, 2, SH(N, OC)), 21, -1, 1); /* overwritten */
}
static void mm_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_matmul_fwd(F(s, "out"), F(s, "inp"), F(s, "w"), c->p[3] ? F(s, "bias") : NULL, c->p[0],
                  c->p[1], c->p[2]);
}
static void mm_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    int N = c->p[0], IC = c->p[1], OC = c->p[2];
    double *x = IN64(in, "inp"), *w = IN64(in, "w"), *b = c->p[3] ? IN64(in, "bias") : NULL;
    r[0] = malloc(sizeof(double) * (size_t)N * OC);
    ref64_matmul_fwd(r[0], x, w, b, N, IC, OC); /* bias rows are the broadcast row 0 */
    free(x); free(w); free(b);
}

static void mm_bwd_setup(dt_kset *s, const op_case *c) {
    int N = c->p[0], IC = c->p[1], OC = c->p[2];
    dt_kv_fill(ADD(s, "inp", DT_KH_F32, 2, SH(N, IC)), 22, -1, 1);
    dt_kv_fill(ADD(s, "w", DT_KH_F32, 2, SH(OC, IC)), 23, -1, 1);
    dt_kv_fill(ADD(s, "dout", DT_KH_F32, 2, SH(N, OC)), 24, -1, 1);
    dt_kv_fill(ADD(s, "dinp", DT_KH_F32, 2, SH(N, IC)), 25, -1, 1); /* overwritten */
    dt_kv_fill(ADD(s, "dw", DT_KH_F32, 2, SH(OC, IC)), 26, -1, 1);
    if (c->p[3]) dt_kv_fill(ADD(s, "db", DT_KH_F32, 1, SH(OC)), 27, -1, 1);
}
static void mm_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_matmul_bwd(F(s, "dinp"), F(s, "dw"), c->p[3] ? F(s, "db") : NULL, F(s, "dout"), F(s, "inp"),
                  F(s, "w"), c->p[0], c->p[1], c->p[2]);
}
static void mm_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *x = IN64(in, "inp"), *w = IN64(in, "w"), *dy = IN64(in, "dout");
    r[0] = IN64(in, "dinp");
    r[1] = IN64(in, "dw");
    r[2] = c->p[3] ? IN64(in, "db") : NULL;
    ref64_matmul_bwd(r[0], r[1], r[2], dy, x, w, c->p[0], c->p[1], c->p[2]);
    free(x); free(w); free(dy);
}

/* colsum through the bias-gradient dispatcher. p: N OC */
static void colsum_setup(dt_kset *s, const op_case *c) {
    dt_kv_fill(ADD(s, "dout", DT_KH_F32, 2, SH(c->p[0], c->p[1])), 28, -1, 1);
    dt_kv_fill(ADD(s, "db", DT_KH_F32, 1, SH(c->p[1])), 29, -1, 1);
}
static void colsum_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_bias_bwd(F(s, "db"), F(s, "dout"), c->p[0], c->p[1]);
}
static void colsum_ref(const dt_kset *in, double **r, const op_case *c) {
    double *dy = IN64(in, "dout");
    r[0] = IN64(in, "db");
    for (int i = 0; i < c->p[0]; i++)
        for (int o = 0; o < c->p[1]; o++) r[0][o] += dy[(size_t)i * c->p[1] + o];
    free(dy);
}

/* ---- attention ------------------------------------------------------------------------ */
/* p: B T C NH drop%. With drop% > 0 the probabilities get dropout (seed 77, step 3, layer 2),
 * and the reference applies the mask defined in ops/dropout.h, drawn from core/philox.h. */
static dt_dropout att_drop(const op_case *c) { return (dt_dropout){c->p[4] / 100.0f, 77, 3}; }
static double *att_keep(const op_case *c) {
    int B = c->p[0], T = c->p[1], NH = c->p[3];
    if (!c->p[4]) return NULL;
    float p = c->p[4] / 100.0f;
    size_t n = (size_t)B * NH * T * T;
    double *k = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++)
        k[i] = dt_rng_uniform(77, DT_RNG_DROPOUT_ATTN, 3, 2, i) >= p ? 1.0 / (1.0 - (double)p) : 0.0;
    return k;
}
static void att_fwd_setup(dt_kset *s, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2], NH = c->p[3];
    dt_kv_fill(ADD(s, "qkv", DT_KH_F32, 3, SH(B, T, 3 * C)), 30, -1.5, 1.5);
    ADD(s, "out", DT_KH_F32, 3, SH(B, T, C));
    ADD(s, "att", DT_KH_F32, 4, SH(B, NH, T, T));
}
static void att_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_dropout d = att_drop(c);
    dt_attention_fwd(F(s, "out"), F(s, "att"), F(s, "qkv"), c->p[0], c->p[1], c->p[2], c->p[3],
                     &d, 2);
}
static void att_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2], NH = c->p[3];
    double *qkv = IN64(in, "qkv"), *keep = att_keep(c);
    r[0] = malloc(sizeof(double) * (size_t)B * T * C);
    r[1] = malloc(sizeof(double) * (size_t)B * NH * T * T);
    ref64_attention_fwd(r[0], r[1], qkv, keep, B, T, C, NH);
    free(qkv);
    free(keep);
}
static void att_bwd_setup(dt_kset *s, const op_case *c) {
    att_fwd_setup(s, c);
    int B = c->p[0], T = c->p[1], C = c->p[2];
    dt_dropout d = att_drop(c);
    dt_attention_fwd(F(s, "out"), F(s, "att"), F(s, "qkv"), B, T, C, c->p[3], &d, 2);
    dt_kv_fill(ADD(s, "dout", DT_KH_F32, 3, SH(B, T, C)), 31, -1, 1);
    dt_kv_fill(ADD(s, "dqkv", DT_KH_F32, 3, SH(B, T, 3 * C)), 32, -1, 1); /* overwritten */
}
static void att_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_dropout d = att_drop(c);
    dt_attention_bwd(F(s, "dqkv"), F(s, "dout"), F(s, "qkv"), F(s, "att"), F(s, "out"), c->p[0],
                     c->p[1], c->p[2], c->p[3], &d, 2);
}
static void att_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    int B = c->p[0], T = c->p[1], C = c->p[2];
    double *qkv = IN64(in, "qkv"), *dy = IN64(in, "dout"), *keep = att_keep(c);
    r[0] = malloc(sizeof(double) * (size_t)B * T * 3 * C);
    ref64_attention_bwd(r[0], dy, qkv, keep, B, T, C, c->p[3]);
    free(qkv);
    free(dy);
    free(keep);
}

/* ---- gelu, residual ------------------------------------------------------------------- */
/* p: n */
static void ew_setup(dt_kset *s, const op_case *c) {
    int n = c->p[0];
    dt_kv_fill(ADD(s, "x", DT_KH_F32, 1, SH(n)), 33, -6, 6);
    dt_kv_fill(ADD(s, "y", DT_KH_F32, 1, SH(n)), 34, -1, 1);
    dt_kv_fill(ADD(s, "out", DT_KH_F32, 1, SH(n)), 35, -1, 1);
    dt_kv_fill(ADD(s, "out2", DT_KH_F32, 1, SH(n)), 36, -1, 1);
}
static void gelu_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_gelu_fwd(F(s, "out"), F(s, "x"), (size_t)((const op_case *)ctx)->p[0]);
}
static void gelu_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *x = IN64(in, "x");
    r[0] = malloc(sizeof(double) * (size_t)c->p[0]);
    ref64_gelu_fwd(r[0], x, (size_t)c->p[0]);
    free(x);
}
static void gelu_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_gelu_bwd(F(s, "out"), F(s, "x"), F(s, "y"), (size_t)((const op_case *)ctx)->p[0]);
}
static void gelu_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *x = IN64(in, "x"), *dy = IN64(in, "y");
    r[0] = malloc(sizeof(double) * (size_t)c->p[0]);
    ref64_gelu_bwd(r[0], x, dy, (size_t)c->p[0]);
    free(x);
    free(dy);
}
static void res_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_residual_fwd(F(s, "out"), F(s, "x"), F(s, "y"), (size_t)((const op_case *)ctx)->p[0]);
}
static void res_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    r[0] = IN64(in, "x");
    double *y = IN64(in, "y");
    for (int i = 0; i < c->p[0]; i++) r[0][i] += y[i];
    free(y);
}
static void res_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_residual_bwd(F(s, "out"), F(s, "out2"), F(s, "y"), (size_t)((const op_case *)ctx)->p[0]);
}
static void res_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    r[0] = IN64(in, "out");
    r[1] = IN64(in, "out2");
    double *y = IN64(in, "y");
    for (int i = 0; i < c->p[0]; i++) { r[0][i] += y[i]; r[1][i] += y[i]; }
    free(y);
}

/* dropout on x (hidden purpose, seed 5, step 9, layer 1), p = 0.25. */
static const dt_dropout hidden_drop = {0.25f, 5, 9};
static void dropout_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    memcpy(F(s, "out"), F(s, "x"), sizeof(float) * (size_t)((const op_case *)ctx)->p[0]);
    dt_dropout_apply(F(s, "out"), (size_t)((const op_case *)ctx)->p[0], &hidden_drop,
                     DT_RNG_DROPOUT_HIDDEN, 1);
}
static void dropout_ref(const dt_kset *in, double **r, const op_case *c) {
    r[0] = IN64(in, "x");
    size_t dropped = 0;
    for (int i = 0; i < c->p[0]; i++) {
        int keep = dt_rng_uniform(5, DT_RNG_DROPOUT_HIDDEN, 9, 1, (uint64_t)i) >= hidden_drop.p;
        r[0][i] *= keep ? 1.0 / (1.0 - (double)hidden_drop.p) : 0.0;
        dropped += !keep;
    }
    /* The mask drops about p of the elements (binomial: 5 sigma is 0.007 here). */
    CHECKF(fabs((double)dropped / c->p[0] - 0.25) < 0.01, "dropout dropped %zu of %d", dropped, c->p[0]);
}

/* ---- cross-entropy -------------------------------------------------------------------- */
/* p: N V Vp. Padded logits columns hold NaN: the op must never read them. */
static void ce_setup(dt_kset *s, const op_case *c) {
    int N = c->p[0], V = c->p[1], Vp = c->p[2];
    dt_kview *lg = ADD(s, "logits", DT_KH_F32, 2, SH(N, Vp));
    dt_kv_fill(lg, 37, -4, 4);
    for (int i = 0; i < N; i++)
        for (int v = V; v < Vp; v++) dt_kv_f32(lg)[(size_t)i * Vp + v] = NAN;
    dt_kv_fill_int(ADD(s, "targets", DT_KH_I32, 1, SH(N)), 38, 0, V);
    ADD(s, "losses", DT_KH_F32, 1, SH(N));
    ADD(s, "lse", DT_KH_F32, 1, SH(N));
}
static void ce_fwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_crossentropy_fwd(F(s, "losses"), F(s, "lse"), F(s, "logits"), I(s, "targets"), c->p[0],
                        c->p[1], c->p[2]);
}
static void ce_fwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *lg = IN64(in, "logits");
    r[0] = malloc(sizeof(double) * (size_t)c->p[0]);
    r[1] = malloc(sizeof(double) * (size_t)c->p[0]);
    ref64_crossentropy_fwd(r[0], r[1], lg, CI(in, "targets"), c->p[0], c->p[1], c->p[2]);
    free(lg);
}
static void ce_bwd_setup(dt_kset *s, const op_case *c) {
    ce_setup(s, c);
    ce_fwd_run(s, c, DT_KH_CPU);
}
static void ce_bwd_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_crossentropy_bwd(F(s, "logits"), F(s, "lse"), I(s, "targets"), 0.5f, c->p[0], c->p[1], c->p[2]);
}
static void ce_bwd_ref(const dt_kset *in, double **r, const op_case *c) {
    double *lg = IN64(in, "logits");
    r[0] = malloc(sizeof(double) * (size_t)c->p[0] * c->p[2]);
    ref64_crossentropy_bwd(r[0], lg, CI(in, "targets"), 0.5, c->p[0], c->p[1], c->p[2]);
    free(lg);
}
/* Mean of losses (DT_OP_CROSSENTROPY: dt_sum_det / dt_sum_fast). p: N */
static void ce_mean_setup(dt_kset *s, const op_case *c) {
    dt_kv_fill_mixed(ADD(s, "losses", DT_KH_F32, 1, SH(c->p[0])), 39, 8);
    ADD(s, "mean", DT_KH_F64, 1, SH(1));
}
static void ce_mean_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_kv_f64(dt_kset_get(s, "mean"))[0] = dt_crossentropy_mean(F(s, "losses"), ((const op_case *)ctx)->p[0]);
}
static void ce_mean_ref(const dt_kset *in, double **r, const op_case *c) {
    double *x = IN64(in, "losses"), sum = 0.0;
    for (int i = 0; i < c->p[0]; i++) sum += x[i];
    r[0] = malloc(sizeof(double));
    r[0][0] = sum / c->p[0];
    free(x);
}

/* ---- gradient statistics (DT_OP_NORM: sumsq det/fast, count_zeros) ----------------------- */
/* p: n. Every 7th gradient is +0.0 or -0.0 (both count as zeros). */
static void stats_setup(dt_kset *s, const op_case *c) {
    dt_kview *g = ADD(s, "grad", DT_KH_F32, 1, SH(c->p[0]));
    dt_kv_fill_mixed(g, 40, 3);
    for (int i = 0; i < c->p[0]; i += 7) dt_kv_f32(g)[i] = (i / 7) % 2 ? -0.0f : 0.0f;
    dt_kv_fill_mixed(ADD(s, "param", DT_KH_F32, 1, SH(c->p[0])), 41, 2);
    ADD(s, "grad_norm", DT_KH_F64, 1, SH(1));
    ADD(s, "param_norm", DT_KH_F64, 1, SH(1));
    ADD(s, "num_zeros", DT_KH_I64, 1, SH(1));
}
static void stats_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    dt_gpt m;
    memset(&m, 0, sizeof m);
    m.num_params = (size_t)((const op_case *)ctx)->p[0];
    m.grad_mem = F(s, "grad");
    m.param_mem = F(s, "param");
    dt_grad_stats st;
    dt_grad_stats_compute(&m, &st);
    dt_kv_f64(dt_kset_get(s, "grad_norm"))[0] = st.grad_norm;
    dt_kv_f64(dt_kset_get(s, "param_norm"))[0] = st.param_norm;
    dt_kv_i64(dt_kset_get(s, "num_zeros"))[0] = st.num_zeros;
}
static void stats_ref(const dt_kset *in, double **r, const op_case *c) {
    double *g = IN64(in, "grad"), *p = IN64(in, "param"), g2 = 0, p2 = 0, z = 0;
    for (int i = 0; i < c->p[0]; i++) { g2 += g[i] * g[i]; p2 += p[i] * p[i]; z += g[i] == 0.0; }
    for (int k = 0; k < 3; k++) r[k] = malloc(sizeof(double));
    r[0][0] = sqrt(g2);
    r[1][0] = sqrt(p2);
    r[2][0] = z;
    free(g);
    free(p);
}

/* ---- AdamW step over a real parameter table (decay on matrices only) ------------------- */
/* p: L C V t0; grad_norm 2.0 with clip 1.0, so clipping is active. */
static dt_gpt_config adam_cfg(const op_case *c) {
    dt_gpt_config cfg = {.max_seq_len = 16, .vocab_size = c->p[2], .num_layers = c->p[0],
                         .num_heads = 1, .channels = c->p[1]};
    dt_gpt_config_finish(&cfg);
    return cfg;
}
static const dt_adamw_config adam_hp = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
static void adam_setup(dt_kset *s, const op_case *c) {
    dt_gpt_config cfg = adam_cfg(c);
    dt_param_desc d[DT_NUM_PARAM_TENSORS];
    int64_t n = (int64_t)dt_gpt_param_table(&cfg, d);
    dt_kv_fill(ADD(s, "param", DT_KH_F32, 1, SH(n)), 42, -0.5, 0.5);
    dt_kv_fill(ADD(s, "grad", DT_KH_F32, 1, SH(n)), 43, -0.1, 0.1);
    dt_kv_fill(ADD(s, "m", DT_KH_F32, 1, SH(n)), 44, -0.01, 0.01);
    dt_kv_fill(ADD(s, "v", DT_KH_F32, 1, SH(n)), 45, 0.0, 1e-4);
}
static void adam_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    const op_case *c = ctx;
    (void)be;
    dt_gpt m;
    memset(&m, 0, sizeof m);
    m.cfg = adam_cfg(c);
    m.num_params = dt_gpt_param_table(&m.cfg, m.params);
    m.param_mem = F(s, "param");
    m.grad_mem = F(s, "grad");
    dt_adamw opt = {adam_hp, m.num_params, F(s, "m"), F(s, "v"), c->p[3]};
    dt_adamw_step(&opt, &m, 1e-2f, 2.0);
}
static void adam_ref(const dt_kset *in, double **r, const op_case *c) {
    dt_gpt_config cfg = adam_cfg(c);
    dt_param_desc d[DT_NUM_PARAM_TENSORS];
    dt_gpt_param_table(&cfg, d);
    double *g = IN64(in, "grad");
    r[0] = IN64(in, "param");
    r[1] = IN64(in, "m");
    r[2] = IN64(in, "v");
    double b1 = adam_hp.beta1, b2 = adam_hp.beta2, t = c->p[3] + 1, lr = 1e-2;
    double clip = adam_hp.clip_grad / (2.0 + 1e-6);
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        double wd = d[i].decay ? adam_hp.weight_decay : 0.0;
        for (size_t k = d[i].offset; k < d[i].offset + d[i].numel; k++) {
            double gk = g[k] * clip;
            r[1][k] = b1 * r[1][k] + (1 - b1) * gk;
            r[2][k] = b2 * r[2][k] + (1 - b2) * gk * gk;
            double mh = r[1][k] / (1 - pow(b1, t)), vh = r[2][k] / (1 - pow(b2, t));
            r[0][k] -= lr * (mh / (sqrt(vh) + adam_hp.eps) + wd * r[0][k]);
        }
    }
    free(g);
}

/* ---- the table ------------------------------------------------------------------------ */
/* Tolerances (u = 2^-24, fp32 unit roundoff):
 *  gemm: K*6e-8 + 1e-6 absolute (matmul: 1.2e-7 per term, for the bias add) with |a|,|b| <= 1: about one rounding of the running
 *    sum per term, the error growth of a length-K fp32 dot product;
 *  encoder fwd, residual: one rounding of an exact sum: rtol 1.2e-7;
 *  sums over many rows in fp32 (encoder/colsum/layernorm dweight): 1e-7 * terms per output
 *    (terms in [-1,1]: partials of size ~sqrt(terms), each add rounding at u * partial;
 *    measured errors are 5-20x below these);
 *  layernorm, attention, gelu, cross-entropy: fp32 math with exp/tanh of O(1) arguments,
 *    a few u times the condition of the row operation: 2e-7..5e-6 absolute plus
 *    2e-7..2e-6 relative, per case (measured margins 5-30x; DT_TEST_VERBOSE=1 prints them);
 *  double reductions (mean loss, norms): rtol 1e-12, order-dependent rounding in double;
 *  dropout: the kept value times float(1/(1-p)), two roundings: rtol 2.4e-7;
 *  AdamW: per-element fp32 update, rtol 1e-5 + atol 1e-7 (sqrt and divide of O(1e-2) values). */
#define GEMM(M, N, K, ta, tb, races) \
    {"gemm", #M "x" #N "x" #K " ta=" #ta " tb=" #tb, {M, N, K, ta, tb, 0}, gemm_setup, gemm_run, \
     gemm_ref, "C", K * 6e-8 + 1e-6, 0, races}
static const op_case cases[] = {
    GEMM(37, 513, 999, 0, 0, 0), GEMM(37, 513, 999, 1, 0, 0), GEMM(37, 513, 999, 0, 1, 0),
    GEMM(37, 513, 999, 1, 1, 0), GEMM(300, 40, 70, 0, 0, 0), GEMM(300, 40, 70, 1, 1, 0),
    GEMM(20, 300, 33, 0, 1, 0), GEMM(20, 300, 33, 1, 0, 0), GEMM(64, 64, 64, 1, 0, 0),
    GEMM(1100, 96, 64, 0, 1, 0),
    {"encoder_fwd", "B=4 T=100 C=48 Vp=128 (wpe broadcast over b)", {4, 100, 48, 128, 100, 0},
     enc_fwd_setup, enc_fwd_run, enc_fwd_ref, "out", 0, 1.2e-7, 0},
    {"encoder_bwd", "B=8 T=512 C=32 Vp=64, 3 distinct tokens", {8, 512, 32, 64, 3, 0},
     enc_bwd_setup, enc_bwd_run, enc_bwd_ref, "dwte,dwpe", 4e-4, 0, 1},
    {"encoder_bwd", "B=3 T=70 C=24 Vp=128, all tokens", {3, 70, 24, 128, 128, 0},
     enc_bwd_setup, enc_bwd_run, enc_bwd_ref, "dwte,dwpe", 2e-6, 0, 1},
    {"layernorm_fwd", "N=517 C=96", {517, 96}, ln_fwd_setup, ln_fwd_run, ln_fwd_ref,
     "out,mean,rstd", 2e-6, 1e-6, 0},
    {"layernorm_bwd", "N=4133 C=16 (many rows, few columns)", {4133, 16}, ln_bwd_setup,
     ln_bwd_run, ln_bwd_ref, "dinp,dw,db", 1e-7 * 4133, 1e-6, 1},
    {"layernorm_bwd", "N=64 C=100", {64, 100}, ln_bwd_setup, ln_bwd_run, ln_bwd_ref,
     "dinp,dw,db", 1e-5, 1e-6, 1},
    {"matmul_fwd", "N=300 IC=70 OC=40 bias (broadcast view)", {300, 70, 40, 1}, mm_fwd_setup,
     mm_fwd_run, mm_fwd_ref, "out", 70 * 1.2e-7 + 1e-6, 0, 0},
    {"matmul_fwd", "N=64 IC=96 OC=288 no bias", {64, 96, 288, 0}, mm_fwd_setup, mm_fwd_run,
     mm_fwd_ref, "out", 96 * 1.2e-7 + 1e-6, 0, 0},
    {"matmul_bwd", "N=2048 IC=32 OC=48 bias", {2048, 32, 48, 1}, mm_bwd_setup, mm_bwd_run,
     mm_bwd_ref, "dinp,dw,db", 2048 * 6e-8 + 1e-6, 0, 1},
    {"matmul_bwd", "N=77 IC=40 OC=24 no bias", {77, 40, 24, 0}, mm_bwd_setup, mm_bwd_run,
     mm_bwd_ref, "dinp,dw", 77 * 6e-8 + 1e-6, 0, 0},
    {"bias_bwd", "N=8192 OC=8 (colsum)", {8192, 8}, colsum_setup, colsum_run, colsum_ref, "db",
     1e-7 * 8192, 0, 1},
    {"attention_fwd", "B=1 NH=1 T=256 C=32", {1, 256, 32, 1, 0}, att_fwd_setup, att_fwd_run,
     att_fwd_ref, "out,att", 5e-6, 2e-6, 0},
    {"attention_fwd", "B=2 NH=3 T=100 C=30 (HS=10)", {2, 100, 30, 3, 0}, att_fwd_setup,
     att_fwd_run, att_fwd_ref, "out,att", 5e-6, 2e-6, 0},
    {"attention_fwd", "B=2 NH=3 T=70 C=21 (HS=7) dropout 0.1", {2, 70, 21, 3, 10}, att_fwd_setup,
     att_fwd_run, att_fwd_ref, "out,att", 5e-6, 2e-6, 0},
    {"attention_bwd", "B=1 NH=1 T=200 C=16 dropout 0.1 (fast: key blocks)", {1, 200, 16, 1, 10},
     att_bwd_setup, att_bwd_run, att_bwd_ref, "dqkv", 5e-6, 2e-6, 1},
    {"attention_bwd", "B=4 NH=4 T=65 C=16 dropout 0.1", {4, 65, 16, 4, 10}, att_bwd_setup,
     att_bwd_run, att_bwd_ref, "dqkv", 5e-6, 2e-6, 0},
    {"attention_bwd", "B=1 NH=1 T=256 C=32 (fast: key blocks)", {1, 256, 32, 1}, att_bwd_setup,
     att_bwd_run, att_bwd_ref, "dqkv", 5e-6, 2e-6, 1},
    {"attention_bwd", "B=2 NH=5 T=70 C=35 (HS=7)", {2, 70, 35, 5}, att_bwd_setup, att_bwd_run,
     att_bwd_ref, "dqkv", 5e-6, 2e-6, 0},
    {"attention_bwd", "B=4 NH=4 T=65 C=16 (fast: per head)", {4, 65, 16, 4}, att_bwd_setup,
     att_bwd_run, att_bwd_ref, "dqkv", 5e-6, 2e-6, 0},
    {"gelu_fwd", "n=100003", {100003}, ew_setup, gelu_fwd_run, gelu_fwd_ref, "out", 2e-7, 2e-6, 0},
    {"gelu_bwd", "n=100003", {100003}, ew_setup, gelu_bwd_run, gelu_bwd_ref, "out", 2e-6, 1e-5, 0},
    {"dropout", "n=100003 p=0.25", {100003}, ew_setup, dropout_run, dropout_ref, "out", 0, 2.4e-7, 0},
    {"residual_fwd", "n=100003", {100003}, ew_setup, res_fwd_run, res_fwd_ref, "out", 0, 1.2e-7, 0},
    {"residual_bwd", "n=100003", {100003}, ew_setup, res_bwd_run, res_bwd_ref, "out,out2", 0,
     1.2e-7, 0},
    {"crossentropy_fwd", "N=64 V=1000 Vp=1024 (4 chunks, NaN padding)", {64, 1000, 1024},
     ce_setup, ce_fwd_run, ce_fwd_ref, "losses,lse", 2e-7, 2e-7, 0},
    {"crossentropy_bwd", "N=64 V=1000 Vp=1024", {64, 1000, 1024}, ce_bwd_setup, ce_bwd_run,
     ce_bwd_ref, "logits", 1e-8, 1e-6, 0},
    {"crossentropy_mean", "N=1000003 mixed magnitudes", {1000003}, ce_mean_setup, ce_mean_run,
     ce_mean_ref, "mean", 0, 1e-12, 1},
    {"grad_stats", "n=1000003 (sumsq, count_zeros)", {1000003}, stats_setup, stats_run, stats_ref,
     "grad_norm,param_norm,num_zeros", 0, 1e-12, 1},
    {"adamw_step", "L=2 C=16 V=37 t=4", {2, 16, 37, 4}, adam_setup, adam_run, adam_ref,
     "param,m,v", 1e-7, 1e-5, 0},
};

/* 1 when `name` is in the comma-separated list. */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

/* Accuracy of one run's outputs against the fp64 reference; inputs must be unchanged. */
static void check_accuracy(const op_case *c, const dt_kset *in, const dt_kset *out,
                           const char *branch) {
    double *ref[DT_KH_MAXT] = {0};
    c->ref(in, ref, c);
    int k = 0;
    for (int t = 0; t < in->n; t++) {
        const dt_kview *v = &out->t[t];
        if (!in_list(c->outs, v->name)) {
            CHECKF(!memcmp(in->t[t].base, v->base, v->base_numel * dt_kh_dtype_size(v->dtype)),
                   "%s [%s] %s: input '%s' was modified", c->op, c->config, branch, v->name);
            continue;
        }
        size_t n = dt_kv_numel(v), bad = 0, first = 0;
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) {
            double y = dt_kv_get(v, i), r = ref[k][i], tol = c->atol + c->rtol * fabs(r);
            double ratio = fabs(y - r) / (tol > 0 ? tol : 1e-300);
            if (!(fabs(y - r) <= tol)) { if (!bad) first = i; bad++; }
            if (ratio > worst || isnan(ratio)) worst = ratio;
        }
        CHECKF(bad == 0, "%s [%s] %s: '%s' %zu of %zu elements off the fp64 reference; first "
               "element %zu: %.9g vs %.9g (atol %g rtol %g)", c->op, c->config, branch, v->name,
               bad, n, first, dt_kv_get(v, first), ref[k][first], c->atol, c->rtol);
        if (getenv("DT_TEST_VERBOSE"))
            fprintf(stderr, "  %s [%s] %s '%s': max error / tolerance = %.3g\n", c->op, c->config,
                    branch, v->name, worst);
        k++;
    }
    for (int i = 0; i < k; i++) free(ref[i]);
    CHECKF(dt_kh_gaps_changed(in, out) == 0, "%s [%s] %s: wrote outside its views", c->op,
           c->config, branch);
}

static void run_case(const op_case *c, dt_kh_backend be) {
    dt_kset in = {0};
    c->setup(&in, c);
    int cores = dt_kh_cores();
    for (int det = 1; det >= 0; det--) {
        const char *branch = det ? "det" : "fast";
        dt_kh_opts o = {.replays = 3, .det = det, .threads = 2 * cores, .spin_threads = cores,
                        .backend = be, .quiet = !det && c->fast_races};
        dt_kh_result res;
        dt_kset first;
        int same = dt_kh_replay(c->op, c->config, c->run, c, &in, &o, &res, &first);
        if (det || !c->fast_races)
            CHECKF(same, "%s [%s] %s: %d of %d replays differ", c->op, c->config, branch,
                   res.differing_replays, res.replays);
        else if (!same)
            fprintf(stderr, "  info: %s [%s] fast (known to race): %d of %d replays differ\n",
                    c->op, c->config, res.differing_replays, res.replays);
        check_accuracy(c, &in, &first, branch);
        dt_kset_free(&first);
    }
    static const int threads[] = {1, 2, 3, 4};
    dt_kh_opts o = {.det = 1, .backend = be};
    CHECKF(dt_kh_thread_sweep(c->op, c->config, c->run, c, &in, &o, threads, 4, NULL),
           "%s [%s] det: differs across thread counts 1..4", c->op, c->config);
    dt_kset_free(&in);
}

static void test_table(void) {
    for (int be = 0; be < DT_KH_NUM_BACKENDS; be++) {
        if (!dt_kh_backend_available((dt_kh_backend)be)) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int before = dt_test_failed;
            run_case(&cases[i], (dt_kh_backend)be);
            fprintf(stderr, "%s %s %s [%s]\n", dt_test_failed == before ? "ok  " : "FAIL",
                    dt_kh_backend_name((dt_kh_backend)be), cases[i].op, cases[i].config);
        }
    }
}

/* The harness itself must see a one-bit difference, a sign-of-zero difference, a NaN
 * payload difference and a write into a gap. */
static int flip_calls;
static void flaky_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    int mode = *(const int *)ctx;
    float *y = F(s, "y");
    y[0] = 1.0f;
    y[1] = 0.0f;
    y[2] = NAN;
    if (flip_calls++ % 2 == 0) return;
    if (mode == 0) { uint32_t u; memcpy(&u, &y[0], 4); u ^= 1; memcpy(&y[0], &u, 4); }
    if (mode == 1) y[1] = -0.0f;
    if (mode == 2) { uint32_t u = 0x7fc00001u; memcpy(&y[2], &u, 4); }
    if (mode == 3) y[3] = 2.0f; /* y[3] is a gap of the strided view */
}
static void test_harness_sees_differences(void) {
    for (int mode = 0; mode < 4; mode++) {
        dt_kset s = {0};
        if (mode < 3) dt_kset_add(&s, "y", DT_KH_F32, 1, SH(4), NULL, 0);
        else dt_kset_add(&s, "y", DT_KH_F32, 1, SH(2), SH(4), 0); /* base 1..3 are gaps */
        flip_calls = 0;
        dt_kh_opts o = {.replays = 4, .det = 1, .quiet = 1};
        dt_kh_result r;
        CHECKF(!dt_kh_replay("flaky", "selftest", flaky_run, &mode, &s, &o, &r, NULL),
               "harness missed difference kind %d", mode);
        CHECK(r.differing_replays == 2);
        dt_kset_free(&s);
    }
}

/* RNG restore: an op that draws from the counter-based RNG and advances its counter (as a
 * dropout layer does per micro-batch) replays identically only when the harness restores
 * the RNG state before each replay. */
typedef struct rng_state { uint64_t seed; uint32_t step; } rng_state;
static void dropout_like_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    rng_state *st = *(rng_state *const *)ctx;
    dt_kview *x = dt_kset_get(s, "x");
    for (size_t i = 0; i < dt_kv_numel(x); i++)
        if (dt_rng_uniform(st->seed, DT_RNG_DROPOUT_HIDDEN, st->step, 0, i) < 0.1f) dt_kv_f32(x)[i] = 0.0f;
    st->step++;
}
static void test_rng_restore(void) {
    dt_kset s = {0};
    dt_kv_fill(ADD(&s, "x", DT_KH_F32, 1, SH(4096)), 46, -1, 1);
    rng_state live = {1234, 7}, *lp = &live;
    const rng_state snap = live;
    dt_kh_rng hook = {&live, &snap, sizeof live};
    dt_kh_opts o = {.replays = 3, .det = 1, .rng = &hook};
    CHECK(dt_kh_replay("dropout-like", "n=4096 p=0.1", dropout_like_run, &lp, &s, &o, NULL, NULL));
    o.rng = NULL;
    o.quiet = 1;
    CHECK(!dt_kh_replay("dropout-like", "no restore", dropout_like_run, &lp, &s, &o, NULL, NULL));
    dt_kset_free(&s);
}

int main(void) {
    RUN(test_harness_sees_differences);
    RUN(test_rng_restore);
    RUN(test_table);
    return dt_test_report();
}
