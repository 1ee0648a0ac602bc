// An `UploadBatch` borrows each host source until the upload copies it: the source
// cannot be freed (or changed) before.
use cuda_staging::{DeviceBuffer, UploadBatch};

fn main() -> cuda_staging::Result<()> {
    let mut input = DeviceBuffer::<f32>::alloc(1000)?;
    let mut batch = UploadBatch::new();
    {
        let frame = vec![0.5f32; 1000];
        batch.add(&mut input, &frame)?;
    }
    println!("{} parts", batch.len());
    Ok(())
}
