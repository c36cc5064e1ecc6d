# resmpi top-level build: Rust workspace -> libmpi.so.12, mpi.h, mpicc, mpiexec;
# Fortran: mpif.h, mpi.mod, libmpichfort.so.12, mpifort/mpif90/mpif77.
#
#   make / make all         build everything into build/
#   make install PREFIX=D   copy build/ to D (wrappers find D from their own path)
#   make check-abi          abi.rs is up to date with abi/mpi_abi.txt
#   make demo | test | bench (ping-pong, collective sweeps, message rate)
#   make clean

PREFIX      ?= /usr/local
CARGO       ?= cargo
PYTHON      ?= python3
LINK_CC     ?= gcc
# make's built-in FC is f77; MPICH's Fortran ABI is gfortran's.
ifeq ($(origin FC),default)
FC          := gfortran
endif
# `make CARGO_PACKAGES="-p resmpi-capi"` builds only the C ABI crate.
CARGO_PACKAGES ?= --workspace

BUILD       := build
TARGET_DIR  := target/release
STATICLIB   := $(TARGET_DIR)/libresmpi_capi.a
SONAME      := libmpi.so.12
LIBFILE     := $(SONAME).0.0
GEN         := abi/gen.py
TABLE       := abi/mpi_abi.txt
# What the Rust standard library needs from the system (cargo rustc -- --print native-static-libs).
RUST_NATIVE_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

HEADERS     := $(BUILD)/include/mpi.h $(BUILD)/include/mpio.h $(BUILD)/include/mpi-ext.h
# VeloC's checkpoint API (crates/capi/src/veloc.rs), a plain copy.
VELOC_HEADER := $(BUILD)/include/veloc.h
LIB         := $(BUILD)/lib/$(LIBFILE)
WRAPPERS    := $(BUILD)/bin/mpicc $(BUILD)/bin/mpicxx $(BUILD)/bin/mpifort
FGEN        := abi/gen_fortran.py
FORT_SONAME := libmpichfort.so.12
FORT_LIB    := $(BUILD)/lib/$(FORT_SONAME).0.0

.PHONY: all cargo headers lib lib-replication lib-msglog wrappers mpiexec fortran install check-abi clean demo test bench bench-ft bench-coll bench-dtype bench-process-ft bench-coll-sweep bench-msgrate bench-ulfm bench-scaling bench-io bench-replication bench-msglog FORCE

all: headers lib lib-replication lib-msglog wrappers mpiexec fortran

cargo:
	$(CARGO) build --release $(CARGO_PACKAGES)

# Cargo leaves the archive untouched when nothing changed, so make relinks only when needed.
$(STATICLIB): FORCE
	$(CARGO) build --release $(CARGO_PACKAGES)

headers: $(HEADERS) $(VELOC_HEADER)
$(VELOC_HEADER): abi/veloc.h
	@mkdir -p $(@D)
	cp -f $< $@
$(HEADERS) &: $(TABLE) $(GEN) Cargo.toml
	$(PYTHON) $(GEN) header $(BUILD)/include

lib: $(LIB)
$(BUILD)/obj/glue.c: $(STATICLIB) $(TABLE) $(GEN)
	@mkdir -p $(@D)
	$(PYTHON) $(GEN) glue $(STATICLIB) $@

$(BUILD)/obj/glue.o: $(BUILD)/obj/glue.c $(HEADERS) $(VELOC_HEADER)
	$(LINK_CC) -O2 -fPIC -Wall -I$(BUILD)/include -c $< -o $@

$(BUILD)/obj/exports.map: Makefile
	@mkdir -p $(@D)
	printf '{\n  global:\n    MPI_*; PMPI_*; MPIX_*; PMPIX_*; resmpi_*; MPIR_Dup_fn; VELOC_*;\n  local: *;\n};\n' > $@

$(LIB): $(BUILD)/obj/glue.o $(STATICLIB) $(BUILD)/obj/exports.map
	@mkdir -p $(@D)
	$(LINK_CC) -shared -o $@ -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(BUILD)/obj/exports.map -Wl,--gc-sections -Wl,--no-undefined \
	    -Wl,-z,noexecstack $(BUILD)/obj/glue.o \
	    -Wl,--whole-archive $(STATICLIB) -Wl,--no-whole-archive $(RUST_NATIVE_LIBS)
	ln -sfn $(LIBFILE) $(BUILD)/lib/$(SONAME)
	ln -sfn $(SONAME) $(BUILD)/lib/libmpi.so
	ln -sfn $(SONAME) $(BUILD)/lib/libmpich.so.12
	ln -sfn libmpich.so.12 $(BUILD)/lib/libmpich.so

# The same library built with the replication protocol as the engine's
# interceptor (resmpi-core's feature `replication`), in its own target
# directory so the default build never unifies that feature in:
# `mpiexec --replicas R --replica-masking process` puts lib/replication
# first on the processes' LD_LIBRARY_PATH.
REPL_TARGET_DIR := target/replication/release
REPL_STATICLIB  := $(REPL_TARGET_DIR)/libresmpi_capi.a
REPL_LIB        := $(BUILD)/lib/replication/$(LIBFILE)

