// A read-only view of a device buffer cannot be the destination of an upload: only
// `&mut buf` or a writable view (`buf.slice_mut`) are `DeviceSliceMut`, so nothing
// else can read or write that memory while the copy into it is queued.
use cuda_staging::{DeviceBuffer, StagingBuffer, Stream};

fn upload_frame(
    staging: &mut StagingBuffer,
    batch: &DeviceBuffer<f32>,
    stream: &Stream,
) -> cuda_staging::Result<()> {
    let mut slot = batch.slice(1000..2000)?;
    staging.upload(&mut slot, &[0.5; 1000], stream)
}

fn main() {
    let _ = upload_frame;
}
