// A device view used after its DeviceBuffer is dropped: a queued copy would write
// freed device memory.
use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let pinned = PinnedBuffer::<u8>::alloc(4096)?;
    let mut dev = DeviceBuffer::<u8>::alloc(4096)?;
    let mut view = dev.slice_mut(..16)?;
    drop(dev);
    stream.memcpy_htod(&pinned.slice(..16)?, &mut view)?;
    Ok(())
}
