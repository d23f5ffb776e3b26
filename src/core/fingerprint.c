/* Environment fingerprint (see fingerprint.h). Built with DT_BUILD_FLAGS and DT_GIT_REV
 * from the Makefile. */
#include "core/fingerprint.h"

#include "core/determinism.h"
#include "core/json.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DT_BUILD_FLAGS
#define DT_BUILD_FLAGS "unknown"
#endif
#ifndef DT_GIT_REV
#define DT_GIT_REV "unknown"
#endif

const char *dt_build_rev(void) { return DT_GIT_REV; }

static char *g_config_binding, *g_config_run;

dt_status dt_fingerprint_set_config(const char *binding_json, const char *run_json) {
    free(g_config_binding);
    free(g_config_run);
    g_config_binding = binding_json ? strdup(binding_json) : NULL;
    g_config_run = run_json ? strdup(run_json) : NULL;
    if ((binding_json && !g_config_binding) || (run_json && !g_config_run))
        return dt_fail(DT_ENOMEM, "out of memory for the run's config");
    return DT_OK;
}

static char *g_dist_contract, *g_dist_info;

dt_status dt_fingerprint_set_dist(const char *contract_json, const char *info_json) {
    free(g_dist_contract);
    free(g_dist_info);
    g_dist_contract = contract_json ? strdup(contract_json) : NULL;
    g_dist_info = info_json ? strdup(info_json) : NULL;
    if ((contract_json && !g_dist_contract) || (info_json && !g_dist_info))
        return dt_fail(DT_ENOMEM, "out of memory for the run's communicator record");
    return DT_OK;
}

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

static void kv(FILE *f, int *first, const char *k, const char *v) {
    fprintf(f, "%s\n    ", *first ? "" : ",");
    *first = 0;
    dt_json_write_string(f, k);
    fputc(':', f);
    dt_json_write_string(f, v ? v : "");
}

/* Variables whose values change numerics or the choice of reduction paths. */
static const char *contract_env[] = {"NCCL_ALGO", "NCCL_PROTO", "CUBLAS_WORKSPACE_CONFIG",
                                     "OMP_DYNAMIC", "OPENBLAS_CORETYPE", "OMP_SCHEDULE"};
static const char *thread_env[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"};

dt_status dt_fingerprint_write(const char *dir, const char *extra_json) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/env.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return dt_fail(DT_EIO, "cannot write %s: check that --log-dir is writable", tmp);
    char cpu[256], host[256] = "", nthreads[32];
    cpu_model(cpu, sizeof cpu);
    gethostname(host, sizeof host - 1);
    snprintf(nthreads, sizeof nthreads, "%d", dt_num_threads());
    int det = dt_det(), first = 1;
    fprintf(f, "{\n  \"contract\": {");
    kv(f, &first, "detrain_git_rev", DT_GIT_REV);
    kv(f, &first, "build_flags", DT_BUILD_FLAGS);
    kv(f, &first, "compiler", "gcc " __VERSION__);
    kv(f, &first, "blas", openblas_get_config());
    kv(f, &first, "blas_kernel", openblas_get_corename());
    kv(f, &first, "cpu_model", cpu);
    kv(f, &first, "deterministic_mode", det ? "on" : "off");
    for (size_t i = 0; i < sizeof contract_env / sizeof contract_env[0]; i++)
        kv(f, &first, contract_env[i], getenv(contract_env[i]) ? getenv(contract_env[i]) : "(unset)");
    if (!det) {
        kv(f, &first, "threads", nthreads);
        for (size_t i = 0; i < sizeof thread_env / sizeof thread_env[0]; i++)
            kv(f, &first, thread_env[i], getenv(thread_env[i]) ? getenv(thread_env[i]) : "(unset)");
    }
    if (extra_json) fprintf(f, ",\n    \"run\": %s", extra_json);
    if (g_dist_contract) fprintf(f, ",\n    \"dist\": %s", g_dist_contract);
    fprintf(f, "\n  },\n  \"info\": {");
    first = 1;
    kv(f, &first, "host", host);
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    kv(f, &first, "started", when);
    if (det) {
        kv(f, &first, "threads", nthreads);
        for (size_t i = 0; i < sizeof thread_env / sizeof thread_env[0]; i++)
            kv(f, &first, thread_env[i], getenv(thread_env[i]) ? getenv(thread_env[i]) : "(unset)");
    }
    if (g_dist_info) fprintf(f, ",\n    \"dist\": %s", g_dist_info);
    fprintf(f, "\n  }");
    if (g_config_binding && g_config_run)
        fprintf(f, ",\n  \"config\": {\n    \"binding\": %s,\n    \"run\": %s\n  }", g_config_binding, g_config_run);
    fprintf(f, "\n}\n");
    int bad = ferror(f);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return dt_fail(DT_EIO, "cannot write %s", path);
    }
    return DT_OK;
}
