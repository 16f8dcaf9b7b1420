//! Errors of the C interface: classes, error handlers, and the wrapper
//! that every routine runs in.
//!
//! A routine's body returns `Result<(), MpiError>`; [`api`] turns that into
//! the returned code after calling the error handler of the communicator
//! the error belongs to (`MPI_COMM_SELF`'s when it belongs to none, as MPI
//! 4 says; the initial handler `MPI_ERRORS_ARE_FATAL` before `MPI_Init`):
//!
//! * `MPI_ERRORS_ARE_FATAL` (the default) and `MPI_ERRORS_ABORT` print
//!   `hmpi: rank R: MPI_Xxx: what went wrong [MPI_ERR_CLASS]` on standard
//!   error and end the process with the error class as exit status, so the
//!   launcher ends the job;
//! * `MPI_ERRORS_RETURN` returns the code;
//! * a handler made with `MPI_Comm_create_errhandler` is called with the
//!   communicator and the code, and the code is returned (one made with
//!   `MPI_Win_create_errhandler` is for windows only, see `win.rs`).
//!
//! Error codes are the standard ABI's error classes themselves, so
//! `MPI_Error_class(code) == code` for them. A program adds classes and
//! codes of its own (`MPI_Add_error_class`, `MPI_Add_error_code`, with
//! strings by `MPI_Add_error_string`): they are numbered from
//! `MPI_ERR_LASTCODE + 1` up, never reused once removed, and
//! `MPI_Error_class`, `MPI_Error_string` and the `MPI_LASTUSEDCODE`
//! attribute (the largest one in use) know them. A panic inside the
//! library never crosses the C boundary: it becomes `MPI_ERR_INTERN`.
//!
//! In C:
//! ```c
//! MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
//! int rc = MPI_Send(buf, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
//! int cls;
//! MPI_Error_class(rc, &cls);          // MPI_ERR_RANK
//! ```

use crate::abi::{self, Comm, Errhandler};
use crate::comm::{comm_ref, CommRef};
use crate::handles::{Table, KIND_ERRHANDLER};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// What went wrong: the MPI error class, a message, and the communicator
/// whose error handler is called (`None`: `MPI_COMM_SELF`'s). Boxed, so
/// that the results of the hot paths stay one word wide.
#[derive(Debug)]
pub struct MpiError(Box<ErrorData>);

/// The contents of an [`MpiError`].
#[derive(Debug)]
pub struct ErrorData {
    pub class: c_int,
    pub msg: String,
    pub on: Option<CommRef>,
}

impl std::ops::Deref for MpiError {
    type Target = ErrorData;
    fn deref(&self) -> &ErrorData {
        &self.0
    }
}

impl MpiError {
    #[cold]
    pub fn new(class: c_int, msg: impl Into<String>) -> Self {
        MpiError(Box::new(ErrorData {
            class,
            msg: msg.into(),
            on: None,
        }))
    }

    /// Raises this error on `comm` (unless it already names one).
    pub fn on(mut self, comm: &CommRef) -> Self {
        if self.0.on.is_none() {
            self.0.on = Some(comm.clone());
        }
        self
    }
}

pub type Res<T = ()> = Result<T, MpiError>;

/// Shorthand for an error value.
pub fn err<T>(class: c_int, msg: impl Into<String>) -> Res<T> {
    Err(MpiError::new(class, msg))
}

