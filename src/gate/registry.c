/* The kernel registry: strict parser for kernels.registry and the invariant check that ties
 * it to the tree. Format and the meaning of "references" are in registry.h. */
#include "gate/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing -------------------------------------------------------------------------- */

enum { K_NAME, K_SOURCES, K_KIND, K_NOTES, K_TESTS, K_EXEMPT, N_KEYS };
static const char *const key_names[N_KEYS] = {"name", "sources", "kind", "notes", "tests", "exempt"};

typedef struct block {
    char *val[N_KEYS];
    int line[N_KEYS];
    int first_line;
    int last_key;     /* key that a continuation line extends; -1 none */
    int any;          /* block has at least one key line */
} block;

static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Splits a value on whitespace into a heap array of heap strings. */
static dt_status split_words(const char *v, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    int cap = 0;
    while (*v) {
        while (*v && is_ws(*v)) v++;
        if (!*v) break;
        const char *b = v;
        while (*v && !is_ws(*v)) v++;
        if (*n == cap) {
            cap = cap ? 2 * cap : 4;
            char **nv = realloc(*out, (size_t)cap * sizeof *nv);
            if (!nv) return dt_fail(DT_ENOMEM, "out of memory parsing the registry");
            *out = nv;
        }
        if (!((*out)[*n] = dupn(b, (size_t)(v - b)))) return dt_fail(DT_ENOMEM, "out of memory parsing the registry");
        (*n)++;
    }
    return DT_OK;
}

/* A registered path must be relative, inside the repo and plain. Returns what is wrong. */
static const char *bad_path(const char *p) {
    if (p[0] == '/') return "is absolute; write it relative to the repo root";
    if (!strncmp(p, "./", 2)) return "starts with './'; write it as a plain relative path";
    if (strchr(p, '\\')) return "contains a backslash; use '/'";
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
            return "contains '..'; name the file inside the repo directly";
    return NULL;
}

