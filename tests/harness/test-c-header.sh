#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# include/msrbatch.h against the C API it declares, as cbindgen reads it from
# userspace/msrbatch/src/capi.rs (userspace/msrbatch/cbindgen.toml): the same
# functions, each prototype compatible with the Rust one; struct
# msrbatch_sampler_record with the same fields, each of a compatible type at
# the same offset, and the same size; the same values of the MSRBATCH_*
# constants. A prototype, record field or constant changed on one side only
# fails.
set -euo pipefail
. "$(dirname "$0")/common.sh"
CBINDGEN=${CBINDGEN:-$MSRB_CACHE/cbindgen-$MSRB_CBINDGEN_VERSION/bin/cbindgen}
[ -x "$CBINDGEN" ] || msrb_die "no cbindgen at $CBINDGEN: run tests/harness/provision.sh"
out="$MSRB_TOP/target/c-header"
mkdir -p "$out"
inc=(-I"$MSRB_TOP/include" -I"$MSRB_TOP/include/uapi")
fail() {
	echo "not ok - include/msrbatch.h and src/capi.rs differ: $*"
	exit 1
}

# Expanding macros runs rustc's -Zunpretty=expanded: RUSTC_BOOTSTRAP lets the
# stable compiler do it, as the kernel's own Rust build does.
(cd "$MSRB_TOP/userspace/msrbatch" &&
	RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$out/target" "$CBINDGEN" --quiet \
		--config cbindgen.toml --crate msrbatch --output "$out/rust.h")

# The Rust side alone, with the record renamed and the constants prefixed, to
# sit beside the header.
sed -e 's/^struct msrbatch_sampler_record {/struct rust_sampler_record {/' \
	-e '/^#define /{/^#define MSRBATCH_/!d; s/^#define /#define RUST_/}' \
	"$out/rust.h" >"$out/rust-renamed.h"

# The functions each side declares, by name.
functions() {
	gcc -fsyntax-only "${inc[@]}" -aux-info "$out/$2.aux" -x c - <<<"$1"
	sed -n "s|^/\* .*$3:[0-9]*:NC \*/ extern .* \**\(msrbatch_[a-z0-9_]*\) (.*|\1|p" "$out/$2.aux" | sort
}
functions '#include <msrbatch.h>' header 'include/msrbatch.h' >"$out/header.functions"
functions "#include <linux/msrbatch.h>
#include \"$out/rust.h\"" rust 'rust.h' >"$out/rust.functions"
[ -s "$out/rust.functions" ] || fail "cbindgen found no functions"
diff -u "$out/header.functions" "$out/rust.functions" >"$out/functions.diff" ||
	fail "functions declared on one side only (- header, + capi.rs):
$(grep '^[-+]msrbatch' "$out/functions.diff")"

# Both sides in one translation unit: C accepts a function declared twice
# only with compatible prototypes (an array parameter, such as the header's
# uint64_t val[2], is the pointer it decays to); the record and the
# constants are compared field by field and value by value.
{
	echo '#include <stddef.h>'
	echo '#include <msrbatch.h>'
	echo "#include \"$out/rust-renamed.h\""
	echo 'typedef struct msrbatch_sampler_record H;'
	echo 'typedef struct rust_sampler_record R;'
	echo '_Static_assert(sizeof(H) == sizeof(R), "record size");'
	sed -n '/^struct rust_sampler_record {/,/^};/s/^ *[a-z0-9_ ]* \**\([a-z0-9_]*\);$/\1/p' "$out/rust-renamed.h" |
		while read -r f; do
			echo "_Static_assert(offsetof(H, $f) == offsetof(R, $f) && __builtin_types_compatible_p(__typeof__(((H *)0)->$f), __typeof__(((R *)0)->$f)), \"record field $f\");"
		done
	sed -n 's/^#define RUST_\([A-Z0-9_]*\) .*/\1/p' "$out/rust-renamed.h" | while read -r c; do
		echo "_Static_assert($c == RUST_$c, \"constant $c\");"
	done
} >"$out/both.c"
grep -q 'record field' "$out/both.c" || fail "cbindgen found no struct msrbatch_sampler_record"
gcc -fsyntax-only -Wall -Werror -Wno-array-parameter "${inc[@]}" "$out/both.c" 2>"$out/both.log" ||
	fail "$(grep -E 'error' "$out/both.log")"
echo "ok - include/msrbatch.h declares the $(wc -l <"$out/rust.functions") functions of src/capi.rs with compatible prototypes, its record and its constants"
