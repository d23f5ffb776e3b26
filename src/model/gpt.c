/* GPT-2 model on the CPU: config presets, parameter layout, init, forward and backward.
 * Every op goes through the op dispatchers in src/ops, which pick det or fast branches. */
#include "model/gpt.h"

#include "core/philox.h"
#include "model/blocks.h"
#include "model/traced_ops.h"
#include "trace/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int L, NH, C, V, T; } presets[] = {
    {"tiny", 4, 4, 128, 256, 128},     /* default: built-in byte corpus, seconds per run */
    {"small", 4, 4, 256, 512, 256},    /* the CPU benchmark config */
    {"gpt2-124m", 12, 12, 768, 50257, 1024},
    {"gpt2-350m", 24, 16, 1024, 50257, 1024},
    {"gpt2-774m", 36, 20, 1280, 50257, 1024},
    {"gpt2-1558m", 48, 25, 1600, 50257, 1024},
};

dt_status dt_gpt_preset(const char *name, dt_gpt_config *cfg) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            memset(cfg, 0, sizeof *cfg);
            cfg->num_layers = presets[i].L;
            cfg->num_heads = presets[i].NH;
            cfg->channels = presets[i].C;
            cfg->vocab_size = presets[i].V;
            cfg->max_seq_len = presets[i].T;
            return DT_OK;
        }
    return dt_fail(DT_EINVAL, "unknown model preset '%s'; known: tiny, small, gpt2-124m, "
                   "gpt2-350m, gpt2-774m, gpt2-1558m", name);
}

dt_status dt_gpt_config_finish(dt_gpt_config *cfg) {
    if (cfg->num_layers < 1 || cfg->num_layers > 1024)
        return dt_fail(DT_EINVAL, "--num-layers %d: must be in 1..1024", cfg->num_layers);
    if (cfg->channels < 1 || cfg->channels > 65536)
        return dt_fail(DT_EINVAL, "--hidden-size %d: must be in 1..65536", cfg->channels);
    if (cfg->num_heads < 1 || cfg->channels % cfg->num_heads)
        return dt_fail(DT_EINVAL, "--num-attention-heads %d must divide --hidden-size %d",
                       cfg->num_heads, cfg->channels);
    if (cfg->vocab_size < 2 || cfg->vocab_size > (1 << 24))
        return dt_fail(DT_EINVAL, "--vocab-size %d: must be in 2..16777216", cfg->vocab_size);
    if (cfg->max_seq_len < 1 || cfg->max_seq_len > (1 << 20))
        return dt_fail(DT_EINVAL, "--max-position-embeddings %d: must be in 1..1048576",
                       cfg->max_seq_len);
    cfg->padded_vocab = (cfg->vocab_size + 127) / 128 * 128;
    return DT_OK;
}

int dt_gpt_is_moe(const dt_gpt_config *cfg, int layer) {
    return cfg->num_experts > 0 && layer >= 0 && layer < 1024 &&
           (int)((cfg->moe_layers[layer / 64] >> (layer % 64)) & 1u);
}

int dt_gpt_num_moe_layers(const dt_gpt_config *cfg) {
    int n = 0;
    for (int l = 0; l < cfg->num_layers; l++) n += dt_gpt_is_moe(cfg, l);
    return n;
}

int dt_gpt_mlp_index(const dt_gpt_config *cfg, int layer) {
    int moe = dt_gpt_is_moe(cfg, layer), n = 0;
    for (int l = 0; l < layer; l++) n += dt_gpt_is_moe(cfg, l) == moe;
    return n;
}

