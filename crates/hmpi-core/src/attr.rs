//! Attributes (MPI's attribute caching): keys made by [`create_keyval`]
//! with a copy and a delete callback, and the values a program attaches
//! under them to a communicator, a datatype or a window
//! ([`Attributes`], one per object).
//!
//! A value is one pointer-sized word (a C `void *`, an `MPI_Aint`), as in
//! MPI. The callbacks run as MPI orders them: the delete callback when a
//! value is replaced ([`Attributes::set`]) or removed ([`Attributes::delete`])
//! and for every value when the object is freed ([`Attributes::delete_all`]);
//! the copy callback for every value when the object is duplicated
//! ([`Attributes::copy_into`]), which keeps the value it returns or none.
//! A callback that fails makes the call that ran it fail with its code
//! ([`Error::Callback`]). Callbacks run without any lock held, so they may
//! use the attributes of the same object.
//!
//! A freed key ([`free_keyval`]) can no longer be used to set or get, but
//! the values already attached under it stay, and their callbacks still
//! run when their objects are duplicated or freed; the key is gone once the
//! last of them is.
//!
//! The callbacks take the object's handle as their caller gives it (the C
//! library passes its `MPI_Comm`/`MPI_Datatype`/`MPI_Win` handle), the
//! key and the value.
//!
//! ```no_run
//! use hmpi_core::attr::{self, Copy, Delete, Kind};
//! use hmpi_core::traits::*;
//! let universe = hmpi_core::initialize().unwrap();
//! let world = universe.world();
//! let key = attr::create_keyval(Kind::Comm, Copy::Dup, Delete::Null).unwrap();
//! world.attributes().set(Kind::Comm, 0, key, 42).unwrap();
//! let dup = world.duplicate().unwrap();
//! world.attributes().copy_into(Kind::Comm, 0, dup.attributes()).unwrap();
//! assert_eq!(dup.attributes().get(Kind::Comm, key).unwrap(), Some(42));
//! ```

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The kind of object a key is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Communicators (`MPI_Comm_create_keyval`).
    Comm,
    /// Datatypes (`MPI_Type_create_keyval`).
    Type,
    /// Windows (`MPI_Win_create_keyval`).
    Win,
}

/// A copy callback: `(object handle, key, value)` → the value for the
/// duplicate, or `None` to attach nothing there.
pub type CopyFn = Arc<dyn Fn(usize, i32, usize) -> Result<Option<usize>> + Send + Sync>;

/// A delete callback: `(object handle, key, value)`.
pub type DeleteFn = Arc<dyn Fn(usize, i32, usize) -> Result<()> + Send + Sync>;

/// What duplicating an object does with a key's value.
#[derive(Clone)]
pub enum Copy {
    /// Nothing is attached to the duplicate (`MPI_COMM_NULL_COPY_FN`).
    Null,
    /// The same value is attached to the duplicate (`MPI_COMM_DUP_FN`).
    Dup,
    /// The callback decides.
    Call(CopyFn),
}

/// What removing a key's value does.
#[derive(Clone)]
pub enum Delete {
    /// Nothing (`MPI_COMM_NULL_DELETE_FN`).
    Null,
    /// The callback runs on the value.
    Call(DeleteFn),
}

impl std::fmt::Debug for Copy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Copy::Null => "Copy::Null",
            Copy::Dup => "Copy::Dup",
            Copy::Call(_) => "Copy::Call(..)",
        })
    }
}

impl std::fmt::Debug for Delete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Delete::Null => "Delete::Null",
            Delete::Call(_) => "Delete::Call(..)",
        })
    }
}

/// The first key [`create_keyval`] hands out: the ones below are MPI's
/// predefined attribute keys (`MPI_TAG_UB` …) and `MPI_KEYVAL_INVALID`.
pub const FIRST_KEYVAL: i32 = 1024;

/// A key of the registry.
struct Key {
    kind: Kind,
    copy: Copy,
    delete: Delete,
    /// Freed by the program ([`free_keyval`]).
    freed: bool,
    /// The values attached under it.
    uses: usize,
}

static KEYS: Mutex<Vec<Option<Key>>> = Mutex::new(Vec::new());

fn keys() -> MutexGuard<'static, Vec<Option<Key>>> {
    KEYS.lock().unwrap_or_else(|p| p.into_inner())
}

fn slot(keyval: i32) -> Option<usize> {
    usize::try_from(keyval.checked_sub(FIRST_KEYVAL)?).ok()
}

fn no_key(keyval: i32, kind: Kind, why: &str) -> Error {
    Error::Keyval {
        reason: format!(
            "{keyval} is not a {} attribute key ({why})",
            kind_name(kind)
        ),
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Comm => "communicator",
        Kind::Type => "datatype",
        Kind::Win => "window",
    }
}

