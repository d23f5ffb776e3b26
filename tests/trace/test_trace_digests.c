/* Precomputed digests (dt_tensor_ref.digests, src/trace/trace.h): a tensor whose bytes the
 * host must not read (a GPU buffer digested on the device) is recorded with the digests
 * the caller computed, whole-tensor and per row chunk as dt_trace_row_chunks cuts them;
 * the recorded values are exactly those, `data` is never read, and the chunking helper
 * agrees with what the trace writes for a host tensor. */
#include "core/digest.h"
#include "trace/reader.h"
#include "trace/trace.h"
#include "dt_test.h"

#include <unistd.h>

static char tmpdir[256];

static void test_precomputed(void) {
    float x[6 * 4];
    for (int i = 0; i < 24; i++) x[i] = (float)i * 0.5f;
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/pre", tmpdir);
    dt_trace_config cfg = {DT_TRACE_OP, dir, NULL, NULL, NULL};
    CHECK_OK(dt_trace_open(&cfg, 0));
    dt_trace_set_step(1, 0);
    /* host tensor, order-sensitive: the trace hashes it */
    dt_tensor_ref host = {.name = "x", .data = x, .dtype = DT_DT_F32, .ndim = 2, .shape = {6, 4},
                          .order_sensitive = 1};
    int64_t rows, per, nchunks = dt_trace_row_chunks(&host, &rows, &per);
    CHECK(nchunks == 6 && rows == 6 && per == 1);
    /* the same tensor described by precomputed digests, with no data pointer */
    uint64_t d[7];
    d[0] = dt_xxh64(x, sizeof x, 0);
    for (int c = 0; c < 6; c++) d[1 + c] = dt_xxh64(x + 4 * c, 4 * sizeof(float), 0);
    dt_tensor_ref dev = {.name = "x", .data = NULL, .dtype = DT_DT_F32, .ndim = 2, .shape = {6, 4},
                         .order_sensitive = 1, .digests = d};
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "host_op", NULL, &host, 1, NULL, 0);
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "device_op", NULL, &dev, 1, NULL, 0);
    /* a deliberately different precomputed digest is recorded as given */
    uint64_t wrong[7];
    memcpy(wrong, d, sizeof d);
    wrong[0] ^= 1;
    wrong[3] ^= 1;
    dev.digests = wrong;
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "device_op2", NULL, &dev, 1, NULL, 0);
    CHECK_OK(dt_trace_close());

    snprintf(path, sizeof path, "%s/rank_000000.trace", dir);
    dt_trace_file f;
    CHECK_OK(dt_trace_file_load(path, 0, &f));
    CHECK(f.nevents == 3);
    if (f.nevents == 3) {
        const dt_trace_rec_tensor *a = dt_trace_in(&f, &f.events[0], 0);
        const dt_trace_rec_tensor *b = dt_trace_in(&f, &f.events[1], 0);
        const dt_trace_rec_tensor *c = dt_trace_in(&f, &f.events[2], 0);
        CHECK(a->digest == d[0] && b->digest == d[0] && c->digest == wrong[0]);
        CHECK(a->nchunks == 6 && b->nchunks == 6 && c->nchunks == 6);
        for (uint32_t i = 0; i < 6 && a->nchunks == 6 && b->nchunks == 6; i++) {
            CHECK(dt_trace_chunk_digest(a, i) == d[1 + i]);
            CHECK(dt_trace_chunk_digest(b, i) == d[1 + i]);
            CHECK(dt_trace_chunk_digest(c, i) == wrong[1 + i]);
        }
    }
    dt_trace_file_free(&f);
    /* a tensor with neither data nor digests is an error, not a crash */
    snprintf(dir, sizeof dir, "%s/bad", tmpdir);
    dt_trace_config cfg2 = {DT_TRACE_OP, dir, NULL, NULL, NULL};
    CHECK_OK(dt_trace_open(&cfg2, 0));
    dt_trace_set_step(1, 0);
    dt_tensor_ref none = {.name = "y", .dtype = DT_DT_F32, .ndim = 1, .shape = {3}};
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "op", NULL, &none, 1, NULL, 0);
    CHECK(dt_trace_close() == DT_EINVAL);
}

int main(void) {
    dt_test_scratch(tmpdir, sizeof tmpdir, "trace_digests");
    RUN(test_precomputed);
    dt_test_scratch_remove(tmpdir);
    return dt_test_report();
}
