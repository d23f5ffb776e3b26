/* A toy "training loop" that emits trace events through the real capture API, used to
 * build synthetic captures for trace-diff tests. Each step runs, per rank:
 *   emb/embed(x, w) -> h
 *   h.0/block(h, w) -> p     a module event around:
 *     h.0/layernorm(h) -> h2    h.0.mlp/matmul(h2, w) -> y
 *     h.0/aux_a(x), h.0/aux_b(x)   (independent of each other: reorderable)
 *     h.0.moe/router(y) -> p   (order-sensitive: per-row digests)
 *   loss_bwd(p) -> g  [bwd]   allreduce(g) -> g [comm]   adamw(w, g) -> w [opt]
 * so a perturbation flows to every later op and into the next step through w. */
#ifndef DT_TOY_TRACE_H
#define DT_TOY_TRACE_H

#include <stdint.h>

typedef struct toy_opts {
    const char *steps;         /* --trace-steps, NULL = all */
    int level;                 /* trace level; 0 = op */
    int nranks, nsteps;
    const char *inject_op;     /* flip one output LSB of this op ... */
    int inject_step;           /* ... at this step ... */
    unsigned inject_ranks;     /* ... on these ranks (bit mask) */
    int permute_step;          /* router swaps rows 2 and 5 at this step (-1: never) */
    int skip_layernorm_step;   /* do not emit layernorm's event at this step (-1: never) */
    int extra_event_step;      /* emit an extra event at this step (-1: never) */
    int swap_aux_step;         /* run aux_b before aux_a at this step (-1: never) */
    const char *digest;        /* the header's digest form (NULL: the CPU's) */
} toy_opts;

void toy_defaults(toy_opts *o);
/* Writes <dir>/rank_*.trace. Returns 0 on success. */
int toy_run(const char *dir, const toy_opts *o);
/* The router's output at a step, with and without the row swap, for the sum test. */
#define TOY_R 8
#define TOY_C 4

#endif