/// Makes a key for attributes of `kind` objects.
pub fn create_keyval(kind: Kind, copy: Copy, delete: Delete) -> Result<i32> {
    let mut ks = keys();
    let key = Key {
        kind,
        copy,
        delete,
        freed: false,
        uses: 0,
    };
    let i = match ks.iter().position(Option::is_none) {
        Some(i) => {
            ks[i] = Some(key);
            i
        }
        None => {
            ks.push(Some(key));
            ks.len() - 1
        }
    };
    i32::try_from(i)
        .ok()
        .and_then(|i| i.checked_add(FIRST_KEYVAL))
        .ok_or_else(|| Error::Keyval {
            reason: "too many attribute keys".into(),
        })
}

/// Frees a key: it can no longer be set or got; values attached under it
/// stay until their objects drop them (see the module documentation).
pub fn free_keyval(kind: Kind, keyval: i32) -> Result<()> {
    let mut ks = keys();
    let i = live(&ks, kind, keyval)?;
    let k = ks[i].as_mut().expect("checked by live");
    k.freed = true;
    if k.uses == 0 {
        ks[i] = None;
    }
    Ok(())
}

/// The slot of a live (not freed) key of `kind`.
fn live(ks: &[Option<Key>], kind: Kind, keyval: i32) -> Result<usize> {
    let i = slot(keyval).ok_or_else(|| no_key(keyval, kind, "never created"))?;
    match ks.get(i).and_then(Option::as_ref) {
        None => Err(no_key(keyval, kind, "never created, or freed")),
        Some(k) if k.freed => Err(no_key(keyval, kind, "freed")),
        Some(k) if k.kind != kind => Err(no_key(
            keyval,
            kind,
            &format!("it was made for {} attributes", kind_name(k.kind)),
        )),
        Some(_) => Ok(i),
    }
}

/// The callbacks of a key that has values attached (freed or not).
fn callbacks(keyval: i32) -> Option<(Copy, Delete)> {
    let ks = keys();
    let k = ks.get(slot(keyval)?)?.as_ref()?;
    Some((k.copy.clone(), k.delete.clone()))
}

/// One value fewer under `keyval`: a freed key with none left goes.
fn release(keyval: i32) {
    let mut ks = keys();
    if let Some(i) = slot(keyval) {
        if let Some(Some(k)) = ks.get_mut(i) {
            k.uses = k.uses.saturating_sub(1);
            if k.freed && k.uses == 0 {
                ks[i] = None;
            }
        }
    }
}

/// One value more under `keyval` (a live key, or one whose values are
/// being copied).
fn retain(keyval: i32) {
    let mut ks = keys();
    if let Some(Some(k)) = slot(keyval).and_then(|i| ks.get_mut(i)) {
        k.uses += 1;
    }
}

fn run_delete(delete: &Delete, handle: usize, keyval: i32, value: usize) -> Result<()> {
    match delete {
        Delete::Null => Ok(()),
        Delete::Call(f) => f(handle, keyval, value),
    }
}

/// The attributes of one object.
#[derive(Debug, Default)]
pub struct Attributes {
    map: Mutex<BTreeMap<i32, usize>>,
}