size_t dt_gpt_param_table(const dt_gpt_config *cfg, dt_param_desc out[DT_NUM_PARAM_TENSORS]) {
    int64_t L = cfg->num_layers, C = cfg->channels, Vp = cfg->padded_vocab, maxT = cfg->max_seq_len;
    int64_t Lm = dt_gpt_num_moe_layers(cfg), Ld = L - Lm, E = Lm ? cfg->num_experts : 0, F = 4 * C;
    const struct { const char *name; int ndim; int64_t s0, s1, s2, s3; int decay; } t[] = {
        {"wte", 2, Vp, C, 0, 0, 1},       {"wpe", 2, maxT, C, 0, 0, 1},
        {"ln1w", 2, L, C, 0, 0, 0},       {"ln1b", 2, L, C, 0, 0, 0},
        {"qkvw", 3, L, 3 * C, C, 0, 1},   {"qkvb", 2, L, 3 * C, 0, 0, 0},
        {"attprojw", 3, L, C, C, 0, 1},   {"attprojb", 2, L, C, 0, 0, 0},
        {"ln2w", 2, L, C, 0, 0, 0},       {"ln2b", 2, L, C, 0, 0, 0},
        {"fcw", 3, Ld, 4 * C, C, 0, 1},   {"fcb", 2, Ld, 4 * C, 0, 0, 0},
        {"fcprojw", 3, Ld, C, 4 * C, 0, 1}, {"fcprojb", 2, Ld, C, 0, 0, 0},
        {"lnfw", 1, C, 0, 0, 0, 0},       {"lnfb", 1, C, 0, 0, 0, 0},
        {"moe_wr", 3, Lm, E, C, 0, 1},    {"moe_w1", 4, Lm, E, F, C, 1},
        {"moe_b1", 3, Lm, E, F, 0, 0},    {"moe_w2", 4, Lm, E, C, F, 1},
        {"moe_b2", 3, Lm, E, C, 0, 0},
    };
    size_t off = 0;
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        dt_param_desc *d = &out[i];
        d->name = t[i].name;
        d->ndim = t[i].ndim;
        d->shape[0] = t[i].s0;
        d->shape[1] = t[i].s1;
        d->shape[2] = t[i].s2;
        d->shape[3] = t[i].s3;
        d->numel = 1;
        for (int k = 0; k < d->ndim; k++) d->numel *= (size_t)d->shape[k];
        d->offset = off;
        d->decay = t[i].decay;
        off += d->numel;
    }
    return off;
}

static void init_params(dt_gpt *m, uint64_t seed) {
    const dt_gpt_config *c = &m->cfg;
    float proj_std = 0.02f / sqrtf(2.0f * (float)c->num_layers);
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        float *p = m->param[i];
        int is_ln_w = (i == DT_P_LN1W || i == DT_P_LN2W || i == DT_P_LNFW);
        int is_matrix = (i == DT_P_WTE || i == DT_P_WPE || i == DT_P_QKVW || i == DT_P_ATTPROJW ||
                         i == DT_P_FCW || i == DT_P_FCPROJW || i == DT_P_MOE_WR || i == DT_P_MOE_W1 ||
                         i == DT_P_MOE_W2);
        float std = (i == DT_P_ATTPROJW || i == DT_P_FCPROJW || i == DT_P_MOE_W2) ? proj_std : 0.02f;
        size_t n = d->numel;
        if (i == DT_P_WTE) n = (size_t)c->vocab_size * (size_t)c->channels; /* padded rows stay 0 */
        memset(p, 0, sizeof(float) * d->numel);
        if (is_ln_w) {
            for (size_t k = 0; k < n; k++) p[k] = 1.0f;
        } else if (is_matrix) {
            /* Keyed by (seed, tensor, element): any element can be drawn independently. */
#pragma omp parallel for schedule(static)
            for (size_t k = 0; k < n; k++)
                p[k] = std * dt_rng_normal(seed, DT_RNG_INIT, (uint32_t)i, 0, (uint64_t)k);
        }
    }
}

dt_status dt_gpt_create_params(dt_gpt **out, const dt_gpt_config *cfg, uint64_t seed) {
    *out = NULL;
    dt_gpt *m = calloc(1, sizeof *m);
    if (!m) return dt_fail(DT_ENOMEM, "out of memory allocating the model");
    m->cfg = *cfg;
    m->num_params = dt_gpt_param_table(cfg, m->params);
    m->param_mem = malloc(sizeof(float) * m->num_params);
    if (!m->param_mem) {
        size_t np = m->num_params;
        dt_gpt_free(m);
        return dt_fail(DT_ENOMEM, "out of memory: the model has %zu parameters", np);
    }
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) m->param[i] = m->param_mem + m->params[i].offset;
    m->seed = seed;
    init_params(m, seed);
    *out = m;
    return DT_OK;
}

