# kpack — one non-recursive Makefile for the library, kpackfs, the kpack tool
# and the tests. `make help` lists the targets.

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
CC      ?= cc
VERSION := 1.0.0
SOVER   := 1

# SANITIZE=address,undefined or SANITIZE=thread builds into its own tree.
SANITIZE ?=
comma := ,
BUILD ?= build$(if $(SANITIZE),-$(subst $(comma),-,$(SANITIZE)))

PKGS      := libzstd msgpack
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell pkg-config --libs fuse3 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Ilibkpack
CFLAGS   += -std=c11 $(OPT) $(WARN) -fvisibility=hidden -pthread $(DEPS_CFLAGS)
LDFLAGS  += -pthread
ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

# ---- libkpack --------------------------------------------------------------
LIB_SRCS := $(sort $(wildcard libkpack/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
SONAME   := librocm_kpack.so.$(SOVER)
LIB_SO   := $(BUILD)/lib/$(SONAME)
LIB_A    := $(BUILD)/lib/librocm_kpack.a
LIB_PC   := $(BUILD)/lib/rocm_kpack.pc
HEADERS  := $(wildcard include/rocm_kpack/*.h)

$(BUILD)/libkpack/%.o: libkpack/%.c $(HEADERS) $(wildcard libkpack/*.h)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DKPACK_BUILDING_LIBRARY $(CFLAGS) -fPIC -c $< -o $@

$(LIB_SO): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(DEPS_LIBS)
	ln -sf $(SONAME) $(BUILD)/lib/librocm_kpack.so

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIB_PC): Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$${prefix}/include' '' \
	  'Name: rocm_kpack' 'Description: kpack GPU code object archive runtime' \
	  'Version: $(VERSION)' 'Requires.private: libzstd msgpack' \
	  'Libs: -L$${libdir} -lrocm_kpack' 'Libs.private: -pthread' \
	  'Cflags: -I$${includedir}' > $@

# ---- programs ---------------------------------------------------------------
# Each program directory builds into one binary linked against the static lib.
KPACKFS_SRCS := $(sort $(wildcard kpackfs/*.c))
KPACKFS      := $(BUILD)/bin/kpackfs
TOOL_SRCS    := $(sort $(wildcard contrib/*.c))
TOOL         := $(BUILD)/bin/kpack
PROGRAMS     := $(strip $(if $(KPACKFS_SRCS),$(KPACKFS)) $(if $(TOOL_SRCS),$(TOOL)))

$(BUILD)/kpackfs/%.o: kpackfs/%.c $(HEADERS) $(wildcard kpackfs/*.h)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(FUSE_CFLAGS) -c $< -o $@

$(KPACKFS): $(KPACKFS_SRCS:%.c=$(BUILD)/%.o) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) $(FUSE_LIBS)

$(BUILD)/contrib/%.o: contrib/%.c $(HEADERS) $(wildcard contrib/*.h)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(TOOL): $(TOOL_SRCS:%.c=$(BUILD)/%.o) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) -lz

# Keep objects between runs (pattern-rule intermediates would be deleted).
.SECONDARY:

.DEFAULT_GOAL := all
.PHONY: all
all: $(LIB_SO) $(LIB_A) $(LIB_PC) $(PROGRAMS)

# ---- tests ------------------------------------------------------------------
# tests/test_*.c: one cmocka binary each, linked statically so that internal
# modules can be tested directly. tests/support.c is shared by all of them.
TEST_SRCS    := $(sort $(wildcard tests/test_*.c))
TEST_BINS    := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_SUPPORT := $(BUILD)/tests/support.o
VALGRIND ?=
TEST_WRAP := $(if $(VALGRIND),valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite$(comma)indirect$(comma)possible --suppressions=tests/valgrind.supp)
# Tests that only make sense under one build (e.g. real mounts under TSan)
# can read these to decide.
export KPACK_TEST_BUILD := $(BUILD)
export KPACK_TEST_BIN := $(abspath $(BUILD)/bin)
export KPACK_SANITIZE := $(SANITIZE)
export KPACK_VALGRIND := $(VALGRIND)

$(BUILD)/tests/%.o: tests/%.c $(HEADERS) $(wildcard tests/*.h) $(wildcard libkpack/*.h)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -Wno-missing-prototypes -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_SUPPORT) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(DEPS_LIBS) $(CMOCKA_LIBS) -lz -ldl

.PHONY: check
check: all $(TEST_BINS)
	@fail=0; for t in $(TEST_BINS); do \
	  echo "== $$t"; $(TEST_WRAP) $$t || fail=1; \
	done; exit $$fail

# ---- benchmarks ---------------------------------------------------------------
# Archives are generated once into .cache/bench (ignored) and reused.
BENCH := $(BUILD)/bench/bench

$(BENCH): tests/bench/bench.c $(LIB_A) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(DEPS_LIBS)

.PHONY: bench
bench: all $(BENCH)
	@mkdir -p .cache/bench
	$(BENCH) .cache/bench $(KPACK_TEST_BIN)

# ---- install ----------------------------------------------------------------
.PHONY: install
install: all
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/rocm_kpack $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/librocm_kpack.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/rocm_kpack/
	sed -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|^libdir=.*|libdir=$(LIBDIR)|' $(LIB_PC) > $(DESTDIR)$(LIBDIR)/pkgconfig/rocm_kpack.pc
	$(if $(PROGRAMS),install -m 0755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin/)

# Installs into a scratch prefix and builds a client with pkg-config alone,
# against the shared library and then the static one.
.PHONY: install-check
install-check: all
	@d=$$(mktemp -d) && trap 'rm -rf '"$$d" EXIT && \
	$(MAKE) --no-print-directory install PREFIX=$$d/usr >/dev/null && \
	export PKG_CONFIG_PATH=$$d/usr/lib/pkgconfig && \
	$(CC) -std=c11 -Wall -Werror tests/install/example.c -o $$d/example \
	  $$(pkg-config --cflags --libs rocm_kpack) && \
	LD_LIBRARY_PATH=$$d/usr/lib $$d/example $$d/example.kpack && \
	$(CC) -std=c11 -Wall -Werror tests/install/example.c -o $$d/example-static \
	  $$(pkg-config --cflags rocm_kpack) $$d/usr/lib/librocm_kpack.a \
	  $$(pkg-config --static --libs-only-other --libs-only-l rocm_kpack | sed 's/-lrocm_kpack//') && \
	$$d/example-static $$d/example2.kpack && \
	echo "install-check: ok ($$(pkg-config --modversion rocm_kpack))"

# ---- housekeeping -----------------------------------------------------------
.PHONY: clean format help
clean:
	rm -rf build build-*

format:
	clang-format -i $(wildcard include/rocm_kpack/*.h libkpack/*.[ch] kpackfs/*.[ch] contrib/*.[ch] tests/*.[ch] tests/fuzz/*.c examples/*.c)

help:
	@echo "make            build librocm_kpack.so.1/.a, rocm_kpack.pc, kpackfs, kpack"
	@echo "make check      unit and real-mount integration tests (VALGRIND=1, SANITIZE=...)"
	@echo "make demo       pack real AMD GPU code objects, mount them, look inside"
	@echo "make bench      performance table"
	@echo "make fuzz       libFuzzer targets (FUZZ_SECONDS=N each)"
	@echo "make install    PREFIX=/usr/local"
