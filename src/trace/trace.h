/* Fingerprint tracing: capture (DESIGN §6, issue 5).
 *
 * Each selected rank writes one file `<dir>/rank_%06d.trace`, created with O_EXCL (an
 * existing file is never overwritten), append-only, through a large in-memory buffer that
 * is flushed when full and at close. No collectives, no cross-rank ordering: ranks never
 * talk to each other about tracing. Events are aligned offline by
 * (step, micro-batch, scope, op, occurrence), see diff.h.
 *
 * Levels are cumulative: a level includes every level before it.
 *   metrics  < semantic (collectives, grad reduction, optimizer, recompute, stage
 *   boundaries) < module (each module's inputs, outputs, parameter grads) < op (every op
 *   the dispatcher runs) < kernel (op events also carry the kernel/algorithm/launch info).
 *
 * Hook usage, from the op dispatcher or a module (one host thread drives all hooks; the
 * trace state is per process = per rank):
 *
 *     dt_trace_op *h = NULL;
 *     if (dt_trace_on(DT_TRACE_OP)) {              // one load + compare when off
 *         dt_tensor_ref in[2] = {
 *             {.name = "x", .data = x, .dtype = DT_DT_F32, .ndim = 2, .shape = {B * T, C}},
 *             {.name = "w", .data = w, .dtype = DT_DT_F32, .ndim = 1, .shape = {C}}};
 *         h = dt_trace_begin(DT_TRACE_OP, DT_PHASE_FWD, "layernorm_fwd", "det", in, 2);
 *     }
 *     ... run the op (it may overwrite its inputs: their digests are already taken) ...
 *     if (h) {
 *         dt_tensor_ref out[1] = {
 *             {.name = "y", .data = y, .dtype = DT_DT_F32, .ndim = 2, .shape = {B * T, C}}};
 *         dt_trace_end(h, out, 1);                 // digests outputs, writes the event
 *     }
 *
 * (Designated initializers: -Wextra rejects positional ones that omit trailing fields.)
 * Pass parameters as inputs too (weights, optimizer state): an op whose weights differ
 * must show "inputs differ", or a changed weight would pass for an origin.
 *
 * Digests read the bytes on the host: the caller must pass buffers whose producer has
 * finished. Device tensors are digested on the GPU instead and passed as precomputed
 * digests (trace/trace_cuda.h). Reading a buffer early is a probe artefact, not
 * nondeterminism. */
#ifndef DT_TRACE_TRACE_H
#define DT_TRACE_TRACE_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

enum dt_trace_level {
    DT_TRACE_OFF = 0,
    DT_TRACE_METRICS = 1,
    DT_TRACE_SEMANTIC = 2,
    DT_TRACE_MODULE = 3,
    DT_TRACE_OP = 4,
    DT_TRACE_KERNEL = 5
};

enum dt_trace_phase { DT_PHASE_FWD = 0, DT_PHASE_BWD, DT_PHASE_OPT, DT_PHASE_COMM,
                      DT_PHASE_OTHER, DT_PHASE_COUNT };

/* Element types of traced tensors (the digest is over numel * size bytes). */
enum dt_trace_dtype { DT_DT_F32 = 0, DT_DT_BF16, DT_DT_F16, DT_DT_F64, DT_DT_I32,
                      DT_DT_I64, DT_DT_U16, DT_DT_U8, DT_DT_COUNT };

#define DT_TRACE_MAX_DIMS 4
/* Order-sensitive tensors with more rows than this get per-chunk digests of
 * ceil(rows / DT_TRACE_MAX_ROW_DIGESTS) consecutive rows each. */
#define DT_TRACE_MAX_ROW_DIGESTS 4096

/* One tensor as the caller sees it. Contiguous row-major bytes at `data`.
 * order_sensitive: also digest each of `rows` equal slices of the tensor (rows must
 * divide numel; rows = 0 means shape[0]), so trace-diff can name the rows that moved. */
typedef struct dt_tensor_ref {
    const char *name;
    const void *data;
    int dtype;                          /* enum dt_trace_dtype */
    int ndim;                           /* 0..DT_TRACE_MAX_DIMS (0: a scalar) */
    int64_t shape[DT_TRACE_MAX_DIMS];
    int order_sensitive;
    int64_t rows;
    /* Precomputed digests, for bytes the host must not read (a GPU buffer whose digest the
     * device computed, src/trace/digest_cuda.h): digests[0] is the whole-tensor digest and,
     * when order_sensitive, digests[1 + c] the digest of row chunk c as
     * dt_trace_row_chunks() cuts them. NULL: the trace hashes `data` with XXH64. */
    const uint64_t *digests;
} dt_tensor_ref;

/* The row chunks of an order-sensitive tensor: sets *rows and *per (rows per chunk) and
 * returns the number of chunks (0 when the tensor is not order-sensitive or empty, -1 when
 * its rows do not divide its elements). */
int64_t dt_trace_row_chunks(const dt_tensor_ref *t, int64_t *rows, int64_t *per);

/* ---- configuration (CLI flags) ------------------------------------------------------ */

/* A list of inclusive integer ranges, "10-12,20". Empty list (n == 0) selects everything. */
#define DT_RANGE_MAX 64
typedef struct dt_range_list {
    int n;
    int64_t lo[DT_RANGE_MAX], hi[DT_RANGE_MAX];
} dt_range_list;

/* Parses "A", "A-B" items separated by commas (A <= B, non-negative decimal integers, no
 * spaces, no empty items). `flag` names the flag in the error ("--trace-steps"). */
