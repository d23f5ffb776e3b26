/* Traced op wrappers (see traced_ops.h). */
#include "model/traced_ops.h"

#include "ops/attention/attention.h"
#include "ops/crossentropy/crossentropy.h"
#include "ops/encoder/encoder.h"
#include "ops/gelu/gelu.h"
#include "ops/layernorm/layernorm.h"
#include "ops/gemm/matmul.h"
#include "trace/inject.h"
#include "trace/trace.h"

#include <string.h>

#define F32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_F32, .ndim = 2, \
                         .shape = {(int64_t)(r), (int64_t)(c)}}
#define I32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_I32, .ndim = 2, \
                         .shape = {(int64_t)(r), (int64_t)(c)}}
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *variant(int op) {
    if (op < 0) return NULL; /* deterministic by nature: one path */
    return dt_op_variant((dt_op_id)op) == DT_VARIANT_DET ? "det" : "fast";
}

dt_trace_op *dt_t_begin(int phase, const char *op, int vid, const dt_tensor_ref *in, int nin) {
    if (!dt_trace_on(DT_TRACE_OP)) return NULL;
    return dt_trace_begin(DT_TRACE_OP, phase, op, variant(vid), in, nin);
}

void dt_t_end(const dt_gpt *m, dt_trace_op *h, const char *op, float *out, size_t n, const dt_tensor_ref *outs,
              int nout) {
    if (dt_inject_should(op, m->step)) dt_inject_flip_all(out, n);
    if (h) dt_trace_end(h, outs, nout);
}

#define begin dt_t_begin
#define end dt_t_end

#define BT ((int64_t)m->B * m->T)
#define CH (m->cfg.channels)

void dt_t_encoder_fwd(const dt_gpt *m, float *out, const int *inp, const float *wte, const float *wpe) {
    dt_tensor_ref in[] = {I32("tokens", inp, m->B, m->T), F32("wte", wte, m->cfg.padded_vocab, CH),
                          F32("wpe", wpe, m->cfg.max_seq_len, CH)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "encoder_fwd", -1, in, COUNT(in));
    dt_encoder_fwd(out, inp, wte, wpe, m->B, m->T, CH);
    dt_tensor_ref o[] = {F32("out", out, BT, CH)};
    end(m, h, "encoder_fwd", out, (size_t)BT * CH, o, COUNT(o));
}

void dt_t_encoder_bwd(const dt_gpt *m, float *dwte, float *dwpe, const float *dout, const int *inp) {
    int Vp = m->cfg.padded_vocab;
    /* dwte rows are the order-sensitive buckets: per-row digests name the tokens hit */
    dt_tensor_ref in[] = {F32("dout", dout, BT, CH), I32("tokens", inp, m->B, m->T),
                          {.name = "dwte", .data = dwte, .dtype = DT_DT_F32, .ndim = 2,
                           .shape = {Vp, CH}, .order_sensitive = 1},
                          F32("dwpe", dwpe, m->cfg.max_seq_len, CH)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "encoder_bwd", DT_OP_ENCODER_BWD, in, COUNT(in));
    dt_encoder_bwd(dwte, dwpe, dout, inp, m->B, m->T, CH, Vp);
    dt_tensor_ref o[] = {{.name = "dwte", .data = dwte, .dtype = DT_DT_F32, .ndim = 2,
                          .shape = {Vp, CH}, .order_sensitive = 1},
                         F32("dwpe", dwpe, m->cfg.max_seq_len, CH)};
    end(m, h, "encoder_bwd", dwte, (size_t)Vp * CH, o, COUNT(o));
}

void dt_t_layernorm_fwd(const dt_gpt *m, float *out, float *mean, float *rstd, const float *inp,
                        const float *w, const float *b) {
    dt_tensor_ref in[] = {F32("x", inp, BT, CH), F32("w", w, 1, CH), F32("b", b, 1, CH)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "layernorm_fwd", -1, in, COUNT(in));
    dt_layernorm_fwd(out, mean, rstd, inp, w, b, (int)BT, CH);
    dt_tensor_ref o[] = {F32("y", out, BT, CH), F32("mean", mean, BT, 1), F32("rstd", rstd, BT, 1)};
    end(m, h, "layernorm_fwd", out, (size_t)BT * CH, o, COUNT(o));
}

