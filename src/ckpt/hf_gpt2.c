/* Hugging Face GPT-2 export/import and the logits check file (see hf_gpt2.h). Assumes a
 * little-endian host (x86-64, aarch64): slab floats are written as their memory bytes. */
#include "ckpt/hf_gpt2.h"

#include "ckpt/durable.h"
#include "core/json_read.h"
#include "ckpt/safetensors.h"
#include "core/json.h"
#include "core/regular_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-layer tensors in HF file order: suffix, our parameter, transposed (Conv1D). */
static const struct { const char *suffix; int param; int transpose; } LAYER[12] = {
    {"ln_1.weight", DT_P_LN1W, 0},          {"ln_1.bias", DT_P_LN1B, 0},
    {"attn.c_attn.weight", DT_P_QKVW, 1},   {"attn.c_attn.bias", DT_P_QKVB, 0},
    {"attn.c_proj.weight", DT_P_ATTPROJW, 1}, {"attn.c_proj.bias", DT_P_ATTPROJB, 0},
    {"ln_2.weight", DT_P_LN2W, 0},          {"ln_2.bias", DT_P_LN2B, 0},
    {"mlp.c_fc.weight", DT_P_FCW, 1},       {"mlp.c_fc.bias", DT_P_FCB, 0},
    {"mlp.c_proj.weight", DT_P_FCPROJW, 1}, {"mlp.c_proj.bias", DT_P_FCPROJB, 0},
};

/* Where one HF tensor lives in our slab and how it is laid out. */
typedef struct hf_map {
    char name[96];       /* full HF name, with the "transformer." prefix */
    size_t src_off;      /* float offset into the slab */
    int64_t rows, cols;  /* our layout: rows x cols ([out, in] for matrices; cols 1 for vectors) */
    int transpose;       /* HF stores cols x rows */
    int ndim;
    int64_t shape[4];    /* HF shape */
} hf_map;

/* An MoE model's file (the native layout): its non-empty slab tensors in slab order. */
static int native_tensor(const dt_param_desc *tab, int i) {
    for (int p = 0, k = 0; p < DT_NUM_PARAM_TENSORS; p++)
        if (tab[p].numel > 0 && k++ == i) return p;
    return -1;
}

int dt_hf_gpt2_num_tensors(const dt_gpt_config *cfg) {
    if (cfg->num_experts > 0) {
        dt_param_desc tab[DT_NUM_PARAM_TENSORS];
        dt_gpt_param_table(cfg, tab);
        int n = 0;
        for (int p = 0; p < DT_NUM_PARAM_TENSORS; p++) n += tab[p].numel > 0;
        return n;
    }
    return 4 + 12 * cfg->num_layers;
}

static void hf_map_get(const dt_gpt_config *cfg, const dt_param_desc *tab, int i, hf_map *m) {
    int64_t C = cfg->channels;
    int last = dt_hf_gpt2_num_tensors(cfg) - 2;
    memset(m, 0, sizeof *m);
    if (cfg->num_experts > 0) {
        const dt_param_desc *d = &tab[native_tensor(tab, i)];
        snprintf(m->name, sizeof m->name, "%s", d->name);
        m->src_off = d->offset;
        m->rows = (int64_t)d->numel;
        m->cols = 1;
        m->ndim = d->ndim;
        for (int k = 0; k < d->ndim; k++) m->shape[k] = d->shape[k];
        return;
    }
    if (i < 2 || i >= last) {
        int p = i == 0 ? DT_P_WTE : i == 1 ? DT_P_WPE : i == last ? DT_P_LNFW : DT_P_LNFB;
        const char *nm = i == 0 ? "wte.weight" : i == 1 ? "wpe.weight" : i == last ? "ln_f.weight" : "ln_f.bias";
        snprintf(m->name, sizeof m->name, "transformer.%s", nm);
        m->src_off = tab[p].offset;
        m->rows = i == 0 ? cfg->vocab_size : i == 1 ? cfg->max_seq_len : C;
        m->cols = i < 2 ? C : 1;
        m->ndim = i < 2 ? 2 : 1;
        m->shape[0] = m->rows;
        m->shape[1] = m->cols;
        return;
    }
    int l = (i - 2) / 12, k = (i - 2) % 12, p = LAYER[k].param;
    const dt_param_desc *d = &tab[p];
    snprintf(m->name, sizeof m->name, "transformer.h.%d.%s", l, LAYER[k].suffix);
    m->src_off = d->offset + (size_t)l * (d->numel / (size_t)cfg->num_layers);
    m->rows = d->shape[1];
    m->cols = d->ndim == 3 ? d->shape[2] : 1;
    m->transpose = LAYER[k].transpose;
    m->ndim = d->ndim - 1;
    m->shape[0] = m->transpose ? m->cols : m->rows;
    m->shape[1] = m->transpose ? m->rows : m->cols;
}

