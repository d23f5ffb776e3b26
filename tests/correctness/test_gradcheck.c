/* Whole-model gradient check against fp64 (issue 2): a tiny GPT (L=2, C=16, NH=2, V=37
 * padded to 128, T=7, B=2) with non-trivial random parameters.
 *  (a) the fp32 forward loss (dt_gpt_forward) matches the fp64 reference forward
 *      (support/ref64.c, same parameters converted to double): |l32 - l64| <= 1e-5 |l64|,
 *      a few fp32 roundings through a dozen ops of O(1) values;
 *  (b) the fp32 analytic gradient (dt_gpt_backward) matches central finite differences of
 *      the fp64 loss (eps = 1e-4 in double: truncation error O(eps^2) ~ 1e-8 relative,
 *      cancellation ~ 1e-16 / 1e-4 = 1e-12) for 20 entries of every parameter tensor:
 *      |g - fd| <= 1e-4 max(|fd|, 1e-3) + 1e-7. The fp32 gradient carries relative errors
 *      of ~1e-6 (measured worst |g - fd| / tolerance is about 0.2, printed per tensor);
 *      1e-4 leaves room for that and is 100x tighter than a 1% error, which the test shows
 *      it would reject.
 * Entries are drawn from the rows that take part in the loss (wte rows < V, wpe rows < T).
 * Both branches (deterministic mode off and on) are checked, for the dense model and for
 * an MoE model (layer 0 an MoE MLP of 4 experts, top-2, capacity factor 1.0 so that
 * assignments drop, aux coefficient 0.05; layer 1 dense) whose objective is the loss plus
 * the aux loss: (a) against ref64_gpt_objective, (b) every tensor, the router and experts
 * included. */
#include "kernels/harness.h"
#include "support/ref64.h"

#include "model/gpt.h"
#include "dt_test.h"

enum { L = 2, C = 16, NH = 2, V = 37, T = 7, B = 2, SAMPLES = 20 };
static const double EPS = 1e-4;

static int within(double g, double fd) {
    double a = fabs(fd) > 1e-3 ? fabs(fd) : 1e-3;
    return fabs(g - fd) <= 1e-4 * a + 1e-7;
}