void dt_t_layernorm_bwd(const dt_gpt *m, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean, const float *rstd) {
    dt_tensor_ref in[] = {F32("dy", dout, BT, CH), F32("x", inp, BT, CH), F32("w", w, 1, CH),
                          F32("mean", mean, BT, 1), F32("rstd", rstd, BT, 1),
                          F32("dx", dinp, BT, CH), F32("dw", dw, 1, CH), F32("db", db, 1, CH)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "layernorm_bwd", DT_OP_LAYERNORM_BWD, in, COUNT(in));
    dt_layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, (int)BT, CH);
    dt_tensor_ref o[] = {F32("dx", dinp, BT, CH), F32("dw", dw, 1, CH), F32("db", db, 1, CH)};
    end(m, h, "layernorm_bwd", dinp, (size_t)BT * CH, o, COUNT(o));
}

void dt_t_matmul_fwd(const dt_gpt *m, float *out, const float *inp, const float *w, const float *b,
                     int IC, int OC) {
    dt_tensor_ref in[] = {F32("x", inp, BT, IC), F32("w", w, OC, IC), F32("b", b ? b : w, 1, b ? OC : 0)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "matmul_fwd", DT_OP_GEMM, in, b ? 3 : 2);
    if (h) dt_trace_kernel_info(h, "gemm %s NT M=%lld N=%d K=%d", variant(DT_OP_GEMM), (long long)BT, OC, IC);
    dt_matmul_fwd(out, inp, w, b, (int)BT, IC, OC);
    dt_tensor_ref o[] = {F32("y", out, BT, OC)};
    end(m, h, "matmul_fwd", out, (size_t)BT * OC, o, COUNT(o));
}

void dt_t_matmul_bwd(const dt_gpt *m, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int IC, int OC) {
    dt_tensor_ref in[] = {F32("dy", dout, BT, OC), F32("x", inp, BT, IC), F32("w", w, OC, IC),
                          F32("dw", dw, OC, IC), F32("db", db ? db : dw, 1, db ? OC : 0)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "matmul_bwd", DT_OP_GEMM, in, db ? 5 : 4);
    if (h) dt_trace_kernel_info(h, "gemm %s NN+TN bias=%s", variant(DT_OP_GEMM), db ? variant(DT_OP_BIAS_BWD) : "none");
    dt_matmul_bwd(dinp, dw, db, dout, inp, w, (int)BT, IC, OC);
    dt_tensor_ref o[] = {F32("dx", dinp, BT, IC), F32("dw", dw, OC, IC), F32("db", db ? db : dw, 1, db ? OC : 0)};
    end(m, h, "matmul_bwd", dinp, (size_t)BT * IC, o, db ? 3 : 2);
}

void dt_t_attention_fwd(const dt_gpt *m, float *out, float *att, const float *qkv,
                        const dt_dropout *drop, uint32_t layer) {
    int NH = m->cfg.num_heads;
    dt_tensor_ref in[] = {F32("qkv", qkv, BT, 3 * CH)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "attention_fwd", -1, in, COUNT(in));
    dt_attention_fwd(out, att, qkv, m->B, m->T, CH, NH, drop, layer);
    dt_tensor_ref o[] = {F32("y", out, BT, CH), F32("att", att, (int64_t)m->B * NH * m->T, m->T)};
    end(m, h, "attention_fwd", out, (size_t)BT * CH, o, COUNT(o));
}

void dt_t_attention_bwd(const dt_gpt *m, float *dqkv, const float *dout, const float *qkv,
                        const float *att, const float *out, const dt_dropout *drop, uint32_t layer) {
    int NH = m->cfg.num_heads;
    dt_tensor_ref in[] = {F32("dy", dout, BT, CH), F32("qkv", qkv, BT, 3 * CH),
                          F32("att", att, (int64_t)m->B * NH * m->T, m->T), F32("y", out, BT, CH)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "attention_bwd", DT_OP_ATTENTION_BWD, in, COUNT(in));
    dt_attention_bwd(dqkv, dout, qkv, att, out, m->B, m->T, CH, NH, drop, layer);
    dt_tensor_ref o[] = {F32("dqkv", dqkv, BT, 3 * CH)};
    end(m, h, "attention_bwd", dqkv, (size_t)BT * 3 * CH, o, COUNT(o));
}

