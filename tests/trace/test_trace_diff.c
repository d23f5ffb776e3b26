/* trace-diff on synthetic captures written through the capture API (toy_trace.c):
 * identical runs; an injected output change (origin candidate on every rank, later events
 * downstream); a window that starts after the origin (origin outside the capture);
 * injection on one rank only (origin on some ranks); a row permutation that a sum-style
 * digest cannot see but per-row digests locate; missing events; order differences;
 * malformed input fails closed.
 *
 * `test_trace_diff --fixtures DIR` only writes the captures (for test_trace_cli.sh). */
#include "core/digest.h"
#include "trace/diff.h"
#include "trace/trace.h"
#include "toy_trace.h"
#include "dt_test.h"

#include <stdlib.h>
#include <sys/stat.h>

static char root[256];

static void path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", root, name); }

/* Writes one named capture; aborts the test binary if the writer fails (nothing to diff). */
static void capture(const char *name, const toy_opts *o) {
    char p[512];
    path(p, sizeof p, name);
    if (toy_run(p, o) != 0) { fprintf(stderr, "writing %s failed: %s\n", p, dt_errmsg()); exit(1); }
}

static void write_fixtures(void) {
    toy_opts o;
    toy_defaults(&o);
    capture("a", &o);
    capture("a_again", &o);
    o.inject_op = "matmul"; o.inject_step = 2; o.inject_ranks = 3;
    capture("inject_matmul", &o);
    o.inject_ranks = 2;
    capture("inject_matmul_rank1", &o);
    toy_defaults(&o);
    o.level = DT_TRACE_MODULE;
    capture("module_a", &o);
    o.inject_op = "matmul"; o.inject_step = 2; o.inject_ranks = 3;
    capture("module_inject", &o);
    toy_defaults(&o);
    o.steps = "3-4";
    capture("late_a", &o);
    o.inject_op = "matmul"; o.inject_step = 2; o.inject_ranks = 3;
    capture("late_inject", &o);
    toy_defaults(&o);
    o.permute_step = 2;
    capture("permuted", &o);
    toy_defaults(&o);
    o.skip_layernorm_step = 1;
    o.extra_event_step = 3;
    capture("missing", &o);
    toy_defaults(&o);
    o.swap_aux_step = 1;
    capture("reordered", &o);
    toy_defaults(&o);
    o.digest = DT_TRACE_DIGEST_TREE; /* as a GPU run's trace says */
    capture("tree_digests", &o);
}

static dt_status diff(const char *a, const char *b, int rank, dt_trace_diff_result *r) {
    char pa[512], pb[512];
    path(pa, sizeof pa, a);
    path(pb, sizeof pb, b);
    dt_trace_diff_opts o = {pa, pb, rank, 0};
    return dt_trace_diff(&o, r);
}

/* The text report, for checks on what a person reads. */
static char *report(const char *a, const char *b) {
    char pa[512], pb[512];
    path(pa, sizeof pa, a);
    path(pb, sizeof pb, b);
    dt_trace_diff_opts o = {pa, pb, -1, 0};
    dt_trace_diff_result r;
    if (dt_trace_diff(&o, &r) != DT_OK) return strdup("");
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    dt_trace_diff_print(&o, &r, f);
    fclose(f);
    dt_trace_diff_free(&r);
    return buf;
}

static void test_identical(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("a", "a_again", -1, &r));
    CHECK(r.nranks == 2 && !r.mismatch && r.cross == DT_CROSS_IDENTICAL);
    for (int i = 0; i < r.nranks; i++) {
        CHECK(r.ranks[i].verdict == DT_VERDICT_IDENTICAL && r.ranks[i].mismatches == 0);
        CHECK(r.ranks[i].aligned == r.ranks[i].events_a && r.ranks[i].events_a == 5 * 10);
    }
    dt_trace_diff_free(&r);
}

