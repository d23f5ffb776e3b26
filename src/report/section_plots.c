/* The report's pictures: the full-precision difference of each run against A and the
 * trajectories of every metric (see report.h). Values come from the columns of runs.h, i.e.
 * from the exact bits; each line is fed every step and downsampled by dt_svg_line. */
#include "report/sections.h"

#include "report/html.h"
#include "report/svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { DIFF_W = 1100, DIFF_H = 330, TRAJ_W = 545, TRAJ_H = 250, DOTS_UP_TO = 80 };

static const char *const run_colors[] = {"#1f5fa8", "#e0452b", "#23994a", "#8e44ad",
                                         "#c99a06", "#138d9c", "#c2185b", "#5d6d7e"};
static const char *const metric_colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char *dt_rpt_run_color(int i) { return run_colors[i % 8]; }
const char *dt_rpt_metric_color(int k) { return metric_colors[k % 10]; }

/* A is solid and drawn first and widest; the others dashed with shifted dashes, so runs
 * that lie on top of each other stay visible as alternating dashes. */
static void run_stroke(char *buf, size_t n, int i, const char *cls) {
    if (i == 0)
        snprintf(buf, n, "class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.6\"", cls, dt_rpt_run_color(i));
    else
        snprintf(buf, n, "class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.7\" "
                 "stroke-dasharray=\"7 5\" stroke-dashoffset=\"%d\"", cls, dt_rpt_run_color(i), (i * 4) % 12);
}

void dt_rpt_run_swatch(FILE *f, int i) {
    char s[256];
    run_stroke(s, sizeof s, i, "swatch");
    fprintf(f, "<svg class=\"swatch\" width=\"34\" height=\"10\"><path %s d=\"M1 5L33 5\"/></svg>", s);
}

/* ---- difference of a pair ---- */

enum { D_NONE, D_SAME, D_VALUE, D_UNMEASURABLE };

/* Step k of a pair's shared range: index in A's and in B's steps, -1 where one lacks it. */
typedef struct shared { int64_t step; long ia, ib; } shared;

static shared *shared_steps(const dt_rpt_run *a, const dt_rpt_run *b, const dt_compare_report *c, size_t *n) {
    shared *s = malloc((a->n + b->n + 1) * sizeof *s);
    size_t i = 0, j = 0, k = 0;
    if (!s) { *n = 0; return NULL; }
    while (i < a->n && a->steps[i] < c->first) i++;
    while (j < b->n && b->steps[j] < c->first) j++;
    for (;;) {
        int64_t sa = i < a->n && a->steps[i] <= c->last ? a->steps[i] : INT64_MAX;
        int64_t sb = j < b->n && b->steps[j] <= c->last ? b->steps[j] : INT64_MAX;
        if (sa == INT64_MAX && sb == INT64_MAX) break;
        int64_t st = sa < sb ? sa : sb;
        s[k++] = (shared){st, sa == st ? (long)i : -1, sb == st ? (long)j : -1};
        if (sa == st) i++;
        if (sb == st) j++;
    }
    *n = k;
    return s;
}

/* |a - b| of metric m at one shared step, from the bits: D_SAME when the bits are equal,
 * D_VALUE with *d > 0, D_UNMEASURABLE when they differ but |a - b| is not a positive finite
 * number (NaN, inf, +0 vs -0) or one side lacks the metric, D_NONE when neither has it. */
static int step_diff(const dt_rpt_metric *m, const dt_rpt_col *ca, const dt_rpt_col *cb,
                     const shared *s, double *d) {
    int ha = s->ia >= 0 && ca->bits && ca->has[s->ia], hb = s->ib >= 0 && cb->bits && cb->has[s->ib];
    if (!ha && !hb) return s->ia < 0 || s->ib < 0 ? D_UNMEASURABLE : D_NONE;
    if (ha != hb) return D_UNMEASURABLE;
    if (ca->bits[s->ia] == cb->bits[s->ib]) return D_SAME;
    *d = fabs(dt_rpt_value(m, ca, (size_t)s->ia) - dt_rpt_value(m, cb, (size_t)s->ib));
    return *d > 0 && isfinite(*d) ? D_VALUE : D_UNMEASURABLE;
}

