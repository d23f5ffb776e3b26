/* The report's tax section: the JSON `detrain bench --json FILE` writes (src/cli/cmd_bench.c:
 * model, B, T, device, tax_pct, and for "default" and "deterministic" step_ms, tok_per_s, mfu,
 * peak_tflops, mem_gib and "ranges" {name: ms per step}) as a table and a leaderboard of bars,
 * each range with its tax = (det / default - 1) x 100%. */
#include "report/sections.h"

#include "core/json_read.h"
#include "report/html.h"
#include "report/svg.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_RANGES = 48, BAR_W = 1100, ROW_H = 30, LABEL_W = 150, BAR_AREA = 760 };

typedef struct mode_stats { double step_ms, tok_s, mfu, peak, mem; } mode_stats;

struct dt_rpt_bench {
    char path[4096], model[64], device[128];
    long long B, T;
    double tax_pct;
    mode_stats m[2];                      /* default, deterministic */
    int nr;
    char rname[MAX_RANGES][40];
    double rms[2][MAX_RANGES];
    int has[2][MAX_RANGES];
};

static const char *const mode_key[2] = {"default", "deterministic"};

static dt_status need_number(const char *path, const dt_json_value *obj, const char *where,
                             const char *key, double *out) {
    if (dt_json_as_f64(dt_json_get(obj, key), out)) return DT_OK;
    return dt_fail(DT_ECORRUPT, "%s: \"%s%s%s\" must be a number (the file `detrain bench --json FILE` "
                   "writes)", path, where, where[0] ? "." : "", key);
}

static int range_slot(dt_rpt_bench *b, const char *name) {
    for (int i = 0; i < b->nr; i++)
        if (!strcmp(b->rname[i], name)) return i;
    if (b->nr == MAX_RANGES || strlen(name) >= sizeof b->rname[0]) return -1;
    snprintf(b->rname[b->nr], sizeof b->rname[0], "%s", name);
    return b->nr++;
}

static dt_status parse(dt_rpt_bench *b, const dt_json_value *j) {
    const char *p = b->path;
    if (j->type != DT_JSON_OBJECT) return dt_fail(DT_ECORRUPT, "%s: not a JSON object", p);
    const dt_json_value *v;
    if ((v = dt_json_get(j, "model")) && v->type == DT_JSON_STRING) snprintf(b->model, sizeof b->model, "%s", v->text);
    if ((v = dt_json_get(j, "device")) && v->type == DT_JSON_STRING) snprintf(b->device, sizeof b->device, "%s", v->text);
    int64_t x;
    if (dt_json_as_i64(dt_json_get(j, "B"), &x)) b->B = x;
    if (dt_json_as_i64(dt_json_get(j, "T"), &x)) b->T = x;
    dt_status st = need_number(p, j, "", "tax_pct", &b->tax_pct);
    for (int m = 0; !st && m < 2; m++) {
        const dt_json_value *o = dt_json_get(j, mode_key[m]);
        if (!o || o->type != DT_JSON_OBJECT)
            return dt_fail(DT_ECORRUPT, "%s has no \"%s\" object (the file `detrain bench --json FILE` writes)",
                           p, mode_key[m]);
        mode_stats *s = &b->m[m];
        if ((st = need_number(p, o, mode_key[m], "step_ms", &s->step_ms)) ||
            (st = need_number(p, o, mode_key[m], "tok_per_s", &s->tok_s)) ||
            (st = need_number(p, o, mode_key[m], "mfu", &s->mfu)))
            return st;
        if (!dt_json_as_f64(dt_json_get(o, "peak_tflops"), &s->peak)) s->peak = 0;
        if (!dt_json_as_f64(dt_json_get(o, "mem_gib"), &s->mem)) s->mem = 0;
        const dt_json_value *r = dt_json_get(o, "ranges");
        if (!r) continue;
        if (r->type != DT_JSON_OBJECT) return dt_fail(DT_ECORRUPT, "%s: \"%s.ranges\" must be an object", p, mode_key[m]);
        for (size_t k = 0; k < r->n; k++) {
            double ms;
            if (!dt_json_as_f64(&r->items[k], &ms))
                return dt_fail(DT_ECORRUPT, "%s: range \"%s.ranges.%s\" must be a number", p, mode_key[m], r->keys[k]);
            int i = range_slot(b, r->keys[k]);
            if (i >= 0) { b->rms[m][i] = ms; b->has[m][i] = 1; }
        }
    }
    return st;
}

dt_status dt_rpt_bench_load(const char *path, dt_rpt_bench **out) {
    *out = NULL;
    dt_rpt_bench *b = calloc(1, sizeof *b);
    if (!b) return dt_fail(DT_ENOMEM, "out of memory");
    snprintf(b->path, sizeof b->path, "%s", path);
    dt_json_value *j;
    dt_status st = dt_json_read_file(path, &j);
    if (!st) {
        st = parse(b, j);
        dt_json_free(j);
    }
    if (st) { free(b); return dt_fail_context(st, "--bench"); }
    *out = b;
    return DT_OK;
}

