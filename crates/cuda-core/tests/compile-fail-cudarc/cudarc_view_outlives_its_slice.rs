// A `CudarcView` borrows cudarc's memory: it cannot outlive the `CudaSlice`, which
// cudarc frees when it drops (a queued copy through the view would then read freed
// device memory).
use cuda_core::cudarc::driver::CudaContext;
use cuda_core::cudarc_bridge::CudarcView;
use cuda_core::Stream;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = CudaContext::new(0)?;
    let cu = ctx.new_stream()?;
    let stream = Stream::borrow_cudarc(&cu)?;
    let view;
    {
        let slice = cu.alloc_zeros::<f32>(1024)?;
        view = CudarcView::new(&slice, &stream)?;
    }
    println!("{} elements", view.len());
    Ok(())
}
