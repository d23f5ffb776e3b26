/* Strict JSON reader (src/core/json_read.h): accepted documents give the right tree with
 * numbers kept as written and strings decoded; every malformed case is rejected with its
 * position; equality ignores key order only. */
#include "core/json_read.h"
#include "dt_test.h"

#include <unistd.h>

static dt_json_value *parse(const char *s) {
    dt_json_value *v = NULL;
    dt_status st = dt_json_parse(s, strlen(s), &v);
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
        dt_status st = dt_json_parse(bad[k].text, strlen(bad[k].text), &v);
        CHECKF(st == DT_ECORRUPT && v == NULL, "'%s' accepted", bad[k].text);
        CHECKF(strstr(dt_errmsg(), bad[k].why) != NULL, "'%s': got '%s', want '%s'", bad[k].text,
               dt_errmsg(), bad[k].why);
        if (st == DT_OK) dt_json_free(v);
    }
    /* position: line and column of the offending byte */
    dt_json_value *v;
    CHECK(dt_json_parse("{\n  \"a\": [1,\n  2,,]}", 20, &v) == DT_ECORRUPT);
    CHECKF(strstr(dt_errmsg(), "line 3 column 5 (byte 17)") != NULL, "%s", dt_errmsg());
    /* depth limit */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(dt_json_parse(deep, 200, &v) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "nesting") != NULL);
    CHECK(dt_json_parse(deep + 40, 120, &v) == DT_OK); /* 60 levels are fine */
    dt_json_free(v);
    /* length is honoured: text after len is not read */
    CHECK(dt_json_parse("[1]garbage", 3, &v) == DT_OK);
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
        if (dt_json_parse(copy, len, &v) != DT_ECORRUPT) { ok = 0; fprintf(stderr, "prefix %zu accepted\n", len); dt_json_free(v); }
        free(copy);
    }
    CHECK(ok);
    dt_json_value *v;
    CHECK_OK(dt_json_parse(line, n, &v));
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

int main(void) {
    RUN(test_tree);
    RUN(test_strings);
    RUN(test_accessors);
    RUN(test_rejects);
    RUN(test_every_prefix);
    RUN(test_equal);
    RUN(test_read_file);
    return dt_test_report();
}
