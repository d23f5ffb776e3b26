/* The CPU MoE layer (src/ops/moe/moe_cpu.c, moe.h) against an fp64 reference written here:
 *  - accuracy of the forward (probs, gates, out, aux) and of every gradient (dx, dwr, dw1,
 *    db1, dw2, db2) in both branches: |y - ref| <= ATOL + RTOL |ref| per element (fp32
 *    GEMMs over at most F = 128 terms and the tanh-form GELU within 2^-24: ATOL 2e-5,
 *    RTOL 2e-3); the routing (experts, kept assignments, rows, tokens, offsets, counts,
 *    dropped) exactly;
 *  - central finite differences of the whole layer's loss sum(w * out) + aux in fp64 at
 *    spot entries of every parameter and of x, against the reference's gradient (relative
 *    1e-5) and the CPU's fp32 gradient (FD_TOL);
 *  - the det branch byte-identical under 1, 2 and 3 OpenMP threads (memcmp of every output
 *    and gradient);
 *  - skewed routing: one expert takes every token, empty experts (their gradients stay
 *    exactly 0), exact ties in p (the total order: lower expert index first), capacity
 *    dropping with its counts;
 *  - negative controls: the default combine and dprob are order-sensitive (the arrival
 *    order of their atomic adds changes bits), shown by fixed different orders of the same
 *    terms; 2-thread replays of the default branch are reported, not failed.
 * Runs on the CPU (CI), a second or two. */
#include "core/determinism.h"
#include "ops/moe/moe.h"

#include "dt_test.h"

#include <cblas.h>
#include <omp.h>
#include <stdint.h>

#define ATOL 2e-5
#define RTOL 2e-3
#define FD_TOL 2e-3

static void set_threads(int n) { omp_set_num_threads(n); openblas_set_num_threads(n); }

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { /* xorshift64*, uniform in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}
static void fill(float *p, size_t n, double scale) { for (size_t i = 0; i < n; i++) p[i] = (float)(scale * urand()); }

/* ---- a problem: dims, inputs, parameters ----------------------------------------- */

typedef struct problem {
    dt_moe_dims d;
    float coeff, daux;
    float *x, *dout, *wr, *w1, *b1, *w2, *b2;
} problem;

static void problem_make(problem *p, int N, int C, int E, int K, double cap_factor) {
    memset(p, 0, sizeof *p);
    p->d = (dt_moe_dims){N, C, 4 * C, E, K, dt_moe_capacity(cap_factor, N, K, E)};
    p->coeff = 0.01f;
    p->daux = 0.75f;
    size_t NC = (size_t)N * C, F = (size_t)p->d.F;
    p->x = malloc(sizeof(float) * NC);
    p->dout = malloc(sizeof(float) * NC);
    p->wr = malloc(sizeof(float) * (size_t)E * C);
    p->w1 = malloc(sizeof(float) * (size_t)E * F * C);
    p->b1 = malloc(sizeof(float) * (size_t)E * F);
    p->w2 = malloc(sizeof(float) * (size_t)E * C * F);
    p->b2 = malloc(sizeof(float) * (size_t)E * C);
    fill(p->x, NC, 1.0);
    fill(p->dout, NC, 1.0);
    fill(p->wr, (size_t)E * C, 0.5);
    fill(p->w1, (size_t)E * F * C, 0.2);
    fill(p->b1, (size_t)E * F, 0.1);
    fill(p->w2, (size_t)E * C * F, 0.1);
    fill(p->b2, (size_t)E * C, 0.1);
}

static void problem_free(problem *p) {
    free(p->x); free(p->dout); free(p->wr); free(p->w1); free(p->b1); free(p->w2); free(p->b2);
}

/* What one run of the CPU block gives. */
typedef struct result {
    float *af, *sf, *out, *dx, *dwr, *dw1, *db1, *dw2, *db2;
    int32_t *ai;
    dt_moe_acts a;
    double aux;
    size_t nf, ni, nsf;
} result;

static void run_block(const problem *p, result *r) {
    const dt_moe_dims *d = &p->d;
    dt_moe_sizes sz = dt_moe_sizes_of(d);
    size_t NC = (size_t)d->N * d->C, E = (size_t)d->E, C = (size_t)d->C, F = (size_t)d->F;
    memset(r, 0, sizeof *r);
    r->nf = sz.act_floats; r->ni = sz.act_ints; r->nsf = sz.scratch_floats;
    r->af = calloc(sz.act_floats, sizeof(float));
    r->ai = calloc(sz.act_ints, sizeof(int32_t));
    r->sf = calloc(sz.scratch_floats, sizeof(float));
    r->out = calloc(NC, sizeof(float));
    r->dx = calloc(NC, sizeof(float));
    r->dwr = calloc(E * C, sizeof(float));
    r->dw1 = calloc(E * F * C, sizeof(float));
    r->db1 = calloc(E * F, sizeof(float));
    r->dw2 = calloc(E * C * F, sizeof(float));
    r->db2 = calloc(E * C, sizeof(float));
    dt_moe_acts_bind(&r->a, r->af, r->ai, d);
    dt_moe_scratch s;
    dt_moe_scratch_bind(&s, r->sf, d);
    dt_moe_params pp = {p->wr, p->w1, p->b1, p->w2, p->b2};
    dt_moe_grads g = {r->dwr, r->dw1, r->db1, r->dw2, r->db2};
    dt_moe_block_fwd(r->out, &r->aux, &r->a, p->x, &pp, d, p->coeff);
    dt_moe_block_bwd(r->dx, &g, &s, &r->a, p->x, p->dout, &pp, d, p->coeff, p->daux);
}

static void result_free(result *r) {
    free(r->af); free(r->ai); free(r->sf); free(r->out); free(r->dx); free(r->dwr); free(r->dw1); free(r->db1);
    free(r->dw2); free(r->db2);
}

/* ---- the fp64 reference ----------------------------------------------------------- */

/* Parameters and input in double (finite differences perturb these). */
typedef struct dparams { double *x, *wr, *w1, *b1, *w2, *b2; } dparams;

typedef struct reference {
    double *probs, *gate, *out, aux;
    int *expert, *kept, *row, *token, *offsets, *counts, dropped;
    double *dx, *dwr, *dw1, *db1, *dw2, *db2;
} reference;

static double *dup_d(const float *p, size_t n) {
    double *q = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) q[i] = p[i];
    return q;
}

