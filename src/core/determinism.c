/* Deterministic mode: configuration and environment validation, the global flag, and
 * runtime (OpenMP/OpenBLAS) initialisation. See determinism.h for the contract. */
#include "core/determinism.h"

#include <cblas.h>
#include <ctype.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int g_det;           /* the global deterministic flag */
static int g_applied;       /* apply() completed at least once */
static int g_applied_det;   /* ... and with which mode */
static int g_libs;          /* bitmask of DT_LIB_* initialised through detrain */
static int g_threads = 1;

int dt_det(void) { return g_det; }
void dt_runtime_mark(int lib) { g_libs |= lib; }
int dt_runtime_marked(void) { return g_libs; }
int dt_num_threads(void) { return g_threads; }

void dt_determinism_reset_for_tests(void) {
    g_det = 0;
    g_applied = 0;
    g_applied_det = 0;
    g_libs = 0;
}

/* ---- configuration rules ------------------------------------------------------------ */

static const dt_det_flag_rule flag_rules[] = {
    {"--op-variant", "=fast",
     "forces an op's fast path, which accumulates in an unordered (racing) order",
     "drop the =fast override or run without --deterministic-mode", NULL},
    {"--inject-nondeterminism", NULL,
     "perturbs an op's output on purpose",
     "add --debug-allow-injection to trace a deliberate divergence, or drop the flag",
     "--debug-allow-injection"},
    {"--no-load-rng", NULL,
     "drops the checkpoint's RNG state, so dropout masks and the data order change",
     "drop the flag so the checkpoint's RNG keys and counters are restored", NULL},
    {"--no-load-optim", NULL,
     "drops the checkpoint's optimizer state, so every later update changes",
     "drop the flag so the optimizer state is restored", NULL},
};

const dt_det_flag_rule *dt_det_flag_rules(int *n) {
    *n = (int)(sizeof flag_rules / sizeof flag_rules[0]);
    return flag_rules;
}

/* ---- environment rules -------------------------------------------------------------- */

static int valid_positive_int(const char *v) {
    if (!*v) return 0;
    for (const char *p = v; *p; p++) if (!isdigit((unsigned char)*p)) return 0;
    long x = strtol(v, NULL, 10);
    return x >= 1 && x <= 1024;
}

/* NCCL_ALGO: comma-separated tokens from {Ring, CollnetDirect, CollnetChain, ^NVLS}.
 * Tree is excluded: its intra-node chain order is not under user control. */
static int valid_nccl_algo(const char *v) {
    static const char *ok[] = {"Ring", "CollnetDirect", "CollnetChain", "^NVLS"};
    char buf[256];
    if (!*v || strlen(v) >= sizeof buf) return 0;
    strcpy(buf, v);
    char *save = NULL;
    int count = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int hit = 0;
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strcasecmp(tok, ok[i]) == 0) hit = 1;
        if (!hit) return 0;
        count++;
    }
    return count > 0 && v[strlen(v) - 1] != ',' && v[0] != ',';
}

/* NCCL_PROTO: comma-separated tokens from {LL, LL128, Simple}, or the same list after a
 * leading '^' (the protocols NCCL must not use). Deterministic mode's floating-point
 * reductions never run an NCCL reduction: they move bytes with ncclSend/ncclRecv, add in
 * logical rank order in detrain's own kernel and gather with ncclAllGather/ncclBroadcast,
 * copies that deliver the same bytes under every protocol (and every NCCL_ALGO). So every
 * protocol NCCL has is accepted, and recorded; a value NCCL does not know is refused,
 * since the run that happens would not be the one asked for. No default: NCCL picks. */
static int valid_nccl_proto(const char *v) {
    static const char *ok[] = {"LL", "LL128", "Simple"};
    char buf[256];
    if (*v == '^') v++;
    if (!*v || strlen(v) >= sizeof buf || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,")) return 0;
    strcpy(buf, v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int hit = 0;
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strcasecmp(tok, ok[i]) == 0) hit = 1;
        if (!hit) return 0;
    }
    return 1;
}

static int valid_cublas_ws(const char *v) { return !strcmp(v, ":4096:8") || !strcmp(v, ":16:8"); }
static int valid_false(const char *v) { return !strcasecmp(v, "false"); }

static const char *def_ring(void) { return "Ring"; }
static const char *def_cublas_ws(void) { return ":4096:8"; }
static const char *def_false(void) { return "false"; }
static const char *def_nproc(void) {
    static char buf[16];
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, sizeof buf, "%ld", n < 1 ? 1L : (n > 1024 ? 1024L : n));
    return buf;
}

