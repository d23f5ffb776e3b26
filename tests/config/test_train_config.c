/* The flag table (src/config/train_flags.def) and what is made from it: every default
 * parses and passes its own range, every recorded flag has a checkpoint key, the keys the
 * checkpoints of earlier releases bind are still bound, help lists every flag, and a parse
 * resolves presets and derived defaults the way cmd_train's flags say. */
#include "ckpt/ckpt.h"
#include "config/train_config.h"
#include "dt_test.h"

#include <string.h>

static void table_rows(void) {
    int n;
    const dt_opt *f = dt_train_flags(&n);
    CHECK(n == DT_F_COUNT);
    for (int i = 0; i < n; i++) {
        CHECKF(!strncmp(f[i].name, "--", 2) && *f[i].help, "%s", f[i].name);
        CHECKF((f[i].bind == DT_BIND_NONE) == (*f[i].key == 0), "%s: a recorded flag needs a key", f[i].name);
        for (int k = 0; k < i; k++) {
            CHECKF(strcmp(f[i].name, f[k].name), "%s twice", f[i].name);
            if (*f[i].key) CHECKF(strcmp(f[i].key, f[k].key), "key %s twice", f[i].key);
        }
        if (f[i].kind == DT_OPT_ENUM) CHECKF(strchr(f[i].range, '|'), "%s: an ENUM lists its choices", f[i].name);
    }
}

static void defaults_parse(void) {
    dt_train_config c;
    int help = 1;
    CHECK_OK(dt_train_config_parse(&c, 0, NULL, &help));
    CHECK(help == 0);
    int n;
    const dt_opt *f = dt_train_flags(&n);
    for (int i = 0; i < n; i++) {
        CHECK(c.given[i] == 0);
        if (*f[i].def) CHECKF(dt_opt_check(&f[i], &c) == DT_OK, "%s: %s", f[i].name, dt_errmsg());
    }
    dt_cuda_options d = dt_cuda_options_default();
    CHECK(d.attention == DT_ATTN_AUTO && d.epilogues == DT_EPI_GELU && d.gemm_own == 1 && d.gemm_dot == 1 &&
          d.dw_batch == 1 && d.bwd_overlap == 1 && d.graphs == 1);
    CHECK(!memcmp(&d, &c.cuda, sizeof d));
    dt_train_config_free(&c);
}

/* The binding keys checkpoints of earlier releases record: still bound, so they resume. */
static void binding_keys(void) {
    static const char *old[] = {"num_layers", "hidden_size", "num_attention_heads", "vocab_size",
                                "max_position_embeddings", "seq_length", "micro_batch_size", "global_batch_size",
                                "lr", "min_lr", "lr_warmup_iters", "lr_decay_iters", "weight_decay", "clip_grad",
                                "adam_beta1", "adam_beta2", "adam_eps", "hidden_dropout", "attention_dropout",
                                "seed", "deterministic_mode", "data_path", "val_fraction"};
    dt_train_config c;
    int help;
    char a0[] = "--model", a1[] = "small", a2[] = "--lr", a3[] = "0.25";
    char *argv[] = {a0, a1, a2, a3};
    CHECK_OK(dt_train_config_parse(&c, 4, argv, &help));
    CHECK_OK(dt_train_config_resolve(&c));
    dt_ckpt_config ck;
    dt_train_ckpt_config(&c, &ck);
    CHECK(!ck.oom);
    for (size_t k = 0; k < sizeof old / sizeof old[0]; k++) {
        int found = 0;
        for (int i = 0; i < ck.n; i++) found |= ck.item[i].binding && !strcmp(ck.item[i].key, old[k]);
        CHECKF(found, "%s", old[k]);
    }
    for (int i = 0; i < ck.n; i++) {
        if (!strcmp(ck.item[i].key, "lr")) CHECK(!strcmp(ck.item[i].json, "0.25"));
        if (!strcmp(ck.item[i].key, "hidden_size")) CHECK(!strcmp(ck.item[i].json, "256")); /* the preset's */
        if (!strcmp(ck.item[i].key, "global_batch_size")) CHECK(!strcmp(ck.item[i].json, "8")); /* B */
        if (!strcmp(ck.item[i].key, "lr_decay_iters")) CHECK(!strcmp(ck.item[i].json, "200")); /* train iters */
        if (!strcmp(ck.item[i].key, "data_path")) CHECK(!strcmp(ck.item[i].json, "null"));
        if (!strcmp(ck.item[i].key, "model")) CHECK(!ck.item[i].binding && !strcmp(ck.item[i].json, "\"small\""));
    }
    dt_ckpt_config_free(&ck);
    dt_train_config_free(&c);
}

static void help_lists_every_flag(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    dt_train_config_help(m);
    fclose(m);
    int n;
    const dt_opt *f = dt_train_flags(&n);
    for (int i = 0; i < n; i++) {
        char want[80];
        snprintf(want, sizeof want, "\n  %s ", f[i].name);
        CHECKF(strstr(buf, want), "%s", f[i].name);
    }
    free(buf);
}

/* A later value replaces an earlier one; each use is kept for deterministic mode. */
static void uses_and_overrides(void) {
    dt_train_config c;
    int help;
    char a0[] = "--lr", a1[] = "0.5", a2[] = "--op-variant", a3[] = "gemm=det", a4[] = "--lr=0.125",
         a5[] = "--op-variant", a6[] = "norm=det", a7[] = "--quiet";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7};
    CHECK_OK(dt_train_config_parse(&c, 8, argv, &help));
    CHECK(c.lr == 0.125f && c.quiet == 1 && c.given[DT_F_LR] && c.given[DT_F_QUIET]);
    CHECK(c.lists[DT_LIST_OP_VARIANT].n == 2 && !strcmp(c.lists[DT_LIST_OP_VARIANT].v[1], "norm=det"));
    CHECK(c.opts.nuses == 5 && !strcmp(c.opts.uses[4].name, "--quiet") && !strcmp(c.opts.uses[4].value, ""));
    char js[8192];
    dt_train_config_json(&c, 0, js, sizeof js);
    CHECKF(strstr(js, "\"op-variant\":[\"gemm=det\",\"norm=det\"]"), "%s", js);
    dt_train_config_free(&c);
}

/* The presets, the largest included. */
static void presets(void) {
    dt_gpt_config g;
    CHECK_OK(dt_gpt_preset("gpt2-1558m", &g));
    CHECK(g.num_layers == 48 && g.channels == 1600 && g.num_heads == 25 && g.vocab_size == 50257 && g.max_seq_len == 1024);
    CHECK_OK(dt_gpt_config_finish(&g));
    CHECK(g.padded_vocab == 50304 && g.channels / g.num_heads == 64);
    CHECK(dt_gpt_preset("gpt2-3b", &g) == DT_EINVAL && strstr(dt_errmsg(), "gpt2-1558m"));
}

int main(void) {
    RUN(presets);
    RUN(table_rows);
    RUN(defaults_parse);
    RUN(binding_keys);
    RUN(help_lists_every_flag);
    RUN(uses_and_overrides);
    return dt_test_report();
}
