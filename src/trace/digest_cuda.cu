/* Device chunk-tree digests (see digest_cuda.h). */
#include "trace/digest_cuda.h"

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "core/digest.h"
#include "core/xxh64.h"
}

#include <string.h>

static uint64_t *g_scratch;   /* two halves: the digests of the current and next level */
static size_t g_scratch_n;    /* u64 words in each half */
static uint64_t *g_pinned;    /* one pinned word per digest of a batch */
static size_t g_pinned_n;

/* One thread per chunk: out[i] = XXH64 of bytes [i*CHUNK, min(n, (i+1)*CHUNK)). */
__global__ void digest_level(const unsigned char *in, size_t n, uint64_t *out, size_t nchunks) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nchunks) return;
    size_t off = i * DT_DIGEST_CHUNK, len = n - off < DT_DIGEST_CHUNK ? n - off : DT_DIGEST_CHUNK;
    out[i] = dt_xxh64_inline(in + off, len, 0);
}

static dt_status ensure_pinned(size_t words) {
    if (words <= g_pinned_n) return DT_OK;
    cudaFreeHost(g_pinned);
    g_pinned = NULL;
    g_pinned_n = 0;
    dt_status st = dt_cu_check(cudaMallocHost(&g_pinned, words * sizeof *g_pinned), "digest: pinned words");
    if (st == DT_OK) g_pinned_n = words;
    return st;
}

static dt_status ensure_scratch(size_t words) {
    if (words <= g_scratch_n) return DT_OK;
    cudaFree(g_scratch);
    g_scratch = NULL;
    g_scratch_n = 0;
    dt_status st = dt_cu_check(cudaMalloc(&g_scratch, 2 * words * sizeof *g_scratch), "digest: scratch");
    if (st == DT_OK) g_scratch_n = words;
    return st;
}

/* Queues the levels for n bytes at dev; the final value lands in *dst (pinned). The
 * scratch is reused by the next digest of a batch: the stream runs its levels only after
 * this digest's copy to dst. */
static dt_status enqueue(const void *dev, size_t n, cudaStream_t s, uint64_t *dst) {
    size_t nchunks = n <= DT_DIGEST_CHUNK ? 1 : (n + DT_DIGEST_CHUNK - 1) / DT_DIGEST_CHUNK;
    dt_status st = ensure_scratch(nchunks);
    if (st != DT_OK) return st;
    const unsigned char *in = (const unsigned char *)dev;
    uint64_t *half[2] = {g_scratch, g_scratch + g_scratch_n};
    int h = 0;
    for (;;) {
        /* a level with one chunk is the answer: XXH64 of at most CHUNK bytes */
        size_t k = n <= DT_DIGEST_CHUNK ? 1 : (n + DT_DIGEST_CHUNK - 1) / DT_DIGEST_CHUNK;
        digest_level<<<(unsigned)((k + 127) / 128), 128, 0, s>>>(in, n, half[h], k);
        if ((st = dt_cu_check(cudaGetLastError(), "digest: launch")) != DT_OK) return st;
        if (k == 1) break;
        in = (const unsigned char *)half[h];
        n = k * sizeof(uint64_t);
        h ^= 1;
    }
    return dt_cu_check(cudaMemcpyAsync(dst, half[h], sizeof *dst, cudaMemcpyDeviceToHost, s),
                       "digest: copy back");
}

dt_status dt_cu_digest_batch(const void *const *dev, const size_t *n, size_t count, cudaStream_t s,
                             uint64_t *out) {
    if (count == 0) return DT_OK;
    /* the scratch must hold the largest first level before anything is queued: growing it
     * later would free memory queued work still uses */
    size_t most = 1;
    for (size_t i = 0; i < count; i++) {
        size_t k = n[i] <= DT_DIGEST_CHUNK ? 1 : (n[i] + DT_DIGEST_CHUNK - 1) / DT_DIGEST_CHUNK;
        if (k > most) most = k;
    }
    dt_status st = ensure_scratch(most);
    if (st == DT_OK) st = ensure_pinned(count);
    for (size_t i = 0; i < count && st == DT_OK; i++) st = enqueue(dev[i], n[i], s, &g_pinned[i]);
    if (st == DT_OK) st = dt_cu_check(cudaStreamSynchronize(s), "digest: synchronise");
    if (st == DT_OK) memcpy(out, g_pinned, count * sizeof *out);
    return st;
}

dt_status dt_cu_digest_tree(const void *dev, size_t n, cudaStream_t s, uint64_t *out) {
    return dt_cu_digest_batch(&dev, &n, 1, s, out);
}

/* The pieces of a row-chunk digest: chunk c covers rows [c*per, min(rows, (c+1)*per)). */
void dt_cu_digest_row_pieces(const void *dev, size_t row_bytes, int64_t rows, int64_t per,
                             int64_t nchunks, const void **ptrs, size_t *sizes) {
    const unsigned char *b = (const unsigned char *)dev;
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t r0 = c * per, r1 = r0 + per < rows ? r0 + per : rows;
        ptrs[c] = b + (size_t)r0 * row_bytes;
        sizes[c] = (size_t)(r1 - r0) * row_bytes;
    }
}

void dt_cu_digest_release(void) {
    cudaFree(g_scratch);
    cudaFreeHost(g_pinned);
    g_scratch = NULL;
    g_pinned = NULL;
    g_scratch_n = 0;
    g_pinned_n = 0;
}
