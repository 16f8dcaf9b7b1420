//! The MPI-like runtime of hmpi: what a user programs against, with names
//! that rsmpi users know.
//!
//! * [`environment`]: [`init`] / [`Universe`] (finalize on drop), [`time`],
//!   [`processor_name`], [`abort`];
//! * [`session`]: sessions (MPI 4.0): the runtime without [`init`],
//!   process sets, communicators made from groups;
//! * [`comm`]: communicators ([`SimpleCommunicator`], the [`traits::Communicator`]
//!   trait): world, self, `duplicate`, `split`, `split_shared`;
//! * [`group`]: [`Group`] and its set operations;
//! * [`intercomm`]: intercommunicators ([`InterCommunicator`]) and
//!   `MPI_Comm_create_group`;
//! * [`info`](mod@info): hints ([`Info`]);
//! * [`collective`]: every collective on the shared heap (rsmpi's
//!   `CommunicatorCollectives` and `Root`), blocking and nonblocking;
//! * [`point_to_point`]: typed sends and receives through
//!   [`Process`](point_to_point::Process) and
//!   [`AnyProcess`](point_to_point::AnyProcess), [`Status`];
//! * [`request`]: nonblocking operations in a [`request::scope`];
//! * [`stream`]: explicit streams (a VCI reserved for one thread) and
//!   [`endpoints`]: thread endpoints (each thread a rank of its own);
//! * [`partitioned`]: partitioned sends and receives (MPI 4.0), partitions
//!   filled by threads as disjoint `&mut` slices;
//! * [`topology`]: Cartesian, graph and distributed graph topologies
//!   (neighbourhood collectives in [`collective::neighbor`]);
//! * [`raw`]: the same semantics on byte buffers and raw memory (argument
//!   checks, routing, the engine's requests), which the typed API, ownership
//!   passing and the C interface share;
//! * [`datatype`]: which types travel ([`traits::Equivalence`], and
//!   `#[derive(Equivalence)]`), MPI datatypes ([`datatype::Datatype`],
//!   [`datatype::UserDatatype`]) and packing;
//! * [`op`]: reduction operations and [`op::reduce_local`];
//! * [`window`]: one-sided communication: windows ([`window::Window`],
//!   [`window::Win`]) and put, get and atomics that never wait for the
//!   target;
//! * [`copy_agent`]: threads that help with large copies (window put and
//!   get);
//! * [`error`]: [`Error`] (MPI's error classes) and [`Result`];
//! * [`launch`]: the launcher as a library ([`launch::Launcher`]), used by
//!   the `hmpirun` binary and by multi-process tests and benchmarks;
//! * [`env`](mod@env): the environment variables the launcher gives every rank.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! // Under `hmpirun -n N` each rank runs this; alone it is a world of one.
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let next = (world.rank() + 1) % world.size();
//! let prev = (world.rank() + world.size() - 1) % world.size();
//! let token = [world.rank() as u64; 4]; // outlives the scope
//! hmpi_core::request::scope(|scope| {
//!     let s = world.process_at_rank(next).immediate_send(scope, &token).unwrap();
//!     let (got, st) = world.process_at_rank(prev).receive::<[u64; 4]>().unwrap();
//!     assert_eq!((got, st.source_rank()), ([prev as u64; 4], prev));
//!     s.wait().unwrap();
//! });
//! ```
//!
//! The launcher alone:
//! ```
//! use hmpi_core::launch::Launcher;
//!
//! let report = Launcher::new("/bin/sh", 2)
//!     .args(["-c", "echo rank $HMPI_RANK of $HMPI_SIZE"])
//!     .capture_output(true)
//!     .run()
//!     .unwrap();
//! assert!(report.success());
//! assert_eq!(report.ranks[1].stdout, b"rank 1 of 2\n");
//! ```

#![warn(missing_docs)]

pub mod attr;
pub mod buffered;
pub mod collective;
pub mod comm;
pub mod copy_agent;
pub mod datatype;
pub mod endpoints;
pub mod env;
pub mod environment;
pub mod error;
pub mod group;
pub mod hints;
pub mod info;
pub mod intercomm;
pub mod launch;
#[cfg(feature = "mpi")]
pub mod multinode;
pub mod op;
pub mod partitioned;
pub mod persistent;
pub mod point_to_point;
pub mod raw;
pub mod request;
pub mod session;
pub mod stream;
pub mod topology;
pub mod window;

pub use comm::SimpleCommunicator;
pub use environment::{
    abort, init, initialize, is_finalized, is_initialized, processor_name, time, time_resolution,
    Universe,
};
pub use error::{Error, Result};
pub use group::{Group, GroupRelation};
pub use info::Info;
pub use intercomm::InterCommunicator;
pub use point_to_point::Status;
pub use vci::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
pub use window::{LockType, Window};

/// The traits that carry the operations (rsmpi's `mpi::traits`): bring them
/// into scope with `use hmpi_core::traits::*`.
pub mod traits {
    pub use crate::collective::NeighborCollectives;
    pub use crate::collective::{
        CommunicatorCollectives, ImmediateCollectives, ImmediateRoot, Root,
    };
    pub use crate::comm::Communicator;
    pub use crate::datatype::{Buffer, BufferMut, Equivalence};
    pub use crate::point_to_point::{Destination, Source};
    pub use crate::topology::TopologyCommunicator;

    pub use crate::point_to_point::MatchedReceiveVec;
    pub use crate::window::{Access, Immediate};
}

/// Everything a typical program uses: the traits, [`init`], the types.
pub mod prelude {
    pub use crate::request::{self, Request, Scope};
    pub use crate::traits::*;
    pub use crate::{
        init, Error, Group, Result, SimpleCommunicator, Status, Universe, ANY_TAG, PROC_NULL,
        TAG_UB,
    };

    pub use crate::collective::{Partition, PartitionMut};
    pub use crate::op::{SystemOperation, UserOperation};
    pub use crate::point_to_point::{
        send_receive, send_receive_into, send_receive_into_with_tags, send_receive_replace_into,
        send_receive_replace_into_with_tags, send_receive_with_tags, Message,
    };
    pub use crate::request::{CancelGuard, RequestCollection, WaitGuard};
    pub use crate::window::{LockType, Window};
    pub use crate::ANY_SOURCE;
}
