/* The model's op calls, each wrapped with its op-level trace event and its fault-injection
 * point (issue 5). A wrapper digests the op's inputs before it runs (so in-place updates
 * are seen), runs the op through its dispatcher, offers the output to
 * --inject-nondeterminism, and digests the outputs. With tracing off and no injection a
 * wrapper costs one compare per call. Op names here are the names trace-diff reports and
 * --inject-nondeterminism accepts. */
#ifndef DT_MODEL_TRACED_OPS_H
#define DT_MODEL_TRACED_OPS_H

#include "model/gpt.h"
#include "ops/dropout/dropout.h"

void dt_t_encoder_fwd(const dt_gpt *m, float *out, const int *inp, const float *wte, const float *wpe);
void dt_t_encoder_bwd(const dt_gpt *m, float *dwte, float *dwpe, const float *dout, const int *inp);
void dt_t_layernorm_fwd(const dt_gpt *m, float *out, float *mean, float *rstd, const float *inp,
                        const float *w, const float *b);
void dt_t_layernorm_bwd(const dt_gpt *m, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean, const float *rstd);
void dt_t_matmul_fwd(const dt_gpt *m, float *out, const float *inp, const float *w, const float *b,
                     int IC, int OC);
void dt_t_matmul_bwd(const dt_gpt *m, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int IC, int OC);
void dt_t_attention_fwd(const dt_gpt *m, float *out, float *att, const float *qkv,
                        const dt_dropout *drop, uint32_t layer);
void dt_t_attention_bwd(const dt_gpt *m, float *dqkv, const float *dout, const float *qkv,
                        const float *att, const float *out, const dt_dropout *drop, uint32_t layer);
void dt_t_gelu_fwd(const dt_gpt *m, float *out, const float *inp, size_t n);
void dt_t_gelu_bwd(const dt_gpt *m, float *dinp, const float *inp, const float *dout, size_t n);
void dt_t_residual_fwd(const dt_gpt *m, float *out, const float *a, const float *b, size_t n);
void dt_t_dropout(const dt_gpt *m, const char *op, float *x, size_t n, const dt_dropout *d,
                  uint32_t purpose, uint32_t layer);
void dt_t_crossentropy_fwd(const dt_gpt *m, float *losses, float *lse, const float *logits,
                           const int *targets);
double dt_t_crossentropy_mean(const dt_gpt *m, const float *losses);
void dt_t_crossentropy_bwd(const dt_gpt *m, float *logits, const float *lse, const int *targets,
                           float dloss);

#endif