void dt_rpt_bench_free(dt_rpt_bench *b) { free(b); }

static double tax_of(double det, double def) { return def > 0 ? (det / def - 1.0) * 100.0 : 0.0; }

static void bar(FILE *f, double x, double y, double w, double h, const char *cls) {
    fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", cls, x, y, w < 0.5 ? 0.5 : w, h);
}

/* One leaderboard row: the default and the deterministic bar, their times and the tax. */
static void row(FILE *f, int k, const char *name, const double ms[2], const int has[2], double scale) {
    double y = 6 + k * ROW_H;
    char lab[96];
    fprintf(f, "<g class=\"range\" data-range=\"");
    dt_html_esc(f, name);
    fputs("\">", f);
    dt_svg_text(f, LABEL_W - 8, y + 16, "end", "tick", name);
    for (int m = 0; m < 2; m++) {
        if (!has[m]) continue;
        double w = ms[m] * scale;
        bar(f, LABEL_W, y + 2 + m * 12, w, 11, m ? "det" : "def");
        snprintf(lab, sizeof lab, "%.3f ms", ms[m]);
        dt_svg_text(f, LABEL_W + w + 5, y + 11 + m * 12, "start", "tick", lab);
    }
    if (has[0] && has[1] && ms[0] > 0) {
        double t = tax_of(ms[1], ms[0]);
        snprintf(lab, sizeof lab, "tax %+.2f%%", t);
        dt_svg_text(f, BAR_W - 10, y + 17, "end", t > 1.0 ? "tax high" : "tax", lab);
    }
    fputs("</g>\n", f);
}

void dt_rpt_bench_write(FILE *f, const dt_rpt_bench *b) {
    fputs("<h2 id=\"tax\">Determinism tax</h2>\n<p>", f);
    dt_html_escf(f, "%s, B=%lld T=%lld, %s (from %s)", b->model[0] ? b->model : "model", b->B, b->T,
                 b->device[0] ? b->device : "device", b->path);
    fprintf(f, "</p>\n<table class=\"bench\"><tr><th></th><th>default</th><th>deterministic</th><th>tax</th></tr>\n"
            "<tr><td>step ms (median)</td><td>%.3f</td><td>%.3f</td><td class=\"tax-total\">%+.2f%%</td></tr>\n"
            "<tr><td>tokens/s</td><td>%.0f</td><td>%.0f</td><td></td></tr>\n"
            "<tr><td>MFU</td><td>%.1f%%</td><td>%.1f%%</td><td></td></tr>\n",
            b->m[0].step_ms, b->m[1].step_ms, b->tax_pct, b->m[0].tok_s, b->m[1].tok_s,
            b->m[0].mfu * 100, b->m[1].mfu * 100);
    if (b->m[0].mem > 0 || b->m[1].mem > 0)
        fprintf(f, "<tr><td>device memory GiB</td><td>%.2f</td><td>%.2f</td><td></td></tr>\n", b->m[0].mem, b->m[1].mem);
    if (b->m[0].peak > 0) fprintf(f, "<tr><td>peak TFLOP/s (measured)</td><td>%.0f</td><td>%.0f</td><td></td></tr>\n",
                                  b->m[0].peak, b->m[1].peak);
    fputs("</table>\n", f);
    int order[MAX_RANGES];
    for (int i = 0; i < b->nr; i++) order[i] = i;
    for (int i = 0; i < b->nr; i++) /* by deterministic time, largest first, as `bench` prints */
        for (int j = i + 1; j < b->nr; j++)
            if (b->rms[1][order[j]] > b->rms[1][order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
    double top = b->m[0].step_ms > b->m[1].step_ms ? b->m[0].step_ms : b->m[1].step_ms;
    for (int i = 0; i < b->nr; i++)
        for (int m = 0; m < 2; m++)
            if (b->rms[m][i] > top) top = b->rms[m][i];
    double scale = top > 0 ? BAR_AREA / top : 0;
    int h = 12 + (b->nr + 1) * ROW_H;
    fprintf(f, "<p class=\"legend\"><span><i class=\"def\"></i>default</span><span><i class=\"det\"></i>"
            "deterministic</span> ms per step; each range timed with device events</p>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"leaderboard\" width=\"%d\" height=\"%d\">\n", BAR_W, h);
    double step[2] = {b->m[0].step_ms, b->m[1].step_ms};
    int both[2] = {1, 1};
    row(f, 0, "step (end to end)", step, both, scale);
    for (int k = 0; k < b->nr; k++) {
        int i = order[k];
        double ms[2] = {b->rms[0][i], b->rms[1][i]};
        int has[2] = {b->has[0][i], b->has[1][i]};
        row(f, k + 1, b->rname[i], ms, has, scale);
    }
    fputs("</svg>\n", f);
}