/// The class of an error of the runtime.
pub fn class_of(e: &hmpi_core::Error) -> c_int {
    use hmpi_core::Error as E;
    match e {
        E::Rank { .. } => abi::ERR_RANK,
        E::Root { .. } => abi::ERR_ROOT,
        E::Tag { .. } => abi::ERR_TAG,
        E::Count { .. } => abi::ERR_COUNT,
        E::Truncate { .. } => abi::ERR_TRUNCATE,
        E::Comm { .. } => abi::ERR_COMM,
        E::Group { .. } => abi::ERR_GROUP,
        E::Type { .. } => abi::ERR_TYPE,
        E::Arg { .. } => abi::ERR_ARG,
        E::Buffer { .. } => abi::ERR_BUFFER,
        E::Topology { .. } => abi::ERR_TOPOLOGY,
        E::Dims { .. } => abi::ERR_DIMS,
        E::Op { .. } => abi::ERR_OP,
        E::TooLarge { .. } => abi::ERR_COUNT,
        E::InfoKey { .. } => abi::ERR_INFO_KEY,
        E::InfoValue { .. } => abi::ERR_INFO_VALUE,
        E::InfoNoKey { .. } => abi::ERR_INFO_NOKEY,
        E::Heap(shmheap::Error::Exhausted(_)) => abi::ERR_NO_MEM,
        E::Heap(_) | E::Engine(_) | E::AlreadyInitialized => abi::ERR_OTHER,
        E::NotInitialized | E::Finalized => abi::ERR_OTHER,
        E::Internal(_) => abi::ERR_INTERN,
        E::Win { .. } => abi::ERR_WIN,
        E::RmaRange { .. } => abi::ERR_RMA_RANGE,
        E::RmaSync { .. } => abi::ERR_RMA_SYNC,
        E::RmaAttach { .. } => abi::ERR_RMA_ATTACH,
        E::RmaFlavor { .. } => abi::ERR_RMA_FLAVOR,
        E::ProcFailed { .. } => abi::ERR_PROC_ABORTED,
        E::NoMemory { .. } => abi::ERR_NO_MEM,
        E::Keyval { .. } => abi::ERR_KEYVAL,
        E::Callback { code } => *code,
        _ => abi::ERR_OTHER,
    }
}

impl From<hmpi_core::Error> for MpiError {
    fn from(e: hmpi_core::Error) -> Self {
        let msg = match &e {
            hmpi_core::Error::NotInitialized => "MPI_Init has not been called".to_owned(),
            hmpi_core::Error::Finalized => "MPI_Finalize was already called".to_owned(),
            other => other.to_string(),
        };
        MpiError::new(class_of(&e), msg)
    }
}

impl From<hmpi_core::raw::EngineError> for MpiError {
    fn from(e: hmpi_core::raw::EngineError) -> Self {
        hmpi_core::Error::from(e).into()
    }
}

/// The name of an error class (`MPI_ERR_...`), or `None` for a value that
/// is not one.
pub fn class_name(class: c_int) -> Option<&'static str> {
    usize::try_from(class)
        .ok()
        .and_then(|c| abi::ERROR_CLASSES.get(c))
        .map(|(name, _)| *name)
}

/// How a fatal error's line names its class: `MPI_ERR_...`, or the number
/// of a class the program added.
fn class_label(code: c_int) -> String {
    if let Some(n) = class_name(code) {
        return n.to_owned();
    }
    match user_class_of(code) {
        Some(c) => format!("user error class {c}"),
        None => "MPI_ERR_UNKNOWN".to_owned(),
    }
}

// ------------------------------------------------------ user error classes

/// An error class or code the program added: its class (itself for a
/// class) and its string.
struct UserCode {
    class: c_int,
    text: Option<String>,
}

/// The classes and codes the program added, and the next number.
struct UserCodes {
    codes: BTreeMap<c_int, UserCode>,
    next: c_int,
}

static USER_CODES: Mutex<UserCodes> = Mutex::new(UserCodes {
    codes: BTreeMap::new(),
    next: abi::ERR_LASTCODE + 1,
});

/// The value of the `MPI_LASTUSEDCODE` attribute: the largest error code
/// in use (`MPI_ERR_LASTCODE` while the program added none). MPI hands out
/// a pointer to it, so it lives here, updated as codes come and go.
pub static LAST_USED_CODE: AtomicI32 = AtomicI32::new(abi::ERR_LASTCODE);

fn user_codes() -> std::sync::MutexGuard<'static, UserCodes> {
    USER_CODES.lock().unwrap_or_else(|p| p.into_inner())
}

