/* JSON writing helpers (see json.h). */
#include "core/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void dt_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
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