dt_status dt_gpt_alloc_train(dt_gpt *m, int B, int T) {
    const dt_gpt_config *cfg = &m->cfg;
    if (m->act_mem) return dt_fail(DT_ESTATE, "dt_gpt_alloc_train: the model has its training buffers already");
    if (B < 1 || T < 1) return dt_fail(DT_EINVAL, "micro-batch %d and sequence length %d must be >= 1", B, T);
    if (T > cfg->max_seq_len)
        return dt_fail(DT_EINVAL, "--seq-length %d exceeds --max-position-embeddings %d", T,
                       cfg->max_seq_len);
    m->B = B;
    m->T = T;
    size_t L = (size_t)cfg->num_layers, C = (size_t)cfg->channels, NH = (size_t)cfg->num_heads;
    size_t BT = (size_t)B * (size_t)T, Vp = (size_t)cfg->padded_vocab;
    const size_t sizes[] = {
        BT * C,                                        /* encoded */
        L * BT * C, L * BT, L * BT,                    /* ln1 */
        L * BT * 3 * C, L * BT * C, L * (size_t)B * NH * (size_t)T * (size_t)T, /* qkv atty att */
        L * BT * C, L * BT * C,                        /* attproj residual2 */
        L * BT * C, L * BT, L * BT,                    /* ln2 */
        L * BT * 4 * C, L * BT * 4 * C,                /* fch fch_gelu */
        L * BT * C, L * BT * C,                        /* fcproj residual3 */
        BT * C, BT, BT,                                /* lnf */
        BT * Vp, BT, BT,                               /* logits losses lse */
        BT * C, BT * C, BT * 3 * C, BT * 4 * C, BT * 4 * C, BT * C, /* dacts */
    };
    float **ptrs[] = {
        &m->acts.encoded, &m->acts.ln1, &m->acts.ln1_mean, &m->acts.ln1_rstd, &m->acts.qkv,
        &m->acts.atty, &m->acts.att, &m->acts.attproj, &m->acts.residual2, &m->acts.ln2,
        &m->acts.ln2_mean, &m->acts.ln2_rstd, &m->acts.fch, &m->acts.fch_gelu, &m->acts.fcproj,
        &m->acts.residual3, &m->acts.lnf, &m->acts.lnf_mean, &m->acts.lnf_rstd, &m->acts.logits,
        &m->acts.losses, &m->acts.lse, &m->dacts.dres, &m->dacts.dc1, &m->dacts.dqkv,
        &m->dacts.dfch, &m->dacts.dfch_gelu, &m->dacts.dtmp,
    };
    size_t nbuf = sizeof sizes / sizeof sizes[0], total = 0;
    for (size_t i = 0; i < nbuf; i++) total += sizes[i];
    m->grad_mem = calloc(m->num_params, sizeof(float));
    m->act_mem = calloc(total, sizeof(float));
    if (!m->grad_mem || !m->act_mem) {
        free(m->grad_mem);
        free(m->act_mem);
        m->grad_mem = m->act_mem = NULL;
        return dt_fail(DT_ENOMEM, "out of memory: the model needs %zu gradient and %zu activation floats; "
                       "reduce --micro-batch-size or --seq-length", m->num_params, total);
    }
    m->num_acts = total;
    float *p = m->act_mem;
    for (size_t i = 0; i < nbuf; i++) { *ptrs[i] = p; p += sizes[i]; }
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) m->grad[i] = m->grad_mem + m->params[i].offset;
    return DT_OK;
}

