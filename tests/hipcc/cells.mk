# SPDX-License-Identifier: MIT
#
# The programs of tests/test_hipcc.c, built by Debian's hipcc (clang-15,
# rocm-device-libs) into OUT, one install tree per cell. Run by build.sh,
# which keeps the result under build/hipcc, keyed by a hash of these
# files and the compilers' versions. With lld-14 installed, ld.lld is
# lld-14, which cannot link clang-15's device code of -fgpu-rdc or code
# object v5: -B makes clang use llvm-15's tools; a host link by lld-14
# names it with -fuse-ld.
HIPCC := hipcc
SRC := $(dir $(lastword $(MAKEFILE_LIST)))
FLAGS := -O2 -B/usr/lib/llvm-15/bin
ARCH3 := --offload-arch=gfx906 --offload-arch=gfx1030 --offload-arch=gfx90a:xnack-
LLD14 := -fuse-ld=/usr/bin/ld.lld-14
TU := $(SRC)tu_a.hip $(SRC)tu_b.hip $(SRC)tu_c.hip

CELLS := exe/bin/app shared/lib/libvec.so shared/bin/vecapp multi/bin/multi \
  rdc/bin/rdc static/bin/static targetid/bin/app cov5/bin/app \
  templates/bin/templates lld/bin/app lld64k/bin/app bfd64k/bin/app \
  nosep/bin/app nosepdbg/bin/app nosepdata/bin/app genco/bin/app genco/share/kern/kern_gfx906.hsaco \
  genco/share/kern/kern_gfx1030.hsaco genco/share/kern/kern_two.hsaco \
  misnamed/share/kern/standalone_gfx1030.hsaco
all: $(addprefix $(OUT)/,$(CELLS))

$(OUT)/exe/bin/app $(OUT)/genco/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $< -o $@

$(OUT)/shared/lib/libvec.so: $(SRC)vec.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -fPIC -shared -Wl,-soname,libvec.so $< -o $@

$(OUT)/shared/bin/vecapp: $(SRC)vecapp.hip $(OUT)/shared/lib/libvec.so
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $< -L$(OUT)/shared/lib -lvec \
	  '-Wl,-rpath,$$ORIGIN/../lib' -o $@

$(OUT)/multi/bin/multi: $(TU)
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $(TU) -o $@

$(OUT)/rdc/bin/rdc: $(TU)
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -fgpu-rdc -DRDC $(TU) -o $@

# The objects and their archive stay out of the installed tree.
$(OUT)/objects/%.o: $(SRC)%.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -c $< -o $@

$(OUT)/objects/libk.a: $(OUT)/objects/lib_x.o $(OUT)/objects/lib_y.o
	rm -f $@ && ar rcs $@ $^

$(OUT)/static/bin/static: $(SRC)static_main.hip $(OUT)/objects/libk.a
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $< -L$(OUT)/objects -lk -o $@

$(OUT)/targetid/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) --offload-arch=gfx90a:sramecc+:xnack+ \
	  --offload-arch=gfx908:xnack- $< -o $@

$(OUT)/cov5/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) -mcode-object-version=5 \
	  --offload-arch=gfx90a:sramecc+:xnack- --offload-arch=gfx1030 $< -o $@

$(OUT)/templates/bin/templates: $(SRC)templates.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $< -o $@

$(OUT)/lld/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $(LLD14) $< -o $@

$(OUT)/lld64k/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) $(LLD14) -Wl,-z,max-page-size=0x10000 $< -o $@

$(OUT)/bfd64k/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -Wl,-z,max-page-size=0x10000 $< -o $@

$(OUT)/nosep/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -Wl,-z,noseparate-code $< -o $@

$(OUT)/nosepdbg/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -g -Wl,-z,noseparate-code $< -o $@

$(OUT)/nosepdata/bin/app: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) $(ARCH3) -DBIG_DATA -Wl,-z,noseparate-code $< -o $@

# --genco code-object files: one processor each, two processors, and one
# whose name says gfx1030 for gfx906 code.
$(OUT)/genco/share/kern/kern_%.hsaco: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) --genco --offload-arch=$* $< -o $@

$(OUT)/genco/share/kern/kern_two.hsaco: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) --genco --offload-arch=gfx906 --offload-arch=gfx1030 \
	  $< -o $@

$(OUT)/misnamed/share/kern/standalone_gfx1030.hsaco: $(SRC)app.hip
	@mkdir -p $(@D)
	$(HIPCC) $(FLAGS) --genco --offload-arch=gfx906 $< -o $@
