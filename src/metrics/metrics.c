/* Metrics log: metrics.jsonl writer and reader, TensorBoard side file, console line
 * (see metrics.h for the format and the resume rule). */
#include "metrics/metrics.h"

#include "core/json.h"
#include "core/regular_file.h"
#include "metrics/tfevents.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct dt_metrics {
    FILE *f;
    char path[4096];
    dt_tfevents *tb;
    int64_t last_step;
    int restart_pending; /* resumed run: mark the restart in the event file at its first step */
    int resumed_pending; /* resumed run: "resumed":true on its first metrics.jsonl line */
    dt_status err;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A resumed run appends; a crash may have left half a line: cut back to the last '\n'. */
static dt_status cut_incomplete_tail(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? DT_OK : dt_fail(DT_EIO, "cannot open %s: %s", path, strerror(errno));
    long keep = 0, pos = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        pos++;
        if (c == '\n') keep = pos;
    }
    fclose(f);
    if (keep == pos) return DT_OK;
    if (truncate(path, keep))
        return dt_fail(DT_EIO, "cannot cut the incomplete last line of %s: %s", path, strerror(errno));
    return DT_OK;
}

dt_status dt_metrics_open(dt_metrics **out, const char *log_dir, const dt_metrics_opts *opts) {
    dt_metrics_opts o = opts ? *opts : (dt_metrics_opts){0, 1};
    *out = NULL;
    if (mkdir(log_dir, 0755) && errno != EEXIST)
        return dt_fail(DT_EIO, "cannot create log directory %s: %s", log_dir, strerror(errno));
    dt_metrics *m = calloc(1, sizeof *m);
    if (!m) return dt_fail(DT_ENOMEM, "out of memory");
    int len = snprintf(m->path, sizeof m->path, "%s/metrics.jsonl", log_dir);
    if (len < 0 || (size_t)len >= sizeof m->path) {
        free(m);
        return dt_fail(DT_EINVAL, "log directory path too long: %s", log_dir);
    }
    struct stat sb;
    if (!o.resume && !stat(m->path, &sb) && sb.st_size > 0) {
        free(m);
        return dt_fail(DT_ESTATE, "%s/metrics.jsonl already holds another run's metrics; use a "
                       "new log directory, or resume that run", log_dir);
    }
    dt_status st = o.resume ? cut_incomplete_tail(m->path) : DT_OK;
    if (!st && !(m->f = fopen(m->path, "ab")))
        st = dt_fail(DT_EIO, "cannot open %s for appending: %s", m->path, strerror(errno));
    if (!st && o.tfevents) st = dt_tfevents_open(&m->tb, log_dir, now_s());
    m->restart_pending = o.resume;
    m->resumed_pending = o.resume;
    if (st) {
        if (m->f) fclose(m->f);
        free(m);
        return st;
    }
    *out = m;
    return DT_OK;
}

static const char *const fixed_keys[] = {"step", "loss", "eval_loss", "grad_norm", "param_norm",
                                         "num_zeros", "lr", "consumed_samples",
                                         "consumed_tokens", "step_ms", "tok_per_s", "resumed"};

static int aux_name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    if (n >= 4 && !strcmp(s + n - 4, "_hex")) return 0;
    for (size_t k = 0; k < sizeof fixed_keys / sizeof fixed_keys[0]; k++)
        if (!strcmp(s, fixed_keys[k])) return 0;
    return 1;
}