static void run_gradcheck(int det, int moe) {
    dt_kh_set_mode(det);
    dt_gpt_config cfg = {.max_seq_len = T, .vocab_size = V, .num_layers = L, .num_heads = NH,
                         .channels = C};
    const double coeff = moe ? 0.05 : 0.0, capf = moe ? 1.0 : 0.0;
    const char *mode = moe ? (det ? "moe det" : "moe fast") : (det ? "det" : "fast");
    dt_gpt *m = NULL;
    if (moe) CHECK_OK(dt_gpt_set_moe(&cfg, 4, 2, "2"));
    CHECK_OK(dt_gpt_config_finish(&cfg));
    CHECK_OK(dt_gpt_create(&m, &cfg, B, T, 7));
    if (!m) return;
    m->moe_aux_coeff = (float)coeff;
    m->moe_capacity_factor = (float)capf;
    /* Parameters: uniform spread, LayerNorm weights around 1; padded vocab rows stay 0. */
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        int lnw = i == DT_P_LN1W || i == DT_P_LN2W || i == DT_P_LNFW;
        for (size_t k = 0; k < d->numel; k++) {
            double u = dt_kh_uniform(100 + (uint64_t)i, k) * 2 - 1;
            m->param[i][k] = (float)(lnw ? 1.0 + 0.3 * u : 0.3 * u);
        }
    }
    for (size_t k = (size_t)V * C; k < m->params[DT_P_WTE].numel; k++) m->param[DT_P_WTE][k] = 0.0f;
    int inp[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        inp[i] = (int)(dt_kh_uniform(5, (uint64_t)i) * V);
        tgt[i] = (int)(dt_kh_uniform(6, (uint64_t)i) * V);
    }
    double *p64 = malloc(sizeof(double) * m->num_params);
    for (size_t k = 0; k < m->num_params; k++) p64[k] = m->param_mem[k];

    /* (a) forward loss */
    double aux64 = 0.0, l32 = 0.0, l64 = ref64_gpt_objective(&cfg, p64, inp, tgt, B, T, coeff, capf, &aux64);
    dt_gpt_zero_grad(m);
    CHECK_OK(dt_gpt_forward(m, inp, tgt, &l32));
    l32 += m->moe_aux;
    if (moe) {
        CHECKF(m->moe_dropped > 0, "moe: capacity 1.0 drops assignments (%lld)", (long long)m->moe_dropped);
        CHECKF(fabs(m->moe_aux - aux64) <= 1e-5 * aux64, "moe: aux %.9g vs fp64 %.12g", m->moe_aux, aux64);
    }
    CHECKF(fabs(l32 - l64) <= 1e-5 * fabs(l64), "%s: fp32 loss %.9g vs fp64 %.12g (rel %.3g)",
           mode, l32, l64, fabs(l32 - l64) / fabs(l64));
    fprintf(stderr, "  %s: loss fp32 %.9f fp64 %.9f rel diff %.2e\n", mode, l32,
            l64, fabs(l32 - l64) / fabs(l64));

    /* (b) gradients */
    dt_gpt_backward(m, 1.0f);
    int strict_rejects = 0;
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        size_t span = d->numel;
        if (span == 0) continue; /* a dense model's MoE tensors */
        if (i == DT_P_WTE) span = (size_t)V * C;
        if (i == DT_P_WPE) span = (size_t)T * C;
        int bad = 0;
        double worst = 0.0;
        size_t worst_k = 0;
        for (int s = 0; s < SAMPLES; s++) {
            size_t k = (size_t)(dt_kh_uniform(200 + (uint64_t)i, (uint64_t)s) * (double)span);
            size_t at = d->offset + k;
            double keep = p64[at];
            p64[at] = keep + EPS;
            double lp = ref64_gpt_objective(&cfg, p64, inp, tgt, B, T, coeff, capf, NULL);
            p64[at] = keep - EPS;
            double lm = ref64_gpt_objective(&cfg, p64, inp, tgt, B, T, coeff, capf, NULL);
            p64[at] = keep;
            double fd = (lp - lm) / (2 * EPS), g = m->grad_mem[at];
            double a = fabs(fd) > 1e-3 ? fabs(fd) : 1e-3, ratio = fabs(g - fd) / (1e-4 * a + 1e-7);
            if (ratio > worst) { worst = ratio; worst_k = k; }
            if (!within(g, fd)) {
                bad++;
                fprintf(stderr, "  %s %s[%zu]: analytic %.9g finite-difference %.9g\n", mode, d->name, k, g, fd);
            }
            strict_rejects += fabs(fd) > 1e-2 && !within(g * 1.01, fd);
        }
        CHECKF(bad == 0, "%s: tensor %s: %d of %d sampled gradients off the fp64 finite "
               "differences", mode, d->name, bad, SAMPLES);
        fprintf(stderr, "  %s %-9s worst |g-fd|/tol %.3f (at %zu)\n", mode, d->name, worst, worst_k);
    }
    /* The tolerance rejects a gradient that is 1% off. */
    CHECK(strict_rejects > 0);
    free(p64);
    dt_gpt_free(m);
}

static void test_gradcheck_det(void) { run_gradcheck(1, 0); }
static void test_gradcheck_fast(void) { run_gradcheck(0, 0); }
static void test_gradcheck_moe_det(void) { run_gradcheck(1, 1); }
static void test_gradcheck_moe_fast(void) { run_gradcheck(0, 1); }

int main(void) {
    RUN(test_gradcheck_det);
    RUN(test_gradcheck_fast);
    RUN(test_gradcheck_moe_det);
    RUN(test_gradcheck_moe_fast);
    return dt_test_report();
}
