// Writing a PinnedBuffer (DerefMut) while a read-only view of it is alive: the view
// is the source of queued uploads, which would then read bytes being rewritten.
use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut pinned = PinnedBuffer::<f32>::alloc(1024)?;
    let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
    let view = pinned.slice(..512)?;
    stream.memcpy_htod(&view, &mut dev)?;
    pinned[0] = 1.0;
    stream.memcpy_htod(&view, &mut dev)?;
    Ok(())
}
