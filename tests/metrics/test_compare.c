/* dt_compare_metrics / dt_compare_fingerprints: identical series; a one-ulp change is found
 * at its step and metric; wall-clock fields are ignored; overlapping ranges compare the
 * shared steps; disjoint ranges and missing files are errors; a step or metric present in
 * one log only is a difference; contract fingerprint keys that differ are named. */
#include "core/json.h"
#include "dt_test.h"
#include "metrics/compare.h"
#include "synth.h"

#include <inttypes.h>

static char tmp_root[256];

/* Writes steps first..last of the synthetic series into tmp_root/name; returns the path
 * of its metrics.jsonl in `out`. */
static void series(const char *name, int64_t first, int64_t last, double wall, char *out, size_t n) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    snprintf(out, n, "%s/metrics.jsonl", dir);
    dt_metrics *m;
    dt_metrics_opts o = {0, 0};
    CHECK_OK(dt_metrics_open(&m, dir, &o));
    if (!m) return;
    for (int64_t k = first; k <= last; k++) {
        dt_step_metrics s = synth_step(k, 1, wall);
        CHECK_OK(dt_metrics_log(m, &s));
    }
    CHECK_OK(dt_metrics_close(m));
}

/* Rewrites line `lineno` (1-based) of a file: replaces the first `from` by `to`, or drops
 * the line when from is NULL. */
static void edit_line(const char *path, int lineno, const char *from, const char *to) {
    FILE *f = fopen(path, "rb");
    if (!f) { CHECK(0); return; }
    char *all = calloc(1, 1 << 20), *outb = calloc(1, 1 << 20);
    size_t n = fread(all, 1, (1 << 20) - 1, f);
    fclose(f);
    all[n] = 0;
    char *p = all, *o = outb;
    int found = 0;
    for (int ln = 1; *p; ln++) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        if (ln == lineno) {
            found = 1;
            if (from) {
                char *hit = strstr(p, from);
                CHECK(hit && hit < p + len);
                if (hit && hit < p + len) {
                    size_t pre = (size_t)(hit - p);
                    memcpy(o, p, pre); o += pre;
                    memcpy(o, to, strlen(to)); o += strlen(to);
                    memcpy(o, hit + strlen(from), len - pre - strlen(from)); o += len - pre - strlen(from);
                }
            }
        } else {
            memcpy(o, p, len);
            o += len;
        }
        p += len;
    }
    CHECK(found);
    f = fopen(path, "wb");
    if (f) { fwrite(outb, 1, (size_t)(o - outb), f); fclose(f); }
    free(all);
    free(outb);
}

static void hex_of(double x, char *buf, size_t n) { snprintf(buf, n, "0x%016" PRIx64, dt_f64_bits(x)); }

static void test_identical(void) {
    char a[600], b[600];
    series("id_a", 1, 10, 0, a, sizeof a);
    series("id_b", 1, 10, 0, b, sizeof b);
    dt_compare_report r;
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(r.identical && r.nsteps == 10 && r.first == 1 && r.last == 10);
}

static void test_one_ulp_at_step_7(void) {
    char a[600], b[600], from[40], to[40];
    series("ulp_a", 1, 10, 0, a, sizeof a);
    series("ulp_b", 1, 10, 0, b, sizeof b);
    double loss = synth_step(7, 1, 0).loss;
    hex_of(loss, from, sizeof from);
    hex_of(dt_f64_from_bits(dt_f64_bits(loss) + 1), to, sizeof to);
    edit_line(b, 7, from, to);
    dt_compare_report r;
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(!r.identical && r.diff_step == 7 && r.nsteps == 6);
    CHECKF(!strcmp(r.diff_metric, "loss"), "%s", r.diff_metric);
    CHECKF(strstr(r.a_value, from) && strstr(r.b_value, to), "%s / %s", r.a_value, r.b_value);
}

static void test_wall_clock_ignored(void) {
    char a[600], b[600];
    series("wall_a", 1, 10, 0, a, sizeof a);
    series("wall_b", 1, 10, 17.0, b, sizeof b);
    dt_compare_report r;
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(r.identical && r.nsteps == 10);
}

static void test_overlap_and_disjoint(void) {
    char a[600], b[600], c[600];
    series("ov_a", 1, 10, 0, a, sizeof a);
    series("ov_b", 6, 15, 0, b, sizeof b);
    series("ov_c", 11, 15, 0, c, sizeof c);
    dt_compare_report r;
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(r.identical && r.first == 6 && r.last == 10 && r.nsteps == 5);
    CHECK(r.a_first == 1 && r.a_last == 10 && r.b_first == 6 && r.b_last == 15);
    CHECK_OK(dt_compare_metrics(b, a, &r));
    CHECK(r.identical && r.first == 6 && r.last == 10);
    CHECK(dt_compare_metrics(a, c, &r) == DT_EMISMATCH);
    CHECKF(strstr(dt_errmsg(), "share no step") && strstr(dt_errmsg(), "1-10") &&
           strstr(dt_errmsg(), "11-15"), "%s", dt_errmsg());
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope/metrics.jsonl", tmp_root);
    CHECK(dt_compare_metrics(a, missing, &r) == DT_EIO);
    CHECK(strstr(dt_errmsg(), "nope") != NULL);
}

