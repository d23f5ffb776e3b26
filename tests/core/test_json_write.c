/* JSON writing (core/json.c): every string the writer emits parses back with the strict
 * reader (core/json_read.c) — control characters escaped, valid UTF-8 kept byte for byte,
 * invalid UTF-8 (overlong, surrogate, truncated, stray continuation, > U+10FFFF) replaced
 * by U+FFFD — and float fields round-trip by their bits. */
#include "core/json.h"
#include "core/json_read.h"
#include "dt_test.h"

/* Writes {"k": s} to memory and parses it back; returns the parsed string (malloc'd). */
static char *round_trip(const char *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fputs("{\"k\":", f);
    dt_json_write_string(f, s);
    fputs("}", f);
    fclose(f);
    dt_json_value *v = NULL;
    dt_status st = dt_json_parse(buf, len, "test", &v);
    CHECKF(st == DT_OK, "%s: %s", buf, dt_errmsg());
    char *out = NULL;
    if (st == DT_OK) {
        const dt_json_value *k = dt_json_get(v, "k");
        CHECK(k && k->type == DT_JSON_STRING);
        if (k) out = strndup(k->text, k->len);
    }
    dt_json_free(v);
    free(buf);
    return out;
}

static void test_strings(void) {
    static const struct { const char *in, *want; } cases[] = {
        {"plain", "plain"},
        {"q\"b\\n\nt\tc\x01", "q\"b\\n\nt\tc\x01"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"a\xffz", "a\xef\xbf\xbdz"},                 /* invalid byte */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},     /* overlong '/' */
        {"\xed\xa0\x80x", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx"}, /* surrogate D800 */
        {"\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd"},     /* truncated at the end */
        {"\x80", "\xef\xbf\xbd"},                     /* stray continuation */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = round_trip(cases[i].in);
        CHECKF(got && !strcmp(got, cases[i].want), "case %zu", i);
        free(got);
    }
}

static void test_float_bits(void) {
    const double xs[] = {0.1, -0.0, 1e-310, 6.02214076e23};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        fputc('{', f);
        dt_json_f64(f, "x", xs[i]);
        fputc('}', f);
        fclose(f);
        dt_json_value *v = NULL;
        uint64_t bits = 0;
        CHECK_OK(dt_json_parse(buf, len, "test", &v));
        CHECK_OK(dt_json_get_hex64(v, "x_hex", &bits));
        CHECK(bits == dt_f64_bits(xs[i]));
        dt_json_free(v);
        free(buf);
    }
}

int main(void) {
    RUN(test_strings);
    RUN(test_float_bits);
    return dt_test_report();
}
