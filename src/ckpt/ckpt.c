/* Checkpoint save and the recorded train config (see ckpt.h for the layout). */
#include "ckpt/ckpt.h"

#include "ckpt/ckpt_view.h"
#include "ckpt/durable.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "ckpt/tracker.h"
#include "core/fingerprint.h"
#include "core/json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- config items */

static void add(dt_ckpt_config *c, const char *key, const char *flag, char *json, int binding) {
    if (!json || c->n >= DT_CKPT_MAX_ITEMS) {
        free(json);
        c->oom = 1;
        return;
    }
    c->item[c->n++] = (dt_ckpt_item){key, flag, json, binding};
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

void dt_ckpt_config_int(dt_ckpt_config *c, const char *key, const char *flag, int64_t v, int binding) {
    add(c, key, flag, fmt("%" PRId64, v), binding);
}
void dt_ckpt_config_u64(dt_ckpt_config *c, const char *key, const char *flag, uint64_t v, int binding) {
    add(c, key, flag, fmt("%" PRIu64, v), binding);
}
void dt_ckpt_config_f32(dt_ckpt_config *c, const char *key, const char *flag, float v, int binding) {
    add(c, key, flag, fmt("%.9g", (double)v), binding);
}
void dt_ckpt_config_json(dt_ckpt_config *c, const char *key, const char *flag, const char *json, int binding) {
    add(c, key, flag, strdup(json), binding);
}
void dt_ckpt_config_str(dt_ckpt_config *c, const char *key, const char *flag, const char *v, int binding) {
    if (!v) { add(c, key, flag, strdup("null"), binding); return; }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) { c->oom = 1; return; }
    dt_json_write_string(m, v);
    if (fclose(m) != 0) { free(buf); buf = NULL; }
    add(c, key, flag, buf, binding);
}
void dt_ckpt_config_free(dt_ckpt_config *c) {
    for (int i = 0; i < c->n; i++) free(c->item[i].json);
    c->n = 0;
}

/* ---------------------------------------------------------------- save */

/* The HF export drops wte rows V..Vp-1. They are zero by construction (never trained:
 * their gradient, Adam moments and decayed value stay exactly +0), so they are restored
 * exactly as zero; if that ever stops holding, saving must fail rather than lose them. */
static dt_status check_padded_rows(const dt_gpt *m) {
    const dt_gpt_config *c = &m->cfg;
    const float *wte = m->param[DT_P_WTE];
    size_t C = (size_t)c->channels;
    for (size_t i = (size_t)c->vocab_size * C; i < (size_t)c->padded_vocab * C; i++)
        if (dt_f32_bits(wte[i]) != 0)
            return dt_fail(DT_ESTATE, "cannot save: padded vocabulary row %zu of wte holds 0x%08x at "
                           "column %zu (padded rows must stay zero; the Hugging Face layout drops "
                           "them)", i / C, dt_f32_bits(wte[i]), i % C);
    return DT_OK;
}

/* Lists the tensors of a written file (header order) with their digests. */
static void write_tensor_list(FILE *m, const char *file, const dt_st_file *f,
                              uint8_t (*dig)[DT_SHA256_LEN]) {
    fprintf(m, "    ");
    dt_json_write_string(m, file);
    fprintf(m, ": [");
    for (int i = 0; i < f->n; i++) {
        const dt_st_entry *e = &f->t[i];
        char hex[2 * DT_SHA256_LEN + 1];
        dt_sha256_hex(dig[i], hex);
        fprintf(m, "%s\n      {\"name\": ", i ? "," : "");
        dt_json_write_string(m, e->name);
        fprintf(m, ", \"dtype\": \"%s\", \"shape\": [", dt_dtype_name(e->dtype));
        for (int d = 0; d < e->ndim; d++) fprintf(m, "%s%" PRId64, d ? ", " : "", e->shape[d]);
        fprintf(m, "], \"sha256\": \"%s\"}", hex);
    }
    fprintf(m, "\n    ]");
}

static void write_config(FILE *m, const dt_ckpt_config *cfg, int binding) {
    int first = 1;
    for (int i = 0; i < cfg->n; i++) {
        if (cfg->item[i].binding != binding) continue;
        fprintf(m, "%s\n    ", first ? "" : ",");
        first = 0;
        dt_json_write_string(m, cfg->item[i].key);
        fprintf(m, ": %s", cfg->item[i].json);
    }
    fprintf(m, "\n  }");
}

