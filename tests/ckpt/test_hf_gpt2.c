/* Hugging Face GPT-2 export/import: names, shapes and Conv1D transposes of the export,
 * bitwise round trip of the slab (padded rows zero), byte-identical re-export, the
 * accepted variants (no prefix, attention mask buffers, tied lm_head, F16/BF16) and the
 * refused ones (missing/extra/duplicate tensor, wrong shape, untied head, config fields),
 * and the logits check file.
 *
 * Extra modes (not run by the test suite):
 *   test_hf_gpt2 --emit DIR            export a small model (test_st_pyspec.sh checks it)
 *   test_hf_gpt2 --forward HFDIR OUT   import HFDIR (config.json + model.safetensors), run
 *                                      the forward pass on the tokens of
 *                                      HFDIR/logits_check.bin, write OUT/logits_check.bin
 *                                      and re-export to OUT (tools/hf_compare.py checks
 *                                      both directions on the GPU machine). */
#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "core/json.h"
#include "dt_test.h"

#include <stdlib.h>
#include <unistd.h>

static char dir[256];
static dt_gpt_config cfg;
static dt_param_desc tab[DT_NUM_PARAM_TENSORS];
static size_t nparams;

static void small_config(dt_gpt_config *c) {
    memset(c, 0, sizeof *c);
    c->num_layers = 2; c->num_heads = 2; c->channels = 8; c->vocab_size = 50; c->max_seq_len = 16;
    dt_gpt_config_finish(c);
}

/* Distinct, arbitrary finite floats (and a few signed zeros / subnormals); padded rows 0. */
static float *make_params(uint32_t salt) {
    float *p = malloc(nparams * sizeof *p);
    uint32_t s = 2463534242u ^ salt;
    for (size_t i = 0; i < nparams; i++) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        uint32_t bits = (s & 0x807fffffu) | ((uint32_t)(100 + (s >> 23) % 50) << 23);
        if (i % 97 == 3) bits = 0x80000000u;
        if (i % 89 == 5) bits = 0x00000123u;
        p[i] = dt_f32_from_bits(bits);
    }
    size_t V = (size_t)cfg.vocab_size, Vp = (size_t)cfg.padded_vocab, C = (size_t)cfg.channels;
    memset(p + tab[DT_P_WTE].offset + V * C, 0, (Vp - V) * C * sizeof(float));
    return p;
}

/* "<dir>/<sub>/<name>" in one of 8 rotating buffers: copy it to keep it longer. */
static char *path_in(const char *sub, const char *name) {
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s%s%s", dir, sub, *name ? "/" : "", name);
    return b;
}

