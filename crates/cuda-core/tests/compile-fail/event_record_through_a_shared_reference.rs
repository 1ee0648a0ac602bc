// Recording an event through `&Event`: `record` replaces the event's note of which
// queued work it covers, which `synchronize` and `query` on other threads read
// (`Event` is `Sync`) to tell buffers that work is done.
use cuda_core::{Context, Event, Stream};

fn main() -> cuda_core::Result<()> {
    let ctx = Context::new(0)?;
    let stream = Stream::new(&ctx)?;
    let event = Event::new(&ctx)?;
    let shared = &event;
    shared.record(&stream)?;
    Ok(())
}
