//! Every 2-D entry point of `StagingBuffer` moves every row, leaves every padding
//! byte alone, and counts one staged transfer of the rows' bytes.

use super::*;
use cuda_staging::StagingConfig;

/// One round of the four calls on one surface and host pitch: each moves a pattern
/// of its own, checked row by row and padding byte by padding byte, and counted.
fn four_calls<T: Pattern>(
    what: &str,
    staging: &mut cuda_staging::StagingBuffer,
    surface: &mut Surface<T>,
    host_pitch: usize,
    stream: &Stream,
) {
    let device = surface.layout();
    let width = device.row_bytes() / std::mem::size_of::<T>();
    let host = Layout2d::new::<T>("test", "host", width, device.height(), host_pitch)
        .expect("host layout");
    let bytes = device.packed_bytes();

    // upload_2d: padded (or packed) host rows to the device's rows.
    let rows = rows_of(bytes, seed());
    let src = host_with::<T>(&host, 3, &rows);
    let before = staging.stats();
    with_region!(surface, |r| staging.upload_2d(r, &src, host_pitch, stream))
        .unwrap_or_else(|e| panic!("{what}: upload_2d: {e}"));
    assert_counted(
        &format!("{what}: upload_2d"),
        before,
        staging.stats(),
        Route::Staged,
        bytes,
        0,
    );
    surface.check(&format!("{what}: device after upload_2d"), stream, &rows);
    check_rows_and_padding(
        &format!("{what}: the host source after upload_2d"),
        bytemuck::cast_slice(&src),
        &host,
        &rows,
    );

    // download_2d: the device's rows to padded host rows.
    let rows = rows_of(bytes, seed());
    surface.set_rows(stream, &rows);
    let mut dst = host_with::<T>(&host, 5, &[]);
    let before = staging.stats();
    with_region!(surface, |r| staging
        .download_2d(&mut dst, host_pitch, &*r, stream))
    .unwrap_or_else(|e| panic!("{what}: download_2d: {e}"));
    assert_counted(
        &format!("{what}: download_2d"),
        before,
        staging.stats(),
        Route::Staged,
        0,
        bytes,
    );
    check_rows_and_padding(
        &format!("{what}: host after download_2d"),
        bytemuck::cast_slice(&dst),
        &host,
        &rows,
    );
    surface.check(&format!("{what}: device after download_2d"), stream, &rows);

    // upload_2d_with: packed rows written straight into pinned memory.
    let rows = rows_of(bytes, seed());
    surface.set_rows(stream, &[]);
    let before = staging.stats();
    let mut filled = 0;
    with_region!(surface, |r| staging.upload_2d_with(
        r,
        stream,
        |px: &mut [T]| {
            filled = px.len();
            fill_rows(px, &rows);
        }
    ))
    .unwrap_or_else(|e| panic!("{what}: upload_2d_with: {e}"));
    assert_eq!(
        filled,
        width * device.height(),
        "{what}: fill gets width * height"
    );
    assert_counted(
        &format!("{what}: upload_2d_with"),
        before,
        staging.stats(),
        Route::Staged,
        bytes,
        0,
    );
    surface.check(
        &format!("{what}: device after upload_2d_with"),
        stream,
        &rows,
    );

    // download_2d_into: the device's rows, packed, in pinned memory.
    let rows = rows_of(bytes, seed());
    surface.set_rows(stream, &rows);
    let before = staging.stats();
    let got: Vec<T> = with_region!(surface, |r| staging.download_2d_into(&*r, stream))
        .unwrap_or_else(|e| panic!("{what}: download_2d_into: {e}"))
        .to_vec();
    assert_counted(
        &format!("{what}: download_2d_into"),
        before,
        staging.stats(),
        Route::Staged,
        0,
        bytes,
    );
    check_packed(&format!("{what}: download_2d_into"), &got, &rows);
    surface.check(
        &format!("{what}: device after download_2d_into"),
        stream,
        &rows,
    );
}

fn every_call_at_odd_widths<T: Pattern>(tag: &str) {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    for kind in KINDS {
        for width in WIDTHS {
            for height in HEIGHTS {
                let mut surface = Surface::<T>::new(kind, width, height, &stream);
                for host_pitch in host_pitches(width * std::mem::size_of::<T>()) {
                    let what = format!(
                        "{tag} {kind:?}: {width} x {height}, host pitch {host_pitch}, device \
                         pitch {}",
                        surface.layout().pitch_bytes()
                    );
                    four_calls(&what, &mut staging, &mut surface, host_pitch, &stream);
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_2d_call_moves_every_row_and_leaves_padding_u8() {
    every_call_at_odd_widths::<u8>("u8");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_2d_call_moves_every_row_and_leaves_padding_f32() {
    every_call_at_odd_widths::<f32>("f32");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn every_2d_call_moves_every_row_and_leaves_padding_rgb() {
    every_call_at_odd_widths::<[u8; 3]>("rgb");
}

/// A 1920x1080 RGB frame: host rows packed (5760 bytes, one copy split over the copy
/// pool, streaming stores) and padded (5824 bytes, row by row), into a surface at the
/// driver's pitch; as `[u8; 3]` pixels and as `u8` bytes.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_full_hd_rgb_frame_moves_whole_at_either_host_pitch() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            copy_threads: 4,
            ..staging.config()
        })
        .expect("set_config");
    let mut pixels = Surface::<[u8; 3]>::new(Kind::Pitched, 1920, 1080, &stream);
    let mut bytes = Surface::<u8>::new(Kind::Pitched, 1920 * 3, 1080, &stream);
    for host_pitch in [5760, 5824] {
        for round in 0..2 {
            let what = format!("1920x1080 RGB pixels, host pitch {host_pitch}, round {round}");
            four_calls(&what, &mut staging, &mut pixels, host_pitch, &stream);
            let what = format!("1920x1080 RGB bytes, host pitch {host_pitch}, round {round}");
            four_calls(&what, &mut staging, &mut bytes, host_pitch, &stream);
        }
    }
    // The same shape every time: pinned once.
    assert_eq!(staging.stats().allocations, 1, "{:?}", staging.stats());
}

/// A loop of the same 2-D shapes pins once, and a larger frame grows the buffer
/// once more; rows over a linear buffer and a pitched surface share it.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_steady_loop_of_2d_frames_pins_once() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut small = Surface::<f32>::new(Kind::Linear { pad: 12 }, 641, 5, &stream);
    let mut large = Surface::<f32>::new(Kind::Pitched, 641, 300, &stream);
    for round in 0..20 {
        let what = format!("round {round}");
        four_calls(&what, &mut staging, &mut small, 641 * 4 + 64, &stream);
    }
    assert_eq!(staging.stats().allocations, 1, "{:?}", staging.stats());
    for round in 0..3 {
        let what = format!("large, round {round}");
        four_calls(&what, &mut staging, &mut large, 641 * 4 + 64, &stream);
    }
    assert_eq!(staging.stats().allocations, 2, "{:?}", staging.stats());
    assert!(staging.capacity() >= 641 * 4 * 300);
}
