//! One-sided communication in C: `MPI_Win_*`, `MPI_Put` …
//! `MPI_Compare_and_swap` and `MPI_Rput` … `MPI_Rget_accumulate`, all
//! marshalled onto `hmpi_core::window::Win` (the semantics live there).
//!
//! A window handle names an entry of this module's table (its own handle
//! kind). Errors of a routine on a window go through the window's error
//! handler (`MPI_ERRORS_ARE_FATAL` until `MPI_Win_set_errhandler` sets
//! another: a predefined one, or a function of
//! `MPI_Win_create_errhandler`, called with the window and the code,
//! after which the code is returned); errors of a creation go through
//! the communicator's. The request of an `MPI_R…` operation is complete at
//! once (the operation is done at the call), and the wait/test family
//! frees it.
//!
//! The info of a creating call and of `MPI_Win_set_info` must be an info
//! object or `MPI_INFO_NULL` (else `MPI_ERR_INFO`); its hints go to
//! `Win::set_info` (`no_locks` is the one that changes what a window
//! does), and `MPI_Win_get_info` returns a new info object with the hints
//! in effect (`Win::info`).
//!
//! In C:
//! ```c
//! double *base;
//! MPI_Win win;
//! MPI_Win_allocate(n * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
//! MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
//! MPI_Put(x, n, MPI_DOUBLE, 1, 0, n, MPI_DOUBLE, win);
//! MPI_Win_unlock(1, win);
//! MPI_Win_free(&win);
//! ```

use crate::abi::{self, Aint, Comm, Count, Datatype, Errhandler, Group, Info, Op, Request, Win};
use crate::coll_large::Int;
use crate::comm::{group_ref, store_group, CommRef};
use crate::datatype::{count_arg, type_ref};
use crate::errors::{
    api, api_comm, class_name, err, handler_for, out, put_string, raise, store_handler, Handler,
    MpiError, Res, UserFn, WinErrhandlerFn,
};
use crate::handles::{Table, KIND_WIN};
use crate::info::{hints_of, store_info};
use crate::op::op_ref;
use hmpi_core::op::{Operation, SystemOperation};
use hmpi_core::window::{Flavor, LockType, Win as CoreWin};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

const LOCK_EXCLUSIVE: c_int = 301;
const LOCK_SHARED: c_int = 302;
const FLAVOR_CREATE: c_int = 311;
const FLAVOR_ALLOCATE: c_int = 312;
const FLAVOR_DYNAMIC: c_int = 313;
const FLAVOR_SHARED: c_int = 314;
const UNIFIED: c_int = 321;
const WIN_BASE: c_int = 601;
const WIN_DISP_UNIT: c_int = 602;
const WIN_SIZE: c_int = 603;
const WIN_CREATE_FLAVOR: c_int = 604;
const WIN_MODEL: c_int = 605;

/// A window as the C interface keeps it.
struct Entry {
    win: CoreWin,
    /// The communicator it was made on (for its requests).
    comm: CommRef,
    errhandler: Mutex<Handler>,
    /// The attributes' values, which `MPI_Win_get_attr` hands out by
    /// address.
    size: Aint,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
    /// The attributes of user keys (`MPI_Win_set_attr`, see
    /// [`crate::attr`]).
    attrs: hmpi_core::attr::Attributes,
}

static WINS: Table<Arc<Entry>> = Table::new(KIND_WIN);

fn win_ref(w: Win) -> Res<Arc<Entry>> {
    if w == abi::WIN_NULL {
        return err(abi::ERR_WIN, "MPI_WIN_NULL is not a window");
    }
    WINS.get(w.0).map_err(|_| {
        MpiError::new(
            abi::ERR_WIN,
            format!(
                "{:#x} is not a window (freed, or another kind of handle)",
                w.0
            ),
        )
    })
}

/// Runs a routine on a window: errors go through the window's handler.
fn api_win(func: &'static str, w: Win, body: impl FnOnce(&Entry) -> Res) -> c_int {
    let e = match win_ref(w) {
        Ok(e) => e,
        Err(x) => return raise(func, x),
    };
    let r = match catch_unwind(AssertUnwindSafe(|| body(&e))) {
        Ok(r) => r,
        Err(_) => Err(MpiError::new(abi::ERR_INTERN, "internal panic")),
    };
    match r {
        Ok(()) => abi::SUCCESS,
        Err(x) => on_error(func, &handler_of(&e), w, x.class, &x.msg),
    }
}

