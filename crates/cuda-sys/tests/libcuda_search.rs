//! The build script's search for a real libcuda.so (`build/libcuda_search.rs`), on
//! the CPU: which folders it looks in, in which order, which need `-L`, and which
//! files count as a libcuda for the target.
//!
//! Unix only: the build script searches on Linux only, and the test makes symlinks.
#![cfg(unix)]

#[path = "../build/libcuda_search.rs"]
#[allow(dead_code)]
mod libcuda_search;

use std::ffi::OsString;
use std::path::PathBuf;

use libcuda_search::{candidates, find, is_shared_object_for, Found, Target};

fn x86_64() -> Target {
    Target {
        arch: "x86_64".into(),
        bits64: true,
        little_endian: true,
    }
}

fn aarch64() -> Target {
    Target {
        arch: "aarch64".into(),
        ..x86_64()
    }
}

/// The first 20 bytes of an ELF file: class, byte order (little), type, machine.
fn elf_header(class: u8, e_type: u16, machine: u16) -> Vec<u8> {
    let mut h = vec![0x7f, b'E', b'L', b'F', class, 1, 1, 0];
    h.resize(16, 0);
    h.extend_from_slice(&e_type.to_le_bytes());
    h.extend_from_slice(&machine.to_le_bytes());
    h.extend_from_slice(&[0; 44]);
    h
}

/// An environment holding only `vars`.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: Vec<(String, OsString)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// A fresh, empty folder under the system's temp folder.
fn temp_folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuda-sys-search-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn only_a_shared_object_for_the_target_counts() {
    let t = x86_64();
    assert!(is_shared_object_for(&elf_header(2, 3, 62), &t));
    assert!(
        !is_shared_object_for(&elf_header(2, 3, 183), &t),
        "aarch64 library"
    );
    assert!(is_shared_object_for(&elf_header(2, 3, 183), &aarch64()));
    assert!(
        !is_shared_object_for(&elf_header(1, 3, 62), &t),
        "32-bit class"
    );
    assert!(
        !is_shared_object_for(&elf_header(2, 2, 62), &t),
        "an executable (ET_EXEC)"
    );
    assert!(
        !is_shared_object_for(&elf_header(2, 3, 62)[..19], &t),
        "too short"
    );
    let script =
        b"/* libcuda is opened at run time by cuda-sys; this stub only satisfies -lcuda */\n";
    assert!(
        !is_shared_object_for(script, &t),
        "a linker script (our own stub)"
    );
    let mut big_endian = elf_header(2, 3, 62);
    big_endian[5] = 2;
    assert!(!is_shared_object_for(&big_endian, &t));
}

#[test]
fn the_variables_come_first_then_cudarcs_roots_then_the_linkers_folders() {
    let c = candidates(
        env(&[
            ("CUDA_LIBRARY_PATH", "/lp1:/lp2"),
            ("CUDA_ROOT", "/root"),
            ("LIBRARY_PATH", "/extra"),
        ]),
        &x86_64(),
        vec![PathBuf::from("/usr/local/cuda-13.0")],
    );
    let at = |f: Found| {
        c.iter()
            .position(|x| *x == f)
            .unwrap_or_else(|| panic!("{f:?} missing"))
    };
    let folder = |p: &str| Found::Folder(PathBuf::from(p));
    let linker = |p: &str| Found::OnLinkerPath(PathBuf::from(p));
    assert_eq!(c[0], folder("/lp1"));
    assert_eq!(c[1], folder("/lp2"));
    // cudarc's subfolders of the root, in cudarc's order.
    let root: Vec<usize> = [
        "/root/lib",
        "/root/lib/stubs",
        "/root/lib/x86_64",
        "/root/lib/x86_64-linux-gnu",
        "/root/lib64",
        "/root/lib64/stubs",
        "/root/targets/x86_64-linux",
        "/root/targets/x86_64-linux/lib",
        "/root/targets/x86_64-linux/lib/stubs",
    ]
    .iter()
    .map(|p| at(folder(p)))
    .collect();
    assert!(root.windows(2).all(|w| w[0] + 1 == w[1]), "{root:?}");
    assert_eq!(root[0], 2);
    assert!(at(folder("/usr/local/cuda/lib64")) > root[8]);
    assert!(at(folder("/opt/cuda/targets/x86_64-linux/lib/stubs")) > root[8]);
    assert!(at(folder("/usr/local/cuda-13.0/lib64/stubs")) > at(folder("/usr/lib/cuda/lib64")));
    // Searched by the linker anyway: no `-L`, whichever list names them.
    assert!(at(linker("/extra")) > at(folder("/usr/local/cuda-13.0/lib64")));
    for p in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
    ] {
        at(linker(p));
        assert!(!c.contains(&folder(p)), "{p} marked for -L");
    }
}

#[test]
fn an_arm_target_looks_in_the_arm_folders() {
    let c = candidates(env(&[("CUDA_HOME", "/cuda")]), &aarch64(), vec![]);
    for p in [
        "/cuda/targets/sbsa-linux/lib/stubs",
        "/cuda/targets/aarch64-linux/lib",
        "/cuda/lib64",
    ] {
        assert!(c.contains(&Found::Folder(PathBuf::from(p))), "{p}");
    }
    assert!(c.contains(&Found::OnLinkerPath(PathBuf::from(
        "/usr/lib/aarch64-linux-gnu"
    ))));
    assert!(!c.iter().any(|f| libcuda_search::folder(f)
        .to_string_lossy()
        .contains("x86_64")));
}

#[test]
fn a_library_under_cuda_root_is_found_and_a_stub_or_foreign_one_is_not() {
    let t = x86_64();
    let root = temp_folder("root");
    let lib64 = root.join("lib64");
    std::fs::create_dir_all(&lib64).unwrap();
    let root_env = [("CUDA_ROOT", root.to_str().unwrap())];
    let found_in_root = |f: &Option<Found>| {
        f.as_ref()
            .is_some_and(|f| libcuda_search::folder(f).starts_with(&root))
    };
    // Nothing there yet.
    assert!(!found_in_root(&find(env(&root_env), &t, vec![])));
    // A linker script (a stub), then an aarch64 library: still not found there.
    std::fs::write(lib64.join("libcuda.so"), b"/* a stub */\n").unwrap();
    assert!(!found_in_root(&find(env(&root_env), &t, vec![])));
    std::fs::write(lib64.join("libcuda.so"), elf_header(2, 3, 183)).unwrap();
    assert!(!found_in_root(&find(env(&root_env), &t, vec![])));
    // A shared object for the target, reached through a symlink as a driver's is.
    std::fs::remove_file(lib64.join("libcuda.so")).unwrap();
    std::fs::write(lib64.join("libcuda_sim.so"), elf_header(2, 3, 62)).unwrap();
    std::os::unix::fs::symlink("libcuda_sim.so", lib64.join("libcuda.so")).unwrap();
    assert_eq!(
        find(env(&root_env), &t, vec![]),
        Some(Found::Folder(lib64.clone()))
    );
    std::fs::remove_dir_all(&root).unwrap();
}
