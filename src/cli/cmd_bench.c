/* `detrain bench`: the determinism tax (DESIGN §9). The training loop of `detrain train`
 * (train/loop.h: the same backend, data, optimizer and schedule) with timers: run in
 * default and in deterministic mode — each in its own process, since deterministic mode
 * cannot be switched off inside a process — it prints step time, tokens/s, MFU against the
 * measured bf16 matrix peak, memory and a leaderboard of named ranges with the tax of
 * each. `--max-tax PCT` exits 1 when the step-time tax is above PCT.
 *
 * Every flag of `detrain train` is accepted (bench's defaults: --model gpt2-124m
 * --micro-batch-size 16 --seq-length 1024 --device cuda; the run's length and mode are the
 * bench's: --train-iters and --deterministic-mode are refused). The parent runs
 * `<this binary> bench --worker MODE ...` twice and reads one line "DT_BENCH key=value ..."
 * from each.
 *
 * Data parallel: `--ranks N` (N > 1) runs each worker as N processes, `mpirun -np N
 * --oversubscribe --quiet [--allow-run-as-root when run as root] <this binary> bench
 * --worker MODE ...` (--mpirun names another mpirun), and the report adds the
 * communication time a step (the time inside the communicator's collectives, dist/comm.h:
 * on the CPU nothing overlaps, so all of it is exposed) and its tax, the rank-ordered
 * reduction's against the library's. A worker's rank 0 prints the DT_BENCH line. The bench
 * itself is not to be started under mpirun: every worker is a fresh MPI job (an MPI
 * process cannot initialise MPI twice, and the two modes need two processes). */
#include "cli/cli.h"

#include "config/train_config.h"
#include "core/determinism.h"
#include "core/json_read.h"
#include "ops/op.h"
#include "train/loop.h"
#include "train/train_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct bench_args {
    const char *worker, *json, *mpirun;
    int warmup, steps, profile_steps, ranks;
    double max_tax;
    int nrest;          /* the train flags, passed through */
    char **rest;
} bench_args;

static const char *bench_defaults[] = {"--model", "gpt2-124m", "--micro-batch-size", "16", "--seq-length",
                                       "1024", "--device", "cuda"};
#define NDEFAULTS ((int)(sizeof bench_defaults / sizeof bench_defaults[0]))

static void usage(FILE *f) {
    fprintf(f, "usage: detrain bench [--warmup 5] [--steps 20] [--profile-steps 3] [--max-tax PCT] [--json FILE]\n"
               "                     [--ranks N [--mpirun PATH]] [flags of detrain train]\n"
               "Default vs deterministic mode, side by side, through the training loop of `detrain train`\n"
               "(defaults: --model gpt2-124m --micro-batch-size 16 --seq-length 1024 --device cuda).\n"
               "--ranks N: each mode as N data-parallel processes through mpirun (default 1), with the\n"
               "communication time a step and its tax (rank-ordered against the library's reduction).\n");
}

static int int_value(const char *flag, const char *v, int lo, int *out) {
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > 1000000) {
        fprintf(stderr, "detrain bench: %s '%s' is not an integer in [%d, 1000000]\n", flag, v, lo);
        return 2;
    }
    *out = (int)x;
    return 0;
}

static int parse(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    a->warmup = 5; a->steps = 20; a->profile_steps = 3; a->max_tax = -1; a->ranks = 1; a->mpirun = "mpirun";
    a->rest = calloc((size_t)argc + 1, sizeof *a->rest);
    if (!a->rest) return 2;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { usage(stdout); return 1; }
        int mine = !strcmp(f, "--worker") || !strcmp(f, "--json") || !strcmp(f, "--warmup") || !strcmp(f, "--steps") ||
                   !strcmp(f, "--profile-steps") || !strcmp(f, "--max-tax") || !strcmp(f, "--ranks") ||
                   !strcmp(f, "--mpirun");
        if (!strcmp(f, "--train-iters") || !strncmp(f, "--train-iters=", 14) || !strcmp(f, "--deterministic-mode")) {
            fprintf(stderr, "detrain bench: %s is the bench's own (it runs --warmup + --steps + --profile-steps steps "
                    "in each mode)\n", f);
            return 2;
        }
        if (!mine) { a->rest[a->nrest++] = argv[i]; continue; }
        if (i + 1 >= argc || !*argv[i + 1]) { fprintf(stderr, "detrain bench: %s needs a value\n", f); return 2; }
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(f, "--worker")) a->worker = v;
        else if (!strcmp(f, "--json")) a->json = v;
        else if (!strcmp(f, "--warmup")) rc = int_value(f, v, 0, &a->warmup);
        else if (!strcmp(f, "--steps")) rc = int_value(f, v, 1, &a->steps);
        else if (!strcmp(f, "--profile-steps")) rc = int_value(f, v, 0, &a->profile_steps);
        else if (!strcmp(f, "--ranks")) rc = int_value(f, v, 1, &a->ranks);
        else if (!strcmp(f, "--mpirun")) a->mpirun = v;
        else {
            char *end = NULL;
            a->max_tax = strtod(v, &end);
            if (!*v || *end || a->max_tax < 0) { fprintf(stderr, "detrain bench: --max-tax '%s' is not a percentage >= 0\n", v); return 2; }
        }
        if (rc) return rc;
    }
    return 0;
}

