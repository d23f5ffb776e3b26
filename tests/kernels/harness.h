/* Kernel bit-exact harness (DESIGN §4): replays an op N >= 3 times on fresh clones of the
 * same inputs and requires every output and gradient to be byte-identical.
 *
 * Pieces:
 *  - dt_kview: a tensor view (shape and element strides over one base buffer). Strides may
 *    be padded (row stride > row length), transposed, or 0 (a bias broadcast over rows is
 *    a (N,OC) view with strides (0,1) over a base of OC floats). The op reads through the
 *    view: its pointer is base + offset and its leading dimensions are the strides.
 *  - dt_kset: the tensors of one op call (inputs, outputs, in/out accumulators).
 *  - dt_kh_replay: clones the set (same base size, same strides and offset, 64-byte
 *    aligned like the original, so the op sees the identical layout, broadcast views stay
 *    broadcast), runs the op on each clone under the chosen mode/threads/contention, and
 *    compares every tensor's whole base buffer with replay 0 by memcmp (so +0.0 vs -0.0
 *    and NaN payloads count as differences, and a write into a view's gaps is caught).
 *  - Roles: a view is an input (default; also in/out accumulators, uploaded as they are),
 *    an output the op overwrites (DT_KH_OUT) or scratch (DT_KH_SCRATCH). Outputs and
 *    scratch are poisoned with 0xff bytes (a NaN in every float type, -1 in the integer
 *    ones) before every replay, so nothing left over from an earlier replay or from the
 *    setup can stand in for a value the op failed to write; replay 0's outputs are then
 *    checked for elements still holding the poison (unwritten). Scratch is workspace, not
 *    a result: it is not compared.
 *  - Backends: dt_kh_backend lists where an op runs. DT_KH_CPU runs the op on the host
 *    clone. A device backend (DT_KH_CUDA: tests/kernels/harness_cuda.cu) registers a
 *    dt_kh_device; the replay loop then gives each replay's clone (poisoned) fresh device
 *    buffers, uploads it, queues the backend's competing work, runs the op on a set whose
 *    bases are the device pointers (same offsets and strides), waits, downloads and
 *    compares on the host exactly as for the CPU. The loop itself is plain C and is
 *    tested in CI with a host-memory device (tests/kernels/test_harness_device.c).
 *
 * Sizes, and why (the tests choose them; listed here so every test uses the same rule):
 * races show only when many threads add into the *same* output at the same time, so
 *  - encoder backward: few distinct tokens (e.g. 3) over many positions (B*T >= 4096), so
 *    every dwte row receives thousands of racing atomic adds;
 *  - layernorm / bias backward (colsum): many rows (N >= 4096) and few columns, so every
 *    thread's partial lands on the same dweight/dbias entries;
 *  - attention backward: B*NH of 1 or 2, so the fast path splits each head over key blocks
 *    (T >= 256 gives >= 4 key blocks adding into the same dQ rows; the control uses
 *    T = 768: 12 blocks per head, and a small head size so the atomic adds dominate);
 *  - sums (sumsq/sum): >= 1M elements of mixed magnitude, so per-thread partials differ
 *    enough that their addition order changes the rounding;
 *  - GEMM: odd shapes (37x513x999) whose OpenBLAS split changes with the thread count.
 * Contention: spin threads (pthreads running a float loop) compete for the cores while
 * the op runs, and the op gets more OpenMP threads than cores (oversubscription), so the
 * OS preempts threads mid-reduction and the arrival order of partials changes. On a GPU
 * (dt_kh_opts.contention): large GEMMs queued on a side stream before each replay run
 * concurrently with the op and take SMs from it, so its blocks are scheduled in a
 * different order; GPU sizes are full model sizes (B*T = 16384 rows, K = 16384, 100M
 * elements), since many blocks must land on the same outputs at once. */
#ifndef DT_TESTS_KERNELS_HARNESS_H
#define DT_TESTS_KERNELS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_kh_backend {
    DT_KH_CPU = 0,
    DT_KH_CUDA, /* available once tests/kernels/harness_cuda.cu registered it */
    DT_KH_NUM_BACKENDS
} dt_kh_backend;

const char *dt_kh_backend_name(dt_kh_backend be);
/* 1 when this build and machine can run ops on `be`. */
int dt_kh_backend_available(dt_kh_backend be);

/* BF16: 2-byte bfloat16 (the GPU's activations); filled by rounding to nearest even. */
typedef enum dt_kh_dtype { DT_KH_F32, DT_KH_I32, DT_KH_F64, DT_KH_I64, DT_KH_BF16 } dt_kh_dtype;