impl UserCodes {
    fn add(&mut self, class: Option<c_int>) -> Res<c_int> {
        let code = self.next;
        self.next = code
            .checked_add(1)
            .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "no error code is left"))?;
        self.codes.insert(
            code,
            UserCode {
                class: class.unwrap_or(code),
                text: None,
            },
        );
        self.publish();
        Ok(code)
    }

    /// Sets `MPI_LASTUSEDCODE` to the largest code in use.
    fn publish(&self) {
        let last = self
            .codes
            .keys()
            .next_back()
            .copied()
            .unwrap_or(abi::ERR_LASTCODE);
        // Relaxed: the value alone is read through the attribute; the
        // table itself is under its lock.
        LAST_USED_CODE.store(last, Ordering::Relaxed);
    }

    /// The entry of a code the program added (`MPI_ERR_ARG` otherwise).
    fn get_mut(&mut self, code: c_int, what: &str) -> Res<&mut UserCode> {
        self.codes.get_mut(&code).ok_or_else(|| {
            MpiError::new(
                abi::ERR_ARG,
                format!("{code} is not an error {what} the program added"),
            )
        })
    }
}

/// The class of an error code the program added (`None`: not one).
fn user_class_of(code: c_int) -> Option<c_int> {
    user_codes().codes.get(&code).map(|u| u.class)
}

/// The class of any valid error code: a standard class is its own, an
/// added code has the class it was added to.
fn class_of_code(code: c_int) -> Res<c_int> {
    if class_name(code).is_some() {
        return Ok(code);
    }
    user_class_of(code)
        .ok_or_else(|| MpiError::new(abi::ERR_ARG, format!("{code} is not an error code")))
}

/// Whether `class` is a class a code may be added to: a standard one
/// other than `MPI_SUCCESS`, or one the program added.
fn is_class(class: c_int) -> bool {
    if class_name(class).is_some() {
        return class != abi::SUCCESS;
    }
    user_codes()
        .codes
        .get(&class)
        .is_some_and(|u| u.class == class)
}

/// A user error handler (`MPI_Comm_create_errhandler`).
pub type CommErrhandlerFn = unsafe extern "C" fn(*mut Comm, *mut c_int, ...);

/// A user error handler for windows (`MPI_Win_create_errhandler`).
pub type WinErrhandlerFn = unsafe extern "C" fn(*mut crate::abi::Win, *mut c_int, ...);

/// A user error handler for sessions (`MPI_Session_create_errhandler`).
pub type SessionErrhandlerFn = unsafe extern "C" fn(*mut crate::abi::Session, *mut c_int, ...);

/// An error handler attached to a communicator.
#[derive(Clone, Debug)]
pub enum Handler {
    /// `MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_RETURN` or `MPI_ERRORS_ABORT`.
    Predefined(Errhandler),
    /// A user function, with the handle it was created under (it stays
    /// usable by communicators after `MPI_Errhandler_free`).
    User(Errhandler, Arc<UserHandler>),
}

impl Handler {
    pub fn handle(&self) -> Errhandler {
        match self {
            Handler::Predefined(h) | Handler::User(h, _) => *h,
        }
    }
}

#[derive(Debug)]
pub struct UserHandler {
    pub f: UserFn,
}

/// A user handler's function: for communicators or for windows (MPI
/// attaches each only to its own kind of object).
#[derive(Clone, Copy, Debug)]
pub enum UserFn {
    Comm(CommErrhandlerFn),
    Win(WinErrhandlerFn),
    Session(SessionErrhandlerFn),
}

impl UserFn {
    fn kind(&self) -> &'static str {
        match self {
            UserFn::Comm(_) => "communicators",
            UserFn::Win(_) => "windows",
            UserFn::Session(_) => "sessions",
        }
    }
}

/// Stores a new user error handler and writes its handle.
pub fn store_handler(f: UserFn, errhandler: *mut Errhandler) -> Res {
    let p = out(errhandler, "errhandler")?;
    let h = HANDLERS
        .insert(Arc::new(UserHandler { f }))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many error handlers"))?;
    // SAFETY: checked non-null above; the caller's handle pointer.
    unsafe { p.write(Errhandler(h)) };
    Ok(())
}

/// User error handlers by handle.
static HANDLERS: Table<Arc<UserHandler>> = Table::new(KIND_ERRHANDLER);

