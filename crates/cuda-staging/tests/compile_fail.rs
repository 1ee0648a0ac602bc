//! Compile-time guarantees of `StagingBuffer`, checked with trybuild: every file in
//! `tests/compile-fail/` must fail to compile, with the borrow error recorded beside
//! it in a `.stderr` file. A CPU test: nothing here runs on a device.
//!
//! - `download_slice_across_next_transfer.rs`: the slice `download_into` returns
//!   borrows the buffer, so it cannot be kept across the next transfer, which
//!   overwrites the pinned bytes it shows.
//! - `upload_with_slice_escapes_fill.rs`: the pinned slice `upload_with` hands to
//!   `fill` cannot leave `fill`, so nothing writes it after the copy was queued.
//! - `upload_into_a_shared_view.rs`: a read-only `DeviceView` (`buf.slice(..)`) is
//!   not `DeviceSliceMut`, so it cannot be an upload's destination; only `&mut buf`
//!   or `buf.slice_mut(..)` can, which nothing else may use while the copy is queued.
//! - `download_batch_outlives_its_buffer.rs`, `upload_batch_outlives_its_buffer.rs`,
//!   `upload_batch_outlives_its_source.rs`: a batch borrows the device buffers and
//!   host slices it names, so none of them can be freed before the batch is done.
//! - `shared_across_threads_while_transferring.rs`: a `StagingBuffer` moves between
//!   threads (`Send`), but its transfers take `&mut self`, so no other thread can
//!   hold it, even only to read its stats, while one transfers.
//!
//! The expected errors depend on the compiler's wording: after a toolchain update,
//! regenerate with `TRYBUILD=overwrite cargo test -p cuda-staging --test
//! compile_fail` and read the new `.stderr` files to check that each still fails for
//! its borrow, not for some other reason.
//!
//! With the `cudarc` feature (on in every `--workspace` build, through `benches`)
//! `DeviceSliceMut` has one more implementor (`CudarcViewMut`), and the programs whose
//! expected errors list them ([`LIST_IMPLEMENTORS`]) would not match: those are
//! checked without the feature (`.ci/run` runs this test on its own).

/// Programs whose expected errors list a sealed trait's implementors.
const LIST_IMPLEMENTORS: [&str; 1] = ["upload_into_a_shared_view.rs"];

#[test]
fn misuse_of_borrowed_pinned_memory_does_not_compile() {
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
