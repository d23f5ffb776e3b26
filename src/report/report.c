/* `detrain report` (see report.h): loads every input first (runs.h, the trace and bench
 * sections), then writes the page to OUT.tmp and renames it, so a failure never leaves a
 * page behind. This file holds the page frame, the verdict table and the run table; the
 * pictures are in section_plots.c. */
#include "report/report.h"

#include "core/fingerprint.h"
#include "report/html.h"
#include "report/runs.h"
#include "report/sections.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const page_css =
    "body{font-family:'DejaVu Sans',Arial,sans-serif;color:#1d232a;background:#fff;margin:0}"
    "main{max-width:1120px;margin:0 auto;padding:18px 20px 40px}"
    "h1{font-size:24px;margin:4px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5dae0;padding-bottom:3px}"
    "p{margin:6px 0;font-size:14px;line-height:1.45}.sub{color:#4d5965;font-size:13px}"
    "nav a{margin-right:14px;font-size:13px;color:#1f5fa8}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0;width:100%}"
    "th,td{border:1px solid #d5dae0;padding:5px 7px;text-align:left;vertical-align:top}th{background:#f1f3f5}"
    "tr.ok td.v{background:#dff3e4;color:#11602b;font-weight:bold}"
    "tr.shared td.v{background:#eef6d8;color:#4a6010;font-weight:bold}"
    "tr.bad td.v{background:#fbe1de;color:#a3241a;font-weight:bold}"
    "tr.trace-rank.bad td:nth-child(2){background:#fbe1de;font-weight:bold}tr.io-bad,table.io tr.bad td{background:#fdf0ee}"
    "code{font-family:'DejaVu Sans Mono',monospace;font-size:12px}.hex{color:#5b2a86}"
    ".outside{color:#a3241a;font-weight:bold}.small{color:#4d5965;font-size:12px}"
    ".caption{font-size:13px;margin:2px 0 12px 66px}.caption.identical{color:#11602b}.caption.mismatch{color:#a3241a}"
    ".grid{display:flex;flex-wrap:wrap;gap:10px}.panel{border:1px solid #e3e7eb;border-radius:4px;padding:2px}"
    ".panel.wide{margin-bottom:12px}"
    ".legend{font-size:12px;margin:2px 0 6px 66px}.legend span{margin-right:16px;white-space:nowrap}"
    ".legend i{display:inline-block;width:14px;height:4px;margin:0 5px 3px 0;vertical-align:middle}"
    ".legend i.def,rect.def{background:#9aa5b1;fill:#9aa5b1}.legend i.det,rect.det{background:#1f5fa8;fill:#1f5fa8}"
    "svg text{font-family:'DejaVu Sans',Arial,sans-serif}text.title{font-size:13px;font-weight:bold;fill:#1d232a}"
    "text.tick{font-size:11px;fill:#4d5965}text.axis{font-size:11px;fill:#4d5965}text.zero{font-weight:bold}"
    "text.mark{font-size:11px;fill:#a3241a}text.tax{font-size:12px;fill:#11602b}text.tax.high{fill:#a3241a}"
    "rect.frame{fill:#fcfcfd;stroke:#aab4be}line.grid{stroke:#e6e9ed}rect.band{fill:#eef1f4}"
    ".first-mismatch line,.mismatch-line line{stroke:#c0392b;stroke-width:1.4;stroke-dasharray:4 3}"
    ".resume line{stroke-width:1.3;stroke-dasharray:2 3}.resume text{fill:#333}svg.swatch{vertical-align:middle}";

/* A string at env.json["contract"]["run"][key] (the GPU backend's description), or NULL. */
static const char *run_field(const dt_rpt_run *r, const char *key) {
    const dt_json_value *v = dt_json_get(dt_json_get(dt_json_get(r->env, "contract"), "run"), key);
    return v && v->type == DT_JSON_STRING ? v->text : NULL;
}

/* "name value" of a fingerprint field, nothing when it is absent. */
static void fp_item(FILE *f, const char *name, const char *value) {
    if (!value) return;
    fprintf(f, "<span class=\"fp\">%s <code>", name);
    dt_html_esc(f, value);
    fputs("</code></span> ", f);
}

