//! Compile-time guarantees of `StagingRing` and batches (issue 13), checked with
//! trybuild: the slices a ring hands out borrow it, so no slot can be refilled or
//! reused while one is alive, and `fill` cannot keep its pinned slice.
//!
//! `compile-fail-ring/*.rs` must each fail with the borrow error recorded in its
//! `.stderr` (regenerate with `TRYBUILD=overwrite` and read the result);
//! `compile-fail-ring/pass/*.rs` are the same code written correctly, and must
//! compile (their `main` calls nothing, so they run without a GPU).
//!
//! A CPU test: it needs cargo and no GPU (`cargo xtask test-gpu` skips it on the GPU
//! machine, which has no cargo).

#[test]
fn ring_borrows_are_checked_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile-fail-ring/*.rs");
    t.pass("tests/compile-fail-ring/pass/*.rs");
}
