/* Kernel bit-exact harness: tensor views, clones, replays, byte comparison, contention
 * (see harness.h). Support code: linked into every test binary, no main(). */
#include "harness.h"

#include "core/determinism.h"
#include "ops/op.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GAP_BITS 0x7fc0deadu /* quiet NaN with a recognisable payload */
#define GAP_BITS16 0x7fdeu   /* the same for bfloat16 */
#define POISON 0xff          /* poison byte: a NaN in every float type, -1 in the ints */

static void die(const char *msg) {
    fprintf(stderr, "harness: %s\n", msg);
    abort();
}

/* Registered device backends (NULL: not available in this binary). */
static const dt_kh_device *g_devices[DT_KH_NUM_BACKENDS];

const char *dt_kh_backend_name(dt_kh_backend be) {
    return be == DT_KH_CPU ? "cpu" : be == DT_KH_CUDA ? "cuda" : "?";
}
int dt_kh_backend_available(dt_kh_backend be) {
    return be == DT_KH_CPU || (be > DT_KH_CPU && be < DT_KH_NUM_BACKENDS && g_devices[be]);
}
void dt_kh_register_device(dt_kh_backend be, const dt_kh_device *dev) {
    if (be <= DT_KH_CPU || be >= DT_KH_NUM_BACKENDS) die("only device backends register hooks");
    g_devices[be] = dev;
}

size_t dt_kh_dtype_size(dt_kh_dtype d) {
    return (d == DT_KH_F64 || d == DT_KH_I64) ? 8 : d == DT_KH_BF16 ? 2 : 4;
}

uint16_t dt_kh_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}
float dt_kh_from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

dt_kview *dt_kv_role(dt_kview *v, dt_kh_role role) {
    v->role = role;
    return v;
}

size_t dt_kv_numel(const dt_kview *v) {
    size_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= (size_t)v->shape[d];
    return n;
}

size_t dt_kv_index(const dt_kview *v, size_t k) {
    size_t idx = v->offset;
    for (int d = v->ndim - 1; d >= 0; d--) {
        size_t i = k % (size_t)v->shape[d];
        k /= (size_t)v->shape[d];
        idx += i * (size_t)v->stride[d];
    }
    return idx;
}

double dt_kv_get(const dt_kview *v, size_t k) {
    size_t i = dt_kv_index(v, k);
    switch (v->dtype) {
    case DT_KH_F32: return ((const float *)v->base)[i];
    case DT_KH_I32: return ((const int *)v->base)[i];
    case DT_KH_F64: return ((const double *)v->base)[i];
    case DT_KH_BF16: return dt_kh_from_bf16(((const uint16_t *)v->base)[i]);
    default: return (double)((const int64_t *)v->base)[i];
    }
}

static void kv_set(dt_kview *v, size_t k, double x) {
    size_t i = dt_kv_index(v, k);
    switch (v->dtype) {
    case DT_KH_F32: ((float *)v->base)[i] = (float)x; break;
    case DT_KH_I32: ((int *)v->base)[i] = (int)x; break;
    case DT_KH_F64: ((double *)v->base)[i] = x; break;
    case DT_KH_BF16: ((uint16_t *)v->base)[i] = dt_kh_to_bf16((float)x); break;
    default: ((int64_t *)v->base)[i] = (int64_t)x; break;
    }
}

double *dt_kv_to_f64(const dt_kview *v) {
    size_t n = dt_kv_numel(v);
    double *out = malloc(sizeof(double) * (n ? n : 1));
    if (!out) die("out of memory");
    for (size_t k = 0; k < n; k++) out[k] = dt_kv_get(v, k);
    return out;
}

static void *alloc64(size_t bytes) {
    /* Clones are 64-byte aligned like the original, so SIMD peeling and BLAS packing see
     * the same alignment in every replay. */
    size_t b = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, b ? b : 64);
    if (!p) die("out of memory");
    return p;
}

