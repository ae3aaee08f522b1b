# SPDX-License-Identifier: GPL-2.0
#
# msrbatch: top-level make. `make` builds rust/msrbatch.ko against KDIR;
# `make vm-demo` and `make check` run everything in a QEMU guest with a
# test kernel built (once, cached) by the harness.

KDIR ?= /lib/modules/$(shell uname -r)/build
RUSTC ?= rustc
# Passed through to Kbuild when set (e.g. LLVM=1 or LLVM=-22, BINDGEN=...).
KBUILD_VARS := $(foreach v,LLVM RUSTC BINDGEN $(if $(LLVM),,CC LD),$(if $(filter command line environment,$(origin $(v))),$(v)=$($(v))))
# With LLVM set, it alone names the compilers, as in the kernel's Makefile.
# (DKMS appends CC=clang for clang-built kernels, which is wrong for LLVM=-22.)
ifneq ($(LLVM),)
ifneq ($(filter %/,$(LLVM)),)
LLVM_PREFIX := $(LLVM)
else ifneq ($(filter -%,$(LLVM)),)
LLVM_SUFFIX := $(LLVM)
endif
KBUILD_VARS += CC=$(LLVM_PREFIX)clang$(LLVM_SUFFIX) LD=$(LLVM_PREFIX)ld.lld$(LLVM_SUFFIX)
endif

HARNESS := tests/harness
# The test kernel for vm-run, vm-demo and check: FLAVOUR=base or FLAVOUR=debug
# (KASAN, lockdep, UBSAN, KFENCE, ...). Defaults: check runs on debug, vm-run
# and vm-demo on base; bench always uses base and fuzz always debug.
ifdef FLAVOUR
export GUEST_FLAVOUR := $(FLAVOUR)
endif

# Installation (DESTDIR and PREFIX respected; see Documentation/install.md).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(PREFIX)/bin
# The library goes to the distribution's multiarch directory when it has one
# (Debian and Ubuntu: lib/x86_64-linux-gnu, which ld.so and pkg-config search
# under /usr and /usr/local alike), else to lib.
MULTIARCH ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null)
LIBDIR := $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
INCLUDEDIR := $(PREFIX)/include
MANDIR := $(PREFIX)/share/man
UDEVDIR ?= /usr/lib/udev/rules.d
VERSION := $(shell scripts/version.sh)
KVER ?= $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"/\1/p' "$(KDIR)/include/generated/utsrelease.h" 2>/dev/null)
CARGO_OUT := target/release
# libmsrbatch.so.$(VERSION), with the SONAME libmsrbatch.so.$(SOMAJOR)
# (userspace/msrbatch/build.rs sets it from the same version).
SOMAJOR = $(firstword $(subst ., ,$(VERSION)))
# The static C library, built apart with LTO (Cargo.toml's release-staticlib
# profile): only what the C API reaches of Rust's std is in it, so a static
# C program is about 1.3 MB (its debug information stripped, as distributions
# do), and std's getaddrinfo and getpwuid_r, which glibc warns about in
# static programs, are not.
STATICLIB := target/release-staticlib/libmsrbatch.a

.PHONY: all modules module-check clean provision kernel vm-run vm-demo check debian-kdir \
	install install-module install-userspace uninstall rust-analyzer \
	userspace harness-selftest bench fuzz version libdir

all: modules

modules:
	@LLVM="$(LLVM)" BINDGEN="$(BINDGEN)" scripts/check-kdir.sh "$(KDIR)" "$(RUSTC)"
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" $(KBUILD_VARS) modules
	@scripts/check-modinfo.sh rust/msrbatch.ko >/dev/null
	@echo "built $(CURDIR)/rust/msrbatch.ko"

# A KDIR for an installed Debian kernel (default: the running one), without
# building a kernel: make debian-kdir [KVER=7.3.4+deb13-amd64] [INSTALL=1]
# (scripts/debian-kdir.sh; Documentation/install.md).
debian-kdir:
	@scripts/debian-kdir.sh $(if $(filter 1 y yes,$(INSTALL)),--install) \
		$(if $(filter command line environment,$(origin KVER)),$(KVER))

