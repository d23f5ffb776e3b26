/* Kernel-bearing file detection: a small C/CUDA lexer that blanks comments, literals and
 * #include lines, a table of call-site patterns, and the walk over the product tree.
 * See scan.h for what counts and why. */
#include "gate/scan.h"

#include "gate/gate_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- kinds ---------------------------------------------------------------------------- */

static const char *const kind_names[] = {
    "cpu-serial", "cpu-omp", "cpu-pthread", "cpu-atomic", "cuda", "blas-call",
    "cublas-call", "cudnn-call", "nccl-call", "mpi-call", "dispatch", "autotune",
};
enum { N_KINDS = (int)(sizeof kind_names / sizeof kind_names[0]) };

unsigned dt_kind_from_name(const char *name, size_t n) {
    for (int i = 0; i < N_KINDS; i++)
        if (strlen(kind_names[i]) == n && !memcmp(kind_names[i], name, n)) return 1u << i;
    return 0;
}

const char *dt_kind_name(unsigned bit) {
    for (int i = 0; i < N_KINDS; i++)
        if (bit == 1u << i) return kind_names[i];
    return NULL;
}

void dt_kind_names(unsigned kinds, char *out, size_t cap) {
    size_t len = 0;
    if (cap) out[0] = 0;
    for (int i = 0; i < N_KINDS; i++) {
        if (!(kinds & (1u << i))) continue;
        int w = snprintf(out + len, cap - len, "%s%s", len ? " " : "", kind_names[i]);
        if (w < 0 || (size_t)w >= cap - len) return;
        len += (size_t)w;
    }
}

const char *dt_kind_all_names(void) {
    return "cpu-serial cpu-omp cpu-pthread cpu-atomic cuda blas-call cublas-call cudnn-call "
           "nccl-call mpi-call dispatch autotune";
}

/* ---- lexer ---------------------------------------------------------------------------- */