static void test_export_layout(void) {
    float *p = make_params(1);
    CHECK_OK(dt_hf_gpt2_export(path_in("exp", ""), &cfg, p));
    dt_st_file f;
    CHECK_OK(dt_st_open(path_in("exp", DT_HF_WEIGHTS_NAME), &f));
    int n = dt_hf_gpt2_num_tensors(&cfg);
    CHECK(n == 4 + 12 * 2 && f.n == n);
    CHECK(dt_st_meta_get(&f, "format") && strcmp(dt_st_meta_get(&f, "format"), "pt") == 0);
    for (int i = 0; i < n && i < f.n; i++) {
        char nm[96];
        CHECK_OK(dt_hf_gpt2_tensor_name(&cfg, i, nm, sizeof nm));
        CHECKF(strcmp(f.t[i].name, nm) == 0, "tensor %d is %s, expected %s", i, f.t[i].name, nm);
        CHECK(f.t[i].dtype == DT_F32);
    }
    CHECK(dt_st_find(&f, "lm_head.weight") == NULL);
    int64_t C = cfg.channels, V = cfg.vocab_size, T = cfg.max_seq_len;
    const dt_st_entry *e = dt_st_find(&f, "transformer.wte.weight");
    CHECK(e && e->ndim == 2 && e->shape[0] == V && e->shape[1] == C);
    e = dt_st_find(&f, "transformer.wpe.weight");
    CHECK(e && e->shape[0] == T && e->shape[1] == C);
    /* Conv1D: HF c_attn.weight[k][r] (in k, out r) equals our qkvw[l][r][k]. */
    static const struct { const char *name; int param; int64_t R, K; } mats[] = {
        {"transformer.h.1.attn.c_attn.weight", DT_P_QKVW, 24, 8},
        {"transformer.h.1.attn.c_proj.weight", DT_P_ATTPROJW, 8, 8},
        {"transformer.h.1.mlp.c_fc.weight", DT_P_FCW, 32, 8},
        {"transformer.h.1.mlp.c_proj.weight", DT_P_FCPROJW, 8, 32},
    };
    for (int m = 0; m < 4; m++) {
        e = dt_st_find(&f, mats[m].name);
        CHECK(e && e->shape[0] == mats[m].K && e->shape[1] == mats[m].R);
        if (!e) continue;
        float *hf = malloc((size_t)(e->end - e->begin));
        CHECK_OK(dt_st_read(&f, e, hf, (size_t)(e->end - e->begin)));
        const float *ours = p + tab[mats[m].param].offset + (size_t)(mats[m].R * mats[m].K); /* layer 1 */
        int bad = 0;
        for (int64_t r = 0; r < mats[m].R; r++)
            for (int64_t k = 0; k < mats[m].K; k++)
                bad += memcmp(&hf[k * mats[m].R + r], &ours[r * mats[m].K + k], 4) != 0;
        CHECKF(bad == 0, "%s: %d elements not at their transposed place", mats[m].name, bad);
        free(hf);
    }
    float bias[24];
    CHECK_OK(dt_st_read_expect(&f, "transformer.h.1.attn.c_attn.bias", DT_F32, 1, (int64_t[]){24}, bias));
    CHECK(memcmp(bias, p + tab[DT_P_QKVB].offset + 24, sizeof bias) == 0);
    dt_st_close(&f);
    dt_gpt_config back;
    CHECK_OK(dt_hf_gpt2_read_config(path_in("exp", ""), &back));
    CHECK(memcmp(&back, &cfg, sizeof cfg) == 0);
    free(p);
}

static void test_round_trip(void) {
    float *p = make_params(2), *q = malloc(nparams * sizeof *q);
    memset(q, 0x7f, nparams * sizeof *q);
    CHECK_OK(dt_hf_gpt2_export(path_in("rt", ""), &cfg, p));
    CHECK_OK(dt_hf_gpt2_import(path_in("rt", ""), &cfg, q));
    CHECK(memcmp(p, q, nparams * sizeof *p) == 0);
    CHECK_OK(dt_hf_gpt2_export(path_in("rt2", ""), &cfg, q));
    size_t n1, n2;
    uint8_t *a = dt_test_read_file(path_in("rt", DT_HF_WEIGHTS_NAME), &n1), *b = dt_test_read_file(path_in("rt2", DT_HF_WEIGHTS_NAME), &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(a); free(b);
    a = dt_test_read_file(path_in("rt", DT_HF_CONFIG_NAME), &n1);
    b = dt_test_read_file(path_in("rt2", DT_HF_CONFIG_NAME), &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(a); free(b);
    /* Digests returned by the writer match the stored bytes. */
    int n = dt_hf_gpt2_num_tensors(&cfg);
    uint8_t (*dig)[DT_SHA256_LEN] = malloc((size_t)n * DT_SHA256_LEN);
    CHECK_OK(dt_hf_gpt2_write_weights(path_in("rt", "d.safetensors"), &cfg, p, dig));
    dt_st_file f;
    CHECK_OK(dt_st_open(path_in("rt", "d.safetensors"), &f));
    int bad = 0;
    for (int i = 0; i < f.n; i++) {
        uint8_t d[DT_SHA256_LEN];
        CHECK_OK(dt_st_digest(&f, &f.t[i], d));
        bad += memcmp(d, dig[i], DT_SHA256_LEN) != 0;
    }
    CHECK(bad == 0);
    dt_st_close(&f);
    free(dig);
    free(p);
    free(q);
}

/* Rewrites the export of p under `out` with tensors renamed/added/changed by `edit`. */
typedef void (*edit_fn)(dt_st_tensor *t, int *n, char names[][96], void *extra);

static void write_variant(const char *out, edit_fn edit, void *extra) {
    dt_st_file f;
    CHECK_OK(dt_st_open(path_in("var-src", DT_HF_WEIGHTS_NAME), &f));
    static dt_st_tensor t[64];
    static char names[64][96];
    static uint8_t data[64][8192];
    int n = f.n;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], 96, "%s", f.t[i].name);
        CHECK((size_t)(f.t[i].end - f.t[i].begin) <= sizeof data[i]);
        CHECK_OK(dt_st_read(&f, &f.t[i], data[i], (size_t)(f.t[i].end - f.t[i].begin)));
        t[i] = (dt_st_tensor){.name = names[i], .dtype = f.t[i].dtype, .ndim = f.t[i].ndim, .data = data[i]};
        memcpy(t[i].shape, f.t[i].shape, sizeof t[i].shape);
    }
    dt_st_close(&f);
    edit(t, &n, names, extra);
    CHECK_OK(dt_st_write(out, t, n, NULL, 0, NULL));
}

