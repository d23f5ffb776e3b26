/* `detrain bench`: the determinism tax (DESIGN §9). Runs the same recipe in default and in
 * deterministic mode — each in its own process, since deterministic mode cannot be switched
 * off inside a process — and prints step time, tokens/s, MFU against the measured bf16
 * matrix peak, peak memory and a leaderboard of named ranges with the tax of each.
 * `--max-tax PCT` exits 1 when the step-time tax is above PCT.
 *
 * The parent runs `<this binary> bench --worker MODE ...` twice and reads one line
 * "DT_BENCH key=value ..." from each. Needs the CUDA build (build/detrain-cuda). */
#include "cli/cli.h"

#include "core/determinism.h"
#include "train/train_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bench_args {
    const char *model, *worker, *json;
    int B, T, warmup, steps, profile_steps;
    double max_tax;
} bench_args;

static int usage(void) {
    fprintf(stderr,
            "usage: detrain bench [--model gpt2-124m] [--micro-batch-size 16] [--seq-length 1024]\n"
            "                     [--warmup 5] [--steps 20] [--profile-steps 3] [--max-tax PCT]\n"
            "                     [--json FILE]\n"
            "Default vs deterministic mode on one CUDA GPU, side by side (build/detrain-cuda).\n");
    return 2;
}

static int parse(int argc, char **argv, bench_args *a) {
    a->model = "gpt2-124m"; a->worker = NULL; a->json = NULL;
    a->B = 16; a->T = 1024; a->warmup = 5; a->steps = 20; a->profile_steps = 3; a->max_tax = -1;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "detrain bench: %s needs a value\n", f); return 2; }
        char *end = NULL;
        if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--worker")) a->worker = v;
        else if (!strcmp(f, "--json")) a->json = v;
        else if (!strcmp(f, "--micro-batch-size")) a->B = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--seq-length")) a->T = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--warmup")) a->warmup = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--steps")) a->steps = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--profile-steps")) a->profile_steps = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--max-tax")) a->max_tax = strtod(v, &end);
        else { fprintf(stderr, "detrain bench: unknown flag %s\n", f); return usage(); }
        if (end && *end) { fprintf(stderr, "detrain bench: %s '%s' is not a number\n", f, v); return 2; }
        i++;
    }
    if (a->B < 1 || a->T < 1 || a->warmup < 0 || a->steps < 1 || a->profile_steps < 0) {
        fprintf(stderr, "detrain bench: sizes and --steps must be >= 1, --warmup/--profile-steps >= 0\n");
        return 2;
    }
    return 0;
}

/* The worker: apply the mode first (before any CUDA call), measure, print one line. */
static int worker(const bench_args *a) {
    int det = !strcmp(a->worker, "det");
    if (!det && strcmp(a->worker, "default")) {
        fprintf(stderr, "detrain bench: --worker must be det or default\n");
        return 2;
    }
    dt_det_request req = {det, NULL, 0};
    if (dt_determinism_apply(&req) != DT_OK || dt_runtime_init() != DT_OK) {
        fprintf(stderr, "detrain bench: %s\n", dt_errmsg());
        return 2;
    }
    dt_bench_opts o = {a->model, a->B, a->T, a->warmup, a->steps, a->profile_steps, 1234};
    dt_bench_result r;
    if (dt_bench_cuda(&o, &r) != DT_OK) {
        fprintf(stderr, "detrain bench: %s\n", dt_errmsg());
        return 2;
    }
    for (char *p = r.device; *p; p++)
        if (*p == ' ') *p = '_';
    printf("DT_BENCH mode=%s step_ms=%.6f step_min=%.6f step_max=%.6f tok_s=%.3f mfu=%.6f "
           "peak_tflops=%.3f flops=%.6g mem_gib=%.4f model_gib=%.4f loss0=%.6f loss1=%.6f device=%s",
           a->worker, r.step_ms_median, r.step_ms_min, r.step_ms_max, r.tok_per_s, r.mfu,
           r.peak_tflops, r.model_flops, r.peak_mem_gib, r.model_mem_gib, r.loss_first,
           r.loss_last, r.device);
    for (int i = 0; i < r.nranges; i++) printf(" r.%s=%.6f", r.range_name[i], r.range_ms[i]);
    printf("\n");
    return 0;
}

enum { MAXR = DT_BENCH_MAX_RANGES };
typedef struct parsed {
    double step_ms, step_min, step_max, tok_s, mfu, peak, flops, mem, model_mem, loss0, loss1;
    char device[256];
    int nr;
    char rname[MAXR][32];
    double rms[MAXR];
} parsed;

