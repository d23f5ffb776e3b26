/* The report's trace section: dt_trace_diff (trace/diff.h) decides every verdict and class;
 * this adds, for each rank's first mismatch, the aligned event itself, read back from both
 * rank files with the trace reader, so every input and output digest of both runs shows and
 * not only the differing ones. */
#include "report/sections.h"

#include "report/html.h"
#include "trace/diff.h"
#include "trace/reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_IO = 24 };

typedef struct io_tensor {
    int is_output, index, differs;
    char name[64], layout_a[96], layout_b[96];
    uint64_t digest_a, digest_b;
    int in_a, in_b;
} io_tensor;

typedef struct event_io {
    int n, more;              /* tensors kept, and how many beyond MAX_IO */
    io_tensor t[MAX_IO];
} event_io;

struct dt_rpt_trace {
    dt_trace_diff_opts o;
    dt_trace_diff_result res;
    event_io *io;             /* one per rank of res */
};

/* The rank file of `rank` in a capture: DIR/rank_NNNNNN.trace, or the file itself. */
static void rank_file(const char *capture, int rank, char *out, size_t n) {
    struct stat sb;
    if (!stat(capture, &sb) && S_ISDIR(sb.st_mode)) snprintf(out, n, "%s/rank_%06d.trace", capture, rank);
    else snprintf(out, n, "%s", capture);
}

