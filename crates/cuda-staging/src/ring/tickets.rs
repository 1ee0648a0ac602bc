//! The tickets a [`StagingRing`] download hands back, and [`RingTicket`], which
//! lets [`StagingRing::wait`] redeem each kind.

use std::marker::PhantomData;

use cuda_core::Result;

use super::StagingRing;
use crate::batch::Landed;
use crate::elements::{cast, no_bytes};
use crate::StagingPod;

/// What a download's ticket redeems: elements of `T` in one slot.
#[derive(Debug)]
#[must_use = "a download's data is read through its ticket"]
pub struct Ticket<T> {
    pub(super) ring: u64,
    pub(super) slot: usize,
    pub(super) generation: u64,
    pub(super) len: usize,
    pub(super) _elem: PhantomData<fn() -> T>,
}

impl<T> Ticket<T> {
    /// The ticket of `len` elements in what `stamp` names (`StagingRing::stamp`).
    pub(super) fn new((ring, slot, generation): (u64, usize, u64), len: usize) -> Ticket<T> {
        Ticket {
            ring,
            slot,
            generation,
            len,
            _elem: PhantomData,
        }
    }

    /// Elements the download moves.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it moves none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What a batch download's ticket redeems.
#[derive(Debug)]
#[must_use = "a download's data is read through its ticket"]
pub struct BatchTicket {
    pub(super) ring: u64,
    pub(super) slot: usize,
    pub(super) generation: u64,
    pub(super) batch: u64,
    pub(super) bytes: usize,
}

/// A ticket [`StagingRing::wait`] redeems, and what it hands out once its download
/// landed. Implemented by [`Ticket`], [`BatchTicket`] and
/// [`Ticket2d`](super::Ticket2d) only (sealed).
pub trait RingTicket: sealed::Sealed {
    /// What the landed download is, borrowed from the ring.
    type Landed<'a>;

    /// Waits for the download in `ring` and hands it out (what
    /// [`StagingRing::wait`] does).
    fn landed_in<'a>(&self, ring: &'a StagingRing) -> Result<Self::Landed<'a>>;
}

pub(super) mod sealed {
    /// Only this crate's tickets are [`super::RingTicket`]s.
    pub trait Sealed {}
}

impl<T> sealed::Sealed for Ticket<T> {}
impl sealed::Sealed for BatchTicket {}

impl<T: StagingPod> RingTicket for Ticket<T> {
    type Landed<'a> = &'a [T];

    fn landed_in<'a>(&self, ring: &'a StagingRing) -> Result<&'a [T]> {
        if self.len == 0 || std::mem::size_of::<T>() == 0 {
            ring.check_ring(self.ring)?;
            return Ok(no_bytes(self.len));
        }
        let bytes = self.len * std::mem::size_of::<T>();
        cast::<T>(ring.landed(self.ring, self.slot, self.generation, bytes)?)
    }
}

impl RingTicket for BatchTicket {
    type Landed<'a> = Landed<'a>;

    fn landed_in<'a>(&self, ring: &'a StagingRing) -> Result<Landed<'a>> {
        Ok(Landed {
            bytes: ring.landed(self.ring, self.slot, self.generation, self.bytes)?,
            batch: self.batch,
        })
    }
}
