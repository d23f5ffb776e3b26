/* trace-diff reports: a human-readable table and one JSON object (see diff.h). Both are
 * written from the result structs only, so they always say the same thing. */
#include "trace/diff.h"

#include "core/json.h"
#include "trace/trace.h"

#include <inttypes.h>

static const char *verdict_text(int v) {
    switch (v) {
    case DT_VERDICT_IDENTICAL: return "identical";
    case DT_VERDICT_ORIGIN: return "ORIGIN CANDIDATE";
    case DT_VERDICT_OUTSIDE: return "ORIGIN OUTSIDE THE CAPTURE";
    case DT_VERDICT_EVENTS_DIFFER: return "events differ (digests match)";
    case DT_VERDICT_RANK_MISSING: return "rank file in one capture only";
    }
    return "?";
}

static void print_key(FILE *out, const dt_trace_key *k) {
    fprintf(out, "step %lld micro %d scope '%s' op %s #%u (%s%s%s)", (long long)k->step,
            k->micro, k->scope, k->op, k->occurrence, dt_trace_phase_name(k->phase),
            k->variant[0] ? ", " : "", k->variant);
}

static void print_tensor(FILE *out, const dt_trace_tensor_diff *d) {
    fprintf(out, "    %s %d %s: ", d->is_output ? "output" : "input", d->index, d->layout_a);
    if (d->layout_differs) fprintf(out, "layout differs, B has %s", d->layout_b);
    else fprintf(out, "digest A 0x%016" PRIx64 " B 0x%016" PRIx64, d->digest_a, d->digest_b);
    if (d->chunks_differ) {
        fprintf(out, "; %s differ: %lld of %lld (first:", d->rows_per_chunk > 1 ? "row chunks" : "rows",
                (long long)d->chunks_differ,
                (long long)((d->rows + d->rows_per_chunk - 1) / d->rows_per_chunk));
        for (int i = 0; i < d->nfirst_rows; i++) fprintf(out, " %lld", (long long)d->first_rows[i]);
        fprintf(out, ")");
        if (d->rows_per_chunk > 1) fprintf(out, " [row numbers; %lld rows per chunk]", (long long)d->rows_per_chunk);
    } else if (!d->layout_differs && d->rows == 0) {
        fprintf(out, " (no per-row digests: mark it order-sensitive to locate rows)");
    }
    fputc('\n', out);
}

static void print_rank(FILE *out, const dt_trace_rank_result *r) {
    fprintf(out, "rank %d: %s\n", r->rank, verdict_text(r->verdict));
    if (r->verdict == DT_VERDICT_RANK_MISSING) {
        fprintf(out, "  rank_%06d.trace exists only in %s: were --trace-ranks the same?\n",
                r->rank, r->in_a ? "A" : "B");
        return;
    }
    fprintf(out, "  events: A %zu, B %zu, aligned %zu; mismatching %zu\n", r->events_a,
            r->events_b, r->aligned, r->mismatches);
    if (r->level_a != r->level_b)
        fprintf(out, "  note: trace levels differ (A %s, B %s): events of the higher level "
                "show as missing\n", dt_trace_level_name(r->level_a), dt_trace_level_name(r->level_b));
    if (r->mismatches) {
        fprintf(out, "  first mismatch (#%ld in A's order): ", r->first.index);
        print_key(out, &r->first);
        fputc('\n', out);
        if (r->first_class == DT_CLASS_ORIGIN)
            fprintf(out, "    class: origin candidate (inputs match, outputs differ): investigate "
                    "this op, or a producer the trace cannot see\n");
        else
            fprintf(out, "    class: downstream (inputs already differ): the origin is outside "
                    "the capture; widen --trace-steps (start earlier) or --trace-ranks\n");
        for (int i = 0; i < r->ntensors; i++) print_tensor(out, &r->tensors[i]);
        if (r->ntensors_total > r->ntensors)
            fprintf(out, "    ... %d more differing tensors\n", r->ntensors_total - r->ntensors);
        fprintf(out, "  later mismatches: %zu downstream (inputs differ), %zu enclosing the "
                "origin (coarser events around it), %zu with matching inputs (other "
                "candidates)\n", r->later_downstream, r->later_enclosing, r->later_inputs_match);
    }
    fprintf(out, "  missing in B: %zu; missing in A: %zu; order differences: %zu\n",
            r->missing_in_b, r->missing_in_a, r->order_diffs);
    for (size_t i = 0; i < r->missing_in_b && i < DT_DIFF_MAX_LIST; i++) {
        fprintf(out, "    only in A (#%ld): ", r->missing_b[i].index);
        print_key(out, &r->missing_b[i]);
        fputc('\n', out);
    }
    for (size_t i = 0; i < r->missing_in_a && i < DT_DIFF_MAX_LIST; i++) {
        fprintf(out, "    only in B (#%ld): ", r->missing_a[i].index);
        print_key(out, &r->missing_a[i]);
        fputc('\n', out);
    }
    if (r->order_diffs) {
        fprintf(out, "    first order difference: in A ");
        print_key(out, &r->order_before);
        fprintf(out, "\n      runs before ");
        print_key(out, &r->order_after);
        fprintf(out, "; in B after it\n");
    }
    if (r->path_diffs) {
        fprintf(out, "  note: %zu event(s) with equal digests took a different path; first: ",
                r->path_diffs);
        print_key(out, &r->path_first);
        fprintf(out, " A '%s' B '%s'\n", r->path_a, r->path_b);
    }
}

