/* safetensors: exact bytes of a small file, round trip of every kind of tensor, and the
 * strict reader rejecting each malformed case with DT_ECORRUPT and a message naming the
 * file and the tensor. `test_safetensors --emit PATH` writes the sample file that
 * test_st_pyspec.sh checks with an independent Python reader. */
#include "ckpt/safetensors.h"
#include "dt_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[256];

typedef struct fill_ctx { int n; } fill_ctx;

/* Writes floats k * 0.5 (k = 0..n-1): stands in for a transposing exporter. */
static dt_status fill_halves(const void *ctx, void *dst, size_t nbytes) {
    const fill_ctx *c = ctx;
    if (nbytes != (size_t)c->n * 4) return dt_fail(DT_EINVAL, "fill size");
    float *o = dst;
    for (int k = 0; k < c->n; k++) o[k] = (float)k * 0.5f;
    return DT_OK;
}

static float w[6] = {1, -2, 3.5f, 0, -0.0f, 1e-30f};
static uint16_t bf[5] = {0x3f80, 0x4000, 0xbf80, 0x7f80, 0x0001};
static int64_t scalar = -1234567890123LL;
static fill_ctx fc = {7};

static int sample(dt_st_tensor t[5]) {
    memset(t, 0, 5 * sizeof *t);
    t[0] = (dt_st_tensor){.name = "w", .dtype = DT_F32, .ndim = 2, .shape = {2, 3}, .data = w};
    t[1] = (dt_st_tensor){.name = "b.bf16", .dtype = DT_BF16, .ndim = 1, .shape = {5}, .data = bf};
    t[2] = (dt_st_tensor){.name = "step", .dtype = DT_I64, .ndim = 0, .data = &scalar};
    t[3] = (dt_st_tensor){.name = "empty", .dtype = DT_U8, .ndim = 2, .shape = {0, 3}, .data = ""};
    t[4] = (dt_st_tensor){.name = "filled \"q\"\u00e9", .dtype = DT_F32, .ndim = 1, .shape = {7},
                          .fill = fill_halves, .fill_ctx = &fc};
    return 5;
}

static const dt_st_meta META[] = {{"format", "pt"}, {"note", "detrain test"}};

static void test_exact_bytes(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/one.safetensors", dir);
    float a[2] = {1.0f, -2.0f};
    dt_st_tensor t = {.name = "a", .dtype = DT_F32, .ndim = 1, .shape = {2}, .data = a};
    CHECK_OK(dt_st_write(path, &t, 1, META, 1, NULL));
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                      "\"data_offsets\":[0,8]}}";
    size_t hl = strlen(hdr), padded = (hl + 8 + 7) / 8 * 8 - 8;
    uint8_t want[256] = {0};
    want[0] = (uint8_t)padded;
    memcpy(want + 8, hdr, hl);
    memset(want + 8 + hl, ' ', padded - hl);
    memcpy(want + 8 + padded, a, 8);
    size_t n;
    uint8_t *got = dt_test_read_file(path, &n);
    CHECK(got && n == 8 + padded + 8 && memcmp(got, want, n) == 0);
    free(got);
}

