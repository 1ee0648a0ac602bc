//! Tests of batched transfers (issue 13): `DownloadBatch` / `UploadBatch` through
//! `StagingBuffer::download_batch` / `upload_batch` (with `cuMemcpyBatchAsync` and
//! with one queued copy per part), and through `StagingRing::download_batch` /
//! `wait`. Outputs of four types and sizes, ordering after queued work, the
//! part limit, bad input, parts of another batch, empty batches and the counters.
//!
//! The CPU tests at the top run everywhere: without a driver no device buffer can
//! exist, so adding parts is tested on the GPU. The GPU tests are `#[ignore]`d so
//! that `cargo test` passes without a GPU; run them with `cargo xtask test-gpu` (or
//! `cargo test -p cuda-staging --test batch -- --ignored` on a GPU machine). Without
//! a device each one fails loudly.
//!
//! Conventions as in `ring/main.rs`: patterns that differ per element and per call, every
//! element compared byte for byte, helpers in `tests/common`.

mod common;

use cuda_staging::StagingConfig;
use std::fmt::Debug;

use common::*;
use cuda_staging::{
    DeviceBuffer, DownloadBatch, Error, Landed, Part, StagingBuffer, StagingRing, StagingStats,
    Stream, UploadBatch, MAX_BATCH_PARTS,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Parts start at multiples of this many bytes of the pinned region (the batch
/// module's documented layout).
const PART_ALIGN: usize = 256;

// ---------------------------------------------------------------------------------
// CPU tests
// ---------------------------------------------------------------------------------

static_assertions::assert_impl_all!(Part<f32>: Copy, Send, Sync, Debug);
static_assertions::assert_impl_all!(DownloadBatch<'static>: Send, Sync, Default, Debug);
static_assertions::assert_impl_all!(UploadBatch<'static>: Send, Default, Debug);
static_assertions::assert_impl_all!(Landed<'static>: Send, Sync, Debug);

#[test]
fn a_batch_holds_at_most_16_parts() {
    assert_eq!(MAX_BATCH_PARTS, 16);
}

#[test]
fn a_new_batch_is_empty_and_needs_no_pinned_memory() {
    for batch in [DownloadBatch::new(), DownloadBatch::default()] {
        assert_eq!(batch.len(), 0);
        assert!(batch.is_empty());
        assert_eq!(batch.region_bytes(), 0);
    }
    for batch in [UploadBatch::new(), UploadBatch::default()] {
        assert_eq!(batch.len(), 0);
        assert!(batch.is_empty());
    }
}

#[test]
fn the_layout_helper_of_these_tests_rounds_parts_to_256_bytes() {
    assert_eq!(region_bytes(&[]), 0);
    assert_eq!(region_bytes(&[10]), 10);
    assert_eq!(region_bytes(&[10, 4096, 0, 1]), 4353);
    assert_eq!(region_bytes(&[4096, 16 * KIB, 64 * KIB, 150_528]), 236_544);
}

// ---------------------------------------------------------------------------------
// helpers of the GPU tests
// ---------------------------------------------------------------------------------

// The shared helpers (device set-up, patterns, checks, `Busy`, `warm`) are in
// `tests/common`; what only batches need is here.

/// A model's detection, as users stage them: `#[repr(C)]`, `Pod`, 24 bytes, no
/// padding. Not `common::Detection` (16 bytes, alignment 8): the byte counts below
/// (`N_DET`, `FOUR_BYTES`) assume this one.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Detection {
    x: f32,
    y: f32,
    w: f32,
    h: f32,
    score: f32,
    class: u32,
}

impl Pattern for Detection {
    fn at(i: usize, seed: u64) -> Self {
        let (a, b, c) = (mix(3 * i, seed), mix(3 * i + 1, seed), mix(3 * i + 2, seed));
        Detection {
            x: finite(a),
            y: finite(a >> 32),
            w: finite(b),
            h: finite(b >> 32),
            score: finite(c),
            class: (c >> 32) as u32,
        }
    }
}

/// The pinned bytes a batch of parts of `bytes` needs: each part from the next
/// multiple of 256.
fn region_bytes(parts: &[usize]) -> usize {
    parts
        .iter()
        .fold(0, |end, &b| end.next_multiple_of(PART_ALIGN) + b)
}

// ---------------------------------------------------------------------------------
// four outputs of different types and sizes
// ---------------------------------------------------------------------------------

/// Elements downloaded of each output: 4 KiB of u8, 16 KiB of i32, 64 KiB of f32,
/// 150528 B of detections.
const N_U8: usize = 4 * KIB;
const N_I32: usize = 16 * KIB / 4;
const N_F32: usize = 64 * KIB / 4;
const N_DET: usize = 150_528 / 24;
/// Each output holds this many elements more than is downloaded (a prefix).
const EXTRA: usize = 33;
/// Bytes of the four parts.
const FOUR_BYTES: [usize; 4] = [N_U8, N_I32 * 4, N_F32 * 4, N_DET * 24];

/// A model's four outputs on the device, each holding its own pattern.
struct Outputs {
    bytes: DeviceBuffer<u8>,
    ints: DeviceBuffer<i32>,
    floats: DeviceBuffer<f32>,
    dets: DeviceBuffer<Detection>,
    seeds: [u64; 4],
}

/// The parts of one batch of [`Outputs`].
type FourParts = (Part<u8>, Part<i32>, Part<f32>, Part<Detection>);

impl Outputs {
    fn new() -> Outputs {
        let seeds = [seed(), seed(), seed(), seed()];
        Outputs {
            bytes: device_with(N_U8 + EXTRA, seeds[0]),
            ints: device_with(N_I32 + EXTRA, seeds[1]),
            floats: device_with(N_F32 + EXTRA, seeds[2]),
            dets: device_with(N_DET + EXTRA, seeds[3]),
            seeds,
        }
    }

    /// New patterns in every output.
    fn refill(&mut self) {
        self.seeds = [seed(), seed(), seed(), seed()];
        let len = |n| n + EXTRA;
        self.bytes
            .copy_from_host(&pattern(len(N_U8), self.seeds[0]))
            .unwrap();
        self.ints
            .copy_from_host(&pattern(len(N_I32), self.seeds[1]))
            .unwrap();
        self.floats
            .copy_from_host(&pattern(len(N_F32), self.seeds[2]))
            .unwrap();
        self.dets
            .copy_from_host(&pattern(len(N_DET), self.seeds[3]))
            .unwrap();
    }

    /// A batch of the four, checked for its size.
    fn batch(&self) -> (DownloadBatch<'_>, FourParts) {
        let mut batch = DownloadBatch::new();
        let parts = (
            batch.add(&self.bytes, N_U8).unwrap(),
            batch.add(&self.ints, N_I32).unwrap(),
            batch.add(&self.floats, N_F32).unwrap(),
            batch.add(&self.dets, N_DET).unwrap(),
        );
        assert_eq!(batch.len(), 4);
        assert!(!batch.is_empty());
        assert_eq!(batch.region_bytes(), region_bytes(&FOUR_BYTES));
        assert_eq!(
            (parts.0.len(), parts.1.len(), parts.2.len(), parts.3.len()),
            (N_U8, N_I32, N_F32, N_DET)
        );
        (batch, parts)
    }

    /// Every element of every part of `landed`.
    #[track_caller]
    fn check(&self, what: &str, landed: &Landed<'_>, parts: FourParts) {
        let s = self.seeds;
        let (a, b, c, d) = (
            landed.get(parts.0).unwrap(),
            landed.get(parts.1).unwrap(),
            landed.get(parts.2).unwrap(),
            landed.get(parts.3).unwrap(),
        );
        assert_eq!(
            (a.len(), b.len(), c.len(), d.len()),
            (N_U8, N_I32, N_F32, N_DET)
        );
        check(&format_args!("{what}: u8 part"), a, s[0]);
        check(&format_args!("{what}: i32 part"), b, s[1]);
        check(&format_args!("{what}: f32 part"), c, s[2]);
        check(&format_args!("{what}: detection part"), d, s[3]);
    }
}

/// Three rounds of the four outputs through `StagingBuffer::download_batch`.
fn download_four(batch_api: bool) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            batch_api,
            ..staging.config()
        })
        .expect("set_config");
    assert_eq!(staging.config().batch_api, batch_api);
    let mut out = Outputs::new();
    let rounds = 3;
    for round in 0..rounds {
        if round > 0 {
            out.refill();
        }
        let (batch, parts) = out.batch();
        let landed = staging.download_batch(&batch, &stream).unwrap();
        out.check(&format!("round {round}"), &landed, parts);
        // Downloading the same batch again lands the same bytes.
        let landed = staging.download_batch(&batch, &stream).unwrap();
        out.check(&format!("round {round}, again"), &landed, parts);
    }
    let st = staging.stats();
    let sum: usize = FOUR_BYTES.iter().sum();
    assert_eq!(
        st,
        StagingStats {
            allocations: 1,
            batched_transfers: 2 * rounds,
            bytes_downloaded: (2 * rounds as usize * sum) as u64,
            peak_capacity_bytes: st.peak_capacity_bytes,
            ..StagingStats::default()
        }
    );
    assert_eq!(st.transfers(), 2 * rounds, "a batch counts once");
    assert!(staging.capacity() >= region_bytes(&FOUR_BYTES));
    // The device buffers are read, never written.
    check(
        &format_args!("u8 output"),
        &device_contents(&out.bytes),
        out.seeds[0],
    );
    check(
        &format_args!("detections"),
        &device_contents(&out.dets),
        out.seeds[3],
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn four_outputs_of_different_types_download_as_one_batch() {
    download_four(true);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn four_outputs_download_as_one_copy_per_part_without_the_batch_api() {
    download_four(false);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_ring_downloads_a_batch_for_one_ticket() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 2,
        ..Default::default()
    })
    .unwrap();
    let other = StagingRing::new();
    let mut out = Outputs::new();
    let single_seed = seed();
    let single = device_with::<f32>(1000, single_seed);
    let sum: usize = FOUR_BYTES.iter().sum();
    for round in 0..3u64 {
        if round > 0 {
            out.refill();
        }
        let (batch, parts) = out.batch();
        let bt = ring.download_batch(&batch, &stream).unwrap();
        let t = ring.download(&single, 1000, &stream).unwrap();
        {
            let landed = ring.wait(&bt).unwrap();
            out.check(&format!("ring round {round}"), &landed, parts);
            // Redeeming again gives the same bytes.
            out.check(
                &format!("ring round {round}, again"),
                &ring.wait(&bt).unwrap(),
                parts,
            );
        }
        check(
            &format_args!("single download"),
            ring.wait(&t).unwrap(),
            single_seed,
        );
        let reason = invalid_reason(other.wait(&bt).unwrap_err());
        assert!(reason.contains("another ring"), "{reason}");
        // Two more transfers on two slots: the batch's slot is reused.
        let t2 = ring.download(&single, 10, &stream).unwrap();
        let reason = invalid_reason(ring.wait(&bt).unwrap_err());
        assert!(reason.contains("stale ticket"), "{reason}");
        check(
            &format_args!("last download"),
            ring.wait(&t2).unwrap(),
            single_seed,
        );
        let st = ring.stats();
        assert_eq!(st.downloads, 3 * (round + 1), "a batch counts once: {st:?}");
        assert_eq!(
            st.bytes_downloaded,
            (round + 1) * (sum + 1000 * 4 + 10 * 4) as u64,
            "{st:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// upload batches
// ---------------------------------------------------------------------------------

fn upload_three(batch_api: bool) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            batch_api,
            ..staging.config()
        })
        .expect("set_config");
    // Parts of whole multiples of 256 bytes but the last: no gaps in the region.
    let (n_i, n_f, n_d) = (1024, 150_528 / 4, 777);
    let s_rest = [seed(), seed(), seed()];
    let mut ints = device_with::<i32>(n_i + EXTRA, s_rest[0]);
    let mut floats = device_with::<f32>(n_f + EXTRA, s_rest[1]);
    let mut dets = device_with::<Detection>(n_d + EXTRA, s_rest[2]);
    for round in 0..3 {
        let s = [seed(), seed(), seed()];
        let src_i = pattern::<i32>(n_i, s[0]);
        let src_f = pattern::<f32>(n_f, s[1]);
        let src_d = pattern::<Detection>(n_d, s[2]);
        {
            let mut batch = UploadBatch::new();
            batch.add(&mut ints, &src_i).unwrap();
            batch.add(&mut floats, &src_f).unwrap();
            batch.add(&mut dets, &src_d).unwrap();
            assert_eq!(batch.len(), 3);
            staging.upload_batch(&mut batch, &stream).unwrap();
        }
        // Synchronous: the sources may go at once.
        drop((src_i, src_f, src_d));
        let back = device_contents(&ints);
        check(
            &format_args!("round {round}: i32 input"),
            &back[..n_i],
            s[0],
        );
        check_at(
            &format_args!("past the i32 input"),
            &back[n_i..],
            n_i,
            s_rest[0],
        );
        let back = device_contents(&floats);
        check(
            &format_args!("round {round}: f32 input"),
            &back[..n_f],
            s[1],
        );
        check_at(
            &format_args!("past the f32 input"),
            &back[n_f..],
            n_f,
            s_rest[1],
        );
        let back = device_contents(&dets);
        check(
            &format_args!("round {round}: detections"),
            &back[..n_d],
            s[2],
        );
        check_at(
            &format_args!("past the detections"),
            &back[n_d..],
            n_d,
            s_rest[2],
        );
    }
    let st = staging.stats();
    let sum = (n_i * 4 + n_f * 4 + n_d * 24) as u64;
    assert_eq!(
        (st.batched_transfers, st.bytes_uploaded, st.allocations),
        (3, 3 * sum, 1),
        "{st:?}"
    );
    assert_eq!((st.staged_transfers, st.direct_transfers), (0, 0));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn three_inputs_upload_as_one_batch() {
    upload_three(true);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn three_inputs_upload_as_one_copy_per_part_without_the_batch_api() {
    upload_three(false);
}

/// Two frames into the two halves of one tensor (`DeviceBuffer::split_at_mut`), as
/// one batch: both land, and nothing past the second.
fn two_halves_of_one_tensor(batch_api: bool) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            batch_api,
            ..staging.config()
        })
        .expect("set_config");
    // A 3x112x112 f32 frame in each half; the second half is longer than its frame.
    let (n_a, n_b) = (150_528 / 4, 150_528 / 4);
    let s_rest = seed();
    let mut tensor = device_with::<f32>(n_a + n_b + EXTRA, s_rest);
    for round in 0..3 {
        let s = [seed(), seed()];
        let (src_a, src_b) = (pattern::<f32>(n_a, s[0]), pattern::<f32>(n_b, s[1]));
        {
            let (mut lo, mut hi) = tensor.split_at_mut(n_a).expect("split_at_mut");
            let mut batch = UploadBatch::new();
            batch.add(&mut lo, &src_a).unwrap();
            batch.add(&mut hi, &src_b).unwrap();
            staging.upload_batch(&mut batch, &stream).unwrap();
        }
        let back = device_contents(&tensor);
        check(
            &format_args!("round {round}: first half"),
            &back[..n_a],
            s[0],
        );
        check(
            &format_args!("round {round}: second half"),
            &back[n_a..n_a + n_b],
            s[1],
        );
        check_at(
            &format_args!("round {round}: past the second frame"),
            &back[n_a + n_b..],
            n_a + n_b,
            s_rest,
        );
    }
    let st = staging.stats();
    assert_eq!(
        (st.batched_transfers, st.bytes_uploaded),
        (3, 3 * (n_a + n_b) as u64 * 4),
        "{st:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn one_batch_uploads_into_both_halves_of_one_tensor() {
    two_halves_of_one_tensor(true);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn one_batch_uploads_into_both_halves_of_one_tensor_without_the_batch_api() {
    two_halves_of_one_tensor(false);
}

// ---------------------------------------------------------------------------------
// ordering against the stream
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_batch_download_sees_work_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    // Pinned beforehand, so each batch is queued while the work before it still runs.
    warm(&mut ring, &stream, MIB);
    let n = 150_528 / 4;
    for (round, batch_api) in [(0, true), (1, false), (2, true)] {
        let mut staging = StagingBuffer::with_capacity(MIB).unwrap();
        staging
            .set_config(StagingConfig {
                batch_api,
                ..staging.config()
            })
            .expect("set_config");
        let (s_old, s_new, bits) = (seed(), seed(), 0xC3C3_0000 | (seed() as u32 & 0xFFFF));
        let mut copied = device_with::<f32>(n, s_old);
        let mut set = device_with::<u32>(n, s_old);
        let fresh = device_with::<f32>(n, s_new);
        busy.queue(&stream);
        stream.memcpy_dtod(&fresh, &mut copied).unwrap();
        stream.memset_u32(&mut set, bits).unwrap();
        let mut batch = DownloadBatch::new();
        let p_copied = batch.add(&copied, n).unwrap();
        let p_set = batch.add(&set, n).unwrap();
        if round < 2 {
            let landed = staging.download_batch(&batch, &stream).unwrap();
            check(
                &format_args!("copied part"),
                landed.get(p_copied).unwrap(),
                s_new,
            );
            check_all_eq(
                &format_args!("memset part"),
                landed.get(p_set).unwrap(),
                bits,
            );
        } else {
            let t = ring.download_batch(&batch, &stream).unwrap();
            let landed = ring.wait(&t).unwrap();
            check(
                &format_args!("ring: copied part"),
                landed.get(p_copied).unwrap(),
                s_new,
            );
            check_all_eq(
                &format_args!("ring: memset part"),
                landed.get(p_set).unwrap(),
                bits,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_batch_upload_lands_after_work_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    for batch_api in [true, false] {
        // Pinned beforehand, so the batch is queued while the work before it still runs.
        let mut staging = StagingBuffer::with_capacity(MIB).unwrap();
        staging
            .set_config(StagingConfig {
                batch_api,
                ..staging.config()
            })
            .expect("set_config");
        let len = 4 * MIB;
        let (n_a, n_b) = (150_528 / 4, 1000);
        let (s_a, s_b) = (seed(), seed());
        let (bits_a, bits_b) = (0x3C3C_0000 | (seed() as u32 & 0xFFFF), 0x7E7E_0001);
        let mut a = DeviceBuffer::<u32>::alloc(len).unwrap();
        let mut b = DeviceBuffer::<f32>::alloc(len).unwrap();
        let (src_a, src_b) = (pattern::<u32>(n_a, s_a), pattern::<f32>(n_b, s_b));
        busy.queue(&stream);
        stream.memset_u32(&mut a, bits_a).unwrap();
        stream.memset_u32(&mut b, bits_b).unwrap();
        {
            let mut batch = UploadBatch::new();
            batch.add(&mut a, &src_a).unwrap();
            batch.add(&mut b, &src_b).unwrap();
            staging.upload_batch(&mut batch, &stream).unwrap();
        }
        let back = device_contents(&a);
        check(&format_args!("uploaded part a"), &back[..n_a], s_a);
        check_all_eq(&format_args!("memset past part a"), &back[n_a..], bits_a);
        let back = device_contents(&b);
        check(&format_args!("uploaded part b"), &back[..n_b], s_b);
        check_all_eq(
            &format_args!("memset past part b"),
            &back[n_b..],
            f32::from_bits(bits_b),
        );
    }
}

// ---------------------------------------------------------------------------------
// limits and bad input
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_17th_part_is_refused_and_the_16_go_through() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let step = 100;

    // Sixteen prefixes of one buffer: one device buffer in every part.
    let s = seed();
    let shared = device_with::<u8>(MAX_BATCH_PARTS * step + 1, s);
    let mut batch = DownloadBatch::new();
    let parts: Vec<Part<u8>> = (1..=MAX_BATCH_PARTS)
        .map(|i| batch.add(&shared, i * step).unwrap())
        .collect();
    let region = batch.region_bytes();
    let sizes: Vec<usize> = (1..=MAX_BATCH_PARTS).map(|i| i * step).collect();
    assert_eq!(region, region_bytes(&sizes));
    let e = batch.add(&shared, 1).unwrap_err();
    assert!(e.to_string().contains("at most 16 parts"), "{e}");
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    assert_eq!(
        (batch.len(), batch.region_bytes()),
        (16, region),
        "unchanged"
    );
    for batch_api in [true, false] {
        staging
            .set_config(StagingConfig {
                batch_api,
                ..staging.config()
            })
            .expect("set_config");
        let landed = staging.download_batch(&batch, &stream).unwrap();
        for (i, &p) in parts.iter().enumerate() {
            check(&format_args!("part {i}"), landed.get(p).unwrap(), s);
        }
    }
    let t = ring.download_batch(&batch, &stream).unwrap();
    let landed = ring.wait(&t).unwrap();
    for (i, &p) in parts.iter().enumerate() {
        check(&format_args!("ring part {i}"), landed.get(p).unwrap(), s);
    }

    // Sixteen device buffers up, a seventeenth refused.
    let seeds: Vec<u64> = (0..=MAX_BATCH_PARTS).map(|_| seed()).collect();
    let s_rest = seed();
    let srcs: Vec<Vec<u8>> = seeds.iter().map(|&s| pattern(step, s)).collect();
    let mut dsts: Vec<DeviceBuffer<u8>> = (0..=MAX_BATCH_PARTS)
        .map(|_| device_with(step, s_rest))
        .collect();
    {
        let (first, last) = dsts.split_at_mut(MAX_BATCH_PARTS);
        let mut batch = UploadBatch::new();
        for (d, src) in first.iter_mut().zip(&srcs) {
            batch.add(d, src).unwrap();
        }
        let e = batch.add(&mut last[0], &srcs[MAX_BATCH_PARTS]).unwrap_err();
        assert!(e.to_string().contains("at most 16 parts"), "{e}");
        assert_eq!(batch.len(), MAX_BATCH_PARTS);
        staging.upload_batch(&mut batch, &stream).unwrap();
    }
    for (i, (d, &s)) in dsts.iter().zip(&seeds).enumerate().take(MAX_BATCH_PARTS) {
        check(&format_args!("uploaded part {i}"), &device_contents(d), s);
    }
    check(
        &format_args!("the refused 17th buffer"),
        &device_contents(&dsts[MAX_BATCH_PARTS]),
        s_rest,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_part_past_its_buffer_is_refused_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 4096;
    let s = seed();
    let floats = device_with::<f32>(len, s);
    let bytes = device_with::<u8>(len, seed());

    let mut batch = DownloadBatch::new();
    let good = batch.add(&floats, len).unwrap();
    let region = batch.region_bytes();
    assert_eq!(
        batch.add(&bytes, len + 1).unwrap_err(),
        Error::ExceedsDeviceBuffer {
            op: "DownloadBatch::add",
            n: len + 1,
            len
        }
    );
    let e = batch.add(&floats, usize::MAX).unwrap_err();
    assert!(
        matches!(
            e,
            Error::SizeOverflow {
                n: usize::MAX,
                elem_bytes: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        (batch.len(), batch.region_bytes()),
        (1, region),
        "unchanged"
    );
    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(staging.capacity(), 0, "adding parts pins nothing");
    let landed = staging.download_batch(&batch, &stream).unwrap();
    check(
        &format_args!("the part that was accepted"),
        landed.get(good).unwrap(),
        s,
    );

    let s_rest = seed();
    let mut dst = device_with::<f32>(len, s_rest);
    let too_long = pattern::<f32>(len + 1, seed());
    let mut up = UploadBatch::new();
    assert_eq!(
        up.add(&mut dst, &too_long).unwrap_err(),
        Error::ExceedsDeviceBuffer {
            op: "UploadBatch::add",
            n: len + 1,
            len
        }
    );
    assert_eq!(up.len(), 0);
    let before = staging.stats();
    staging.upload_batch(&mut up, &stream).unwrap();
    assert_eq!(staging.stats(), before, "an empty batch counts nothing");
    drop(up);
    check(
        &format_args!("device after a refused part"),
        &device_contents(&dst),
        s_rest,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_part_of_another_batch_is_refused() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let s = seed();
    let d = device_with::<u32>(1024, s);
    let mut a = DownloadBatch::new();
    let mut b = DownloadBatch::new();
    // The same buffer and length in both: only the batch differs.
    let part_a = a.add(&d, 1024).unwrap();
    let part_b = b.add(&d, 1024).unwrap();
    {
        let landed = staging.download_batch(&a, &stream).unwrap();
        let reason = invalid_reason(landed.get(part_b).unwrap_err());
        assert!(reason.contains("another batch"), "{reason}");
        check(&format_args!("own part"), landed.get(part_a).unwrap(), s);
    }
    let t = ring.download_batch(&b, &stream).unwrap();
    let landed = ring.wait(&t).unwrap();
    let reason = invalid_reason(landed.get(part_a).unwrap_err());
    assert!(reason.contains("another batch"), "{reason}");
    check(
        &format_args!("ring: own part"),
        landed.get(part_b).unwrap(),
        s,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_empty_batch_does_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let d = device_with::<f32>(100, seed());

    let empty = DownloadBatch::new();
    staging.download_batch(&empty, &stream).unwrap();
    staging
        .upload_batch(&mut UploadBatch::new(), &stream)
        .unwrap();
    let t = ring.download_batch(&empty, &stream).unwrap();
    ring.wait(&t).unwrap();

    // Parts of zero elements make an empty region too.
    let mut zeros = DownloadBatch::new();
    let p = zeros.add(&d, 0).unwrap();
    let q = zeros.add(&d, 0).unwrap();
    assert_eq!((zeros.len(), zeros.region_bytes()), (2, 0));
    assert!(p.is_empty() && q.is_empty());
    staging.download_batch(&zeros, &stream).unwrap();
    let t = ring.download_batch(&zeros, &stream).unwrap();
    ring.wait(&t).unwrap();

    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(staging.capacity(), 0);
    assert_eq!(ring.stats(), Default::default());
    assert_eq!(ring.capacity(), 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_part_of_zero_elements_reads_as_an_empty_slice() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let s = seed();
    let d = device_with::<f32>(100, s);

    // Only empty parts: the region is empty.
    let mut zeros = DownloadBatch::new();
    let p = zeros.add(&d, 0).unwrap();
    {
        let landed = staging.download_batch(&zeros, &stream).unwrap();
        assert_eq!(landed.get(p).unwrap(), &[] as &[f32], "staging");
    }
    let t = ring.download_batch(&zeros, &stream).unwrap();
    assert_eq!(
        ring.wait(&t).unwrap().get(p).unwrap(),
        &[] as &[f32],
        "ring"
    );

    // An empty part beside others.
    let mut mixed = DownloadBatch::new();
    let empty = mixed.add(&d, 0).unwrap();
    let full = mixed.add(&d, 100).unwrap();
    let landed = staging.download_batch(&mixed, &stream).unwrap();
    assert_eq!(landed.get(empty).unwrap(), &[] as &[f32]);
    check(
        &format_args!("the part beside"),
        landed.get(full).unwrap(),
        s,
    );
}

// ---------------------------------------------------------------------------------
// counters
// ---------------------------------------------------------------------------------

/// Sizes that leave gaps between parts in the region: 4095 u8, 1001 3-byte elements (3003 B),
/// 3 f32 (12 B), 1 u8.
const ODD: (usize, usize, usize, usize) = (4095, 1001, 3, 1);
/// Bytes of the parts of [`ODD`].
const ODD_BYTES: [usize; 4] = [ODD.0, ODD.1 * 3, ODD.2 * 4, ODD.3];

/// Downloads the four parts of [`ODD`] through `staging` (batch API on, then off) and
/// `ring`, uploads the first two through `staging`, and checks every element.
fn odd_sizes(staging: &mut StagingBuffer, ring: &mut StagingRing, stream: &Stream) {
    let (n_b, n_r, n_f, n_one) = ODD;
    let seeds = [seed(), seed(), seed(), seed()];
    let bytes = device_with::<u8>(n_b, seeds[0]);
    let rgb = device_with::<[u8; 3]>(n_r, seeds[1]);
    let floats = device_with::<f32>(n_f, seeds[2]);
    let one = device_with::<u8>(n_one, seeds[3]);
    let mut batch = DownloadBatch::new();
    let parts = (
        batch.add(&bytes, n_b).unwrap(),
        batch.add(&rgb, n_r).unwrap(),
        batch.add(&floats, n_f).unwrap(),
        batch.add(&one, n_one).unwrap(),
    );
    assert_eq!(batch.region_bytes(), region_bytes(&ODD_BYTES));
    assert!(
        batch.region_bytes() > ODD_BYTES.iter().sum(),
        "the parts leave gaps"
    );
    let check_parts = |what: &str, landed: &Landed<'_>| {
        check(
            &format_args!("{what}: u8"),
            landed.get(parts.0).unwrap(),
            seeds[0],
        );
        check(
            &format_args!("{what}: rgb"),
            landed.get(parts.1).unwrap(),
            seeds[1],
        );
        check(
            &format_args!("{what}: f32"),
            landed.get(parts.2).unwrap(),
            seeds[2],
        );
        check(
            &format_args!("{what}: one"),
            landed.get(parts.3).unwrap(),
            seeds[3],
        );
    };
    for batch_api in [true, false] {
        staging
            .set_config(StagingConfig {
                batch_api,
                ..staging.config()
            })
            .expect("set_config");
        check_parts("staging", &staging.download_batch(&batch, stream).unwrap());
    }
    let t = ring.download_batch(&batch, stream).unwrap();
    check_parts("ring", &ring.wait(&t).unwrap());

    let mut up_bytes = DeviceBuffer::<u8>::alloc(n_b).unwrap();
    let mut up_rgb = DeviceBuffer::<[u8; 3]>::alloc(n_r).unwrap();
    let s_up = [seed(), seed()];
    let (src_b, src_r) = (
        pattern::<u8>(n_b, s_up[0]),
        pattern::<[u8; 3]>(n_r, s_up[1]),
    );
    {
        let mut up = UploadBatch::new();
        up.add(&mut up_bytes, &src_b).unwrap();
        up.add(&mut up_rgb, &src_r).unwrap();
        staging.upload_batch(&mut up, stream).unwrap();
    }
    check(
        &format_args!("uploaded u8"),
        &device_contents(&up_bytes),
        s_up[0],
    );
    check(
        &format_args!("uploaded rgb"),
        &device_contents(&up_rgb),
        s_up[1],
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn parts_of_odd_sizes_land_intact() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    odd_sizes(&mut staging, &mut ring, &stream);
    let st = staging.stats();
    assert_eq!((st.batched_transfers, st.transfers()), (3, 3), "{st:?}");
    assert_eq!(ring.stats().downloads, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn batch_counters_add_the_parts_bytes_not_the_gaps_between_them() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    odd_sizes(&mut staging, &mut ring, &stream);
    // "Bytes moved": the parts' bytes. The region's gaps (it is 7425 bytes for
    // 7111 bytes of parts) are not moved.
    let parts: u64 = ODD_BYTES.iter().sum::<usize>() as u64;
    let st = staging.stats();
    assert_eq!(st.bytes_downloaded, 2 * parts, "{st:?}");
    assert_eq!(
        st.bytes_uploaded,
        (ODD_BYTES[0] + ODD_BYTES[1]) as u64,
        "{st:?}"
    );
    let rs = ring.stats();
    assert_eq!(rs.bytes_downloaded, parts, "{rs:?}");
}

// ---------------------------------------------------------------------------------
// views at offsets
// ---------------------------------------------------------------------------------

/// Elements of one frame of the `[4, FRAME]` tensors below.
const FRAME: usize = 1000;

/// The parts of [`views_download`]'s batch: two frames of one tensor (the second a
/// prefix of its view), a view at an odd byte offset of another buffer, and the
/// whole tensor beside its own views.
struct ViewParts {
    f1: Part<f32>,
    f3: Part<f32>,
    odd: Part<u8>,
    whole: Part<f32>,
}

fn check_view_parts(what: &str, landed: &Landed<'_>, p: &ViewParts, seeds: (u64, u64)) {
    let (s_t, s_b) = seeds;
    check_at(
        &format_args!("{what}: frame 1"),
        landed.get(p.f1).unwrap(),
        FRAME,
        s_t,
    );
    check_at(
        &format_args!("{what}: frame 3 prefix"),
        landed.get(p.f3).unwrap(),
        3 * FRAME,
        s_t,
    );
    check_at(
        &format_args!("{what}: odd offset"),
        landed.get(p.odd).unwrap(),
        4097,
        s_b,
    );
    check(
        &format_args!("{what}: whole tensor"),
        landed.get(p.whole).unwrap(),
        s_t,
    );
}

fn views_download(batch_api: bool) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            batch_api,
            ..staging.config()
        })
        .expect("set_config");
    let mut ring = StagingRing::new();
    let (s_t, s_b) = (seed(), seed());
    let tensor = device_with::<f32>(4 * FRAME, s_t);
    let bytes = device_with::<u8>(10_000, s_b);
    let f1 = tensor.slice(FRAME..2 * FRAME).unwrap();
    let f3 = tensor.slice(3 * FRAME..).unwrap();
    let odd = bytes.slice(4097..).unwrap();

    let mut batch = DownloadBatch::new();
    let parts = ViewParts {
        f1: batch.add(&f1, FRAME).unwrap(),
        f3: batch.add(&f3, 500).unwrap(),
        odd: batch.add(&odd, 3333).unwrap(),
        whole: batch.add(&tensor, 4 * FRAME).unwrap(),
    };
    // A part past its view (though inside its buffer) is refused and adds nothing.
    let e = batch.add(&f1, FRAME + 1).unwrap_err();
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "DownloadBatch::add",
            n: FRAME + 1,
            len: FRAME
        }
    );
    assert_eq!(batch.len(), 4);
    assert_eq!(
        batch.region_bytes(),
        region_bytes(&[FRAME * 4, 500 * 4, 3333, 4 * FRAME * 4])
    );

    for round in 0..2 {
        let what = format!("batch api {batch_api}, round {round}");
        let landed = staging.download_batch(&batch, &stream).unwrap();
        check_view_parts(&what, &landed, &parts, (s_t, s_b));
        let bt = ring.download_batch(&batch, &stream).unwrap();
        let landed = ring.wait(&bt).unwrap();
        check_view_parts(&format!("ring, {what}"), &landed, &parts, (s_t, s_b));
    }
    let sum = (FRAME * 4 + 500 * 4 + 3333 + 4 * FRAME * 4) as u64;
    let st = staging.stats();
    assert_eq!(
        (st.batched_transfers, st.bytes_downloaded),
        (2, 2 * sum),
        "{st:?}"
    );
    assert_eq!(ring.stats().bytes_downloaded, 2 * sum);
    // Read, never written.
    check(
        "tensor after batch downloads",
        &device_contents(&tensor),
        s_t,
    );
    check("bytes after batch downloads", &device_contents(&bytes), s_b);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_at_offsets_download_as_one_batch() {
    views_download(true);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_at_offsets_download_as_one_copy_per_part_without_the_batch_api() {
    views_download(false);
}

fn views_upload(batch_api: bool) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            batch_api,
            ..staging.config()
        })
        .expect("set_config");
    let (s_a, s_b) = (seed(), seed());
    let mut tensor = device_with::<f32>(4 * FRAME, s_a);
    let mut bytes = device_with::<u8>(10_000, s_b);

    {
        // A part longer than its view (though not than its buffer) is refused.
        let long = pattern::<f32>(11, seed());
        let mut v = tensor.slice_mut(4 * FRAME - 10..).unwrap();
        let mut batch = UploadBatch::new();
        let e = batch.add(&mut v, &long).unwrap_err();
        assert_eq!(
            e,
            Error::ExceedsDeviceBuffer {
                op: "UploadBatch::add",
                n: 11,
                len: 10
            }
        );
        assert!(batch.is_empty());
    }

    for round in 0..3 {
        let (s1, s2) = (seed(), seed());
        // Frame 2 of the tensor (all but its last 7 elements), and 3333 bytes at an
        // odd offset of the other buffer.
        let src1 = pattern::<f32>(FRAME - 7, s1);
        let src2 = pattern::<u8>(3333, s2);
        {
            let mut frame2 = tensor.slice_mut(2 * FRAME..3 * FRAME).unwrap();
            let mut odd = bytes.slice_mut(4097..).unwrap();
            let mut batch = UploadBatch::new();
            batch.add(&mut frame2, &src1).unwrap();
            batch.add(&mut odd, &src2).unwrap();
            assert_eq!(batch.len(), 2);
            staging.upload_batch(&mut batch, &stream).unwrap();
        }
        check_regions(
            &format_args!("tensor, batch api {batch_api}, round {round}"),
            &device_contents(&tensor),
            s_a,
            &[(2 * FRAME, FRAME - 7, s1)],
        );
        check_regions(
            &format_args!("bytes, batch api {batch_api}, round {round}"),
            &device_contents(&bytes),
            s_b,
            &[(4097, 3333, s2)],
        );
    }
    let st = staging.stats();
    let sum = ((FRAME - 7) * 4 + 3333) as u64;
    assert_eq!(
        (st.batched_transfers, st.bytes_uploaded, st.allocations),
        (3, 3 * sum, 1),
        "{st:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_at_offsets_upload_as_one_batch() {
    views_upload(true);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_at_offsets_upload_as_one_copy_per_part_without_the_batch_api() {
    views_upload(false);
}
