/* Loading the runs of a report (see runs.h): dt_metrics_read for the series, dt_compare_series
 * for the verdicts, dt_compare_fingerprint_section for the environments; then every line is
 * unpacked once into per-metric columns of exact bits and the parsed lines are freed. */
#include "report/runs.h"

#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { KEY_SKIP = -1, KEY_RESUMED = -2 };

/* A table of metric names: one per run while its lines are unpacked (runs are unpacked in
 * parallel), then the union of all runs. */
typedef struct registry {
    int n, dropped;
    dt_rpt_metric m[DT_RPT_MAX_METRICS];
} registry;

/* Index of metric `name` (len bytes) of this kind, registered on first sight; KEY_SKIP when
 * the name is too long, is known with the other kind, or the table is full (then `dropped`). */
static int metric_index(registry *g, const char *name, size_t len, int kind) {
    for (int m = 0; m < g->n; m++)
        if (!strncmp(g->m[m].name, name, len) && g->m[m].name[len] == 0)
            return g->m[m].kind == kind ? m : KEY_SKIP;
    if (len >= sizeof g->m[0].name) return KEY_SKIP;
    if (g->n == DT_RPT_MAX_METRICS) { g->dropped = 1; return KEY_SKIP; }
    dt_rpt_metric *m = &g->m[g->n];
    memcpy(m->name, name, len);
    m->name[len] = 0;
    m->kind = kind;
    m->trajectory = kind == DT_RPT_FLOAT || !strcmp(m->name, "num_zeros");
    return g->n++;
}

static int ends_with_hex(const char *key, size_t n) { return n > 4 && !strcmp(key + n - 4, "_hex"); }

/* What key k of a line is: a metric index, KEY_RESUMED or KEY_SKIP. Floats are read from
 * their _hex field (as compare compares them), so the decimal beside it is skipped. */
static int classify(registry *g, const dt_json_value *line, size_t k) {
    const char *key = line->keys[k];
    size_t n = strlen(key);
    if (!strcmp(key, "resumed")) return KEY_RESUMED;
    if (!strcmp(key, "step") || dt_compare_ignored_key(key)) return KEY_SKIP;
    if (ends_with_hex(key, n)) {
        char base[96];
        if (n - 4 >= sizeof base) return KEY_SKIP;
        memcpy(base, key, n - 4);
        base[n - 4] = 0;
        return dt_compare_ignored_key(base) ? KEY_SKIP : metric_index(g, key, n - 4, DT_RPT_FLOAT);
    }
    char hk[96];
    if ((size_t)snprintf(hk, sizeof hk, "%s_hex", key) >= sizeof hk || dt_json_get(line, hk))
        return KEY_SKIP;
    int64_t v;
    return dt_json_as_i64(&line->items[k], &v) ? metric_index(g, key, n, DT_RPT_INT) : KEY_SKIP;
}

/* "0x" + 16 hex digits (the writer's form): 1 and *bits; anything else 0. */
static int hex_bits(const dt_json_value *v, uint64_t *bits) {
    if (v->type != DT_JSON_STRING || v->len != 18 || v->text[0] != '0' || v->text[1] != 'x') return 0;
    uint64_t b = 0;
    for (int i = 2; i < 18; i++) {
        char c = v->text[i];
        unsigned x;
        if (c >= '0' && c <= '9') x = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') x = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x = (unsigned)(c - 'A' + 10);
        else return 0;
        b = b << 4 | x;
    }
    *bits = b;
    return 1;
}

static void add_resume(dt_rpt_run *r, int64_t step) {
    if (r->nresumes < DT_RPT_MAX_RESUMES) r->resumes[r->nresumes++] = step;
}

/* Classifications by key name. A log repeats the same few dozen keys on every line (eval
 * lines add two), so each name is classified once, on its first line: a key is taken to be
 * the same kind of field on every line, as the writer makes it (the pictures rely on this;
 * the verdicts come from compare, which looks at every line afresh). */
