//! `chunks`: a tuning diagnostic for mid-size downloads, run only when asked for
//! (`FRAMES_ONLY=chunks`) and not part of the records.
//!
//! Issue 12 wants `download` within 1.25x of `download_into` from 1 MiB up, and at
//! most 120 µs at 4915200 B, back to back. This times `download` at 1 MiB, 2 MiB and
//! 4915200 B under every pipeline chunk size ({auto, 256 KiB, 512 KiB, 1 MiB,
//! 2 MiB}) and copy-thread count ({default, 16}), each variant its own
//! `StagingBuffer`, against `download_into`, interleaved within each repetition and
//! back to back (no gap), and prints the p50 of each.

use cuda_staging::StagingConfig;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use cuda_core::DeviceBuffer;
use cuda_staging::{default_copy_threads, StagingBuffer};

use crate::frames::FrameSettings;
use crate::stats::Summary;
use crate::{compare, fill_pattern, Gpu};

/// Download sizes: 1 MiB, 2 MiB and a 640×640×3 `f32` tensor.
pub const CHUNK_SIZES_BYTES: [usize; 3] = [1 << 20, 2 << 20, 4_915_200];

/// `StagingConfig::pipeline_chunk_bytes` values: 0 is the automatic choice.
pub const CHUNK_OPTIONS_BYTES: [usize; 5] = [0, 256 << 10, 512 << 10, 1 << 20, 2 << 20];

/// `StagingConfig::copy_threads` values: `None` keeps the default.
pub const COPY_THREAD_OPTIONS: [Option<usize>; 2] = [None, Some(16)];

/// Repetitions dropped per size.
pub const CHUNK_WARMUP_REPS: usize = 10;

/// Issue 12's ratio target from 1 MiB up: `download` p50 / `download_into` p50.
pub const TARGET_RATIO: f64 = 1.25;

/// Issue 12's target at 4915200 B, µs.
pub const TARGET_4915200_US: f64 = 120.0;

/// One way to configure `download`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DownloadVariant {
    /// `StagingConfig::pipeline_chunk_bytes` (0: automatic).
    pub chunk_bytes: usize,
    /// `StagingConfig::copy_threads`, or the default.
    pub copy_threads: Option<usize>,
}

impl DownloadVariant {
    /// E.g. `download chunk=auto threads=8 (default)` or `download chunk=256K threads=16`.
    pub fn label(&self, default_threads: usize) -> String {
        let chunk = match self.chunk_bytes {
            0 => "auto".to_string(),
            b if b % (1 << 20) == 0 => format!("{}M", b >> 20),
            b => format!("{}K", b >> 10),
        };
        let threads = match self.copy_threads {
            None => format!("{default_threads} (default)"),
            Some(t) => t.to_string(),
        };
        format!("download chunk={chunk} threads={threads}")
    }

    /// A staging buffer configured this way.
    fn staging(&self) -> StagingBuffer {
        let mut s = StagingBuffer::new();
        s.set_config(StagingConfig {
            pipeline_chunk_bytes: self.chunk_bytes,
            ..s.config()
        })
        .expect("set_config");
        if let Some(t) = self.copy_threads {
            s.set_config(StagingConfig {
                copy_threads: t,
                ..s.config()
            })
            .expect("set_config");
        }
        s
    }
}

/// Every variant: chunk sizes × thread counts (10).
pub fn variants() -> Vec<DownloadVariant> {
    COPY_THREAD_OPTIONS
        .iter()
        .flat_map(|&copy_threads| {
            CHUNK_OPTIONS_BYTES
                .iter()
                .map(move |&chunk_bytes| DownloadVariant {
                    chunk_bytes,
                    copy_threads,
                })
        })
        .collect()
}

