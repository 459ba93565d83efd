# zerotrain - build, test, sanitizers, fuzzing, benchmarks, install.
# `make` builds build/zerotrain, build/libzerotrain.a and build/libzerotrain.so.

CC       ?= gcc
CLANG    ?= clang
PREFIX   ?= /usr/local
BUILD    ?= build
MPI_CFLAGS := $(shell pkg-config --cflags mpi 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs mpi 2>/dev/null)
WARN     := -Wall -Wextra -Wshadow -Werror -Wno-format-truncation
OPT      ?= -O2 -g
# -march=native only on request (make NATIVE=1); the default stays portable.
ifeq ($(NATIVE),1)
OPT      += -march=native
endif
# -fno-math-errno: no math call's errno is ever read, and without it sqrtf cannot be
# vectorized (the results are the same IEEE operations either way). -fvect-cost-model=dynamic:
# -O2's "very cheap" model leaves loops with a remainder scalar; vectorizing them changes no
# result (no float reassociation without -ffast-math; checkpoints compared byte for byte)
CFLAGS_ALL := -std=c11 $(OPT) $(WARN) -fopenmp -fno-math-errno -fvect-cost-model=dynamic -fPIC -fvisibility=hidden \
              -D_GNU_SOURCE -DZT_BUILDING_LIBRARY -Iinclude -Icommon -I/usr/include/x86_64-linux-gnu/openblas-openmp \
              $(MPI_CFLAGS) $(CFLAGS)
# OpenBLAS's OpenMP build shares libgomp's thread pool with our own kernels; the pthread
# build would leave two pools spinning against each other on the same cores (2-3x slower).
OPENBLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
# libzerotrain links no allocator (it may be dlopened into a running process: memory/mem.c);
# the programs built here (the command, the tests, the benchmarks) are whole processes and
# run on jemalloc throughout.
LIB_LIBS := -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -lcjson -lxxhash -luring -lmvec -lm \
            -fopenmp $(MPI_LIBS)
LIBS     := -ljemalloc $(LIB_LIBS)

