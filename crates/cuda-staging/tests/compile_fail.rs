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
//! - `shared_across_threads_while_transferring.rs`: a `StagingBuffer` moves between
//!   threads (`Send`), but its transfers take `&mut self`, so no other thread can
//!   hold it, even only to read its stats, while one transfers.
//!
//! The expected errors depend on the compiler's wording: after a toolchain update,
//! regenerate with `TRYBUILD=overwrite cargo test -p cuda-staging --test
//! compile_fail` and read the new `.stderr` files to check that each still fails for
//! its borrow, not for some other reason.

#[test]
fn misuse_of_borrowed_pinned_memory_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile-fail/*.rs");
}