dt_status dt_hf_gpt2_tensor_name(const dt_gpt_config *cfg, int i, char *buf, size_t cap) {
    if (i < 0 || i >= dt_hf_gpt2_num_tensors(cfg)) return dt_fail(DT_EINVAL, "HF tensor index %d out of range", i);
    dt_param_desc tab[DT_NUM_PARAM_TENSORS];
    dt_gpt_param_table(cfg, tab);
    hf_map m;
    hf_map_get(cfg, tab, i, &m);
    if ((size_t)snprintf(buf, cap, "%s", m.name) >= cap) return dt_fail(DT_EINVAL, "name buffer too small");
    return DT_OK;
}

/* ---------------------------------------------------------------- export */

typedef struct transpose_ctx {
    const float *src; /* rows x cols */
    int64_t rows, cols;
} transpose_ctx;

/* HF Conv1D layout: dst (cols x rows) = transpose of src (rows x cols). */
static dt_status fill_transposed(const void *ctx, void *dst, size_t nbytes) {
    const transpose_ctx *c = ctx;
    if (nbytes != (size_t)(c->rows * c->cols) * sizeof(float))
        return dt_fail(DT_EINVAL, "transpose size mismatch");
    float *o = dst;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t k = 0; k < c->cols; k++) o[k * c->rows + r] = c->src[r * c->cols + k];
    return DT_OK;
}

dt_status dt_hf_gpt2_write_weights(const char *path, const dt_gpt_config *cfg, const float *params,
                                   uint8_t (*digests)[DT_SHA256_LEN]) {
    if (cfg->num_layers < 1 || cfg->padded_vocab < cfg->vocab_size)
        return dt_fail(DT_EINVAL, "writing '%s': model config not finished (dt_gpt_config_finish)", path);
    int n = dt_hf_gpt2_num_tensors(cfg);
    dt_param_desc tab[DT_NUM_PARAM_TENSORS];
    dt_gpt_param_table(cfg, tab);
    hf_map *maps = calloc((size_t)n, sizeof *maps);
    dt_st_tensor *t = calloc((size_t)n, sizeof *t);
    transpose_ctx *ctx = calloc((size_t)n, sizeof *ctx);
    dt_status st;
    if (!maps || !t || !ctx) {
        st = dt_fail(DT_ENOMEM, "writing '%s': out of memory", path);
    } else {
        for (int i = 0; i < n; i++) {
            hf_map_get(cfg, tab, i, &maps[i]);
            t[i].name = maps[i].name;
            t[i].dtype = DT_F32;
            t[i].ndim = maps[i].ndim;
            for (int k = 0; k < maps[i].ndim; k++) t[i].shape[k] = maps[i].shape[k];
            if (maps[i].transpose) {
                ctx[i] = (transpose_ctx){params + maps[i].src_off, maps[i].rows, maps[i].cols};
                t[i].fill = fill_transposed;
                t[i].fill_ctx = &ctx[i];
            } else {
                t[i].data = params + maps[i].src_off; /* wte: the first V rows are contiguous */
            }
        }
        static const dt_st_meta meta = {"format", "pt"};
        st = dt_st_write(path, t, n, &meta, 1, digests);
    }
    free(maps);
    free(t);
    free(ctx);
    return st;
}

