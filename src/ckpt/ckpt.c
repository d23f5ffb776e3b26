/* Checkpoint save and the recorded train config (see ckpt.h for the layout). */
#include "ckpt/ckpt.h"

#include "ckpt/ckpt_view.h"
#include "ckpt/durable.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "ckpt/tracker.h"
#include "core/fingerprint.h"
#include "core/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The newest checkpoint of save_dir other than step `skip` that verifies completely, in
 * *step (-1: none). */
static dt_status newest_other(const char *save_dir, int64_t skip, int64_t *step) {
    int64_t *steps;
    size_t n;
    *step = -1;
    dt_status st = dt_ckpt_list_iters(save_dir, &steps, &n);
    if (st != DT_OK) return st;
    for (size_t i = n; i-- > 0 && *step < 0;) {
        char it[4096];
        dt_ckpt_view v;
        if (steps[i] == skip || dt_ckpt_iter_dir(it, sizeof it, save_dir, steps[i]) != DT_OK) continue;
        if (dt_ckpt_view_open(it, &v) != DT_OK) continue;
        if (v.s.step == steps[i]) *step = steps[i];
        dt_ckpt_view_close(&v);
    }
    free(steps);
    return DT_OK;
}

/* Puts the complete checkpoint in `dir` (<final>.tmp, every file durable) under the name
 * `final` without a moment at which the tracker names a checkpoint that does not verify:
 *  - no `final` yet: one rename;
 *  - `final` exists (a resumed run saving a step it had saved before): the two
 *    directories are exchanged atomically (renameat2), then the old one (now under `dir`)
 *    is removed; at every instant `final` is the whole old or the whole new checkpoint;
 *  - no atomic exchange on this file system: when the tracker names `final`, it is first
 *    pointed (durably) at the newest other checkpoint of save_dir that verifies; then the
 *    old one is renamed to `aside`, the new one in, and `aside` removed (a crash in between
 *    leaves `final` missing, which the tracker no longer names). With no other checkpoint
 *    that verifies the save is refused (DT_EUNSUPPORTED) rather than leave the tracker
 *    naming a missing checkpoint. */
static dt_status publish(const char *save_dir, int64_t step, const char *dir, const char *aside,
                         const char *final) {
    const char *base = strrchr(final, '/') ? strrchr(final, '/') + 1 : final;
    dt_crash_point2("before-publish", base);
    struct stat sb;
    if (lstat(final, &sb) != 0) {
        if (errno != ENOENT) return dt_fail(DT_EIO, "cannot stat '%s': %s", final, strerror(errno));
        return dt_durable_rename(dir, final);
    }
    if (!S_ISDIR(sb.st_mode))
        return dt_fail(DT_EIO, "'%s' exists and is not a directory: it cannot be replaced by a "
                       "checkpoint; move it away", final);
    dt_status st = dt_durable_exchange(dir, final);
    if (st == DT_OK) return dt_durable_remove_dir(dir); /* dir now holds the old checkpoint */
    if (st != DT_EUNSUPPORTED) return st;
    int64_t named;
    int found;
    char why[1024];
    snprintf(why, sizeof why, "%s", dt_errmsg());
    if ((st = dt_ckpt_tracker_read(save_dir, &named, &found)) != DT_OK) return st;
    if (found && named == step) {
        int64_t other;
        if ((st = newest_other(save_dir, step, &other)) != DT_OK) return st;
        if (other < 0)
            return dt_fail(DT_EUNSUPPORTED, "cannot replace %s, which %s/%s names, atomically: %s; "
                           "and no other checkpoint there verifies to name meanwhile; save into "
                           "another --save directory", final, save_dir, DT_TRACKER_NAME, why);
        if ((st = dt_ckpt_tracker_write(save_dir, other)) != DT_OK) return st;
    }
    if ((st = dt_durable_rename(final, aside)) != DT_OK) return st;
    dt_crash_point2("old-aside", base);
    if ((st = dt_durable_rename(dir, final)) != DT_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_errmsg());
        if (rename(aside, final) != 0) /* put the old one back; nothing names either */
            return dt_fail(st, "%s (and restoring '%s' from '%s' failed too: %s)", msg, final, aside,
                           strerror(errno));
        return dt_fail(st, "%s", msg);
    }
    return dt_durable_remove_dir(aside);
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

    /* final: <save>/iter_N; the files are written into dir, <save>/iter_N.tmp, published
     * by publish() once all of them are durable */
    char final[4096], dir[4200], aside[4200], path[4300];
    if ((st = dt_ckpt_iter_dir(final, sizeof final, save_dir, s->step)) != DT_OK) return st;
    snprintf(dir, sizeof dir, "%s.tmp", final);
    snprintf(aside, sizeof aside, "%s.old", final);
    if ((st = dt_durable_mkdir(save_dir)) != DT_OK) return dt_fail_context(st, "--save");
    /* leftovers of an interrupted save of this step: never named by the tracker */
    if ((st = dt_durable_remove_dir(dir)) != DT_OK || (st = dt_durable_remove_dir(aside)) != DT_OK)
        return dt_fail_context(st, "saving checkpoint %s (a leftover of an interrupted save)", final);
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

    /* optimizer.safetensors: m and v of every non-empty tensor at full slab shapes, then t
     * (a dense model's empty MoE tensors are not written) */
    int64_t t_step = opt->t;
    int no = 0;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < DT_NUM_PARAM_TENSORS; p++) {
            const dt_param_desc *d = &model->params[p];
            if (d->numel == 0) continue;
            int i = no++;
            snprintf(onames[i], sizeof onames[i], "%s.%s", k ? "v" : "m", d->name);
            ot[i] = (dt_st_tensor){.name = onames[i], .dtype = DT_F32, .ndim = d->ndim,
                                   .data = (k ? opt->v : opt->m) + d->offset};
            for (int j = 0; j < d->ndim; j++) ot[i].shape[j] = d->shape[j];
        }
    ot[no++] = (dt_st_tensor){.name = "t", .dtype = DT_I64, .ndim = 0, .data = &t_step};
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_CKPT_OPTIM_NAME);
    if (st == DT_OK) {
        static const dt_st_meta meta = {"format", "detrain-adamw"};
        st = dt_st_write(path, ot, no, &meta, 1, odig);
    }
    if (st == DT_OK && (st = reopen(path, no, &of)) == DT_OK) oopen = 1;

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
    if (mopen) dt_st_close(&mf);
    if (oopen) dt_st_close(&of);
    free(state);
    free(mdig);
    /* every file of the checkpoint is durable: publish it, and only then may the tracker
     * name it */
    if (st == DT_OK) st = publish(save_dir, s->step, dir, aside, final);
    if (st == DT_OK) st = dt_ckpt_tracker_write(save_dir, s->step);
    if (st != DT_OK) {
        /* dir holds the unpublished new files (or, after an exchange, the replaced old
         * ones): either way nothing the tracker names */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_errmsg());
        dt_durable_remove_dir(dir);
        dt_fail(st, "%s", msg);
        return dt_fail_context(st, "saving checkpoint %s", final);
    }
    return DT_OK;
}

