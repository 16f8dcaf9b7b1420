//! hmpi: message passing between the processes of a node through a shared heap.
//!
//! This facade re-exports the layers users program against:
//!
//! * [`ShmHeap`] and the shared heap ([`shmheap`]): every rank's heap lives
//!   in one region mapped at the same address in every rank of the node;
//! * the runtime ([`hmpi_core`]), with rsmpi's names re-exported here:
//!   [`init`] / [`Universe`], communicators ([`SimpleCommunicator`], the
//!   [`traits`]), [`Group`], typed point-to-point, [`request::scope`], the
//!   launcher (`hmpirun`, and [`hmpi_core::launch::Launcher`] for tests and
//!   tools). `use hmpi::prelude::*;` brings in what a program needs.
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
    abort, collective, datatype, init, initialize, op, point_to_point, processor_name, request,
    time, time_resolution, topology, traits, Error, Group, GroupRelation, Result,
    SimpleCommunicator, Status, Universe, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB,
};
pub use hmpi_core::{attr, buffered, persistent};
pub use opi;
pub use shmheap;
pub use shmheap::{attach_from_env, is_shared, owner_of, ShmHeap};

/// Everything a typical program uses (`use hmpi::prelude::*;`): the traits,
/// [`init`], the communicator, group, status and request types.
pub mod prelude {
    pub use hmpi_core::prelude::*;
}
