/* The data loader (see dataset.h): sources, windows, the seeded epoch shuffle, the
 * validation split and the resumable cursor. */
#include "data/dataset.h"

#include "core/philox.h"
#include "data/corpus.h"
#include "data/shard.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct source {
    const uint16_t *tokens;
    uint64_t ntokens;
    uint64_t first_window; /* global index of this source's first window */
    uint64_t nwindows;
    dt_shard *shard;       /* NULL for the built-in corpus */
} source;

struct dt_dataset {
    source *src;
    int nsrc;
    uint16_t *corpus; /* owned built-in tokens, or NULL */
    int B, T;
    uint64_t seed;
    uint64_t ntokens, nwindows, ntrain, nval;
    uint64_t *perm;   /* permutation of the current epoch, ntrain entries */
    dt_data_cursor cur;
    uint64_t val_pos;
    char desc[256];
};

void dt_dataset_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm) {
    for (uint64_t i = 0; i < n; i++) perm[i] = i;
    uint32_t step = (uint32_t)epoch, layer = (uint32_t)(epoch >> 32);
    /* Fisher–Yates from the top; a 64-bit draw makes the modulo bias (< n / 2^64)
     * negligible without rejection sampling, so each i uses exactly two words. */
    for (uint64_t i = n; i-- > 1;) {
        uint64_t hi = dt_rng_u32(seed, DT_RNG_DATA_SHUFFLE, step, layer, 2 * i);
        uint64_t lo = dt_rng_u32(seed, DT_RNG_DATA_SHUFFLE, step, layer, 2 * i + 1);
        uint64_t j = (hi << 32 | lo) % (i + 1);
        uint64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---- opening sources --------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static dt_status add_shard(dt_dataset *ds, const char *path, int vocab_size) {
    source *grown = realloc(ds->src, (size_t)(ds->nsrc + 1) * sizeof *grown);
    if (!grown) return dt_fail(DT_ENOMEM, "data: out of memory opening %s", path);
    ds->src = grown;
    source *s = &ds->src[ds->nsrc];
    memset(s, 0, sizeof *s);
    dt_status st = dt_shard_open(&s->shard, path, vocab_size);
    if (st != DT_OK) return st;
    s->tokens = s->shard->tokens;
    s->ntokens = s->shard->ntokens;
    ds->nsrc++;
    return DT_OK;
}

/* One comma-separated item: a glob when it has glob characters, else a plain path. */
static dt_status add_item(dt_dataset *ds, const char *item, int vocab_size) {
    if (!strpbrk(item, "*?[")) return add_shard(ds, item, vocab_size);
    glob_t g;
    /* GLOB_NOSORT + strcmp: the order must not depend on the locale's collation. */
    int rc = glob(item, GLOB_NOSORT | GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) globfree(&g);
        return dt_fail(DT_EINVAL, "data path '%s' matches no files", item);
    }
    if (rc != 0) return dt_fail(DT_EIO, "data path '%s': cannot expand the pattern", item);
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    dt_status st = DT_OK;
    for (size_t i = 0; i < g.gl_pathc && st == DT_OK; i++)
        st = add_shard(ds, g.gl_pathv[i], vocab_size);
    globfree(&g);
    return st;
}

static dt_status add_paths(dt_dataset *ds, const char *data_path, int vocab_size) {
    size_t n = strlen(data_path);
    char *copy = malloc(n + 1);
    if (!copy) return dt_fail(DT_ENOMEM, "data: out of memory");
    memcpy(copy, data_path, n + 1);
    dt_status st = DT_OK;
    char *save = NULL;
    int items = 0;
    for (char *it = strtok_r(copy, ",", &save); it && st == DT_OK;
         it = strtok_r(NULL, ",", &save)) {
        if (!*it) continue;
        st = add_item(ds, it, vocab_size);
        items++;
    }
    free(copy);
    if (st == DT_OK && items == 0)
        st = dt_fail(DT_EINVAL, "data path '%s' names no files", data_path);
    return st;
}

static dt_status add_builtin(dt_dataset *ds, int vocab_size) {
    if (vocab_size < DT_CORPUS_VOCAB)
        return dt_fail(DT_EINVAL,
                       "the built-in corpus is byte-level and needs vocab_size >= %d (got %d)",
                       DT_CORPUS_VOCAB, vocab_size);
    uint64_t n;
    dt_status st = dt_corpus_tokens(&ds->corpus, &n);
    if (st != DT_OK) return st;
    ds->src = calloc(1, sizeof *ds->src);
    if (!ds->src) return dt_fail(DT_ENOMEM, "data: out of memory");
    ds->src[0].tokens = ds->corpus;
    ds->src[0].ntokens = n;
    ds->nsrc = 1;
    return DT_OK;
}

/* Synthetic tokens drawn uniformly over [0, vocab_size), keyed by (seed, index): the
 * uniform case of the bench (real batches are skewed; this is the contrast). */
static dt_status add_uniform(dt_dataset *ds, int vocab_size, uint64_t seed) {
    const uint64_t n = (uint64_t)1 << 22;
    ds->corpus = malloc(sizeof(uint16_t) * n);
    ds->src = calloc(1, sizeof *ds->src);
    if (!ds->corpus || !ds->src) return dt_fail(DT_ENOMEM, "data: out of memory");
    for (uint64_t i = 0; i < n; i++)
        ds->corpus[i] = (uint16_t)(dt_rng_u32(seed, DT_RNG_UNIFORM_TOKENS, 0, 0, i) % (uint32_t)vocab_size);
    ds->src[0].tokens = ds->corpus;
    ds->src[0].ntokens = n;
    ds->nsrc = 1;
    return DT_OK;
}

dt_status dt_dataset_open(dt_dataset **out, const char *data_path, int vocab_size,
                          uint64_t seed, float val_fraction, int B, int T) {
    return dt_dataset_open_source(out, data_path, 0, vocab_size, seed, val_fraction, B, T);
}

dt_status dt_dataset_open_source(dt_dataset **out, const char *data_path, int uniform, int vocab_size,
                                 uint64_t seed, float val_fraction, int B, int T) {
    *out = NULL;
    if (B < 1 || T < 1)
        return dt_fail(DT_EINVAL, "data: batch size B=%d and sequence length T=%d must be >= 1",
                       B, T);
    if (vocab_size < 1 || vocab_size > 65536)
        return dt_fail(DT_EINVAL, "data: vocab_size %d out of range [1, 65536]", vocab_size);
    if (!(val_fraction >= 0.0f && val_fraction <= 0.5f))
        return dt_fail(DT_EINVAL, "data: val_fraction %g must be in [0, 0.5]",
                       (double)val_fraction);
    dt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return dt_fail(DT_ENOMEM, "data: out of memory");
    ds->B = B;
    ds->T = T;
    ds->seed = seed;
    int builtin = !uniform && (!data_path || !*data_path || !strcmp(data_path, "builtin"));
    dt_status st = uniform ? (data_path ? dt_fail(DT_EINVAL, "data: uniform synthetic tokens and a data path '%s' "
                                                  "both given; choose one", data_path)
                                        : add_uniform(ds, vocab_size, seed))
                 : builtin ? add_builtin(ds, vocab_size) : add_paths(ds, data_path, vocab_size);
    if (st != DT_OK) {
        dt_dataset_free(ds);
        return st;
    }
    uint64_t win = (uint64_t)T + 1;
    for (int i = 0; i < ds->nsrc; i++) {
        source *s = &ds->src[i];
        s->first_window = ds->nwindows;
        s->nwindows = s->ntokens / win;
        ds->nwindows += s->nwindows;
        ds->ntokens += s->ntokens;
    }
    if (val_fraction > 0.0f) {
        ds->nval = (uint64_t)((double)ds->nwindows * (double)val_fraction);
        if (ds->nval < 1) ds->nval = 1;
    }
    ds->ntrain = ds->nwindows > ds->nval ? ds->nwindows - ds->nval : 0;
    const char *name = uniform ? "uniform synthetic tokens" : builtin ? "built-in corpus" : data_path;
    if (ds->ntrain < (uint64_t)B) {
        st = dt_fail(DT_EINVAL,
                     "data %s is too small: %llu tokens give %llu windows of T+1=%d tokens "
                     "(%llu for validation), fewer than one batch of B=%d training windows; "
                     "use more data or a smaller B, T or val fraction",
                     name, (unsigned long long)ds->ntokens, (unsigned long long)ds->nwindows,
                     T + 1, (unsigned long long)ds->nval, B);
        dt_dataset_free(ds);
        return st;
    }
    ds->perm = malloc(ds->ntrain * sizeof *ds->perm);
    if (!ds->perm) {
        dt_dataset_free(ds);
        return dt_fail(DT_ENOMEM, "data: cannot allocate the permutation of %llu windows",
                       (unsigned long long)ds->ntrain);
    }
    dt_dataset_permutation(seed, 0, ds->ntrain, ds->perm);
    snprintf(ds->desc, sizeof ds->desc,
             "%.120s: %d source(s), %llu tokens, %llu train + %llu val windows of T+1=%d",
             name, ds->nsrc, (unsigned long long)ds->ntokens, (unsigned long long)ds->ntrain,
             (unsigned long long)ds->nval, T + 1);
    *out = ds;
    return DT_OK;
}

void dt_dataset_free(dt_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < ds->nsrc; i++) dt_shard_close(ds->src[i].shard);
    free(ds->src);
    free(ds->corpus);
    free(ds->perm);
    free(ds);
}

