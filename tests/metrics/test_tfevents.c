/* TensorBoard event files: CRC-32C against its published check values; the encoding of a
 * step against hand-assembled protobuf bytes; write + read back to the same float32 and
 * exact float64 values; a flipped byte or a truncated file is an error naming the record's
 * offset. */
#include "core/json.h"
#include "dt_test.h"
#include "metrics/metrics.h"
#include "metrics/tfevents.h"
#include "synth.h"

#include <sys/stat.h>
#include <unistd.h>

static char tmp_root[256];

static void test_crc32c_check_values(void) {
    /* "123456789" is the standard check input; the 32-byte vectors are from RFC 3720
     * (iSCSI), appendix B.4. */
    CHECK(dt_crc32c(0, "123456789", 9) == 0xE3069283u);
    uint8_t z[32] = {0}, ff[32], inc[32];
    for (int i = 0; i < 32; i++) { ff[i] = 0xFF; inc[i] = (uint8_t)i; }
    CHECK(dt_crc32c(0, z, 32) == 0x8A9136AAu);
    CHECK(dt_crc32c(0, ff, 32) == 0x62A8AB43u);
    CHECK(dt_crc32c(0, inc, 32) == 0x46DD794Eu);
    CHECK(dt_crc32c(dt_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u); /* chaining */
    CHECK(dt_crc32c(0, "", 0) == 0);
    CHECK(dt_crc32c_mask(0) == 0xa282ead8u);
    CHECK(dt_crc32c_mask(0x80000000u) == 0xa282ead8u + 0x00010000u);
}

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (fwrite(b, 1, n, f) != n) fprintf(stderr, "short write %s\n", path);
    fclose(f);
}

