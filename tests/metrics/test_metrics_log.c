/* metrics.jsonl: every double survives a write + json_read round trip bit for bit (NaN
 * payloads, +-inf, -0.0, subnormals); a fresh run refuses a used log directory; a resumed
 * run appends, a crash's half line is cut, and the reader applies the resume rule; the
 * console line has the Megatron fields.
 *
 * Also a helper mode for the shell tests:
 *   test_metrics_log --write DIR FIRST LAST [--special] [--wall-offset MS] [--no-tfevents]
 * writes steps FIRST..LAST of the synthetic series into DIR (exit 0 on success). */
#include "core/json_read.h"
#include "dt_test.h"
#include "metrics/metrics.h"
#include "metrics/tfevents.h"
#include "synth.h"

#include <inttypes.h>
#include <unistd.h>

static char tmp_root[256];

static void make_tmp_root(void) {
    dt_test_scratch(tmp_root, sizeof tmp_root, "test_metrics");
}

static void rm_rf(const char *dir) {
    dt_test_scratch_remove(dir);
}

static dt_status write_series(const char *dir, int64_t first, int64_t last, int special,
                              double wall_offset, const dt_metrics_opts *opts) {
    dt_metrics *m;
    dt_status st = dt_metrics_open(&m, dir, opts);
    if (st) return st;
    for (int64_t k = first; k <= last && !st; k++) {
        dt_step_metrics s = synth_step(k, special, wall_offset);
        st = dt_metrics_log(m, &s);
    }
    dt_status st2 = dt_metrics_close(m);
    return st ? st : st2;
}

/* bits of `key_hex` in line equal the bits of x */
static int hex_is(const dt_json_value *line, const char *key, double x) {
    char hk[128];
    uint64_t bits;
    snprintf(hk, sizeof hk, "%s_hex", key);
    return !dt_json_get_hex64(line, hk, &bits) && bits == dt_f64_bits(x);
}

static int int_is(const dt_json_value *line, const char *key, int64_t x) {
    int64_t v;
    return !dt_json_get_i64(line, key, &v) && v == x;
}

static void test_round_trip_exact_bits(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/rt", tmp_root);
    dt_metrics_opts o = {0, 0};
    CHECK_OK(write_series(dir, 1, 12, 1, 0.0, &o));
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    dt_metrics_series s;
    CHECK_OK(dt_metrics_read(path, &s));
    CHECK(s.n == 12);
    for (size_t i = 0; i < s.n; i++) {
        dt_step_metrics e = synth_step((int64_t)i + 1, 1, 0.0);
        const dt_json_value *l = s.lines[i];
        CHECKF(s.steps[i] == e.step, "step %" PRId64, s.steps[i]);
        CHECKF(hex_is(l, "loss", e.loss), "loss at step %" PRId64, e.step);
        CHECKF(hex_is(l, "grad_norm", e.grad_norm), "grad_norm at step %" PRId64, e.step);
        CHECKF(hex_is(l, "param_norm", e.param_norm), "param_norm at step %" PRId64, e.step);
        CHECKF(hex_is(l, "lr", e.lr), "lr at step %" PRId64, e.step);
        CHECKF(hex_is(l, "moe_aux", e.aux[0].value), "aux at step %" PRId64, e.step);
        CHECKF(hex_is(l, "step_ms", e.step_ms), "step_ms at step %" PRId64, e.step);
        CHECKF(hex_is(l, "tok_per_s", e.tok_per_s), "tok_per_s at step %" PRId64, e.step);
        CHECK(int_is(l, "num_zeros", e.num_zeros));
        CHECK(int_is(l, "consumed_samples", e.consumed_samples));
        CHECK(int_is(l, "consumed_tokens", e.consumed_tokens));
        if (e.has_eval) CHECKF(hex_is(l, "eval_loss", e.eval_loss), "eval at %" PRId64, e.step);
        else CHECK(dt_json_get(l, "eval_loss") == NULL);
        /* finite decimals parse back to the same double too (%.17g round-trips) */
        const dt_json_value *d = dt_json_get(l, "loss");
        if (d && d->type == DT_JSON_NUMBER)
            CHECK(dt_f64_bits(strtod(d->text, NULL)) == dt_f64_bits(e.loss));
    }
    /* the special values are really in there */
    CHECK(hex_is(s.lines[2], "grad_norm", dt_f64_from_bits(0x7ff8000000000123ull)));
    CHECK(hex_is(s.lines[2], "param_norm", -0.0) && !hex_is(s.lines[2], "param_norm", 0.0));
    const dt_json_value *nanv = dt_json_get(s.lines[2], "grad_norm");
    CHECK(nanv && nanv->type == DT_JSON_STRING && !strcmp(nanv->text, "nan"));
    const dt_json_value *inf = dt_json_get(s.lines[3], "loss");
    CHECK(inf && inf->type == DT_JSON_STRING && !strcmp(inf->text, "-inf"));
    dt_metrics_series_free(&s);
}

static void test_fresh_run_refuses_used_dir(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/used", tmp_root);
    dt_metrics_opts o = {0, 0};
    CHECK_OK(write_series(dir, 1, 3, 0, 0.0, &o));
    dt_metrics *m = NULL;
    CHECK(dt_metrics_open(&m, dir, &o) == DT_ESTATE);
    CHECK(m == NULL);
    CHECK(strstr(dt_errmsg(), "metrics.jsonl") != NULL);
}