static int good_name(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

static void block_reset(block *b) {
    for (int k = 0; k < N_KEYS; k++) free(b->val[k]);
    memset(b, 0, sizeof *b);
    b->last_key = -1;
}

static dt_status append_value(char **dst, const char *s, size_t n) {
    size_t old = *dst ? strlen(*dst) : 0;
    char *nv = realloc(*dst, old + n + 2);
    if (!nv) return dt_fail(DT_ENOMEM, "out of memory parsing the registry");
    if (old && n) nv[old++] = ' ';
    memcpy(nv + old, s, n);
    nv[old + n] = 0;
    *dst = nv;
    return DT_OK;
}

#define PROBLEM(...) do { if ((st = dt_strlist_addf(problems, __VA_ARGS__))) return st; } while (0)

/* Turns a finished block into an entry, reporting every problem with it. */
static dt_status finish_block(block *b, dt_registry *r, dt_strlist *problems) {
    dt_status st = DT_OK;
    const char *o = r->origin;
    int L = b->first_line;
    dt_reg_entry *grown = realloc(r->entries, (size_t)(r->n + 1) * sizeof *grown);
    if (!grown) return dt_fail(DT_ENOMEM, "out of memory parsing the registry");
    r->entries = grown;
    dt_reg_entry *e = &r->entries[r->n++];
    memset(e, 0, sizeof *e);
    e->line = L;
    const char *label = b->val[K_NAME] ? b->val[K_NAME] : "(unnamed)";

    for (int k = 0; k < K_TESTS; k++)
        if (!b->val[k] || !b->val[k][0])
            PROBLEM("%s:%d: entry '%s' has no %s: line; every entry needs name, sources, kind "
                    "and notes", o, b->val[k] ? b->line[k] : L, label, key_names[k]);
    if (b->val[K_NAME] && b->val[K_NAME][0]) {
        if (!good_name(b->val[K_NAME]))
            PROBLEM("%s:%d: entry name '%s' may only use letters, digits, '_', '.', '-'; rename it",
                    o, b->line[K_NAME], b->val[K_NAME]);
        for (int j = 0; j < r->n - 1; j++)
            if (r->entries[j].name && !strcmp(r->entries[j].name, b->val[K_NAME]))
                PROBLEM("%s:%d: entry name '%s' is already used at line %d; names must be unique",
                        o, b->line[K_NAME], b->val[K_NAME], r->entries[j].line);
        e->name = b->val[K_NAME];
        b->val[K_NAME] = NULL;
    }
    if (b->val[K_SOURCES]) {
        if ((st = split_words(b->val[K_SOURCES], &e->sources, &e->n_sources))) return st;
        for (int s = 0; s < e->n_sources; s++) {
            const char *why = bad_path(e->sources[s]);
            if (why) PROBLEM("%s:%d: entry '%s': source '%s' %s", o, b->line[K_SOURCES], label, e->sources[s], why);
            for (int t = 0; t < s; t++)
                if (!strcmp(e->sources[t], e->sources[s]))
                    PROBLEM("%s:%d: entry '%s' lists source '%s' twice; list it once", o,
                            b->line[K_SOURCES], label, e->sources[s]);
            for (int j = 0; j < r->n - 1; j++)
                for (int t = 0; t < r->entries[j].n_sources; t++)
                    if (!strcmp(r->entries[j].sources[t], e->sources[s]))
                        PROBLEM("%s:%d: entry '%s': source '%s' is already registered by entry '%s' "
                                "(line %d); a file belongs to one entry", o, b->line[K_SOURCES], label,
                                e->sources[s], r->entries[j].name ? r->entries[j].name : "(unnamed)",
                                r->entries[j].line);
        }
    }
    if (b->val[K_KIND]) {
        char **kinds;
        int nk;
        if ((st = split_words(b->val[K_KIND], &kinds, &nk))) return st;
        for (int k = 0; k < nk; k++) {
            unsigned bit = dt_kind_from_name(kinds[k], strlen(kinds[k]));
            if (!bit && !st)
                st = dt_strlist_addf(problems, "%s:%d: entry '%s': unknown kind '%s'; accepted: %s", o,
                                     b->line[K_KIND], label, kinds[k], dt_kind_all_names());
            e->kinds |= bit;
            free(kinds[k]);
        }
        free(kinds);
        if (st) return st;
    }
    if (b->val[K_NOTES]) {
        e->notes = b->val[K_NOTES];
        b->val[K_NOTES] = NULL;
    }
    int has_t = b->val[K_TESTS] != NULL, has_x = b->val[K_EXEMPT] != NULL;
    if (has_t && has_x)
        PROBLEM("%s:%d: entry '%s' has both tests: (line %d) and exempt: (line %d); keep tests: "
                "and delete exempt:, or the reverse", o, L, label, b->line[K_TESTS], b->line[K_EXEMPT]);
    if (!has_t && !has_x)
        PROBLEM("%s:%d: entry '%s' has neither tests: nor exempt:; list its tests, or say why it "
                "has none with exempt: <reason>", o, L, label);
    if (has_t) {
        e->has_tests = 1;
        if ((st = split_words(b->val[K_TESTS], &e->tests, &e->n_tests))) return st;
        if (!e->n_tests)
            PROBLEM("%s:%d: entry '%s' has an empty tests: line; list test paths or use exempt: <reason>",
                    o, b->line[K_TESTS], label);
        for (int t = 0; t < e->n_tests; t++) {
            const char *why = bad_path(e->tests[t]);
            if (why) PROBLEM("%s:%d: entry '%s': test '%s' %s", o, b->line[K_TESTS], label, e->tests[t], why);
        }
    }
    if (has_x) {
        if (!b->val[K_EXEMPT][0])
            PROBLEM("%s:%d: entry '%s' has an empty exempt: line; give the reason there is no test",
                    o, b->line[K_EXEMPT], label);
        e->exempt = b->val[K_EXEMPT];
        b->val[K_EXEMPT] = NULL;
    }
    return DT_OK;
}

dt_status dt_registry_parse(const char *text, const char *origin, dt_registry *out, dt_strlist *problems) {
    memset(out, 0, sizeof *out);
    snprintf(out->origin, sizeof out->origin, "%s", origin);
    block b;
    memset(&b, 0, sizeof b);
    block_reset(&b);
    dt_status st = DT_OK;
    int line = 0;
    const char *p = text;
    while (!st && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + len;
        line++;
        size_t end = len;
        while (end && is_ws(p[end - 1])) end--;
        if (end == 0) {  /* blank line: ends the entry */
            if (b.any) st = finish_block(&b, out, problems);
            block_reset(&b);
        } else if (p[0] == '#') {
            /* comment */
        } else if (p[0] == ' ' || p[0] == '\t') {
            size_t s = 0;
            while (s < end && is_ws(p[s])) s++;
            if (b.last_key < 0)
                st = dt_strlist_addf(problems, "%s:%d: indented line continues no key; start the "
                                     "line with `key:` or indent it under one", origin, line);
            else
                st = append_value(&b.val[b.last_key], p + s, end - s);
        } else {
            const char *colon = memchr(p, ':', end);
            size_t klen = colon ? (size_t)(colon - p) : 0;
            int key = -1;
            for (int k = 0; k < N_KEYS; k++)
                if (colon && strlen(key_names[k]) == klen && !memcmp(p, key_names[k], klen)) key = k;
            b.last_key = -1;
            if (!colon) {
                st = dt_strlist_addf(problems, "%s:%d: expected `key: value`, got '%.*s'", origin,
                                     line, (int)(end > 60 ? 60 : end), p);
            } else if (key < 0) {
                st = dt_strlist_addf(problems, "%s:%d: unknown key '%.*s'; keys are name, sources, "
                                     "kind, notes, tests, exempt", origin, line, (int)klen, p);
            } else if (b.val[key]) {
                st = dt_strlist_addf(problems, "%s:%d: key '%s' repeated in one entry (first at line "
                                     "%d); put all values on one line or continuation lines",
                                     origin, line, key_names[key], b.line[key]);
            } else {
                size_t s = klen + 1;
                while (s < end && is_ws(p[s])) s++;
                if (!(b.val[key] = dupn(p + s, end - s))) st = dt_fail(DT_ENOMEM, "out of memory parsing the registry");
                b.line[key] = line;
                b.last_key = key;
            }
            if (!b.any) b.first_line = line;
            b.any = 1;
        }
        p = next;
    }
    if (!st && b.any) st = finish_block(&b, out, problems);
    block_reset(&b);
    return st;
}

dt_status dt_registry_load(const char *path, dt_registry *out, dt_strlist *problems) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t n;
    dt_status st = dt_read_file(path, &text, &n);
    if (st) return st;
    if (strlen(text) != n) {
        free(text);
        return dt_fail(DT_ECORRUPT, "'%s' contains a NUL byte; the registry is plain text", path);
    }
    st = dt_registry_parse(text, path, out, problems);
    free(text);
    return st;
}