/* The encoder against bytes assembled by hand from the field numbers in tfevents.h. */
static void test_encoding_golden(void) {
    dt_tfevents *w;
    CHECK_OK(dt_tfevents_open(&w, tmp_root, 1.5));
    if (!w) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", dt_tfevents_path(w));
    CHECK(strstr(path, "/events.out.tfevents.0000000001.") != NULL);
    dt_tf_scalar x = {"x", 1.0};
    CHECK_OK(dt_tfevents_write_step(w, 7, 2.0, &x, 1));
    CHECK_OK(dt_tfevents_close(w));
    static const uint8_t ver[] = {0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1a, 13, 'b', 'r', 'a',
                                  'i', 'n', '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
    static const uint8_t step[] = {
        0x09, 0, 0, 0, 0, 0, 0, 0, 0x40,           /* wall_time = 2.0 */
        0x10, 0x07,                                /* step = 7 */
        0x2a, 50,                                  /* summary */
        0x0a, 8, 0x0a, 1, 'x', 0x15, 0, 0, 0x80, 0x3f,         /* value: tag, simple_value 1.0f */
        0x0a, 38, 0x0a, 5, 'x', '/', 'f', '6', '4',            /* value: tag "x/f64" */
        0x42, 14, 0x08, 2, 0x12, 0, 0x32, 8, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, /* tensor */
        0x4a, 13, 0x0a, 9, 0x0a, 7, 's', 'c', 'a', 'l', 'a', 'r', 's', 0x20, 1}; /* metadata */
    size_t n;
    uint8_t *b = dt_test_read_file(path, &n);
    CHECK(b != NULL);
    if (!b) return;
    size_t r1 = 12 + sizeof ver + 4;
    CHECK(n == r1 + 12 + sizeof step + 4);
    if (n == r1 + 12 + sizeof step + 4) {
        CHECK(b[0] == sizeof ver && !memcmp(b + 1, "\0\0\0\0\0\0\0", 7));
        CHECK(!memcmp(b + 12, ver, sizeof ver));
        CHECK(b[r1] == sizeof step);
        CHECK(!memcmp(b + r1 + 12, step, sizeof step));
        uint32_t c = dt_crc32c_mask(dt_crc32c(0, step, sizeof step));
        const uint8_t *t = b + r1 + 12 + sizeof step;
        CHECK(t[0] == (c & 0xFF) && t[1] == (c >> 8 & 0xFF) && t[2] == (c >> 16 & 0xFF) && t[3] == c >> 24);
    }
    free(b);
    unlink(path);
}

/* Scalars-plugin metadata goes with the first value of each tag, also for a tag that first
 * appears later (eval_loss only exists on eval steps). */
static void test_metadata_per_tag(void) {
    dt_tfevents *w;
    CHECK_OK(dt_tfevents_open(&w, tmp_root, 3.0));
    if (!w) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", dt_tfevents_path(w));
    dt_tf_scalar v[2] = {{"x", 1.0}, {"late", 2.0}};
    CHECK_OK(dt_tfevents_write_step(w, 1, 3.0, v, 1));
    CHECK_OK(dt_tfevents_write_step(w, 2, 3.0, v, 2));
    CHECK_OK(dt_tfevents_write_step(w, 3, 3.0, v, 2));
    CHECK_OK(dt_tfevents_close(w));
    size_t n, count = 0;
    uint8_t *b = dt_test_read_file(path, &n);
    CHECK(b != NULL);
    for (size_t i = 0; b && i + 7 <= n; i++)
        if (!memcmp(b + i, "scalars", 7)) count++;
    CHECKF(count == 2, "metadata written %zu times, want 2 (x at step 1, late at step 2)", count);
    free(b);
    unlink(path);
}

static int same_f32(double got, double want) {
    float w = (float)want;
    if (isnan(w)) return isnan(got);
    return dt_f32_bits((float)got) == dt_f32_bits(w) && (double)(float)got == got;
}

/* Writes the synthetic series through dt_metrics and returns the event file path. */
static void write_run(const char *dir, char *path, size_t n) {
    dt_metrics *m;
    path[0] = 0;
    CHECK_OK(dt_metrics_open(&m, dir, NULL));
    if (!m) return;
    snprintf(path, n, "%s", dt_metrics_tfevents_path(m));
    for (int64_t k = 1; k <= 10; k++) {
        dt_step_metrics s = synth_step(k, 1, 0);
        CHECK_OK(dt_metrics_log(m, &s));
    }
    CHECK_OK(dt_metrics_close(m));
}

static void test_round_trip(void) {
    char dir[512], path[4096];
    snprintf(dir, sizeof dir, "%s/rt", tmp_root);
    write_run(dir, path, sizeof path);
    dt_tf_file f;
    CHECK_OK(dt_tfevents_read(path, &f));
    CHECK(!strcmp(f.file_version, "brain.Event:2"));
    CHECK(f.nevents == 11);
    size_t i = 0;
    for (int64_t k = 1; k <= 10; k++) {
        dt_step_metrics s = synth_step(k, 1, 0);
        struct { const char *tag; double v; } want[16];
        int nw = 0;
        want[nw].tag = "loss"; want[nw++].v = s.loss;
        if (s.has_eval) { want[nw].tag = "eval_loss"; want[nw++].v = s.eval_loss; }
        want[nw].tag = "grad_norm"; want[nw++].v = s.grad_norm;
        want[nw].tag = "param_norm"; want[nw++].v = s.param_norm;
        want[nw].tag = "num_zeros"; want[nw++].v = (double)s.num_zeros;
        want[nw].tag = "lr"; want[nw++].v = s.lr;
        want[nw].tag = "consumed_samples"; want[nw++].v = (double)s.consumed_samples;
        want[nw].tag = "consumed_tokens"; want[nw++].v = (double)s.consumed_tokens;
        want[nw].tag = "moe_aux"; want[nw++].v = s.aux[0].value;
        want[nw].tag = "step_ms"; want[nw++].v = s.step_ms;
        want[nw].tag = "tok_per_s"; want[nw++].v = s.tok_per_s;
        for (int q = 0; q < nw; q++) {
            if (i + 2 > f.n) { CHECKF(0, "records end early at step %lld", (long long)k); break; }
            const dt_tf_record *a = &f.rec[i++], *b = &f.rec[i++];
            char f64tag[160];
            snprintf(f64tag, sizeof f64tag, "%s/f64", want[q].tag);
            CHECKF(a->step == k && b->step == k, "step %lld", (long long)k);
            CHECKF(!strcmp(a->tag, want[q].tag) && a->kind == DT_TF_SIMPLE, "%s", a->tag);
            CHECKF(!strcmp(b->tag, f64tag) && b->kind == DT_TF_F64, "%s", b->tag);
            CHECKF(same_f32(a->value, want[q].v), "%s step %lld float32", a->tag, (long long)k);
            CHECKF(dt_f64_bits(b->value) == dt_f64_bits(want[q].v), "%s step %lld f64 bits",
                   b->tag, (long long)k);
        }
    }
    CHECK(i == f.n);
    dt_tf_file_free(&f);
}

/* A resumed run's event file starts with one SessionLog START marker (TensorBoard's cue to
 * drop the older file's steps from there on); a fresh run's has none. */
static void test_resume_marker(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/resume", tmp_root);
    char p1[4096], p2[4096];
    dt_metrics *m;
    dt_metrics_opts fresh = {0, 1}, resume = {1, 1};
    CHECK_OK(dt_metrics_open(&m, dir, &fresh));
    if (!m) return;
    snprintf(p1, sizeof p1, "%s", dt_metrics_tfevents_path(m));
    for (int64_t k = 1; k <= 5; k++) { dt_step_metrics s = synth_step(k, 0, 0); CHECK_OK(dt_metrics_log(m, &s)); }
    CHECK_OK(dt_metrics_close(m));
    CHECK_OK(dt_metrics_open(&m, dir, &resume));
    if (!m) return;
    snprintf(p2, sizeof p2, "%s", dt_metrics_tfevents_path(m));
    for (int64_t k = 4; k <= 6; k++) { dt_step_metrics s = synth_step(k, 0, 0); CHECK_OK(dt_metrics_log(m, &s)); }
    CHECK_OK(dt_metrics_close(m));
    dt_tf_file f;
    CHECK_OK(dt_tfevents_read(p1, &f));
    CHECK(f.nrestarts == 0 && f.nevents == 6);
    dt_tf_file_free(&f);
    CHECK_OK(dt_tfevents_read(p2, &f));
    CHECK(f.nrestarts == 1 && f.nevents == 5); /* version, marker, 3 steps */
    CHECK(f.n > 0 && f.rec[0].step == 4);
    dt_tf_file_free(&f);
}

static void test_corruption_detected(void) {
    char dir[512], path[4096], bad[4200];
    snprintf(dir, sizeof dir, "%s/corrupt", tmp_root);
    write_run(dir, path, sizeof path);
    snprintf(bad, sizeof bad, "%s/events.out.tfevents.bad", dir);
    size_t n;
    uint8_t *b = dt_test_read_file(path, &n);
    CHECK(b != NULL);
    if (!b) return;
    size_t r2 = 12 + b[0] + 4; /* offset of the second record (first step) */
    dt_tf_file f;
    char want[64];
    snprintf(want, sizeof want, "at byte %zu", r2);

    b[r2 + 12 + 20] ^= 0x01; /* payload byte */
    spit(bad, b, n);
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "payload CRC") && strstr(dt_errmsg(), want), "%s", dt_errmsg());
    b[r2 + 12 + 20] ^= 0x01;

    b[r2 + 1] ^= 0x40; /* length byte */
    spit(bad, b, n);
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "length CRC") && strstr(dt_errmsg(), want), "%s", dt_errmsg());
    b[r2 + 1] ^= 0x40;

    b[n - 1] ^= 0x80; /* stored CRC of the last record */
    spit(bad, b, n);
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "payload CRC") != NULL, "%s", dt_errmsg());
    b[n - 1] ^= 0x80;

    spit(bad, b, n);
    CHECK_OK(dt_tfevents_read(bad, &f)); /* restored: reads again */
    dt_tf_file_free(&f);

    spit(bad, b, n - 3); /* cut inside the last record's CRC */
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "truncated record at byte") != NULL, "%s", dt_errmsg());

    spit(bad, b, r2 + 5); /* cut inside the second record's header */
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "truncated record header") && strstr(dt_errmsg(), want), "%s",
           dt_errmsg());

    spit(bad, b, r2 + 12 + 10); /* cut inside the second record's payload */
    CHECK(dt_tfevents_read(bad, &f) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "truncated record") && strstr(dt_errmsg(), want), "%s", dt_errmsg());
    free(b);
}

