/* `detrain train`: Megatron-style flags into dt_train_config, deterministic mode applied
 * first (before any library is touched), then the training loop. */
#include "cli/cli.h"

#include "ckpt/hf_gpt2.h"
#include "core/determinism.h"
#include "ops/op.h"
#include "trace/inject.h"
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { F_INT, F_I64, F_U64, F_FLOAT, F_STR, F_SWITCH, F_LIST };

typedef struct flag {
    const char *name;
    enum kind kind;
    size_t offset;       /* into train_args */
    const char *def;     /* default, as text ("" none) */
    const char *help;
} flag;

/* Parsed flag values before the model preset is resolved. 0 means "not given" for the
 * model-size fields, which then come from the preset. */
typedef struct train_args {
    const char *model;
    int num_layers, hidden_size, num_heads, seq_length, max_pos, vocab_size;
    int micro_batch, global_batch;
    int64_t train_iters, warmup_iters, decay_iters;
    float lr, min_lr, weight_decay, clip_grad, beta1, beta2, eps, val_fraction;
    float hidden_dropout, attn_dropout;
    const char *save_dir, *load_dir, *init_from_hf;
    int64_t save_interval;
    int no_load_optim, no_load_rng, save_overwrite;
    uint64_t seed;
    int deterministic, quiet, threads;
    const char *data_path, *log_dir;
    const char *device;
    const char *trace_level, *trace_steps, *trace_ranks, *trace_dir, *inject;
    int debug_allow_injection;
    int log_interval, eval_interval, eval_iters;
    int nop_variants;
    const char *op_variants[DT_OP_COUNT];
} train_args;

