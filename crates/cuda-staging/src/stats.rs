//! [`StagingStats`].

/// Counters describing how a [`crate::StagingBuffer`] has been used.
///
/// Every counter only grows, except through [`crate::StagingBuffer::reset_stats`].
/// A steady loop of transfers that fit the current capacity leaves `allocations`
/// unchanged: that is how a caller proves nothing is re-pinned per frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StagingStats {
    /// Pinned allocations made (first use, each growth, `reserve`, `with_capacity`).
    pub allocations: u64,
    /// Transfers that went through the pinned buffer: every `upload_with` /
    /// `download_into`, every 2-D transfer (`upload_2d`, `download_2d` and their
    /// `_with` / `_into` forms, counting the rows' bytes without padding), and
    /// `upload` / `download` routed to staging.
    pub staged_transfers: u64,
    /// `upload` / `download` transfers handed to the driver's own path: below
    /// [`crate::StagingConfig::stage_min_bytes`] (whatever the host memory; the
    /// page-lock query is skipped there) or, from pageable memory, above
    /// [`crate::StagingConfig::stage_max_bytes`].
    pub direct_transfers: u64,
    /// `upload` / `download` transfers at or above the lower routing bound whose host
    /// slice was already page-locked (a `PinnedBuffer`, a `HostRegistration`,
    /// driver-allocated memory): DMA straight from or into it, no host copy.
    pub pinned_source_transfers: u64,
    /// Batches moved with one wait ([`crate::StagingBuffer::download_batch`],
    /// [`crate::StagingBuffer::upload_batch`]); their bytes count below.
    pub batched_transfers: u64,
    /// Bytes moved host to device, all paths.
    pub bytes_uploaded: u64,
    /// Bytes moved device to host, all paths.
    pub bytes_downloaded: u64,
    /// The largest pinned capacity held so far, in bytes.
    pub peak_capacity_bytes: usize,
    /// CUDA events created for the chunked pipeline (one per slot, per context).
    /// The events of the last four contexts are kept, so a buffer that one thread
    /// drives on two GPUs in turn creates them once per GPU, not per switch; like
    /// `allocations`, a steady loop leaves it unchanged.
    pub event_creations: u64,
}

impl StagingStats {
    /// Counts `bytes` moved in `direction` (once they have landed).
    pub(crate) fn add_bytes(&mut self, direction: crate::Direction, bytes: usize) {
        match direction {
            crate::Direction::HostToDevice => self.bytes_uploaded += bytes as u64,
            crate::Direction::DeviceToHost => self.bytes_downloaded += bytes as u64,
        }
    }

    /// All transfers counted, whatever path they took (a batch counts once).
    pub fn transfers(&self) -> u64 {
        self.staged_transfers
            + self.direct_transfers
            + self.pinned_source_transfers
            + self.batched_transfers
    }
}