static int is_id(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_id_start(char c) { return is_id(c) && !(c >= '0' && c <= '9'); }
static int is_hspace(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }

/* Blanks out[from, to) except newlines. */
static void blank(char *out, size_t from, size_t to) {
    for (size_t k = from; k < to; k++)
        if (out[k] != '\n') out[k] = ' ';
}

/* A backslash-newline (or backslash-CR-LF) splice starting at i: returns its length, or 0. */
static size_t splice_at(const char *s, size_t n, size_t i) {
    if (s[i] != '\\') return 0;
    if (i + 1 < n && s[i + 1] == '\n') return 2;
    if (i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') return 3;
    return 0;
}

/* End (exclusive) of a // comment starting at i: the newline that is not spliced. */
static size_t line_comment_end(const char *s, size_t n, size_t i) {
    while (i < n && s[i] != '\n') {
        size_t sp = splice_at(s, n, i);
        i += sp ? sp : 1;
    }
    return i;
}

/* End (exclusive) of a block comment starting at i (at the slash-star). */
static size_t block_comment_end(const char *s, size_t n, size_t i) {
    for (i += 2; i + 1 < n; i++)
        if (s[i] == '*' && s[i + 1] == '/') return i + 2;
    return n;
}

/* End (exclusive) of a quoted literal starting at i (s[i] is the quote): the matching
 * unescaped quote, or the first unspliced newline for an unterminated literal (so a stray
 * quote cannot swallow the rest of the file). */
static size_t quoted_end(const char *s, size_t n, size_t i) {
    char q = s[i];
    for (i++; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) { i++; continue; }
        if (s[i] == '\n') return i;
        if (s[i] == q) return i + 1;
    }
    return n;
}

/* The identifier that ends right before position `end` in buf (start index in *start). */
static size_t ident_before(const char *buf, size_t end, size_t *start) {
    size_t b = end;
    while (b > 0 && is_id(buf[b - 1])) b--;
    *start = b;
    return end - b;
}

/* 1 when the string literal at i is the operand of _Pragma: `_Pragma ( "..."`. */
static int is_pragma_operand(const char *out, size_t i) {
    size_t k = i;
    while (k > 0 && (is_hspace(out[k - 1]) || out[k - 1] == '\n')) k--;
    if (k == 0 || out[k - 1] != '(') return 0;
    k--;
    while (k > 0 && (is_hspace(out[k - 1]) || out[k - 1] == '\n')) k--;
    size_t b, len = ident_before(out, k, &b);
    return len == 7 && !memcmp(out + b, "_Pragma", 7);
}

/* For a '"' at i preceded by a raw-string prefix (R, LR, uR, UR, u8R), the end of the raw
 * literal; 0 when it is not a raw string. */
static size_t raw_string_end(const char *s, size_t n, size_t i) {
    size_t b, len = ident_before(s, i, &b);
    if (!len || s[i - 1] != 'R') return 0;
    if (!(len == 1 || (len == 2 && strchr("LuU", s[b])) || (len == 3 && !memcmp(s + b, "u8", 2))))
        return 0;
    char delim[20];
    size_t d = 0, k = i + 1;
    while (k < n && s[k] != '(' && d < 16) delim[d++] = s[k++];
    if (k >= n || s[k] != '(') return 0;
    for (k++; k < n; k++) {
        if (s[k] == ')' && k + 1 + d < n && !memcmp(s + k + 1, delim, d) && s[k + 1 + d] == '"')
            return k + 2 + d;
    }
    return n;
}

/* 1 when the apostrophe at i is a C++14 digit separator (inside a number like 1'000). */
static int is_digit_separator(const char *s, size_t i) {
    size_t b = i;
    while (b > 0 && (is_id(s[b - 1]) || s[b - 1] == '.' || s[b - 1] == '\'')) b--;
    return b < i && s[b] >= '0' && s[b] <= '9';
}

/* After a '#' at i (first non-blank on its line), 1 when the directive is include,
 * include_next or import. */
static int is_include_directive(const char *s, size_t n, size_t i) {
    size_t k = i + 1;
    while (k < n && is_hspace(s[k])) k++;
    size_t b = k;
    while (k < n && is_id(s[k])) k++;
    size_t len = k - b;
    return (len == 7 && !memcmp(s + b, "include", 7)) ||
           (len == 12 && !memcmp(s + b, "include_next", 12)) ||
           (len == 6 && !memcmp(s + b, "import", 6));
}

char *dt_scan_strip(const char *src, size_t n) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, src, n);
    out[n] = 0;
    int line_start = 1;  /* only blanks and comments so far on this logical line */
    int in_include = 0;  /* inside an #include line: blank all code to its end */
    size_t i = 0;
    while (i < n) {
        char c = src[i];
        size_t sp = splice_at(src, n, i);
        if (sp) {
            if (in_include) blank(out, i, i + sp);
            i += sp;
            continue;
        }
        if (c == '\n') {
            line_start = 1;
            in_include = 0;
            i++;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            size_t e = line_comment_end(src, n, i);
            blank(out, i, e);
            i = e;
            continue;
        }
        if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            size_t e = block_comment_end(src, n, i);
            blank(out, i, e);
            i = e;
            continue;
        }
        if (is_hspace(c)) {
            i++;
            continue;
        }
        if (c == '#' && line_start && is_include_directive(src, n, i)) in_include = 1;
        line_start = 0;
        if (c == '"') {
            size_t e = raw_string_end(src, n, i);
            if (!e) e = quoted_end(src, n, i);
            if (in_include || !is_pragma_operand(out, i)) blank(out, i, e);
            i = e;
            continue;
        }
        if (c == '\'' && !is_digit_separator(src, i)) {
            size_t e = quoted_end(src, n, i);
            blank(out, i, e);
            i = e;
            continue;
        }
        if (in_include) out[i] = ' ';
        i++;
    }
    return out;
}

/* ---- patterns ------------------------------------------------------------------------- */

static int starts(const char *id, size_t n, const char *p) {
    size_t m = strlen(p);
    return n >= m && !memcmp(id, p, m);
}
static int ends(const char *id, size_t n, const char *p) {
    size_t m = strlen(p);
    return n >= m && !memcmp(id + n - m, p, m);
}
static int equals(const char *id, size_t n, const char *p) {
    return strlen(p) == n && !memcmp(id, p, n);
}
static int contains(const char *id, size_t n, const char *p) {
    size_t m = strlen(p);
    for (size_t k = 0; k + m <= n; k++)
        if (!memcmp(id + k, p, m)) return 1;
    return 0;
}
/* BLAS routines whose result is a reduction (GEMM/GEMV/dot/norm/sum of magnitudes). */
static int reducing_blas_name(const char *id, size_t n) {
    return contains(id, n, "gemm") || contains(id, n, "Gemm") || contains(id, n, "gemv") ||
           contains(id, n, "Gemv") || contains(id, n, "dot") || contains(id, n, "nrm2") ||
           contains(id, n, "asum");
}

