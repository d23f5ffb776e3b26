/* Strict JSON reading for the files detrain writes and reads back: metrics lines, the
 * environment fingerprint (env.json), checkpoint state files.
 *
 * dt_json_parse() builds a small tree. Numbers are kept as the literal text exactly as
 * written (so "1e0" and "1" stay different and no value is rounded through a double);
 * strings are decoded (escapes, \u with surrogate pairs to UTF-8). Strict means: no
 * trailing commas, no comments, no NaN/Infinity literals, no leading zeros, no duplicate
 * keys in one object, no control characters in strings, nothing but whitespace after the
 * value. Errors are DT_ECORRUPT with "line L column C (byte B): <what was expected>". */
#ifndef DT_CORE_JSON_READ_H
#define DT_CORE_JSON_READ_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

typedef enum dt_json_type {
    DT_JSON_NULL,
    DT_JSON_BOOL,
    DT_JSON_NUMBER,
    DT_JSON_STRING,
    DT_JSON_ARRAY,
    DT_JSON_OBJECT
} dt_json_type;

typedef struct dt_json_value {
    dt_json_type type;
    size_t pos;        /* byte offset of the value in the parsed text */
    char *text;        /* STRING: decoded bytes; NUMBER: the literal as written;
                          BOOL: "true"/"false"; NULL: "null". Always NUL-terminated
                          (a string holding \u0000 is rejected). */
    size_t len;        /* strlen(text) */
    size_t n;          /* ARRAY/OBJECT: number of members (0 otherwise) */
    char **keys;       /* OBJECT: member names in file order; NULL otherwise */
    struct dt_json_value *items; /* ARRAY/OBJECT: the n members */
} dt_json_value;

/* Parses text[0..len) (need not be NUL-terminated) into *out, which the caller frees with
 * dt_json_free. Nesting deeper than 64 levels is rejected. */
dt_status dt_json_parse(const char *text, size_t len, dt_json_value **out);
/* Reads a whole file and parses it; errors name the path. */
dt_status dt_json_read_file(const char *path, dt_json_value **out);
/* Frees a tree from dt_json_parse (NULL is fine). */
void dt_json_free(dt_json_value *v);

/* Member `key` of an object, or NULL (absent, or v is not an object). */
const dt_json_value *dt_json_get(const dt_json_value *v, const char *key);
/* Member `key` must be a string "0x" + exactly 16 hex digits: the bits of a double as
 * written by dt_json_f64. */
dt_status dt_json_get_hex64(const dt_json_value *obj, const char *key, uint64_t *bits);
/* Member `key` must be an integer literal (no fraction or exponent) that fits int64. */
dt_status dt_json_get_i64(const dt_json_value *obj, const char *key, int64_t *out);
/* 1 when a and b are the same JSON: same type, numbers with the same literal text,
 * strings with the same bytes, arrays element by element, objects with the same key set
 * (in any order) and equal members. */
int dt_json_equal(const dt_json_value *a, const dt_json_value *b);

#endif
