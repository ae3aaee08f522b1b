# SPDX-License-Identifier: GPL-2.0
# Debian's own kernels (tests/harness/stock-kernels.txt), sourced by check.sh
# after guest.sh: for each, in a debootstrapped chroot of the suite that built
# it, the module is built as a user builds it (`make debian-kdir`, then `make
# KDIR=...`, then DKMS), and Debian's own vmlinuz boots in QEMU with it and
# runs the integration tests that need neither KUnit nor the debug kernel, in
# a newer QEMU than the other stages (provision.sh's fetch_stock_qemu).

STOCK_DIR=$MSRB_CACHE/stock
STOCK_APT_CONF='Acquire::Check-Valid-Until "false"; APT::Install-Recommends "false"; APT::Sandbox::User "root";'

# stock_in_chroot DIR CMD...: CMD as root in the chroot DIR, with /proc, /dev,
# the harness cache at /cache and this tree (read-only) at /src. The mounts
# live in a mount namespace of their own and vanish with CMD.
stock_in_chroot() {
	local dir=$1
	shift
	unshare --mount --propagation private -- bash -c '
		d=$1 top=$2 cache=$3
		shift 3
		mkdir -p "$d/cache" "$d/src"
		mount -t proc proc "$d/proc" && mount --rbind /dev "$d/dev" &&
		mount --bind "$cache" "$d/cache" && mount --bind -o ro "$top" "$d/src" || exit 125
		exec chroot "$d" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			MSRBATCH_CACHE=/cache DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"
	' _ "$dir" "$MSRB_TOP" "$MSRB_CACHE" "$@"
}

# stock_chroot SUITE APT_SUITE...: prints the chroot of SUITE (minbase,
# debootstrapped once into the cache) with APT_SUITEs as its sources, updated.
stock_chroot() {
	local suite=$1 mirror dir s
	shift
	dir=$STOCK_DIR/chroot-$suite
	mirror=$(debian_mirror) || return
	if [ ! -f "$dir/.msrbatch-ready" ]; then
		msrb_log "debootstrap $suite into $dir"
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$STOCK_DIR"
		debootstrap --variant=minbase "$suite" "$dir.tmp" "$mirror" >"$STOCK_DIR/debootstrap-$suite.log" 2>&1 ||
			{ tail -n 5 "$STOCK_DIR/debootstrap-$suite.log" >&2; return 1; }
		mv "$dir.tmp" "$dir"
		touch "$dir/.msrbatch-ready"
	fi
	for s in "$@"; do
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main"
	done >"$dir/etc/apt/sources.list"
	echo "$STOCK_APT_CONF" >"$dir/etc/apt/apt.conf.d/99msrbatch"
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null
	stock_in_chroot "$dir" apt-get update -qq >&2 || return
	echo "$dir"
}

# stock_kver CHROOT SUITE: the kernel ABI (e.g. 7.3.4+deb13-amd64) that
# SUITE's linux-headers-amd64 depends on now.
stock_kver() {
	local ver
	ver=$(stock_in_chroot "$1" apt-cache madison linux-headers-amd64 |
		awk -F'|' -v s=" $2/" 'index($3, s) {gsub(/ /, "", $2); print $2; exit}')
	[ -n "$ver" ] || { echo "msrbatch: $2 has no linux-headers-amd64" >&2; return 1; }
	stock_in_chroot "$1" apt-cache show "linux-headers-amd64=$ver" |
		sed -n 's/^Depends:.*linux-headers-\([^ ,]*-amd64\) (=.*/\1/p' | head -n1
}

# stock_image CHROOT KVER OUT: Debian's vmlinuz and msr.ko of KVER into OUT
# (downloaded once per Debian version).
stock_image() {
	local dir=$1 kver=$2 out=$3 pkgs dl
	[ -f "$out/.msrbatch-ready" ] && return 0
	rm -rf "$out"
	mkdir -p "$out/x"
	pkgs=$(stock_in_chroot "$dir" apt-cache show "linux-image-$kver" |
		sed -n '/^Depends:/{s/^Depends: //; s/([^)]*)//g; s/,/\n/g; p}' |
		tr -d ' ' | awk -v k="$kver" '$0 == "linux-binary-" k || $0 == "linux-modules-" k' | tr '\n' ' ')
	dl=$dir/tmp/image-$kver
	rm -rf "$dl"
	mkdir -p "$dl"
	# shellcheck disable=SC2086 # a list of package names
	stock_in_chroot "$dir" sh -c "cd /tmp/image-$kver && apt-get download -qq linux-image-$kver $pkgs" >&2 || return
	for f in "$dl"/*.deb; do
		dpkg-deb -x "$f" "$out/x" || return
	done
	rm -rf "$dl"
	# /boot/vmlinuz-KVER, or (Debian since 7.x) /usr/lib/modules/KVER/vmlinuz.
	f=$(find "$out/x" -path "*/boot/vmlinuz-$kver" -o -path "*/modules/$kver/vmlinuz" | head -n1)
	[ -n "$f" ] || { echo "msrbatch: no vmlinuz in the packages of linux-image-$kver" >&2; return 1; }
	cp "$f" "$out/vmlinuz" || return
	f=$(find "$out/x" -path "*/kernel/arch/x86/kernel/msr.ko*" | head -n1)
	case "$f" in
	*.xz) xz -dc "$f" >"$out/msr.ko" ;;
	*.zst) zstd -qdc "$f" >"$out/msr.ko" ;;
	*) cp "$f" "$out/msr.ko" ;;
	esac || return
	rm -rf "$out/x"
	touch "$out/.msrbatch-ready"
}

