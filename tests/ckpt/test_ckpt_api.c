/* Checkpoint API (ckpt/ckpt.h) in process: save then load restores parameters, AdamW state
 * and the run state bit for bit; a non-zero padded vocabulary row refuses to save and
 * writes no tracker; a config difference or a corrupt file refuses to load and leaves the
 * model and optimizer untouched; --no-load-optim leaves the optimizer alone; config items
 * are formatted exactly; the state file's self digest covers every byte; a backend's
 * device description is recorded in env.json. */
#include "ckpt/ckpt.h"
#include "ckpt/ckpt_view.h"
#include "ckpt/tracker.h"
#include "core/json.h"
#include "dt_test.h"

#include <sys/stat.h>
#include <unistd.h>

static char root[256];
static dt_gpt *model;
static dt_adamw opt;
static dt_ckpt_config cfg;

/* Arbitrary distinct values in every parameter and moment; padded wte rows stay zero. */
static void fill(dt_gpt *m, dt_adamw *o, uint32_t salt) {
    uint32_t s = 2463534242u ^ salt;
    const dt_gpt_config *c = &m->cfg;
    size_t pad_lo = m->params[DT_P_WTE].offset + (size_t)c->vocab_size * c->channels;
    size_t pad_hi = m->params[DT_P_WTE].offset + (size_t)c->padded_vocab * c->channels;
    for (size_t i = 0; i < m->num_params; i++) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        int pad = i >= pad_lo && i < pad_hi;
        m->param_mem[i] = pad ? 0.0f : (float)(int32_t)s * 1e-10f;
        o->m[i] = (float)(int32_t)(s * 7u) * 1e-12f;
        o->v[i] = (float)(s >> 8) * 1e-14f;
    }
    o->t = 17;
}

static dt_ckpt_state state(int64_t step) {
    dt_ckpt_state s = {.step = step, .consumed_samples = step * 4, .consumed_tokens = step * 64,
                       .cursor = {2, 33}, .train_windows = 1000, .seed = 18446744073709551557ull,
                       .micro_steps = step * 2};
    return s;
}

static void setup(void) {
    dt_test_scratch(root, sizeof root, "test_ckpt_api");
    dt_gpt_config c = {.max_seq_len = 16, .vocab_size = 300, .num_layers = 2, .num_heads = 2, .channels = 8};
    CHECK_OK(dt_gpt_config_finish(&c));
    CHECK_OK(dt_gpt_create(&model, &c, 1, 8, 7));
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    CHECK_OK(dt_adamw_init(&opt, &ac, model->num_params));
    dt_ckpt_config_int(&cfg, "hidden_size", "--hidden-size", 8, 1);
    dt_ckpt_config_f32(&cfg, "lr", "--lr", 1e-3f, 1);
    dt_ckpt_config_u64(&cfg, "seed", "--seed", 18446744073709551557ull, 1);
    dt_ckpt_config_str(&cfg, "data_path", "--data-path", "a \"quoted\"\\path", 1);
    dt_ckpt_config_str(&cfg, "log_dir", "--log-dir", NULL, 0);
    dt_ckpt_config_int(&cfg, "train_iters", "--train-iters", 100, 0);
}

static void test_config_items(void) {
    CHECK(cfg.n == 6 && !cfg.oom);
    CHECK(strcmp(cfg.item[1].json, "0.00100000005") == 0);
    CHECK(strcmp(cfg.item[2].json, "18446744073709551557") == 0);
    CHECK(strcmp(cfg.item[3].json, "\"a \\\"quoted\\\"\\\\path\"") == 0);
    CHECK(strcmp(cfg.item[4].json, "null") == 0);
}