dt_kview *dt_kset_add(dt_kset *s, const char *name, dt_kh_dtype dtype, int ndim,
                      const int64_t *shape, const int64_t *stride, size_t offset) {
    if (s->n >= DT_KH_MAXT || ndim < 1 || ndim > DT_KH_MAXDIM) die("bad dt_kset_add");
    dt_kview *v = &s->t[s->n++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->dtype = dtype;
    v->ndim = ndim;
    v->offset = offset;
    int64_t run = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] < 1) die("shape entries must be >= 1");
        v->shape[d] = shape[d];
        v->stride[d] = stride ? stride[d] : run;
        if (v->stride[d] < 0) die("negative strides are not supported");
        run *= shape[d];
    }
    size_t last = offset;
    for (int d = 0; d < ndim; d++) last += (size_t)(v->shape[d] - 1) * (size_t)v->stride[d];
    v->base_numel = last + 1;
    size_t es = dt_kh_dtype_size(dtype);
    v->base = alloc64(v->base_numel * es);
    /* Gaps get the NaN sentinel; reached elements start at zero. */
    for (size_t i = 0; i < v->base_numel; i++) {
        if (es == 2) ((uint16_t *)v->base)[i] = GAP_BITS16;
        else if (es == 4) ((uint32_t *)v->base)[i] = GAP_BITS;
        else ((uint64_t *)v->base)[i] = ((uint64_t)GAP_BITS << 32) | GAP_BITS;
    }
    size_t n = dt_kv_numel(v);
    for (size_t k = 0; k < n; k++) memset((char *)v->base + dt_kv_index(v, k) * es, 0, es);
    return v;
}

void dt_kset_free(dt_kset *s) {
    for (int i = 0; i < s->n; i++) free(s->t[i].base);
    s->n = 0;
}

void dt_kset_clone(dt_kset *dst, const dt_kset *src) {
    *dst = *src;
    for (int i = 0; i < src->n; i++) {
        size_t bytes = src->t[i].base_numel * dt_kh_dtype_size(src->t[i].dtype);
        dst->t[i].base = alloc64(bytes);
        memcpy(dst->t[i].base, src->t[i].base, bytes);
    }
}

dt_kview *dt_kset_get(dt_kset *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

const dt_kview *dt_kset_cget(const dt_kset *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

/* SplitMix64 of (seed, i): a stateless, platform-independent hash. */
static uint64_t mix64(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double dt_kh_uniform(uint64_t seed, uint64_t i) {
    return (double)(mix64(seed, i) >> 11) * (1.0 / 9007199254740992.0);
}

void dt_kv_fill(dt_kview *v, uint64_t seed, double lo, double hi) {
    size_t n = dt_kv_numel(v);
    for (size_t k = 0; k < n; k++) kv_set(v, k, lo + (hi - lo) * dt_kh_uniform(seed, k));
}

void dt_kv_fill_mixed(dt_kview *v, uint64_t seed, double e) {
    size_t n = dt_kv_numel(v);
    for (size_t k = 0; k < n; k++) {
        double u = dt_kh_uniform(seed, 2 * k), s = dt_kh_uniform(seed, 2 * k + 1) < 0.5 ? -1 : 1;
        kv_set(v, k, s * pow(10.0, e * (2 * u - 1)));
    }
}

void dt_kv_fill_int(dt_kview *v, uint64_t seed, int lo, int hi) {
    size_t n = dt_kv_numel(v);
    for (size_t k = 0; k < n; k++) {
        int x = lo + (int)(mix64(seed, k) % (uint64_t)(hi - lo));
        kv_set(v, k, x);
    }
}

/* ---- mode, threads, contention ------------------------------------------------------ */

void dt_kh_set_mode(int det) {
    dt_determinism_reset_for_tests();
    dt_op_clear_overrides();
    dt_det_request req = {det, NULL, 0};
    if (dt_determinism_apply(&req) != DT_OK) {
        fprintf(stderr, "harness: dt_determinism_apply(%d): %s\n", det, dt_errmsg());
        abort();
    }
    if (dt_det() != (det ? 1 : 0)) die("deterministic flag did not switch");
}

void dt_kh_set_threads(int n) {
    omp_set_dynamic(0);
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int dt_kh_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

struct dt_kh_spin {
    int n;
    atomic_int stop;
    pthread_t th[64];
};

static void *spin_main(void *arg) {
    dt_kh_spin *s = arg;
    volatile float x = 1.0f;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed))
        for (int i = 0; i < 1000; i++) x = x * 1.0000001f + 1e-7f;
    return NULL;
}

dt_kh_spin *dt_kh_spin_start(int n) {
    dt_kh_spin *s = calloc(1, sizeof *s);
    if (!s) die("out of memory");
    if (n > 64) n = 64;
    atomic_init(&s->stop, 0);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&s->th[i], NULL, spin_main, s) != 0) break;
        s->n++;
    }
    return s;
}

