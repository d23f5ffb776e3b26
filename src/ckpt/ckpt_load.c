/* Strict checkpoint load and `ckpt verify` (see ckpt.h). Load verifies the whole
 * checkpoint, compares its binding config with the run's, reads every tensor into scratch
 * buffers, and only then overwrites the model and optimizer: a failure leaves them as
 * they were. */
#include "ckpt/ckpt.h"

#include "ckpt/ckpt_view.h"
#include "ckpt/hf_gpt2.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Every binding item of the run must be recorded with the same value, and the checkpoint
 * must record no binding item the run does not know. */
static dt_status check_config(const dt_ckpt_view *v, const dt_ckpt_config *cfg, int load_rng) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", v->dir, DT_CKPT_STATE_NAME);
    for (int i = 0; i < cfg->n; i++) {
        const dt_ckpt_item *it = &cfg->item[i];
        if (!it->binding) continue;
        if (!load_rng && strcmp(it->key, "seed") == 0) continue; /* --no-load-rng: the run's seed */
        const dt_json_value *saved = dt_json_get(v->config, it->key);
        if (!saved)
            return dt_fail(DT_EMISMATCH, "checkpoint '%s' does not record \"%s\" (%s): it was saved by a "
                           "detrain that did not have this setting; start a new run", path, it->key, it->flag);
        dt_json_value *mine;
        dt_status st = dt_json_parse(it->json, strlen(it->json), it->key, &mine);
        if (st != DT_OK) return st;
        int same = dt_ckpt_json_equal(saved, mine);
        dt_json_free(mine);
        if (!same) {
            char a[256];
            dt_ckpt_json_text(saved, a, sizeof a);
            return dt_fail(DT_EMISMATCH, "checkpoint %s was saved with %s = %s but this run has %s (%s): "
                           "resuming would change the trajectory; pass %s %s or start a new run without "
                           "--load", v->dir, it->key, a, it->json, it->flag, it->flag, a);
        }
    }
    for (size_t k = 0; k < v->config->n; k++) {
        int known = 0;
        for (int i = 0; i < cfg->n && !known; i++)
            known = cfg->item[i].binding && strcmp(cfg->item[i].key, v->config->keys[k]) == 0;
        if (!known)
            return dt_fail(DT_EMISMATCH, "checkpoint '%s' records the setting \"%s\" that this detrain "
                           "does not have: it cannot resume that trajectory", path, v->config->keys[k]);
    }
    return DT_OK;
}

static dt_status read_optim(const dt_ckpt_view *v, const dt_gpt *model, float *m, float *vv) {
    int want = 1; /* t */
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < DT_NUM_PARAM_TENSORS; p++) {
            const dt_param_desc *d = &model->params[p];
            if (d->numel == 0) continue; /* not written */
            want++;
            char name[64];
            snprintf(name, sizeof name, "%s.%s", k ? "v" : "m", d->name);
            dt_status st = dt_st_read_expect(&v->optim, name, DT_F32, d->ndim, d->shape,
                                             (k ? vv : m) + d->offset);
            if (st != DT_OK) return st;
        }
    if (v->optim.n != want)
        return dt_fail(DT_EMISMATCH, "'%s' holds %d tensors; expected %d (m and v of each parameter, and t)",
                       v->optim.label, v->optim.n, want);
    return DT_OK;
}

dt_status dt_ckpt_load(const char *path, const dt_ckpt_config *cfg, const dt_ckpt_load_opts *opts,
                       dt_gpt *model, dt_adamw *opt, dt_ckpt_state *s) {
    if (cfg->oom) return dt_fail(DT_ENOMEM, "out of memory recording the train config");
    dt_ckpt_view v;
    dt_status st = dt_ckpt_view_open(path, &v);
    if (st != DT_OK) return dt_fail_context(st, "--load %s", path);
    st = check_config(&v, cfg, opts->load_rng);
    size_t n = model->num_params;
    float *p = NULL, *m = NULL, *vv = NULL;
    if (st == DT_OK && opt->n != n)
        st = dt_fail(DT_EINVAL, "optimizer state (%zu floats) does not match the model (%zu)", opt->n, n);
    if (st == DT_OK) {
        p = calloc(n, sizeof *p);
        if (opts->load_optim) {
            m = calloc(n, sizeof *m);
            vv = calloc(n, sizeof *vv);
        }
        if (!p || (opts->load_optim && (!m || !vv)))
            st = dt_fail(DT_ENOMEM, "out of memory loading checkpoint %s", v.dir);
    }
    if (st == DT_OK) {
        char mpath[4200];
        snprintf(mpath, sizeof mpath, "%s/%s", v.dir, DT_HF_WEIGHTS_NAME);
        /* every tensor is F32 (dt_ckpt_view_open checked) */
        st = dt_hf_gpt2_read_weights(mpath, &model->cfg, p);
    }
    if (st == DT_OK && opts->load_optim) st = read_optim(&v, model, m, vv);
    if (st == DT_OK) {
        memcpy(model->param_mem, p, n * sizeof *p);
        if (opts->load_optim) {
            memcpy(opt->m, m, n * sizeof *m);
            memcpy(opt->v, vv, n * sizeof *vv);
            opt->t = v.adam_t;
        }
        *s = v.s;
    }
    free(p);
    free(m);
    free(vv);
    dt_ckpt_view_close(&v);
    return st == DT_OK ? DT_OK : dt_fail_context(st, "--load %s", path);
}

dt_status dt_ckpt_verify(const char *path, FILE *out) {
    dt_ckpt_view v;
    dt_status st = dt_ckpt_view_open(path, &v);
    if (st != DT_OK) return st;
    if (out) {
        const dt_ckpt_state *s = &v.s;
        uint64_t onum = 0;
        for (int i = 0; i < v.optim.n; i++) onum += v.optim.t[i].numel;
        fprintf(out, "checkpoint %s: OK (every file and tensor matches its SHA-256)\n", v.dir);
        fprintf(out, "  step %" PRId64 " | consumed samples %" PRId64 " | consumed tokens %" PRId64 "\n",
                s->step, s->consumed_samples, s->consumed_tokens);
        fprintf(out, "  data cursor: epoch %" PRIu64 ", position %" PRIu64 " of %" PRIu64
                " training windows (permutation key %" PRIu64 ")\n", s->cursor.epoch, s->cursor.position,
                s->train_windows, s->seed);
        fprintf(out, "  rng: philox4x32-10, seed %" PRIu64 ", dropout micro-steps %" PRId64 "\n", s->seed,
                s->micro_steps);
        const char *mt = dt_json_get(v.config, "num_experts") ? dt_json_get(v.config, "num_experts")->text : NULL;
        fprintf(out, "  model.safetensors: %d tensors, %" PRIu64 " parameters (%s layout)\n", v.model.n,
                v.model_floats, mt && strcmp(mt, "0") ? "detrain native (MoE)" : "Hugging Face GPT-2");
        fprintf(out, "  optimizer.safetensors: adamw, t = %" PRId64 ", %d tensors, %" PRIu64 " elements\n",
                v.adam_t, v.optim.n, onum);
        fprintf(out, "  config:");
        for (size_t k = 0; k < v.config->n; k++) {
            char val[160];
            dt_ckpt_json_text(&v.config->items[k], val, sizeof val);
            fprintf(out, "%s %s=%s", k ? "," : "", v.config->keys[k], val);
        }
        fprintf(out, "\n");
    }
    dt_ckpt_view_close(&v);
    return DT_OK;
}
