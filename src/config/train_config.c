/* The train config made from train_flags.def (see train_config.h). */
#include "config/train_config.h"

#include "ckpt/ckpt.h"
#include "ckpt/hf_gpt2.h"
#include "trace/inject.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dt_opt flags[] = {
#define DT_FLAG(id, name, kind, field, def, range, bind, key, group, help) \
    {name, DT_OPT_##kind, offsetof(dt_train_config, field), def, range, DT_BIND_##bind, key, DT_GROUP_##group, help},
#include "config/train_flags.def"
#undef DT_FLAG
};
_Static_assert(sizeof flags / sizeof flags[0] == DT_F_COUNT, "one row per flag id");

const dt_opt *dt_train_flags(int *n) {
    *n = DT_F_COUNT;
    return flags;
}

dt_cuda_options dt_cuda_options_default(void) {
    dt_train_config c;
    memset(&c, 0, sizeof c);
    dt_opt_set s = {flags, DT_F_COUNT, &c, c.given, NULL, 0, 0};
    (void)dt_opt_defaults(&s); /* the table's test checks every default parses */
    return c.cuda;
}

dt_status dt_train_config_parse(dt_train_config *cfg, int argc, char **argv, int *help) {
    memset(cfg, 0, sizeof *cfg);
    cfg->opts = (dt_opt_set){flags, DT_F_COUNT, cfg, cfg->given, NULL, 0, 0};
    dt_status st = dt_opt_defaults(&cfg->opts);
    if (st == DT_OK) st = dt_opt_parse(&cfg->opts, argc, argv, help);
    return st;
}

void dt_train_config_help(FILE *f) {
    fprintf(f, "usage: detrain train [flags]\n\nflags ([default], (cuda): with --device cuda only):\n");
    dt_opt_help(flags, DT_F_COUNT, f);
}

void dt_train_config_free(dt_train_config *cfg) { dt_opt_set_free(&cfg->opts); }

/* A flag that needs another to mean anything. */
static dt_status needs(const dt_train_config *c, int flag, int other, const char *why) {
    if (c->given[flag] && !c->given[other])
        return dt_fail(DT_EINVAL, "%s needs %s%s", flags[flag].name, flags[other].name, why);
    return DT_OK;
}

/* The MoE flags into the model config: with --num-experts 0 (dense) the other MoE flags
 * would change nothing and are refused. */
static dt_status resolve_moe(dt_train_config *c) {
    static const int moe_flags[] = {DT_F_MOE_TOPK, DT_F_MOE_LAYER_FREQ, DT_F_MOE_AUX_COEFF, DT_F_MOE_CAPACITY};
    if (c->num_experts == 0) {
        for (size_t i = 0; i < sizeof moe_flags / sizeof moe_flags[0]; i++)
            if (c->given[moe_flags[i]])
                return dt_fail(DT_EINVAL, "%s needs --num-experts > 0: with no experts every MLP is dense and it "
                               "would change nothing", flags[moe_flags[i]].name);
        return DT_OK;
    }
    if (c->init_from_hf)
        return dt_fail(DT_EUNSUPPORTED, "--init-from-hf loads a dense GPT-2; it cannot initialise an MoE model "
                       "(--num-experts %d): drop one of them", c->num_experts);
    if (c->moe_topk > c->num_experts)
        return dt_fail(DT_EINVAL, "--moe-router-topk %d exceeds --num-experts %d: each token picks K distinct experts",
                       c->moe_topk, c->num_experts);
    dt_status st = dt_gpt_set_moe(&c->gpt, c->num_experts, c->moe_topk, c->moe_layer_freq);
    return st == DT_OK ? dt_gpt_config_finish(&c->gpt) : st;
}

/* The preset, then --init-from-hf's config.json, then the size flags given. */
static dt_status resolve_sizes(dt_train_config *c) {
    dt_gpt_config g;
    dt_status st = dt_gpt_preset(c->model, &g);
    if (st != DT_OK) return dt_fail_context(st, "--model");
    if (c->init_from_hf && (st = dt_hf_gpt2_read_config(c->init_from_hf, &g)) != DT_OK)
        return dt_fail_context(st, "--init-from-hf");
    if (c->given[DT_F_NUM_LAYERS]) g.num_layers = c->gpt.num_layers;
    if (c->given[DT_F_HIDDEN_SIZE]) g.channels = c->gpt.channels;
    if (c->given[DT_F_NUM_HEADS]) g.num_heads = c->gpt.num_heads;
    if (c->given[DT_F_VOCAB_SIZE]) g.vocab_size = c->gpt.vocab_size;
    if (c->given[DT_F_MAX_POS]) g.max_seq_len = c->gpt.max_seq_len;
    else if (c->given[DT_F_SEQ_LENGTH] && c->seq_length > g.max_seq_len) g.max_seq_len = c->seq_length;
    c->gpt = g;
    if ((st = dt_gpt_config_finish(&c->gpt)) != DT_OK) return st;
    if (!c->given[DT_F_SEQ_LENGTH]) c->seq_length = c->gpt.max_seq_len;
    if ((st = resolve_moe(c)) != DT_OK) return st;
    if (c->seq_length > c->gpt.max_seq_len)
        return dt_fail(DT_EINVAL, "--seq-length %d is longer than --max-position-embeddings %d", c->seq_length,
                       c->gpt.max_seq_len);
    return DT_OK;
}