const PREDEFINED_HANDLERS: [Errhandler; 3] =
    [abi::ERRORS_ARE_FATAL, abi::ERRORS_RETURN, abi::ERRORS_ABORT];

/// The handler behind an errhandler handle, for an object whose user
/// handlers are made by `kind` (`"communicators"` or `"windows"`): a user
/// handler of the other kind is `MPI_ERR_ARG`.
pub fn handler_for(h: Errhandler, kind: &str) -> Res<Handler> {
    let got = handler_of(h)?;
    if let Handler::User(_, u) = &got {
        if u.f.kind() != kind {
            return err(
                abi::ERR_ARG,
                format!(
                    "{:#x} is an error handler for {}, not {kind}",
                    h.0,
                    u.f.kind()
                ),
            );
        }
    }
    Ok(got)
}

/// The handler behind an errhandler handle.
fn handler_of(h: Errhandler) -> Res<Handler> {
    if PREDEFINED_HANDLERS.contains(&h) {
        return Ok(Handler::Predefined(h));
    }
    if h == abi::ERRHANDLER_NULL {
        return err(
            abi::ERR_ERRHANDLER,
            "MPI_ERRHANDLER_NULL is not an error handler",
        );
    }
    HANDLERS.get(h.0).map(|u| Handler::User(h, u)).map_err(|_| {
        MpiError::new(
            abi::ERR_ERRHANDLER,
            format!("{:#x} is not an error handler", h.0),
        )
    })
}

fn rank_text() -> String {
    hmpi_core::environment::endpoint()
        .map(|ep| ep.rank().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Ends the job after an error under `MPI_ERRORS_ARE_FATAL`.
pub(crate) fn fatal(func: &str, e: &MpiError) -> ! {
    let line = format!(
        "hmpi: rank {}: {func}: {} [{}]\n",
        rank_text(),
        e.msg,
        class_label(e.class)
    );
    // One write(2) for the whole line (standard error is unbuffered, and
    // `eprintln!` writes each formatted piece on its own): the lines of
    // ranks that fail together never interleave, and a rank terminated
    // while another's failure ends the job never leaves half a line.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    hmpi_core::abort(e.class.clamp(1, 255))
}

/// Calls the error handler for `e` and returns the code to give back.
pub fn raise(func: &str, e: MpiError) -> c_int {
    let comm = match e.0.on.clone() {
        Some(c) => Some(c),
        // MPI_COMM_SELF's handler, after MPI_Finalize too (when the
        // communicator itself may no longer be used).
        None => crate::comm::predefined_comm(abi::COMM_SELF).map(CommRef::Static),
    };
    let Some(comm) = comm else {
        fatal(func, &e); // the initial handler, before MPI_Init
    };
    call_handler(func, &comm, e)
}

fn call_handler(func: &str, comm: &CommRef, e: MpiError) -> c_int {
    match comm.errhandler() {
        Handler::Predefined(h) if h == abi::ERRORS_RETURN => e.class,
        Handler::Predefined(_) => fatal(func, &e),
        Handler::User(_, u) => {
            let mut handle = comm.handle;
            let mut code = e.class;
            if let UserFn::Comm(f) = u.f {
                // SAFETY: a function the program registered with
                // MPI_Comm_create_errhandler, called as MPI specifies (the
                // communicator and the code by pointer).
                unsafe { f(&mut handle, &mut code) };
            }
            e.class
        }
    }
}

/// Calls `handler` for `e` outside any communicator: for a session (a
/// session handler gets `*object`) or for a routine whose error handler is
/// an argument (`MPI_Comm_create_from_group`: a communicator handler gets
/// `MPI_COMM_NULL`). Returns the code to give back.
pub fn call_object_handler(
    func: &str,
    handler: &Handler,
    object: crate::abi::Session,
    e: MpiError,
) -> c_int {
    match handler {
        Handler::Predefined(h) if *h == abi::ERRORS_RETURN => e.class,
        Handler::Predefined(_) => fatal(func, &e),
        Handler::User(_, u) => {
            let mut code = e.class;
            match u.f {
                UserFn::Session(f) => {
                    let mut s = object;
                    // SAFETY: a function the program registered with
                    // MPI_Session_create_errhandler, called as MPI
                    // specifies (the session and the code by pointer).
                    unsafe { f(&mut s, &mut code) };
                }
                UserFn::Comm(f) => {
                    let mut c = abi::COMM_NULL;
                    // SAFETY: as in `call_handler`; no communicator exists.
                    unsafe { f(&mut c, &mut code) };
                }
                UserFn::Win(_) => {}
            }
            e.class
        }
    }
}

/// Runs a body, catching a panic as `MPI_ERR_INTERN`.
pub fn guarded<T>(body: impl FnOnce() -> Res<T>) -> Res<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            err(abi::ERR_INTERN, format!("internal panic: {what}"))
        }
    }
}

