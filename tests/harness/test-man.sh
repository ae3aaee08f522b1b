#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The man pages render without warnings; msrbatch.1 is what the tool's
# argument definitions generate (msrbatch __man); and the pages cannot drift
# from the code: msrbatch-script(5) lists every statement the parser accepts
# (userspace/msrbatch/src/script.rs) with the words of its usage, and
# msrbatch(4) every ioctl of include/uapi/linux/msrbatch.h and every errno
# the module returns (rust/). The checks are shown to fail on a page with a
# statement, an ioctl or an errno taken out.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
cargo build --quiet -p msrbatch-tool
if ! ./target/debug/msrbatch __man | diff -u Documentation/man/msrbatch.1 - >/dev/null; then
	echo "not ok - Documentation/man/msrbatch.1 is stale: ./target/debug/msrbatch __man > Documentation/man/msrbatch.1"
	exit 1
fi
echo "ok - msrbatch.1 matches the tool's argument definitions"
# The pages as make install writes them (the version filled in).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in msrbatch.4 msrbatch-script.5; do
	sed "s|@VERSION@|$(scripts/version.sh)|" "Documentation/man/$p" >"$tmp/$p"
done
for page in Documentation/man/msrbatch.1 "$tmp/msrbatch.4:Documentation/man/msrbatch.4 (version filled in)" \
	"$tmp/msrbatch-script.5:Documentation/man/msrbatch-script.5 (version filled in)"; do
	name=${page#*:}
	page=${page%%:*}
	warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	lines=$(MANWIDTH=80 man -l "$page" 2>/dev/null | wc -l)
	if [ -n "$warn" ] || [ "$lines" -lt 20 ]; then
		echo "not ok - man -l $name: $lines lines, warnings: $warn"
		exit 1
	fi
	echo "ok - man -l $name renders ($lines lines, no warnings)"
done

script_rs=userspace/msrbatch/src/script.rs
# The parser's statements: parse_statement's match arms and the batch flags.
statements=$({
	sed -n '/^fn parse_statement/,/^}/p' "$script_rs" | grep -oE '^ *"[a-z0-9-]+"( \| "[a-z0-9-]+")* =>'
	sed -n '/^const FLAGS/,/^];/p' "$script_rs" | grep -oE 'word: "[a-z0-9-]+"'
} | grep -oE '"[a-z0-9-]+"' | tr -d '"' | sort -u)
# The literal words of its usage messages ("cpu all|N|N-M,...", "rdpmc fixed N", ...).
# (and of the usage constants of statements parsed apart, e.g. POLL_USAGE).
usage_words=$({
	grep -oE 'want\([^"]*"[^"]*"' "$script_rs" | sed 's/.*"\(.*\)"/\1/'
	sed -n '/^const [A-Z_]*USAGE: &str/,/;$/p' "$script_rs" | grep -oE '"[^"]*"' | tr -d '"'
} | tr ' |,[]()' '\n' | grep -xE '[a-z][a-z0-9-]*' | sort -u)
if [ "$(wc -w <<<"$statements")" -lt 12 ] || [ "$(wc -w <<<"$usage_words")" -lt 10 ]; then
	echo "not ok - found only these statements in $script_rs: $statements / usage words: $usage_words"
	exit 1
fi
# A page's statement list: the tags (.TP, .TQ) of its STATEMENTS section, as text.
page_tags() {
	awk '/^\.SH /{s=($2=="STATEMENTS")} s&&t{print; t=0} s&&/^\.(TP|TQ)$/{t=1}' "$1" |
		sed -E 's/^\.(BI|B|BR|IR|I) //; s/\\f[BIRP]//g; s/"//g; s/\\-/-/g'
}
check_script_page() { # PAGE: the statements and usage words it misses
	local tags first w
	tags=$(page_tags "$1")
	first=$(awk '{print $1}' <<<"$tags")
	for w in $statements; do
		grep -qx -- "$w" <<<"$first" || echo "statement $w"
	done
	for w in $usage_words; do
		grep -qw -- "$w" <<<"$tags" || echo "usage word $w"
	done
}
ioctls=$(sed -n 's/^#define \(MSRBATCH_[A-Z_]*IOC_[A-Z_]*\)[[:space:]]*_IO.*/\1/p' include/uapi/linux/msrbatch.h)
[ "$(wc -w <<<"$ioctls")" -ge 10 ] || { echo "not ok - only these ioctls in the header: $ioctls"; exit 1; }
# The errnos the module returns: the errno names its sources use.
known=$(sed -n 's/^#define[[:space:]]\+\(E[A-Z0-9]*\)[[:space:]]\+[0-9].*/\1/p' \
	/usr/include/asm-generic/errno-base.h /usr/include/asm-generic/errno.h | sort -u)
errnos=$(grep -ohE '\bE[A-Z0-9]+\b' rust/*.rs | sort -u | comm -12 - <(printf '%s\n' "$known"))
[ "$(wc -w <<<"$errnos")" -ge 20 ] || { echo "not ok - only these errnos in rust/: $errnos"; exit 1; }
check_device_page() { # PAGE: the ioctls missing from its synopsis, the errnos from its text
	local synopsis i
	synopsis=$(awk '/^\.SH /{s=($2=="SYNOPSIS")} s' "$1")
	for i in $ioctls; do
		grep -qw -- "$i" <<<"$synopsis" || echo "ioctl $i"
	done
	for i in $errnos; do
		grep -qE "^\.B[IR]? \\\\?-?$i( |$)" "$1" || echo "errno $i"
	done
}

missing=$(check_script_page Documentation/man/msrbatch-script.5)
if [ -n "$missing" ]; then
	echo "not ok - msrbatch-script.5 lacks what $script_rs accepts:" $missing
	exit 1
fi
echo "ok - msrbatch-script.5 lists the parser's $(wc -w <<<"$statements") statements ($(echo $statements)) and its usage words"
missing=$(check_device_page Documentation/man/msrbatch.4)
if [ -n "$missing" ]; then
	echo "not ok - msrbatch.4 lacks:" $missing
	exit 1
fi
echo "ok - msrbatch.4 has the header's $(wc -w <<<"$ioctls") ioctls in its synopsis and the module's $(wc -w <<<"$errnos") errnos"

# The checks fail when a statement, an ioctl or an errno is left out.
sed '/^\.BI "rmw " "REG SPEC" \.\.\.$/d' Documentation/man/msrbatch-script.5 >"$tmp/no-rmw.5"
sed '/MSRBATCH_SAMPLER_IOC_STOP, 0/d' Documentation/man/msrbatch.4 >"$tmp/no-stop.4"
sed '/^\.B EDQUOT$/d' Documentation/man/msrbatch.4 >"$tmp/no-edquot.4"
if [ "$(check_script_page "$tmp/no-rmw.5")" = "statement rmw" ] &&
	[ "$(check_device_page "$tmp/no-stop.4")" = "ioctl MSRBATCH_SAMPLER_IOC_STOP" ] &&
	[ "$(check_device_page "$tmp/no-edquot.4")" = "errno EDQUOT" ]; then
	echo "ok - the checks find rmw, MSRBATCH_SAMPLER_IOC_STOP and EDQUOT missing when they are taken out"
else
	echo "not ok - a page without rmw, MSRBATCH_SAMPLER_IOC_STOP or EDQUOT passed the checks"
	exit 1
fi
