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

#[test]
fn unsound_uses_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile-fail/*.rs");
}
