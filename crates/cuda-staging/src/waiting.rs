//! How the staging calls wait for the GPU, under the default [`WaitPolicy::Hybrid`].
//! A `StagingBuffer` transfer queued on a stream with nothing ahead of it waits for
//! itself alone: one whose copies take 10 µs or more on the link (400 KB and up)
//! keeps to the driver's spinning wait, as fast as before waits could sleep;
//! a smaller one polls for the policy's spin plus its link time, within which it
//! lands. One queued behind other work (a model's run) polls for the policy's spin
//! alone and then sleeps between polls. (A ring's waits come a frame after their
//! transfer was queued, so they poll for the policy's spin alone.)
//!
//! Why the driver's wait for a lone large transfer: polling `cuStreamQuery` through
//! its DMA slowed it. In the bench run at a2d74d5 on the 16-core H200 host, a
//! 4915200 B `download` back to back took 347 µs against 202 µs in the run before
//! (7008618, the driver's wait), and the `raw-pinned` 4915200 B copy followed by a
//! 50 µs-then-sleeping `Stream::synchronize` 129 µs against `resident`'s 97. A transfer with nothing queued ahead of it is done within that and
//! keeps a spinning wait's latency; one queued behind a model's run sleeps through
//! the run instead of spinning a core for it.

use std::time::Duration;

use cuda_core::{Result, Stream, WaitPolicy};

use crate::direction::Direction;

/// The link speed a wait assumes for the transfer's own copies, in bytes per µs
/// (40 GB/s). The H200 host's PCIe Gen5 link moves 45-50 GB/s from pinned memory
/// (4915200 B in 96-110 µs back to back, 127 µs after a 16 ms sleep), so a lone
/// transfer there is done within its allowance (123 µs for 4915200 B, plus the
/// policy's spin); a slower link leaves a large transfer blocking for its last part.
pub(crate) const LINK_BYTES_PER_US: u64 = 40_000;

/// From this link time on, whether the stream is idle is asked of the driver
/// (`cuStreamQuery`, about a µs) before a transfer is granted it; a shorter
/// allowance is granted without asking, as it costs less than the question.
pub(crate) const ASK_FROM: Duration = Duration::from_micros(10);

/// `policy` for a wait whose own work moves `bytes` over the link: a
/// [`WaitPolicy::Hybrid`] polls for that much longer (see the module docs).
fn for_bytes(policy: WaitPolicy, bytes: usize) -> WaitPolicy {
    policy.spinning_longer(link_time(bytes))
}

/// `policy` for the wait of a transfer of `bytes` about to be queued on `stream`,
/// for a [`WaitPolicy::Hybrid`] (other policies are kept): under [`ASK_FROM`] of
/// link time, [`for_bytes`]; from it, [`WaitPolicy::Spin`] when nothing is queued
/// ahead (the driver's wait), `policy` itself when the stream is busy or cannot
/// say. Call it before queueing the transfer.
pub(crate) fn for_transfer(policy: WaitPolicy, bytes: usize, stream: &Stream) -> WaitPolicy {
    if !matches!(policy, WaitPolicy::Hybrid { .. }) {
        return policy;
    }
    if link_time(bytes) < ASK_FROM {
        for_bytes(policy, bytes)
    } else if stream.query().unwrap_or(false) {
        WaitPolicy::Spin
    } else {
        policy
    }
}

/// Before the driver's own copy of `bytes` between `stream`'s device memory and the
/// caller's pageable memory: the wait for that copy, after waiting as `policy` says
/// for the work queued ahead of it.
///
/// The driver's pageable copy waits for the stream inside the call, spinning,
/// whatever `policy` says: a download returns only once it has landed, and an
/// upload too large for the driver's staging at once (from [`ASK_FROM`] of link
/// time, 400 KB) waits for its turn. So under a policy other than
/// [`WaitPolicy::Spin`] such a copy first asks whether the stream is idle
/// (`cuStreamQuery`) and, if not, waits for it as `policy` says; a smaller upload
/// is copied into the driver's staging at once and is not held up. An error of the
/// work ahead is returned before anything is copied.
pub(crate) fn for_driver_copy(
    policy: WaitPolicy,
    direction: Direction,
    bytes: usize,
    stream: &Stream,
) -> Result<WaitPolicy> {
    let held_up = direction == Direction::DeviceToHost || link_time(bytes) >= ASK_FROM;
    if policy == WaitPolicy::Spin || !held_up {
        return Ok(for_transfer(policy, bytes, stream));
    }
    if !stream.query()? {
        stream.synchronize_with(policy)?;
    }
    // Nothing is queued ahead now: the copy waits for itself alone.
    Ok(match policy {
        WaitPolicy::Hybrid { .. } if link_time(bytes) >= ASK_FROM => WaitPolicy::Spin,
        WaitPolicy::Hybrid { .. } => for_bytes(policy, bytes),
        other => other,
    })
}

