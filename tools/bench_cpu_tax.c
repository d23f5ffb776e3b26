/* The CPU determinism tax measured step by step, interleaved: one process, one model, and
 * training steps that alternate between every op's fast branch and every op's det branch
 * (`--op-variant NAME=det|fast` overrides in default mode run exactly the code paths that
 * deterministic mode selects). Alternating every step cancels the slow drifts of a shared
 * machine that separate runs pick up. Prints the median and minimum step time of each
 * branch set and the tax.
 *
 * --only OP: the "det" set runs only OP's det branch (every other op fast), to find which
 * op the tax comes from.
 *
 * usage: build/tools/bench_cpu_tax [--model small] [--steps 40] [--threads 2] [--B 8]
 *                                  [--only OP] */
#include "core/determinism.h"
#include "data/dataset.h"
#include "model/gpt.h"
#include "ops/op.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Every op's branch = variant, except `only` (when set) which runs det while the rest run
 * fast. */
static void all_ops(const char *variant, const char *only) {
    dt_op_clear_overrides();
    for (int i = 0; i < DT_OP_COUNT; i++) {
        char spec[64];
        const char *name = dt_op_name((dt_op_id)i);
        const char *v = only && !strcmp(variant, "det") ? (!strcmp(name, only) ? "det" : "fast") : variant;
        snprintf(spec, sizeof spec, "%s=%s", name, v);
        if (dt_op_override(spec) != DT_OK) { fprintf(stderr, "%s\n", dt_errmsg()); exit(2); }
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *model = "small", *threads = "2", *only = NULL;
    int steps = 40, B = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--B")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    if (steps < 4 || B < 1) { fprintf(stderr, "need --steps >= 4 and --B >= 1\n"); return 2; }
    setenv("OMP_NUM_THREADS", threads, 1);
    setenv("OPENBLAS_NUM_THREADS", threads, 1);
    dt_det_request req = {0, NULL, 0};
    dt_gpt_config cfg;
    dt_gpt *m = NULL;
    dt_dataset *ds = NULL;
    dt_adamw opt;
    if (dt_determinism_apply(&req) != DT_OK || dt_runtime_init() != DT_OK ||
        dt_gpt_preset(model, &cfg) != DT_OK || dt_gpt_config_finish(&cfg) != DT_OK ||
        dt_gpt_create(&m, &cfg, B, cfg.max_seq_len, 1) != DT_OK ||
        dt_dataset_open(&ds, NULL, cfg.vocab_size, 1, 0.05f, B, cfg.max_seq_len) != DT_OK) {
        fprintf(stderr, "bench_cpu_tax: %s\n", dt_errmsg());
        return 2;
    }
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    if (dt_adamw_init(&opt, &ac, m->num_params) != DT_OK) return 2;
    size_t BT = (size_t)B * cfg.max_seq_len;
    int *in = malloc(sizeof(int) * BT), *tg = malloc(sizeof(int) * BT);
    double *t[2] = {malloc(sizeof(double) * (size_t)steps), malloc(sizeof(double) * (size_t)steps)};
    const char *names[2] = {"fast", "det"};
    for (int s = 0; s < 2 * steps + 4; s++) {
        int v = s & 1; /* alternate every step */
        all_ops(names[v], only);
        if (dt_dataset_next_train(ds, in, tg) != DT_OK) return 2;
        double t0 = now_ms(), loss;
        dt_gpt_zero_grad(m);
        m->training = 1;
        if (dt_gpt_forward(m, in, tg, &loss) != DT_OK) return 2;
        dt_gpt_backward(m, 1.0f);
        dt_grad_stats gs;
        dt_grad_stats_compute(m, &gs);
        dt_adamw_step(&opt, m, 1e-4f, gs.grad_norm);
        double ms = now_ms() - t0;
        if (s >= 4) t[v][(s - 4) / 2] = ms; /* the first two of each warm up */
    }
    double med[2], mn[2];
    for (int v = 0; v < 2; v++) {
        qsort(t[v], (size_t)steps, sizeof(double), cmp);
        med[v] = steps % 2 ? t[v][steps / 2] : 0.5 * (t[v][steps / 2 - 1] + t[v][steps / 2]);
        mn[v] = t[v][0];
    }
    printf("model %s, B %d, T %d, %s threads, %d interleaved steps of each%s%s\n", model, B,
           cfg.max_seq_len, threads, steps, only ? "; det set: only " : "", only ? only : "");
    printf("%-5s %10s %10s %10s\n", "ops", "median ms", "min ms", "tok/s");
    for (int v = 0; v < 2; v++)
        printf("%-5s %10.2f %10.2f %10.0f\n", names[v], med[v], mn[v], (double)BT / med[v] * 1e3);
    printf("tax: %+.2f%% (median), %+.2f%% (min)\n", (med[1] / med[0] - 1) * 100, (mn[1] / mn[0] - 1) * 100);
    free(in); free(tg); free(t[0]); free(t[1]);
    dt_adamw_free(&opt);
    dt_gpt_free(m);
    dt_dataset_free(ds);
    return 0;
}
