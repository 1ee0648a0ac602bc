//! Lets the `-lcuda` that `cuda-driver-sys` asks for resolve on machines without
//! CUDA, and stays out of the way of a real libcuda where there is one.
//!
//! `cuda-driver-sys` (whose types and constants cuda-sys re-exports) declares
//! `links = "cuda"`, and its build script prints `cargo:rustc-link-lib=dylib=cuda`, so
//! every binary that depends on it is linked with `-lcuda`. cuda-sys resolves every
//! driver function from libcuda at run time (libloading), so no symbol of ours needs
//! libcuda at link time, but the linker still fails with "unable to find library
//! -lcuda" where the driver is not installed (CI, build boxes).
//!
//! On Linux this script first looks for a real `libcuda.so` (an ELF shared object for
//! the target: the driver's, or a toolkit's `stubs/libcuda.so`) where the linker,
//! cudarc's build script or cuda-driver-sys's would find one (`build/libcuda_search.rs`
//! lists the places: `CUDA_LIBRARY_PATH`; the roots `CUDA_HOME`, `CUDA_PATH`,
//! `CUDA_ROOT`, `CUDA_TOOLKIT_ROOT_DIR`, `CUDNN_LIB`, `/usr`, `/usr/local/cuda`,
//! `/opt/cuda`, `/usr/lib/cuda`, `/usr/local/cuda-*`, each with cudarc's subfolders
//! `lib64`, `lib`, `lib64/stubs`, `targets/x86_64-linux/lib(/stubs)`, ...;
//! `LIBRARY_PATH`; the system library folders), and reruns when one of those
//! variables changes (not when CUDA is installed later: `cargo clean -p cuda-sys`
//! then).
//!
//! - **Found**: its folder goes on the link search path (unless the linker searches
//!   it anyway), and `-lcuda` resolves to it, as it does for a crate that links
//!   libcuda itself beside ours: cudarc's `dynamic-linking` feature (and so candle's
//!   `cuda` feature) calls the driver's symbols directly, and they must be there.
//! - **Not found**: a stub `libcuda.so` is written into `$OUT_DIR/libcuda-stub` and
//!   that folder goes on the link search path. The stub is a GNU ld linker script
//!   holding only a comment: it satisfies `-lcuda` and adds nothing. A crate that does
//!   call libcuda's symbols then fails to link (undefined `cuDeviceGet`, ...), as it
//!   would without us: tell it where libcuda is with `CUDA_ROOT` (or one of the
//!   variables above). The stub was written unconditionally once, and shadowed the
//!   real library for such crates (issue 39): cargo passes the `-L` of every
//!   dependency's build script to the final link, in an order no crate controls.
//!
//! Either way rustc links with `--as-needed`, so a binary that calls no libcuda symbol
//! itself records no `NEEDED` libcuda: cuda-sys opens the driver at run time.
//! `.ci/run` checks both cases with crates outside the workspace.
//!
//! Other targets get nothing: on Windows MSVC a linker script cannot stand in for
//! `cuda.lib`, and the README documents the `.cargo/config.toml` override there.

use std::env;
use std::fs;
use std::path::PathBuf;

#[path = "build/libcuda_search.rs"]
mod libcuda_search;

use libcuda_search::{Found, Target};

/// The stub's whole content: a linker script that is only a comment.
const STUB_SCRIPT: &str =
    "/* libcuda is opened at run time by cuda-sys; this stub only satisfies -lcuda */\n";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/libcuda_search.rs");
    for var in libcuda_search::ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let cfg = |name: &str| env::var(format!("CARGO_CFG_TARGET_{name}")).unwrap_or_default();
    let target = Target {
        arch: cfg("ARCH"),
        bits64: cfg("POINTER_WIDTH") == "64",
        little_endian: cfg("ENDIAN") == "little",
    };
    match libcuda_search::find(
        |name| env::var_os(name),
        &target,
        libcuda_search::versioned_roots(),
    ) {
        Some(Found::OnLinkerPath(_)) => {}
        Some(Found::Folder(dir)) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        None => write_stub(),
    }
}

/// Writes the stub `libcuda.so` and puts its folder on the link search path.
fn write_stub() {
    let out_dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let stub_dir = PathBuf::from(out_dir).join("libcuda-stub");
    fs::create_dir_all(&stub_dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", stub_dir.display()));
    let stub = stub_dir.join("libcuda.so");
    fs::write(&stub, STUB_SCRIPT)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", stub.display()));
    println!("cargo:rustc-link-search=native={}", stub_dir.display());
}
