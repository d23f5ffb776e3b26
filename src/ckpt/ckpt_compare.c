/* Comparison of two checkpoints (see ckpt.h). Both are verified first (so neither is
 * corrupt); then state fields, binding config, and the tensors of both safetensors files
 * (dt_st_compare: the first differing tensor and element in hex). */
#include "ckpt/ckpt.h"

#include "ckpt/ckpt_view.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/st_compare.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Paths of the state fields that must be equal (object, member). */
static const struct { const char *obj, *key; } STATE_FIELDS[] = {
    {NULL, "step"}, {NULL, "consumed_samples"}, {NULL, "consumed_tokens"},
    {"data", "permutation_key"}, {"data", "epoch"}, {"data", "position"}, {"data", "train_windows"},
    {"rng", "generator"}, {"rng", "seed"}, {"rng", "dropout_micro_steps"},
    {"optimizer", "type"}, {"optimizer", "t"},
};

static const dt_json_value *field(const dt_ckpt_view *v, const char *obj, const char *key) {
    const dt_json_value *o = obj ? dt_json_get(v->root, obj) : v->root;
    return o ? dt_json_get(o, key) : NULL;
}

/* 1 and a report when a state field or binding config item differs. */
static int state_differs(const dt_ckpt_view *a, const dt_ckpt_view *b, FILE *out) {
    char x[256], y[256];
    for (size_t i = 0; i < sizeof STATE_FIELDS / sizeof STATE_FIELDS[0]; i++) {
        const dt_json_value *fa = field(a, STATE_FIELDS[i].obj, STATE_FIELDS[i].key);
        const dt_json_value *fb = field(b, STATE_FIELDS[i].obj, STATE_FIELDS[i].key);
        if (dt_ckpt_json_equal(fa, fb)) continue; /* both verified: present in both */
        dt_ckpt_json_text(fa, x, sizeof x);
        dt_ckpt_json_text(fb, y, sizeof y);
        fprintf(out, "DIFFERENT state %s%s%s:\n  A: %s\n  B: %s\n", STATE_FIELDS[i].obj ? STATE_FIELDS[i].obj : "",
                STATE_FIELDS[i].obj ? "." : "", STATE_FIELDS[i].key, x, y);
        return 1;
    }
    const dt_json_value *ca = a->config, *cb = b->config;
    for (int pass = 0; pass < 2; pass++) {
        const dt_json_value *p = pass ? cb : ca, *q = pass ? ca : cb;
        for (size_t k = 0; k < p->n; k++) {
            const dt_json_value *other = dt_json_get(q, p->keys[k]);
            if (other && dt_ckpt_json_equal(&p->items[k], other)) continue;
            dt_ckpt_json_text(&p->items[k], x, sizeof x);
            if (other) dt_ckpt_json_text(other, y, sizeof y);
            else snprintf(y, sizeof y, "(absent)");
            fprintf(out, "DIFFERENT config %s:\n  A: %s\n  B: %s\n", p->keys[k], pass ? y : x, pass ? x : y);
            return 1;
        }
    }
    return 0;
}

/* Compares the tensors of one file of both checkpoints (ckpt/st_compare.h: names, dtypes,
 * shapes and bytes in constant memory); *differs set and a line written on the first
 * difference. */
static dt_status compare_file(const dt_ckpt_view *a, const dt_ckpt_view *b, const char *file, FILE *out,
                              int *differs) {
    char pa[4200], pb[4200];
    snprintf(pa, sizeof pa, "%s/%s", a->dir, file);
    snprintf(pb, sizeof pb, "%s/%s", b->dir, file);
    dt_st_diff d;
    dt_status st = dt_st_compare(pa, pb, &d);
    if (st != DT_OK || d.identical) return st;
    fprintf(out, "DIFFERENT %s: %s\n", file, d.detail);
    *differs = 1;
    return DT_OK;
}

dt_status dt_ckpt_compare(const char *pa, const char *pb, FILE *out, int *identical) {
    *identical = 0;
    dt_ckpt_view a, b;
    dt_status st = dt_ckpt_view_open(pa, &a);
    if (st != DT_OK) return dt_fail_context(st, "checkpoint A");
    if ((st = dt_ckpt_view_open(pb, &b)) != DT_OK) {
        dt_ckpt_view_close(&a);
        return dt_fail_context(st, "checkpoint B");
    }
    fprintf(out, "A: %s\nB: %s\n", a.dir, b.dir);
    /* a state difference is reported and the tensors are still compared: the first
     * differing element says more about where two runs parted */
    int sdiff = state_differs(&a, &b, out), differs = 0;
    st = compare_file(&a, &b, DT_HF_WEIGHTS_NAME, out, &differs);
    if (st == DT_OK && !differs) st = compare_file(&a, &b, DT_CKPT_OPTIM_NAME, out, &differs);
    differs |= sdiff;
    if (st == DT_OK && !differs) {
        /* not compared: where each run wrote and how long it meant to train */
        char keys[512] = "";
        size_t k = 0;
        for (size_t i = 0; i < a.run->n; i++) {
            const dt_json_value *o = dt_json_get(b.run, a.run->keys[i]);
            if (o && dt_ckpt_json_equal(&a.run->items[i], o)) continue;
            k += (size_t)snprintf(keys + k, k < sizeof keys ? sizeof keys - k : 0, "%s%s", k ? ", " : "",
                                  a.run->keys[i]);
            if (k >= sizeof keys) k = sizeof keys - 1;
        }
        if (*keys) fprintf(out, "note: run settings differ (not part of the trajectory): %s\n", keys);
        fprintf(out, "bitwise identical: step %" PRId64 ", %d model tensors, %d optimizer tensors, state and "
                "config equal\n", a.s.step, a.model.n, a.optim.n);
        *identical = 1;
    }
    dt_ckpt_view_close(&a);
    dt_ckpt_view_close(&b);
    return st;
}
