//! What safe code must not be able to write, checked with trybuild: each program in
//! `tests/compile-fail/` must fail to compile, with the error in its `.stderr`
//! beside it (regenerate with `TRYBUILD=overwrite cargo test -p cuda-core --test
//! compile_fail`, then read each one: it must be the intended error).
//!
//! The borrow rules they show are what makes queued copies sound: memory a queued
//! copy may still use cannot be freed, written or aliased in safe code (see the
//! crate docs); what must *wait* instead is tested on a GPU in `gpu_soundness.rs`.
//!
//! Needs cargo (trybuild runs it), so the GPU machine's runner skips this binary.
//!
//! With the `cudarc` feature (on in every `--workspace` build, through `benches`) the
//! sealed traits have two more implementors (`CudarcView`, `CudarcViewMut`), and the
//! programs whose expected errors list them ([`LIST_IMPLEMENTORS`]) would not match:
//! those are checked without the feature (`.ci/run` runs this test on its own).

/// Programs whose expected errors list a sealed trait's implementors.
const LIST_IMPLEMENTORS: [&str; 1] = ["page_locked_slice_implemented_outside.rs"];

#[test]
fn unsound_uses_do_not_compile() {
    let t = trybuild::TestCases::new();
    let skip: &[&str] = if cfg!(feature = "cudarc") {
        &LIST_IMPLEMENTORS
    } else {
        &[]
    };
    for program in programs("tests/compile-fail", skip) {
        t.compile_fail(program);
    }
}

/// With the `cudarc` feature: views of cudarc's memory borrow it and the stream they
/// were taken for, so neither can end while a view (and a copy queued through it
/// that cudarc's events do not yet cover) lives.
#[cfg(feature = "cudarc")]
#[test]
fn views_of_cudarc_memory_do_not_outlive_it() {
    let t = trybuild::TestCases::new();
    for program in programs("tests/compile-fail-cudarc", &[]) {
        t.compile_fail(program);
    }
}

/// The programs of `dir` (relative to the package, where cargo runs tests), but for
/// those named in `skip`. Where the folder cannot be read (a bundle run elsewhere),
/// the whole glob, as before.
fn programs(dir: &str, skip: &[&str]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("{dir}/*.rs")];
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs") && !skip.contains(&n.as_str()))
        .collect();
    names.sort();
    names.into_iter().map(|n| format!("{dir}/{n}")).collect()
}