dt_status dt_gpt_create(dt_gpt **out, const dt_gpt_config *cfg, int B, int T, uint64_t seed) {
    if (B < 1 || T < 1) return dt_fail(DT_EINVAL, "micro-batch %d and sequence length %d must be >= 1", B, T);
    dt_status st = dt_gpt_create_params(out, cfg, seed);
    if (st == DT_OK && (st = dt_gpt_alloc_train(*out, B, T)) != DT_OK) {
        dt_gpt_free(*out);
        *out = NULL;
    }
    return st;
}

void dt_gpt_free(dt_gpt *m) {
    if (!m) return;
    free(m->param_mem);
    free(m->grad_mem);
    free(m->act_mem);
    free(m);
}

void dt_gpt_zero_grad(dt_gpt *m) { memset(m->grad_mem, 0, sizeof(float) * m->num_params); }

/* Dropout sites of the hidden state: the layer key is 2*l + site (site 0 attention output,
 * 1 MLP output); the embedding output uses EMB_SITE. */
#define EMB_SITE 0xffffffffu
static dt_dropout hidden_drop(const dt_gpt *m) {
    dt_dropout d = {m->training ? m->hidden_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}
static dt_dropout attn_drop(const dt_gpt *m) {
    dt_dropout d = {m->training ? m->attn_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}

#define F32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_F32, .ndim = 2, \
                         .shape = {(int64_t)(r), (int64_t)(c)}}

/* The per-layer tensors of layer l (parameters, or their gradients when t = m->grad) as
 * trace refs named `<prefix><tensor>`, after a first ref for the block's input or output
 * `x` when xname is set. names holds the composed names. Returns the count. */
#define LAYER_TENSORS (DT_P_FCPROJB - DT_P_LN1W + 1)
typedef char ref_name[24];
static int layer_refs(const dt_gpt *m, float *const *t, int l, const char *prefix, const char *xname,
                      const float *x, dt_tensor_ref *out, ref_name *names) {
    int64_t BT = (int64_t)m->B * m->T, C = m->cfg.channels;
    int n = 0;
    if (xname) {
        dt_tensor_ref first = F32(xname, x, BT, C);
        out[n++] = first;
    }
    for (int i = DT_P_LN1W; i <= DT_P_FCPROJB; i++) {
        const dt_param_desc *d = &m->params[i];
        size_t per_layer = d->numel / (size_t)d->shape[0];
        int64_t rows = d->ndim == 3 ? d->shape[1] : 1, cols = d->ndim == 3 ? d->shape[2] : d->shape[1];
        snprintf(names[i - DT_P_LN1W], sizeof names[0], "%s%s", prefix, d->name);
        dt_tensor_ref r = F32(names[i - DT_P_LN1W], t[i] + (size_t)l * per_layer, rows, cols);
        out[n++] = r;
    }
    return n;
}

/* Module-level trace event of block l: its input (the residual stream, or its gradient)
 * and every parameter of the layer; backward events also take the layer's gradients as
 * they were before the block (they accumulate over micro-batches) and give them out. */
static dt_trace_op *block_begin(const dt_gpt *m, int phase, const char *op, int l, const float *x) {
    char scope[32];
    snprintf(scope, sizeof scope, "h.%d", l);
    dt_trace_scope_push(scope);
    if (!dt_trace_on(DT_TRACE_MODULE)) return NULL;
    dt_tensor_ref in[1 + 2 * LAYER_TENSORS];
    ref_name pnames[LAYER_TENSORS], gnames[LAYER_TENSORS];
    int n = layer_refs(m, m->param, l, "", "x", x, in, pnames);
    if (phase == DT_PHASE_BWD) n += layer_refs(m, m->grad, l, "d", NULL, NULL, in + n, gnames);
    return dt_trace_begin(DT_TRACE_MODULE, phase, op, NULL, in, n);
}

static void block_end(const dt_gpt *m, dt_trace_op *h, int phase, const float *y, int l) {
    if (h) {
        dt_tensor_ref out[1 + LAYER_TENSORS];
        ref_name gnames[LAYER_TENSORS];
        int n = 1;
        if (phase == DT_PHASE_BWD) {
            n = layer_refs(m, m->grad, l, "d", "dx", y, out, gnames);
        } else {
            dt_tensor_ref r = F32("y", y, (int64_t)m->B * m->T, m->cfg.channels);
            out[0] = r;
        }
        dt_trace_end(h, out, n);
    }
    dt_trace_scope_pop();
}

/* Layer l's attention block: res2 = res + dropout(attproj(attention(qkv(LN1(res))))). */
static void attention_fwd(dt_gpt *m, int l, const float *res, const dt_dropout *hd, const dt_dropout *ad) {
    dt_gpt_acts *a = &m->acts;
    float *const *w = m->param;
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads, BT = B * T;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    float *ln1 = a->ln1 + l * sc, *qkv = a->qkv + l * sc * 3, *atty = a->atty + l * sc;
    float *att = a->att + (size_t)l * B * NH * T * T, *attproj = a->attproj + l * sc;
    dt_t_layernorm_fwd(m, ln1, a->ln1_mean + (size_t)l * BT, a->ln1_rstd + (size_t)l * BT, res, w[DT_P_LN1W] + lC,
                       w[DT_P_LN1B] + lC);
    dt_t_matmul_fwd(m, qkv, ln1, w[DT_P_QKVW] + lC * 3 * C, w[DT_P_QKVB] + lC * 3, C, 3 * C);
    dt_t_attention_fwd(m, atty, att, qkv, ad, (uint32_t)l);
    dt_t_matmul_fwd(m, attproj, atty, w[DT_P_ATTPROJW] + lC * C, w[DT_P_ATTPROJB] + lC, C, C);
    dt_t_dropout(m, "dropout_fwd", attproj, sc, hd, DT_RNG_DROPOUT_HIDDEN, 2u * (uint32_t)l);
    dt_t_residual_fwd(m, a->residual2 + l * sc, res, attproj, sc);
}

/* Layer l's dense MLP: res3 = res2 + dropout(fcproj(GELU(fc(LN2(res2))))). */
static void dense_mlp_fwd(dt_gpt *m, int l, const dt_dropout *hd) {
    dt_gpt_acts *a = &m->acts;
    float *const *w = m->param;
    int BT = m->B * m->T, C = m->cfg.channels;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    float *res2 = a->residual2 + l * sc, *ln2 = a->ln2 + l * sc;
    float *fch = a->fch + l * sc * 4, *fchg = a->fch_gelu + l * sc * 4, *fcproj = a->fcproj + l * sc;
    dt_t_layernorm_fwd(m, ln2, a->ln2_mean + (size_t)l * BT, a->ln2_rstd + (size_t)l * BT, res2,
                       w[DT_P_LN2W] + lC, w[DT_P_LN2B] + lC);
    dt_t_matmul_fwd(m, fch, ln2, w[DT_P_FCW] + lC * 4 * C, w[DT_P_FCB] + lC * 4, C, 4 * C);
    dt_t_gelu_fwd(m, fchg, fch, sc * 4);
    dt_t_matmul_fwd(m, fcproj, fchg, w[DT_P_FCPROJW] + lC * 4 * C, w[DT_P_FCPROJB] + lC, 4 * C, C);
    dt_t_dropout(m, "dropout_fwd", fcproj, sc, hd, DT_RNG_DROPOUT_HIDDEN, 2u * (uint32_t)l + 1u);
    dt_t_residual_fwd(m, a->residual3 + l * sc, res2, fcproj, sc);
}

/* Layer l's MLP slot: the block its kind names (blocks.h). */
static void mlp_fwd(dt_gpt *m, int l, const dt_dropout *hd) {
    switch (dt_gpt_mlp_kind(&m->cfg, l)) {
    case DT_BLOCK_MLP_DENSE: dense_mlp_fwd(m, l, hd); return;
    default: return; /* dt_gpt_config_finish accepts no other kind yet */
    }
}

dt_status dt_gpt_forward(dt_gpt *m, const int *inputs, const int *targets, double *loss) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, L = c->num_layers;
    int V = c->vocab_size, Vp = c->padded_vocab, BT = B * T;
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
            return dt_fail(DT_EINVAL, "token at batch position %d (input %d, target %d) is "
                           "outside the vocabulary [0, %d): check --vocab-size against the data",
                           i, inputs[i], targets[i], V);
    }
    m->inputs = inputs;
    m->targets = targets;
    dt_gpt_acts *a = &m->acts;
    float *const *w = m->param;
    size_t sc = (size_t)BT * C;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    dt_trace_scope_push("embed");
    dt_t_encoder_fwd(m, a->encoded, inputs, w[DT_P_WTE], w[DT_P_WPE]);
    dt_t_dropout(m, "dropout_fwd", a->encoded, sc, &hd, DT_RNG_DROPOUT_HIDDEN, EMB_SITE);
    dt_trace_scope_pop();
    for (int l = 0; l < L; l++) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * sc;
        dt_trace_op *blk = block_begin(m, DT_PHASE_FWD, "block_fwd", l, res);
        attention_fwd(m, l, res, &hd, &ad);
        mlp_fwd(m, l, &hd);
        block_end(m, blk, DT_PHASE_FWD, a->residual3 + l * sc, l);
    }
    const float *last = a->residual3 + (size_t)(L - 1) * sc;
    dt_trace_scope_push("head");
    dt_t_layernorm_fwd(m, a->lnf, a->lnf_mean, a->lnf_rstd, last, w[DT_P_LNFW], w[DT_P_LNFB]);
    dt_t_matmul_fwd(m, a->logits, a->lnf, w[DT_P_WTE], NULL, C, Vp);
    dt_t_crossentropy_fwd(m, a->losses, a->lse, a->logits, targets);
    *loss = dt_t_crossentropy_mean(m, a->losses);
    dt_trace_scope_pop();
    return DT_OK;
}

