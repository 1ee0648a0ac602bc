//! Prefixes: moving fewer elements than the device buffer holds leaves the rest
//! untouched.

use super::*;

fn prefix_case(label: &str, staging: &mut StagingBuffer, stream: &Stream, len: usize, n: usize) {
    let what = format!("{label}: {n} of {len} f32");
    let sentinel = seed();
    let mut dev = device_with::<f32>(len, sentinel);

    // upload_with of a prefix.
    let s = seed();
    staging
        .upload_with(&mut dev, n, stream, |d| {
            assert_eq!(d.len(), n);
            fill_pattern(d, s)
        })
        .expect("upload_with");
    let back = device_contents(&dev);
    check(&format!("upload_with {what}: prefix"), &back[..n], s);
    check_at(
        &format!("upload_with {what}: rest"),
        &back[n..],
        n,
        sentinel,
    );

    // upload of a shorter slice.
    set_device(&mut dev, sentinel);
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), stream)
        .expect("upload");
    let back = device_contents(&dev);
    check(&format!("upload {what}: prefix"), &back[..n], s);
    check_at(&format!("upload {what}: rest"), &back[n..], n, sentinel);

    // download_into / download of a prefix: exactly src[..n], device unchanged.
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, stream)
        .expect("download_into");
    assert_eq!(got.len(), n);
    check(&format!("download_into {what}"), got, s);
    let mut host = pattern::<f32>(n, seed());
    staging.download(&mut host, &dev, stream).expect("download");
    check(&format!("download {what}"), &host, s);
    check(
        &format!("{what}: device after downloads"),
        &device_contents(&dev),
        s,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_transfers_leave_the_rest_untouched() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut pageable = staged_buffer();
    pageable.set_auto_stage_max_bytes(0);
    // (len, n): single piece, pipelined, pipelined past the window, one element.
    for (len, n) in [
        (50_000, 37_632),
        (1_228_800, 1_228_799),
        (1_228_800, 300_001),
        (3 * MIB, 2 * MIB + 3),
        (1000, 1),
    ] {
        prefix_case("default routing", &mut staging, &stream, len, n);
        prefix_case("pageable routing", &mut pageable, &stream, len, n);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_from_a_page_locked_slice_leaves_the_rest_untouched() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let (len, n) = (1_228_800, 37_632);
    let sentinel = seed();
    let mut dev = device_with::<f32>(len, sentinel);
    let s = seed();
    let mut src = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");
    fill_pattern(&mut src, s);
    let before = staging.stats();
    staging.upload(&mut dev, &src, &stream).expect("upload");
    assert_counted(
        "pinned prefix",
        before,
        staging.stats(),
        Route::PinnedSource,
        n * 4,
        0,
    );
    let back = device_contents(&dev);
    check("pinned prefix upload", &back[..n], s);
    check_at("pinned prefix upload: rest", &back[n..], n, sentinel);
}