/* The sentence under a difference panel: all the same, or identical through k-1 and the
 * first mismatch at k with both values as compare prints them. */
static void write_pair_caption(FILE *f, const dt_rpt_data *d, const dt_rpt_pair *p) {
    const dt_compare_report *c = &p->cmp;
    const char *la = d->runs[p->a].label, *lb = d->runs[p->b].label;
    if (c->identical) {
        fprintf(f, "<p class=\"caption identical\">%s vs %s: |a &minus; b| = 0 for every metric at all "
                "%" PRId64 " shared steps (%" PRId64 "&ndash;%" PRId64 "): the same bits.</p>\n",
                la, lb, c->nsteps, c->first, c->last);
        return;
    }
    fprintf(f, "<p class=\"caption mismatch\" data-step=\"%" PRId64 "\" data-metric=\"", c->diff_step);
    dt_html_esc(f, c->diff_metric);
    fprintf(f, "\">%s vs %s: ", la, lb);
    if (c->nsteps)
        fprintf(f, "identical through step %" PRId64 " (%" PRId64 " steps); ", c->diff_step - 1, c->nsteps);
    fprintf(f, "<b>first mismatch at step %" PRId64 " (", c->diff_step);
    dt_html_esc(f, c->diff_metric);
    fprintf(f, ")</b><br>%s: <code class=\"hex\">", la);
    dt_html_esc(f, c->a_value);
    fprintf(f, "</code><br>%s: <code class=\"hex\">", lb);
    dt_html_esc(f, c->b_value);
    fprintf(f, "</code></p>\n");
}

/* One panel: every drawn metric's |a - b| per shared step on a log axis, with an exact-zero
 * baseline below it and a band above it for differences that have no magnitude. */
static void write_pair(FILE *f, const dt_rpt_data *d, const dt_rpt_pair *p) {
    const dt_rpt_run *a = &d->runs[p->a], *b = &d->runs[p->b];
    size_t ns;
    shared *s = shared_steps(a, b, &p->cmp, &ns);
    int drawn[DT_RPT_MAX_METRICS], nd = 0, any_unmeasurable = 0;
    double lo = INFINITY, hi = 0;
    for (int o = 0; o < d->nmetrics; o++) { /* which metrics, and the range of |a - b| */
        int m = d->order[o], differs = 0;
        const dt_rpt_col *ca = &a->col[m], *cb = &b->col[m];
        if (!ca->bits && !cb->bits) continue;
        for (size_t k = 0; k < ns; k++) {
            double x;
            int r = step_diff(&d->metrics[m], ca, cb, &s[k], &x);
            if (r == D_VALUE) { differs = 1; lo = x < lo ? x : lo; hi = x > hi ? x : hi; }
            if (r == D_UNMEASURABLE) differs = any_unmeasurable = 1;
        }
        if (d->metrics[m].trajectory || differs) drawn[nd++] = m;
    }
    char title[256];
    snprintf(title, sizeof title, "|%s \xe2\x88\x92 %s| per step, from the exact bits (log scale; 0 = the same bits)",
             b->label, a->label);
    dt_chart c;
    fprintf(f, "<div class=\"panel wide\" data-pair=\"%s%s\">\n", a->label, b->label);
    dt_chart_open(&c, f, DIFF_W, DIFF_H, title, "diff");
    if (hi > 0) dt_chart_range(&c, (double)d->first_step, (double)d->last_step, lo, hi, 1);
    else dt_chart_range(&c, (double)d->first_step, (double)d->last_step, 1e-16, 1.0, 1);
    double bottom = c.top + c.height, zero_y = bottom - 9, nan_y = c.top + 9;
    c.map_top = c.top + 24;
    c.map_bottom = bottom - 26;
    dt_chart_axes(&c, "step");
    fprintf(f, "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"18\"/>", c.left,
            bottom - 18, c.width);
    dt_svg_text(f, c.left - 5, zero_y + 4, "end", "tick zero", "0");
    if (any_unmeasurable) {
        fprintf(f, "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"18\"/>", c.left, c.top, c.width);
        dt_svg_text(f, c.left - 5, nan_y + 4, "end", "tick", "\xe2\x89\xa0");
    }
    for (int k = 0; k < nd; k++) {
        int m = drawn[k];
        char attrs[160];
        snprintf(attrs, sizeof attrs, "class=\"d\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"",
                 dt_rpt_metric_color(k));
        dt_svg_line l;
        dt_svg_line_begin(&l, f, attrs);
        size_t npts = 0;
        for (size_t i = 0; i < ns; i++) {
            double x;
            int r = step_diff(&d->metrics[m], &a->col[m], &b->col[m], &s[i], &x);
            if (r == D_NONE) continue;
            dt_svg_line_to(&l, dt_chart_px(&c, (double)s[i].step),
                           r == D_SAME ? zero_y : r == D_VALUE ? dt_chart_py(&c, x) : nan_y);
            npts++;
        }
        dt_svg_line_end(&l);
        for (size_t i = 0; npts <= DOTS_UP_TO && i < ns; i++) { /* few points: show each step */
            double x;
            int r = step_diff(&d->metrics[m], &a->col[m], &b->col[m], &s[i], &x);
            if (r != D_NONE)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>", dt_chart_px(&c, (double)s[i].step),
                        r == D_SAME ? zero_y : r == D_VALUE ? dt_chart_py(&c, x) : nan_y, dt_rpt_metric_color(k));
        }
    }
    if (!p->cmp.identical) {
        double x = dt_chart_px(&c, (double)p->cmp.diff_step);
        char lab[200];
        snprintf(lab, sizeof lab, "first mismatch: step %" PRId64 " (%s)", p->cmp.diff_step, p->cmp.diff_metric);
        fprintf(f, "<g class=\"first-mismatch\" data-step=\"%" PRId64 "\"><line x1=\"%.1f\" y1=\"%.1f\" "
                "x2=\"%.1f\" y2=\"%.1f\"/>", p->cmp.diff_step, x, c.top, x, bottom);
        int right = x > c.left + c.width * 0.6;
        dt_svg_text(f, right ? x - 6 : x + 6, c.top + 36, right ? "end" : "start", "mark", lab);
        fputs("</g>\n", f);
    }
    dt_chart_close(&c);
    fputs("<div class=\"legend\">", f);
    for (int k = 0; k < nd; k++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", dt_rpt_metric_color(k));
        dt_html_esc(f, d->metrics[drawn[k]].name);
        fputs("</span>", f);
    }
    fputs("</div>\n", f);
    write_pair_caption(f, d, p);
    fputs("</div>\n", f);
    free(s);
}

