//! The node's shared heap.
//!
//! One region ("segment") mapped at the same virtual address in every rank of
//! a node, split into one arena per rank, with an allocator that serves each
//! rank from its own arena and is usable as `#[global_allocator]`. A pointer
//! into the heap means the same thing in every rank, so the layers above can
//! move data with one copy, or none.
//!
//! * [`ShmHeap`] and the functions beside it ([`attach`], [`is_shared`],
//!   [`owner_of`], [`stats`], …): the allocator;
//! * [`segment`]: creating and attaching the segment, its header and registry;
//! * [`size_class`]: the allocator's size classes;
//! * [`sync`]: process-shared primitives (mutex, MCS lock, MPSC queue,
//!   barrier, flags and counters) that live in the segment.

#![warn(missing_docs)]

mod arena;
mod diag;
pub mod env;
pub mod error;
mod heap;
pub mod load;
pub mod segment;
pub mod size_class;
pub mod sync;
mod tcache;

pub use arena::ArenaStats;
pub use error::{Error, Exhausted, Limit, Result};
pub use heap::{
    attach, attach_from_env, drain_remote_frees, flush_thread_cache, is_attached, is_shared,
    local_stats, owner_of, stats, usable_size, ShmHeap,
};
pub use segment::Segment;