static float lm_head[50 * 8];
static void add_hub_style(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    /* The GPT-2 hub file: no "transformer." prefix, attention mask buffers, lm_head. */
    for (int i = 0; i < *n; i++) memmove(names[i], names[i] + 12, strlen(names[i] + 12) + 1);
    static uint8_t mask[16 * 16];
    static float masked_bias = -1e4f;
    t[*n] = (dt_st_tensor){.name = "h.0.attn.bias", .dtype = DT_U8, .ndim = 4, .shape = {1, 1, 16, 16}, .data = mask};
    t[*n + 1] = (dt_st_tensor){.name = "h.1.attn.masked_bias", .dtype = DT_F32, .ndim = 0, .data = &masked_bias};
    t[*n + 2] = (dt_st_tensor){.name = "lm_head.weight", .dtype = DT_F32, .ndim = 2, .shape = {50, 8}, .data = extra};
    *n += 3;
}
static void drop_one(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    (void)names; (void)extra;
    memmove(&t[5], &t[6], (size_t)(*n - 6) * sizeof *t); /* transformer.h.0.attn.c_attn.bias */
    (*n)--;
}
static void add_unknown(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    (void)names; (void)extra;
    t[*n] = t[2];
    t[*n].name = "transformer.h.2.ln_1.weight"; /* layer 2 of a 2-layer model */
    (*n)++;
}
static void add_duplicate(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    (void)names; (void)extra;
    t[*n] = t[3];
    t[*n].name = "h.0.ln_1.bias";
    (*n)++;
}
static void wrong_shape(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    (void)n; (void)names; (void)extra;
    t[4].shape[0] = 24; t[4].shape[1] = 8; /* c_attn.weight stored [out, in]: not transposed */
}
static void to_bf16(dt_st_tensor *t, int *n, char names[][96], void *extra) {
    (void)names; (void)extra;
    for (int i = 0; i < *n; i++) { /* keep the high halves in place */
        uint32_t *w = (uint32_t *)(uintptr_t)t[i].data;
        uint16_t *h = (uint16_t *)(uintptr_t)t[i].data;
        size_t k = 1;
        for (int d = 0; d < t[i].ndim; d++) k *= (size_t)t[i].shape[d];
        for (size_t j = 0; j < k; j++) h[j] = (uint16_t)(w[j] >> 16);
        t[i].dtype = DT_BF16;
    }
}

