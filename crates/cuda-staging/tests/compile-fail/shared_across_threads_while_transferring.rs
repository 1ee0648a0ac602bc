// A StagingBuffer can move to another thread, but its transfers take `&mut self`:
// while one thread transfers, no other thread may hold the buffer, even to read its
// counters.
use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};

fn main() -> cuda_staging::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut staging = StagingBuffer::new();
    let mut input = DeviceBuffer::<f32>::alloc(1000)?;
    let frame = vec![0.5f32; 1000];

    std::thread::scope(|s| {
        s.spawn(|| staging.upload(&mut input, &frame, &stream));
        s.spawn(|| println!("{:?}", staging.stats()));
    });
    Ok(())
}
