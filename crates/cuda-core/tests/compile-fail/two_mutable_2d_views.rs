// Two writable 2-D views of one DeviceBuffer alive at once: their rows could
// interleave, and each could be written on a different stream.
use cuda_core::{Context, DeviceBuffer, DeviceView2dMut, PinnedBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let host = PinnedBuffer::<u8>::alloc(64 * 8)?;
    let mut dev = DeviceBuffer::<u8>::alloc(128 * 8)?;
    let mut even = DeviceView2dMut::new(&mut dev, 64, 8, 128)?;
    let mut odd = DeviceView2dMut::new(&mut dev, 64, 8, 128)?;
    stream.memcpy_2d_htod(&host, 64, &mut even)?;
    stream.memcpy_2d_htod(&host, 64, &mut odd)?;
    Ok(())
}
