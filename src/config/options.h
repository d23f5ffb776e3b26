/* Table-driven command-line options: one row per flag (name, kind, where its value goes,
 * default, allowed range, help), and the one parser, help printer and value formatter that
 * read such a table. src/config/train_config.c instantiates it with train_flags.def.
 *
 * The parser is strict, so that the run that happens is the run that was asked for:
 *   - every value is checked against its kind and range; a flag's default is parsed and
 *     checked the same way (a bad default is a bug the table's test catches);
 *   - an empty value, a number with spaces, signs or suffixes it does not take, a value
 *     longer than DT_OPT_MAX_VALUE, a non-finite float and a value that looks like a flag
 *     (`--save --quiet`: write `--save=--quiet` if that is meant) are refused;
 *   - a flag given again replaces its value (a LIST flag collects every value); every use
 *     is kept in order, so deterministic mode's check sees each one;
 *   - "not given" is its own state (dt_opt_set.given), never a value such as 0 or "".
 * Every message starts with the flag's name. */
#ifndef DT_CONFIG_OPTIONS_H
#define DT_CONFIG_OPTIONS_H

#include "core/determinism.h"
#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DT_OPT_MAX_VALUE 4095

typedef enum dt_opt_kind {
    DT_OPT_I32, DT_OPT_I64, DT_OPT_U64, DT_OPT_F32, DT_OPT_STR, DT_OPT_ENUM, DT_OPT_SWITCH,
    DT_OPT_LIST
} dt_opt_kind;

/* What the checkpoint records of a flag: TRAJ binds the trajectory (a resume must have the
 * same value), RUN is recorded and may change, NONE is not recorded. */
typedef enum dt_opt_bind { DT_BIND_NONE, DT_BIND_RUN, DT_BIND_TRAJ } dt_opt_bind;
/* Where a flag applies: ANY backend, or CUDA only. */
typedef enum dt_opt_group { DT_GROUP_ANY, DT_GROUP_CUDA } dt_opt_group;

typedef struct dt_opt {
    const char *name;    /* "--micro-batch-size" */
    dt_opt_kind kind;
    size_t offset;       /* of the value in the options struct */
    const char *def;     /* default as text; "" none */
    const char *range;   /* "[1,1024]", "(0,inf)", "a|b|c" (ENUM), "" */
    dt_opt_bind bind;
    const char *key;     /* checkpoint key ("micro_batch_size"); "" when bind is NONE */
    dt_opt_group group;
    const char *help;
} dt_opt;

/* A repeatable flag's values, in command-line order (the strings are argv's). */
typedef struct dt_str_list {
    int n, cap;
    const char **v;
} dt_str_list;

/* The state of one parse: the table, the struct the values go to, which flags were given,
 * and every use in order. */
typedef struct dt_opt_set {
    const dt_opt *opts;
    int n;
    void *base;
    unsigned char *given;   /* n entries */
    dt_flag_use *uses;      /* owned: every flag given, in order (deterministic mode checks them) */
    int nuses, cap;
} dt_opt_set;

/* Sets every flag that has a default to it (parsed like a command-line value). */
dt_status dt_opt_defaults(dt_opt_set *s);
/* Parses argv (flags only: `--name VALUE`, `--name=VALUE`, switches alone) into s->base.
 * *help is set (and parsing stops) at --help or -h. */
dt_status dt_opt_parse(dt_opt_set *s, int argc, char **argv, int *help);
void dt_opt_set_free(dt_opt_set *s);
/* Prints one line per flag: name, value kind, help, default, range. */
void dt_opt_help(const dt_opt *opts, int n, FILE *f);
/* Writes the flag's current value as JSON text (numbers exactly: floats with 9 significant
 * digits, which round-trips a float32; strings quoted; unset strings null; ENUM its choice;
 * LIST an array). */
void dt_opt_json(const dt_opt *o, const void *base, char *buf, size_t cap);
/* The choice of an ENUM flag's index i ("" when out of range). */
const char *dt_opt_choice(const dt_opt *o, int i, char *buf, size_t cap);
/* Checks the current value of o against its range (numbers) or choices. */
dt_status dt_opt_check(const dt_opt *o, const void *base);

#endif