enum { CACHE_SLOTS = 128 };
typedef struct keycache {
    unsigned char used[CACHE_SLOTS];
    int cls[CACHE_SLOTS];
    char name[CACHE_SLOTS][96];
} keycache;

static int cached_class(keycache *c, registry *g, const dt_json_value *line, size_t k) {
    const char *key = line->keys[k];
    uint32_t h = 2166136261u; /* FNV-1a */
    size_t n = 0;
    for (; key[n]; n++) h = (h ^ (unsigned char)key[n]) * 16777619u;
    for (unsigned probe = 0; n < sizeof c->name[0] && probe < CACHE_SLOTS; probe++) {
        unsigned slot = (h + probe) % CACHE_SLOTS;
        if (c->used[slot] && !strcmp(c->name[slot], key)) return c->cls[slot];
        if (c->used[slot]) continue;
        c->used[slot] = 1;
        memcpy(c->name[slot], key, n + 1);
        return c->cls[slot] = classify(g, line, k);
    }
    return classify(g, line, k); /* a long name or a full table: no caching */
}

/* Unpacks every line of s into r's columns, numbered by the run's own registry g. */
static dt_status unpack(registry *g, dt_rpt_run *r, const dt_metrics_series *s) {
    keycache *cache = calloc(1, sizeof *cache);
    if (!cache) return dt_fail(DT_ENOMEM, "out of memory unpacking %s", r->metrics_path);
    dt_status st = DT_OK;
    for (size_t i = 0; i < s->n && !st; i++) {
        const dt_json_value *line = s->lines[i];
        for (size_t k = 0; k < line->n; k++) {
            int m = cached_class(cache, g, line, k);
            const dt_json_value *v = &line->items[k];
            if (m == KEY_RESUMED) {
                int on;
                if (dt_json_as_bool(v, &on) && on) add_resume(r, s->steps[i]);
                continue;
            }
            if (m < 0) continue;
            dt_rpt_col *c = &r->col[m];
            if (!c->bits) {
                c->bits = calloc(s->n, sizeof *c->bits);
                c->has = calloc(s->n, 1);
                if (!c->bits || !c->has) {
                    st = dt_fail(DT_ENOMEM, "out of memory unpacking %s", r->metrics_path);
                    break;
                }
            }
            uint64_t bits = 0;
            int64_t iv = 0;
            if (g->m[m].kind == DT_RPT_FLOAT ? hex_bits(v, &bits) : dt_json_as_i64(v, &iv)) {
                c->bits[i] = g->m[m].kind == DT_RPT_FLOAT ? bits : (uint64_t)iv;
                c->has[i] = 1;
            }
        }
    }
    free(cache);
    if (st) return st;
    /* A log that starts past step 1 was begun from a checkpoint; logs written before the
     * "resumed" marker existed say so only this way. */
    if (s->n && s->steps[0] > 1 && (r->nresumes == 0 || r->resumes[0] != s->steps[0])) {
        if (r->nresumes == DT_RPT_MAX_RESUMES) r->nresumes--;
        memmove(r->resumes + 1, r->resumes, (size_t)r->nresumes * sizeof r->resumes[0]);
        r->resumes[0] = s->steps[0];
        r->nresumes++;
        r->resume_from_start = 1;
    }
    return DT_OK;
}

static void read_env(dt_rpt_run *r) {
    struct stat sb;
    if (stat(r->env_path, &sb)) {
        snprintf(r->env_note, sizeof r->env_note, "no fingerprint %.480s", r->env_path);
        return;
    }
    if (dt_json_read_file(r->env_path, &r->env) != DT_OK)
        snprintf(r->env_note, sizeof r->env_note, "%.500s", dt_errmsg());
}

