/* Minimal JSON writing helpers shared by metrics, fingerprint, checkpoints and traces.
 * Floats that must round-trip exactly are written twice: as %.9g / %.17g decimal for
 * people and as the hex of their IEEE-754 bits for machines (see dt_json_f32). */
#ifndef DT_CORE_JSON_H
#define DT_CORE_JSON_H

#include <stdint.h>
#include <stdio.h>

/* Writes s as a JSON string literal (quotes and escapes included). */
void dt_json_write_string(FILE *f, const char *s);
/* Bits of a float / double as an unsigned integer. */
uint32_t dt_f32_bits(float x);
uint64_t dt_f64_bits(double x);
float dt_f32_from_bits(uint32_t b);
double dt_f64_from_bits(uint64_t b);
/* Writes `"key":<decimal>,"key_hex":"0x........"` for a float (no trailing comma). */
void dt_json_f32(FILE *f, const char *key, float x);
/* Same for a double, 16 hex digits. */
void dt_json_f64(FILE *f, const char *key, double x);

#endif
