# detrain build. `make run` and `make test` are the two front doors; both install what is
# missing (scripts/install-deps.sh), build, and then run.
#
# Build flags are part of the numerics: no -ffast-math, no -march=native, no FMA
# contraction, no reassociation. They are recorded in the environment fingerprint
# (DT_BUILD_FLAGS). Vectorisation is on: without reassociation it only packs elementwise
# IEEE operations, which round exactly as their scalar forms; -fno-trapping-math lets
# branch-free selects vectorise and changes no result (only exception-flag semantics).

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2 -ftree-vectorize -fvect-cost-model=dynamic
WARN    := -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wundef -Wcast-qual -Wwrite-strings -Werror
NUMERIC := -ffp-contract=off -fno-fast-math -fno-unsafe-math-optimizations -fno-trapping-math
BLAS_INC := -I/usr/include/x86_64-linux-gnu/openblas-openmp
CFLAGS_ALL := -std=c11 $(OPT) -g -fopenmp $(NUMERIC) $(WARN) -D_GNU_SOURCE \
              -Iinclude -Isrc $(BLAS_INC) $(EXTRA_CFLAGS)
LDLIBS  := -lopenblas -fopenmp -lm -ldl
# The revision the build reports (--version, env.json): git's, only when this source tree
# is the top of its own repository; a tree copied into another repository (a tarball
# unpacked inside one) must not report that repository's revision, so it reports
# unknown-src-<first 12 hex of a SHA-256 over its sorted sources and their names>.
SRC_TOP := $(realpath $(dir $(firstword $(MAKEFILE_LIST))))
GIT_TOP := $(realpath $(shell git -C '$(SRC_TOP)' rev-parse --show-toplevel 2>/dev/null))
SRC_DIGEST = $(shell cd '$(SRC_TOP)' && find Makefile include src tools -type f -print0 | LC_ALL=C sort -z | \
               xargs -0 sha256sum | sha256sum | cut -c1-12)
GIT_REV := $(or $(if $(filter $(SRC_TOP),$(GIT_TOP)),$(shell git -C '$(SRC_TOP)' describe --always --dirty --abbrev=12 2>/dev/null)),unknown-src-$(SRC_DIGEST))
DEFS    := -DDT_BUILD_FLAGS='"$(CC) $(CFLAGS_ALL)"' -DDT_GIT_REV='"$(GIT_REV)"'

