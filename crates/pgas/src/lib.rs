//! The global address space of hmpi (a PGAS layer after DART): units and
//! teams, 128-bit global pointers, non-collective and collective global
//! allocation, put/get — blocking and with handles — strided and
//! datatype'd transfers, atomics, and a distributed array on top.
//!
//! It is a layer above `hmpi_core` and below the facade: every segment
//! of the global address space is a one-sided window of `hmpi_core`
//! (whose copy paths, atomics and synchronisation it uses), every team
//! has a communicator (whose collectives it uses). On one node a global
//! pointer is, in the end, an address: every rank maps the node heap at
//! the same address, so a put is a copy and an atomic a hardware atomic
//! on another unit's memory.
//!
//! * [`Pgas`]: the context (one per unit, collective to make) — the team
//!   table, the segment table, the local pool; allocation
//!   ([`Pgas::memalloc`], [`Pgas::team_memalloc_aligned`]); teams
//!   ([`Pgas::team_create`], [`Pgas::team_from_comm`]).
//! * [`Team`]: units relative to a team, barrier and collectives.
//! * [`Gptr`] (the 128-bit `#[repr(C)]` layout a C layer shares) and
//!   [`GlobalPtr<T>`] (arithmetic in elements, checked conversion to a
//!   local pointer or reference).
//! * Communication ([`Pgas::put`], [`Pgas::get_nb`] with [`Handle`],
//!   [`Pgas::put_strided`], [`Pgas::fetch_add`], [`Pgas::flush`], …).
//! * [`GlobalArray<T>`]: block and block-cyclic distributed arrays.
//!
//! # Example
//! ```
//! use pgas::{Pgas, GlobalPtr};
//!
//! let universe = hmpi_core::init().unwrap();
//! let pg = Pgas::new(&universe.world()).unwrap();
//! let all = pg.team_all().clone();
//! // 4 u64 at every unit; a pointer to unit 0's first.
//! let g: GlobalPtr<u64> = GlobalPtr::from_raw(pg.team_memalloc_aligned(&all, 32).unwrap());
//! let mine = g.at_unit(pg.myid()).add(1).unwrap();
//! pg.put(mine, &[7, 8]).unwrap();
//! assert_eq!(pg.fetch_add(mine, 1).unwrap(), 7);
//! let mut back = [0u64; 2];
//! pg.get(mine, &mut back).unwrap();
//! assert_eq!(back, [8, 8]);
//! all.barrier().unwrap();
//! pg.team_memfree(g.raw()).unwrap();
//! pg.finalize().unwrap();
//! ```

mod array;
mod buddy;
mod direct;
mod error;
mod gptr;
mod net;
mod ops;
mod runtime;
mod team;

pub use array::{Distribution, GlobalArray};
pub use error::{Error, Result};
pub use gptr::{GlobalPtr, Gptr};
pub use ops::{testall, waitall, Handle};
pub use runtime::{Pgas, DEFAULT_POOL};
pub use team::{Team, MAX_TEAMS};

/// The context is shared by the threads of a unit (a parallel
/// `for_each_local` reaches it from each).
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Pgas>();
    shared::<Team>();
};