/* An MoE model's config.json: detrain's own model type, which transformers does not load
 * as a GPT-2. */
static void write_moe_config(FILE *m, const dt_gpt_config *cfg) {
    fprintf(m, "{\n  \"architectures\": [\"DetrainMoEGPT\"],\n  \"model_type\": \"%s\",\n", DT_HF_MOE_MODEL_TYPE);
    fprintf(m, "  \"layout\": \"detrain native: every parameter tensor under its detrain name and shape "
               "(docs/moe.md)\",\n");
    fprintf(m, "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n"
               "  \"n_head\": %d,\n", cfg->vocab_size, cfg->max_seq_len, cfg->channels, cfg->num_layers,
            cfg->num_heads);
    fprintf(m, "  \"num_experts\": %d,\n  \"moe_router_topk\": %d,\n  \"moe_layers\": [", cfg->num_experts,
            cfg->moe_topk);
    for (int l = 0; l < cfg->num_layers; l++) fprintf(m, "%s%d", l ? ", " : "", dt_gpt_is_moe(cfg, l));
    fprintf(m, "],\n  \"torch_dtype\": \"float32\"\n}\n");
}

dt_status dt_hf_gpt2_write_config(const char *path, const dt_gpt_config *cfg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return dt_fail(DT_ENOMEM, "writing '%s': out of memory", path);
    if (cfg->num_experts > 0) {
        write_moe_config(m, cfg);
    } else {
        fprintf(m, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n");
        fprintf(m, "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n", cfg->vocab_size,
                cfg->max_seq_len, cfg->max_seq_len);
        fprintf(m, "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n",
                cfg->channels, cfg->num_layers, cfg->num_heads);
        fprintf(m, "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n");
        fprintf(m, "  \"initializer_range\": 0.02,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n"
                   "  \"attn_pdrop\": 0.0,\n");
        fprintf(m, "  \"scale_attn_weights\": true,\n  \"scale_attn_by_inverse_layer_idx\": false,\n"
                   "  \"reorder_and_upcast_attn\": false,\n  \"add_cross_attention\": false,\n");
        /* The GPT-2 tokenizer's <|endoftext|> is 50256; other vocabularies have no known one,
         * and null keeps transformers from defaulting to 50256 (out of range for them). */
        if (cfg->vocab_size == 50257) fprintf(m, "  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256,\n");
        else fprintf(m, "  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n");
        fprintf(m, "  \"tie_word_embeddings\": true,\n  \"use_cache\": true,\n  \"torch_dtype\": \"float32\"\n}\n");
    }
    if (fclose(m) != 0) { free(buf); return dt_fail(DT_ENOMEM, "writing '%s': out of memory", path); }
    dt_status st = dt_durable_write_file(path, buf, len);
    free(buf);
    return st;
}

static dt_status join(char *out, size_t cap, const char *dir, const char *name) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return dt_fail(DT_EINVAL, "path '%s/%s' is too long", dir, name);
    return DT_OK;
}

dt_status dt_hf_gpt2_export(const char *dir, const dt_gpt_config *cfg, const float *params) {
    if (cfg->num_experts > 0)
        return dt_fail(DT_EUNSUPPORTED, "exporting to '%s': an MoE model is not a GPT2LMHeadModel (its MLPs are "
                       "%d-expert mixtures); its checkpoint holds every tensor in detrain's native layout "
                       "(docs/moe.md)", dir, cfg->num_experts);
    char path[4096];
    dt_status st = dt_durable_mkdir(dir);
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_HF_WEIGHTS_NAME);
    if (st == DT_OK) st = dt_hf_gpt2_write_weights(path, cfg, params, NULL);
    if (st == DT_OK) st = join(path, sizeof path, dir, DT_HF_CONFIG_NAME);
    if (st == DT_OK) st = dt_hf_gpt2_write_config(path, cfg);
    return st;
}

/* ---------------------------------------------------------------- config import */