/* The kind an identifier implies when used as `id(` (or, for __global__, bare), else 0.
 * *needs_call says whether the next token must be '('. */
static unsigned classify_ident(const char *id, size_t n, int *needs_call) {
    static const char *const mpi[] = {
        "MPI_Allreduce", "MPI_Reduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
        "MPI_Iallreduce", "MPI_Ireduce", "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block",
        "MPI_Reduce_local", "MPI_Scan", "MPI_Exscan", "MPI_Accumulate",
    };
    static const char *const nccl[] = {"ncclAllReduce", "ncclReduceScatter", "ncclReduce"};
    *needs_call = 1;
    if (equals(id, n, "__global__")) {
        *needs_call = 0;
        return DT_KIND_CUDA;
    }
    if (n > 6 && starts(id, n, "atomic") && id[6] >= 'A' && id[6] <= 'Z') return DT_KIND_CUDA;
    if (starts(id, n, "atomic_fetch_") || starts(id, n, "atomic_compare_exchange")) return DT_KIND_CPU_ATOMIC;
    if ((starts(id, n, "__atomic_") || starts(id, n, "__sync_")) && contains(id, n, "fetch"))
        return DT_KIND_CPU_ATOMIC;
    if (equals(id, n, "pthread_create")) return DT_KIND_CPU_PTHREAD;
    if (equals(id, n, "cublasLtMatmul")) return DT_KIND_CUBLAS;
    if (equals(id, n, "cublasLtMatmulAlgoGetHeuristic")) return DT_KIND_CUBLAS;
    if (starts(id, n, "cublas") && !starts(id, n, "cublasLt") && reducing_blas_name(id, n))
        return DT_KIND_CUBLAS;
    if (starts(id, n, "cblas_") && reducing_blas_name(id, n)) return DT_KIND_BLAS;
    if (starts(id, n, "cudnn") &&
        (ends(id, n, "Execute") || contains(id, n, "Convolution") || contains(id, n, "Find")))
        return DT_KIND_CUDNN;
    for (size_t k = 0; k < sizeof nccl / sizeof nccl[0]; k++)
        if (equals(id, n, nccl[k])) return DT_KIND_NCCL;
    for (size_t k = 0; k < sizeof mpi / sizeof mpi[0]; k++)
        if (equals(id, n, mpi[k])) return DT_KIND_MPI;
    return 0;
}

/* Skips blanks, newlines and splices from i. */
static size_t skip_ws(const char *s, size_t n, size_t i, int *line) {
    while (i < n) {
        if (s[i] == '\n') (*line)++;
        else if (s[i] == '\\' && splice_at(s, n, i)) {
            i += splice_at(s, n, i) - 1;
            (*line)++;
        } else if (!is_hspace(s[i])) break;
        i++;
    }
    return i;
}

/* Inspects the text of an OpenMP pragma (what follows `pragma`, or the _Pragma string
 * contents) for a clause that makes the order of accumulation depend on the schedule.
 * Returns the clause name or NULL. */
static const char *omp_racing_clause(const char *t, size_t n) {
    size_t i = 0;
    int dummy = 0;
    i = skip_ws(t, n, i, &dummy);
    if (!(i + 3 <= n && !memcmp(t + i, "omp", 3) && (i + 3 == n || !is_id(t[i + 3])))) return NULL;
    i += 3;
    while (i < n) {
        if (!is_id_start(t[i])) { i++; continue; }
        size_t b = i;
        while (i < n && is_id(t[i])) i++;
        const char *id = t + b;
        size_t len = i - b;
        if (equals(id, len, "atomic")) return "atomic";
        if (equals(id, len, "critical")) return "critical";
        if (equals(id, len, "reduction") || ends(id, len, "_reduction")) {
            size_t k = skip_ws(t, n, i, &dummy);
            if (k < n && t[k] == '(') return "reduction(";
        }
    }
    return NULL;
}

static void add_hit(dt_scan_hit *hits, int max, int *count, const char *what, unsigned kind, int line) {
    if (*count < max) {
        snprintf(hits[*count].what, sizeof hits[*count].what, "%s", what);
        hits[*count].kind = kind;
        hits[*count].line = line;
    }
    (*count)++;
}

