//! Init, finalize and the process-wide routines of the C interface:
//! `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`, `MPI_Initialized`,
//! `MPI_Finalized`, `MPI_Abort`, thread levels, clocks, names and versions,
//! `MPI_Alloc_mem`/`MPI_Free_mem`, and the handle conversions.
//!
//! `MPI_Init` starts the runtime (`hmpi_core::init`: the node heap, the
//! engine's endpoint, a barrier over the job) and sets up `MPI_COMM_WORLD`
//! and `MPI_COMM_SELF` with the error handler `MPI_ERRORS_ARE_FATAL`.
//! Every thread may call every routine: the level provided is always
//! `MPI_THREAD_MULTIPLE`. `MPI_Finalize` completes requests that the
//! program freed while pending, then finalizes the runtime (a barrier over
//! the world) unless a session still holds it (see [`crate::session`]:
//! the runtime then ends with the last session). The heap stays shared
//! after it.
//!
//! In C:
//! ```c
//! int provided;
//! MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//! double t0 = MPI_Wtime();
//! // ...
//! MPI_Finalize();
//! ```

use crate::abi::{
    self, Aint, Comm, Datatype, Errhandler, File, Group, Info, Message, Op, Request, Session, Win,
};
use crate::errors::{api, err, out, put, put_string, MpiError};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The runtime, from `MPI_Init` to `MPI_Finalize`.
static UNIVERSE: Mutex<Option<hmpi_core::Universe>> = Mutex::new(None);
/// Whether `MPI_Init` succeeded once (stays true after finalize).
static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// The thread that called `MPI_Init` (`pthread_self`).
static MAIN_THREAD: AtomicUsize = AtomicUsize::new(0);

fn init() -> Result<(), MpiError> {
    if INITIALIZED.load(Ordering::Acquire) {
        // SYNC POINT: Acquire pairs with the Release store below.
        return err(abi::ERR_OTHER, "MPI_Init was already called");
    }
    attach_heap()?;
    let u = hmpi_core::init()?;
    crate::comm::init_predefined(&u);
    *UNIVERSE.lock().unwrap_or_else(|p| p.into_inner()) = Some(u);
    // SAFETY: pthread_self has no preconditions.
    MAIN_THREAD.store(unsafe { libc::pthread_self() } as usize, Ordering::Relaxed);
    // SYNC POINT: Release publishes the predefined communicators to
    // threads that check MPI_Initialized (Acquire).
    INITIALIZED.store(true, Ordering::Release);
    Ok(())
}

/// Joins the node's heap before the runtime starts (`MPI_Init` and the
/// first `MPI_Session_init`), when the launcher named one.
pub(crate) fn attach_heap() -> Result<(), MpiError> {
    if std::env::var_os(shmheap::env::SHM_NAME).is_some() && !shmheap::is_attached() {
        crate::alloc::may_attach().map_err(|m| MpiError::new(abi::ERR_OTHER, m))?;
    }
    Ok(())
}

const LIBRARY_VERSION: &str = concat!(
    "hmpi ",
    env!("CARGO_PKG_VERSION"),
    ": MPI 5.0 standard ABI (point-to-point subset) over a node-shared heap"
);

