//! `StagingBuffer`'s CPU tests: its defaults, and the end of a transfer on every exit
//! path.

use super::*;

#[test]
fn a_transfer_ends_on_every_exit_path() {
    let mut s = StagingBuffer::new();
    assert_eq!(s.burst.last_end(), None);
    // An error returned early (a failed grow, a refused view).
    let before = Instant::now();
    let r: Result<()> = s.in_transfer(|_| Err(crate::errors::internal("refused")));
    assert!(r.is_err());
    let first = s.burst.last_end().expect("the failed transfer ended");
    assert!(first >= before);
    // A panic in the caller's fill: the panic goes on, and the transfer ended.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.in_transfer(|_| -> () { panic!("the caller's fill panicked") })
    }));
    assert!(panicked.is_err(), "the panic goes on to the caller");
    assert!(s.burst.last_end().expect("the panicked transfer ended") >= first);
    // And a transfer that succeeds returns what its body returned.
    assert_eq!(s.in_transfer(|_| 7), 7);
}

#[test]
fn new_pins_nothing_and_defaults_are_documented() {
    let s = StagingBuffer::new();
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
    assert_eq!(s.auto_stage_max_bytes(), usize::MAX);
    assert!(s.config.copy_threads >= 1 && s.config.copy_threads <= 16);
}
