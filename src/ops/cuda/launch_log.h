/* The launch log of kernel-level tracing: while on, every CUDA launcher of src/ops notes
 * each launch (kernel name, grid, block, dynamic shared memory: cuda_common.cuh's
 * dt_cu_noted wraps the grid argument); the GPU model takes the notes of one op as text for
 * its kernel-level trace event. Off (the default) a note costs one compare. Plain C, so CI
 * tests it; one host thread (the one driving the model). Records launches as data: it
 * computes nothing a kernel reads. */
#ifndef DT_OPS_CUDA_LAUNCH_LOG_H
#define DT_OPS_CUDA_LAUNCH_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

void dt_cu_launch_log(int on);
void dt_cu_launch_note(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t smem);
/* Writes the notes since the last take as "name<<<(gx,gy,gz),(bx,by,bz),smem>>>" joined by
 * "; " into buf (cut to cap - 1 bytes; "+N more" when more launches were noted than kept),
 * clears them and returns how many launches were noted. buf may be NULL (just clears). */
int dt_cu_launch_take(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
