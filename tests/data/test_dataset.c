/* The loader: the epoch permutation is a permutation, seeded, deterministic, different by
 * epoch and seed (and pinned); an epoch visits every training window once; the cursor
 * resumes the exact batches (also across an epoch boundary); train and validation are
 * disjoint; validation is in fixed order and wraps; sources (comma lists, globs in byte
 * order) and every error case. */
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "dt_test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* A shard of n tokens counting up from `start`, so every window has unique contents:
 * a window is identified by its first token. */
static void make_counting_shard(const char *name, uint16_t start, uint32_t n) {
    uint16_t *t = malloc(n * sizeof *t);
    for (uint32_t i = 0; i < n; i++) t[i] = (uint16_t)(start + i);
    CHECK_OK(dt_shard_write(tmp_path(name), t, n));
    free(t);
}

static int is_permutation(const uint64_t *p, uint64_t n) {
    char *seen = calloc(n, 1);
    int ok = seen != NULL;
    for (uint64_t i = 0; ok && i < n; i++) {
        ok = p[i] < n && !seen[p[i]];
        if (ok) seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_permutation(void) {
    enum { N = 1000 };
    static uint64_t a[N], b[N], c[N], d[N];
    dt_dataset_permutation(1, 0, N, a);
    dt_dataset_permutation(1, 0, N, b);
    dt_dataset_permutation(1, 1, N, c);
    dt_dataset_permutation(2, 0, N, d);
    CHECK(is_permutation(a, N) && is_permutation(c, N) && is_permutation(d, N));
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK(memcmp(a, d, sizeof a) != 0);
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == (uint64_t)i;
    CHECKF(fixed < 10, "%d fixed points", fixed); /* expected ~1 for a random permutation */
    /* epochs beyond 2^32 use the layer field: still distinct */
    dt_dataset_permutation(1, 1ull << 32, N, c);
    CHECK(is_permutation(c, N) && memcmp(a, c, sizeof a) != 0);
    /* pinned: a change to the shuffle or the RNG mapping is caught */
    uint64_t p[10];
    dt_dataset_permutation(1234, 5, 10, p);
    /* computed independently from the documented algorithm (a Python model of philox.h) */
    static const uint64_t want[10] = {6, 4, 8, 0, 3, 9, 5, 2, 7, 1};
    CHECKF(!memcmp(p, want, sizeof p), "got %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
           (unsigned long long)p[0], (unsigned long long)p[1], (unsigned long long)p[2],
           (unsigned long long)p[3], (unsigned long long)p[4], (unsigned long long)p[5],
           (unsigned long long)p[6], (unsigned long long)p[7], (unsigned long long)p[8],
           (unsigned long long)p[9]);
    dt_dataset_permutation(7, 0, 1, p);
    CHECK(p[0] == 0);
}

enum { T = 8, B = 4, WIN = T + 1 };

/* 1000 windows of T+1 in one shard, plus a 5-token tail that must never be used. */
static void test_windows_epoch_and_split(void) {
    make_counting_shard("one.bin", 0, 1000 * WIN + 5);
    dt_dataset *ds = NULL;
    CHECK_OK(dt_dataset_open(&ds, tmp_path("one.bin"), 65536, 42, 0.1f, B, T));
    if (!ds) return;
    CHECK(dt_dataset_tokens(ds) == 1000 * WIN + 5);
    CHECK(dt_dataset_train_windows(ds) == 900 && dt_dataset_val_windows(ds) == 100);
    CHECK(dt_dataset_val_batches(ds) == 25);
    int in[B * T], tg[B * T];
    static int train_seen[1000];
    memset(train_seen, 0, sizeof train_seen);
    int shift_ok = 1, aligned = 1;
    for (int k = 0; k < 900 / B; k++) {
        CHECK_OK(dt_dataset_next_train(ds, in, tg));
        for (int b = 0; b < B; b++) {
            int first = in[b * T];
            aligned &= first % WIN == 0;
            if (first % WIN == 0 && first / WIN < 1000) train_seen[first / WIN]++;
            for (int t = 0; t < T; t++) {
                shift_ok &= in[b * T + t] == first + t;
                shift_ok &= tg[b * T + t] == first + t + 1;
            }
        }
    }
    CHECK(shift_ok && aligned);
    int once = 1;
    for (int w = 0; w < 900; w++) once &= train_seen[w] == 1;
    for (int w = 900; w < 1000; w++) once &= train_seen[w] == 0; /* no val window in train */
    CHECK(once);
    dt_data_cursor c = dt_dataset_get_cursor(ds);
    CHECK(c.epoch == 1 && c.position == 0);
    /* validation: windows 900..999 in order, wrapping */
    int val_ok = 1;
    for (int k = 0; k < 26; k++) {
        CHECK_OK(dt_dataset_next_val(ds, in, tg));
        for (int b = 0; b < B; b++) val_ok &= in[b * T] == (900 + (k * B + b) % 100) * WIN;
    }
    CHECK(val_ok);
    dt_dataset_val_reset(ds);
    CHECK_OK(dt_dataset_next_val(ds, in, tg));
    CHECK(in[0] == 900 * WIN && tg[T - 1] == 900 * WIN + T);
    dt_dataset_free(ds);

    /* val_fraction 0: no validation split; tiny fraction: at least one window */
    CHECK_OK(dt_dataset_open(&ds, tmp_path("one.bin"), 65536, 42, 0.0f, B, T));
    if (ds) {
        CHECK(dt_dataset_val_windows(ds) == 0 && dt_dataset_train_windows(ds) == 1000);
        CHECK(dt_dataset_next_val(ds, in, tg) == DT_ESTATE);
        dt_dataset_free(ds);
    }
    CHECK_OK(dt_dataset_open(&ds, tmp_path("one.bin"), 65536, 42, 1e-6f, B, T));
    if (ds) {
        CHECK(dt_dataset_val_windows(ds) == 1);
        dt_dataset_free(ds);
    }
}

/* Records n batches (inputs only; targets follow from them) into out. */
static void run_batches(dt_dataset *ds, int n, int *out) {
    int tg[B * T];
    for (int k = 0; k < n; k++) CHECK_OK(dt_dataset_next_train(ds, out + k * B * T, tg));
}

static void test_cursor_resume(void) {
    /* 30 train windows: B=4 does not divide it, so batches straddle epochs */
    make_counting_shard("small.bin", 100, 33 * WIN);
    const char *p = tmp_path("small.bin");
    enum { NB = 40, K = 7 };
    static int full[NB * B * T], resumed[NB * B * T], other[NB * B * T];
    dt_dataset *ds = NULL, *ds2 = NULL;
    CHECK_OK(dt_dataset_open(&ds, p, 65536, 9, 0.1f, B, T));
    if (!ds) return;
    CHECK(dt_dataset_train_windows(ds) == 30);
    run_batches(ds, K, full);
    dt_data_cursor saved = dt_dataset_get_cursor(ds);
    CHECK(saved.epoch == 0 && saved.position == K * B);
    run_batches(ds, NB - K, full + K * B * T);
    dt_data_cursor end = dt_dataset_get_cursor(ds);
    CHECK(end.epoch == (uint64_t)(NB * B) / 30 && end.position == (uint64_t)(NB * B) % 30);

    /* a fresh dataset resumed at the saved cursor replays the same batches */
    CHECK_OK(dt_dataset_open(&ds2, p, 65536, 9, 0.1f, B, T));
    if (ds2) {
        CHECK_OK(dt_dataset_set_cursor(ds2, saved));
        run_batches(ds2, NB - K, resumed);
        CHECK(!memcmp(resumed, full + K * B * T, sizeof(int) * (NB - K) * B * T));
        /* and a cursor in a later epoch, set on an object that is elsewhere */
        dt_data_cursor later = {2, 5};
        CHECK_OK(dt_dataset_set_cursor(ds2, later));
        run_batches(ds2, 1, resumed);
        uint64_t perm[30];
        dt_dataset_permutation(9, 2, 30, perm);
        int ok = 1;
        for (int b = 0; b < B; b++) ok &= resumed[b * T] == 100 + (int)perm[5 + b] * WIN;
        CHECK(ok);
        dt_data_cursor bad = {0, 30};
        CHECK(dt_dataset_set_cursor(ds2, bad) == DT_EINVAL);
        CHECK(strstr(dt_errmsg(), "position 30") != NULL);
        dt_dataset_free(ds2);
    }
    /* two runs with the same seed are identical; another seed differs */
    CHECK_OK(dt_dataset_open(&ds2, p, 65536, 9, 0.1f, B, T));
    if (ds2) {
        run_batches(ds2, NB, other);
        CHECK(!memcmp(other, full, sizeof full));
        dt_dataset_free(ds2);
    }
    CHECK_OK(dt_dataset_open(&ds2, p, 65536, 10, 0.1f, B, T));
    if (ds2) {
        run_batches(ds2, NB, other);
        CHECK(memcmp(other, full, sizeof full) != 0);
        dt_dataset_free(ds2);
    }
    /* epoch 0 and epoch 1 of the same run come in different orders */
    CHECK(memcmp(full, full + 30 * T, sizeof(int) * 28 * T) != 0);
    dt_dataset_free(ds);
}

static void test_sources(void) {
    /* windows never span shards; globs are sorted by bytes; a comma list keeps its order */
    make_counting_shard("g_b.bin", 5000, 10 * WIN + 3);
    make_counting_shard("g_a.bin", 1000, 10 * WIN + 3);
    make_counting_shard("g_c.bin", 9000, 3);       /* no whole window */
    dt_dataset *ds = NULL;
    char list[600];
    snprintf(list, sizeof list, "%s,%s", tmp_path("g_b.bin"), tmp_path("g_a.bin"));
    CHECK_OK(dt_dataset_open(&ds, list, 65536, 1, 0.25f, B, T));
    int in[B * T], tg[B * T];
    if (ds) {
        CHECK(dt_dataset_train_windows(ds) == 15 && dt_dataset_val_windows(ds) == 5);
        CHECK_OK(dt_dataset_next_val(ds, in, tg)); /* last 5 windows: g_a's windows 5.. */
        CHECK(in[0] == 1000 + 5 * WIN && in[T] == 1000 + 6 * WIN);
        dt_dataset_free(ds);
    }
    CHECK_OK(dt_dataset_open(&ds, tmp_path("g_*.bin"), 65536, 1, 0.25f, B, T));
    if (ds) {
        CHECK(dt_dataset_tokens(ds) == 2 * (10 * WIN + 3) + 3);
        CHECK_OK(dt_dataset_next_val(ds, in, tg)); /* sorted a, b, c: last windows in b */
        CHECK(in[0] == 5000 + 5 * WIN);
        int ok = 1;
        for (int k = 0; k < 20; k++) {
            CHECK_OK(dt_dataset_next_train(ds, in, tg));
            for (int b = 0; b < B; b++) {
                int f = in[b * T];
                ok &= (f >= 1000 && f < 1000 + 10 * WIN && (f - 1000) % WIN == 0) ||
                      (f >= 5000 && f < 5000 + 5 * WIN && (f - 5000) % WIN == 0);
            }
        }
        CHECK(ok);
        dt_dataset_free(ds);
    }
    /* the built-in corpus */
    CHECK_OK(dt_dataset_open(&ds, NULL, 256, 1, 0.05f, 4, 64));
    if (ds) {
        CHECK(dt_dataset_tokens(ds) == DT_CORPUS_BYTES);
        CHECK(dt_dataset_train_windows(ds) + dt_dataset_val_windows(ds) == DT_CORPUS_BYTES / 65);
        CHECK(strstr(dt_dataset_describe(ds), "built-in corpus") != NULL);
        int bin[4 * 64], btg[4 * 64];
        CHECK_OK(dt_dataset_next_train(ds, bin, btg));
        int ok = 1;
        for (int i = 0; i < 4 * 64; i++) ok &= bin[i] >= 0 && bin[i] < 128;
        CHECK(ok);
        dt_dataset_free(ds);
    }
}

static void test_errors(void) {
    dt_dataset *ds = (dt_dataset *)1;
    make_counting_shard("tiny.bin", 0, 5 * WIN);
    CHECK(dt_dataset_open(&ds, tmp_path("tiny.bin"), 65536, 1, 0.5f, B, T) == DT_EINVAL);
    CHECK(ds == NULL);
    CHECKF(strstr(dt_errmsg(), "too small") && strstr(dt_errmsg(), "tiny.bin"), "%s",
           dt_errmsg());
    CHECK_OK(dt_dataset_open(&ds, tmp_path("tiny.bin"), 65536, 1, 0.0f, 5, T));
    dt_dataset_free(ds);
    CHECK(dt_dataset_open(&ds, tmp_path("nope_*.bin"), 65536, 1, 0.1f, B, T) == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "matches no files") != NULL);
    CHECK(dt_dataset_open(&ds, tmp_path("missing.bin"), 65536, 1, 0.1f, B, T) == DT_EIO);
    CHECK(dt_dataset_open(&ds, ",", 65536, 1, 0.1f, B, T) == DT_EINVAL);
    CHECK(dt_dataset_open(&ds, tmp_path("tiny.bin"), 40, 1, 0.1f, 1, T) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "tiny.bin") && strstr(dt_errmsg(), ">= vocab size 40"));
    CHECK(dt_dataset_open(&ds, NULL, 100, 1, 0.1f, B, T) == DT_EINVAL);
    CHECK(dt_dataset_open(&ds, NULL, 256, 1, 0.6f, B, T) == DT_EINVAL);
    CHECK(dt_dataset_open(&ds, NULL, 256, 1, -0.1f, B, T) == DT_EINVAL);
    CHECK(dt_dataset_open(&ds, NULL, 256, 1, 0.1f, 0, T) == DT_EINVAL);
    CHECK(dt_dataset_open(&ds, NULL, 256, 1, 0.1f, B, 0) == DT_EINVAL);
    CHECK(ds == NULL);
}

int main(void) {
    dt_test_scratch(dir, sizeof dir, "test_dataset");
    RUN(test_permutation);
    RUN(test_windows_epoch_and_split);
    RUN(test_cursor_resume);
    RUN(test_sources);
    RUN(test_errors);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