/* Builds state.json (with its self digest filled in) into *out. */
static dt_status build_state(const dt_ckpt_state *s, const dt_adamw *opt, const dt_ckpt_config *cfg,
                             const uint64_t *fbytes, uint8_t (*fdig)[DT_SHA256_LEN],
                             const dt_st_file *mf, uint8_t (*mdig)[DT_SHA256_LEN],
                             const dt_st_file *of, uint8_t (*odig)[DT_SHA256_LEN],
                             char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) return dt_fail(DT_ENOMEM, "out of memory building %s", DT_CKPT_STATE_NAME);
    fprintf(m, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n", DT_CKPT_FORMAT, DT_CKPT_VERSION);
    fprintf(m, "  \"step\": %" PRId64 ",\n  \"consumed_samples\": %" PRId64 ",\n"
               "  \"consumed_tokens\": %" PRId64 ",\n", s->step, s->consumed_samples, s->consumed_tokens);
    fprintf(m, "  \"data\": {\"permutation_key\": %" PRIu64 ", \"epoch\": %" PRIu64 ", \"position\": %"
               PRIu64 ", \"train_windows\": %" PRIu64 "},\n",
            s->seed, s->cursor.epoch, s->cursor.position, s->train_windows);
    fprintf(m, "  \"rng\": {\"generator\": \"philox4x32-10\", \"seed\": %" PRIu64
               ", \"dropout_micro_steps\": %" PRId64 "},\n", s->seed, s->micro_steps);
    fprintf(m, "  \"optimizer\": {\"type\": \"adamw\", \"t\": %" PRId64 "},\n", opt->t);
    fprintf(m, "  \"config\": {");
    write_config(m, cfg, 1);
    fprintf(m, ",\n  \"run\": {");
    write_config(m, cfg, 0);
    fprintf(m, ",\n  \"files\": {");
    for (int i = 0; i < DT_CKPT_NFILES; i++) {
        char hex[2 * DT_SHA256_LEN + 1];
        dt_sha256_hex(fdig[i], hex);
        fprintf(m, "%s\n    \"%s\": {\"bytes\": %" PRIu64 ", \"sha256\": \"%s\"}", i ? "," : "",
                dt_ckpt_files[i], fbytes[i], hex);
    }
    fprintf(m, "\n  },\n  \"tensors\": {\n");
    write_tensor_list(m, DT_HF_WEIGHTS_NAME, mf, mdig);
    fprintf(m, ",\n");
    write_tensor_list(m, DT_CKPT_OPTIM_NAME, of, odig);
    /* wall clock: the one field compare ignores in this file */
    fprintf(m, "\n  },\n  \"saved_unix_time\": %lld,\n", (long long)time(NULL));
    fprintf(m, "  \"%s\": \"", DT_CKPT_SELF_DIGEST_KEY);
    for (int i = 0; i < 2 * DT_SHA256_LEN; i++) fputc('0', m);
    fprintf(m, "\"\n}\n");
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return dt_fail(DT_ENOMEM, "out of memory building %s", DT_CKPT_STATE_NAME);
    }
    char *hexat = dt_ckpt_self_digest_at(buf, n);
    uint8_t d[DT_SHA256_LEN];
    char hex[2 * DT_SHA256_LEN + 1];
    dt_sha256_buf(buf, n, d);
    dt_sha256_hex(d, hex);
    memcpy(hexat, hex, 2 * DT_SHA256_LEN);
    *out = buf;
    *len = n;
    return DT_OK;
}

static dt_status join(char *out, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return dt_fail(DT_EINVAL, "path '%s/%s' is too long", dir, name);
    return DT_OK;
}

/* Opens a file just written and checks it holds n tensors (the digests returned by the
 * writer are in the same order). */
static dt_status reopen(const char *path, int n, dt_st_file *f) {
    dt_status st = dt_st_open(path, f);
    if (st != DT_OK) return st;
    if (f->n != n) {
        dt_st_close(f);
        return dt_fail(DT_EIO, "'%s' holds %d tensors right after writing %d", path, f->n, n);
    }
    return DT_OK;
}

dt_status dt_ckpt_save(const char *save_dir, const dt_gpt *model, const dt_adamw *opt,
                       const dt_ckpt_state *s, const dt_ckpt_config *cfg) {
    return dt_ckpt_save_env(save_dir, model, opt, s, cfg, NULL);
}