#define OFF(f) offsetof(train_args, f)
static const flag flags[] = {
    {"--model", F_STR, OFF(model), "tiny", "model preset: tiny, small, gpt2-124m, gpt2-350m, gpt2-774m"},
    {"--num-layers", F_INT, OFF(num_layers), "", "layers L (default: from --model)"},
    {"--hidden-size", F_INT, OFF(hidden_size), "", "channels C (default: from --model)"},
    {"--num-attention-heads", F_INT, OFF(num_heads), "", "heads NH (default: from --model)"},
    {"--seq-length", F_INT, OFF(seq_length), "", "sequence length T (default: max positions)"},
    {"--max-position-embeddings", F_INT, OFF(max_pos), "", "rows of the position embedding (default: from --model)"},
    {"--vocab-size", F_INT, OFF(vocab_size), "", "vocabulary V, padded to a multiple of 128 (default: from --model)"},
    {"--micro-batch-size", F_INT, OFF(micro_batch), "8", "sequences per forward/backward B"},
    {"--global-batch-size", F_INT, OFF(global_batch), "", "sequences per optimizer step (default: micro-batch size)"},
    {"--train-iters", F_I64, OFF(train_iters), "200", "optimizer steps"},
    {"--lr", F_FLOAT, OFF(lr), "1e-3", "peak learning rate"},
    {"--min-lr", F_FLOAT, OFF(min_lr), "1e-4", "learning rate at the end of the cosine decay"},
    {"--lr-warmup-iters", F_I64, OFF(warmup_iters), "20", "linear warmup steps"},
    {"--lr-decay-iters", F_I64, OFF(decay_iters), "", "cosine decay ends here (default: --train-iters)"},
    {"--weight-decay", F_FLOAT, OFF(weight_decay), "0.1", "decoupled weight decay (not on norms/biases)"},
    {"--clip-grad", F_FLOAT, OFF(clip_grad), "1.0", "global gradient-norm clip (0: off)"},
    {"--adam-beta1", F_FLOAT, OFF(beta1), "0.9", "AdamW beta1"},
    {"--adam-beta2", F_FLOAT, OFF(beta2), "0.95", "AdamW beta2"},
    {"--adam-eps", F_FLOAT, OFF(eps), "1e-8", "AdamW epsilon"},
    {"--hidden-dropout", F_FLOAT, OFF(hidden_dropout), "0", "dropout on embeddings and residual branches (Philox masks)"},
    {"--attention-dropout", F_FLOAT, OFF(attn_dropout), "0", "dropout on attention probabilities (Philox masks)"},
    {"--device", F_STR, OFF(device), "cpu", "cpu or cuda (cuda needs build/detrain-cuda from `make cuda`)"},
    {"--seed", F_U64, OFF(seed), "1234", "seed of init, data order and dropout (Philox keys)"},
    {"--deterministic-mode", F_SWITCH, OFF(deterministic), "", "bitwise-reproducible run (DESIGN §2)"},
    {"--data-path", F_STR, OFF(data_path), "", "token shards: file, glob or comma list (default: built-in corpus)"},
    {"--val-fraction", F_FLOAT, OFF(val_fraction), "0.05", "fraction of windows held out for eval"},
    {"--save", F_STR, OFF(save_dir), "", "save checkpoints to DIR/iter_NNNNNNN (docs/checkpoints.md)"},
    {"--save-interval", F_I64, OFF(save_interval), "", "save every N steps (default: only at the end)"},
    {"--save-overwrite", F_SWITCH, OFF(save_overwrite), "", "allow --save into a directory holding another run's checkpoints (docs/checkpoints.md)"},
    {"--load", F_STR, OFF(load_dir), "", "resume bitwise from a save directory (its latest) or an iter_* directory"},
    {"--no-load-optim", F_SWITCH, OFF(no_load_optim), "", "resume with fresh optimizer state (refused in deterministic mode)"},
    {"--no-load-rng", F_SWITCH, OFF(no_load_rng), "", "resume with this run's --seed (refused in deterministic mode)"},
    {"--init-from-hf", F_STR, OFF(init_from_hf), "", "start from Hugging Face GPT-2 weights (config.json + model.safetensors)"},
    {"--log-dir", F_STR, OFF(log_dir), "", "write env.json, metrics.jsonl and TensorBoard events here"},
    {"--log-interval", F_INT, OFF(log_interval), "10", "console line every N steps"},
    {"--eval-interval", F_INT, OFF(eval_interval), "50", "eval loss every N steps (0: never)"},
    {"--eval-iters", F_INT, OFF(eval_iters), "4", "validation batches per eval"},
    {"--threads", F_INT, OFF(threads), "", "OpenMP threads (sets OMP_NUM_THREADS; default: env or all cores)"},
    {"--op-variant", F_LIST, OFF(nop_variants), "", "NAME=det|fast: force one op's branch (repeatable; =fast refused in deterministic mode)"},
    {"--trace-level", F_STR, OFF(trace_level), "off", "off|metrics|semantic|module|op|kernel (docs/debugging-determinism.md)"},
    {"--trace-steps", F_STR, OFF(trace_steps), "", "steps to trace, e.g. 10-12,20 (default: all)"},
    {"--trace-ranks", F_STR, OFF(trace_ranks), "", "ranks to trace, e.g. 0,2-3 (default: all)"},
    {"--trace-dir", F_STR, OFF(trace_dir), "", "directory for rank_NNNNNN.trace files (never overwritten)"},
    {"--inject-nondeterminism", F_STR, OFF(inject), "", "OP@STEP: flip the lowest bit of OP's output at STEP (debugging the trace workflow)"},
    {"--debug-allow-injection", F_SWITCH, OFF(debug_allow_injection), "", "allow --inject-nondeterminism in deterministic mode"},
    {"--quiet", F_SWITCH, OFF(quiet), "", "no console lines"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

static void help(FILE *f) {
    fprintf(f, "usage: detrain train [flags]\n\nflags (default in brackets):\n");
    for (int i = 0; i < NFLAGS; i++) {
        const char *arg = flags[i].kind == F_SWITCH ? "" : flags[i].kind == F_STR || flags[i].kind == F_LIST ? " S" : " N";
        char left[64];
        snprintf(left, sizeof left, "%s%s", flags[i].name, arg);
        fprintf(f, "  %-28s %s%s%s%s\n", left, flags[i].help, *flags[i].def ? " [" : "",
                flags[i].def, *flags[i].def ? "]" : "");
    }
}

static int parse_value(const flag *fl, const char *v, train_args *a) {
    char *end = NULL;
    void *dst = (char *)a + fl->offset;
    errno = 0;
    switch (fl->kind) {
    case F_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < -2147483647L || x > 2147483647L) break;
        *(int *)dst = (int)x;
        return 0;
    }
    case F_I64: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno) break;
        *(int64_t *)dst = x;
        return 0;
    }
    case F_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-') break;
        *(uint64_t *)dst = x;
        return 0;
    }
    case F_FLOAT: {
        float x = strtof(v, &end);
        if (!*v || *end || errno || !isfinite(x)) break;
        *(float *)dst = x;
        return 0;
    }
    case F_STR:
        *(const char **)dst = *v ? v : NULL;
        return 0;
    case F_SWITCH:
        *(int *)dst = 1;
        return 0;
    case F_LIST:
        if (a->nop_variants >= DT_OP_COUNT) break;
        a->op_variants[a->nop_variants++] = v;
        return 0;
    }
    fprintf(stderr, "detrain train: %s '%s' is not a valid %s\n", fl->name, v,
            fl->kind == F_FLOAT ? "finite number" : fl->kind == F_LIST ? "value (too many)" : "integer");
    return -1;
}