/// Runs a routine's body: no panic crosses the C boundary, an error goes
/// through the error handler.
pub fn api(func: &'static str, body: impl FnOnce() -> Res) -> c_int {
    match guarded(body) {
        Ok(()) => abi::SUCCESS,
        Err(e) => raise(func, e),
    }
}

/// The error of a routine called before `MPI_Init` or after
/// `MPI_Finalize` that MPI allows only in between: `MPI_ERR_OTHER`,
/// raised on the initial error handler before `MPI_Init` (fatal) and on
/// `MPI_COMM_SELF`'s after `MPI_Finalize`, as MPI 4.1 (§11.2) says.
pub fn active() -> Res {
    if hmpi_core::is_initialized() {
        return Ok(());
    }
    err(
        abi::ERR_OTHER,
        if hmpi_core::is_finalized() {
            "MPI_Finalize was already called"
        } else {
            "MPI_Init has not been called"
        },
    )
}

/// [`api`] for a routine that is allowed only between `MPI_Init` and
/// `MPI_Finalize` and does not name a communicator (datatypes, groups,
/// operations, error handlers): [`active`] first.
pub fn api_active(func: &'static str, body: impl FnOnce() -> Res) -> c_int {
    api(func, || {
        active()?;
        body()
    })
}

/// [`api`] for a routine on a communicator: the handle is looked up
/// first, and the body's errors go to that communicator's handler.
pub fn api_comm(func: &'static str, comm: Comm, body: impl FnOnce(&CommRef) -> Res) -> c_int {
    api(func, || {
        let c = comm_ref(comm)?;
        body(&c).map_err(|e| e.on(&c))
    })
}

/// Checks an output pointer.
pub fn out<T>(p: *mut T, what: &str) -> Res<*mut T> {
    if p.is_null() {
        err(abi::ERR_ARG, format!("{what} is a null pointer"))
    } else {
        Ok(p)
    }
}

/// Writes `value` through a checked output pointer.
///
/// # Safety
/// `p`, if not null, is valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, what: &str, value: T) -> Res {
    let p = out(p, what)?;
    // SAFETY: non-null, and valid by the caller's guarantee.
    unsafe { p.write(value) };
    Ok(())
}

/// Copies `s` into a C buffer of `cap` bytes (truncated, NUL-terminated)
/// and stores its length.
///
/// # Safety
/// `buf` is valid for `cap` bytes and `len` for an int, when not null.
pub unsafe fn put_string(buf: *mut c_char, cap: usize, len: *mut c_int, s: &str) -> Res {
    out(buf, "the string buffer")?;
    out(len, "the length pointer")?;
    let bytes = s.as_bytes();
    let n = bytes.len().min(cap.saturating_sub(1));
    // SAFETY: `buf` holds `cap` >= n + 1 bytes (the caller's guarantee).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
        *len = n as c_int;
    }
    Ok(())
}

// ------------------------------------------------------------ the routines

