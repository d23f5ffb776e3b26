/* The strict JSON reader (src/core/json_read.h): accepted RFC 8259 documents give the
 * right tree with numbers kept as written, integers read exactly and strings decoded
 * (escapes, UTF-8); every relaxation and every malformed case is rejected with the
 * document's name and the position; equality ignores key order only. */
#include "core/json_read.h"
#include "dt_test.h"

#include <unistd.h>

static dt_json_value *parse(const char *s) {
    dt_json_value *v = NULL;
    dt_status st = dt_json_parse(s, strlen(s), "doc", &v);
    if (st) fprintf(stderr, "parse failed: %s\n", dt_errmsg());
    return v;
}

static void test_tree(void) {
    dt_json_value *v = parse(" {\"a\": 1.50, \"b\" :[true,false,null, -0, 1e-3, \"x\"],"
                             "\"c\":{\"d\":{}}, \"e\":[]}\n");
    CHECK(v != NULL);
    if (!v) return;
    CHECK(v->type == DT_JSON_OBJECT && v->n == 4);
    const dt_json_value *a = dt_json_get(v, "a");
    CHECK(a && a->type == DT_JSON_NUMBER && !strcmp(a->text, "1.50")); /* kept as written */
    const dt_json_value *b = dt_json_get(v, "b");
    CHECK(b && b->type == DT_JSON_ARRAY && b->n == 6);
    if (b && b->n == 6) {
        CHECK(b->items[0].type == DT_JSON_BOOL && !strcmp(b->items[0].text, "true"));
        CHECK(b->items[1].type == DT_JSON_BOOL && !strcmp(b->items[1].text, "false"));
        CHECK(b->items[2].type == DT_JSON_NULL);
        CHECK(b->items[3].type == DT_JSON_NUMBER && !strcmp(b->items[3].text, "-0"));
        CHECK(!strcmp(b->items[4].text, "1e-3"));
        CHECK(b->items[5].type == DT_JSON_STRING && !strcmp(b->items[5].text, "x"));
        CHECK(b->items[5].pos == 46);
    }
    const dt_json_value *c = dt_json_get(v, "c");
    CHECK(c && dt_json_get(c, "d") && dt_json_get(c, "d")->type == DT_JSON_OBJECT);
    CHECK(dt_json_get(v, "zz") == NULL && dt_json_get(b, "a") == NULL);
    dt_json_free(v);
}

static void test_strings(void) {
    dt_json_value *v = parse("\"q\\\"b\\\\s\\/n\\n t\\t \\u00e9 \\u20ac \\ud83d\\ude00 \\b\\f\\r\"");
    CHECK(v != NULL);
    if (!v) return;
    const char want[] = "q\"b\\s/n\n t\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \b\f\r";
    CHECK(v->len == sizeof want - 1 && !memcmp(v->text, want, sizeof want));
    dt_json_free(v);
}

static void test_accessors(void) {
    dt_json_value *v = parse("{\"h\":\"0x3ff0000000000000\",\"bad\":\"0x3ff\",\"i\":-42,"
                             "\"f\":1.0,\"big\":9223372036854775808}");
    CHECK(v != NULL);
    if (!v) return;
    uint64_t bits = 0;
    int64_t i = 0;
    CHECK_OK(dt_json_get_hex64(v, "h", &bits));
    CHECK(bits == 0x3ff0000000000000ull);
    CHECK(dt_json_get_hex64(v, "bad", &bits) == DT_ECORRUPT);
    CHECK(dt_json_get_hex64(v, "i", &bits) == DT_ECORRUPT);
    CHECK(dt_json_get_hex64(v, "nope", &bits) == DT_ECORRUPT);
    CHECK_OK(dt_json_get_i64(v, "i", &i));
    CHECK(i == -42);
    CHECK(dt_json_get_i64(v, "f", &i) == DT_ECORRUPT);
    CHECK(dt_json_get_i64(v, "big", &i) == DT_ECORRUPT);
    dt_json_free(v);
}

