/* Seeded random argument vectors for the detrain command line (train, compare,
 * trace-diff, ckpt, data), run against a sanitized binary by tests/sanitize/test_fuzz.sh.
 *
 * usage: argv_fuzz DETRAIN WORKDIR SEED ITERATIONS [CORPUS]
 * WORKDIR holds the fixtures the shell test made (a checkpoint, logs, traces, a shard,
 * a fifo, a symlink to /dev/zero, a garbage file); each run's outputs go to a fresh
 * WORKDIR/out, removed after it. CORPUS: fixed cases, one per line, arguments separated
 * by TABs, "@W" standing for WORKDIR, "''" for an empty argument; run before the random
 * ones.
 *
 * Each case must end with exit 0, 1 or 2 within the time limit and print no sanitizer
 * report; anything else (a signal, another exit code, a sanitizer report on stderr, a
 * hang) is printed with its seed, iteration, arguments (shell-quoted) and the end of its
 * stderr, and the driver exits 1. Values come from pools: edge numbers (empty, signs,
 * spaces, overflow, hex, exponents, NaN, flags as values), paths of every kind, and for
 * the flags that set how much work a run does (steps, batches, eval batches, threads)
 * only small or invalid numbers, so a run stays short. Output flags only ever name paths
 * under WORKDIR. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_rng.h"

enum { MAX_ARGS = 64, TIMEOUT_S = 20 };

static char W[1024];          /* the work directory */
static char argbuf[MAX_ARGS][1200];
static int nargs;

#define N(a) (sizeof(a) / sizeof((a)[0]))
static const char *pick(const char *const *pool, size_t n) { return pool[below(n)]; }

/* ---- value pools */
static const char *const NUM[] = {"0", "1", "2", "3", "8", "16", "-1", "-0", "+1", " 1", "1 ", "1e1", "0x10",
                                  "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
                                  "9223372036854775808", "99999999999999999999", "", "abc", "nan", "inf", "-inf",
                                  "1.5", "0.5", "1e-30", "1e30", "--quiet", "-", "=", "\xff\xfe", "1\n"};
static const char *const SMALL[] = {"0", "1", "2", "-1", "-0", "", "abc", "1e1", " 2", "2 ", "+2", "0x2", "nan",
                                    "9223372036854775808", "99999999999999999999", "-9223372036854775809",
                                    "--quiet", "2.5"};
static const char *const FLOAT[] = {"0", "1", "0.1", "1e-3", "-1", "1e30", "1e-45", "3.4e38", "3.5e38", "nan",
                                    "inf", "-inf", "", "0x1p-3", "1,5", "--lr", "0.999999", "1e400"};
static const char *const WORD[] = {"", "tiny", "small", "TINY", "x", "cpu", "cuda", "gpu", "off", "op", "kernel",
                                   "metrics", "semantic", "module", "1-2", "2-1", "0", "1,2", "-", "--", "--model",
                                   "gemm=fast", "gemm=det", "nosuch=det", "=", "adamw@1", "matmul@0", "x@y",
                                   "layernorm@99999999999", "@", "\xff", "a\nb"};
/* relative names below W; "R:" a path to read, "O:" a fresh output path */
static const char *const READ[] = {"ck", "ck/iter_0000002", "ck/latest_checkpointed_iteration.txt", "l1", "l2",
                                   "l1/metrics.jsonl", "t1", "t1/rank_000000.trace", "shard.bin", "fifo", "zero",
                                   "garbage", "empty", "nonexistent", "", "/", "/dev/null", "hf", "ck/iter_0000002/model.safetensors"};
static const char *const WRITE[] = {"O:", "O:", "O:/deeper/than/one", "", "garbage", "fifo", "zero", "empty", "ck", "l1"};

static void add(const char *s) {
    if (nargs < MAX_ARGS) snprintf(argbuf[nargs++], sizeof argbuf[0], "%s", s);
}
static void add_path(const char *rel) {
    char p[1200];
    if (!strncmp(rel, "O:", 2)) snprintf(p, sizeof p, "%s/out/o%s", W, rel + 2);
    else if (!*rel || rel[0] == '/') snprintf(p, sizeof p, "%s", rel);
    else snprintf(p, sizeof p, "%s/%s", W, rel);
    add(p);
}

