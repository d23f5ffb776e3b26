# detrain build. `make run` and `make test` are the two front doors; both install what is
# missing (scripts/install-deps.sh), build, and then run.
#
# Build flags are part of the numerics: no -ffast-math, no -march=native, no FMA
# contraction. They are recorded in the environment fingerprint (DT_BUILD_FLAGS).

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2
WARN    := -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wundef -Wcast-qual -Wwrite-strings -Werror
NUMERIC := -ffp-contract=off -fno-fast-math -fno-unsafe-math-optimizations
BLAS_INC := -I/usr/include/x86_64-linux-gnu/openblas-openmp
CFLAGS_ALL := -std=c11 $(OPT) -g -fopenmp $(NUMERIC) $(WARN) -D_GNU_SOURCE \
              -Iinclude -Isrc $(BLAS_INC) $(EXTRA_CFLAGS)
LDLIBS  := -lopenblas -fopenmp -lm
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DEFS    := -DDT_BUILD_FLAGS='"$(CC) $(CFLAGS_ALL)"' -DDT_GIT_REV='"$(GIT_REV)"'

LIB_SRC  := $(sort $(filter-out src/cli/main.c,$(wildcard src/*/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/*/test_*.c))
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_SUPPORT_SRC := $(sort $(filter-out $(TEST_SRC),$(wildcard tests/*/*.c)))
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_BIN := $(patsubst tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: all run test deps clean gate bench cuda test-gpu
all: $(BUILD)/detrain $(TEST_BIN) $(TOOL_BIN)

$(DEPS_STAMP): scripts/install-deps.sh
	@bash scripts/install-deps.sh
	@mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_ALL) $(if $(findstring fingerprint,$<),$(DEFS)) -MMD -MP -c $< -o $@

$(BUILD)/libdetrain.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/detrain: $(BUILD)/obj/src/cli/main.o $(BUILD)/libdetrain.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT_OBJ) $(BUILD)/libdetrain.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(TEST_SUPPORT_OBJ) $(BUILD)/libdetrain.a $(LDLIBS)

# Reference tools (e.g. dumps for the PyTorch comparison), linked like tests.
$(BUILD)/tools/%: tools/%.c $(BUILD)/libdetrain.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "LD $@"
	@$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libdetrain.a $(LDLIBS)

# Main job: train the default model on the built-in corpus in deterministic mode twice
# and show that `compare` finds the two metric series bitwise identical.
run: $(BUILD)/detrain
	bash scripts/run-main.sh

test: $(BUILD)/detrain $(TEST_BIN) $(TOOL_BIN)
	bash tests/run.sh

gate: $(BUILD)/detrain
	$(BUILD)/detrain gate --base-ref $(or $(BASE),origin/main)

bench: $(BUILD)/detrain
	bash bench/cpu.sh

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d)