static int run_worker(const char *self, const bench_args *a, const char *mode, parsed *p) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' bench --worker %s --model '%s' --micro-batch-size %d "
             "--seq-length %d --warmup %d --steps %d --profile-steps %d", self, mode, a->model, a->B,
             a->T, a->warmup, a->steps, a->profile_steps);
    FILE *f = popen(cmd, "r");
    if (!f) { fprintf(stderr, "detrain bench: cannot start %s\n", cmd); return 2; }
    char line[8192];
    int got = 0;
    memset(p, 0, sizeof *p);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "DT_BENCH ", 9)) { fputs(line, stdout); continue; }
        got = 1;
        for (char *tok = strtok(line + 9, " \n"); tok; tok = strtok(NULL, " \n")) {
            char *eq = strchr(tok, '=');
            if (!eq) continue;
            *eq = 0;
            const char *k = tok, *v = eq + 1;
            double x = atof(v);
            if (!strcmp(k, "step_ms")) p->step_ms = x;
            else if (!strcmp(k, "step_min")) p->step_min = x;
            else if (!strcmp(k, "step_max")) p->step_max = x;
            else if (!strcmp(k, "tok_s")) p->tok_s = x;
            else if (!strcmp(k, "mfu")) p->mfu = x;
            else if (!strcmp(k, "peak_tflops")) p->peak = x;
            else if (!strcmp(k, "flops")) p->flops = x;
            else if (!strcmp(k, "mem_gib")) p->mem = x;
            else if (!strcmp(k, "model_gib")) p->model_mem = x;
            else if (!strcmp(k, "loss0")) p->loss0 = x;
            else if (!strcmp(k, "loss1")) p->loss1 = x;
            else if (!strcmp(k, "device")) snprintf(p->device, sizeof p->device, "%s", v);
            else if (!strncmp(k, "r.", 2) && p->nr < MAXR) {
                snprintf(p->rname[p->nr], sizeof p->rname[0], "%s", k + 2);
                p->rms[p->nr++] = x;
            }
        }
    }
    int rc = pclose(f);
    if (!got || rc != 0) {
        fprintf(stderr, "detrain bench: the %s worker failed (exit status %d)\n", mode, rc);
        return 2;
    }
    for (char *c = p->device; *c; c++)
        if (*c == '_') *c = ' ';
    return 0;
}

static double tax(double det, double def) { return def > 0 ? (det / def - 1.0) * 100.0 : 0.0; }

int dt_cmd_bench(int argc, char **argv) {
    bench_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (a.worker) return worker(&a);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { fprintf(stderr, "detrain bench: cannot find this binary (/proc/self/exe)\n"); return 2; }
    self[n] = 0;
    parsed def, det;
    if ((rc = run_worker(self, &a, "default", &def)) != 0) return rc;
    if ((rc = run_worker(self, &a, "det", &det)) != 0) return rc;
    double t = tax(det.step_ms, def.step_ms);
    printf("\ndetrain bench: %s, B=%d T=%d, bf16, %s; median of %d steps (end to end) after %d warm-up; "
           "ranges: median of %d profiled steps\n", a.model, a.B, a.T, def.device, a.steps, a.warmup,
           a.profile_steps);
    printf("%-34s %14s %14s %9s\n", "", "default", "deterministic", "tax");
    printf("%-34s %14.3f %14.3f %8.2f%%\n", "step ms (median)", def.step_ms, det.step_ms, t);
    printf("%-34s %14.3f %14.3f\n", "step ms (min)", def.step_min, det.step_min);
    printf("%-34s %14.0f %14.0f\n", "tokens/s", def.tok_s, det.tok_s);
    char mfu[64];
    snprintf(mfu, sizeof mfu, "MFU (peak %.0f TFLOP/s measured)", def.peak);
    printf("%-34s %13.1f%% %13.1f%%\n", mfu, def.mfu * 100, det.mfu * 100);
    printf("%-34s %14.2f %14.2f\n", "device memory in use GiB", def.mem, det.mem);
    printf("%-34s %14.4f %14.4f\n", "loss first / last step", def.loss0, det.loss0);
    printf("%-34s %14.4f %14.4f\n", "", def.loss1, det.loss1);
    printf("\nleaderboard (ms per step, CUDA events; NVTX ranges of the same names):\n");
    printf("%-16s %10s %10s %9s %8s\n", "range", "default", "det", "tax", "share");
    int order[MAXR];
    for (int i = 0; i < det.nr; i++) order[i] = i;
    for (int i = 0; i < det.nr; i++) /* by det time, largest first */
        for (int j = i + 1; j < det.nr; j++)
            if (det.rms[order[j]] > det.rms[order[i]]) { int x = order[i]; order[i] = order[j]; order[j] = x; }
    double tot = 0;
    for (int i = 0; i < det.nr; i++) tot += det.rms[i];
    for (int k = 0; k < det.nr; k++) {
        int i = order[k];
        double d0 = i < def.nr ? def.rms[i] : 0;
        printf("%-16s %10.3f %10.3f %8.2f%% %7.1f%%\n", det.rname[i], d0, det.rms[i], tax(det.rms[i], d0),
               tot > 0 ? det.rms[i] / tot * 100 : 0);
    }
    if (a.json) {
        FILE *f = fopen(a.json, "w");
        if (!f) { fprintf(stderr, "detrain bench: cannot write %s\n", a.json); return 2; }
        fprintf(f, "{\"model\":\"%s\",\"B\":%d,\"T\":%d,\"device\":\"%s\",\"tax_pct\":%.4f", a.model, a.B, a.T,
                def.device, t);
        const parsed *ps[2] = {&def, &det};
        const char *names[2] = {"default", "deterministic"};
        for (int m = 0; m < 2; m++) {
            const parsed *p = ps[m];
            fprintf(f, ",\"%s\":{\"step_ms\":%.6f,\"tok_per_s\":%.3f,\"mfu\":%.6f,\"peak_tflops\":%.3f,"
                    "\"mem_gib\":%.4f,\"ranges\":{", names[m], p->step_ms, p->tok_s, p->mfu, p->peak, p->mem);
            for (int i = 0; i < p->nr; i++) fprintf(f, "%s\"%s\":%.6f", i ? "," : "", p->rname[i], p->rms[i]);
            fprintf(f, "}}");
        }
        fprintf(f, "}\n");
        fclose(f);
    }
    if (a.max_tax >= 0 && t > a.max_tax) {
        printf("\ndetrain bench: tax %.2f%% is above --max-tax %.2f%%\n", t, a.max_tax);
        return 1;
    }
    return 0;
}
