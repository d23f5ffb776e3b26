/* Device chunk-tree digests (src/trace/digest_cuda.cu) against the host reference
 * (dt_digest_tree, src/core/digest.c): the same value for sizes around every boundary
 * (empty, one byte, one chunk, one chunk + 1, several levels, a 96 MiB buffer), the same
 * value twice (no order-dependent work), a flipped bit seen; row-chunk digests equal the
 * host's per-chunk values; the fault-injection flip (trace_cuda.cu) xors exactly the lowest
 * bit of every bf16 / fp32 / fp64 element and nothing else. Run on the GPU machine (tests/gpu/run_gpu_tests.sh). */
#include "trace/digest_cuda.h"
#include "trace/trace_cuda.h"

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "core/digest.h"
#include "dt_test.h"
}

#include <vector>

static void test_sizes(void) {
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 600 * 4096 + 77, (size_t)96 << 20};
    size_t maxn = sizes[sizeof sizes / sizeof sizes[0] - 1];
    std::vector<unsigned char> h(maxn);
    for (size_t i = 0; i < maxn; i++) h[i] = (unsigned char)(dt_rng_u32(5, 240, 0, 0, i) >> 24);
    unsigned char *d = NULL;
    CHECK(cudaMalloc(&d, maxn) == cudaSuccess);
    CHECK(cudaMemcpy(d, h.data(), maxn, cudaMemcpyHostToDevice) == cudaSuccess);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t g1 = 0, g2 = 0;
        CHECK_OK(dt_cu_digest_tree(d, sizes[i], 0, &g1));
        CHECK_OK(dt_cu_digest_tree(d, sizes[i], 0, &g2));
        uint64_t want = dt_digest_tree(h.data(), sizes[i]);
        CHECKF(g1 == want && g2 == want, "n=%zu: device %016llx %016llx host %016llx", sizes[i],
               (unsigned long long)g1, (unsigned long long)g2, (unsigned long long)want);
    }
    /* a flipped bit in the last byte of the big buffer */
    uint64_t before = 0, after = 0;
    CHECK_OK(dt_cu_digest_tree(d, maxn, 0, &before));
    unsigned char x = (unsigned char)(h[maxn - 1] ^ 1);
    cudaMemcpy(d + maxn - 1, &x, 1, cudaMemcpyHostToDevice);
    CHECK_OK(dt_cu_digest_tree(d, maxn, 0, &after));
    CHECK(before != after);
    /* row chunks: 1000 rows of 48 bytes, 3 rows a chunk */
    int64_t rows = 1000, per = 3, nchunks = (rows + per - 1) / per;
    std::vector<uint64_t> got(nchunks);
    std::vector<const void *> ptrs(nchunks);
    std::vector<size_t> lens(nchunks);
    dt_cu_digest_row_pieces(d, 48, rows, per, nchunks, ptrs.data(), lens.data());
    CHECK_OK(dt_cu_digest_batch(ptrs.data(), lens.data(), (size_t)nchunks, 0, got.data()));
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t r0 = c * per, r1 = r0 + per < rows ? r0 + per : rows;
        CHECK(got[c] == dt_digest_tree(h.data() + r0 * 48, (size_t)(r1 - r0) * 48));
    }
    cudaFree(d);
    dt_cu_digest_release();
}

/* A batch equals one digest at a time, in any mix of sizes (a small buffer first, then
 * ones that need more scratch, then small again), and row chunks agree with the batch. */
static void test_batch(void) {
    const size_t sizes[] = {5, (size_t)40 << 20, 4096, 0, (size_t)3 << 20, 4097, 1};
    const size_t nb = sizeof sizes / sizeof sizes[0], total = ((size_t)48 << 20);
    std::vector<unsigned char> h(total);
    for (size_t i = 0; i < total; i++) h[i] = (unsigned char)(dt_rng_u32(7, 240, 0, 0, i) >> 24);
    unsigned char *d = NULL;
    CHECK(cudaMalloc(&d, total) == cudaSuccess);
    CHECK(cudaMemcpy(d, h.data(), total, cudaMemcpyHostToDevice) == cudaSuccess);
    dt_cu_digest_release(); /* start from no scratch, so the batch has to size it */
    const void *ptrs[nb];
    size_t off = 0;
    for (size_t i = 0; i < nb; i++) { ptrs[i] = d + off; off += sizes[i]; }
    uint64_t got[nb];
    CHECK_OK(dt_cu_digest_batch(ptrs, sizes, nb, 0, got));
    off = 0;
    for (size_t i = 0; i < nb; i++) {
        CHECKF(got[i] == dt_digest_tree(h.data() + off, sizes[i]), "batch item %zu (%zu bytes)", i, sizes[i]);
        off += sizes[i];
    }
    cudaFree(d);
    dt_cu_digest_release();
}

/* dt_cu_flip_lsb for each element size: every element's lowest bit flipped, the byte after
 * the buffer untouched, a second flip restores the bytes. */
static void test_flip(void) {
    const size_t bytes = 3 * 1000 * 8;
    std::vector<unsigned char> h(bytes + 8), g(bytes + 8);
    for (size_t i = 0; i < h.size(); i++) h[i] = (unsigned char)(dt_rng_u32(6, 240, 0, 0, i) >> 24);
    unsigned char *d = NULL;
    CHECK(cudaMalloc(&d, h.size()) == cudaSuccess);
    const int sizes[] = {2, 4, 8};
    for (int k = 0; k < 3; k++) {
        int es = sizes[k];
        size_t n = bytes / (size_t)es;
        CHECK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_OK(dt_cu_flip_lsb(d, n, es, 0));
        CHECK(cudaMemcpy(g.data(), d, g.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        size_t bad = 0;
        for (size_t i = 0; i < h.size(); i++) {
            unsigned char want = i < bytes && i % (size_t)es == 0 ? (unsigned char)(h[i] ^ 1) : h[i];
            bad += g[i] != want;
        }
        CHECKF(bad == 0, "elem size %d: %zu bytes wrong", es, bad);
        CHECK_OK(dt_cu_flip_lsb(d, n, es, 0));
        CHECK(cudaMemcpy(g.data(), d, g.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(memcmp(g.data(), h.data(), h.size()) == 0);
    }
    CHECK(dt_cu_flip_lsb(d, 4, 3, 0) != DT_OK); /* an element size it cannot flip */
    cudaFree(d);
}

int main(void) {
    RUN(test_sizes);
    RUN(test_batch);
    RUN(test_flip);
    return dt_test_report();
}
