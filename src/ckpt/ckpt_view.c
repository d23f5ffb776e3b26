/* Opening and verifying a checkpoint directory (see ckpt_view.h and ckpt.h). Every check
 * names the file and what is wrong; nothing read from disk is trusted before it is
 * checked. */
#include "ckpt/ckpt_view.h"

#include "ckpt/hf_gpt2.h"
#include "ckpt/tracker.h"
#include "core/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const dt_ckpt_files[DT_CKPT_NFILES] = {DT_HF_WEIGHTS_NAME, DT_HF_CONFIG_NAME,
                                                   DT_CKPT_OPTIM_NAME, DT_CKPT_ENV_NAME};

#define MAX_STATE_BYTES (64u << 20)

/* ---------------------------------------------------------------- helpers */

char *dt_ckpt_self_digest_at(char *text, size_t n) {
    static const char key[] = "\"" DT_CKPT_SELF_DIGEST_KEY "\": \"";
    size_t k = sizeof key - 1;
    char *hit = NULL;
    for (size_t i = 0; i + k + 2 * DT_SHA256_LEN <= n; i++)
        if (text[i] == '"' && memcmp(text + i, key, k) == 0) hit = text + i + k;
    return hit;
}

dt_status dt_ckpt_file_digest(const char *path, uint64_t *bytes, uint8_t out[DT_SHA256_LEN]) {
    int fd;
    dt_status ost = dt_open_regular(path, &fd, NULL);
    if (ost != DT_OK) return ost;
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) { close(fd); return dt_fail(DT_ENOMEM, "out of memory hashing '%s'", path); }
    dt_sha256 h;
    dt_sha256_init(&h);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            close(fd);
            return dt_fail(DT_EIO, "cannot read '%s': %s", path, strerror(errno));
        }
        if (r == 0) break;
        dt_sha256_update(&h, buf, (size_t)r);
        total += (uint64_t)r;
    }
    free(buf);
    close(fd);
    dt_sha256_final(&h, out);
    *bytes = total;
    return DT_OK;
}

int dt_ckpt_json_equal(const dt_json_value *a, const dt_json_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case DT_JSON_BOOL:
    case DT_JSON_NUMBER:
    case DT_JSON_STRING: return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
    case DT_JSON_ARRAY:
    case DT_JSON_OBJECT:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            if (a->type == DT_JSON_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0) return 0;
            if (!dt_ckpt_json_equal(&a->items[i], &b->items[i])) return 0;
        }
        return 1;
    default: return 1;
    }
}

void dt_ckpt_json_text(const dt_json_value *v, char *buf, size_t cap) {
    switch (v->type) {
    case DT_JSON_NULL:
    case DT_JSON_BOOL:
    case DT_JSON_NUMBER: snprintf(buf, cap, "%s", v->text); break; /* the literal as written */
    case DT_JSON_STRING: snprintf(buf, cap, "\"%s\"", v->text); break;
    default: snprintf(buf, cap, "(%s)", v->type == DT_JSON_ARRAY ? "array" : "object"); break;
    }
}

static dt_status read_text(const char *path, char **out, size_t *n) {
    FILE *f;
    int oerr;
    dt_status ost = dt_fopen_regular(path, &f, &oerr);
    if (ost != DT_OK) {
        if (oerr == ENOENT)
            return dt_fail(DT_EIO, "'%s' does not exist: not a checkpoint directory, or its save did "
                           "not complete (load the save directory to use its last complete checkpoint)",
                           path);
        return ost;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size > MAX_STATE_BYTES) {
        fclose(f);
        return dt_fail(DT_ECORRUPT, "'%s' is missing or larger than %u bytes", path, MAX_STATE_BYTES);
    }
    size_t len = (size_t)sb.st_size;
    char *buf = malloc(len + 1);
    if (!buf) { fclose(f); return dt_fail(DT_ENOMEM, "out of memory reading '%s'", path); }
    size_t got = fread(buf, 1, len, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != len) { free(buf); return dt_fail(DT_EIO, "cannot read '%s'", path); }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return DT_OK;
}

