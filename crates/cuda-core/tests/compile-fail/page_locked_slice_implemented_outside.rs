// A type of another crate claiming to be page-locked memory that queued copies may
// use: the traits are sealed, since each implementation carries the record of
// queued work that makes the copies sound.
use cuda_core::{HostAccess, PageLockedSlice};

struct Pretend(Vec<u8>);

impl PageLockedSlice<u8> for Pretend {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn host_access(&self) -> HostAccess<'_> {
        unimplemented!()
    }
}

fn main() {}