clean:
	-$(MAKE) -C "$(KDIR)" M="$(CURDIR)" clean 2>/dev/null
	rm -rf target

provision:
	@$(HARNESS)/provision.sh

kernel: provision
	@$(HARNESS)/build-kernel.sh

# The header first: it must have the frozen ABI's values, as the userspace
# view msrbatch-sys's build checks (scripts/check-abi.sh, design.md).
userspace:
	@scripts/check-abi.sh
	cargo build --release --workspace
	cargo rustc --quiet --profile release-staticlib -p msrbatch --lib --crate-type staticlib
	strip --strip-debug $(STATICLIB)

# Editor support for the module: writes rust-project.json (rust-analyzer).
rust-analyzer:
	@LLVM="$(LLVM)" BINDGEN="$(BINDGEN)" scripts/check-kdir.sh "$(KDIR)" "$(RUSTC)"
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" $(KBUILD_VARS) rust-analyzer

install: install-module install-userspace

# The module, through Kbuild's modules_install, into
# $(DESTDIR)/lib/modules/$(KVER)/extra. depmod runs only for a real install.
install-module: modules
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" $(KBUILD_VARS) INSTALL_MOD_PATH="$(DESTDIR)" \
		INSTALL_MOD_DIR=extra $(if $(DESTDIR),DEPMOD=true) modules_install

