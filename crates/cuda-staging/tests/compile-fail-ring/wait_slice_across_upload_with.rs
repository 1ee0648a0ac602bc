// A slice from `StagingRing::wait` kept across the next `upload_with`, whose `fill`
// may write the same slot, must not compile.

use cuda_staging::{DeviceBuffer, Result, StagingRing, Stream};

fn frame(
    ring: &mut StagingRing,
    input: &mut DeviceBuffer<f32>,
    output: &DeviceBuffer<f32>,
    s: &Stream,
) -> Result<f32> {
    let t = ring.download(output, 4, s)?;
    let scores = ring.wait(&t)?;
    ring.upload_with(input, 4, s, |px| px.fill(1.0))?;
    Ok(scores[0])
}

fn main() {
    let _ = frame;
}
