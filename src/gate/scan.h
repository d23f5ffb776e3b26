/* Finding kernel-bearing source files (DESIGN §4).
 *
 * A file is kernel-bearing when its numbers may depend on scheduling. Two ways to be one:
 *   - by place: any C/CUDA source (.c .cc .cpp .cu .cuh) under a kernel directory
 *     (src/ops/, src/optim/, src/dist/), and any .cu/.cuh file anywhere;
 *   - by content: a call site of a reducing or racing construct (CUDA __global__ and
 *     atomic*() intrinsics, C11/GCC atomics, `#pragma omp` / `_Pragma("omp ...")` with
 *     atomic, critical or a reduction clause, pthread_create, BLAS/cuBLAS/cuBLASLt GEMM-like
 *     calls, cuDNN execute/convolution/find calls, NCCL and MPI reductions).
 * Content is matched on a stripped copy of the file: comments, string and char literals and
 * #include lines are blanked first, so a pattern inside any of them never counts;
 * #pragma lines are kept. Headers (.h .hpp) count by content only.
 *
 * What is scanned: product sources only, i.e. C/CUDA files under src/, include/ and tools/.
 * tests/ and bench/ are not scanned: they check kernels, they do not ship them. */
#ifndef DT_GATE_SCAN_H
#define DT_GATE_SCAN_H

#include "detrain/detrain.h"

#include <stddef.h>

/* Kinds of kernel, as a bit set. Registry entries name them; content hits imply them. */
enum {
    DT_KIND_CPU_SERIAL = 1u << 0,   /* "cpu-serial": single-threaded CPU loop (reference) */
    DT_KIND_CPU_OMP = 1u << 1,      /* "cpu-omp": OpenMP region (reduction/atomic/critical) */
    DT_KIND_CPU_PTHREAD = 1u << 2,  /* "cpu-pthread": threads started with pthread_create */
    DT_KIND_CPU_ATOMIC = 1u << 3,   /* "cpu-atomic": C11 or GCC atomics */
    DT_KIND_CUDA = 1u << 4,         /* "cuda": CUDA kernels or intrinsics */
    DT_KIND_BLAS = 1u << 5,         /* "blas-call": CPU BLAS (cblas_*) */
    DT_KIND_CUBLAS = 1u << 6,       /* "cublas-call": cuBLAS / cuBLASLt */
    DT_KIND_CUDNN = 1u << 7,        /* "cudnn-call" */
    DT_KIND_NCCL = 1u << 8,         /* "nccl-call" */
    DT_KIND_MPI = 1u << 9,          /* "mpi-call" */
    DT_KIND_DISPATCH = 1u << 10,    /* "dispatch": picks a variant from the det flag */
    DT_KIND_AUTOTUNE = 1u << 11     /* "autotune": chooses an algorithm by timing */
};

/* The bit for a kind name of length n ("cpu-omp"), or 0 when unknown. */
unsigned dt_kind_from_name(const char *name, size_t n);
/* The name of one kind bit, or NULL. */
const char *dt_kind_name(unsigned bit);
/* Writes the names of every bit in `kinds`, space-separated, into out. */
void dt_kind_names(unsigned kinds, char *out, size_t cap);
/* Every kind name, space-separated (for error messages and docs). */
const char *dt_kind_all_names(void);

/* Returns a heap copy (n+1 bytes, NUL-terminated, caller frees; NULL when out of memory) of
 * src[0..n) with comments, string literals, char literals and #include lines replaced by
 * spaces. Newlines are kept, so line numbers stay valid. Strings that are the operand of
 * _Pragma(...) are kept, since they are pragmas. */
char *dt_scan_strip(const char *src, size_t n);

/* One content match. */
typedef struct dt_scan_hit {
    char what[72];     /* the matched construct: "cblas_sgemm(", "#pragma omp ... reduction(" */
    unsigned kind;     /* the DT_KIND_* bit it implies */
    int line;          /* 1-based line in the file */
} dt_scan_hit;

/* Finds the call-site patterns in src[0..n) (stripping it first). Stores up to `max` hits in
 * order of appearance and sets *count to the total found (which may exceed max).
 * DT_ENOMEM when the stripped copy cannot be allocated. */
dt_status dt_scan_text(const char *src, size_t n, dt_scan_hit *hits, int max, int *count);

/* 1 when a path relative to the repo root is a scanned product source (C/CUDA extension,
 * under src/, include/ or tools/). */
int dt_scan_is_product_source(const char *rel);
/* When the path alone makes a file kernel-bearing, returns why ("kernel directory src/ops/",
 * "CUDA source"); else NULL. */
const char *dt_scan_place_reason(const char *rel);

/* One kernel-bearing file. */
typedef struct dt_kernel_file {
    char path[512];    /* relative to the repo root, '/' separated */
    char why[256];     /* the first reason: place, and/or "`atomicAdd(` at line 12" */
    unsigned kinds;    /* kinds implied by content hits (0 when kernel-bearing by place only) */
} dt_kernel_file;

typedef struct dt_kernel_list {
    dt_kernel_file *v;
    int n, cap;
} dt_kernel_list;

/* Classifies the file root/rel. Sets *is_kernel and, when it is, fills *out. A file that is
 * not a product source is never kernel-bearing. DT_EIO when it cannot be read. */
dt_status dt_scan_file(const char *root, const char *rel, int *is_kernel, dt_kernel_file *out);

/* Walks src/, include/ and tools/ under root (missing ones are skipped; dot entries are
 * skipped) and appends every kernel-bearing product source to *out, sorted by path.
 * Free with dt_kernel_list_free. */
dt_status dt_scan_tree(const char *root, dt_kernel_list *out);
void dt_kernel_list_free(dt_kernel_list *l);

#endif
