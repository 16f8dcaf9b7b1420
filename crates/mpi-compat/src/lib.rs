//! rsmpi's API (the `mpi` crate, version 0.8) on hmpi's runtime.
//!
//! A Rust MPI program written for rsmpi switches to hmpi by changing one
//! line of its `Cargo.toml`:
//!
//! ```toml
//! mpi = { package = "hmpi-mpi", path = "…/crates/mpi-compat" }
//! ```
//!
//! The module paths (`mpi::traits::*`, `mpi::topology`, `mpi::attribute`,
//! `mpi::point_to_point`, `mpi::collective`, `mpi::datatype`,
//! `mpi::request`, `mpi::environment`), the type and trait names and the
//! signatures are rsmpi's. This crate is a thin face over `hmpi-core`,
//! where every MPI semantic lives: each call forwards to it, and an error
//! that hmpi-core returns as a value is turned into what rsmpi does with
//! MPI's default error handler (`MPI_ERRORS_ARE_FATAL`): the MPI error text
//! on standard error and the job aborted. `docs/rsmpi.md` lists what is
//! there and what is not.
//!
//! Feature `shared-heap` makes hmpi's node heap the program's global
//! allocator, so that `Vec` buffers travel with one copy as in an hmpi
//! program that installs it; features `derive` and `user-operations` are
//! rsmpi's names (the derive is always there).

#![warn(missing_docs)]

pub mod attribute;
pub mod collective;
pub mod datatype;
pub mod environment;
pub mod ffi;
pub mod point_to_point;
pub mod request;
pub mod topology;

pub use environment::{initialize, initialize_with_threading, time, time_resolution, Threading};
pub use topology::Rank;

/// rsmpi's `Count` (MPI's `int` counts).
pub type Count = i32;
/// rsmpi's `Tag`.
pub type Tag = i32;
/// rsmpi's `Address` (`MPI_Aint`): byte displacements.
pub type Address = isize;

/// With feature `shared-heap`: the node heap as the process's allocator
/// (see the feature in `Cargo.toml`).
#[cfg(feature = "shared-heap")]
#[global_allocator]
static SHARED_HEAP: shmheap::ShmHeap = shmheap::ShmHeap::new();

/// MPI's error class, as rsmpi's `MpiError` names it: hmpi's error value.
pub type MpiError = hmpi_core::Error;

/// The traits a program imports with `use mpi::traits::*;`, and the derive
/// of [`Equivalence`](traits::Equivalence).
pub mod traits {
    pub use crate::attribute::traits::*;
    pub use crate::collective::traits::*;
    pub use crate::datatype::traits::*;
    pub use crate::point_to_point::traits::*;
    pub use crate::topology::traits::*;
    /// `#[derive(Equivalence)]`: structs whose fields are `Equivalence`,
    /// arrays or tuples of them (see `hmpi-derive`).
    pub use hmpi_derive::MpiEquivalence as Equivalence;
}

/// What `#[derive(Equivalence)]` expands to refers to (paths under
/// `::mpi::__derive`); not part of the API.
#[doc(hidden)]
pub mod __derive {
    pub use crate::datatype::{array, derived, of, structure, DatatypeRef, Equivalence};
}

/// Unwraps an hmpi-core result the way MPI's default error handler does:
/// an error prints its MPI text on standard error and aborts the job
/// (`hmpirun` ends the other ranks).
pub(crate) fn check<T>(r: hmpi_core::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fatal(&e),
    }
}

/// Reports `e` and aborts the job.
pub(crate) fn fatal(e: &dyn std::fmt::Display) -> ! {
    eprintln!("MPI error: {e}");
    hmpi_core::abort(1)
}
