/* `detrain train`: the flags of config/train_flags.def into dt_train_config, deterministic
 * mode applied first (before any library is touched, with every flag given), then the
 * config resolved and the training loop run. */
#include "cli/cli.h"

#include "config/train_config.h"
#include "core/determinism.h"
#include "ops/op.h"
#include "trace/inject.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>

static int fail(dt_train_config *cfg, const char *hint) {
    fprintf(stderr, "detrain train: %s%s\n", dt_errmsg(), hint);
    dt_train_config_free(cfg);
    return 2;
}

int dt_cmd_train(int argc, char **argv) {
    dt_train_config cfg;
    int help = 0;
    if (dt_train_config_parse(&cfg, argc, argv, &help) != DT_OK) return fail(&cfg, " (see detrain train --help)");
    if (help) {
        dt_train_config_help(stdout);
        dt_train_config_free(&cfg);
        return 0;
    }
    if (cfg.given[DT_F_THREADS]) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", cfg.threads);
        setenv("OMP_NUM_THREADS", buf, 1);
        setenv("OPENBLAS_NUM_THREADS", buf, 1);
    }
    /* Deterministic mode first: validation of flags and environment, then the switch. */
    dt_det_request req = {cfg.deterministic, cfg.opts.uses, cfg.opts.nuses};
    if (dt_determinism_apply(&req) != DT_OK) return fail(&cfg, "");
    const dt_str_list *ov = &cfg.lists[DT_LIST_OP_VARIANT];
    for (int i = 0; i < ov->n; i++)
        if (dt_op_override(ov->v[i]) != DT_OK) return fail(&cfg, "");
    if (dt_train_config_resolve(&cfg) != DT_OK) return fail(&cfg, "");
    if (cfg.inject) {
        dt_inject inj;
        if (dt_inject_parse(cfg.inject, &inj) != DT_OK) return fail(&cfg, "");
        dt_inject_set(&inj);
    }
    if (dt_runtime_init() != DT_OK) return fail(&cfg, "");
    dt_status st = dt_train_run(&cfg);
    if (st != DT_OK) return fail(&cfg, "");
    dt_train_config_free(&cfg);
    return 0;
}
