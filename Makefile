# kpack — one non-recursive Makefile for the library, kpackfs, the kpack tool
# and the tests. `make help` lists the targets.

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
CC      ?= cc
# The version and soname of ROCm's own kpack runtime (CMake project 0.1.0,
# SOVERSION 0): binaries linked against it need librocm_kpack.so.0.
VERSION := 0.1.0
SOVER   := 0

# Quiet by default: one short line per step; V=1 shows the full commands.
V ?=
Q := $(if $(V),,@)
say = $(if $(V),,@printf '  %-6s %s\n' '$(1)' '$(2)';)

# SANITIZE=address,undefined or SANITIZE=thread builds into its own tree.
SANITIZE ?=
comma := ,
BUILD ?= build$(if $(SANITIZE),-$(subst $(comma),-,$(SANITIZE)))

PKGS      := libzstd msgpack zlib
# What the build links, as pkg-config module=Debian package, checked before
# anything is compiled (build-deps below): a missing one is named with its
# package, not found as pages of undefined references. The suites also
# need cmocka.
BUILD_DEPS := libzstd=libzstd-dev msgpack=libmsgpack-dev zlib=zlib1g-dev \
              fuse3=libfuse3-dev
TEST_DEPS  := cmocka=libcmocka-dev
# The Debian packages of the module=package pairs in $(1) that pkg-config
# does not find (pkg-config itself first when it is missing).
missing_deps = $(strip $(if $(shell command -v pkg-config),,pkg-config) \
  $(foreach d,$(1),$(if $(shell pkg-config --exists $(word 1,$(subst =, ,$(d))) 2>/dev/null && echo y),,$(word 2,$(subst =, ,$(d))))))
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell pkg-config --libs fuse3 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
# Programs see only the public headers (include/); libkpack's own headers
# (libkpack/<part>/*.h, included as "<part>/name.h") are on the include path
# of the library and of the unit tests that test its modules directly, so a
# program that reaches for one fails to build.
CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -DKPACK_VERSION_STRING='"$(VERSION)"'
LIB_INCLUDES := -Ilibkpack
LIB_CPPFLAGS := $(LIB_INCLUDES) -DKPACK_BUILDING_LIBRARY
# Every object records the headers it read (-MMD) and tolerates their
# removal (-MP); the .d files are included at the end.
DEPFLAGS := -MMD -MP
CFLAGS   += -std=c11 $(OPT) $(WARN) -fvisibility=hidden -pthread $(DEPS_CFLAGS)
LDFLAGS  += -pthread
# ---- sanitizers ---------------------------------------------------------------
# clang leaves the sanitizer runtime out of shared objects (the executable
# brings it), so --no-undefined would fail on __asan_*/__tsan_* there.
LIB_NO_UNDEFINED := -Wl,--no-undefined
ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
LIB_NO_UNDEFINED :=
endif