static void test_one_sided(void) {
    char a[600], b[600];
    dt_compare_report r;
    /* a step missing inside the shared range */
    series("gap_a", 1, 10, 0, a, sizeof a);
    series("gap_b", 1, 10, 0, b, sizeof b);
    edit_line(b, 5, NULL, NULL);
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(!r.identical && r.diff_step == 5 && !strcmp(r.diff_metric, "step"));
    CHECK(!strcmp(r.a_value, "present") && !strcmp(r.b_value, "(absent)"));
    /* a metric in one line only (both its decimal and hex removed) */
    series("key_a", 1, 10, 0, a, sizeof a);
    series("key_b", 1, 10, 0, b, sizeof b);
    edit_line(a, 8, "\"moe_aux\":", "\"moe_aux2\":");
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(!r.identical && r.diff_step == 8);
    CHECKF(!strcmp(r.diff_metric, "moe_aux2") || !strcmp(r.diff_metric, "moe_aux"), "%s", r.diff_metric);
    /* eval on one side only */
    series("ev_a", 1, 10, 0, a, sizeof a);
    series("ev_b", 1, 10, 0, b, sizeof b);
    edit_line(b, 10, "\"eval_loss_hex\"", "\"eval_lossX_hex\"");
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(!r.identical && r.diff_step == 10 && !strcmp(r.diff_metric, "eval_loss"));
    CHECK(!strcmp(r.b_value, "(absent)"));
    /* an integer metric */
    series("int_a", 1, 10, 0, a, sizeof a);
    series("int_b", 1, 10, 0, b, sizeof b);
    edit_line(b, 2, "\"consumed_samples\":16", "\"consumed_samples\":17");
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(!r.identical && r.diff_step == 2 && !strcmp(r.diff_metric, "consumed_samples"));
    CHECK(!strcmp(r.a_value, "16") && !strcmp(r.b_value, "17"));
    /* a decimal that disagrees with its hex is not looked at: the hex is the value */
    series("dec_a", 1, 10, 0, a, sizeof a);
    series("dec_b", 1, 10, 0, b, sizeof b);
    edit_line(b, 1, "\"loss\":3.666666666666667", "\"loss\":3.67");
    CHECK_OK(dt_compare_metrics(a, b, &r));
    CHECK(r.identical);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) { CHECK(0); return; }
    fputs(text, f);
    fclose(f);
}

static void test_fingerprints(void) {
    char a[600], b[600], c[600];
    snprintf(a, sizeof a, "%s/env_a.json", tmp_root);
    snprintf(b, sizeof b, "%s/env_b.json", tmp_root);
    snprintf(c, sizeof c, "%s/env_c.json", tmp_root);
    write_file(a, "{\"contract\":{\"cuda\":\"12.8\",\"flags\":[\"-O2\"],\"only_a\":1,\"gpu\":\"H200\"},"
                  "\"info\":{\"host\":\"x\"}}");
    write_file(b, "{\"contract\":{\"gpu\":\"H200\",\"flags\":[\"-O2\"],\"cuda\":\"12.9\",\"only_b\":2},"
                  "\"info\":{\"host\":\"y\"}}");
    write_file(c, "{\"info\":{}}");
    char keys[256];
    int nd;
    CHECK_OK(dt_compare_fingerprints(a, b, keys, sizeof keys, &nd));
    CHECKF(nd == 3 && !strcmp(keys, "cuda, only_a, only_b"), "%d: %s", nd, keys);
    CHECK_OK(dt_compare_fingerprints(a, a, keys, sizeof keys, &nd));
    CHECK(nd == 0 && keys[0] == 0);
    CHECK(dt_compare_fingerprints(a, c, keys, sizeof keys, &nd) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "contract") && strstr(dt_errmsg(), "env_c.json"));
    CHECK(dt_compare_fingerprints(a, "/nonexistent.json", keys, sizeof keys, &nd) == DT_EIO);
}

/* The hook forwards to dt_ckpt_compare (tests/ckpt/test_ckpt_*.sh cover real checkpoints):
 * something that is not a checkpoint is an error naming it, never "identical". */
static void test_ckpt_hook_refuses_non_checkpoints(void) {
    int identical = 1;
    CHECK(dt_compare_ckpt("/nonexistent_a", "/nonexistent_b", stdout, &identical) != DT_OK);
    CHECK(identical == 0 && strstr(dt_errmsg(), "checkpoint A") && strstr(dt_errmsg(), "/nonexistent_a"));
}

int main(void) {
    dt_test_scratch(tmp_root, sizeof tmp_root, "test_compare");
    RUN(test_identical);
    RUN(test_one_ulp_at_step_7);
    RUN(test_wall_clock_ignored);
    RUN(test_overlap_and_disjoint);
    RUN(test_one_sided);
    RUN(test_fingerprints);
    RUN(test_ckpt_hook_refuses_non_checkpoints);
    dt_test_scratch_remove(tmp_root);
    return dt_test_report();
}
