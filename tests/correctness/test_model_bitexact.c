/* Module-level bit-exact suite (DESIGN §5): one transformer block (the model with L = 1) and
 * the whole model (L = 2, 3), forward + backward replayed from restored state, in
 * deterministic mode:
 *  - under contention (spin thread per core, 2 x cores OpenMP threads), the loss, the
 *    logits and every parameter gradient are byte-identical across replays;
 *  - with 1, 2 and 4 threads, the same bytes (thread-count independence).
 * Shapes vary B, T, C, NH, with T not a multiple of the 64-row attention blocks and head
 * sizes 6, 7 and 12. Each replay copies the same parameters into the model, zeroes the
 * gradients and runs forward and backward: nothing carries over between replays. Two cases
 * train with hidden and attention dropout: their RNG state (seed, step) is advanced by each
 * replay, as the trainer does per micro-batch, and restored by the harness (dt_kh_rng)
 * before the next; without the restore the replays must differ.
 * Two cases hold MoE layers (the module-level bit-exact MoE block, capacity dropping on,
 * and a model with an MoE and a dense layer); their loss includes the aux loss.
 * A last case runs default mode with B*NH = 1 and checks the replays *can* differ there
 * (the model-level negative control), so the suite is known to see a race. */
#include "kernels/harness.h"

#include "model/gpt.h"
#include "dt_test.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})

typedef struct model_case {
    const char *name;
    int L, B, T, C, NH, V;
    float dropout; /* hidden and attention dropout while training; 0: off */
    int E, K;      /* MoE: experts, top-k (E 0: dense) */
    const char *moe_freq;
    float capacity;
} model_case;

static const model_case cases[] = {
    {"block L=1 B=2 T=70 C=48 NH=4 (HS=12)", 1, 2, 70, 48, 4, 100, 0.0f, 0, 0, NULL, 0.0f},
    {"block L=1 B=1 T=33 C=21 NH=3 (HS=7) dropout 0.1", 1, 1, 33, 21, 3, 50, 0.1f, 0, 0, NULL, 0.0f},
    {"model L=2 B=3 T=65 C=36 NH=6 (HS=6)", 2, 3, 65, 36, 6, 130, 0.0f, 0, 0, NULL, 0.0f},
    {"model L=3 B=2 T=130 C=42 NH=6 (HS=7) dropout 0.1", 3, 2, 130, 42, 6, 300, 0.1f, 0, 0, NULL, 0.0f},
    {"MoE block L=1 B=2 T=70 C=24 NH=4 E=4 K=2 capacity 1.0", 1, 2, 70, 24, 4, 100, 0.0f, 4, 2, "1", 1.0f},
    {"MoE model L=2 B=2 T=65 C=32 NH=4 E=8 K=2 layers 1,0 dropout 0.1", 2, 2, 65, 32, 4, 130, 0.1f, 8, 2, "1,0",
     0.0f},
};

typedef struct rng_state {
    uint64_t seed;
    uint32_t step;
} rng_state;

typedef struct model_ctx {
    dt_gpt *m;
    rng_state *rng; /* live RNG state: read by a replay, then advanced */
} model_ctx;

/* One replay: parameters in, loss/logits/gradients out. */
static void model_run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    const model_ctx *mc = ctx;
    dt_gpt *m = mc->m;
    m->seed = mc->rng->seed;
    m->rng_step = mc->rng->step++;
    size_t BT = (size_t)m->B * m->T, Vp = (size_t)m->cfg.padded_vocab;
    memcpy(m->param_mem, dt_kv_f32(dt_kset_get(s, "params")), sizeof(float) * m->num_params);
    memset(m->act_mem, 0, sizeof(float) * m->num_acts);
    dt_gpt_zero_grad(m);
    double loss = 0.0;
    if (dt_gpt_forward(m, dt_kv_i32(dt_kset_get(s, "inputs")), dt_kv_i32(dt_kset_get(s, "targets")),
                       &loss) != DT_OK) {
        fprintf(stderr, "forward failed: %s\n", dt_errmsg());
        abort();
    }
    dt_kv_f64(dt_kset_get(s, "loss"))[0] = loss + m->moe_aux;
    memcpy(dt_kv_f32(dt_kset_get(s, "logits")), m->acts.logits, sizeof(float) * BT * Vp);
    dt_gpt_backward(m, 1.0f);
    memcpy(dt_kv_f32(dt_kset_get(s, "grads")), m->grad_mem, sizeof(float) * m->num_params);
}

