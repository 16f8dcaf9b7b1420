//! Sessions of the C interface (MPI 4.0's session model), on
//! `hmpi_core::session`: `MPI_Session_init` / `_finalize`, the process
//! sets (`mpi://WORLD`, `mpi://SELF`), `MPI_Group_from_session_pset`,
//! `MPI_Comm_create_from_group`, `MPI_Intercomm_create_from_groups`, the
//! session error handlers and the session buffer for buffered sends.
//!
//! A program may use sessions without `MPI_Init`, or both: the first of
//! them in a process starts the runtime (collective over the job), the
//! last one to end ends it (`hmpi_core::environment`). An error in a
//! session routine goes to the session's error handler (the one given to
//! `MPI_Session_init`, or set since); a bad session handle is
//! `MPI_ERR_SESSION` on the handler of `MPI_COMM_SELF` (the initial one,
//! `MPI_ERRORS_ARE_FATAL`, without `MPI_Init`). `MPI_Comm_create_from_group`
//! and `MPI_Intercomm_create_from_groups` raise their errors on the error
//! handler they are given, which the new communicator gets.
//!
//! A communicator made from a group that `MPI_Group_from_session_pset`
//! gave uses the session's buffer for buffered sends when it has none of
//! its own; one made from another group (a subgroup built with
//! `MPI_Group_incl`, say) is linked to no session and falls back to the
//! process's buffer. `MPI_Session_iflush_buffer` flushes at the call and
//! gives a request that is complete already (as `MPI_Ibsend` here).
//!
//! In C:
//! ```c
//! MPI_Session s;
//! MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
//! MPI_Group g;
//! MPI_Group_from_session_pset(s, "mpi://WORLD", &g);
//! MPI_Comm comm;
//! MPI_Comm_create_from_group(g, "org.example.app", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
//! MPI_Barrier(comm);
//! MPI_Comm_free(&comm);
//! MPI_Group_free(&g);
//! MPI_Session_finalize(&s);
//! ```

use crate::abi::{self, Comm, Count, Errhandler, Group as GroupH, Info, Request, Session};
use crate::comm::{group_ref, store_comm_with, store_group};
use crate::errors::{
    api, call_object_handler, err, guarded, handler_for, out, put, store_handler, Handler,
    MpiError, Res, SessionErrhandlerFn, UserFn,
};
use crate::handles::Table;
use hmpi_core::session as core;
use hmpi_core::{Group, Info as CoreInfo};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, Weak};

/// `MPI_ERR_SESSION`.
const ERR_SESSION: c_int = 60;
/// The kind tag of session handles (see [`crate::handles`]).
const KIND_SESSION: usize = 0x31;
/// `MPI_BUFFER_AUTOMATIC`.
const BUFFER_AUTOMATIC: usize = 2;

/// A session as the C interface sees it.
struct Entry {
    session: core::Session,
    errhandler: Mutex<Handler>,
    /// The info given to `MPI_Session_init`, with the thread level.
    info: CoreInfo,
}

