/* The harness's device path and output roles, in CI (no GPU): a host-memory stand-in for
 * a device backend is registered as DT_KH_CUDA, so the replay loop that the CUDA backend
 * (tests/kernels/harness_cuda.cu) uses on the GPU runs here: fresh buffers per replay
 * (filled with stale garbage, as reused device memory would be), upload, competing work,
 * the op on the device pointers, finish, download, byte comparison. Checked:
 *  - a deterministic op gives the same bytes on the device path as on the CPU path, with
 *    every buffer uploaded, downloaded and released once per replay and the competing work
 *    queued once per replay;
 *  - the strict check still sees a one-bit difference on the device path;
 *  - outputs are poisoned before every replay: an op that leaves an output element
 *    unwritten, or accumulates into an output it should overwrite, is reported;
 *  - scratch is not compared (workspace may differ), but outputs are;
 *  - the host bfloat16 conversion rounds to nearest even, like __float2bfloat16. */
#include "kernels/harness.h"

#include "dt_test.h"

#include <stdint.h>

#define SH(...) ((const int64_t[]){__VA_ARGS__})

/* ---- a host-memory device ------------------------------------------------------------- */
static int n_alloc, n_release, n_up, n_down, n_finish, contend_units, contend_calls;
static void *mock_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    memset(p, 0xa5, bytes); /* stale contents, as reused device memory has */
    n_alloc++;
    return p;
}
static void mock_release(void *p) { free(p); n_release++; }
static void mock_up(void *dst, const void *src, size_t b) { memcpy(dst, src, b); n_up++; }
static void mock_down(void *dst, const void *src, size_t b) { memcpy(dst, src, b); n_down++; }
static void mock_contend(int units) { contend_units += units; contend_calls++; }
static void mock_finish(void) { n_finish++; }
static const dt_kh_device mock = {mock_alloc, mock_release, mock_up, mock_down, mock_contend,
                                  mock_finish};

static void reset_counts(void) {
    n_alloc = n_release = n_up = n_down = n_finish = contend_units = contend_calls = 0;
}

/* ---- ops ---------------------------------------------------------------------------- */
/* y (strided, out) = 2x + b (b broadcast over rows); h (bf16, out) = bf16(x); acc (in/out)
 * += row sums of x in order; w: scratch the op scribbles the replay count into. */
enum { R = 33, COLS = 7 };
static int calls;
static void good_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    int mode = ctx ? *(const int *)ctx : 0;
    dt_kview *x = dt_kset_get(s, "x"), *b = dt_kset_get(s, "b"), *y = dt_kset_get(s, "y");
    dt_kview *h = dt_kset_get(s, "h"), *acc = dt_kset_get(s, "acc"), *w = dt_kset_get(s, "w");
    for (int r = 0; r < R; r++) {
        float sum = 0.0f;
        for (int c = 0; c < COLS; c++) {
            float xv = dt_kv_f32(x)[r * x->stride[0] + c];
            float *yp = &dt_kv_f32(y)[r * y->stride[0] + c];
            if (mode == 3) *yp += 2.0f * xv;                     /* reads the poisoned output */
            else if (!(mode == 2 && r == 5 && c == 3))           /* mode 2 skips one element */
                *yp = 2.0f * xv + dt_kv_f32(b)[r * b->stride[0] + c];
            dt_kv_bf16(h)[r * COLS + c] = dt_kh_to_bf16(xv);
            sum += xv;
        }
        dt_kv_f32(acc)[r] += sum;
    }
    dt_kv_i32(w)[0] = calls++; /* differs every replay: must not count */
    if (mode == 1 && calls % 2 == 0) {                           /* one-bit flip, every other */
        uint32_t u;
        memcpy(&u, &dt_kv_f32(acc)[7], 4);
        u ^= 1u;
        memcpy(&dt_kv_f32(acc)[7], &u, 4);
    }
}

static void make_set(dt_kset *s) {
    dt_kv_fill(dt_kset_add(s, "x", DT_KH_F32, 2, SH(R, COLS), SH(COLS + 3, 1), 2), 1, -1, 1);
    dt_kv_fill(dt_kset_add(s, "b", DT_KH_F32, 2, SH(R, COLS), SH(0, 1), 0), 2, -1, 1);
    dt_kv_role(dt_kset_add(s, "y", DT_KH_F32, 2, SH(R, COLS), SH(COLS + 1, 1), 0), DT_KH_OUT);
    dt_kv_role(dt_kset_add(s, "h", DT_KH_BF16, 2, SH(R, COLS), NULL, 0), DT_KH_OUT);
    dt_kv_fill(dt_kset_add(s, "acc", DT_KH_F32, 1, SH(R), NULL, 0), 3, -1, 1);
    dt_kv_role(dt_kset_add(s, "w", DT_KH_I32, 1, SH(4), NULL, 0), DT_KH_SCRATCH);
}

