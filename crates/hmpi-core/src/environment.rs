//! Init and finalize: [`init`], [`Universe`], and the process-wide helpers
//! [`time`], [`time_resolution`], [`processor_name`], [`abort`].
//!
//! [`init`] creates this process's engine endpoint ([`vci::Endpoint`]): it
//! joins the node heap, publishes the rank's VCI and waits for every rank
//! (collective over the job; a rank that ends before it arrives makes init
//! fail with [`Error::ProcFailed`] rather than wait forever). It returns the [`Universe`], from which
//! [`Universe::world`] gives the world communicator. Dropping the universe
//! finalizes: a barrier over the world (so no rank leaves while a peer still
//! expects it), then the runtime is marked finished; every later
//! communication in this process returns [`Error::Finalized`]. A second
//! `init` (before or after finalize) is an error: one runtime per process.
//!
//! The runtime has two kinds of holders, as MPI 4 has two process models:
//! the world model (the [`Universe`] of [`init`]) and any number of
//! sessions ([`crate::session::Session`]). The first holder of a process
//! starts the runtime (the collective start above, whichever kind it is
//! on each rank); the runtime ends (the final barrier, then finished)
//! when the last holder ends, so a program may use sessions without
//! [`init`], or both together, in any order. Once ended it cannot start
//! again (the endpoint is made once per process): a session or [`init`]
//! after that is [`Error::Finalized`].
//!
//! The endpoint itself lives in a process-wide static and is never
//! destroyed (its shared part must outlive every peer's use of it, which is
//! the engine's rule), so communicators and requests never dangle, even if
//! they outlive the universe.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! // Alone this is a world of one; under `hmpirun -n N`, rank r of N.
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! assert_eq!((world.rank(), world.size()), (0, 1));
//! let t0 = hmpi_core::time();
//! assert!(hmpi_core::time() >= t0);
//! assert!(hmpi_core::init().is_err()); // one runtime per process
//! drop(universe); // finalize
//! assert!(matches!(
//!     world.process_at_rank(0).send(&1u8),
//!     Err(hmpi_core::Error::Finalized)
//! ));
//! ```

use crate::comm::{Communicator, SimpleCommunicator};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

const UNINIT: u8 = 0;
const ACTIVE: u8 = 2;
const FINALIZED: u8 = 3;

/// The life of the runtime in this process.
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The engine endpoint; set once, never dropped.
static ENDPOINT: OnceLock<vci::Endpoint> = OnceLock::new();
/// ENDPOINT's value while the runtime is active, else null: what
/// [`endpoint`] reads on every call (one load, where the state and the
/// OnceLock take two checks).
static ACTIVE_ENDPOINT: AtomicPtr<vci::Endpoint> = AtomicPtr::new(std::ptr::null_mut());

/// This process's engine endpoint while the runtime is active
/// ([`Error::NotInitialized`] before [`init`], [`Error::Finalized`] after).
/// For layers built on the engine (ownership passing, the C interface).
#[inline]
pub fn endpoint() -> Result<&'static vci::Endpoint> {
    // SYNC POINT: Acquire pairs with the Release store in `init`: the
    // endpoint behind the pointer is initialised.
    let p = ACTIVE_ENDPOINT.load(Ordering::Acquire);
    // SAFETY: non-null only while it points to ENDPOINT's value, which is
    // set once and never dropped.
    match unsafe { p.as_ref() } {
        Some(ep) => Ok(ep),
        None => inactive(),
    }
}

/// [`endpoint`]'s answer when the runtime is not active.
#[cold]
fn inactive() -> Result<&'static vci::Endpoint> {
    // Acquire: pairs with the Release store of ACTIVE in `init`, after the
    // endpoint was set (OnceLock synchronises its own contents too).
    match STATE.load(Ordering::Acquire) {
        ACTIVE => ENDPOINT
            .get()
            .ok_or_else(|| Error::Internal("active runtime without an endpoint".into())),
        FINALIZED => Err(Error::Finalized),
        _ => Err(Error::NotInitialized),
    }
}

/// The job's environment: owns the world; dropping it finalizes.
///
/// rsmpi's `Universe`. Not `Clone`: there is one per process.
#[derive(Debug)]
pub struct Universe {
    world: SimpleCommunicator,
}