/// The table: a row per variant with its p50 (µs) per size and the ratio to
/// `download_into`'s; `p50_us[v][s]` for variant row `v` and size `s`, the last row
/// `download_into`'s.
pub fn chunk_table(labels: &[String], sizes: &[usize], p50_us: &[Vec<f64>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "chunks: D2H back to back, p50 us (/ download_into p50); targets: <= {TARGET_RATIO}x \
         from 1 MiB, <= {TARGET_4915200_US} us at 4915200 B"
    );
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    let _ = write!(out, "{:width$}", "");
    for s in sizes {
        let _ = write!(out, " {s:>16}");
    }
    out.push('\n');
    let into = p50_us.last();
    for (label, row) in labels.iter().zip(p50_us) {
        let _ = write!(out, "{label:width$}");
        for (k, us) in row.iter().enumerate() {
            let ratio = into.map_or(f64::NAN, |i| us / i[k]);
            let miss = ratio > TARGET_RATIO || (sizes[k] == 4_915_200 && *us > TARGET_4915200_US);
            let mark = if miss { '!' } else { ' ' };
            let _ = write!(out, " {us:>8.1} ({ratio:>4.2}){mark}");
        }
        out.push('\n');
    }
    out
}

/// Runs the diagnostic; returns the table.
pub fn run(gpu: &Gpu, settings: &FrameSettings) -> Result<String, String> {
    let stream = &gpu.stream;
    let variants = variants();
    let max = CHUNK_SIZES_BYTES.iter().copied().max().unwrap_or(0);
    let mut stagings: Vec<StagingBuffer> = variants.iter().map(DownloadVariant::staging).collect();
    let mut into = StagingBuffer::new();
    let mut dsts: Vec<Vec<u8>> = variants.iter().map(|_| vec![0u8; max]).collect();
    let mut p50_us = vec![Vec::new(); variants.len() + 1];
    for (si, &n) in CHUNK_SIZES_BYTES.iter().enumerate() {
        let mut expected = vec![0u8; n];
        fill_pattern(&mut expected, 200 + si as u8);
        let mut device = DeviceBuffer::<u8>::alloc_in(&gpu.ctx, n).map_err(|e| e.to_string())?;
        device
            .copy_from_host(&expected)
            .map_err(|e| e.to_string())?;
        // Each variant's data once, before timing.
        for (v, (s, dst)) in stagings.iter_mut().zip(&mut dsts).enumerate() {
            let what = format!("chunks {} {n} B", variants[v].label(default_copy_threads()));
            let dst = &mut dst[..n];
            dst.fill(0);
            s.download(dst, &device, stream)
                .map_err(|e| format!("{what}: {e}"))?;
            compare(dst, &expected).map_err(|e| format!("{what}: {e}"))?;
        }
        let landed = into
            .download_into(&device, n, stream)
            .map_err(|e| e.to_string())?;
        compare(landed, &expected).map_err(|e| format!("chunks download_into {n} B: {e}"))?;

        let mut samples: Vec<Vec<_>> = (0..=variants.len())
            .map(|_| Vec::with_capacity(settings.chunk_reps))
            .collect();
        for rep in 0..CHUNK_WARMUP_REPS + settings.chunk_reps {
            for (v, (s, dst)) in stagings.iter_mut().zip(&mut dsts).enumerate() {
                let dst = &mut dst[..n];
                let t = Instant::now();
                s.download(black_box(dst), &device, stream)
                    .map_err(|e| e.to_string())?;
                let el = t.elapsed();
                if rep >= CHUNK_WARMUP_REPS {
                    samples[v].push(el);
                }
            }
            let t = Instant::now();
            black_box(
                into.download_into(&device, n, stream)
                    .map_err(|e| e.to_string())?,
            );
            let el = t.elapsed();
            if rep >= CHUNK_WARMUP_REPS {
                samples[variants.len()].push(el);
            }
        }
        for (row, s) in p50_us.iter_mut().zip(&mut samples) {
            row.push(Summary::of(s).map_or(f64::NAN, |s| s.p50_us()));
        }
    }
    let mut labels: Vec<String> = variants
        .iter()
        .map(|v| v.label(default_copy_threads()))
        .collect();
    labels.push("download_into".to_string());
    let mut out = chunk_table(&labels, &CHUNK_SIZES_BYTES, &p50_us);
    out.push_str(&reuse(gpu, settings)?);
    Ok(out)
}

