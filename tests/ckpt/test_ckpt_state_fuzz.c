/* Seeded mutation fuzz of the checkpoint state-file reader (ckpt_view.c: self digest,
 * strict JSON, field checks, file and tensor records). Each mutant of a valid state.json
 * (bit flips, structural bytes, truncation, deleted/duplicated lines, numbers replaced by
 * edge values, inserted bytes) is written over the checkpoint's state.json and, in 9 of
 * 10 cases, re-digested (state_sha256 recomputed) so it reaches the parser and the field
 * checks instead of stopping at the digest. The reader must return DT_OK or a corruption
 * status (ECORRUPT, EMISMATCH, EUNSUPPORTED) and never crash, leak or read out of bounds.
 *
 * Modes:
 *   test_ckpt_state_fuzz                 (test suite) saves a small checkpoint with the
 *                                        library, then 1500 mutants, seed 1
 *   test_ckpt_state_fuzz N SEED ITERDIR  N mutants of ITERDIR/state.json (restored at the
 *                                        end); tests/ckpt/test_ckpt_state_fuzz.sh builds
 *                                        this mode alone with -DDT_FUZZ_ONLY under
 *                                        AddressSanitizer + UBSan */
#include "ckpt/ckpt_view.h"
#include "dt_test.h"

#ifndef DT_FUZZ_ONLY
#include "ckpt/ckpt.h"
#endif

#include "fuzz/fuzz_rng.h"

static const char *const NUMBERS[] = {"-1", "0", "1e400", "18446744073709551616", "9223372036854775808",
                                      "0.5", "1e3", "-0", "00", "4294967296", "99999999999999999999999"};
static const char STRUCT[] = "\"{}[],:09-e. \\\x01\xff";

/* Applies one mutation to buf (len *n, capacity cap). */
static void mutate(char *buf, size_t *n, size_t cap) {
    size_t len = *n, i = below(len);
    switch (below(7)) {
    case 0: if (len) buf[i] ^= (char)(1u << below(8)); break;
    case 1: if (len) buf[i] = STRUCT[below(sizeof STRUCT - 1)]; break;
    case 2: *n = below(len + 1); break;
    case 3: case 4: { /* delete or duplicate the line holding i */
        size_t a = i, b = i;
        while (a > 0 && buf[a - 1] != '\n') a--;
        while (b < len && buf[b] != '\n') b++;
        if (b < len) b++;
        size_t l = b - a;
        if (l == 0) break;
        if (buf[i] & 1 && len + l <= cap) {
            memmove(buf + b + l, buf + b, len - b);
            memcpy(buf + b, buf + a, l);
            *n = len + l;
        } else {
            memmove(buf + a, buf + b, len - b);
            *n = len - l;
        }
        break;
    }
    case 5: { /* a run of digits becomes an edge-case number */
        while (i < len && (buf[i] < '0' || buf[i] > '9')) i++;
        size_t e = i;
        while (e < len && buf[e] >= '0' && buf[e] <= '9') e++;
        const char *r = NUMBERS[below(sizeof NUMBERS / sizeof NUMBERS[0])];
        size_t rl = strlen(r);
        if (e == i || len - (e - i) + rl > cap) break;
        memmove(buf + i + rl, buf + e, len - e);
        memcpy(buf + i, r, rl);
        *n = len - (e - i) + rl;
        break;
    }
    default: { /* insert a few random bytes */
        size_t k = 1 + below(8);
        if (len + k > cap) break;
        memmove(buf + i + k, buf + i, len - i);
        for (size_t j = 0; j < k; j++) buf[i + j] = (char)rnd();
        *n = len + k;
    }
    }
}

/* Writes buf as a new file (unlinking the old one first: truncating and rewriting a file
 * makes ext4 flush it on close, which was most of this test's time). */
