/* trace-diff engine: pairs rank files, aligns events by key, classifies mismatches (see
 * diff.h). Reporting lives in diff_report.c. */
#include "trace/diff.h"

#include "core/digest.h"
#include "trace/reader.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- rank file discovery ------------------------------------------------------------ */

typedef struct rank_path { int rank; char path[4096]; } rank_path;

/* "rank_000123.trace" -> 123; -1 for any other name. */
static int rank_of_name(const char *n) {
    if (strncmp(n, "rank_", 5) != 0) return -1;
    const char *p = n + 5;
    long r = 0;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        r = r * 10 + (*p - '0');
        if (r > 100000000) return -1;
        p++;
        digits++;
    }
    return digits > 0 && !strcmp(p, ".trace") ? (int)r : -1;
}

static int cmp_rank(const void *x, const void *y) {
    const rank_path *a = x, *b = y;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Lists the rank files of a capture: a directory's rank_*.trace files, or one file (its
 * rank read from its header). */
static dt_status list_ranks(const char *what, const char *path, int allow_unclosed,
                            rank_path **out, int *n) {
    *out = NULL;
    *n = 0;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dt_fail(DT_EINVAL, "trace %s '%s': %s", what, path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        dt_trace_file f;
        dt_status st = dt_trace_file_load(path, allow_unclosed, &f);
        if (st) return st;
        *out = malloc(sizeof **out);
        if (!*out) { dt_trace_file_free(&f); return dt_fail(DT_ENOMEM, "out of memory"); }
        (*out)[0].rank = f.rank;
        snprintf((*out)[0].path, sizeof (*out)[0].path, "%s", path);
        *n = 1;
        dt_trace_file_free(&f);
        return DT_OK;
    }
    DIR *d = opendir(path);
    if (!d) return dt_fail(DT_EIO, "cannot list trace dir %s: %s", path, strerror(errno));
    int cap = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        int r = rank_of_name(ent->d_name);
        if (r < 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            rank_path *np = realloc(*out, (size_t)cap * sizeof *np);
            if (!np) { closedir(d); free(*out); *out = NULL; return dt_fail(DT_ENOMEM, "out of memory"); }
            *out = np;
        }
        (*out)[*n].rank = r;
        snprintf((*out)[*n].path, sizeof (*out)[*n].path, "%s/%s", path, ent->d_name);
        (*n)++;
    }
    closedir(d);
    if (*n == 0)
        return dt_fail(DT_EINVAL, "trace %s '%s' holds no rank_NNNNNN.trace files; pass the "
                       "--trace-dir of a traced run", what, path);
    qsort(*out, (size_t)*n, sizeof **out, cmp_rank);
    for (int i = 1; i < *n; i++)
        if ((*out)[i].rank == (*out)[i - 1].rank)
            return dt_fail(DT_EINVAL, "trace %s '%s' has two files for rank %d (%s, %s)", what,
                           path, (*out)[i].rank, (*out)[i - 1].path, (*out)[i].path);
    return DT_OK;
}

/* ---- event keys --------------------------------------------------------------------- */

static uint64_t key_hash(const dt_trace_rec *e) {
    uint64_t h = dt_xxh64(e->scope, strlen(e->scope), (uint64_t)e->step);
    h = dt_xxh64(e->op, strlen(e->op), h ^ ((uint64_t)(uint32_t)e->micro << 32 | e->occurrence));
    return h;
}

static int key_eq(const dt_trace_rec *a, const dt_trace_rec *b) {
    return a->step == b->step && a->micro == b->micro && a->occurrence == b->occurrence &&
           !strcmp(a->scope, b->scope) && !strcmp(a->op, b->op);
}

/* Open-addressing map from event key to index in a file's events (-1 = empty). */
typedef struct keymap { long *slot; size_t cap; const dt_trace_file *f; } keymap;

static dt_status keymap_build(keymap *m, const dt_trace_file *f) {
    m->f = f;
    m->cap = 16;
    while (m->cap < 2 * f->nevents + 16) m->cap *= 2;
    m->slot = malloc(m->cap * sizeof *m->slot);
    if (!m->slot) return dt_fail(DT_ENOMEM, "out of memory aligning %s", f->path);
    for (size_t i = 0; i < m->cap; i++) m->slot[i] = -1;
    for (size_t i = 0; i < f->nevents; i++) {
        const dt_trace_rec *e = &f->events[i];
        size_t j = (size_t)key_hash(e) & (m->cap - 1);
        for (; m->slot[j] >= 0; j = (j + 1) & (m->cap - 1)) {
            if (key_eq(&f->events[m->slot[j]], e)) {
                free(m->slot);
                m->slot = NULL;
                return dt_fail(DT_ECORRUPT, "trace %s is malformed at byte offset %llu: "
                               "event step %lld micro %d %s/%s #%u appears twice",
                               f->path, (unsigned long long)e->offset, (long long)e->step,
                               e->micro, e->scope, e->op, e->occurrence);
            }
        }
        m->slot[j] = (long)i;
    }
    return DT_OK;
}