/* End (exclusive) of the logical line starting at i (splices continue it). */
static size_t logical_line_end(const char *s, size_t n, size_t i) {
    while (i < n && s[i] != '\n') {
        size_t sp = splice_at(s, n, i);
        i += sp ? sp : 1;
    }
    return i;
}

dt_status dt_scan_text(const char *src, size_t n, dt_scan_hit *hits, int max, int *count) {
    *count = 0;
    char *s = dt_scan_strip(src, n);
    if (!s) return dt_fail(DT_ENOMEM, "out of memory stripping a %zu-byte source", n);
    int line = 1, line_start = 1;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\n') {
            line++;
            line_start = 1;
            i++;
            continue;
        }
        size_t sp = splice_at(s, n, i);
        if (sp) {
            line++;
            i += sp;
            continue;
        }
        if (is_hspace(c)) {
            i++;
            continue;
        }
        if (c == '#' && line_start) {
            /* A directive: only #pragma omp matters; the rest are left to the identifier
             * scan (a macro body can hold a call site). */
            size_t k = i + 1;
            while (k < n && is_hspace(s[k])) k++;
            if (k + 6 <= n && !memcmp(s + k, "pragma", 6) && (k + 6 == n || !is_id(s[k + 6]))) {
                size_t e = logical_line_end(s, n, k + 6);
                const char *clause = omp_racing_clause(s + k + 6, e - k - 6);
                if (clause) {
                    char what[72];
                    snprintf(what, sizeof what, "#pragma omp ... %s", clause);
                    add_hit(hits, max, count, what, DT_KIND_CPU_OMP, line);
                }
                for (size_t m = i; m < e; m++)
                    if (s[m] == '\n') line++;
                i = e;
                continue;
            }
        }
        line_start = 0;
        if (c >= '0' && c <= '9') {  /* a number: skip it whole so 0x1fatomicAdd is not a name */
            while (i < n && (is_id(s[i]) || s[i] == '.' || s[i] == '\'')) i++;
            continue;
        }
        if (!is_id_start(c)) {
            i++;
            continue;
        }
        size_t b = i;
        while (i < n && is_id(s[i])) i++;
        const char *id = s + b;
        size_t len = i - b;
        int id_line = line;
        if (equals(id, len, "_Pragma")) {
            int l2 = line;
            size_t k = skip_ws(s, n, i, &l2);
            if (k < n && s[k] == '(') {
                k = skip_ws(s, n, k + 1, &l2);
                if (k < n && s[k] == '"') {
                    size_t e = quoted_end(s, n, k);
                    size_t body_end = (e > k + 1 && s[e - 1] == '"') ? e - 1 : e;
                    const char *clause = omp_racing_clause(s + k + 1, body_end - k - 1);
                    if (clause) {
                        char what[72];
                        snprintf(what, sizeof what, "_Pragma(\"omp ... %s\")", clause);
                        add_hit(hits, max, count, what, DT_KIND_CPU_OMP, id_line);
                    }
                }
            }
            continue;
        }
        int needs_call;
        unsigned kind = classify_ident(id, len, &needs_call);
        if (!kind) continue;
        if (needs_call) {
            int l2 = line;
            size_t k = skip_ws(s, n, i, &l2);
            if (k >= n || s[k] != '(') continue;
        }
        char what[72];
        snprintf(what, sizeof what, "%.*s%s", (int)(len > 64 ? 64 : len), id, needs_call ? "(" : "");
        add_hit(hits, max, count, what, kind, id_line);
    }
    free(s);
    return DT_OK;
}

/* ---- paths and the tree --------------------------------------------------------------- */

static int has_ext(const char *rel, const char *ext) {
    size_t n = strlen(rel), m = strlen(ext);
    return n > m && !strcmp(rel + n - m, ext);
}

static int is_cuda_path(const char *rel) { return has_ext(rel, ".cu") || has_ext(rel, ".cuh"); }
static int is_header_path(const char *rel) { return has_ext(rel, ".h") || has_ext(rel, ".hpp"); }

