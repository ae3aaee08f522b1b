# SPDX-License-Identifier: GPL-2.0
# Shared settings for the msrbatch harness scripts. Source it; do not run it.

# Pinned *series*: Debian keeps only the newest build of each, so we pin the
# series and record the exact version we got in the cache key.
MSRB_LINUX_SERIES=linux-source-7.3
MSRB_LINUX_SUITE=trixie-backports
MSRB_BINDGEN_VERSION=0.73.2
MSRB_LLVM_SUFFIX=-22

MSRB_CACHE=${MSRBATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/msrbatch}
MSRB_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

msrb_die() {
	echo "msrbatch: error: $*" >&2
	exit 1
}

msrb_log() {
	echo "msrbatch: $*" >&2
}

# Run a stage and print its wall time.
msrb_stage() {
	local name=$1 start end rc
	shift
	start=$(date +%s.%N)
	echo "==> stage: $name" >&2
	"$@"
	rc=$?
	end=$(date +%s.%N)
	printf '==> stage: %s: %.1f s%s\n' "$name" "$(echo "$end - $start" | bc)" \
		"$([ $rc -eq 0 ] || echo " (FAILED, exit $rc)")" >&2
	return $rc
}
