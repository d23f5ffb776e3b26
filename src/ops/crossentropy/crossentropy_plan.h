/* Host-side plan of the fused cross-entropy's CUDA kernel (crossentropy_cuda.cu), in plain C
 * so CI tests it: how many vectors of a row each thread visits. A function of the sizes only. */
#ifndef DT_OPS_CROSSENTROPY_PLAN_H
#define DT_OPS_CROSSENTROPY_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

/* Columns (of 8 bf16 each) that one thread of the fused cross-entropy visits for a row of
 * Vp columns with `threads` threads: ceil(Vp / (8 * threads)). Vp must be a multiple of 8. */
int dt_cu_ce_vectors_per_thread(int Vp, int threads);

#ifdef __cplusplus
}
#endif

#endif
