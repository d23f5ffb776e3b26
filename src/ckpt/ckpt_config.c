/* The train config as a checkpoint records it (trainer.h, ckpt.h). Binding items are the
 * ones that change the trajectory; resume refuses any difference in them. The others
 * (how long to train, where to write, how often to log, eval and save) may change. */
#include "ckpt/ckpt.h"
#include "train/trainer.h"

#include <string.h>

void dt_train_ckpt_config(const dt_train_config *c, dt_ckpt_config *o) {
    memset(o, 0, sizeof *o);
    /* binding: the model, the batch, the schedule, the optimizer, the RNG, the data */
    dt_ckpt_config_int(o, "num_layers", "--num-layers", c->gpt.num_layers, 1);
    dt_ckpt_config_int(o, "hidden_size", "--hidden-size", c->gpt.channels, 1);
    dt_ckpt_config_int(o, "num_attention_heads", "--num-attention-heads", c->gpt.num_heads, 1);
    dt_ckpt_config_int(o, "vocab_size", "--vocab-size", c->gpt.vocab_size, 1);
    dt_ckpt_config_int(o, "max_position_embeddings", "--max-position-embeddings", c->gpt.max_seq_len, 1);
    dt_ckpt_config_int(o, "seq_length", "--seq-length", c->seq_length, 1);
    dt_ckpt_config_int(o, "micro_batch_size", "--micro-batch-size", c->micro_batch, 1);
    dt_ckpt_config_int(o, "global_batch_size", "--global-batch-size", c->global_batch, 1);
    dt_ckpt_config_f32(o, "lr", "--lr", c->lr, 1);
    dt_ckpt_config_f32(o, "min_lr", "--min-lr", c->min_lr, 1);
    dt_ckpt_config_int(o, "lr_warmup_iters", "--lr-warmup-iters", c->warmup_iters, 1);
    dt_ckpt_config_int(o, "lr_decay_iters", "--lr-decay-iters", c->decay_iters, 1);
    dt_ckpt_config_f32(o, "weight_decay", "--weight-decay", c->weight_decay, 1);
    dt_ckpt_config_f32(o, "clip_grad", "--clip-grad", c->clip_grad, 1);
    dt_ckpt_config_f32(o, "adam_beta1", "--adam-beta1", c->beta1, 1);
    dt_ckpt_config_f32(o, "adam_beta2", "--adam-beta2", c->beta2, 1);
    dt_ckpt_config_f32(o, "adam_eps", "--adam-eps", c->eps, 1);
    dt_ckpt_config_f32(o, "hidden_dropout", "--hidden-dropout", c->hidden_dropout, 1);
    dt_ckpt_config_f32(o, "attention_dropout", "--attention-dropout", c->attn_dropout, 1);
    dt_ckpt_config_u64(o, "seed", "--seed", c->seed, 1);
    dt_ckpt_config_int(o, "deterministic_mode", "--deterministic-mode", c->deterministic, 1);
    dt_ckpt_config_str(o, "data_path", "--data-path", c->data_path, 1);
    dt_ckpt_config_f32(o, "val_fraction", "--val-fraction", c->val_fraction, 1);
    /* not binding */
    dt_ckpt_config_str(o, "model", "--model", c->model, 0);
    dt_ckpt_config_int(o, "train_iters", "--train-iters", c->train_iters, 0);
    dt_ckpt_config_str(o, "log_dir", "--log-dir", c->log_dir, 0);
    dt_ckpt_config_int(o, "log_interval", "--log-interval", c->log_interval, 0);
    dt_ckpt_config_int(o, "eval_interval", "--eval-interval", c->eval_interval, 0);
    dt_ckpt_config_int(o, "eval_iters", "--eval-iters", c->eval_iters, 0);
    dt_ckpt_config_str(o, "save", "--save", c->save_dir, 0);
    dt_ckpt_config_int(o, "save_interval", "--save-interval", c->save_interval, 0);
    dt_ckpt_config_str(o, "load", "--load", c->load_dir, 0);
    dt_ckpt_config_str(o, "init_from_hf", "--init-from-hf", c->init_from_hf, 0);
}
