// The pinned slice `upload_with` hands to `fill` is the staging buffer's memory,
// which the copy reads once `fill` returns: it must not escape `fill`.
use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};

fn main() -> cuda_staging::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut staging = StagingBuffer::new();
    let mut input = DeviceBuffer::<f32>::alloc(1000)?;

    let mut kept: Option<&mut [f32]> = None;
    staging.upload_with(&mut input, 1000, &stream, |pinned: &mut [f32]| {
        pinned.fill(0.5);
        kept = Some(pinned);
    })?;
    if let Some(pinned) = kept {
        pinned[0] = 1.0;
    }
    Ok(())
}
