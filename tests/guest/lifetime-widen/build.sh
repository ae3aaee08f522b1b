#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# DEMONSTRATION BUILDS ONLY, never product code: the module at COMMIT with
# PATCH applied (a busy wait that widens a lifetime race window; - for none), built
# against the cached test kernel of GUEST_FLAVOUR (default debug) and signed
# with its key, as tests/harness/guest.sh builds the module. Needs the kernel
# cached (make check or make vm-run has built it); builds no kernel.
#
#   build.sh 5124424 old-5124424.patch OUT.ko   # the old design (#13 items 6, 7)
#   build.sh 5124424 - OUT.ko                    # the old design as it was
#   build.sh HEAD current.patch OUT.ko          # the same delays in the current design
#
# Then, in a debug guest, swap it in and run the race test:
#   make vm-run EXTRA=OUT.ko CMD='cp /extra/OUT.ko /lib/modules/msrbatch.ko &&
#     rmmod msrbatch && insmod /lib/modules/msrbatch.ko && run-all.sh lifetime_test'
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../harness/common.sh"
[ $# -eq 3 ] || msrb_die "usage: build.sh COMMIT PATCH|- OUT.ko"
commit=$1 patch=$2 out=$(realpath -m "$3")
[ "$patch" = - ] || patch=$(realpath "$patch")
flavour=${GUEST_FLAVOUR:-debug}
. "$MSRB_CACHE/toolchain.env"
kbuild=$(ls -d "$MSRB_CACHE/kbuild/$flavour"-* 2>/dev/null | head -n1)
[ -f "$kbuild/.msrbatch-built" ] || msrb_die "no cached $flavour kernel: run make check or make vm-run first"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$MSRB_TOP" archive "$commit" rust include Cargo.toml | tar -x -C "$src"
rm -f "$src/rust/generated.rs"
[ "$patch" = - ] || patch -s -d "$src" -p1 <"$patch"
echo 'obj-m += rust/' >"$src/Kbuild"
make -s -C "$kbuild" M="$src" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" modules
hash=$(sed -n 's/^CONFIG_MODULE_SIG_HASH="\(.*\)"$/\1/p' "$kbuild/.config")
"$kbuild/scripts/sign-file" "$hash" "$kbuild/certs/signing_key.pem" "$kbuild/certs/signing_key.x509" \
	"$src/rust/msrbatch.ko" "$out"
desc=$commit
[ "$patch" = - ] || desc="$commit + $(basename "$patch")"
echo "built $out: $desc against $kbuild"