fn handler_of(e: &Entry) -> Handler {
    e.errhandler
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The window's error handler for `class`: the code back under
/// `MPI_ERRORS_RETURN` and after a user handler (called with the window
/// `w` and the code), the end of the job otherwise.
fn on_error(func: &str, h: &Handler, w: Win, class: c_int, msg: &str) -> c_int {
    match h {
        Handler::Predefined(p) if *p == abi::ERRORS_RETURN => return class,
        Handler::Predefined(_) => {}
        Handler::User(_, u) => {
            if let UserFn::Win(f) = u.f {
                let (mut handle, mut code) = (w, class);
                // SAFETY: a function the program registered with
                // MPI_Win_create_errhandler, called as MPI specifies (the
                // window and the code by pointer).
                unsafe { f(&mut handle, &mut code) };
            }
            return class;
        }
    }
    let rank = hmpi_core::environment::endpoint()
        .map(|ep| ep.rank().to_string())
        .unwrap_or_else(|_| "?".into());
    eprintln!(
        "hmpi: rank {rank}: {func}: {msg} [{}]",
        class_name(class).unwrap_or("MPI_ERR_UNKNOWN")
    );
    hmpi_core::abort(class.clamp(1, 255))
}

fn core<T>(r: hmpi_core::Result<T>) -> Res<T> {
    r.map_err(MpiError::from)
}

fn disp_unit_arg(d: Aint) -> Res<u64> {
    u64::try_from(d).ok().filter(|&d| d > 0).ok_or_else(|| {
        MpiError::new(
            abi::ERR_ARG,
            format!("displacement unit {d} is not positive"),
        )
    })
}

fn size_arg(s: Aint) -> Res<u64> {
    u64::try_from(s).map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative window size {s}")))
}

fn disp_arg(d: Aint) -> Res<u64> {
    u64::try_from(d).map_err(|_| {
        MpiError::new(
            abi::ERR_RMA_RANGE,
            format!("negative target displacement {d}"),
        )
    })
}

fn system_op(op: Op) -> Res<SystemOperation> {
    match op_ref(op)? {
        Operation::System(s) => Ok(s),
        Operation::User(_) => err(
            abi::ERR_OP,
            "one-sided accumulates take predefined operations only",
        ),
    }
}

/// The hints of a creating call's info handle (`MPI_INFO_NULL`: none;
/// anything but an info object: `MPI_ERR_INFO`).
fn info_arg(info: Info) -> Res<hmpi_core::Info> {
    hints_of(info)
}

/// Stores a new window and writes its handle.
///
/// # Safety
/// `win` is valid for a write when not null.
unsafe fn store(w: CoreWin, hints: &hmpi_core::Info, comm: &CommRef, win: *mut Win) -> Res {
    let p = out(win, "win")?;
    core(w.set_info(hints))?;
    let flavor = match w.flavor() {
        Flavor::Create => FLAVOR_CREATE,
        Flavor::Allocate => FLAVOR_ALLOCATE,
        Flavor::Dynamic => FLAVOR_DYNAMIC,
        Flavor::Shared => FLAVOR_SHARED,
    };
    let e = Entry {
        size: w.size() as Aint,
        disp_unit: c_int::try_from(w.disp_unit()).unwrap_or(c_int::MAX),
        flavor,
        model: UNIFIED,
        win: w,
        comm: comm.clone(),
        errhandler: Mutex::new(Handler::Predefined(abi::ERRORS_ARE_FATAL)),
        attrs: hmpi_core::attr::Attributes::new(),
    };
    let h = WINS
        .insert(Arc::new(e))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many windows"))?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(Win(h)) };
    Ok(())
}

/// Writes the address `v` through the `void *` the caller passed for a
/// pointer.
///
/// # Safety
/// `baseptr`, if not null, is valid for a write of a pointer.
unsafe fn put_ptr(baseptr: *mut c_void, v: *mut c_void) -> Res {
    let p = out(baseptr.cast::<*mut c_void>(), "baseptr")?;
    // SAFETY: checked non-null; the caller's guarantee.
    unsafe { p.write(v) };
    Ok(())
}

mpi_fn! {
    /// A window over the caller's memory (collective).
    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: Aint, disp_unit: c_int,
        info: Info, comm: Comm, win: *mut Win) -> c_int {
        api_comm("MPI_Win_create", comm, |c| {
            let hints = info_arg(info)?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit as Aint)?);
            // SAFETY: the memory is the caller's, valid for the window's
            // life as MPI requires.
            let w = core(unsafe { CoreWin::create(&c.comm, base.cast(), s, d) })?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(w, &hints, c, win) }
        })
    }

    /// `MPI_Win_create` with a large displacement unit.
    fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: Aint, disp_unit: Aint,
        info: Info, comm: Comm, win: *mut Win) -> c_int {
        api_comm("MPI_Win_create_c", comm, |c| {
            let hints = info_arg(info)?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit)?);
            // SAFETY: as in MPI_Win_create.
            let w = core(unsafe { CoreWin::create(&c.comm, base.cast(), s, d) })?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(w, &hints, c, win) }
        })
    }

    /// `MPI_Win_allocate` with a large displacement unit.
    fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: Aint, disp_unit: Aint, info: Info,
        comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        api_comm("MPI_Win_allocate_c", comm, |c| {
            let hints = info_arg(info)?;
            out(baseptr, "baseptr")?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit)?);
            let w = core(CoreWin::allocate(&c.comm, s, d))?;
            let b = w.base();
            // SAFETY: the caller's pointers.
            unsafe {
                put_ptr(baseptr, b.cast())?;
                store(w, &hints, c, win)
            }
        })
    }

    /// `MPI_Win_allocate_shared` with a large displacement unit.
    fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: Aint, disp_unit: Aint,
        info: Info, comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        api_comm("MPI_Win_allocate_shared_c", comm, |c| {
            let hints = info_arg(info)?;
            out(baseptr, "baseptr")?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit)?);
            let w = core(CoreWin::allocate_shared(&c.comm, s, d))?;
            let b = w.base();
            // SAFETY: the caller's pointers.
            unsafe {
                put_ptr(baseptr, b.cast())?;
                store(w, &hints, c, win)
            }
        })
    }

    /// `MPI_Win_shared_query` with a large displacement unit.
    fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: Win, rank: c_int,
        size: *mut Aint, disp_unit: *mut Aint, baseptr: *mut c_void) -> c_int {
        api_win("MPI_Win_shared_query_c", win, |e| {
            let (s, d, b) = core(e.win.shared_query(rank))?;
            let (size, disp_unit) = (out(size, "size")?, out(disp_unit, "disp_unit")?);
            // SAFETY: checked non-null; the caller's pointers.
            unsafe {
                size.write(s as Aint);
                disp_unit.write(d as Aint);
                put_ptr(baseptr, b.cast())
            }
        })
    }

    /// A window of memory the library allocates in the node heap.
    fn MPI_Win_allocate / PMPI_Win_allocate(size: Aint, disp_unit: c_int, info: Info,
        comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        api_comm("MPI_Win_allocate", comm, |c| {
            let hints = info_arg(info)?;
            out(baseptr, "baseptr")?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit as Aint)?);
            let w = core(CoreWin::allocate(&c.comm, s, d))?;
            let b = w.base();
            // SAFETY: the caller's pointers.
            unsafe {
                put_ptr(baseptr, b.cast())?;
                store(w, &hints, c, win)
            }
        })
    }

    /// A shared window: one contiguous segment of the node heap.
    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: Aint, disp_unit: c_int,
        info: Info, comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        api_comm("MPI_Win_allocate_shared", comm, |c| {
            let hints = info_arg(info)?;
            out(baseptr, "baseptr")?;
            let (s, d) = (size_arg(size)?, disp_unit_arg(disp_unit as Aint)?);
            let w = core(CoreWin::allocate_shared(&c.comm, s, d))?;
            let b = w.base();
            // SAFETY: the caller's pointers.
            unsafe {
                put_ptr(baseptr, b.cast())?;
                store(w, &hints, c, win)
            }
        })
    }

    /// A dynamic window (memory attached later).
    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: Info, comm: Comm,
        win: *mut Win) -> c_int {
        api_comm("MPI_Win_create_dynamic", comm, |c| {
            let hints = info_arg(info)?;
            let w = core(CoreWin::create_dynamic(&c.comm))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(w, &hints, c, win) }
        })
    }

    /// Attaches memory to a dynamic window.
    fn MPI_Win_attach / PMPI_Win_attach(win: Win, base: *mut c_void, size: Aint) -> c_int {
        api_win("MPI_Win_attach", win, |e| {
            let s = size_arg(size)?;
            // SAFETY: the caller's memory, valid until detached as MPI
            // requires.
            core(unsafe { e.win.attach(base.cast(), s) })
        })
    }

    /// Detaches memory from a dynamic window.
    fn MPI_Win_detach / PMPI_Win_detach(win: Win, base: *const c_void) -> c_int {
        api_win("MPI_Win_detach", win, |e| core(e.win.detach(base.cast())))
    }

    /// A member's part of a shared window.
    fn MPI_Win_shared_query / PMPI_Win_shared_query(win: Win, rank: c_int, size: *mut Aint,
        disp_unit: *mut c_int, baseptr: *mut c_void) -> c_int {
        api_win("MPI_Win_shared_query", win, |e| {
            let (s, d, b) = core(e.win.shared_query(rank))?;
            let (size, disp_unit) = (out(size, "size")?, out(disp_unit, "disp_unit")?);
            // SAFETY: checked non-null; the caller's pointers.
            unsafe {
                size.write(s as Aint);
                disp_unit.write(c_int::try_from(d).unwrap_or(c_int::MAX));
                put_ptr(baseptr, b.cast())
            }
        })
    }

    /// Frees a window (collective) and sets the handle to `MPI_WIN_NULL`.
    fn MPI_Win_free / PMPI_Win_free(win: *mut Win) -> c_int {
        let p = win;
        if p.is_null() {
            return api("MPI_Win_free", || err(abi::ERR_ARG, "win is a null pointer"));
        }
        // SAFETY: checked non-null; the caller's pointer.
        let h = unsafe { p.read() };
        let e = match win_ref(h) {
            Ok(e) => e,
            Err(x) => return raise("MPI_Win_free", x),
        };
        if let Err(x) = e.win.check_free() {
            let x = MpiError::from(x);
            return on_error("MPI_Win_free", &handler_of(&e), h, x.class, &x.msg);
        }
        // The attributes go first; a failing delete callback fails the free.
        if let Err(x) = e.attrs.delete_all(hmpi_core::attr::Kind::Win, h.0) {
            let x = MpiError::from(x);
            return on_error("MPI_Win_free", &handler_of(&e), h, x.class, &x.msg);
        }
        let handler = handler_of(&e);
        drop(e);
        let Ok(mut e) = WINS.remove(h.0) else {
            return raise("MPI_Win_free", MpiError::new(abi::ERR_WIN, "the window is in use"));
        };
        // Another thread may still be inside a call on the window: the
        // last reference frees it.
        let entry = loop {
            match Arc::try_unwrap(e) {
                Ok(x) => break x,
                Err(back) => {
                    e = back;
                    std::thread::yield_now();
                }
            }
        };
        // SAFETY: the caller's pointer.
        unsafe { p.write(abi::WIN_NULL) };
        match entry.win.free() {
            Ok(()) => abi::SUCCESS,
            Err(x) => {
                let x = MpiError::from(x);
                on_error("MPI_Win_free", &handler, h, x.class, &x.msg)
            }
        }
    }

    /// A fence (collective).
    fn MPI_Win_fence / PMPI_Win_fence(assert: c_int, win: Win) -> c_int {
        api_win("MPI_Win_fence", win, |e| core(e.win.fence(assert)))
    }

    /// A passive-target epoch at `rank`.
    fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int,
        win: Win) -> c_int {
        api_win("MPI_Win_lock", win, |e| {
            let kind = match lock_type {
                LOCK_EXCLUSIVE => LockType::Exclusive,
                LOCK_SHARED => LockType::Shared,
                t => return err(abi::ERR_LOCKTYPE, format!("{t} is not a lock type")),
            };
            core(e.win.lock(kind, rank, assert))
        })
    }

    /// Ends the passive-target epoch at `rank`.
    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: Win) -> c_int {
        api_win("MPI_Win_unlock", win, |e| core(e.win.unlock(rank)))
    }

    /// Shared locks on every member.
    fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, win: Win) -> c_int {
        api_win("MPI_Win_lock_all", win, |e| core(e.win.lock_all(assert)))
    }

    /// Ends `MPI_Win_lock_all`.
    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win: Win) -> c_int {
        api_win("MPI_Win_unlock_all", win, |e| core(e.win.unlock_all()))
    }

    /// The operations to `rank` are complete (they are at their calls).
    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: Win) -> c_int {
        api_win("MPI_Win_flush", win, |e| core(e.win.flush(rank)))
    }

    /// As `MPI_Win_flush`.
    fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: Win) -> c_int {
        api_win("MPI_Win_flush_local", win, |e| core(e.win.flush(rank)))
    }

    /// The operations to every member are complete.
    fn MPI_Win_flush_all / PMPI_Win_flush_all(win: Win) -> c_int {
        api_win("MPI_Win_flush_all", win, |e| core(e.win.flush_all()))
    }

    /// As `MPI_Win_flush_all`.
    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: Win) -> c_int {
        api_win("MPI_Win_flush_local_all", win, |e| core(e.win.flush_all()))
    }

    /// A memory barrier on the window.
    fn MPI_Win_sync / PMPI_Win_sync(win: Win) -> c_int {
        api_win("MPI_Win_sync", win, |e| core(e.win.sync()))
    }

    /// Opens an exposure epoch to `group`.
    fn MPI_Win_post / PMPI_Win_post(group: Group, assert: c_int, win: Win) -> c_int {
        api_win("MPI_Win_post", win, |e| {
            let g = group_ref(group)?;
            core(e.win.post(&g, assert))
        })
    }

    /// Opens an access epoch to `group`.
    fn MPI_Win_start / PMPI_Win_start(group: Group, assert: c_int, win: Win) -> c_int {
        api_win("MPI_Win_start", win, |e| {
            let g = group_ref(group)?;
            core(e.win.start(&g, assert))
        })
    }

    /// Ends the access epoch.
    fn MPI_Win_complete / PMPI_Win_complete(win: Win) -> c_int {
        api_win("MPI_Win_complete", win, |e| core(e.win.complete()))
    }

    /// Waits for the end of the exposure epoch.
    fn MPI_Win_wait / PMPI_Win_wait(win: Win) -> c_int {
        api_win("MPI_Win_wait", win, |e| core(e.win.wait()))
    }

    /// Whether the exposure epoch has ended.
    fn MPI_Win_test / PMPI_Win_test(win: Win, flag: *mut c_int) -> c_int {
        api_win("MPI_Win_test", win, |e| {
            let f = out(flag, "flag")?;
            let done = core(e.win.test())?;
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { f.write(c_int::from(done)) };
            Ok(())
        })
    }

    /// A predefined attribute (`MPI_WIN_BASE`, `SIZE`, `DISP_UNIT`,
    /// `CREATE_FLAVOR`, `MODEL`) or one of a user key.
    fn MPI_Win_get_attr / PMPI_Win_get_attr(win: Win, win_keyval: c_int,
        attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        api_win("MPI_Win_get_attr", win, |e| {
            let f = out(flag, "flag")?;
            let v: *mut c_void = match win_keyval {
                WIN_BASE => e.win.base().cast(),
                WIN_SIZE => std::ptr::from_ref(&e.size).cast_mut().cast(),
                WIN_DISP_UNIT => std::ptr::from_ref(&e.disp_unit).cast_mut().cast(),
                WIN_CREATE_FLAVOR => std::ptr::from_ref(&e.flavor).cast_mut().cast(),
                WIN_MODEL => std::ptr::from_ref(&e.model).cast_mut().cast(),
                k => {
                    // A user key: its value itself, if one is set.
                    let got = e.attrs.get(hmpi_core::attr::Kind::Win, k)?;
                    if let Some(v) = got {
                        // SAFETY: the caller's pointer.
                        unsafe { put_ptr(attribute_val, v as *mut c_void)? };
                    }
                    // SAFETY: checked non-null.
                    unsafe { f.write(c_int::from(got.is_some())) };
                    return Ok(());
                }
            };
            // SAFETY: the caller's pointers; the attribute values live as
            // long as the window (MPI's rule for them).
            unsafe {
                put_ptr(attribute_val, v)?;
                f.write(1);
            }
            Ok(())
        })
    }

    /// Sets the attribute of a user key (a value already there is deleted
    /// first); the predefined keys cannot be set.
    fn MPI_Win_set_attr / PMPI_Win_set_attr(win: Win, win_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        api_win("MPI_Win_set_attr", win, |e| {
            if (WIN_BASE..=WIN_MODEL).contains(&win_keyval) {
                return err(abi::ERR_KEYVAL, format!("{win_keyval} is a predefined window attribute key"));
            }
            e.attrs.set(hmpi_core::attr::Kind::Win, win.0, win_keyval, attribute_val as usize)?;
            Ok(())
        })
    }

    /// Deletes the attribute of a user key (its delete callback runs).
    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win: Win, win_keyval: c_int) -> c_int {
        api_win("MPI_Win_delete_attr", win, |e| {
            if (WIN_BASE..=WIN_MODEL).contains(&win_keyval) {
                return err(abi::ERR_KEYVAL, format!("{win_keyval} is a predefined window attribute key"));
            }
            e.attrs.delete(hmpi_core::attr::Kind::Win, win.0, win_keyval)?;
            Ok(())
        })
    }

    /// Names the window.
    fn MPI_Win_set_name / PMPI_Win_set_name(win: Win, win_name: *const c_char) -> c_int {
        api_win("MPI_Win_set_name", win, |e| {
            if win_name.is_null() {
                return err(abi::ERR_ARG, "the name is a null pointer");
            }
            // SAFETY: a NUL-terminated string from the caller.
            let s = unsafe { CStr::from_ptr(win_name) }.to_string_lossy();
            let mut end = s.len().min(abi::MAX_OBJECT_NAME - 1);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            e.win.set_name(&s[..end]);
            Ok(())
        })
    }

    /// The window's name.
    fn MPI_Win_get_name / PMPI_Win_get_name(win: Win, win_name: *mut c_char,
        resultlen: *mut c_int) -> c_int {
        api_win("MPI_Win_get_name", win, |e| {
            // SAFETY: the caller's buffer of MPI_MAX_OBJECT_NAME bytes.
            unsafe { put_string(win_name, abi::MAX_OBJECT_NAME, resultlen, &e.win.name()) }
        })
    }

    /// Sets the window's hints (`MPI_INFO_NULL`: none).
    fn MPI_Win_set_info / PMPI_Win_set_info(win: Win, info: Info) -> c_int {
        api_win("MPI_Win_set_info", win, |e| core(e.win.set_info(&hints_of(info)?)))
    }

    /// The hints in effect on the window (a new info object).
    fn MPI_Win_get_info / PMPI_Win_get_info(win: Win, info_used: *mut Info) -> c_int {
        api_win("MPI_Win_get_info", win, |e| {
            // SAFETY: the caller's handle pointer.
            unsafe { store_info(e.win.info(), info_used) }
        })
    }

    /// The window's group (a new group handle).
    fn MPI_Win_get_group / PMPI_Win_get_group(win: Win, group: *mut Group) -> c_int {
        api_win("MPI_Win_get_group", win, |e| {
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(e.win.group(), group) }
        })
    }

    /// Makes an error handler for windows of a function.
    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(
        win_errhandler_fn: Option<WinErrhandlerFn>, errhandler: *mut Errhandler) -> c_int {
        api("MPI_Win_create_errhandler", || {
            let Some(f) = win_errhandler_fn else {
                return err(abi::ERR_ARG, "the error handler function is null");
            };
            store_handler(UserFn::Win(f), errhandler)
        })
    }

    /// Sets the window's error handler (a predefined one or one of
    /// `MPI_Win_create_errhandler`).
    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: Win,
        errhandler: Errhandler) -> c_int {
        api_win("MPI_Win_set_errhandler", win, |e| {
            let h = handler_for(errhandler, "windows")?;
            *e.errhandler.lock().unwrap_or_else(|p| p.into_inner()) = h;
            Ok(())
        })
    }

    /// The window's error handler.
    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: Win,
        errhandler: *mut Errhandler) -> c_int {
        api_win("MPI_Win_get_errhandler", win, |e| {
            let h = handler_of(e).handle();
            // SAFETY: the caller's pointer.
            unsafe { crate::errors::put(errhandler, "errhandler", h) }
        })
    }

    /// Calls the window's error handler with `errorcode`.
    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: Win, errorcode: c_int) -> c_int {
        api_win("MPI_Win_call_errhandler", win, |e| {
            on_error("MPI_Win_call_errhandler", &handler_of(e), win, errorcode, "called by the program");
            Ok(())
        })
    }

    /// Puts into a target's window.
    fn MPI_Put / PMPI_Put(origin_addr: *const c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, win: Win) -> c_int {
        api_win("MPI_Put", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                put(e, origin_addr, count_arg(origin_count)?, origin_datatype, target_rank,
                    target_disp, count_arg(target_count)?, target_datatype, None)
            }
        })
    }

    /// `MPI_Put` with large counts.
    fn MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, win: Win) -> c_int {
        api_win("MPI_Put_c", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                put(e, origin_addr, origin_count.to_count("count")?, origin_datatype, target_rank,
                    target_disp, target_count.to_count("count")?, target_datatype, None)
            }
        })
    }

    /// Gets from a target's window.
    fn MPI_Get / PMPI_Get(origin_addr: *mut c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, win: Win) -> c_int {
        api_win("MPI_Get", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                get(e, origin_addr, count_arg(origin_count)?, origin_datatype, target_rank,
                    target_disp, count_arg(target_count)?, target_datatype, None)
            }
        })
    }

    /// `MPI_Get` with large counts.
    fn MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, win: Win) -> c_int {
        api_win("MPI_Get_c", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                get(e, origin_addr, origin_count.to_count("count")?, origin_datatype, target_rank,
                    target_disp, target_count.to_count("count")?, target_datatype, None)
            }
        })
    }

    /// Combines into a target's window, element-wise atomically.
    fn MPI_Accumulate / PMPI_Accumulate(origin_addr: *const c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, op: Op, win: Win) -> c_int {
        api_win("MPI_Accumulate", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                get_acc(e, origin_addr, count_arg(origin_count)?, origin_datatype,
                    std::ptr::null_mut(), 0, abi::DATATYPE_NULL, target_rank, target_disp,
                    count_arg(target_count)?, target_datatype, op, None)
            }
        })
    }

    /// `MPI_Accumulate` with large counts.
    fn MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, op: Op, win: Win) -> c_int {
        api_win("MPI_Accumulate_c", win, |e| {
            // SAFETY: the caller's buffer.
            unsafe {
                get_acc(e, origin_addr, origin_count.to_count("count")?, origin_datatype,
                    std::ptr::null_mut(), 0, abi::DATATYPE_NULL, target_rank, target_disp,
                    target_count.to_count("count")?, target_datatype, op, None)
            }
        })
    }

    /// Combines and fetches what was there.
    fn MPI_Get_accumulate / PMPI_Get_accumulate(origin_addr: *const c_void, origin_count: c_int,
        origin_datatype: Datatype, result_addr: *mut c_void, result_count: c_int,
        result_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, op: Op, win: Win) -> c_int {
        api_win("MPI_Get_accumulate", win, |e| {
            // SAFETY: the caller's buffers.
            unsafe {
                get_acc(e, origin_addr, count_arg(origin_count)?, origin_datatype, result_addr,
                    count_arg(result_count)?, result_datatype, target_rank, target_disp,
                    count_arg(target_count)?, target_datatype, op, None)
            }
        })
    }

    /// `MPI_Get_accumulate` with large counts.
    fn MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void,
        origin_count: Count, origin_datatype: Datatype, result_addr: *mut c_void,
        result_count: Count, result_datatype: Datatype, target_rank: c_int, target_disp: Aint,
        target_count: Count, target_datatype: Datatype, op: Op, win: Win) -> c_int {
        api_win("MPI_Get_accumulate_c", win, |e| {
            // SAFETY: the caller's buffers.
            unsafe {
                get_acc(e, origin_addr, origin_count.to_count("count")?, origin_datatype, result_addr,
                    result_count.to_count("count")?, result_datatype, target_rank, target_disp,
                    target_count.to_count("count")?, target_datatype, op, None)
            }
        })
    }

    /// One element: combine and fetch.
    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void,
        datatype: Datatype, target_rank: c_int, target_disp: Aint, op: Op, win: Win) -> c_int {
        api_win("MPI_Fetch_and_op", win, |e| {
            let t = type_ref(datatype)?;
            let op = system_op(op)?;
            if op != SystemOperation::NoOp {
                t.check_buffer(origin_addr, 1)?;
            }
            t.check_buffer(result_addr, 1)?;
            // SAFETY: the caller's buffers.
            core(unsafe {
                e.win.fetch_and_op(origin_addr.cast(), result_addr.cast(), &t.ty,
                    target_rank, disp_arg(target_disp)?, op)
            })
        })
    }

    /// One element: compare and swap.
    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(origin_addr: *const c_void,
        compare_addr: *const c_void, result_addr: *mut c_void, datatype: Datatype,
        target_rank: c_int, target_disp: Aint, win: Win) -> c_int {
        api_win("MPI_Compare_and_swap", win, |e| {
            let t = type_ref(datatype)?;
            for (p, what) in [(origin_addr, "origin_addr"), (compare_addr, "compare_addr")] {
                if p.is_null() {
                    return err(abi::ERR_BUFFER, format!("{what} is a null pointer"));
                }
            }
            out(result_addr, "result_addr")?;
            // SAFETY: the caller's buffers (checked non-null).
            core(unsafe {
                e.win.compare_and_swap(origin_addr.cast(), compare_addr.cast(),
                    result_addr.cast(), &t.ty, target_rank,
                    disp_arg(target_disp)?)
            })
        })
    }

    /// `MPI_Put` with a request (complete at once), in a passive epoch.
    fn MPI_Rput / PMPI_Rput(origin_addr: *const c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Rput", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                put(e, origin_addr, count_arg(origin_count)?, origin_datatype, target_rank,
                    target_disp, count_arg(target_count)?, target_datatype, Some(request))
            }
        })
    }

    /// `MPI_Rput` with large counts.
    fn MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Rput_c", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                put(e, origin_addr, origin_count.to_count("count")?, origin_datatype, target_rank,
                    target_disp, target_count.to_count("count")?, target_datatype, Some(request))
            }
        })
    }

    /// `MPI_Get` with a request (complete at once), in a passive epoch.
    fn MPI_Rget / PMPI_Rget(origin_addr: *mut c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Rget", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                get(e, origin_addr, count_arg(origin_count)?, origin_datatype, target_rank,
                    target_disp, count_arg(target_count)?, target_datatype, Some(request))
            }
        })
    }

    /// `MPI_Rget` with large counts.
    fn MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Rget_c", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                get(e, origin_addr, origin_count.to_count("count")?, origin_datatype, target_rank,
                    target_disp, target_count.to_count("count")?, target_datatype, Some(request))
            }
        })
    }

    /// `MPI_Accumulate` with a request (complete at once).
    fn MPI_Raccumulate / PMPI_Raccumulate(origin_addr: *const c_void, origin_count: c_int,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: c_int,
        target_datatype: Datatype, op: Op, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Raccumulate", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                get_acc(e, origin_addr, count_arg(origin_count)?, origin_datatype,
                    std::ptr::null_mut(), 0, abi::DATATYPE_NULL, target_rank, target_disp,
                    count_arg(target_count)?, target_datatype, op, Some(request))
            }
        })
    }

    /// `MPI_Raccumulate` with large counts.
    fn MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: Count,
        origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count,
        target_datatype: Datatype, op: Op, win: Win, request: *mut Request) -> c_int {
        api_win("MPI_Raccumulate_c", win, |e| {
            // SAFETY: the caller's buffer and handle pointer.
            unsafe {
                get_acc(e, origin_addr, origin_count.to_count("count")?, origin_datatype,
                    std::ptr::null_mut(), 0, abi::DATATYPE_NULL, target_rank, target_disp,
                    target_count.to_count("count")?, target_datatype, op, Some(request))
            }
        })
    }

    /// `MPI_Get_accumulate` with a request (complete at once).
    fn MPI_Rget_accumulate / PMPI_Rget_accumulate(origin_addr: *const c_void,
        origin_count: c_int, origin_datatype: Datatype, result_addr: *mut c_void,
        result_count: c_int, result_datatype: Datatype, target_rank: c_int, target_disp: Aint,
        target_count: c_int, target_datatype: Datatype, op: Op, win: Win,
        request: *mut Request) -> c_int {
        api_win("MPI_Rget_accumulate", win, |e| {
            // SAFETY: the caller's buffers and handle pointer.
            unsafe {
                get_acc(e, origin_addr, count_arg(origin_count)?, origin_datatype, result_addr,
                    count_arg(result_count)?, result_datatype, target_rank, target_disp,
                    count_arg(target_count)?, target_datatype, op, Some(request))
            }
        })
    }

    /// `MPI_Rget_accumulate` with large counts.
    fn MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void,
        origin_count: Count, origin_datatype: Datatype, result_addr: *mut c_void,
        result_count: Count, result_datatype: Datatype, target_rank: c_int, target_disp: Aint,
        target_count: Count, target_datatype: Datatype, op: Op, win: Win,
        request: *mut Request) -> c_int {
        api_win("MPI_Rget_accumulate_c", win, |e| {
            // SAFETY: the caller's buffers and handle pointer.
            unsafe {
                get_acc(e, origin_addr, origin_count.to_count("count")?, origin_datatype, result_addr,
                    result_count.to_count("count")?, result_datatype, target_rank, target_disp,
                    target_count.to_count("count")?, target_datatype, op, Some(request))
            }
        })
    }
}

