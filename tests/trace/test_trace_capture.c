/* Trace capture and reader: range lists and levels (good and malformed), writer/reader
 * round trip with exact fields and digests, occurrence counters and scopes, inputs
 * digested before an in-place op, step and rank selection, overwrite refused, truncated
 * and corrupted files refused with the file and offset named, and fault-injection parsing. */
#include "core/digest.h"
#include "trace/format.h"
#include "trace/inject.h"
#include "trace/reader.h"
#include "trace/trace.h"
#include "dt_test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmp(void) {
    dt_test_scratch(tmpdir, sizeof tmpdir, "trace_cap");
}

static void test_range_lists(void) {
    dt_range_list l;
    CHECK_OK(dt_range_list_parse("10-12,20", "--trace-steps", &l));
    CHECK(l.n == 2 && l.lo[0] == 10 && l.hi[0] == 12 && l.lo[1] == 20 && l.hi[1] == 20);
    CHECK(dt_range_list_has(&l, 10) && dt_range_list_has(&l, 12) && dt_range_list_has(&l, 20));
    CHECK(!dt_range_list_has(&l, 9) && !dt_range_list_has(&l, 13) && !dt_range_list_has(&l, 21));
    CHECK_OK(dt_range_list_parse("0,2-3", "--trace-ranks", &l));
    CHECK(l.n == 2 && dt_range_list_has(&l, 0) && !dt_range_list_has(&l, 1) && dt_range_list_has(&l, 3));
    CHECK_OK(dt_range_list_parse("5-5", "--trace-steps", &l));
    CHECK(l.n == 1 && dt_range_list_has(&l, 5));
    dt_range_list all = {0};
    CHECK(dt_range_list_has(&all, 12345));
    static const char *bad[] = {"", ",", "1,", ",1", "1,,2", "3-1", "1-", "-1", "a", "1-2-3",
                                "1 ,2", " 1", "1;2", "1-x", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_status st = dt_range_list_parse(bad[i], "--trace-steps", &l);
        CHECKF(st == DT_EINVAL, "'%s' accepted", bad[i]);
        CHECKF(strstr(dt_errmsg(), "--trace-steps") != NULL, "message lacks the flag: %s", dt_errmsg());
    }
    char many[512] = "0";
    for (int i = 1; i <= DT_RANGE_MAX; i++) snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", i);
    CHECK(dt_range_list_parse(many, "--trace-ranks", &l) == DT_EINVAL);
}

static void test_levels(void) {
    static const char *names[] = {"off", "metrics", "semantic", "module", "op", "kernel"};
    for (int i = 0; i < 6; i++) {
        int lv = -1;
        CHECK_OK(dt_trace_level_parse(names[i], &lv));
        CHECK(lv == i && !strcmp(dt_trace_level_name(lv), names[i]));
    }
    int lv;
    CHECK(dt_trace_level_parse("ops", &lv) == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "accepted") != NULL);
    CHECK(dt_trace_level_parse("OP", &lv) == DT_EINVAL);
}

/* Writes a small capture into dir: two steps, nested module/op events, an in-place op. */
static float xs[4][3], ws[3], ys[4][3];
static int32_t route[6] = {5, 4, 3, 2, 1, 0};

