/* CUDA graphs of the GPU model's phases (zero_grad, forward, backward): recorded once per
 * signature of the settings their launches depend on, then replayed. */
#include "model/cuda/model.cuh"

/* ---- CUDA graphs (model/cuda/plan.h, "CUDA graphs of a step's launches") --------------
 * A step's launch sequence is the same every step: hundreds of kernels, memsets and copies
 * whose arguments are buffers fixed at create and settings fixed per signature. Launched
 * one by one they leave the device idle between them (the host's pacing at the start of a
 * step, a few microseconds a launch after); recorded once as a graph and replayed they do
 * not. The batch enters through copies from the pinned h_in/h_tg, which a replay reads
 * afresh. Calls that must run host code per op (trace events, profiled ranges, a pending
 * injection) or whose kernels take per-step arguments (dropout's step) launch eagerly. */
static const char *graph_names[G_SLOTS] = {"zero_grad (graph)", "forward (graph)", "eval forward (graph)",
                                           "backward (graph)", "accumulating backward (graph)"};

static int graph_eligible(const dt_gpt_cuda *m) {
    dt_dropout hd = gcu_hidden_drop(m), ad = gcu_attn_drop(m);
    return m->ch.graphs && !m->prof && !dt_trace_on(DT_TRACE_MODULE) && !dt_inject_pending() && !dt_dropout_on(&hd) &&
           !dt_dropout_on(&ad);
}

/* Every host-side setting phase g's launch sequence depends on. */
static uint64_t graph_sig(const dt_gpt_cuda *m, int g) {
    struct {
        int g, training, ov, grad_fresh;
        float loss_scale;
        unsigned char variant[DT_OP_COUNT];
    } k;
    memset(&k, 0, sizeof k);
    k.g = g;
    if (g != G_ZERO) {
        k.training = m->training;
        k.loss_scale = m->loss_scale;
        if (g == G_BWD_FRESH || g == G_BWD_ADD) { /* set by the backward before its launches */
            k.ov = m->ov;
            k.grad_fresh = m->grad_fresh;
        }
        for (int i = 0; i < DT_OP_COUNT; i++) k.variant[i] = (unsigned char)dt_op_variant((dt_op_id)i);
    }
    return dt_cu_graph_sig(DT_CU_GRAPH_SIG0, &k, sizeof k);
}

/* Runs phase g's launches (fn): eagerly, recorded into a graph that is then launched, or
 * as a replay of the graph held (dt_cu_graph_decide). When a capture fails (an API call the
 * capture refused: a bug to report), nothing was launched; graphs are dropped for the
 * model's life with a note on stderr and the launches run eagerly, which gives the same
 * bits (a graph changes how the kernels are launched, not what they compute). */
static void graphs_off(dt_gpt_cuda *m, int g, const char *why) {
    fprintf(stderr, "detrain: recording the %s launches as a CUDA graph failed (%s); running every step's "
            "launches one by one from now on (same results; --cuda-graphs off skips the attempt; "
            "please report this)\n", graph_names[g], why);
    (void)cudaGetLastError();
    for (int i = 0; i < G_SLOTS; i++) {
        if (m->gexec[i]) cudaGraphExecDestroy(m->gexec[i]);
        m->gexec[i] = NULL;
        dt_cu_graph_forget(&m->gstate[i]);
    }
    m->ch.graphs = 0;
    dt_cu_reads_clear(&m->reads); /* events noted in the abandoned capture */
}

dt_status gcu_run_phase(dt_gpt_cuda *m, int g, dt_status (*fn)(dt_gpt_cuda *)) {
    uint64_t sig = graph_sig(m, g);
    dt_cu_graph_act act = dt_cu_graph_decide(&m->gstate[g], graph_eligible(m), sig);
    if (act == DT_CU_GRAPH_EAGER) return fn(m);
    if (act == DT_CU_GRAPH_REPLAY) {
        nvtxRangePushA(graph_names[g]);
        cudaError_t e = cudaGraphLaunch(m->gexec[g], m->s);
        nvtxRangePop();
        m->nreplay++;
        return dt_cu_check(e, "cudaGraphLaunch");
    }
    cudaError_t e = cudaStreamBeginCapture(m->s, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        graphs_off(m, g, cudaGetErrorString(e));
        return fn(m);
    }
    dt_cu_blas_capture_begin(m->blas);
    if (m->blas_w) dt_cu_blas_capture_begin(m->blas_w);
    dt_status st = fn(m);
    cudaGraph_t graph = NULL;
    e = cudaStreamEndCapture(m->s, &graph);
    /* cuBLASLt's workspace memsets off the stream's path (ops_cuda.h) */
    cudaGraph_t ok = st == DT_OK && e == cudaSuccess ? graph : NULL;
    int moved = dt_cu_blas_graph_relax(m->blas, ok), moved_w = m->blas_w ? dt_cu_blas_graph_relax(m->blas_w, ok) : 0;
    m->nrelaxed += (moved > 0 ? moved : 0) + (moved_w > 0 ? moved_w : 0);
    cudaGraphExec_t exec = NULL;
    if (st == DT_OK && e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (st == DT_OK && e == cudaSuccess) {
        if (m->gexec[g]) cudaGraphExecDestroy(m->gexec[g]);
        m->gexec[g] = exec;
        dt_cu_graph_captured(&m->gstate[g], sig);
        m->ncapture++;
        return dt_cu_check(cudaGraphLaunch(exec, m->s), "cudaGraphLaunch");
    }
    graphs_off(m, g, e != cudaSuccess ? cudaGetErrorString(e) : dt_errmsg());
    return fn(m);
}

void dt_gpt_cuda_graph_counts(const dt_gpt_cuda *m, int *captures, int *replays, int *relaxed) {
    *captures = m->ncapture;
    *replays = m->nreplay;
    *relaxed = m->nrelaxed;
}
