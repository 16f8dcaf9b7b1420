//! rsmpi's `mpi::environment`: initialisation, the [`Universe`], threading
//! levels and what the implementation reports about itself.

use std::sync::Mutex;
use std::thread::ThreadId;

use crate::topology::SimpleCommunicator;

/// The job's environment: owns the world and the buffer attached for
/// buffered sends; dropping it detaches the buffer (waiting for the
/// buffered messages to go) and finalizes (rsmpi's `Universe`).
#[derive(Debug)]
pub struct Universe {
    /// The buffer attached with [`Universe::set_buffer_size`]. Declared
    /// before `core`, though `Drop` detaches it before either field goes.
    buffer: Option<Vec<u8>>,
    core: hmpi_core::Universe,
}

impl Universe {
    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator(self.core.world())
    }

    /// `MPI_UNIVERSE_SIZE`: the processes the job may have, the ranks the
    /// launcher started (there is no spawning).
    pub fn size(&self) -> Option<usize> {
        usize::try_from(hmpi_core::traits::Communicator::size(&self.core.world())).ok()
    }

    /// `MPI_APPNUM`: `None`, as the launcher starts one program.
    pub fn appnum(&self) -> Option<i32> {
        None
    }

    /// The size in bytes of the buffer attached for buffered sends (0:
    /// none).
    pub fn buffer_size(&self) -> usize {
        self.buffer.as_ref().map_or(0, Vec::len)
    }

    /// Attaches a buffer of `size` bytes for buffered sends
    /// (`MPI_Buffer_attach`), detaching the one attached before; 0 leaves
    /// none. Each buffered message takes its size plus
    /// `MPI_BSEND_OVERHEAD` (512) bytes of it until it has gone.
    pub fn set_buffer_size(&mut self, size: usize) {
        self.detach_buffer();
        if size > 0 {
            let mut buffer = vec![0u8; size];
            // SAFETY: the vector is kept in `self.buffer`, whose heap
            // memory does not move, until `detach_buffer` (also run on
            // drop) has detached it.
            crate::check(unsafe { hmpi_core::buffered::attach(buffer.as_mut_ptr(), size) });
            self.buffer = Some(buffer);
        }
    }

    /// Waits until every buffered message has gone, then detaches the
    /// buffer (`MPI_Buffer_detach`); nothing if none is attached.
    pub fn detach_buffer(&mut self) {
        if let Some(buffer) = &self.buffer {
            let (base, size) = crate::check(hmpi_core::buffered::detach());
            if base.cast_const() != buffer.as_ptr() || size != buffer.len() {
                crate::fatal(&"MPI_Buffer_detach: the buffer detached is not the one attached");
            }
            self.buffer = None;
        }
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        self.detach_buffer();
    }
}

/// MPI's thread support levels. hmpi's runtime is thread-safe at every
/// level: [`initialize`] provides [`Threading::Multiple`], and
/// [`initialize_with_threading`] the level asked for.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Threading {
    /// `MPI_THREAD_SINGLE`.
    Single,
    /// `MPI_THREAD_FUNNELED`.
    Funneled,
    /// `MPI_THREAD_SERIALIZED`.
    Serialized,
    /// `MPI_THREAD_MULTIPLE`.
    Multiple,
}

/// The level provided and the thread that initialized, set by the
/// initialization that succeeded.
static STATE: Mutex<Option<(Threading, ThreadId)>> = Mutex::new(None);

/// Initializes MPI; `None` if it already was (or was finalized), as
/// rsmpi. A failure of the runtime itself aborts with its message.
pub fn initialize() -> Option<Universe> {
    initialize_with_threading(Threading::Multiple).map(|(u, _)| u)
}

/// Initializes MPI asking for `threading`, which is the level provided
/// (`MPI_Init_thread` may provide the level required: hmpi's runtime
/// supports all of them); `None` if MPI already was initialized (or was
/// finalized).
pub fn initialize_with_threading(threading: Threading) -> Option<(Universe, Threading)> {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    match hmpi_core::init() {
        Ok(core) => {
            *state = Some((threading, std::thread::current().id()));
            Some((Universe { buffer: None, core }, threading))
        }
        Err(hmpi_core::Error::AlreadyInitialized | hmpi_core::Error::Finalized) => None,
        Err(e) => crate::fatal(&e),
    }
}

/// The thread support level of the initialized runtime (`MPI_Query_thread`).
pub fn threading_support() -> Threading {
    STATE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map_or(Threading::Multiple, |(t, _)| t)
}

/// rsmpi's rule for the first use of a derived datatype: MPI must be
/// initialized and not finalized, and unless the level is `Multiple` it
/// must be the thread that initialized. Panics (as rsmpi) otherwise.
pub(crate) fn check_derive_state(type_name: &str) {
    let state = *STATE.lock().unwrap_or_else(|p| p.into_inner());
    if hmpi_core::is_finalized() {
        panic!(
            "the datatype of #[derive(Equivalence)] for `{type_name}` was first asked for after \
             MPI was finalized"
        );
    }
    let Some((level, main)) = state.filter(|_| hmpi_core::is_initialized()) else {
        panic!(
            "the datatype of #[derive(Equivalence)] for `{type_name}` was first asked for before \
             MPI was initialized: initialize first"
        );
    };
    if level != Threading::Multiple && std::thread::current().id() != main {
        panic!(
            "the datatype of #[derive(Equivalence)] for `{type_name}` was first asked for on a \
             thread other than the one that initialized MPI with {level:?}: ask for it on that \
             thread first, or initialize with Threading::Multiple"
        );
    }
}

/// Whether MPI is initialized (and not finalized).
pub fn is_initialized() -> bool {
    hmpi_core::is_initialized()
}

/// Whether MPI has been finalized.
pub fn is_finalized() -> bool {
    hmpi_core::is_finalized()
}

/// The version of the MPI standard implemented: `(major, minor)`.
pub fn version() -> (i32, i32) {
    (5, 0)
}

/// The implementation's description (`MPI_Get_library_version`).
pub fn library_version() -> Result<String, std::string::FromUtf8Error> {
    Ok(format!(
        "hmpi {} (rsmpi-compatible API)",
        env!("CARGO_PKG_VERSION")
    ))
}

/// The processor's name (`MPI_Get_processor_name`).
pub fn processor_name() -> Result<String, std::string::FromUtf8Error> {
    Ok(crate::check(hmpi_core::processor_name()))
}

/// Seconds on the node-wide clock (`MPI_Wtime`).
pub fn time() -> f64 {
    hmpi_core::time()
}

/// The clock's resolution in seconds (`MPI_Wtick`).
pub fn time_resolution() -> f64 {
    hmpi_core::time_resolution()
}
