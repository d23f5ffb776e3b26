/* Hugging Face `transformers` GPT-2 compatibility: our fp32 parameter slab (model/gpt.h)
 * to and from `model.safetensors` + `config.json` that `GPT2LMHeadModel.from_pretrained`
 * loads, and the logits check file that tools/hf_compare.py reads.
 *
 * Mapping (ours, slab layout -> HF name, HF shape), for each layer i:
 *   wte (Vp, C)            -> transformer.wte.weight (V, C): first V rows only
 *   wpe (maxT, C)          -> transformer.wpe.weight (maxT, C)
 *   ln1w/ln1b (L, C)       -> transformer.h.{i}.ln_1.weight / .bias (C)
 *   qkvw (L, 3C, C)        -> transformer.h.{i}.attn.c_attn.weight (C, 3C): transposed,
 *                             because HF's Conv1D stores [in, out]; the 3C outputs are
 *                             q | k | v, each C = NH x HS head-major, in both layouts
 *   qkvb (L, 3C)           -> transformer.h.{i}.attn.c_attn.bias (3C)
 *   attprojw (L, C, C)     -> transformer.h.{i}.attn.c_proj.weight (C, C): transposed
 *   attprojb (L, C)        -> transformer.h.{i}.attn.c_proj.bias (C)
 *   ln2w/ln2b (L, C)       -> transformer.h.{i}.ln_2.weight / .bias (C)
 *   fcw (L, 4C, C)         -> transformer.h.{i}.mlp.c_fc.weight (C, 4C): transposed
 *   fcb (L, 4C)            -> transformer.h.{i}.mlp.c_fc.bias (4C)
 *   fcprojw (L, C, 4C)     -> transformer.h.{i}.mlp.c_proj.weight (4C, C): transposed
 *   fcprojb (L, C)         -> transformer.h.{i}.mlp.c_proj.bias (C)
 *   lnfw/lnfb (C)          -> transformer.ln_f.weight / .bias (C)
 * No lm_head.weight (tied to wte); metadata {"format":"pt"}; all tensors F32.
 * Export and import are exact (bitwise) in both directions for F32 files.
 *
 * An MoE model (cfg->num_experts > 0) is not a GPT2LMHeadModel. A checkpoint writes it in
 * detrain's native layout through the same calls: model.safetensors holds every non-empty
 * slab tensor in slab order under its detrain name and shape (wte at (Vp, C), moe_w1 at
 * (Lm, E, 4C, C), ...; model/gpt.h), config.json names model_type DT_HF_MOE_MODEL_TYPE
 * (which transformers does not load), and the read calls take the same layout back.
 * dt_hf_gpt2_export refuses an MoE model (DT_EUNSUPPORTED), and reading such a config.json
 * as a GPT-2 (--init-from-hf) is refused too. */
#ifndef DT_CKPT_HF_GPT2_H
#define DT_CKPT_HF_GPT2_H

#include "ckpt/sha256.h"
#include "detrain/detrain.h"
#include "model/gpt.h"

#include <stddef.h>
#include <stdint.h>

#define DT_HF_WEIGHTS_NAME "model.safetensors"
#define DT_HF_CONFIG_NAME "config.json"
#define DT_LOGITS_CHECK_NAME "logits_check.bin"
#define DT_HF_MOE_MODEL_TYPE "detrain_moe"

/* Tensors in the HF file for cfg: 4 + 12 L, in the order written (an MoE model: its
 * non-empty slab tensors). */
int dt_hf_gpt2_num_tensors(const dt_gpt_config *cfg);
/* HF name of the i-th tensor in file order ("transformer.h.3.mlp.c_fc.weight"). */
dt_status dt_hf_gpt2_tensor_name(const dt_gpt_config *cfg, int i, char *buf, size_t cap);

/* Writes `path` (durably) holding the parameters `params` (the slab described by
 * dt_gpt_param_table(cfg)) under HF names and layouts. digests: NULL or
 * dt_hf_gpt2_num_tensors(cfg) entries receiving each tensor's SHA-256 in file order. */
dt_status dt_hf_gpt2_write_weights(const char *path, const dt_gpt_config *cfg, const float *params,
                                   uint8_t (*digests)[DT_SHA256_LEN]);
/* Writes a GPT2Config `config.json` for cfg (durably). */
dt_status dt_hf_gpt2_write_config(const char *path, const dt_gpt_config *cfg);
/* Creates `dir` if needed and writes dir/model.safetensors and dir/config.json. */
dt_status dt_hf_gpt2_export(const char *dir, const dt_gpt_config *cfg, const float *params);

/* Reads dir/config.json into *cfg (vocab_size, max_seq_len = n_positions, num_layers,
 * num_heads, channels; then dt_gpt_config_finish). A setting detrain's GPT-2 does not
 * compute (activation other than gelu_new / gelu_pytorch_tanh, layer_norm_epsilon other
 * than 1e-5, n_inner other than 4 n_embd, untied embeddings, cross-attention, attention
 * scaling changed, n_ctx != n_positions) is DT_EUNSUPPORTED naming the field. */
dt_status dt_hf_gpt2_read_config(const char *dir, dt_gpt_config *cfg);
/* Reads an HF GPT-2 weights file into `params` (dt_gpt_param_table(cfg) floats): every
 * tensor present with exactly the shape cfg implies (else DT_EMISMATCH naming it), F32,
 * F16 or BF16 (widened exactly); names with or without the "transformer." prefix;
 * attn.bias / attn.masked_bias buffers ignored; lm_head.weight, if present, must equal wte
 * bit for bit; any other tensor is an error. Padded vocab rows are zeroed. On failure
 * params may be partly written. */
dt_status dt_hf_gpt2_read_weights(const char *path, const dt_gpt_config *cfg, float *params);
/* dt_hf_gpt2_read_config(dir) must give the same model as cfg (else DT_EMISMATCH naming the
 * field), then dt_hf_gpt2_read_weights(dir/model.safetensors). For --init-from-hf DIR. */
dt_status dt_hf_gpt2_import(const char *dir, const dt_gpt_config *cfg, float *params);

/* Logits check file (little-endian), written by detrain, read by tools/hf_compare.py:
 *   0  char[8]  magic "DTLOGIT1"
 *   8  uint32   version = 1
 *   12 uint32   B
 *   16 uint32   T
 *   20 uint32   V           real vocabulary (padded columns are not stored)
 *   24 float64  loss        mean over B*T of -log softmax(logits[b,t])[targets[b,t]]
 *   32 int32    inputs[B*T]
 *      int32    targets[B*T]
 *      float32  logits[B*T*V]   row (b, t) holds the logits predicting targets[b, t]
 * Total 32 + 8 B T + 4 B T V bytes. */
typedef struct dt_logits_check {
    uint32_t B, T, V;
    double loss;
    int32_t *inputs, *targets; /* B*T each */
    float *logits;             /* B*T*V */
} dt_logits_check;

/* Writes the file durably from logits laid out (B, T, ld) with ld >= V (ld = Vp for the
 * model's logits buffer); only the first V columns are stored. */
dt_status dt_logits_check_write(const char *path, int B, int T, int V, size_t ld, const int *inputs,
                                const int *targets, const float *logits, double loss);
/* Reads and validates a file (magic, version, sizes match the file length, token ids in
 * [0, V)). The caller frees with dt_logits_check_free. */
dt_status dt_logits_check_read(const char *path, dt_logits_check *out);
void dt_logits_check_free(dt_logits_check *lc);

#endif
