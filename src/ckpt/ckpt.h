/* Training checkpoints: save, strict verify, load for a bitwise resume, compare.
 *
 * Layout of one checkpoint, `<save>/iter_%07d/` (tracker.h names the directory):
 *   model.safetensors      fp32 master weights under Hugging Face GPT-2 names and layouts
 *                          (hf_gpt2.h): padded vocabulary rows are not stored; they are
 *                          always zero (checked at save), so load restores them exactly
 *   config.json            GPT2Config, so GPT2LMHeadModel.from_pretrained(iter dir) works
 *   optimizer.safetensors  AdamW state in detrain's own layout, fp32, every parameter
 *                          tensor at its full slab shape (padded rows included):
 *                          "m.<param>", "v.<param>" (param names of dt_param_desc), and
 *                          "t" (I64 scalar: updates taken)
 *   env.json               the environment fingerprint of the saving process
 *                          (core/fingerprint.h): "contract" and "info"
 *   state.json             written last in the directory: step, consumed samples/tokens,
 *                          data cursor and its permutation key, RNG keys and counters, the
 *                          train config ("config": fields that bind the trajectory; "run":
 *                          fields that do not), size and SHA-256 of every other file, name,
 *                          dtype, shape and SHA-256 of every tensor, and "state_sha256",
 *                          the SHA-256 of the file itself with that value's 64 hex digits
 *                          replaced by '0'.
 * The files are written into a fresh `<save>/iter_%07d.tmp/` (durable.h: temp name, fsync,
 * rename, directory fsync), which is then published as `iter_%07d/`: renamed, or, when
 * that directory exists, exchanged with it atomically and the old one removed (ckpt.c:
 * publish, with the fallback for file systems that cannot exchange). Then
 * `<save>/latest_checkpointed_iteration.txt` is written. A crash at any point of a save
 * leaves the tracker naming a checkpoint that verifies; crash points are those of
 * durable.h for each file above plus dir-created:iter_%07d.tmp, before-publish,
 * after-rename / after-dirsync of the directory, removing / removed, old-aside,
 * before-tracker and after-tracker.
 *
 * Everything read is verified before anything is used: state.json parses strictly and
 * matches its own digest; every file has the recorded size and SHA-256; each safetensors
 * file parses strictly and holds exactly the recorded tensors (name, dtype, shape, SHA-256,
 * in order); the counters, the RNG seed and the file formats agree (ckpt_view.c:
 * check_consistency); every file read is a regular file (core/regular_file.h). Any
 * violation is an error naming the file and the problem. */
#ifndef DT_CKPT_CKPT_H
#define DT_CKPT_CKPT_H

#include "data/dataset.h"
#include "detrain/detrain.h"
#include "model/gpt.h"
#include "optim/optim.h"

#include <stdint.h>
#include <stdio.h>

#define DT_CKPT_STATE_NAME "state.json"
#define DT_CKPT_OPTIM_NAME "optimizer.safetensors"
#define DT_CKPT_ENV_NAME "env.json"
#define DT_CKPT_FORMAT "detrain checkpoint"
#define DT_CKPT_VERSION 1
#define DT_CKPT_MAX_ITEMS 64

/* The train config as the checkpoint records it: key -> value as JSON text. A binding item
 * changes the trajectory and must be equal on load; the others (train iterations,
 * intervals, output directories) may change between a run and its resume. */
typedef struct dt_ckpt_item {
    const char *key;   /* static: "hidden_size" */
    const char *flag;  /* static: "--hidden-size", for messages */
    char *json;        /* owned: "128", "0.100000001", "\"data/x.bin\"", "null" */
    int binding;
} dt_ckpt_item;

typedef struct dt_ckpt_config {
    int n;
    int oom;           /* an add failed; save/load then fail with DT_ENOMEM */
    dt_ckpt_item item[DT_CKPT_MAX_ITEMS];
} dt_ckpt_config;

/* Appends one item (the value is formatted exactly: floats with 9 significant digits,
 * which round-trips a float32). A string may be NULL (written as null). */
void dt_ckpt_config_int(dt_ckpt_config *c, const char *key, const char *flag, int64_t v, int binding);
void dt_ckpt_config_u64(dt_ckpt_config *c, const char *key, const char *flag, uint64_t v, int binding);
void dt_ckpt_config_f32(dt_ckpt_config *c, const char *key, const char *flag, float v, int binding);
void dt_ckpt_config_str(dt_ckpt_config *c, const char *key, const char *flag, const char *v, int binding);
/* Appends one item whose value is already JSON text (copied). */
void dt_ckpt_config_json(dt_ckpt_config *c, const char *key, const char *flag, const char *json, int binding);
void dt_ckpt_config_free(dt_ckpt_config *c);

