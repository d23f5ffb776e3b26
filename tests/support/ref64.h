/* fp64 reference implementations of every op and of the whole GPT forward, for accuracy
 * tests and the gradient check. Straightforward loops in double over contiguous row-major
 * arrays, written from the math in src/ops/<op>.h, not from the fp32 code: no blocking, no
 * chunking, no threads. Shapes use the letters of src/model/gpt.h. */
#ifndef DT_TESTS_SUPPORT_REF64_H
#define DT_TESTS_SUPPORT_REF64_H

#include "model/gpt.h"

#include <stddef.h>

/* C (M,N) = alpha op(A) op(B) + beta C; A stored (M,K) or (K,M) when ta, with row stride
 * lda; B stored (K,N) or (N,K) when tb, row stride ldb; C contiguous (row stride N). */
void ref64_gemm(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                const double *B, int ldb, double beta, double *C);

void ref64_encoder_fwd(double *out, const int *inp, const double *wte, const double *wpe,
                       int B, int T, int C);
/* dwte, dwpe += the gradient. */
void ref64_encoder_bwd(double *dwte, double *dwpe, const double *dout, const int *inp, int B,
                       int T, int C);

void ref64_layernorm_fwd(double *out, double *mean, double *rstd, const double *inp,
                         const double *w, const double *b, int N, int C);
/* dinp, dw, db += the gradient; mean and rstd are recomputed from inp in double. */
void ref64_layernorm_bwd(double *dinp, double *dw, double *db, const double *dout,
                         const double *inp, const double *w, int N, int C);

/* out (N,OC) = inp (N,IC) w^T + bias; bias may be NULL. */
void ref64_matmul_fwd(double *out, const double *inp, const double *w, const double *bias,
                      int N, int IC, int OC);
/* dinp = dout w (overwritten); dw += dout^T inp; db += colsum(dout) (db may be NULL). */
void ref64_matmul_bwd(double *dinp, double *dw, double *db, const double *dout,
                      const double *inp, const double *w, int N, int IC, int OC);

/* Causal attention on packed qkv (B,T,3C); att (B,NH,T,T) receives the probabilities
 * (may be NULL). keep (B,NH,T,T) holds dropout factors of the probabilities (0 or 1/(1-p)),
 * NULL for none: out = (P * keep) V. */
void ref64_attention_fwd(double *out, double *att, const double *qkv, const double *keep,
                         int B, int T, int C, int NH);
/* dqkv (B,T,3C) overwritten with the gradient of sum(out * dout). */
void ref64_attention_bwd(double *dqkv, const double *dout, const double *qkv,
                         const double *keep, int B, int T, int C, int NH);

void ref64_gelu_fwd(double *out, const double *inp, size_t n);
/* dinp = dout * gelu'(inp) (overwritten). */
void ref64_gelu_bwd(double *dinp, const double *inp, const double *dout, size_t n);

/* losses (N), lse (N) over the first V of Vp columns. */
void ref64_crossentropy_fwd(double *losses, double *lse, const double *logits,
                            const int *targets, int N, int V, int Vp);
/* dlogits (N,Vp) = (softmax - onehot) * dloss, padded columns 0. */
void ref64_crossentropy_bwd(double *dlogits, const double *logits, const int *targets,
                            double dloss, int N, int V, int Vp);

/* Mean loss of the whole GPT (the forward of src/model/gpt.c, in double) for parameters
 * laid out as dt_gpt_param_table(cfg) describes. */
double ref64_gpt_loss(const dt_gpt_config *cfg, const double *params, const int *inputs,
                      const int *targets, int B, int T);
/* The training objective: the mean loss plus, for a model with MoE layers, each MoE
 * layer's aux loss with coefficient coeff and capacity factor cap_factor (0: no dropping),
 * summed into *aux (may be NULL). ref64_gpt_loss is this with coeff 0. */
double ref64_gpt_objective(const dt_gpt_config *cfg, const double *params, const int *inputs, const int *targets,
                           int B, int T, double coeff, double cap_factor, double *aux);

#endif
