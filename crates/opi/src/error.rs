//! Errors of ownership passing: [`hmpi_core::Error`] (MPI's classes) for
//! everything, and [`GiveError`] for a give that failed, which hands the
//! value back (as crossbeam's `SendError<T>` does) so that nothing given is
//! lost on an error.
//!
//! # Example
//! ```
//! use opi::prelude::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let b = Box::new([1u32, 2, 3]);
//! // Rank 7 does not exist: the box comes back.
//! let err = world.process_at_rank(7).give(b).unwrap_err();
//! assert!(matches!(err.error, hmpi_core::Error::Rank { rank: 7, .. }));
//! let b = err.into_inner();
//! assert_eq!(*b, [1, 2, 3]);
//! ```

use hmpi_core::Error;
use std::fmt;

/// A give that failed: the error and the value, still the caller's.
pub struct GiveError<V> {
    /// Why the give failed.
    pub error: Error,
    /// The value that was not given.
    pub value: V,
}

impl<V> GiveError<V> {
    /// The value that was not given.
    pub fn into_inner(self) -> V {
        self.value
    }
}

impl<V> fmt::Debug for GiveError<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GiveError")
            .field("error", &self.error)
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}

impl<V> fmt::Display for GiveError<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "give of {}: {}", std::any::type_name::<V>(), self.error)
    }
}

impl<V> std::error::Error for GiveError<V> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `?` on a give in a function returning [`hmpi_core::Result`] drops the
/// value and keeps the error.
impl<V> From<GiveError<V>> for Error {
    fn from(e: GiveError<V>) -> Self {
        e.error
    }
}

/// The error of an allocation of `layout` that the global allocator
/// refused: the node heap's own account when it is the global allocator
/// (exhausted arena or file system), else a description.
pub(crate) fn heap_error(layout: std::alloc::Layout) -> Error {
    if crate::transfer::global_is_node_heap() {
        match shmheap::ShmHeap.try_alloc(layout) {
            Err(e) => return Error::Heap(e),
            // Room appeared meanwhile: give it back, report the failure.
            // SAFETY: just allocated with `layout`, used by nothing.
            Ok(p) => unsafe {
                std::alloc::GlobalAlloc::dealloc(&shmheap::ShmHeap, p.as_ptr(), layout)
            },
        }
    }
    Error::Internal(format!(
        "the global allocator has no block of {} bytes for an ownership-passing buffer",
        layout.size()
    ))
}