/* Field readers: each failure names state.json and the field. */
typedef struct ctx {
    const char *path;
} ctx;

static dt_status missing(const ctx *c, const char *field, const char *want) {
    return dt_fail(DT_ECORRUPT, "'%s': \"%s\" is missing or not %s", c->path, field, want);
}

static const dt_json_value *get_kind(const dt_json_value *o, const char *key, dt_json_type k) {
    const dt_json_value *v = dt_json_get(o, key);
    return v && v->type == k ? v : NULL;
}

static dt_status get_i64(const ctx *c, const dt_json_value *o, const char *key, int64_t *out) {
    const dt_json_value *v = dt_json_get(o, key);
    if (!v || !dt_json_as_i64(v, out) || *out < 0) return missing(c, key, "a non-negative integer");
    return DT_OK;
}

static dt_status get_u64(const ctx *c, const dt_json_value *o, const char *key, uint64_t *out) {
    const dt_json_value *v = dt_json_get(o, key);
    if (!v || v->type != DT_JSON_NUMBER || v->len == 0 || v->len > 20) goto bad;
    uint64_t x = 0;
    for (size_t i = 0; i < v->len; i++) {
        char ch = v->text[i];
        if (ch < '0' || ch > '9') goto bad;
        uint64_t d = (uint64_t)(ch - '0');
        if (x > (UINT64_MAX - d) / 10) goto bad;
        x = x * 10 + d;
    }
    *out = x;
    return DT_OK;
bad:
    return missing(c, key, "an unsigned 64-bit integer");
}

static dt_status get_str_is(const ctx *c, const dt_json_value *o, const char *key, const char *want) {
    const dt_json_value *v = get_kind(o, key, DT_JSON_STRING);
    if (!v || strcmp(v->text, want) != 0)
        return dt_fail(DT_ECORRUPT, "'%s': \"%s\" must be \"%s\"", c->path, key, want);
    return DT_OK;
}