/* ---- the worker: the loop with timers ---------------------------------------------- */

typedef struct bench_ctx {
    const bench_args *a;
    size_t num_params;
    double peak, t_prev, loss_first, loss_last;
    double *ms, *rms;           /* per step; per range and profiled step */
    double *comm;               /* per step: ms inside the communicator's collectives */
    int rank, ranks;
    const char *engine;
    int nranges;
    const char *rname[DT_BACKEND_MAX_RANGES];
    double mem, model_mem;
    char device[256];
    /* the token distribution of the batches: distinct tokens and the most frequent token's
     * share, per micro-batch (the det embedding backward's cost depends on both) */
    int *count, vocab, nbatch, cap;
    double *distinct, *top_share;
} bench_ctx;

static void b_batch(void *ctx, const int *inputs, int n) {
    bench_ctx *c = ctx;
    if (!c->count || c->nbatch >= c->cap) return;
    int distinct = 0, top = 0;
    for (int i = 0; i < n; i++)
        if (inputs[i] >= 0 && inputs[i] < c->vocab && c->count[inputs[i]]++ == 0) distinct++;
    for (int i = 0; i < n; i++)
        if (inputs[i] >= 0 && inputs[i] < c->vocab) {
            if (c->count[inputs[i]] > top) top = c->count[inputs[i]];
        }
    for (int i = 0; i < n; i++)
        if (inputs[i] >= 0 && inputs[i] < c->vocab) c->count[inputs[i]] = 0;
    c->distinct[c->nbatch] = distinct;
    c->top_share[c->nbatch++] = (double)top / n;
}

/* The device's name for the report: env.json's "gpu" and "sms" of the backend's
 * description, or "cpu". */
static void device_name(const char *desc, char *out, size_t cap) {
    snprintf(out, cap, "cpu");
    dt_json_value *j = NULL;
    if (!desc || dt_json_parse(desc, strlen(desc), "device description", &j) != DT_OK) return;
    const dt_json_value *g = dt_json_get(j, "gpu"), *s = dt_json_get(j, "sms");
    if (g && g->type == DT_JSON_STRING && s && s->type == DT_JSON_NUMBER)
        snprintf(out, cap, "%s (%s SMs)", g->text, s->text);
    dt_json_free(j);
}

static dt_status b_started(void *ctx, dt_backend *b, const dt_train_state *r) {
    bench_ctx *c = ctx;
    c->num_params = r->model->num_params;
    c->rank = r->rank;
    c->ranks = r->size;
    c->engine = b->comm->ops->engine;
    c->nranges = b->ops->ranges(b, c->rname, DT_BACKEND_MAX_RANGES);
    dt_status st = b->ops->peak_tflops(b, &c->peak);
    c->t_prev = dt_train_now_ms();
    return st;
}

static dt_status b_before(void *ctx, dt_backend *b, int64_t step) {
    bench_ctx *c = ctx;
    b->ops->profile(b, step > c->a->warmup + c->a->steps);
    return DT_OK;
}

/* A step's interval runs from the previous step's end to its own (the loop's end of a
 * step: its statistics read back), so it holds everything the device and the host do for
 * one step, the previous update its launches queued behind included. */