/* Gradient through a hidden dropout site: a masked copy of dres in dtmp, or dres itself. */
static const float *through_dropout(const dt_gpt *m, const dt_dropout *hd, uint32_t site) {
    const dt_gpt_dacts *d = &m->dacts;
    if (!dt_dropout_on(hd)) return d->dres;
    size_t sc = (size_t)m->B * m->T * m->cfg.channels;
    memcpy(d->dtmp, d->dres, sizeof(float) * sc);
    dt_t_dropout(m, "dropout_bwd", d->dtmp, sc, hd, DT_RNG_DROPOUT_HIDDEN, site);
    return d->dtmp;
}

/* Layer l's dense MLP backward: dres (the gradient of res3, and so of res2 and the
 * branch) gains LN2's input gradient; the MLP's parameter gradients accumulate. */
static void dense_mlp_bwd(dt_gpt *m, int l, const dt_dropout *hd) {
    dt_gpt_acts *a = &m->acts;
    dt_gpt_dacts *d = &m->dacts;
    float *const *w = m->param, *const *g = m->grad;
    int BT = m->B * m->T, C = m->cfg.channels;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    /* residual3 = residual2 + dropout(fcproj): dres is the gradient of both */
    const float *dproj = through_dropout(m, hd, 2u * (uint32_t)l + 1u);
    dt_t_matmul_bwd(m, d->dfch_gelu, g[DT_P_FCPROJW] + lC * 4 * C, g[DT_P_FCPROJB] + lC, dproj,
                    a->fch_gelu + l * sc * 4, w[DT_P_FCPROJW] + lC * 4 * C, 4 * C, C);
    dt_t_gelu_bwd(m, d->dfch, a->fch + l * sc * 4, d->dfch_gelu, sc * 4);
    dt_t_matmul_bwd(m, d->dc1, g[DT_P_FCW] + lC * 4 * C, g[DT_P_FCB] + lC * 4, d->dfch, a->ln2 + l * sc,
                    w[DT_P_FCW] + lC * 4 * C, C, 4 * C);
    dt_t_layernorm_bwd(m, d->dres, g[DT_P_LN2W] + lC, g[DT_P_LN2B] + lC, d->dc1, a->residual2 + l * sc,
                       w[DT_P_LN2W] + lC, a->ln2_mean + (size_t)l * BT, a->ln2_rstd + (size_t)l * BT);
}

