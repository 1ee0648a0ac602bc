// The slice `fill` gets is a slot of pinned memory that the queued DMA reads after
// `upload_with` returns; it must not escape the closure.

use cuda_staging::{DeviceBuffer, Result, StagingRing, Stream};

fn upload(ring: &mut StagingRing, d: &mut DeviceBuffer<f32>, s: &Stream) -> Result<()> {
    let mut kept: Option<&mut [f32]> = None;
    ring.upload_with(d, 4, s, |px| kept = Some(px))?;
    // Would write the slot while its DMA is in flight.
    if let Some(px) = kept {
        px[0] = 2.0;
    }
    Ok(())
}

fn main() {
    let _ = upload;
}
