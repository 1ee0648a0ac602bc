//! [`StagingBuffer::calibrate`]: routing thresholds measured on this machine.

use std::time::Instant;

use cuda_core::{DeviceBuffer, Result, Stream};

use crate::direction::{Direction, PerDirection};
use crate::stats::StagingStats;
use crate::StagingBuffer;

/// One calibration measurement: medians of the two candidate paths at one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CalibrationSample {
    /// Which direction was timed.
    pub direction: Direction,
    /// Transfer size.
    pub bytes: usize,
    /// Median of the staged path, µs.
    pub staged_us: f64,
    /// Median of the driver's pageable path, µs.
    pub pageable_us: f64,
}

/// What [`StagingBuffer::calibrate`] measured and set.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The lower routing bound set for uploads.
    pub upload_stage_min_bytes: usize,
    /// The lower routing bound set for downloads.
    pub download_stage_min_bytes: usize,
    /// The routing threshold set for uploads.
    pub upload_stage_max_bytes: usize,
    /// The routing threshold set for downloads.
    pub download_stage_max_bytes: usize,
    /// Every size timed, both directions.
    pub samples: Vec<CalibrationSample>,
}

impl StagingBuffer {
    /// Times the staged path against the driver's pageable path in both directions at
    /// sizes from 4 KiB to 16 MiB on `stream`, and sets each direction's routing:
    /// staging from the smallest timed size where it won (0 when it won at 4 KiB)
    /// up to the largest size of the unbroken run of wins that follows (`usize::MAX`
    /// when the run reaches 16 MiB). Takes well under a second.
    ///
    /// Uses a temporary 16 MiB device buffer. Transfer counters are restored
    /// afterwards; a pinned allocation or pipeline events it makes are counted.
    pub fn calibrate(&mut self, stream: &Stream) -> Result<Calibration> {
        const SIZES: [usize; 9] = [
            4 << 10,
            16 << 10,
            32 << 10,
            64 << 10,
            256 << 10,
            1 << 20,
            4 << 20,
            8 << 20,
            16 << 20,
        ];
        const REPS: usize = 7;
        let max = SIZES[SIZES.len() - 1];
        let mut dev = DeviceBuffer::<u8>::alloc_in(stream.context(), max)?;
        let mut host: Vec<u8> = (0..max).map(|i| (i % 251) as u8).collect();
        let saved_stats = self.stats;
        let saved = self.config;
        let mut samples = Vec::new();
        let outcome = (|| -> Result<()> {
            for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
                for &bytes in &SIZES {
                    let (mut staged, mut pageable) = (Vec::new(), Vec::new());
                    for rep in 0..=REPS {
                        for route_staged in [true, false] {
                            self.config.stage_max_bytes =
                                PerDirection::both(if route_staged { usize::MAX } else { 0 });
                            self.config.stage_min_bytes = PerDirection::both(0);
                            let t = Instant::now();
                            match direction {
                                Direction::HostToDevice => {
                                    self.upload(&mut dev, &host[..bytes], stream)?
                                }
                                Direction::DeviceToHost => {
                                    self.download(&mut host[..bytes], &dev, stream)?
                                }
                            }
                            let us = t.elapsed().as_secs_f64() * 1e6;
                            if rep > 0 {
                                if route_staged {
                                    staged.push(us)
                                } else {
                                    pageable.push(us)
                                }
                            }
                        }
                    }
                    samples.push(CalibrationSample {
                        direction,
                        bytes,
                        staged_us: median(&mut staged),
                        pageable_us: median(&mut pageable),
                    });
                }
            }
            Ok(())
        })();
        self.config = saved;
        self.stats = StagingStats {
            allocations: self.stats.allocations,
            peak_capacity_bytes: self.stats.peak_capacity_bytes,
            event_creations: self.stats.event_creations,
            ..saved_stats
        };
        outcome?;
        let (up_min, upload) = thresholds_from(&samples, Direction::HostToDevice);
        let (down_min, download) = thresholds_from(&samples, Direction::DeviceToHost);
        self.config.stage_min_bytes = PerDirection {
            upload: up_min,
            download: down_min,
        };
        self.config.stage_max_bytes = PerDirection { upload, download };
        Ok(Calibration {
            upload_stage_min_bytes: up_min,
            upload_stage_max_bytes: upload,
            download_stage_min_bytes: down_min,
            download_stage_max_bytes: download,
            samples,
        })
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// (lower, upper) routing bounds from one direction's samples, in ascending size:
/// staging starts at the first size where it won (0 if that is the smallest size)
/// and ends at the last size of the run of wins that follows (`usize::MAX` if the
/// run reaches the largest size). Staging never winning gives (0, 0): everything
/// non-empty goes to the driver.
fn thresholds_from(samples: &[CalibrationSample], direction: Direction) -> (usize, usize) {
    let sizes: Vec<&CalibrationSample> = samples
        .iter()
        .filter(|s| s.direction == direction)
        .collect();
    let wins = |s: &CalibrationSample| s.staged_us <= s.pageable_us;
    let Some(first) = sizes.iter().position(|s| wins(s)) else {
        return (0, 0);
    };
    let min = if first == 0 { 0 } else { sizes[first].bytes };
    match sizes[first..].iter().position(|s| !wins(s)) {
        None => (min, usize::MAX),
        Some(k) => (min, sizes[first + k - 1].bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_bound_the_run_of_staging_wins() {
        let s = |bytes, staged_us, pageable_us| CalibrationSample {
            direction: Direction::HostToDevice,
            bytes,
            staged_us,
            pageable_us,
        };
        let h2d = Direction::HostToDevice;
        assert_eq!(
            thresholds_from(&[s(1, 1.0, 2.0), s(2, 1.0, 2.0)], h2d),
            (0, usize::MAX)
        );
        assert_eq!(
            thresholds_from(&[s(1, 1.0, 2.0), s(2, 3.0, 2.0), s(4, 1.0, 2.0)], h2d),
            (0, 1)
        );
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0), s(2, 1.0, 2.0), s(4, 1.0, 2.0)], h2d),
            (2, usize::MAX)
        );
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0), s(2, 1.0, 2.0), s(4, 3.0, 2.0)], h2d),
            (2, 2)
        );
        assert_eq!(thresholds_from(&[s(1, 3.0, 2.0)], h2d), (0, 0));
        assert_eq!(
            thresholds_from(&[s(1, 3.0, 2.0)], Direction::DeviceToHost),
            (0, 0)
        );
    }
}
