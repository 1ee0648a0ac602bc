//! [`Plan`]: how a staged `upload` / `download` is cut into chunks that go round the
//! slots of the pinned window, so that the host copy of one chunk overlaps the DMA of
//! another ([`crate::pipeline`] runs it). A pure function of the transfer's size,
//! direction, window and chunk setting, and of whether pool helpers take part.

use crate::direction::Direction;

/// The largest pinned window the convenience path (`upload` / `download`) grows
/// to. Larger transfers stream through it in chunks, so a 1 GiB `upload` does not pin
/// 1 GiB. `upload_with` / `download_into` hand the caller one contiguous pinned
/// slice and grow to whatever they are asked for.
pub const PIPELINE_WINDOW_BYTES: usize = 8 << 20;

/// Ring slots (and events) the pipeline uses at most.
pub(crate) const MAX_SLOTS: usize = 8;

/// With the automatic chunk, transfers up to this size are copied and DMA'd in
/// one piece (when the copy threads are awake); larger ones are cut.
pub(crate) const PIPELINE_MIN_BYTES: [usize; 2] = [1 << 20, 512 << 10];

/// Uploads from this size that the calling thread copies alone (no pool helper takes
/// part) are cut in two even chunks, so the copy of the second half overlaps the DMA
/// of the first. After a 2 ms sleep on the 16-core H200 host
/// (`frame_probe`, p50): 150528 B in 28.5 µs against 33.8 µs in one piece (the
/// driver's pageable path: 37.7 µs); 64 KiB 24.4 against 26.1 (32.2).
///
/// Downloads stay in one piece between frames. Cut in two even halves whenever
/// they were not back to back, they lost in every gap measured (16-core H200 host,
/// columns interleaved, p50, halves against one piece): 150528 B 89.9 against
/// 70.6 µs after a 16 ms sleep, 43.0 against 33.2 after 2 ms, 26.7 against 23.7
/// when busy for 2 ms; 64 KiB 84.3 against 65.7 after 16 ms. Chunks of 64 KiB
/// (three for 150528 B) lost too: 95.1 µs after 16 ms.
const COLD_SPLIT_MIN_BYTES: usize = 64 << 10;

/// How a transfer is cut: `chunks` pieces of `chunk_bytes` (the last may be
/// shorter), going round `slots` slots of the pinned window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) bytes: usize,
    pub(crate) chunk_bytes: usize,
    pub(crate) chunks: usize,
    pub(crate) slots: usize,
}

impl Plan {
    /// `chunk` 0 picks the measured default for the direction (see
    /// [`auto_chunk_bytes`]); `cold` says the caller copies alone (no pool helper
    /// takes part).
    pub(crate) fn new(
        bytes: usize,
        window: usize,
        chunk: usize,
        direction: Direction,
        cold: bool,
    ) -> Plan {
        let auto = auto_chunk_bytes(bytes, direction, cold);
        let chunk_bytes = if chunk == 0 { auto } else { chunk }.min(window).max(1);
        let chunks = bytes.div_ceil(chunk_bytes);
        let slots = (window / chunk_bytes).clamp(1, MAX_SLOTS).min(chunks);
        Plan {
            bytes,
            chunk_bytes,
            chunks,
            slots,
        }
    }

    /// Whether a slot is used more than once (so each needs an event).
    pub(crate) fn reuses(&self) -> bool {
        self.chunks > self.slots
    }

    /// (offset, length, slot) of chunk `k`.
    pub(crate) fn chunk(&self, k: usize) -> (usize, usize, usize) {
        let off = k * self.chunk_bytes;
        (off, self.chunk_bytes.min(self.bytes - off), k % self.slots)
    }
}

