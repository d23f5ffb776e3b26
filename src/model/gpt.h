/* GPT-2 family model on the CPU, fp32: token + learned position embeddings, pre-LN blocks
 * (LayerNorm, causal multi-head attention, GELU(tanh) MLP), final LayerNorm, output head
 * tied to the token embedding. Vocabulary padded to a multiple of 128 (Vp); rows >= V are
 * zero, never trained (masked out of the loss), and never exported.
 *
 * Shape letters, used everywhere: B batch (micro-batch), T sequence length, C channels,
 * V vocabulary, Vp padded vocabulary, L layers, NH heads, HS = C / NH head size.
 *
 * Ownership: dt_gpt_create_params allocates the parameter slab (all a model needs to be
 * saved, loaded, exported or uploaded to a device); dt_gpt_alloc_train adds one slab for
 * gradients and one for activations (sized for B, T), which training on the CPU needs;
 * dt_gpt_free releases all of them. */
#ifndef DT_MODEL_GPT_H
#define DT_MODEL_GPT_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dt_gpt_config {
    int max_seq_len;  /* maxT: rows of the position embedding */
    int vocab_size;   /* V */
    int padded_vocab; /* Vp: V rounded up to a multiple of 128 */
    int num_layers;   /* L */
    int num_heads;    /* NH */
    int channels;     /* C */
    /* Mixture of experts (issue 23; ops/moe/moe.h). num_experts 0: every MLP slot is dense.
     * Else the layers whose bit is set in moe_layers take an MoE MLP of num_experts experts
     * routed top-moe_topk (1 <= moe_topk <= num_experts). */
    int num_experts;  /* E */
    int moe_topk;     /* K */
    uint64_t moe_layers[16]; /* bit l of word l/64: layer l is an MoE layer (L <= 1024) */
} dt_gpt_config;

/* Whether layer l's MLP slot is an MoE block. */
int dt_gpt_is_moe(const dt_gpt_config *cfg, int layer);
/* Layers whose MLP slot is an MoE block (Lm) / the dense MLP (Ld = L - Lm). */
int dt_gpt_num_moe_layers(const dt_gpt_config *cfg);
/* Layer l's index among the layers of its MLP kind: the leading index into the DT_P_FC*
 * tensors for a dense layer, into the DT_P_MOE_* tensors for an MoE layer. */
int dt_gpt_mlp_index(const dt_gpt_config *cfg, int layer);

/* Fills the config of a named preset ("tiny", "small", "gpt2-124m", "gpt2-350m").
 * vocab_size/max_seq_len may be overridden afterwards; call dt_gpt_config_finish after. */
dt_status dt_gpt_preset(const char *name, dt_gpt_config *cfg);
/* Validates a config and computes padded_vocab. Errors name the bad field. */
dt_status dt_gpt_config_finish(dt_gpt_config *cfg);

/* Parameter tensors, in slab order. The dense MLP's fc* tensors have one slice per dense
 * layer (Ld = L - Lm leading), the MoE tensors one per MoE layer (Lm leading, F = 4C), both
 * indexed by dt_gpt_mlp_index; with num_experts 0, Ld = L and the MoE tensors are empty
 * (numel 0), so a dense model's slab is the one it always was. */
enum {
    DT_P_WTE,      /* (Vp, C) */
    DT_P_WPE,      /* (maxT, C) */
    DT_P_LN1W,     /* (L, C) */
    DT_P_LN1B,     /* (L, C) */
    DT_P_QKVW,     /* (L, 3C, C)   [out, in] */
    DT_P_QKVB,     /* (L, 3C) */
    DT_P_ATTPROJW, /* (L, C, C) */
    DT_P_ATTPROJB, /* (L, C) */
    DT_P_LN2W,     /* (L, C) */
    DT_P_LN2B,     /* (L, C) */
    DT_P_FCW,      /* (Ld, 4C, C) */
    DT_P_FCB,      /* (Ld, 4C) */
    DT_P_FCPROJW,  /* (Ld, C, 4C) */
    DT_P_FCPROJB,  /* (Ld, C) */
    DT_P_LNFW,     /* (C) */
    DT_P_LNFB,     /* (C) */
    DT_P_MOE_WR,   /* (Lm, E, C)     router, no bias */
    DT_P_MOE_W1,   /* (Lm, E, F, C)  experts' fc */
    DT_P_MOE_B1,   /* (Lm, E, F) */
    DT_P_MOE_W2,   /* (Lm, E, C, F)  experts' fcproj */
    DT_P_MOE_B2,   /* (Lm, E, C) */
    DT_NUM_PARAM_TENSORS
};