/// Who holds the runtime (see the module docs): its start and its end
/// happen under this lock, so a holder that arrives while another thread
/// starts or ends the runtime waits for the outcome.
struct Holders {
    /// The world model: `None` never started, `Some(true)` active,
    /// `Some(false)` finalized.
    world: Option<bool>,
    /// Open sessions.
    sessions: usize,
    /// The runtime's world communicator while it is active (the final
    /// barrier's, and what sessions build on).
    comm: Option<SimpleCommunicator>,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders {
    world: None,
    sessions: 0,
    comm: None,
});

/// Whether the world model was finalized (`MPI_Finalized`), even while
/// sessions keep the runtime going.
static WORLD_ENDED: AtomicBool = AtomicBool::new(false);

fn holders() -> MutexGuard<'static, Holders> {
    HOLDERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the runtime unless it runs already; its world communicator.
fn start(h: &mut Holders) -> Result<SimpleCommunicator> {
    if let Some(c) = &h.comm {
        return Ok(c.clone());
    }
    // Acquire: pairs with the Release stores below and in `finish`.
    if STATE.load(Ordering::Acquire) == FINALIZED {
        return Err(Error::Finalized);
    }
    // Multi-node hook (feature `mpi`): under mpirun / mpiexec, join MPI
    // and attach this node's heap segment before the endpoint is made on it.
    #[cfg(feature = "mpi")]
    crate::multinode::start()?;
    // A failure leaves nothing published: a retry starts afresh.
    let ep = vci::Endpoint::new()?;
    if ENDPOINT.set(ep).is_err() {
        return Err(Error::Internal("endpoint set twice".into()));
    }
    // From here on the peers wait for this rank (the world's collective
    // state is set up below): a rank that ends now has not finalized, and
    // their waits on it must say so (the engine left the word at
    // "attached").
    mark(shmheap::segment::RankState::Running);
    // Release: publishes the endpoint to threads that load ACTIVE.
    STATE.store(ACTIVE, Ordering::Release);
    if let Some(ep) = ENDPOINT.get() {
        // SYNC POINT: Release pairs with the Acquire load in `endpoint`.
        ACTIVE_ENDPOINT.store(std::ptr::from_ref(ep).cast_mut(), Ordering::Release);
    }
    let world = SimpleCommunicator::world()?;
    world.prepare_collectives();
    // Under an MPI launcher (feature `mpi`): the world of the typed API
    // spans every node (collective over every rank of the job).
    #[cfg(feature = "mpi")]
    crate::multinode::make_typed_world()?;
    h.comm = Some(world.clone());
    Ok(world)
}

/// Which holder ends.
#[derive(Clone, Copy)]
pub(crate) enum Holder {
    World,
    Session,
}

/// Ends one holder; the last one ends the runtime (a barrier over the
/// world unless this thread panics, then finished), and returns the
/// barrier's error.
pub(crate) fn release(who: Holder) -> Result<()> {
    let mut h = holders();
    match who {
        Holder::World => {
            h.world = Some(false);
            // Relaxed: a flag for MPI_Finalized; the runtime's own state
            // is published by STATE.
            WORLD_ENDED.store(true, Ordering::Relaxed);
        }
        Holder::Session => h.sessions = h.sessions.saturating_sub(1),
    }
    if h.world == Some(true) || h.sessions > 0 {
        return Ok(());
    }
    let Some(world) = h.comm.take() else {
        return Ok(());
    };
    // A rank leaves only when every rank has reached its end. A panicking
    // rank skips the barrier: its peers may be waiting for its messages,
    // and its failure ends the job through the launcher.
    let r = if std::thread::panicking() {
        Ok(())
    } else {
        world.barrier()
    };
    finish();
    r
}

/// Opens a session's hold on the runtime (starting it if this is the
/// process's first holder); the runtime's world communicator.
pub(crate) fn open_session() -> Result<SimpleCommunicator> {
    let mut h = holders();
    let world = start(&mut h)?;
    h.sessions += 1;
    Ok(world)
}

/// The runtime's world communicator while any holder keeps it going
/// ([`Error::NotInitialized`] / [`Error::Finalized`] otherwise).
pub(crate) fn runtime_world() -> Result<SimpleCommunicator> {
    match &holders().comm {
        Some(c) => Ok(c.clone()),
        None if is_finalized() => Err(Error::Finalized),
        None => Err(Error::NotInitialized),
    }
}

