// The slice `download_into` returns shows the staging buffer's pinned memory; the
// next transfer overwrites that memory, so the slice must not outlive it.
use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};

fn main() -> cuda_staging::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut staging = StagingBuffer::new();
    let logits = DeviceBuffer::<f32>::alloc(1000)?;
    let mut input = DeviceBuffer::<f32>::alloc(1000)?;

    let scores = staging.download_into(&logits, 1000, &stream)?;
    staging.upload(&mut input, &[0.5; 1000], &stream)?;
    println!("best score {}", scores[0]);
    Ok(())
}