static void dparams_make(dparams *q, const problem *p) {
    size_t E = (size_t)p->d.E, C = (size_t)p->d.C, F = (size_t)p->d.F;
    q->x = dup_d(p->x, (size_t)p->d.N * C);
    q->wr = dup_d(p->wr, E * C);
    q->w1 = dup_d(p->w1, E * F * C);
    q->b1 = dup_d(p->b1, E * F);
    q->w2 = dup_d(p->w2, E * C * F);
    q->b2 = dup_d(p->b2, E * C);
}
static void dparams_free(dparams *q) { free(q->x); free(q->wr); free(q->w1); free(q->b1); free(q->w2); free(q->b2); }

#define GK 0.7978845608028654
static double gelu(double x) { return 0.5 * x * (1.0 + tanh(GK * (x + 0.044715 * x * x * x))); }
static double gelu_d(double x) {
    double th = tanh(GK * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GK * (1.0 + 3.0 * 0.044715 * x * x);
}

/* The forward, per token and per assignment with no dispatch buffer; the capacity rank of
 * (t,k) counted directly as the assignments to its expert that precede it in (k, t) order;
 * the rows from the kept counts. With grads, the backward too (dout, daux). */
static void ref_run(const problem *p, const dparams *q, reference *R, int grads) {
    int N = p->d.N, C = p->d.C, F = p->d.F, E = p->d.E, K = p->d.K, cap = p->d.cap;
    size_t NK = (size_t)N * K;
    memset(R, 0, sizeof *R);
    R->probs = calloc((size_t)N * E, sizeof(double));
    R->gate = calloc(NK, sizeof(double));
    R->out = calloc((size_t)N * C, sizeof(double));
    R->expert = calloc(NK, sizeof(int));
    R->kept = calloc(NK, sizeof(int));
    R->row = calloc(NK, sizeof(int));
    R->token = calloc(NK, sizeof(int));
    R->offsets = calloc((size_t)E + 1, sizeof(int));
    R->counts = calloc((size_t)E, sizeof(int));
    for (int t = 0; t < N; t++) {
        double *pr = R->probs + (size_t)t * E, mx = -1e300, s = 0;
        for (int e = 0; e < E; e++) {
            double z = 0;
            for (int c = 0; c < C; c++) z += q->wr[(size_t)e * C + c] * q->x[(size_t)t * C + c];
            pr[e] = z;
            mx = z > mx ? z : mx;
        }
        for (int e = 0; e < E; e++) s += (pr[e] = exp(pr[e] - mx));
        for (int e = 0; e < E; e++) pr[e] /= s;
        /* top-K: rank of e = #{e' : p[e'] > p[e] or (p[e'] == p[e] and e' < e)} */
        for (int e = 0; e < E; e++) {
            int rank = 0;
            for (int j = 0; j < E; j++) rank += pr[j] > pr[e] || (pr[j] == pr[e] && j < e);
            if (rank < K) {
                R->expert[(size_t)t * K + rank] = e;
                R->gate[(size_t)t * K + rank] = pr[e];
            }
        }
    }
    for (size_t i = 0; i < NK; i++) R->counts[R->expert[i]]++;
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            int e = R->expert[(size_t)t * K + k], rank = 0;
            for (int t2 = 0; t2 < N; t2++)
                for (int k2 = 0; k2 < K; k2++)
                    rank += R->expert[(size_t)t2 * K + k2] == e && (k2 < k || (k2 == k && t2 < t));
            R->kept[(size_t)t * K + k] = cap == 0 || rank < cap;
            R->dropped += !R->kept[(size_t)t * K + k];
        }
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (size_t i = 0; i < NK; i++) n += R->expert[i] == e && R->kept[i];
        R->offsets[e + 1] = R->offsets[e] + n;
    }
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)t * K + k;
            if (!R->kept[i]) { R->row[i] = -1; continue; }
            int e = R->expert[i], before = 0;
            for (int t2 = 0; t2 < t; t2++)
                for (int k2 = 0; k2 < K; k2++) before += R->expert[(size_t)t2 * K + k2] == e && R->kept[(size_t)t2 * K + k2];
            R->row[i] = R->offsets[e] + before;
            R->token[R->row[i]] = t;
        }
    double aux = 0;
    for (int e = 0; e < E; e++) {
        double P = 0;
        for (int t = 0; t < N; t++) P += R->probs[(size_t)t * E + e];
        aux += ((double)R->counts[e] / (double)NK) * (P / N);
    }
    R->aux = p->coeff * (double)E * aux;
    double *h = malloc(sizeof(double) * (size_t)F), *y = malloc(sizeof(double) * (size_t)C);
    double *da = malloc(sizeof(double) * (size_t)F), *dp = malloc(sizeof(double) * (size_t)E);
    if (grads) {
        R->dx = calloc((size_t)N * C, sizeof(double));
        R->dwr = calloc((size_t)E * C, sizeof(double));
        R->dw1 = calloc((size_t)E * F * C, sizeof(double));
        R->db1 = calloc((size_t)E * F, sizeof(double));
        R->dw2 = calloc((size_t)E * C * F, sizeof(double));
        R->db2 = calloc((size_t)E * C, sizeof(double));
    }
    for (int t = 0; t < N; t++) {
        const double *xt = q->x + (size_t)t * C;
        for (int e = 0; e < E; e++) dp[e] = (double)p->daux * p->coeff * E * R->counts[e] / ((double)NK * N);
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)t * K + k;
            if (!R->kept[i]) continue;
            int e = R->expert[i];
            const double *W1 = q->w1 + (size_t)e * F * C, *W2 = q->w2 + (size_t)e * C * F;
            for (int f = 0; f < F; f++) {
                double s = q->b1[(size_t)e * F + f];
                for (int c = 0; c < C; c++) s += W1[(size_t)f * C + c] * xt[c];
                h[f] = s;
            }
            for (int c = 0; c < C; c++) {
                double s = q->b2[(size_t)e * C + c];
                for (int f = 0; f < F; f++) s += W2[(size_t)c * F + f] * gelu(h[f]);
                y[c] = s;
                R->out[(size_t)t * C + c] += R->gate[i] * s;
            }
            if (!grads) continue;
            double dg = 0;
            for (int c = 0; c < C; c++) dg += (double)p->dout[(size_t)t * C + c] * y[c];
            dp[e] += dg;
            for (int f = 0; f < F; f++) da[f] = 0;
            for (int c = 0; c < C; c++) {
                double dy = R->gate[i] * p->dout[(size_t)t * C + c];
                R->db2[(size_t)e * C + c] += dy;
                for (int f = 0; f < F; f++) {
                    R->dw2[((size_t)e * C + c) * F + f] += dy * gelu(h[f]);
                    da[f] += dy * W2[(size_t)c * F + f];
                }
            }
            for (int f = 0; f < F; f++) {
                double dh = da[f] * gelu_d(h[f]);
                R->db1[(size_t)e * F + f] += dh;
                for (int c = 0; c < C; c++) {
                    R->dw1[((size_t)e * F + f) * C + c] += dh * xt[c];
                    R->dx[(size_t)t * C + c] += dh * W1[(size_t)f * C + c];
                }
            }
        }
        if (!grads) continue;
        const double *pr = R->probs + (size_t)t * E;
        double dot = 0;
        for (int e = 0; e < E; e++) dot += dp[e] * pr[e];
        for (int e = 0; e < E; e++) {
            double dz = pr[e] * (dp[e] - dot);
            for (int c = 0; c < C; c++) {
                R->dwr[(size_t)e * C + c] += dz * xt[c];
                R->dx[(size_t)t * C + c] += dz * q->wr[(size_t)e * C + c];
            }
        }
    }
    free(h); free(y); free(da); free(dp);
}

