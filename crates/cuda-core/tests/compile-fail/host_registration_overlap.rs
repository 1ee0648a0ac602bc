// Two registrations of overlapping memory alive at once: the second would fail in
// the driver, and dropping either would unregister memory the other still pins.
use cuda_core::{Context, HostRegistration};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let mut v = vec![0u32; 1024];
    let whole = HostRegistration::new(&ctx, &mut v[..])?;
    let tail = HostRegistration::new(&ctx, &mut v[512..])?;
    drop((whole, tail));
    Ok(())
}