/* The environment columns of a pair, with compare's wording when they cannot be compared. */
static void compare_env(const dt_rpt_run *a, const dt_rpt_run *b, dt_rpt_pair *p) {
    if (!a->env || !b->env) {
        snprintf(p->env_note, sizeof p->env_note, "%.540s: environments not compared",
                 !a->env ? a->env_note : b->env_note);
        return;
    }
    if (dt_compare_fingerprint_section(a->env_path, b->env_path, "contract", p->contract,
                                       sizeof p->contract, &p->ncontract) != DT_OK) {
        snprintf(p->env_note, sizeof p->env_note, "environments not compared: %.560s", dt_errmsg());
        return;
    }
    p->env_ok = 1;
    if (dt_compare_fingerprint_section(a->env_path, b->env_path, "info", p->info, sizeof p->info,
                                       &p->ninfo) != DT_OK)
        p->ninfo = 0; /* "info" never binds the contract; an old file without it says nothing */
}

/* Drawing order: loss, eval_loss, the aux losses (the other floats), grad_norm, param_norm,
 * num_zeros, lr, then the rest (the integer counters); first seen first within a rank. */
static int order_rank(const dt_rpt_metric *m) {
    static const char *const named[] = {"loss", "eval_loss", "", "grad_norm", "param_norm",
                                        "num_zeros", "lr"};
    for (int r = 0; r < (int)(sizeof named / sizeof named[0]); r++)
        if (!strcmp(m->name, named[r])) return r;
    return m->kind == DT_RPT_FLOAT ? 2 : 7;
}

static void set_order(dt_rpt_data *d) {
    int n = 0;
    for (int r = 0; r <= 7; r++)
        for (int m = 0; m < d->nmetrics; m++)
            if (order_rank(&d->metrics[m]) == r) d->order[n++] = m;
}

/* Moves run r's columns from its own numbering (g) to the union's (all). */
static void merge(registry *all, const registry *g, dt_rpt_run *r) {
    dt_rpt_col own[DT_RPT_MAX_METRICS];
    memcpy(own, r->col, sizeof own);
    memset(r->col, 0, sizeof r->col);
    all->dropped |= g->dropped;
    for (int m = 0; m < g->n; m++) {
        int u = metric_index(all, g->m[m].name, strlen(g->m[m].name), g->m[m].kind);
        if (u >= 0) { r->col[u] = own[m]; continue; }
        free(own[m].bits);
        free(own[m].has);
    }
}

/* What the phases of dt_rpt_load share: the data, each run's series and own registry. */
typedef struct job {
    dt_rpt_data *d;
    dt_metrics_series *s;
    registry *g;
} job;

/* Runs body(j, i) for first <= i < n, the runs in parallel (each works on its own files and
 * data, and dt_fail keeps its message per thread); returns the first failure in run order,
 * with its message, so the error does not depend on the thread schedule. */

static dt_status run_jobs(int first, int n, const job *j, dt_status (*body)(const job *, int)) {
    dt_status *st = calloc((size_t)n, sizeof *st);
    char (*msg)[1024] = calloc((size_t)n, sizeof *msg);
    if (!st || !msg) { free(st); free(msg); return dt_fail(DT_ENOMEM, "out of memory"); }
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = first; i < n; i++) {
        st[i] = body(j, i);
        if (st[i]) snprintf(msg[i], sizeof msg[i], "%s", dt_errmsg());
    }
    dt_status out = DT_OK;
    for (int i = first; i < n && !out; i++)
        if (st[i]) out = dt_fail(st[i], "%s", msg[i]);
    free(st);
    free(msg);
    return out;
}

static dt_status read_job(const job *j, int i) {
    dt_rpt_run *r = &j->d->runs[i];
    dt_status st = dt_metrics_read(r->metrics_path, &j->s[i]);
    if (!st && j->s[i].n == 0) st = dt_fail(DT_EMISMATCH, "%s holds no steps", r->metrics_path);
    if (!st) read_env(r);
    return st;
}