static void test_injected_origin_all_ranks(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("a", "inject_matmul", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_SAME_ORIGIN_ALL && r.nranks == 2);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->verdict == DT_VERDICT_ORIGIN && k->first_class == DT_CLASS_ORIGIN);
        CHECK(!strcmp(k->first.op, "matmul") && !strcmp(k->first.scope, "h.0.mlp"));
        CHECK(k->first.step == 2 && k->first.occurrence == 0 && k->first.index == 2 * 10 + 4);
        CHECK(k->ntensors == 1 && k->tensors[0].is_output && !strcmp(k->tensors[0].name, "y"));
        CHECK(k->tensors[0].digest_a != k->tensors[0].digest_b);
        /* Later: router, loss_bwd, allreduce, adamw at step 2, then at least the ops of
         * step 3 that read w itself (embed, matmul, adamw); rounding may absorb the
         * change elsewhere. aux_a/aux_b read only x and stay equal. All downstream. */
        CHECKF(k->later_downstream >= 4 + 3 && k->later_inputs_match == 0,
               "later downstream %zu of %zu", k->later_downstream, k->mismatches);
        /* The h.0 block event around matmul: inputs match, outputs differ, but it encloses
         * the origin, so it is not another candidate. */
        CHECK(k->later_enclosing == 1);
        CHECK(k->mismatches == 1 + k->later_downstream + k->later_enclosing);
        CHECK(k->missing_in_a == 0 && k->missing_in_b == 0 && k->order_diffs == 0);
    }
    dt_trace_diff_free(&r);
    char *txt = report("a", "inject_matmul");
    CHECKF(strstr(txt, "ORIGIN CANDIDATE") && strstr(txt, "op matmul") &&
           strstr(txt, "inputs match, outputs differ") && strstr(txt, "same origin op") &&
           strstr(txt, "result: MISMATCH"), "%s", txt);
    free(txt);
}

/* At module level the op is invisible: the enclosing module is the origin candidate. */
static void test_module_level_origin(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("module_a", "module_inject", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_SAME_ORIGIN_ALL);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->events_a == 5 * 3); /* block, allreduce, adamw per step */
        CHECK(k->verdict == DT_VERDICT_ORIGIN && !strcmp(k->first.op, "block"));
        CHECK(!strcmp(k->first.scope, "h.0") && k->first.step == 2 && k->later_inputs_match == 0);
    }
    dt_trace_diff_free(&r);
}

static void test_window_after_origin(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("late_a", "late_inject", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_OUTSIDE_ALL);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->verdict == DT_VERDICT_OUTSIDE && k->first_class == DT_CLASS_DOWNSTREAM);
        CHECK(k->first.step == 3 && !strcmp(k->first.op, "embed")); /* reads w */
        CHECK(k->ntensors >= 1 && !k->tensors[0].is_output && !strcmp(k->tensors[0].name, "w"));
    }
    dt_trace_diff_free(&r);
    char *txt = report("late_a", "late_inject");
    CHECKF(strstr(txt, "ORIGIN OUTSIDE THE CAPTURE") && strstr(txt, "widen"), "%s", txt);
    free(txt);
}

static void test_origin_on_some_ranks(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("a", "inject_matmul_rank1", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_ORIGIN_SOME);
    CHECK(r.nranks == 2 && r.ranks[0].verdict == DT_VERDICT_IDENTICAL);
    CHECK(r.ranks[1].verdict == DT_VERDICT_ORIGIN && !strcmp(r.ranks[1].first.op, "matmul"));
    dt_trace_diff_free(&r);
    CHECK_OK(diff("a", "inject_matmul_rank1", 0, &r)); /* --rank 0 alone: clean */
    CHECK(r.nranks == 1 && !r.mismatch);
    dt_trace_diff_free(&r);
    CHECK(diff("a", "inject_matmul_rank1", 7, &r) == DT_EINVAL);
}

/* A row swap keeps every order-free summary (sum and XOR of the element bits) but moves
 * rows; per-row digests name exactly the swapped rows. */
static void test_row_permutation(void) {
    float y[TOY_R * TOY_C], p[TOY_R * TOY_C], q[TOY_R * TOY_C];
    for (int i = 0; i < TOY_R * TOY_C; i++) y[i] = (float)i * 0.5f - 3.0f;
    for (int r = 0; r < TOY_R; r++) {
        int dst = (3 * r + 1) % TOY_R, bug = dst == 2 ? 5 : dst == 5 ? 2 : dst;
        memcpy(&p[dst * TOY_C], &y[r * TOY_C], sizeof(float) * TOY_C);
        memcpy(&q[bug * TOY_C], &y[r * TOY_C], sizeof(float) * TOY_C);
    }
    uint64_t sum_p = 0, sum_q = 0;
    uint32_t xor_p = 0, xor_q = 0;
    for (int i = 0; i < TOY_R * TOY_C; i++) {
        uint32_t bp, bq;
        memcpy(&bp, &p[i], 4);
        memcpy(&bq, &q[i], 4);
        sum_p += bp; sum_q += bq; xor_p ^= bp; xor_q ^= bq;
    }
    CHECK(sum_p == sum_q && xor_p == xor_q);          /* the sum-style digest is blind */
    CHECK(memcmp(p, q, sizeof p) != 0);
    int rows_differ = 0;
    for (int r = 0; r < TOY_R; r++)
        rows_differ += dt_xxh64(&p[r * TOY_C], 16, 0) != dt_xxh64(&q[r * TOY_C], 16, 0);
    CHECK(rows_differ == 2);

    dt_trace_diff_result r;
    CHECK_OK(diff("a", "permuted", -1, &r));
    CHECK(r.cross == DT_CROSS_SAME_ORIGIN_ALL);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->verdict == DT_VERDICT_ORIGIN && !strcmp(k->first.op, "router") && k->first.step == 2);
        CHECK(k->ntensors == 1 && !strcmp(k->tensors[0].name, "p"));
        const dt_trace_tensor_diff *d = &k->tensors[0];
        CHECK(d->rows == TOY_R && d->rows_per_chunk == 1 && d->chunks_differ == 2);
        CHECK(d->nfirst_rows == 2 && d->first_rows[0] == 2 && d->first_rows[1] == 5);
    }
    dt_trace_diff_free(&r);
    char *txt = report("a", "permuted");
    CHECKF(strstr(txt, "rows differ: 2 of 8 (first: 2 5)"), "%s", txt);
    free(txt);
}

