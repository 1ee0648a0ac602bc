// `Landed` from `StagingRing::wait_batch` lives in a slot of the ring; keeping it
// across the next `download` must not compile.

use cuda_staging::{DeviceBuffer, DownloadBatch, Result, StagingRing, Stream};

fn outputs(ring: &mut StagingRing, boxes: &DeviceBuffer<f32>, s: &Stream) -> Result<f32> {
    let mut batch = DownloadBatch::new();
    let b = batch.add(boxes, 4)?;
    let t = ring.download_batch(&batch, s)?;
    let landed = ring.wait(&t)?;
    let next = ring.download(boxes, 4, s)?;
    let first = landed.get(b)?[0];
    drop(next);
    Ok(first)
}

fn main() {
    let _ = outputs;
}