static dt_status compare_job(const job *j, int b) {
    dt_rpt_data *d = j->d;
    dt_rpt_pair *p = &d->pairs[b - 1];
    p->a = 0;
    p->b = b;
    dt_status st = dt_compare_series(&j->s[0], d->runs[0].metrics_path, &j->s[b], d->runs[b].metrics_path, &p->cmp);
    if (!st) compare_env(&d->runs[0], &d->runs[b], p);
    return st;
}

/* Unpacks run i, then frees its parsed lines (its steps are kept). */
static dt_status unpack_job(const job *j, int i) {
    dt_rpt_run *r = &j->d->runs[i];
    dt_status st = unpack(&j->g[i], r, &j->s[i]);
    r->n = j->s[i].n;
    r->steps = j->s[i].steps;
    j->s[i].steps = NULL;
    dt_metrics_series_free(&j->s[i]);
    return st;
}

dt_status dt_rpt_load(const char *const *args, int nargs, dt_rpt_data *d) {
    memset(d, 0, sizeof *d);
    if (nargs < 1) return dt_fail(DT_EINVAL, "no run given: name at least one log directory");
    if (nargs > 26) return dt_fail(DT_EINVAL, "%d runs given: a report draws at most 26 (A-Z)", nargs);
    job j = {d, calloc((size_t)nargs, sizeof *j.s), calloc((size_t)nargs, sizeof *j.g)};
    d->runs = calloc((size_t)nargs, sizeof *d->runs);
    d->pairs = calloc((size_t)nargs, sizeof *d->pairs);
    dt_status st = DT_OK;
    if (!j.s || !j.g || !d->runs || !d->pairs) st = dt_fail(DT_ENOMEM, "out of memory");
    else d->nruns = nargs;
    for (int i = 0; i < d->nruns; i++) {
        dt_rpt_run *r = &d->runs[i];
        r->arg = args[i];
        snprintf(r->label, sizeof r->label, "%c", 'A' + i);
        dt_compare_paths(args[i], r->metrics_path, r->env_path, sizeof r->metrics_path);
    }
    if (!st) st = run_jobs(0, nargs, &j, read_job);
    if (!st) {
        d->npairs = nargs - 1;
        st = run_jobs(1, nargs, &j, compare_job);
    }
    if (!st) st = run_jobs(0, nargs, &j, unpack_job);
    registry all = {0};
    for (int i = 0; i < d->nruns; i++) {
        dt_metrics_series_free(&j.s[i]); /* after a failure; a no-op once unpacked */
        dt_rpt_run *r = &d->runs[i];
        if (!st) merge(&all, &j.g[i], r);
        if (r->n && (d->first_step == 0 || r->steps[0] < d->first_step)) d->first_step = r->steps[0];
        if (r->n && r->steps[r->n - 1] > d->last_step) d->last_step = r->steps[r->n - 1];
    }
    free(j.s);
    free(j.g);
    if (st) { dt_rpt_free(d); return st; }
    d->nmetrics = all.n;
    d->metrics_dropped = all.dropped;
    memcpy(d->metrics, all.m, sizeof d->metrics);
    set_order(d);
    return DT_OK;
}

void dt_rpt_free(dt_rpt_data *d) {
    for (int i = 0; i < d->nruns; i++) {
        dt_rpt_run *r = &d->runs[i];
        free(r->steps);
        for (int m = 0; m < DT_RPT_MAX_METRICS; m++) {
            free(r->col[m].bits);
            free(r->col[m].has);
        }
        dt_json_free(r->env);
    }
    free(d->runs);
    free(d->pairs);
    memset(d, 0, sizeof *d);
}

double dt_rpt_value(const dt_rpt_metric *m, const dt_rpt_col *c, size_t i) {
    return m->kind == DT_RPT_FLOAT ? dt_f64_from_bits(c->bits[i]) : (double)(int64_t)c->bits[i];
}

const char *dt_rpt_env_field(const dt_rpt_run *r, const char *section, const char *key) {
    const dt_json_value *v = dt_json_get(dt_json_get(r->env, section), key);
    return v && v->type == DT_JSON_STRING ? v->text : NULL;
}