/* The run table: label and line style, log, steps, resume points, key fingerprint fields. */
static void write_runs(FILE *f, const dt_rpt_data *d) {
    fputs("<h2 id=\"runs\">Runs</h2>\n<table class=\"runs\"><tr><th>run</th><th>log</th><th>steps</th>"
          "<th>resumed</th><th>fingerprint (env.json)</th></tr>\n", f);
    for (int i = 0; i < d->nruns; i++) {
        const dt_rpt_run *r = &d->runs[i];
        fprintf(f, "<tr class=\"run\" data-run=\"%s\"><td>", r->label);
        dt_rpt_run_swatch(f, i);
        fprintf(f, " <b>%s</b>%s</td><td><code>", r->label, i == 0 ? " (reference)" : "");
        dt_html_esc(f, r->arg);
        fprintf(f, "</code></td><td>%" PRId64 "&ndash;%" PRId64 " (%zu)</td><td class=\"resumes\" data-resumes=\"",
                r->steps[0], r->steps[r->n - 1], r->n);
        for (int k = 0; k < r->nresumes; k++) fprintf(f, "%s%" PRId64, k ? "," : "", r->resumes[k]);
        fputs("\">", f);
        for (int k = 0; k < r->nresumes; k++)
            fprintf(f, "%sat step %" PRId64, k ? "; " : "", r->resumes[k]);
        if (r->nresumes)
            fputs(r->resume_from_start && r->nresumes == 1 ? " (the log starts there)"
                                                            : " (first step after a checkpoint)", f);
        else fputs("&ndash;", f);
        fputs("</td><td>", f);
        if (!r->env) {
            dt_html_esc(f, r->env_note);
        } else {
            fp_item(f, "rev", dt_rpt_env_field(r, "contract", "detrain_git_rev"));
            fp_item(f, "deterministic", dt_rpt_env_field(r, "contract", "deterministic_mode"));
            fp_item(f, "device", run_field(r, "device") ? run_field(r, "device") : "cpu");
            fp_item(f, "gpu", run_field(r, "gpu"));
            fp_item(f, "cpu", dt_rpt_env_field(r, "contract", "cpu_model"));
            fp_item(f, "blas", dt_rpt_env_field(r, "contract", "blas_kernel"));
            fp_item(f, "threads", dt_rpt_env_field(r, "info", "threads"));
            fp_item(f, "host", dt_rpt_env_field(r, "info", "host"));
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* compare's verdict of one pair, in words: the text the page and the command line print. */
static void verdict_words(const dt_rpt_pair *p, char *v, size_t n) {
    const dt_compare_report *c = &p->cmp;
    if (!c->identical)
        snprintf(v, n, "first mismatch at step %" PRId64 " (%s)", c->diff_step, c->diff_metric);
    else if (c->a_first == c->b_first && c->a_last == c->b_last)
        snprintf(v, n, "bitwise identical");
    else
        snprintf(v, n, "identical over the shared steps");
}

/* The verdict table: one row per run against A, with data-* attributes (verdict, compare's
 * exit code, first mismatch step and metric) for tools and tests. */
static void write_verdicts(FILE *f, const dt_rpt_data *d) {
    fputs("<h2 id=\"verdicts\">Verdicts</h2>\n", f);
    if (d->npairs == 0) { fputs("<p>One run: nothing to compare it with.</p>\n", f); return; }
    fputs("<table id=\"verdict-table\"><tr><th>pair</th><th>verdict</th><th>steps</th><th>first mismatch</th>"
          "<th>environment</th></tr>\n", f);
    for (int i = 0; i < d->npairs; i++) {
        const dt_rpt_pair *p = &d->pairs[i];
        const dt_compare_report *c = &p->cmp;
        const char *la = d->runs[p->a].label, *lb = d->runs[p->b].label;
        int same_range = c->a_first == c->b_first && c->a_last == c->b_last;
        char words[160];
        verdict_words(p, words, sizeof words);
        fprintf(f, "<tr class=\"verdict %s\" data-a=\"%s\" data-b=\"%s\" data-verdict=\"%s\" data-exit=\"%d\"",
                !c->identical ? "bad" : same_range ? "ok" : "shared", la, lb,
                !c->identical ? "mismatch" : same_range ? "identical" : "identical-shared", c->identical ? 0 : 1);
        if (!c->identical) {
            fprintf(f, " data-step=\"%" PRId64 "\" data-metric=\"", c->diff_step);
            dt_html_esc(f, c->diff_metric);
            fputs("\"", f);
        }
        fprintf(f, "><td>%s vs %s</td><td class=\"v\">", la, lb);
        dt_html_esc(f, words);
        fprintf(f, "</td><td>");
        if (c->identical)
            fprintf(f, "%" PRId64 " compared (%" PRId64 "&ndash;%" PRId64 ")", c->nsteps, c->first, c->last);
        else
            fprintf(f, "shared %" PRId64 "&ndash;%" PRId64 "; %" PRId64 " identical before the mismatch",
                    c->first, c->last, c->nsteps);
        if (!same_range)
            fprintf(f, "<br><span class=\"small\">%s holds %" PRId64 "&ndash;%" PRId64 ", %s holds %" PRId64
                    "&ndash;%" PRId64 "</span>", la, c->a_first, c->a_last, lb, c->b_first, c->b_last);
        fputs("</td><td>", f);
        if (c->identical) {
            fputs("&ndash;", f);
        } else {
            fprintf(f, "%s: <code class=\"hex\">", la);
            dt_html_esc(f, c->a_value);
            fprintf(f, "</code><br>%s: <code class=\"hex\">", lb);
            dt_html_esc(f, c->b_value);
            fputs("</code>", f);
        }
        fputs("</td><td>", f);
        if (!p->env_ok) {
            fputs("<span class=\"small\">", f);
            dt_html_esc(f, p->env_note);
            fputs("</span>", f);
        } else {
            if (p->ncontract) {
                fputs("<span class=\"outside\" data-contract=\"", f);
                dt_html_esc(f, p->contract);
                fprintf(f, "\">contract field%s differ: ", p->ncontract == 1 ? "" : "s");
                dt_html_esc(f, p->contract);
                fputs(" &mdash; outside the determinism contract</span>", f);
            } else {
                fputs("same contract fields", f);
            }
            if (p->ninfo) {
                fputs("<br><span class=\"small\">info (not part of the contract): ", f);
                dt_html_esc(f, p->info);
                fputs("</span>", f);
            }
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* The whole page, from inputs already loaded: it cannot fail except through f's error flag. */
static void write_page(FILE *f, const dt_rpt_data *d, const dt_rpt_trace *t, const dt_rpt_bench *b) {
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>detrain report</title>\n"
            "<style>%s</style></head>\n<body><main>\n<h1>detrain report</h1>\n<p class=\"sub\">", page_css);
    dt_html_escf(f, "%d run%s, steps %" PRId64 "-%" PRId64 "; made by detrain %s. ", d->nruns,
                 d->nruns == 1 ? "" : "s", d->first_step, d->last_step, dt_build_rev());
    fputs("Every verdict compares every step's exact bits (the <code>*_hex</code> fields, as <code>detrain "
          "compare</code> does), ignoring only the wall-clock fields; the pictures are drawn at screen "
          "resolution.</p>\n<nav><a href=\"#verdicts\">verdicts</a><a href=\"#runs\">runs</a>"
          "<a href=\"#difference\">difference</a><a href=\"#trajectories\">trajectories</a>", f);
    if (t) fputs("<a href=\"#trace\">trace</a>", f);
    if (b) fputs("<a href=\"#tax\">tax</a>", f);
    fputs("</nav>\n", f);
    write_verdicts(f, d);
    write_runs(f, d);
    dt_rpt_write_differences(f, d);
    dt_rpt_write_trajectories(f, d);
    if (d->metrics_dropped)
        fprintf(f, "<p class=\"small\">More than %d metrics: the rest are compared but not drawn.</p>\n",
                DT_RPT_MAX_METRICS);
    if (t) dt_rpt_trace_write(f, t);
    if (b) dt_rpt_bench_write(f, b);
    fputs("</main></body></html>\n", f);
}

/* One line per pair on the command line, with the same words as the page. */
static void log_verdicts(FILE *log, const dt_rpt_data *d) {
    for (int i = 0; log && i < d->npairs; i++) {
        const dt_rpt_pair *p = &d->pairs[i];
        char words[160];
        verdict_words(p, words, sizeof words);
        fprintf(log, "%s vs %s: %s", d->runs[p->a].label, d->runs[p->b].label, words);
        if (!p->cmp.identical)
            fprintf(log, ": %s %s, %s %s", d->runs[p->a].label, p->cmp.a_value, d->runs[p->b].label,
                    p->cmp.b_value);
        fputc('\n', log);
    }
}

dt_status dt_report_write(const dt_report_opts *o, dt_report_result *res) {
    memset(res, 0, sizeof *res);
    if (!o->out || !o->out[0]) return dt_fail(DT_EINVAL, "no output file: give --out report.html");
    if (!o->trace_a != !o->trace_b) return dt_fail(DT_EINVAL, "--trace-diff needs two trace directories");
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", o->out) >= sizeof tmp)
        return dt_fail(DT_EINVAL, "--out path too long: %s", o->out);
    dt_rpt_data d;
    dt_rpt_trace *t = NULL;
    dt_rpt_bench *b = NULL;
    dt_status st = dt_rpt_load(o->runs, o->nruns, &d);
    if (st) return st;
    if (o->trace_a) st = dt_rpt_trace_load(o->trace_a, o->trace_b, &t);
    if (!st && o->bench) st = dt_rpt_bench_load(o->bench, &b);
    FILE *f = NULL;
    if (!st && !(f = fopen(tmp, "w"))) st = dt_fail(DT_EIO, "cannot write %s: %s", tmp, strerror(errno));
    if (!st) {
        write_page(f, &d, t, b);
        int bad = ferror(f);
        if (fclose(f) || bad) st = dt_fail(DT_EIO, "writing %s failed: %s", tmp, strerror(errno));
        else if (rename(tmp, o->out)) st = dt_fail(DT_EIO, "cannot rename %s to %s: %s", tmp, o->out, strerror(errno));
        if (st) remove(tmp);
    }
    if (!st) {
        res->npairs = d.npairs;
        for (int i = 0; i < d.npairs; i++) res->ndiffer += !d.pairs[i].cmp.identical;
        res->trace_mismatch = t && dt_rpt_trace_mismatch(t);
        log_verdicts(o->log, &d);
    }
    dt_rpt_free(&d);
    dt_rpt_trace_free(t);
    dt_rpt_bench_free(b);
    return st;
}
