//! Runs one scenario on the frame-loop columns' buffers ([`FrameLoop`]): a frame loop
//! with a gap (`sleep-2ms`, `sleep-16ms`, `busy-2ms`: `FrameLoop::run_gaps`),
//! `tight-loop` ([`crate::tight_loop`]) or `contended` ([`crate::contended`]), and
//! warns when a staging buffer pinned memory while timing. It sits above the three,
//! so that `frame_loop`, which owns the buffers they all run on, imports neither
//! runner.

use crate::frame_loop::FrameLoop;
use crate::frames::{FrameSettings, Scenario};
use crate::records::{ContendedRecord, FrameRecord};
use crate::{contended, tight_loop};

/// Runs `scenario` on `fl`'s columns. Returns the frame records and the `contended`
/// ones; `progress` hears about each finished cell.
pub fn run(
    fl: &mut FrameLoop<'_>,
    scenario: Scenario,
    settings: &FrameSettings,
    progress: impl FnMut(&str),
) -> Result<(Vec<FrameRecord>, Vec<ContendedRecord>), String> {
    let pinned_before = fl.allocations();
    let records = match scenario {
        Scenario::TightLoop => (tight_loop::run(fl, settings, progress)?, Vec::new()),
        Scenario::Contended => (Vec::new(), contended::run(fl, settings, progress)?),
        _ => (fl.run_gaps(scenario, settings, progress)?, Vec::new()),
    };
    let pinned = fl.allocations() - pinned_before;
    if pinned != 0 {
        eprintln!(
            "frames: WARNING: {}: the staging buffers pinned memory {pinned} time(s) while timing",
            scenario.name()
        );
    }
    Ok(records)
}