dt_status dt_metrics_log(dt_metrics *m, const dt_step_metrics *s) {
    if (m->err) return dt_fail(m->err, "%s: an earlier write failed", m->path);
    if (s->step <= m->last_step)
        return dt_fail(DT_EINVAL, "metrics step %" PRId64 " logged after step %" PRId64
                       " (steps must increase, starting at 1)", s->step, m->last_step);
    if (s->n_aux < 0 || s->n_aux > DT_METRICS_MAX_AUX)
        return dt_fail(DT_EINVAL, "n_aux = %d, must be 0..%d", s->n_aux, DT_METRICS_MAX_AUX);
    for (int k = 0; k < s->n_aux; k++) {
        if (!aux_name_ok(s->aux[k].name))
            return dt_fail(DT_EINVAL, "aux metric name '%s' must be [a-z0-9_]+ (at most 64), not "
                           "end in _hex, and not be a fixed metric name",
                           s->aux[k].name ? s->aux[k].name : "(null)");
        for (int j = 0; j < k; j++)
            if (!strcmp(s->aux[j].name, s->aux[k].name))
                return dt_fail(DT_EINVAL, "aux metric '%s' given twice", s->aux[k].name);
    }
    FILE *f = m->f;
    fprintf(f, "{\"step\":%" PRId64 ",", s->step);
    dt_json_f64(f, "loss", s->loss);
    if (s->has_eval) { fputc(',', f); dt_json_f64(f, "eval_loss", s->eval_loss); }
    fputc(',', f); dt_json_f64(f, "grad_norm", s->grad_norm);
    fputc(',', f); dt_json_f64(f, "param_norm", s->param_norm);
    fprintf(f, ",\"num_zeros\":%" PRId64 ",", s->num_zeros);
    dt_json_f64(f, "lr", s->lr);
    fprintf(f, ",\"consumed_samples\":%" PRId64 ",\"consumed_tokens\":%" PRId64,
            s->consumed_samples, s->consumed_tokens);
    for (int k = 0; k < s->n_aux; k++) { fputc(',', f); dt_json_f64(f, s->aux[k].name, s->aux[k].value); }
    fputc(',', f); dt_json_f64(f, "step_ms", s->step_ms);
    fputc(',', f); dt_json_f64(f, "tok_per_s", s->tok_per_s);
    if (m->resumed_pending) fputs(",\"resumed\":true", f);
    fputs("}\n", f);
    if (ferror(f) || fflush(f)) {
        m->err = DT_EIO;
        return dt_fail(DT_EIO, "writing %s: %s", m->path, strerror(errno));
    }
    m->last_step = s->step;
    m->resumed_pending = 0;
    if (!m->tb) return DT_OK;

    dt_tf_scalar v[10 + DT_METRICS_MAX_AUX];
    int n = 0;
    v[n++] = (dt_tf_scalar){"loss", s->loss};
    if (s->has_eval) v[n++] = (dt_tf_scalar){"eval_loss", s->eval_loss};
    v[n++] = (dt_tf_scalar){"grad_norm", s->grad_norm};
    v[n++] = (dt_tf_scalar){"param_norm", s->param_norm};
    v[n++] = (dt_tf_scalar){"num_zeros", (double)s->num_zeros};
    v[n++] = (dt_tf_scalar){"lr", s->lr};
    v[n++] = (dt_tf_scalar){"consumed_samples", (double)s->consumed_samples};
    v[n++] = (dt_tf_scalar){"consumed_tokens", (double)s->consumed_tokens};
    for (int k = 0; k < s->n_aux; k++) v[n++] = (dt_tf_scalar){s->aux[k].name, s->aux[k].value};
    v[n++] = (dt_tf_scalar){"step_ms", s->step_ms};
    v[n++] = (dt_tf_scalar){"tok_per_s", s->tok_per_s};
    double wall = now_s();
    if (m->restart_pending) {
        dt_status st = dt_tfevents_write_restart(m->tb, s->step, wall);
        if (st) return st;
        m->restart_pending = 0;
    }
    return dt_tfevents_write_step(m->tb, s->step, wall, v, n);
}

const char *dt_metrics_tfevents_path(const dt_metrics *m) { return m->tb ? dt_tfevents_path(m->tb) : NULL; }

dt_status dt_metrics_close(dt_metrics *m) {
    if (!m) return DT_OK;
    dt_status st = DT_OK;
    if (m->f) {
        if (fflush(m->f) || fsync(fileno(m->f)))
            st = dt_fail(DT_EIO, "flushing %s: %s", m->path, strerror(errno));
        if (fclose(m->f) && !st) st = dt_fail(DT_EIO, "closing %s: %s", m->path, strerror(errno));
    }
    dt_status st2 = dt_tfevents_close(m->tb);
    if (!st) st = st2;
    free(m);
    return st;
}

