//! Calibration measures both directions and keeps the counters.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn calibrate_measures_both_directions_and_keeps_counters() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 37_632;
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    staging
        .upload(&mut dev, &pattern(n, seed()), &stream)
        .expect("upload");
    let mut host = vec![0.0f32; n];
    staging
        .download(&mut host, &dev, &stream)
        .expect("download");
    let before = staging.stats();

    let cal = staging.calibrate(&stream).expect("calibrate");
    eprintln!("calibration: {cal:#?}");

    for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
        let samples: Vec<_> = cal
            .samples
            .iter()
            .filter(|s| s.direction == direction)
            .collect();
        assert!(!samples.is_empty(), "{direction:?}: no samples");
        for s in &samples {
            assert!(
                s.staged_us.is_finite() && s.staged_us > 0.0,
                "{direction:?} {s:?}"
            );
            assert!(
                s.pageable_us.is_finite() && s.pageable_us > 0.0,
                "{direction:?} {s:?}"
            );
        }
        let threshold = match direction {
            Direction::HostToDevice => cal.upload_stage_max_bytes,
            Direction::DeviceToHost => cal.download_stage_max_bytes,
        };
        assert!(
            threshold == usize::MAX
                || threshold == 0
                || samples.iter().any(|s| s.bytes == threshold),
            "{direction:?}: threshold {threshold} is none of MAX, 0 or a timed size"
        );
        assert_eq!(staging.config().stage_max_bytes.get(direction), threshold);
        let lower = match direction {
            Direction::HostToDevice => cal.upload_stage_min_bytes,
            Direction::DeviceToHost => cal.download_stage_min_bytes,
        };
        assert!(
            lower == 0 || samples.iter().any(|s| s.bytes == lower),
            "{direction:?}: lower bound {lower} is neither 0 nor a timed size"
        );
        assert!(
            lower <= threshold,
            "{direction:?}: bounds {lower}..={threshold}"
        );
        assert_eq!(staging.config().stage_min_bytes.get(direction), lower);
    }

    let after = staging.stats();
    assert_eq!(
        transfer_counters(&after),
        transfer_counters(&before),
        "calibration must not show in the transfer counters"
    );
    // The staged runs grew the pinned buffer from the 192 KiB the 150528-byte
    // transfers pinned to the 8 MiB window, by the growth policy (at least the
    // request, at least 1.5x, in 64 KiB steps): 256 KiB pins 320 KiB, then 1, 4 and
    // 8 MiB (16 MiB streams through the window). Those four allocations are counted.
    assert_eq!(before.allocations, 1, "{before:?}");
    assert_eq!(
        after.allocations,
        before.allocations + 4,
        "calibration's pinned allocations: {before:?} -> {after:?}"
    );
    assert_eq!(staging.capacity(), PIPELINE_WINDOW_BYTES);
    assert_eq!(after.peak_capacity_bytes, PIPELINE_WINDOW_BYTES);

    // Transfers still work, on whatever route calibration chose.
    for bytes in [150_528, 4_915_200] {
        let n = bytes / 4;
        let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let s = seed();
        staging
            .upload(&mut dev, &pattern(n, s), &stream)
            .expect("upload after calibrate");
        check("upload after calibrate", &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<f32>(n, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download after calibrate");
        check("download after calibrate", &host, s);
    }
}
