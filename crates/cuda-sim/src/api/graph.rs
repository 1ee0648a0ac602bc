//! Graphs from stream capture: instantiate, launch, upload, destroy.
//!
//! A launch queues the graph's nodes on the launching stream. Each node's memory is
//! looked up again first: a node whose device memory was freed, or whose page-locked
//! host memory was freed or unregistered, since the capture aborts the process (on a
//! GPU its copy would write into memory that is no longer the program's).

use std::sync::Arc;

use super::{out, stream_of, Handle};
use crate::capture::{GraphExec, Node};
use crate::errors::{Res, INVALID_HANDLE, INVALID_VALUE};
use crate::machine::machine;
use crate::ops::{Place, Src, Work};
use crate::state::sim;
use crate::submit::submit;

/// `CUDA_GRAPH_INSTANTIATE_FLAG_*`: auto-free, upload, device launch, node priority.
const INSTANTIATE_FLAGS: u64 = 0xF;
const FLAG_AUTO_FREE: u64 = 1;
const FLAG_DEVICE_LAUNCH: u64 = 4;

/// Aborts unless every place `node` uses is still the memory it was at capture.
fn check_still_valid(node: &Node) {
    let m = machine();
    let check = |p: &Place| {
        let ok = match p {
            Place::Device(a, _) => m
                .mem
                .device_at(a.start)
                .is_some_and(|now| Arc::ptr_eq(&now, a)),
            Place::Host(h, true) => m.mem.host_block(h.0).is_some(),
            Place::Host(_, false) => true,
        };
        if !ok {
            eprintln!(
                "cuda-sim: USE AFTER FREE: cuGraphLaunch of a graph whose node ({}, a {}) uses {}, \
                 which was freed after the capture",
                node.call,
                node.work.kind(),
                p.describe()
            );
            eprintln!("cuda-sim: aborting (this is a bug in the program under test, found by the simulator)");
            std::process::abort();
        }
    };
    let src = |s: &Src| {
        if let Src::Place(p) = s {
            check(p)
        }
    };
    match &node.work {
        Work::Copy(c) => {
            check(&c.dst);
            src(&c.src);
        }
        Work::Copy2d(c) => {
            check(&c.dst);
            src(&c.src);
        }
        Work::Batch(cs) => cs.iter().for_each(|c| {
            check(&c.dst);
            src(&c.src);
        }),
        Work::Memset { dst, .. } => check(dst),
        _ => {}
    }
}

fn instantiate(exec: *mut Handle, graph: Handle, flags: u64) -> Res<()> {
    sim().ready()?;
    let g = sim().graphs.get(graph as usize).ok_or(INVALID_HANDLE)?;
    if exec.is_null()
        || flags & !INSTANTIATE_FLAGS != 0
        || flags & (FLAG_AUTO_FREE | FLAG_DEVICE_LAUNCH) == FLAG_AUTO_FREE | FLAG_DEVICE_LAUNCH
    {
        return Err(INVALID_VALUE);
    }
    let e = GraphExec {
        nodes: g.nodes.clone(),
        ctx: Arc::clone(&g.ctx),
    };
    let h = sim().execs.insert(Arc::new(e));
    // SAFETY: the caller's out-pointer, not null.
    unsafe { out(exec, h as Handle) }
}

export! {
    /// `cuGraphInstantiateWithFlags`.
    fn cuGraphInstantiateWithFlags(exec: *mut Handle, graph: Handle, flags: u64) {
        instantiate(exec, graph, flags)
    }

    /// `cuGraphInstantiate_v2` (CUDA 11's signature: error node and log unused).
    fn cuGraphInstantiate_v2(exec: *mut Handle, graph: Handle, _error_node: *mut Handle, _log: *mut u8, _log_bytes: usize) {
        instantiate(exec, graph, 0)
    }

    /// `cuGraphLaunch`: the nodes, in an order their dependencies allow, on `stream`.
    fn cuGraphLaunch(exec: Handle, stream: Handle) {
        let s = stream_of(stream)?;
        let e = sim().execs.get(exec as usize).ok_or(INVALID_HANDLE)?;
        if !Arc::ptr_eq(&e.ctx, &s.ctx) {
            return Err(INVALID_VALUE);
        }
        for node in &e.nodes {
            check_still_valid(node);
            submit(&s, node.work.clone(), node.call, vec![])?;
        }
        Ok(())
    }

    /// `cuGraphUpload`: nothing to upload.
    fn cuGraphUpload(exec: Handle, stream: Handle) {
        stream_of(stream)?;
        sim().execs.get(exec as usize).ok_or(INVALID_HANDLE).map(drop)
    }

    /// `cuGraphExecDestroy`.
    fn cuGraphExecDestroy(exec: Handle) {
        sim().ready()?;
        sim().execs.remove(exec as usize).ok_or(INVALID_HANDLE).map(drop)
    }

    /// `cuGraphDestroy`.
    fn cuGraphDestroy(graph: Handle) {
        sim().ready()?;
        sim().graphs.remove(graph as usize).ok_or(INVALID_HANDLE).map(drop)
    }
}
