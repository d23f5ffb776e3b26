/* `detrain data`: make and inspect token shards.
 *   data tokenize --bytes FILE --out PATH [--val-fraction F] [--shard-tokens N]
 *   data info PATH... [--vocab N]
 *   data builtin --out PATH
 * Exit codes: 0 success, 2 usage, I/O or malformed-input error (message on stderr). */
#include "cli/cli.h"

#include "data/corpus.h"
#include "data/shard.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_SHARD_TOKENS 100000000ull

static void usage(FILE *f) {
    fprintf(f,
            "usage: detrain data <subcommand> [options]\n\n"
            "  tokenize --bytes FILE --out PATH [--val-fraction F] [--shard-tokens N]\n"
            "      Write FILE's bytes as byte-level tokens (vocabulary 256) in llm.c's shard\n"
            "      format. Up to N tokens (default %llu) go to PATH; more are split into\n"
            "      STEM_000000.bin, STEM_000001.bin, ... (STEM = PATH without .bin). With F > 0\n"
            "      the last fraction F of the bytes goes to STEM.val.bin instead.\n"
            "  info PATH... [--vocab N]\n"
            "      Check shards (header, size, every token < N; default 65536) and print\n"
            "      their header fields and token counts.\n"
            "  builtin --out PATH\n"
            "      Write the built-in corpus (%u byte tokens) as a shard.\n",
            DEFAULT_SHARD_TOKENS, DT_CORPUS_BYTES);
}

static int fail_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "detrain data: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see `detrain data --help`)\n");
    va_end(ap);
    return 2;
}

static int fail_status(void) {
    fprintf(stderr, "detrain data: error: %s\n", dt_errmsg());
    return 2;
}

/* Matches "--name VALUE" or "--name=VALUE" at argv[*i]; advances *i past the value. */
static int flag_value(int argc, char **argv, int *i, const char *name, const char **value,
                      int *missing) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return 0;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != 0) return 0;
    if (*i + 1 >= argc) {
        *missing = 1;
        return 1;
    }
    *value = argv[++*i];
    return 1;
}

static int parse_u64(const char *s, unsigned long long *v) {
    char *end;
    errno = 0;
    if (!*s || *s == '-') return 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && *end == 0;
}

/* STEM: PATH with a trailing ".bin" removed. */
static void stem_of(const char *path, char *stem, size_t cap) {
    snprintf(stem, cap, "%s", path);
    size_t n = strlen(stem);
    if (n > 4 && !strcmp(stem + n - 4, ".bin")) stem[n - 4] = 0;
}

/* Reads n bytes from f and writes them as a shard at path. buf holds >= n tokens. */
static int write_bytes_shard(FILE *f, const char *src, uint64_t n, uint16_t *buf,
                             const char *path) {
    uint8_t *bytes = (uint8_t *)buf + n; /* the upper half of buf, read then widened */
    size_t got = fread(bytes, 1, (size_t)n, f);
    if (got != n) {
        fprintf(stderr, "detrain data: error: reading %s: %s\n", src,
                ferror(f) ? strerror(errno) : "file shrank while reading");
        return 2;
    }
    for (uint64_t i = 0; i < n; i++) buf[i] = bytes[i]; /* ascending: never overtakes */
    if (dt_shard_write(path, buf, n) != DT_OK) return fail_status();
    printf("wrote %s: %llu tokens\n", path, (unsigned long long)n);
    return 0;
}