static dt_gpt *make_case(const model_case *c, dt_kset *s) {
    dt_gpt_config cfg = {.max_seq_len = c->T, .vocab_size = c->V, .num_layers = c->L,
                         .num_heads = c->NH, .channels = c->C};
    dt_gpt *m = NULL;
    if ((c->E && dt_gpt_set_moe(&cfg, c->E, c->K, c->moe_freq) != DT_OK) || dt_gpt_config_finish(&cfg) != DT_OK ||
        dt_gpt_create(&m, &cfg, c->B, c->T, 42) != DT_OK) {
        fprintf(stderr, "model create failed: %s\n", dt_errmsg());
        abort();
    }
    m->training = c->dropout > 0.0f;
    m->hidden_dropout = m->attn_dropout = c->dropout;
    m->moe_aux_coeff = 0.01f;
    m->moe_capacity_factor = c->capacity;
    memset(s, 0, sizeof *s);
    /* Parameters: the model's init plus a spread, so biases and norms are not trivial. */
    dt_kview *p = dt_kset_add(s, "params", DT_KH_F32, 1, SH((int64_t)m->num_params), NULL, 0);
    dt_kv_fill(p, 7, -0.05, 0.05);
    for (size_t i = 0; i < m->num_params; i++) dt_kv_f32(p)[i] += m->param_mem[i];
    dt_kv_fill_int(dt_kset_add(s, "inputs", DT_KH_I32, 2, SH(c->B, c->T), NULL, 0), 8, 0, c->V);
    dt_kv_fill_int(dt_kset_add(s, "targets", DT_KH_I32, 2, SH(c->B, c->T), NULL, 0), 9, 0, c->V);
    dt_kset_add(s, "loss", DT_KH_F64, 1, SH(1), NULL, 0);
    dt_kset_add(s, "logits", DT_KH_F32, 3, SH(c->B, c->T, cfg.padded_vocab), NULL, 0);
    dt_kset_add(s, "grads", DT_KH_F32, 1, SH((int64_t)m->num_params), NULL, 0);
    return m;
}

static void test_replays_under_contention(void) {
    int cores = dt_kh_cores();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_kset s;
        rng_state live = {99, 5};
        const rng_state snap = live;
        dt_kh_rng hook = {&live, &snap, sizeof live};
        model_ctx ctx = {make_case(&cases[i], &s), &live};
        dt_kh_opts o = {.replays = 3, .det = 1, .threads = 2 * cores, .spin_threads = cores,
                        .rng = &hook};
        dt_kh_result r;
        dt_kset first;
        CHECKF(dt_kh_replay("gpt fwd+bwd", cases[i].name, model_run, &ctx, &s, &o, &r, &first),
               "%s: %d of %d replays differ", cases[i].name, r.differing_replays, r.replays);
        double loss = dt_kv_f64(dt_kset_get(&first, "loss"))[0];
        CHECKF(isfinite(loss) && loss > 0.0, "%s: loss %g", cases[i].name, loss);
        /* The gradients are not trivially zero (a test that compares zeros proves little). */
        size_t nz = 0;
        dt_kview *g = dt_kset_get(&first, "grads");
        for (size_t k = 0; k < dt_kv_numel(g); k++) nz += dt_kv_f32(g)[k] != 0.0f;
        CHECKF(nz > dt_kv_numel(g) / 2, "%s: only %zu nonzero gradients", cases[i].name, nz);
        if (cases[i].dropout > 0.0f) {
            /* Without the restore each replay draws new masks: the bytes must change. */
            dt_kh_opts nr = o;
            nr.rng = NULL;
            nr.quiet = 1;
            CHECKF(!dt_kh_replay("gpt fwd+bwd", cases[i].name, model_run, &ctx, &s, &nr, NULL, NULL),
                   "%s: replays with advancing RNG and no restore are identical: dropout unused?",
                   cases[i].name);
        }
        dt_kset_free(&first);
        dt_kset_free(&s);
        dt_gpt_free(ctx.m);
    }
}

static void test_thread_count_independence(void) {
    static const int threads[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_kset s;
        rng_state live = {99, 5};
        const rng_state snap = live;
        dt_kh_rng hook = {&live, &snap, sizeof live};
        model_ctx ctx = {make_case(&cases[i], &s), &live};
        dt_kh_opts o = {.det = 1, .spin_threads = 1, .rng = &hook};
        CHECKF(dt_kh_thread_sweep("gpt fwd+bwd", cases[i].name, model_run, &ctx, &s, &o, threads,
                                  3, NULL),
               "%s: det results differ across 1, 2, 4 threads", cases[i].name);
        dt_kset_free(&s);
        dt_gpt_free(ctx.m);
    }
}

/* Default mode, B*NH = 1 and T = 256 (attention key blocks), few tokens (encoder atomics),
 * many rows per channel (layernorm/bias partials): the replays should differ. */
static void test_default_mode_can_differ(void) {
    const model_case c = {"model L=2 B=1 T=256 C=32 NH=1 default mode", 2, 1, 256, 32, 1, 3, 0.0f, 0, 0, NULL, 0.0f};
    dt_kset s;
    rng_state live = {99, 5};
    const rng_state snap = live;
    dt_kh_rng hook = {&live, &snap, sizeof live};
    model_ctx ctx = {make_case(&c, &s), &live};
    int cores = dt_kh_cores();
    dt_kh_opts o = {.replays = 100, .det = 0, .threads = 2 * cores < 4 ? 4 : 2 * cores,
                    .spin_threads = cores, .stop_at_first_diff = 1, .quiet = 1, .rng = &hook};
    dt_kh_result r;
    dt_kh_replay("gpt fwd+bwd", c.name, model_run, &ctx, &s, &o, &r, NULL);
    CHECKF(r.differing_replays > 0, "%s: no differing replay in %d: the suite cannot see the "
           "default path's races", c.name, r.replays);
    fprintf(stderr, "  default mode: first differing replay after %d replays\n", r.replays);
    dt_kset_free(&s);
    dt_gpt_free(ctx.m);
}

int main(void) {
    RUN(test_replays_under_contention);
    RUN(test_thread_count_independence);
    RUN(test_default_mode_can_differ);
    return dt_test_report();
}