int dt_scan_is_product_source(const char *rel) {
    static const char *const exts[] = {".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".cxx", ".hpp"};
    if (strncmp(rel, "src/", 4) && strncmp(rel, "include/", 8) && strncmp(rel, "tools/", 6))
        return 0;
    for (size_t k = 0; k < sizeof exts / sizeof exts[0]; k++)
        if (has_ext(rel, exts[k])) return 1;
    return 0;
}

const char *dt_scan_place_reason(const char *rel) {
    static const char *const dirs[] = {"src/ops/", "src/optim/", "src/dist/"};
    static const char *const reasons[] = {
        "in kernel directory src/ops/", "in kernel directory src/optim/",
        "in kernel directory src/dist/"};
    if (!dt_scan_is_product_source(rel)) return NULL;
    if (is_cuda_path(rel)) return "CUDA source";
    if (is_header_path(rel)) return NULL;
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++)
        if (!strncmp(rel, dirs[k], strlen(dirs[k]))) return reasons[k];
    return NULL;
}

dt_status dt_scan_file(const char *root, const char *rel, int *is_kernel, dt_kernel_file *out) {
    *is_kernel = 0;
    if (!dt_scan_is_product_source(rel)) return DT_OK;
    char path[1024];
    dt_status st = dt_path_join(path, sizeof path, root, rel);
    if (st) return st;
    char *text;
    size_t n;
    if ((st = dt_read_file(path, &text, &n))) return st;
    dt_scan_hit hits[64];
    int count;
    st = dt_scan_text(text, n, hits, 64, &count);
    free(text);
    if (st) return dt_fail_context(st, "scanning '%s'", path);
    const char *place = dt_scan_place_reason(rel);
    if (!place && !count) return DT_OK;
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", rel);
    for (int k = 0; k < count && k < 64; k++) out->kinds |= hits[k].kind;
    if (place && count)
        snprintf(out->why, sizeof out->why, "%s; `%s` at line %d", place, hits[0].what, hits[0].line);
    else if (place)
        snprintf(out->why, sizeof out->why, "%s", place);
    else
        snprintf(out->why, sizeof out->why, "`%s` at line %d", hits[0].what, hits[0].line);
    *is_kernel = 1;
    return DT_OK;
}

static dt_status list_push(dt_kernel_list *l, const dt_kernel_file *f) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        dt_kernel_file *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return dt_fail(DT_ENOMEM, "out of memory listing kernel files");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *f;
    return DT_OK;
}

/* Recursively classifies every file under root/rel_dir. */
static dt_status walk(const char *root, const char *rel_dir, dt_kernel_list *out) {
    char path[1024];
    dt_status st = dt_path_join(path, sizeof path, root, rel_dir);
    if (st) return st;
    DIR *d = opendir(path);
    if (!d) return dt_fail(DT_EIO, "cannot list directory '%s'", path);
    dt_strlist names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && (st = dt_strlist_addf(&names, "%s", e->d_name))) break;
    closedir(d);
    dt_strlist_sort(&names);
    for (int k = 0; !st && k < names.n; k++) {
        char rel[600], full[1024];
        if (snprintf(rel, sizeof rel, "%s/%s", rel_dir, names.items[k]) >= (int)sizeof rel) {
            st = dt_fail(DT_EINVAL, "path '%s/%s' is too long", rel_dir, names.items[k]);
            break;
        }
        if ((st = dt_path_join(full, sizeof full, root, rel))) break;
        struct stat sb;
        if (lstat(full, &sb)) continue;  /* vanished while listing */
        if (S_ISDIR(sb.st_mode)) {
            st = walk(root, rel, out);
        } else if (S_ISREG(sb.st_mode)) {
            int is_kernel;
            dt_kernel_file f;
            st = dt_scan_file(root, rel, &is_kernel, &f);
            if (!st && is_kernel) st = list_push(out, &f);
        }
    }
    dt_strlist_free(&names);
    return st;
}

dt_status dt_scan_tree(const char *root, dt_kernel_list *out) {
    static const char *const tops[] = {"src", "include", "tools"};
    for (size_t k = 0; k < sizeof tops / sizeof tops[0]; k++) {
        char path[1024];
        dt_status st = dt_path_join(path, sizeof path, root, tops[k]);
        if (st) return st;
        struct stat sb;
        if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) continue;
        if ((st = walk(root, tops[k], out))) return st;
    }
    return DT_OK;
}

void dt_kernel_list_free(dt_kernel_list *l) {
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