static void test_steps_must_increase(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/inc", tmp_root);
    dt_metrics *m;
    dt_metrics_opts o = {0, 0};
    CHECK_OK(dt_metrics_open(&m, dir, &o));
    dt_step_metrics s = synth_step(5, 0, 0);
    CHECK_OK(dt_metrics_log(m, &s));
    CHECK(dt_metrics_log(m, &s) == DT_EINVAL);
    s = synth_step(6, 0, 0);
    s.aux[0].name = "loss"; /* clashes with a fixed key */
    CHECK(dt_metrics_log(m, &s) == DT_EINVAL);
    s.aux[0].name = "x_hex";
    CHECK(dt_metrics_log(m, &s) == DT_EINVAL);
    CHECK_OK(dt_metrics_close(m));
}

/* Crash after step 8 with half of step 9 written, resume from a checkpoint at step 6:
 * the half line is cut, steps 7..10 are appended, and the reader yields 1..10 with the
 * resumed values. */
static void test_resume_append(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/resume", tmp_root);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    dt_metrics_opts fresh = {0, 0}, resume = {1, 0};
    CHECK_OK(write_series(dir, 1, 8, 0, 0.0, &fresh));
    FILE *f = fopen(path, "ab");
    CHECK(f != NULL);
    if (f) { fputs("{\"step\":9,\"loss\":1.2", f); fclose(f); }
    dt_metrics_series s;
    CHECK(dt_metrics_read(path, &s) == DT_ECORRUPT); /* incomplete last line is reported */
    CHECK(strstr(dt_errmsg(), "line 9") != NULL);
    CHECK_OK(write_series(dir, 7, 10, 0, 50.0, &resume)); /* resumed run: slower clock */
    CHECK_OK(dt_metrics_read(path, &s));
    CHECK(s.n == 10);
    for (size_t i = 0; i < s.n; i++) {
        CHECK(s.steps[i] == (int64_t)i + 1);
        dt_step_metrics e = synth_step((int64_t)i + 1, 0, i + 1 >= 7 ? 50.0 : 0.0);
        CHECKF(hex_is(s.lines[i], "step_ms", e.step_ms), "step %zu comes from the right segment", i + 1);
    }
    dt_metrics_series_free(&s);
}

static void test_reader_rejects_bad_lines(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/bad.jsonl", tmp_root);
    const char *bad[] = {"{\"step\":1}\n{\"loss\":2}\n", "{\"step\":0}\n", "{\"step\":1.5}\n",
                         "[1]\n", "{\"step\":1,}\n", "\n"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *f = fopen(path, "wb");
        if (!f) { CHECK(0); return; }
        fputs(bad[k], f);
        fclose(f);
        dt_metrics_series s;
        CHECKF(dt_metrics_read(path, &s) == DT_ECORRUPT, "case %zu", k);
        CHECKF(strstr(dt_errmsg(), "bad.jsonl line") != NULL, "case %zu: %s", k, dt_errmsg());
    }
}

static void test_console_line(void) {
    dt_step_metrics s = synth_step(7, 0, 0);
    char buf[512];
    dt_metrics_console_line(buf, sizeof buf, &s, 100, 1000.0);
    CHECKF(strstr(buf, "iteration 7/100 | consumed samples: 56 | elapsed time per iteration (ms): 102.3")
           == buf, "%s", buf);
    CHECKF(strstr(buf, "| learning rate: 4.200000E-04 |") != NULL, "%s", buf);
    CHECKF(strstr(buf, "| loss: 1.444444E+00 |") != NULL, "%s", buf);
    CHECKF(strstr(buf, "| grad norm: 0.265 |") != NULL, "%s", buf);
    CHECKF(strstr(buf, "| ETA: 00:01:33") != NULL, "%s", buf); /* 93 steps x 1 s */
    CHECK(strstr(buf, "eval loss") == NULL);
    s = synth_step(10, 0, 0);
    dt_metrics_console_line(buf, sizeof buf, &s, 10, 5.0);
    CHECKF(strstr(buf, "| eval loss: ") != NULL && strstr(buf, "ETA: 00:00:00"), "%s", buf);
}

static int write_mode(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s --write DIR FIRST LAST [--special] [--wall-offset MS] "
                "[--no-tfevents] [--resume]\n", argv[0]);
        return 2;
    }
    int special = 0;
    double wall = 0;
    dt_metrics_opts o = {0, 1};
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--special")) special = 1;
        else if (!strcmp(argv[i], "--no-tfevents")) o.tfevents = 0;
        else if (!strcmp(argv[i], "--resume")) o.resume = 1;
        else if (!strcmp(argv[i], "--wall-offset") && i + 1 < argc) wall = atof(argv[++i]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    dt_status st = write_series(argv[2], atoll(argv[3]), atoll(argv[4]), special, wall, &o);
    if (st) { fprintf(stderr, "write failed: %s\n", dt_errmsg()); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--write")) return write_mode(argc, argv);
    make_tmp_root();
    RUN(test_round_trip_exact_bits);
    RUN(test_fresh_run_refuses_used_dir);
    RUN(test_steps_must_increase);
    RUN(test_resume_append);
    RUN(test_reader_rejects_bad_lines);
    RUN(test_console_line);
    rm_rf(tmp_root);
    return dt_test_report();
}
