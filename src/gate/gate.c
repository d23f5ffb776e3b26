/* The kernel determinism gate: collects the changed files from git, then applies rule 1
 * (changed kernel-bearing files are registered) and rule 2 (changed registered sources
 * come with a test change or an exempt trailer on every commit). See gate.h. */
#include "gate/gate.h"

#include "gate/git.h"
#include "gate/registry.h"
#include "gate/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs git and fails (naming `what`) when it exits non-zero. */
static dt_status git_ok(const char *dir, const char *const *args, dt_git_out *r, const char *what) {
    dt_status st = dt_git_run(dir, args, r);
    if (st) return st;
    if (r->exit_code) {
        char line[512];
        st = dt_fail(DT_EIO, "git failed while %s (exit %d): %s", what, r->exit_code,
                     dt_git_err_line(r, line, sizeof line));
        dt_git_out_free(r);
    }
    return st;
}

/* Runs a git command with -z output and adds each NUL-separated path to *out (unique). */
static dt_status git_paths(const char *dir, const char *const *args, dt_strlist *out, const char *what) {
    dt_git_out r;
    dt_status st = git_ok(dir, args, &r, what);
    if (st) return st;
    for (size_t i = 0; !st && i < r.out_n;) {
        size_t len = strnlen(r.out + i, r.out_n - i);
        if (len) st = dt_strlist_add_unique(out, r.out + i);
        i += len + 1;
    }
    dt_git_out_free(&r);
    return st;
}

