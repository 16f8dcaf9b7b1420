//! Beyond one node (feature `mpi`): start-up under `mpirun` / `mpiexec`
//! and a communicator that spans nodes, with a real MPI (Open MPI or
//! MPICH, through rsmpi) as the engine between nodes. hmpi writes no
//! network layer: node-local traffic goes through the shared heap as under
//! `hmpirun`, traffic to another node through MPI.
//!
//! # Start-up
//! [`crate::init`] calls `start` first. When the process runs under an
//! MPI launcher ([`launcher`]: Open MPI's `OMPI_COMM_WORLD_SIZE`, a PMIx
//! server's `PMIX_RANK`, MPICH Hydra's `PMI_RANK` / `PMI_SIZE`) and not
//! under `hmpirun` (no `HMPI_SHM_NAME`), it
//!
//! 1. initialises MPI (`MPI_THREAD_MULTIPLE` asked; with less, the MPI
//!    calls of this layer are serialised);
//! 2. finds its node: the processes that share memory with it
//!    (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), or with
//!    `HMPI_NODES=k` one of `k` **virtual nodes**, contiguous blocks of
//!    MPI's world ranks (block `b` holds ranks `r` with `r·k / n = b`), each
//!    of which must lie within one machine;
//! 3. creates the node's heap segment on the node's first rank and sends
//!    its name (`/proc/PID/fd/N`) to the node's other ranks, which attach
//!    it; the local ranks follow MPI's world order.
//!
//! `init` then makes the engine endpoint on that segment as usual (the
//! engine's world is the **node's** ranks), and the world of the typed
//! API: [`crate::Universe::world`] spans every node, its rank `r` being
//! MPI's world rank `r`. [`world`] makes another communicator over every
//! node. Finalize ends MPI after the node's final barrier (`stop`); a rank
//! that panics ends the whole job with `MPI_Abort` and says so on standard
//! error.
//!
//! # Routing
//! [`SpanningCommunicator`] is the routing point: a peer on this node is
//! reached through a node-local hmpi communicator, a peer on another node
//! through an MPI communicator over the same members in the same order
//! (both made together by dup and split). See `docs/multinode.md`.
//!
//! # The typed API
//! A [`crate::SimpleCommunicator`] may carry a [`SpanningCommunicator`]
//! ([`crate::SimpleCommunicator::spanning`]): the world of an MPI launch
//! and what is split or duplicated from it. The typed API's entry points
//! (point-to-point, requests in a scope, the blocking collectives,
//! `barrier`, `duplicate`, `split`) consult it first and call the routing
//! point; `typed` cuts the typed collectives' buffers into the byte pieces
//! of the hierarchical collectives. What has no spanning form (the raw
//! tier, the nonblocking collectives, windows, …) refuses such a
//! communicator.

mod coll;
mod comm;
mod icoll;
pub(crate) mod mpi;
mod neighbor;
pub(crate) mod typed;
mod window;

pub use coll::Plain;
pub use comm::{SpanMessage, SpanRequest, SpanningCommunicator};
pub use icoll::CollRequest;
pub use window::{NetRequest, NetWindow, SpanLock, SpanRmaRequest, SpanWindow};

use crate::error::{Error, Result};
use mpi::RawComm;
use std::sync::{Mutex, OnceLock};

/// The variable that splits one `mpirun`'s ranks into virtual nodes.
pub const NODES_VAR: &str = "HMPI_NODES";

/// The MPI launcher this process runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI's `mpirun` (`OMPI_COMM_WORLD_SIZE` set).
    OpenMpi,
    /// A PMIx server (`PMIX_RANK` set), e.g. Open MPI 5's PRRTE.
    Pmix,
    /// MPICH's Hydra or another PMI-1/2 launcher (`PMI_RANK` and
    /// `PMI_SIZE`, or `PMI_FD` set).
    Pmi,
}

/// Which MPI launcher started this process, if any (see the module docs;
/// `hmpirun`'s ranks are not MPI's: `HMPI_SHM_NAME` set gives `None`).
pub fn launcher() -> Option<Launcher> {
    let set = |v: &str| std::env::var_os(v).is_some();
    if set(shmheap::env::SHM_NAME) {
        return None;
    }
    if set("OMPI_COMM_WORLD_SIZE") {
        Some(Launcher::OpenMpi)
    } else if set("PMIX_RANK") {
        Some(Launcher::Pmix)
    } else if (set("PMI_RANK") && set("PMI_SIZE")) || set("PMI_FD") {
        Some(Launcher::Pmi)
    } else {
        None
    }
}

/// Where this process sits in the job, fixed at start-up.
#[derive(Debug)]
pub(crate) struct Layout {
    /// MPI's world rank.
    pub world_rank: i32,
    /// This process's node (0-based, numbered in the order of the nodes'
    /// lowest world ranks) and the number of nodes.
    pub node: u32,
    pub nodes: u32,
}

/// The start-up's results: the layout, rsmpi's universe (dropping it
/// finalizes MPI) and the node's segment file (kept open until exit on the
/// rank that created it).
struct Started {
    layout: Layout,
    universe: Mutex<Option<::mpi::environment::Universe>>,
    _file: Option<shmheap::segment::SegmentFile>,
}