$(REPL_STATICLIB): FORCE
	$(CARGO) build --release -p resmpi-capi --features resmpi-core/replication --target-dir target/replication

lib-replication: $(REPL_LIB)
$(REPL_LIB): $(BUILD)/obj/glue.o $(REPL_STATICLIB) $(BUILD)/obj/exports.map
	@mkdir -p $(@D)
	$(LINK_CC) -shared -o $@ -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(BUILD)/obj/exports.map -Wl,--gc-sections -Wl,--no-undefined \
	    -Wl,-z,noexecstack $(BUILD)/obj/glue.o \
	    -Wl,--whole-archive $(REPL_STATICLIB) -Wl,--no-whole-archive $(RUST_NATIVE_LIBS)
	ln -sfn $(LIBFILE) $(BUILD)/lib/replication/$(SONAME)
	ln -sfn $(SONAME) $(BUILD)/lib/replication/libmpich.so.12

# The same library with the message-logging protocol (resmpi-core's
# feature `msglog`), for the same reason in its own target directory:
# `mpiexec --msglog pessimistic` puts lib/msglog first on the processes'
# LD_LIBRARY_PATH.
MSGLOG_TARGET_DIR := target/msglog/release
MSGLOG_STATICLIB  := $(MSGLOG_TARGET_DIR)/libresmpi_capi.a
MSGLOG_LIB        := $(BUILD)/lib/msglog/$(LIBFILE)

$(MSGLOG_STATICLIB): FORCE
	$(CARGO) build --release -p resmpi-capi --features resmpi-core/msglog --target-dir target/msglog

lib-msglog: $(MSGLOG_LIB)
$(MSGLOG_LIB): $(BUILD)/obj/glue.o $(MSGLOG_STATICLIB) $(BUILD)/obj/exports.map
	@mkdir -p $(@D)
	$(LINK_CC) -shared -o $@ -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=$(BUILD)/obj/exports.map -Wl,--gc-sections -Wl,--no-undefined \
	    -Wl,-z,noexecstack $(BUILD)/obj/glue.o \
	    -Wl,--whole-archive $(MSGLOG_STATICLIB) -Wl,--no-whole-archive $(RUST_NATIVE_LIBS)
	ln -sfn $(LIBFILE) $(BUILD)/lib/msglog/$(SONAME)
	ln -sfn $(SONAME) $(BUILD)/lib/msglog/libmpich.so.12

wrappers: $(WRAPPERS)
$(BUILD)/bin/mpicc: scripts/mpicc.in
	@mkdir -p $(@D)
	sed -e 's/@LANG@/C/' -e 's/@COMPILER@/$${RESMPI_CC:-$${MPICH_CC:-cc}}/' -e 's/@LIBS@/-lmpi/' -e 's/@FLAGS@//' $< > $@
	chmod 755 $@
$(BUILD)/bin/mpicxx: scripts/mpicc.in
	@mkdir -p $(@D)
	sed -e 's/@LANG@/C++/' -e 's/@COMPILER@/$${RESMPI_CXX:-$${MPICH_CXX:-c++}}/' -e 's/@LIBS@/-lmpi/' -e 's/@FLAGS@//' $< > $@
	chmod 755 $@
	ln -sfn mpicxx $(BUILD)/bin/mpic++
# One Fortran wrapper under MPICH's three names (gfortran reads the form from
# the file name: .f fixed, .f90 free).  Like MPICH's, it passes
# -fallow-argument-mismatch: without interfaces, gfortran >= 10 rejects one
# routine called with buffers of two types in a file.
$(BUILD)/bin/mpifort: scripts/mpicc.in
	@mkdir -p $(@D)
	sed -e 's/@LANG@/Fortran/' -e 's/@COMPILER@/$${RESMPI_FC:-$${MPICH_FC:-gfortran}}/' -e 's/@LIBS@/-lmpichfort -lmpi/' -e 's/@FLAGS@/ -fallow-argument-mismatch/' $< > $@
	chmod 755 $@
	ln -sfn mpifort $(BUILD)/bin/mpif90
	ln -sfn mpifort $(BUILD)/bin/mpif77

# Fortran: mpif.h, module mpi and module mpi_f08 from the same table as mpi.h;
# the wrappers of libmpichfort.so.12 are C (abi/fortran_glue.c + generated
# ones), so only the modules need a Fortran compiler: without one they are
# skipped with a warning.
fortran: $(BUILD)/include/mpif.h $(FORT_LIB) $(BUILD)/bin/mpifort
$(BUILD)/include/mpif.h: $(TABLE) $(GEN) $(FGEN) Cargo.toml
	$(PYTHON) $(FGEN) mpif $@
$(BUILD)/obj/mpi_module.f90: $(TABLE) $(GEN) $(FGEN) Cargo.toml
	@mkdir -p $(@D)
	$(PYTHON) $(FGEN) module $@
