//! Modules and kernels. The simulator runs no device code: loading PTX only reads the
//! names and parameter counts of its `.entry` kernels, and launching a kernel is
//! `CUDA_ERROR_NOT_SUPPORTED`, except for the one kernel it knows by name and
//! signature:
//!
//! `fault_after(.u64 addr, .u64 delay_ns)` waits `delay_ns` on its stream, then
//! stores a 32-bit value at `addr`. An address inside a device allocation of its
//! context is written; any other address faults the device with
//! `CUDA_ERROR_ILLEGAL_ADDRESS`, stickily, as an unmapped store does on a GPU. This
//! is the kernel `cuda-staging`'s fault tests load.

use std::sync::Arc;
use std::time::Duration;

use crate::context::Context;
use crate::errors::{Res, ILLEGAL_ADDRESS, INVALID_IMAGE, NOT_FOUND, NOT_SUPPORTED};
use crate::machine::machine;

/// A loaded module: its kernels' names and parameter counts.
pub struct Module {
    /// The context it was loaded into.
    pub ctx: Arc<Context>,
    /// (name, number of parameters) of each `.entry`.
    pub entries: Vec<(String, usize)>,
}

/// A kernel of a module.
pub struct Function {
    /// The module's handle.
    pub module: usize,
    /// The context.
    pub ctx: Arc<Context>,
    /// Its name.
    pub name: String,
    /// How many parameters its PTX declares.
    pub params: usize,
}

/// A launch of a kernel the simulator can run.
#[derive(Clone)]
pub enum Kernel {
    /// `fault_after(addr, delay_ns)`.
    FaultAfter {
        /// The context it runs in.
        ctx: Arc<Context>,
        /// Where it stores.
        addr: u64,
        /// How long it waits first.
        delay: Duration,
    },
}

/// The value `fault_after` stores.
const FAULT_AFTER_VALUE: u32 = 195_948_557;

impl Module {
    /// Reads the `.entry` kernels of a PTX image (NUL-terminated text). Anything else
    /// (a cubin, a fatbin) is `CUDA_ERROR_INVALID_IMAGE`: the simulator cannot read
    /// the kernels there.
    pub fn from_ptx(ctx: Arc<Context>, text: &str) -> Res<Module> {
        if !text.contains(".version") || !text.contains(".target") {
            return Err(INVALID_IMAGE);
        }
        let mut entries = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find(".entry") {
            rest = &rest[at + ".entry".len()..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            let params = rest
                .find('(')
                .zip(rest.find(')'))
                .filter(|(open, close)| open < close && rest[..*open].trim() == name)
                .map_or(0, |(open, close)| {
                    rest[open..close].matches(".param").count()
                });
            if !name.is_empty() {
                entries.push((name, params));
            }
        }
        Ok(Module { ctx, entries })
    }

    /// The kernel `name`, or `CUDA_ERROR_NOT_FOUND`.
    pub fn function(&self, name: &str) -> Res<(String, usize)> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .cloned()
            .ok_or(NOT_FOUND)
    }
}

impl Function {
    /// A launch of this kernel with `params` (one pointer per parameter, to its
    /// value), or `CUDA_ERROR_NOT_SUPPORTED` for a kernel the simulator cannot run.
    ///
    /// # Safety
    /// 1. `params` points to this kernel's parameter count of pointers, each valid
    ///    for reads of its parameter's size (the driver's contract).
    pub unsafe fn launch(&self, params: *const *const u64) -> Res<Kernel> {
        if self.name != "fault_after" || self.params != 2 || params.is_null() {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: condition 1: two parameters, both `.u64`.
        let (addr, delay_ns) = unsafe { (**params, **params.add(1)) };
        Ok(Kernel::FaultAfter {
            ctx: Arc::clone(&self.ctx),
            addr,
            delay: Duration::from_nanos(delay_ns),
        })
    }
}

impl Kernel {
    /// Runs the kernel on its stream's thread; `Err` is the fault it raises.
    pub fn run(&self) -> Result<(), u32> {
        match self {
            Kernel::FaultAfter { ctx, addr, delay } => {
                std::thread::sleep(*delay);
                match machine().mem.device_range(*addr, 4) {
                    Ok((a, off)) if a.ctx.device == ctx.device => {
                        a.backing.fill(off, 1, &FAULT_AFTER_VALUE.to_le_bytes());
                        Ok(())
                    }
                    _ => Err(ILLEGAL_ADDRESS),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_their_parameters_are_read() {
        let ctx = Arc::new(Context::new(1, machine().device(0), true, 0));
        let ptx = ".version 7.0\n.target sm_75\n.visible .entry fault_after(\n .param .u64 a,\n .param .u64 b\n)\n{ ret; }\n.entry other() { ret; }";
        let m = Module::from_ptx(ctx.clone(), ptx).unwrap();
        assert_eq!(
            m.entries,
            vec![("fault_after".into(), 2), ("other".into(), 0)]
        );
        assert_eq!(m.function("nope"), Err(NOT_FOUND));
        assert!(Module::from_ptx(ctx, "\x7fELF").is_err());
    }
}
