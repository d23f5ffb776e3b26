/* The kernel registry (DESIGN §4): kernels.registry at the repo root, one entry per
 * kernel-bearing source file, and the invariant that ties it to the tree.
 *
 * File format (documented again at the top of kernels.registry):
 *   - entries are blocks of `key: value` lines separated by one or more blank lines;
 *   - a line starting with '#' is a comment; a line starting with a space or tab continues
 *     the value of the previous key (joined with one space);
 *   - keys, each at most once per entry:
 *       name:    unique entry name, [A-Za-z0-9_.-]+                         (required)
 *       sources: kernel source paths, relative to the repo root, space-separated (required)
 *       kind:    one or more kinds from dt_kind_all_names(), space-separated   (required)
 *       notes:   the nondeterminism mechanism and how the deterministic branch
 *                is chosen                                                     (required)
 *       tests:   test paths (tests/...), space-separated
 *       exempt:  why there is no test yet (visible coverage debt)
 *     exactly one of tests / exempt.
 *
 * The invariant (dt_registry_check): every kernel-bearing file found by dt_scan_tree is a
 * source of exactly one entry; every registered path exists; every entry has tests or an
 * exempt reason, not both; every listed test references each of its entry's sources, where
 * a test references a source when its text mentions the source's file name (e.g.
 * "layernorm_cpu.c", not as part of a longer name) or it #includes the source's header:
 * a header named <stem>.h / <stem>.cuh, or <op>.h where <op> is the stem without a backend
 * suffix (_cpu, _cuda, _gpu, _omp, _blas, _cublas, _nccl, _mpi): layernorm_cpu.c ->
 * layernorm.h; every listed test runs (dt_test_runner: CI or the GPU test script runs it; a
 * benchmark or a tuner is not a test); and the kinds implied by the file's content (an
 * OpenMP reduction implies cpu-omp, ...) are all listed in the entry's kind. */
#ifndef DT_GATE_REGISTRY_H
#define DT_GATE_REGISTRY_H

#include "gate/gate_util.h"
#include "gate/scan.h"

#define DT_REGISTRY_FILE "kernels.registry"

typedef struct dt_reg_entry {
    char *name;
    int line;            /* line of the entry's first key */
    char **sources;
    int n_sources;
    char **tests;
    int n_tests;
    unsigned kinds;      /* DT_KIND_* bits */
    char *notes;
    char *exempt;        /* NULL unless the entry has `exempt:` */
    int has_tests;       /* the entry has a `tests:` key */
} dt_reg_entry;

typedef struct dt_registry {
    dt_reg_entry *entries;
    int n;
    char origin[512];    /* the file name used in messages */
} dt_registry;

/* Parses registry text. Every format problem (unknown or repeated key, missing required key,
 * tests and exempt both or neither, unknown kind, bad path, duplicate name or source) is
 * appended to *problems as "ORIGIN:LINE: what is wrong; what to do", and parsing goes on, so
 * one run lists them all. Well-formed parts of bad entries are still stored. Returns DT_OK
 * unless out of memory. Free *out with dt_registry_free. */
dt_status dt_registry_parse(const char *text, const char *origin, dt_registry *out, dt_strlist *problems);
/* Reads and parses a registry file. DT_EIO (message names the path) when it cannot be read. */
dt_status dt_registry_load(const char *path, dt_registry *out, dt_strlist *problems);
void dt_registry_free(dt_registry *r);

/* The entry that lists `rel` among its sources, or NULL. */
const dt_reg_entry *dt_registry_find_source(const dt_registry *r, const char *rel);
/* 1 when `rel` is among the entry's tests. */
int dt_reg_entry_has_test(const dt_reg_entry *e, const char *rel);

/* 1 when the test text references the source path as defined above. */
int dt_test_references_source(const char *test_text, const char *source_rel);

/* The script that runs the GPU tests (make test-gpu; bench/gpu.sh runs the same tests). */
#define DT_GPU_TEST_SCRIPT "tests/gpu/run_gpu_tests.sh"
/* Which runner runs the test at `rel` (relative to the repo root) in the tree at `root`:
 *   "CI (make test)"            tests/.../test_*.c: make test builds one binary per file and
 *                               tests/run.sh runs every one;
 *   "CI (tests/run.sh)"         tests/.../test_*.sh: tests/run.sh runs every one;
 *   "the GPU test script"       tests/gpu/test_*.cu: make cuda builds one binary per file and
 *                               DT_GPU_TEST_SCRIPT runs every build/gpu-tests/test_*; or any
 *                               other tests/ path that DT_GPU_TEST_SCRIPT runs by name, on a
 *                               line `bash PATH` (the end-to-end scripts);
 * NULL for anything else (a benchmark, a tuner, a helper, a path outside tests/): a change to
 * it shows nothing about a kernel, so the registry may not list it and the gate does not
 * count it. The rules mirror the runners (tests/gate/test_registry.c checks them against the
 * scripts). */
const char *dt_test_runner(const char *root, const char *rel);

/* Checks the invariant for the tree at `root` against a parsed registry, appending one
 * problem per violation to *problems. DT_OK when the check ran (pass iff no problems were
 * added); an error status when the tree could not be read. */
dt_status dt_registry_check(const char *root, const dt_registry *r, dt_strlist *problems);

/* Loads root/kernels.registry (or `registry_path` when not NULL) and checks it: parse
 * problems and invariant problems all go to *problems. DT_EIO when the file is missing. */
dt_status dt_registry_check_tree(const char *root, const char *registry_path, dt_strlist *problems);

#endif
