/* Negative controls (DESIGN §4): every default path known to race must be *seen* to race by
 * the same strict replay check that the deterministic paths pass. Each control replays the
 * fast function (called directly, not through the dispatcher) up to 400 times (it stops at the first difference) under
 * contention (one spin thread per core, max(4, 2 x cores) OpenMP threads: oversubscribed)
 * and asserts that at least one replay differs from the first; then replays the det
 * function on the same inputs under the same contention and asserts none differs.
 * Sizes follow the rule in kernels/harness.h. The GEMM control differs by thread count
 * (OpenBLAS splits the work by its thread count), not between replays at one count. */
#include "kernels/harness.h"

#include "ops/attention/attention.h"
#include "ops/encoder/encoder.h"
#include "ops/gemm/gemm.h"
#include "ops/layernorm/layernorm.h"
#include "ops/reduce/reduce.h"
#include "dt_test.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define ADD(s, name, nd, shape) dt_kset_add(s, name, DT_KH_F32, nd, shape, NULL, 0)
#define F(s, name) dt_kv_f32(dt_kset_get(s, name))

enum { MAX_REPLAYS = 400 };

/* Replays `fast` until a replay differs (must happen) and `det` 5 times (must not). */
static void control(const char *op, const char *config, dt_kh_fn fast, dt_kh_fn det,
                    const dt_kset *in) {
    int cores = dt_kh_cores(), threads = 2 * cores < 4 ? 4 : 2 * cores;
    dt_kh_opts o = {.replays = MAX_REPLAYS, .det = 0, .threads = threads, .spin_threads = cores,
                    .stop_at_first_diff = 1, .quiet = 1};
    dt_kh_result r;
    dt_kh_replay(op, config, fast, NULL, in, &o, &r, NULL);
    CHECKF(r.differing_replays > 0, "%s [%s] fast: no differing replay in %d under contention "
           "(%d threads on %d cores, %d spin threads): the strict test did not see the race",
           op, config, r.replays, threads, cores, cores);
    fprintf(stderr, "  %s [%s] fast: first differing replay after %d replays\n", op, config,
            r.replays);
    dt_kh_opts d = o;
    d.det = 1;
    d.replays = 5;
    d.stop_at_first_diff = 0;
    d.quiet = 0;
    CHECKF(dt_kh_replay(op, config, det, NULL, in, &d, &r, NULL),
           "%s [%s] det: %d of %d replays differ", op, config, r.differing_replays, r.replays);
}

/* ---- encoder backward: 3 distinct tokens over B*T = 16384 positions ------------------- */
enum { EB = 32, ET = 512, EC = 32, EV = 64 };
static void enc_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_encoder_bwd_fast(F(s, "dwte"), F(s, "dwpe"), F(s, "dout"), dt_kv_i32(dt_kset_get(s, "inp")),
                        EB, ET, EC, EV);
}
static void enc_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_encoder_bwd_det(F(s, "dwte"), F(s, "dwpe"), F(s, "dout"), dt_kv_i32(dt_kset_get(s, "inp")),
                       EB, ET, EC, EV);
}
static void test_encoder_bwd(void) {
    dt_kset s = {0};
    dt_kv_fill_int(dt_kset_add(&s, "inp", DT_KH_I32, 2, SH(EB, ET), NULL, 0), 1, 0, 3);
    dt_kv_fill_mixed(ADD(&s, "dout", 3, SH(EB, ET, EC)), 2, 2);
    ADD(&s, "dwte", 2, SH(EV, EC));
    ADD(&s, "dwpe", 2, SH(ET, EC));
    control("encoder_bwd", "B=32 T=512 C=32 Vp=64, 3 tokens", enc_fast, enc_det, &s);
    dt_kset_free(&s);
}

/* ---- layernorm backward: N = 4133 rows, C = 16 ---------------------------------------- */
enum { LN = 4133, LC = 16 };
static void ln_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_layernorm_bwd_fast(F(s, "dinp"), F(s, "dw"), F(s, "db"), F(s, "dout"), F(s, "inp"),
                          F(s, "w"), F(s, "mean"), F(s, "rstd"), LN, LC);
}
static void ln_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_layernorm_bwd_det(F(s, "dinp"), F(s, "dw"), F(s, "db"), F(s, "dout"), F(s, "inp"),
                         F(s, "w"), F(s, "mean"), F(s, "rstd"), LN, LC);
}
static void test_layernorm_bwd(void) {
    dt_kset s = {0};
    dt_kv_fill(ADD(&s, "inp", 2, SH(LN, LC)), 3, -2, 2);
    dt_kv_fill(ADD(&s, "w", 1, SH(LC)), 4, 0.5, 1.5);
    dt_kv_fill_mixed(ADD(&s, "dout", 2, SH(LN, LC)), 5, 2);
    ADD(&s, "mean", 1, SH(LN));
    ADD(&s, "rstd", 1, SH(LN));
    ADD(&s, "out", 2, SH(LN, LC));
    float zero[LC] = {0};
    dt_layernorm_fwd(F(&s, "out"), F(&s, "mean"), F(&s, "rstd"), F(&s, "inp"), F(&s, "w"), zero, LN, LC);
    ADD(&s, "dinp", 2, SH(LN, LC));
    ADD(&s, "dw", 1, SH(LC));
    ADD(&s, "db", 1, SH(LC));
    control("layernorm_bwd", "N=4133 C=16", ln_fast, ln_det, &s);
    dt_kset_free(&s);
}

