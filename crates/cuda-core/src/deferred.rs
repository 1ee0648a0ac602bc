//! Errors that `Drop` (and other places that cannot return one) could not report.
//!
//! A failed free, unregister, destroy or wait inside `Drop` is recorded here instead of
//! being thrown away, as cudarc keeps such errors for its next `check_err`. The count
//! only grows; the first error since the last check is kept whole.
//!
//! There is one store for the whole process, not one per context or thread: the first
//! error recorded since the last check is kept, whichever context, device or thread it
//! came from, and a check from any thread takes it. A program that drives several GPUs
//! (or several parts of a program, each with its own GPU) sees their errors mixed;
//! the error names the operation and the driver's code, not the context. After a GPU
//! fault every `Drop` in the poisoned context records one (see "When the GPU faults" in
//! the crate docs): the first is kept, the rest are counted.
//!
//! ```
//! // Call it where your program can act on it, e.g. once per frame or at shutdown.
//! if let Err(e) = cuda_core::check_deferred_errors() {
//!     eprintln!("CUDA cleanup failed earlier: {e}");
//! }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

static COUNT: AtomicU64 = AtomicU64::new(0);
/// The first error recorded since the last check, and how many came after it.
static FIRST: Mutex<Option<(&'static str, Error, u64)>> = Mutex::new(None);

/// Records that `what` failed with `error` where it could not be returned.
pub(crate) fn record(what: &'static str, error: Error) {
    COUNT.fetch_add(1, Ordering::Relaxed);
    let mut first = FIRST.lock().unwrap_or_else(|e| e.into_inner());
    match first.as_mut() {
        Some((_, _, more)) => *more += 1,
        None => *first = Some((what, error, 0)),
    }
}

/// How many errors `Drop` implementations (and host accessors that cannot return
/// one) have recorded in this process so far, from every context and thread. Only
/// grows.
pub fn deferred_error_count() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// Returns the first error recorded since the last call, as
/// [`Error::Deferred`] (naming the operation and how many more followed it), and
/// forgets it; `Ok(())` when none was recorded.
///
/// The store is process-wide, not per context or thread: the error kept is the first
/// recorded by any context, device or thread, and a call from any thread takes it.
/// A program driving several GPUs sees their errors mixed; the error names the
/// operation and the driver's code, not the context. [`Error::is_sticky`] on the
/// result says whether it was a GPU fault that needs a restart of the process; after
/// one, every `Drop` in the poisoned context records an error (the first is kept, the
/// rest counted in `more`).
pub fn check_deferred_errors() -> Result<()> {
    let taken = FIRST.lock().unwrap_or_else(|e| e.into_inner()).take();
    match taken {
        None => Ok(()),
        Some((what, error, more)) => Err(Error::Deferred {
            what,
            more,
            source: Box::new(error),
        }),
    }
}