static void test_round_trip(void) {
    char save[300], it[400];
    snprintf(save, sizeof save, "%s/s", root);
    fill(model, &opt, 1);
    size_t n = model->num_params;
    float *p0 = malloc(n * 4), *m0 = malloc(n * 4), *v0 = malloc(n * 4);
    memcpy(p0, model->param_mem, n * 4);
    memcpy(m0, opt.m, n * 4);
    memcpy(v0, opt.v, n * 4);
    dt_ckpt_state s = state(5), got;
    CHECK_OK(dt_ckpt_save(save, model, &opt, &s, &cfg));
    int64_t iter;
    int found;
    CHECK_OK(dt_ckpt_tracker_read(save, &iter, &found));
    CHECK(found && iter == 5);
    CHECK_OK(dt_ckpt_verify(save, NULL));

    /* scramble, then load: everything comes back exactly */
    fill(model, &opt, 2);
    opt.t = 3;
    dt_ckpt_load_opts lo = {1, 1};
    CHECK_OK(dt_ckpt_load(save, &cfg, &lo, model, &opt, &got));
    CHECK(memcmp(model->param_mem, p0, n * 4) == 0);
    CHECK(memcmp(opt.m, m0, n * 4) == 0 && memcmp(opt.v, v0, n * 4) == 0 && opt.t == 17);
    CHECK(memcmp(&got, &s, sizeof s) == 0);

    /* --no-load-optim: weights restored, optimizer untouched */
    fill(model, &opt, 3);
    float m_before = opt.m[5];
    lo.load_optim = 0;
    CHECK_OK(dt_ckpt_load(save, &cfg, &lo, model, &opt, &got));
    CHECK(memcmp(model->param_mem, p0, n * 4) == 0 && opt.m[5] == m_before && opt.t == 17);

    /* a binding difference: refused, model untouched; a non-binding one is fine */
    dt_ckpt_config other = cfg;
    static char lr2[] = "0.00200000009", iters[] = "200", seed5[] = "5";
    char *saved_json = other.item[1].json;
    other.item[1].json = lr2;
    fill(model, &opt, 4);
    float p_before = model->param_mem[9];
    lo.load_optim = 1;
    CHECK(dt_ckpt_load(save, &other, &lo, model, &opt, &got) == DT_EMISMATCH);
    CHECK(strstr(dt_errmsg(), "lr = 0.00100000005 but this run has 0.00200000009 (--lr)"));
    CHECK(model->param_mem[9] == p_before && opt.t == 17);
    other.item[1].json = saved_json;
    other.item[5].json = iters;
    CHECK_OK(dt_ckpt_load(save, &other, &lo, model, &opt, &got));

    /* seed may differ only without the RNG state */
    other = cfg;
    other.item[2].json = seed5;
    CHECK(dt_ckpt_load(save, &other, &lo, model, &opt, &got) == DT_EMISMATCH);
    lo.load_rng = 0;
    CHECK_OK(dt_ckpt_load(save, &other, &lo, model, &opt, &got));

    /* a corrupt optimizer file: refused by name, model untouched */
    snprintf(it, sizeof it, "%s/iter_0000005/optimizer.safetensors", save);
    FILE *f = fopen(it, "r+b");
    CHECK(f != NULL);
    if (f) { fseek(f, -3, SEEK_END); fputc(0x5a, f); fclose(f); }
    fill(model, &opt, 5);
    p_before = model->param_mem[9];
    lo.load_rng = 1;
    CHECK(dt_ckpt_load(save, &cfg, &lo, model, &opt, &got) == DT_ECORRUPT);
    CHECK(strstr(dt_errmsg(), "optimizer.safetensors") && strstr(dt_errmsg(), "SHA-256"));
    CHECK(model->param_mem[9] == p_before);
    free(p0);
    free(m0);
    free(v0);
}

