/* The configuration of a training run, defined once in train_flags.def: the struct the
 * flags fill, the parser and `--help` made from that table, the resolution of what the
 * flags leave open (a preset's sizes, derived defaults), and the two records made from
 * the same table: the checkpoint's (what binds the trajectory and what does not) and
 * env.json's "config".
 *
 * Lifecycle: dt_train_config_parse (flags and value checks, nothing touched), then
 * deterministic mode (core/determinism.h, given cfg->flag_uses), then
 * dt_train_config_resolve (presets, Hugging Face config.json, cross-flag checks), then
 * the run; dt_train_config_free at the end. */
#ifndef DT_CONFIG_TRAIN_CONFIG_H
#define DT_CONFIG_TRAIN_CONFIG_H

#ifdef __cplusplus
extern "C" {
#endif

#include "config/options.h"
#include "model/gpt.h"
#include "trace/trace.h"

#include <stdint.h>
#include <stdio.h>

enum dt_train_flag_id {
#define DT_FLAG(id, name, kind, field, def, range, bind, key, group, help) DT_F_##id,
#include "config/train_flags.def"
#undef DT_FLAG
    DT_F_COUNT
};

enum { DT_LIST_OP_VARIANT, DT_LIST_COUNT };

/* The CUDA backend's choices (group CUDA of train_flags.def; indices of their choices). */
enum { DT_ATTN_AUTO, DT_ATTN_FLASH, DT_ATTN_FLASH_MMA, DT_ATTN_GEMM };
enum { DT_EPI_OFF, DT_EPI_GELU, DT_EPI_BGRAD, DT_EPI_ALL };
typedef struct dt_cuda_options {
    int attention;   /* DT_ATTN_* */
    int epilogues;   /* DT_EPI_* */
    int gemm_own;    /* 0 off, 1 the GELU GEMMs on detrain's own kernel */
    int gemm_dot;    /* 0 off, 1 on: the flash backward's D from the attproj GEMM's epilogue */
    int dw_batch;    /* 0 off, 1 on: batched weight gradients after the layers */
    int bwd_overlap; /* 0 off, 1 on: weight gradients on a second stream */
    int graphs;      /* 0 off, 1 on: CUDA graphs */
} dt_cuda_options;

/* The CUDA choices of a run with no flags given (the table's defaults). */
dt_cuda_options dt_cuda_options_default(void);

typedef struct dt_train_config {
    const char *model;            /* preset name */
    dt_gpt_config gpt;            /* resolved sizes (preset + explicit flags) */
    int seq_length;               /* T */
    int micro_batch;              /* B */
    int global_batch;             /* samples per step; multiple of micro_batch */
    int64_t train_iters;
    float lr, min_lr;
    int64_t warmup_iters, decay_iters;
    float weight_decay, clip_grad, beta1, beta2, eps;
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    int deterministic;
    int device;                   /* --device: 0 cpu, 1 cuda */
    const char *data_path;        /* NULL: built-in corpus */
    int synthetic;                /* --synthetic-tokens: 0 off, 1 uniform */
    float val_fraction;
    const char *save_dir;         /* --save: NULL no checkpoints (ckpt/ckpt.h) */
    int64_t save_interval;        /* save every N steps (0: not given, only at the end) */
    const char *load_dir;         /* --load: resume from a save or iteration directory */
    int no_load_optim, no_load_rng;
    int save_overwrite;           /* --save-overwrite: save over another run's checkpoints */
    const char *init_from_hf;     /* --init-from-hf: start from HF GPT-2 weights */
    const char *log_dir;          /* NULL: no files */
    int log_interval, eval_interval, eval_iters;
    int threads;                  /* --threads (0: not given) */
    dt_str_list lists[DT_LIST_COUNT];
    int trace_level;              /* enum dt_trace_level */
    const char *trace_steps, *trace_ranks, *trace_dir;
    const char *inject;           /* --inject-nondeterminism OP@STEP */
    int debug_allow_injection;
    int quiet;                    /* no console lines */
    int dist_engine;              /* --dist-engine: DT_DIST_* (dist/comm_factory.h) */
    const char *rank_order;       /* --rank-order: NULL the identity */
    float dist_timeout_sec;       /* --dist-timeout-sec */
    int exit_signal;              /* 1: the signal handler finishes the step, saves, exits 0 */
    int64_t exit_interval;        /* stop after multiples of it (0: not given) */
    float exit_minutes;           /* stop after this wall time (0: not given) */
    int check_nonfinite;          /* 1: a non-finite loss or grad norm stops the run */
    int distributed_optimizer;    /* --use-distributed-optimizer: ZeRO-1 (dist/dp.h) */
    dt_cuda_options cuda;
    dt_trace_config trace;        /* made from the trace flags by resolve */
    unsigned char given[DT_F_COUNT];
    dt_opt_set opts;              /* the parse: every flag use, for deterministic mode */
} dt_train_config;

/* The flag table (for tests and docs). */
const dt_opt *dt_train_flags(int *n);
/* Defaults, then argv; every value checked against its kind and range. On --help sets
 * *help and returns DT_OK. Touches nothing outside cfg. */
dt_status dt_train_config_parse(dt_train_config *cfg, int argc, char **argv, int *help);
/* Prints `detrain train`'s usage and the flags. */
void dt_train_config_help(FILE *f);
/* What the flags leave open and what they must agree on: the preset (or --init-from-hf's
 * config.json) fills the sizes not given, the defaults that follow other flags (global
 * batch, decay iterations, sequence length), the trace config, and every cross-flag rule
 * (a flag that needs another, a CUDA flag on the CPU, --min-lr <= --lr, ...). */
dt_status dt_train_config_resolve(dt_train_config *cfg);
void dt_train_config_free(dt_train_config *cfg);
/* env.json's "config": the resolved values of the flags that bind the trajectory
 * (binding 1) or of all the others (binding 0), as a JSON object text into buf (keys: the
 * flag names without "--"). */
void dt_train_config_json(const dt_train_config *cfg, int binding, char *buf, size_t cap);

/* The config as a checkpoint records it (ckpt/ckpt.h): the TRAJ flags bind, the RUN ones
 * are recorded. Free with dt_ckpt_config_free. */
struct dt_ckpt_config;
void dt_train_ckpt_config(const dt_train_config *cfg, struct dt_ckpt_config *out);

#ifdef __cplusplus
}
#endif

#endif