static void test_round_trip(void) {
    char path[300], path2[300];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    snprintf(path2, sizeof path2, "%s/rt2.safetensors", dir);
    dt_st_tensor t[5];
    int n = sample(t);
    uint8_t dig[5][DT_SHA256_LEN];
    CHECK_OK(dt_st_write(path, t, n, META, 2, dig));
    dt_st_file f;
    CHECK_OK(dt_st_open(path, &f));
    if (f.n != n) { CHECK(f.n == n); dt_st_close(&f); return; }
    CHECK(f.data_start % 8 == 0);
    CHECK(strcmp(dt_st_meta_get(&f, "format"), "pt") == 0);
    CHECK(strcmp(dt_st_meta_get(&f, "note"), "detrain test") == 0);
    CHECK(dt_st_meta_get(&f, "absent") == NULL);
    /* Re-write from what was read: the two files must be byte-identical. */
    dt_st_tensor back[5];
    void *bufs[5];
    for (int i = 0; i < n; i++) {
        const dt_st_entry *e = &f.t[i];
        CHECK(strcmp(e->name, t[i].name) == 0 && e->dtype == t[i].dtype && e->ndim == t[i].ndim);
        for (int d = 0; d < e->ndim; d++) CHECK(e->shape[d] == t[i].shape[d]);
        size_t nb = (size_t)(e->end - e->begin);
        bufs[i] = malloc(nb + 1);
        CHECK_OK(dt_st_read(&f, e, bufs[i], nb));
        if (t[i].data) CHECK(memcmp(bufs[i], t[i].data, nb) == 0);
        uint8_t d2[DT_SHA256_LEN];
        CHECK_OK(dt_st_digest(&f, e, d2));
        CHECK(memcmp(d2, dig[i], DT_SHA256_LEN) == 0);
        back[i] = (dt_st_tensor){.name = e->name, .dtype = e->dtype, .ndim = e->ndim, .data = bufs[i]};
        memcpy(back[i].shape, e->shape, sizeof e->shape);
    }
    float halves[7];
    CHECK_OK(dt_st_read_expect(&f, "filled \"q\"\u00e9", DT_F32, 1, (int64_t[]){7}, halves));
    CHECK(halves[6] == 3.0f);
    CHECK(dt_st_read_expect(&f, "w", DT_F32, 2, (int64_t[]){3, 2}, halves) == DT_EMISMATCH);
    CHECK(strstr(dt_errmsg(), "\"w\"") && strstr(dt_errmsg(), "F32[2, 3]") && strstr(dt_errmsg(), "F32[3, 2]"));
    CHECK(dt_st_read_expect(&f, "w", DT_F16, 2, (int64_t[]){2, 3}, halves) == DT_EMISMATCH);
    CHECK(dt_st_read_expect(&f, "nope", DT_F32, 1, (int64_t[]){1}, halves) == DT_EMISMATCH);
    CHECK(strstr(dt_errmsg(), "nope") && strstr(dt_errmsg(), "missing"));
    CHECK(dt_st_read(&f, &f.t[0], halves, 4) == DT_EINVAL);
    CHECK_OK(dt_st_write(path2, back, n, META, 2, NULL));
    for (int i = 0; i < n; i++) free(bufs[i]);
    dt_st_close(&f);
    size_t n1, n2;
    uint8_t *b1 = dt_test_read_file(path, &n1), *b2 = dt_test_read_file(path2, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    /* Also through the in-memory parser. */
    CHECK_OK(dt_st_parse(b1, n1, "mem", &f));
    CHECK(f.n == n);
    dt_st_close(&f);
    free(b1);
    free(b2);
    /* No tensors at all is a valid file. */
    CHECK_OK(dt_st_write(path2, NULL, 0, NULL, 0, NULL));
    CHECK_OK(dt_st_open(path2, &f));
    CHECK(f.n == 0 && f.data_start % 8 == 0);
    dt_st_close(&f);
}

static void test_writer_rejects(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    float a[2] = {0};
    dt_st_tensor t[2] = {{.name = "a", .dtype = DT_F32, .ndim = 1, .shape = {2}, .data = a},
                         {.name = "a", .dtype = DT_F32, .ndim = 1, .shape = {2}, .data = a}};
    CHECK(dt_st_write(path, t, 2, NULL, 0, NULL) == DT_EINVAL);
    t[1].name = "__metadata__";
    CHECK(dt_st_write(path, t, 2, NULL, 0, NULL) == DT_EINVAL);
    t[1].name = "b";
    t[1].shape[0] = -1;
    CHECK(dt_st_write(path, t, 2, NULL, 0, NULL) == DT_EINVAL);
    CHECK(access(path, F_OK) != 0);
}

/* Builds a file: 8-byte length (hlen_delta added), header text, data_len bytes of data. */
static uint8_t *make_file(const char *hdr, int64_t hlen_delta, size_t data_len, size_t *n) {
    size_t hl = strlen(hdr);
    *n = 8 + hl + data_len;
    uint8_t *b = calloc(*n + 1, 1);
    uint64_t v = (uint64_t)((int64_t)hl + hlen_delta);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    memcpy(b + 8, hdr, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)i;
    return b;
}

static void expect_corrupt(const char *why, const uint8_t *b, size_t n, const char *must_name) {
    dt_st_file f;
    dt_status st = dt_st_parse(b, n, "case.safetensors", &f);
    CHECKF(st == DT_ECORRUPT, "%s: got %s (%s)", why, dt_status_name(st), dt_errmsg());
    if (st == DT_OK) { dt_st_close(&f); return; }
    CHECKF(strstr(dt_errmsg(), "case.safetensors") != NULL, "%s: message lacks the file: %s", why, dt_errmsg());
    if (must_name)
        CHECKF(strstr(dt_errmsg(), must_name) != NULL, "%s: message lacks '%s': %s", why, must_name, dt_errmsg());
}

#define E(name, dt, shape, b, e) "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_reader_rejects(void) {
    static const struct { const char *why, *hdr; size_t data; const char *names; } cases[] = {
        {"valid control", "{" E("a", "F32", "[2]", 0, 8) "," E("b", "U8", "[3]", 8, 11) "}", 11, NULL},
        {"hole between tensors", "{" E("a", "F32", "[2]", 0, 8) "," E("b", "U8", "[3]", 9, 12) "}", 12, "\"b\""},
        {"overlap", "{" E("a", "F32", "[2]", 0, 8) "," E("b", "U8", "[3]", 7, 10) "}", 10, "\"b\""},
        {"shape/offset mismatch", "{" E("a", "F32", "[3]", 0, 8) "}", 8, "\"a\""},
        {"unknown dtype", "{" E("a", "F33", "[2]", 0, 8) "}", 8, "F33"},
        {"duplicate name", "{" E("a", "F32", "[2]", 0, 8) "," E("a", "F32", "[2]", 8, 16) "}", 16, "\"a\""},
        {"trailing garbage", "{" E("a", "F32", "[2]", 0, 8) "}", 9, "trailing"},
        {"offsets past end", "{" E("a", "F32", "[2]", 0, 8) "}", 4, "\"a\""},
        {"begin > end", "{" E("a", "F32", "[0]", 8, 0) "}", 8, "\"a\""},
        {"negative dim", "{" E("a", "F32", "[-2]", 0, 8) "}", 8, "\"a\""},
        {"fractional dim", "{" E("a", "F32", "[2.0]", 0, 8) "}", 8, "\"a\""},
        {"overflowing shape", "{" E("a", "F32", "[4294967296,4294967296]", 0, 8) "}", 8, "\"a\""},
        {"nine dims", "{" E("a", "U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1, "\"a\""},
        {"unknown field", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, "\"a\""},
        {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "\"a\""},
        {"three offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1, "\"a\""},
        {"metadata not strings", "{\"__metadata__\":{\"format\":1}}", 0, "format"},
        {"root is an array", "[]", 0, NULL},
        {"does not start with {", " {}", 0, NULL},
        {"trailing comma", "{" E("a", "U8", "[1]", 0, 1) ",}", 1, NULL},
        {"NaN literal", "{\"a\":{\"dtype\":\"U8\",\"shape\":[NaN],\"data_offsets\":[0,1]}}", 1, NULL},
        {"bad UTF-8 in name", "{" E("a\xff", "U8", "[1]", 0, 1) "}", 1, NULL},
        {"NUL escape in name", "{" E("a\\u0000b", "U8", "[1]", 0, 1) "}", 1, NULL},
        {"lone surrogate", "{" E("a\\ud800", "U8", "[1]", 0, 1) "}", 1, NULL},
        {"empty name", "{" E("", "U8", "[1]", 0, 1) "}", 1, NULL},
        {"text after object", "{} x", 0, NULL},
        {"unterminated", "{\"a", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        uint8_t *b = make_file(cases[i].hdr, 0, cases[i].data, &n);
        if (i == 0) {
            dt_st_file f;
            CHECK_OK(dt_st_parse(b, n, "case.safetensors", &f));
            dt_st_close(&f);
        } else {
            expect_corrupt(cases[i].why, b, n, cases[i].names);
        }
        free(b);
    }
    /* Nesting far deeper than the limit must be refused, not recursed into. */
    char deep[4200] = "{\"a\":";
    for (int i = 0; i < 4000; i++) strcat(deep + 5 + i, "[");
    size_t n;
    uint8_t *b = make_file(deep, 0, 0, &n);
    expect_corrupt("deep nesting", b, n, "too deep");
    free(b);
}

static void test_truncation_and_length(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    size_t n;
    uint8_t *good = dt_test_read_file(path, &n);
    if (!good) { CHECK(good != NULL); return; }
    /* Every truncation of a valid file is rejected. */
    int accepted = 0;
    for (size_t cut = 0; cut < n; cut++) {
        dt_st_file f;
        dt_status st = dt_st_parse(good, cut, "case.safetensors", &f);
        if (st != DT_ECORRUPT) accepted++;
        if (st == DT_OK) dt_st_close(&f);
    }
    CHECKF(accepted == 0, "%d truncations not rejected", accepted);
    /* Wrong header length: off by one either way, huge, zero. */
    int64_t deltas[] = {1, -1, 8, -8, 1LL << 40, 0};
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)good[i] << (8 * i);
    for (size_t k = 0; k < sizeof deltas / sizeof deltas[0]; k++) {
        uint8_t *b = malloc(n);
        memcpy(b, good, n);
        uint64_t v = k == 5 ? 0 : hl + (uint64_t)deltas[k];
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
        expect_corrupt("wrong header length", b, n, NULL);
        free(b);
    }
    /* A flipped byte in the JSON structure. */
    uint8_t *b = malloc(n);
    memcpy(b, good, n);
    b[8] ^= 0x40; /* '{' -> ';' */
    expect_corrupt("flipped first header byte", b, n, NULL);
    memcpy(b, good, n);
    char *q = memchr(b + 8, ':', (size_t)hl);
    if (q) *q = ';';
    expect_corrupt("flipped colon", b, n, NULL);
    free(b);
    /* On disk: truncated file via dt_st_open. */
    char tpath[320];
    snprintf(tpath, sizeof tpath, "%s/trunc.safetensors", dir);
    FILE *f = fopen(tpath, "wb");
    fwrite(good, 1, n - 3, f);
    fclose(f);
    dt_st_file sf;
    CHECK(dt_st_open(tpath, &sf) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "trunc.safetensors") != NULL);
    CHECK(dt_st_open("/nonexistent/x.safetensors", &sf) == DT_EIO);
    free(good);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--emit") == 0) {
        dt_st_tensor t[5];
        int n = sample(t);
        dt_status st = dt_st_write(argv[2], t, n, META, 2, NULL);
        if (st != DT_OK) fprintf(stderr, "%s\n", dt_errmsg());
        return st == DT_OK ? 0 : 1;
    }
    dt_test_scratch(dir, sizeof dir, "st");
    RUN(test_exact_bytes);
    RUN(test_round_trip);
    RUN(test_writer_rejects);
    RUN(test_reader_rejects);
    RUN(test_truncation_and_length);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
