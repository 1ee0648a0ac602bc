//! Lets the `-lcuda` that `cuda-driver-sys` asks for resolve on machines without CUDA.
//!
//! `cuda-driver-sys` (whose types and constants cuda-sys re-exports) declares
//! `links = "cuda"`, and its build script prints `cargo:rustc-link-lib=dylib=cuda`, so
//! every binary that depends on it is linked with `-lcuda`. cuda-sys resolves every
//! driver function from libcuda at run time (libloading), so no symbol needs libcuda
//! at link time, but the linker still fails with "unable to find library -lcuda" where
//! the driver is not installed (CI, build boxes).
//!
//! On Linux this script writes a stub `libcuda.so` into `$OUT_DIR/libcuda-stub` and adds
//! that folder to the link search path, which cargo passes on to the final link of every
//! crate that depends on cuda-sys, inside this workspace or not. The stub is a GNU ld
//! linker script holding only a comment: it satisfies `-lcuda` and adds nothing. rustc
//! links with `--as-needed`, so neither the stub nor a real libcuda found first on the
//! search path becomes a `NEEDED` entry of the binary.
//!
//! Other targets get nothing: on Windows MSVC a linker script cannot stand in for
//! `cuda.lib`, and the README documents the `.cargo/config.toml` override there.

use std::env;
use std::fs;
use std::path::PathBuf;

/// The stub's whole content: a linker script that is only a comment.
const STUB_SCRIPT: &str =
    "/* libcuda is opened at run time by cuda-sys; this stub only satisfies -lcuda */\n";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let out_dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let stub_dir = PathBuf::from(out_dir).join("libcuda-stub");
    fs::create_dir_all(&stub_dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", stub_dir.display()));
    let stub = stub_dir.join("libcuda.so");
    fs::write(&stub, STUB_SCRIPT)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", stub.display()));
    println!("cargo:rustc-link-search=native={}", stub_dir.display());
}
