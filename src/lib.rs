//! hmpi: message passing between the processes of a node through a shared heap.
//!
//! This facade re-exports the layers users program against:
//!
//! * [`ShmHeap`] and the shared heap ([`shmheap`]): every rank's heap lives
//!   in one region mapped at the same address in every rank of the node;
//! * the runtime ([`hmpi_core`]): for now the launcher (`hmpirun`, and
//!   [`hmpi_core::launch::Launcher`] for tests and tools).
//!
//! # Example
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
pub use shmheap;
pub use shmheap::{attach_from_env, is_shared, owner_of, ShmHeap};