static void test_missing_events(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("a", "missing", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_EVENTS_ONLY);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->verdict == DT_VERDICT_EVENTS_DIFFER && k->mismatches == 0);
        CHECK(k->missing_in_b == 1 && !strcmp(k->missing_b[0].op, "layernorm") && k->missing_b[0].step == 1);
        CHECK(k->missing_in_a == 1 && !strcmp(k->missing_a[0].op, "extra_probe") && k->missing_a[0].step == 3);
        CHECK(k->order_diffs == 0);
    }
    dt_trace_diff_free(&r);
}

static void test_order_differences(void) {
    dt_trace_diff_result r;
    CHECK_OK(diff("a", "reordered", -1, &r));
    CHECK(r.mismatch && r.cross == DT_CROSS_EVENTS_ONLY);
    for (int i = 0; i < r.nranks; i++) {
        const dt_trace_rank_result *k = &r.ranks[i];
        CHECK(k->verdict == DT_VERDICT_EVENTS_DIFFER && k->mismatches == 0);
        CHECK(k->order_diffs == 1 && k->missing_in_a == 0 && k->missing_in_b == 0);
        CHECK(!strcmp(k->order_before.op, "aux_a") && !strcmp(k->order_after.op, "aux_b"));
        CHECK(k->order_before.step == 1);
    }
    dt_trace_diff_free(&r);
}

static void test_fail_closed(void) {
    char p[512], cmd[4096];
    path(p, sizeof p, "broken");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/a/rank_000000.trace' '%s/' && "
             "truncate -s -5 '%s/rank_000000.trace'", p, root, p, p);
    CHECK(system(cmd) == 0);
    dt_trace_diff_result r;
    CHECK(diff("a", "broken", -1, &r) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "broken/rank_000000.trace") && strstr(dt_errmsg(), "offset"), "%s", dt_errmsg());
    CHECK(diff("a", "does_not_exist", -1, &r) == DT_EINVAL);
    path(p, sizeof p, "empty");
    mkdir(p, 0777);
    CHECK(diff("a", "empty", -1, &r) == DT_EINVAL && strstr(dt_errmsg(), "no rank_"));
}

/* A CPU trace (flat XXH64) and a GPU trace (chunk-tree digests) are refused, naming both
 * forms, rather than reported as differing everywhere; two traces of the tree form compare. */
static void test_digest_forms(void) {
    dt_trace_diff_result r;
    CHECK(diff("a", "tree_digests", -1, &r) == DT_EINVAL);
    CHECKF(strstr(dt_errmsg(), "xxh64-tree-4KiB") && strstr(dt_errmsg(), "as xxh64,") &&
           strstr(dt_errmsg(), "cannot be compared"), "%s", dt_errmsg());
    CHECK_OK(diff("tree_digests", "tree_digests", -1, &r));
    CHECK(!r.mismatch);
    dt_trace_diff_free(&r);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--fixtures")) {
        snprintf(root, sizeof root, "%s", argv[2]);
        write_fixtures();
        return 0;
    }
    dt_test_scratch(root, sizeof root, "trace_diff");
    write_fixtures();
    RUN(test_identical);
    RUN(test_digest_forms);
    RUN(test_injected_origin_all_ranks);
    RUN(test_module_level_origin);
    RUN(test_window_after_origin);
    RUN(test_origin_on_some_ranks);
    RUN(test_row_permutation);
    RUN(test_missing_events);
    RUN(test_order_differences);
    RUN(test_fail_closed);
    dt_test_scratch_remove(root);
    return dt_test_report();
}