/* ---- flag tables: name and the pool its value comes from */
enum pool { P_NUM, P_SMALL, P_FLOAT, P_WORD, P_READ, P_WRITE, P_SWITCH };
typedef struct { const char *name; enum pool pool; } flagdef;
static const flagdef TRAIN[] = {
    {"--model", P_WORD}, {"--num-layers", P_NUM}, {"--hidden-size", P_NUM}, {"--num-attention-heads", P_NUM},
    {"--seq-length", P_NUM}, {"--max-position-embeddings", P_NUM}, {"--vocab-size", P_NUM},
    {"--micro-batch-size", P_SMALL}, {"--global-batch-size", P_SMALL}, {"--train-iters", P_SMALL}, {"--lr", P_FLOAT},
    {"--min-lr", P_FLOAT}, {"--lr-warmup-iters", P_NUM}, {"--lr-decay-iters", P_NUM}, {"--weight-decay", P_FLOAT},
    {"--clip-grad", P_FLOAT}, {"--adam-beta1", P_FLOAT}, {"--adam-beta2", P_FLOAT}, {"--adam-eps", P_FLOAT},
    {"--hidden-dropout", P_FLOAT}, {"--attention-dropout", P_FLOAT}, {"--device", P_WORD}, {"--seed", P_NUM},
    {"--deterministic-mode", P_SWITCH}, {"--data-path", P_READ}, {"--val-fraction", P_FLOAT}, {"--save", P_WRITE},
    {"--save-interval", P_SMALL}, {"--save-overwrite", P_SWITCH}, {"--load", P_READ}, {"--no-load-optim", P_SWITCH},
    {"--no-load-rng", P_SWITCH}, {"--init-from-hf", P_READ}, {"--log-dir", P_WRITE}, {"--log-interval", P_NUM},
    {"--eval-interval", P_SMALL}, {"--eval-iters", P_SMALL}, {"--threads", P_SMALL}, {"--op-variant", P_WORD},
    {"--trace-level", P_WORD}, {"--trace-steps", P_WORD}, {"--trace-ranks", P_WORD}, {"--trace-dir", P_WRITE},
    {"--inject-nondeterminism", P_WORD}, {"--debug-allow-injection", P_SWITCH}, {"--quiet", P_SWITCH},
    {"--help", P_SWITCH}, {"--nosuch", P_SWITCH}, {"-h", P_SWITCH}, {"--", P_SWITCH}};
static const flagdef TRACE_DIFF[] = {{"--json", P_SWITCH}, {"--rank", P_NUM}, {"--allow-unclosed", P_SWITCH},
                                     {"--help", P_SWITCH}, {"--bogus", P_SWITCH}};
static const flagdef DATA[] = {{"--bytes", P_READ}, {"--out", P_WRITE}, {"--val-fraction", P_FLOAT},
                               {"--shard-tokens", P_SMALL}, {"--vocab", P_NUM}, {"--help", P_SWITCH}};

static void add_value(enum pool p) {
    switch (p) {
    case P_NUM: add(pick(NUM, N(NUM))); break;
    case P_SMALL: add(pick(SMALL, N(SMALL))); break;
    case P_FLOAT: add(pick(FLOAT, N(FLOAT))); break;
    case P_WORD: add(pick(WORD, N(WORD))); break;
    case P_READ: add_path(pick(READ, N(READ))); break;
    case P_WRITE: add_path(pick(WRITE, N(WRITE))); break;
    case P_SWITCH: break;
    }
}

/* One flag: "--name value", "--name=value", the name alone (value missing), or a value
 * given to a switch. */