void dt_registry_free(dt_registry *r) {
    for (int i = 0; i < r->n; i++) {
        dt_reg_entry *e = &r->entries[i];
        for (int k = 0; k < e->n_sources; k++) free(e->sources[k]);
        for (int k = 0; k < e->n_tests; k++) free(e->tests[k]);
        free(e->sources);
        free(e->tests);
        free(e->name);
        free(e->notes);
        free(e->exempt);
    }
    free(r->entries);
    memset(r, 0, sizeof *r);
}

const dt_reg_entry *dt_registry_find_source(const dt_registry *r, const char *rel) {
    for (int i = 0; i < r->n; i++)
        for (int k = 0; k < r->entries[i].n_sources; k++)
            if (!strcmp(r->entries[i].sources[k], rel)) return &r->entries[i];
    return NULL;
}

int dt_reg_entry_has_test(const dt_reg_entry *e, const char *rel) {
    for (int k = 0; k < e->n_tests; k++)
        if (!strcmp(e->tests[k], rel)) return 1;
    return 0;
}

/* ---- "references" --------------------------------------------------------------------- */

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* 1 when `word` occurs in text not as part of a longer file name. */
static int mentions(const char *text, const char *word) {
    size_t m = strlen(word);
    for (const char *s = text; (s = strstr(s, word)); s++) {
        int before_ok = s == text || !(name_char(s[-1]) || s[-1] == '.' || s[-1] == '-');
        int after_ok = !(name_char(s[m]) || s[m] == '-');
        if (before_ok && after_ok) return 1;
    }
    return 0;
}