static void test_variants(void) {
    float *p = make_params(2), *q = malloc(nparams * sizeof *q);
    char file[512], vdir[512];
    snprintf(file, sizeof file, "%s", path_in("var", DT_HF_WEIGHTS_NAME));
    snprintf(vdir, sizeof vdir, "%s", path_in("var", ""));
    CHECK_OK(dt_hf_gpt2_export(path_in("var-src", ""), &cfg, p));
    CHECK_OK(dt_hf_gpt2_export(vdir, &cfg, p)); /* config.json for the import */
    memcpy(lm_head, p + tab[DT_P_WTE].offset, sizeof lm_head);
    write_variant(file, add_hub_style, lm_head);
    CHECK_OK(dt_hf_gpt2_import(vdir, &cfg, q));
    CHECK(memcmp(p, q, nparams * sizeof *p) == 0);
    lm_head[17] = -lm_head[17] + 1.0f;
    write_variant(file, add_hub_style, lm_head);
    CHECK(dt_hf_gpt2_read_weights(file, &cfg, q) == DT_EMISMATCH);
    CHECK(strstr(dt_errmsg(), "lm_head.weight") && strstr(dt_errmsg(), "ties"));

    static const struct { edit_fn fn; const char *must; } bad[] = {
        {drop_one, "transformer.h.0.attn.c_attn.bias\" is missing"},
        {add_unknown, "unexpected tensor \"transformer.h.2.ln_1.weight\""},
        {add_duplicate, "appears twice"},
        {wrong_shape, "\"transformer.h.0.attn.c_attn.weight\" has shape [24, 8], expected [8, 24]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_variant(file, bad[i].fn, NULL);
        dt_status st = dt_hf_gpt2_read_weights(file, &cfg, q);
        CHECKF(st == DT_EMISMATCH && strstr(dt_errmsg(), bad[i].must), "case %zu: %s: %s", i,
               dt_status_name(st), dt_errmsg());
        CHECK(strstr(dt_errmsg(), file) != NULL);
    }
    /* BF16 weights widen exactly: each float's high half. */
    write_variant(file, to_bf16, NULL);
    CHECK_OK(dt_hf_gpt2_read_weights(file, &cfg, q));
    int diff = 0;
    for (size_t i = 0; i < nparams; i++)
        diff += dt_f32_bits(q[i]) != (dt_f32_bits(p[i]) & 0xffff0000u);
    CHECK(diff == 0);
    free(p);
    free(q);
}

static void test_f16(void) {
    /* binary16 -> binary32 on known values: 1, -2, 65504, 2^-24 (subnormal), 2^-14, inf, -0. */
    static const uint16_t h[8] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0x8000, 0x03ff};
    static const float want[8] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 6.103515625e-5f,
                                  INFINITY, -0.0f, 6.097555160522461e-5f};
    /* Build an all-F16 file whose ln_f.weight starts with these values. */
    float *p = make_params(3), *q = malloc(nparams * sizeof *q);
    for (size_t i = 0; i < nparams; i++) p[i] = 0.5f; /* exactly representable in F16 */
    size_t V = (size_t)cfg.vocab_size, Vp = (size_t)cfg.padded_vocab, C = (size_t)cfg.channels;
    memset(p + tab[DT_P_WTE].offset + V * C, 0, (Vp - V) * C * sizeof(float));
    CHECK_OK(dt_hf_gpt2_export(path_in("f16", ""), &cfg, p));
    dt_st_file f;
    CHECK_OK(dt_st_open(path_in("f16", DT_HF_WEIGHTS_NAME), &f));
    int n = f.n;
    dt_st_tensor t[64];
    static uint16_t data[64][4096];
    for (int i = 0; i < n; i++) {
        t[i] = (dt_st_tensor){.name = f.t[i].name, .dtype = DT_F16, .ndim = f.t[i].ndim, .data = data[i]};
        memcpy(t[i].shape, f.t[i].shape, sizeof t[i].shape);
        for (uint64_t j = 0; j < f.t[i].numel; j++) data[i][j] = 0x3800; /* 0.5 */
        if (strcmp(f.t[i].name, "transformer.ln_f.weight") == 0) memcpy(data[i], h, sizeof h);
    }
    CHECK_OK(dt_st_write(path_in("f16", "h.safetensors"), t, n, NULL, 0, NULL));
    dt_st_close(&f);
    CHECK_OK(dt_hf_gpt2_read_weights(path_in("f16", "h.safetensors"), &cfg, q));
    const float *lnf = q + tab[DT_P_LNFW].offset;
    for (int i = 0; i < 8; i++)
        CHECKF(memcmp(&lnf[i], &want[i], 4) == 0, "f16 %04x -> %g, want %g", h[i], (double)lnf[i], (double)want[i]);
    CHECK(memcmp(q, p, tab[DT_P_LNFW].offset * sizeof(float)) == 0);
    free(p);
    free(q);
}

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(s, f);
    fclose(f);
}