install-userspace: userspace
	./$(CARGO_OUT)/msrbatch __man >$(CARGO_OUT)/msrbatch.1
	./$(CARGO_OUT)/msrbatch __completions bash >$(CARGO_OUT)/msrbatch.bash
	./$(CARGO_OUT)/msrbatch __completions zsh >$(CARGO_OUT)/_msrbatch
	./$(CARGO_OUT)/msrbatch __completions fish >$(CARGO_OUT)/msrbatch.fish
	sed -e "s|@PREFIX@|$(PREFIX)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@UAPIDIR@|$(INCLUDEDIR)|" \
		-e "s|@LIBDIR@|$(LIBDIR)|; s|@VERSION@|$(VERSION)|" \
		userspace/msrbatch/msrbatch.pc.in >$(CARGO_OUT)/msrbatch.pc
	sed "s|@VERSION@|$(VERSION)|" Documentation/man/msrbatch.4 >$(CARGO_OUT)/msrbatch.4
	sed "s|@VERSION@|$(VERSION)|" Documentation/man/msrbatch-script.5 >$(CARGO_OUT)/msrbatch-script.5
	install -D -m 0755 $(CARGO_OUT)/msrbatch "$(DESTDIR)$(BINDIR)/msrbatch"
	install -D -m 0755 $(CARGO_OUT)/libmsrbatch.so "$(DESTDIR)$(LIBDIR)/libmsrbatch.so.$(VERSION)"
	ln -sf libmsrbatch.so.$(VERSION) "$(DESTDIR)$(LIBDIR)/libmsrbatch.so.$(SOMAJOR)"
	ln -sf libmsrbatch.so.$(SOMAJOR) "$(DESTDIR)$(LIBDIR)/libmsrbatch.so"
	install -D -m 0644 $(STATICLIB) "$(DESTDIR)$(LIBDIR)/libmsrbatch.a"
	install -D -m 0644 $(CARGO_OUT)/msrbatch.pc "$(DESTDIR)$(LIBDIR)/pkgconfig/msrbatch.pc"
	install -D -m 0644 include/msrbatch.h "$(DESTDIR)$(INCLUDEDIR)/msrbatch.h"
	install -D -m 0644 include/uapi/linux/msrbatch.h "$(DESTDIR)$(INCLUDEDIR)/linux/msrbatch.h"
	install -D -m 0644 include/uapi/linux/msrbatch_msr_safe.h "$(DESTDIR)$(INCLUDEDIR)/linux/msrbatch_msr_safe.h"
	install -D -m 0644 $(CARGO_OUT)/msrbatch.1 "$(DESTDIR)$(MANDIR)/man1/msrbatch.1"
	install -D -m 0644 $(CARGO_OUT)/msrbatch.4 "$(DESTDIR)$(MANDIR)/man4/msrbatch.4"
	install -D -m 0644 $(CARGO_OUT)/msrbatch-script.5 "$(DESTDIR)$(MANDIR)/man5/msrbatch-script.5"
	install -D -m 0644 $(CARGO_OUT)/msrbatch.bash "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/msrbatch"
	install -D -m 0644 $(CARGO_OUT)/_msrbatch "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_msrbatch"
	install -D -m 0644 $(CARGO_OUT)/msrbatch.fish "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/msrbatch.fish"
	install -D -m 0644 packaging/60-msrbatch.rules "$(DESTDIR)$(UDEVDIR)/60-msrbatch.rules"
	install -D -m 0644 packaging/61-msrbatch-msr-safe.rules "$(DESTDIR)$(UDEVDIR)/61-msrbatch-msr-safe.rules"
	$(if $(DESTDIR),,-ldconfig)

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/msrbatch" "$(DESTDIR)$(LIBDIR)/libmsrbatch.so" \
		"$(DESTDIR)$(LIBDIR)/libmsrbatch.so.$(SOMAJOR)" "$(DESTDIR)$(LIBDIR)/libmsrbatch.so.$(VERSION)" \
		"$(DESTDIR)$(LIBDIR)/libmsrbatch.a" "$(DESTDIR)$(LIBDIR)/pkgconfig/msrbatch.pc" \
		"$(DESTDIR)$(INCLUDEDIR)/msrbatch.h" "$(DESTDIR)$(INCLUDEDIR)/linux/msrbatch.h" \
		"$(DESTDIR)$(INCLUDEDIR)/linux/msrbatch_msr_safe.h" \
		"$(DESTDIR)$(MANDIR)/man1/msrbatch.1" "$(DESTDIR)$(MANDIR)/man4/msrbatch.4" \
		"$(DESTDIR)$(MANDIR)/man5/msrbatch-script.5" \
		"$(DESTDIR)$(PREFIX)/share/bash-completion/completions/msrbatch" \
		"$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_msrbatch" \
		"$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/msrbatch.fish" \
		"$(DESTDIR)$(UDEVDIR)/60-msrbatch.rules" "$(DESTDIR)$(UDEVDIR)/61-msrbatch-msr-safe.rules" \
		"$(DESTDIR)/lib/modules/$(KVER)/extra/rust/msrbatch.ko"
	$(if $(DESTDIR),,-depmod -a "$(KVER)")
	$(if $(DESTDIR),,-ldconfig)

# make vm-run CMD='...' [EXTRA='file ...'] [TIMEOUT=seconds] [APPEND='kernel args']
# CMD, EXTRA and APPEND reach the guest byte for byte: make would expand a '$'
# in them when it exports them, and a newline would split the recipe line, so
# they are not exported; their raw text ($(value ...), expanded once by :=)
# travels in the environment instead. tests/harness/vm.sh selftest checks it.
unexport CMD EXTRA APPEND
vm-run: export MSRB_VM_CMD := $(value CMD)
vm-run: export MSRB_VM_EXTRA := $(value EXTRA)
vm-run: export MSRB_VM_APPEND := $(value APPEND)
vm-run:
	@CMD="$$MSRB_VM_CMD" EXTRA="$$MSRB_VM_EXTRA" APPEND="$$MSRB_VM_APPEND" $(HARNESS)/vm.sh run

vm-demo:
	@$(HARNESS)/vm.sh demo

check:
	@$(HARNESS)/check.sh

bench:
	@$(HARNESS)/bench.sh

fuzz:
	@$(HARNESS)/fuzz.sh

harness-selftest:
	@$(HARNESS)/vm.sh selftest

# The version (one source: Cargo.toml's [workspace.package]; scripts/version.sh).
version:
	@echo $(VERSION)

# Where make install puts the library (multiarch when the system has it).
libdir:
	@echo $(LIBDIR)