int dt_test_references_source(const char *test_text, const char *source_rel) {
    const char *base = dt_path_base(source_rel);
    if (mentions(test_text, base)) return 1;
    static const char *const suffixes[] = {"_cpu", "_cuda", "_gpu", "_omp", "_blas", "_cublas", "_nccl", "_mpi"};
    char stem[256], op[256];
    const char *dot = strrchr(base, '.');
    size_t sl = dot ? (size_t)(dot - base) : strlen(base);
    if (sl == 0 || sl >= sizeof stem) return 0;
    memcpy(stem, base, sl);
    stem[sl] = 0;
    snprintf(op, sizeof op, "%s", stem);
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        size_t m = strlen(suffixes[k]);
        if (sl > m && !strcmp(stem + sl - m, suffixes[k])) {
            op[sl - m] = 0;
            break;
        }
    }
    /* Look at every #include line for a header named stem.h/.cuh or op.h/.cuh. */
    for (const char *p = test_text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q != '#') continue;
        q++;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "include", 7)) continue;
        q += 7;
        while (*q == ' ' || *q == '\t') q++;
        char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
        if (!close) continue;
        const char *b = ++q;
        while (*q && *q != close && *q != '\n') q++;
        if (*q != close) continue;
        char inc[512];
        snprintf(inc, sizeof inc, "%.*s", (int)(q - b), b);
        const char *ib = dt_path_base(inc);
        const char *cands[] = {stem, op};
        for (int c = 0; c < 2; c++) {
            size_t cl = strlen(cands[c]);
            if (!strncmp(ib, cands[c], cl) && (!strcmp(ib + cl, ".h") || !strcmp(ib + cl, ".cuh")))
                return 1;
        }
    }
    return 0;
}

/* ---- which tests run ------------------------------------------------------------------ */

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* 1 when `script` (its text) runs `rel` by name: a line whose first words are `bash rel`
 * (then an end of line, a blank or a `;`), leading blanks and an `if` allowed. */
static int script_runs(const char *script, const char *rel) {
    size_t m = strlen(rel);
    for (const char *p = script; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (!strncmp(q, "if ", 3)) q += 3;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "bash ", 5)) continue;
        q += 5;
        while (*q == ' ' || *q == '\t') q++;
        if (!strncmp(q, rel, m) && (q[m] == 0 || q[m] == '\n' || q[m] == ' ' || q[m] == '\t' || q[m] == ';'))
            return 1;
    }
    return 0;
}

const char *dt_test_runner(const char *root, const char *rel) {
    if (strncmp(rel, "tests/", 6)) return NULL;
    const char *base = dt_path_base(rel);
    if (!strncmp(base, "test_", 5) && has_suffix(base, ".c")) return "CI (make test)";
    if (!strncmp(base, "test_", 5) && has_suffix(base, ".sh")) return "CI (tests/run.sh)";
    if (!strncmp(rel, "tests/gpu/", 10) && !strchr(rel + 10, '/') && !strncmp(base, "test_", 5) &&
        has_suffix(base, ".cu"))
        return "the GPU test script";
    char path[1024];
    if (dt_path_join(path, sizeof path, root, DT_GPU_TEST_SCRIPT)) return NULL;
    char *text;
    size_t n;
    if (!dt_is_file(path) || dt_read_file(path, &text, &n)) return NULL;
    int runs = script_runs(text, rel);
    free(text);
    return runs ? "the GPU test script" : NULL;
}

/* ---- the invariant -------------------------------------------------------------------- */