dt_status dt_ckpt_save_env(const char *save_dir, const dt_gpt *model, const dt_adamw *opt,
                           const dt_ckpt_state *s, const dt_ckpt_config *cfg, const char *env_extra) {
    if (cfg->oom) return dt_fail(DT_ENOMEM, "out of memory recording the train config");
    if (opt->n != model->num_params)
        return dt_fail(DT_EINVAL, "optimizer state (%zu floats) does not match the model (%zu)", opt->n,
                       model->num_params);
    dt_status st = check_padded_rows(model);
    if (st != DT_OK) return st;

    char dir[4096], path[4200];
    if ((st = dt_ckpt_iter_dir(dir, sizeof dir, save_dir, s->step)) != DT_OK) return st;
    if ((st = dt_durable_mkdir(save_dir)) != DT_OK) return dt_fail_context(st, "--save");
    if ((st = dt_durable_mkdir(dir)) != DT_OK) return st;

    const dt_gpt_config *gc = &model->cfg;
    enum { NO = 2 * DT_NUM_PARAM_TENSORS + 1 };
    int nm = dt_hf_gpt2_num_tensors(gc);
    uint8_t (*mdig)[DT_SHA256_LEN] = calloc((size_t)nm, sizeof *mdig);
    uint8_t odig[NO][DT_SHA256_LEN], fdig[DT_CKPT_NFILES][DT_SHA256_LEN];
    dt_st_tensor ot[NO];
    char onames[NO][48];
    uint64_t fbytes[DT_CKPT_NFILES];
    dt_st_file mf = {.fd = -1}, of = {.fd = -1};
    int mopen = 0, oopen = 0;
    char *state = NULL;
    size_t state_len = 0;
    if (!mdig) st = dt_fail(DT_ENOMEM, "out of memory saving a checkpoint");

    /* model.safetensors + config.json: the Hugging Face view of the master weights */
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_HF_WEIGHTS_NAME);
    if (st == DT_OK) st = dt_hf_gpt2_write_weights(path, gc, model->param_mem, mdig);
    if (st == DT_OK && (st = reopen(path, nm, &mf)) == DT_OK) mopen = 1;
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_HF_CONFIG_NAME);
    if (st == DT_OK) st = dt_hf_gpt2_write_config(path, gc);

    /* optimizer.safetensors: m and v at full slab shapes, then t */
    int64_t t_step = opt->t;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < DT_NUM_PARAM_TENSORS; p++) {
            const dt_param_desc *d = &model->params[p];
            int i = k * DT_NUM_PARAM_TENSORS + p;
            snprintf(onames[i], sizeof onames[i], "%s.%s", k ? "v" : "m", d->name);
            ot[i] = (dt_st_tensor){.name = onames[i], .dtype = DT_F32, .ndim = d->ndim,
                                   .data = (k ? opt->v : opt->m) + d->offset};
            for (int j = 0; j < d->ndim; j++) ot[i].shape[j] = d->shape[j];
        }
    ot[NO - 1] = (dt_st_tensor){.name = "t", .dtype = DT_I64, .ndim = 0, .data = &t_step};
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_CKPT_OPTIM_NAME);
    if (st == DT_OK) {
        static const dt_st_meta meta = {"format", "detrain-adamw"};
        st = dt_st_write(path, ot, NO, &meta, 1, odig);
    }
    if (st == DT_OK && (st = reopen(path, NO, &of)) == DT_OK) oopen = 1;

    /* env.json: fingerprint_write fsyncs and renames the file; the directory fsync makes
     * the rename durable */
    if (st == DT_OK) st = dt_fingerprint_write(dir, env_extra);
    if (st == DT_OK) st = dt_fsync_dir(dir);
    if (st == DT_OK) dt_crash_point2("after-dirsync", DT_CKPT_ENV_NAME);

    for (int i = 0; st == DT_OK && i < DT_CKPT_NFILES; i++) {
        if ((st = join(path, sizeof path, dir, dt_ckpt_files[i])) == DT_OK)
            st = dt_ckpt_file_digest(path, &fbytes[i], fdig[i]);
    }
    if (st == DT_OK) st = build_state(s, opt, cfg, fbytes, fdig, &mf, mdig, &of, odig, &state, &state_len);
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_CKPT_STATE_NAME);
    if (st == DT_OK) st = dt_durable_write_file(path, state, state_len);
    /* every file of the checkpoint is durable: only now may the tracker name it */
    if (st == DT_OK) st = dt_ckpt_tracker_write(save_dir, s->step);
    if (mopen) dt_st_close(&mf);
    if (oopen) dt_st_close(&of);
    free(state);
    free(mdig);
    return st == DT_OK ? DT_OK : dt_fail_context(st, "saving checkpoint %s", dir);
}