/* ---- batches ----------------------------------------------------------------------- */

/* Copies global window w into row `row` of inputs/targets. */
static void copy_window(const dt_dataset *ds, uint64_t w, int row, int *inputs, int *targets) {
    int lo = 0, hi = ds->nsrc - 1; /* last source with first_window <= w */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ds->src[mid].first_window <= w) lo = mid;
        else hi = mid - 1;
    }
    /* Sources after `lo` start beyond w, so w lies inside src[lo] (even when empty
     * sources share its first_window: the search picks the last of them). */
    const source *s = &ds->src[lo];
    const uint16_t *t = s->tokens + (w - s->first_window) * ((uint64_t)ds->T + 1);
    int *in = inputs + (size_t)row * (size_t)ds->T, *tg = targets + (size_t)row * (size_t)ds->T;
    for (int i = 0; i < ds->T; i++) {
        in[i] = t[i];
        tg[i] = t[i + 1];
    }
}

dt_status dt_dataset_next_train(dt_dataset *ds, int *inputs, int *targets) {
    for (int b = 0; b < ds->B; b++) {
        if (ds->cur.position == ds->ntrain) {
            ds->cur.epoch++;
            ds->cur.position = 0;
            dt_dataset_permutation(ds->seed, ds->cur.epoch, ds->ntrain, ds->perm);
        }
        copy_window(ds, ds->perm[ds->cur.position++], b, inputs, targets);
    }
    /* Normalise so the saved cursor after an epoch's last batch is (epoch+1, 0). */
    if (ds->cur.position == ds->ntrain) {
        ds->cur.epoch++;
        ds->cur.position = 0;
        dt_dataset_permutation(ds->seed, ds->cur.epoch, ds->ntrain, ds->perm);
    }
    return DT_OK;
}