LIB_SRC  := $(sort $(wildcard common/*.c memory/*.c format/*.c data/*.c engine/*.c models/*.c \
                               optimizer/*.c offload/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
HDRS     := $(wildcard include/*.h */*.h)

UNIT_TESTS := $(notdir $(basename $(wildcard tests/test_*.c)))
TEST_BINS  := $(UNIT_TESTS:%=$(BUILD)/tests/%)

.PHONY: all example test-units bench-convergence bench-optim-train bench-t5 bench-t5-pydoc bench-optim bench-full bench-offload bench-recompute bench-grad bench-hgemm bench-zero docs test test-long unit-tests test-unit test-cli test-parity asan asan-build fuzz fuzz-build bench install clean
all: $(BUILD)/zerotrain $(BUILD)/libzerotrain.a $(BUILD)/libzerotrain.so $(BUILD)/bench_grad

$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libzerotrain.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The soname follows the header's ZT_ABI_VERSION; the version script exports zt_* only.
ZT_ABI     := $(shell sed -n 's/^\#define ZT_ABI_VERSION \([0-9]*\).*/\1/p' include/zerotrain.h)
ZT_VERSION := $(shell sed -n 's/^\#define ZT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' include/zerotrain.h | paste -sd.)
$(BUILD)/libzerotrain.so: $(LIB_OBJ) zerotrain.map
	$(CC) -shared -Wl,-soname,libzerotrain.so.$(ZT_ABI) -Wl,--version-script=zerotrain.map \
	    -o $@ $(LIB_OBJ) $(LIB_LIBS)
	ln -sf libzerotrain.so $(BUILD)/libzerotrain.so.$(ZT_ABI)

# The command: tools/*.c (C11) and tools/*.cc (the C++ shim around SentencePiece).
TOOL_C   := $(wildcard tools/*.c)
TOOL_CC  := $(wildcard tools/*.cc)
TOOL_OBJ := $(TOOL_C:%.c=$(BUILD)/obj/%.o) $(TOOL_CC:%.cc=$(BUILD)/obj/%.o)
TOOL_LIBS := $(if $(TOOL_CC),-lsentencepiece -lsentencepiece_train -lstdc++) -lunistring

$(BUILD)/obj/tools/%.o: tools/%.cc $(HDRS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) $(WARN) -fPIC -Iinclude $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/zerotrain: $(TOOL_OBJ) $(BUILD)/libzerotrain.a
	$(CC) $(CFLAGS_ALL) -o $@ $(TOOL_OBJ) $(BUILD)/libzerotrain.a $(LIBS) $(TOOL_LIBS)

# test_wordpiece includes the command's tokenizer (tools/wordpiece.c is not in the library).
$(BUILD)/tests/test_wordpiece: LIBS += -lunistring
$(BUILD)/tests/test_wordpiece: tools/wordpiece.c

# test_labelled includes the command's labelled-data reader (tools/labelled.c).
$(BUILD)/tests/test_labelled: tools/labelled.c
# test_tokenizer links the command's tokenizer objects (tools/ is not in the library).
TOKENIZER_OBJ := $(BUILD)/obj/tools/tokenizer.o $(BUILD)/obj/tools/wordpiece.o $(BUILD)/obj/tools/spm.o \
                 $(BUILD)/obj/tools/bpe.o
$(BUILD)/tests/test_tokenizer: tests/test_tokenizer.c $(TOKENIZER_OBJ) $(BUILD)/libzerotrain.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(TOKENIZER_OBJ) $(BUILD)/libzerotrain.a $(LIBS) \
	    -lsentencepiece -lsentencepiece_train -lstdc++ -lunistring -lcmocka

$(BUILD)/tests/%: tests/%.c $(BUILD)/libzerotrain.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libzerotrain.a $(LIBS) -lcmocka

# ---- tests -------------------------------------------------------------------------------
# `make test` is the whole CI suite (tests/run_all.sh): unit tests, CLI tests, parity against
# the PyTorch reference on random configs, the unit tests under ASan/UBSan, 30 s of fuzzing.
test:
	bash tests/run_all.sh

unit-tests: $(TEST_BINS) $(BUILD)/tests/mpi_units

test-unit: $(TEST_BINS)
	@set -e; for t in $(TEST_BINS); do echo "== $$t"; $$t; done

# the library as other trainers use it: install, pkg-config, the example trainers, the binding
test-units: all unit-tests
	bash tests/test_units.sh

test-cli: all
	bash tests/test_cli.sh $(BUILD)/zerotrain

test-parity: all
	ZT=$(BUILD)/zerotrain bash tests/test_bert_random.sh
	ZT=$(BUILD)/zerotrain bash tests/test_bert_cls_random.sh
	ZT=$(BUILD)/zerotrain bash tests/test_family_random.sh

# The heavy checks: 40 more random parity configurations (BERT and T5; 30 of BERT's classifier),
# fine-tuning (classify and text2text) and generation at N=2 stages 1-2 and N=3 stages 0-3, T5 at N=3, a SIGKILL at every point of a
# checkpoint save, 100,000 faulted I/O operations per backend, every float through each 8-bit
# quantizer, the 8-bit AdamW against its numpy reference on 8 more random cases (and the
# committed fixtures regenerated), every stage x world size for the 8-bit and Adafactor
# optimizers, and 10 minutes of fuzzing.
test-long: all unit-tests
	ZT_FAULT_OPS=100000 $(BUILD)/tests/test_offload
	ZT_QUANT_EXHAUSTIVE=1 $(BUILD)/tests/test_adam8bit
	bash tests/test_adam8bit_ref.sh $(BUILD)/tests/test_adam8bit
	ZERO_LONG=1 bash tests/test_zero.sh $(BUILD)/zerotrain
	ROBUST_LONG=1 bash tests/test_robust.sh $(BUILD)/zerotrain
	RECOMPUTE_LONG=1 bash tests/test_recompute.sh $(BUILD)/zerotrain
	OPTIM_LONG=1 bash tests/test_optim.sh $(BUILD)/zerotrain
	PARITY_EXTRA=40 ZT=$(BUILD)/zerotrain bash tests/test_bert_random.sh
	PARITY_EXTRA=30 ZT=$(BUILD)/zerotrain bash tests/test_bert_cls_random.sh
	PARITY_EXTRA=30 ZT=$(BUILD)/zerotrain bash tests/test_family_random.sh
	T5_LONG=1 bash tests/test_t5.sh $(BUILD)/zerotrain
	PARITY_EXTRA=40 ZT=$(BUILD)/zerotrain bash tests/test_t5_random.sh
	UNITS_LONG=1 bash tests/test_units.sh
	CRASH_POINTS=all bash tests/test_train.sh $(BUILD)/zerotrain
	FINETUNE_LONG=1 bash tests/test_finetune.sh $(BUILD)/zerotrain
	FAMILY_LONG=1 bash tests/test_family.sh $(BUILD)/zerotrain
	FAMILY_LONG=1 bash tests/test_albert.sh $(BUILD)/zerotrain
	FAMILY_LONG=1 bash tests/test_electra.sh $(BUILD)/zerotrain
	TEXT2TEXT_LONG=1 bash tests/test_text2text.sh $(BUILD)/zerotrain
	GENERATE_LONG=1 bash tests/test_generate.sh $(BUILD)/zerotrain
	ESTIMATE_LONG=1 bash tests/test_estimate.sh $(BUILD)/zerotrain
	BF16_LONG=1 bash tests/test_bf16.sh $(BUILD)/zerotrain
	FP16_LONG=1 bash tests/test_fp16.sh $(BUILD)/zerotrain
	DSCONFIGS_LONG=1 bash tests/test_ds_configs.sh $(BUILD)/zerotrain
	ZT_HALF_EXHAUSTIVE=1 $(BUILD)/tests/test_half
	bash tests/bits_hash.sh --check tests/bits-main.txt $(BUILD)/zerotrain >/dev/null; rc=$$?; \
	    [ $$rc -eq 0 ] || [ $$rc -eq 77 ]
	$(MAKE) fuzz FUZZ_SECONDS=600

ASAN_OPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan-build:
	$(MAKE) BUILD=build/asan OPT="$(ASAN_OPT)" unit-tests

# intercept_tls_get_addr=0: gcc 12's LeakSanitizer reads a garbage dynamic-TLS range of
# libraries opened with dlopen (oneDNN, hgemm.c) on glibc 2.36 and crashes at exit; without the
# interception it scans static TLS, stacks and the heap as before
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1
asan: asan-build
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t (asan+ubsan)"; \
	    $(ASAN_ENV) build/asan/tests/$$t; done

FUZZ_SECONDS ?= 30
fuzz-build: $(BUILD)/fuzz_safetensors
$(BUILD)/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c common/err.c format/fileio.c format/safetensors.c $(HDRS)
	@mkdir -p $(BUILD)
	$(CLANG) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DZT_BUILDING_LIBRARY \
	    -Iinclude -Icommon $(MPI_CFLAGS) -o $@ tests/fuzz/fuzz_safetensors.c common/err.c \
	    format/fileio.c format/safetensors.c -lcjson
fuzz: $(BUILD)/fuzz_safetensors
	@rm -rf $(BUILD)/fuzz-corpus && mkdir -p $(BUILD)/fuzz-corpus && cp tests/fuzz/corpus/* $(BUILD)/fuzz-corpus/
	$(BUILD)/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)/fuzz-corpus

$(BUILD)/bench_grad: benchmarks/bench_grad.c $(BUILD)/libzerotrain.a include/zerotrain.h
	$(CC) $(CFLAGS_ALL) -o $@ benchmarks/bench_grad.c $(BUILD)/libzerotrain.a $(LIBS)

$(BUILD)/bench_store: benchmarks/bench_store.c $(BUILD)/libzerotrain.a $(HDRS)
	$(CC) $(CFLAGS_ALL) -o $@ benchmarks/bench_store.c $(BUILD)/libzerotrain.a $(LIBS)

$(BUILD)/bench_limits: benchmarks/limits.c benchmarks/sgemm_time.h $(BUILD)/libzerotrain.a
	$(CC) $(CFLAGS_ALL) -o $@ benchmarks/limits.c $(BUILD)/libzerotrain.a $(LIBS)

$(BUILD)/bench_optim: benchmarks/bench_optim.c $(BUILD)/libzerotrain.a $(HDRS)
	$(CC) $(CFLAGS_ALL) -o $@ benchmarks/bench_optim.c $(BUILD)/libzerotrain.a $(LIBS)

$(BUILD)/bench_hgemm: benchmarks/bench_hgemm.c $(BUILD)/libzerotrain.a $(HDRS)
	$(CC) $(CFLAGS_ALL) -o $@ benchmarks/bench_hgemm.c $(BUILD)/libzerotrain.a $(LIBS)

# the bf16 products (both paths) against fp32 sgemm at the linear layers' shapes
bench-hgemm: $(BUILD)/bench_hgemm
	$(BUILD)/bench_hgemm 1 9
	$(BUILD)/bench_hgemm 2 9

# the optimizer kernels against copy bandwidth, one shard (their time as ratios to a copy
# loop and to AdamW's)
bench-optim: $(BUILD)/bench_optim
	$(BUILD)/bench_optim --threads 2 --mib 256

# docs/config.md is generated from the config parser's key table (a unit test checks it).
docs: $(BUILD)/zerotrain
	$(BUILD)/zerotrain config-reference > docs/config.md

# the benchmark sweeps (benchmarks/run.py): quick (~10 minutes on 2 cores) and full
bench: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/quick.json

bench-full: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/full.json

# recomputation against keeping every activation (bert-base, sequence 512)
bench-recompute: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/recompute.json

# the offload goals: bert-large with everything on NVMe vs in RAM; 1.3B under a 4 GiB limit
bench-offload: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/offload.json

# the optimizers within training: state bytes, update time, step time against AdamW
bench-optim-train: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/optim.json

# t5-small on the default corpus: the loss curve and tokens/s (benchmarks/results/t5-small-pydoc*)
bench-t5-pydoc: all
	bash benchmarks/t5_pydoc.sh $(BUILD)/zerotrain

# T5 within training (benchmarks/sweeps/t5.json)
bench-t5: all $(BUILD)/bench_limits $(BUILD)/bench_store
	/usr/bin/python3 benchmarks/run.py benchmarks/sweeps/t5.json

# the optimizers' loss curves on the default corpus (benchmarks/results/convergence*)
bench-convergence: all
	bash benchmarks/convergence.sh $(BUILD)/zerotrain

bench-grad: $(BUILD)/bench_grad
	$(BUILD)/bench_grad $(BENCH_ARGS)

bench-zero: all
	bash benchmarks/bench_zero.sh $(BENCH_ZERO_ARGS)

# make install PREFIX=DIR: the header, libzerotrain.so (soname libzerotrain.so.ABI) and .a,
# lib/pkgconfig/zerotrain.pc and the zerotrain command
install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/zerotrain.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libzerotrain.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libzerotrain.so $(DESTDIR)$(PREFIX)/lib/libzerotrain.so.$(ZT_ABI)
	ln -sf libzerotrain.so.$(ZT_ABI) $(DESTDIR)$(PREFIX)/lib/libzerotrain.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(ZT_VERSION)|' zerotrain.pc.in \
	    >$(DESTDIR)$(PREFIX)/lib/pkgconfig/zerotrain.pc
	install -m 755 $(BUILD)/zerotrain $(DESTDIR)$(PREFIX)/bin/

# the example trainer of a model of its own (examples/charmlp), against the build tree; CI
# builds it against the installed library instead (tests/test_units.sh)
example: $(BUILD)/charmlp
$(BUILD)/charmlp: examples/charmlp/charmlp.c $(BUILD)/libzerotrain.so include/zerotrain.h
	$(CC) -std=c11 $(OPT) $(WARN) -Iinclude -I/usr/include/x86_64-linux-gnu/openblas-openmp \
	    $(MPI_CFLAGS) -o $@ $< -L$(BUILD) -Wl,-rpath,$(abspath $(BUILD)) -lzerotrain \
	    -L$(OPENBLAS_DIR) -lopenblas -lm $(MPI_LIBS)

clean:
	rm -rf build