static void ref_free(reference *R) {
    free(R->probs); free(R->gate); free(R->out); free(R->expert); free(R->kept); free(R->row); free(R->token);
    free(R->offsets); free(R->counts); free(R->dx); free(R->dwr); free(R->dw1); free(R->db1); free(R->dw2);
    free(R->db2);
}

/* The layer's loss for the finite differences: sum(dout * out) + daux * aux. */
static double ref_loss(const problem *p, const dparams *q) {
    reference R;
    ref_run(p, q, &R, 0);
    double L = (double)p->daux * R.aux;
    for (size_t i = 0; i < (size_t)p->d.N * p->d.C; i++) L += (double)p->dout[i] * R.out[i];
    ref_free(&R);
    return L;
}

/* ---- checks ---------------------------------------------------------------------- */

static int close_all(const char *what, const float *y, const double *ref, size_t n) {
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)y[i] - ref[i]), lim = ATOL + RTOL * fabs(ref[i]);
        if (!(err <= lim)) { if (!bad) first = i; bad++; }
        worst = err > worst ? err : worst;
    }
    if (bad) fprintf(stderr, "  %s: %zu of %zu elements off (first %zu: %.9g vs %.9g), worst |err| %.3g\n", what,
                     bad, n, first, (double)y[first], ref[first], worst);
    return bad == 0;
}

