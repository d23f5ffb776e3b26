/* DT_HD marks inline helpers that compile for the host and, under nvcc, for the device too
 * (Philox, XXH64): the GPU and its CPU reference then run the same code. */
#ifndef DT_CORE_HD_H
#define DT_CORE_HD_H

#if defined(__CUDACC__)
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

#endif