static void test_config(void) {
    float *p = make_params(4), *q = malloc(nparams * sizeof *q);
    CHECK_OK(dt_hf_gpt2_export(path_in("cfg", ""), &cfg, p));
    dt_gpt_config other = cfg;
    other.num_layers = 3;
    dt_gpt_config_finish(&other);
    CHECK(dt_hf_gpt2_import(path_in("cfg", ""), &other, q) == DT_EMISMATCH);
    CHECK(strstr(dt_errmsg(), "\"n_layer\" is 2") && strstr(dt_errmsg(), "--num-layers 3"));
    char cpath[512], cdir[512];
    snprintf(cpath, sizeof cpath, "%s", path_in("cfg", DT_HF_CONFIG_NAME));
    snprintf(cdir, sizeof cdir, "%s", path_in("cfg", ""));
    static const struct { const char *json; dt_status st; const char *must; } cases[] = {
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16}", DT_OK, NULL},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16,"
         "\"activation_function\":\"relu\"}", DT_EUNSUPPORTED, "activation_function"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16,"
         "\"layer_norm_epsilon\":1e-6}", DT_EUNSUPPORTED, "layer_norm_epsilon"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16,"
         "\"tie_word_embeddings\":false}", DT_EUNSUPPORTED, "tie_word_embeddings"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16,"
         "\"n_inner\":16}", DT_EUNSUPPORTED, "n_inner"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50,\"n_positions\":16,"
         "\"model_type\":\"llama\"}", DT_EUNSUPPORTED, "model_type"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":2,\"vocab_size\":50}", DT_ECORRUPT, "n_positions"},
        {"{\"n_embd\":8,\"n_layer\":2,\"n_head\":3,\"vocab_size\":50,\"n_positions\":16}", DT_EINVAL, "3"},
        {"{\"n_embd\":8,", DT_ECORRUPT, "config.json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(cpath, cases[i].json);
        dt_gpt_config c;
        dt_status st = dt_hf_gpt2_read_config(cdir, &c);
        CHECKF(st == cases[i].st, "config case %zu: %s: %s", i, dt_status_name(st), dt_errmsg());
        if (cases[i].must) CHECKF(strstr(dt_errmsg(), cases[i].must) != NULL, "case %zu: %s", i, dt_errmsg());
        if (st == DT_OK) CHECK(memcmp(&c, &cfg, sizeof c) == 0);
    }
    free(p);
    free(q);
}

