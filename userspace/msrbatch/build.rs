// SPDX-License-Identifier: GPL-2.0
//! The shared C library's SONAME: `libmsrbatch.so.MAJOR`, from the one
//! version (Cargo.toml's `[workspace.package]`), so that a program linked
//! against it needs that name and a later, incompatible major version can
//! be installed beside it. `make install` adds the `.so.MAJOR` and `.so`
//! links (Makefile).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmsrbatch.so.{major}");
}