void dt_kh_spin_stop(dt_kh_spin *s) {
    if (!s) return;
    atomic_store(&s->stop, 1);
    for (int i = 0; i < s->n; i++) pthread_join(s->th[i], NULL);
    free(s);
}

/* 1 when the view covers its whole base in row-major order (no gaps, no broadcast):
 * element k is base element k, so whole-base loops replace index arithmetic (the GPU
 * cases have tensors of 10^8 elements). */
static int dense(const dt_kview *v) {
    int64_t run = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->stride[d] != run && v->shape[d] > 1) return 0;
        run *= v->shape[d];
    }
    return v->offset == 0 && v->base_numel == (size_t)run;
}

/* ---- comparison --------------------------------------------------------------------- */

static void fmt_elem(char *buf, size_t cap, const dt_kview *v, const void *base, size_t i) {
    switch (v->dtype) {
    case DT_KH_F32: {
        float f;
        uint32_t u;
        memcpy(&f, (const char *)base + 4 * i, 4);
        memcpy(&u, &f, 4);
        snprintf(buf, cap, "0x%08" PRIx32 " (%.9g)", u, (double)f);
        break;
    }
    case DT_KH_F64: {
        double f;
        uint64_t u;
        memcpy(&f, (const char *)base + 8 * i, 8);
        memcpy(&u, &f, 8);
        snprintf(buf, cap, "0x%016" PRIx64 " (%.17g)", u, f);
        break;
    }
    case DT_KH_I32: {
        int32_t x;
        memcpy(&x, (const char *)base + 4 * i, 4);
        snprintf(buf, cap, "0x%08" PRIx32 " (%d)", (uint32_t)x, x);
        break;
    }
    case DT_KH_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)base + 2 * i, 2);
        snprintf(buf, cap, "0x%04x (%.4g)", (unsigned)h, (double)dt_kh_from_bf16(h));
        break;
    }
    default: {
        int64_t x;
        memcpy(&x, (const char *)base + 8 * i, 8);
        snprintf(buf, cap, "0x%016" PRIx64 " (%" PRId64 ")", (uint64_t)x, x);
        break;
    }
    }
}

static double elem_value(const dt_kview *v, const void *base, size_t i) {
    switch (v->dtype) {
    case DT_KH_F32: { float f; memcpy(&f, (const char *)base + 4 * i, 4); return f; }
    case DT_KH_F64: { double f; memcpy(&f, (const char *)base + 8 * i, 8); return f; }
    case DT_KH_I32: { int32_t x; memcpy(&x, (const char *)base + 4 * i, 4); return x; }
    case DT_KH_BF16: { uint16_t h; memcpy(&h, (const char *)base + 2 * i, 2); return dt_kh_from_bf16(h); }
    default: { int64_t x; memcpy(&x, (const char *)base + 8 * i, 8); return (double)x; }
    }
}

/* Describes base index i as a logical index ("[r,c]") or "gap". */
static void fmt_index(char *buf, size_t cap, const dt_kview *v, size_t i) {
    size_t n = dt_kv_numel(v);
    for (size_t k = 0; k < n; k++) {
        if (dt_kv_index(v, k) != i) continue;
        int64_t idx[DT_KH_MAXDIM];
        size_t r = k;
        for (int d = v->ndim - 1; d >= 0; d--) {
            idx[d] = (int64_t)(r % (size_t)v->shape[d]);
            r /= (size_t)v->shape[d];
        }
        int len = snprintf(buf, cap, "element %zu [", k);
        for (int d = 0; d < v->ndim && len > 0 && (size_t)len < cap; d++)
            len += snprintf(buf + len, cap - (size_t)len, "%s%" PRId64, d ? "," : "", idx[d]);
        if (len > 0 && (size_t)len < cap) snprintf(buf + len, cap - (size_t)len, "]");
        return;
    }
    snprintf(buf, cap, "gap at base index %zu (no view position reaches it)", i);
}

