/* The kernel registry invariant (src/gate/registry.c): the real repo's kernels.registry
 * passes; on small fixture trees each violation is reported with the file and what to do
 * (unregistered kernel file, missing registered path, tests and exempt both or neither,
 * test not referencing its source, a listed test that no runner runs, kind not covering the
 * content), and format errors are all listed. Also the "references" rule on its own, and
 * the "runs" rule (dt_test_runner) on its own and against the real runners. */
#include "gate/registry.h"
#include "dt_test.h"

#include <sys/stat.h>
#include <unistd.h>

static char scratch[256];
static int case_no;

static void mkdirs_for(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
}

static void put(const char *root, const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    mkdirs_for(path);
    FILE *f = fopen(path, "w");
    CHECKF(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A fixture tree with one well-formed kernel, its test and the given registry. */
static void make_tree(char *root, size_t cap, const char *registry) {
    snprintf(root, cap, "%s/case%d", scratch, ++case_no);
    put(root, "src/ops/a_cpu.c",
        "#include \"ops/a.h\"\nvoid a(float *s, const float *x, int n) {\n"
        "    float t = 0;\n#pragma omp parallel for reduction(+:t)\n"
        "    for (int i = 0; i < n; i++) t += x[i];\n    *s = t;\n}\n");
    put(root, "src/ops/a.h", "/* a: sum */\nvoid a(float *s, const float *x, int n);\n");
    put(root, "src/core/plain.c", "/* cblas_sgemm( only in a comment */\nint plain(void) { return 1; }\n");
    put(root, "tests/ops/test_a.c", "/* tests src/ops/a_cpu.c */\nint main(void) { return 0; }\n");
    put(root, "tests/ops/test_other.c", "#include \"ops/b.h\"\nint main(void) { return 0; }\n");
    put(root, "kernels.registry", registry);
}

static const char *good_entry =
    "# fixture\n\n"
    "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\n"
    "notes: OpenMP reduction; det path sums per-thread partials in thread order\n"
    "tests: tests/ops/test_a.c\n";

/* Runs the check on a tree; returns the problem count, and requires each expected
 * substring to appear in some problem. */
static int check_tree(const char *root, const char *const *expect, int n_expect) {
    dt_strlist problems = {0};
    CHECK_OK(dt_registry_check_tree(root, NULL, &problems));
    for (int k = 0; k < n_expect; k++) {
        int found = 0;
        for (int i = 0; i < problems.n; i++) found |= strstr(problems.items[i], expect[k]) != NULL;
        CHECKF(found, "%s: no problem mentions '%s'", root, expect[k]);
    }
    for (int i = 0; i < problems.n; i++) fprintf(stderr, "  [%s] %s\n", dt_path_base(root), problems.items[i]);
    int n = problems.n;
    dt_strlist_free(&problems);
    return n;
}

static void test_real_repo(void) {
    /* tests/run.sh runs from the repo root. */
    CHECKF(dt_is_file(DT_REGISTRY_FILE), "run from the repo root: %s not found", DT_REGISTRY_FILE);
    dt_strlist problems = {0};
    CHECK_OK(dt_registry_check_tree(".", NULL, &problems));
    for (int i = 0; i < problems.n; i++) fprintf(stderr, "  %s\n", problems.items[i]);
    CHECKF(problems.n == 0, "the repo's %s has %d problems (listed above)", DT_REGISTRY_FILE, problems.n);
    dt_strlist_free(&problems);
}

static void test_good_fixture(void) {
    char root[512];
    make_tree(root, sizeof root, good_entry);
    CHECK(check_tree(root, NULL, 0) == 0);
}

static void test_unregistered_kernel_files(void) {
    char root[512];
    make_tree(root, sizeof root, good_entry);
    put(root, "src/ops/b_cpu.c", "void b(void) { }\n");                         /* by place */
    put(root, "src/core/gemm_user.c", "void g(void) { cblas_sgemm(0); }\n");     /* by content */
    put(root, "include/detrain/k.cuh", "__global__ void k(void) { }\n");        /* by place */
    put(root, "tests/kernels/helper.c", "void h(void) { atomicAdd(0, 1); }\n"); /* not scanned */
    const char *expect[] = {"src/ops/b_cpu.c: kernel-bearing (in kernel directory src/ops/) but not registered",
                            "src/core/gemm_user.c: kernel-bearing (`cblas_sgemm(` at line 1) but not registered",
                            "include/detrain/k.cuh: kernel-bearing", "add an entry to"};
    CHECK(check_tree(root, expect, 4) == 3);
}

static void test_missing_paths(void) {
    char root[512];
    char reg[2048];
    snprintf(reg, sizeof reg, "%s\nname: gone\nsources: src/ops/gone_cpu.c\nkind: cpu-serial\n"
             "notes: n\ntests: tests/ops/test_gone.c\n", good_entry);
    make_tree(root, sizeof root, reg);
    const char *expect[] = {"entry 'gone': source 'src/ops/gone_cpu.c' does not exist",
                            "entry 'gone': test 'tests/ops/test_gone.c' does not exist"};
    CHECK(check_tree(root, expect, 2) == 2);
}

static void test_tests_and_exempt(void) {
    char root[512];
    make_tree(root, sizeof root,
              "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
              "tests: tests/ops/test_a.c\nexempt: no reason\n");
    const char *both[] = {"kernels.registry:1: entry 'a' has both tests: (line 5) and exempt: (line 6)"};
    CHECK(check_tree(root, both, 1) == 1);
    make_tree(root, sizeof root, "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n");
    const char *neither[] = {"entry 'a' has neither tests: nor exempt:"};
    CHECK(check_tree(root, neither, 1) == 1);
    make_tree(root, sizeof root, "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
              "exempt: test pending: tests/ops/test_a.c\n");
    CHECK(check_tree(root, NULL, 0) == 0);
}

static void test_test_must_reference_source(void) {
    char root[512];
    make_tree(root, sizeof root, "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
              "tests: tests/ops/test_other.c\n");
    const char *expect[] = {"test 'tests/ops/test_other.c' does not reference source 'src/ops/a_cpu.c'"};
    CHECK(check_tree(root, expect, 1) == 1);
}

/* A listed test must be run by CI or the GPU test script: benchmarks, tuners, helpers and
 * paths outside tests/ are refused with a message naming the runners; tests/gpu/test_*.cu
 * and scripts the GPU test script runs by name are accepted. */
static void test_test_must_run(void) {
    char root[512];
    make_tree(root, sizeof root, "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
              "tests: tests/ops/test_a.c tests/gpu/bench_a.cu tests/gpu/tune_a.cu bench/a.sh tests/gpu/a_e2e.sh\n");
    const char *body = "/* covers src/ops/a_cpu.c */\n";
    put(root, "tests/gpu/bench_a.cu", body);
    put(root, "tests/gpu/tune_a.cu", body);
    put(root, "bench/a.sh", body);
    put(root, "tests/gpu/a_e2e.sh", body);
    const char *expect[] = {
        "entry 'a': test 'tests/gpu/bench_a.cu' is run neither by CI",
        "entry 'a': test 'tests/gpu/tune_a.cu' is run neither by CI",
        "entry 'a': test 'bench/a.sh' is run neither by CI",
        "entry 'a': test 'tests/gpu/a_e2e.sh' is run neither by CI",
        "a benchmark is not a test",
    };
    CHECK(check_tree(root, expect, 5) == 4);
    /* the GPU test script runs the end-to-end script by name: accepted; its test binaries too */
    put(root, DT_GPU_TEST_SCRIPT, "for t in build/gpu-tests/test_*; do \"$t\"; done\n"
        "if bash tests/gpu/a_e2e.sh; then echo ok; fi\n# bash bench/a.sh (a comment runs nothing)\n");
    put(root, "tests/gpu/test_gpu_a.cu", body);
    put(root, "kernels.registry", "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
        "tests: tests/ops/test_a.c tests/gpu/test_gpu_a.cu tests/gpu/a_e2e.sh\n");
    CHECK(check_tree(root, NULL, 0) == 0);
    CHECK(dt_test_runner(root, "tests/gpu/a_e2e.sh") != NULL);
    CHECK(dt_test_runner(root, "bench/a.sh") == NULL);
}

/* The rule by path, and the real runners do what the rule assumes: make test builds one
 * binary per tests/.../test_*.c at any depth and tests/run.sh runs every binary and every
 * tests/.../test_*.sh; the GPU test script runs every build/gpu-tests/test_* and no
 * benchmark. */
static void test_runner_rule(void) {
    CHECK(dt_test_runner(".", "tests/ops/test_op.c") != NULL);
    CHECK(dt_test_runner(".", "tests/ops/gemm/test_gemm_plan.c") != NULL);   /* nested */
    CHECK(dt_test_runner(".", "tests/e2e/test_train_determinism.sh") != NULL);
    CHECK(dt_test_runner(".", "tests/gpu/test_gpu_ops.cu") != NULL);
    CHECK(dt_test_runner(".", "tests/gpu/gpu_e2e.sh") != NULL);               /* named by the GPU script */
    CHECK(dt_test_runner(".", "tests/gpu/gpu_trace.sh") != NULL);
    CHECK(dt_test_runner(".", "tests/gpu/bench_ops.cu") == NULL);
    CHECK(dt_test_runner(".", "tests/gpu/tune_gemm.cu") == NULL);
    CHECK(dt_test_runner(".", "tests/gpu/dump_reference_gpu.cu") == NULL);
    CHECK(dt_test_runner(".", "tests/gpu/sub/test_x.cu") == NULL);            /* make cuda: only the files right in tests/gpu */
    CHECK(dt_test_runner(".", "tests/kernels/harness.c") == NULL);            /* support, not a test */
    CHECK(dt_test_runner(".", "bench/gpu.sh") == NULL);
    CHECK(dt_test_runner(".", "tools/torch_check_gpu.sh") == NULL);
    char *text;
    size_t n;
    CHECK_OK(dt_read_file("tests/run.sh", &text, &n));
    if (text) {
        CHECK(strstr(text, "find build/tests -type f -perm -u+x") != NULL);
        CHECK(strstr(text, "find tests -type f -name 'test_*.sh'") != NULL);
        free(text);
    }
    CHECK_OK(dt_read_file("Makefile", &text, &n));
    if (text) {
        CHECK(strstr(text, "TEST_SRC := $(call find_src,tests,test_*.c)") != NULL);
        CHECK(strstr(text, "GPU_TEST_SRC := $(sort $(wildcard tests/gpu/*.cu))") != NULL);
        free(text);
    }
    CHECK_OK(dt_read_file(DT_GPU_TEST_SCRIPT, &text, &n));
    if (text) {
        CHECK(strstr(text, "for t in build/gpu-tests/test_*; do") != NULL);
        CHECK(strstr(text, "build/gpu-tests/*;") == NULL); /* every binary would run the benchmarks too */
        free(text);
    }
}

static void test_kind_must_cover_content(void) {
    char root[512];
    make_tree(root, sizeof root, "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-serial\nnotes: n\n"
              "tests: tests/ops/test_a.c\n");
    const char *expect[] = {"src/ops/a_cpu.c: its content implies kind 'cpu-omp'"};
    CHECK(check_tree(root, expect, 1) == 1);
}

static void test_format_errors_all_listed(void) {
    static const char *text =
        "# header\n"
        "name: a\nsources: src/ops/a_cpu.c\nkind: cpu-omp\nnotes: n\n"
        "tests: tests/ops/test_a.c\ncolour: blue\n"           /* line 7 */
        "\n"
        "name: a\nsources: src/ops/a_cpu.c /abs.c ../up.c\n"  /* lines 9, 10 */
        "kind: cpu-omp gpu-magic\nkind: cuda\n"               /* lines 11, 12 */
        "notes: a long note\n  continued here\n"
        "exempt: pending\n"
        "\n"
        "  stray continuation\n"                              /* line 17 */
        "no colon here\n";                                    /* line 18 */
    dt_registry r;
    dt_strlist problems = {0};
    CHECK_OK(dt_registry_parse(text, "reg", &r, &problems));
    const char *expect[] = {
        "reg:7: unknown key 'colour'", "reg:9: entry name 'a' is already used at line 2",
        "source 'src/ops/a_cpu.c' is already registered by entry 'a'", "source '/abs.c' is absolute",
        "source '../up.c' contains '..'", "unknown kind 'gpu-magic'",
        "reg:12: key 'kind' repeated", "reg:17: indented line continues no key",
        "reg:18: expected `key: value`",
    };
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        int found = 0;
        for (int i = 0; i < problems.n; i++) found |= strstr(problems.items[i], expect[k]) != NULL;
        CHECKF(found, "no parse problem mentions '%s'", expect[k]);
    }
    CHECK(r.n >= 2);
    if (r.n >= 2) {
        CHECK(!strcmp(r.entries[1].notes, "a long note continued here"));
        CHECK(r.entries[1].n_sources == 3 && r.entries[1].exempt && !r.entries[1].has_tests);
        CHECK(r.entries[0].kinds == DT_KIND_CPU_OMP && r.entries[0].n_tests == 1);
    }
    dt_registry_free(&r);
    dt_strlist_free(&problems);
}

static void test_references_rule(void) {
    const char *src = "src/ops/layernorm_cpu.c";
    CHECK(dt_test_references_source("/* covers src/ops/layernorm_cpu.c */", src));
    CHECK(dt_test_references_source("run layernorm_cpu.c twice", src));
    CHECK(dt_test_references_source("#include \"ops/layernorm.h\"\n", src));
    CHECK(dt_test_references_source("  #  include <layernorm_cpu.h>\n", src));
    CHECK(!dt_test_references_source("/* fused_layernorm_cpu.c */", src));
    CHECK(!dt_test_references_source("/* layernorm_cpu.cu */", src));
    CHECK(!dt_test_references_source("#include \"ops/layernorm_fused.h\"\n", src));
    CHECK(!dt_test_references_source("layernorm(x); /* no file name */", src));
    CHECK(dt_test_references_source("#include \"ops/matmul.cuh\"", "src/ops/matmul_cuda.cu"));
}

int main(void) {
    dt_test_scratch(scratch, sizeof scratch, "registry");
    RUN(test_real_repo);
    RUN(test_good_fixture);
    RUN(test_unregistered_kernel_files);
    RUN(test_missing_paths);
    RUN(test_tests_and_exempt);
    RUN(test_test_must_reference_source);
    RUN(test_test_must_run);
    RUN(test_runner_rule);
    RUN(test_kind_must_cover_content);
    RUN(test_format_errors_all_listed);
    RUN(test_references_rule);
    dt_test_scratch_remove(scratch);
    return dt_test_report();
}
