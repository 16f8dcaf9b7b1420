//! rsmpi's `mpi::datatype`: which Rust types travel ([`Equivalence`]),
//! buffers and partitions, MPI datatypes.

pub use hmpi_core::collective::{Partition, PartitionMut};
pub use hmpi_core::datatype::{Buffer, BufferMut, Datatype, Equivalence, UserDatatype};

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{Buffer, BufferMut};
    pub use hmpi_core::datatype::Equivalence;
}
