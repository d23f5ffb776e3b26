/* Seeded mutation fuzzer for the safetensors reader and the strict JSON reader
 * (core/json_read.h: safetensors headers, config.json, metrics, env.json and checkpoint
 * state files), built with
 * AddressSanitizer + UBSan by tests/ckpt/test_st_fuzz.sh (kept out of tests/ckpt/ so the
 * normal build does not link it into every test binary).
 *
 * usage: st_fuzz ITERATIONS SEED WORKDIR
 * Each iteration applies 1-4 random mutations (bit flips, byte sets, truncations,
 * insertions, deletions, chunk duplication, header-length edits) to a valid file and
 * parses it. The reader must return DT_OK or DT_ECORRUPT (anything else fails the run);
 * sanitizers turn any out-of-bounds access, leak or undefined behaviour into a crash.
 * Accepted mutants are read back in full to exercise the data path. */
#include "ckpt/safetensors.h"
#include "core/json_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_rng.h"

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* Mutates src (n bytes) into dst (capacity cap); returns the new length. Mutations favour
 * the header (first hdr_end bytes), which is where the parser's decisions are. */
static size_t mutate(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, size_t hdr_end) {
    static const char tokens[] = "{}[]\":,0123456789-.eE \\u";
    memcpy(dst, src, n);
    int k = 1 + (int)below(4);
    for (int m = 0; m < k; m++) {
        size_t span = (rnd() % 8 != 0 && hdr_end < n) ? hdr_end : n;
        size_t at = below(span ? span : 1);
        switch (rnd() % 9) {
        case 0: if (n) dst[at % n] ^= (uint8_t)(1u << below(8)); break;
        case 1: if (n) dst[at % n] = (uint8_t)rnd(); break;
        case 2: if (n) dst[at % n] = (uint8_t)tokens[below(sizeof tokens - 1)]; break;
        case 3: n = below(n + 1); break; /* truncate */
        case 4: { /* insert 1-8 bytes */
            size_t ins = 1 + below(8);
            if (n + ins > cap || at > n) break;
            memmove(dst + at + ins, dst + at, n - at);
            for (size_t i = 0; i < ins; i++) dst[at + i] = (rnd() & 1) ? (uint8_t)rnd() : (uint8_t)tokens[below(sizeof tokens - 1)];
            n += ins;
            break;
        }
        case 5: { /* delete 1-8 bytes */
            size_t del = 1 + below(8);
            if (at >= n) break;
            if (del > n - at) del = n - at;
            memmove(dst + at, dst + at + del, n - at - del);
            n -= del;
            break;
        }
        case 6: { /* duplicate a chunk */
            size_t len = 1 + below(32), from = below(n ? n : 1);
            if (from + len > n || n + len > cap || at > n) break;
            memmove(dst + at + len, dst + at, n - at);
            memmove(dst + at, dst + (from >= at ? from + len : from), len);
            n += len;
            break;
        }
        case 7: { /* header length +-small or random */
            if (n < 8) break;
            uint64_t v = 0;
            for (int i = 0; i < 8; i++) v |= (uint64_t)dst[i] << (8 * i);
            v = (rnd() & 3) ? v + (uint64_t)(int64_t)((int)below(17) - 8) : rnd() >> below(64);
            for (int i = 0; i < 8; i++) dst[i] = (uint8_t)(v >> (8 * i));
            break;
        }
        case 8: /* digits: change a number in the header */
            for (size_t i = at; i < n && i < hdr_end; i++)
                if (dst[i] >= '0' && dst[i] <= '9') { dst[i] = (uint8_t)('0' + below(10)); break; }
            break;
        }
    }
    return n;
}

