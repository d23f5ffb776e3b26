/* Deterministic-mode validation: bad env values and rejected flags produce their errors;
 * unset variables get their canonical defaults; applying twice changes nothing; applying
 * after a library was initialised is refused. */
#include "core/determinism.h"
#include "dt_test.h"

static const char *vars[] = {"NCCL_ALGO", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS",
                             "OMP_DYNAMIC", "OPENBLAS_NUM_THREADS", "NCCL_PROTO"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    dt_determinism_reset_for_tests();
}

static dt_status apply_det(void) {
    dt_det_request req = {1, NULL, 0};
    return dt_determinism_apply(&req);
}

static void test_defaults_filled(void) {
    clear_env();
    CHECK_OK(apply_det());
    CHECK(dt_det() == 1);
    CHECK(getenv("NCCL_ALGO") && !strcmp(getenv("NCCL_ALGO"), "Ring"));
    CHECK(getenv("CUBLAS_WORKSPACE_CONFIG") && !strcmp(getenv("CUBLAS_WORKSPACE_CONFIG"), ":4096:8"));
    CHECK(getenv("OMP_DYNAMIC") && !strcmp(getenv("OMP_DYNAMIC"), "false"));
    CHECK(getenv("OMP_NUM_THREADS") && atoi(getenv("OMP_NUM_THREADS")) >= 1);
    CHECK(getenv("NCCL_PROTO") == NULL); /* no default: NCCL picks, env.json records "(unset)" */
}

static void test_idempotent(void) {
    clear_env();
    setenv("OMP_NUM_THREADS", "3", 1);
    CHECK_OK(apply_det());
    char before[5][128];
    for (int i = 0; i < 5; i++) snprintf(before[i], sizeof before[i], "%s", getenv(vars[i]));
    CHECK_OK(dt_runtime_init());
    CHECK(dt_num_threads() == 3);
    CHECK_OK(apply_det()); /* second call: same result, nothing changed */
    for (int i = 0; i < 5; i++) CHECK(!strcmp(before[i], getenv(vars[i])));
    CHECK(dt_det() == 1);
    /* switching mode within a process is refused */
    dt_det_request off = {0, NULL, 0};
    CHECK(dt_determinism_apply(&off) == DT_ESTATE);
    CHECK(dt_det() == 1);
}

static void test_bad_env_values(void) {
    static const struct { const char *name, *value; } bad[] = {
        {"NCCL_ALGO", "Tree"}, {"NCCL_ALGO", "Ring,Tree"}, {"NCCL_ALGO", ""},
        {"NCCL_ALGO", "Ring,"}, {"CUBLAS_WORKSPACE_CONFIG", ":4096:2"},
        {"CUBLAS_WORKSPACE_CONFIG", "4096:8"}, {"OMP_NUM_THREADS", "4,2"},
        {"OMP_NUM_THREADS", "0"}, {"OMP_NUM_THREADS", "two"}, {"OMP_DYNAMIC", "true"},
        {"OPENBLAS_NUM_THREADS", "-1"}, {"NCCL_PROTO", "LL256"}, {"NCCL_PROTO", "Simple,"},
        {"NCCL_PROTO", "^"}, {"NCCL_PROTO", ""}, {"NCCL_PROTO", "Ring"}, {"NCCL_PROTO", "LL,,Simple"},
        {"NCCL_PROTO", "^^LL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_env();
        setenv(bad[i].name, bad[i].value, 1);
        dt_status st = apply_det();
        CHECKF(st == DT_EDETERMINISM, "%s=%s", bad[i].name, bad[i].value);
        char want[256];
        snprintf(want, sizeof want, "%s='%s' is not a deterministic setting; accepted: ",
                 bad[i].name, bad[i].value);
        CHECKF(strstr(dt_errmsg(), want) != NULL, "message: %s", dt_errmsg());
        CHECK(dt_det() == 0);
        /* fail closed: nothing was filled in */
        CHECK(getenv("CUBLAS_WORKSPACE_CONFIG") == NULL || !strcmp(bad[i].name, "CUBLAS_WORKSPACE_CONFIG"));
    }
}

static void test_good_env_values(void) {
    static const struct { const char *name, *value; } good[] = {
        {"NCCL_ALGO", "Ring"}, {"NCCL_ALGO", "ring,CollnetDirect"}, {"NCCL_ALGO", "^NVLS"},
        {"CUBLAS_WORKSPACE_CONFIG", ":16:8"}, {"OMP_NUM_THREADS", "2"}, {"NCCL_PROTO", "Simple"},
        {"NCCL_PROTO", "^LL128"}, {"NCCL_PROTO", "LL,LL128,simple"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        clear_env();
        setenv(good[i].name, good[i].value, 1);
        CHECKF(apply_det() == DT_OK, "%s=%s: %s", good[i].name, good[i].value, dt_errmsg());
        CHECK(!strcmp(getenv(good[i].name), good[i].value)); /* never overwritten */
    }
}

static void test_rejected_flags(void) {
    int n;
    const dt_det_flag_rule *rules = dt_det_flag_rules(&n);
    CHECK(n >= 3);
    for (int i = 0; i < n; i++) {
        clear_env();
        dt_flag_use use = {rules[i].flag, rules[i].value_has ? "gemm=fast" : "x"};
        dt_det_request req = {1, &use, 1};
        CHECK(dt_determinism_apply(&req) == DT_EDETERMINISM);
        CHECKF(strstr(dt_errmsg(), rules[i].flag) != NULL, "%s", dt_errmsg());
        CHECK(dt_det() == 0);
    }
    /* the same flags are fine in default mode */
    clear_env();
    dt_flag_use use = {"--op-variant", "gemm=fast"};
    dt_det_request req = {0, &use, 1};
    CHECK_OK(dt_determinism_apply(&req));
    /* =det overrides are fine in deterministic mode */
    clear_env();
    dt_flag_use use2 = {"--op-variant", "gemm=det"};
    dt_det_request req2 = {1, &use2, 1};
    CHECK_OK(dt_determinism_apply(&req2));
    /* injection is allowed only with the explicit debug flag */
    clear_env();
    dt_flag_use inj[2] = {{"--inject-nondeterminism", "gemm@3"}, {"--debug-allow-injection", ""}};
    dt_det_request req3 = {1, inj, 2};
    CHECK_OK(dt_determinism_apply(&req3));
}

static void test_library_first_refused(void) {
    clear_env();
    dt_runtime_mark(DT_LIB_BLAS);
    CHECK(apply_det() == DT_ESTATE);
    CHECK(strstr(dt_errmsg(), "before dt_determinism_apply") != NULL);
    CHECK(dt_det() == 0);
}

int main(void) {
    RUN(test_defaults_filled);
    RUN(test_idempotent);
    RUN(test_bad_env_values);
    RUN(test_good_env_values);
    RUN(test_rejected_flags);
    RUN(test_library_first_refused);
    return dt_test_report();
}
