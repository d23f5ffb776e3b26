/* The data and the drawing primitives behind `detrain report`:
 *   - dt_rpt_load unpacks every metric of every step bit for bit (NaN payloads, -0.0, +-inf,
 *     subnormals), eval steps only where logged, integers exactly, in the drawing order;
 *   - its verdicts and errors are compare's (dt_compare_metrics on the same files);
 *   - a resumed run's first step is found from the "resumed" marker the writer puts there (a
 *     resume into the same log dir leaves no other trace in metrics.jsonl), and a log that
 *     starts past step 1 is marked too; compare ignores the marker;
 *   - dt_svg_line keeps every column's extremes: a one-step spike among 100k points survives
 *     the downsampling, and the path stays a few points a pixel column. */
#include "dt_test.h"
#include "metrics/synth.h"
#include "report/runs.h"
#include "report/svg.h"

#include <inttypes.h>

static char root[256];

static void series(const char *name, int64_t first, int64_t last, int resume, char *dir, size_t n) {
    snprintf(dir, n, "%s/%s", root, name);
    dt_metrics *m;
    dt_metrics_opts o = {resume, 0};
    CHECK_OK(dt_metrics_open(&m, dir, &o));
    if (!m) return;
    for (int64_t k = first; k <= last; k++) {
        dt_step_metrics s = synth_step(k, 1, 0);
        CHECK_OK(dt_metrics_log(m, &s));
    }
    CHECK_OK(dt_metrics_close(m));
}

static int metric(const dt_rpt_data *d, const char *name) {
    for (int m = 0; m < d->nmetrics; m++)
        if (!strcmp(d->metrics[m].name, name)) return m;
    return -1;
}

static void test_columns_exact(void) {
    char a[512];
    series("cols", 1, 12, 0, a, sizeof a);
    const char *args[] = {a};
    dt_rpt_data d;
    CHECK_OK(dt_rpt_load(args, 1, &d));
    if (d.nruns != 1) return;
    const dt_rpt_run *r = &d.runs[0];
    CHECK(r->n == 12 && r->steps[0] == 1 && r->steps[11] == 12 && d.npairs == 0);
    const char *order[] = {"loss", "eval_loss", "moe_aux", "grad_norm", "param_norm", "num_zeros", "lr"};
    for (int k = 0; k < 7; k++)
        CHECKF(d.order[k] == metric(&d, order[k]), "drawing order %d: %s", k, order[k]);
    int loss = metric(&d, "loss"), gn = metric(&d, "grad_norm"), pn = metric(&d, "param_norm");
    int ev = metric(&d, "eval_loss"), nz = metric(&d, "num_zeros"), cs = metric(&d, "consumed_samples");
    CHECK(loss >= 0 && gn >= 0 && pn >= 0 && ev >= 0 && nz >= 0 && cs >= 0);
    CHECK(metric(&d, "step_ms") < 0 && metric(&d, "tok_per_s") < 0 && metric(&d, "step") < 0);
    if (loss < 0 || gn < 0 || pn < 0 || ev < 0 || nz < 0 || cs < 0) { dt_rpt_free(&d); return; }
    CHECK(d.metrics[nz].kind == DT_RPT_INT && d.metrics[nz].trajectory);
    CHECK(d.metrics[cs].kind == DT_RPT_INT && !d.metrics[cs].trajectory);
    for (size_t i = 0; i < r->n; i++) {
        dt_step_metrics s = synth_step((int64_t)i + 1, 1, 0);
        CHECKF(r->col[loss].has[i] && r->col[loss].bits[i] == dt_f64_bits(s.loss), "loss step %zu", i + 1);
        CHECKF(r->col[gn].bits[i] == dt_f64_bits(s.grad_norm), "grad_norm step %zu", i + 1);
        CHECKF(r->col[pn].bits[i] == dt_f64_bits(s.param_norm), "param_norm step %zu", i + 1);
        CHECKF(r->col[ev].has[i] == s.has_eval && (!s.has_eval || r->col[ev].bits[i] == dt_f64_bits(s.eval_loss)),
               "eval_loss step %zu", i + 1);
        CHECKF(r->col[nz].has[i] && (int64_t)r->col[nz].bits[i] == s.num_zeros, "num_zeros step %zu", i + 1);
    }
    CHECK(r->col[gn].bits[2] == 0x7ff8000000000123ull); /* the NaN payload of step 3 */
    CHECK(r->nresumes == 0);
    dt_rpt_free(&d);
}

