//! Where a real `libcuda.so` for the target stands at build time, looked for where
//! the linker, cudarc's build script and cuda-driver-sys's would find one. Used by
//! `build.rs` (see its docs for why) and, by path, by the CPU tests
//! `tests/libcuda_search.rs`. Only the standard library: build scripts of a published
//! crate have no dev-dependencies.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The environment variables the search reads, each a reason for cargo to rerun the
/// build script when it changes.
///
/// - `CUDA_LIBRARY_PATH`: folders holding libcuda, `:`-separated (cuda-driver-sys's
///   build script adds them to the link search path);
/// - `CUDA_HOME`, `CUDA_PATH`, `CUDA_ROOT`, `CUDA_TOOLKIT_ROOT_DIR`, `CUDNN_LIB`:
///   toolkit roots (cudarc's build script searches their [`TOOLKIT_SUBFOLDERS`]);
/// - `LIBRARY_PATH`: folders the C compiler driver hands the linker after every `-L`.
pub const ENV_VARS: [&str; 7] = [
    "CUDA_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_ROOT",
    "CUDA_TOOLKIT_ROOT_DIR",
    "CUDNN_LIB",
    "LIBRARY_PATH",
];

/// The toolkit roots cudarc 0.19 searches when none of the variables is set (its
/// Linux ones), then cuda-driver-sys's; `/usr/local/cuda-*` follow, found by listing
/// `/usr/local`.
const TYPICAL_ROOTS: [&str; 4] = ["/usr", "/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda"];

/// The subfolders of a root that cudarc 0.19's build script adds to the link search
/// path (`link_searches`), less the Windows ones (`lib/x64`, `lib/Win32`,
/// `lib/<major>.<minor>/x64`, ...). `{arch}` is the target's folder name in a
/// toolkit (`x86_64`; cudarc writes `x86_64` for every target). cuda-driver-sys's
/// (`lib64`, `lib64/stubs`, `targets/x86_64-linux/lib`, `.../lib/stubs`) are among them.
pub const TOOLKIT_SUBFOLDERS: [&str; 9] = [
    "lib",
    "lib/stubs",
    "lib/{arch}",
    "lib/{arch}-linux-gnu",
    "lib64",
    "lib64/stubs",
    "targets/{arch}-linux",
    "targets/{arch}-linux/lib",
    "targets/{arch}-linux/lib/stubs",
];

/// The folders the C compiler driver (`cc`, which rustc links through, with GNU ld or
/// lld behind it) always hands the linker, after every `-L`: a libcuda.so there is
/// found with no help. `{arch}` is the target's Debian multiarch prefix.
const LINKER_FOLDERS: [&str; 6] = [
    "/lib/{arch}-linux-gnu",
    "/usr/lib/{arch}-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// What a library must be to serve the target's link: read from cargo's
/// `CARGO_CFG_TARGET_*` variables.
#[derive(Clone, Debug)]
pub struct Target {
    /// `CARGO_CFG_TARGET_ARCH` (`x86_64`, `aarch64`, ...).
    pub arch: String,
    /// `CARGO_CFG_TARGET_POINTER_WIDTH` is 64.
    pub bits64: bool,
    /// `CARGO_CFG_TARGET_ENDIAN` is `little`.
    pub little_endian: bool,
}

/// Where a libcuda.so was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// In a folder the linker searches anyway ([`LINKER_FOLDERS`], `LIBRARY_PATH`):
    /// nothing to add.
    OnLinkerPath(PathBuf),
    /// In a folder of a toolkit or of `CUDA_LIBRARY_PATH`: to add to the link search
    /// path, so that `-lcuda` finds it whatever other crates add.
    Folder(PathBuf),
}

/// The folder names of a toolkit for `arch` (cudarc's `x86_64`; `sbsa` and `aarch64`
/// for Arm servers and Jetson).
fn toolkit_arches(arch: &str) -> Vec<&str> {
    match arch {
        "aarch64" => vec!["sbsa", "aarch64"],
        other => vec![other],
    }
}