/* Checks ranges of the parsed numbers; prints the first problem. */
static int check_ranges(const train_args *a) {
    const struct { const char *name; long long v, lo, hi; } r[] = {
        {"--micro-batch-size", a->micro_batch, 1, 1 << 20},
        {"--global-batch-size", a->global_batch, 1, 1 << 24},
        {"--train-iters", a->train_iters, 1, 1LL << 40},
        {"--lr-warmup-iters", a->warmup_iters, 0, 1LL << 40},
        {"--log-interval", a->log_interval, 1, 1 << 30},
        {"--eval-interval", a->eval_interval, 0, 1 << 30},
        {"--eval-iters", a->eval_iters, 1, 1 << 30},
        {"--save-interval", a->save_interval, 0, 1LL << 40},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (r[i].v < r[i].lo || r[i].v > r[i].hi) {
            fprintf(stderr, "detrain train: %s %lld is out of range [%lld, %lld]\n", r[i].name,
                    r[i].v, r[i].lo, r[i].hi);
            return -1;
        }
    if ((a->save_interval && !a->save_dir) || ((a->no_load_optim || a->no_load_rng) && !a->load_dir)) {
        fprintf(stderr, "detrain train: %s needs %s\n", a->save_interval && !a->save_dir ? "--save-interval" :
                a->no_load_optim ? "--no-load-optim" : "--no-load-rng", a->save_interval && !a->save_dir ?
                "--save DIR" : "--load DIR");
        return -1;
    }
    if (a->lr < 0 || a->min_lr < 0 || a->min_lr > a->lr) {
        fprintf(stderr, "detrain train: need 0 <= --min-lr (%g) <= --lr (%g)\n", a->min_lr, a->lr);
        return -1;
    }
    if (a->beta1 < 0 || a->beta1 >= 1 || a->beta2 < 0 || a->beta2 >= 1 || a->eps <= 0) {
        fprintf(stderr, "detrain train: --adam-beta1/--adam-beta2 must be in [0,1) and --adam-eps > 0\n");
        return -1;
    }
    if (a->hidden_dropout < 0 || a->hidden_dropout >= 1 || a->attn_dropout < 0 || a->attn_dropout >= 1) {
        fprintf(stderr, "detrain train: --hidden-dropout and --attention-dropout must be in [0, 1)\n");
        return -1;
    }
    if (a->val_fraction < 0 || a->val_fraction > 0.5f || a->weight_decay < 0 || a->clip_grad < 0) {
        fprintf(stderr, "detrain train: need --val-fraction in [0, 0.5], --weight-decay >= 0, --clip-grad >= 0\n");
        return -1;
    }
    return 0;
}

int dt_cmd_train(int argc, char **argv) {
    train_args a;
    memset(&a, 0, sizeof a);
    dt_flag_use used[256];
    int nused = 0;
    for (int i = 0; i < NFLAGS; i++)
        if (*flags[i].def && parse_value(&flags[i], flags[i].def, &a) != 0) return 2;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(stdout); return 0; }
        char name[128];
        const char *val = NULL, *eq = strchr(argv[i], '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - argv[i]) : (int)strlen(argv[i]), argv[i]);
        const flag *fl = NULL;
        for (int k = 0; k < NFLAGS; k++) if (!strcmp(flags[k].name, name)) fl = &flags[k];
        if (!fl) {
            fprintf(stderr, "detrain train: unknown flag '%s' (see detrain train --help)\n", argv[i]);
            return 2;
        }
        if (fl->kind == F_SWITCH) {
            if (eq) { fprintf(stderr, "detrain train: %s takes no value\n", name); return 2; }
            val = "";
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(stderr, "detrain train: %s needs a value\n", name);
            return 2;
        }
        if (parse_value(fl, val, &a) != 0) return 2;
        if (nused < (int)(sizeof used / sizeof used[0])) used[nused++] = (dt_flag_use){fl->name, val};
    }
    if (a.threads < 0 || a.threads > 1024) {
        fprintf(stderr, "detrain train: --threads %d must be in 1..1024\n", a.threads);
        return 2;
    }
    if (a.threads > 0) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", a.threads);
        setenv("OMP_NUM_THREADS", buf, 1);
        setenv("OPENBLAS_NUM_THREADS", buf, 1);
    }
    /* Deterministic mode first: validation of flags and environment, then the switch. */
    dt_det_request req = {a.deterministic, used, nused};
    if (dt_determinism_apply(&req) != DT_OK) {
        fprintf(stderr, "detrain train: %s\n", dt_errmsg());
        return 2;
    }
    for (int i = 0; i < a.nop_variants; i++)
        if (dt_op_override(a.op_variants[i]) != DT_OK) {
            fprintf(stderr, "detrain train: %s\n", dt_errmsg());
            return 2;
        }
    if (!a.global_batch) a.global_batch = a.micro_batch;
    dt_trace_config tc = {0, a.trace_dir, a.trace_steps, a.trace_ranks, NULL};
    if (dt_trace_level_parse(a.trace_level ? a.trace_level : "off", &tc.level) != DT_OK ||
        dt_trace_config_check(&tc) != DT_OK) {
        fprintf(stderr, "detrain train: %s\n", dt_errmsg());
        return 2;
    }
    if (a.inject) {
        dt_inject inj;
        if (dt_inject_parse(a.inject, &inj) != DT_OK) {
            fprintf(stderr, "detrain train: --inject-nondeterminism: %s\n", dt_errmsg());
            return 2;
        }
        dt_inject_set(&inj);
    }
    if (check_ranges(&a) != 0) return 2;

    dt_train_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (dt_gpt_preset(a.model, &cfg.gpt) != DT_OK) {
        fprintf(stderr, "detrain train: --model: %s\n", dt_errmsg());
        return 2;
    }
    /* --init-from-hf: sizes not given as flags come from its config.json (given ones must
     * match it; the import checks) */
    if (a.init_from_hf) {
        dt_gpt_config hf;
        if (dt_hf_gpt2_read_config(a.init_from_hf, &hf) != DT_OK) {
            fprintf(stderr, "detrain train: --init-from-hf: %s\n", dt_errmsg());
            return 2;
        }
        cfg.gpt = hf;
    }
    if (a.num_layers) cfg.gpt.num_layers = a.num_layers;
    if (a.hidden_size) cfg.gpt.channels = a.hidden_size;
    if (a.num_heads) cfg.gpt.num_heads = a.num_heads;
    if (a.vocab_size) cfg.gpt.vocab_size = a.vocab_size;
    if (a.max_pos) cfg.gpt.max_seq_len = a.max_pos;
    if (a.seq_length && !a.max_pos && a.seq_length > cfg.gpt.max_seq_len) cfg.gpt.max_seq_len = a.seq_length;
    if (dt_gpt_config_finish(&cfg.gpt) != DT_OK) {
        fprintf(stderr, "detrain train: %s\n", dt_errmsg());
        return 2;
    }
    cfg.model = a.model;
    cfg.seq_length = a.seq_length ? a.seq_length : cfg.gpt.max_seq_len;
    cfg.micro_batch = a.micro_batch;
    cfg.global_batch = a.global_batch;
    cfg.train_iters = a.train_iters;
    cfg.lr = a.lr;
    cfg.min_lr = a.min_lr;
    cfg.warmup_iters = a.warmup_iters;
    cfg.decay_iters = a.decay_iters ? a.decay_iters : a.train_iters;
    cfg.weight_decay = a.weight_decay;
    cfg.clip_grad = a.clip_grad;
    cfg.beta1 = a.beta1;
    cfg.beta2 = a.beta2;
    cfg.eps = a.eps;
    cfg.hidden_dropout = a.hidden_dropout;
    cfg.attn_dropout = a.attn_dropout;
    cfg.seed = a.seed;
    cfg.deterministic = a.deterministic;
    cfg.data_path = a.data_path;
    cfg.val_fraction = a.val_fraction;
    cfg.save_dir = a.save_dir;
    cfg.save_interval = a.save_interval;
    cfg.load_dir = a.load_dir;
    cfg.no_load_optim = a.no_load_optim;
    cfg.no_load_rng = a.no_load_rng;
    cfg.save_overwrite = a.save_overwrite;
    cfg.init_from_hf = a.init_from_hf;
    cfg.log_dir = a.log_dir;
    cfg.log_interval = a.log_interval;
    cfg.eval_interval = a.eval_interval;
    cfg.eval_iters = a.eval_iters;
    cfg.quiet = a.quiet;
    if (!a.device || (strcmp(a.device, "cpu") && strcmp(a.device, "cuda"))) {
        fprintf(stderr, "detrain train: --device '%s': expected cpu or cuda\n", a.device ? a.device : "");
        return 2;
    }
    cfg.device = !strcmp(a.device, "cuda");
    cfg.trace = tc;

    if (dt_runtime_init() != DT_OK) {
        fprintf(stderr, "detrain train: %s\n", dt_errmsg());
        return 2;
    }
    dt_status st = dt_train_run(&cfg);
    if (st != DT_OK) {
        fprintf(stderr, "detrain train: %s\n", dt_errmsg());
        return 2;
    }
    return 0;
}
