//! Attributes of the C interface: keyvals with C copy and delete
//! callbacks on communicators (`MPI_Comm_create_keyval`, `_set_attr`,
//! `_get_attr`, `_delete_attr`, `_free_keyval` and the deprecated
//! `MPI_Keyval_create`/`MPI_Attr_*` forms), on datatypes
//! (`MPI_Type_create_keyval` …) and on windows (`MPI_Win_create_keyval`
//! here, the attribute calls beside the window's in [`crate::win`]),
//! through `hmpi_core::attr`, which keeps
//! the keys, the values and the order in which the callbacks run.
//!
//! A C callback is wrapped into the runtime's callback with its
//! `extra_state`; it gets the object's handle, and a nonzero return makes
//! the MPI call that ran it (`MPI_Comm_dup`, `MPI_Comm_free`,
//! `MPI_Comm_set_attr` replacing a value, …) return that code.
//! `MPI_COMM_NULL_COPY_FN`/`MPI_COMM_DUP_FN`/`MPI_COMM_NULL_DELETE_FN` (and
//! their datatype and deprecated forms) are the runtime's `Null`/`Dup`.
//!
//! `MPI_Comm_get_attr` also answers MPI's predefined attribute keys, on
//! every communicator: `MPI_TAG_UB`, `MPI_HOST` (`MPI_PROC_NULL`: no host
//! process), `MPI_IO` (`MPI_ANY_SOURCE`: every process may do I/O),
//! `MPI_WTIME_IS_GLOBAL` (1: one clock for the node), `MPI_APPNUM` (0),
//! `MPI_UNIVERSE_SIZE` (the number of processes of the job) and
//! `MPI_LASTUSEDCODE` (the largest error code in use: `MPI_ERR_LASTCODE`,
//! or the last one the program added); as MPI
//! says, the value is a pointer to an `int`. They cannot be set or
//! deleted.
//!
//! `MPI_Finalize` deletes the attributes of `MPI_COMM_SELF` first, then
//! those of `MPI_COMM_WORLD` ([`finalize`]).
//!
//! In C:
//! ```c
//! int key, *ub, flag;
//! MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);   // *ub: largest tag
//! MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
//! MPI_Comm_set_attr(MPI_COMM_WORLD, key, &data);
//! ```

use crate::abi::{self, Comm, Datatype};
use crate::comm::comm_ref;
use crate::datatype::type_any;
use crate::errors::{api, api_comm, err, out, Res};
use hmpi_core::attr::{self, Copy, Delete, Kind};
use hmpi_core::traits::Communicator;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// `MPI_TAG_UB` … `MPI_UNIVERSE_SIZE` (the standard ABI's values).
const TAG_UB: c_int = 501;
const IO: c_int = 502;
const HOST: c_int = 503;
const WTIME_IS_GLOBAL: c_int = 504;
const APPNUM: c_int = 505;
const LASTUSEDCODE: c_int = 506;
const UNIVERSE_SIZE: c_int = 507;
/// `MPI_KEYVAL_INVALID`.
const KEYVAL_INVALID: c_int = 0;

/// A C copy callback (`MPI_Comm_copy_attr_function` and kin): the
/// object's handle, the key, `extra_state`, the value, where the copy
/// goes, and a flag for whether to copy.
type CCopy =
    unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;

/// A C delete callback: the object's handle, the key, the value,
/// `extra_state`.
type CDelete = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

/// The runtime's copy callback for a C one (0: the null copy, 1: the
/// duplicating copy, as `mpi.h` defines them).
fn copy_of(f: *const c_void, extra: usize) -> Copy {
    match f as usize {
        0 => Copy::Null,
        1 => Copy::Dup,
        _ => {
            // SAFETY: a function of this type (MPI's contract for the
            // argument): every handle type of the standard ABI is a
            // pointer-sized value.
            let f: CCopy = unsafe { std::mem::transmute::<*const c_void, CCopy>(f) };
            Copy::Call(Arc::new(move |handle, key, value| {
                let mut new: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the program's callback, called as MPI specifies;
                // `new` and `flag` are ours.
                let code = unsafe {
                    f(
                        handle,
                        key,
                        extra as *mut c_void,
                        value as *mut c_void,
                        (&mut new as *mut *mut c_void).cast(),
                        &mut flag,
                    )
                };
                match code {
                    abi::SUCCESS => Ok((flag != 0).then_some(new as usize)),
                    code => Err(hmpi_core::Error::Callback { code }),
                }
            }))
        }
    }
}