static void write_sample(const char *dir, int level, const char *steps) {
    dt_trace_config cfg = {level, dir, steps, "0", NULL};
    CHECK_OK(dt_trace_open(&cfg, 0));
    for (int i = 0; i < 12; i++) { xs[i / 3][i % 3] = (float)i; ys[i / 3][i % 3] = 0; }
    for (int i = 0; i < 3; i++) ws[i] = 1.0f + (float)i;
    for (int64_t step = 0; step < 3; step++) {
        dt_trace_set_step(step, 0);
        dt_trace_scope_push("h.0");
        dt_tensor_ref xin[1] = {{"x", xs, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}};
        dt_trace_op *mod = dt_trace_begin(DT_TRACE_MODULE, DT_PHASE_FWD, "block", NULL, xin, 1);
        dt_trace_scope_push("mlp");
        for (int rep = 0; rep < 2; rep++) {  /* the same op twice: occurrences 0 and 1 */
            dt_tensor_ref in[2] = {{"x", xs, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}, {"w", ws, DT_DT_F32, 1, {3}, 0, 0, NULL}};
            dt_trace_op *h = dt_trace_begin(DT_TRACE_OP, DT_PHASE_FWD, "scale", "det", in, 2);
            dt_trace_kernel_info(h, "algo=%d grid=%d", 7, 4);
            dt_trace_kernel_info(h, "finish grid=%d", 1); /* a second launch appends */
            for (int i = 0; i < 12; i++) ys[i / 3][i % 3] = xs[i / 3][i % 3] * ws[i % 3];
            dt_tensor_ref out[1] = {{"y", ys, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}};
            dt_trace_end(h, out, 1);
        }
        /* In place: x += y. The input digest must be of x before the update. */
        dt_tensor_ref in[2] = {{"x", xs, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}, {"y", ys, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}};
        dt_trace_op *h = dt_trace_begin(DT_TRACE_OP, DT_PHASE_FWD, "add_inplace", "det", in, 2);
        for (int i = 0; i < 12; i++) xs[i / 3][i % 3] += ys[i / 3][i % 3];
        dt_tensor_ref out[2] = {{"x", xs, DT_DT_F32, 2, {4, 3}, 0, 0, NULL},
                                {"route", route, DT_DT_I32, 1, {6}, 1, 0, NULL}};
        dt_trace_end(h, out, 2);
        dt_trace_scope_pop();
        dt_tensor_ref mout[1] = {{"x", xs, DT_DT_F32, 2, {4, 3}, 0, 0, NULL}};
        dt_trace_end(mod, mout, 1);
        dt_trace_scope_pop();
        dt_trace_event(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", NULL, NULL, 0, NULL, 0);
    }
    CHECK_OK(dt_trace_close());
}

static void test_round_trip(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/rt", tmpdir);
    write_sample(dir, DT_TRACE_KERNEL, "1-2");
    snprintf(path, sizeof path, "%s/rank_000000.trace", dir);
    dt_trace_file f;
    CHECK_OK(dt_trace_file_load(path, 0, &f));
    CHECK(f.rank == 0 && f.level == DT_TRACE_KERNEL && f.closed);
    CHECK(!strcmp(f.steps_spec, "1-2") && !strcmp(f.ranks_spec, "0"));
    CHECKF(f.nevents == 10, "%zu events", f.nevents); /* 2 steps x (2 scale + add + block + adamw) */
    if (f.nevents != 10) { dt_trace_file_free(&f); return; }
    /* Step 1, in completion order: scale#0, scale#1, add_inplace, block, adamw. */
    const dt_trace_rec *e = f.events;
    CHECK(e[0].step == 1 && e[0].micro == 0 && !strcmp(e[0].scope, "h.0.mlp") && !strcmp(e[0].op, "scale"));
    CHECK(e[0].occurrence == 0 && e[1].occurrence == 1 && e[2].occurrence == 0);
    CHECK(!strcmp(e[0].variant, "det") && !strcmp(e[0].kernel, "algo=7 grid=4; finish grid=1"));
    CHECK(e[0].level == DT_TRACE_OP && e[0].phase == DT_PHASE_FWD && e[0].nin == 2 && e[0].nout == 1);
    CHECK(!strcmp(e[3].op, "block") && !strcmp(e[3].scope, "h.0") && e[3].level == DT_TRACE_MODULE);
    CHECK(!strcmp(e[4].op, "adamw") && !strcmp(e[4].scope, "") && e[4].phase == DT_PHASE_OPT);
    CHECK(e[5].step == 2 && e[5].occurrence == 0); /* counters reset per step */
    const dt_trace_rec_tensor *w = dt_trace_in(&f, &e[0], 1);
    CHECK(!strcmp(w->name, "w") && w->ndim == 1 && w->shape[0] == 3 && w->numel == 3 && w->dtype == DT_DT_F32);
    CHECK(w->digest == dt_xxh64(ws, sizeof ws, 0));
    /* add_inplace: input x was digested before the update, output after. */
    const dt_trace_rec_tensor *xin = dt_trace_in(&f, &e[7], 0), *xout = dt_trace_out(&f, &e[7], 0);
    CHECK(xin->digest != xout->digest);
    CHECK(xout->digest == dt_xxh64(xs, sizeof xs, 0));
    CHECK(dt_trace_in(&f, &e[8], 0)->digest == dt_trace_in(&f, &e[5], 0)->digest); /* block input = first op input */
    const dt_trace_rec_tensor *r = dt_trace_out(&f, &e[2], 1);
    CHECK(r->rows == 6 && r->rows_per_chunk == 1 && r->nchunks == 6);
    for (uint32_t i = 0; i < 6 && r->nchunks == 6; i++)
        CHECK(dt_trace_chunk_digest(r, i) == dt_xxh64(&route[i], 4, 0));
    dt_trace_file_free(&f);
}

static void test_level_filter_and_off(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/mod", tmpdir);
    write_sample(dir, DT_TRACE_MODULE, NULL);
    snprintf(path, sizeof path, "%s/rank_000000.trace", dir);
    dt_trace_file f;
    CHECK_OK(dt_trace_file_load(path, 0, &f));
    CHECKF(f.nevents == 6, "%zu events", f.nevents); /* 3 steps x (block + adamw) */
    for (size_t i = 0; i < f.nevents; i++) CHECK(f.events[i].level <= DT_TRACE_MODULE);
    CHECK(f.nevents == 0 || f.events[0].kernel[0] == 0); /* kernel info dropped below kernel level */
    dt_trace_file_free(&f);
    /* Level off and unselected ranks create nothing, and hooks stay off. */
    dt_trace_config off = {DT_TRACE_OFF, dir, NULL, NULL, NULL};
    CHECK_OK(dt_trace_open(&off, 1));
    dt_trace_set_step(0, 0);
    CHECK(!dt_trace_on(DT_TRACE_METRICS));
    CHECK(dt_trace_begin(DT_TRACE_METRICS, DT_PHASE_FWD, "x", NULL, NULL, 0) == NULL);
    CHECK_OK(dt_trace_close());
    dt_trace_config other = {DT_TRACE_OP, dir, NULL, "2-3", NULL};
    CHECK_OK(dt_trace_open(&other, 1));
    dt_trace_set_step(0, 0);
    CHECK(!dt_trace_on(DT_TRACE_METRICS) && dt_trace_path() == NULL);
    CHECK_OK(dt_trace_close());
    snprintf(path, sizeof path, "%s/rank_000001.trace", dir);
    CHECK(access(path, F_OK) != 0);
    dt_trace_config good = {DT_TRACE_OP, dir, "1-3,7", "0,2-3", NULL};
    CHECK_OK(dt_trace_config_check(&good));
    dt_trace_config badr = {DT_TRACE_OP, dir, NULL, "0,,1", NULL};
    CHECK(dt_trace_config_check(&badr) == DT_EINVAL && strstr(dt_errmsg(), "--trace-ranks"));
    dt_trace_config offcfg = {DT_TRACE_OFF, NULL, NULL, NULL, NULL};
    CHECK_OK(dt_trace_config_check(&offcfg));
    dt_trace_config bad = {DT_TRACE_OP, dir, "1-", NULL, NULL};
    CHECK(dt_trace_config_check(&bad) == DT_EINVAL && strstr(dt_errmsg(), "--trace-steps"));
    CHECK(dt_trace_open(&bad, 0) == DT_EINVAL);
    dt_trace_config nodir = {DT_TRACE_OP, NULL, NULL, NULL, NULL};
    CHECK(dt_trace_open(&nodir, 0) == DT_EINVAL && strstr(dt_errmsg(), "--trace-dir"));
    CHECK(dt_trace_config_check(&nodir) == DT_EINVAL);
}

static void test_overwrite_refused(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/rt", tmpdir);  /* written by test_round_trip */
    snprintf(path, sizeof path, "%s/rank_000000.trace", dir);
    struct stat before, after;
    CHECK(stat(path, &before) == 0);
    dt_trace_config cfg = {DT_TRACE_OP, dir, NULL, NULL, NULL};
    dt_status st = dt_trace_open(&cfg, 0);
    CHECK(st == DT_EIO);
    CHECKF(strstr(dt_errmsg(), "rank_000000.trace") && strstr(dt_errmsg(), "never overwritten"),
           "%s", dt_errmsg());
    CHECK(stat(path, &after) == 0 && after.st_size == before.st_size);
    CHECK(dt_trace_path() == NULL);
}

static long file_size(const char *p) { struct stat s; return stat(p, &s) == 0 ? (long)s.st_size : -1; }

static void copy_prefix(const char *src, const char *dst, long n, long flip_at) {
    FILE *i = fopen(src, "rb"), *o = fopen(dst, "wb");
    if (!i || !o) { perror("copy_prefix"); exit(1); }
    for (long k = 0; k < n; k++) {
        int c = fgetc(i);
        if (k == flip_at) c ^= 0x01;
        fputc(c, o);
    }
    fclose(i);
    fclose(o);
}

static void test_truncated_and_corrupt(void) {
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/rt/rank_000000.trace", tmpdir);
    snprintf(dst, sizeof dst, "%s/damaged.trace", tmpdir);
    long n = file_size(src);
    CHECK(n > 100);
    dt_trace_file f;
    /* Every truncation point fails closed (a cut exactly between records loses the END).
     * One copy, cut shorter and shorter in place: cheap on a busy disk. */
    copy_prefix(src, dst, n, -1);
    int failures = 0;
    for (long cut = n - 1; cut >= 0; cut--) {
        CHECK(truncate(dst, cut) == 0);
        dt_status st = dt_trace_file_load(dst, 0, &f);
        if (st == DT_ECORRUPT && strstr(dt_errmsg(), "damaged.trace") && strstr(dt_errmsg(), "offset")) failures++;
        else CHECKF(0, "cut at %ld: %s %s", cut, dt_status_name(st), dt_errmsg());
    }
    CHECK(failures == n);
    /* Every single flipped bit-0 of every byte is detected (flipped in place, then restored). */
    copy_prefix(src, dst, n, -1);
    int fd = open(dst, O_RDWR);
    CHECK(fd >= 0);
    failures = 0;
    for (long at = 0; at < n && fd >= 0; at++) {
        unsigned char c, x;
        CHECK(pread(fd, &c, 1, at) == 1);
        x = (unsigned char)(c ^ 0x01);
        CHECK(pwrite(fd, &x, 1, at) == 1);
        if (dt_trace_file_load(dst, 0, &f) == DT_ECORRUPT) failures++;
        else CHECKF(0, "flip at %ld accepted", at);
        CHECK(pwrite(fd, &c, 1, at) == 1);
    }
    if (fd >= 0) close(fd);
    CHECK(failures == n);
    /* Without END only: rejected by default, accepted with allow_unclosed (complete records). */
    copy_prefix(src, dst, n - 16, -1); /* END record is 8 + 8 + 8 bytes; cut inside it: torn */
    CHECK(dt_trace_file_load(dst, 0, &f) == DT_ECORRUPT && strstr(dt_errmsg(), "--allow-unclosed"));
    CHECK_OK(dt_trace_file_load(dst, 1, &f));
    CHECK(f.nevents == 10 && !f.closed && f.torn == 8);
    dt_trace_file_free(&f);
    /* every cut after the header record, inside an event record or between records, reads
     * the complete events before it; a cut inside the preamble or the header fails */
    copy_prefix(src, dst, n, -1);
    size_t prev_events = 11, fine = 0;
    for (long cut = n - 1; cut >= 0; cut--) {
        CHECK(truncate(dst, cut) == 0);
        dt_status st = dt_trace_file_load(dst, 1, &f);
        if (st == DT_OK) {
            CHECKF(f.nevents <= prev_events && f.nevents + 1 >= prev_events, "cut at %ld: %zu events", cut, f.nevents);
            prev_events = f.nevents;
            fine++;
            dt_trace_file_free(&f);
        } else {
            CHECKF(prev_events == 0 && st == DT_ECORRUPT, "cut at %ld refused with events left: %s", cut, dt_errmsg());
            prev_events = 0;
        }
    }
    CHECK(fine > 0 && prev_events == 0);
    copy_prefix(src, dst, n - 24, -1);
    CHECK(dt_trace_file_load(dst, 0, &f) == DT_ECORRUPT && strstr(dt_errmsg(), "no END"));
    CHECK_OK(dt_trace_file_load(dst, 1, &f));
    CHECK(f.nevents == 10 && !f.closed);
    dt_trace_file_free(&f);
    CHECK(dt_trace_file_load("/nonexistent/x.trace", 0, &f) == DT_EIO);
}

/* Damage that keeps the checksum valid (a buggy writer, a crafted file): mutate bytes
 * inside records and re-seal them. The reader must answer OK or ECORRUPT, never crash or
 * read out of bounds (run under a sanitizer to see the latter). */
static void test_resealed_mutations(void) {
    char src[600], dst[600];
    snprintf(src, sizeof src, "%s/rt/rank_000000.trace", tmpdir);
    snprintf(dst, sizeof dst, "%s/resealed.trace", tmpdir);
    FILE *fp = fopen(src, "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    unsigned char orig[1 << 16], buf[1 << 16];
    size_t n = fread(orig, 1, sizeof orig, fp);
    fclose(fp);
    CHECK(n > DT_TRACE_PREAMBLE && n < sizeof orig);
    size_t starts[256];
    int nrec = 0;
    for (size_t off = DT_TRACE_PREAMBLE; off + 8 <= n && nrec < 256;
         off += DT_TRACE_REC_HEAD + dt_get_u32(orig + off) + DT_TRACE_REC_TAIL)
        starts[nrec++] = off;
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    int ok = 0, corrupt = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, orig, n);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t r = starts[(rng >> 33) % (uint64_t)nrec];
        uint32_t len = dt_get_u32(buf + r);
        int flips = 1 + (int)((rng >> 20) % 3);
        for (int k = 0; k < flips && len > 0; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            buf[r + DT_TRACE_REC_HEAD + (rng >> 33) % len] ^= (unsigned char)(1u << ((rng >> 13) % 8));
        }
        dt_put_u64(buf + r + DT_TRACE_REC_HEAD + len, dt_xxh64(buf + r, DT_TRACE_REC_HEAD + len, 0));
        FILE *o = fopen(dst, "wb");
        if (!o) { CHECK(0); return; }
        fwrite(buf, 1, n, o);
        fclose(o);
        dt_trace_file f;
        dt_status st = dt_trace_file_load(dst, 0, &f);
        if (st == DT_OK) { ok++; dt_trace_file_free(&f); }
        else if (st == DT_ECORRUPT) corrupt++;
        else CHECKF(0, "unexpected %s: %s", dt_status_name(st), dt_errmsg());
    }
    CHECK(ok + corrupt == 3000 && corrupt > 0); /* digest-only flips stay loadable */
}