static void add_flag(const flagdef *t, size_t n) {
    const flagdef *f = &t[below(n)];
    unsigned form = (unsigned)below(10);
    if (f->pool == P_SWITCH) {
        add(f->name);
        if (form == 0) { snprintf(argbuf[nargs - 1], sizeof argbuf[0], "%s=1", f->name); }
        return;
    }
    if (form == 0) { add(f->name); return; } /* value missing or taken from the next flag */
    if (form == 1) {
        int at = nargs;
        add_value(f->pool);
        if (at < nargs) {
            char v[1100];
            snprintf(v, sizeof v, "%s", argbuf[at]);
            snprintf(argbuf[at], sizeof argbuf[0], "%s=%s", f->name, v);
        } else {
            add(f->name);
        }
        return;
    }
    add(f->name);
    add_value(f->pool);
}

/* A random argument vector (after argv[0]) into argbuf. */
static void gen(void) {
    nargs = 0;
    int k = (int)below(7);
    switch (below(12)) {
    case 0: case 1: case 2: case 3: case 4: /* train, from a small valid run */
        add("train");
        { /* the work a run does stays small (the flags below may change it, within SMALL) */
            static const char *const work[] = {"--train-iters", "2", "--eval-interval", "0", "--seq-length", "8",
                                               "--micro-batch-size", "1", "--threads", "1", "--quiet"};
            for (size_t i = 0; i < N(work); i++) add(work[i]);
        }
        if (below(8) != 0) {
            static const char *const base[] = {"--model", "tiny", "--num-layers", "1", "--hidden-size", "16",
                                               "--num-attention-heads", "2"};
            for (size_t i = 0; i < N(base); i++) add(base[i]);
        }
        for (int i = 0; i < k; i++) add_flag(TRAIN, N(TRAIN));
        break;
    case 5: case 6: /* compare */
        add("compare");
        for (int i = (int)below(4); i > 0; i--) (below(6) ? add_path(pick(READ, N(READ))) : add(pick(WORD, N(WORD))));
        break;
    case 7: case 8: /* trace-diff */
        add("trace-diff");
        for (int i = (int)below(3); i > 0; i--) add_path(pick(READ, N(READ)));
        for (int i = (int)below(3); i > 0; i--) add_flag(TRACE_DIFF, N(TRACE_DIFF));
        break;
    case 9: /* ckpt */
        add("ckpt");
        if (below(6)) add(below(5) ? "verify" : pick(WORD, N(WORD)));
        for (int i = (int)below(3); i > 0; i--) (below(4) ? add_path(pick(READ, N(READ))) : add(pick(WORD, N(WORD))));
        break;
    case 10: /* data */
        add("data");
        { static const char *const sub[] = {"tokenize", "info", "builtin", "", "x", "--help"}; add(pick(sub, N(sub))); }
        for (int i = 0; i < k; i++) {
            if (below(3) == 0) add_path(pick(READ, N(READ)));
            else add_flag(DATA, N(DATA));
        }
        break;
    default: { /* the top level */
        static const char *const top[] = {"", "--version", "--help", "-h", "nosuch", "TRAIN", "gate", "--version"};
        if (below(4)) add(pick(top, N(top)));
        if (below(2)) add(pick(WORD, N(WORD)));
    }
    }
    /* --bytes reads its file to the end: never a fifo or /dev/zero (a blocking read of
     * a stream is what the user asked for); any other path is fine */
    for (int i = 0; i + 1 < nargs; i++)
        if (!strcmp(argbuf[i], "--bytes") && (strstr(argbuf[i + 1], "/fifo") || strstr(argbuf[i + 1], "/zero")))
            snprintf(argbuf[i + 1], sizeof argbuf[0], "%s/garbage", W);
}

/* ---- running one case */
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static void print_case(FILE *o) {
    for (int i = 0; i < nargs; i++) {
        fputs(" '", o);
        for (const char *c = argbuf[i]; *c; c++) {
            if (*c == '\'') fputs("'\\''", o);
            else if ((unsigned char)*c < 32 || (unsigned char)*c >= 127) fprintf(o, "'$'\\x%02x''", (unsigned char)*c);
            else fputc(*c, o);
        }
        fputc('\'', o);
    }
}