static dt_status read_small_file(const char *path, char **out, size_t *n) {
    FILE *f;
    dt_status ost = dt_fopen_regular(path, &f, NULL);
    if (ost != DT_OK) return ost;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        if (cap >= (16u << 20)) { free(buf); fclose(f); return dt_fail(DT_ECORRUPT, "'%s' is over 16 MB", path); }
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return dt_fail(DT_ENOMEM, "reading '%s': out of memory", path);
    if (err) { free(buf); return dt_fail(DT_EIO, "cannot read '%s'", path); }
    *out = buf;
    *n = len;
    return DT_OK;
}

static dt_status cfg_int(const char *path, const dt_json_value *root, const char *key, int *out) {
    const dt_json_value *v = dt_json_get(root, key);
    int64_t x;
    if (!v) return dt_fail(DT_ECORRUPT, "'%s': \"%s\" is missing", path, key);
    if (!dt_json_as_i64(v, &x) || x < 1 || x > (1 << 30))
        return dt_fail(DT_ECORRUPT, "'%s': \"%s\" must be a positive integer", path, key);
    *out = (int)x;
    return DT_OK;
}

/* A boolean field that must be absent/null or have the value `want`. */
static dt_status cfg_bool_is(const char *path, const dt_json_value *root, const char *key, int want) {
    const dt_json_value *v = dt_json_get(root, key);
    if (!v || v->type == DT_JSON_NULL) return DT_OK;
    int b;
    if (!dt_json_as_bool(v, &b))
        return dt_fail(DT_ECORRUPT, "'%s': \"%s\" must be true or false", path, key);
    if (b != want)
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"%s\": %s is not supported; detrain's GPT-2 computes "
                       "the model with %s", path, key, want ? "false" : "true", want ? "true" : "false");
    return DT_OK;
}

static dt_status check_config(const char *path, const dt_json_value *r, dt_gpt_config *cfg) {
    if (r->type != DT_JSON_OBJECT) return dt_fail(DT_ECORRUPT, "'%s' is not a JSON object", path);
    const dt_json_value *v = dt_json_get(r, "model_type");
    if (v && v->type == DT_JSON_STRING && !strcmp(v->text, DT_HF_MOE_MODEL_TYPE))
        return dt_fail(DT_EUNSUPPORTED, "'%s' is a detrain MoE model, not a Hugging Face GPT-2: it cannot be "
                       "imported as one; resume its checkpoint with --load", path);
    if (v && (v->type != DT_JSON_STRING || strcmp(v->text, "gpt2") != 0))
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"model_type\" must be \"gpt2\"", path);
    v = dt_json_get(r, "activation_function");
    if (v && (v->type != DT_JSON_STRING || (strcmp(v->text, "gelu_new") && strcmp(v->text, "gelu_pytorch_tanh"))))
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"activation_function\" must be \"gelu_new\" (GELU, tanh "
                       "approximation), the one detrain's GPT-2 computes", path);
    v = dt_json_get(r, "layer_norm_epsilon");
    double eps;
    if (v && (!dt_json_as_f64(v, &eps) || eps != 1e-5))
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"layer_norm_epsilon\" must be 1e-05, the value detrain's "
                       "LayerNorm uses", path);
    dt_status st;
    if ((st = cfg_int(path, r, "n_embd", &cfg->channels)) != DT_OK) return st;
    if ((st = cfg_int(path, r, "n_layer", &cfg->num_layers)) != DT_OK) return st;
    if ((st = cfg_int(path, r, "n_head", &cfg->num_heads)) != DT_OK) return st;
    if ((st = cfg_int(path, r, "vocab_size", &cfg->vocab_size)) != DT_OK) return st;
    if ((st = cfg_int(path, r, "n_positions", &cfg->max_seq_len)) != DT_OK) return st;
    v = dt_json_get(r, "n_ctx");
    int64_t x;
    if (v && (!dt_json_as_i64(v, &x) || x != cfg->max_seq_len))
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"n_ctx\" differs from \"n_positions\"", path);
    v = dt_json_get(r, "n_inner");
    if (v && v->type != DT_JSON_NULL && (!dt_json_as_i64(v, &x) || x != 4 * (int64_t)cfg->channels))
        return dt_fail(DT_EUNSUPPORTED, "'%s': \"n_inner\" must be null or 4 * n_embd (%d)", path,
                       4 * cfg->channels);
    if ((st = cfg_bool_is(path, r, "tie_word_embeddings", 1)) != DT_OK) return st;
    if ((st = cfg_bool_is(path, r, "scale_attn_weights", 1)) != DT_OK) return st;
    if ((st = cfg_bool_is(path, r, "scale_attn_by_inverse_layer_idx", 0)) != DT_OK) return st;
    if ((st = cfg_bool_is(path, r, "add_cross_attention", 0)) != DT_OK) return st;
    return DT_OK;
}