dt_status dt_registry_check(const char *root, const dt_registry *r, dt_strlist *problems) {
    dt_status st = DT_OK;
    const char *o = r->origin;
    char path[1024];
    for (int i = 0; i < r->n; i++) {
        const dt_reg_entry *e = &r->entries[i];
        const char *label = e->name ? e->name : "(unnamed)";
        for (int s = 0; s < e->n_sources; s++) {
            if ((st = dt_path_join(path, sizeof path, root, e->sources[s]))) return st;
            if (!dt_is_file(path))
                PROBLEM("%s:%d: entry '%s': source '%s' does not exist; fix the path, or remove it "
                        "(and the entry if it was the last source)", o, e->line, label, e->sources[s]);
        }
        for (int t = 0; t < e->n_tests; t++) {
            if ((st = dt_path_join(path, sizeof path, root, e->tests[t]))) return st;
            if (!dt_is_file(path)) {
                PROBLEM("%s:%d: entry '%s': test '%s' does not exist; fix the path or write the test "
                        "(until then use exempt: instead of tests:)", o, e->line, label, e->tests[t]);
                continue;
            }
            if (!dt_test_runner(root, e->tests[t]))
                PROBLEM("%s:%d: entry '%s': test '%s' is run neither by CI (make test: tests/.../test_*.c, "
                        "tests/run.sh: tests/.../test_*.sh) nor by the GPU test script (%s: "
                        "tests/gpu/test_*.cu and the scripts it runs by name); a benchmark is not a test: "
                        "list a test that runs, or make this one a test", o, e->line, label, e->tests[t],
                        DT_GPU_TEST_SCRIPT);
            char *text;
            size_t n;
            if ((st = dt_read_file(path, &text, &n))) return st;
            for (int s = 0; s < e->n_sources; s++)
                if (!dt_test_references_source(text, e->sources[s]) &&
                    (st = dt_strlist_addf(problems,
                        "%s:%d: entry '%s': test '%s' does not reference source '%s'; mention "
                        "'%s' in the test (a comment saying what it tests will do) or #include "
                        "the source's header", o, e->line, label, e->tests[t], e->sources[s],
                        dt_path_base(e->sources[s]))))
                    break;
            free(text);
            if (st) return st;
        }
    }
    dt_kernel_list kl = {0};
    if ((st = dt_scan_tree(root, &kl))) {
        dt_kernel_list_free(&kl);
        return st;
    }
    for (int k = 0; !st && k < kl.n; k++) {
        const dt_kernel_file *f = &kl.v[k];
        const dt_reg_entry *e = dt_registry_find_source(r, f->path);
        if (!e) {
            st = dt_strlist_addf(problems, "%s: kernel-bearing (%s) but not registered; add an entry "
                                 "to %s with name, sources, kind, notes and tests (or exempt: "
                                 "<reason>)", f->path, f->why, o);
        } else if (f->kinds & ~e->kinds) {
            char missing[256], have[256];
            dt_kind_names(f->kinds & ~e->kinds, missing, sizeof missing);
            dt_kind_names(e->kinds, have, sizeof have);
            st = dt_strlist_addf(problems, "%s: its content implies kind '%s' (%s) but entry '%s' "
                                 "(%s:%d) lists only '%s'; add it to the kind: line",
                                 f->path, missing, f->why, e->name ? e->name : "(unnamed)", o,
                                 e->line, have);
        }
    }
    dt_kernel_list_free(&kl);
    return st;
}

dt_status dt_registry_check_tree(const char *root, const char *registry_path, dt_strlist *problems) {
    char path[1024];
    dt_status st;
    if (registry_path) snprintf(path, sizeof path, "%s", registry_path);
    else if ((st = dt_path_join(path, sizeof path, root, DT_REGISTRY_FILE))) return st;
    if (!dt_is_file(path))
        return dt_fail(DT_EIO, "registry '%s' not found; run from the repo root (or pass --root "
                       "DIR) or create it (format: docs/testing.md)", path);
    dt_registry r;
    if ((st = dt_registry_load(path, &r, problems)) == DT_OK) st = dt_registry_check(root, &r, problems);
    dt_registry_free(&r);
    return st;
}