static STARTED: OnceLock<Started> = OnceLock::new();

/// This process's layout, when it was started by an MPI launcher.
pub(crate) fn layout() -> Option<&'static Layout> {
    STARTED.get().map(|s| &s.layout)
}

/// The communicator that spans every node: rank `r` is MPI's world rank
/// `r`. [`Error::NotInitialized`] when the runtime did not start under an
/// MPI launcher (or before [`crate::init`]).
pub fn world() -> Result<SpanningCommunicator> {
    if layout().is_none() {
        return Err(Error::NotInitialized);
    }
    SpanningCommunicator::world()
}

/// Waits until the sends of every give to another node have completed
/// (their blocks freed), moving MPI on meanwhile. The raw tier's blocking
/// give calls it after a give to another node: a caller that next blocks
/// in a wait on the node's heap makes no MPI progress, and MPICH sends a
/// large message only while its sender calls MPI.
pub(crate) fn complete_gives() -> Result<()> {
    comm::finish_gives(true)
}

/// The spanning world of the typed API ([`crate::Universe::world`]),
/// made at init under an MPI launcher.
static TYPED_WORLD: OnceLock<SpanningCommunicator> = OnceLock::new();

/// Makes the world of the typed API span every node (from [`crate::init`],
/// collective over every rank of the job); nothing when no MPI launcher
/// started the runtime.
pub(crate) fn make_typed_world() -> Result<()> {
    if layout().is_none() || TYPED_WORLD.get().is_some() {
        return Ok(());
    }
    let w = SpanningCommunicator::world()?;
    TYPED_WORLD
        .set(w)
        .map_err(|_| Error::Internal("the spanning world was made twice".into()))
}

/// Whether `s` is the spanning world of the typed API (not a duplicate).
pub(crate) fn is_typed_world(s: &SpanningCommunicator) -> bool {
    TYPED_WORLD
        .get()
        .is_some_and(|w| std::sync::Arc::ptr_eq(&w.inner, &s.inner))
}

/// The world of the typed API when it spans nodes: a
/// [`crate::SimpleCommunicator`] whose operations route through
/// [`SpanningCommunicator`]; `None` without an MPI launcher.
#[inline]
pub(crate) fn typed_world() -> Option<crate::SimpleCommunicator> {
    TYPED_WORLD
        .get()
        .map(|w| crate::SimpleCommunicator::spanning_nodes(w.clone()))
}

/// Whether the runtime started under an MPI launcher (its typed world
/// spans nodes); groups then name MPI world ranks ([`crate::group`]).
#[inline]
pub(crate) fn launched() -> bool {
    TYPED_WORLD.get().is_some()
}

/// MPI's world rank of this node's process of node world rank `w` (as
/// the node's engine names it).
pub(crate) fn job_rank_of(w: i32) -> Option<i32> {
    let t = &TYPED_WORLD.get()?.inner;
    usize::try_from(w)
        .ok()
        .and_then(|w| t.local_members.get(w).copied())
}

/// The node world rank of MPI world rank `j`; `None` for a process on
/// another node (or none at all).
pub(crate) fn node_rank_of(j: i32) -> Option<i32> {
    let t = &TYPED_WORLD.get()?.inner;
    usize::try_from(j)
        .ok()
        .and_then(|j| t.local_of.get(j).copied())
        .filter(|&l| l >= 0)
}

/// The number of nodes (virtual or real) of the job; 1 without an MPI
/// launcher.
pub fn nodes() -> u32 {
    layout().map_or(1, |l| l.nodes)
}

/// This process's node; 0 without an MPI launcher.
pub fn node() -> u32 {
    layout().map_or(0, |l| l.node)
}

/// The virtual node count of `HMPI_NODES` for a job of `size` ranks.
fn virtual_nodes(size: i32) -> Result<Option<u32>> {
    let Some(v) = std::env::var_os(NODES_VAR) else {
        return Ok(None);
    };
    let v = v.to_string_lossy().into_owned();
    match v.trim().parse::<u32>() {
        Ok(k) if k >= 1 && i64::from(k) <= i64::from(size) => Ok(Some(k)),
        _ => Err(Error::Arg {
            reason: format!(
                "{NODES_VAR}={v}: want a node count from 1 to the number of ranks ({size})"
            ),
        }),
    }
}

/// The virtual node of world rank `r` of `n` among `k` nodes: contiguous
/// blocks whose sizes differ by at most one.
pub(crate) fn virtual_node_of(r: i32, n: i32, k: u32) -> u32 {
    ((i64::from(r) * i64::from(k)) / i64::from(n)) as u32
}