dt_status dt_range_list_parse(const char *s, const char *flag, dt_range_list *out);
/* 1 if x is in the list (always 1 for an empty list). */
int dt_range_list_has(const dt_range_list *l, int64_t x);
/* 1 when the list selects at least one x in [lo, hi] (an empty list selects all). */
int dt_range_list_meets(const dt_range_list *l, int64_t lo, int64_t hi);

/* "off" | "metrics" | "semantic" | "module" | "op" | "kernel". */
dt_status dt_trace_level_parse(const char *s, int *level);
const char *dt_trace_level_name(int level);
const char *dt_trace_phase_name(int phase);
const char *dt_trace_dtype_name(int dtype);
size_t dt_trace_dtype_size(int dtype); /* 0 for an unknown dtype */

typedef struct dt_trace_config {
    int level;                 /* --trace-level */
    const char *dir;           /* --trace-dir (created if missing) */
    const char *steps_spec;    /* --trace-steps text, or NULL for all steps */
    const char *ranks_spec;    /* --trace-ranks text, or NULL for all ranks */
    const char *digest;        /* how device tensors are digested: NULL or "xxh64" (the CPU:
                                  XXH64 of the bytes), DT_TRACE_DIGEST_TREE (the GPU: the
                                  chunk tree of digest_cuda.h). Recorded in the header;
                                  trace-diff compares only traces of the same form. */
} dt_trace_config;
#define DT_TRACE_DIGEST_FLAT "xxh64"
#define DT_TRACE_DIGEST_TREE "xxh64-tree-4KiB"

/* Validates a configuration without creating anything: level in range, both range
 * lists well formed, a directory given when the level is not off. Call it while parsing
 * flags, so a bad list stops the run before any work; dt_trace_open checks again. */
dt_status dt_trace_config_check(const dt_trace_config *cfg);

/* ---- session ------------------------------------------------------------------------ */

/* Starts tracing for this process as `rank`. With level off, or a rank outside
 * --trace-ranks, nothing is created and every hook stays off. Otherwise creates the
 * directory if needed and the rank file with O_EXCL: an existing file is refused
 * (DT_EIO naming it: choose a new --trace-dir or remove the old trace). Writes the file
 * header. Fails with DT_ESTATE if a session is already open. */
dt_status dt_trace_open(const dt_trace_config *cfg, int rank);
/* The refusal dt_trace_open would give for an existing rank file (and a bad config), checked
 * without creating anything: the trainers call it before they create logs or checkpoints,
 * so a run stopped by an old trace leaves no files behind. */
dt_status dt_trace_precheck(const dt_trace_config *cfg, int rank);
/* Flushes, writes the end record and closes. Returns the first error any hook hit (hooks
 * cannot return errors; they record the first one and stop writing). Safe to call when
 * no session is open (returns DT_OK). */
dt_status dt_trace_close(void);

/* Set by the trainer at the start of every micro-batch, and with micro = -1 before the
 * step-level work (gradient all-reduce, optimizer step). Resets the occurrence counters
 * and decides whether this step is traced. Nothing is captured before the first call. */
void dt_trace_set_step(int64_t step, int micro);

/* Level in force for the current step on this rank (DT_TRACE_OFF outside the window). */
extern int dt_trace_level_now_;
/* 1 if events of `level` are captured now. Inline and branch-cheap: tracing off costs one
 * load and compare per hook site. */
#ifdef DT_BENCH_NO_TRACE
/* Benchmark-only build (bench/trace_overhead.sh): every hook site compiles away, the
 * baseline against which "tracing off costs nothing" is measured. */
static inline int dt_trace_on(int level) { (void)level; return 0; }
#else
static inline int dt_trace_on(int level) { return level <= dt_trace_level_now_; }
#endif

/* Module path: push("h.3") then push("attn") gives scope "h.3.attn". Cheap no-ops when no
 * session is open; they must balance. */
void dt_trace_scope_push(const char *name);
void dt_trace_scope_pop(void);
/* Current scope string ("" at the top level). */
const char *dt_trace_scope(void);

/* ---- events ------------------------------------------------------------------------- */

typedef struct dt_trace_op dt_trace_op;

/* Opens an event: records step, micro-batch, scope, op, the occurrence counter within
 * (step, micro, scope, op) and the digests of the inputs, now (before the op may overwrite
 * them). Returns NULL when `level` is not captured now (then do not call end). Handles
 * nest (a module event around op events); each must be ended, innermost first. The event
 * is written at dt_trace_end, so a file lists events in completion order. `variant` is
 * "det" / "fast" or NULL. Tensor pointers are read only during the call. */
dt_trace_op *dt_trace_begin(int level, int phase, const char *op, const char *variant,
                            const dt_tensor_ref *ins, int nin);
/* Attaches kernel info (algorithm choice, launch shape); kept only at level kernel.
 * Repeated calls on one event append, separated by "; " (an op of several launches notes
 * each); at most 1023 bytes are kept. */
void dt_trace_kernel_info(dt_trace_op *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Digests the outputs and writes the event. h may be NULL (no-op). */
void dt_trace_end(dt_trace_op *h, const dt_tensor_ref *outs, int nout);
/* begin + end in one call, for ops that do not overwrite their inputs. */
void dt_trace_event(int level, int phase, const char *op, const char *variant,
                    const dt_tensor_ref *ins, int nin, const dt_tensor_ref *outs, int nout);

/* Path of the open rank file, or NULL. */
const char *dt_trace_path(void);

#endif