/* What the op does with a view (see "Roles" above). */
typedef enum dt_kh_role { DT_KH_IN = 0, DT_KH_OUT, DT_KH_SCRATCH } dt_kh_role;

#define DT_KH_MAXDIM 4
#define DT_KH_MAXT 16

typedef struct dt_kview {
    const char *name;
    dt_kh_dtype dtype;
    int ndim;
    int64_t shape[DT_KH_MAXDIM];
    int64_t stride[DT_KH_MAXDIM]; /* in elements; 0 = broadcast along that dimension */
    size_t offset;                /* elements from base to element (0,..,0) */
    size_t base_numel;            /* elements in base */
    void *base;                   /* owned by the set (a device pointer inside a device op) */
    dt_kh_role role;              /* DT_KH_IN unless set with dt_kv_role */
} dt_kview;

typedef struct dt_kset {
    int n;
    dt_kview t[DT_KH_MAXT];
} dt_kset;

size_t dt_kh_dtype_size(dt_kh_dtype d);
/* Adds a tensor of the given shape. stride NULL: contiguous row-major. Otherwise strides
 * in elements (0 allowed); offset leaves room before element 0. The base is sized to the
 * largest element reached, zero-filled; elements no view position reaches (gaps) are
 * filled with a NaN sentinel so an op that reads them is caught by the accuracy check.
 * Returns the view (valid until the set is freed). Aborts the test on bad arguments. */
dt_kview *dt_kset_add(dt_kset *s, const char *name, dt_kh_dtype dtype, int ndim,
                      const int64_t *shape, const int64_t *stride, size_t offset);
void dt_kset_free(dt_kset *s);
/* Deep copy with the identical layout (base size, strides, offset, alignment). */
void dt_kset_clone(dt_kset *dst, const dt_kset *src);
/* Finds a tensor by name (NULL if absent). */
dt_kview *dt_kset_get(dt_kset *s, const char *name);
const dt_kview *dt_kset_cget(const dt_kset *s, const char *name);

/* Sets the view's role and returns it (for chaining after dt_kset_add). */
dt_kview *dt_kv_role(dt_kview *v, dt_kh_role role);

/* Pointer to element (0,..,0): what the op is given. */
static inline float *dt_kv_f32(const dt_kview *v) { return (float *)v->base + v->offset; }
static inline int *dt_kv_i32(const dt_kview *v) { return (int *)v->base + v->offset; }
static inline double *dt_kv_f64(const dt_kview *v) { return (double *)v->base + v->offset; }
static inline int64_t *dt_kv_i64(const dt_kview *v) { return (int64_t *)v->base + v->offset; }
static inline uint16_t *dt_kv_bf16(const dt_kview *v) { return (uint16_t *)v->base + v->offset; }
/* bfloat16 <-> float on the host, round to nearest even (as __float2bfloat16). */
uint16_t dt_kh_to_bf16(float f);
float dt_kh_from_bf16(uint16_t h);
/* Number of logical elements (product of the shape). */
size_t dt_kv_numel(const dt_kview *v);
/* Base index of logical element k (row-major over the shape). */
size_t dt_kv_index(const dt_kview *v, size_t k);
/* Logical element k as a double. */
double dt_kv_get(const dt_kview *v, size_t k);
/* The logical elements, row-major, as a fresh double array (caller frees). */
double *dt_kv_to_f64(const dt_kview *v);

/* Deterministic fills of every logical element (views sharing a base position get the
 * value of the last write). Uniform in [lo, hi). */
void dt_kv_fill(dt_kview *v, uint64_t seed, double lo, double hi);
/* Mixed magnitudes: uniform sign, magnitude 10^u with u uniform in [-e, e]. */
void dt_kv_fill_mixed(dt_kview *v, uint64_t seed, double e);
/* Integers uniform in [lo, hi). */
void dt_kv_fill_int(dt_kview *v, uint64_t seed, int lo, int hi);
/* Uniform double in [0,1) from (seed, i): a stateless hash, same on every platform. */
double dt_kh_uniform(uint64_t seed, uint64_t i);

/* The op under test. Called once per replay on that replay's clone; reads its inputs and
 * writes its outputs through the views. ctx is the case. On a device backend the views'
 * bases are device pointers (dt_kv_f32 etc. still give element (0,..,0)); the op only
 * enqueues work, the harness waits for it. */
typedef void (*dt_kh_fn)(dt_kset *s, const void *ctx, dt_kh_backend be);

/* RNG restore hook for ops that consume randomness (none of the current CPU ops do):
 * `live` points at the state the op reads (for detrain's counter-based RNG, a
 * {seed, step, counter} struct); the harness copies `snapshot` over it before every
 * replay, so each replay draws the same numbers. */