/* The block's every output against the reference, routing exactly. */
static void check_against_ref(const problem *p, const result *r, const char *label) {
    const dt_moe_dims *d = &p->d;
    dparams q;
    dparams_make(&q, p);
    reference R;
    ref_run(p, &q, &R, 1);
    size_t NK = (size_t)d->N * d->K, E = (size_t)d->E, C = (size_t)d->C, F = (size_t)d->F;
    const dt_moe_route *rt = &r->a.route;
    int route_ok = rt->rows == R.offsets[d->E] && rt->dropped == R.dropped;
    for (size_t i = 0; i < NK && route_ok; i++)
        route_ok = rt->expert[i] == R.expert[i] && rt->row[i] == R.row[i];
    for (int i = 0; i < rt->rows && route_ok; i++) route_ok = rt->token[i] == R.token[i];
    for (size_t e = 0; e <= E && route_ok; e++) route_ok = rt->offsets[e] == R.offsets[e];
    for (size_t e = 0; e < E && route_ok; e++) route_ok = rt->counts[e] == R.counts[e];
    CHECKF(route_ok, "%s: the routing (experts, rows, tokens, offsets, counts, dropped) equals the reference's",
           label);
    CHECKF(close_all("probs", rt->probs, R.probs, (size_t)d->N * E), "%s: probs", label);
    CHECKF(close_all("gate", rt->gate, R.gate, NK), "%s: gates", label);
    CHECKF(close_all("out", r->out, R.out, (size_t)d->N * C), "%s: out", label);
    CHECKF(fabs(r->aux - R.aux) <= 1e-7 * fabs(R.aux) + 1e-12, "%s: aux %.12g vs %.12g", label, r->aux, R.aux);
    CHECKF(close_all("dx", r->dx, R.dx, (size_t)d->N * C), "%s: dx", label);
    CHECKF(close_all("dwr", r->dwr, R.dwr, E * C), "%s: dwr", label);
    CHECKF(close_all("dw1", r->dw1, R.dw1, E * F * C), "%s: dw1", label);
    CHECKF(close_all("db1", r->db1, R.db1, E * F), "%s: db1", label);
    CHECKF(close_all("dw2", r->dw2, R.dw2, E * C * F), "%s: dw2", label);
    CHECKF(close_all("db2", r->db2, R.db2, E * C), "%s: db2", label);
    ref_free(&R);
    dparams_free(&q);
}

