/* The GPU model's side streams: the det partial finishes (m->fin), the weight-gradient
 * stream (m->wgs) and the claims that order their buffers; the partial regions of the det
 * reductions. */
#include "model/cuda/model.cuh"

/* Makes m->s wait for the work queued on m->fin so far. */
dt_status gcu_join_fin(dt_gpt_cuda *m) {
    TRY(dt_cu_check(cudaEventRecord(m->join, m->fin), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->s, m->join, 0), "cudaStreamWaitEvent");
}

/* m->s is about to write buf: wait for the weight-gradient GEMM that still reads it. */
dt_status gcu_claim(dt_gpt_cuda *m, const void *buf) {
    int k = dt_cu_reads_claim(&m->reads, buf);
    return k < 0 ? DT_OK : dt_cu_check(cudaStreamWaitEvent(m->s, m->ev_read[k], 0), "cudaStreamWaitEvent");
}

/* The weight-gradient GEMM (and bias column sum) just queued on m->wgs reads buf: record
 * when it is done. */
dt_status gcu_note_read(dt_gpt_cuda *m, const void *buf) {
    int k = dt_cu_reads_note(&m->reads, buf);
    if (k < 0)
        return dt_fail(DT_ESTATE, "backward overlap: more than %d buffers read by pending weight-gradient "
                       "GEMMs", DT_CU_READS_MAX);
    return dt_cu_check(cudaEventRecord(m->ev_read[k], m->wgs), "cudaEventRecord");
}

/* Makes m->s wait for everything queued on m->wgs (before the embedding backward, which
 * adds into wte's gradient; every later use of the gradients comes after it). */
dt_status gcu_join_wgs(dt_gpt_cuda *m) {
    if (!m->ov) return DT_OK;
    dt_cu_reads_clear(&m->reads);
    TRY(dt_cu_check(cudaEventRecord(m->ev_wdone, m->wgs), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->s, m->ev_wdone, 0), "cudaStreamWaitEvent");
}

/* When overlapping: what m->s has queued (the dout a weight gradient reads) comes before
 * what m->wgs queues next. */
dt_status gcu_wgs_after_main(dt_gpt_cuda *m) {
    if (!m->ov) return DT_OK;
    TRY(dt_cu_check(cudaEventRecord(m->ev_ready, m->s), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->wgs, m->ev_ready, 0), "cudaStreamWaitEvent");
}

/* The partial region of the next det reduction site of this backward. Past the last one
 * the last region is handed out again (two finishes could then race on it) and the
 * backward fails at its end: maxsite must cover every site a layer can use. */
float *gcu_next_parts(dt_gpt_cuda *m, int n) {
    if (m->nsite + n > m->maxsite) m->site_over = 1;
    int k = m->nsite + n <= m->maxsite ? m->nsite : m->maxsite - n;
    m->nsite += n;
    return m->part + (size_t)k * m->part_site;
}

float *gcu_next_part(dt_gpt_cuda *m) { return gcu_next_parts(m, 1); }