typedef struct dt_kh_rng {
    void *live;
    const void *snapshot;
    size_t bytes;
} dt_kh_rng;

typedef struct dt_kh_opts {
    int replays;       /* >= 3 (values below are raised to 3) */
    int det;           /* 1: deterministic mode on (det branches), 0: default mode */
    int threads;       /* OpenMP + OpenBLAS threads for the op; 0: leave as is.
                        * More than the cores = oversubscription. */
    int spin_threads;  /* competing busy pthreads while replays run (0: none) */
    const dt_kh_rng *rng; /* NULL: the op consumes no randomness */
    dt_kh_backend backend;
    int stop_at_first_diff; /* negative controls: stop once a replay differed */
    int quiet;         /* do not print mismatches (negative controls) */
    int contention;    /* device backends: units of competing work queued before every
                        * replay (dt_kh_device.contend; CUDA: side-stream GEMMs) */
} dt_kh_opts;

typedef struct dt_kh_result {
    int replays;            /* replays run */
    int differing_replays;  /* replays (after the first) not byte-identical to replay 0 */
    int unwritten;          /* DT_KH_OUT tensors of replay 0 with elements still poisoned */
} dt_kh_result;

/* Runs `fn` opts->replays times on fresh clones of `inputs` (outputs and scratch poisoned,
 * on opts->backend) and compares every tensor but scratch of every replay with replay 0
 * byte for byte. On a difference prints (unless quiet): op, config, mode, backend,
 * threads, contention, tensor, number of differing elements, the first differing logical
 * index with both values in hex, and max |diff|. Returns 1 when all replays were
 * identical and replay 0 wrote every element of its outputs. If `first` is not NULL it
 * receives replay 0's tensors (caller frees). */
int dt_kh_replay(const char *op, const char *config, dt_kh_fn fn, const void *ctx,
                 const dt_kset *inputs, const dt_kh_opts *opts, dt_kh_result *res,
                 dt_kset *first);

/* Runs `fn` once per thread count in `threads` (n counts) under opts->det, and compares
 * every tensor with the first count's result. Returns 1 when all are byte-identical.
 * *ndistinct (if not NULL) receives the number of distinct results seen. */
int dt_kh_thread_sweep(const char *op, const char *config, dt_kh_fn fn, const void *ctx,
                       const dt_kset *inputs, const dt_kh_opts *opts, const int *threads,
                       int n, int *ndistinct);

/* Compares two sets tensor by tensor (scratch excluded), bytes of the whole base. Returns
 * the number of tensors that differ; prints each (unless quiet) with `what` as the heading. */
int dt_kh_compare(const char *what, const dt_kset *a, const dt_kset *b, int quiet);

/* Number of tensors whose gaps (base elements no view position reaches) differ between
 * `before` and `after`: an op must never write outside its views. Prints each. */
int dt_kh_gaps_changed(const dt_kset *before, const dt_kset *after);

/* Mode and threads: switches deterministic mode on/off (test-only reset + apply, no
 * per-op overrides) and sets OpenMP + OpenBLAS thread counts (dynamic adjustment off). */
void dt_kh_set_mode(int det);
void dt_kh_set_threads(int n);

/* Competing busy threads: start n spinning pthreads; stop joins them. */
typedef struct dt_kh_spin dt_kh_spin;
dt_kh_spin *dt_kh_spin_start(int n);
void dt_kh_spin_stop(dt_kh_spin *s);

/* Online CPUs (for oversubscription: threads = 2 * cores). */
int dt_kh_cores(void);

/* Number of DT_KH_OUT tensors of `s` with a reached element still holding the poison
 * bytes (the op did not write it); prints each (unless quiet). */
int dt_kh_unwritten(const char *what, const dt_kset *s, int quiet);

/* A device backend: where an op's buffers live when it does not run on the host. The
 * harness stays plain C; the backend's code (tests/kernels/harness_cuda.cu for CUDA)
 * fills these hooks and registers them. Every hook aborts the test on a device error
 * (a broken device makes every later result meaningless). */
typedef struct dt_kh_device {
    void *(*alloc)(size_t bytes);                              /* a fresh device buffer */
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);  /* host -> device */
    void (*download)(void *dst, const void *src, size_t bytes);/* device -> host */
    void (*contend)(int units);   /* queue competing work that overlaps the next op */
    void (*finish)(void);         /* wait for the op and the competing work */
} dt_kh_device;
/* Makes `be` available with these hooks (dev must outlive its use; NULL unregisters). */
void dt_kh_register_device(dt_kh_backend be, const dt_kh_device *dev);

#ifdef __cplusplus
}
#endif

#endif
