//! hmpi: message passing between the processes of a node through a shared heap.
//!
//! This facade re-exports the layers users program against:
//!
//! * [`ShmHeap`] and the shared heap ([`shmheap`]): every rank's heap lives
//!   in one region mapped at the same address in every rank of the node;
//! * the runtime ([`hmpi_core`]), with rsmpi's names re-exported here:
//!   [`init`] / [`Universe`] (or MPI 4's [`session`]s), communicators ([`SimpleCommunicator`], the
//!   [`traits`]), [`Group`], typed point-to-point, the [`collective`]s,
//!   [`datatype`]s and `#[derive(Equivalence)]`, reduction operations
//!   ([`op`]), [`request::scope`], the launcher (`hmpirun`, and
//!   [`hmpi_core::launch::Launcher`] for tests and tools);
//! * ownership passing ([`opi`]): give/take ([`Give`], [`Take`]), pooled
//!   buffers ([`OpiBuf`]), [`Transferable`] and its derive, collectives by
//!   ownership, the [`fusion`] helpers.
//!
//! `use hmpi::prelude::*;` brings in what a program needs. A crate needs
//! no other dependency than `hmpi`: the derives name their paths through
//! this crate (`#[derive(Transferable)]` through `hmpi::opi`,
//! `#[derive(Equivalence)]` through `hmpi`).
//!
//! # Example: messages
//! ```
//! use hmpi::prelude::*;
//!
//! fn main() -> hmpi::Result<()> {
//!     let universe = hmpi::init()?; // alone: a world of one
//!     let world = universe.world();
//!     let next = world.process_at_rank((world.rank() + 1) % world.size());
//!     next.send(&[1.0f64, 2.0])?;
//!     let (x, status) = world.any_process().receive::<[f64; 2]>()?;
//!     assert_eq!((x, status.tag()), ([1.0, 2.0], 0));
//!     Ok(())
//! }
//! ```
//!
//! # Example: the shared heap
//! ```no_run
//! #[global_allocator]
//! static A: hmpi::ShmHeap = hmpi::ShmHeap::new();
//!
//! fn main() -> Result<(), hmpi::shmheap::Error> {
//!     let seg = hmpi::attach_from_env()?; // join the job's node heap
//!     let v = vec![0u64; 1024]; // lives in this rank's arena
//!     assert_eq!(hmpi::owner_of(v.as_ptr()), Some(seg.local_rank()));
//!     Ok(())
//! }
//! ```

pub use hmpi_core;
pub use hmpi_core::datatype::Equivalence;
pub use hmpi_core::window;
pub use hmpi_core::{
    abort, collective, datatype, init, initialize, is_finalized, is_initialized, op,
    point_to_point, processor_name, request, time, time_resolution, topology, traits, Error, Group,
    GroupRelation, Result, SimpleCommunicator, Status, Universe, ANY_SOURCE, ANY_TAG, PROC_NULL,
    TAG_UB,
};
pub use hmpi_core::{attr, buffered, endpoints, hints, partitioned, persistent, session, stream};
pub use opi;
pub use opi::{
    fingerprint, fusion, Givable, Give, GiveError, OpiBuf, Policy, Take, TakeSlot, Transferable,
};
pub use pgas;
pub use shmheap;
pub use shmheap::{attach_from_env, is_shared, owner_of, ShmHeap};

/// Everything a typical program uses (`use hmpi::prelude::*;`): the traits
/// (communicators, point-to-point, collectives, give/take), [`init`], the
/// communicator, group, status, request and operation types, the pooled
/// buffer and the derives.
pub mod prelude {
    pub use hmpi_core::prelude::*;
    pub use opi::prelude::{
        all_to_all_give, Gather, Givable, Give, GiveError, OpiBuf, Scatter, Take, TakeSlot,
        Transferable,
    };
}

// The user's guide and the documents under `docs/` are compiled (and their
// examples run, or only built where marked `no_run`) by `cargo test --doc`,
// as a crate that depends on `hmpi` writes them.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/opi.md")]
pub struct OpiGuideExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/architecture.md")]
pub struct ArchitectureExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/c-abi.md")]
pub struct CAbiExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/rsmpi-names.md")]
pub struct RsmpiNamesExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/benchmarks.md")]
pub struct BenchmarksExamples;

#[cfg(doctest)]
#[doc = include_str!("../docs/performance.md")]
pub struct PerformanceExamples;