# Sources are found at any depth (src/ops/<family>/, src/model/cuda/, tests/ops/<family>/):
# `find` in a fixed (sorted) order, so the archive and the test list do not depend on the
# directory order of the file system.
find_src = $(sort $(shell find $(1) -type f -name '$(2)' 2>/dev/null))
# src/dist/comm_mpi.c is the MPI engine's plugin, built apart with mpicc (`make mpi`).
MPI_PLUGIN_SRC := src/dist/comm_mpi.c
MPICC      ?= mpicc
MPI_PLUGIN := $(BUILD)/libdetrain-mpi.so
MPI_DRIVER := $(BUILD)/mpi-tests/comm_driver
LIB_SRC  := $(filter-out src/cli/main.c $(MPI_PLUGIN_SRC),$(call find_src,src,*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(call find_src,tests,test_*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_SUPPORT_SRC := $(sort $(filter-out $(TEST_SRC),$(wildcard tests/*/*.c)))
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_BIN := $(patsubst tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: all run test deps clean gate bench cuda cuda-objs test-gpu nvcc-check mpi mpicc-check
# test support objects are shared by every test binary: keep them between builds
.SECONDARY: $(TEST_SUPPORT_OBJ)
all: $(BUILD)/detrain $(TEST_BIN) $(TOOL_BIN) $(if $(shell command -v $(MPICC) 2>/dev/null),mpi)

$(DEPS_STAMP): scripts/install-deps.sh
	@bash scripts/install-deps.sh
	@mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_ALL) $(if $(findstring fingerprint,$<),$(DEFS)) -MMD -MP -c $< -o $@

# The archive also depends on the list of sources, so adding or deleting a source file
# rebuilds it (an archive rebuilt only from newer objects would keep a deleted one).
LIB_LIST := $(BUILD)/.lib-sources
$(shell mkdir -p $(BUILD); echo '$(LIB_SRC)' | cmp -s - $(LIB_LIST) 2>/dev/null || echo '$(LIB_SRC)' > $(LIB_LIST))
# The fingerprint names the commit it was built from: rebuild it when that changes.
REV_STAMP := $(BUILD)/.git-rev
$(shell mkdir -p $(BUILD); echo '$(GIT_REV)' | cmp -s - $(REV_STAMP) 2>/dev/null || echo '$(GIT_REV)' > $(REV_STAMP))
$(BUILD)/obj/src/core/fingerprint.o $(BUILD)/cuda/obj/src/core/fingerprint.o: $(REV_STAMP)

$(BUILD)/libdetrain.a: $(LIB_OBJ) $(LIB_LIST)
	@rm -f $@
	@ar rcs $@ $(LIB_OBJ)

$(BUILD)/detrain: $(BUILD)/obj/src/cli/main.o $(BUILD)/libdetrain.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT_OBJ) $(BUILD)/libdetrain.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(TEST_SUPPORT_OBJ) $(BUILD)/libdetrain.a $(LDLIBS)

# Reference tools (e.g. dumps for the PyTorch comparison), linked like tests, with any
# extra objects a tool lists as prerequisites (the dump writer shared with the GPU dump).
$(BUILD)/tools/%: tools/%.c $(BUILD)/libdetrain.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -o $@ $< $(filter %.o,$^) $(BUILD)/libdetrain.a $(LDLIBS)
$(BUILD)/tools/dump_reference: $(BUILD)/obj/tools/refdump/refdump.o

# Main job: train the default model on the built-in corpus in deterministic mode twice
# and show that `compare` finds the two metric series bitwise identical.
run: $(BUILD)/detrain
	bash scripts/run-main.sh

test: $(BUILD)/detrain $(TEST_BIN) $(TOOL_BIN) mpi
	bash tests/run.sh

gate: $(BUILD)/detrain
	$(BUILD)/detrain gate --base-ref $(or $(BASE),origin/main)

bench: $(BUILD)/detrain
	bash bench/cpu.sh

# ---- MPI engine ----------------------------------------------------------------------
# `make mpi` builds the MPI engine's plugin build/libdetrain-mpi.so (src/dist/comm_mpi.c,
# with mpicc; detrain loads it only for a run on the MPI engine, so the binaries run on
# machines without OpenMPI) and the test driver of tests/dist/test_comm_mpi.sh. `all` builds
# them when mpicc is there; `make test` needs them (scripts/install-deps.sh installs OpenMPI).

mpicc-check:
	@command -v $(MPICC) >/dev/null 2>&1 || { echo "make: '$(MPICC)' not found: the MPI engine needs OpenMPI (bash scripts/install-deps.sh installs openmpi-bin and libopenmpi-dev)." >&2; exit 1; }

$(MPI_PLUGIN): $(MPI_PLUGIN_SRC) src/dist/comm_mpi.h src/dist/comm.h src/dist/launch.h include/detrain/detrain.h | mpicc-check $(DEPS_STAMP)
	@echo "MPICC $<"
	@$(MPICC) -std=c11 $(OPT) -g -fPIC -shared $(NUMERIC) $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -o $@ $<

$(MPI_DRIVER): tests/dist/mpi/comm_driver.c $(BUILD)/libdetrain.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(BUILD)/libdetrain.a $(LDLIBS)

mpi: $(MPI_PLUGIN) $(MPI_DRIVER)

# ---- CUDA backend -------------------------------------------------------------------
# `make cuda` builds build/detrain-cuda: every CPU source compiled again with -DDT_CUDA
# (into build/cuda/obj) plus every .cu under src/, linked with cudart and cuBLASLt.
# `make cuda-objs` compiles the .cu files only (CI has nvcc but no GPU driver).
# `make test-gpu` builds and runs the GPU tests (tests/gpu/, on a GPU machine).
# A missing nvcc is an error: these targets never fall back to a CPU-only build.
# Device code: sm_90, -O3, no --use_fast_math; host code -ffp-contract=off. The flags are
# recorded in env.json ("run": "nvcc_flags").
NVCC      ?= nvcc
NVCC_ARCH := -gencode arch=compute_90,code=sm_90
NVCCFLAGS := -std=c++17 -O3 $(NVCC_ARCH) -lineinfo \
             -Xcompiler -ffp-contract=off,-fno-fast-math,-fopenmp -Iinclude -Isrc $(BLAS_INC) $(EXTRA_CFLAGS)
CUDA_BLAS ?= -lopenblas
CUDA_LIBS := -lcublasLt -ldl
CUDA_SRC  := $(call find_src,src,*.cu)
CUDA_OBJ  := $(CUDA_SRC:%.cu=$(BUILD)/cuda/obj/%.cu.o)
CUDA_CPU_OBJ := $(LIB_SRC:%.c=$(BUILD)/cuda/obj/%.o)
GPU_TEST_SRC := $(sort $(wildcard tests/gpu/*.cu))
GPU_TEST_BIN := $(patsubst tests/gpu/%.cu,$(BUILD)/gpu-tests/%,$(GPU_TEST_SRC))
# CUDA test support (the harness's CUDA backend): linked into every GPU test binary.
GPU_TEST_SUPPORT_SRC := $(sort $(wildcard tests/kernels/*.cu))
GPU_TEST_SUPPORT_OBJ := $(GPU_TEST_SUPPORT_SRC:%.cu=$(BUILD)/cuda/obj/%.cu.o)

nvcc-check:
	@command -v $(NVCC) >/dev/null 2>&1 || { echo "make: '$(NVCC)' not found: the CUDA build needs the CUDA toolkit (nvcc 12.4 or newer; set NVCC=/path/to/nvcc). There is no CPU-only fallback for this target." >&2; exit 1; }

$(BUILD)/cuda/obj/%.cu.o: %.cu | nvcc-check
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(subst $(NVCC_ARCH),$(or $(NVCC_ARCH_OBJ),$(NVCC_ARCH)),$(NVCCFLAGS)) -DDT_CUDA=1 \
	    -DDT_NVCC_FLAGS='"$(NVCC) $(NVCCFLAGS)"' -MMD -MP -c $< -o $@

# The warpgroup-MMA sources (attention forward and the backward's kernel A, activation GEMMs;
# wgmma is sm_90a only) are the ones built for the arch-specific target; the -gencode form
# (the -arch=sm_90a shorthand also runs a plain sm_90 pass, which rejects wgmma). Their cubins
# run on the H100/H200 (sm_90) only.
WGMMA_OBJ := $(BUILD)/cuda/obj/src/ops/attention/attention_wgmma_cuda.cu.o \
             $(BUILD)/cuda/obj/src/ops/attention/attention_wgmma_bwd_cuda.cu.o \
             $(BUILD)/cuda/obj/src/ops/attention/attention_wgmma_bwd_q128_cuda.cu.o \
             $(BUILD)/cuda/obj/src/ops/gemm/gemm_wgmma_cuda.cu.o
$(WGMMA_OBJ): NVCC_ARCH_OBJ := -gencode=arch=compute_90a,code=sm_90a

$(BUILD)/cuda/obj/%.o: %.c | nvcc-check $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "CC $< (cuda build)"
	@$(CC) $(CFLAGS_ALL) -DDT_CUDA=1 $(if $(findstring fingerprint,$<),$(DEFS)) -MMD -MP -c $< -o $@

cuda-objs: $(CUDA_OBJ) $(GPU_TEST_SUPPORT_OBJ)

$(BUILD)/libdetrain-cuda.a: $(CUDA_CPU_OBJ) $(CUDA_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/detrain-cuda: $(BUILD)/cuda/obj/src/cli/main.o $(BUILD)/libdetrain-cuda.a
	@echo "LD $@"
	@$(NVCC) $(NVCC_ARCH) -Xcompiler -fopenmp -o $@ $^ $(CUDA_BLAS) $(CUDA_LIBS) -lm

cuda: $(BUILD)/detrain-cuda $(GPU_TEST_BIN)

$(BUILD)/gpu-tests/%: tests/gpu/%.cu $(TEST_SUPPORT_OBJ) $(GPU_TEST_SUPPORT_OBJ) $(BUILD)/libdetrain-cuda.a | nvcc-check
	@mkdir -p $(dir $@)
	@echo "NVCC $@"
	@$(NVCC) $(NVCCFLAGS) -DDT_CUDA=1 -Itests -o $@ $< $(filter %.o,$^) $(BUILD)/libdetrain-cuda.a \
	    $(CUDA_BLAS) $(CUDA_LIBS) -lm
$(BUILD)/gpu-tests/dump_reference_gpu: $(BUILD)/cuda/obj/tools/refdump/refdump.o

test-gpu: cuda
	bash tests/gpu/run_gpu_tests.sh

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d) $(CUDA_OBJ:.o=.d) $(CUDA_CPU_OBJ:.o=.d) \
         $(BUILD)/obj/tools/refdump/refdump.d $(BUILD)/cuda/obj/tools/refdump/refdump.d \
         $(GPU_TEST_SUPPORT_OBJ:.o=.d)
