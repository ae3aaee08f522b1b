#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make vm-run rebuilds only what changed (issue #28 item 13): a second
# guest_prepare with nothing changed rewrites none of the guest's build
# outputs (the signed and unsigned modules, the static userspace, the C
# programs, the initramfs), and a newer C test source relinks that program
# (both widths) and the initramfs, nothing else. The source's time stamp is
# put back afterwards. Needs the cached test kernel (guest_kernel builds it
# otherwise).
set -uo pipefail
. "$(dirname "$0")/guest.sh"

rel="$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release"
# Every output, with its modification time (not cargo's dep-info .d files,
# which cargo rewrites on every build and the guest never gets).
mtimes() {
	find "$GUEST_DIR"/*.ko "$GUEST_DIR/rootfs.cpio" "$GUEST_OUT/cbin" "$rel" "$rel/examples" \
		-maxdepth 1 -type f ! -name '*.d' -printf '%p %T@\n' | sort
}
changed() { # BEFORE AFTER: the outputs whose time stamp changed or that appeared
	comm -13 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | sed "s| .*||; s|^$MSRB_TOP/||"
}

fails=0
guest_prepare || exit 1
before=$(mtimes)
start=$(date +%s.%N)
guest_prepare || exit 1
printf 'test-incremental: a second guest_prepare took %.1f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"
rebuilt=$(changed "$before" "$(mtimes)")
if [ -z "$rebuilt" ]; then
	echo "test-incremental: nothing changed, nothing rebuilt: ok"
else
	echo "test-incremental: nothing changed, but rebuilt:" $rebuilt ": FAIL"
	fails=1
fi

# One C test newer than its binary: that program and the initramfs only.
src=$(ls "$MSRB_TOP"/tests/guest/*.c | head -n1)
name=$(basename "$src" .c)
ref=$(mktemp)
touch -r "$src" "$ref"
trap 'touch -r "$ref" "$src"; rm -f "$ref"' EXIT
before=$(mtimes)
sleep 1
touch "$src"
guest_prepare || exit 1
rebuilt=$(changed "$before" "$(mtimes)" | sort | tr '\n' ' ')
want=$(printf '%s\n' "target/guest/$GUEST_FLAVOUR/rootfs.cpio" "target/guest/cbin/$name" "target/guest/cbin/$name-32" | sort | tr '\n' ' ')
if [ "$rebuilt" = "$want" ]; then
	echo "test-incremental: a newer tests/guest/$name.c relinked $name, $name-32 and the initramfs only: ok"
else
	echo "test-incremental: a newer tests/guest/$name.c rebuilt '$rebuilt', not '$want': FAIL"
	fails=1
fi
exit $fails
