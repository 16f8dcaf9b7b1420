//! Info objects of the C interface (`MPI_Info_*`) on `hmpi_core`'s
//! [`Info`], in a handle table of their own.
//!
//! `MPI_INFO_ENV` is a predefined handle to the environment's info
//! object ([`Info::env`]), read-only: it may be read and duplicated, not
//! changed or freed. `MPI_INFO_NULL` is no object. A bad handle is
//! `MPI_ERR_INFO`; a key or value outside MPI's limits
//! `MPI_ERR_INFO_KEY` / `MPI_ERR_INFO_VALUE`; deleting a key that is not
//! set `MPI_ERR_INFO_NOKEY`; an `n` past the keys in `MPI_Info_get_nthkey`
//! `MPI_ERR_ARG`.
//!
//! In C:
//! ```c
//! MPI_Info info;
//! MPI_Info_create(&info);
//! MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
//! char value[MPI_MAX_INFO_VAL];
//! int buflen = sizeof value, flag;
//! MPI_Info_get_string(info, "mpi_assert_no_any_tag", &buflen, value, &flag);
//! MPI_Comm_set_info(MPI_COMM_WORLD, info);
//! MPI_Info_free(&info);
//! ```

use crate::abi::{self, Info as InfoH};
use crate::errors::{api, err, out, put, MpiError, Res};
use crate::handles::{Table, KIND_INFO};
use hmpi_core::info::MAX_INFO_KEY;
use hmpi_core::Info;
use std::ffi::{c_char, c_int, CStr};
use std::sync::{Arc, Mutex, OnceLock};

static INFOS: Table<Arc<Mutex<Info>>> = Table::new(KIND_INFO);
static ENV: OnceLock<Info> = OnceLock::new();

fn bad(h: InfoH) -> MpiError {
    if h == abi::INFO_NULL {
        MpiError::new(abi::ERR_INFO, "MPI_INFO_NULL is not an info object")
    } else {
        MpiError::new(
            abi::ERR_INFO,
            format!(
                "{:#x} is not an info object (freed, or another kind of handle)",
                h.0
            ),
        )
    }
}

/// A copy of the info object of a handle (`MPI_INFO_ENV` included).
pub fn info_of(h: InfoH) -> Res<Info> {
    if h == abi::INFO_ENV {
        return Ok(ENV.get_or_init(Info::env).clone());
    }
    let obj = INFOS.get(h.0).map_err(|_| bad(h))?;
    let i = obj.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(i)
}

/// The info object of an optional handle: `MPI_INFO_NULL` is no hints.
pub fn hints_of(h: InfoH) -> Res<Info> {
    if h == abi::INFO_NULL {
        Ok(Info::new())
    } else {
        info_of(h)
    }
}

/// Changes the object of a writable handle.
fn modify<R>(h: InfoH, f: impl FnOnce(&mut Info) -> Res<R>) -> Res<R> {
    if h == abi::INFO_ENV {
        return err(abi::ERR_INFO, "MPI_INFO_ENV cannot be changed");
    }
    let obj = INFOS.get(h.0).map_err(|_| bad(h))?;
    let mut i = obj.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut i)
}

/// Stores a new info object and writes its handle.
///
/// # Safety
/// `p` is valid for a write when not null.
pub unsafe fn store_info(i: Info, p: *mut InfoH) -> Res {
    let p = out(p, "info")?;
    let h = INFOS
        .insert(Arc::new(Mutex::new(i)))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many info objects"))?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(InfoH(h)) };
    Ok(())
}

