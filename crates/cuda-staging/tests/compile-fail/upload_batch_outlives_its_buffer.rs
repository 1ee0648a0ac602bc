// An `UploadBatch` borrows its destinations mutably and its host sources until it is
// used: it cannot outlive either.
use cuda_staging::{DeviceBuffer, UploadBatch};

fn main() -> cuda_staging::Result<()> {
    let frame = vec![0.5f32; 1000];
    let mut batch = UploadBatch::new();
    {
        let mut input = DeviceBuffer::<f32>::alloc(1000)?;
        batch.add(&mut input, &frame)?;
    }
    println!("{} parts", batch.len());
    Ok(())
}
