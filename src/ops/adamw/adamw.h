/* AdamW's update of one parameter tensor, elementwise: for each of its n elements,
 *   gk = grad * clip;  m = beta1 m + (1 - beta1) gk;  v = beta2 v + (1 - beta2) gk gk;
 *   param -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + wd param)
 * with bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (t the 1-based update count), clip the global
 * grad-norm clip factor (1: none) and wd the tensor's decoupled weight decay (0 for norms
 * and biases). Shapes: param, grad, m, v fp32, n elements (the CPU, adamw_cpu.c: one call a
 * tensor). CUDA (adamw_cuda.h): one fused launch over every tensor of the parameter slab,
 * cut by adamw_plan.h's chunks, with the clip factor computed on the device from the device
 * grad norm, then param16 = bf16(param).
 *
 * One path, deterministic by nature (no chooser): one writer per element, no reduction, and
 * the same expression order on both backends. The grad norm behind the clip factor is a
 * reduction of the reduce family (DT_OP_NORM, reduce.h). The optimizer's state (m, v, the
 * update count), the gradient statistics and the learning-rate schedule are the training
 * loop's and stay in src/optim/ (optim.h): they hold and sequence the updates, and a
 * checkpoint saves them; this family is only the arithmetic both backends share. */
#ifndef DT_OPS_ADAMW_H
#define DT_OPS_ADAMW_H

#include <stddef.h>

typedef struct dt_adamw_hparams {
    float lr, beta1, beta2, eps;
    float bc1, bc2;  /* bias corrections 1 - beta^t */
    float clip;      /* gradient scale from global-norm clipping (1: none) */
    float wd;        /* weight decay of this tensor */
} dt_adamw_hparams;

/* The update above on n elements of one tensor, in place in param, m, v. */
void dt_adamw_update(float *param, const float *grad, float *m, float *v, size_t n, const dt_adamw_hparams *h);

#endif