mpi_fn! {
    /// Starts the runtime (collective over the job).
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
        api("MPI_Init", init)
    }

    /// Starts the runtime; every thread level is provided as
    /// `MPI_THREAD_MULTIPLE`.
    fn MPI_Init_thread / PMPI_Init_thread(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        _required: c_int,
        provided: *mut c_int,
    ) -> c_int {
        api("MPI_Init_thread", || {
            out(provided, "provided")?;
            init()?;
            // SAFETY: checked non-null.
            unsafe { provided.write(abi::THREAD_MULTIPLE) };
            Ok(())
        })
    }

    /// Ends the runtime (collective over the job).
    fn MPI_Finalize / PMPI_Finalize() -> c_int {
        api("MPI_Finalize", || {
            let Some(u) = UNIVERSE.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                return err(abi::ERR_OTHER, if hmpi_core::environment::world_finalized() {
                    "MPI_Finalize was already called"
                } else {
                    "MPI_Init has not been called"
                });
            };
            crate::attr::finalize()?;
            crate::request::wait_detached();
            u.finalize()?;
            Ok(())
        })
    }

    /// Whether `MPI_Init` was called (true after `MPI_Finalize` too).
    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) -> c_int {
        api("MPI_Initialized", || {
            // SYNC POINT: Acquire pairs with init's Release.
            let v = INITIALIZED.load(Ordering::Acquire);
            // SAFETY: the caller's int pointer.
            unsafe { put(flag, "flag", c_int::from(v)) }
        })
    }

    /// Whether `MPI_Finalize` was called.
    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) -> c_int {
        api("MPI_Finalized", || {
            // The world model's end (sessions may keep the runtime going).
            let v = hmpi_core::environment::world_finalized();
            // SAFETY: the caller's int pointer.
            unsafe { put(flag, "flag", c_int::from(v)) }
        })
    }

    /// Ends the whole job with `errorcode` (1 if outside 1..=255).
    fn MPI_Abort / PMPI_Abort(comm: Comm, errorcode: c_int) -> c_int {
        let rank = hmpi_core::environment::endpoint().map_or(-1, |ep| ep.rank());
        let name = match comm {
            abi::COMM_WORLD => "MPI_COMM_WORLD".to_owned(),
            abi::COMM_SELF => "MPI_COMM_SELF".to_owned(),
            c => format!("{:#x}", c.0),
        };
        // One write(2) for the whole line, as for a fatal error.
        let line =
            format!("hmpi: rank {rank} called MPI_Abort({name}, {errorcode}); ending the job\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        hmpi_core::abort(errorcode)
    }

    /// The thread level provided (`MPI_THREAD_MULTIPLE`).
    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) -> c_int {
        api("MPI_Query_thread", || {
            // SAFETY: the caller's int pointer.
            unsafe { put(provided, "provided", abi::THREAD_MULTIPLE) }
        })
    }

    /// Whether the caller is the thread that called `MPI_Init`.
    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
        api("MPI_Is_thread_main", || {
            // SAFETY: pthread_self has no preconditions.
            let me = unsafe { libc::pthread_self() } as usize;
            // Relaxed: written once by MPI_Init, before the program can ask.
            let main = MAIN_THREAD.load(Ordering::Relaxed);
            // SAFETY: the caller's int pointer.
            unsafe { put(flag, "flag", c_int::from(me == main)) }
        })
    }

    /// The host name.
    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) -> c_int {
        api("MPI_Get_processor_name", || {
            let host = hmpi_core::processor_name()?;
            // SAFETY: MPI requires MPI_MAX_PROCESSOR_NAME bytes at `name`.
            unsafe { put_string(name, abi::MAX_PROCESSOR_NAME, len, &host) }
        })
    }

    /// The MPI version of the interface: 5.0.
    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
        api("MPI_Get_version", || {
            out(subversion, "subversion")?;
            // SAFETY: the caller's int pointers.
            unsafe {
                put(version, "version", abi::MPI_VERSION)?;
                put(subversion, "subversion", abi::MPI_SUBVERSION)
            }
        })
    }

    /// The library's name and version.
    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, len: *mut c_int) -> c_int {
        api("MPI_Get_library_version", || {
            // SAFETY: MPI requires MPI_MAX_LIBRARY_VERSION_STRING bytes.
            unsafe { put_string(version, abi::MAX_LIBRARY_VERSION_STRING, len, LIBRARY_VERSION) }
        })
    }

    /// The standard ABI's version: 1.0.
    fn MPI_Abi_get_version / PMPI_Abi_get_version(major: *mut c_int, minor: *mut c_int) -> c_int {
        api("MPI_Abi_get_version", || {
            out(minor, "abi_minor")?;
            // SAFETY: the caller's int pointers.
            unsafe {
                put(major, "abi_major", abi::ABI_VERSION)?;
                put(minor, "abi_minor", abi::ABI_SUBVERSION)
            }
        })
    }

    /// Memory in the node's shared heap, 64-byte aligned
    /// (`*(void **)baseptr`).
    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: Aint, info: Info, baseptr: *mut c_void) -> c_int {
        api("MPI_Alloc_mem", || {
            let p = out(baseptr.cast::<*mut c_void>(), "baseptr")?;
            if info != abi::INFO_NULL && info != abi::INFO_ENV {
                return err(34, "info objects are not supported: pass MPI_INFO_NULL"); // MPI_ERR_INFO
            }
            let Ok(size) = usize::try_from(size) else {
                return err(abi::ERR_ARG, format!("negative size {size}"));
            };
            let m = crate::alloc::alloc_mem(size);
            if m.is_null() {
                return err(abi::ERR_NO_MEM, format!("cannot allocate {size} bytes"));
            }
            // SAFETY: checked non-null; MPI passes a `void **` here.
            unsafe { p.write(m) };
            Ok(())
        })
    }

    /// Frees memory from `MPI_Alloc_mem`.
    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) -> c_int {
        // SAFETY: memory from MPI_Alloc_mem (MPI's contract) or null.
        unsafe { crate::alloc::free(base) };
        abi::SUCCESS
    }
}

