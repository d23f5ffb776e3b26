/* The one strict JSON reader of detrain: every JSON file it reads back or loads from
 * elsewhere (metrics lines, env.json, checkpoint state files, safetensors headers, a
 * Hugging Face config.json) goes through dt_json_parse into a small tree, or is rejected.
 *
 * Numbers are kept as the literal text exactly as written, so "1e0" and "1" stay different
 * and no value is rounded through a double unless the caller asks (dt_json_as_f64);
 * integers are read exactly (dt_json_as_i64). Strings are decoded (escapes, \u with
 * surrogate pairs) to UTF-8.
 *
 * Strict, because some inputs are hostile (a downloaded .safetensors header): one value
 * with only whitespace around it; no comments, trailing commas, NaN/Infinity, leading
 * zeros or bare control bytes; strings must be valid UTF-8 and surrogate escapes paired;
 * "\u0000" is refused (names are C strings); duplicate keys in one object are refused
 * (found by sorting, so millions of keys cannot make the check quadratic); nesting deeper
 * than DT_JSON_MAX_DEPTH containers is refused before it is recursed into. Never reads
 * outside [text, text+len) and never needs a NUL terminator.
 *
 * Every parse failure is DT_ECORRUPT with
 *   "<what>: invalid JSON at line L column C (byte B): <problem>". */
#ifndef DT_CORE_JSON_READ_H
#define DT_CORE_JSON_READ_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_JSON_MAX_DEPTH 64 /* containers nested inside one another, the root included */

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
    char *text;        /* STRING: decoded UTF-8; NUMBER: the literal as written;
                          BOOL: "true"/"false"; NULL: "null"; ARRAY/OBJECT: NULL.
                          NUL-terminated and holding no other NUL (\u0000 is refused). */
    size_t len;        /* strlen(text) (0 for ARRAY/OBJECT) */
    size_t n;          /* ARRAY/OBJECT: number of members (0 otherwise) */
    char **keys;       /* OBJECT: member names in document order; NULL otherwise */
    struct dt_json_value *items; /* ARRAY/OBJECT: the n members in document order */
} dt_json_value;

/* Parses text[0..len) into a new tree *out, which the caller frees with dt_json_free.
 * `what` names the document in errors ("header of 'x.safetensors'"); NULL leaves the
 * message starting at "invalid JSON". On failure *out is NULL and nothing is held. */
dt_status dt_json_parse(const char *text, size_t len, const char *what, dt_json_value **out);
/* Reads a whole file and parses it; errors name the path. */
dt_status dt_json_read_file(const char *path, dt_json_value **out);
/* Frees a tree from dt_json_parse (NULL is fine). */
void dt_json_free(dt_json_value *v);

/* Member `key` of an object, or NULL (absent, or v is NULL or not an object). A linear
 * scan: callers walking a large object iterate keys/items instead. */
const dt_json_value *dt_json_get(const dt_json_value *v, const char *key);

/* A NUMBER written as an integer (no fraction, no exponent) within int64: 1 and *out set;
 * anything else (v NULL included): 0. */
int dt_json_as_i64(const dt_json_value *v, int64_t *out);
/* A NUMBER as the nearest double: 1; not a number, or out of double range: 0. */
int dt_json_as_f64(const dt_json_value *v, double *out);
/* A BOOL: 1 and *out = 1 for true, 0 for false; anything else: 0. */
int dt_json_as_bool(const dt_json_value *v, int *out);

/* Member `key` must be a string "0x" + exactly 16 hex digits: the bits of a double as
 * written by dt_json_f64. DT_ECORRUPT naming the key otherwise. */
dt_status dt_json_get_hex64(const dt_json_value *obj, const char *key, uint64_t *bits);
/* Member `key` must be an integer literal (dt_json_as_i64). DT_ECORRUPT naming the key
 * otherwise. */
dt_status dt_json_get_i64(const dt_json_value *obj, const char *key, int64_t *out);

/* 1 when a and b are the same JSON: same type, numbers with the same literal text,
 * strings with the same bytes, arrays element by element, objects with the same key set
 * (in any order) and equal members. */
int dt_json_equal(const dt_json_value *a, const dt_json_value *b);

#endif