static void layout(char *buf, size_t n, const dt_trace_rec_tensor *t) {
    if (!t) { snprintf(buf, n, "(absent)"); return; }
    int w = snprintf(buf, n, "%s[", dt_trace_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && w > 0 && (size_t)w < n; d++)
        w += snprintf(buf + w, n - (size_t)w, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

static const dt_trace_rec *find_event(const dt_trace_file *f, const dt_trace_key *k) {
    for (size_t i = 0; i < f->nevents; i++) {
        const dt_trace_rec *e = &f->events[i];
        if (e->step == k->step && e->micro == k->micro && e->occurrence == k->occurrence &&
            !strcmp(e->scope, k->scope) && !strcmp(e->op, k->op))
            return e;
    }
    return NULL;
}

/* Fills io with every tensor of the aligned first-mismatch event of rank r. */
static dt_status load_event(const dt_trace_diff_opts *o, const dt_trace_rank_result *r, event_io *io) {
    char pa[4200], pb[4200];
    rank_file(o->a, r->rank, pa, sizeof pa);
    rank_file(o->b, r->rank, pb, sizeof pb);
    dt_trace_file fa, fb;
    dt_status st = dt_trace_file_load(pa, o->allow_unclosed, &fa);
    if (st) return st;
    if ((st = dt_trace_file_load(pb, o->allow_unclosed, &fb))) { dt_trace_file_free(&fa); return st; }
    const dt_trace_rec *a = r->first.index >= 0 && (size_t)r->first.index < fa.nevents
                                ? &fa.events[r->first.index] : NULL;
    const dt_trace_rec *b = find_event(&fb, &r->first);
    for (int side = 0; a && b && side < 2; side++) {
        int na = side ? a->nout : a->nin, nb = side ? b->nout : b->nin;
        for (int i = 0; i < (na > nb ? na : nb); i++) {
            const dt_trace_rec_tensor *ta = i < na ? (side ? dt_trace_out(&fa, a, i) : dt_trace_in(&fa, a, i)) : NULL;
            const dt_trace_rec_tensor *tb = i < nb ? (side ? dt_trace_out(&fb, b, i) : dt_trace_in(&fb, b, i)) : NULL;
            if (io->n == MAX_IO) { io->more++; continue; }
            io_tensor *t = &io->t[io->n++];
            t->is_output = side;
            t->index = i;
            t->in_a = ta != NULL;
            t->in_b = tb != NULL;
            snprintf(t->name, sizeof t->name, "%s", ta ? ta->name : tb->name);
            layout(t->layout_a, sizeof t->layout_a, ta);
            layout(t->layout_b, sizeof t->layout_b, tb);
            t->digest_a = ta ? ta->digest : 0;
            t->digest_b = tb ? tb->digest : 0;
            t->differs = dt_trace_tensor_differs(ta, tb);
        }
    }
    dt_trace_file_free(&fa);
    dt_trace_file_free(&fb);
    return DT_OK;
}

dt_status dt_rpt_trace_load(const char *a, const char *b, dt_rpt_trace **out) {
    *out = NULL;
    dt_rpt_trace *t = calloc(1, sizeof *t);
    if (!t) return dt_fail(DT_ENOMEM, "out of memory");
    t->o = (dt_trace_diff_opts){a, b, -1, 0};
    dt_status st = dt_trace_diff(&t->o, &t->res);
    if (st) { free(t); return st; }
    t->io = calloc((size_t)t->res.nranks + 1, sizeof *t->io);
    if (!t->io) st = dt_fail(DT_ENOMEM, "out of memory");
    for (int i = 0; !st && i < t->res.nranks; i++)
        if (t->res.ranks[i].mismatches) st = load_event(&t->o, &t->res.ranks[i], &t->io[i]);
    if (st) { dt_rpt_trace_free(t); return st; }
    *out = t;
    return DT_OK;
}

int dt_rpt_trace_mismatch(const dt_rpt_trace *t) { return t->res.mismatch; }

void dt_rpt_trace_free(dt_rpt_trace *t) {
    if (!t) return;
    dt_trace_diff_free(&t->res);
    free(t->io);
    free(t);
}

static const char *verdict_text(int v) {
    switch (v) {
    case DT_VERDICT_IDENTICAL: return "identical";
    case DT_VERDICT_ORIGIN: return "candidate origin";
    case DT_VERDICT_OUTSIDE: return "downstream: no origin in the capture";
    case DT_VERDICT_EVENTS_DIFFER: return "events differ (digests match)";
    case DT_VERDICT_RANK_MISSING: return "rank file in one capture only";
    }
    return "?";
}

static void write_key(FILE *f, const dt_trace_key *k) {
    fprintf(f, "step %lld micro %d scope <code>", (long long)k->step, k->micro);
    dt_html_esc(f, k->scope[0] ? k->scope : "(model)");
    fputs("</code> op <code>", f);
    dt_html_esc(f, k->op);
    fprintf(f, "</code> #%u (%s", k->occurrence, dt_trace_phase_name(k->phase));
    if (k->variant[0]) { fputs(", ", f); dt_html_esc(f, k->variant); }
    fputs(")", f);
}

static void write_rank_detail(FILE *f, const dt_trace_rank_result *r, const event_io *io) {
    fprintf(f, "<div class=\"trace-event\" data-rank=\"%d\"><p><b>rank %d</b>, first mismatch (#%ld in "
            "A's order): ", r->rank, r->rank, r->first.index);
    write_key(f, &r->first);
    fputs("<br>", f);
    if (r->first_class == DT_CLASS_ORIGIN)
        fputs("class: <b>candidate origin</b> &mdash; inputs match, outputs differ: investigate this op, or "
              "a producer the trace cannot see", f);
    else
        fputs("class: <b>downstream</b> &mdash; inputs already differ, so there is <b>no origin in the "
              "capture</b> on this rank: widen --trace-steps (start earlier) or --trace-ranks", f);
    fputs("</p>\n<table class=\"io\"><tr><th>tensor</th><th>name</th><th>layout</th><th>digest A</th>"
          "<th>digest B</th><th></th></tr>\n", f);
    for (int i = 0; i < io->n; i++) {
        const io_tensor *t = &io->t[i];
        fprintf(f, "<tr class=\"%s\"><td>%s %d</td><td>", t->differs ? "bad" : "ok",
                t->is_output ? "output" : "input", t->index);
        dt_html_esc(f, t->name);
        fputs("</td><td>", f);
        dt_html_esc(f, t->layout_a);
        if (strcmp(t->layout_a, t->layout_b)) { fputs(" / B ", f); dt_html_esc(f, t->layout_b); }
        fprintf(f, "</td><td><code>%s%016" PRIx64 "</code></td><td><code>%s%016" PRIx64 "</code></td>"
                "<td>%s</td></tr>\n", t->in_a ? "0x" : "-", t->digest_a, t->in_b ? "0x" : "-",
                t->digest_b, t->differs ? "differs" : "same");
    }
    if (io->more) fprintf(f, "<tr><td colspan=\"6\">... %d more tensors</td></tr>\n", io->more);
    fprintf(f, "</table>\n<p class=\"small\">later mismatches on this rank: %zu downstream (inputs differ), "
            "%zu enclosing the origin, %zu with matching inputs (other candidates)</p></div>\n",
            r->later_downstream, r->later_enclosing, r->later_inputs_match);
}

void dt_rpt_trace_write(FILE *f, const dt_rpt_trace *t) {
    const dt_trace_diff_result *res = &t->res;
    fputs("<h2 id=\"trace\">Trace: the first mismatch on each rank</h2>\n<p>A: <code>", f);
    dt_html_esc(f, t->o.a);
    fputs("</code> &nbsp; B: <code>", f);
    dt_html_esc(f, t->o.b);
    fprintf(f, "</code></p>\n<p class=\"summary %s\" data-cross=\"%s\">", res->mismatch ? "bad" : "ok",
            dt_trace_cross_name(res->cross));
    dt_html_esc(f, dt_trace_cross_text(res->cross));
    fputs("</p>\n<table class=\"ranks\"><tr><th>rank</th><th>verdict</th><th>events A / B / aligned</th>"
          "<th>mismatching</th><th>first mismatch</th></tr>\n", f);
    for (int i = 0; i < res->nranks; i++) {
        const dt_trace_rank_result *r = &res->ranks[i];
        fprintf(f, "<tr class=\"trace-rank %s\" data-rank=\"%d\" data-verdict=\"%s\"", r->verdict ? "bad" : "ok",
                r->rank, dt_trace_verdict_name(r->verdict));
        if (r->mismatches) {
            fprintf(f, " data-step=\"%lld\" data-op=\"", (long long)r->first.step);
            dt_html_esc(f, r->first.op);
            fputs("\"", f);
        }
        fprintf(f, "><td>%d</td><td>%s</td><td>%zu / %zu / %zu</td><td>%zu</td><td>", r->rank,
                verdict_text(r->verdict), r->events_a, r->events_b, r->aligned, r->mismatches);
        if (r->mismatches) write_key(f, &r->first);
        else if (r->verdict == DT_VERDICT_EVENTS_DIFFER)
            fprintf(f, "missing in B %zu, missing in A %zu, order differences %zu", r->missing_in_b,
                    r->missing_in_a, r->order_diffs);
        else fputs("&ndash;", f);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    for (int i = 0; i < res->nranks; i++)
        if (res->ranks[i].mismatches) write_rank_detail(f, &res->ranks[i], &t->io[i]);
}