static void test_hook_misuse(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/misuse", tmpdir);
    dt_trace_config cfg = {DT_TRACE_OP, dir, NULL, NULL, NULL};
    CHECK_OK(dt_trace_open(&cfg, 0));
    CHECK(dt_trace_open(&cfg, 1) == DT_ESTATE);
    dt_trace_set_step(0, 0);
    float v[5] = {0};
    dt_tensor_ref ok = {"v", v, DT_DT_F32, 1, {5}, 0, 0, NULL};
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "good", NULL, &ok, 1, NULL, 0);
    dt_tensor_ref t = {"v", v, DT_DT_F32, 1, {5}, 1, 2, NULL}; /* 2 rows do not divide 5 */
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "bad", NULL, &t, 1, NULL, 0);
    CHECK(!dt_trace_on(DT_TRACE_METRICS)); /* first error stops capture */
    CHECK(dt_trace_close() == DT_EINVAL && strstr(dt_errmsg(), "rows"));
    /* The records before the error survive, in a file marked unfinished (no END). */
    char p[600];
    snprintf(p, sizeof p, "%s/rank_000000.trace", dir);
    dt_trace_file f;
    CHECK(dt_trace_file_load(p, 0, &f) == DT_ECORRUPT);
    CHECK_OK(dt_trace_file_load(p, 1, &f));
    CHECK(f.nevents == 1 && !strcmp(f.events[0].op, "good"));
    dt_trace_file_free(&f);
}