static void set_mode(int det) {
    dt_determinism_reset_for_tests();
    dt_det_request req = {det, NULL, 0};
    CHECK_OK(dt_determinism_apply(&req));
    dt_op_clear_overrides();
}

static void test_capacity_and_dims(void) {
    CHECK(dt_moe_capacity(0.0, 64, 2, 4) == 0);
    CHECK(dt_moe_capacity(1.0, 64, 2, 4) == 32);
    CHECK(dt_moe_capacity(1.25, 10, 1, 3) == 5);   /* ceil(4.17) */
    CHECK(dt_moe_capacity(100.0, 10, 2, 2) == 10); /* at most one row per token */
    dt_moe_dims ok = {8, 4, 16, 4, 2, 0}, bad = ok;
    CHECK_OK(dt_moe_dims_check(&ok));
    bad.K = 5;
    CHECK(dt_moe_dims_check(&bad) == DT_EINVAL && strstr(dt_errmsg(), "top-5 of 4"));
    bad = ok; bad.E = 0;
    CHECK(dt_moe_dims_check(&bad) == DT_EINVAL);
    bad = ok; bad.cap = -1;
    CHECK(dt_moe_dims_check(&bad) == DT_EINVAL);
}

/* Random routing, both branches, with and without capacity dropping. */
static void test_accuracy(void) {
    static const struct { int N, C, E, K; double f; } cases[] = {
        {48, 32, 6, 2, 0.0}, {40, 16, 4, 1, 0.0}, {33, 24, 5, 3, 0.0}, {64, 32, 4, 2, 1.0}, {50, 16, 8, 4, 0.75},
    };
    for (int det = 1; det >= 0; det--) {
        set_mode(det);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            problem p;
            problem_make(&p, cases[c].N, cases[c].C, cases[c].E, cases[c].K, cases[c].f);
            CHECK_OK(dt_moe_dims_check(&p.d));
            result r;
            run_block(&p, &r);
            char label[96];
            snprintf(label, sizeof label, "%s N%d C%d E%d K%d f%.2f", det ? "det" : "fast", cases[c].N, cases[c].C,
                     cases[c].E, cases[c].K, cases[c].f);
            check_against_ref(&p, &r, label);
            if (cases[c].f > 0) CHECKF(r.a.route.dropped > 0, "%s: capacity drops tokens", label);
            result_free(&r);
            problem_free(&p);
        }
    }
}