const char *dt_trace_cross_text(int c) {
    switch (c) {
    case DT_CROSS_IDENTICAL: return "no mismatch: every aligned event matches on every rank";
    case DT_CROSS_SAME_ORIGIN_ALL: return "every traced rank names the same origin op: the op "
        "itself is nondeterministic (or a producer the trace cannot see); confirm with a byte "
        "comparison of its outputs";
    case DT_CROSS_ORIGIN_SOME: return "the origin differs between ranks or shows on only some: "
        "look at topology, placement, input distribution and reduction order; a divergence "
        "that reached other ranks through a collective shows there as a comm-phase candidate";
    case DT_CROSS_OUTSIDE_ALL: return "origin outside the capture on every traced rank: widen "
        "--trace-steps (start earlier) or --trace-ranks";
    case DT_CROSS_EVENTS_ONLY: return "all digests match, but events, ranks or their order "
        "differ: compare the two runs' configuration and trace settings";
    }
    return "?";
}

void dt_trace_diff_print(const dt_trace_diff_opts *o, const dt_trace_diff_result *res, FILE *out) {
    fprintf(out, "trace-diff  A: %s  B: %s  (%d rank%s)\n\n", o->a, o->b, res->nranks,
            res->nranks == 1 ? "" : "s");
    for (int i = 0; i < res->nranks; i++) {
        print_rank(out, &res->ranks[i]);
        fputc('\n', out);
    }
    fprintf(out, "%-6s %-28s %s\n", "rank", "verdict", "first mismatch");
    for (int i = 0; i < res->nranks; i++) {
        const dt_trace_rank_result *r = &res->ranks[i];
        fprintf(out, "%-6d %-28s ", r->rank, dt_trace_verdict_name(r->verdict));
        if (r->mismatches)
            fprintf(out, "step %lld micro %d %s/%s #%u\n", (long long)r->first.step,
                    r->first.micro, r->first.scope, r->first.op, r->first.occurrence);
        else
            fprintf(out, "-\n");
    }
    fprintf(out, "\nsummary: %s\n", dt_trace_cross_text(res->cross));
    if (res->cross == DT_CROSS_ORIGIN_SOME || res->cross == DT_CROSS_SAME_ORIGIN_ALL) {
        for (int i = 0; i < res->nranks; i++) {
            const dt_trace_rank_result *r = &res->ranks[i];
            if (r->verdict == DT_VERDICT_ORIGIN)
                fprintf(out, "  rank %d: origin candidate %s/%s at step %lld (%s)\n", r->rank,
                        r->first.scope, r->first.op, (long long)r->first.step,
                        dt_trace_phase_name(r->first.phase));
            else
                fprintf(out, "  rank %d: %s\n", r->rank, dt_trace_verdict_name(r->verdict));
        }
    }
    fprintf(out, "result: %s\n", res->mismatch ? "MISMATCH" : "no mismatch");
}

/* ---- JSON --------------------------------------------------------------------------- */

static void json_key(FILE *out, const dt_trace_key *k) {
    fprintf(out, "{\"index\":%ld,\"step\":%lld,\"micro\":%d,\"level\":\"%s\",\"scope\":",
            k->index, (long long)k->step, k->micro, dt_trace_level_name(k->level));
    dt_json_write_string(out, k->scope);
    fprintf(out, ",\"op\":");
    dt_json_write_string(out, k->op);
    fprintf(out, ",\"occurrence\":%u,\"phase\":\"%s\",\"variant\":", k->occurrence,
            dt_trace_phase_name(k->phase));
    dt_json_write_string(out, k->variant);
    fputc('}', out);
}