static int cmd_tokenize(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *vf = NULL, *st = NULL;
    for (int i = 0; i < argc; i++) {
        int missing = 0;
        if (flag_value(argc, argv, &i, "--bytes", &in, &missing) ||
            flag_value(argc, argv, &i, "--out", &out, &missing) ||
            flag_value(argc, argv, &i, "--val-fraction", &vf, &missing) ||
            flag_value(argc, argv, &i, "--shard-tokens", &st, &missing)) {
            if (missing) return fail_usage("flag %s needs a value", argv[i]);
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        return fail_usage("tokenize: unknown argument '%s'", argv[i]);
    }
    if (!in) return fail_usage("tokenize: %s is required", "--bytes FILE");
    if (!out) return fail_usage("tokenize: %s is required", "--out PATH");
    double frac = 0;
    if (vf) {
        char *end;
        frac = strtod(vf, &end);
        if (*end || !(frac >= 0 && frac < 1))
            return fail_usage("--val-fraction '%s' must be a number in [0, 1)", vf);
    }
    unsigned long long max_tok = DEFAULT_SHARD_TOKENS;
    if (st && (!parse_u64(st, &max_tok) || max_tok < 1 || max_tok > DT_SHARD_MAX_TOKENS))
        return fail_usage("--shard-tokens '%s' must be an integer in [1, 2147483647]", st);

    FILE *f = fopen(in, "rb");
    if (!f) {
        fprintf(stderr, "detrain data: error: cannot open %s: %s\n", in, strerror(errno));
        return 2;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        fprintf(stderr, "detrain data: error: %s is not a regular file\n", in);
        return 2;
    }
    uint64_t total = (uint64_t)sb.st_size;
    uint64_t nval = frac > 0 ? (uint64_t)((double)total * frac) : 0;
    if (frac > 0 && nval < 1) nval = 1;
    if (total == 0 || total <= nval) {
        fclose(f);
        fprintf(stderr, "detrain data: error: %s has %llu bytes: too few to tokenize%s\n", in,
                (unsigned long long)total, nval ? " with a validation split" : "");
        return 2;
    }
    uint64_t ntrain = total - nval;
    uint64_t biggest = ntrain < max_tok ? ntrain : max_tok;
    if (nval > biggest) biggest = nval;
    if (nval > max_tok) {
        fclose(f);
        return fail_usage("the validation part (%llu tokens) is larger than --shard-tokens %llu",
                          (unsigned long long)nval, max_tok);
    }
    uint16_t *buf = malloc((size_t)biggest * sizeof *buf);
    if (!buf) {
        fclose(f);
        fprintf(stderr, "detrain data: error: out of memory for %llu tokens\n",
                (unsigned long long)biggest);
        return 2;
    }
    char stem[4096], path[4200];
    stem_of(out, stem, sizeof stem);
    int rc = 0;
    uint64_t nshards = (ntrain + max_tok - 1) / max_tok;
    for (uint64_t k = 0; k < nshards && rc == 0; k++) {
        uint64_t n = ntrain - k * max_tok < max_tok ? ntrain - k * max_tok : max_tok;
        if (nshards == 1) snprintf(path, sizeof path, "%s", out);
        else snprintf(path, sizeof path, "%s_%06llu.bin", stem, (unsigned long long)k);
        rc = write_bytes_shard(f, in, n, buf, path);
    }
    if (rc == 0 && nval > 0) {
        snprintf(path, sizeof path, "%s.val.bin", stem);
        rc = write_bytes_shard(f, in, nval, buf, path);
    }
    free(buf);
    fclose(f);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    const char *vs = NULL;
    int npaths = 0;
    for (int i = 0; i < argc; i++) {
        int missing = 0;
        if (flag_value(argc, argv, &i, "--vocab", &vs, &missing)) {
            if (missing) return fail_usage("flag %s needs a value", argv[i]);
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) return fail_usage("info: unknown flag '%s'", argv[i]);
        npaths++;
    }
    unsigned long long vocab = 65536;
    if (vs && (!parse_u64(vs, &vocab) || vocab < 1 || vocab > 65536))
        return fail_usage("--vocab '%s' must be an integer in [1, 65536]", vs);
    if (npaths == 0) return fail_usage("info: %s is required", "PATH");
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--vocab=", 8)) continue;
        dt_shard_header h;
        if (dt_shard_read_header(argv[i], &h) != DT_OK) return fail_status();
        dt_shard *s;
        if (dt_shard_open(&s, argv[i], (int)vocab) != DT_OK) return fail_status();
        printf("%s\n  magic     %d\n  version   %d\n  tokens    %llu\n  bytes     %llu\n"
               "  max_token %u\n",
               argv[i], h.magic, h.version, (unsigned long long)s->ntokens,
               (unsigned long long)h.file_bytes, (unsigned)s->max_token);
        dt_shard_close(s);
    }
    return 0;
}

static int cmd_builtin(int argc, char **argv) {
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        int missing = 0;
        if (flag_value(argc, argv, &i, "--out", &out, &missing)) {
            if (missing) return fail_usage("flag %s needs a value", argv[i]);
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        return fail_usage("builtin: unknown argument '%s'", argv[i]);
    }
    if (!out) return fail_usage("builtin: %s is required", "--out PATH");
    uint16_t *tok;
    uint64_t n;
    if (dt_corpus_tokens(&tok, &n) != DT_OK) return fail_status();
    dt_status st = dt_shard_write(out, tok, n);
    free(tok);
    if (st != DT_OK) return fail_status();
    printf("wrote %s: %llu tokens (built-in corpus)\n", out, (unsigned long long)n);
    return 0;
}

int dt_cmd_data(int argc, char **argv) {
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[0], "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(argv[0], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[0], "builtin")) return cmd_builtin(argc - 1, argv + 1);
    fprintf(stderr, "detrain data: unknown subcommand '%s'\n", argv[0]);
    usage(stderr);
    return 2;
}