/* Kernel info of many launches on one event: appended in order, cut at the buffer without
 * overrunning it, and the file stays valid. */
static void test_kernel_info_append(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/kinfo", tmpdir);
    dt_trace_config cfg = {DT_TRACE_KERNEL, dir, NULL, NULL, NULL};
    CHECK_OK(dt_trace_open(&cfg, 0));
    dt_trace_set_step(1, 0);
    dt_trace_op *h = dt_trace_begin(DT_TRACE_OP, DT_PHASE_FWD, "many_launches", "det", NULL, 0);
    for (int i = 0; i < 300; i++) dt_trace_kernel_info(h, "k%03d<<<%d>>>", i, i);
    dt_trace_end(h, NULL, 0);
    CHECK_OK(dt_trace_close());
    snprintf(path, sizeof path, "%s/rank_000000.trace", dir);
    dt_trace_file f;
    CHECK_OK(dt_trace_file_load(path, 0, &f));
    CHECK(f.nevents == 1);
    if (f.nevents == 1) {
        const char *k = f.events[0].kernel;
        CHECK(!strncmp(k, "k000<<<0>>>; k001<<<1>>>; k002<<<2>>>", 37));
        CHECKF(strlen(k) <= 1023 && strlen(k) > 900, "kernel info of %zu bytes", strlen(k));
    }
    dt_trace_file_free(&f);
}