void dt_metrics_console_line(char *buf, size_t n, const dt_step_metrics *s, int64_t train_iters,
                             double elapsed_ms_avg) {
    double left_s = (double)(train_iters > s->step ? train_iters - s->step : 0) * elapsed_ms_avg / 1000.0;
    long long eta = isfinite(left_s) && left_s >= 0 && left_s < 1e12 ? (long long)(left_s + 0.5) : -1;
    char eval[64] = "";
    if (s->has_eval) snprintf(eval, sizeof eval, " | eval loss: %E", s->eval_loss);
    char etas[32];
    if (eta < 0) snprintf(etas, sizeof etas, "--:--:--");
    else snprintf(etas, sizeof etas, "%02lld:%02lld:%02lld", eta / 3600, eta / 60 % 60, eta % 60);
    snprintf(buf, n,
             "iteration %" PRId64 "/%" PRId64 " | consumed samples: %" PRId64
             " | elapsed time per iteration (ms): %.1f | learning rate: %E | loss: %E%s"
             " | grad norm: %.3f | tokens/s: %.0f | ETA: %s",
             s->step, train_iters, s->consumed_samples, s->step_ms, s->lr, s->loss, eval,
             s->grad_norm, s->tok_per_s, etas);
}

/* ---- reading ---- */

void dt_metrics_series_free(dt_metrics_series *s) {
    for (size_t i = 0; i < s->n; i++) dt_json_free(s->lines[i]);
    free(s->lines);
    free(s->steps);
    memset(s, 0, sizeof *s);
}

/* Every "*_hex" member of a line must be the exact bits of a double ("0x" + 16 hex digits):
 * compare reads them, so a malformed one is bad input, never a difference. */
static dt_status check_hex_fields(const dt_json_value *v, const char *path, size_t lineno) {
    for (size_t k = 0; k < v->n; k++) {
        size_t n = strlen(v->keys[k]);
        uint64_t bits;
        if (n < 4 || strcmp(v->keys[k] + n - 4, "_hex") != 0) continue;
        if (dt_json_get_hex64(v, v->keys[k], &bits) != DT_OK) {
            const dt_json_value *x = &v->items[k];
            return dt_fail(DT_ECORRUPT, "%s line %zu: field \"%s\" holds %s%.40s%s, not \"0x\" and 16 hex "
                           "digits (the exact bits of a float): the log is malformed; re-run or repair it",
                           path, lineno, v->keys[k], x->type == DT_JSON_STRING ? "\"" : "",
                           x->text ? x->text : "an array or object", x->type == DT_JSON_STRING ? "\"" : "");
        }
    }
    return DT_OK;
}

dt_status dt_metrics_read(const char *path, dt_metrics_series *out) {
    memset(out, 0, sizeof *out);
    FILE *f;
    dt_status ost = dt_fopen_regular(path, &f, NULL);
    if (ost != DT_OK) return ost;
    char *line = NULL;
    size_t cap = 0, scap = 0, lineno = 0;
    ssize_t len;
    dt_status st = DT_OK;
    while (!st && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') {
            st = dt_fail(DT_ECORRUPT, "%s line %zu is incomplete (no newline: the run stopped "
                         "mid-write); remove it to read the rest", path, lineno);
            break;
        }
        dt_json_value *v;
        st = dt_json_parse(line, (size_t)len - 1, NULL, &v);
        if (st) { dt_fail_context(st, "%s line %zu", path, lineno); break; }
        int64_t step;
        if (v->type != DT_JSON_OBJECT || dt_json_get_i64(v, "step", &step) || step < 1) {
            dt_json_free(v);
            st = dt_fail(DT_ECORRUPT, "%s line %zu: not an object with an integer \"step\" >= 1",
                         path, lineno);
            break;
        }
        if ((st = check_hex_fields(v, path, lineno)) != DT_OK) {
            dt_json_free(v);
            break;
        }
        /* Resume rule (metrics.h): a step that does not increase starts a resumed segment. */
        while (out->n > 0 && out->steps[out->n - 1] >= step) dt_json_free(out->lines[--out->n]);
        if (out->n == scap) {
            size_t nc = scap ? scap * 2 : 64;
            int64_t *ns = realloc(out->steps, nc * sizeof *ns);
            if (ns) out->steps = ns;
            dt_json_value **nl = ns ? realloc(out->lines, nc * sizeof *nl) : NULL;
            if (nl) out->lines = nl;
            if (!ns || !nl) { dt_json_free(v); st = dt_fail(DT_ENOMEM, "%s: out of memory", path); break; }
            scap = nc;
        }
        out->steps[out->n] = step;
        out->lines[out->n++] = v;
    }
    if (!st && ferror(f)) st = dt_fail(DT_EIO, "error reading %s", path);
    free(line);
    fclose(f);
    if (st) dt_metrics_series_free(out);
    return st;
}
