/* Tensor-by-tensor comparison of two checkpoints (see ckpt.h). Both are verified first,
 * so a digest difference is a real difference; tensors whose digests match are equal
 * byte for byte, the others are read to find the first differing element. */
#include "ckpt/ckpt.h"

#include "ckpt/ckpt_view.h"
#include "core/json.h"

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

static const dt_sjv *field(const dt_ckpt_view *v, const char *obj, const char *key) {
    const dt_sjv *o = obj ? dt_sjv_get(&v->root, obj) : &v->root;
    return o ? dt_sjv_get(o, key) : NULL;
}

/* 1 and a report when a state field or binding config item differs. */
static int state_differs(const dt_ckpt_view *a, const dt_ckpt_view *b, FILE *out) {
    char x[256], y[256];
    for (size_t i = 0; i < sizeof STATE_FIELDS / sizeof STATE_FIELDS[0]; i++) {
        const dt_sjv *fa = field(a, STATE_FIELDS[i].obj, STATE_FIELDS[i].key);
        const dt_sjv *fb = field(b, STATE_FIELDS[i].obj, STATE_FIELDS[i].key);
        if (dt_ckpt_json_equal(fa, fb)) continue; /* both verified: present in both */
        dt_ckpt_json_text(fa, x, sizeof x);
        dt_ckpt_json_text(fb, y, sizeof y);
        fprintf(out, "DIFFERENT state %s%s%s:\n  A: %s\n  B: %s\n", STATE_FIELDS[i].obj ? STATE_FIELDS[i].obj : "",
                STATE_FIELDS[i].obj ? "." : "", STATE_FIELDS[i].key, x, y);
        return 1;
    }
    const dt_sjv *ca = a->config, *cb = b->config;
    for (int pass = 0; pass < 2; pass++) {
        const dt_sjv *p = pass ? cb : ca, *q = pass ? ca : cb;
        for (size_t k = 0; k < p->n; k++) {
            const dt_sjv *other = dt_sjv_get(q, p->keys[k]);
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

static void elem_hex(char *buf, size_t cap, const uint8_t *p, dt_dtype t) {
    if (t == DT_F32) {
        uint32_t u;
        memcpy(&u, p, 4);
        snprintf(buf, cap, "0x%08" PRIx32 " (%.9g)", u, (double)dt_f32_from_bits(u));
    } else {
        size_t n = dt_dtype_size(t);
        int k = snprintf(buf, cap, "0x");
        for (size_t i = n; i-- > 0 && k > 0 && (size_t)k < cap;) /* little-endian: high byte first */
            k += snprintf(buf + k, cap - (size_t)k, "%02x", p[i]);
    }
}

/* Reports the first differing element of two same-shaped tensors. */
static dt_status report_element(const dt_st_file *fa, const dt_st_file *fb, const dt_st_entry *ea,
                                const dt_st_entry *eb, const char *file, FILE *out) {
    size_t n = (size_t)(ea->end - ea->begin), es = dt_dtype_size(ea->dtype);
    uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
    dt_status st = a && b ? DT_OK : dt_fail(DT_ENOMEM, "out of memory comparing \"%s\"", ea->name);
    if (st == DT_OK) st = dt_st_read(fa, ea, a, n);
    if (st == DT_OK) st = dt_st_read(fb, eb, b, n);
    if (st == DT_OK) {
        size_t i = 0, ndiff = 0, first = n;
        for (; i + es <= n; i += es)
            if (memcmp(a + i, b + i, es) != 0) {
                if (first == n) first = i;
                ndiff++;
            }
        if (first == n) {
            st = dt_fail(DT_ECORRUPT, "\"%s\" in %s: digests differ but the bytes are equal", ea->name, file);
        } else {
            uint64_t idx = first / es, rem = idx;
            char pos[160] = "", x[64], y[64];
            int k = 0;
            for (int d = ea->ndim - 1; d >= 0; d--) { /* row-major multi-index */
                uint64_t dim = ea->shape[d] ? (uint64_t)ea->shape[d] : 1;
                char part[24];
                snprintf(part, sizeof part, "%" PRIu64, rem % dim);
                char tmp[160];
                snprintf(tmp, sizeof tmp, "%s%s%s", part, k ? ", " : "", pos);
                snprintf(pos, sizeof pos, "%s", tmp);
                rem /= dim;
                k++;
            }
            elem_hex(x, sizeof x, a + first, ea->dtype);
            elem_hex(y, sizeof y, b + first, ea->dtype);
            fprintf(out, "DIFFERENT %s tensor \"%s\" at element %" PRIu64 " [%s] (%zu of %" PRIu64
                    " elements differ):\n  A: %s\n  B: %s\n", file, ea->name, idx, pos, ndiff, ea->numel, x, y);
        }
    }
    free(a);
    free(b);
    return st;
}

/* Compares the tensors of one file; *differs set on the first difference. */
static dt_status compare_file(const dt_st_file *fa, const dt_st_file *fb, const char *file, FILE *out,
                              int *differs) {
    for (int i = 0; i < fa->n || i < fb->n; i++) {
        if (i >= fa->n || i >= fb->n) {
            fprintf(out, "DIFFERENT %s: A holds %d tensors, B holds %d\n", file, fa->n, fb->n);
            *differs = 1;
            return DT_OK;
        }
        const dt_st_entry *ea = &fa->t[i], *eb = &fb->t[i];
        int same_shape = strcmp(ea->name, eb->name) == 0 && ea->dtype == eb->dtype && ea->ndim == eb->ndim;
        for (int d = 0; same_shape && d < ea->ndim; d++) same_shape = ea->shape[d] == eb->shape[d];
        if (!same_shape) {
            fprintf(out, "DIFFERENT %s tensor %d: A \"%s\" %s, B \"%s\" %s (names, dtypes or shapes differ)\n",
                    file, i, ea->name, dt_dtype_name(ea->dtype), eb->name, dt_dtype_name(eb->dtype));
            *differs = 1;
            return DT_OK;
        }
        uint8_t da[DT_SHA256_LEN], db[DT_SHA256_LEN];
        dt_status st = dt_st_digest(fa, ea, da);
        if (st == DT_OK) st = dt_st_digest(fb, eb, db);
        if (st != DT_OK) return st;
        if (memcmp(da, db, DT_SHA256_LEN) == 0) continue;
        *differs = 1;
        return report_element(fa, fb, ea, eb, file, out);
    }
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
    st = compare_file(&a.model, &b.model, "model.safetensors", out, &differs);
    if (st == DT_OK && !differs) st = compare_file(&a.optim, &b.optim, "optimizer.safetensors", out, &differs);
    differs |= sdiff;
    if (st == DT_OK && !differs) {
        /* not compared: where each run wrote and how long it meant to train */
        char keys[512] = "";
        size_t k = 0;
        for (size_t i = 0; i < a.run->n; i++) {
            const dt_sjv *o = dt_sjv_get(b.run, a.run->keys[i]);
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