static const dt_det_env_rule env_rules[] = {
    {"NCCL_ALGO", "comma-separated tokens from {Ring, CollnetDirect, CollnetChain, ^NVLS}",
     valid_nccl_algo, def_ring},
    {"NCCL_PROTO", "comma-separated tokens from {LL, LL128, Simple}, optionally after one leading '^'",
     valid_nccl_proto, NULL},
    {"CUBLAS_WORKSPACE_CONFIG", ":4096:8 or :16:8", valid_cublas_ws, def_cublas_ws},
    /* detrain's deterministic CPU paths are thread-count independent, so any count is
     * accepted; the count must still be a plain number, and it is recorded. */
    {"OMP_NUM_THREADS", "a single positive integer (1..1024)", valid_positive_int, def_nproc},
    {"OMP_DYNAMIC", "false", valid_false, def_false},
    /* OpenBLAS splits work by its own thread count; in deterministic mode detrain calls it
     * single-threaded inside fixed-size slabs (ops/gemm_cpu.c), so any count is valid. */
    {"OPENBLAS_NUM_THREADS", "a single positive integer (1..1024)", valid_positive_int, def_nproc},
};

const dt_det_env_rule *dt_det_env_rules(int *n) {
    *n = (int)(sizeof env_rules / sizeof env_rules[0]);
    return env_rules;
}

/* ---- apply -------------------------------------------------------------------------- */

static dt_status check_flags(const dt_det_request *req) {
    int nrules;
    const dt_det_flag_rule *rules = dt_det_flag_rules(&nrules);
    for (int i = 0; i < req->nflags; i++) {
        const dt_flag_use *u = &req->flags[i];
        for (int r = 0; r < nrules; r++) {
            if (strcmp(u->name, rules[r].flag) != 0) continue;
            if (rules[r].value_has && !strstr(u->value ? u->value : "", rules[r].value_has))
                continue;
            if (rules[r].waived_by) {
                int waived = 0;
                for (int j = 0; j < req->nflags; j++)
                    if (!strcmp(req->flags[j].name, rules[r].waived_by)) waived = 1;
                if (waived) continue;
            }
            return dt_fail(DT_EDETERMINISM,
                           "%s%s%s has no deterministic path: it %s; %s",
                           u->name, (u->value && *u->value) ? " " : "",
                           u->value ? u->value : "", rules[r].why, rules[r].instead);
        }
    }
    return DT_OK;
}

static dt_status check_env(void) {
    int n;
    const dt_det_env_rule *rules = dt_det_env_rules(&n);
    /* Validate everything before changing anything, so a failure leaves env untouched. */
    for (int i = 0; i < n; i++) {
        const char *v = getenv(rules[i].name);
        if (v && !rules[i].valid(v))
            return dt_fail(DT_EDETERMINISM, "%s='%s' is not a deterministic setting; accepted: %s",
                           rules[i].name, v, rules[i].accepted);
    }
    for (int i = 0; i < n; i++)
        if (rules[i].canonical && !getenv(rules[i].name) && setenv(rules[i].name, rules[i].canonical(), 0) != 0)
            return dt_fail(DT_EIO, "cannot set %s in the environment", rules[i].name);
    return DT_OK;
}

dt_status dt_determinism_apply(const dt_det_request *req) {
    int want = req->enabled ? 1 : 0;
    if (g_applied && g_applied_det == want) {
        /* Idempotent: re-validate (cheap, changes nothing when it passes). */
        dt_status st = want ? check_flags(req) : DT_OK;
        if (st == DT_OK && want) st = check_env();
        return st;
    }
    if (g_applied)
        return dt_fail(DT_ESTATE, "deterministic mode was already applied as %s; it cannot be "
                       "switched within a process", g_applied_det ? "on" : "off");
    if (g_libs)
        return dt_fail(DT_ESTATE, "a library (mask 0x%x) was initialised before "
                       "dt_determinism_apply; call it first in main", (unsigned)g_libs);
    if (want) {
        dt_status st = check_flags(req);
        if (st != DT_OK) return st;
        st = check_env();
        if (st != DT_OK) return st;
    } else {
        /* Default mode still needs a plain thread count. */
        const char *v = getenv("OMP_NUM_THREADS");
        if (v && !valid_positive_int(v))
            return dt_fail(DT_EINVAL, "OMP_NUM_THREADS='%s' is not a thread count; use a "
                           "single positive integer", v);
    }
    g_det = want;
    g_applied = 1;
    g_applied_det = want;
    return DT_OK;
}

dt_status dt_runtime_init(void) {
    if (!g_applied)
        return dt_fail(DT_ESTATE, "dt_runtime_init called before dt_determinism_apply");
    const char *v = getenv("OMP_NUM_THREADS");
    int n = (v && valid_positive_int(v)) ? atoi(v) : atoi(def_nproc());
    dt_runtime_mark(DT_LIB_OPENMP | DT_LIB_BLAS);
    /* libgomp parses OMP_* when it is loaded, before main; apply the validated values
     * through the API so what was validated is what runs. */
    omp_set_dynamic(0);
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    g_threads = n;
    return DT_OK;
}
