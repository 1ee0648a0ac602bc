// A slice from `StagingRing::wait` lives in a slot of the ring; keeping it across the
// next `download` (which may reuse that slot) must not compile.

use cuda_staging::{DeviceBuffer, Result, StagingRing, Stream};

fn frame(ring: &mut StagingRing, d: &DeviceBuffer<f32>, s: &Stream) -> Result<f32> {
    let t = ring.download(d, 4, s)?;
    let scores = ring.wait(&t)?;
    let next = ring.download(d, 4, s)?;
    let first = scores[0];
    drop(next);
    Ok(first)
}

fn main() {
    let _ = frame;
}