typedef struct dt_param_desc {
    const char *name;     /* "wte", "qkvw", ... */
    int ndim;             /* 1..4 */
    int64_t shape[4];     /* leading dim L (Ld, Lm) for per-layer tensors */
    size_t numel;
    size_t offset;        /* in floats, into the parameter slab */
    int decay;            /* 1: weight decay applies (matrices, embeddings) */
} dt_param_desc;

/* Describes all parameter tensors of a config. Returns the total number of floats. */
size_t dt_gpt_param_table(const dt_gpt_config *cfg, dt_param_desc out[DT_NUM_PARAM_TENSORS]);

/* ---- the model ---------------------------------------------------------------------- */

/* Activations of one forward pass, pointers into one slab (sizes for B, T). */
typedef struct dt_gpt_acts {
    float *encoded;            /* (B,T,C) */
    float *ln1, *ln1_mean, *ln1_rstd;   /* (L,B,T,C), (L,B,T), (L,B,T) */
    float *qkv;                /* (L,B,T,3C) */
    float *atty;               /* (L,B,T,C) */
    float *att;                /* (L,B,NH,T,T) */
    float *attproj;            /* (L,B,T,C) */
    float *residual2;          /* (L,B,T,C) */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;     /* (L,B,T,4C) */
    float *fcproj;             /* (L,B,T,C) */
    float *residual3;          /* (L,B,T,C) */
    float *lnf, *lnf_mean, *lnf_rstd;   /* (B,T,C), (B,T), (B,T) */
    float *logits;             /* (B,T,Vp); dlogits after backward */
    float *losses, *lse;       /* (B,T) */
} dt_gpt_acts;

/* Scratch gradients of activations used during backward. */
typedef struct dt_gpt_dacts {
    float *dres;               /* (B,T,C) running gradient of the residual stream */
    float *dc1;                /* (B,T,C) */
    float *dqkv;               /* (B,T,3C) */
    float *dfch, *dfch_gelu;   /* (B,T,4C) */
    float *dtmp;               /* (B,T,C) gradient through a dropout mask */
} dt_gpt_dacts;

typedef struct dt_gpt {
    dt_gpt_config cfg;
    dt_param_desc params[DT_NUM_PARAM_TENSORS];
    size_t num_params;         /* floats in the parameter slab */
    float *param_mem;          /* owned */
    float *grad_mem;           /* owned, same layout */
    float *param[DT_NUM_PARAM_TENSORS], *grad[DT_NUM_PARAM_TENSORS];
    int B, T;                  /* activation sizes */
    float *act_mem;            /* owned */
    size_t num_acts;
    dt_gpt_acts acts;
    dt_gpt_dacts dacts;
    const int *inputs, *targets; /* of the last forward (borrowed) */
    /* Dropout (GPT-2 places): embeddings, attention probabilities, attention and MLP
     * outputs. Active only while `training`; masks keyed by (seed, rng_step, layer, element)
     * so backward recomputes them and a resumed run draws the same ones. */
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    uint32_t rng_step;         /* set by the trainer: global micro-batch counter */
    int64_t step;              /* set by the trainer: the optimizer step (trace, injection) */
    int training;
} dt_gpt;

/* Allocates the parameters of a model (B = T = 0, no gradients or activations) and
 * initialises them from the seed with the counter-based RNG (GPT-2 init: N(0, 0.02),
 * residual projections scaled by 1/sqrt(2L), biases 0, LayerNorm weight 1, padded vocab
 * rows 0). The caller frees with dt_gpt_free. */
dt_status dt_gpt_create_params(dt_gpt **out, const dt_gpt_config *cfg, uint64_t seed);
/* Adds the gradient slab (zeroed) and the activations for micro-batch B and sequence
 * length T (T <= max_seq_len): what dt_gpt_forward and dt_gpt_backward need. */
dt_status dt_gpt_alloc_train(dt_gpt *m, int B, int T);
/* dt_gpt_create_params, then dt_gpt_alloc_train(B, T). */
dt_status dt_gpt_create(dt_gpt **out, const dt_gpt_config *cfg, int B, int T, uint64_t seed);
void dt_gpt_free(dt_gpt *m);

/* Forward on inputs/targets (B,T); returns the mean loss over B*T positions in *loss.
 * Token ids must be < vocab_size (checked: DT_EINVAL naming the position). */
dt_status dt_gpt_forward(dt_gpt *m, const int *inputs, const int *targets, double *loss);
/* Backward of the last forward; adds the gradient of (loss * loss_scale) into grad_mem. */
void dt_gpt_backward(dt_gpt *m, float loss_scale);
void dt_gpt_zero_grad(dt_gpt *m);

#endif
