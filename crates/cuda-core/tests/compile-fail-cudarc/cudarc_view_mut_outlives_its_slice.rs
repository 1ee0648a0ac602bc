// A `CudarcViewMut` borrows cudarc's memory mutably: it cannot outlive the
// `CudaSlice`, and nothing else can use the slice meanwhile.
use cuda_core::cudarc::driver::CudaContext;
use cuda_core::cudarc_bridge::CudarcViewMut;
use cuda_core::Stream;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = CudaContext::new(0)?;
    let cu = ctx.new_stream()?;
    let stream = Stream::borrow_cudarc(&cu)?;
    let mut slice = cu.alloc_zeros::<f32>(1024)?;
    let view = CudarcViewMut::new(&mut slice, &stream)?;
    drop(slice);
    println!("{} elements", view.len());
    Ok(())
}
