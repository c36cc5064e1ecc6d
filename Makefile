# resmpi top-level build: Rust workspace -> libmpi.so.12, mpi.h, mpicc, mpiexec.
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
LIB         := $(BUILD)/lib/$(LIBFILE)
WRAPPERS    := $(BUILD)/bin/mpicc $(BUILD)/bin/mpicxx

.PHONY: all cargo headers lib wrappers mpiexec install check-abi clean demo test bench bench-ft bench-coll bench-dtype bench-process-ft bench-coll-sweep bench-msgrate bench-ulfm bench-scaling bench-io FORCE

all: headers lib wrappers mpiexec

cargo:
	$(CARGO) build --release $(CARGO_PACKAGES)

# Cargo leaves the archive untouched when nothing changed, so make relinks only when needed.
$(STATICLIB): FORCE
	$(CARGO) build --release $(CARGO_PACKAGES)

headers: $(HEADERS)
$(HEADERS) &: $(TABLE) $(GEN) Cargo.toml
	$(PYTHON) $(GEN) header $(BUILD)/include

lib: $(LIB)
$(BUILD)/obj/glue.c: $(STATICLIB) $(TABLE) $(GEN)
	@mkdir -p $(@D)
	$(PYTHON) $(GEN) glue $(STATICLIB) $@

$(BUILD)/obj/glue.o: $(BUILD)/obj/glue.c $(HEADERS)
	$(LINK_CC) -O2 -fPIC -Wall -I$(BUILD)/include -c $< -o $@

$(BUILD)/obj/exports.map: Makefile
	@mkdir -p $(@D)
	printf '{\n  global:\n    MPI_*; PMPI_*; MPIX_*; PMPIX_*; resmpi_*; MPIR_Dup_fn;\n  local: *;\n};\n' > $@

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

wrappers: $(WRAPPERS)
$(BUILD)/bin/mpicc: scripts/mpicc.in
	@mkdir -p $(@D)
	sed -e 's/@LANG@/C/' -e 's/@COMPILER@/$${RESMPI_CC:-$${MPICH_CC:-cc}}/' $< > $@
	chmod 755 $@
$(BUILD)/bin/mpicxx: scripts/mpicc.in
	@mkdir -p $(@D)
	sed -e 's/@LANG@/C++/' -e 's/@COMPILER@/$${RESMPI_CXX:-$${MPICH_CXX:-c++}}/' $< > $@
	chmod 755 $@
	ln -sfn mpicxx $(BUILD)/bin/mpic++

# The launcher crate builds target/release/mpiexec; until it exists, warn and go on.
mpiexec:
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

clean:
	rm -rf $(BUILD)
	$(CARGO) clean --release -p resmpi-capi
