#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Fails unless include/uapi/linux/msrbatch.h has every value of the frozen
# ABI (userspace/msrbatch-sys/src/frozen_abi.rs, written by gen-uapi.sh), as
# the C compiler sees the header: what `make userspace` checks first, so that
# a header changed alone stops it as it stops the module build (rust/uapi.rs);
# the userspace view itself is checked by msrbatch-sys's build. Each value
# becomes a _Static_assert; bindgen's names of C fields that are Rust
# keywords (type_) get their C names back.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
frozen=$top/userspace/msrbatch-sys/src/frozen_abi.rs
grep -q '^frozen!(' "$frozen" || { echo "check-abi: no frozen values in $frozen" >&2; exit 1; }
{
	printf '#include <stddef.h>\n#include <linux/msrbatch.h>\n'
	printf '#define FROZEN(ok, what) _Static_assert(ok, "msrbatch: " what " in the header (include/uapi/linux/msrbatch.h) is not as the frozen ABI (userspace/msrbatch-sys/src/frozen_abi.rs) has it. A deliberate ABI change bumps MSRBATCH_ABI_VERSION and reruns scripts/gen-uapi.sh; a header changed alone is a mistake.")\n'
	sed -n -e 's/^frozen!(const \([A-Z0-9_]*\) = \([0-9a-fx]*\));$/FROZEN((unsigned long long)(\1) == \2ULL, "\1");/p' \
		-e 's/^frozen!(size \([a-z0-9_]*\) = \([0-9]*\));$/FROZEN(sizeof(struct \1) == \2, "the size of struct \1");/p' \
		-e 's/^frozen!(align \([a-z0-9_]*\) = \([0-9]*\));$/FROZEN(_Alignof(struct \1) == \2, "the alignment of struct \1");/p' \
		-e 's/^frozen!(field \([a-z0-9_]*\)\.\([a-z0-9_]*\) = \([0-9]*\));$/FROZEN(offsetof(struct \1, \2) == \3, "the offset of \1.\2");/p' \
		"$frozen" | sed -E 's/, (type)_\)/, \1)/'
} | "${CC:-cc}" -std=c11 -fsyntax-only -Wall -Werror -I"$top/include/uapi" -x c -