int dt_kh_compare(const char *what, const dt_kset *a, const dt_kset *b, int quiet) {
    int bad = 0;
    for (int t = 0; t < a->n; t++) {
        const dt_kview *v = &a->t[t];
        size_t es = dt_kh_dtype_size(v->dtype), n = v->base_numel;
        if (v->role == DT_KH_SCRATCH) continue; /* workspace, not a result */
        if (!memcmp(a->t[t].base, b->t[t].base, n * es)) continue;
        bad++;
        if (quiet) continue;
        size_t ndiff = 0, first = 0;
        double maxd = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (!memcmp((const char *)a->t[t].base + i * es, (const char *)b->t[t].base + i * es, es))
                continue;
            if (!ndiff) first = i;
            ndiff++;
            double d = fabs(elem_value(v, a->t[t].base, i) - elem_value(v, b->t[t].base, i));
            if (d > maxd || isnan(d)) maxd = d;
        }
        char x[64], y[64], ix[128];
        fmt_elem(x, sizeof x, v, a->t[t].base, first);
        fmt_elem(y, sizeof y, v, b->t[t].base, first);
        fmt_index(ix, sizeof ix, v, first);
        fprintf(stderr, "  %s: tensor '%s': %zu of %zu elements differ; first at %s: %s vs %s; "
                "max |diff| %.9g\n", what, v->name, ndiff, n, ix, x, y, maxd);
    }
    return bad;
}

int dt_kh_gaps_changed(const dt_kset *before, const dt_kset *after) {
    int bad = 0;
    for (int t = 0; t < before->n; t++) {
        const dt_kview *v = &before->t[t];
        if (dense(v)) continue; /* no gaps */
        size_t es = dt_kh_dtype_size(v->dtype), n = dt_kv_numel(v);
        unsigned char *reached = calloc(v->base_numel, 1);
        if (!reached) die("out of memory");
        for (size_t k = 0; k < n; k++) reached[dt_kv_index(v, k)] = 1;
        for (size_t i = 0; i < v->base_numel; i++)
            if (!reached[i] && memcmp((const char *)v->base + i * es,
                                      (const char *)after->t[t].base + i * es, es)) {
                fprintf(stderr, "  tensor '%s': gap at base index %zu was written\n", v->name, i);
                bad++;
                break;
            }
        free(reached);
    }
    return bad;
}

/* ---- poison ------------------------------------------------------------------------- */

/* Outputs: every reached element gets the poison bytes (gaps keep their sentinel, so the
 * gap check still sees a write outside the view); scratch: the whole base. */
static void poison(dt_kset *s) {
    for (int t = 0; t < s->n; t++) {
        dt_kview *v = &s->t[t];
        size_t es = dt_kh_dtype_size(v->dtype);
        if (v->role == DT_KH_SCRATCH || (v->role == DT_KH_OUT && dense(v))) {
            memset(v->base, POISON, v->base_numel * es);
        } else if (v->role == DT_KH_OUT) {
            size_t n = dt_kv_numel(v);
            for (size_t k = 0; k < n; k++) memset((char *)v->base + dt_kv_index(v, k) * es, POISON, es);
        }
    }
}

static int is_poison(const unsigned char *p, size_t es) {
    for (size_t b = 0; b < es; b++)
        if (p[b] != POISON) return 0;
    return 1;
}

int dt_kh_unwritten(const char *what, const dt_kset *s, int quiet) {
    int bad = 0;
    for (int t = 0; t < s->n; t++) {
        const dt_kview *v = &s->t[t];
        if (v->role != DT_KH_OUT) continue;
        size_t es = dt_kh_dtype_size(v->dtype), n = dt_kv_numel(v), left = 0, first = 0;
        int flat = dense(v);
        for (size_t k = 0; k < n; k++)
            if (is_poison((const unsigned char *)v->base + (flat ? k : dt_kv_index(v, k)) * es, es)
                && !left++)
                first = k;
        if (!left) continue;
        bad++;
        if (!quiet)
            fprintf(stderr, "  %s: output '%s': %zu of %zu elements never written (first: "
                    "element %zu)\n", what, v->name, left, n, first);
    }
    return bad;
}

/* ---- replays ------------------------------------------------------------------------ */

/* One replay: a fresh clone of the inputs, outputs and scratch poisoned, the RNG state
 * restored, then the op, on the host or (device backends) on fresh device buffers holding
 * the clone, with the backend's competing work queued first; the result ends in `clone`. */