/* ---- bias backward (colsum): N = 32768 rows, 8 columns --------------------------------- */
enum { CN = 32768, CC = 8 };
static void cs_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_colsum_fast(F(s, "x"), CN, CC, F(s, "acc"));
}
static void cs_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_colsum_det(F(s, "x"), CN, CC, F(s, "acc"));
}
static void test_colsum(void) {
    dt_kset s = {0};
    dt_kv_fill_mixed(ADD(&s, "x", 2, SH(CN, CC)), 6, 3);
    ADD(&s, "acc", 1, SH(CC));
    control("bias_bwd/colsum", "N=32768 OC=8", cs_fast, cs_det, &s);
    dt_kset_free(&s);
}

/* ---- attention backward, key-block path: B*NH = 1, T = 256 (4 key blocks) ------------ */
enum { AB = 1, AT = 768, AC = 32, ANH = 2 };
static void att_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_attention_bwd_keyblocks(F(s, "dqkv"), F(s, "dout"), F(s, "qkv"), F(s, "att"), F(s, "out"),
                               AB, AT, AC, ANH, NULL, 0);
}
static void att_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_attention_bwd_det(F(s, "dqkv"), F(s, "dout"), F(s, "qkv"), F(s, "att"), AB, AT, AC, ANH, NULL, 0);
}
static void test_attention_bwd(void) {
    dt_kset s = {0};
    dt_kv_fill(ADD(&s, "qkv", 3, SH(AB, AT, 3 * AC)), 7, -1.5, 1.5);
    ADD(&s, "out", 3, SH(AB, AT, AC));
    ADD(&s, "att", 4, SH(AB, ANH, AT, AT));
    dt_attention_fwd(F(&s, "out"), F(&s, "att"), F(&s, "qkv"), AB, AT, AC, ANH, NULL, 0);
    dt_kv_fill_mixed(ADD(&s, "dout", 3, SH(AB, AT, AC)), 8, 2);
    ADD(&s, "dqkv", 3, SH(AB, AT, 3 * AC));
    control("attention_bwd", "B=1 NH=2 T=768 C=32 key blocks", att_fast, att_det, &s);
    dt_kset_free(&s);
}

/* ---- sums: 2M elements spanning 16 decades, so double partials round ----------------- */
enum { SN = 1 << 21 };
static void sumsq_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_kv_f64(dt_kset_get(s, "r"))[0] = dt_sumsq_fast(F(s, "x"), SN);
}
static void sumsq_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_kv_f64(dt_kset_get(s, "r"))[0] = dt_sumsq_det(F(s, "x"), SN);
}
static void sum_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_kv_f64(dt_kset_get(s, "r"))[0] = dt_sum_fast(F(s, "x"), SN);
}
static void sum_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_kv_f64(dt_kset_get(s, "r"))[0] = dt_sum_det(F(s, "x"), SN);
}
static void test_sums(void) {
    dt_kset s = {0};
    dt_kv_fill_mixed(ADD(&s, "x", 1, SH(SN)), 9, 8);
    dt_kset_add(&s, "r", DT_KH_F64, 1, SH(1), NULL, 0);
    control("sumsq (norm)", "n=2M, 1e-8..1e8", sumsq_fast, sumsq_det, &s);
    control("sum (mean loss)", "n=2M, 1e-8..1e8", sum_fast, sum_det, &s);
    dt_kset_free(&s);
}

/* ---- GEMM: OpenBLAS's own threading changes the bits with the thread count ----------- */
enum { GM = 37, GN = 513, GK = 999 };
static void gemm_fast(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_gemm_fast(0, 0, GM, GN, GK, 1.0f, F(s, "A"), GK, F(s, "B"), GN, 0.0f, F(s, "C"), GN);
}
static void gemm_det(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)ctx, (void)be;
    dt_gemm_det(0, 0, GM, GN, GK, 1.0f, F(s, "A"), GK, F(s, "B"), GN, 0.0f, F(s, "C"), GN);
}
static void test_gemm_threads(void) {
    dt_kset s = {0};
    dt_kv_fill(ADD(&s, "A", 2, SH(GM, GK)), 10, -1, 1);
    dt_kv_fill(ADD(&s, "B", 2, SH(GK, GN)), 11, -1, 1);
    ADD(&s, "C", 2, SH(GM, GN));
    static const int threads[] = {1, 2, 3, 4, 8};
    dt_kh_opts o = {.det = 0, .quiet = 1};
    int nd = 0;
    dt_kh_thread_sweep("gemm", "37x513x999 fast", gemm_fast, NULL, &s, &o, threads, 5, &nd);
    CHECKF(nd > 1, "gemm fast 37x513x999: identical bits for 1,2,3,4,8 threads; the thread "
           "sweep did not see OpenBLAS's split change");
    fprintf(stderr, "  gemm fast 37x513x999: %d distinct results over 1,2,3,4,8 threads\n", nd);
    o.det = 1;
    o.quiet = 0;
    CHECK(dt_kh_thread_sweep("gemm", "37x513x999 det", gemm_det, NULL, &s, &o, threads, 5, &nd));
    dt_kset_free(&s);
}

int main(void) {
    RUN(test_encoder_bwd);
    RUN(test_layernorm_bwd);
    RUN(test_colsum);
    RUN(test_attention_bwd);
    RUN(test_sums);
    RUN(test_gemm_threads);
    return dt_test_report();
}