impl Entry {
    fn errhandler(&self) -> Handler {
        self.errhandler
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

static SESSIONS: Table<Arc<Entry>> = Table::new(KIND_SESSION);

/// The groups that `MPI_Group_from_session_pset` made, and their session
/// (weak both: a freed group or an ended session drops out).
static PSET_GROUPS: Mutex<Vec<(Weak<Group>, Weak<Entry>)>> = Mutex::new(Vec::new());

fn session_ref(s: Session) -> Res<Arc<Entry>> {
    if s == abi::SESSION_NULL {
        return err(ERR_SESSION, "MPI_SESSION_NULL is not a session");
    }
    SESSIONS.get(s.0).map_err(|_| {
        MpiError::new(
            ERR_SESSION,
            format!(
                "{:#x} is not a session (finalized, or another kind of handle)",
                s.0
            ),
        )
    })
}

/// Runs a session routine: the handle is looked up first (an error there
/// goes to `MPI_COMM_SELF`'s handler), the body's errors go to the
/// session's handler.
fn api_session(func: &'static str, s: Session, body: impl FnOnce(&Entry) -> Res) -> c_int {
    let e = match guarded(|| session_ref(s)) {
        Ok(e) => e,
        Err(x) => return api(func, || Err(x)),
    };
    match guarded(|| body(&e)) {
        Ok(()) => abi::SUCCESS,
        Err(x) => call_object_handler(func, &e.errhandler(), s, x),
    }
}

/// Runs a routine whose error handler is an argument: a bad handler goes
/// to `MPI_COMM_SELF`'s, the body's errors to the one given.
fn api_with_handler(
    func: &'static str,
    errhandler: Errhandler,
    body: impl FnOnce(&Handler) -> Res,
) -> c_int {
    let h = match guarded(|| handler_for(errhandler, "communicators")) {
        Ok(h) => h,
        Err(x) => return api(func, || Err(x)),
    };
    match guarded(|| body(&h)) {
        Ok(()) => abi::SUCCESS,
        Err(x) => call_object_handler(func, &h, abi::SESSION_NULL, x),
    }
}

/// A C string argument.
///
/// # Safety
/// `s` is NUL-terminated when not null.
unsafe fn text<'a>(s: *const c_char, what: &str) -> Res<&'a str> {
    if s.is_null() {
        return err(abi::ERR_ARG, format!("the {what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("the {what} is not UTF-8")))
}

/// The session a group came from, if `MPI_Group_from_session_pset` made it.
fn session_of(g: &Arc<Group>) -> Option<Arc<Entry>> {
    let mut list = PSET_GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    list.retain(|(wg, ws)| wg.strong_count() > 0 && ws.strong_count() > 0);
    list.iter()
        .find(|(wg, _)| wg.upgrade().is_some_and(|x| Arc::ptr_eq(&x, g)))
        .and_then(|(_, ws)| ws.upgrade())
}

/// A string tag (at most `MPI_MAX_STRINGTAG_LEN` bytes).
///
/// # Safety
/// As for [`text`].
unsafe fn tag_text<'a>(s: *const c_char) -> Res<&'a str> {
    // SAFETY: the caller's guarantee.
    let t = unsafe { text(s, "string tag") }?;
    if t.len() >= MAX_STRINGTAG_LEN {
        return err(
            abi::ERR_ARG,
            format!(
                "a string tag of {} bytes: MPI_MAX_STRINGTAG_LEN is {MAX_STRINGTAG_LEN}",
                t.len()
            ),
        );
    }
    Ok(t)
}

/// `MPI_MAX_STRINGTAG_LEN`.
const MAX_STRINGTAG_LEN: usize = 1024;

/// Attaches a session buffer of `size` bytes.
fn attach(e: &Entry, buffer: *mut c_void, size: Count) -> Res {
    if buffer as usize == BUFFER_AUTOMATIC {
        return err(
            abi::ERR_BUFFER,
            "MPI_BUFFER_AUTOMATIC is not supported: attach a buffer of the program's own",
        );
    }
    let n = usize::try_from(size)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative buffer size {size}")))?;
    if buffer.is_null() && n > 0 {
        return err(abi::ERR_BUFFER, "buffer is a null pointer");
    }
    // SAFETY: MPI's contract: the memory stays valid until detached.
    unsafe { e.session.attach_buffer(buffer.cast(), n) }?;
    Ok(())
}

/// Detaches the session buffer: its address to `*(void **)buffer_addr`,
/// its size through `put_size`.
fn detach(e: &Entry, buffer_addr: *mut c_void, put_size: impl FnOnce(usize) -> Res) -> Res {
    let p = out(buffer_addr.cast::<*mut c_void>(), "buffer_addr")?;
    let (base, size) = e.session.detach_buffer()?;
    // SAFETY: checked non-null; `buffer_addr` points to a `void *` (MPI's
    // contract).
    unsafe { p.write(base.cast()) };
    put_size(size)
}

/// A request that is complete already, for the `iflush` routines (which
/// flush at the call).
pub(crate) fn completed_request(request: *mut Request) -> Res {
    let p = out(request, "request")?;
    let r = crate::coll::completed(crate::grequest::self_ref()?)?;
    // SAFETY: checked non-null; the caller's request variable.
    unsafe { p.write(r) };
    Ok(())
}

mpi_fn! {
    /// Opens a session (the runtime starts with the first session or
    /// `MPI_Init` of the process).
    fn MPI_Session_init / PMPI_Session_init(info: Info, errhandler: Errhandler, session: *mut Session) -> c_int {
        let h = match guarded(|| handler_for(errhandler, "sessions")) {
            Ok(h) => h,
            Err(x) => return api("MPI_Session_init", || Err(x)),
        };
        let r = guarded(|| {
            let p = out(session, "session")?;
            let mut i = crate::info::hints_of(info)?;
            i.set("thread_level", "MPI_THREAD_MULTIPLE")?;
            crate::env::attach_heap()?;
            let s = core::Session::init()?;
            let e = Arc::new(Entry {
                session: s,
                errhandler: Mutex::new(h.clone()),
                info: i,
            });
            let handle = SESSIONS
                .insert(e)
                .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many sessions"))?;
            // SAFETY: checked non-null; the caller's handle.
            unsafe { p.write(Session(handle)) };
            Ok(())
        });
        match r {
            Ok(()) => abi::SUCCESS,
            Err(x) => call_object_handler("MPI_Session_init", &h, abi::SESSION_NULL, x),
        }
    }

    /// Ends a session (`*session` becomes `MPI_SESSION_NULL`); the last
    /// holder of the runtime ends it (collective over the job).
    fn MPI_Session_finalize / PMPI_Session_finalize(session: *mut Session) -> c_int {
        let found = guarded(|| {
            let p = out(session, "session")?;
            // SAFETY: checked non-null; the caller's handle.
            let s = unsafe { p.read() };
            Ok((s, session_ref(s)?.errhandler()))
        });
        let (s, handler) = match found {
            Ok(x) => x,
            Err(x) => return api("MPI_Session_finalize", || Err(x)),
        };
        let r = guarded(|| {
            let entry = SESSIONS.remove(s.0).map_err(|_| {
                MpiError::new(ERR_SESSION, "the session is being finalized by another thread")
            })?;
            // SAFETY: checked non-null above; the caller's handle.
            unsafe { session.write(abi::SESSION_NULL) };
            crate::request::wait_detached();
            match Arc::try_unwrap(entry) {
                Ok(e) => Ok(e.session.finalize()?),
                // A routine of another thread still has the session: it
                // ends (dropped) when that call returns.
                Err(_) => Ok(()),
            }
        });
        match r {
            Ok(()) => abi::SUCCESS,
            Err(x) => call_object_handler("MPI_Session_finalize", &handler, s, x),
        }
    }

    /// The number of process sets (two: `mpi://WORLD` and `mpi://SELF`).
    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: Session, info: Info, npset_names: *mut c_int) -> c_int {
        api_session("MPI_Session_get_num_psets", session, |_| {
            if info != abi::INFO_NULL {
                crate::info::info_of(info)?;
            }
            // SAFETY: the caller's int pointer.
            unsafe { put(npset_names, "npset_names", core::Session::pset_names().len() as c_int) }
        })
    }

    /// The name of process set `n` (truncated to `*pset_len` bytes, NUL
    /// included; nothing with 0); `*pset_len` becomes the size it needs.
    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(
        session: Session,
        info: Info,
        n: c_int,
        pset_len: *mut c_int,
        pset_name: *mut c_char,
    ) -> c_int {
        api_session("MPI_Session_get_nth_pset", session, |_| {
            if info != abi::INFO_NULL {
                crate::info::info_of(info)?;
            }
            let names = core::Session::pset_names();
            let Some(name) = usize::try_from(n).ok().and_then(|i| names.get(i)) else {
                return err(
                    abi::ERR_ARG,
                    format!("process set {n} does not exist: there are {}", names.len()),
                );
            };
            let len = out(pset_len, "pset_len")?;
            // SAFETY: checked non-null; the caller's int.
            let cap = unsafe { len.read() };
            let Ok(cap) = usize::try_from(cap) else {
                return err(abi::ERR_ARG, format!("negative pset_len {cap}"));
            };
            if cap > 0 {
                let buf = out(pset_name, "pset_name")?;
                let k = name.len().min(cap - 1);
                // SAFETY: the caller's buffer holds `cap` > k bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(name.as_ptr(), buf.cast::<u8>(), k);
                    *buf.add(k) = 0;
                }
            }
            // The size the name needs, NUL included, whatever was copied.
            // SAFETY: as above.
            unsafe { len.write(name.len() as c_int + 1) };
            Ok(())
        })
    }

    /// The info of a process set: `mpi_size`, its number of processes.
    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: Session, pset_name: *const c_char, info: *mut Info) -> c_int {
        api_session("MPI_Session_get_pset_info", session, |e| {
            // SAFETY: a C string from the caller.
            let name = unsafe { text(pset_name, "process set name") }?;
            let n = e.session.pset_size(name)?;
            let mut i = CoreInfo::new();
            i.set("mpi_size", &n.to_string())?;
            // SAFETY: the caller's handle pointer.
            unsafe { crate::info::store_info(i, info) }
        })
    }

    /// The hints of a session (those given to `MPI_Session_init`, and
    /// `thread_level`).
    fn MPI_Session_get_info / PMPI_Session_get_info(session: Session, info_used: *mut Info) -> c_int {
        api_session("MPI_Session_get_info", session, |e| {
            // SAFETY: the caller's handle pointer.
            unsafe { crate::info::store_info(e.info.clone(), info_used) }
        })
    }

    /// The group of a process set.
    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: Session, pset_name: *const c_char, newgroup: *mut GroupH) -> c_int {
        api_session("MPI_Group_from_session_pset", session, |e| {
            out(newgroup, "newgroup")?;
            // SAFETY: a C string from the caller.
            let name = unsafe { text(pset_name, "process set name") }?;
            let g = e.session.group_from_pset(name)?;
            // SAFETY: checked non-null.
            unsafe { store_group(g, newgroup) }?;
            // SAFETY: written just above.
            let h = unsafe { newgroup.read() };
            if let Ok(g) = group_ref(h) {
                if let Ok(me) = SESSIONS.get(session.0) {
                    let mut list = PSET_GROUPS.lock().unwrap_or_else(|p| p.into_inner());
                    list.retain(|(wg, ws)| wg.strong_count() > 0 && ws.strong_count() > 0);
                    list.push((Arc::downgrade(&g), Arc::downgrade(&me)));
                }
            }
            Ok(())
        })
    }

    /// A communicator of a group's members, which all call this with the
    /// same group and string tag; it gets `errhandler`.
    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(
        group: GroupH,
        stringtag: *const c_char,
        info: Info,
        errhandler: Errhandler,
        newcomm: *mut Comm,
    ) -> c_int {
        api_with_handler("MPI_Comm_create_from_group", errhandler, |h| {
            out(newcomm, "newcomm")?;
            // SAFETY: a C string from the caller.
            let tag = unsafe { tag_text(stringtag) }?;
            let hints = crate::info::hints_of(info)?;
            let g = group_ref(group)?;
            if g.rank().is_none() {
                return err(
                    abi::ERR_GROUP,
                    "MPI_Comm_create_from_group called by a process outside the group",
                );
            }
            let c = match session_of(&g) {
                Some(s) => s.session.comm_from_group(&g, tag)?,
                None => core::comm_from_group(&g, tag)?,
            };
            c.set_info(&hints)?;
            // SAFETY: checked non-null.
            unsafe { store_comm_with(c, h.clone(), newcomm) }
        })
    }

    /// An intercommunicator between two disjoint groups, whose members
    /// all call this (with the same string tag); it gets `errhandler`.
    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(
        local_group: GroupH,
        local_leader: c_int,
        remote_group: GroupH,
        remote_leader: c_int,
        stringtag: *const c_char,
        info: Info,
        errhandler: Errhandler,
        newintercomm: *mut Comm,
    ) -> c_int {
        api_with_handler("MPI_Intercomm_create_from_groups", errhandler, |h| {
            out(newintercomm, "newintercomm")?;
            // SAFETY: a C string from the caller.
            let tag = unsafe { tag_text(stringtag) }?;
            let hints = crate::info::hints_of(info)?;
            let local = group_ref(local_group)?;
            let remote = group_ref(remote_group)?;
            let ic = core::intercomm_from_groups(&local, local_leader, &remote, remote_leader, tag)?;
            let c = ic.into_simple();
            c.set_info(&hints)?;
            // SAFETY: checked non-null.
            unsafe { store_comm_with(c, h.clone(), newintercomm) }
        })
    }

    /// Makes an error handler for sessions of a function.
    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(
        session_errhandler_fn: Option<SessionErrhandlerFn>,
        errhandler: *mut Errhandler,
    ) -> c_int {
        api("MPI_Session_create_errhandler", || {
            let Some(f) = session_errhandler_fn else {
                return err(abi::ERR_ARG, "the error handler function is null");
            };
            store_handler(UserFn::Session(f), errhandler)
        })
    }

    /// Sets a session's error handler.
    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: Session, errhandler: Errhandler) -> c_int {
        api_session("MPI_Session_set_errhandler", session, |e| {
            let h = handler_for(errhandler, "sessions")?;
            *e.errhandler.lock().unwrap_or_else(|p| p.into_inner()) = h;
            Ok(())
        })
    }