/// Joins MPI and attaches this node's segment, when an MPI launcher
/// started the process (see the module docs); nothing otherwise, or when
/// a segment is attached already.
pub(crate) fn start() -> Result<()> {
    if launcher().is_none()
        || STARTED.get().is_some()
        || shmheap::segment::Segment::current().is_some()
    {
        return Ok(());
    }
    let (universe, provided) = ::mpi::initialize_with_threading(::mpi::Threading::Multiple)
        .ok_or_else(|| Error::Internal("MPI was initialized before hmpi_core::init".into()))?;
    mpi::set_thread_multiple(provided == ::mpi::Threading::Multiple);
    let world = RawComm::world()?;
    let (rank, size) = (world.rank()?, world.size()?);
    // From here on an error must reach every rank of the node before
    // anyone returns: the node's ranks agree on success at each step.
    let (node_comm, node_key) = match virtual_nodes(size)? {
        Some(k) => {
            let b = virtual_node_of(rank, size, k);
            let c = world
                .split(Some(b as i32), rank)?
                .ok_or_else(|| Error::Internal("virtual node split gave nothing".into()))?;
            // A virtual node must share memory: within one machine.
            let within = c.split_shared(rank)?;
            let ok = i32::from(within.size()? == c.size()?);
            if world.allreduce_min(ok)? == 0 {
                return Err(Error::Arg {
                    reason: format!(
                        "{NODES_VAR}={k}: a virtual node would span machines; \
                         use a multiple of the machine count"
                    ),
                });
            }
            (c, i64::from(b))
        }
        // A node is named by its lowest world rank.
        None => {
            let shared = world.split_shared(rank)?;
            let lowest = shared.allgather_i64(i64::from(rank))?;
            let first = lowest.iter().copied().min().unwrap_or(i64::from(rank));
            (shared, first)
        }
    };
    let keys = world.allgather_i64(node_key)?;
    let mut distinct = keys.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let node = distinct.binary_search(&node_key).unwrap_or(0) as u32;
    let nodes = distinct.len() as u32;
    let (local_rank, local_size) = (node_comm.rank()?, node_comm.size()?);

    // The node's segment: its first rank creates it and names it.
    let mut file = None;
    let mut name = Vec::new();
    if local_rank == 0 {
        let made = shmheap::segment::SegmentSpec::from_env(local_size as u32)
            .map_err(Error::from)
            .and_then(|spec| {
                shmheap::segment::SegmentFile::create(&spec, &format!("node{node}"))
                    .map_err(Error::from)
            });
        match made {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                name =
                    format!("/proc/{}/fd/{}", std::process::id(), f.fd().as_raw_fd()).into_bytes();
                file = Some(f);
            }
            Err(e) => eprintln!("hmpi: node {node}: cannot create the node heap: {e}"),
        }
    }
    node_comm.bcast(&mut name, 0)?;
    if name.is_empty() {
        return Err(Error::Comm {
            reason: format!("node {node}: its first rank could not create the node heap"),
        });
    }
    let path = String::from_utf8_lossy(&name).into_owned();
    let attached = match &file {
        Some(f) => shmheap::attach(f.path(), local_rank as u32, local_size as u32),
        None => shmheap::attach(
            std::path::Path::new(&path),
            local_rank as u32,
            local_size as u32,
        ),
    };
    let ok = i32::from(attached.is_ok());
    // The creator's descriptor stays open at least until every rank of
    // the node has opened the file.
    let all_ok = node_comm.allreduce_min(ok)?;
    if let Err(e) = attached {
        return Err(e.into());
    }
    if all_ok == 0 {
        return Err(Error::Comm {
            reason: format!("node {node}: a rank could not attach the node heap {path}"),
        });
    }
    let layout = Layout {
        world_rank: rank,
        node,
        nodes,
    };
    STARTED
        .set(Started {
            layout,
            universe: Mutex::new(Some(universe)),
            _file: file,
        })
        .map_err(|_| Error::Internal("multi-node start-up ran twice".into()))?;
    Ok(())
}

/// Ends MPI (at finalize, after the node's final barrier). A panicking
/// thread ends the whole job instead: its peers on other nodes could wait
/// for it forever.
pub(crate) fn stop() {
    let Some(s) = STARTED.get() else {
        return;
    };
    if std::thread::panicking() {
        eprintln!(
            "hmpi: rank {} (node {} of {}) failed; ending the job",
            s.layout.world_rank, s.layout.node, s.layout.nodes
        );
        // The launcher forwards output asynchronously and may drop what
        // is still in flight when the abort kills the job: give it a moment.
        use std::io::Write;
        let _ = std::io::stderr().flush();
        std::thread::sleep(std::time::Duration::from_millis(250));
        if let Ok(w) = RawComm::world() {
            w.abort(1);
        }
        return;
    }
    // Gives to other nodes still in flight complete first (their
    // receivers take them before they finalize).
    if let Err(e) = comm::finish_gives(true) {
        eprintln!(
            "hmpi: rank {}: a give to another node failed: {e}",
            s.layout.world_rank
        );
    }
    // A barrier over every node first: a rank leaves only when every
    // rank has finalized (MPI_Finalize alone need not wait).
    if let Ok(w) = RawComm::world() {
        let _ = w.barrier();
    }
    let u = s.universe.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(u);
}

/// The MPI library's version string (`MPI_Get_library_version`; callable
/// before init), e.g. to choose the matching launcher.
pub fn library_version() -> Option<String> {
    ::mpi::environment::library_version().ok()
}