static void test_rejects(void) {
    static const struct { const char *text; const char *why; } bad[] = {
        {"", "end of input"},
        {"{", "expected a \"key\""},
        {"{\"a\":1,}", "expected a \"key\""},
        {"[1,]", "expected a value"},
        {"[1 2]", "expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':'"},
        {"{\"a\":1,\"a\":2}", "duplicate key"},
        {"01", "leading zero"},
        {"1.", "digit expected after '.'"},
        {"1e", "digit expected in exponent"},
        {"-", "bad number"},
        {"+1", "expected a value"},
        {"NaN", "expected a value"},
        {"Infinity", "expected a value"},
        {"tru", "expected a value"},
        {"\"abc", "unterminated string"},
        {"\"a\nb\"", "control character"},
        {"\"\\x\"", "unknown escape"},
        {"\"\\u12\"", "4 hex digits"},
        {"\"\\ud800\"", "low surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\u0000\"", "\\u0000"},
        {"{} {}", "unexpected text after"},
        {"[1] x", "unexpected text after"},
        {"// c\n1", "expected a value"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dt_json_value *v = (dt_json_value *)1;
        dt_status st = dt_json_parse(bad[k].text, strlen(bad[k].text), NULL, &v);
        CHECKF(st == DT_ECORRUPT && v == NULL, "'%s' accepted", bad[k].text);
        CHECKF(strstr(dt_errmsg(), bad[k].why) != NULL, "'%s': got '%s', want '%s'", bad[k].text,
               dt_errmsg(), bad[k].why);
        if (st == DT_OK) dt_json_free(v);
    }
    /* position: line and column of the offending byte */
    dt_json_value *v;
    CHECK(dt_json_parse("{\n  \"a\": [1,\n  2,,]}", 20, NULL, &v) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "line 3 column 5 (byte 17)") != NULL, "%s", dt_errmsg());
    /* depth limit */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(dt_json_parse(deep, 200, NULL, &v) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "nesting") != NULL);
    CHECK(dt_json_parse(deep + 40, 120, NULL, &v) == DT_OK); /* 60 levels are fine */
    dt_json_free(v);
    /* length is honoured: text after len is not read */
    CHECK(dt_json_parse("[1]garbage", 3, NULL, &v) == DT_OK);
    dt_json_free(v);
}

/* Every proper prefix of a metrics line is rejected, never read past its length. */
static void test_every_prefix(void) {
    const char *line = "{\"step\":3,\"loss\":2.3333333333333335,\"loss_hex\":\"0x4002aaaaaaaaaaab\","
                       "\"grad_norm\":\"nan\",\"a\":[1,{\"b\":null}],\"t\":true,\"u\":\"\\u00e9\"}";
    size_t n = strlen(line);
    int ok = 1;
    for (size_t len = 0; len < n; len++) {
        char *copy = malloc(len ? len : 1); /* exact size: ASan sees any read past len */
        memcpy(copy, line, len);
        dt_json_value *v;
        if (dt_json_parse(copy, len, "line", &v) != DT_ECORRUPT) { ok = 0; fprintf(stderr, "prefix %zu accepted\n", len); dt_json_free(v); }
        free(copy);
    }
    CHECK(ok);
    dt_json_value *v;
    CHECK_OK(dt_json_parse(line, n, "line", &v));
    dt_json_free(v);
}

static void test_equal(void) {
    dt_json_value *a = parse("{\"x\":[1,{\"y\":\"z\"}],\"n\":1.0}");
    dt_json_value *b = parse("{\"n\":1.0,\"x\":[1,{\"y\":\"z\"}]}");
    dt_json_value *c = parse("{\"n\":1,\"x\":[1,{\"y\":\"z\"}]}");
    dt_json_value *d = parse("{\"n\":1.0,\"x\":[{\"y\":\"z\"},1]}");
    dt_json_value *e = parse("{\"n\":1.0,\"x\":[1,{\"y\":\"z\"}],\"m\":null}");
    CHECK(a && b && c && d && e);
    if (a && b && c && d && e) {
        CHECK(dt_json_equal(a, b));
        CHECK(!dt_json_equal(a, c)); /* 1.0 and 1 are different text */
        CHECK(!dt_json_equal(a, d)); /* array order matters */
        CHECK(!dt_json_equal(a, e) && !dt_json_equal(e, a));
    }
    dt_json_free(a); dt_json_free(b); dt_json_free(c); dt_json_free(d); dt_json_free(e);
}