static dt_status b_after(void *ctx, dt_backend *b, const dt_step_metrics *sm) {
    bench_ctx *c = ctx;
    double now = dt_train_now_ms();
    int k = (int)sm->step - 1;
    c->ms[k] = now - c->t_prev;
    c->comm[k] = sm->comm_ms;
    c->t_prev = now;
    if (k == 0) c->loss_first = sm->loss;
    c->loss_last = sm->loss;
    int p = k - c->a->warmup - c->a->steps;
    if (p >= 0 && c->nranges > 0) {
        double acc[DT_BACKEND_MAX_RANGES] = {0};
        dt_status st = b->ops->range_ms(b, acc);
        if (st != DT_OK) return st;
        for (int i = 0; i < c->nranges; i++) c->rms[(size_t)i * c->a->profile_steps + p] = acc[i];
    }
    return DT_OK;
}

static dt_status b_finished(void *ctx, dt_backend *b) {
    bench_ctx *c = ctx;
    b->ops->memory(b, &c->mem, &c->model_mem);
    device_name(b->ops->describe(b), c->device, sizeof c->device);
    return DT_OK;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}
static double median(const double *v, int n) {
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s || n < 1) { free(s); return 0.0; }
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

static int fail_cfg(dt_train_config *cfg) {
    fprintf(stderr, "detrain bench: %s\n", dt_errmsg());
    dt_train_config_free(cfg);
    return 2;
}

static int worker(const bench_args *a) {
    int det = !strcmp(a->worker, "det");
    if (!det && strcmp(a->worker, "default")) {
        fprintf(stderr, "detrain bench: --worker must be det or default\n");
        return 2;
    }
    int nsteps = a->warmup + a->steps + a->profile_steps;
    char iters[32];
    snprintf(iters, sizeof iters, "%d", nsteps);
    const char *fixed[] = {"--train-iters", iters, "--eval-interval", "0", "--quiet", "--deterministic-mode"};
    int nfixed = det ? 6 : 5, argc = NDEFAULTS + a->nrest + nfixed;
    char **argv = calloc((size_t)argc, sizeof *argv);
    if (!argv) return 2;
    int n = 0;
    for (int i = 0; i < NDEFAULTS; i++) argv[n++] = (char *)(uintptr_t)bench_defaults[i];
    for (int i = 0; i < a->nrest; i++) argv[n++] = a->rest[i];
    for (int i = 0; i < nfixed; i++) argv[n++] = (char *)(uintptr_t)fixed[i];
    dt_train_config cfg;
    int help = 0;
    if (dt_train_config_parse(&cfg, argc, argv, &help) != DT_OK) { free(argv); return fail_cfg(&cfg); }
    dt_det_request req = {cfg.deterministic, cfg.opts.uses, cfg.opts.nuses};
    if (dt_determinism_apply(&req) != DT_OK) { free(argv); return fail_cfg(&cfg); }
    const dt_str_list *ov = &cfg.lists[DT_LIST_OP_VARIANT];
    for (int i = 0; i < ov->n; i++)
        if (dt_op_override(ov->v[i]) != DT_OK) { free(argv); return fail_cfg(&cfg); }
    if (dt_train_config_resolve(&cfg) != DT_OK || dt_runtime_init() != DT_OK) { free(argv); return fail_cfg(&cfg); }
    bench_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.ms = calloc((size_t)nsteps, sizeof *c.ms);
    c.comm = calloc((size_t)nsteps, sizeof *c.comm);
    c.rms = calloc((size_t)DT_BACKEND_MAX_RANGES * (size_t)(a->profile_steps + 1), sizeof *c.rms);
    c.vocab = cfg.gpt.vocab_size;
    c.cap = nsteps * (cfg.global_batch / cfg.micro_batch);
    c.count = calloc((size_t)c.vocab, sizeof *c.count);
    c.distinct = calloc((size_t)c.cap + 1, sizeof *c.distinct);
    c.top_share = calloc((size_t)c.cap + 1, sizeof *c.top_share);
    dt_loop_hooks hooks = {&c, b_started, b_before, b_after, b_finished, b_batch};
    dt_status st = c.ms && c.rms && c.comm ? dt_train_loop(&cfg, &hooks) : dt_fail(DT_ENOMEM, "bench timers");
    free(argv);
    if (st != DT_OK) {
        free(c.ms);
        free(c.comm);
        free(c.rms);
        free(c.count); free(c.distinct); free(c.top_share);
        return fail_cfg(&cfg);
    }
    const double *timed = c.ms + a->warmup;
    double lo = 1e30, hi = 0.0;
    for (int i = 0; i < a->steps; i++) {
        if (timed[i] < lo) lo = timed[i];
        if (timed[i] > hi) hi = timed[i];
    }
    double step_ms = median(timed, a->steps), BT = (double)cfg.micro_batch * cfg.seq_length;
    double tok_s = (double)cfg.global_batch * cfg.seq_length / (step_ms * 1e-3);
    /* model FLOPs per step: 6 N per token for the parameter GEMMs (N counts the tied
     * embedding once, as the output head) + 12 L C T per token for attention scores and
     * values, forward and backward, without discounting the causal mask */
    double N = (double)c.num_params - (double)cfg.gpt.max_seq_len * cfg.gpt.channels;
    double flops = (6.0 * N * BT + 12.0 * cfg.gpt.num_layers * (double)cfg.gpt.channels * cfg.seq_length * BT) *
                   (cfg.global_batch / cfg.micro_batch);
    double mfu = c.peak > 0 ? flops / (step_ms * 1e-3) / (c.peak * 1e12) : 0.0;
    for (char *p = c.device; *p; p++)
        if (*p == ' ') *p = '_';
    if (c.rank != 0) { /* rank 0 reports for the job */
        free(c.ms); free(c.comm); free(c.rms);
        free(c.count); free(c.distinct); free(c.top_share);
        dt_train_config_free(&cfg);
        return 0;
    }
    printf("DT_BENCH mode=%s step_ms=%.6f", a->worker, step_ms);
    printf(" ranks=%d engine=%s comm_ms=%.6f", c.ranks, c.engine, median(c.comm + a->warmup, a->steps));
    printf(" step_min=%.6f step_max=%.6f tok_s=%.3f mfu=%.6f peak_tflops=%.3f "
           "flops=%.6g mem_gib=%.4f model_gib=%.4f loss0=%.6f loss1=%.6f distinct=%.1f top_share=%.6f device=%s",
           lo, hi, tok_s, mfu, c.peak, flops, c.mem / (1 << 30), c.model_mem / (1 << 30),
           c.loss_first, c.loss_last, median(c.distinct, c.nbatch), median(c.top_share, c.nbatch), c.device);
    for (int i = 0; i < c.nranges; i++)
        printf(" r.%s=%.6f", c.rname[i], a->profile_steps > 0 ? median(c.rms + (size_t)i * a->profile_steps,
                                                                        a->profile_steps) : 0.0);
    printf("\n");
    fflush(stdout);
    free(c.ms);
    free(c.comm);
    free(c.rms);
    free(c.count); free(c.distinct); free(c.top_share);
    dt_train_config_free(&cfg);
    return 0;
}

