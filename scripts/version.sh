#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Prints msrbatch's version: the one source is [workspace.package] version in
# the top-level Cargo.toml (cargo needs it there, literally). The Makefile,
# dkms.conf, the pkg-config file, the man pages and the tests read it here.
top=$(cd "$(dirname "$0")/.." && pwd)
v=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$top/Cargo.toml")
[ -n "$v" ] || { echo "version.sh: no [workspace.package] version in $top/Cargo.toml" >&2; exit 1; }
echo "$v"