static void json_tensor(FILE *out, const dt_trace_tensor_diff *d) {
    fprintf(out, "{\"role\":\"%s\",\"index\":%d,\"name\":", d->is_output ? "output" : "input", d->index);
    dt_json_write_string(out, d->name);
    fprintf(out, ",\"layout_a\":");
    dt_json_write_string(out, d->layout_a);
    fprintf(out, ",\"layout_b\":");
    dt_json_write_string(out, d->layout_b);
    fprintf(out, ",\"layout_differs\":%s,\"digest_a\":\"0x%016" PRIx64 "\",\"digest_b\":\"0x%016"
            PRIx64 "\",\"rows\":%lld,\"rows_per_chunk\":%lld,\"rows_differ_count\":%lld,"
            "\"rows_differ_first\":[", d->layout_differs ? "true" : "false", d->digest_a,
            d->digest_b, (long long)d->rows, (long long)d->rows_per_chunk,
            (long long)d->chunks_differ);
    for (int i = 0; i < d->nfirst_rows; i++)
        fprintf(out, "%s%lld", i ? "," : "", (long long)d->first_rows[i]);
    fprintf(out, "]}");
}

static void json_keys(FILE *out, const char *name, const dt_trace_key *k, size_t n) {
    fprintf(out, ",\"%s\":[", name);
    for (size_t i = 0; i < n && i < DT_DIFF_MAX_LIST; i++) {
        if (i) fputc(',', out);
        json_key(out, &k[i]);
    }
    fputc(']', out);
}

static void json_rank(FILE *out, const dt_trace_rank_result *r) {
    fprintf(out, "{\"rank\":%d,\"in_a\":%s,\"in_b\":%s,\"verdict\":\"%s\",\"events_a\":%zu,"
            "\"events_b\":%zu,\"aligned\":%zu,\"mismatches\":%zu,\"level_a\":\"%s\","
            "\"level_b\":\"%s\"", r->rank, r->in_a ? "true" : "false", r->in_b ? "true" : "false",
            dt_trace_verdict_name(r->verdict), r->events_a, r->events_b, r->aligned,
            r->mismatches, dt_trace_level_name(r->level_a), dt_trace_level_name(r->level_b));
    fprintf(out, ",\"first_mismatch\":");
    if (r->mismatches) {
        fprintf(out, "{\"class\":\"%s\",\"event\":",
                r->first_class == DT_CLASS_ORIGIN ? "origin_candidate" : "downstream");
        json_key(out, &r->first);
        fprintf(out, ",\"tensors\":[");
        for (int i = 0; i < r->ntensors; i++) {
            if (i) fputc(',', out);
            json_tensor(out, &r->tensors[i]);
        }
        fprintf(out, "],\"tensors_differ_total\":%d}", r->ntensors_total);
    } else {
        fprintf(out, "null");
    }
    fprintf(out, ",\"later_downstream\":%zu,\"later_enclosing\":%zu,\"later_inputs_match\":%zu,"
            "\"missing_in_b\":%zu,\"missing_in_a\":%zu,\"order_differences\":%zu,"
            "\"path_differences\":%zu", r->later_downstream, r->later_enclosing,
            r->later_inputs_match, r->missing_in_b, r->missing_in_a, r->order_diffs, r->path_diffs);
    json_keys(out, "only_in_a", r->missing_b, r->missing_in_b);
    json_keys(out, "only_in_b", r->missing_a, r->missing_in_a);
    fprintf(out, ",\"first_order_difference\":");
    if (r->order_diffs) {
        fprintf(out, "{\"a_before\":");
        json_key(out, &r->order_before);
        fprintf(out, ",\"a_after\":");
        json_key(out, &r->order_after);
        fputc('}', out);
    } else {
        fprintf(out, "null");
    }
    fputc('}', out);
}

void dt_trace_diff_print_json(const dt_trace_diff_opts *o, const dt_trace_diff_result *res, FILE *out) {
    fprintf(out, "{\"format\":\"detrain.trace-diff\",\"version\":1,\"a\":");
    dt_json_write_string(out, o->a);
    fprintf(out, ",\"b\":");
    dt_json_write_string(out, o->b);
    fprintf(out, ",\"mismatch\":%s,\"summary\":{\"verdict\":\"%s\",\"message\":",
            res->mismatch ? "true" : "false", dt_trace_cross_name(res->cross));
    dt_json_write_string(out, dt_trace_cross_text(res->cross));
    fprintf(out, "},\"ranks\":[");
    for (int i = 0; i < res->nranks; i++) {
        if (i) fputc(',', out);
        json_rank(out, &res->ranks[i]);
    }
    fprintf(out, "]}\n");
}