/// Writes a complete request for an `MPI_R…` call (after checking the
/// pointer, before the operation: a bad pointer leaves nothing done).
///
/// # Safety
/// `request`, if not null, is valid for a write.
unsafe fn complete_into(e: &Entry, request: Option<*mut Request>, op: impl FnOnce() -> Res) -> Res {
    let Some(r) = request else {
        return op();
    };
    let r = out(r, "request")?;
    op()?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { r.write(crate::coll::completed(e.comm.clone())?) };
    Ok(())
}

/// `MPI_(R)put(_c)`.
///
/// # Safety
/// The origin buffer holds what its count and datatype say; `request` as
/// for [`complete_into`].
#[allow(clippy::too_many_arguments)]
unsafe fn put(
    e: &Entry,
    origin_addr: *const c_void,
    oc: usize,
    odt: Datatype,
    rank: c_int,
    disp: Aint,
    tc: usize,
    tdt: Datatype,
    request: Option<*mut Request>,
) -> Res {
    let (ot, tt) = (type_ref(odt)?, type_ref(tdt)?);
    ot.check_buffer(origin_addr, oc)?;
    let d = disp_arg(disp)?;
    let passive = request.is_some();
    // SAFETY: the caller's guarantee.
    unsafe {
        complete_into(e, request, || {
            core(if passive {
                e.win
                    .rput(origin_addr.cast(), oc, &ot.ty, rank, d, tc, &tt.ty)
            } else {
                e.win
                    .put(origin_addr.cast(), oc, &ot.ty, rank, d, tc, &tt.ty)
            })
        })
    }
}

