// The halves of DeviceBuffer::split_at_mut cannot overlap, and while either lives
// the buffer is borrowed: a second split (which could overlap the first) does not
// compile, and neither does using the buffer itself.
use cuda_core::{Context, DeviceBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
    let (mut lo, _) = dev.split_at_mut(600)?;
    let (_, mut hi) = dev.split_at_mut(400)?;
    stream.memset_zeros(&mut dev)?;
    stream.memset_zeros(&mut lo)?;
    stream.memset_zeros(&mut hi)?;
    Ok(())
}
