/* `detrain gate`: the kernel registry invariant (--check-registry) and the determinism gate
 * over a git diff (--base-ref REF). Exit 0 pass, 1 fail, 2 usage or I/O error. */
#include "cli/cli.h"

#include "gate/gate.h"
#include "gate/registry.h"
#include "gate/scan.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
        "usage: detrain gate --base-ref REF [--root DIR] [--registry FILE]\n"
        "       detrain gate --check-registry [--root DIR] [--registry FILE]\n"
        "       detrain gate --list [--root DIR] [--registry FILE]\n"
        "\n"
        "  --check-registry  every kernel-bearing file under src/, include/, tools/ is in\n"
        "                    kernels.registry; every registered path exists; every entry has\n"
        "                    tests (that reference its sources) or an exempt reason, not both\n"
        "  --base-ref REF    files changed since merge-base(REF, HEAD), including uncommitted\n"
        "                    and untracked ones: changed kernel-bearing files must be\n"
        "                    registered; changed registered sources need a changed test, or a\n"
        "                    'Determinism-Exempt: <reason>' trailer on every commit touching them\n"
        "  --list            print every kernel-bearing file: why, the kinds its content\n"
        "                    implies, and its registry entry (or UNREGISTERED)\n"
        "  --root DIR        repository root (default: current directory)\n"
        "  --registry FILE   registry file (default: ROOT/kernels.registry)\n"
        "Both checks may be given together. See docs/testing.md.\n");
}

/* --list: one line per kernel-bearing file, to help write registry entries. */
static int list_kernels(const char *root, const char *registry) {
    char path[1024];
    if (registry) snprintf(path, sizeof path, "%s", registry);
    else if (dt_path_join(path, sizeof path, root, DT_REGISTRY_FILE)) {
        fprintf(stderr, "detrain gate: %s\n", dt_errmsg());
        return 2;
    }
    dt_registry r = {0};
    dt_strlist problems = {0};
    if (dt_is_file(path) && dt_registry_load(path, &r, &problems)) {
        fprintf(stderr, "detrain gate: %s\n", dt_errmsg());
        return 2;
    }
    dt_strlist_free(&problems);
    dt_kernel_list kl = {0};
    if (dt_scan_tree(root, &kl)) {
        fprintf(stderr, "detrain gate: %s\n", dt_errmsg());
        dt_registry_free(&r);
        return 2;
    }
    for (int k = 0; k < kl.n; k++) {
        const dt_reg_entry *e = dt_registry_find_source(&r, kl.v[k].path);
        char kinds[256];
        dt_kind_names(kl.v[k].kinds, kinds, sizeof kinds);
        printf("%-40s %-14s kinds: %-24s %s\n", kl.v[k].path,
               e ? (e->name ? e->name : "?") : "UNREGISTERED", kinds[0] ? kinds : "-", kl.v[k].why);
    }
    dt_kernel_list_free(&kl);
    dt_registry_free(&r);
    return 0;
}

static int report(const char *what, dt_status st, dt_strlist *problems) {
    if (st) {
        fprintf(stderr, "detrain gate: %s: %s\n", what, dt_errmsg());
        return 2;
    }
    if (problems->n) {
        fprintf(stderr, "detrain gate: %s: FAIL, %d problem%s:\n", what, problems->n,
                problems->n == 1 ? "" : "s");
        for (int i = 0; i < problems->n; i++) fprintf(stderr, "  - %s\n", problems->items[i]);
        return 1;
    }
    printf("detrain gate: %s: PASS\n", what);
    return 0;
}

int dt_cmd_gate(int argc, char **argv) {
    const char *root = ".", *registry = NULL, *base_ref = NULL;
    int check = 0, list = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--list")) {
            list = 1;
            continue;
        }
        if (!strcmp(a, "--check-registry")) {
            check = 1;
            continue;
        }
        const char **dst = !strcmp(a, "--base-ref") ? &base_ref
                         : !strcmp(a, "--root") ? &root
                         : !strcmp(a, "--registry") ? &registry : NULL;
        if (!dst) {
            fprintf(stderr, "detrain gate: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc || !argv[i + 1][0]) {
            fprintf(stderr, "detrain gate: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        *dst = argv[++i];
    }
    if (list) return list_kernels(root, registry);
    if (!check && !base_ref) {
        fprintf(stderr, "detrain gate: pass --base-ref REF, --check-registry, or both\n");
        usage(stderr);
        return 2;
    }
    int rc = 0;
    if (check) {
        dt_strlist problems = {0};
        dt_status st = dt_registry_check_tree(root, registry, &problems);
        rc = report("registry check", st, &problems);
        dt_strlist_free(&problems);
    }
    if (base_ref && rc != 2) {
        dt_strlist problems = {0}, log = {0};
        dt_status st = dt_gate_run(root, registry, base_ref, &problems, &log);
        for (int i = 0; i < log.n; i++) printf("gate: %s\n", log.items[i]);
        fflush(stdout);
        char what[600];
        snprintf(what, sizeof what, "gate against %s", base_ref);
        int grc = report(what, st, &problems);
        if (grc > rc) rc = grc;
        dt_strlist_free(&problems);
        dt_strlist_free(&log);
    }
    return rc;
}
