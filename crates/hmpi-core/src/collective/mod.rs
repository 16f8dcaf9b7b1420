//! Collective operations on the shared heap.
//!
//! Every member of a communicator can read every other member's heap
//! buffers at the same address, so a collective moves each byte once:
//! members publish their contributions in per-member slots of a block in
//! the node heap (small ones inline, large ones by address) and read what
//! they need straight from the others, waiting only on single-writer
//! sequence words ([`shared`](self) describes the block, `engine` the
//! algorithms). No message queue and no lock is on the way.
//!
//! The block is set up at a communicator's first collective (its rank 0
//! allocates it and sends its address to the others on the
//! communicator's internal context) and freed when the last member drops
//! the communicator.
//!
//! [`Coll`] is the raw tier: collectives on bytes, for the typed API and
//! the C library, which check their arguments first.

mod engine;
mod hier;
pub mod inter;
pub mod neighbor;
pub mod raw;
mod shared;
mod typed;

pub use crate::op::{Operation, SystemOperation, UserOperation};
pub use engine::{block_on, poll_once, Coll, Combine, Op};
pub use hier::{domains_in_use, DOMAINS_VAR};
pub use neighbor::NeighborCollectives;
pub use raw::CollRequest;
pub use typed::{
    CommunicatorCollectives, ImmediateCollectives, ImmediateRoot, Partition, PartitionMut, Root,
};

use crate::comm::SimpleCommunicator;
use crate::error::{Error, Result};
use std::sync::{Mutex, Once};

/// Communicators with nonblocking collectives in flight, moved on by the
/// engine's idle hook while a thread of this process waits in a
/// point-to-point call (see `vci::idle`).
static IN_FLIGHT: Mutex<Vec<SimpleCommunicator>> = Mutex::new(Vec::new());

/// Notes that `comm` has a nonblocking collective in flight (once the
/// first time, the idle hook is installed).
pub(crate) fn track(comm: &SimpleCommunicator) {
    install_idle_hook();
    let mut v = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
    if !v.iter().any(|c| c.same_as(comm)) {
        v.push(comm.clone());
    }
}

/// Whether a communicator other than `comm` has nonblocking collectives
/// in flight (a waiter on `comm` must then keep them moving instead of
/// sleeping until `comm`'s members move).
pub(crate) fn others_in_flight(comm: &SimpleCommunicator) -> bool {
    let v = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
    v.iter()
        .any(|c| !c.same_as(comm) && c.coll().ok().flatten().is_some_and(|k| k.in_flight() > 0))
}

/// Installs [`progress_in_flight`] as the engine's idle hook (once).
pub(crate) fn install_idle_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| vci::set_idle_hook(progress_in_flight));
}

/// Lets other engines progress while a thread waits: MPI's, under an MPI
/// launcher with one-sided windows live (see `multinode::mpi::poke`).
#[inline]
pub(crate) fn progress_elsewhere() {
    #[cfg(feature = "mpi")]
    crate::multinode::mpi::poke();
}

/// The idle hook: moves every collective in flight on; forgets the
/// communicators that have none left (so that what they hold, such as
/// the VCIs of streams and endpoints, goes back once the program drops
/// them). Skips a turn rather than wait for the list's lock.
pub(crate) fn progress_in_flight() {
    progress_elsewhere();
    let Ok(mut v) = IN_FLIGHT.try_lock() else {
        return;
    };
    v.retain(|c| match c.coll() {
        Ok(Some(coll)) => {
            coll.progress();
            coll.in_flight() > 0
        }
        _ => false,
    });
}

/// Sets up the collective state of `comm` (collective over its members):
/// rank 0 creates the block and sends its address to the others (0 if it
/// could not, so that nobody waits for a block that does not exist).
pub(crate) fn setup(comm: &SimpleCommunicator, tag: i32) -> Result<Coll> {
    use crate::traits::Communicator;
    let (rank, size) = (comm.rank() as u32, comm.size() as u32);
    let block = if rank == 0 {
        let made = shared::Block::create(size);
        let addr = made.as_ref().map_or(0, |b| b.addr());
        for r in 1..size {
            comm.send_internal(&addr.to_ne_bytes(), r as i32, tag)?;
        }
        made?
    } else {
        let mut b = [0u8; 8];
        comm.recv_internal(&mut b, 0, tag)?;
        match u64::from_ne_bytes(b) {
            0 => {
                return Err(Error::Comm {
                    reason: "rank 0 could not allocate the collective state in its arena".into(),
                })
            }
            // SAFETY: rank 0 created this block for this communicator and
            // sent its address once to each member.
            addr => unsafe { shared::Block::attach(addr, size)? },
        }
    };
    Ok(Coll::new(block, rank, size, comm.local_world_ranks()))
}