dt_status dt_hf_gpt2_read_config(const char *dir, dt_gpt_config *cfg) {
    char path[4096];
    dt_status st = join(path, sizeof path, dir, DT_HF_CONFIG_NAME);
    if (st != DT_OK) return st;
    char *text = NULL;
    size_t n = 0;
    if ((st = read_small_file(path, &text, &n)) != DT_OK) return st;
    dt_json_value *root;
    char what[4200];
    snprintf(what, sizeof what, "'%s'", path);
    st = dt_json_parse(text, n, what, &root);
    free(text);
    if (st != DT_OK) return st;
    memset(cfg, 0, sizeof *cfg);
    st = check_config(path, root, cfg);
    dt_json_free(root);
    if (st == DT_OK) st = dt_gpt_config_finish(cfg);
    if (st != DT_OK) dt_fail_context(st, "reading Hugging Face config");
    return st;
}

/* ---------------------------------------------------------------- weights import */

/* IEEE binary16 -> binary32, exact (every half is representable as a float). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (e == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: renormalise */
            uint32_t ee = 113;
            while (!(man & 0x400u)) { man <<= 1; ee--; }
            bits = sign | ee << 23 | (man & 0x3ffu) << 13;
        }
    } else if (e == 31) bits = sign | 0x7f800000u | man << 13;
    else bits = sign | (e + 112) << 23 | man << 13;
    return dt_f32_from_bits(bits);
}

/* Index of an HF tensor name (prefix already stripped) in file order; -1 unknown,
 * -2 an attention mask buffer to ignore, -3 lm_head.weight. */
static int hf_index(const dt_gpt_config *cfg, const char *nm) {
    int L = cfg->num_layers;
    if (cfg->num_experts > 0) {
        dt_param_desc tab[DT_NUM_PARAM_TENSORS];
        dt_gpt_param_table(cfg, tab);
        for (int i = 0, p; (p = native_tensor(tab, i)) >= 0; i++)
            if (!strcmp(nm, tab[p].name)) return i;
        return -1;
    }
    if (!strcmp(nm, "wte.weight")) return 0;
    if (!strcmp(nm, "wpe.weight")) return 1;
    if (!strcmp(nm, "ln_f.weight")) return 2 + 12 * L;
    if (!strcmp(nm, "ln_f.bias")) return 3 + 12 * L;
    if (!strcmp(nm, "lm_head.weight")) return -3;
    if (strncmp(nm, "h.", 2) != 0 || nm[2] < '0' || nm[2] > '9') return -1;
    char *end;
    long l = strtol(nm + 2, &end, 10);
    if (*end != '.' || l >= L || (nm[2] == '0' && end != nm + 3)) return -1;
    const char *suffix = end + 1;
    if (!strcmp(suffix, "attn.bias") || !strcmp(suffix, "attn.masked_bias")) return -2;
    for (int k = 0; k < 12; k++)
        if (!strcmp(suffix, LAYER[k].suffix)) return 2 + 12 * (int)l + k;
    return -1;
}

