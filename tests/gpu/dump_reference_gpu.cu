/* dump_reference_gpu: records the first training steps of detrain's GPU GPT (src/model/
 * gpt_cuda: bf16 activations and matmul inputs, fp32 master weights, gradients and AdamW)
 * in deterministic mode, in the format of tools/dump_reference.c (the flags, files and
 * index are shared: tools/refdump/refdump.c), with "device":"cuda", "precision":"bf16" and
 * the device description (GPU, attention kernel, pinned GEMM algorithms) in index.json.
 * tools/torch_reference.py replays it against PyTorch on CUDA in fp32 and in bf16
 * autocast; tools/torch_check_gpu.sh runs both on the GPU machine.
 *
 * Not a test (bench/gpu.sh runs build/gpu-tests/test_* only); built by `make cuda` as
 * build/gpu-tests/dump_reference_gpu.
 *
 * Each step k = 1..N does what the training loop (src/train/loop.c) does on the CUDA backend with one
 * micro-batch per step: the next training batch of the built-in corpus, zero the
 * gradients, forward with the cross-entropy backward fused in (loss scale 1), backward,
 * then dt_gpt_cuda_step (grad norm, clipping, AdamW at lr = dt_lr_at(k)). The gradients
 * are read back between backward and step, the parameters after it. The initial
 * parameters are the host model's (the same init as the CPU dump with the same flags).
 * --attention-impl gemm (before the other flags) selects the GEMM attention formulation as
 * the trainer's flag does. */
#include "model/gpt_cuda.h"

extern "C" {
#include "core/determinism.h"
#include "data/dataset.h"
}
#include "../../tools/refdump/refdump.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *tool = "dump_reference_gpu";
    /* Deterministic mode before anything touches CUDA, cuBLASLt, OpenMP or BLAS. */
    dt_det_request req = {1, NULL, 0};
    if (dt_determinism_apply(&req) != DT_OK || dt_runtime_init() != DT_OK) {
        fprintf(stderr, "%s: %s\n", tool, dt_errmsg());
        return 2;
    }
    dt_cuda_options copt = dt_cuda_options_default();
    if (argc > 2 && !strcmp(argv[1], "--attention-impl")) {
        if (!strcmp(argv[2], "gemm")) copt.attention = DT_ATTN_GEMM;
        else if (strcmp(argv[2], "auto")) {
            fprintf(stderr, "%s: --attention-impl '%s': accepted: auto, gemm\n", tool, argv[2]);
            return 2;
        }
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    dt_refdump_args a;
    int prc = dt_refdump_parse_args(argc, argv, tool,
                                    "detrain's bf16 GPU model in deterministic mode", &a);
    if (prc) return prc > 0 ? 0 : 2;
    dt_gpt_config cfg;
    int T;
    if (dt_refdump_prepare(&a, &cfg, &T)) return 2;

    int rc = 2, B = a.batch;
    dt_gpt_cuda_spec spec = {B, T, 0.0f, 0.0f, copt};
    dt_gpt *host = NULL;
    dt_gpt_cuda *m = NULL;
    dt_dataset *ds = NULL;
    size_t BT = (size_t)B * (size_t)T;
    int *tok = (int *)malloc(sizeof(int) * 2 * BT);
    float *buf = NULL;
    dt_refdump_step *log = (dt_refdump_step *)calloc((size_t)a.steps, sizeof *log);
    dt_adamw_config ac = {a.beta1, a.beta2, a.eps, a.weight_decay, a.clip_grad};
    dt_lr_schedule sched = {a.lr, a.min_lr, a.warmup, a.decay};
    if (!tok || !log) {
        fprintf(stderr, "%s: out of memory\n", tool);
        goto done;
    }
    if (dt_gpt_create(&host, &cfg, B, T, a.seed) != DT_OK || dt_gpt_cuda_create(&m, host, &spec) != DT_OK ||
        dt_dataset_open(&ds, NULL, cfg.vocab_size, a.seed, 0.05f, B, T) != DT_OK) {
        fprintf(stderr, "%s: %s\n", tool, dt_errmsg());
        goto done;
    }
    if (!(buf = (float *)malloc(sizeof(float) * host->num_params))) {
        fprintf(stderr, "%s: out of memory for a %zu-float host slab\n", tool, host->num_params);
        goto done;
    }
    if (dt_refdump_write(&a, "params", 0, host->param_mem, host->num_params, NULL, 0)) goto done;
    for (int k = 1; k <= a.steps; k++) {
        int *in = tok, *tg = tok + BT;
        double loss = 0.0;
        dt_grad_stats gs;
        float lr = dt_lr_at(&sched, k);
        dt_gpt_cuda_zero_grad(m);
        dt_gpt_cuda_set_mode(m, 1, (uint32_t)(k - 1));
        if (dt_dataset_next_train(ds, in, tg) != DT_OK || dt_gpt_cuda_forward(m, in, tg, 1.0f) != DT_OK ||
            dt_gpt_cuda_backward(m) != DT_OK || dt_gpt_cuda_loss(m, &loss) != DT_OK ||
            dt_gpt_cuda_get_grads(m, buf) != DT_OK) {
            fprintf(stderr, "%s: step %d: %s\n", tool, k, dt_errmsg());
            goto done;
        }
        if (dt_refdump_write(&a, "tokens", k, in, BT, tg, BT) ||
            dt_refdump_write(&a, "grads", k, buf, host->num_params, NULL, 0))
            goto done;
        if (dt_gpt_cuda_step(m, &ac, lr, k, &gs) != DT_OK || dt_gpt_cuda_get_params(m, buf) != DT_OK) {
            fprintf(stderr, "%s: step %d: %s\n", tool, k, dt_errmsg());
            goto done;
        }
        if (dt_refdump_write(&a, "params", k, buf, host->num_params, NULL, 0)) goto done;
        log[k - 1] = (dt_refdump_step){lr, loss, gs.grad_norm, gs.param_norm, gs.num_zeros};
        fprintf(stderr, "step %d: loss %.9g grad_norm %.9g lr %.9g\n", k, loss, gs.grad_norm,
                (double)lr);
    }
    {
        dt_refdump_origin origin = {"cuda", "bf16", dt_gpt_cuda_describe(m)};
        if (dt_refdump_write_index(&a, host, &origin, log)) goto done;
    }
    fprintf(stderr, "%s: wrote %d steps of L%d C%d NH%d V%d T%d B%d (%zu params) to %s\n", tool,
            a.steps, cfg.num_layers, cfg.channels, cfg.num_heads, cfg.vocab_size, T, B,
            host->num_params, a.out);
    rc = 0;
done:
    dt_dataset_free(ds);
    dt_gpt_cuda_free(m);
    dt_gpt_free(host);
    free(tok);
    free(buf);
    free(log);
    return rc;
}