void dt_dataset_skip_train(dt_dataset *ds, uint64_t n) {
    uint64_t epochs = n / ds->ntrain, rest = n % ds->ntrain;
    uint64_t epoch = ds->cur.epoch + epochs, position = ds->cur.position + rest;
    if (position >= ds->ntrain) {
        epoch++;
        position -= ds->ntrain;
    }
    /* one permutation for the epoch the cursor lands in, as next_train leaves it */
    if (epoch != ds->cur.epoch) dt_dataset_permutation(ds->seed, epoch, ds->ntrain, ds->perm);
    ds->cur.epoch = epoch;
    ds->cur.position = position;
}

dt_data_cursor dt_dataset_get_cursor(const dt_dataset *ds) { return ds->cur; }

dt_status dt_dataset_set_cursor(dt_dataset *ds, dt_data_cursor c) {
    if (c.position >= ds->ntrain)
        return dt_fail(DT_EINVAL,
                       "data cursor position %llu is outside the %llu training windows; was "
                       "the checkpoint made with different data, T or val fraction?",
                       (unsigned long long)c.position, (unsigned long long)ds->ntrain);
    if (c.epoch != ds->cur.epoch) dt_dataset_permutation(ds->seed, c.epoch, ds->ntrain, ds->perm);
    ds->cur = c;
    return DT_OK;
}

void dt_dataset_val_reset(dt_dataset *ds) { ds->val_pos = 0; }

dt_status dt_dataset_next_val(dt_dataset *ds, int *inputs, int *targets) {
    if (ds->nval == 0)
        return dt_fail(DT_ESTATE, "data: no validation split (val fraction is 0)");
    for (int b = 0; b < ds->B; b++) {
        copy_window(ds, ds->ntrain + ds->val_pos, b, inputs, targets);
        ds->val_pos = (ds->val_pos + 1) % ds->nval;
    }
    return DT_OK;
}

uint64_t dt_dataset_train_windows(const dt_dataset *ds) { return ds->ntrain; }
uint64_t dt_dataset_val_windows(const dt_dataset *ds) { return ds->nval; }
uint64_t dt_dataset_tokens(const dt_dataset *ds) { return ds->ntokens; }
uint64_t dt_dataset_val_batches(const dt_dataset *ds) {
    return (ds->nval + (uint64_t)ds->B - 1) / (uint64_t)ds->B;
}
const char *dt_dataset_describe(const dt_dataset *ds) { return ds->desc; }