static void run_once(dt_kset *clone, const dt_kset *inputs, dt_kh_fn fn, const void *ctx,
                     const dt_kh_opts *o) {
    dt_kset_clone(clone, inputs);
    poison(clone);
    if (o->rng) memcpy(o->rng->live, o->rng->snapshot, o->rng->bytes);
    if (o->backend == DT_KH_CPU) {
        fn(clone, ctx, o->backend);
        return;
    }
    const dt_kh_device *dev = dt_kh_backend_available(o->backend) ? g_devices[o->backend] : NULL;
    if (!dev) die("replay on a backend that is not registered in this binary");
    dt_kset d = *clone;
    for (int t = 0; t < d.n; t++) {
        size_t bytes = d.t[t].base_numel * dt_kh_dtype_size(d.t[t].dtype);
        d.t[t].base = dev->alloc(bytes);
        dev->upload(d.t[t].base, clone->t[t].base, bytes);
    }
    if (o->contention > 0 && dev->contend) dev->contend(o->contention);
    fn(&d, ctx, o->backend);
    dev->finish();
    for (int t = 0; t < d.n; t++) {
        dev->download(clone->t[t].base, d.t[t].base,
                      d.t[t].base_numel * dt_kh_dtype_size(d.t[t].dtype));
        dev->release(d.t[t].base);
    }
}

int dt_kh_replay(const char *op, const char *config, dt_kh_fn fn, const void *ctx,
                 const dt_kset *inputs, const dt_kh_opts *opts, dt_kh_result *res,
                 dt_kset *first) {
    int n = opts->replays < 3 ? 3 : opts->replays;
    dt_kh_set_mode(opts->det);
    if (opts->threads > 0) dt_kh_set_threads(opts->threads);
    dt_kh_spin *spin = opts->spin_threads > 0 ? dt_kh_spin_start(opts->spin_threads) : NULL;
    dt_kset ref, cur;
    int differing = 0, ran = 1;
    run_once(&ref, inputs, fn, ctx, opts);
    char what[512];
    snprintf(what, sizeof what, "%s [%s] %s backend=%s: replay 0", op, config,
             opts->det ? "det" : "fast", dt_kh_backend_name(opts->backend));
    int unwritten = dt_kh_unwritten(what, &ref, opts->quiet);
    for (int r = 1; r < n; r++) {
        run_once(&cur, inputs, fn, ctx, opts);
        ran++;
        snprintf(what, sizeof what,
                 "%s [%s] %s backend=%s threads=%d spin=%d contention=%d: replay %d vs 0", op,
                 config, opts->det ? "det" : "fast", dt_kh_backend_name(opts->backend),
                 opts->threads > 0 ? opts->threads : omp_get_max_threads(), opts->spin_threads,
                 opts->contention, r);
        int bad = dt_kh_compare(what, &ref, &cur, opts->quiet);
        dt_kset_free(&cur);
        if (bad) {
            differing++;
            if (!opts->quiet) fprintf(stderr, "NOT BIT-EXACT: %s\n", what);
            if (opts->stop_at_first_diff) break;
        }
    }
    dt_kh_spin_stop(spin);
    if (first) *first = ref;
    else dt_kset_free(&ref);
    if (res) {
        res->replays = ran;
        res->differing_replays = differing;
        res->unwritten = unwritten;
    }
    return differing == 0 && unwritten == 0;
}

int dt_kh_thread_sweep(const char *op, const char *config, dt_kh_fn fn, const void *ctx,
                       const dt_kset *inputs, const dt_kh_opts *opts, const int *threads,
                       int n, int *ndistinct) {
    dt_kh_set_mode(opts->det);
    dt_kh_spin *spin = opts->spin_threads > 0 ? dt_kh_spin_start(opts->spin_threads) : NULL;
    dt_kset distinct[16];
    int nd = 0, same = 1;
    for (int i = 0; i < n; i++) {
        dt_kset cur;
        dt_kh_set_threads(threads[i]);
        run_once(&cur, inputs, fn, ctx, opts);
        char what[512];
        snprintf(what, sizeof what, "%s [%s] %s backend=%s: %d threads vs %d threads", op, config,
                 opts->det ? "det" : "fast", dt_kh_backend_name(opts->backend), threads[i],
                 threads[0]);
        if (nd > 0 && dt_kh_compare(what, &distinct[0], &cur, opts->quiet)) {
            same = 0;
            if (!opts->quiet) fprintf(stderr, "NOT THREAD-COUNT INDEPENDENT: %s\n", what);
        }
        int seen = 0;
        for (int j = 0; j < nd && !seen; j++) seen = !dt_kh_compare("", &distinct[j], &cur, 1);
        if (!seen && nd < 16) distinct[nd++] = cur;
        else dt_kset_free(&cur);
    }
    dt_kh_spin_stop(spin);
    for (int j = 0; j < nd; j++) dt_kset_free(&distinct[j]);
    if (ndistinct) *ndistinct = nd;
    return same;
}