/// Initializes the runtime for the world model: creates this process's
/// endpoint (collective over every rank of the job) unless a session
/// started it already. Errors: [`Error::AlreadyInitialized`] on a second
/// call while active, [`Error::Finalized`] after finalize (or after the
/// runtime ended with the last session), or the engine's error if the
/// endpoint cannot be created (then `init` may be retried).
pub fn init() -> Result<Universe> {
    let mut h = holders();
    match h.world {
        Some(true) => return Err(Error::AlreadyInitialized),
        Some(false) => return Err(Error::Finalized),
        None => {}
    }
    let world = start(&mut h)?;
    h.world = Some(true);
    Ok(Universe { world })
}

/// rsmpi's `mpi::initialize()`: [`init`] as an `Option`, `None` if the
/// runtime was already initialized **or init failed** (use [`init`] to know
/// why). Unlike rsmpi it never panics.
pub fn initialize() -> Option<Universe> {
    init().ok()
}

/// Whether the runtime is initialized and not yet finalized.
pub fn is_initialized() -> bool {
    // Acquire: see `endpoint`.
    STATE.load(Ordering::Acquire) == ACTIVE
}

/// Whether the runtime was finalized in this process (its last holder,
/// the world model or a session, ended).
pub fn is_finalized() -> bool {
    // Acquire: see `endpoint`.
    STATE.load(Ordering::Acquire) == FINALIZED
}

/// Whether the world model was finalized in this process (`MPI_Finalized`):
/// true from [`Universe::finalize`] on, also while sessions still keep the
/// runtime going.
pub fn world_finalized() -> bool {
    // Relaxed: a flag set once; nothing else is read through it.
    WORLD_ENDED.load(Ordering::Relaxed)
}

impl Universe {
    /// The world communicator: every rank of the job (under an MPI
    /// launcher, with feature `mpi`, every rank of every node:
    /// [`crate::multinode`]).
    pub fn world(&self) -> SimpleCommunicator {
        #[cfg(feature = "mpi")]
        if let Some(w) = crate::multinode::typed_world() {
            return w;
        }
        self.world.clone()
    }

    /// The communicator of this process alone (`MPI_COMM_SELF`).
    pub fn self_comm(&self) -> SimpleCommunicator {
        SimpleCommunicator::self_of(self.world.world_rank_of_me())
    }

    /// Seconds since an arbitrary moment, the same on every rank of the node
    /// (`MPI_Wtime`); see [`time`].
    pub fn wtime(&self) -> f64 {
        time()
    }

    /// Finalizes now, reporting an error of the final barrier (dropping
    /// the universe does the same and ignores it). The runtime ends here
    /// unless a session still holds it (then it ends with the last
    /// session).
    pub fn finalize(self) -> Result<()> {
        std::mem::forget(self);
        release(Holder::World)
    }
}

/// Records where this rank's runtime is in the node segment's header.
fn mark(state: shmheap::segment::RankState) {
    if let Some(seg) = shmheap::segment::Segment::current() {
        seg.set_rank_state(state);
    }
}

fn finish() {
    // Multi-node hook (feature `mpi`): end MPI, or the whole job when this
    // rank panics (before its node's peers can see it finalized).
    #[cfg(feature = "mpi")]
    crate::multinode::stop();
    mark(shmheap::segment::RankState::Finalized);
    // Release: as below; `endpoint` answers from STATE from now on.
    ACTIVE_ENDPOINT.store(std::ptr::null_mut(), Ordering::Release);
    // Release: orders this thread's earlier operations before the state
    // change that other threads observe with Acquire.
    STATE.store(FINALIZED, Ordering::Release);
}

impl Drop for Universe {
    fn drop(&mut self) {
        // Errors cannot be reported from drop (use `finalize` to see them).
        let _ = release(Holder::World);
    }
}

/// Seconds since an arbitrary moment (`MPI_Wtime`). The monotonic clock of
/// the node, so times of different ranks compare (`MPI_WTIME_IS_GLOBAL` on
/// one node).
pub fn time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The resolution of [`time`] in seconds (`MPI_Wtick`).
pub fn time_resolution() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `time`.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The name of this processor (`MPI_Get_processor_name`): the host name.
pub fn processor_name() -> Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname writes at most
    // that many bytes.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return Err(Error::Internal(format!(
            "gethostname: {}",
            std::io::Error::last_os_error()
        )));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Ends the whole job (`MPI_Abort`): flushes standard output and error, and
/// exits this process with `code`; the launcher sees a failed rank and
/// terminates the others. A `code` outside `1..=255` exits with status 1
/// (a zero status would not be a failure, and the system keeps only 8 bits).
pub fn abort(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let status = if (1..=255).contains(&code) { code } else { 1 };
    std::process::exit(status)
}