/* 1 when stderr shows a sanitizer report. */
static int sanitizer_report(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char line[4096];
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f))
        hit = strstr(line, "AddressSanitizer") || strstr(line, "LeakSanitizer") ||
              strstr(line, "UndefinedBehaviorSanitizer") || strstr(line, "runtime error:");
    fclose(f);
    return hit;
}

static void tail(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t from = n > 1500 ? n - 1500 : 0;
    fprintf(stderr, "    stderr: %s\n", buf + from);
}

/* Runs argbuf under the binary; returns 0 when it ends acceptably, else prints the case
 * under `verdict` ("FAIL", or "KNOWN FAIL" for a labelled corpus case) and returns 1. */
static int run_case(const char *bin, const char *label, const char *verdict) {
    char out[1100], err[1100];
    snprintf(out, sizeof out, "%s/out", W);
    snprintf(err, sizeof err, "%s/stderr.txt", W);
    nftw(out, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    mkdir(out, 0755);
    char *av[MAX_ARGS + 2];
    av[0] = (char *)bin;
    for (int i = 0; i < nargs; i++) av[i + 1] = argbuf[i];
    av[nargs + 1] = NULL;
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), n = open("/dev/null", O_RDWR);
        if (e < 0 || n < 0 || chdir(out) != 0) _exit(120);
        dup2(n, 0);
        dup2(n, 1);
        dup2(e, 2);
        execv(bin, av);
        _exit(121);
    }
    int status = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > TIMEOUT_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "%s %s: hung (killed after %d s):", verdict, label, TIMEOUT_S);
            print_case(stderr);
            fputc('\n', stderr);
            tail(err);
            return 1;
        }
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
    }
    const char *why = NULL;
    char buf[64];
    if (WIFSIGNALED(status)) { snprintf(buf, sizeof buf, "killed by signal %d", WTERMSIG(status)); why = buf; }
    else if (WEXITSTATUS(status) > 2) { snprintf(buf, sizeof buf, "exit %d", WEXITSTATUS(status)); why = buf; }
    else if (sanitizer_report(err)) why = "sanitizer report";
    if (!why) return 0;
    fprintf(stderr, "%s %s: %s: detrain", verdict, label, why);
    print_case(stderr);
    fputc('\n', stderr);
    tail(err);
    return 1;
}

/* Splits a corpus line into argbuf (TAB-separated; "@W" prefix = WORKDIR; "''" = empty). */
static void parse_line(char *line) {
    nargs = 0;
    line[strcspn(line, "\n")] = 0;
    for (char *tok = line, *next; tok; tok = next) {
        next = strchr(tok, '\t');
        if (next) *next++ = 0;
        if (!strcmp(tok, "''")) add("");
        else if (!strncmp(tok, "@W", 2)) {
            char p[1200];
            snprintf(p, sizeof p, "%s%s", W, tok + 2);
            add(p);
        } else add(tok);
    }
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: argv_fuzz DETRAIN WORKDIR SEED ITERATIONS [CORPUS]\n");
        return 2;
    }
    const char *bin = argv[1];
    snprintf(W, sizeof W, "%s", argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    long iters = atol(argv[4]);
    int failures = 0;
    long cases = 0;
    char label[128];
    if (argc == 6) {
        FILE *c = fopen(argv[5], "r");
        if (!c) { perror(argv[5]); return 2; }
        char line[8192];
        int ln = 0;
        while (fgets(line, sizeof line, c)) {
            ln++;
            if (line[0] == '#' || line[0] == '\n') continue;
            parse_line(line);
            snprintf(label, sizeof label, "corpus line %d", ln);
            failures += run_case(bin, label, "FAIL");
            cases++;
        }
        fclose(c);
    }
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (long it = 0; it < iters && failures < 20; it++) {
        gen();
        snprintf(label, sizeof label, "seed %llu iteration %ld", (unsigned long long)seed, it);
        failures += run_case(bin, label, "FAIL");
        cases++;
    }
    printf("argv_fuzz: %ld cases (seed %llu, %ld random), %d failure(s)\n", cases, (unsigned long long)seed,
           iters, failures);
    return failures ? 1 : 0;
}