# Both modules have procedures (MPI_SIZEOF; in mpi_f08 also == on handles and
# the routines with CHARACTER arguments): their objects go into libmpichfort,
# as MPICH's do.
$(BUILD)/obj/mpi_module.o: $(BUILD)/obj/mpi_module.f90
	@if command -v $(FC) >/dev/null 2>&1; then \
	    echo "$(FC) -c -fPIC -O2 $< -J$(BUILD)/include"; \
	    $(FC) -c -fPIC -O2 $< -J$(BUILD)/include -o $@ || exit 1; \
	else echo "warning: $(FC) not found; use mpi skipped" >&2; fi
$(BUILD)/obj/fortran_glue.c: $(TABLE) $(GEN) $(FGEN) abi/fortran_glue.c
	@mkdir -p $(@D)
	$(PYTHON) $(FGEN) glue $@
$(BUILD)/obj/fortran_glue.o: $(BUILD)/obj/fortran_glue.c $(HEADERS)
	$(LINK_CC) -O2 -fPIC -Wall -Wextra -I$(BUILD)/include -c $< -o $@
$(BUILD)/obj/mpi_f08.f90: $(TABLE) $(GEN) $(FGEN) Cargo.toml
	@mkdir -p $(@D)
	$(PYTHON) $(FGEN) module_f08 $@
$(BUILD)/obj/mpi_f08.o: $(BUILD)/obj/mpi_f08.f90
	@if command -v $(FC) >/dev/null 2>&1; then \
	    echo "$(FC) -c -fPIC -O2 $< -J$(BUILD)/include"; \
	    $(FC) -c -fPIC -O2 -ffree-line-length-none $< -J$(BUILD)/include -o $@ || exit 1; \
	else echo "warning: $(FC) not found; use mpi_f08 skipped" >&2; fi
$(FORT_LIB): $(BUILD)/obj/fortran_glue.o $(BUILD)/obj/mpi_module.o $(BUILD)/obj/mpi_f08.o $(LIB)
	f08=; [ -f $(BUILD)/obj/mpi_f08.o ] && f08="$(BUILD)/obj/mpi_module.o $(BUILD)/obj/mpi_f08.o -lgfortran"; \
	$(LINK_CC) -shared -o $@ -Wl,-soname,$(FORT_SONAME) -Wl,--no-undefined -Wl,-z,noexecstack \
	    $(BUILD)/obj/fortran_glue.o $$f08 -L$(BUILD)/lib -lmpi -Wl,-rpath,'$$ORIGIN'
	ln -sfn $(FORT_LIB:$(BUILD)/lib/%=%) $(BUILD)/lib/$(FORT_SONAME)
	ln -sfn $(FORT_SONAME) $(BUILD)/lib/libmpichfort.so

# The launcher crate builds target/release/mpiexec; until it exists, warn and go on.
# After the cargo build (which builds mpiexec too): under -j the copy must
# not race it and install the previous binary.
mpiexec: $(STATICLIB)
	@mkdir -p $(BUILD)/bin
	@if [ -x $(TARGET_DIR)/mpiexec ]; then \
	    cp -f $(TARGET_DIR)/mpiexec $(BUILD)/bin/mpiexec && ln -sfn mpiexec $(BUILD)/bin/mpirun; \
	    echo "installed $(BUILD)/bin/mpiexec"; \
	else echo "warning: $(TARGET_DIR)/mpiexec not built yet; build/bin/mpiexec skipped" >&2; fi
	@if [ -x $(TARGET_DIR)/resmpi-io ]; then \
	    cp -f $(TARGET_DIR)/resmpi-io $(BUILD)/bin/resmpi-io; fi

install: all
	mkdir -p $(DESTDIR)$(PREFIX)
	cp -a $(BUILD)/bin $(BUILD)/include $(BUILD)/lib $(DESTDIR)$(PREFIX)/

check-abi:
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(PYTHON) $(GEN) rust $$tmp/abi.rs && \
	if diff -u crates/capi/src/abi.rs $$tmp/abi.rs; then echo "check-abi: abi.rs is up to date"; \
	else echo "check-abi: crates/capi/src/abi.rs is stale: run '$(PYTHON) $(GEN) rust crates/capi/src/abi.rs'" >&2; exit 1; fi

demo:
	scripts/demo.sh
test:
	scripts/test.sh
# The common-path comparison with MPICH and Open MPI: ping-pong (shm, TCP),
# the collective sweeps at 2/4/8 ranks and the message rate (issue 10).
bench:
	bench/run.sh
	bench/coll_sweep.sh
	bench/msgrate.sh
bench-ft: ; bench/network_ft.sh
bench-coll: ; bench/coll.sh
bench-dtype: ; bench/dtype.sh
bench-io: ; bench/io.sh
bench-msgrate: ; bench/msgrate.sh
bench-ulfm: ; bench/ulfm.sh
bench-process-ft: ; $(PYTHON) bench/process_ft.py
bench-scaling: ; bench/scaling.sh
bench-coll-sweep: ; bench/coll_sweep.sh
bench-replication: ; bench/replication.sh
bench-msglog: ; bench/msglog.sh

clean:
	rm -rf $(BUILD)
	$(CARGO) clean --release -p resmpi-capi
.PHONY: bench-osu-rma
bench-osu-rma: ; bench/osu_rma.sh