/// The runtime's delete callback for a C one (0: the null delete).
fn delete_of(f: *const c_void, extra: usize) -> Delete {
    if f.is_null() {
        return Delete::Null;
    }
    // SAFETY: a function of this type (MPI's contract for the argument).
    let f: CDelete = unsafe { std::mem::transmute::<*const c_void, CDelete>(f) };
    Delete::Call(Arc::new(move |handle, key, value| {
        // SAFETY: the program's callback, called as MPI specifies.
        match unsafe { f(handle, key, value as *mut c_void, extra as *mut c_void) } {
            abi::SUCCESS => Ok(()),
            code => Err(hmpi_core::Error::Callback { code }),
        }
    }))
}

/// Creates a key and writes it.
///
/// # Safety
/// `keyval` is valid for a write when not null; the callbacks are
/// functions of their C types or the predefined values.
unsafe fn create(
    kind: Kind,
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> Res {
    let p = out(keyval, "keyval")?;
    let k = attr::create_keyval(
        kind,
        copy_of(copy, extra as usize),
        delete_of(delete, extra as usize),
    )?;
    // SAFETY: checked non-null.
    unsafe { p.write(k) };
    Ok(())
}

/// Frees a key; `*keyval` becomes `MPI_KEYVAL_INVALID`.
///
/// # Safety
/// `keyval` is valid for a read and a write when not null.
unsafe fn free(kind: Kind, keyval: *mut c_int) -> Res {
    let p = out(keyval, "keyval")?;
    // SAFETY: checked non-null.
    attr::free_keyval(kind, unsafe { p.read() })?;
    // SAFETY: as above.
    unsafe { p.write(KEYVAL_INVALID) };
    Ok(())
}

/// Whether `key` is one of MPI's predefined communicator attributes.
fn predefined(key: c_int) -> bool {
    (TAG_UB..=UNIVERSE_SIZE).contains(&key)
}

/// The value of a predefined attribute, which lives as long as the
/// process (MPI hands out a pointer to it).
fn predefined_value(key: c_int) -> Option<&'static c_int> {
    use std::sync::OnceLock;
    static VALUES: OnceLock<[c_int; 7]> = OnceLock::new();
    let world = comm_ref(abi::COMM_WORLD).ok()?;
    let v = VALUES.get_or_init(|| {
        let mut v = [0; 7];
        for (i, key) in (TAG_UB..=UNIVERSE_SIZE).enumerate() {
            v[i] = match key {
                TAG_UB => hmpi_core::TAG_UB,
                IO => abi::ANY_SOURCE,
                HOST => abi::PROC_NULL,
                WTIME_IS_GLOBAL => 1,
                APPNUM => 0,
                LASTUSEDCODE => abi::ERR_LASTCODE,
                _ => world.comm.size(),
            };
        }
        v
    });
    v.get(usize::try_from(key - TAG_UB).ok()?)
}

fn comm_get(
    comm: Comm,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
    func: &'static str,
) -> c_int {
    api_comm(func, comm, |c| {
        let v = out(value, "attribute_val")?;
        let f = out(flag, "flag")?;
        let got = if key == LASTUSEDCODE {
            // A value that changes as the program adds error codes.
            comm_ref(abi::COMM_WORLD)
                .ok()
                .map(|_| crate::errors::LAST_USED_CODE.as_ptr() as usize)
        } else if predefined(key) {
            predefined_value(key).map(|r| r as *const c_int as usize)
        } else {
            c.comm.attributes().get(Kind::Comm, key)?
        };
        // SAFETY: checked non-null; `attribute_val` points to a `void *`
        // (MPI's contract), written only when the attribute is set.
        unsafe {
            if let Some(x) = got {
                v.cast::<usize>().write(x);
            }
            f.write(c_int::from(got.is_some()));
        }
        Ok(())
    })
}

