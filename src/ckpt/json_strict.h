/* A strict RFC 8259 JSON reader for files detrain loads (safetensors headers, config.json,
 * checkpoint state files): the whole document is parsed into a small tree or rejected.
 *
 * Strict means: one value and only whitespace around it; no comments, trailing commas,
 * NaN/Infinity, leading zeros or bare control bytes; strings must be valid UTF-8 and
 * surrogate escapes paired; "\u0000" is refused (names are C strings); duplicate keys in
 * an object are refused; nesting deeper than DT_SJ_MAX_DEPTH is refused. Every failure
 * is DT_ECORRUPT with "<what>: invalid JSON at byte N: <problem>". Never reads outside
 * [text, text+len) and never needs a NUL terminator. */
#ifndef DT_CKPT_JSON_STRICT_H
#define DT_CKPT_JSON_STRICT_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#define DT_SJ_MAX_DEPTH 64

typedef enum dt_sj_kind {
    DT_SJ_NULL, DT_SJ_FALSE, DT_SJ_TRUE, DT_SJ_NUMBER, DT_SJ_STRING, DT_SJ_ARRAY, DT_SJ_OBJECT
} dt_sj_kind;

typedef struct dt_sjv {
    dt_sj_kind kind;
    char *str;            /* STRING: decoded UTF-8, NUL-terminated; NUMBER: literal text */
    size_t len;           /* bytes of str, without the NUL */
    size_t n;             /* ARRAY/OBJECT: number of members */
    struct dt_sjv *items; /* ARRAY/OBJECT: member values in document order */
    char **keys;          /* OBJECT: member names, parallel to items */
} dt_sjv;

/* Parses text[0..len) into *root (owned by the caller: free with dt_sjv_free). `what`
 * names the document in errors ("header of 'x.safetensors'"). On failure *root is a
 * NULL value holding no memory. */
dt_status dt_sjson_parse(const char *text, size_t len, const char *what, dt_sjv *root);
/* Frees everything under v and resets it to a NULL value. */
void dt_sjv_free(dt_sjv *v);
/* Member `key` of an object, or NULL (also when obj is not an object). */
const dt_sjv *dt_sjv_get(const dt_sjv *obj, const char *key);
/* A NUMBER written as an integer (no fraction, no exponent) within int64: 1 and *out set;
 * anything else: 0. */
int dt_sjv_as_i64(const dt_sjv *v, int64_t *out);
/* A NUMBER as the nearest double: 1; not a number (or out of range): 0. */
int dt_sjv_as_f64(const dt_sjv *v, double *out);

#endif