# The integration tests that run on a stock kernel: all of check.sh's but the
# two that need a module built for the harness's kernel (the test PMU of
# pce_policy_test.sh) or its signing key (the unsigned-module refusal of the
# lockdown boot), and KUnit, which Debian's kernels do not enable; plus
# memcg_test, which needs the memory cgroup controller that only Debian's
# kernels have (the harness kernels lack CONFIG_MEMCG).
STOCK_TESTS="attack_test prepared_test sample_test sample_limits_test sync_test restore_test memcg_test abi_test abi_test-32 msrbatch-guest-tests msrbatch-allowlist-test /tests/allowlist_tool_test.sh /tests/tool_test.sh /tests/pentium_test.sh /tests/sample_tool_test.sh /tests/examples_test.sh /tests/udev_test.sh /tests/unload_test.sh pce_test"

# stock_kernel NAME SUITE APT_SUITES FROM [SKIP]: the whole round for one
# kernel (SKIP: tests of STOCK_TESTS left out, comma-separated).
stock_kernel() {
	local name=$1 suite=$2 apt_suites=$3 from=$4 skip=${5:-} dir kver hver log work kdir tests t
	# shellcheck disable=SC2086 # a list of suites
	dir=$(stock_chroot "$suite" $apt_suites) || return
	kver=$(stock_kver "$dir" "$from") || return
	[ -n "$kver" ] || { echo "msrbatch: no kernel found in $from" >&2; return 1; }
	hver=$(stock_in_chroot "$dir" apt-cache madison "linux-headers-$kver" | awk -F'|' '{gsub(/ /, "", $2); print $2; exit}')
	msrb_log "$name: Debian $from kernel $kver ($hver)"
	stock_in_chroot "$dir" apt-get install -y -qq -t "$from" "linux-headers-$kver" \
		kmod cpio dkms python3 >/dev/null || return
	# The two lines of --deps: the exact toolchain from the kernel's own
	# suite, then the build tools, whose libraries must match the headers'.
	local deps
	mapfile -t deps < <(stock_in_chroot "$dir" /src/scripts/debian-kdir.sh --deps "$kver")
	[ ${#deps[@]} -eq 2 ] || { echo "msrbatch: $name: debian-kdir.sh --deps failed" >&2; return 1; }
	msrb_log "$name: toolchain ${deps[0]}; tools ${deps[1]}"
	# shellcheck disable=SC2086 # lists of packages
	stock_in_chroot "$dir" apt-get install -y -qq -t "$from" ${deps[1]} >/dev/null &&
		stock_in_chroot "$dir" apt-get install -y -qq ${deps[0]} >/dev/null || return

	# As a user: a copy of the tree, make debian-kdir, make KDIR=... .
	work=$dir/build/msrbatch
	rm -rf "$dir/build"
	mkdir -p "$work"
	(cd "$MSRB_TOP" && git ls-files -co --exclude-standard | grep -v '^target/' | tar -cf - -T -) |
		tar -x -C "$work" || return
	log=$STOCK_DIR/$name.log
	stock_in_chroot "$dir" make -C /build/msrbatch debian-kdir KVER="$kver" >"$log" 2>&1 ||
		{ cat "$log" >&2; return 1; }
	grep -E '^msrbatch: ' "$log" >&2
	kdir=$(sed -n 's/^KDIR=//p' "$log" | tail -n1)
	# Its refusals: one line each, naming what to install.
	stock_refuses "$dir" "a rustc other than the kernel's" "install rustc=" env RUSTC=/bin/true \
		/src/scripts/debian-kdir.sh "$kver" &&
		stock_refuses "$dir" "a kernel without headers" "install linux-headers-0.0-none" \
			/src/scripts/debian-kdir.sh 0.0-none || return
	stock_in_chroot "$dir" make -C /build/msrbatch KDIR="$kdir" >"$log" 2>&1 ||
		{ cat "$log" >&2; return 1; }
	if grep -iE 'warning|error' "$log" >&2; then
		echo "msrbatch: $name: the module build printed warnings (above)" >&2
		return 1
	fi
	"$MSRB_TOP/scripts/check-modinfo.sh" "$work/rust/msrbatch.ko" "$kver" >&2 || return

	# DKMS with the default kernel tree, once debian-kdir --install added the
	# Rust artifacts to the installed headers (private DKMS trees).
	cat >"$dir/tmp/dkms-build.sh" <<'SH'
set -e
kver=$1
/src/scripts/debian-kdir.sh --install "$kver" >/dev/null
ver=$(/src/scripts/version.sh)
d=/tmp/dkms
rm -rf "$d"
mkdir -p "$d/src" "$d/tree" "$d/inst"
cp -r /build/msrbatch "$d/src/msrbatch-$ver"
make -s -C "$d/src/msrbatch-$ver" clean >/dev/null 2>&1 || true
dk="dkms --dkmstree $d/tree --sourcetree $d/src --installtree $d/inst"
$dk add -m msrbatch -v "$ver" >/dev/null
$dk build -m msrbatch -v "$ver" -k "$kver" --kernelsourcedir "/lib/modules/$kver/build" || { cat "$d/tree/msrbatch/$ver/build/make.log"; exit 1; }
ls "$d/tree/msrbatch/$ver/$kver"/*/module/msrbatch.ko*
SH
	stock_in_chroot "$dir" sh /tmp/dkms-build.sh "$kver" >"$log" 2>&1 ||
		{ tail -n 30 "$log" >&2; echo "msrbatch: $name: DKMS build failed" >&2; return 1; }
	msrb_log "$name: DKMS built $(tail -n1 "$log")"

	# Debian's kernel image, our module and the guest tests.
	local img=$STOCK_DIR/image-$kver-$hver root=$STOCK_DIR/root-$name
	stock_image "$dir" "$kver" "$img" || return
	rm -rf "$root"
	cp -a "$GUEST_DIR/root" "$root"
	rm -f "$root"/lib/modules/*.ko
	cp "$work/rust/msrbatch.ko" "$img/msr.ko" "$root/lib/modules/"
	(cd "$root" && find . | cpio -o -H newc --quiet) >"$STOCK_DIR/rootfs-$name.cpio"
	tests=
	for t in $STOCK_TESTS; do
		case ",$skip," in
		*",$t,"*) msrb_log "$name: $t left out (skip= in stock-kernels.txt, which says why)" ;;
		*) tests="$tests $t" ;;
		esac
	done
	. "$MSRB_CACHE/toolchain.env"
	[ -x "$STOCK_QEMU" ] || { echo "msrbatch: $name: no newer QEMU to boot Debian's kernel in (tests/harness/provision.sh could not fetch it; see its log)" >&2; return 1; }
	GUEST_QEMU=$STOCK_QEMU GUEST_KERNEL=$img/vmlinuz GUEST_ROOTFS=$STOCK_DIR/rootfs-$name.cpio GUEST_INT3_AGAIN=1 \
		guest_boot "stock-$name" "run-all.sh '/tests/stock_kernel_test.sh $kver'$tests" 900 ''
}

# stock_refuses CHROOT DESCRIPTION PATTERN CMD...: CMD in CHROOT must fail
# with one line on stderr, matching PATTERN.
stock_refuses() {
	local dir=$1 what=$2 pattern=$3 out
	shift 3
	if out=$(stock_in_chroot "$dir" "$@" 2>&1); then
		echo "msrbatch: debian-kdir accepted $what" >&2
		return 1
	fi
	if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] || ! grep -q "$pattern" <<<"$out"; then
		printf 'msrbatch: debian-kdir refused %s with other than one line naming "%s":\n%s\n' "$what" "$pattern" "$out" >&2
		return 1
	fi
	msrb_log "refused $what: $out"
}

# stock_kernels_list: "NAME SUITE APT_SUITES FROM SKIP" lines of
# stock-kernels.txt, tab-separated (SKIP: tests to leave out, comma-separated).
stock_kernels_list() {
	awk '!/^#/ && NF >= 4 {
		skip = ""; last = NF
		if ($NF ~ /^skip=/) { skip = substr($NF, 6); last = NF - 1 }
		s = ""; for (i = 3; i < last; i++) s = s (s ? " " : "") $i
		printf "%s\t%s\t%s\t%s\t%s\n", $1, $2, s, $last, skip }' \
		"$MSRB_TOP/tests/harness/stock-kernels.txt"
}