/* Central differences of the fp64 layer loss at spot entries. */
static void test_finite_differences(void) {
    set_mode(1);
    problem p;
    problem_make(&p, 24, 16, 4, 2, 1.0);
    result r;
    run_block(&p, &r);
    dparams q;
    dparams_make(&q, &p);
    reference R;
    ref_run(&p, &q, &R, 1);
    size_t E = 4, C = 16, F = 64;
    struct { const char *name; double *v; const double *g; const float *gf; size_t n; } t[] = {
        {"x", q.x, R.dx, r.dx, (size_t)p.d.N * C}, {"wr", q.wr, R.dwr, r.dwr, E * C},
        {"w1", q.w1, R.dw1, r.dw1, E * F * C},     {"b1", q.b1, R.db1, r.db1, E * F},
        {"w2", q.w2, R.dw2, r.dw2, E * C * F},     {"b2", q.b2, R.db2, r.db2, E * C},
    };
    const double h = 1e-5;
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        for (int s = 0; s < 8; s++) {
            size_t i = (size_t)((urand() + 1.0) * 0.5 * (double)t[k].n) % t[k].n;
            double v = t[k].v[i];
            t[k].v[i] = v + h;
            double lp = ref_loss(&p, &q);
            t[k].v[i] = v - h;
            double lm = ref_loss(&p, &q);
            t[k].v[i] = v;
            double fd = (lp - lm) / (2 * h), scale = fabs(fd) > 1e-3 ? fabs(fd) : 1e-3;
            CHECKF(fabs(fd - t[k].g[i]) <= 1e-5 * scale, "d%s[%zu]: fd %.10g, reference %.10g", t[k].name, i, fd,
                   t[k].g[i]);
            CHECKF(fabs(fd - (double)t[k].gf[i]) <= FD_TOL * scale, "d%s[%zu]: fd %.10g, cpu %.10g", t[k].name, i,
                   fd, (double)t[k].gf[i]);
        }
    ref_free(&R);
    dparams_free(&q);
    result_free(&r);
    problem_free(&p);
}

static int same_result(const result *a, const result *b, const problem *p) {
    size_t NC = (size_t)p->d.N * p->d.C, E = (size_t)p->d.E, C = (size_t)p->d.C, F = (size_t)p->d.F;
    return !memcmp(a->af, b->af, sizeof(float) * a->nf) && !memcmp(a->ai, b->ai, sizeof(int32_t) * a->ni) &&
           !memcmp(a->sf, b->sf, sizeof(float) * a->nsf) && !memcmp(a->out, b->out, sizeof(float) * NC) &&
           !memcmp(a->dx, b->dx, sizeof(float) * NC) && !memcmp(&a->aux, &b->aux, sizeof a->aux) &&
           !memcmp(a->dwr, b->dwr, sizeof(float) * E * C) && !memcmp(a->dw1, b->dw1, sizeof(float) * E * F * C) &&
           !memcmp(a->db1, b->db1, sizeof(float) * E * F) && !memcmp(a->dw2, b->dw2, sizeof(float) * E * C * F) &&
           !memcmp(a->db2, b->db2, sizeof(float) * E * C);
}

/* The det branch, byte for byte, under 1, 2 and 3 threads (large enough that every thread
 * holds many tokens, rows and groups). */
static void test_det_threads(void) {
    set_mode(1);
    problem p;
    problem_make(&p, 512, 64, 8, 2, 1.25);
    result base;
    set_threads(1);
    run_block(&p, &base);
    for (int n = 2; n <= 3; n++) {
        set_threads(n);
        result r;
        run_block(&p, &r);
        CHECKF(same_result(&base, &r, &p), "det block with %d threads equals 1 thread byte for byte", n);
        result_free(&r);
    }
    set_threads(2);
    result_free(&base);
    problem_free(&p);
}

/* One expert takes every token (K = 1: the other experts are empty; K = 2: every token's
 * first choice is expert 2); exact ties. */