static void test_inject(void) {
    dt_inject in;
    CHECK_OK(dt_inject_parse("layernorm_bwd@3", &in));
    CHECK(in.enabled && !strcmp(in.op, "layernorm_bwd") && in.step == 3);
    static const char *bad[] = {"", "@3", "op@", "op", "op@-1", "op@3x", "o p@3", "op@ 3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(dt_inject_parse(bad[i], &in) == DT_EINVAL, "'%s' accepted", bad[i]);
    CHECK_OK(dt_inject_parse("gemm@0", &in));
    CHECK(!dt_inject_pending());
    dt_inject_set(&in);
    CHECK(dt_inject_pending()); /* installed, not fired: the GPU model launches eagerly */
    CHECK(!dt_inject_should("gemm", 1) && !dt_inject_should("gemv", 0));
    CHECK(dt_inject_should("gemm", 0) == 1 && dt_inject_fired());
    CHECK(!dt_inject_pending());
    CHECK(dt_inject_should("gemm", 0) == 0); /* exactly once */
    dt_inject_set(NULL);
    CHECK(!dt_inject_should("gemm", 0) && !dt_inject_fired() && !dt_inject_pending());
    float x[4] = {1.0f, -3.0f, 2.0f, 3.0f}, y[4];
    memcpy(y, x, sizeof x);
    CHECK(dt_inject_flip_lsb(x, 4) == 1);   /* first of largest magnitude */
    uint32_t a, b;
    memcpy(&a, &x[1], 4);
    memcpy(&b, &y[1], 4);
    CHECK((a ^ b) == 1u && x[1] != y[1] && fabsf(x[1] - y[1]) < 1e-6f);
    CHECK(!memcmp(&x[0], &y[0], 4) && !memcmp(&x[2], &y[2], 8));
    CHECK(dt_inject_flip_lsb(x, 0) == (size_t)-1);
}

int main(void) {
    make_tmp();
    RUN(test_range_lists);
    RUN(test_levels);
    RUN(test_round_trip);
    RUN(test_level_filter_and_off);
    RUN(test_overwrite_refused);
    RUN(test_truncated_and_corrupt);
    RUN(test_resealed_mutations);
    RUN(test_hook_misuse);
    RUN(test_kernel_info_append);
    RUN(test_inject);
    dt_test_scratch_remove(tmpdir);
    return dt_test_report();
}