static void mlp_bwd(dt_gpt *m, int l, const dt_dropout *hd) {
    switch (dt_gpt_mlp_kind(&m->cfg, l)) {
    case DT_BLOCK_MLP_DENSE: dense_mlp_bwd(m, l, hd); return;
    default: return;
    }
}

/* Layer l's attention block backward: dres (the gradient of res2) gains LN1's input
 * gradient. */
static void attention_bwd(dt_gpt *m, int l, const float *res, const dt_dropout *hd, const dt_dropout *ad) {
    dt_gpt_acts *a = &m->acts;
    dt_gpt_dacts *d = &m->dacts;
    float *const *w = m->param, *const *g = m->grad;
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads, BT = B * T;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    /* residual2 = residual + dropout(attproj): dres is the gradient of both */
    const float *dproj = through_dropout(m, hd, 2u * (uint32_t)l);
    dt_t_matmul_bwd(m, d->dc1, g[DT_P_ATTPROJW] + lC * C, g[DT_P_ATTPROJB] + lC, dproj, a->atty + l * sc,
                    w[DT_P_ATTPROJW] + lC * C, C, C);
    dt_t_attention_bwd(m, d->dqkv, d->dc1, a->qkv + l * sc * 3, a->att + (size_t)l * B * NH * T * T,
                       a->atty + l * sc, ad, (uint32_t)l);
    dt_t_matmul_bwd(m, d->dc1, g[DT_P_QKVW] + lC * 3 * C, g[DT_P_QKVB] + lC * 3, d->dqkv, a->ln1 + l * sc,
                    w[DT_P_QKVW] + lC * 3 * C, C, 3 * C);
    dt_t_layernorm_bwd(m, d->dres, g[DT_P_LN1W] + lC, g[DT_P_LN1B] + lC, d->dc1, res, w[DT_P_LN1W] + lC,
                       a->ln1_mean + (size_t)l * BT, a->ln1_rstd + (size_t)l * BT);
}

