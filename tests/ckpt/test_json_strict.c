/* Strict JSON reader: accepts RFC 8259 documents (escapes, UTF-8, numbers), rejects every
 * relaxation (table of invalid documents), and reads integers exactly. */
#include "ckpt/json_strict.h"
#include "dt_test.h"

static void test_accepts(void) {
    const char *doc = " {\"a\": [1, -0, 2.5e-3, true, false, null, {}], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\\/\","
                      " \"big\": 9007199254740993, \"neg\": -9223372036854775808, \"e\": 1E+2} \r\n";
    dt_sjv v;
    CHECK_OK(dt_sjson_parse(doc, strlen(doc), "doc", &v));
    CHECK(v.kind == DT_SJ_OBJECT && v.n == 5);
    const dt_sjv *a = dt_sjv_get(&v, "a");
    CHECK(a && a->kind == DT_SJ_ARRAY && a->n == 7);
    if (a && a->n == 7) {
        CHECK(a->items[3].kind == DT_SJ_TRUE && a->items[5].kind == DT_SJ_NULL && a->items[6].kind == DT_SJ_OBJECT);
        double d;
        int64_t i;
        CHECK(dt_sjv_as_f64(&a->items[2], &d) && d == 2.5e-3);
        CHECK(!dt_sjv_as_i64(&a->items[2], &i));
        CHECK(dt_sjv_as_i64(&a->items[0], &i) && i == 1);
    }
    const dt_sjv *s = dt_sjv_get(&v, "s");
    CHECK(s && s->len == 9 && memcmp(s->str, "x\n\xc3\xa9\xf0\x9f\x98\x80/", 9) == 0);
    int64_t big, neg;
    CHECK(dt_sjv_as_i64(dt_sjv_get(&v, "big"), &big) && big == 9007199254740993LL);
    CHECK(dt_sjv_as_i64(dt_sjv_get(&v, "neg"), &neg) && neg == INT64_MIN);
    CHECK(!dt_sjv_as_i64(dt_sjv_get(&v, "e"), &big));
    CHECK(dt_sjv_get(&v, "missing") == NULL);
    dt_sjv_free(&v);
    CHECK(v.kind == DT_SJ_NULL && v.items == NULL);
    /* Not NUL-terminated: only len bytes are read. */
    char buf[3] = {'[', ']', 'x'};
    CHECK_OK(dt_sjson_parse(buf, 2, "buf", &v));
    dt_sjv_free(&v);
    const char *over = "[9223372036854775808]";
    CHECK_OK(dt_sjson_parse(over, strlen(over), "over", &v));
    CHECK(!dt_sjv_as_i64(&v.items[0], &big));
    dt_sjv_free(&v);
}

static void test_rejects(void) {
    static const char *bad[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "{a:1}", "[01]", "[1.]", "[.5]", "[1e]",
        "[+1]", "[NaN]", "[Infinity]", "[-]", "[tru]", "[nul]", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\u0000\"", "\"a\tb\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xe2\x82\"", "[1] [2]", "{\"a\":1 \"b\":2}", "{\"a\":1,\"a\":2}", "/*c*/[]", "[1]//", "[\"a\"\x00]",
        "{\"a\"}", "{\"a\":}", "[,1]", "\"unterminated", "\"ends in backslash\\",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_sjv v;
        size_t n = strlen(bad[i]);
        if (i == 33) n = 5; /* includes the NUL byte */
        dt_status st = dt_sjson_parse(bad[i], n, "bad doc", &v);
        CHECKF(st == DT_ECORRUPT, "case %zu accepted: %s", i, bad[i]);
        CHECK(v.kind == DT_SJ_NULL && v.items == NULL && v.str == NULL);
        CHECK(strstr(dt_errmsg(), "bad doc") != NULL);
    }
    char deep[200];
    memset(deep, '[', sizeof deep);
    dt_sjv v;
    CHECK(dt_sjson_parse(deep, sizeof deep, "deep", &v) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "too deep") != NULL);
    memset(deep, '[', 64);
    memset(deep + 64, ']', 64);
    CHECK_OK(dt_sjson_parse(deep, 128, "depth 64", &v));
    dt_sjv_free(&v);
}

int main(void) {
    RUN(test_accepts);
    RUN(test_rejects);
    return dt_test_report();
}