mpi_fn! {
    /// The text of an error code.
    fn MPI_Error_string / PMPI_Error_string(code: c_int, string: *mut c_char, len: *mut c_int) -> c_int {
        api("MPI_Error_string", || {
            let text = match usize::try_from(code).ok().and_then(|c| abi::ERROR_CLASSES.get(c)) {
                Some(&(name, text)) => format!("{name}: {text}"),
                // An added code: its string, empty until one is set.
                None => match user_codes().codes.get(&code) {
                    Some(u) => u.text.clone().unwrap_or_default(),
                    None => return err(abi::ERR_ARG, format!("{code} is not an error code")),
                },
            };
            // SAFETY: MPI requires MPI_MAX_ERROR_STRING bytes at `string`.
            unsafe { put_string(string, abi::MAX_ERROR_STRING, len, &text) }
        })
    }

    /// The class of an error code (a standard code is its own class).
    fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
        api("MPI_Error_class", || {
            let c = class_of_code(code)?;
            // SAFETY: an int pointer from the caller.
            unsafe { put(class, "errorclass", c) }
        })
    }

    /// Adds an error class (numbered above `MPI_ERR_LASTCODE`).
    fn MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) -> c_int {
        api_active("MPI_Add_error_class", || {
            let p = out(errorclass, "errorclass")?;
            let c = user_codes().add(None)?;
            // SAFETY: checked non-null; the caller's int.
            unsafe { p.write(c) };
            Ok(())
        })
    }

    /// Adds an error code to a class (standard or added).
    fn MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
        api_active("MPI_Add_error_code", || {
            let p = out(errorcode, "errorcode")?;
            if !is_class(errorclass) {
                return err(abi::ERR_ARG, format!("{errorclass} is not an error class"));
            }
            let c = user_codes().add(Some(errorclass))?;
            // SAFETY: checked non-null; the caller's int.
            unsafe { p.write(c) };
            Ok(())
        })
    }

    /// Sets the string of an added class or code (`MPI_Error_string`'s
    /// answer; fewer than `MPI_MAX_ERROR_STRING` bytes).
    fn MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
        api_active("MPI_Add_error_string", || {
            if string.is_null() {
                return err(abi::ERR_ARG, "the error string is a null pointer");
            }
            // SAFETY: a NUL-terminated string from the caller (checked non-null).
            let text = unsafe { CStr::from_ptr(string) }.to_string_lossy().into_owned();
            if text.len() >= abi::MAX_ERROR_STRING {
                return err(
                    abi::ERR_ARG,
                    format!(
                        "an error string of {} bytes: MPI_MAX_ERROR_STRING is {}",
                        text.len(),
                        abi::MAX_ERROR_STRING
                    ),
                );
            }
            if class_name(errorcode).is_some() {
                return err(
                    abi::ERR_ARG,
                    format!("{errorcode} is a standard error code: its string is fixed"),
                );
            }
            user_codes().get_mut(errorcode, "code")?.text = Some(text);
            Ok(())
        })
    }

    /// Removes an added class (none of its codes may remain).
    fn MPI_Remove_error_class / PMPI_Remove_error_class(errorclass: c_int) -> c_int {
        api_active("MPI_Remove_error_class", || {
            let mut u = user_codes();
            if u.get_mut(errorclass, "class")?.class != errorclass {
                return err(abi::ERR_ARG, format!("{errorclass} is an error code, not a class"));
            }
            let codes = u
                .codes
                .iter()
                .filter(|&(&k, v)| v.class == errorclass && k != errorclass)
                .count();
            if codes > 0 {
                return err(
                    abi::ERR_ARG,
                    format!("error class {errorclass} still has {codes} codes: remove them first"),
                );
            }
            u.codes.remove(&errorclass);
            u.publish();
            Ok(())
        })
    }

    /// Removes an added code.
    fn MPI_Remove_error_code / PMPI_Remove_error_code(errorcode: c_int) -> c_int {
        api_active("MPI_Remove_error_code", || {
            let mut u = user_codes();
            if u.get_mut(errorcode, "code")?.class == errorcode {
                return err(abi::ERR_ARG, format!("{errorcode} is an error class, not a code"));
            }
            u.codes.remove(&errorcode);
            u.publish();
            Ok(())
        })
    }

    /// Removes the string of an added class or code.
    fn MPI_Remove_error_string / PMPI_Remove_error_string(errorcode: c_int) -> c_int {
        api_active("MPI_Remove_error_string", || {
            let mut u = user_codes();
            let e = u.get_mut(errorcode, "code")?;
            if e.text.take().is_none() {
                return err(abi::ERR_ARG, format!("error code {errorcode} has no string"));
            }
            Ok(())
        })
    }

    /// Sets a communicator's error handler.
    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Comm, errhandler: Errhandler) -> c_int {
        api_comm("MPI_Comm_set_errhandler", comm, |c| {
            c.set_errhandler(handler_for(errhandler, "communicators")?);
            Ok(())
        })
    }

    /// A communicator's error handler.
    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Comm, errhandler: *mut Errhandler) -> c_int {
        api_comm("MPI_Comm_get_errhandler", comm, |c| {
            // SAFETY: a handle pointer from the caller.
            unsafe { put(errhandler, "errhandler", c.errhandler().handle()) }
        })
    }

    /// Makes an error handler of a function.
    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(
        f: Option<CommErrhandlerFn>,
        errhandler: *mut Errhandler,
    ) -> c_int {
        api_active("MPI_Comm_create_errhandler", || {
            let Some(f) = f else {
                return err(abi::ERR_ARG, "the error handler function is null");
            };
            store_handler(UserFn::Comm(f), errhandler)
        })
    }

    /// Calls a communicator's error handler with `code`.
    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: Comm, code: c_int) -> c_int {
        match comm_ref(comm) {
            Ok(c) => {
                let msg = format!("error code {code} raised by the program");
                call_handler("MPI_Comm_call_errhandler", &c, MpiError::new(code, msg));
                abi::SUCCESS
            }
            Err(e) => raise("MPI_Comm_call_errhandler", e),
        }
    }

    /// Frees an error handler (communicators that use it keep it).
    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut Errhandler) -> c_int {
        api_active("MPI_Errhandler_free", || {
            let p = out(errhandler, "errhandler")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if !PREDEFINED_HANDLERS.contains(&h) && HANDLERS.remove(h.0).is_err() {
                return err(
                    abi::ERR_ERRHANDLER,
                    format!("{:#x} is not an error handler", h.0),
                );
            }
            // SAFETY: as above.
            unsafe { p.write(abi::ERRHANDLER_NULL) };
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_errors_map_to_classes() {
        assert_eq!(
            class_of(&hmpi_core::Error::Rank { rank: 3, size: 2 }),
            abi::ERR_RANK
        );
        assert_eq!(class_of(&hmpi_core::Error::Tag { tag: -9 }), abi::ERR_TAG);
        let e: MpiError = hmpi_core::raw::EngineError::Tag { tag: -9 }.into();
        assert_eq!(e.class, abi::ERR_TAG);
        assert!(e.msg.contains("-9"));
        assert_eq!(class_name(abi::ERR_TRUNCATE), Some("MPI_ERR_TRUNCATE"));
        assert_eq!(class_name(abi::ERR_ABI), Some("MPI_ERR_ABI"));
        assert_eq!(class_name(63), None);
        assert_eq!(class_name(-1), None);
    }

    #[test]
    fn added_codes_are_numbered_above_the_standard_ones_and_not_reused() {
        let mut u = UserCodes {
            codes: BTreeMap::new(),
            next: abi::ERR_LASTCODE + 1,
        };
        let class = u.add(None).unwrap();
        let code = u.add(Some(class)).unwrap();
        let arg = u.add(Some(abi::ERR_ARG)).unwrap();
        assert_eq!((class, code, arg), (0x4000, 0x4001, 0x4002));
        assert_eq!(u.codes[&code].class, class);
        assert_eq!(u.codes[&arg].class, abi::ERR_ARG);
        assert!(u.get_mut(abi::ERR_ARG, "code").is_err());
        u.codes.remove(&arg);
        u.publish();
        assert_eq!(LAST_USED_CODE.load(Ordering::Relaxed), code);
        assert_eq!(u.add(None).unwrap(), 0x4003);
        u.next = c_int::MAX;
        assert!(u.add(None).is_err());
    }
}
