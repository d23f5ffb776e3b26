/* Kernel-file detection (src/gate/scan.c): every call-site form matches; the same token in
 * an #include, a // or block comment, a string literal or a char literal does not; OpenMP
 * pragmas match only with atomic/critical/reduction; place rules for paths. */
#include "gate/scan.h"
#include "dt_test.h"

/* Number of hits in a snippet (and the first hit's kind). */
static int hits_in(const char *snippet, unsigned *kind, int *line) {
    dt_scan_hit hits[16];
    int count = -1;
    CHECK_OK(dt_scan_text(snippet, strlen(snippet), hits, 16, &count));
    if (kind) *kind = count > 0 ? hits[0].kind : 0;
    if (line) *line = count > 0 ? hits[0].line : 0;
    return count;
}

static void test_call_sites_match(void) {
    static const struct { const char *code; unsigned kind; } yes[] = {
        {"__global__ void k(float *x) { }", DT_KIND_CUDA},
        {"  atomicAdd(&x[i], v);", DT_KIND_CUDA},
        {"atomicAdd_block(&x[i], v);", DT_KIND_CUDA},
        {"old = atomicCAS(addr, a, b);", DT_KIND_CUDA},
        {"atomicMax (p, 3);", DT_KIND_CUDA},
        {"atomic_fetch_add(&n, 1);", DT_KIND_CPU_ATOMIC},
        {"__atomic_fetch_add(&n, 1, __ATOMIC_RELAXED);", DT_KIND_CPU_ATOMIC},
        {"__sync_fetch_and_add(&n, 1);", DT_KIND_CPU_ATOMIC},
        {"#pragma omp parallel for reduction(+:x)\nfor(;;){}", DT_KIND_CPU_OMP},
        {"#pragma omp parallel for reduction (+:x)", DT_KIND_CPU_OMP},
        {"  #  pragma omp simd reduction(+:s)", DT_KIND_CPU_OMP},
        {"#pragma omp parallel for \\\n    reduction(+:x)", DT_KIND_CPU_OMP},
        {"#pragma omp atomic\nx += y;", DT_KIND_CPU_OMP},
        {"#pragma omp critical\n{ s += p; }", DT_KIND_CPU_OMP},
        {"_Pragma(\"omp parallel for reduction(+:s)\")", DT_KIND_CPU_OMP},
        {"#define PAR _Pragma ( \"omp atomic\" )", DT_KIND_CPU_OMP},
        {"pthread_create(&t, NULL, fn, arg);", DT_KIND_CPU_PTHREAD},
        {"cublasLtMatmul(h, d, a, A, Ad, B, Bd, b, C, Cd, D, Dd, algo, ws, n, s);", DT_KIND_CUBLAS},
        {"cublasLtMatmulAlgoGetHeuristic(h, d, a, b, c, d2, p, 1, &r, &n);", DT_KIND_CUBLAS},
        {"cublasGemmEx(h, ta, tb, m, n, k, a, A, t, l, B, t, l, b, C, t, l, ct, al);", DT_KIND_CUBLAS},
        {"cublasSgemm(h, ta, tb, m, n, k, a, A, l, B, l, b, C, l);", DT_KIND_CUBLAS},
        {"cublasSgemmStridedBatched(h);", DT_KIND_CUBLAS},
        {"cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);", DT_KIND_BLAS},
        {"float d = cblas_sdot(n, x, 1, y, 1);", DT_KIND_BLAS},
        {"cblas_sgemv(o, t, m, n, a, A, l, x, 1, b, y, 1);", DT_KIND_BLAS},
        {"cudnnBackendExecute(handle, plan, pack);", DT_KIND_CUDNN},
        {"cudnnConvolutionBackwardFilter(h);", DT_KIND_CUDNN},
        {"ncclAllReduce(s, r, n, ncclFloat, ncclSum, comm, st);", DT_KIND_NCCL},
        {"ncclReduceScatter(s, r, n, ncclFloat, ncclSum, comm, st);", DT_KIND_NCCL},
        {"ncclReduce(s, r, n, ncclFloat, ncclSum, 0, comm, st);", DT_KIND_NCCL},
        {"MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_FLOAT, MPI_SUM, c);", DT_KIND_MPI},
        {"MPI_Reduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, c);", DT_KIND_MPI},
        {"MPI_Reduce_scatter(s, r, counts, MPI_FLOAT, MPI_SUM, c);", DT_KIND_MPI},
        {"#define ADD(p, v) atomicAdd(p, v)", DT_KIND_CUDA},
        {"x = y; /* comment */ atomicAdd(p, v);", DT_KIND_CUDA},
        {"s = \"a\\\"b\"; atomicAdd(p, v);", DT_KIND_CUDA},
        {"c = '\\''; atomicAdd(p, v);", DT_KIND_CUDA},
        {"int n = 1'000; atomicAdd(p, v);", DT_KIND_CUDA},
    };
    for (size_t k = 0; k < sizeof yes / sizeof yes[0]; k++) {
        unsigned kind;
        int n = hits_in(yes[k].code, &kind, NULL);
        CHECKF(n == 1 && kind == yes[k].kind, "snippet %zu '%s': %d hits, kind %u (want 1, %u)", k,
               yes[k].code, n, kind, yes[k].kind);
    }
}