static void test_skewed(void) {
    set_mode(1);
    for (int K = 1; K <= 2; K++) {
        problem p;
        problem_make(&p, 40, 16, 5, K, 0.0);
        for (size_t i = 0; i < (size_t)40 * 16; i++) p.x[i] = (float)fabs(p.x[i]) + 0.1f;
        for (int c = 0; c < 16; c++) p.wr[2 * 16 + c] = 3.0f; /* expert 2's logit dominates */
        result r;
        run_block(&p, &r);
        const dt_moe_route *rt = &r.a.route;
        int all2 = 1;
        for (int t = 0; t < 40; t++) all2 &= rt->expert[(size_t)t * K] == 2;
        CHECKF(all2 && rt->counts[2] == 40, "K%d: expert 2 takes every token", K);
        char label[32];
        snprintf(label, sizeof label, "one expert, K%d", K);
        check_against_ref(&p, &r, label);
        if (K == 1) {
            int zero = 1;
            size_t C = 16, F = 64;
            for (int e = 0; e < 5; e++) {
                if (e == 2) continue;
                CHECK(rt->offsets[e + 1] == rt->offsets[e]);
                for (size_t j = 0; j < F * C; j++) zero &= r.dw1[(size_t)e * F * C + j] == 0.0f;
                for (size_t j = 0; j < C * F; j++) zero &= r.dw2[(size_t)e * C * F + j] == 0.0f;
                for (size_t j = 0; j < F; j++) zero &= r.db1[(size_t)e * F + j] == 0.0f;
                for (size_t j = 0; j < C; j++) zero &= r.db2[(size_t)e * C + j] == 0.0f;
            }
            CHECKF(zero, "empty experts' gradients stay exactly 0");
        }
        result_free(&r);
        problem_free(&p);
    }
    /* all logits 0: p is exactly 1/E for every expert, so the top-3 are experts 0, 1, 2 */
    problem p;
    problem_make(&p, 16, 8, 6, 3, 0.0);
    memset(p.wr, 0, sizeof(float) * 6 * 8);
    /* experts 1 and 4 share a row: equal p, the lower index first */
    problem q;
    problem_make(&q, 16, 8, 6, 2, 0.0);
    /* values on a coarse binary grid: every product and partial sum is exact in fp32, so
     * the two logits are equal in any summation order */
    for (size_t i = 0; i < (size_t)6 * 8; i++) q.wr[i] = (float)((int)(q.wr[i] * 8.0f)) / 8.0f;
    for (size_t i = 0; i < (size_t)16 * 8; i++) q.x[i] = (float)((int)(fabs(q.x[i]) * 4.0f) + 2) / 4.0f;
    for (int c = 0; c < 8; c++) q.wr[4 * 8 + c] = q.wr[1 * 8 + c] = 1.0f + 0.125f * (float)c;
    result r;
    run_block(&p, &r);
    int order = 1;
    for (int t = 0; t < 16; t++)
        for (int k = 0; k < 3; k++) order &= r.a.route.expert[t * 3 + k] == k;
    CHECKF(order, "uniform p: every token routes to experts 0, 1, 2 in that order");
    check_against_ref(&p, &r, "uniform p");
    result_free(&r);
    run_block(&q, &r);
    int tie = 1;
    for (int t = 0; t < 16; t++) tie &= r.a.route.expert[t * 2] == 1 && r.a.route.expert[t * 2 + 1] == 4;
    CHECKF(tie, "tied experts 1 and 4: expert 1 is choice 0, expert 4 choice 1");
    check_against_ref(&q, &r, "tied pair");
    result_free(&r);
    problem_free(&p);
    problem_free(&q);
}

/* Capacity: the counts and which assignments drop (the reference ranks by (k, t)). */
static void test_capacity_drop(void) {
    set_mode(1);
    problem p;
    problem_make(&p, 60, 16, 4, 2, 1.0);
    for (int c = 0; c < 16; c++) p.wr[0 * 16 + c] += 0.8f; /* skew towards expert 0 */
    for (size_t i = 0; i < (size_t)60 * 16; i++) p.x[i] = (float)fabs(p.x[i]);
    result r;
    run_block(&p, &r);
    const dt_moe_route *rt = &r.a.route;
    int cap = p.d.cap, want = 0, kept_ok = 1;
    CHECK(cap == 30);
    for (int e = 0; e < 4; e++) {
        want += rt->counts[e] > cap ? rt->counts[e] - cap : 0;
        int kept = rt->offsets[e + 1] - rt->offsets[e];
        kept_ok &= kept == (rt->counts[e] < cap ? rt->counts[e] : cap);
    }
    CHECKF(rt->dropped == want && want > 0, "dropped %d, expected %d (> 0)", rt->dropped, want);
    CHECKF(kept_ok, "each expert keeps min(count, cap)");
    int neg = 0;
    for (int i = 0; i < 120; i++) neg += rt->row[i] < 0;
    CHECK(neg == rt->dropped && rt->rows == 120 - rt->dropped);
    check_against_ref(&p, &r, "capacity 1.0 skewed");
    result_free(&r);
    problem_free(&p);
}

