//! The node's shared heap.
//!
//! One region ("segment") mapped at the same virtual address in every rank of
//! a node, split into one arena per rank, with an allocator that serves each
//! rank from its own arena and is usable as `#[global_allocator]`. A pointer
//! into the heap means the same thing in every rank, so the layers above can
//! move data with one copy, or none.
//!
//! * [`segment`]: creating and attaching the segment, its header and registry;
//! * [`sync`]: process-shared primitives (mutex, MCS lock, MPSC queue,
//!   barrier, flags and counters) that live in the segment.

#![warn(missing_docs)]

mod diag;
pub mod env;
pub mod error;
pub mod segment;
pub mod sync;

pub use error::{Error, Result};
pub use segment::Segment;