enum { MAXR = DT_BACKEND_MAX_RANGES };
typedef struct parsed {
    double step_ms, step_min, step_max, tok_s, mfu, peak, flops, mem, model_mem, loss0, loss1, distinct, top_share;
    double comm_ms;
    int ranks;
    char device[256], engine[32];
    int nr;
    char rname[MAXR][32];
    double rms[MAXR];
} parsed;

/* Runs `self bench --worker MODE <the bench's and the train flags>` with its stdout on a
 * pipe (no shell: the flags pass through as they are) and parses its DT_BENCH line;
 * every other line is passed on. */
static int run_worker(const char *self, const bench_args *a, const char *mode, parsed *p) {
    char w[3][32];
    snprintf(w[0], sizeof w[0], "%d", a->warmup);
    snprintf(w[1], sizeof w[1], "%d", a->steps);
    snprintf(w[2], sizeof w[2], "%d", a->profile_steps);
    char np[32];
    snprintf(np, sizeof np, "%d", a->ranks);
    const char *launch[] = {a->mpirun, "-np", np, "--oversubscribe", "--quiet", "--allow-run-as-root"};
    int nl = a->ranks > 1 ? (geteuid() == 0 ? 6 : 5) : 0;
    const char *head[] = {self, "bench", "--worker", mode, "--warmup", w[0], "--steps", w[1], "--profile-steps", w[2]};
    int nh = (int)(sizeof head / sizeof head[0]);
    char **argv = calloc((size_t)(nl + nh + a->nrest + 1), sizeof *argv);
    int fd[2];
    if (!argv || pipe(fd) != 0) { free(argv); fprintf(stderr, "detrain bench: cannot start a worker\n"); return 2; }
    for (int i = 0; i < nl; i++) argv[i] = (char *)(uintptr_t)launch[i];
    for (int i = 0; i < nh; i++) argv[nl + i] = (char *)(uintptr_t)head[i];
    for (int i = 0; i < a->nrest; i++) argv[nl + nh + i] = a->rest[i];
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (nl) execvp(argv[0], argv);
        else execv(self, argv);
        if (nl) fprintf(stderr, "detrain bench: cannot run %s for --ranks %d (OpenMPI: bash scripts/install-deps.sh)\n",
                        a->mpirun, a->ranks);
        _exit(127);
    }
    free(argv);
    close(fd[1]);
    FILE *f = pid > 0 ? fdopen(fd[0], "r") : NULL;
    if (!f) { close(fd[0]); fprintf(stderr, "detrain bench: cannot start a worker\n"); return 2; }
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
            else if (!strcmp(k, "comm_ms")) p->comm_ms = x;
            else if (!strcmp(k, "ranks")) p->ranks = (int)x;
            else if (!strcmp(k, "engine")) snprintf(p->engine, sizeof p->engine, "%s", v);
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
            else if (!strcmp(k, "distinct")) p->distinct = x;
            else if (!strcmp(k, "top_share")) p->top_share = x;
            else if (!strcmp(k, "device")) snprintf(p->device, sizeof p->device, "%s", v);
            else if (!strncmp(k, "r.", 2) && p->nr < MAXR) {
                snprintf(p->rname[p->nr], sizeof p->rname[0], "%s", k + 2);
                p->rms[p->nr++] = x;
            }
        }
    }
    fclose(f);
    int rc = 0;
    if (waitpid(pid, &rc, 0) != pid) rc = -1;
    if (!got || rc != 0) {
        fprintf(stderr, "detrain bench: the %s worker failed (exit status %d)\n", mode, rc);
        return 2;
    }
    for (char *c = p->device; *c; c++)
        if (*c == '_') *c = ' ';
    return 0;
}