void dt_rpt_write_differences(FILE *f, const dt_rpt_data *d) {
    fputs("<h2 id=\"difference\">Full-precision difference against A</h2>\n", f);
    if (d->npairs == 0) {
        fputs("<p>One run: nothing to compare it with.</p>\n", f);
        return;
    }
    for (int i = 0; i < d->npairs; i++) write_pair(f, d, &d->pairs[i]);
}

/* ---- trajectories ---- */

/* A vertical line at `step` across a trajectory panel with a label in row `row` (so marks at
 * the same step do not overprint). */
static void mark_step(FILE *f, const dt_chart *c, int64_t step, const char *cls, const char *color,
                      const char *label, int row) {
    double x = dt_chart_px(c, (double)step);
    fprintf(f, "<g class=\"%s\" data-step=\"%" PRId64 "\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\" stroke=\"%s\"/>", cls, step, x, c->top, x, c->top + c->height, color);
    int right = x > c->left + c->width * 0.7;
    dt_svg_text(f, right ? x - 4 : x + 4, c->top + 12 + 12 * row, right ? "end" : "start", "mark", label);
    fputs("</g>\n", f);
}

/* One metric's panel: every run's values (A solid, the others dashed; few steps also as
 * dots and rings), NaN/inf as triangles on the top edge, each pair's first mismatch and each
 * run's resume points marked. */