/* The report's verdict and its errors are compare's, on the same files. */
static void test_same_as_compare(void) {
    char a[512], b[512], c[512], far[512], ma[600], mb[600], mc[600], mfar[600];
    series("ref", 1, 10, 0, a, sizeof a);
    series("twin", 1, 10, 0, b, sizeof b);
    series("ulp", 1, 10, 0, c, sizeof c);
    series("far", 11, 15, 0, far, sizeof far);
    snprintf(ma, sizeof ma, "%s/metrics.jsonl", a);
    snprintf(mb, sizeof mb, "%s/metrics.jsonl", b);
    snprintf(mc, sizeof mc, "%s/metrics.jsonl", c);
    snprintf(mfar, sizeof mfar, "%s/metrics.jsonl", far);
    /* one ulp more in step 9's param_norm */
    dt_metrics_series s;
    CHECK_OK(dt_metrics_read(mc, &s));
    dt_metrics_series_free(&s);
    char from[40], to[40];
    double pn = synth_step(9, 1, 0).param_norm;
    snprintf(from, sizeof from, "0x%016" PRIx64, dt_f64_bits(pn));
    snprintf(to, sizeof to, "0x%016" PRIx64, dt_f64_bits(pn) + 1);
    size_t n;
    char *text = (char *)dt_test_read_file(mc, &n);
    char *hit = text ? strstr(text, from) : NULL;
    CHECK(hit != NULL);
    if (hit) memcpy(hit, to, strlen(to));
    FILE *f = fopen(mc, "wb");
    if (f && text) { fwrite(text, 1, n, f); fclose(f); }
    free(text);
    const char *args[] = {a, b, c};
    dt_rpt_data d;
    CHECK_OK(dt_rpt_load(args, 3, &d));
    dt_compare_report want;
    CHECK_OK(dt_compare_metrics(ma, mb, &want));
    CHECK(d.npairs == 2 && d.pairs[0].b == 1 && d.pairs[0].cmp.identical && want.identical);
    CHECK_OK(dt_compare_metrics(ma, mc, &want));
    const dt_compare_report *got = &d.pairs[1].cmp;
    CHECK(!want.identical && !got->identical && got->diff_step == 9 && want.diff_step == 9);
    CHECKF(!strcmp(got->diff_metric, "param_norm") && !strcmp(got->diff_metric, want.diff_metric), "%s", got->diff_metric);
    CHECK(!strcmp(got->a_value, want.a_value) && !strcmp(got->b_value, want.b_value));
    CHECK(strstr(got->b_value, to) != NULL);
    dt_rpt_free(&d);

    /* errors: the same status and message */
    char missing[600], want_msg[2048];
    snprintf(missing, sizeof missing, "%s/nope", root);
    const char *bad[][2] = {{a, missing}, {a, far}};
    const char *badm[][2] = {{ma, missing}, {ma, mfar}};
    for (int k = 0; k < 2; k++) {
        dt_status ws = dt_compare_metrics(badm[k][0], badm[k][1], &want);
        snprintf(want_msg, sizeof want_msg, "%s", dt_errmsg());
        dt_status gs = dt_rpt_load(bad[k], 2, &d);
        CHECKF(gs == ws && ws != DT_OK, "case %d: %d vs %d", k, gs, ws);
        CHECKF(!strcmp(dt_errmsg(), want_msg), "case %d: '%s' vs '%s'", k, dt_errmsg(), want_msg);
    }
    CHECK(d.runs == NULL && d.nruns == 0); /* freed on error */
}