/// A key or value string from C.
///
/// # Safety
/// `s` is NUL-terminated when not null.
unsafe fn string<'a>(s: *const c_char, what: &str, class: c_int) -> Res<&'a str> {
    if s.is_null() {
        return err(class, format!("the {what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| MpiError::new(class, format!("the {what} is not UTF-8")))
}

/// # Safety
/// As [`string`].
unsafe fn key<'a>(k: *const c_char) -> Res<&'a str> {
    // SAFETY: the caller's guarantee.
    unsafe { string(k, "key", abi::ERR_INFO_KEY) }
}

/// Copies `s` into `buf` (at most `cap - 1` bytes and a NUL when
/// `cap > 0`).
///
/// # Safety
/// `buf` holds `cap` bytes.
unsafe fn copy_out(s: &str, buf: *mut c_char, cap: usize) -> Res {
    if cap == 0 {
        return Ok(());
    }
    out(buf, "the value buffer")?;
    let n = s.len().min(cap - 1);
    // SAFETY: `buf` holds `cap` >= n + 1 bytes (the caller's guarantee).
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    Ok(())
}

mpi_fn! {
    /// A new, empty info object.
    fn MPI_Info_create / PMPI_Info_create(info: *mut InfoH) -> c_int {
        api("MPI_Info_create", || {
            // SAFETY: the caller's handle pointer.
            unsafe { store_info(Info::new(), info) }
        })
    }

    /// A new info object of the environment (`MPI_INFO_ENV`'s keys).
    fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut InfoH) -> c_int {
        api("MPI_Info_create_env", || {
            let i = ENV.get_or_init(Info::env).clone();
            // SAFETY: the caller's handle pointer.
            unsafe { store_info(i, info) }
        })
    }

    /// Frees an info object; `*info` becomes `MPI_INFO_NULL`.
    fn MPI_Info_free / PMPI_Info_free(info: *mut InfoH) -> c_int {
        api("MPI_Info_free", || {
            let p = out(info, "info")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if h == abi::INFO_ENV {
                return err(abi::ERR_INFO, "MPI_INFO_ENV cannot be freed");
            }
            INFOS.remove(h.0).map_err(|_| bad(h))?;
            // SAFETY: as above.
            unsafe { p.write(abi::INFO_NULL) };
            Ok(())
        })
    }

    /// Sets `key` to `value` (a new key goes last).
    fn MPI_Info_set / PMPI_Info_set(info: InfoH, key_: *const c_char, value: *const c_char) -> c_int {
        api("MPI_Info_set", || {
            // SAFETY: NUL-terminated strings from the caller.
            let (k, v) = unsafe { (key(key_)?, string(value, "value", abi::ERR_INFO_VALUE)?) };
            modify(info, |i| i.set(k, v).map_err(Into::into))
        })
    }

    /// Removes `key` (`MPI_ERR_INFO_NOKEY` if it is not set).
    fn MPI_Info_delete / PMPI_Info_delete(info: InfoH, key_: *const c_char) -> c_int {
        api("MPI_Info_delete", || {
            // SAFETY: a NUL-terminated string from the caller.
            let k = unsafe { key(key_)? };
            modify(info, |i| i.delete(k).map_err(Into::into))
        })
    }

    /// The value of `key` in at most `valuelen` bytes and a NUL (MPI 3;
    /// deprecated for `MPI_Info_get_string`).
    fn MPI_Info_get / PMPI_Info_get(info: InfoH, key_: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        api("MPI_Info_get", || {
            let i = info_of(info)?;
            // SAFETY: a NUL-terminated string from the caller.
            let k = unsafe { key(key_)? };
            let cap = usize::try_from(valuelen)
                .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative valuelen {valuelen}")))?;
            out(flag, "flag")?;
            match i.get_checked(k)? {
                Some(v) => {
                    // SAFETY: `value` holds `valuelen + 1` bytes (MPI's contract).
                    unsafe { copy_out(v, value, cap + 1)? };
                    // SAFETY: the caller's int pointer.
                    unsafe { put(flag, "flag", 1) }
                }
                // SAFETY: as above.
                None => unsafe { put(flag, "flag", 0) },
            }
        })
    }

    /// The value of `key` in `*buflen` bytes (with the NUL); `*buflen`
    /// becomes the value's length plus one.
    fn MPI_Info_get_string / PMPI_Info_get_string(info: InfoH, key_: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        api("MPI_Info_get_string", || {
            let i = info_of(info)?;
            // SAFETY: a NUL-terminated string from the caller.
            let k = unsafe { key(key_)? };
            let bl = out(buflen, "buflen")?;
            out(flag, "flag")?;
            // SAFETY: checked non-null; the caller's int.
            let cap = unsafe { bl.read() };
            let cap = usize::try_from(cap)
                .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative buflen {cap}")))?;
            match i.get_checked(k)? {
                Some(v) => {
                    // SAFETY: `value` holds `*buflen` bytes (MPI's contract).
                    unsafe { copy_out(v, value, cap)? };
                    // SAFETY: checked non-null pointers of the caller.
                    unsafe {
                        bl.write((v.len() + 1) as c_int);
                        put(flag, "flag", 1)
                    }
                }
                // SAFETY: the caller's int pointer.
                None => unsafe { put(flag, "flag", 0) },
            }
        })
    }

    /// The length of `key`'s value (without the NUL).
    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: InfoH, key_: *const c_char, valuelen: *mut c_int, flag: *mut c_int) -> c_int {
        api("MPI_Info_get_valuelen", || {
            let i = info_of(info)?;
            // SAFETY: a NUL-terminated string from the caller.
            let k = unsafe { key(key_)? };
            out(valuelen, "valuelen")?;
            match i.get_checked(k)? {
                // SAFETY: the caller's int pointers.
                Some(v) => unsafe {
                    put(valuelen, "valuelen", v.len() as c_int)?;
                    put(flag, "flag", 1)
                },
                // SAFETY: the caller's int pointer.
                None => unsafe { put(flag, "flag", 0) },
            }
        })
    }

    /// The number of keys.
    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: InfoH, nkeys: *mut c_int) -> c_int {
        api("MPI_Info_get_nkeys", || {
            let i = info_of(info)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(nkeys, "nkeys", i.len() as c_int) }
        })
    }

    /// The `n`-th key (in `MPI_MAX_INFO_KEY` bytes).
    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: InfoH, n: c_int, key_: *mut c_char) -> c_int {
        api("MPI_Info_get_nthkey", || {
            let i = info_of(info)?;
            let k = usize::try_from(n).ok().and_then(|n| i.nth_key(n)).ok_or_else(|| {
                MpiError::new(abi::ERR_ARG, format!("key {n} of an info object with {} keys", i.len()))
            })?;
            out(key_, "key")?;
            // SAFETY: `key` holds MPI_MAX_INFO_KEY bytes (MPI's contract).
            unsafe { copy_out(k, key_, MAX_INFO_KEY) }
        })
    }

    /// A new info object with the same keys and values.
    fn MPI_Info_dup / PMPI_Info_dup(info: InfoH, newinfo: *mut InfoH) -> c_int {
        api("MPI_Info_dup", || {
            let i = info_of(info)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_info(i, newinfo) }
        })
    }
}