static void test_device_path_matches_cpu(void) {
    CHECK(!dt_kh_backend_available(DT_KH_CUDA));
    dt_kh_register_device(DT_KH_CUDA, &mock);
    CHECK(dt_kh_backend_available(DT_KH_CUDA));
    CHECK(!strcmp(dt_kh_backend_name(DT_KH_CUDA), "cuda"));
    dt_kset in = {0}, cpu, dev;
    make_set(&in);
    dt_kh_opts o = {.replays = 4, .det = 1, .backend = DT_KH_CPU};
    dt_kh_result r;
    CHECK(dt_kh_replay("good", "cpu", good_run, NULL, &in, &o, &r, &cpu));
    CHECK(r.replays == 4 && r.differing_replays == 0 && r.unwritten == 0);
    reset_counts();
    o.backend = DT_KH_CUDA;
    o.contention = 3;
    CHECK(dt_kh_replay("good", "device", good_run, NULL, &in, &o, &r, &dev));
    CHECK(r.replays == 4 && r.differing_replays == 0 && r.unwritten == 0);
    CHECKF(n_alloc == 4 * in.n && n_release == n_alloc && n_up == n_alloc && n_down == n_alloc,
           "alloc %d release %d up %d down %d for %d tensors x 4 replays", n_alloc, n_release,
           n_up, n_down, in.n);
    CHECK(n_finish == 4 && contend_calls == 4 && contend_units == 12);
    CHECKF(dt_kh_compare("cpu vs device", &cpu, &dev, 0) == 0, "device path differs from cpu");
    /* the results are the op's, not the stale fill or the poison */
    const dt_kview *y = dt_kset_cget(&dev, "y"), *x = dt_kset_cget(&in, "x"), *b = dt_kset_cget(&in, "b");
    CHECK(dt_kv_get(y, 9) == 2.0f * (float)dt_kv_get(x, 9) + (float)dt_kv_get(b, 9));
    CHECK(dt_kv_get(dt_kset_cget(&dev, "h"), 9) == (double)dt_kh_from_bf16(dt_kh_to_bf16((float)dt_kv_get(x, 9))));
    CHECK(dt_kh_gaps_changed(&in, &dev) == 0);
    dt_kset_free(&cpu);
    dt_kset_free(&dev);
    dt_kset_free(&in);
}

static void test_device_path_sees_differences(void) {
    dt_kset in = {0};
    make_set(&in);
    int mode = 1;
    dt_kh_opts o = {.replays = 5, .det = 1, .backend = DT_KH_CUDA, .quiet = 1};
    dt_kh_result r;
    calls = 0;
    CHECK(!dt_kh_replay("flip", "device", good_run, &mode, &in, &o, &r, NULL));
    CHECKF(r.differing_replays == 2, "%d differing replays, want 2", r.differing_replays);
    o.stop_at_first_diff = 1;
    calls = 0;
    CHECK(!dt_kh_replay("flip", "device, stop", good_run, &mode, &in, &o, &r, NULL));
    CHECK(r.replays == 2 && r.differing_replays == 1);
    dt_kset_free(&in);
}

static void test_poison(void) {
    for (int be = 0; be < 2; be++)
        for (int mode = 2; mode <= 3; mode++) {
            dt_kset in = {0};
            make_set(&in);
            dt_kh_opts o = {.replays = 3, .det = 1, .backend = be ? DT_KH_CUDA : DT_KH_CPU,
                            .quiet = 1};
            dt_kh_result r;
            CHECKF(!dt_kh_replay("poison", "unwritten", good_run, &mode, &in, &o, &r, NULL),
                   "backend %d mode %d: replay passed", be, mode);
            CHECKF(r.unwritten == 1 && r.differing_replays == 0,
                   "backend %d mode %d: unwritten %d differing %d", be, mode, r.unwritten,
                   r.differing_replays);
            dt_kset_free(&in);
        }
    dt_kh_register_device(DT_KH_CUDA, NULL);
    CHECK(!dt_kh_backend_available(DT_KH_CUDA));
}

static void test_bf16(void) {
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* tie, even below */
        {0x3f818000u, 0x3f82}, /* tie, even above */
        {0x3f808001u, 0x3f81}, /* above the tie */
        {0xbf7fffffu, 0xbf80}, /* rounds up into the next binade */
        {0x7f7fffffu, 0x7f80}, /* largest float: overflows to inf */
        {0x7f800000u, 0x7f80}, /* inf */
        {0x80000000u, 0x8000}, /* -0 */
        {0x00000001u, 0x0000}, /* smallest subnormal rounds to 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f;
        memcpy(&f, &cases[i].f, 4);
        CHECKF(dt_kh_to_bf16(f) == cases[i].h, "bf16(0x%08x) = 0x%04x, want 0x%04x",
               (unsigned)cases[i].f, (unsigned)dt_kh_to_bf16(f), (unsigned)cases[i].h);
    }
    uint16_t nan = dt_kh_to_bf16(NAN);
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
    CHECK(dt_kh_from_bf16(0x3fc0) == 1.5f && dt_kh_from_bf16(0xc000) == -2.0f);
    CHECK(dt_kh_dtype_size(DT_KH_BF16) == 2);
}

int main(void) {
    RUN(test_device_path_matches_cpu);
    RUN(test_device_path_sees_differences);
    RUN(test_poison);
    RUN(test_bf16);
    return dt_test_report();
}