static int parse_hex(const dt_json_value *v, uint8_t out[DT_SHA256_LEN]) {
    if (!v || v->type != DT_JSON_STRING || v->len != 2 * DT_SHA256_LEN) return 0;
    for (int i = 0; i < 2 * DT_SHA256_LEN; i++) {
        char ch = v->text[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return 0;
        if (i % 2 == 0) out[i / 2] = (uint8_t)(d << 4);
        else out[i / 2] |= (uint8_t)d;
    }
    return 1;
}

/* ---------------------------------------------------------------- verification */

static dt_status check_self_digest(const ctx *c, char *text, size_t n) {
    char *hex = dt_ckpt_self_digest_at(text, n);
    if (!hex) return dt_fail(DT_ECORRUPT, "'%s': no \"%s\" member (truncated or not a checkpoint "
                             "state file)", c->path, DT_CKPT_SELF_DIGEST_KEY);
    char saved[2 * DT_SHA256_LEN + 1], got[2 * DT_SHA256_LEN + 1];
    memcpy(saved, hex, 2 * DT_SHA256_LEN);
    saved[2 * DT_SHA256_LEN] = 0;
    memset(hex, '0', 2 * DT_SHA256_LEN);
    uint8_t d[DT_SHA256_LEN];
    dt_sha256_buf(text, n, d);
    memcpy(hex, saved, 2 * DT_SHA256_LEN);
    dt_sha256_hex(d, got);
    if (strcmp(saved, got) != 0)
        return dt_fail(DT_ECORRUPT, "'%s': contents do not match its %s (records %.16s..., contents "
                       "hash to %.16s...): the file is corrupt", c->path, DT_CKPT_SELF_DIGEST_KEY,
                       saved, got);
    return DT_OK;
}

static void shape_text(char *buf, size_t cap, const char *dtype, int ndim, const int64_t *shape) {
    int k = snprintf(buf, cap, "%s [", dtype);
    for (int d = 0; d < ndim && k > 0 && (size_t)k < cap; d++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k > 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, "]");
}

/* The file's tensors must be exactly the recorded list (name, dtype, shape, in order) and
 * each must hash to its recorded digest. */
static dt_status check_tensors(const ctx *c, const char *name, const dt_json_value *list, const dt_st_file *f) {
    if (!list || list->type != DT_JSON_ARRAY)
        return dt_fail(DT_ECORRUPT, "'%s': \"tensors\" has no list for %s", c->path, name);
    if ((size_t)f->n != list->n)
        return dt_fail(DT_ECORRUPT, "'%s' holds %d tensors but '%s' records %zu: a tensor is missing "
                       "or extra", f->label, f->n, c->path, list->n);
    for (int i = 0; i < f->n; i++) {
        const dt_st_entry *e = &f->t[i];
        const dt_json_value *r = &list->items[i];
        const dt_json_value *nm = get_kind(r, "name", DT_JSON_STRING), *dt = get_kind(r, "dtype", DT_JSON_STRING);
        const dt_json_value *sh = get_kind(r, "shape", DT_JSON_ARRAY);
        uint8_t want[DT_SHA256_LEN], got[DT_SHA256_LEN];
        if (!nm || !dt || !sh || sh->n > DT_ST_MAX_DIMS || !parse_hex(dt_json_get(r, "sha256"), want))
            return dt_fail(DT_ECORRUPT, "'%s': entry %d of the %s tensor list is malformed", c->path, i, name);
        if (strcmp(nm->text, e->name) != 0)
            return dt_fail(DT_ECORRUPT, "'%s': tensor %d is \"%s\" but '%s' records \"%s\"", f->label, i,
                           e->name, c->path, nm->text);
        int64_t shape[DT_ST_MAX_DIMS];
        int same = strcmp(dt->text, dt_dtype_name(e->dtype)) == 0 && (int)sh->n == e->ndim;
        for (size_t d = 0; d < sh->n; d++)
            if (!dt_json_as_i64(&sh->items[d], &shape[d]) || shape[d] < 0)
                return dt_fail(DT_ECORRUPT, "'%s': shape of %s is malformed", c->path, nm->text);
        for (int d = 0; same && d < e->ndim; d++) same = shape[d] == e->shape[d];
        if (!same) {
            char a[160], b[160];
            shape_text(a, sizeof a, dt_dtype_name(e->dtype), e->ndim, e->shape);
            shape_text(b, sizeof b, dt->text, (int)sh->n, shape);
            return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" is %s but '%s' records %s", f->label,
                           e->name, a, c->path, b);
        }
        dt_status st = dt_st_digest(f, e, got);
        if (st != DT_OK) return st;
        if (memcmp(want, got, DT_SHA256_LEN) != 0)
            return dt_fail(DT_ECORRUPT, "'%s': tensor \"%s\" does not match its recorded SHA-256: the "
                           "data is corrupt", f->label, e->name);
    }
    return DT_OK;
}

static dt_status check_file(const ctx *c, const char *dir, const char *name, const dt_json_value *files) {
    const dt_json_value *r = get_kind(files, name, DT_JSON_OBJECT);
    int64_t bytes;
    uint8_t want[DT_SHA256_LEN], got[DT_SHA256_LEN];
    if (!r || !dt_json_as_i64(dt_json_get(r, "bytes"), &bytes) || !parse_hex(dt_json_get(r, "sha256"), want))
        return dt_fail(DT_ECORRUPT, "'%s': \"files\" has no valid record for %s", c->path, name);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint64_t n;
    dt_status st = dt_ckpt_file_digest(path, &n, got);
    if (st != DT_OK) return st;
    if ((int64_t)n != bytes)
        return dt_fail(DT_ECORRUPT, "'%s' is %" PRIu64 " bytes but '%s' records %" PRId64 ": the file %s",
                       path, n, c->path, bytes, (int64_t)n < bytes ? "is truncated" : "has extra bytes");
    if (memcmp(want, got, DT_SHA256_LEN) != 0)
        return dt_fail(DT_ECORRUPT, "'%s' does not match its recorded SHA-256: the file is corrupt", path);
    return DT_OK;
}