fn not_predefined(key: c_int) -> Res {
    if predefined(key) {
        return err(
            abi::ERR_KEYVAL,
            format!("{key} is a predefined attribute key: it cannot be set or deleted"),
        );
    }
    Ok(())
}

fn comm_set(comm: Comm, key: c_int, value: *mut c_void, func: &'static str) -> c_int {
    api_comm(func, comm, |c| {
        not_predefined(key)?;
        c.comm
            .attributes()
            .set(Kind::Comm, comm.0, key, value as usize)?;
        Ok(())
    })
}

fn comm_delete(comm: Comm, key: c_int, func: &'static str) -> c_int {
    api_comm(func, comm, |c| {
        not_predefined(key)?;
        c.comm.attributes().delete(Kind::Comm, comm.0, key)?;
        Ok(())
    })
}

/// Copies the attributes of `from` (handle `handle`) to its duplicate
/// `to` (`MPI_Comm_dup` and kin): a failing copy callback fails the
/// duplication, and what was copied is deleted again.
pub fn copy_comm(
    from: &hmpi_core::SimpleCommunicator,
    handle: Comm,
    to: &hmpi_core::SimpleCommunicator,
) -> Res {
    if let Err(e) = from
        .attributes()
        .copy_into(Kind::Comm, handle.0, to.attributes())
    {
        let _ = to.attributes().delete_all(Kind::Comm, abi::COMM_NULL.0);
        return Err(e.into());
    }
    Ok(())
}

/// Deletes the attributes of a communicator being freed (`MPI_Comm_free`):
/// a failing delete callback fails the free.
pub fn free_comm(comm: &hmpi_core::SimpleCommunicator, handle: Comm) -> Res {
    comm.attributes().delete_all(Kind::Comm, handle.0)?;
    Ok(())
}

/// At `MPI_Finalize`: deletes the attributes of `MPI_COMM_SELF`, then of
/// `MPI_COMM_WORLD`, as MPI orders it.
pub fn finalize() -> Res {
    for h in [abi::COMM_SELF, abi::COMM_WORLD] {
        if let Ok(c) = comm_ref(h) {
            free_comm(&c.comm, h).map_err(|e| e.on(&c))?;
        }
    }
    Ok(())
}

/// The attributes of a datatype.
fn type_attrs(t: Datatype) -> Res<crate::datatype::TypeRef> {
    type_any(t)
}

