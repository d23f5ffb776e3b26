/* Tensor-by-tensor comparison of safetensors files (st_compare.h). */
#include "ckpt/st_compare.h"

#include "ckpt/safetensors.h"
#include "core/json.h"

#include <stdio.h>

#include <inttypes.h>
#include <string.h>

/* "[i, j, k]" multi-index of flat element e in shape. */
static void index_str(char *out, size_t cap, const dt_st_entry *t, int64_t e) {
    int64_t idx[DT_ST_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? e % t->shape[d] : 0;
        e = t->shape[d] ? e / t->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < t->ndim && k < cap; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%" PRId64, d ? ", " : "", idx[d]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

/* Hex of one element (little-endian bytes shown as the integer they encode), plus its
 * value for float types. */
static void elem_str(char *out, size_t cap, dt_dtype t, const uint8_t *p) {
    size_t n = dt_dtype_size(t);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    int w = (int)(2 * n);
    if (t == DT_F32) snprintf(out, cap, "0x%0*" PRIx64 " (%.9g)", w, v, (double)dt_f32_from_bits((uint32_t)v));
    else if (t == DT_F64) snprintf(out, cap, "0x%0*" PRIx64 " (%.17g)", w, v, dt_f64_from_bits(v));
    else if (t == DT_BF16) snprintf(out, cap, "0x%0*" PRIx64 " (%.4g)", w, v, (double)dt_f32_from_bits((uint32_t)v << 16));
    else snprintf(out, cap, "0x%0*" PRIx64, w, v);
}

static int same_layout(const dt_st_entry *a, const dt_st_entry *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Finds the first differing byte of two equally laid out tensors; -1 if identical. */
static dt_status first_diff(const dt_st_file *fa, const dt_st_entry *a, const dt_st_file *fb,
                            const dt_st_entry *b, int64_t *byte, uint8_t ea[8], uint8_t eb[8]) {
    enum { CHUNK = 1 << 16 };
    static _Thread_local uint8_t ba[CHUNK], bb[CHUNK];
    uint64_t len = a->end - a->begin, off = 0;
    size_t es = dt_dtype_size(a->dtype);
    *byte = -1;
    while (off < len) {
        size_t k = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
        /* len and CHUNK are multiples of the element size, so k holds whole elements. */
        dt_status st = dt_st_read_range(fa, a, off, ba, k);
        if (st == DT_OK) st = dt_st_read_range(fb, b, off, bb, k);
        if (st != DT_OK) return st;
        if (memcmp(ba, bb, k) != 0) {
            size_t i = 0;
            while (ba[i] == bb[i]) i++;
            i -= i % es;
            *byte = (int64_t)(off + i);
            memcpy(ea, ba + i, es);
            memcpy(eb, bb + i, es);
            return DT_OK;
        }
        off += k;
    }
    return DT_OK;
}

dt_status dt_st_compare(const char *path_a, const char *path_b, dt_st_diff *out) {
    memset(out, 0, sizeof *out);
    out->element = -1;
    dt_st_file fa, fb;
    dt_status st = dt_st_open(path_a, &fa);
    if (st != DT_OK) return st;
    if ((st = dt_st_open(path_b, &fb)) != DT_OK) { dt_st_close(&fa); return st; }
    out->identical = 1;
    for (int i = 0; i < fa.n && out->identical && st == DT_OK; i++) {
        const dt_st_entry *a = &fa.t[i], *b = dt_st_find(&fb, a->name);
        snprintf(out->tensor, sizeof out->tensor, "%s", a->name);
        if (!b) {
            out->identical = 0;
            snprintf(out->detail, sizeof out->detail, "tensor \"%.200s\" is only in '%.200s'", a->name, path_a);
        } else if (!same_layout(a, b)) {
            out->identical = 0;
            snprintf(out->detail, sizeof out->detail, "tensor \"%.200s\": dtype/shape differ (%s, %d dims vs %s, %d dims)",
                     a->name, dt_dtype_name(a->dtype), a->ndim, dt_dtype_name(b->dtype), b->ndim);
        } else {
            int64_t byte;
            uint8_t ea[8], eb[8];
            st = first_diff(&fa, a, &fb, b, &byte, ea, eb);
            if (st == DT_OK && byte >= 0) {
                char idx[160], sa[80], sb[80];
                out->identical = 0;
                out->element = byte / (int64_t)dt_dtype_size(a->dtype);
                index_str(idx, sizeof idx, a, out->element);
                elem_str(sa, sizeof sa, a->dtype, ea);
                elem_str(sb, sizeof sb, a->dtype, eb);
                snprintf(out->detail, sizeof out->detail, "tensor \"%.200s\": first difference at element %" PRId64
                         " %s: %s vs %s", a->name, out->element, idx, sa, sb);
            }
        }
        if (out->identical) out->compared++;
    }
    for (int i = 0; i < fb.n && out->identical && st == DT_OK; i++) {
        if (!dt_st_find(&fa, fb.t[i].name)) {
            out->identical = 0;
            snprintf(out->tensor, sizeof out->tensor, "%s", fb.t[i].name);
            snprintf(out->detail, sizeof out->detail, "tensor \"%.200s\" is only in '%.200s'", fb.t[i].name, path_b);
        }
    }
    if (out->identical) {
        out->tensor[0] = 0;
        snprintf(out->detail, sizeof out->detail, "%d tensors identical", out->compared);
    }
    dt_st_close(&fa);
    dt_st_close(&fb);
    return st;
}