/* Reads entry e (F32/F16/BF16) as floats into dst (numel floats). */
static dt_status read_as_f32(const dt_st_file *f, const dt_st_entry *e, float *dst, void *raw) {
    size_t nb = (size_t)(e->end - e->begin);
    if (e->dtype == DT_F32) return dt_st_read(f, e, dst, nb);
    dt_status st = dt_st_read(f, e, raw, nb);
    if (st != DT_OK) return st;
    const uint16_t *h = raw;
    for (uint64_t i = 0; i < e->numel; i++)
        dst[i] = e->dtype == DT_F16 ? f16_to_f32(h[i]) : dt_f32_from_bits((uint32_t)h[i] << 16);
    return DT_OK;
}

static dt_status check_entry(const dt_st_file *f, const dt_st_entry *e, int ndim, const int64_t *shape) {
    if (e->dtype != DT_F32 && e->dtype != DT_F16 && e->dtype != DT_BF16)
        return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" has dtype %s; F32, F16 or BF16 expected",
                       f->label, e->name, dt_dtype_name(e->dtype));
    int same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char got[160] = "[", want[160] = "[";
        for (int d = 0; d < e->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? ", " : "", e->shape[d]);
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64, d ? ", " : "", shape[d]);
        return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" has shape %s], expected %s] for this model config",
                       f->label, e->name, got, want);
    }
    return DT_OK;
}

static dt_status import_tensors(const dt_st_file *f, const dt_gpt_config *cfg, float *params,
                                const dt_st_entry **found, const dt_st_entry *lm_head, float *buf, void *raw) {
    dt_param_desc tab[DT_NUM_PARAM_TENSORS];
    dt_gpt_param_table(cfg, tab);
    int n = dt_hf_gpt2_num_tensors(cfg);
    for (int i = 0; i < n; i++) {
        hf_map m;
        hf_map_get(cfg, tab, i, &m);
        if (!found[i])
            return dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" is missing (also looked for it without the "
                           "\"transformer.\" prefix)", f->label, m.name);
        dt_status st = check_entry(f, found[i], m.ndim, m.shape);
        if (st == DT_OK) st = read_as_f32(f, found[i], buf, raw);
        if (st != DT_OK) return st;
        float *dst = params + m.src_off;
        if (m.transpose) {
            for (int64_t r = 0; r < m.rows; r++)
                for (int64_t k = 0; k < m.cols; k++) dst[r * m.cols + k] = buf[k * m.rows + r];
        } else {
            memcpy(dst, buf, (size_t)(m.rows * m.cols) * sizeof(float));
        }
    }
    /* Padded vocabulary rows are zero by contract (model/gpt.h). */
    size_t V = (size_t)cfg->vocab_size, Vp = (size_t)cfg->padded_vocab, C = (size_t)cfg->channels;
    memset(params + tab[DT_P_WTE].offset + V * C, 0, (Vp - V) * C * sizeof(float));
    if (lm_head) {
        int64_t shape[2] = {cfg->vocab_size, cfg->channels};
        dt_status st = check_entry(f, lm_head, 2, shape);
        if (st == DT_OK) st = read_as_f32(f, lm_head, buf, raw);
        if (st != DT_OK) return st;
        if (memcmp(buf, params + tab[DT_P_WTE].offset, V * C * sizeof(float)) != 0)
            return dt_fail(DT_EMISMATCH, "'%s': \"%s\" differs from the token embedding; detrain's GPT-2 "
                           "ties the output head to wte, so untied weights cannot be imported",
                           f->label, lm_head->name);
    }
    return DT_OK;
}

