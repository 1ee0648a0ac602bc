// A view of cudarc's memory is taken for one `Stream` and borrows it: it cannot
// outlive that stream (the record of cudarc's events it keeps is the stream's).
use cuda_core::cudarc::driver::CudaContext;
use cuda_core::cudarc_bridge::CudarcView;
use cuda_core::Stream;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = CudaContext::new(0)?;
    let cu = ctx.new_stream()?;
    let slice = cu.alloc_zeros::<f32>(1024)?;
    let view;
    {
        let stream = Stream::borrow_cudarc(&cu)?;
        view = CudarcView::new(&slice, &stream)?;
    }
    println!("{} elements", view.len());
    Ok(())
}
