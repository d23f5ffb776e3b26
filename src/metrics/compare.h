/* Bitwise comparison of two runs (the library half of `detrain compare`).
 *
 * Metrics: two metrics.jsonl series (metrics.h) are compared on the steps both hold: the
 * range [max(first steps), min(last steps)], inside which every step must be present in
 * both logs. On each step every key is compared except "step" and the wall-clock fields
 * (step_ms, tok_per_s and their _hex): a float by its _hex bits (its decimal is then not
 * compared), anything else (integers, strings) by its exact JSON text. A key present in one
 * line only is a difference. No shared step at all is an error, not a difference.
 *
 * Fingerprints: env.json holds a top-level "contract" object (fields that bind the
 * deterministic contract) and an "info" object (fields that do not: host name, time,
 * thread counts in deterministic mode). Only "contract" is compared; a difference is a
 * warning (the comparison is outside the contract), never a failure.
 *
 * Checkpoints: dt_compare_ckpt compares two checkpoints tensor by tensor (below). */
#ifndef DT_METRICS_COMPARE_H
#define DT_METRICS_COMPARE_H

#include "detrain/detrain.h"
#include "metrics/metrics.h"

#include <stdint.h>
#include <stdio.h>

typedef struct dt_compare_report {
    int identical;                  /* 1: every compared step matched bit for bit */
    int64_t a_first, a_last;        /* steps held by log A */
    int64_t b_first, b_last;        /* steps held by log B */
    int64_t first, last;            /* the range compared */
    int64_t nsteps;                 /* steps that matched (all of them when identical; those
                                       before diff_step otherwise) */
    int64_t diff_step;              /* first differing step (identical == 0) */
    char diff_metric[80];           /* its first differing key, without "_hex"; "step" when
                                       the step itself is missing from one log */
    char a_value[128], b_value[128];/* "0x<16 hex> (<%.17g>)" for floats, the JSON text
                                       otherwise, "(absent)" when the key is missing */
} dt_compare_report;

/* 1 when key is a field that compare ignores (wall clock, the resume marker). */
int dt_compare_ignored_key(const char *key);

/* Compares two metrics.jsonl files. DT_OK with r filled in (identical or not); an error
 * when a file cannot be read or parsed, or (DT_EMISMATCH) when the logs share no step.
 * It is dt_metrics_read of both files, then dt_compare_series. */
dt_status dt_compare_metrics(const char *path_a, const char *path_b, dt_compare_report *r);
/* Compares two series already read by dt_metrics_read (for callers that also need their
 * steps, e.g. `detrain report`); name_a and name_b name them in errors. Same result and
 * errors as dt_compare_metrics. */
dt_status dt_compare_series(const dt_metrics_series *a, const char *name_a,
                            const dt_metrics_series *b, const char *name_b, dt_compare_report *r);

/* The files one argument of `detrain compare` names: DIR/metrics.jsonl and DIR/env.json for
 * a directory, otherwise the argument itself (a metrics.jsonl file) and the env.json beside
 * it. Each buffer holds n bytes. Nothing is checked: reading the files reports what is
 * missing. */
void dt_compare_paths(const char *arg, char *metrics, char *env, size_t n);

/* Compares the "contract" objects of two env.json files, and their binding configs
 * ("config"/"binding", where both record one: the flags that bind the trajectory). Writes
 * the names of the keys that differ (present in one only, or with different values) into
 * keys as "a, b, config.lr" and their count into *ndiff. An error only when a file cannot be read or has no
 * "contract" object. */
dt_status dt_compare_fingerprints(const char *env_a, const char *env_b, char *keys, size_t n,
                                  int *ndiff);
/* The same for any top-level object of env.json ("contract", "info"): an error when a file
 * cannot be read or lacks that object. */
dt_status dt_compare_fingerprint_section(const char *env_a, const char *env_b, const char *section,
                                         char *keys, size_t n, int *ndiff);

/* Compares two checkpoints (each an iteration directory or a save directory, whose
 * latest checkpoint is used) with dt_ckpt_compare (ckpt/ckpt.h: state, binding config and
 * every tensor, the first difference reported in hex), then warns in `out` when their
 * env.json "contract" objects differ. DT_OK with *identical set; an error when a
 * checkpoint does not verify. `detrain compare` calls this when both arguments are
 * checkpoints (holding model.safetensors or latest_checkpointed_iteration.txt). */
dt_status dt_compare_ckpt(const char *dir_a, const char *dir_b, FILE *out, int *identical);

#endif
