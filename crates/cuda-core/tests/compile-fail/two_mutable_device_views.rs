// Two writable views of one DeviceBuffer alive at once: they could overlap, and
// each could be written on a different stream.
use cuda_core::{Context, DeviceBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
    let mut lo = dev.slice_mut(..512)?;
    let mut hi = dev.slice_mut(512..)?;
    stream.memset_zeros(&mut lo)?;
    stream.memset_zeros(&mut hi)?;
    Ok(())
}