/* Every prefix of a file reads as an error unless it ends on a record boundary, and every
 * single-bit flip is caught: never a crash, never a silent partial read. */
static void test_every_cut_and_flip(void) {
    char dir[512], path[4096], bad[4200];
    snprintf(dir, sizeof dir, "%s/cuts", tmp_root);
    dt_metrics *m;
    CHECK_OK(dt_metrics_open(&m, dir, NULL));
    if (!m) return;
    snprintf(path, sizeof path, "%s", dt_metrics_tfevents_path(m));
    for (int64_t k = 1; k <= 2; k++) { dt_step_metrics s = synth_step(k, 1, 0); CHECK_OK(dt_metrics_log(m, &s)); }
    CHECK_OK(dt_metrics_close(m));
    snprintf(bad, sizeof bad, "%s/events.out.tfevents.cut", dir);
    size_t n;
    uint8_t *b = dt_test_read_file(path, &n);
    if (!b) { CHECK(0); return; }
    size_t r2 = 12 + b[0] + 4, r3 = r2 + 12 + (size_t)b[r2] + (size_t)b[r2 + 1] * 256 + 4;
    int cut_ok = 1, flip_ok = 1;
    for (size_t len = 0; len < n; len++) {
        spit(bad, b, len);
        dt_tf_file f;
        dt_status st = dt_tfevents_read(bad, &f);
        int boundary = len == 0 || len == r2 || len == r3;
        if (boundary ? st != DT_OK : st != DT_ECORRUPT) { cut_ok = 0; fprintf(stderr, "cut at %zu: %d\n", len, st); }
        if (!st) dt_tf_file_free(&f);
    }
    for (size_t i = 0; i < n; i += 7) {
        b[i] ^= (uint8_t)(1u << (i % 8));
        spit(bad, b, n);
        dt_tf_file f;
        if (dt_tfevents_read(bad, &f) != DT_ECORRUPT) { flip_ok = 0; fprintf(stderr, "flip at %zu read\n", i); }
        b[i] ^= (uint8_t)(1u << (i % 8));
    }
    CHECK(cut_ok);
    CHECK(flip_ok);
    free(b);
}

static void test_open_fails_cleanly(void) {
    dt_tfevents *w = (dt_tfevents *)1;
    CHECK(dt_tfevents_open(&w, "/nonexistent/dir/for/detrain", 0) == DT_EIO);
    CHECK(w == NULL);
    CHECK(strstr(dt_errmsg(), "/nonexistent/dir/for/detrain") != NULL);
}

int main(void) {
    dt_test_scratch(tmp_root, sizeof tmp_root, "test_tfevents");
    RUN(test_crc32c_check_values);
    RUN(test_encoding_golden);
    RUN(test_metadata_per_tag);
    RUN(test_round_trip);
    RUN(test_resume_marker);
    RUN(test_corruption_detected);
    RUN(test_every_cut_and_flip);
    RUN(test_open_fails_cleanly);
    dt_test_scratch_remove(tmp_root);
    return dt_test_report();
}