/* Trims leading/trailing whitespace in place. */
static char *trim(char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

/* Rule 2 for one changed source whose entry has tests but none of them changed. Looks at
 * every commit in ref..HEAD (`ref` is the base ref's commit hash) touching `src`: all must
 * carry the exempt trailer. */
static dt_status check_exempt(const char *top, const char *ref, const char *src, const dt_reg_entry *e,
                              int dirty, dt_strlist *problems, dt_strlist *log) {
    char tests[1024] = "";
    for (int t = 0; t < e->n_tests; t++) {
        size_t len = strlen(tests);
        snprintf(tests + len, sizeof tests - len, "%s%s", t ? ", " : "", e->tests[t]);
    }
    if (dirty)
        return dt_strlist_addf(problems,
            "%s: has uncommitted changes and none of its tests (%s) changed; change one of its "
            "tests, or commit the change with a '" DT_EXEMPT_TRAILER ": <reason>' trailer if "
            "numerics are unaffected", src, tests);
    char range[128];
    snprintf(range, sizeof range, "%.64s..HEAD", ref);
    const char *args[] = {"log", "-z", "--no-merges", "--full-history",
                          "--format=%H%x1f%(trailers:key=" DT_EXEMPT_TRAILER ",valueonly,separator=%x1e)",
                          range, "--", src, NULL};
    dt_git_out r;
    dt_status st = git_ok(top, args, &r, "listing the commits that touch a kernel source");
    if (st) return st;
    char exempt_list[2048] = "", missing[1024] = "";
    int n_commits = 0, n_missing = 0;
    for (size_t i = 0; i < r.out_n;) {
        char *rec = r.out + i;
        size_t len = strnlen(rec, r.out_n - i);
        i += len + 1;
        char *sep = strchr(rec, '\x1f');
        if (!len || !sep) continue;
        *sep = 0;
        char *hash = trim(rec), *reasons = sep + 1;
        for (char *p = reasons; *p; p++)
            if (*p == '\x1e') *p = ';';
        reasons = trim(reasons);
        n_commits++;
        char shorth[13];
        snprintf(shorth, sizeof shorth, "%.12s", hash);
        size_t el = strlen(exempt_list), ml = strlen(missing);
        if (*reasons)
            snprintf(exempt_list + el, sizeof exempt_list - el, "%s%s (%s)", el ? ", " : "", shorth, reasons);
        else {
            snprintf(missing + ml, sizeof missing - ml, "%s%s", ml ? " " : "", shorth);
            n_missing++;
        }
    }
    dt_git_out_free(&r);
    if (n_commits == 0)
        return dt_strlist_addf(problems, "%s: changed but no commit in %s touches it (history "
                               "rewritten?); change one of its tests (%s)", src, range, tests);
    if (n_missing)
        return dt_strlist_addf(problems,
            "%s: changed without a change to any of its tests (%s), and %d of %d commits touching "
            "it lack a '" DT_EXEMPT_TRAILER ": <reason>' trailer (%s); change a test, or add the "
            "trailer to every commit that touches it (only when numerics are unaffected)",
            src, tests, n_missing, n_commits, missing);
    return dt_strlist_addf(log, "exempt: %s: commits %s", src, exempt_list);
}

dt_status dt_gate_run(const char *dir, const char *registry_path, const char *base_ref,
                      dt_strlist *problems, dt_strlist *log) {
    if (!base_ref[0] || base_ref[0] == '-')
        return dt_fail(DT_EINVAL, "base ref '%s' is not a valid ref name; pass a branch, tag or "
                       "commit such as origin/main", base_ref);
    /* The checkout's top directory: all git paths are relative to it. */
    dt_git_out r;
    const char *top_args[] = {"rev-parse", "--show-toplevel", NULL};
    dt_status st = dt_git_run(dir, top_args, &r);
    if (st) return st;
    if (r.exit_code) {
        char line[512];
        st = dt_fail(DT_EINVAL, "'%s' is not inside a git repository (%s); run the gate from a "
                     "git checkout or pass --root DIR", dir, dt_git_err_line(&r, line, sizeof line));
        dt_git_out_free(&r);
        return st;
    }
    char top[1024];
    snprintf(top, sizeof top, "%s", trim(r.out));
    dt_git_out_free(&r);

    char spec[600];
    snprintf(spec, sizeof spec, "%s^{commit}", base_ref);
    const char *verify[] = {"rev-parse", "--verify", "--quiet", spec, NULL};
    if ((st = dt_git_run(top, verify, &r))) return st;
    int bad_ref = r.exit_code != 0;
    char ref_hash[72];
    snprintf(ref_hash, sizeof ref_hash, "%.64s", trim(r.out));
    dt_git_out_free(&r);
    if (bad_ref)
        return dt_fail(DT_EINVAL, "base ref '%s' does not name a commit in %s; fetch it first "
                       "(git fetch origin main) or pass an existing branch, tag or commit",
                       base_ref, top);
    const char *mb_args[] = {"merge-base", base_ref, "HEAD", NULL};
    if ((st = dt_git_run(top, mb_args, &r))) return st;
    if (r.exit_code) {
        char line[512];
        st = dt_fail(DT_EINVAL, "no merge base between '%s' and HEAD (%s); does HEAD have "
                     "commits and share history with '%s'?", base_ref,
                     dt_git_err_line(&r, line, sizeof line), base_ref);
        dt_git_out_free(&r);
        return st;
    }
    char base[64];
    snprintf(base, sizeof base, "%s", trim(r.out));
    dt_git_out_free(&r);

    dt_strlist changed = {0}, dirty = {0};
    dt_registry reg = {0};
    const char *diff_base[] = {"diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", base, NULL};
    const char *diff_head[] = {"diff", "--name-only", "-z", "--no-renames", "HEAD", NULL};
    const char *untracked[] = {"ls-files", "-z", "--others", "--exclude-standard", NULL};
    if ((st = git_paths(top, diff_base, &changed, "listing changed files")) ||
        (st = git_paths(top, untracked, &changed, "listing untracked files")) ||
        (st = git_paths(top, diff_head, &dirty, "listing uncommitted changes")) ||
        (st = git_paths(top, untracked, &dirty, "listing untracked files")))
        goto done;
    dt_strlist_sort(&changed);

    char reg_path[1200];
    if (registry_path) snprintf(reg_path, sizeof reg_path, "%s", registry_path);
    else snprintf(reg_path, sizeof reg_path, "%s/%s", top, DT_REGISTRY_FILE);
    if (!dt_is_file(reg_path)) {
        st = dt_fail(DT_EIO, "registry '%s' not found; create it (format: docs/testing.md) or "
                     "pass --registry FILE", reg_path);
        goto done;
    }
    int n_problems = problems->n;
    if ((st = dt_registry_load(reg_path, &reg, problems))) goto done;
    if (problems->n > n_problems) goto done;  /* a malformed registry cannot judge anything */

    /* Rule 1: changed kernel-bearing files are registered. */
    int n_kernel = 0;
    for (int i = 0; i < changed.n; i++) {
        const char *rel = changed.items[i];
        char full[2048];
        snprintf(full, sizeof full, "%s/%s", top, rel);
        if (!dt_is_file(full)) continue;
        int is_kernel;
        dt_kernel_file kf;
        if ((st = dt_scan_file(top, rel, &is_kernel, &kf))) goto done;
        if (!is_kernel) continue;
        n_kernel++;
        if (!dt_registry_find_source(&reg, rel) &&
            (st = dt_strlist_addf(problems, "%s: kernel-bearing (%s) but not in %s; register it "
                                  "(name, sources, kind, notes, tests); this rule cannot be waived "
                                  "by a " DT_EXEMPT_TRAILER " trailer", rel, kf.why, DT_REGISTRY_FILE)))
            goto done;
    }

    /* Rule 2: changed registered sources come with a test change or an exemption. */
    int n_sources = 0;
    for (int i = 0; i < reg.n; i++) {
        const dt_reg_entry *e = &reg.entries[i];
        for (int s = 0; s < e->n_sources; s++) {
            const char *src = e->sources[s];
            if (!dt_strlist_has(&changed, src)) continue;
            n_sources++;
            const char *changed_test = NULL;
            /* only a test that CI or the GPU test script runs counts (the registry check
             * refuses others; a registry from before that rule may still list one) */
            for (int t = 0; t < e->n_tests && !changed_test; t++)
                if (dt_strlist_has(&changed, e->tests[t]) && dt_test_runner(top, e->tests[t]))
                    changed_test = e->tests[t];
            if (changed_test)
                st = dt_strlist_addf(log, "ok: %s changed with its test %s", src, changed_test);
            else if (!e->has_tests)
                st = dt_strlist_addf(log, "note: %s changed; entry '%s' has no tests yet (exempt: %s)",
                                     src, e->name ? e->name : "", e->exempt ? e->exempt : "");
            else
                st = check_exempt(top, ref_hash, src, e, dt_strlist_has(&dirty, src), problems, log);
            if (st) goto done;
        }
    }
    st = dt_strlist_addf(log, "base %s (merge base %.12s): %d changed files, %d kernel-bearing, "
                         "%d registered sources changed", base_ref, base, changed.n, n_kernel, n_sources);
done:
    dt_registry_free(&reg);
    dt_strlist_free(&changed);
    dt_strlist_free(&dirty);
    return st;
}