static long keymap_find(const keymap *m, const dt_trace_rec *e) {
    for (size_t j = (size_t)key_hash(e) & (m->cap - 1); m->slot[j] >= 0; j = (j + 1) & (m->cap - 1))
        if (key_eq(&m->f->events[m->slot[j]], e)) return m->slot[j];
    return -1;
}

static void copy_key(dt_trace_key *k, const dt_trace_rec *e, long index) {
    k->step = e->step;
    k->micro = e->micro;
    k->occurrence = e->occurrence;
    k->phase = e->phase;
    k->level = e->level;
    k->index = index;
    snprintf(k->scope, sizeof k->scope, "%s", e->scope);
    snprintf(k->op, sizeof k->op, "%s", e->op);
    snprintf(k->variant, sizeof k->variant, "%s", e->variant);
}

/* ---- tensor comparison -------------------------------------------------------------- */

static void layout_str(char *buf, size_t n, const dt_trace_rec_tensor *t) {
    if (!t) { snprintf(buf, n, "(absent)"); return; }
    int w = snprintf(buf, n, "%s:%s[", t->name, dt_trace_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && w > 0 && (size_t)w < n; d++)
        w += snprintf(buf + w, n - (size_t)w, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

static int same_layout(const dt_trace_rec_tensor *a, const dt_trace_rec_tensor *b) {
    if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->numel != b->numel)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

int dt_trace_tensor_differs(const dt_trace_rec_tensor *a, const dt_trace_rec_tensor *b) {
    if (!a || !b || !same_layout(a, b) || a->digest != b->digest) return 1;
    if (a->nchunks != b->nchunks) return 1;
    return a->nchunks && memcmp(a->chunks, b->chunks, 8 * (size_t)a->nchunks) != 0;
}

/* Compares one side (inputs or outputs) of two aligned events; fills details into r when
 * `keep` (the first mismatch). Returns 1 if any tensor differs. */
static int side_differs(const dt_trace_file *fa, const dt_trace_rec *a, const dt_trace_file *fb,
                        const dt_trace_rec *b, int outputs, dt_trace_rank_result *r, int keep) {
    int na = outputs ? a->nout : a->nin, nb = outputs ? b->nout : b->nin;
    int n = na > nb ? na : nb, any = 0;
    for (int i = 0; i < n; i++) {
        const dt_trace_rec_tensor *ta = i < na ? (outputs ? dt_trace_out(fa, a, i) : dt_trace_in(fa, a, i)) : NULL;
        const dt_trace_rec_tensor *tb = i < nb ? (outputs ? dt_trace_out(fb, b, i) : dt_trace_in(fb, b, i)) : NULL;
        if (!dt_trace_tensor_differs(ta, tb)) continue;
        any = 1;
        if (!keep) continue;
        r->ntensors_total++;
        if (r->ntensors == DT_DIFF_MAX_TENSORS) continue;
        dt_trace_tensor_diff *d = &r->tensors[r->ntensors++];
        memset(d, 0, sizeof *d);
        d->is_output = outputs;
        d->index = i;
        snprintf(d->name, sizeof d->name, "%s", ta ? ta->name : tb->name);
        d->digest_a = ta ? ta->digest : 0;
        d->digest_b = tb ? tb->digest : 0;
        d->layout_differs = !ta || !tb || !same_layout(ta, tb);
        layout_str(d->layout_a, sizeof d->layout_a, ta);
        layout_str(d->layout_b, sizeof d->layout_b, tb);
        if (ta && tb && ta->nchunks && ta->nchunks == tb->nchunks &&
            ta->rows_per_chunk == tb->rows_per_chunk) {
            d->rows = ta->rows;
            d->rows_per_chunk = ta->rows_per_chunk;
            for (uint32_t c = 0; c < ta->nchunks; c++) {
                if (dt_trace_chunk_digest(ta, c) == dt_trace_chunk_digest(tb, c)) continue;
                if (d->nfirst_rows < DT_DIFF_MAX_ROWS)
                    d->first_rows[d->nfirst_rows++] = (int64_t)c * ta->rows_per_chunk;
                d->chunks_differ++;
            }
        }
    }
    return any;
}

/* 1 if event e is a coarser event around the first mismatch k: same step and micro-batch,
 * a lower (coarser) level, and a scope that is k's scope or a path prefix of it. Such a
 * module event completes after the ops inside it, so its outputs differ because of them. */
static int encloses(const dt_trace_rec *e, const dt_trace_key *k) {
    if (e->step != k->step || e->micro != k->micro || e->level >= k->level) return 0;
    size_t n = strlen(e->scope);
    if (n == 0) return 1;
    return !strncmp(e->scope, k->scope, n) && (k->scope[n] == 0 || k->scope[n] == '.');
}

/* ---- one rank ----------------------------------------------------------------------- */

static dt_status diff_rank(const char *pa, const char *pb, int allow_unclosed,
                           dt_trace_rank_result *r) {
    dt_trace_file fa, fb;
    keymap ma = {0}, mb = {0};
    dt_status st = dt_trace_file_load(pa, allow_unclosed, &fa);
    if (st) return st;
    if ((st = dt_trace_file_load(pb, allow_unclosed, &fb))) { dt_trace_file_free(&fa); return st; }
    if (strcmp(fa.digest, fb.digest)) {
        /* a flat XXH64 and a chunk-tree digest of the same bytes differ: every event would
         * look different, which says nothing about the runs */
        st = dt_fail(DT_EINVAL, "%s digests tensors as %s, %s as %s: traces of different digest "
                     "forms (a CPU and a GPU run) cannot be compared; compare CPU traces with CPU "
                     "traces and GPU traces with GPU traces", pa, fa.digest, pb, fb.digest);
        dt_trace_file_free(&fa);
        dt_trace_file_free(&fb);
        return st;
    }
    if ((st = keymap_build(&ma, &fa)) || (st = keymap_build(&mb, &fb))) goto done;
    r->events_a = fa.nevents;
    r->events_b = fb.nevents;
    r->level_a = fa.level;
    r->level_b = fb.level;
    long max_b = -1, max_b_a = -1;
    for (size_t i = 0; i < fa.nevents; i++) {
        const dt_trace_rec *a = &fa.events[i];
        long j = keymap_find(&mb, a);
        if (j < 0) {
            if (r->missing_in_b < DT_DIFF_MAX_LIST) copy_key(&r->missing_b[r->missing_in_b], a, (long)i);
            r->missing_in_b++;
            continue;
        }
        const dt_trace_rec *b = &fb.events[j];
        r->aligned++;
        if (j < max_b) {
            if (r->order_diffs == 0) {
                copy_key(&r->order_before, &fa.events[max_b_a], max_b_a);
                copy_key(&r->order_after, a, (long)i);
            }
            r->order_diffs++;
        } else {
            max_b = j;
            max_b_a = (long)i;
        }
        int first = r->mismatches == 0;
        int in_diff = side_differs(&fa, a, &fb, b, 0, r, first);
        /* For a downstream first mismatch the differing inputs are the useful detail; for
         * an origin candidate (inputs equal) the outputs. Keep both when inputs differ. */
        int out_diff = side_differs(&fa, a, &fb, b, 1, r, first);
        if (!in_diff && !out_diff) {
            if (first) r->ntensors = r->ntensors_total = 0;
            if (strcmp(a->variant, b->variant) || strcmp(a->kernel, b->kernel)) {
                if (r->path_diffs++ == 0) {
                    copy_key(&r->path_first, a, (long)i);
                    snprintf(r->path_a, sizeof r->path_a, "%s %s", a->variant, a->kernel);
                    snprintf(r->path_b, sizeof r->path_b, "%s %s", b->variant, b->kernel);
                }
            }
            continue;
        }
        if (first) {
            r->first_class = in_diff ? DT_CLASS_DOWNSTREAM : DT_CLASS_ORIGIN;
            copy_key(&r->first, a, (long)i);
        } else if (in_diff) {
            r->later_downstream++;
        } else if (r->first_class == DT_CLASS_ORIGIN && encloses(a, &r->first)) {
            r->later_enclosing++;
        } else {
            r->later_inputs_match++;
        }
        r->mismatches++;
    }
    for (size_t j = 0; j < fb.nevents; j++) {
        if (keymap_find(&ma, &fb.events[j]) >= 0) continue;
        if (r->missing_in_a < DT_DIFF_MAX_LIST) copy_key(&r->missing_a[r->missing_in_a], &fb.events[j], (long)j);
        r->missing_in_a++;
    }
    if (r->mismatches)
        r->verdict = r->first_class == DT_CLASS_ORIGIN ? DT_VERDICT_ORIGIN : DT_VERDICT_OUTSIDE;
    else if (r->missing_in_a || r->missing_in_b || r->order_diffs)
        r->verdict = DT_VERDICT_EVENTS_DIFFER;
    else
        r->verdict = DT_VERDICT_IDENTICAL;
done:
    free(ma.slot);
    free(mb.slot);
    dt_trace_file_free(&fa);
    dt_trace_file_free(&fb);
    return st;
}

/* ---- all ranks ---------------------------------------------------------------------- */

static int cross_verdict(const dt_trace_diff_result *res) {
    int origin = 0, outside = 0, events = 0, same = 1;
    const dt_trace_rank_result *o = NULL;
    for (int i = 0; i < res->nranks; i++) {
        const dt_trace_rank_result *r = &res->ranks[i];
        if (r->verdict == DT_VERDICT_ORIGIN) {
            if (o && (strcmp(o->first.op, r->first.op) || strcmp(o->first.scope, r->first.scope)))
                same = 0;
            if (!o) o = r;
            origin++;
        } else if (r->verdict == DT_VERDICT_OUTSIDE) {
            outside++;
        } else if (r->verdict != DT_VERDICT_IDENTICAL) {
            events++;
        }
    }
    if (origin == 0 && outside == 0) return events ? DT_CROSS_EVENTS_ONLY : DT_CROSS_IDENTICAL;
    if (origin == 0) return DT_CROSS_OUTSIDE_ALL;
    if (origin == res->nranks && same) return DT_CROSS_SAME_ORIGIN_ALL;
    return DT_CROSS_ORIGIN_SOME;
}

dt_status dt_trace_diff(const dt_trace_diff_opts *o, dt_trace_diff_result *res) {
    memset(res, 0, sizeof *res);
    rank_path *la = NULL, *lb = NULL;
    int na = 0, nb = 0;
    dt_status st;
    if ((st = list_ranks("A", o->a, o->allow_unclosed, &la, &na))) goto fail;
    if ((st = list_ranks("B", o->b, o->allow_unclosed, &lb, &nb))) goto fail;
    res->ranks = calloc((size_t)(na + nb), sizeof *res->ranks);
    if (!res->ranks) { st = dt_fail(DT_ENOMEM, "out of memory"); goto fail; }
    int i = 0, j = 0;
    while (i < na || j < nb) {
        int ra = i < na ? la[i].rank : 1 << 30, rb = j < nb ? lb[j].rank : 1 << 30;
        int rank = ra < rb ? ra : rb;
        int in_a = ra == rank, in_b = rb == rank;
        if (o->rank < 0 || o->rank == rank) {
            dt_trace_rank_result *r = &res->ranks[res->nranks++];
            r->rank = rank;
            r->in_a = in_a;
            r->in_b = in_b;
            if (in_a && in_b) {
                if ((st = diff_rank(la[i].path, lb[j].path, o->allow_unclosed, r))) goto fail;
            } else {
                r->verdict = DT_VERDICT_RANK_MISSING;
            }
        }
        i += in_a;
        j += in_b;
    }
    if (o->rank >= 0 && (res->nranks == 0 || !res->ranks[0].in_a || !res->ranks[0].in_b)) {
        st = dt_fail(DT_EINVAL, "--rank %d: no rank_%06d.trace in %s", o->rank, o->rank,
                     res->nranks && res->ranks[0].in_a ? o->b : o->a);
        goto fail;
    }
    res->cross = cross_verdict(res);
    for (int k = 0; k < res->nranks; k++)
        if (res->ranks[k].verdict != DT_VERDICT_IDENTICAL) res->mismatch = 1;
    free(la);
    free(lb);
    return DT_OK;
fail:
    free(la);
    free(lb);
    dt_trace_diff_free(res);
    return st;
}

void dt_trace_diff_free(dt_trace_diff_result *res) {
    free(res->ranks);
    memset(res, 0, sizeof *res);
}

const char *dt_trace_verdict_name(int v) {
    switch (v) {
    case DT_VERDICT_IDENTICAL: return "identical";
    case DT_VERDICT_ORIGIN: return "origin_candidate";
    case DT_VERDICT_OUTSIDE: return "origin_outside_capture";
    case DT_VERDICT_EVENTS_DIFFER: return "events_differ";
    case DT_VERDICT_RANK_MISSING: return "rank_missing";
    }
    return "?";
}

const char *dt_trace_cross_name(int c) {
    switch (c) {
    case DT_CROSS_IDENTICAL: return "identical";
    case DT_CROSS_SAME_ORIGIN_ALL: return "same_origin_all_ranks";
    case DT_CROSS_ORIGIN_SOME: return "origin_on_some_ranks";
    case DT_CROSS_OUTSIDE_ALL: return "origin_outside_capture";
    case DT_CROSS_EVENTS_ONLY: return "events_differ";
    }
    return "?";
}
