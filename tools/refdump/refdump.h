/* The reference-dump writer shared by tools/dump_reference.c (the CPU model) and
 * tests/gpu/dump_reference_gpu.cu (the bf16 GPU model): their common flags, the binary
 * files and index.json of the format tools/torch_reference.py replays. The format is
 * described in refdump.c's header and in docs/torch-reference.md. Each tool runs its own
 * step loop and calls these to parse, size and write. Not part of libdetrain: the
 * Makefile links refdump.o into those two binaries only. */
#ifndef DT_TOOLS_REFDUMP_H
#define DT_TOOLS_REFDUMP_H

#include "model/gpt.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The flags both dump tools take (defaults in dt_refdump_parse_args). */
typedef struct dt_refdump_args {
    const char *tool;   /* program name for messages */
    const char *model, *out;
    int num_layers, hidden_size, num_heads, vocab_size, max_pos, seq_len, batch, steps;
    int64_t warmup, decay;
    uint64_t seed;
    float lr, min_lr, weight_decay, clip_grad, beta1, beta2, eps;
} dt_refdump_args;

/* What one step reported (index.json "step_log"). */
typedef struct dt_refdump_step {
    float lr;
    double loss, grad_norm, param_norm;
    int64_t num_zeros;
} dt_refdump_step;

/* Where the dumped numbers were computed (index.json "device", "precision", "device_info"). */
typedef struct dt_refdump_origin {
    const char *device;       /* "cpu" or "cuda" */
    const char *precision;    /* "fp32" (all fp32) or "bf16" (bf16 activations and matmul
                                 inputs, fp32 master weights, gradients and optimizer) */
    const char *device_info;  /* a JSON object text describing the device, or NULL */
} dt_refdump_origin;

/* Parses argv into *a. `what` completes the --help text's "Writes ... of <what>".
 * 0: parsed; 1: --help was printed (exit 0); -1: bad flags, message printed (exit 2). */
int dt_refdump_parse_args(int argc, char **argv, const char *tool, const char *what,
                          dt_refdump_args *a);

/* The model config and sequence length the flags describe (preset, then overrides), and
 * creates the output directory. 0 on success; -1 with a message printed. */
int dt_refdump_prepare(const dt_refdump_args *a, dt_gpt_config *cfg, int *T);

/* Writes DIR/KIND_K.bin: na then nb 32-bit words (b may be NULL), little-endian whatever
 * the host order. 0 on success; -1 with a message naming the file. */
int dt_refdump_write(const dt_refdump_args *a, const char *kind, int k, const void *words_a,
                     size_t na, const void *words_b, size_t nb);

/* Writes DIR/index.json: config, optimizer settings, origin, the parameter table of m (its
 * config, B, T and tensor layout; the values are not read) and log[0..a->steps).
 * 0 on success; -1 with a message. */
int dt_refdump_write_index(const dt_refdump_args *a, const dt_gpt *m, const dt_refdump_origin *o,
                           const dt_refdump_step *log);

#ifdef __cplusplus
}
#endif

#endif
