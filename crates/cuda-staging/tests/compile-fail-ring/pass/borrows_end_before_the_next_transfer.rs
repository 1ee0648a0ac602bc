// The code of the compile-fail cases beside this folder, written correctly: every
// borrowed slice is used before the next transfer. Compiles; `main` calls nothing.

use cuda_staging::{DeviceBuffer, DownloadBatch, Result, StagingBuffer, StagingRing, Stream};

fn ring_frame(
    ring: &mut StagingRing,
    input: &mut DeviceBuffer<f32>,
    output: &DeviceBuffer<f32>,
    s: &Stream,
) -> Result<f32> {
    let t = ring.download(output, 4, s)?;
    let first = ring.wait(&t)?[0];
    ring.upload_with(input, 4, s, |px| px.fill(first))?;
    let next = ring.download(output, 4, s)?;
    let mut batch = DownloadBatch::new();
    let b = batch.add(output, 4)?;
    let bt = ring.download_batch(&batch, s)?;
    let landed = ring.wait(&bt)?;
    // Two shared borrows of the ring at once are fine.
    Ok(landed.get(b)?[0] + ring.wait(&next)?[0])
}

fn staging_frame(
    staging: &mut StagingBuffer,
    boxes: &DeviceBuffer<f32>,
    input: &mut DeviceBuffer<f32>,
    s: &Stream,
) -> Result<f32> {
    let mut batch = DownloadBatch::new();
    let b = batch.add(boxes, 4)?;
    let first = staging.download_batch(&batch, s)?.get(b)?[0];
    staging.upload_with(input, 4, s, |px| px.fill(first))?;
    Ok(first)
}

fn main() {
    let _ = ring_frame;
    let _ = staging_frame;
}
