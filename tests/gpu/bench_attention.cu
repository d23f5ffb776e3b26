/* Attention benchmark and check on the GPT-2 124M shape (B 16, NH 12, T 1024, head size
 * 64, bf16), run on the GPU machine (built by `make cuda` into build/gpu-tests/):
 *  1. correctness: the flash kernels (attention_flash_cuda.cu) against the GEMM
 *     formulation (attention_cuda.cu) on the same random bf16 inputs, by
 *     ||flash - gemm|| / ||gemm||. Both are bf16 computations of the same function; the
 *     tolerances are those of tests/gpu/test_gpu_ops.cu against the CPU: forward output
 *     1e-2, each of dQ, dK, dV 3e-2 (two bf16 roundings of P and dS in each path). Outputs
 *     are poisoned (NaN) before each flash call, so an unwritten element fails;
 *     lse is poisoned too and must come back finite. The forward's 64-row tiling (taken
 *     when T % 128 != 0) must give the bits of its 128-row tiling: batch 0's first T - 64
 *     rows run alone, out and lse byte-identical to the full run's;
 *     The fused qkv bias gradient of the flash backward (the column sums of the dqkv it
 *     stores, added onto zeros) against dt_cu_colsum of that dqkv: per column within
 *     2e-5 of sum |x| (both fp32 sums of the same 16384 bf16 values in different fixed
 *     orders, chains of at most ~50 adds: 50 x 2^-24 = 3e-6);
 *  2. determinism: flash forward + det backward replayed 3 times, out, lse, dqkv and the
 *     bias sums byte-identical, the backward's scratch and bias partials poisoned with a
 *     different byte before each replay (so a read of a dS tile or partial the call did
 *     not write shows); the fast branch (attention_bwd and bias_bwd fast) runs the same
 *     kernels and the same ordered finish (no atomics left to race): its dqkv and bias
 *     sums must equal det's byte for byte;
 *  3. timing: CUDA events, median of 20 runs after 3 warm-ups, per phase; TFLOP/s counts
 *     the causal half of the products: forward 2 products (4 B NH T^2 D / 2 flops),
 *     backward 5 products (2.5x forward: S, dP, dV, dK, dQ; the det dQ pass reads dS
 *     from the scratch instead of recomputing it). The flash backward is timed with the
 *     fused bias sums (the model's call; its finish in line) and without (dbias NULL), next
 *     to the det dt_cu_colsum of dqkv that the fusion replaces in the model.
 * Exits non-zero on any failed check; prints a table last. */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"

#include <algorithm>
#include <vector>

static const int B = 16, T = 1024, C = 768, NH = 12, BT = B * T;

/* Random bf16 in [-a, a) from a fixed integer hash (no zeros-only data). */
static bf16 *rnd16(size_t n, float a, uint32_t seed) {
    std::vector<bf16> h(n);
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        h[i] = __float2bfloat16(((float)(x >> 8) / 16777216.0f * 2.0f - 1.0f) * a);
    }
    bf16 *d = dev<bf16>(n);
    gpu_ok(cudaMemcpy(d, h.data(), sizeof(bf16) * n, cudaMemcpyHostToDevice), "upload");
    return d;
}
/* ||a - r|| / ||r|| over part p (0 q, 1 k, 2 v) of (BT, parts*C) rows; NaN -> 1e30. */
static double relerr(const std::vector<float> &a, const std::vector<float> &r, int parts, int p) {
    double num = 0, den = 0;
    for (size_t row = 0; row < (size_t)BT; row++)
        for (int c = 0; c < C; c++) {
            size_t i = row * parts * C + (size_t)p * C + c;
            if (a[i] != a[i]) return 1e30;
            double d = (double)a[i] - r[i];
            num += d * d;
            den += (double)r[i] * r[i];
        }
    return sqrt(num / (den > 0 ? den : 1e-300));
}
struct ctx {
    dt_cu_blas *blas;
    bf16 *qkv, *dout, *out, *att, *scr, *dqkv;
    float *lse, *dbias, *bpart; /* the fused bias sums (3C) and their partials */
    float *cacc, *cpart;        /* dt_cu_colsum of dqkv: the sums and partials */
    void *bscr; /* dt_cu_flash_bwd_scratch */
    size_t nbscr;
    dt_dropout nodrop;
};
static void gemm_fwd(ctx *c) {
    dt_cu_attention_fwd(c->blas, c->out, c->att, c->qkv, c->scr, B, T, C, NH, &c->nodrop, 0, 0);
}
static void gemm_bwd(ctx *c) {
    dt_cu_attention_bwd(c->blas, c->dqkv, c->dout, c->qkv, c->att, c->scr, B, T, C, NH, &c->nodrop, 0, 0);
}
static void flash_fwd(ctx *c) { dt_cu_flash_fwd(c->out, c->lse, c->qkv, B, T, C, NH, 0); }
static void flash_bwd(ctx *c) {
    dt_cu_flash_bwd(c->dqkv, c->dbias, c->bpart, c->bscr, c->dout, c->qkv, c->out, c->lse, B, T, C, NH, 0, 0);
}
static void flash_bwd_nobias(ctx *c) {
    dt_cu_flash_bwd(c->dqkv, NULL, NULL, c->bscr, c->dout, c->qkv, c->out, c->lse, B, T, C, NH, 0, 0);
}
static void qkv_colsum(ctx *c) { dt_cu_colsum(c->cacc, c->cpart, c->dqkv, BT, 3 * C, 0, 0); }

