// A queued copy from an ordinary Vec: nothing would stop the caller from freeing or
// writing it while the copy runs. Queued copies take only page-locked memory that
// records its queued work.
use cuda_core::{Context, DeviceBuffer, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let host = vec![1.0f32; 1024];
    let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
    stream.memcpy_htod(&host, &mut dev)?;
    Ok(())
}
