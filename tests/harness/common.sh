# SPDX-License-Identifier: GPL-2.0
# Shared settings for the msrbatch harness scripts. Source it; do not run it.

# Pinned *series*: Debian keeps only the newest build of each, so we pin the
# series and record the exact version we got in the cache key.
MSRB_LINUX_SERIES=linux-source-7.3
MSRB_LINUX_SUITE=trixie-backports
MSRB_BINDGEN_VERSION=0.73.2
MSRB_CBINDGEN_VERSION=0.29.4
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

# The Debian mirror the system already uses (so no host name lives in this repo).
debian_mirror() {
	if [ -n "${MSRBATCH_DEBIAN_MIRROR:-}" ]; then
		echo "$MSRBATCH_DEBIAN_MIRROR"
		return
	fi
	local uri
	uri=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
		grep -Eo '(https?)://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')
	[ -n "$uri" ] || uri=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null |
		grep -E '/debian/?$' | head -n1)
	[ -n "$uri" ] || msrb_die "cannot find the system's Debian mirror; set MSRBATCH_DEBIAN_MIRROR"
	echo "$uri"
}

# msrb_private_apt DIR CMD ARGS...: apt-get or apt-cache with DIR's own
# sources.list, lists and cache; the system's apt sources and state are left
# alone, and dpkg's status is not read (so `show` lists what the sources offer,
# not what is installed).
msrb_private_apt() {
	local dir=$1 cmd=$2
	shift 2
	"$cmd" -o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null \
		-o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}

# msrb_unpack_linux_source DEB DEST VERSION: the kernel tree of a Debian
# linux-source-X.Y package into DEST (made whole or not at all), with the
# package's version in DEST/.msrbatch-debian-version.
msrb_unpack_linux_source() {
	local deb=$1 dest=$2 ver=$3
	rm -rf "$dest.tmp"
	mkdir -p "$dest.tmp"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest.tmp" --wildcards './usr/src/*.tar.xz' || return
	tar -xJf "$dest.tmp"/usr/src/*.tar.xz -C "$dest.tmp" || return
	rm -rf "$dest.tmp/usr" "$dest"
	mv "$dest.tmp"/linux-source-* "$dest" || return
	rmdir "$dest.tmp"
	echo "$ver" >"$dest/.msrbatch-debian-version"
}