/// The candidate folders, in search order, each marked as needing `-L` or not:
/// `CUDA_LIBRARY_PATH`'s; the roots of the toolkit variables, then the typical roots
/// and `/usr/local/cuda-*`, each with [`TOOLKIT_SUBFOLDERS`]; `LIBRARY_PATH`'s; the
/// linker's own. `var` reads an environment variable; `versioned_roots` lists the
/// `/usr/local/cuda-*` folders.
pub fn candidates(
    var: impl Fn(&str) -> Option<OsString>,
    target: &Target,
    versioned_roots: Vec<PathBuf>,
) -> Vec<Found> {
    let mut out = Vec::new();
    let split = |name: &str| -> Vec<PathBuf> {
        var(name)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    out.extend(split("CUDA_LIBRARY_PATH").into_iter().map(Found::Folder));
    let mut roots: Vec<PathBuf> = ENV_VARS[1..6]
        .iter()
        .filter_map(|name| var(name))
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .collect();
    roots.extend(TYPICAL_ROOTS.iter().map(PathBuf::from));
    roots.extend(versioned_roots);
    let arches = toolkit_arches(&target.arch);
    for root in &roots {
        for sub in TOOLKIT_SUBFOLDERS {
            for arch in &arches {
                let dir = root.join(sub.replace("{arch}", arch));
                if !out.iter().any(|f| folder(f) == dir.as_path()) {
                    out.push(Found::Folder(dir));
                }
                if !sub.contains("{arch}") {
                    break;
                }
            }
        }
    }
    out.extend(split("LIBRARY_PATH").into_iter().map(Found::OnLinkerPath));
    out.extend(
        LINKER_FOLDERS
            .iter()
            .map(|f| Found::OnLinkerPath(PathBuf::from(f.replace("{arch}", &target.arch)))),
    );
    // A folder the linker searches anyway needs no `-L`, whichever list named it
    // first (cudarc's `/usr` root names `/usr/lib` and `/usr/lib64`).
    let linker: Vec<PathBuf> = out
        .iter()
        .filter_map(|f| match f {
            Found::OnLinkerPath(p) => Some(p.clone()),
            Found::Folder(_) => None,
        })
        .collect();
    for f in &mut out {
        if let Found::Folder(p) = f {
            if linker.contains(p) {
                *f = Found::OnLinkerPath(p.clone());
            }
        }
    }
    out
}

/// The folder a [`Found`] names.
pub fn folder(f: &Found) -> &Path {
    match f {
        Found::OnLinkerPath(p) | Found::Folder(p) => p,
    }
}

/// Whether `header` (a file's first bytes) starts an ELF shared object for `target`:
/// the class, byte order and, for the architectures listed, the machine. A linker
/// script, or a library of another architecture (a cross build beside the host's
/// toolkit), cannot serve the link.
pub fn is_shared_object_for(header: &[u8], target: &Target) -> bool {
    if header.len() < 20 || header[..4] != *b"\x7fELF" {
        return false;
    }
    let class = if target.bits64 { 2 } else { 1 };
    let data = if target.little_endian { 1 } else { 2 };
    if header[4] != class || header[5] != data {
        return false;
    }
    let half = |at: usize| {
        let b = [header[at], header[at + 1]];
        if target.little_endian {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    const ET_DYN: u16 = 3;
    if half(16) != ET_DYN {
        return false;
    }
    let machine = match target.arch.as_str() {
        "x86" => 3,
        "arm" => 40,
        "x86_64" => 62,
        "aarch64" => 183,
        "powerpc64" => 21,
        "riscv64" => 243,
        _ => return true,
    };
    half(18) == machine
}

/// Whether `dir/libcuda.so` is a shared object for `target`.
pub fn has_libcuda(dir: &Path, target: &Target) -> bool {
    let mut header = [0u8; 20];
    File::open(dir.join("libcuda.so"))
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| is_shared_object_for(&header, target))
}

/// The `/usr/local/cuda-*` folders, sorted (cuda-driver-sys globs for them).
pub fn versioned_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir("/usr/local")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("cuda-"))
        .map(|e| e.path())
        .collect();
    roots.sort();
    roots
}

/// The first candidate folder holding a libcuda.so for `target`.
pub fn find(
    var: impl Fn(&str) -> Option<OsString>,
    target: &Target,
    versioned_roots: Vec<PathBuf>,
) -> Option<Found> {
    candidates(var, target, versioned_roots)
        .into_iter()
        .find(|f| has_libcuda(folder(f), target))
}