void dt_t_gelu_fwd(const dt_gpt *m, float *out, const float *inp, size_t n) {
    dt_tensor_ref in[] = {F32("x", inp, BT, (int64_t)n / BT)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "gelu_fwd", -1, in, 1);
    dt_gelu_fwd(out, inp, n);
    dt_tensor_ref o[] = {F32("y", out, BT, (int64_t)n / BT)};
    end(m, h, "gelu_fwd", out, n, o, 1);
}

void dt_t_gelu_bwd(const dt_gpt *m, float *dinp, const float *inp, const float *dout, size_t n) {
    dt_tensor_ref in[] = {F32("x", inp, BT, (int64_t)n / BT), F32("dy", dout, BT, (int64_t)n / BT)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "gelu_bwd", -1, in, 2);
    dt_gelu_bwd(dinp, inp, dout, n);
    dt_tensor_ref o[] = {F32("dx", dinp, BT, (int64_t)n / BT)};
    end(m, h, "gelu_bwd", dinp, n, o, 1);
}

void dt_t_residual_fwd(const dt_gpt *m, float *out, const float *a, const float *b, size_t n) {
    dt_tensor_ref in[] = {F32("a", a, BT, (int64_t)n / BT), F32("b", b, BT, (int64_t)n / BT)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "residual_fwd", -1, in, 2);
    dt_residual_fwd(out, a, b, n);
    dt_tensor_ref o[] = {F32("y", out, BT, (int64_t)n / BT)};
    end(m, h, "residual_fwd", out, n, o, 1);
}

void dt_t_dropout(const dt_gpt *m, const char *op, float *x, size_t n, const dt_dropout *d,
                  uint32_t purpose, uint32_t layer) {
    if (!dt_dropout_on(d)) return;
    dt_tensor_ref in[] = {F32("x", x, BT, (int64_t)n / BT)};
    dt_trace_op *h = begin(DT_PHASE_FWD, op, -1, in, 1);
    dt_dropout_apply(x, n, d, purpose, layer);
    dt_tensor_ref o[] = {F32("x", x, BT, (int64_t)n / BT)};
    end(m, h, op, x, n, o, 1);
}

void dt_t_crossentropy_fwd(const dt_gpt *m, float *losses, float *lse, const float *logits,
                           const int *targets) {
    int Vp = m->cfg.padded_vocab;
    dt_tensor_ref in[] = {F32("logits", logits, BT, Vp), I32("targets", targets, m->B, m->T)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "crossentropy_fwd", -1, in, 2);
    dt_crossentropy_fwd(losses, lse, logits, targets, (int)BT, m->cfg.vocab_size, Vp);
    dt_tensor_ref o[] = {F32("losses", losses, BT, 1), F32("lse", lse, BT, 1)};
    end(m, h, "crossentropy_fwd", losses, (size_t)BT, o, 2);
}

double dt_t_crossentropy_mean(const dt_gpt *m, const float *losses) {
    dt_tensor_ref in[] = {F32("losses", losses, BT, 1)};
    dt_trace_op *h = begin(DT_PHASE_FWD, "crossentropy_mean", DT_OP_CROSSENTROPY, in, 1);
    double mean = dt_crossentropy_mean(losses, (int)BT);
    if (dt_inject_should("crossentropy_mean", m->step)) {
        uint64_t bits; /* the lowest bit of the double itself */
        memcpy(&bits, &mean, sizeof bits);
        bits ^= 1u;
        memcpy(&mean, &bits, sizeof bits);
    }
    if (h) {
        dt_tensor_ref o[] = {{.name = "mean", .data = &mean, .dtype = DT_DT_F64, .ndim = 0}};
        dt_trace_end(h, o, 1);
    }
    return mean;
}

void dt_t_crossentropy_bwd(const dt_gpt *m, float *logits, const float *lse, const int *targets,
                           float dloss) {
    int Vp = m->cfg.padded_vocab;
    dt_tensor_ref in[] = {F32("logits", logits, BT, Vp), F32("lse", lse, BT, 1),
                          I32("targets", targets, m->B, m->T)};
    dt_trace_op *h = begin(DT_PHASE_BWD, "crossentropy_bwd", -1, in, 3);
    dt_crossentropy_bwd(logits, lse, targets, dloss, (int)BT, m->cfg.vocab_size, Vp);
    dt_tensor_ref o[] = {F32("dlogits", logits, BT, Vp)};
    end(m, h, "crossentropy_bwd", logits, (size_t)BT * Vp, o, 1);
}