/* ---------------------------------------------------------------- the save directory */

/* 1 when the iteration directory `it` lies in save_dir (same parent inode: symlinks and
 * relative spellings of one directory agree). */
static int inside(const char *it, const char *save_dir) {
    char parent[4200];
    struct stat a, b;
    snprintf(parent, sizeof parent, "%s/..", it);
    return stat(parent, &a) == 0 && stat(save_dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

dt_status dt_ckpt_save_dir_check(const char *save_dir, const char *load, int overwrite) {
    if (!save_dir || overwrite) return DT_OK;
    int64_t *steps, named;
    size_t n;
    int found;
    dt_status st = dt_ckpt_list_iters(save_dir, &steps, &n);
    if (st != DT_OK) return dt_fail_context(st, "--save %s", save_dir);
    int64_t first = n ? steps[0] : -1, last = n ? steps[n - 1] : -1;
    free(steps);
    if ((st = dt_ckpt_tracker_read(save_dir, &named, &found)) != DT_OK)
        return dt_fail_context(st, "--save %s", save_dir);
    if (!found && n == 0) return DT_OK;
    char it[4096];
    if (load && dt_ckpt_resolve(load, it, sizeof it) == DT_OK && inside(it, save_dir)) return DT_OK;
    char tracker[96] = "", iters[128] = "";
    if (found) snprintf(tracker, sizeof tracker, "%s names step %lld%s", DT_TRACKER_NAME, (long long)named, n ? "; " : "");
    if (n == 1) snprintf(iters, sizeof iters, "iteration directory iter_%07lld", (long long)first);
    if (n > 1)
        snprintf(iters, sizeof iters, "%zu iteration directories, iter_%07lld to iter_%07lld", n,
                 (long long)first, (long long)last);
    return dt_fail(DT_EINVAL, "--save %s holds checkpoints of another run (%s%s) and this run does "
                   "not resume from it (%s): its saves would replace them. Resume that run with --load %s, "
                   "pass --save-overwrite to replace its checkpoints, or choose another --save directory",
                   save_dir, tracker, iters, load ? "--load names no checkpoint in it" : "no --load", save_dir);
}