/// Seconds since an arbitrary moment, the same clock on every rank.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    hmpi_core::time()
}

/// Seconds since an arbitrary moment, the same clock on every rank.
#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    hmpi_core::time()
}

/// The resolution of `MPI_Wtime`, in seconds.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    hmpi_core::time_resolution()
}

/// The resolution of `MPI_Wtime`, in seconds.
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    hmpi_core::time_resolution()
}

/// `MPI_<Kind>_toint` and `MPI_<Kind>_fromint`: handles are ints already.
macro_rules! int_conversions {
    ($($ty:ident: $to:ident $pto:ident $from:ident $pfrom:ident;)*) => {$(
        #[doc = concat!("The `int` of a `", stringify!($ty), "` handle.")]
        #[no_mangle]
        pub extern "C" fn $to(h: $ty) -> c_int {
            h.0 as c_int
        }
        #[doc = concat!("The `int` of a `", stringify!($ty), "` handle.")]
        #[no_mangle]
        pub extern "C" fn $pto(h: $ty) -> c_int {
            h.0 as c_int
        }
        #[doc = concat!("The `", stringify!($ty), "` handle of an `int`.")]
        #[no_mangle]
        pub extern "C" fn $from(i: c_int) -> $ty {
            $ty(i as u32 as usize)
        }
        #[doc = concat!("The `", stringify!($ty), "` handle of an `int`.")]
        #[no_mangle]
        pub extern "C" fn $pfrom(i: c_int) -> $ty {
            $ty(i as u32 as usize)
        }
    )*};
}

int_conversions! {
    Comm: MPI_Comm_toint PMPI_Comm_toint MPI_Comm_fromint PMPI_Comm_fromint;
    Errhandler: MPI_Errhandler_toint PMPI_Errhandler_toint MPI_Errhandler_fromint PMPI_Errhandler_fromint;
    Group: MPI_Group_toint PMPI_Group_toint MPI_Group_fromint PMPI_Group_fromint;
    Message: MPI_Message_toint PMPI_Message_toint MPI_Message_fromint PMPI_Message_fromint;
    Request: MPI_Request_toint PMPI_Request_toint MPI_Request_fromint PMPI_Request_fromint;
    Datatype: MPI_Type_toint PMPI_Type_toint MPI_Type_fromint PMPI_Type_fromint;
    Op: MPI_Op_toint PMPI_Op_toint MPI_Op_fromint PMPI_Op_fromint;
    Info: MPI_Info_toint PMPI_Info_toint MPI_Info_fromint PMPI_Info_fromint;
    File: MPI_File_toint PMPI_File_toint MPI_File_fromint PMPI_File_fromint;
    Session: MPI_Session_toint PMPI_Session_toint MPI_Session_fromint PMPI_Session_fromint;
    Win: MPI_Win_toint PMPI_Win_toint MPI_Win_fromint PMPI_Win_fromint;
}