static void test_read_file(void) {
    dt_json_value *v;
    CHECK(dt_json_read_file("/nonexistent/env.json", &v) == DT_EIO);
    CHECK(strstr(dt_errmsg(), "/nonexistent/env.json") != NULL);
    char path[] = "/tmp/dt_test_json_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs("{\"contract\": {\"a\": 1}, \"info\": {}}\n", f);
    fclose(f);
    CHECK_OK(dt_json_read_file(path, &v));
    CHECK(v && dt_json_get(dt_json_get(v, "contract"), "a") != NULL);
    dt_json_free(v);
    f = fopen(path, "w");
    fputs("{\"contract\": }", f);
    fclose(f);
    CHECK(dt_json_read_file(path, &v) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), path) && strstr(dt_errmsg(), "byte 13"), "%s", dt_errmsg());
    unlink(path);
}

/* RFC 8259 features side by side (from the former checkpoint-side reader's tests): exact
 * integers up to the int64 limits, doubles on request, escapes to UTF-8. */
static void test_accepts_rfc(void) {
    const char *doc = " {\"a\": [1, -0, 2.5e-3, true, false, null, {}], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\\/\","
                      " \"big\": 9007199254740993, \"neg\": -9223372036854775808, \"e\": 1E+2} \r\n";
    dt_json_value *v = NULL;
    CHECK_OK(dt_json_parse(doc, strlen(doc), "doc", &v));
    if (!v) return;
    CHECK(v->type == DT_JSON_OBJECT && v->n == 5);
    const dt_json_value *a = dt_json_get(v, "a");
    CHECK(a && a->type == DT_JSON_ARRAY && a->n == 7);
    if (a && a->n == 7) {
        int b = -1;
        CHECK(dt_json_as_bool(&a->items[3], &b) && b == 1);
        CHECK(dt_json_as_bool(&a->items[4], &b) && b == 0);
        CHECK(!dt_json_as_bool(&a->items[5], &b) && !dt_json_as_bool(&a->items[0], &b));
        CHECK(a->items[5].type == DT_JSON_NULL && a->items[6].type == DT_JSON_OBJECT);
        double d;
        int64_t i;
        CHECK(dt_json_as_f64(&a->items[2], &d) && d == 2.5e-3);
        CHECK(!dt_json_as_i64(&a->items[2], &i));
        CHECK(dt_json_as_i64(&a->items[0], &i) && i == 1);
        CHECK(!dt_json_as_f64(&a->items[3], &d) && !dt_json_as_i64(&a->items[6], &i));
    }
    const dt_json_value *s = dt_json_get(v, "s");
    CHECK(s && s->len == 9 && memcmp(s->text, "x\n\xc3\xa9\xf0\x9f\x98\x80/", 9) == 0);
    int64_t big, neg;
    CHECK(dt_json_as_i64(dt_json_get(v, "big"), &big) && big == 9007199254740993LL);
    CHECK(dt_json_as_i64(dt_json_get(v, "neg"), &neg) && neg == INT64_MIN);
    CHECK(!dt_json_as_i64(dt_json_get(v, "e"), &big));
    CHECK(!dt_json_as_i64(dt_json_get(v, "missing"), &big)); /* NULL is not a number */
    CHECK(dt_json_get(v, "missing") == NULL);
    dt_json_free(v);
    /* Not NUL-terminated: only len bytes are read. */
    char buf[3] = {'[', ']', 'x'};
    CHECK_OK(dt_json_parse(buf, 2, "buf", &v));
    dt_json_free(v);
    const char *over = "[9223372036854775808]";
    CHECK_OK(dt_json_parse(over, strlen(over), "over", &v));
    if (v) CHECK(!dt_json_as_i64(&v->items[0], &big));
    dt_json_free(v);
    /* Valid multi-byte UTF-8 passes through unchanged (2, 3 and 4 bytes, the top code
     * point U+10FFFF included). */
    const char utf[] = "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"";
    CHECK_OK(dt_json_parse(utf, sizeof utf - 1, "utf", &v));
    if (v) CHECK(v->len == sizeof utf - 3 && !memcmp(v->text, utf + 1, v->len));
    dt_json_free(v);
}

