// `Landed` from `StagingBuffer::download_batch` borrows the staging buffer's pinned
// memory; keeping it across the next transfer must not compile.

use cuda_staging::{DeviceBuffer, DownloadBatch, Result, StagingBuffer, Stream};

fn outputs(
    staging: &mut StagingBuffer,
    boxes: &DeviceBuffer<f32>,
    input: &mut DeviceBuffer<f32>,
    s: &Stream,
) -> Result<f32> {
    let mut batch = DownloadBatch::new();
    let b = batch.add(boxes, 4)?;
    let landed = staging.download_batch(&batch, s)?;
    staging.upload_with(input, 4, s, |px| px.fill(1.0))?;
    Ok(landed.get(b)?[0])
}

fn main() {
    let _ = outputs;
}