mpi_fn! {
    /// Creates a communicator attribute key with its copy and delete callbacks.
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(comm_copy_attr_fn: *const c_void, comm_delete_attr_fn: *const c_void, comm_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        // SAFETY: MPI's contract for the arguments.
        api("MPI_Comm_create_keyval", || unsafe { create(Kind::Comm, comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state) })
    }

    /// Frees a communicator attribute key (`MPI_KEYVAL_INVALID` after).
    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
        // SAFETY: MPI's contract for the pointer.
        api("MPI_Comm_free_keyval", || unsafe { free(Kind::Comm, comm_keyval) })
    }

    /// Sets an attribute (a value already there is deleted first).
    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: Comm, comm_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        comm_set(comm, comm_keyval, attribute_val, "MPI_Comm_set_attr")
    }

    /// Gets an attribute: `*flag` says whether it is set.
    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: Comm, comm_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        comm_get(comm, comm_keyval, attribute_val, flag, "MPI_Comm_get_attr")
    }

    /// Deletes an attribute (its delete callback runs).
    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: Comm, comm_keyval: c_int) -> c_int {
        comm_delete(comm, comm_keyval, "MPI_Comm_delete_attr")
    }

    /// The deprecated form of `MPI_Comm_create_keyval`.
    fn MPI_Keyval_create / PMPI_Keyval_create(copy_fn: *const c_void, delete_fn: *const c_void, keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        // SAFETY: MPI's contract for the arguments.
        api("MPI_Keyval_create", || unsafe { create(Kind::Comm, copy_fn, delete_fn, keyval, extra_state) })
    }

    /// The deprecated form of `MPI_Comm_free_keyval`.
    fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
        // SAFETY: MPI's contract for the pointer.
        api("MPI_Keyval_free", || unsafe { free(Kind::Comm, keyval) })
    }

    /// The deprecated form of `MPI_Comm_set_attr`.
    fn MPI_Attr_put / PMPI_Attr_put(comm: Comm, keyval: c_int, attribute_val: *mut c_void) -> c_int {
        comm_set(comm, keyval, attribute_val, "MPI_Attr_put")
    }

    /// The deprecated form of `MPI_Comm_get_attr`.
    fn MPI_Attr_get / PMPI_Attr_get(comm: Comm, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        comm_get(comm, keyval, attribute_val, flag, "MPI_Attr_get")
    }

    /// The deprecated form of `MPI_Comm_delete_attr`.
    fn MPI_Attr_delete / PMPI_Attr_delete(comm: Comm, keyval: c_int) -> c_int {
        comm_delete(comm, keyval, "MPI_Attr_delete")
    }

    /// Creates a window attribute key (its values are set with
    /// `MPI_Win_set_attr`, see [`crate::win`]).
    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(win_copy_attr_fn: *const c_void, win_delete_attr_fn: *const c_void, win_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        // SAFETY: MPI's contract for the arguments.
        api("MPI_Win_create_keyval", || unsafe { create(Kind::Win, win_copy_attr_fn, win_delete_attr_fn, win_keyval, extra_state) })
    }

    /// Frees a window attribute key.
    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
        // SAFETY: MPI's contract for the pointer.
        api("MPI_Win_free_keyval", || unsafe { free(Kind::Win, win_keyval) })
    }

    /// Creates a datatype attribute key.
    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(type_copy_attr_fn: *const c_void, type_delete_attr_fn: *const c_void, type_keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        // SAFETY: MPI's contract for the arguments.
        api("MPI_Type_create_keyval", || unsafe { create(Kind::Type, type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state) })
    }

    /// Frees a datatype attribute key.
    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
        // SAFETY: MPI's contract for the pointer.
        api("MPI_Type_free_keyval", || unsafe { free(Kind::Type, type_keyval) })
    }

    /// Sets a datatype attribute.
    fn MPI_Type_set_attr / PMPI_Type_set_attr(datatype: Datatype, type_keyval: c_int, attribute_val: *mut c_void) -> c_int {
        api("MPI_Type_set_attr", || {
            let t = type_attrs(datatype)?;
            t.attrs.set(Kind::Type, datatype.0, type_keyval, attribute_val as usize)?;
            Ok(())
        })
    }

    /// Gets a datatype attribute.
    fn MPI_Type_get_attr / PMPI_Type_get_attr(datatype: Datatype, type_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        api("MPI_Type_get_attr", || {
            let v = out(attribute_val, "attribute_val")?;
            let f = out(flag, "flag")?;
            let got = type_attrs(datatype)?.attrs.get(Kind::Type, type_keyval)?;
            // SAFETY: checked non-null; `attribute_val` points to a
            // `void *` (MPI's contract).
            unsafe {
                if let Some(x) = got {
                    v.cast::<usize>().write(x);
                }
                f.write(c_int::from(got.is_some()));
            }
            Ok(())
        })
    }

    /// Deletes a datatype attribute.
    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype: Datatype, type_keyval: c_int) -> c_int {
        api("MPI_Type_delete_attr", || {
            type_attrs(datatype)?.attrs.delete(Kind::Type, datatype.0, type_keyval)?;
            Ok(())
        })
    }
}