# ---- libkpack --------------------------------------------------------------
# libkpack/ in layers, each folder including only itself and the ones above
# it in this list: common/ (errors, messages, byte order, input, msgpack,
# JSON, zip, SHA-256), archive/ (TOC, frames, reads, kernel cache, writer),
# loader/ (search paths, targets, process maps, HIPK metadata), binary/
# (ELF, offload bundles, fat and host binaries, code objects), producer/
# (the split of binaries, trees and wheels, and verify --binary).
LIB_SRCS := $(sort $(wildcard libkpack/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
SONAME   := librocm_kpack.so.$(SOVER)
LIB_REAL := librocm_kpack.so.$(VERSION)
LIB_SO   := $(BUILD)/lib/$(LIB_REAL)
LIB_A    := $(BUILD)/lib/librocm_kpack.a
LIB_PC   := $(BUILD)/lib/rocm_kpack.pc
HEADERS  := $(wildcard include/rocm_kpack/*.h)

$(BUILD)/libkpack/%.o: libkpack/%.c | build-deps
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -fPIC -c $< -o $@

$(LIB_SO): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) -shared -Wl,-soname,$(SONAME) $(LIB_NO_UNDEFINED) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS)
	$(Q)ln -sf $(LIB_REAL) $(BUILD)/lib/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/lib/librocm_kpack.so

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(LIB_PC): Makefile
	@mkdir -p $(@D)
	$(call say,GEN,$@)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$${prefix}/include' '' \
	  'Name: rocm_kpack' 'Description: kpack GPU code object archive runtime' \
	  'Version: $(VERSION)' 'Requires.private: $(PKGS)' \
	  'Libs: -L$${libdir} -lrocm_kpack' 'Libs.private: -pthread' \
	  'Cflags: -I$${includedir}' > $@

# ---- programs ---------------------------------------------------------------
# Each program directory builds into one binary linked against the static lib.
KPACKFS_SRCS := $(sort $(wildcard kpackfs/*.c))
KPACKFS      := $(BUILD)/bin/kpackfs
TOOL_SRCS    := $(sort $(wildcard contrib/*.c))
TOOL         := $(BUILD)/bin/kpack
# The rules of `kpack split --per-arch`, found at ../share/kpack from the
# program: in the build tree as where it is installed.
SPLIT_RULES  := $(BUILD)/share/kpack/split-rules.conf
$(SPLIT_RULES): contrib/split-rules.conf
	@mkdir -p $(@D)
	cp $< $@
PROGRAMS     := $(strip $(if $(KPACKFS_SRCS),$(KPACKFS)) $(if $(TOOL_SRCS),$(TOOL)))

$(BUILD)/kpackfs/%.o: kpackfs/%.c | build-deps
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(KPACKFS): $(KPACKFS_SRCS:%.c=$(BUILD)/%.o) $(LIB_A)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) $(FUSE_LIBS)

$(BUILD)/contrib/%.o: contrib/%.c | build-deps
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# The tool demangles kernel names (kpack list --kernels -C) with the C++
# runtime's __cxa_demangle, loaded with dlopen when first needed
# (libstdc++.so.6, present wherever g++ or apt is).
$(TOOL): $(TOOL_SRCS:%.c=$(BUILD)/%.o) $(LIB_A)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) -lz -ldl

# ---- man pages ----------------------------------------------------------------
# kpack(1) and kpackfs(8) are made from the manuals the programs print for
# --help (contrib/manpage.sh), so a new option reaches both at once.
MANPAGES := $(if $(TOOL_SRCS),$(BUILD)/man/kpack.1) $(if $(KPACKFS_SRCS),$(BUILD)/man/kpackfs.8)

$(BUILD)/man/kpack.1: $(TOOL) contrib/manpage.sh
	@mkdir -p $(@D)
	$(call say,GEN,$@)contrib/manpage.sh kpack $(TOOL) $(VERSION) > $@.tmp && mv $@.tmp $@

$(BUILD)/man/kpackfs.8: $(KPACKFS) contrib/manpage.sh
	@mkdir -p $(@D)
	$(call say,GEN,$@)contrib/manpage.sh kpackfs $(KPACKFS) $(VERSION) > $@.tmp && mv $@.tmp $@

# Before the first compile: every dependency there, or what to install.
.PHONY: build-deps test-deps
build-deps:
	$(if $(call missing_deps,$(BUILD_DEPS)),@printf '%s\n' \
	  'kpack: missing build dependencies (Debian packages): $(call missing_deps,$(BUILD_DEPS))' \
	  '  install them as root: apt-get install $(call missing_deps,$(BUILD_DEPS))' \
	  '  (make demo and make check, run as root, install what is missing)' >&2; exit 1)
test-deps:
	$(if $(call missing_deps,$(TEST_DEPS)),@printf '%s\n' \
	  'kpack: missing test dependencies (Debian packages): $(call missing_deps,$(TEST_DEPS))' \
	  '  install them as root: apt-get install $(call missing_deps,$(TEST_DEPS))' \
	  '  (make check, run as root, installs what is missing)' >&2; exit 1)

# Keep objects between runs (pattern-rule intermediates would be deleted).
.SECONDARY:

.DEFAULT_GOAL := all
.PHONY: all
all: $(LIB_SO) $(LIB_A) $(LIB_PC) $(PROGRAMS) $(MANPAGES) $(SPLIT_RULES)

# ---- Python -------------------------------------------------------------------
# python/ is the `kpack` package: a C extension over librocm_kpack.a built by
# setuptools (python/setup.py). setup.py asks this Makefile for the static
# library and the flags (python-config), so the extension is compiled with
# the flags the library is, sanitizers included, and links msgpack-c
# statically (libzstd and zlib stay shared: Debian's .a are not PIC).
# Debian's python3 and its setuptools, wheel and pytest, whatever is first
# on PATH.
PYTHON    ?= /usr/bin/python3
PY_BUILD  := $(BUILD)/python
PY_SITE   := $(PY_BUILD)/site
PY_SRCS   := python/pyproject.toml python/setup.py python/_kpack.c $(sort $(wildcard python/kpack/*))
PIP_FLAGS ?=
PIP_LOCAL := --no-build-isolation --no-index --disable-pip-version-check --root-user-action=ignore
PY_STATIC_LIBS := -Wl,-Bstatic -lmsgpackc -Wl,-Bdynamic -lzstd -lz

.PHONY: python python-config python-check
python-config:
	$(info version=$(VERSION))
	$(info build=$(abspath $(BUILD)))
	$(info static_lib=$(abspath $(LIB_A)))
	$(info include=$(CURDIR)/include)
	$(info cppflags=$(filter-out -Iinclude,$(CPPFLAGS)))
	$(info cflags=$(CFLAGS))
	$(info ldflags=$(LDFLAGS) -Wl$(comma)--exclude-libs$(comma)ALL)
	$(info libs=$(PY_STATIC_LIBS))
	@:

# Installs the package into PYTHON's environment: a venv's python, or
# Debian's (which needs PIP_FLAGS=--break-system-packages, PEP 668).
python: $(LIB_A)
	$(PYTHON) -m pip install $(PIP_LOCAL) $(PIP_FLAGS) ./python

# The package as the tests import it: installed into $(PY_SITE), built by
# $(CC) like the library.
$(PY_SITE)/kpack/__init__.py: $(PY_SRCS) $(LIB_A) $(HEADERS)
	$(call say,PIP,$(PY_SITE))rm -rf $(PY_SITE) && \
	  CC="$(CC)" LDSHARED="$(CC) -shared" \
	  $(PYTHON) -m pip install -q $(PIP_LOCAL) --target $(abspath $(PY_SITE)) ./python

# python/tests under pytest, as `make check` runs them (tests/run_suites.sh
# counts them in its total). Debian's python3 is not built with sanitizers,
# so ASan's runtime is preloaded (gcc's libasan; leaks are not checked, the
# interpreter keeps memory to its end). Under VALGRIND=1 the interpreter
# runs in valgrind with the system allocator, and only definite leaks
# count; it runs the files that call the extension in the interpreter
# itself (PY_VALGRIND_TESTS): the others run pip, hipcc and kpack, whose
# own runs the C suites cover, and the extension calls they make are the
# same. Under SANITIZE=thread the suite is left out: an interpreter with
# libtsan preloaded crashes or fails in the programs it starts (they
# inherit the preload), and the library calls the extension makes run
# under TSan in the C suites (docs/python.md).
san_runtime = $(shell $(CC) -print-file-name=lib$(1).so | grep '^/')
PY_WRAP := $(strip \
  $(if $(findstring address,$(SANITIZE)),LD_PRELOAD=$(call san_runtime,asan) ASAN_OPTIONS=detect_leaks=0) \
  $(if $(VALGRIND),PYTHONMALLOC=malloc valgrind --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite --suppressions=tests/valgrind.supp))
PY_VALGRIND_TESTS := $(addprefix python/tests/test_,archive.py errors.py load.py \
  memory.py producer.py threads.py)
PYTEST := $(if $(findstring thread,$(SANITIZE)),,env PYTHONPATH=$(abspath $(PY_SITE)) \
  PYTHONDONTWRITEBYTECODE=1 $(PY_WRAP) $(PYTHON) -m pytest -q -p no:cacheprovider \
  $(if $(VALGRIND),$(PY_VALGRIND_TESTS),python/tests))

python-check: all $(PY_SITE)/kpack/__init__.py
	$(if $(PYTEST),$(PYTEST),@echo "python-check: not run under SANITIZE=thread (see the Makefile)")

# ---- tests ------------------------------------------------------------------
# tests/test_*.c: one cmocka binary each, linked statically so that internal
# modules can be tested directly. tests/support.c and elf_contract.c (the
# transformed ELF's layout contract) are shared by all of them;
# tests/fixture_fatbin.c (host binaries, bundles), fixture_code_object.c
# (AMDGPU code objects) and fixture_toc.c (archives with edited TOCs), free
# of cmocka, also by the fuzz corpus generator and the benchmark.
TEST_SRCS    := $(sort $(wildcard tests/test_*.c))
TEST_BINS    := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_FIXTURE := $(BUILD)/tests/fixture_fatbin.o $(BUILD)/tests/fixture_code_object.o \
                $(BUILD)/tests/fixture_program.o \
                $(BUILD)/tests/fixture_toc.o
TEST_SUPPORT := $(BUILD)/tests/support.o $(BUILD)/tests/elf_contract.o \
                $(TEST_FIXTURE)
VALGRIND ?=
# Forked children that do not exec (test_loader's fork tests) hold memory of
# the parent's other threads that no child can reach; valgrind would report
# it as leaked at their end, so they stay silent: the parent's own loads run
# the same code under valgrind.
TEST_WRAP := $(if $(VALGRIND),valgrind --quiet --child-silent-after-fork=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite$(comma)indirect$(comma)possible --suppressions=tests/valgrind.supp)
# Tests that only make sense under one build (e.g. real mounts under TSan)
# can read these to decide.
export KPACK_TEST_BUILD := $(BUILD)
export KPACK_TEST_BIN := $(abspath $(BUILD)/bin)
export KPACK_SANITIZE := $(SANITIZE)
export KPACK_VALGRIND := $(VALGRIND)
export KPACK_SOURCE_DIR := $(CURDIR)
# python/setup.py builds the library in this BUILD, with this CC, too (make
# python, and the installs the Python tests make).
export KPACK_BUILD := $(BUILD)
export KPACK_CC := $(CC)

$(BUILD)/tests/%.o: tests/%.c | build-deps test-deps
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(LIB_INCLUDES) -Itests $(CFLAGS) $(DEPFLAGS) -Wno-missing-prototypes -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_SUPPORT) $(LIB_A)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) $(CMOCKA_LIBS) -lz -ldl

# test_split_api uses libkpack as any program does: compiled without
# libkpack/ on its include path and linked against the shared library,
# which exports the public API alone.
$(BUILD)/tests/test_split_api.o: tests/test_split_api.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(DEPFLAGS) -Wno-missing-prototypes -c $< -o $@

$(BUILD)/tests/test_split_api: $(BUILD)/tests/test_split_api.o $(TEST_SUPPORT) $(LIB_SO)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -L$(BUILD)/lib \
	  -Wl,-rpath,$(abspath $(BUILD)/lib) -lrocm_kpack $(DEPS_LIBS) $(CMOCKA_LIBS) -lz -ldl

# The loader suite holds a load inside kpack_open to fork meanwhile.
$(BUILD)/tests/test_loader: LDFLAGS += -Wl,--wrap=kpack_open
# The writer suite makes one allocation fail to test running out of memory.
$(BUILD)/tests/test_writer: LDFLAGS += -Wl,--wrap=calloc

# On a fresh machine `make check` first installs what is missing (as root;
# contrib/demo.sh deps), then runs the suites in a sub-make that sees the
# installed packages through pkg-config.
.PHONY: check check-suites deps
deps:
	@contrib/demo.sh deps

check: deps
	@$(MAKE) --no-print-directory check-suites

# Ends with one line totalling every suite: "check: N passed, N failed".
check-suites: all $(TEST_BINS) $(PY_SITE)/kpack/__init__.py
	@PYTEST="$(PYTEST)" tests/run_suites.sh "$(TEST_WRAP)" "$(CC)" "$(CPPFLAGS) $(CFLAGS)" $(TEST_BINS)

# Every suite with every kernel read from a mapping of its archive, then
# with every read a pread (ROCM_KPACK_MMAP=1 / 0, read by libkpack and by
# the programs the suites run; docs/design.md, "Reads from a mapping").
# `make check` leaves the choice to the library's own rule.
.PHONY: check-read-paths
check-read-paths: deps
	@$(MAKE) --no-print-directory check-suites ROCM_KPACK_MMAP=1
	@$(MAKE) --no-print-directory check-suites ROCM_KPACK_MMAP=0

# ---- benchmarks ---------------------------------------------------------------
# tests/bench/*.c: one program printing the performance table
# (docs/performance.md): each row a measurement against its limit or peer. Its data
# (archives, a 1.2 GB synthetic fat binary, trees and squashfs images for the
# squashfuse_ll rows) is generated once into .cache/bench (ignored, ~4 GB)
# and reused; squashfuse, squashfs-tools and zstd are installed when missing
# (as root). About 4 minutes a run, 6 more the first time.
# BENCH_ROWS=library,create,mounts,transform,split,install runs some groups only.
BENCH      := $(BUILD)/bench/bench
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))

$(BENCH): $(BENCH_SRCS) tests/bench/bench.h $(TEST_FIXTURE) $(LIB_A) $(HEADERS) $(wildcard tests/fixture_*.h)
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $(BENCH_SRCS) $(TEST_FIXTURE) $(LIB_A) $(LDFLAGS) $(DEPS_LIBS)

.PHONY: bench
bench: all $(BENCH)
	@contrib/demo.sh bench-deps
	@mkdir -p .cache/bench
	$(BENCH) .cache/bench $(KPACK_TEST_BIN) $(BENCH_ROWS)

# ---- fuzzing ----------------------------------------------------------------
# One libFuzzer harness per entry point (tests/fuzz/fuzz_*.c) over a clang
# ASan+UBSan build of the library in build-fuzz/; only these targets need
# clang. `make fuzz FUZZ_SECONDS=N` runs each harness for N seconds from the
# committed seeds (tests/fuzz/corpus/<name>) and fails on any finding; new
# inputs go to build-fuzz/corpus, crashes to build-fuzz/artifacts.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_MAX_LEN ?= 16384
FUZZ_BUILD   := build-fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := -std=c11 -g -O1 -fno-omit-frame-pointer $(WARN) -pthread $(DEPS_CFLAGS) $(FUZZ_SAN)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(filter-out tests/fuzz/fuzz_drivers.c,$(sort $(wildcard tests/fuzz/fuzz_*.c))))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_LIB     := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_DRIVERS := $(FUZZ_BUILD)/tests/fuzz/fuzz_drivers.o
# fuzz_rules tests the rule files of the split (libkpack/producer/
# arch_rules.h): its driver reaches that internal header, in that harness
# only.
RULES_FUZZ_SRCS := tests/fuzz/rules_driver.c

# Only the code under test (the library, the tool's sources) carries
# coverage feedback; the drivers are just checked.
$(FUZZ_BUILD)/libkpack/%.o: libkpack/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(FUZZ_CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(FUZZ_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/contrib/%.o: contrib/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_DRIVERS) $(FUZZ_LIB)
	$(call say,LD,$@)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ $(DEPS_LIBS) -ldl

# The rules driver includes the library's internal header.
$(FUZZ_BUILD)/fuzz_rules: $(RULES_FUZZ_SRCS:%.c=$(FUZZ_BUILD)/%.o)
$(FUZZ_BUILD)/tests/fuzz/rules_driver.o $(BUILD)/tests/fuzz/rules_driver.o: CPPFLAGS += $(LIB_INCLUDES)
# The wheel driver reads libkpack's internal zip and wheel modules.
WHEEL_FUZZ_SRCS := tests/fuzz/wheel_driver.c
$(FUZZ_BUILD)/fuzz_wheel: $(WHEEL_FUZZ_SRCS:%.c=$(FUZZ_BUILD)/%.o)
$(FUZZ_BUILD)/tests/fuzz/wheel_driver.o: CPPFLAGS += $(LIB_INCLUDES)

.PHONY: fuzz fuzz-build fuzz-corpus fuzz-coverage
fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@fail=0; for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/artifacts/$$n; \
	  log=$(FUZZ_BUILD)/fuzz_$$n.log; \
	  echo "== fuzz_$$n: $(FUZZ_SECONDS)s"; \
	  if ! $(FUZZ_BUILD)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	      -rss_limit_mb=2048 -max_len=$(FUZZ_MAX_LEN) -print_final_stats=1 \
	      -dict=tests/fuzz/kpack.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$n/ \
	      $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n >$$log 2>&1; then \
	    fail=1; tail -n 80 $$log; \
	  fi; \
	  grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|INFO: seed corpus)' $$log || true; \
	done; exit $$fail

# make check replays the committed seeds and past crashes through the same
# drivers (tests/test_fuzz_replay.c), with whatever SANITIZE/VALGRIND is set.
$(BUILD)/tests/test_fuzz_replay: $(BUILD)/tests/test_fuzz_replay.o $(BUILD)/tests/fuzz/fuzz_drivers.o \
    $(RULES_FUZZ_SRCS:%.c=$(BUILD)/%.o) $(WHEEL_FUZZ_SRCS:%.c=$(BUILD)/%.o) $(TEST_SUPPORT) $(LIB_A)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) $(CMOCKA_LIBS) -ldl

# Seeds come from the project's writer; regenerate after a format change.
MAKE_CORPUS := $(BUILD)/tests/fuzz/make_corpus
$(MAKE_CORPUS): tests/fuzz/make_corpus.c tests/fuzz/fuzz_drivers.h $(TEST_FIXTURE) $(LIB_A) $(HEADERS) $(wildcard tests/fixture_*.h)
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(CPPFLAGS) $(LIB_INCLUDES) -Itests $(CFLAGS) -o $@ $< $(TEST_FIXTURE) $(LIB_A) $(LDFLAGS) $(DEPS_LIBS)

fuzz-corpus: $(MAKE_CORPUS)
	rm -rf tests/fuzz/corpus
	$(MAKE_CORPUS) tests/fuzz/corpus
	@du -sh tests/fuzz/corpus

# Line coverage of the library and the rule parser by the seeds plus what
# `make fuzz` found: each harness replays both corpora once (-runs=0) with
# clang source-based coverage. Needs llvm-14 (llvm-profdata-14, llvm-cov-14).
LLVM_PROFDATA ?= llvm-profdata-14
LLVM_COV      ?= llvm-cov-14
COV_BUILD     := build-fuzz-coverage
COV_FLAGS     := -std=c11 -g -O0 $(WARN) -pthread $(DEPS_CFLAGS) -fprofile-instr-generate -fcoverage-mapping

fuzz-coverage:
	@rm -rf $(COV_BUILD) && mkdir -p $(COV_BUILD)
	@for n in $(FUZZ_NAMES); do \
	  $(FUZZ_CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(COV_FLAGS) -fsanitize=fuzzer \
	    -o $(COV_BUILD)/fuzz_$$n tests/fuzz/fuzz_$$n.c tests/fuzz/fuzz_drivers.c $(RULES_FUZZ_SRCS) $(WHEEL_FUZZ_SRCS) $(LIB_SRCS) $(DEPS_LIBS) -ldl || exit 1; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n; \
	  LLVM_PROFILE_FILE=$(COV_BUILD)/$$n.profraw $(COV_BUILD)/fuzz_$$n -runs=0 \
	    $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n >$(COV_BUILD)/$$n.log 2>&1 || exit 1; \
	done
	$(LLVM_PROFDATA) merge -o $(COV_BUILD)/all.profdata $(COV_BUILD)/*.profraw
	$(LLVM_COV) report $(COV_BUILD)/fuzz_$(firstword $(FUZZ_NAMES)) \
	  $(foreach n,$(wordlist 2,99,$(FUZZ_NAMES)),-object $(COV_BUILD)/fuzz_$(n)) \
	  -instr-profile=$(COV_BUILD)/all.profdata $(LIB_SRCS)

# ---- install ----------------------------------------------------------------
# PREFIX/LIBDIR say where the tree will live, DESTDIR where it is written.
# rocm_kpack.pc and the CMake package (lib/cmake/rocm-kpack, ROCm's package
# name, target rocm::rocm_kpack) locate the tree from their own place, so it
# may be moved: both by paths relative to their own directory (the .pc's
# ${pcfiledir}), whatever LIBDIR is; prefix is not used by the others, so
# `pkg-config --define-prefix` changes nothing.
INCLUDEDIR := $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
CMAKEDIR   := $(LIBDIR)/cmake/rocm-kpack
PCDIR      := $(LIBDIR)/pkgconfig
from_cmakedir = $(shell realpath -m -s --relative-to=$(CMAKEDIR) $(1))
from_pcdir = $${pcfiledir}/$(shell realpath -m -s --relative-to=$(PCDIR) $(1))
SIZEOF_VOID_P = $(shell printf '__SIZEOF_POINTER__\n' | $(CC) -E -P - | tail -n 1)
CMAKE_SUBST = -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(firstword $(subst ., ,$(VERSION)))|g' \
  -e 's|@SONAME@|$(SONAME)|g' -e 's|@LIBRARY_FILE@|$(LIB_REAL)|g' \
  -e 's|@LIBDIR_FROM_HERE@|$(call from_cmakedir,$(LIBDIR))|g' \
  -e 's|@INCLUDEDIR_FROM_HERE@|$(call from_cmakedir,$(INCLUDEDIR))|g' \
  -e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g' \
  -e 's|@STATIC_FILE@|librocm_kpack.a|g' \
  -e 's|@STATIC_DEPS@|$(STATIC_DEPS)|g'
# What the static library needs linked after it, as a CMake list: the
# dependencies' -l names (pkg-config) and -pthread.
STATIC_DEPS = $(subst $(space),;,$(strip $(patsubst -l%,%,$(shell pkg-config --libs-only-l $(PKGS) 2>/dev/null)) -pthread))
space := $(subst ,, )

.PHONY: install
install: all
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(CMAKEDIR) \
	  $(DESTDIR)$(INCLUDEDIR)/rocm_kpack $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/librocm_kpack.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/rocm_kpack/
	sed -e 's|^prefix=.*|prefix=$(call from_pcdir,$(PREFIX))|' \
	  -e 's|^libdir=.*|libdir=$(call from_pcdir,$(LIBDIR))|' \
	  -e 's|^includedir=.*|includedir=$(call from_pcdir,$(INCLUDEDIR))|' \
	  $(LIB_PC) > $(DESTDIR)$(PCDIR)/rocm_kpack.pc
	sed $(CMAKE_SUBST) contrib/cmake/rocm-kpack-config.cmake.in \
	  > $(DESTDIR)$(CMAKEDIR)/rocm-kpack-config.cmake
	sed $(CMAKE_SUBST) contrib/cmake/rocm-kpack-config-version.cmake.in \
	  > $(DESTDIR)$(CMAKEDIR)/rocm-kpack-config-version.cmake
	$(if $(PROGRAMS),install -m 0755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin/)
	install -d $(DESTDIR)$(PREFIX)/share/kpack
	install -m 0644 $(SPLIT_RULES) $(DESTDIR)$(PREFIX)/share/kpack/
	$(foreach m,$(MANPAGES),install -d $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m))) && \
	  install -m 0644 $(m) $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/;)
	$(if $(TOOL_SRCS),install -d $(DESTDIR)$(COMPLETIONDIR) && \
	  install -m 0644 contrib/kpack.bash $(DESTDIR)$(COMPLETIONDIR)/kpack)

# Removes what `make install` wrote for the same PREFIX, LIBDIR and
# DESTDIR, then every directory it wrote into that is left empty, up to
# DESTDIR/PREFIX itself, but for the standard directories of /usr and
# /usr/local (bin, lib, include, share, share/man and its sections), which
# the system keeps even when empty.
# Every directory make install writes into or makes, deepest first.
INSTALL_DIRS = $(shell d="$(sort $(CMAKEDIR) $(PCDIR) $(INCLUDEDIR)/rocm_kpack \
  $(PREFIX)/bin $(PREFIX)/share/kpack $(MANDIR)/man1 $(MANDIR)/man8 $(COMPLETIONDIR))"; \
  for p in $$d; do while [ "$$p" != "$(PREFIX)" ] && [ "$$p" != / ]; do \
    echo "$$p"; p=$$(dirname "$$p"); done; done | sort -u -r) $(PREFIX)
UNINSTALL_KEEP = $(if $(and $(filter /usr /usr/local,$(PREFIX)),$(if $(DESTDIR),,y)),\
  $(PREFIX) $(addprefix $(PREFIX)/,bin lib include share share/man \
  $(addprefix share/man/man,1 2 3 4 5 6 7 8)))
.PHONY: uninstall
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/librocm_kpack.so $(DESTDIR)$(LIBDIR)/librocm_kpack.a \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/rocm_kpack.pc \
	  $(DESTDIR)$(CMAKEDIR)/rocm-kpack-config.cmake \
	  $(DESTDIR)$(CMAKEDIR)/rocm-kpack-config-version.cmake \
	  $(HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%) \
	  $(DESTDIR)$(PREFIX)/bin/kpack $(DESTDIR)$(PREFIX)/bin/kpackfs \
	  $(DESTDIR)$(MANDIR)/man1/kpack.1 $(DESTDIR)$(MANDIR)/man8/kpackfs.8 \
	  $(DESTDIR)$(COMPLETIONDIR)/kpack \
	  $(DESTDIR)$(PREFIX)/share/kpack/split-rules.conf
	$(Q)for d in $(INSTALL_DIRS); do \
	  case " $(UNINSTALL_KEEP) " in *" $$d "*) ;; \
	    *) [ ! -d "$(DESTDIR)$$d" ] || rmdir --ignore-fail-on-non-empty "$(DESTDIR)$$d";; \
	  esac; \
	done

# Installs into scratch trees and links a consumer every way one can:
# pkg-config (shared, static), CMake find_package, -l:librocm_kpack.so.0,
# and again after the tree is moved; checks the soname and that only
# kpack_* is exported. See tests/install/check.sh.
.PHONY: install-check
install-check: all
	@BUILD=$(BUILD) MAKE="$(MAKE)" CC="$(CC)" tests/install/check.sh

# ---- demo -------------------------------------------------------------------
# Installs missing packages (as root), builds, packs real GPU code objects
# from Debian's librocrand1 and looks inside; see contrib/demo.sh.
.PHONY: demo
demo:
	BUILD=$(BUILD) MAKE="$(MAKE)" contrib/demo.sh

# ---- housekeeping -----------------------------------------------------------
.PHONY: clean format format-check help
clean:
	rm -rf build build-*

# Every tracked C file, formatted by the committed .clang-format (Debian's
# clang-format 14); format-check fails on any file that would change.
# Outside a git checkout, every C file but build outputs.
FORMAT_FILES = $(or $(shell git ls-files '*.c' '*.h' 2>/dev/null),\
  $(shell find include libkpack kpackfs contrib tests examples -name '*.[ch]' 2>/dev/null))

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES)
	@awk 'FNR == 1 { prev = "" } \
	  prev ~ /^\/\* ---- .*-$$/ && $$0 == " */" { \
	    print FILENAME ":" FNR - 1 ": a section banner broken over two lines"; bad = 1 } \
	  { prev = $$0 } END { exit bad }' $(FORMAT_FILES)

# Header dependencies recorded by -MMD, for every build tree.
-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)

help:
	@echo "make            build librocm_kpack.so.0/.a, rocm_kpack.pc, kpackfs, kpack,"
	@echo "                kpack.1, kpackfs.8"
	@echo "make check      unit and real-mount integration tests (VALGRIND=1, SANITIZE=...)"
	@echo "make check-read-paths   the suites with every read mapped, then every read a pread"
	@echo "make demo       pack real AMD GPU code objects, mount them, look inside"
	@echo "make bench      performance table"
	@echo "make fuzz       libFuzzer targets (FUZZ_SECONDS=N each)"
	@echo "make fuzz-corpus / fuzz-coverage   regenerate the seeds / line coverage"
	@echo "make install    PREFIX=/usr/local [DESTDIR=...]: library, headers, .pc,"
	@echo "                CMake package rocm-kpack, kpack, kpackfs, man pages,"
	@echo "                bash completion"
	@echo "make uninstall  the same PREFIX/LIBDIR/DESTDIR: remove what install wrote"
	@echo "make install-check   link a consumer every way (pkg-config, CMake, soname)"
	@echo "make format / format-check   apply / check .clang-format on every C file"