/* Where a run stands after `step` optimizer steps. The RNG is counter-based (Philox): init
 * is keyed by the seed, dropout by (seed, micro_steps + micro index, layer, element), the
 * data order by (seed, epoch). So seed and counters are the whole RNG state. */
typedef struct dt_ckpt_state {
    int64_t step;                /* optimizer steps completed */
    int64_t consumed_samples, consumed_tokens;
    dt_data_cursor cursor;       /* position of the next training window */
    uint64_t train_windows;      /* size of the permutation (a changed dataset is refused) */
    uint64_t seed;               /* Philox key of init, dropout and the epoch permutation */
    int64_t micro_steps;         /* dropout counter: global micro-batches drawn so far */
} dt_ckpt_state;

/* Saves `<save_dir>/iter_%07d/` for s->step and then the tracker (see above), replacing an
 * existing iteration directory of that step atomically. Creates save_dir (one level) if
 * needed. Fails (DT_ESTATE, nothing written) if a padded
 * vocabulary row of wte is not zero. env.json is written by dt_fingerprint_write. */
dt_status dt_ckpt_save(const char *save_dir, const dt_gpt *model, const dt_adamw *opt,
                       const dt_ckpt_state *s, const dt_ckpt_config *cfg);
/* As dt_ckpt_save, with env_extra (a JSON object text, or NULL) merged into env.json's
 * "contract" under "run" (dt_fingerprint_write): the backend's device description, so a
 * GPU checkpoint records the environment of the GPU run that saved it. */
dt_status dt_ckpt_save_env(const char *save_dir, const dt_gpt *model, const dt_adamw *opt,
                           const dt_ckpt_state *s, const dt_ckpt_config *cfg, const char *env_extra);

/* Resolves a --load argument: a save directory (its tracker names the iteration) or an
 * iteration directory (holding state.json). Writes the iteration directory to out. */
dt_status dt_ckpt_resolve(const char *path, char *out, size_t cap);

/* Refuses (DT_EINVAL, naming the directory, what it holds and what to do) a --save
 * directory that holds checkpoints of another run: it holds a tracker or an iteration
 * directory (dt_ckpt_list_iters) and this run does not resume from it, i.e. `load` (NULL:
 * no --load) does not resolve to a checkpoint inside save_dir. `overwrite`
 * (--save-overwrite) accepts it: this run's saves then replace the iteration directories
 * of the steps it saves (atomically) and the tracker; the others stay as they are.
 * save_dir NULL, missing or holding no checkpoint: DT_OK. Reads only. */
dt_status dt_ckpt_save_dir_check(const char *save_dir, const char *load, int overwrite);

typedef struct dt_ckpt_load_opts {
    int load_optim;  /* 0: optimizer state starts fresh (m = v = 0, t = 0) */
    int load_rng;    /* 0: the run's own seed replaces the checkpoint's (seed may differ) */
} dt_ckpt_load_opts;

/* Verifies the checkpoint at `path` (dt_ckpt_resolve) completely, checks that its binding
 * config equals cfg's item by item (DT_EMISMATCH naming the key, both values and the
 * flag), then fills model parameters, optimizer state (when opts->load_optim) and *s.
 * Nothing is modified unless everything verified. */
dt_status dt_ckpt_load(const char *path, const dt_ckpt_config *cfg, const dt_ckpt_load_opts *opts,
                       dt_gpt *model, dt_adamw *opt, dt_ckpt_state *s);

/* Verifies the checkpoint at `path` (as load does, without a model) and prints a summary
 * to out (NULL: nothing printed). */
dt_status dt_ckpt_verify(const char *path, FILE *out);

/* Compares two checkpoints (each a save or iteration directory), both verified first:
 * state fields (step, consumed, cursor, RNG, optimizer step), binding config, then every
 * tensor of model.safetensors and optimizer.safetensors byte by byte. Writes a report to
 * out: the first differing tensor and element with both values in hex. Ignores wall-clock
 * and output fields (save time, env.json "info", the "run" config); a difference in the
 * env.json "contract" is a warning. DT_OK with *identical set; an error when a checkpoint
 * does not verify. */
dt_status dt_ckpt_compare(const char *a, const char *b, FILE *out, int *identical);

#endif
