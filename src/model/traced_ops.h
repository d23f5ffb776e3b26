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
#include "trace/trace.h"

/* The op-level event of an op: NULL unless tracing at op level. vid: the op's dt_op_id
 * (its variant is recorded) or -1 for an op with one path. */
dt_trace_op *dt_t_begin(int phase, const char *op, int vid, const dt_tensor_ref *in, int nin);
/* The injection point, then the event. `out` is the op's primary output: for backward ops
 * the input gradient, which every later op of the step consumes. */
void dt_t_end(const dt_gpt *m, dt_trace_op *h, const char *op, float *out, size_t n, const dt_tensor_ref *outs,
              int nout);

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

/* The MoE block's ops (traced_moe.c): MoE layer `mi` (its index among the MoE layers), its
 * parameters p and gradients g, input x (the LN2 output), output out (the branch, before
 * dropout). Forward adds the layer's aux loss to m->moe_aux and its dropped assignments to
 * m->moe_dropped; backward overwrites dx and adds into g (daux: dL/daux). */
void dt_t_moe_fwd(dt_gpt *m, int mi, float *out, const float *x, const dt_moe_params *p);
void dt_t_moe_bwd(const dt_gpt *m, int mi, float *dx, const dt_moe_grads *g, const float *dout, const float *x,
                  const dt_moe_params *p, float daux);

#endif
