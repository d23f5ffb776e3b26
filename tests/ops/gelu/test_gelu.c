/* GELU (ops/gelu_cpu.c) uses detrain's own tanh (dt_tanhf, no libm: the same bits with
 * any C library). Checks over 2^21 inputs in [-16, 16]:
 *  - dt_tanhf within a relative error of 4 * 2^-24 of tanh in double (below 2^-20, absolute);
 *  - GELU forward and backward against the formula in double, with the error a float
 *    evaluation must have: 1 + tanh(u) cancels for negative x, so the bound is
 *    8 * 2^-24 * (|ref| + the magnitude of the terms that carry tanh's error), not a
 *    relative bound on the result;
 *  - near 0, where GELU's internal tanh has only absolute accuracy (it skips the series
 *    branch of dt_tanhf: GELU uses 1 + tanh), the result stays within 2^-23 |x| of the
 *    formula in double;
 *  - special values: signed zeros, saturation, NaN. */
#include "ops/gelu/gelu.h"
#include "dt_test.h"

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_ref(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

static void test_tanh(void) {
    double worst = 0;
    size_t bad = 0;
    for (int i = -(1 << 21); i <= (1 << 21); i++) {
        float u = (float)i * (12.0f / (float)(1 << 21));
        double r = tanh((double)u), e = fabs(dt_tanhf(u) - r) / (fmax(fabs(r), 0x1p-20) * 0x1p-24);
        if (e > worst) worst = e;
        if (e > 4) bad++;
    }
    fprintf(stderr, "tanh worst relative error %.2f x 2^-24 (limit 4)\n", worst);
    CHECKF(bad == 0, "%zu inputs beyond the limit", bad);
    CHECK(dt_tanhf(-0.0f) == 0.0f && signbit(dt_tanhf(-0.0f)));
    CHECK(dt_tanhf(20.0f) == 1.0f && dt_tanhf(-20.0f) == -1.0f);
    CHECK(isnan(dt_tanhf(NAN)) && dt_tanhf(INFINITY) == 1.0f && dt_tanhf(-INFINITY) == -1.0f);
}

static void test_sweep(void) {
    size_t n = (size_t)1 << 21;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = -16.0f + 32.0f * (float)i / (float)n;
        dy[i] = 1.0f;
    }
    dt_gelu_fwd(y, x, n);
    dt_gelu_bwd(dx, x, dy, n);
    double worst_f = 0, worst_b = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double rf = gelu_ref(x[i]), rb = gelu_grad_ref(x[i]);
        double ax = fabs(x[i]);
        double sf = fabs(rf) + 0.5 * ax;                                    /* 0.5 x (1 + t) */
        double sb = fabs(rb) + 0.5 + ax * 0.8 * (1.0 + 0.135 * ax * ax);    /* t and x (1 - t^2) K (...) */
        double ef = fabs(y[i] - rf) / (sf * 0x1p-24), eb = fabs(dx[i] - rb) / (sb * 0x1p-24);
        if (ef > worst_f) worst_f = ef;
        if (eb > worst_b) worst_b = eb;
        if (ef > 8 || eb > 8) bad++;
    }
    fprintf(stderr, "gelu worst error: forward %.2f, backward %.2f units of 2^-24 x scale (limit 8)\n",
            worst_f, worst_b);
    CHECKF(bad == 0, "%zu inputs beyond the limit", bad);
    free(x); free(y); free(dy); free(dx);
}

static void test_near_zero(void) {
    enum { N = 20001 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i - N / 2) * 1e-5f;
    dt_gelu_fwd(y, x, N);
    for (int i = 0; i < N; i++)
        CHECKF(fabs(y[i] - gelu_ref(x[i])) <= 0x1p-23 * fabs(x[i]) + 1e-45, "x=%g", (double)x[i]);
}

static void test_special(void) {
    float x[6] = {0.0f, -0.0f, 30.0f, -30.0f, NAN, 1e-30f}, y[6], d[6] = {1, 1, 1, 1, 1, 1}, g[6];
    dt_gelu_fwd(y, x, 6);
    dt_gelu_bwd(g, x, d, 6);
    CHECK(y[0] == 0.0f && y[1] == 0.0f);
    CHECK(y[2] == 30.0f);          /* saturated: tanh -> 1 exactly */
    CHECK(y[3] == 0.0f);           /* -30 * 0.5 * (1 - 1) */
    CHECK(isnan(y[4]) && isnan(g[4]));
    CHECK(fabsf(y[5] - 0.5e-30f) <= 1e-36f);
    CHECK(g[2] == 1.0f && g[3] == 0.0f);
}

int main(void) {
    RUN(test_tanh);
    RUN(test_sweep);
    RUN(test_near_zero);
    RUN(test_special);
    return dt_test_report();
}
