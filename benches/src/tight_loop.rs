//! `tight-loop`: the frame-loop columns with no gap, so the back-to-back CPU cost has
//! a table too (issue 23).
//!
//! Per cell (size × direction), each column runs as its own block, not interleaved
//! with the others, so that threads a column leaves running are not billed to the
//! next one: [`FrameSettings::tight_warmup_calls`] untimed calls, then back-to-back
//! calls, each timed alone, until [`FrameSettings::tight_block`] has passed and at
//! least [`FrameSettings::tight_min_calls`] were made; then a quiet pause,
//! [`TIGHT_LOOP_QUIET`]. The columns run in the frame loops' order
//! ([`FrameColumn::ALL`]), on the same buffers ([`FrameLoop`]).
//!
//! `cpu_us` is the process's CPU time over the timed block (all threads) divided by
//! its calls. A block lasts at least 200 ms in the full run, long against the
//! kernel's tick, so the process clock's lag on threads running on other cores when
//! it is read (see [`crate::cpu_time`]) stays within a few percent of a spinning
//! helper's CPU.

use std::time::{Duration, Instant};

use cuda_core::Error;

use crate::cells::cell_name;
use crate::cpu_time::{self, CpuTally};
use crate::frame_loop::FrameLoop;
use crate::frames::{FrameColumn, FrameSettings, Scenario};
use crate::records::{FrameRecord, Routes};
use crate::stats::Summary;
use crate::Direction;

/// The pause after each column's block, so the helpers
/// a column woke have parked before the next column is timed: the copy pool spins
/// at most a few hundred µs after a transfer.
pub const TIGHT_LOOP_QUIET: Duration = Duration::from_millis(20);

/// Runs `tight-loop` over every size and both directions: a record per cell and
/// column. `progress` hears about each finished cell.
pub fn run(
    fl: &mut FrameLoop<'_>,
    settings: &FrameSettings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<FrameRecord>, String> {
    let scenario = Scenario::TightLoop.name();
    let sizes = fl.sizes().to_vec();
    let mut records = Vec::new();
    for (i, &bytes) in sizes.iter().enumerate() {
        for direction in Direction::ALL {
            if !settings
                .cells
                .matches(&cell_name(scenario, direction.label(), bytes))
            {
                continue;
            }
            let mut cell = Vec::new();
            for column in FrameColumn::ALL {
                let routes_before = fl.routes(column);
                let (mut samples, cpu) =
                    block(fl, column, direction, i, settings).map_err(|e| {
                        format!(
                            "{scenario} {} {} {bytes} B: {e}",
                            column.name(),
                            direction.label()
                        )
                    })?;
                let routes = Routes::between(routes_before, fl.routes(column));
                std::thread::sleep(TIGHT_LOOP_QUIET);
                let s = Summary::of(&mut samples).ok_or("no samples")?;
                cell.push(
                    FrameRecord::new(scenario, direction, bytes, column, &s, cpu.mean_us())
                        .with_routes(routes),
                );
            }
            cell.sort_by_key(|r| FrameColumn::ALL.iter().position(|c| c.name() == r.column));
            records.extend(cell);
            progress(&format!("{scenario} {} {bytes} B", direction.label()));
        }
    }
    Ok(records)
}

/// One column's block: the warm-up calls, then the timed ones; their times and the
/// process's CPU over them (one window, as many calls).
fn block(
    fl: &mut FrameLoop<'_>,
    column: FrameColumn,
    direction: Direction,
    i: usize,
    settings: &FrameSettings,
) -> Result<(Vec<Duration>, CpuTally), Error> {
    for _ in 0..settings.tight_warmup_calls {
        fl.transfer(column, direction, i)?;
    }
    // Room for a call every 2 µs, so the samples never grow while timing.
    let room = (settings.tight_block.as_micros() / 2) as usize;
    let mut samples = Vec::with_capacity(room.max(settings.tight_min_calls));
    let started = Instant::now();
    let cpu_before = cpu_time::process_cpu();
    while samples.len() < settings.tight_min_calls || started.elapsed() < settings.tight_block {
        samples.push(fl.transfer(column, direction, i)?);
    }
    let spent = cpu_time::elapsed(cpu_before, cpu_time::process_cpu());
    let calls = samples.len();
    Ok((samples, per_call(spent, calls)))
}

/// One window of `spent` over `calls` calls, as a tally whose mean is CPU per call.
fn per_call(spent: Option<Duration>, calls: usize) -> CpuTally {
    let mut t = CpuTally::default();
    t.add(spent.map(|d| d / calls.max(1) as u32));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_call_divides_the_block() {
        let t = per_call(Some(Duration::from_millis(30)), 1000);
        assert_eq!(t.mean_us(), Some(30.0));
        assert_eq!(per_call(None, 1000).mean_us(), None);
    }
}