static dt_status read_state_fields(const ctx *c, dt_ckpt_view *v) {
    const dt_json_value *r = v->root;
    int64_t ver;
    dt_status st = get_str_is(c, r, "format", DT_CKPT_FORMAT);
    if (st != DT_OK) return st;
    if (!dt_json_as_i64(dt_json_get(r, "version"), &ver) || ver != DT_CKPT_VERSION)
        return dt_fail(DT_EUNSUPPORTED, "'%s': unsupported checkpoint version (this detrain reads "
                       "version %d)", c->path, DT_CKPT_VERSION);
    const dt_json_value *data = get_kind(r, "data", DT_JSON_OBJECT), *rng = get_kind(r, "rng", DT_JSON_OBJECT);
    const dt_json_value *opt = get_kind(r, "optimizer", DT_JSON_OBJECT);
    if (!data) return missing(c, "data", "an object");
    if (!rng) return missing(c, "rng", "an object");
    if (!opt) return missing(c, "optimizer", "an object");
    v->config = get_kind(r, "config", DT_JSON_OBJECT);
    v->run = get_kind(r, "run", DT_JSON_OBJECT);
    if (!v->config) return missing(c, "config", "an object");
    if (!v->run) return missing(c, "run", "an object");
    dt_ckpt_state *s = &v->s;
    uint64_t key;
    if ((st = get_i64(c, r, "step", &s->step)) || (st = get_i64(c, r, "consumed_samples", &s->consumed_samples)) ||
        (st = get_i64(c, r, "consumed_tokens", &s->consumed_tokens)) ||
        (st = get_u64(c, data, "permutation_key", &key)) || (st = get_u64(c, data, "epoch", &s->cursor.epoch)) ||
        (st = get_u64(c, data, "position", &s->cursor.position)) ||
        (st = get_u64(c, data, "train_windows", &s->train_windows)) ||
        (st = get_str_is(c, rng, "generator", "philox4x32-10")) || (st = get_u64(c, rng, "seed", &s->seed)) ||
        (st = get_i64(c, rng, "dropout_micro_steps", &s->micro_steps)) ||
        (st = get_str_is(c, opt, "type", "adamw")) || (st = get_i64(c, opt, "t", &v->adam_t)))
        return st;
    if (key != s->seed)
        return dt_fail(DT_ECORRUPT, "'%s': data.permutation_key %" PRIu64 " differs from rng.seed %" PRIu64,
                       c->path, key, s->seed);
    if (s->train_windows == 0 || s->cursor.position >= s->train_windows)
        return dt_fail(DT_ECORRUPT, "'%s': data position %" PRIu64 " is not below train_windows %" PRIu64,
                       c->path, s->cursor.position, s->train_windows);
    return DT_OK;
}

static dt_status read_t(dt_ckpt_view *v) {
    const dt_st_entry *e = dt_st_find(&v->optim, "t");
    int64_t t;
    if (!e || e->dtype != DT_I64 || e->ndim != 0)
        return dt_fail(DT_ECORRUPT, "'%s': no I64 scalar \"t\" (the optimizer step)", v->optim.label);
    dt_status st = dt_st_read(&v->optim, e, &t, sizeof t);
    if (st != DT_OK) return st;
    if (t != v->adam_t)
        return dt_fail(DT_ECORRUPT, "'%s': \"t\" is %" PRId64 " but state.json records optimizer.t %" PRId64,
                       v->optim.label, t, v->adam_t);
    return DT_OK;
}

/* A config item recorded as an integer: 1 and *out set; absent: 0; anything else: -1. */
static int config_int(const dt_ckpt_view *v, const char *key, int64_t *out) {
    const dt_json_value *x = dt_json_get(v->config, key);
    if (!x) return 0;
    return dt_json_as_i64(x, out) ? 1 : -1;
}

/* The counters and keys that follow from each other: consumed samples and tokens and the
 * dropout counter from the step and the recorded batch sizes and sequence length, the RNG
 * seed from the recorded config seed (each when the config records its inputs: detrain
 * train always does), the file formats, and a model file that holds tensors, all F32. */