static void test_logits_check(void) {
    int B = 2, T = 3, V = 5;
    size_t ld = 7;
    int in[6] = {0, 1, 2, 3, 4, 0}, tg[6] = {1, 2, 3, 4, 0, 1};
    float lg[2 * 3 * 7];
    for (int i = 0; i < 42; i++) lg[i] = (float)i * 0.25f - 3.0f;
    const char *path = path_in("", "lc.bin");
    CHECK_OK(dt_logits_check_write(path, B, T, V, ld, in, tg, lg, 1.2345678901234567));
    dt_logits_check lc;
    CHECK_OK(dt_logits_check_read(path, &lc));
    CHECK(lc.B == 2 && lc.T == 3 && lc.V == 5 && lc.loss == 1.2345678901234567);
    int bad = 0;
    for (int r = 0; r < 6; r++) {
        bad += lc.inputs[r] != in[r] || lc.targets[r] != tg[r];
        for (int v = 0; v < V; v++) bad += lc.logits[r * V + v] != lg[(size_t)r * ld + (size_t)v];
    }
    CHECK(bad == 0);
    dt_logits_check_free(&lc);
    size_t n;
    uint8_t *b = dt_test_read_file(path, &n);
    CHECK(b && n == 32 + 8 * 6 + 4 * 6 * 5);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n - 1, f);
    fclose(f);
    CHECK(dt_logits_check_read(path, &lc) == DT_ECORRUPT && strstr(dt_errmsg(), "truncated"));
    b[32] = 9; /* inputs[0] = 9 >= V */
    f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    CHECK(dt_logits_check_read(path, &lc) == DT_ECORRUPT && strstr(dt_errmsg(), "inputs[0]"));
    free(b);
}

static int forward_mode(const char *hfdir, const char *out) {
    dt_gpt_config c;
    dt_logits_check lc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", hfdir, DT_LOGITS_CHECK_NAME);
    dt_status st = dt_hf_gpt2_read_config(hfdir, &c);
    if (st == DT_OK) st = dt_logits_check_read(path, &lc);
    if (st != DT_OK) { fprintf(stderr, "%s\n", dt_errmsg()); return 1; }
    dt_gpt *m = NULL;
    st = dt_gpt_create(&m, &c, (int)lc.B, (int)lc.T, 1);
    if (st == DT_OK) st = dt_hf_gpt2_import(hfdir, &c, m->param_mem);
    int *in = malloc(2 * sizeof(int) * lc.B * lc.T), *tg = in + lc.B * lc.T;
    for (size_t i = 0; i < (size_t)lc.B * lc.T; i++) { in[i] = lc.inputs[i]; tg[i] = lc.targets[i]; }
    double loss = 0;
    if (st == DT_OK) st = dt_gpt_forward(m, in, tg, &loss);
    if (st == DT_OK) st = dt_hf_gpt2_export(out, &c, m->param_mem);
    snprintf(path, sizeof path, "%s/%s", out, DT_LOGITS_CHECK_NAME);
    if (st == DT_OK)
        st = dt_logits_check_write(path, (int)lc.B, (int)lc.T, c.vocab_size, (size_t)c.padded_vocab, in, tg,
                                   m->acts.logits, loss);
    if (st != DT_OK) fprintf(stderr, "%s\n", dt_errmsg());
    else printf("detrain forward: loss %.9f (file from HF: %.9f)\n", loss, lc.loss);
    free(in);
    dt_logits_check_free(&lc);
    if (m) dt_gpt_free(m);
    return st == DT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    small_config(&cfg);
    nparams = dt_gpt_param_table(&cfg, tab);
    if (argc == 4 && strcmp(argv[1], "--forward") == 0) return forward_mode(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--emit") == 0) {
        float *p = make_params(9);
        dt_status st = dt_hf_gpt2_export(argv[2], &cfg, p);
        if (st != DT_OK) fprintf(stderr, "%s\n", dt_errmsg());
        free(p);
        return st == DT_OK ? 0 : 1;
    }
    dt_test_scratch(dir, sizeof dir, "hf");
    RUN(test_export_layout);
    RUN(test_round_trip);
    RUN(test_variants);
    RUN(test_f16);
    RUN(test_config);
    RUN(test_logits_check);
    dt_test_scratch_remove(dir);
    return dt_test_report();
}
