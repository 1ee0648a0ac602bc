// A `DownloadBatch` borrows the device memory of its parts until it is used: it cannot
// outlive a buffer it names (the download would read freed device memory).
use cuda_staging::{DeviceBuffer, DownloadBatch};

fn main() -> cuda_staging::Result<()> {
    let mut batch = DownloadBatch::new();
    {
        let scores = DeviceBuffer::<f32>::alloc(1000)?;
        batch.add(&scores, 1000)?;
    }
    println!("{} parts", batch.len());
    Ok(())
}