static void write_trajectory(FILE *f, const dt_rpt_data *d, int m) {
    const dt_rpt_metric *mt = &d->metrics[m];
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < d->nruns; r++) {
        const dt_rpt_col *c = &d->runs[r].col[m];
        for (size_t i = 0; c->bits && i < d->runs[r].n; i++) {
            double v = c->has[i] ? dt_rpt_value(mt, c, i) : NAN;
            if (isfinite(v)) { lo = v < lo ? v : lo; hi = v > hi ? v : hi; }
        }
    }
    if (!(hi >= lo)) lo = hi = 0;
    dt_chart c;
    fputs("<div class=\"panel\">\n", f);
    dt_chart_open(&c, f, TRAJ_W, TRAJ_H, mt->name, "trajectory");
    c.yint = mt->kind == DT_RPT_INT;
    dt_chart_range(&c, (double)d->first_step, (double)d->last_step, lo, hi, 0);
    dt_chart_axes(&c, "step");
    int row = 0;
    for (int i = 0; i < d->npairs; i++) {
        const dt_rpt_pair *p = &d->pairs[i];
        if (p->cmp.identical) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "%s\xe2\x89\xa0%s @%" PRId64, d->runs[p->a].label, d->runs[p->b].label, p->cmp.diff_step);
        mark_step(f, &c, p->cmp.diff_step, "mismatch-line", "#c0392b", lab, row++);
    }
    for (int r = 0; r < d->nruns; r++) {
        const dt_rpt_run *run = &d->runs[r];
        const dt_rpt_col *col = &run->col[m];
        if (!col->bits) continue;
        char attrs[256];
        run_stroke(attrs, sizeof attrs, r, "t");
        dt_svg_line l;
        dt_svg_line_begin(&l, f, attrs);
        size_t npts = 0, nbad = 0;
        for (size_t i = 0; i < run->n; i++) {
            if (!col->has[i]) continue;
            double v = dt_rpt_value(mt, col, i);
            npts++;
            if (isfinite(v)) dt_svg_line_to(&l, dt_chart_px(&c, (double)run->steps[i]), dt_chart_py(&c, v));
            else { dt_svg_line_gap(&l); nbad++; }
        }
        dt_svg_line_end(&l);
        long last_col = -1; /* NaN or inf: a triangle on the top edge, one a pixel column */
        for (size_t i = 0; nbad && i < run->n; i++) {
            double x = dt_chart_px(&c, (double)run->steps[i]);
            if (!col->has[i] || isfinite(dt_rpt_value(mt, col, i)) || (long)x == last_col) continue;
            last_col = (long)x;
            fprintf(f, "<path class=\"nonfinite\" fill=\"%s\" d=\"M%.1f %.1fl-4 -7h8z\"/>",
                    dt_rpt_run_color(r), x, c.top + 8);
        }
        if (npts <= DOTS_UP_TO) { /* few steps: A's as dots, the others' as rings around them */
            for (size_t i = 0; i < run->n; i++) {
                double v = col->has[i] ? dt_rpt_value(mt, col, i) : NAN;
                if (!isfinite(v)) continue;
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" ", dt_chart_px(&c, (double)run->steps[i]), dt_chart_py(&c, v));
                if (r == 0) fprintf(f, "r=\"2.4\" fill=\"%s\"/>", dt_rpt_run_color(r));
                else fprintf(f, "r=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\"/>", 2.6 + 1.4 * r,
                             dt_rpt_run_color(r));
            }
            fputc('\n', f);
        }
        for (int k = 0; k < run->nresumes; k++) {
            char lab[64];
            snprintf(lab, sizeof lab, "%s resumed @%" PRId64, run->label, run->resumes[k]);
            mark_step(f, &c, run->resumes[k], "resume", dt_rpt_run_color(r), lab, row++ % 4);
        }
    }
    dt_chart_close(&c);
    fputs("</div>\n", f);
}

void dt_rpt_write_trajectories(FILE *f, const dt_rpt_data *d) {
    fputs("<h2 id=\"trajectories\">Trajectories</h2>\n<div class=\"legend\">", f);
    for (int r = 0; r < d->nruns; r++) {
        fputs("<span>", f);
        dt_rpt_run_swatch(f, r);
        fprintf(f, " %s ", d->runs[r].label);
        dt_html_esc(f, d->runs[r].arg);
        fputs("</span>", f);
    }
    fputs("</div>\n<div class=\"grid\">\n", f);
    for (int o = 0; o < d->nmetrics; o++)
        if (d->metrics[d->order[o]].trajectory) write_trajectory(f, d, d->order[o]);
    fputs("</div>\n", f);
}