/// How long `bytes` take on the link at [`LINK_BYTES_PER_US`].
pub(crate) fn link_time(bytes: usize) -> Duration {
    Duration::from_micros((bytes as u64).div_ceil(LINK_BYTES_PER_US))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hybrid_wait_polls_for_the_transfer_s_own_link_time_too() {
        assert_eq!(link_time(0), Duration::ZERO);
        assert_eq!(link_time(1), Duration::from_micros(1));
        assert_eq!(link_time(4_915_200), Duration::from_micros(123));
        let spin = cuda_core::DEFAULT_SPIN;
        assert_eq!(
            for_bytes(WaitPolicy::default(), 150_528),
            WaitPolicy::Hybrid {
                spin: spin + Duration::from_micros(4)
            }
        );
        assert_eq!(for_bytes(WaitPolicy::Spin, 1 << 30), WaitPolicy::Spin);
        assert_eq!(for_bytes(WaitPolicy::Block, 1 << 30), WaitPolicy::Block);
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
    fn a_transfer_s_wait_keeps_spin_and_block_and_fits_hybrid_to_the_stream() {
        let ctx = cuda_core::Context::new(0).expect("this test needs CUDA device 0");
        let stream = Stream::new(&ctx).expect("Stream::new");
        // 4 µs of link time, granted without asking; 123 µs, which asks the stream.
        let (small, large) = (150_528, 4_915_200);
        assert!(link_time(small) < ASK_FROM && link_time(large) >= ASK_FROM);
        let hybrid = WaitPolicy::default();

        // An idle stream.
        for policy in [WaitPolicy::Spin, WaitPolicy::Block] {
            assert_eq!(for_transfer(policy, small, &stream), policy);
            assert_eq!(for_transfer(policy, large, &stream), policy);
        }
        assert_eq!(
            for_transfer(hybrid, small, &stream),
            for_bytes(hybrid, small)
        );
        assert_ne!(for_bytes(hybrid, small), hybrid);
        // Nothing queued ahead of a large transfer: the driver's spinning wait.
        assert_eq!(for_transfer(hybrid, large, &stream), WaitPolicy::Spin);
        // The edge: 9 µs of link time is granted, 10 µs asks.
        assert_eq!(link_time(360_000), ASK_FROM - Duration::from_micros(1));
        assert_eq!(link_time(400_000), ASK_FROM);
        assert_eq!(
            for_transfer(hybrid, 360_000, &stream),
            for_bytes(hybrid, 360_000)
        );
        assert_eq!(for_transfer(hybrid, 400_000, &stream), WaitPolicy::Spin);

        // A stream busy with 64 MiB (over a ms on a PCIe Gen5 link): the large
        // transfer keeps the policy, and so sleeps through the work ahead of it.
        let len = 64 << 20;
        let host = cuda_core::PinnedBuffer::<u8>::alloc(len).expect("pinned");
        let mut device = cuda_core::DeviceBuffer::<u8>::alloc(len).expect("alloc");
        stream.memcpy_htod(&host, &mut device).expect("memcpy_htod");
        assert!(!stream.query().expect("query"), "64 MiB landed at once");
        assert_eq!(for_transfer(hybrid, large, &stream), hybrid);
        assert_eq!(
            for_transfer(WaitPolicy::Block, large, &stream),
            WaitPolicy::Block
        );
        stream.synchronize().expect("synchronize");
    }

    #[test]
    #[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
    fn a_driver_copy_waits_first_for_the_work_ahead_only_where_the_driver_would_hold_it() {
        use Direction::{DeviceToHost as D2H, HostToDevice as H2D};
        let ctx = cuda_core::Context::new(0).expect("this test needs CUDA device 0");
        let stream = Stream::new(&ctx).expect("Stream::new");
        let (small, large) = (150_528, 4_915_200);
        let hybrid = WaitPolicy::default();
        // 256 MiB ahead on the stream: 5 ms or more on a PCIe Gen5 link.
        let len = 256 << 20;
        let host = cuda_core::PinnedBuffer::<u8>::alloc(len).expect("pinned");
        let mut device = cuda_core::DeviceBuffer::<u8>::alloc(len).expect("alloc");
        // (policy, direction, bytes, the wait returned, whether the call waited for
        // the work ahead): a download, or an upload from 10 µs of link time, is held
        // up by the driver, so it waits first as the policy says (Spin excepted).
        let cases = [
            (hybrid, H2D, small, for_bytes(hybrid, small), false),
            (hybrid, D2H, small, for_bytes(hybrid, small), true),
            (hybrid, H2D, large, WaitPolicy::Spin, true),
            (hybrid, D2H, large, WaitPolicy::Spin, true),
            (WaitPolicy::Block, H2D, small, WaitPolicy::Block, false),
            (WaitPolicy::Block, H2D, large, WaitPolicy::Block, true),
            (WaitPolicy::Block, D2H, small, WaitPolicy::Block, true),
            (WaitPolicy::Spin, D2H, large, WaitPolicy::Spin, false),
            (WaitPolicy::Spin, H2D, large, WaitPolicy::Spin, false),
        ];
        for (policy, direction, bytes, wait, waited) in cases {
            let case = format!("{policy:?} {direction:?} {bytes} B");
            // Idle: nothing to wait for, and the same wait.
            let got = for_driver_copy(policy, direction, bytes, &stream).expect(&case);
            assert_eq!(got, wait, "{case}, idle stream");
            stream.memcpy_htod(&host, &mut device).expect("memcpy_htod");
            assert!(!stream.query().expect("query"), "256 MiB landed at once");
            let got = for_driver_copy(policy, direction, bytes, &stream).expect(&case);
            assert_eq!(got, wait, "{case}, busy stream");
            let idle = stream.query().expect("query");
            assert_eq!(idle, waited, "{case}: waited for the work ahead");
            stream.synchronize().expect("synchronize");
        }
    }
}