dt_status dt_hf_gpt2_read_weights(const char *path, const dt_gpt_config *cfg, float *params) {
    if (cfg->num_layers < 1 || cfg->padded_vocab < cfg->vocab_size)
        return dt_fail(DT_EINVAL, "reading '%s': model config not finished (dt_gpt_config_finish)", path);
    dt_st_file f;
    dt_status st = dt_st_open(path, &f);
    if (st != DT_OK) return st;
    int n = dt_hf_gpt2_num_tensors(cfg);
    const dt_st_entry **found = calloc((size_t)n, sizeof *found);
    const dt_st_entry *lm_head = NULL;
    size_t maxb = 0;
    if (!found) st = dt_fail(DT_ENOMEM, "reading '%s': out of memory", path);
    for (int j = 0; j < f.n && st == DT_OK; j++) {
        const dt_st_entry *e = &f.t[j];
        const char *nm = strncmp(e->name, "transformer.", 12) == 0 ? e->name + 12 : e->name;
        int i = hf_index(cfg, nm);
        if (i == -2) continue;
        if (i == -1) {
            st = dt_fail(DT_EMISMATCH, "'%s': unexpected tensor \"%s\" (not part of a GPT-2 model with %d "
                         "layers)", path, e->name, cfg->num_layers);
            break;
        }
        const dt_st_entry **slot = i == -3 ? &lm_head : &found[i];
        if (*slot) {
            st = dt_fail(DT_EMISMATCH, "'%s': tensor \"%s\" appears twice (\"%s\" and \"%s\")", path, nm,
                         (*slot)->name, e->name);
            break;
        }
        *slot = e;
        if (e->end - e->begin > maxb) maxb = (size_t)(e->end - e->begin);
        /* Half-precision tensors widen to twice their stored size. */
        if (e->dtype != DT_F32 && 2 * (e->end - e->begin) > maxb) maxb = (size_t)(2 * (e->end - e->begin));
    }
    float *buf = NULL;
    void *raw = NULL;
    if (st == DT_OK) {
        buf = malloc(maxb + 4);
        raw = malloc(maxb + 4);
        if (!buf || !raw) st = dt_fail(DT_ENOMEM, "reading '%s': out of memory", path);
    }
    if (st == DT_OK) st = import_tensors(&f, cfg, params, found, lm_head, buf, raw);
    free(buf);
    free(raw);
    free(found);
    dt_st_close(&f);
    return st;
}

dt_status dt_hf_gpt2_import(const char *dir, const dt_gpt_config *cfg, float *params) {
    dt_gpt_config hf;
    dt_status st = dt_hf_gpt2_read_config(dir, &hf);
    if (st != DT_OK) return st;
    static const struct { const char *hf, *ours; size_t off; } F[] = {
        {"vocab_size", "--vocab-size", offsetof(dt_gpt_config, vocab_size)},
        {"n_positions", "--max-position-embeddings", offsetof(dt_gpt_config, max_seq_len)},
        {"n_layer", "--num-layers", offsetof(dt_gpt_config, num_layers)},
        {"n_head", "--num-attention-heads", offsetof(dt_gpt_config, num_heads)},
        {"n_embd", "--hidden-size", offsetof(dt_gpt_config, channels)},
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        int a, b;
        memcpy(&a, (const char *)&hf + F[i].off, sizeof a);
        memcpy(&b, (const char *)cfg + F[i].off, sizeof b);
        if (a != b)
            return dt_fail(DT_EMISMATCH, "'%s/%s': \"%s\" is %d but the model has %s %d", dir,
                           DT_HF_CONFIG_NAME, F[i].hf, a, F[i].ours, b);
    }
    char path[4096];
    if ((st = join(path, sizeof path, dir, DT_HF_WEIGHTS_NAME)) != DT_OK) return st;
    return dt_hf_gpt2_read_weights(path, cfg, params);
}

/* ---------------------------------------------------------------- logits check file */

static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