/// Why `download` lost back to back where the interleaved rows above won: a DMA
/// into pinned lines the CPU still caches is slow, and reading a result caches its
/// lines. `download_into` alone, then with the caller reading each result (untimed)
/// before the next; and `download` into one reused destination without other
/// transfers in between (as criterion's loop runs it), whose copy-out flushes the
/// lines it read (see `cuda_staging`'s `copy.rs`).
fn reuse(gpu: &Gpu, settings: &FrameSettings) -> Result<String, String> {
    let stream = &gpu.stream;
    let rows = [
        "download_into",
        "download_into, result read",
        "download, one dst",
    ];
    let mut p50_us = vec![Vec::new(); rows.len()];
    let mut staging = StagingBuffer::new();
    for &n in &CHUNK_SIZES_BYTES {
        let mut expected = vec![0u8; n];
        fill_pattern(&mut expected, 90);
        let mut device = DeviceBuffer::<u8>::alloc_in(&gpu.ctx, n).map_err(|e| e.to_string())?;
        device
            .copy_from_host(&expected)
            .map_err(|e| e.to_string())?;
        let mut dst = vec![0u8; n];
        for (row, out) in p50_us.iter_mut().enumerate() {
            let mut samples = Vec::with_capacity(settings.chunk_reps);
            for rep in 0..CHUNK_WARMUP_REPS + settings.chunk_reps {
                let t = Instant::now();
                let el = if row < 2 {
                    let got = staging
                        .download_into(&device, n, stream)
                        .map_err(|e| e.to_string())?;
                    let el = t.elapsed();
                    if row == 1 || rep == 0 {
                        compare(got, &expected)
                            .map_err(|e| format!("chunks {} {n} B: {e}", rows[row]))?;
                    }
                    el
                } else {
                    staging
                        .download(black_box(&mut dst[..]), &device, stream)
                        .map_err(|e| e.to_string())?;
                    let el = t.elapsed();
                    if rep == 0 {
                        compare(&dst, &expected)
                            .map_err(|e| format!("chunks {} {n} B: {e}", rows[row]))?;
                    }
                    el
                };
                if rep >= CHUNK_WARMUP_REPS {
                    samples.push(el);
                }
            }
            out.push(Summary::of(&mut samples).map_or(f64::NAN, |s| s.p50_us()));
        }
    }
    let mut out = String::from("chunks: back to back without interleaving, p50 us\n");
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    for (label, row) in rows.iter().zip(&p50_us) {
        let _ = write!(out, "{label:width$}");
        for us in row {
            let _ = write!(out, " {us:>8.1}");
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_variants_with_distinct_labels() {
        let v = variants();
        assert_eq!(v.len(), 10);
        let labels: Vec<String> = v.iter().map(|v| v.label(8)).collect();
        assert_eq!(labels[0], "download chunk=auto threads=8 (default)");
        assert_eq!(labels[6], "download chunk=256K threads=16");
        assert_eq!(labels[9], "download chunk=2M threads=16");
        for (i, a) in labels.iter().enumerate() {
            assert!(!labels[i + 1..].contains(a), "{a}");
        }
    }

    #[test]
    fn the_table_marks_misses_of_issue_12s_targets() {
        let labels = vec![
            "download chunk=auto".to_string(),
            "download_into".to_string(),
        ];
        let t = chunk_table(
            &labels,
            &[1 << 20, 4_915_200],
            &[vec![60.0, 130.0], vec![50.0, 100.0]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[2].contains("60.0 (1.20) "), "{t}");
        assert!(lines[2].contains("130.0 (1.30)!"), "{t}");
        assert!(lines[3].contains("100.0 (1.00) "), "{t}");
    }
}
