//! The trackers' CPU tests.

use super::*;

#[test]
fn an_idle_tracker_waits_for_nothing() {
    let t = Tracker::new();
    assert!(t.is_idle());
    t.wait_host(false).unwrap();
    t.wait_host(true).unwrap();
    assert!(t.snapshot().is_idle());
}