static const char *np_text(int n) {
    static char b[16];
    snprintf(b, sizeof b, "%d", n);
    return b;
}

static double tax(double det, double def) { return def > 0 ? (det / def - 1.0) * 100.0 : 0.0; }

int dt_cmd_bench(int argc, char **argv) {
    bench_args a;
    int rc = parse(argc, argv, &a);
    if (rc) { free(a.rest); return rc == 1 ? 0 : rc; }
    if (a.worker) { rc = worker(&a); free(a.rest); return rc; }
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    if (launched && strcmp(launched, "1")) {
        fprintf(stderr, "detrain bench: started by mpirun with %s processes: run `detrain bench --ranks %s ...` "
                "without mpirun (it launches each mode's workers through mpirun itself)\n", launched, launched);
        free(a.rest);
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { fprintf(stderr, "detrain bench: cannot find this binary (/proc/self/exe)\n"); return 2; }
    self[n] = 0;
    /* the train flags checked here first, so a bad one stops the bench before a worker runs */
    char **targv = calloc((size_t)(NDEFAULTS + a.nrest + 1), sizeof *targv);
    if (!targv) return 2;
    for (int i = 0; i < NDEFAULTS; i++) targv[i] = (char *)(uintptr_t)bench_defaults[i];
    for (int i = 0; i < a.nrest; i++) targv[NDEFAULTS + i] = a.rest[i];
    dt_train_config cfg;
    int help = 0;
    dt_status cst = dt_train_config_parse(&cfg, NDEFAULTS + a.nrest, targv, &help);
    if (cst == DT_OK) cst = dt_train_config_resolve(&cfg);
    free(targv);
    if (cst != DT_OK) return fail_cfg(&cfg);
    struct { const char *model; int B, T; } run = {cfg.model, cfg.micro_batch, cfg.seq_length};
    parsed def, det;
    if ((rc = run_worker(self, &a, "default", &def)) != 0 || (rc = run_worker(self, &a, "det", &det)) != 0) {
        dt_train_config_free(&cfg);
        return rc;
    }
    double t = tax(det.step_ms, def.step_ms);
    printf("\ndetrain bench: %s, B=%d T=%d, %s, %s%s%s; median of %d steps (end to end) after %d warm-up; "
           "ranges: median of %d profiled steps\n", run.model, run.B, run.T, cfg.device ? "bf16" : "fp32", def.device,
           a.ranks > 1 ? ", ranks " : "", a.ranks > 1 ? np_text(a.ranks) : "", a.steps, a.warmup, a.profile_steps);
    printf("%-34s %14s %14s %9s\n", "", "default", "deterministic", "tax");
    printf("%-34s %14.3f %14.3f %8.2f%%\n", "step ms (median)", def.step_ms, det.step_ms, t);
    printf("%-34s %14.3f %14.3f\n", "step ms (min)", def.step_min, det.step_min);
    printf("%-34s %14.0f %14.0f\n", "tokens/s", def.tok_s, det.tok_s);
    if (def.ranks > 1) {
        /* the time inside the collectives; the CPU backend overlaps none of it */
        char ranks[96];
        snprintf(ranks, sizeof ranks, "comm ms a step (%d ranks, %s)", def.ranks, def.engine);
        printf("%-34s %14.3f %14.3f %8.2f%%\n", ranks, def.comm_ms, det.comm_ms, tax(det.comm_ms, def.comm_ms));
        printf("%-34s %14.3f %14.3f\n", cfg.device ? "  of which exposed (host time)" : "  of which exposed (all: CPU)",
               def.comm_ms, det.comm_ms);
        printf("%-34s %14s %14s\n", "  reduction", "library", "rank-ordered");
    }
    char mfu[64];
    snprintf(mfu, sizeof mfu, "MFU (peak %.0f TFLOP/s measured)", def.peak);
    printf("%-34s %13.1f%% %13.1f%%\n", mfu, def.mfu * 100, det.mfu * 100);
    printf("%-34s %14.2f %14.2f\n", "device memory in use GiB", def.mem, det.mem);
    printf("%-34s %14.0f %14.0f\n", "distinct tokens a batch (median)", def.distinct, det.distinct);
    printf("%-34s %13.1f%% %13.1f%%\n", "top token's share (median)", def.top_share * 100, det.top_share * 100);
    printf("%-34s %14.4f %14.4f\n", "loss first / last step", def.loss0, det.loss0);
    printf("%-34s %14.4f %14.4f\n", "", def.loss1, det.loss1);
    if (det.nr == 0) printf("\nno named ranges on the %s backend\n", cfg.device ? "cuda" : "cpu");
    else printf("\nleaderboard (ms per step, CUDA events; NVTX ranges of the same names):\n");
    if (det.nr) printf("%-16s %10s %10s %9s %8s\n", "range", "default", "det", "tax", "share");
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
        if (!f) { fprintf(stderr, "detrain bench: cannot write %s\n", a.json); dt_train_config_free(&cfg); return 2; }
        fprintf(f, "{\"model\":\"%s\",\"B\":%d,\"T\":%d,\"device\":\"%s\",\"tax_pct\":%.4f,\"data\":{\"distinct\":%.1f,"
                "\"top_share\":%.6f}", run.model, run.B, run.T, def.device, t, det.distinct, det.top_share);
        const parsed *ps[2] = {&def, &det};
        const char *names[2] = {"default", "deterministic"};
        for (int m = 0; m < 2; m++) {
            const parsed *p = ps[m];
            fprintf(f, ",\"%s\":{\"step_ms\":%.6f,\"tok_per_s\":%.3f,\"mfu\":%.6f,\"peak_tflops\":%.3f,"
                    "\"mem_gib\":%.4f,\"ranks\":%d,\"comm_ms\":%.6f,\"ranges\":{", names[m], p->step_ms, p->tok_s,
                    p->mfu, p->peak, p->mem, p->ranks, p->comm_ms);
            for (int i = 0; i < p->nr; i++) fprintf(f, "%s\"%s\":%.6f", i ? "," : "", p->rname[i], p->rms[i]);
            fprintf(f, "}}");
        }
        fprintf(f, "}\n");
        fclose(f);
    }
    if (a.max_tax >= 0 && t > a.max_tax) {
        printf("\ndetrain bench: tax %.2f%% is above --max-tax %.2f%%\n", t, a.max_tax);
        dt_train_config_free(&cfg);
        return 1;
    }
    dt_train_config_free(&cfg);
    return 0;
}