impl Attributes {
    /// No attributes.
    pub fn new() -> Attributes {
        Attributes::default()
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<i32, usize>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value under `keyval`, if one is set.
    pub fn get(&self, kind: Kind, keyval: i32) -> Result<Option<usize>> {
        live(&keys(), kind, keyval)?;
        Ok(self.map().get(&keyval).copied())
    }

    /// Sets the value under `keyval`; a value already there is deleted
    /// first (its delete callback runs; if it fails, nothing changes).
    pub fn set(&self, kind: Kind, handle: usize, keyval: i32, value: usize) -> Result<()> {
        live(&keys(), kind, keyval)?;
        let old = self.map().get(&keyval).copied();
        if let Some(old) = old {
            let (_, delete) = callbacks(keyval).ok_or_else(|| no_key(keyval, kind, "freed"))?;
            run_delete(&delete, handle, keyval, old)?;
        }
        if self.map().insert(keyval, value).is_none() {
            retain(keyval);
        }
        Ok(())
    }

    /// Removes the value under `keyval` (its delete callback runs; if it
    /// fails, the value stays). No value there is an error.
    pub fn delete(&self, kind: Kind, handle: usize, keyval: i32) -> Result<()> {
        live(&keys(), kind, keyval)?;
        let value = self
            .map()
            .get(&keyval)
            .copied()
            .ok_or_else(|| Error::Keyval {
                reason: format!("no attribute is set under key {keyval}"),
            })?;
        let (_, delete) = callbacks(keyval).ok_or_else(|| no_key(keyval, kind, "freed"))?;
        run_delete(&delete, handle, keyval, value)?;
        if self.map().remove(&keyval).is_some() {
            release(keyval);
        }
        Ok(())
    }

    /// Copies every value into `to` (the attributes of a duplicate) as
    /// its key's copy callback says; `handle` is this object's. A failing
    /// callback stops the copy and its error is returned (the values
    /// copied so far stay in `to`, for the caller to delete with the
    /// duplicate).
    pub fn copy_into(&self, _kind: Kind, handle: usize, to: &Attributes) -> Result<()> {
        let values: Vec<(i32, usize)> = self.map().iter().map(|(&k, &v)| (k, v)).collect();
        for (keyval, value) in values {
            let Some((copy, _)) = callbacks(keyval) else {
                continue;
            };
            let new = match copy {
                Copy::Null => None,
                Copy::Dup => Some(value),
                Copy::Call(f) => f(handle, keyval, value)?,
            };
            if let Some(v) = new {
                if to.map().insert(keyval, v).is_none() {
                    retain(keyval);
                }
            }
        }
        Ok(())
    }

    /// Deletes every value (the object is being freed), in increasing
    /// key order; stops at the first failing callback, whose error is
    /// returned (the values not yet deleted stay).
    pub fn delete_all(&self, _kind: Kind, handle: usize) -> Result<()> {
        loop {
            let first = self.map().iter().next().map(|(&k, &v)| (k, v));
            let Some((keyval, value)) = first else {
                return Ok(());
            };
            if let Some((_, delete)) = callbacks(keyval) {
                run_delete(&delete, handle, keyval, value)?;
            }
            if self.map().remove(&keyval).is_some() {
                release(keyval);
            }
        }
    }

    /// Whether no value is attached.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}

impl Drop for Attributes {
    /// Values still attached when the object goes (a Rust object dropped
    /// without [`Attributes::delete_all`]) are deleted; a failing callback
    /// cannot be reported here and is ignored.
    fn drop(&mut self) {
        let map = std::mem::take(self.map.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (keyval, value) in map {
            if let Some((_, delete)) = callbacks(keyval) {
                let _ = run_delete(&delete, 0, keyval, value);
            }
            release(keyval);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn callbacks_run_on_replace_copy_delete_and_free() {
        let deleted = Arc::new(AtomicUsize::new(0));
        let d = deleted.clone();
        let key = create_keyval(
            Kind::Comm,
            Copy::Call(Arc::new(|h, _, v| Ok((h == 7).then_some(v + 1)))),
            Delete::Call(Arc::new(move |_, _, v| {
                // Relaxed: a counter read after the calls, on this thread.
                d.fetch_add(v, Ordering::Relaxed);
                Ok(())
            })),
        )
        .unwrap();
        assert!(key >= FIRST_KEYVAL);
        let a = Attributes::new();
        assert_eq!(a.get(Kind::Comm, key).unwrap(), None);
        a.set(Kind::Comm, 7, key, 10).unwrap();
        a.set(Kind::Comm, 7, key, 20).unwrap();
        assert_eq!(deleted.load(Ordering::Relaxed), 10);
        let b = Attributes::new();
        a.copy_into(Kind::Comm, 7, &b).unwrap();
        assert_eq!(b.get(Kind::Comm, key).unwrap(), Some(21));
        let c = Attributes::new();
        a.copy_into(Kind::Comm, 8, &c).unwrap();
        assert_eq!(c.get(Kind::Comm, key).unwrap(), None);
        // A freed key keeps its values' callbacks.
        free_keyval(Kind::Comm, key).unwrap();
        assert!(matches!(a.get(Kind::Comm, key), Err(Error::Keyval { .. })));
        a.delete_all(Kind::Comm, 7).unwrap();
        assert_eq!(deleted.load(Ordering::Relaxed), 30);
        drop(b);
        assert_eq!(deleted.load(Ordering::Relaxed), 51);
        assert!(matches!(
            free_keyval(Kind::Comm, key),
            Err(Error::Keyval { .. })
        ));
    }

    #[test]
    fn wrong_kind_unknown_key_and_failing_callbacks_are_errors() {
        let key = create_keyval(
            Kind::Type,
            Copy::Call(Arc::new(|_, _, _| Err(Error::Callback { code: 17 }))),
            Delete::Call(Arc::new(|_, _, v| {
                if v == 1 {
                    Err(Error::Callback { code: 18 })
                } else {
                    Ok(())
                }
            })),
        )
        .unwrap();
        let a = Attributes::new();
        assert!(matches!(a.get(Kind::Comm, key), Err(Error::Keyval { .. })));
        assert!(matches!(a.get(Kind::Type, 5), Err(Error::Keyval { .. })));
        assert!(matches!(
            a.delete(Kind::Type, 0, key),
            Err(Error::Keyval { .. })
        ));
        a.set(Kind::Type, 0, key, 1).unwrap();
        assert!(matches!(
            a.set(Kind::Type, 0, key, 2),
            Err(Error::Callback { code: 18 })
        ));
        assert_eq!(a.get(Kind::Type, key).unwrap(), Some(1));
        let b = Attributes::new();
        assert!(matches!(
            a.copy_into(Kind::Type, 0, &b),
            Err(Error::Callback { code: 17 })
        ));
        assert!(matches!(
            a.delete(Kind::Type, 0, key),
            Err(Error::Callback { code: 18 })
        ));
        a.map().insert(key, 3);
        a.delete(Kind::Type, 0, key).unwrap();
        assert!(a.is_empty());
        free_keyval(Kind::Type, key).unwrap();
    }
}