dt_status dt_logits_check_write(const char *path, int B, int T, int V, size_t ld, const int *inputs,
                                const int *targets, const float *logits, double loss) {
    if (B < 1 || T < 1 || V < 1 || ld < (size_t)V)
        return dt_fail(DT_EINVAL, "writing '%s': bad sizes B=%d T=%d V=%d ld=%zu", path, B, T, V, ld);
    size_t BT = (size_t)B * (size_t)T;
    uint8_t hdr[32];
    memcpy(hdr, "DTLOGIT1", 8);
    put_u32(hdr + 8, 1);
    put_u32(hdr + 12, (uint32_t)B);
    put_u32(hdr + 16, (uint32_t)T);
    put_u32(hdr + 20, (uint32_t)V);
    uint64_t lb = dt_f64_bits(loss);
    for (int i = 0; i < 8; i++) hdr[24 + i] = (uint8_t)(lb >> (8 * i));
    int32_t *ids = malloc(2 * BT * sizeof *ids);
    if (!ids) return dt_fail(DT_ENOMEM, "writing '%s': out of memory", path);
    for (size_t i = 0; i < BT; i++) { ids[i] = inputs[i]; ids[BT + i] = targets[i]; }
    dt_durable_file f;
    dt_status st = dt_durable_open(&f, path);
    if (st == DT_OK) {
        st = dt_durable_write(&f, hdr, sizeof hdr);
        if (st == DT_OK) st = dt_durable_write(&f, ids, 2 * BT * sizeof *ids);
        for (size_t r = 0; r < BT && st == DT_OK; r++)
            st = dt_durable_write(&f, logits + r * ld, (size_t)V * sizeof(float));
        if (st == DT_OK) st = dt_durable_commit(&f);
        else dt_durable_abort(&f);
    }
    free(ids);
    return st;
}

void dt_logits_check_free(dt_logits_check *lc) {
    free(lc->inputs);
    free(lc->logits);
    memset(lc, 0, sizeof *lc);
}

dt_status dt_logits_check_read(const char *path, dt_logits_check *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return dt_fail(DT_EIO, "cannot open '%s': %s", path, strerror(errno));
    uint8_t hdr[32];
    dt_status st = DT_OK;
    if (fread(hdr, 1, 32, f) != 32 || memcmp(hdr, "DTLOGIT1", 8) != 0 || get_u32(hdr + 8) != 1)
        st = dt_fail(DT_ECORRUPT, "'%s' is not a version-1 logits check file (magic DTLOGIT1)", path);
    uint64_t B = get_u32(hdr + 12), T = get_u32(hdr + 16), V = get_u32(hdr + 20);
    uint64_t BT = B * T, want = 32 + 8 * BT + 4 * BT * V;
    if (st == DT_OK && (B == 0 || T == 0 || V == 0 || BT > (1u << 24) || V > (1u << 24) || BT * V > (1ull << 32)))
        st = dt_fail(DT_ECORRUPT, "'%s': implausible sizes B=%" PRIu64 " T=%" PRIu64 " V=%" PRIu64, path, B, T, V);
    if (st == DT_OK) {
        out->B = (uint32_t)B; out->T = (uint32_t)T; out->V = (uint32_t)V;
        uint64_t lb = 0;
        for (int i = 0; i < 8; i++) lb |= (uint64_t)hdr[24 + i] << (8 * i);
        out->loss = dt_f64_from_bits(lb);
        out->inputs = malloc(2 * BT * sizeof(int32_t));
        out->logits = malloc(BT * V * sizeof(float) + 1);
        if (!out->inputs || !out->logits) st = dt_fail(DT_ENOMEM, "reading '%s': out of memory", path);
    }
    if (st == DT_OK) {
        out->targets = out->inputs + BT;
        if (fread(out->inputs, sizeof(int32_t), 2 * BT, f) != 2 * BT || fread(out->logits, sizeof(float), BT * V, f) != BT * V)
            st = dt_fail(DT_ECORRUPT, "'%s' is truncated: %" PRIu64 " bytes expected for B=%" PRIu64 " T=%" PRIu64
                         " V=%" PRIu64, path, want, B, T, V);
        else if (fgetc(f) != EOF)
            st = dt_fail(DT_ECORRUPT, "'%s' has bytes after its %" PRIu64 " expected", path, want);
        for (uint64_t i = 0; i < 2 * BT && st == DT_OK; i++)
            if (out->inputs[i] < 0 || (uint64_t)out->inputs[i] >= V)
                st = dt_fail(DT_ECORRUPT, "'%s': token id %d at %s[%" PRIu64 "] is outside [0, %" PRIu64 ")", path,
                             out->inputs[i], i < BT ? "inputs" : "targets", i % BT, V);
    }
    fclose(f);
    if (st != DT_OK) dt_logits_check_free(out);
    return st;
}
