// A queued copy from a registration of a local Vec: `mem::forget(reg)` would end the
// borrow while the copy still reads the Vec. Queued copies take only registrations
// of `'static` memory; borrowed ones go through the `_sync` copies.
use cuda_core::{Context, DeviceBuffer, HostRegistration, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let mut v = vec![1.0f32; 1024];
    let reg = HostRegistration::new(&ctx, &mut v[..])?;
    let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
    stream.memcpy_htod(&reg, &mut dev)?;
    drop(reg);
    Ok(())
}
