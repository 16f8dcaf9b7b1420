//! Ownership passing between the ranks of a node (OPI, the papers'
//! Ownership Passing Interface, `notes.md` §4), made safe by Rust's
//! ownership: what is given is moved, so the sender cannot touch it
//! afterwards, and the taker owns it — the very same heap block, nothing
//! copied, when the node heap is the program's global allocator.
//!
//! * [`p2p`]: [`Give`] (`process_at_rank(r).give(b)`, `give_with_tag`,
//!   `immediate_give`) and [`Take`] (`take::<T>()`, `take_vec`,
//!   `take_string`, `take_buf`, `immediate_take` into a [`TakeSlot`]) on
//!   hmpi-core's processes; requests are ordinary
//!   [`hmpi_core::request::Request`]s;
//! * [`givable`]: what travels — `Box<T>`, `Vec<T>`, `Box<[T]>`, `String`,
//!   [`OpiBuf<T>`] — and its metadata (fingerprint, kind, count);
//! * [`transfer`]: the marker trait [`Transferable`] (and its derive) for
//!   values that stay valid in another rank, the type [`fingerprint`];
//! * [`pool`]: per-rank buffer pools and the pooled buffer [`OpiBuf`];
//! * [`collective`]: scatter, gather and all-to-all by ownership;
//! * [`fusion`]: node-local ranks, node-shared values, signals, counters;
//! * [`raw`]: the untyped core the C interface (`OPI_*`) wraps;
//!
//! A program that wants zero copy sets the node heap as its allocator:
//! ```ignore
//! #[global_allocator]
//! static A: shmheap::ShmHeap = shmheap::ShmHeap::new();
//! ```
//! Without it give/take still work, by copying (values that own further
//! heap blocks then cannot be given: they are refused with an error).
//!
//! # Example
//! ```
//! use opi::prelude::*;
//!
//! #[global_allocator]
//! static A: shmheap::ShmHeap = shmheap::ShmHeap::new();
//!
//! #[derive(Transferable, Debug, PartialEq)]
//! #[transferable(crate = "opi")]
//! struct Particles { ids: Vec<u64>, pos: Vec<[f64; 3]> }
//!
//! # fn main() {
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let next = (world.rank() + 1) % world.size();
//! let p = Box::new(Particles { ids: vec![1, 2], pos: vec![[0.5; 3]; 2] });
//! world.process_at_rank(next).give(p).unwrap();
//! // `p` is gone: using it here would not compile.
//! let got = world.any_process().take::<Particles>().unwrap();
//! assert_eq!(got.ids, [1, 2]);
//! // A wrong type is an error value, not undefined behaviour.
//! world.this_process().give(vec![1u8, 2, 3]).unwrap();
//! assert!(matches!(
//!     world.this_process().take_vec::<u16>(),
//!     Err(hmpi_core::Error::Type { .. })
//! ));
//! # }
//! ```

#![warn(missing_docs)]

// The derive emits `::opi::…` paths; this makes them resolve inside the
// crate too (its tests and doc examples).
extern crate self as opi;

pub mod collective;
pub mod error;
pub mod fusion;
pub mod givable;
pub mod p2p;
pub mod pool;
pub mod raw;
pub mod transfer;

pub use error::GiveError;
pub use givable::Givable;
pub use hmpi_core::{Error, Result};
/// `#[derive(Transferable)]` (see [`transfer`]).
pub use opi_derive::Transferable;
pub use p2p::{Give, Take, TakeSlot};
pub use pool::{OpiBuf, Policy};
pub use transfer::{fingerprint, Transferable};

/// Everything a typical program uses: hmpi-core's prelude, the give/take
/// traits, the buffer and slot types, the marker trait and its derive.
pub mod prelude {
    pub use crate::collective::{all_to_all_give, Gather, Scatter};
    pub use crate::{Givable, Give, GiveError, OpiBuf, Take, TakeSlot, Transferable};
    pub use hmpi_core::prelude::*;
}