static void test_non_call_sites_do_not_match(void) {
    static const char *const no[] = {
        "#include <cublasLt.h>\n#include \"atomicAdd(.h\"\n#include <nccl.h>",
        "#include \"ops/atomicAdd(x).h\"",
        "#include <ops/atomicAdd(x).h>\n#  include_next <MPI_Allreduce(.h>",
        "  #  include <mpi.h> /* MPI_Allreduce( */",
        "// atomicAdd(&x, 1); cblas_sgemm(\n",
        "// a comment that continues \\\n atomicAdd(&x, 1);",
        "/* atomicAdd(&x, 1);\n   #pragma omp parallel for reduction(+:x)\n   __global__ */",
        "const char *s = \"atomicAdd(p, v) cblas_sgemm( ncclAllReduce( __global__\";",
        "const char *s = \"line \\\n atomicAdd(p, v)\";",
        "const char *r = R\"x(atomicAdd(p, v) \" MPI_Allreduce( )x\";",
        "char c = 'atomicAdd(';",
        "puts(\"#pragma omp parallel for reduction(+:x)\");",
        "#pragma omp parallel for\nfor (i = 0; i < n; i++) y[i] = x[i];",
        "#pragma omp parallel for schedule(static) num_threads(4)",
        "#pragma omp for private(reduction_tmp)",
        "#pragma GCC diagnostic ignored \"-Wshadow\"",
        "int atomicAdd_count; x = atomicAdd_count + 1;",   /* a name, not a call */
        "void *f = cblas_sgemm;",                          /* no call */
        "myatomicAdd(p, v); my_cblas_sgemm(a); xncclAllReduce(b);",
        "cblas_saxpy(n, a, x, 1, y, 1); cblas_scopy(n, x, 1, y, 1);",
        "MPI_Bcast(b, n, MPI_FLOAT, 0, c); ncclBroadcast(s, r, n, t, 0, c, st);",
        "ncclAllGather(s, r, n, ncclFloat, comm, st);",
        "x = 0x1atomicAdd;",
        "char *u = u8\"atomicAdd(\"; wchar_t *w = L\"ncclReduce(\";",
    };
    for (size_t k = 0; k < sizeof no / sizeof no[0]; k++) {
        int n = hits_in(no[k], NULL, NULL);
        CHECKF(n == 0, "snippet %zu '%s': %d hits, want 0", k, no[k], n);
    }
}

static void test_lines_and_strip(void) {
    int line;
    CHECK(hits_in("/* one\n two */\n// three\n\"four\\\nfive\"\natomicAdd(p, v);\n", NULL, &line) == 1);
    CHECK(line == 6);
    CHECK(hits_in("#pragma omp parallel for \\\n  reduction(+:s)\nint x;\natomicAdd(p, v);", NULL, &line) == 2);
    CHECK(line == 1);
    const char *src = "a /* B */ \"C\" 'D' // E\n#include <F.h>\n#pragma omp atomic\n";
    char *s = dt_scan_strip(src, strlen(src));
    CHECK(s != NULL);
    if (s) {
        CHECK(strlen(s) == strlen(src));
        CHECK(!strchr(s, 'B') && !strchr(s, 'C') && !strchr(s, 'D') && !strchr(s, 'E') && !strchr(s, 'F'));
        CHECK(strstr(s, "#pragma omp atomic") != NULL);
        size_t nl = (size_t)(strchr(src, '\n') - src);
        CHECK(s[0] == 'a' && s[nl] == '\n');
        free(s);
    }
    /* An unterminated literal stops at the end of its line instead of eating the file. */
    CHECK(hits_in("char c = '\n atomicAdd(p, v);", NULL, NULL) == 1);
    CHECK(hits_in("const char *s = \"\n atomicAdd(p, v);", NULL, NULL) == 1);
    /* An unterminated block comment hides the rest. */
    CHECK(hits_in("/* atomicAdd(p, v);", NULL, NULL) == 0);
    CHECK(hits_in("", NULL, NULL) == 0);
}

static void test_places(void) {
    CHECK(dt_scan_place_reason("src/ops/gelu_cpu.c") != NULL);
    CHECK(dt_scan_place_reason("src/optim/adamw.c") != NULL);
    /* the op families' folders and the shared device helpers count at any depth */
    CHECK(dt_scan_place_reason("src/ops/gemm/gemm_cpu.c") != NULL);
    CHECK(dt_scan_place_reason("src/ops/cuda/launch_log.c") != NULL);
    CHECK(dt_scan_place_reason("src/ops/attention/flash_cuda.cuh") != NULL);
    CHECK(dt_scan_place_reason("src/ops/gemm/gemm.h") == NULL); /* headers by content only */
    CHECK(dt_scan_place_reason("src/dist/allreduce.c") != NULL);
    CHECK(dt_scan_place_reason("src/model/gpt_cuda.cu") != NULL);
    CHECK(dt_scan_place_reason("include/detrain/kernels.cuh") != NULL);
    CHECK(dt_scan_place_reason("src/ops/op.h") == NULL);       /* headers: content only */
    CHECK(dt_scan_place_reason("src/core/json.c") == NULL);
    CHECK(dt_scan_place_reason("tests/ops/test_gelu.c") == NULL);
    CHECK(dt_scan_place_reason("src/ops/README.md") == NULL);
    CHECK(dt_scan_is_product_source("tools/x.c"));
    CHECK(dt_scan_is_product_source("src/ops/op.h"));
    CHECK(!dt_scan_is_product_source("tests/kernels/test_x.c"));
    CHECK(!dt_scan_is_product_source("bench/x.c"));
    CHECK(!dt_scan_is_product_source("src/ops/notes.txt"));
    CHECK(dt_kind_from_name("cpu-omp", 7) == DT_KIND_CPU_OMP);
    CHECK(dt_kind_from_name("cpu-om", 6) == 0);
    CHECK(!strcmp(dt_kind_name(DT_KIND_NCCL), "nccl-call"));
}

int main(void) {
    RUN(test_call_sites_match);
    RUN(test_non_call_sites_do_not_match);
    RUN(test_lines_and_strip);
    RUN(test_places);
    return dt_test_report();
}
