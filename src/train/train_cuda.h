/* The training loop on one CUDA GPU (`detrain train --device cuda`, build/detrain-cuda) and
 * the GPU side of `detrain bench`. Same flags, data loader (host), schedule, metrics files
 * and console lines as the CPU loop (trainer.c); the model and optimizer run on the GPU.
 *
 * In a build without CUDA (plain `make`) both calls fail with DT_EUNSUPPORTED naming the
 * binary to use (train_nocuda.c): a CPU binary never trains on the CPU when the GPU was
 * asked for. */
#ifndef DT_TRAIN_TRAIN_CUDA_H
#define DT_TRAIN_TRAIN_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "train/trainer.h"

dt_status dt_train_run_cuda(const dt_train_config *cfg);

/* One bench measurement in the current process (its mode is the process's deterministic
 * mode, applied before). */
typedef struct dt_bench_opts {
    const char *model;      /* preset */
    int B, T;
    int warmup, steps;      /* untimed steps, then timed steps (median) */
    int profile_steps;      /* steps timed per named range afterwards */
    uint64_t seed;
} dt_bench_opts;

enum { DT_BENCH_MAX_RANGES = 32 };
typedef struct dt_bench_result {
    double step_ms_median, step_ms_min, step_ms_max;
    double tok_per_s, model_flops, mfu, peak_tflops;
    double peak_mem_gib, model_mem_gib;
    double loss_first, loss_last;
    int nranges;
    const char *range_name[DT_BENCH_MAX_RANGES];
    double range_ms[DT_BENCH_MAX_RANGES];   /* per step, median over profile_steps */
    char device[256];
} dt_bench_result;

/* Measures the bf16 matrix peak (an 8192^3 cuBLASLt product, median of 10), then trains
 * opts->warmup + opts->steps steps on random tokens and times each step with CUDA events,
 * then opts->profile_steps steps with the named ranges on. */
dt_status dt_bench_cuda(const dt_bench_opts *opts, dt_bench_result *out);

#ifdef __cplusplus
}
#endif

#endif