static void test_resume_points(void) {
    char full[512], res[512], late[512], mf[600], mr[600];
    series("full", 1, 15, 0, full, sizeof full);
    series("res", 1, 12, 0, res, sizeof res);   /* ran past its checkpoint at step 7 ... */
    series("res", 8, 15, 1, res, sizeof res);   /* ... and was resumed into the same directory */
    series("late", 8, 15, 1, late, sizeof late);
    snprintf(mf, sizeof mf, "%s/metrics.jsonl", full);
    snprintf(mr, sizeof mr, "%s/metrics.jsonl", res);
    size_t n;
    char *text = (char *)dt_test_read_file(mr, &n);
    char *first = text ? strstr(text, "\"resumed\":true") : NULL;
    CHECK(first && !strstr(first + 1, "\"resumed\":true")); /* once: on the resumed first line */
    CHECK(first && strstr(text, "{\"step\":8,") && first > strstr(text, "{\"step\":8,"));
    free(text);
    dt_compare_report want;
    CHECK_OK(dt_compare_metrics(mf, mr, &want));
    CHECK(want.identical && want.nsteps == 15); /* compare ignores the marker */
    const char *args[] = {full, res, late};
    dt_rpt_data d;
    CHECK_OK(dt_rpt_load(args, 3, &d));
    if (d.nruns != 3) return;
    CHECK(d.runs[0].nresumes == 0);
    CHECK(d.runs[1].nresumes == 1 && d.runs[1].resumes[0] == 8 && !d.runs[1].resume_from_start);
    CHECK(d.runs[2].nresumes == 1 && d.runs[2].resumes[0] == 8 && !d.runs[2].resume_from_start);
    CHECK(d.pairs[0].cmp.identical && d.pairs[1].cmp.identical && d.pairs[1].cmp.first == 8);
    CHECK(d.first_step == 1 && d.last_step == 15);
    dt_rpt_free(&d);
    /* a log that starts past step 1 without a marker (written before the marker existed) */
    char old[512], mo[600];
    series("old", 8, 15, 0, old, sizeof old);
    const char *args2[] = {old};
    snprintf(mo, sizeof mo, "%s/metrics.jsonl", old);
    CHECK_OK(dt_rpt_load(args2, 1, &d));
    CHECK(d.nruns == 1 && d.runs[0].nresumes == 1 && d.runs[0].resumes[0] == 8 && d.runs[0].resume_from_start);
    dt_rpt_free(&d);
}

/* Counts the points (M/L commands) of the path written by a dt_svg_line. */
static int path_points(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == 'M' || *s == 'L';
    return n;
}

static void test_line_keeps_extremes(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) { CHECK(0); return; }
    dt_svg_line l;
    dt_svg_line_begin(&l, f, "class=\"t\"");
    for (int i = 0; i < 100000; i++) /* 100 points a pixel column, one spike at 54321 */
        dt_svg_line_to(&l, 10.0 + i / 100.0, i == 54321 ? 5.0 : 100.0 + (i * 7 % 11));
    dt_svg_line_end(&l);
    fclose(f);
    char *d = strstr(buf, " d=\"");
    CHECK(d != NULL);
    int pts = d ? path_points(d + 4) : 0;
    CHECKF(pts >= 1000 && pts <= 4 * 1001, "%d points", pts);
    CHECK(strstr(buf, "553.2 5.0") != NULL);      /* the spike, at its own x */
    CHECK(strstr(buf, " 110.0") && strstr(buf, " 100.0")); /* each column's range */
    free(buf);
    /* few points: every one of them, gaps start a new subpath */
    buf = NULL;
    f = open_memstream(&buf, &len);
    if (!f) { CHECK(0); return; }
    dt_svg_line_begin(&l, f, "class=\"t\"");
    dt_svg_line_to(&l, 1, 1);
    dt_svg_line_to(&l, 5, 2);
    dt_svg_line_gap(&l);
    dt_svg_line_to(&l, 9, 3);
    dt_svg_line_end(&l);
    fclose(f);
    CHECKF(strstr(buf, "d=\"M1.0 1.0L5.0 2.0M9.0 3.0\"") != NULL, "%s", buf);
    free(buf);
}

int main(void) {
    dt_test_scratch(root, sizeof root, "test_report");
    RUN(test_columns_exact);
    RUN(test_same_as_compare);
    RUN(test_resume_points);
    RUN(test_line_keeps_extremes);
    dt_test_scratch_remove(root);
    return dt_test_report();
}