static int write_file(const char *path, const char *buf, size_t n) {
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(buf, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Runs iters mutants against dir (an iteration directory). Returns the number accepted. */
static int fuzz(const char *dir, int iters, uint64_t seed) {
    char path[4200];
    snprintf(path, sizeof path, "%s/state.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) { CHECKF(0, "cannot open %s", path); return 0; }
    size_t cap = 1 << 20;
    char *orig = malloc(cap), *buf = malloc(cap);
    size_t olen = fread(orig, 1, cap, f);
    fclose(f);
    dt_ckpt_view v;
    CHECK_OK(dt_ckpt_view_open(dir, &v)); /* the seed file is valid */
    dt_ckpt_view_close(&v);
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    int accepted = 0, digested = 0;
    for (int it = 0; it < iters; it++) {
        size_t n = olen;
        memcpy(buf, orig, olen);
        for (int k = 1 + (int)below(3); k > 0; k--) mutate(buf, &n, cap);
        char *hex = dt_ckpt_self_digest_at(buf, n);
        if (hex && below(10) != 0) { /* re-digest: reach the parser and the field checks */
            uint8_t d[DT_SHA256_LEN];
            char h[2 * DT_SHA256_LEN + 1];
            memset(hex, '0', 2 * DT_SHA256_LEN);
            dt_sha256_buf(buf, n, d);
            dt_sha256_hex(d, h);
            memcpy(hex, h, 2 * DT_SHA256_LEN);
            digested++;
        }
        if (write_file(path, buf, n) != 0) { CHECKF(0, "cannot write %s", path); break; }
        dt_status st = dt_ckpt_view_open(dir, &v);
        if (st == DT_OK) {
            accepted++;
            dt_ckpt_view_close(&v);
        } else if (st != DT_ECORRUPT && st != DT_EMISMATCH && st != DT_EUNSUPPORTED) {
            CHECKF(0, "mutant %d: unexpected %s: %s", it, dt_status_name(st), dt_errmsg());
            break;
        }
    }
    CHECK(write_file(path, orig, olen) == 0);
    CHECK_OK(dt_ckpt_view_open(dir, &v));
    dt_ckpt_view_close(&v);
    fprintf(stderr, "%d mutants (%d re-digested), %d accepted\n", iters, digested, accepted);
    CHECK(digested > iters / 2);
    free(orig);
    free(buf);
    return accepted;
}

int main(int argc, char **argv) {
    if (argc == 4) {
        fuzz(argv[3], atoi(argv[1]), (uint64_t)strtoull(argv[2], NULL, 10));
        return dt_test_report();
    }
#ifdef DT_FUZZ_ONLY
    fprintf(stderr, "usage: %s N SEED ITERDIR\n", argv[0]);
    return 2;
#else
    (void)argv;
    char root[256], it[300];
    dt_test_scratch(root, sizeof root, "ckpt_fuzz");
    dt_gpt_config c = {.max_seq_len = 8, .vocab_size = 64, .num_layers = 1, .num_heads = 2, .channels = 8};
    dt_gpt *m = NULL;
    dt_adamw opt;
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    dt_ckpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    dt_ckpt_config_int(&cfg, "hidden_size", "--hidden-size", 8, 1);
    dt_ckpt_config_str(&cfg, "data_path", "--data-path", NULL, 1);
    dt_ckpt_config_int(&cfg, "train_iters", "--train-iters", 3, 0);
    dt_ckpt_state s = {.step = 3, .consumed_samples = 3, .consumed_tokens = 24, .cursor = {0, 3},
                       .train_windows = 50, .seed = 9, .micro_steps = 3};
    CHECK_OK(dt_gpt_config_finish(&c));
    CHECK_OK(dt_gpt_create(&m, &c, 1, 8, 9));
    CHECK_OK(dt_adamw_init(&opt, &ac, m->num_params));
    CHECK_OK(dt_ckpt_save(root, m, &opt, &s, &cfg));
    snprintf(it, sizeof it, "%s/iter_0000003", root);
    fuzz(it, 1500, 1);
    dt_gpt_free(m);
    dt_adamw_free(&opt);
    dt_ckpt_config_free(&cfg);
    dt_test_scratch_remove(root);
    return dt_test_report();
#endif
}