static dt_status check_consistency(const ctx *c, const dt_ckpt_view *v) {
    const dt_ckpt_state *s = &v->s;
    int64_t gb, mb, T, want;
    int hg = config_int(v, "global_batch_size", &gb), hm = config_int(v, "micro_batch_size", &mb);
    int ht = config_int(v, "seq_length", &T);
    if (hg < 0 || hm < 0 || ht < 0 || (hg && gb < 1) || (hm && mb < 1) || (ht && T < 1) ||
        (hg && hm && gb % mb != 0))
        return dt_fail(DT_ECORRUPT, "'%s': config global_batch_size / micro_batch_size / seq_length "
                       "must be positive integers, the global batch a multiple of the micro batch", c->path);
    if (hg && (__builtin_mul_overflow(s->step, gb, &want) || want != s->consumed_samples))
        return dt_fail(DT_ECORRUPT, "'%s': consumed_samples %" PRId64 " does not follow from step %" PRId64
                       " x global_batch_size %" PRId64 ": the state is corrupt", c->path,
                       s->consumed_samples, s->step, gb);
    if (hg && ht && (__builtin_mul_overflow(s->consumed_samples, T, &want) || want != s->consumed_tokens))
        return dt_fail(DT_ECORRUPT, "'%s': consumed_tokens %" PRId64 " does not follow from consumed_samples %"
                       PRId64 " x seq_length %" PRId64 ": the state is corrupt", c->path,
                       s->consumed_tokens, s->consumed_samples, T);
    if (hg && hm && (__builtin_mul_overflow(s->step, gb / mb, &want) || want != s->micro_steps))
        return dt_fail(DT_ECORRUPT, "'%s': rng.dropout_micro_steps %" PRId64 " does not follow from step %"
                       PRId64 " x %" PRId64 " micro-batches per step: the state is corrupt", c->path,
                       s->micro_steps, s->step, gb / mb);
    const dt_json_value *seed = dt_json_get(v->config, "seed");
    char sv[32];
    snprintf(sv, sizeof sv, "%" PRIu64, s->seed);
    if (seed && (seed->type != DT_JSON_NUMBER || strcmp(seed->text, sv) != 0))
        return dt_fail(DT_ECORRUPT, "'%s': rng.seed %s differs from config seed %s: the state is corrupt",
                       c->path, sv, seed->text ? seed->text : "(not a number)");
    const char *mfmt = dt_st_meta_get(&v->model, "format"), *ofmt = dt_st_meta_get(&v->optim, "format");
    if (!mfmt || strcmp(mfmt, "pt") != 0)
        return dt_fail(DT_ECORRUPT, "'%s': metadata \"format\" is %s%s%s, not \"pt\": not a checkpoint's "
                       "model file", v->model.label, mfmt ? "\"" : "", mfmt ? mfmt : "missing", mfmt ? "\"" : "");
    if (!ofmt || strcmp(ofmt, "detrain-adamw") != 0)
        return dt_fail(DT_ECORRUPT, "'%s': metadata \"format\" is %s%s%s, not \"detrain-adamw\": not "
                       "detrain's AdamW state", v->optim.label, ofmt ? "\"" : "", ofmt ? ofmt : "missing",
                       ofmt ? "\"" : "");
    if (v->model.n == 0)
        return dt_fail(DT_ECORRUPT, "'%s' holds no tensors: a checkpoint's model file holds the weights",
                       v->model.label);
    for (int i = 0; i < v->model.n; i++)
        if (v->model.t[i].dtype != DT_F32)
            return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" is %s; checkpoints hold F32 master weights",
                           v->model.label, v->model.t[i].name, dt_dtype_name(v->model.t[i].dtype));
    if (v->optim.n < 2)
        return dt_fail(DT_ECORRUPT, "'%s' holds no moment tensors (only %d tensor%s)", v->optim.label,
                       v->optim.n, v->optim.n == 1 ? "" : "s");
    return DT_OK;
}