/// The automatic pipeline chunk, from the copy_probe sweeps on the 32-core H200 host
/// (copy threads 1 to 16, chunks 64 KiB to 2 MiB). Uploads pipeline from 1 MiB and do
/// best with about four chunks (4.7 MiB: 130 µs at 1.25 MiB chunks, 156–166 µs at
/// 256 KiB). Downloads pipeline with smaller chunks, because the host copy-out
/// waits for the first chunk to land: 512 KiB to 2 MiB in 256 KiB chunks
/// (8 threads, 1 MiB: 54.7 µs against 61.9 µs in one piece; 2 MiB: 96.5 against
/// 110), 4.7 MiB in eighths (183–211 µs at 512 KiB chunks, 209–229 µs at 1.25 MiB).
/// Chunks of 64 KiB lose everywhere (each extra DMA costs a few µs). Chunks stop at
/// 2 MiB, and are evened out (4.7 MiB downloads: 8 chunks of 600 KiB). On the
/// 16-core H200 host with 16 copy threads (`frames` bench, `chunks`, back to back)
/// download chunks under 512 KiB lost: 2 MiB took 76 µs in 256 KiB chunks and 58 µs
/// in 512 KiB ones, 1 MiB 43 µs either way; so download chunks are at least 512 KiB.
/// Uploads from [`COLD_SPLIT_MIN_BYTES`] up to 1 MiB are cut in two when `cold`.
pub(crate) fn auto_chunk_bytes(bytes: usize, direction: Direction, cold: bool) -> usize {
    let min = match direction {
        Direction::HostToDevice => PIPELINE_MIN_BYTES[0],
        Direction::DeviceToHost => PIPELINE_MIN_BYTES[1],
    };
    if bytes <= min {
        if cold && direction == Direction::HostToDevice && bytes >= COLD_SPLIT_MIN_BYTES {
            return bytes.div_ceil(2).next_multiple_of(4096);
        }
        return bytes;
    }
    let (pieces, least) = match direction {
        Direction::HostToDevice => (4, 256 << 10),
        Direction::DeviceToHost => (8, 512 << 10),
    };
    let target = (bytes / pieces)
        .clamp(least, 2 << 20)
        .next_multiple_of(64 << 10);
    // As many chunks as `target` gives, of near-equal size (page multiples), so a
    // transfer just over a multiple of `target` does not end in a sliver that costs
    // a DMA of its own.
    bytes
        .div_ceil(bytes.div_ceil(target))
        .next_multiple_of(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_chunks_leave_no_sliver() {
        for (bytes, direction) in [
            ((512 << 10) + 1, Direction::DeviceToHost),
            ((2 << 20) + 1, Direction::DeviceToHost),
            (4_915_200, Direction::DeviceToHost),
            ((1 << 20) + 1, Direction::HostToDevice),
            ((8 << 20) + 4097, Direction::HostToDevice),
        ] {
            let p = Plan::new(bytes, PIPELINE_WINDOW_BYTES, 0, direction, false);
            assert!(p.chunks >= 2, "{p:?}");
            let (_, last, _) = p.chunk(p.chunks - 1);
            assert!(
                last * 2 >= p.chunk_bytes,
                "sliver: {p:?}, last chunk {last} B"
            );
            assert_eq!(p.chunk_bytes % 4096, 0, "{p:?}");
        }
        // At or below the pipelining bound a transfer stays in one piece when the
        // copy threads are awake.
        assert_eq!(
            Plan::new(512 << 10, 1 << 20, 0, Direction::DeviceToHost, false).chunks,
            1
        );
        assert_eq!(
            Plan::new(1 << 20, 1 << 20, 0, Direction::HostToDevice, false).chunks,
            1
        );
    }

    #[test]
    fn cold_uploads_from_64_kib_to_1_mib_are_cut_in_two_even_chunks() {
        for bytes in [64 << 10, 150_528, 196_608, 1 << 20] {
            let p = Plan::new(bytes, 2 << 20, 0, Direction::HostToDevice, true);
            assert_eq!(p.chunks, 2, "{bytes}: {p:?}");
            let (_, last, _) = p.chunk(1);
            assert!(
                p.chunk_bytes - last < 2 * 4096,
                "{bytes}: near-even halves, {p:?}"
            );
        }
        // Below 64 KiB, and for downloads, cold or not changes nothing.
        assert_eq!(
            Plan::new(48 << 10, 1 << 20, 0, Direction::HostToDevice, true).chunks,
            1
        );
        assert_eq!(
            Plan::new(150_528, 1 << 20, 0, Direction::DeviceToHost, true).chunks,
            1
        );
    }

    #[test]
    fn plans_cover_every_byte_exactly_once_within_the_window() {
        for &(bytes, window) in &[
            (1usize << 20 | 1, 2 << 20),
            (4_915_200, 4_915_200 + 1000),
            (64 << 20, PIPELINE_WINDOW_BYTES),
            (16 << 20, 16 << 20),
            (3 << 20, 1 << 20),
            (9 << 20, PIPELINE_WINDOW_BYTES),
        ] {
            let p = Plan::new(bytes, window, 0, Direction::HostToDevice, false);
            assert!(p.slots >= 1 && p.slots <= MAX_SLOTS);
            assert!(p.slots * p.chunk_bytes <= window, "{p:?} window {window}");
            let mut covered = 0;
            for k in 0..p.chunks {
                let (off, len, slot) = p.chunk(k);
                assert_eq!(off, covered);
                assert!(len > 0 && len <= p.chunk_bytes);
                assert!(slot < p.slots);
                covered += len;
            }
            assert_eq!(covered, bytes, "{p:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_plan_covers_every_byte_once_inside_the_window(
            bytes in 1usize..(512usize << 20),
            window in (64usize << 10)..(80usize << 20),
            chunk_granules in 0usize..(PIPELINE_WINDOW_BYTES / crate::capacity::GROW_GRANULE_BYTES),
            h2d in proptest::prelude::any::<bool>(),
            cold in proptest::prelude::any::<bool>(),
        ) {
            // 0 is the automatic choice; anything else is what StagingConfig::pipeline_chunk_bytes sets.
            let direction = if h2d { Direction::HostToDevice } else { Direction::DeviceToHost };
            let chunk = chunk_granules * crate::capacity::GROW_GRANULE_BYTES;
            let p = Plan::new(bytes, window, chunk, direction, cold);
            proptest::prop_assert!(p.slots >= 1 && p.slots <= MAX_SLOTS);
            proptest::prop_assert!(p.slots * p.chunk_bytes <= window);
            let (mut covered, mut k) = (0, 0);
            while k < p.chunks {
                let (off, len, slot) = p.chunk(k);
                proptest::prop_assert_eq!(off, covered);
                proptest::prop_assert!(len >= 1 && len <= p.chunk_bytes && slot < p.slots);
                covered += len;
                k += 1;
            }
            proptest::prop_assert_eq!(covered, bytes);
        }
    }
}