    /// A session's error handler.
    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: Session, errhandler: *mut Errhandler) -> c_int {
        api_session("MPI_Session_get_errhandler", session, |e| {
            // SAFETY: the caller's handle pointer.
            unsafe { put(errhandler, "errhandler", e.errhandler().handle()) }
        })
    }

    /// Calls a session's error handler with `errorcode`.
    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: Session, errorcode: c_int) -> c_int {
        match guarded(|| session_ref(session)) {
            Ok(e) => {
                let msg = format!("error code {errorcode} raised by the program");
                call_object_handler(
                    "MPI_Session_call_errhandler",
                    &e.errhandler(),
                    session,
                    MpiError::new(errorcode, msg),
                );
                abi::SUCCESS
            }
            Err(x) => api("MPI_Session_call_errhandler", || Err(x)),
        }
    }

    /// Attaches the session's buffer for buffered sends.
    fn MPI_Session_attach_buffer / PMPI_Session_attach_buffer(session: Session, buffer: *mut c_void, size: c_int) -> c_int {
        api_session("MPI_Session_attach_buffer", session, |e| attach(e, buffer, Count::from(size)))
    }

    /// [`MPI_Session_attach_buffer`] with a large size.
    fn MPI_Session_attach_buffer_c / PMPI_Session_attach_buffer_c(session: Session, buffer: *mut c_void, size: Count) -> c_int {
        api_session("MPI_Session_attach_buffer_c", session, |e| attach(e, buffer, size))
    }

    /// Waits for the session buffer's messages to go, then detaches it.
    fn MPI_Session_detach_buffer / PMPI_Session_detach_buffer(session: Session, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        api_session("MPI_Session_detach_buffer", session, |e| {
            out(size, "size")?;
            detach(e, buffer_addr, |n| {
                // SAFETY: checked non-null.
                unsafe { size.write(c_int::try_from(n).unwrap_or(c_int::MAX)) };
                Ok(())
            })
        })
    }

    /// [`MPI_Session_detach_buffer`] with a large size.
    fn MPI_Session_detach_buffer_c / PMPI_Session_detach_buffer_c(session: Session, buffer_addr: *mut c_void, size: *mut Count) -> c_int {
        api_session("MPI_Session_detach_buffer_c", session, |e| {
            out(size, "size")?;
            detach(e, buffer_addr, |n| {
                // SAFETY: checked non-null.
                unsafe { size.write(n as Count) };
                Ok(())
            })
        })
    }

    /// Waits until the session buffer's messages have gone.
    fn MPI_Session_flush_buffer / PMPI_Session_flush_buffer(session: Session) -> c_int {
        api_session("MPI_Session_flush_buffer", session, |e| Ok(e.session.flush_buffer()?))
    }

    /// [`MPI_Session_flush_buffer`] as a request (flushed at the call; the
    /// request is complete already).
    fn MPI_Session_iflush_buffer / PMPI_Session_iflush_buffer(session: Session, request: *mut Request) -> c_int {
        api_session("MPI_Session_iflush_buffer", session, |e| {
            out(request, "request")?;
            e.session.flush_buffer()?;
            completed_request(request)
        })
    }
}