/* The trace flags into c->trace; steps that select no step of this run are refused (a
 * resumed run checks its own range again when it knows where it starts). */
static dt_status resolve_trace(dt_train_config *c) {
    dt_status st;
    if (c->trace_level == DT_TRACE_OFF) {
        const int dep[] = {DT_F_TRACE_STEPS, DT_F_TRACE_RANKS, DT_F_TRACE_DIR};
        for (size_t i = 0; i < sizeof dep / sizeof dep[0]; i++)
            if (c->given[dep[i]])
                return dt_fail(DT_EINVAL, "%s needs --trace-level (it is off, so nothing would be traced)",
                               flags[dep[i]].name);
    }
    c->trace = (dt_trace_config){c->trace_level, c->trace_dir, c->trace_steps, c->trace_ranks, NULL};
    if ((st = dt_trace_config_check(&c->trace)) != DT_OK) return st;
    if (c->trace_steps) {
        dt_range_list steps;
        if ((st = dt_range_list_parse(c->trace_steps, "--trace-steps", &steps)) != DT_OK) return st;
        if (!dt_range_list_meets(&steps, 1, c->train_iters))
            return dt_fail(DT_EINVAL, "--trace-steps %s selects no step of this run (steps 1-%lld): nothing "
                           "would be traced", c->trace_steps, (long long)c->train_iters);
    }
    return DT_OK;
}

dt_status dt_train_config_resolve(dt_train_config *c) {
    dt_status st;
    if ((st = resolve_sizes(c)) != DT_OK) return st;
    if (!c->given[DT_F_GLOBAL_BATCH]) c->global_batch = c->micro_batch;
    if (c->global_batch % c->micro_batch)
        return dt_fail(DT_EINVAL, "--global-batch-size %d is not a multiple of --micro-batch-size %d",
                       c->global_batch, c->micro_batch);
    if (!c->given[DT_F_DECAY_ITERS]) c->decay_iters = c->train_iters;
    if (c->min_lr > c->lr)
        return dt_fail(DT_EINVAL, "--min-lr %g is above --lr %g: the decay would raise the learning rate",
                       (double)c->min_lr, (double)c->lr);
    if ((st = needs(c, DT_F_SAVE_INTERVAL, DT_F_SAVE, " (a directory to save to)")) != DT_OK ||
        (st = needs(c, DT_F_NO_LOAD_OPTIM, DT_F_LOAD, " (a checkpoint to resume)")) != DT_OK ||
        (st = needs(c, DT_F_NO_LOAD_RNG, DT_F_LOAD, " (a checkpoint to resume)")) != DT_OK)
        return st;
    if (c->synthetic && c->data_path)
        return dt_fail(DT_EINVAL, "--synthetic-tokens uniform and --data-path %s both set: choose one", c->data_path);
    if (c->load_dir && c->init_from_hf)
        return dt_fail(DT_EINVAL, "--load and --init-from-hf both set: a resumed run takes its weights "
                       "from the checkpoint; drop one of them");
    if (c->device == 0)
        for (int i = 0; i < DT_F_COUNT; i++)
            if (flags[i].group == DT_GROUP_CUDA && c->given[i])
                return dt_fail(DT_EINVAL, "%s applies to --device cuda only: on the CPU it would change nothing; "
                               "drop it or add --device cuda", flags[i].name);
    if (c->inject) {
        dt_inject inj;
        if ((st = dt_inject_parse(c->inject, &inj)) != DT_OK)
            return dt_fail_context(st, "--inject-nondeterminism");
        if (inj.step < 1 || inj.step > c->train_iters)
            return dt_fail(DT_EINVAL, "--inject-nondeterminism %s: step %lld is outside this run (steps 1-%lld), "
                           "so nothing would be injected", c->inject, (long long)inj.step,
                           (long long)c->train_iters);
    }
    return resolve_trace(c);
}

void dt_train_config_json(const dt_train_config *c, int binding, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "{");
    char v[DT_OPT_MAX_VALUE + 64];
    for (int i = 0, k = 0; i < DT_F_COUNT && n < cap; i++) {
        if ((flags[i].bind == DT_BIND_TRAJ) != (binding != 0)) continue;
        dt_opt_json(&flags[i], c, v, sizeof v);
        n += (size_t)snprintf(buf + n, cap - n, "%s\"%s\":%s", k++ ? "," : "", flags[i].name + 2, v);
    }
    if (n < cap) snprintf(buf + n, cap - n, "}");
}

void dt_train_ckpt_config(const dt_train_config *c, dt_ckpt_config *o) {
    memset(o, 0, sizeof *o);
    char v[DT_OPT_MAX_VALUE + 64];
    for (int pass = 0; pass < 2; pass++) /* binding items first, as the checkpoint lists them */
        for (int i = 0; i < DT_F_COUNT; i++) {
            const dt_opt *f = &flags[i];
            if (f->bind == DT_BIND_NONE || (f->bind == DT_BIND_TRAJ) != (pass == 0)) continue;
            dt_opt_json(f, c, v, sizeof v);
            dt_ckpt_config_json(o, f->key, f->name, v, f->bind == DT_BIND_TRAJ);
        }
}