static int check_file(const uint8_t *b, size_t n) {
    dt_st_file f;
    dt_status st = dt_st_parse(b, n, "fuzz.safetensors", &f);
    if (st == DT_ECORRUPT) return 0;
    if (st != DT_OK) { fprintf(stderr, "unexpected status %s: %s\n", dt_status_name(st), dt_errmsg()); return 1; }
    for (int i = 0; i < f.n; i++) {
        const dt_st_entry *e = &f.t[i];
        size_t nb = (size_t)(e->end - e->begin);
        if (f.data_start + e->end > n) { fprintf(stderr, "accepted tensor past the end\n"); dt_st_close(&f); return 1; }
        void *buf = malloc(nb + 1);
        uint8_t d[DT_SHA256_LEN];
        if (dt_st_read(&f, e, buf, nb) != DT_OK || dt_st_digest(&f, e, d) != DT_OK) {
            fprintf(stderr, "read of accepted tensor failed: %s\n", dt_errmsg());
            free(buf); dt_st_close(&f); return 1;
        }
        free(buf);
    }
    dt_st_close(&f);
    return 0;
}

static int check_json(const uint8_t *b, size_t n) {
    dt_json_value *jv = NULL;
    dt_status st = dt_json_parse((const char *)b, n, "fuzz.json", &jv);
    if (st == DT_OK) {
        int64_t i;
        double d;
        int t;
        uint64_t bits;
        dt_json_get_i64(jv, "n_embd", &i);
        dt_json_get_hex64(jv, "loss_hex", &bits);
        dt_json_as_i64(jv, &i);
        dt_json_as_f64(jv, &d);
        dt_json_as_bool(jv, &t);
        dt_json_equal(jv, jv);
    } else if (st != DT_ECORRUPT || jv != NULL) {
        fprintf(stderr, "json: unexpected status %s\n", dt_status_name(st));
        dt_json_free(jv);
        return 1;
    }
    dt_json_free(jv);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: st_fuzz ITERATIONS SEED WORKDIR\n"); return 2; }
    long iters = atol(argv[1]);
    rng_state = (uint64_t)atoll(argv[2]) * 0x9E3779B97F4A7C15ULL + 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/seed.safetensors", argv[3]);
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i - 5.5f;
    uint16_t h[3] = {1, 2, 3};
    int64_t s = 42;
    dt_st_tensor t[4] = {
        {.name = "transformer.h.0.attn.c_attn.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 6}, .data = w},
        {.name = "b\xc3\xa9", .dtype = DT_BF16, .ndim = 1, .shape = {3}, .data = h},
        {.name = "step", .dtype = DT_I64, .ndim = 0, .data = &s},
        {.name = "z", .dtype = DT_U8, .ndim = 1, .shape = {0}, .data = ""},
    };
    dt_st_meta meta = {"format", "pt"};
    if (dt_st_write(path, t, 4, &meta, 1, NULL) != DT_OK) { fprintf(stderr, "%s\n", dt_errmsg()); return 2; }
    size_t n;
    uint8_t *seed = slurp(path, &n);
    if (!seed) return 2;
    size_t hdr_end = 8;
    for (int i = 0; i < 8; i++) hdr_end += (size_t)seed[i] << (8 * i);
    static const char json_seed[] = "{\"model_type\":\"gpt2\",\"n_embd\":768,\"n_layer\":12,\"eps\":1e-05,"
        "\"arch\":[\"GPT2LMHeadModel\"],\"tie\":true,\"x\":null,\"s\":\"\\u00e9\\ud83d\\ude00\\n\"}";
    size_t cap = 2 * n + 4096;
    uint8_t *buf = malloc(cap);
    int failures = 0;
    long accepted = 0;
    for (long it = 0; it < iters && !failures; it++) {
        uint8_t *copy;
        if (it % 4 == 3) {
            size_t m = mutate((const uint8_t *)json_seed, sizeof json_seed - 1, buf, cap, sizeof json_seed - 1);
            copy = malloc(m ? m : 1); /* exact-size copy so ASan sees reads past the end */
            memcpy(copy, buf, m);
            failures += check_json(copy, m);
        } else {
            size_t m = mutate(seed, n, buf, cap, hdr_end);
            copy = malloc(m ? m : 1);
            memcpy(copy, buf, m);
            dt_st_file f;
            if (dt_st_parse(copy, m, "x", &f) == DT_OK) { accepted++; dt_st_close(&f); }
            failures += check_file(copy, m);
        }
        free(copy);
    }
    printf("st_fuzz: %ld iterations, seed %s, %ld mutants accepted, %d failures\n", iters, argv[2], accepted, failures);
    free(buf);
    free(seed);
    return failures ? 1 : 0;
}