static void test_padded_rows_must_be_zero(void) {
    char save[300], it[400];
    snprintf(save, sizeof save, "%s/pad", root);
    fill(model, &opt, 6);
    const dt_gpt_config *c = &model->cfg;
    model->param[DT_P_WTE][(size_t)(c->vocab_size + 3) * c->channels + 1] = 1e-30f;
    dt_ckpt_state s = state(7);
    CHECK(dt_ckpt_save(save, model, &opt, &s, &cfg) == DT_ESTATE);
    CHECK(strstr(dt_errmsg(), "padded vocabulary row 303") && strstr(dt_errmsg(), "column 1"));
    struct stat sb;
    CHECK(stat(save, &sb) != 0); /* nothing written, not even the directory */
    /* -0.0 is not +0 either: restoring it as +0 would not be exact */
    model->param[DT_P_WTE][(size_t)(c->vocab_size + 3) * c->channels + 1] = -0.0f;
    CHECK(dt_ckpt_save(save, model, &opt, &s, &cfg) == DT_ESTATE);
    model->param[DT_P_WTE][(size_t)(c->vocab_size + 3) * c->channels + 1] = 0.0f;
    CHECK_OK(dt_ckpt_save(save, model, &opt, &s, &cfg));
    snprintf(it, sizeof it, "%s/iter_0000007", save);
    CHECK(stat(it, &sb) == 0);
}

static void test_self_digest(void) {
    char save[300], path[400];
    snprintf(save, sizeof save, "%s/dig", root);
    fill(model, &opt, 8);
    dt_ckpt_state s = state(9);
    CHECK_OK(dt_ckpt_save(save, model, &opt, &s, &cfg));
    snprintf(path, sizeof path, "%s/iter_0000009/state.json", save);
    FILE *f = fopen(path, "rb");
    char *text = malloc(1 << 20);
    size_t n = f ? fread(text, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    CHECK(n > 100);
    CHECK(dt_ckpt_self_digest_at(text, n) != NULL);
    /* a one-byte change anywhere (sampled) is caught, including inside the digest */
    int caught = 0, tried = 0;
    for (size_t i = 0; i < n; i += 37) {
        text[i] ^= 0x01;
        f = fopen(path, "wb");
        fwrite(text, 1, n, f);
        fclose(f);
        tried++;
        caught += dt_ckpt_verify(save, NULL) != DT_OK;
        text[i] ^= 0x01;
    }
    CHECKF(caught == tried, "%d of %d one-byte changes caught", caught, tried);
    f = fopen(path, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
    CHECK_OK(dt_ckpt_verify(save, NULL));
    free(text);
}

/* dt_ckpt_save_env (the GPU loop's save): the device description lands in env.json's
 * "contract" as "run", the checkpoint verifies, and its tensors equal a plain save's. */
static void test_env_extra(void) {
    char a[300], b[300], path[400], text[16384];
    snprintf(a, sizeof a, "%s/env_plain", root);
    snprintf(b, sizeof b, "%s/env_gpu", root);
    fill(model, &opt, 4);
    dt_ckpt_state s = state(3);
    CHECK_OK(dt_ckpt_save(a, model, &opt, &s, &cfg));
    CHECK_OK(dt_ckpt_save_env(b, model, &opt, &s, &cfg, "{\"device\":\"test-gpu\",\"sms\":132}"));
    CHECK_OK(dt_ckpt_verify(b, NULL));
    snprintf(path, sizeof path, "%s/iter_0000003/%s", b, DT_CKPT_ENV_NAME);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    CHECKF(strstr(text, "\"run\": {\"device\":\"test-gpu\",\"sms\":132}") != NULL, "env.json: %.300s", text);
    snprintf(path, sizeof path, "%s/iter_0000003/%s", a, DT_CKPT_ENV_NAME);
    f = fopen(path, "rb");
    n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    CHECK(n > 0 && strstr(text, "\"run\"") == NULL);
    FILE *out = tmpfile();
    int identical = 0;
    CHECK_OK(dt_ckpt_compare(a, b, out, &identical));
    CHECK(identical);
    if (out) fclose(out);
}

int main(void) {
    setup();
    RUN(test_config_items);
    RUN(test_round_trip);
    RUN(test_padded_rows_must_be_zero);
    RUN(test_self_digest);
    RUN(test_env_extra);
    dt_gpt_free(model);
    dt_adamw_free(&opt);
    dt_ckpt_config_free(&cfg);
    dt_test_scratch_remove(root);
    return dt_test_report();
}
