// A view used after its PinnedBuffer is dropped: the view would point into freed
// pinned memory.
use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let pinned = PinnedBuffer::<u8>::alloc(4096)?;
    let mut dev = DeviceBuffer::<u8>::alloc(4096)?;
    let view = pinned.slice(..16)?;
    drop(pinned);
    stream.memcpy_htod(&view, &mut dev)?;
    Ok(())
}
