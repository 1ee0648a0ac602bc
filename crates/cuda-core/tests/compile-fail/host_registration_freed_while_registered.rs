// The registered Vec freed while its registration lives: the registration would
// unregister (and queued copies would use) freed memory.
use cuda_core::{Context, HostRegistration};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let mut v = vec![0u32; 1024];
    let reg = HostRegistration::new(&ctx, &mut v[..])?;
    drop(v);
    drop(reg);
    Ok(())
}
