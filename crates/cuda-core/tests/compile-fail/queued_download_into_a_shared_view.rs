// A queued download into a read-only view: other shared views of the same memory
// could be read while the copy writes it.
use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let pinned = PinnedBuffer::<f32>::alloc(1024)?;
    let dev = DeviceBuffer::<f32>::alloc(1024)?;
    let mut view = pinned.slice(..512)?;
    stream.memcpy_dtoh(&dev, &mut view)?;
    Ok(())
}
