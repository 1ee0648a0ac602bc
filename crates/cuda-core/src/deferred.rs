//! Errors that `Drop` (and other places that cannot return one) could not report.
//!
//! A failed free, unregister, destroy or wait inside `Drop` is recorded here instead of
//! being thrown away, as cudarc keeps such errors for its next `check_err`. The count
//! only grows; the first error since the last check is kept whole.
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
/// one) have recorded in this process so far. Only grows.
pub fn deferred_error_count() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// Returns the first error recorded since the last call, as
/// [`Error::Deferred`] (naming the operation and how many more followed it), and
/// forgets it; `Ok(())` when none was recorded.
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