/* The default branches race on the order of their adds: shown order-sensitive with fixed
 * orders of the same terms (one thread); 2-thread replays reported. */
static void test_negative_controls(void) {
    set_mode(0);
    problem p;
    problem_make(&p, 256, 256, 8, 4, 0.0);
    result r;
    run_block(&p, &r);
    const dt_moe_route *rt = &r.a.route;
    const dt_moe_dims *d = &p.d;
    size_t NC = (size_t)d->N * d->C, NK = (size_t)d->N * d->K;
    float *a = malloc(sizeof(float) * NC), *b = malloc(sizeof(float) * NC);
    /* combine, accumulating into dx: k order (det) against row order (the default's adds
     * on one thread) */
    set_threads(1);
    memcpy(a, p.x, sizeof(float) * NC);
    memcpy(b, p.x, sizeof(float) * NC);
    dt_moe_combine_det(a, r.a.yp, rt->row, rt->gate, d->N, d->K, d->C, 1);
    dt_moe_combine_fast(b, r.a.yp, rt->row, rt->gate, rt->token, rt->offsets, d->N, d->K, d->E, d->C, 1);
    CHECKF(memcmp(a, b, sizeof(float) * NC) != 0, "combine: another order of a token's K adds changes bits");
    /* dprob: the chunk partials added in chunk order (one thread) against reversed order */
    float *g1 = malloc(sizeof(float) * NK), *g2 = malloc(sizeof(float) * NK);
    dt_moe_dprob_fast(g1, p.dout, r.a.yp, rt->row, d->N, d->K, d->C);
    int nch = (d->C + DT_MOE_DPROB_CHUNK - 1) / DT_MOE_DPROB_CHUNK;
    for (size_t s = 0; s < NK; s++) {
        int t = (int)(s / (size_t)d->K);
        const float *go = p.dout + (size_t)t * d->C, *y = r.a.yp + (size_t)rt->row[s] * d->C;
        float acc = 0.0f;
        for (int ch = nch - 1; ch >= 0; ch--) {
            float part = 0.0f;
            for (int c = ch * DT_MOE_DPROB_CHUNK; c < (ch + 1) * DT_MOE_DPROB_CHUNK && c < d->C; c++)
                part += go[c] * y[c];
            acc += part;
        }
        g2[s] = acc;
    }
    CHECKF(memcmp(g1, g2, sizeof(float) * NK) != 0, "dprob: another arrival order of the partials changes bits");
    dt_moe_dprob_det(g2, p.dout, r.a.yp, rt->row, d->N, d->K, d->C);
    CHECKF(memcmp(g1, g2, sizeof(float) * NK) != 0, "dprob: the default path is not the det path");
    /* 2-thread replays of the default branch against its one-thread bits: reported */
    memcpy(a, b, sizeof(float) * NC);
    set_threads(2);
    int differ = 0;
    for (int rep = 0; rep < 20; rep++) {
        memcpy(b, p.x, sizeof(float) * NC);
        dt_moe_combine_fast(b, r.a.yp, rt->row, rt->gate, rt->token, rt->offsets, d->N, d->K, d->E, d->C, 1);
        dt_moe_dprob_fast(g2, p.dout, r.a.yp, rt->row, d->N, d->K, d->C);
        differ += memcmp(a, b, sizeof(float) * NC) != 0 || memcmp(g1, g2, sizeof(float) * NK) != 0;
    }
    fprintf(stderr, "  default combine/dprob: %d of 20 two-thread replays differ from the one-thread bits\n",
            differ);
    free(a); free(b); free(g1); free(g2);
    result_free(&r);
    problem_free(&p);
}

int main(void) {
    set_threads(2);
    RUN(test_capacity_and_dims);
    RUN(test_accuracy);
    RUN(test_finite_differences);
    RUN(test_det_threads);
    RUN(test_skewed);
    RUN(test_capacity_drop);
    RUN(test_negative_controls);
    return dt_test_report();
}