void dt_gpt_backward(dt_gpt *m, float loss_scale) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    dt_gpt_acts *a = &m->acts;
    dt_gpt_dacts *d = &m->dacts;
    float *const *w = m->param, *const *g = m->grad;
    size_t sc = (size_t)BT * C;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    dt_trace_scope_push("head");
    dt_t_crossentropy_bwd(m, a->logits, a->lse, m->targets, loss_scale / (float)BT);
    /* logits = lnf @ wte^T: dlnf into dc1, the head's share of dwte into g[WTE] */
    dt_t_matmul_bwd(m, d->dc1, g[DT_P_WTE], NULL, a->logits, a->lnf, w[DT_P_WTE], C, Vp);
    memset(d->dres, 0, sizeof(float) * sc);
    dt_t_layernorm_bwd(m, d->dres, g[DT_P_LNFW], g[DT_P_LNFB], d->dc1, a->residual3 + (size_t)(L - 1) * sc,
                       w[DT_P_LNFW], a->lnf_mean, a->lnf_rstd);
    dt_trace_scope_pop();
    for (int l = L - 1; l >= 0; l--) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * sc;
        dt_trace_op *blk = block_begin(m, DT_PHASE_BWD, "block_bwd", l, d->dres);
        mlp_bwd(m, l, &hd);
        attention_bwd(m, l, res, &hd, &ad);
        block_end(m, blk, DT_PHASE_BWD, d->dres, l);
    }
    dt_trace_scope_push("embed");
    dt_t_dropout(m, "dropout_bwd", d->dres, sc, &hd, DT_RNG_DROPOUT_HIDDEN, EMB_SITE);
    dt_t_encoder_bwd(m, g[DT_P_WTE], g[DT_P_WPE], d->dres, m->inputs);
    dt_trace_scope_pop();
}