/* Every relaxation is refused, the message names the document, and nothing is held. */
static void test_rejects_relaxations(void) {
    static const char *bad[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "{a:1}", "[01]", "[1.]", "[.5]", "[1e]",
        "[+1]", "[NaN]", "[Infinity]", "[-]", "[tru]", "[nul]", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\u0000\"", "\"a\tb\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xe2\x82\"", "[1] [2]", "{\"a\":1 \"b\":2}", "{\"a\":1,\"a\":2}", "/*c*/[]", "[1]//", "[\"a\"\x00]",
        "{\"a\"}", "{\"a\":}", "[,1]", "\"unterminated", "\"ends in backslash\\", "\"\x80\"", "\"\xff\"",
        "\"\xf0\x8f\xbf\xbf\"", "\"\\ud800\\u0041\"", "[-01]", "[1.5e+]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_json_value *v = (dt_json_value *)1;
        size_t n = strlen(bad[i]);
        if (i == 33) n = 5; /* includes the NUL byte */
        dt_status st = dt_json_parse(bad[i], n, "bad doc", &v);
        CHECKF(st == DT_ECORRUPT, "case %zu accepted: %s", i, bad[i]);
        CHECK(v == NULL);
        CHECKF(strstr(dt_errmsg(), "bad doc: invalid JSON at line ") != NULL, "case %zu: %s", i, dt_errmsg());
        if (st == DT_OK) dt_json_free(v);
    }
    dt_json_value *v;
    CHECK(dt_json_parse("\"a\xff\"", 4, "u", &v) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "invalid UTF-8") && strstr(dt_errmsg(), "(byte 2)"), "%s", dt_errmsg());
    /* A duplicate key is reported at its second occurrence, named, wherever the pair sits. */
    CHECK(dt_json_parse("{\"b\":1,\"a\":2,\n\"a\":3,\"b\":4}", 26, "dup", &v) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "duplicate key \"a\"") && strstr(dt_errmsg(), "line 2 column 1 (byte 14)"),
           "%s", dt_errmsg());
    const char *nodup = "{\"x\":{\"k\":1},\"y\":{\"k\":1}}"; /* keys are unique per object */
    CHECK(dt_json_parse(nodup, strlen(nodup), "nodup", &v) == DT_OK);
    dt_json_free(v);
    CHECK(dt_json_parse("[1] x", 5, "t", &v) == DT_ECORRUPT && strstr(dt_errmsg(), "trailing"));
    char deep[200];
    memset(deep, '[', sizeof deep);
    CHECK(dt_json_parse(deep, sizeof deep, "deep", &v) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "too deep") != NULL && strstr(dt_errmsg(), "deep: ") != NULL);
    memset(deep, '[', 64);
    memset(deep + 64, ']', 64);
    CHECK_OK(dt_json_parse(deep, 128, "depth 64", &v));
    dt_json_free(v);
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    CHECK(dt_json_parse(deep, 130, "depth 65", &v) == DT_ECORRUPT); /* the limit is exact */
}

/* Many keys: duplicate detection sorts, so 200000 distinct keys parse quickly and one
 * repeated key among them is still found. */
static void test_many_keys(void) {
    enum { N = 200000 };
    size_t cap = (size_t)N * 16 + 16, n = 0;
    char *doc = malloc(cap);
    CHECK(doc != NULL);
    if (!doc) return;
    doc[n++] = '{';
    for (int k = 0; k < N; k++) n += (size_t)snprintf(doc + n, cap - n, "%s\"k%d\":%d", k ? "," : "", k, k);
    doc[n++] = '}';
    dt_json_value *v;
    CHECK_OK(dt_json_parse(doc, n, "many", &v));
    CHECK(v && v->n == N);
    dt_json_free(v);
    memcpy(doc + n - 1, ",\"k7\":0}", 8);
    CHECK(dt_json_parse(doc, n + 7, "many", &v) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "duplicate key \"k7\"") != NULL);
    free(doc);
}

int main(void) {
    RUN(test_tree);
    RUN(test_strings);
    RUN(test_accessors);
    RUN(test_rejects);
    RUN(test_every_prefix);
    RUN(test_equal);
    RUN(test_read_file);
    RUN(test_accepts_rfc);
    RUN(test_rejects_relaxations);
    RUN(test_many_keys);
    return dt_test_report();
}
