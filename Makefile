# SPDX-License-Identifier: GPL-2.0
#
# msrbatch: top-level make. `make` builds rust/msrbatch.ko against KDIR;
# `make vm-demo` and `make check` run everything in a QEMU guest with a
# test kernel built (once, cached) by the harness.

KDIR ?= /lib/modules/$(shell uname -r)/build
RUSTC ?= rustc
# Passed through to Kbuild when set (e.g. LLVM=1 or LLVM=-22, BINDGEN=...).
KBUILD_VARS := $(foreach v,LLVM RUSTC BINDGEN CC LD,$(if $(filter command line environment,$(origin $(v))),$(v)=$($(v))))

HARNESS := tests/harness

.PHONY: all modules module-check clean provision kernel vm-run vm-demo check \
	userspace harness-selftest bench

all: modules

modules:
	@scripts/check-kdir.sh "$(KDIR)" "$(RUSTC)"
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" $(KBUILD_VARS) modules
	@echo "built $(CURDIR)/rust/msrbatch.ko"

clean:
	-$(MAKE) -C "$(KDIR)" M="$(CURDIR)" clean 2>/dev/null
	rm -rf target

provision:
	@$(HARNESS)/provision.sh

kernel: provision
	@$(HARNESS)/build-kernel.sh

userspace:
	cargo build --release --workspace

# make vm-run CMD='...' [EXTRA='file ...'] [TIMEOUT=seconds] [APPEND='kernel args']
vm-run:
	@$(HARNESS)/vm.sh run

vm-demo:
	@$(HARNESS)/vm.sh demo

check:
	@$(HARNESS)/check.sh

bench:
	@$(HARNESS)/bench.sh

harness-selftest:
	@$(HARNESS)/vm.sh selftest
