// A 2-D view of a PitchedBuffer's rows kept after the buffer is freed: a copy
// through it would reach freed device memory.
use cuda_core::{Context, DeviceSlice2d, DeviceView2d, PitchedBuffer};

fn main() -> cuda_core::Result<()> {
    let _ctx = Context::new(0)?;
    let surface = PitchedBuffer::<u8>::alloc(641, 3)?;
    let rows: DeviceView2d<'_, u8> = surface.as_bytes_2d();
    drop(surface);
    println!("{}", rows.width());
    Ok(())
}
