/* dump_reference: records the first training steps of detrain's CPU GPT (deterministic
 * mode) so an independent implementation can replay them and compare. Its consumer is
 * tools/torch_reference.py (PyTorch); docs/torch-reference.md explains the comparison.
 * tests/gpu/dump_reference_gpu.cu does the same for the bf16 GPU model; the flags, the
 * files and the index are shared (tools/refdump/refdump.c describes the format).
 *
 * Each step k = 1..N does exactly what the trainer does with one micro-batch per step:
 * take the next training batch of the built-in corpus, zero the gradients, forward,
 * backward with loss scale 1, gradient statistics (global norm), lr = dt_lr_at(k), one
 * AdamW step (clipping by the global norm).
 *
 * Nothing in the directory depends on the thread count or the time: two dumps with the
 * same flags are byte-identical (tests/tools/test_dump_reference.sh checks this). */
#include "core/determinism.h"
#include "data/dataset.h"
#include "model/gpt.h"
#include "optim/optim.h"
#include "refdump/refdump.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    /* Deterministic mode before anything touches OpenMP or BLAS. */
    dt_det_request req = {1, NULL, 0};
    if (dt_determinism_apply(&req) != DT_OK || dt_runtime_init() != DT_OK) {
        fprintf(stderr, "dump_reference: %s\n", dt_errmsg());
        return 2;
    }
    dt_refdump_args a;
    int prc = dt_refdump_parse_args(argc, argv, "dump_reference",
                                    "detrain's CPU trainer in deterministic mode", &a);
    if (prc) return prc > 0 ? 0 : 2;
    dt_gpt_config cfg;
    int T;
    if (dt_refdump_prepare(&a, &cfg, &T)) return 2;

    int rc = 2, B = a.batch;
    dt_gpt *m = NULL;
    dt_dataset *ds = NULL;
    dt_adamw opt = {0};
    int *tok = malloc(sizeof(int) * 2 * (size_t)B * (size_t)T);
    dt_refdump_step *log = calloc((size_t)a.steps, sizeof *log);
    if (!tok || !log) {
        fprintf(stderr, "dump_reference: out of memory\n");
        goto done;
    }
    dt_adamw_config ac = {a.beta1, a.beta2, a.eps, a.weight_decay, a.clip_grad};
    dt_lr_schedule sched = {a.lr, a.min_lr, a.warmup, a.decay};
    if (dt_gpt_create(&m, &cfg, B, T, a.seed) != DT_OK ||
        dt_adamw_init(&opt, &ac, m->num_params) != DT_OK ||
        dt_dataset_open(&ds, NULL, cfg.vocab_size, a.seed, 0.05f, B, T) != DT_OK) {
        fprintf(stderr, "dump_reference: %s\n", dt_errmsg());
        goto done;
    }
    if (dt_refdump_write(&a, "params", 0, m->param_mem, m->num_params, NULL, 0)) goto done;
    size_t BT = (size_t)B * (size_t)T;
    for (int k = 1; k <= a.steps; k++) {
        int *in = tok, *tg = tok + BT;
        double loss;
        dt_gpt_zero_grad(m);
        if (dt_dataset_next_train(ds, in, tg) != DT_OK || dt_gpt_forward(m, in, tg, &loss) != DT_OK) {
            fprintf(stderr, "dump_reference: step %d: %s\n", k, dt_errmsg());
            goto done;
        }
        dt_gpt_backward(m, 1.0f);
        dt_grad_stats gs;
        dt_grad_stats_compute(m, &gs);
        float lr = dt_lr_at(&sched, k);
        if (dt_refdump_write(&a, "tokens", k, in, BT, tg, BT) ||
            dt_refdump_write(&a, "grads", k, m->grad_mem, m->num_params, NULL, 0))
            goto done;
        dt_adamw_step(&opt, m, lr, gs.grad_norm);
        if (dt_refdump_write(&a, "params", k, m->param_mem, m->num_params, NULL, 0)) goto done;
        log[k - 1] = (dt_refdump_step){lr, loss, gs.grad_norm, gs.param_norm, gs.num_zeros};
        fprintf(stderr, "step %d: loss %.9g grad_norm %.9g lr %.9g\n", k, loss, gs.grad_norm,
                (double)lr);
    }
    dt_refdump_origin origin = {"cpu", "fp32", NULL};
    if (dt_refdump_write_index(&a, m, &origin, log)) goto done;
    fprintf(stderr, "dump_reference: wrote %d steps of L%d C%d NH%d V%d T%d B%d (%zu params, "
            "%d threads) to %s\n", a.steps, cfg.num_layers, cfg.channels, cfg.num_heads,
            cfg.vocab_size, T, B, m->num_params, dt_num_threads(), a.out);
    rc = 0;
done:
    dt_dataset_free(ds);
    dt_adamw_free(&opt);
    dt_gpt_free(m);
    free(tok);
    free(log);
    return rc;
}
