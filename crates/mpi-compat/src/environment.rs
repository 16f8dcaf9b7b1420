//! rsmpi's `mpi::environment`: initialisation, the [`Universe`], threading
//! levels and what the implementation reports about itself.

use crate::topology::SimpleCommunicator;

/// The job's environment: owns the world; dropping it finalizes (rsmpi's
/// `Universe`).
#[derive(Debug)]
pub struct Universe(hmpi_core::Universe);

impl Universe {
    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator(self.0.world())
    }

    /// `MPI_UNIVERSE_SIZE`: the processes the job may have, the ranks the
    /// launcher started (there is no spawning).
    pub fn size(&self) -> Option<usize> {
        usize::try_from(hmpi_core::traits::Communicator::size(&self.0.world())).ok()
    }

    /// `MPI_APPNUM`: `None`, as the launcher starts one program.
    pub fn appnum(&self) -> Option<i32> {
        None
    }
}

/// MPI's thread support levels. hmpi always provides
/// [`Threading::Multiple`].
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

/// Initializes MPI; `None` if it already was (or was finalized), as
/// rsmpi. A failure of the runtime itself aborts with its message.
pub fn initialize() -> Option<Universe> {
    match hmpi_core::init() {
        Ok(u) => Some(Universe(u)),
        Err(hmpi_core::Error::AlreadyInitialized | hmpi_core::Error::Finalized) => None,
        Err(e) => crate::fatal(&e),
    }
}

/// Initializes MPI asking for `threading`; the level provided is
/// [`Threading::Multiple`] whatever was asked for (the standard allows a
/// higher level than requested).
pub fn initialize_with_threading(threading: Threading) -> Option<(Universe, Threading)> {
    let _ = threading;
    initialize().map(|u| (u, Threading::Multiple))
}

/// The thread support level of the initialized runtime.
pub fn threading_support() -> Threading {
    Threading::Multiple
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
