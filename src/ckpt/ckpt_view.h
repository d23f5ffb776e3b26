/* A verified, opened checkpoint directory: the shared reading half of load, verify and
 * compare (ckpt.h). Internal to src/ckpt/. */
#ifndef DT_CKPT_CKPT_VIEW_H
#define DT_CKPT_CKPT_VIEW_H

#include "ckpt/ckpt.h"
#include "core/json_read.h"
#include "ckpt/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#define DT_CKPT_SELF_DIGEST_KEY "state_sha256"
#define DT_CKPT_NFILES 4

/* The files state.json describes, in the order it lists them. */
extern const char *const dt_ckpt_files[DT_CKPT_NFILES];

typedef struct dt_ckpt_view {
    char dir[4096];            /* the iteration directory */
    char *text;                /* state.json bytes */
    size_t len;
    dt_json_value *root;       /* state.json, parsed */
    dt_ckpt_state s;
    int64_t adam_t;
    const dt_json_value *config, *run;/* objects inside root */
    dt_st_file model, optim;   /* open and validated */
    uint64_t model_floats;     /* elements in model.safetensors */
} dt_ckpt_view;

/* Resolves path (dt_ckpt_resolve) and verifies everything (ckpt.h). On failure v needs
 * no close. */
dt_status dt_ckpt_view_open(const char *path, dt_ckpt_view *v);
void dt_ckpt_view_close(dt_ckpt_view *v);

/* Pointer to the 64 hex digits of the last "state_sha256": "..." member in text, or NULL
 * when there is none. */
char *dt_ckpt_self_digest_at(char *text, size_t n);
/* Size and SHA-256 of a whole file. */
dt_status dt_ckpt_file_digest(const char *path, uint64_t *bytes, uint8_t out[DT_SHA256_LEN]);
/* 1 when two parsed JSON values are equal: numbers by their literal text, object members
 * in the same order (stricter than dt_json_equal, which ignores key order). */
int dt_ckpt_json_equal(const dt_json_value *a, const dt_json_value *b);
/* Writes a short JSON-ish text of v into buf (numbers and strings as written). */
void dt_ckpt_json_text(const dt_json_value *v, char *buf, size_t cap);

#endif