dt_status dt_ckpt_resolve(const char *path, char *out, size_t cap) {
    int64_t iter;
    int found;
    dt_status st = dt_ckpt_tracker_read(path, &iter, &found);
    if (st != DT_OK) return st;
    if (found) return dt_ckpt_iter_dir(out, cap, path, iter);
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", path, DT_CKPT_STATE_NAME);
    if (stat(p, &sb) != 0) {
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return dt_fail(DT_EIO, "checkpoint '%s' does not exist or is not a directory", path);
        return dt_fail(DT_EIO, "'%s' holds neither %s (a save directory) nor %s (an iteration "
                       "directory): no complete checkpoint there", path, DT_TRACKER_NAME,
                       DT_CKPT_STATE_NAME);
    }
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return dt_fail(DT_EINVAL, "checkpoint path '%s' is too long", path);
    return DT_OK;
}

void dt_ckpt_view_close(dt_ckpt_view *v) {
    dt_st_close(&v->model); /* safe on a closed or never opened file */
    dt_st_close(&v->optim);
    dt_json_free(v->root);
    free(v->text);
    memset(v, 0, sizeof *v);
    v->model.fd = v->optim.fd = -1;
}

dt_status dt_ckpt_view_open(const char *path, dt_ckpt_view *v) {
    memset(v, 0, sizeof *v);
    v->model.fd = v->optim.fd = -1;
    dt_status st = dt_ckpt_resolve(path, v->dir, sizeof v->dir);
    if (st != DT_OK) return st;
    char spath[4200], fpath[4200];
    snprintf(spath, sizeof spath, "%s/%s", v->dir, DT_CKPT_STATE_NAME);
    ctx c = {spath};
    if ((st = read_text(spath, &v->text, &v->len)) != DT_OK) return st;
    if ((st = check_self_digest(&c, v->text, v->len)) == DT_OK &&
        (st = dt_json_parse(v->text, v->len, spath, &v->root)) == DT_OK)
        st = read_state_fields(&c, v);
    const dt_json_value *files = get_kind(v->root, "files", DT_JSON_OBJECT);
    const dt_json_value *tensors = get_kind(v->root, "tensors", DT_JSON_OBJECT);
    if (st == DT_OK && (!files || files->n != DT_CKPT_NFILES))
        st = dt_fail(DT_ECORRUPT, "'%s': \"files\" must record exactly %d files", spath, DT_CKPT_NFILES);
    if (st == DT_OK && (!tensors || tensors->n != 2))
        st = dt_fail(DT_ECORRUPT, "'%s': \"tensors\" must list exactly the 2 safetensors files", spath);
    /* Parse each safetensors file first (its errors are the most specific), then its tensor
     * list and digests, then every file's size and digest. */
    if (st == DT_OK) {
        snprintf(fpath, sizeof fpath, "%s/%s", v->dir, DT_HF_WEIGHTS_NAME);
        st = dt_st_open(fpath, &v->model);
    }
    if (st == DT_OK) st = check_tensors(&c, DT_HF_WEIGHTS_NAME, dt_json_get(tensors, DT_HF_WEIGHTS_NAME), &v->model);
    if (st == DT_OK) {
        snprintf(fpath, sizeof fpath, "%s/%s", v->dir, DT_CKPT_OPTIM_NAME);
        st = dt_st_open(fpath, &v->optim);
    }
    if (st == DT_OK) st = check_tensors(&c, DT_CKPT_OPTIM_NAME, dt_json_get(tensors, DT_CKPT_OPTIM_NAME), &v->optim);
    for (int i = 0; st == DT_OK && i < DT_CKPT_NFILES; i++) st = check_file(&c, v->dir, dt_ckpt_files[i], files);
    if (st == DT_OK) st = read_t(v);
    if (st == DT_OK) st = check_consistency(&c, v);
    for (int i = 0; st == DT_OK && i < v->model.n; i++) v->model_floats += v->model.t[i].numel;
    if (st != DT_OK) {
        dt_ckpt_view_close(v);
        return st;
    }
    return DT_OK;
}