/* Median ms of fn (gpu_median_ms: 20 runs after 3 warm-ups). */
static float timeit(void (*fn)(ctx *), ctx *c) { return (float)gpu_median_ms([&] { fn(c); }); }

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "bench_attention: no CUDA device\n");
        return 1;
    }
    ctx c;
    memset(&c, 0, sizeof c);
    CHECK_OK(dt_cu_blas_create(&c.blas));
    CHECK(dt_cu_flash_supported(C, NH, T, NULL));
    c.qkv = rnd16((size_t)BT * 3 * C, 2.0f, 1);
    c.dout = rnd16((size_t)BT * C, 1.0f, 2);
    c.out = dev<bf16>((size_t)BT * C);
    c.att = dev<bf16>((size_t)B * NH * T * T);
    c.scr = dev<bf16>(dt_cu_attention_scratch(B, T, C, NH, 0));
    c.dqkv = dev<bf16>((size_t)BT * 3 * C);
    c.lse = dev<float>((size_t)B * NH * T);
    c.nbscr = dt_cu_flash_bwd_scratch(B, T, C, NH);
    c.bscr = dev<unsigned char>(c.nbscr);
    const size_t nbp = (size_t)dt_cu_flash_bias_parts(B, T) * 3 * C;
    c.dbias = dev<float>(3 * C);
    c.bpart = dev<float>(nbp);
    c.cacc = dev<float>(3 * C);
    c.cpart = dev<float>((size_t)dt_cu_colsum_parts(BT) * 3 * C);

    /* 1. reference: the GEMM formulation */
    dt_op_override("attention_bwd=det");
    gemm_fwd(&c);
    gemm_bwd(&c);
    std::vector<float> rout = down16(c.out, (size_t)BT * C), rdqkv = down16(c.dqkv, (size_t)BT * 3 * C);
    const char *pn[3] = {"dQ", "dK", "dV"};
    for (int br = 0; br < 2; br++) {
        dt_op_override(br ? "attention_bwd=fast" : "attention_bwd=det");
        dt_op_override(br ? "bias_bwd=fast" : "bias_bwd=det");
        gpu_ok(cudaMemset(c.out, 0xff, sizeof(bf16) * BT * C), "poison");
        gpu_ok(cudaMemset(c.dqkv, 0xff, sizeof(bf16) * BT * 3 * C), "poison");
        gpu_ok(cudaMemset(c.lse, 0xff, sizeof(float) * B * NH * T), "poison");
        flash_fwd(&c);
        gpu_ok(cudaGetLastError(), "flash fwd launch");
        std::vector<float> fout = down16(c.out, (size_t)BT * C);
        if (!br) {
            std::vector<float> l((size_t)B * NH * T);
            gpu_ok(cudaMemcpy(l.data(), c.lse, sizeof(float) * l.size(), cudaMemcpyDeviceToHost), "download");
            size_t bad = 0;
            for (float x : l) bad += !(x > -1e30f && x < 1e30f);
            CHECKF(bad == 0, "flash fwd: %zu lse values not written or not finite", bad);
        }
        gpu_ok(cudaMemset(c.dbias, 0, sizeof(float) * 3 * C), "zero dbias");
        gpu_ok(cudaMemset(c.bpart, 0xff, sizeof(float) * nbp), "poison");
        flash_bwd(&c);
        gpu_ok(cudaGetLastError(), "flash bwd launch");
        std::vector<float> fd = down16(c.dqkv, (size_t)BT * 3 * C);
        {   /* the fused bias sums against dt_cu_colsum of the same dqkv */
            gpu_ok(cudaMemset(c.cacc, 0, sizeof(float) * 3 * C), "zero colsum");
            qkv_colsum(&c);
            std::vector<float> fb = down32(c.dbias, 3 * C), cb = down32(c.cacc, 3 * C);
            double worst = 0;
            for (int col = 0; col < 3 * C; col++) {
                double sa = 0;
                for (size_t row = 0; row < (size_t)BT; row++) sa += fabs((double)fd[row * 3 * C + col]);
                double r = fabs((double)fb[col] - cb[col]) / (sa > 0 ? sa : 1e-300);
                if (!(r <= worst)) worst = r == r ? r : 1e30;
            }
            CHECKF(worst <= 2e-5, "flash bwd %s fused bias vs dt_cu_colsum: worst %.3g of sum |x| (tol 2e-5)",
                   br ? "fast" : "det", worst);
            printf("check flash bwd %-4s fused bias vs colsum  worst %.3g of sum |x| (tol 2e-5)\n", br ? "fast" : "det", worst);
        }
        if (!br) {
            double e = relerr(fout, rout, 1, 0);
            CHECKF(e < 1e-2, "flash fwd vs gemm: rel err %.3g", e);
            printf("check flash fwd vs gemm            rel err %.3g (tol 1e-2)\n", e);
        }
        for (int p = 0; p < 3; p++) {
            double e = relerr(fd, rdqkv, 3, p);
            CHECKF(e < 3e-2, "flash bwd %s %s vs gemm: rel err %.3g", br ? "fast" : "det", pn[p], e);
            printf("check flash bwd %-4s %s vs gemm      rel err %.3g (tol 3e-2)\n", br ? "fast" : "det", pn[p], e);
        }
    }

    /* 1b. T % 128 != 0 takes the 64-row tiling: its bits must be the 128-row tiling's.
     * Batch 0's first T2 rows as a problem of their own (B 1, T2) against the full run. */
    {
        const int T2 = T - 64;
        bf16 *o2 = dev<bf16>((size_t)T2 * C);
        float *l2 = dev<float>((size_t)NH * T2);
        flash_fwd(&c);
        dt_cu_flash_fwd(o2, l2, c.qkv, 1, T2, C, NH, 0);
        gpu_ok(cudaGetLastError(), "flash fwd T2 launch");
        int same_o = bytes_of(o2, sizeof(bf16) * T2 * C) == bytes_of(c.out, sizeof(bf16) * T2 * C), same_l = 1;
        for (int h = 0; h < NH; h++)
            same_l &= bytes_of(l2 + (size_t)h * T2, sizeof(float) * T2) == bytes_of(c.lse + (size_t)h * T, sizeof(float) * T2);
        CHECKF(same_o && same_l, "flash fwd: T=%d (64-row blocks) differs from T=%d (128-row blocks) on rows 0..%d: out %s, lse %s",
               T2, T, T2 - 1, same_o ? "same" : "differs", same_l ? "same" : "differs");
        printf("check flash fwd 64-row vs 128-row tiling (T %d vs %d): %s\n", T2, T, same_o && same_l ? "byte-identical" : "DIFFER");
        cudaFree(o2);
        cudaFree(l2);
    }

    /* 2. replays */
    int same = 1;
    std::vector<unsigned char> first;
    dt_op_override("attention_bwd=det");
    dt_op_override("bias_bwd=det");
    const size_t nfb = sizeof(bf16) * BT * 3 * C + sizeof(float) * 3 * C; /* dqkv, then the bias sums */
    for (int r = 0; r < 3; r++) {
        gpu_ok(cudaMemset(c.bscr, (int)(0x5a * r), c.nbscr), "poison scratch");
        gpu_ok(cudaMemset(c.bpart, (int)(0x5a * r), sizeof(float) * nbp), "poison bias partials");
        gpu_ok(cudaMemset(c.dbias, 0, sizeof(float) * 3 * C), "zero dbias");
        flash_fwd(&c);
        flash_bwd(&c);
        std::vector<unsigned char> cur = bytes_of(c.out, sizeof(bf16) * BT * C), l = bytes_of(c.lse, sizeof(float) * B * NH * T),
                                   d = bytes_of(c.dqkv, sizeof(bf16) * BT * 3 * C), db = bytes_of(c.dbias, sizeof(float) * 3 * C);
        cur.insert(cur.end(), l.begin(), l.end());
        cur.insert(cur.end(), d.begin(), d.end());
        cur.insert(cur.end(), db.begin(), db.end());
        if (!r) first = cur;
        else if (cur != first) same = 0;
    }
    CHECKF(same, "flash det: replays differ");
    printf("replay flash fwd + bwd det x3 (out, lse, dqkv, bias sums): %s\n", same ? "byte-identical" : "DIFFER");
    dt_op_override("attention_bwd=fast");
    dt_op_override("bias_bwd=fast");
    gpu_ok(cudaMemset(c.bscr, 0xff, c.nbscr), "poison scratch");
    gpu_ok(cudaMemset(c.bpart, 0xff, sizeof(float) * nbp), "poison bias partials");
    gpu_ok(cudaMemset(c.dbias, 0, sizeof(float) * 3 * C), "zero dbias");
    flash_bwd(&c);
    std::vector<unsigned char> fastb = bytes_of(c.dqkv, sizeof(bf16) * BT * 3 * C), fastd = bytes_of(c.dbias, sizeof(float) * 3 * C);
    fastb.insert(fastb.end(), fastd.begin(), fastd.end());
    same = fastb.size() == nfb && !memcmp(fastb.data(), first.data() + first.size() - nfb, nfb);
    CHECKF(same, "flash bwd fast: dqkv or the bias sums differ from det's (the branches run the same kernels)");
    printf("flash bwd fast vs det (dqkv, bias sums): %s\n", same ? "byte-identical" : "DIFFER");

    /* 3. timing */
    double fl = 4.0 * B * NH * (double)T * T * 64 / 2;
    struct row { const char *name; void (*fn)(ctx *); const char *var; double flops; } rows[] = {
        {"gemm fwd", gemm_fwd, "attention_bwd=det", fl},
        {"gemm bwd", gemm_bwd, "attention_bwd=det", 2.5 * fl},
        {"flash fwd", flash_fwd, "attention_bwd=det", fl},
        {"flash bwd det", flash_bwd, "attention_bwd=det", 2.5 * fl},
        {"flash bwd fast", flash_bwd, "attention_bwd=fast", 2.5 * fl},
        {"flash bwd det, no bias sums", flash_bwd_nobias, "attention_bwd=det", 2.5 * fl},
        {"qkv bias colsum det (what the fusion replaces)", qkv_colsum, "bias_bwd=det", 0},
    };
    const int nrows = (int)(sizeof rows / sizeof rows[0]);
    float ms[sizeof rows / sizeof rows[0]];
    gemm_fwd(&c); /* the GEMM backward reads att */
    for (int i = 0; i < nrows; i++) {
        dt_op_override(rows[i].var);
        dt_op_override(strstr(rows[i].var, "fast") ? "bias_bwd=fast" : "bias_bwd=det");
        if (i == 2) flash_fwd(&c);
        ms[i] = timeit(rows[i].fn, &c);
        gpu_ok(cudaGetLastError(), rows[i].name);
    }
    dt_op_clear_overrides();
    printf("\nattention, B %d NH %d T %d D 64 bf16, one layer (median of 20)\n", B, NH, T);
    printf("| phase | ms | TFLOP/s |\n|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        if (rows[i].flops > 0) printf("| %s | %.4f | %.1f |\n", rows[i].name, ms[i], rows[i].flops / (ms[i] * 1e-3) / 1e12);
        else printf("| %s | %.4f | |\n", rows[i].name, ms[i]);
    }
    printf("| gemm fwd+bwd | %.3f | |\n| flash fwd+bwd det | %.3f | |\n| flash fwd+bwd fast | %.3f | |\n",
           ms[0] + ms[1], ms[2] + ms[3], ms[2] + ms[4]);
    printf("| fused bias sums: flash bwd det with - without | %+.4f | |\n"
           "| model's qkv backward, det: (flash bwd no sums + colsum) - flash bwd with sums | %+.4f | |\n",
           ms[3] - ms[5], ms[5] + ms[6] - ms[3]);
    return dt_test_report();
}
