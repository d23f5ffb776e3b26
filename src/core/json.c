/* JSON writing helpers (see json.h). */
#include "core/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not valid (bad lead or
 * continuation byte, overlong form, surrogate, above U+10FFFF). p[0] >= 0x80. */
static int utf8_len(const unsigned char *p) {
    unsigned char c = p[0];
    int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n) return 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* Invalid UTF-8 (a host name, a path or an environment value can hold any bytes) is
 * written as U+FFFD, so the file stays JSON that the strict reader accepts. */
void dt_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p >= 0x80) {
            int n = utf8_len(p);
            if (n) fwrite(p, 1, (size_t)n, f);
            else fputs("\\ufffd", f);
            p += n ? n : 1;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
        p++;
    }
    fputc('"', f);
}

uint32_t dt_f32_bits(float x) { uint32_t b; memcpy(&b, &x, 4); return b; }
uint64_t dt_f64_bits(double x) { uint64_t b; memcpy(&b, &x, 8); return b; }
float dt_f32_from_bits(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }
double dt_f64_from_bits(uint64_t b) { double x; memcpy(&x, &b, 8); return x; }

/* JSON has no NaN/Inf literals: write them as strings so the line stays valid JSON;
 * the _hex field carries the exact value either way. */
void dt_json_f32(FILE *f, const char *key, float x) {
    dt_json_write_string(f, key);
    if (isfinite(x)) fprintf(f, ":%.9g,", (double)x);
    else fprintf(f, ":\"%s\",", isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
    fprintf(f, "\"%s_hex\":\"0x%08" PRIx32 "\"", key, dt_f32_bits(x));
}

void dt_json_f64(FILE *f, const char *key, double x) {
    dt_json_write_string(f, key);
    if (isfinite(x)) fprintf(f, ":%.17g,", x);
    else fprintf(f, ":\"%s\",", isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
    fprintf(f, "\"%s_hex\":\"0x%016" PRIx64 "\"", key, dt_f64_bits(x));
}