/// `MPI_(R)get(_c)`.
///
/// # Safety
/// As for [`put`], the origin buffer writable.
#[allow(clippy::too_many_arguments)]
unsafe fn get(
    e: &Entry,
    origin_addr: *mut c_void,
    oc: usize,
    odt: Datatype,
    rank: c_int,
    disp: Aint,
    tc: usize,
    tdt: Datatype,
    request: Option<*mut Request>,
) -> Res {
    let (ot, tt) = (type_ref(odt)?, type_ref(tdt)?);
    ot.check_buffer(origin_addr, oc)?;
    let d = disp_arg(disp)?;
    let passive = request.is_some();
    // SAFETY: the caller's guarantee.
    unsafe {
        complete_into(e, request, || {
            core(if passive {
                e.win
                    .rget(origin_addr.cast(), oc, &ot.ty, rank, d, tc, &tt.ty)
            } else {
                e.win
                    .get(origin_addr.cast(), oc, &ot.ty, rank, d, tc, &tt.ty)
            })
        })
    }
}

/// `MPI_(R)accumulate(_c)` (`result_datatype == MPI_DATATYPE_NULL`: no
/// result) and `MPI_(R)get_accumulate(_c)`. With `MPI_NO_OP` the origin
/// may be `MPI_DATATYPE_NULL` too.
///
/// # Safety
/// The caller's buffers hold what their counts and datatypes say;
/// `request` as for [`complete_into`].
#[allow(clippy::too_many_arguments)]
unsafe fn get_acc(
    e: &Entry,
    origin_addr: *const c_void,
    origin_count: usize,
    origin_datatype: Datatype,
    result_addr: *mut c_void,
    result_count: usize,
    result_datatype: Datatype,
    rank: c_int,
    disp: Aint,
    tc: usize,
    target_datatype: Datatype,
    op: Op,
    request: Option<*mut Request>,
) -> Res {
    let op = system_op(op)?;
    let tt = type_ref(target_datatype)?;
    let (ot, oc) = if op == SystemOperation::NoOp && origin_datatype == abi::DATATYPE_NULL {
        (None, 0)
    } else {
        (Some(type_ref(origin_datatype)?), origin_count)
    };
    let rt = if result_datatype == abi::DATATYPE_NULL {
        None
    } else {
        Some(type_ref(result_datatype)?)
    };
    let rc = if rt.is_some() { result_count } else { 0 };
    if let Some(t) = &ot {
        t.check_buffer(origin_addr, oc)?;
    }
    if let Some(t) = &rt {
        t.check_buffer(result_addr, rc)?;
    }
    let odt = ot.as_ref().map_or(&tt.ty, |t| &t.ty);
    let d = disp_arg(disp)?;
    let rdt = rt.as_ref().map(|t| &t.ty);
    let passive = request.is_some();
    let (o, r) = (origin_addr.cast::<u8>(), result_addr.cast::<u8>());
    // SAFETY: the caller's guarantee.
    unsafe {
        complete_into(e, request, || {
            core(if passive {
                e.win
                    .rget_accumulate(o, oc, odt, r, rc, rdt, rank, d, tc, &tt.ty, op)
            } else {
                e.win
                    .get_accumulate(o, oc, odt, r, rc, rdt, rank, d, tc, &tt.ty, op)
            })
        })
    }
}
