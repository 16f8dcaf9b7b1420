//! rsmpi's `mpi::attribute`: values of a Rust type cached on a
//! communicator (`MPI_Comm_set_attr` / `MPI_Comm_get_attr`), one per type,
//! on hmpi-core's attributes ([`hmpi_core::attr`]).
//!
//! Each type implementing [`CommAttribute`] gets its own key on first use;
//! the value is boxed and the key's callbacks clone it into a duplicate
//! (if [`CommAttribute::CLONE_ON_DUP`]) and drop it when the communicator
//! goes. A value replaced by `set_attr` is dropped when the communicator
//! goes rather than at once, so that a reference from `get_attr` through
//! another handle to the same communicator (a second `universe.world()`)
//! stays valid as long as the communicator.

use std::any::TypeId;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use hmpi_core::attr::{self, Attributes, Kind};

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::CommAttribute;
}

/// A key for communicator attributes (rsmpi's `AttributeKey`).
#[derive(Debug, Clone)]
pub struct AttributeKey(i32);

impl AttributeKey {
    /// The key with MPI's number `k`.
    ///
    /// # Safety
    /// `k` must be a key whose values are boxed `A`s for the
    /// [`CommAttribute`] `A` whose `get_key` returns it (as the keys made
    /// by the provided `get_key` are).
    pub unsafe fn new_unchecked(k: i32) -> Self {
        AttributeKey(k)
    }

    /// MPI's number for the key.
    pub fn value(&self) -> i32 {
        self.0
    }
}

/// A type whose values can be cached on a communicator (rsmpi's
/// `CommAttribute`).
pub trait CommAttribute: 'static + Sized + Clone {
    /// Whether `duplicate()` clones the value into the duplicate (else
    /// the duplicate has none).
    const CLONE_ON_DUP: bool = false;

    /// The key of this type's values, made on first use.
    fn get_key() -> AttributeKey {
        let mut keys = type_keys().lock().unwrap_or_else(|p| p.into_inner());
        let id = TypeId::of::<Self>();
        if let Some(&k) = keys.get(&id) {
            return AttributeKey(k);
        }
        let copy = if Self::CLONE_ON_DUP {
            attr::Copy::Call(Arc::new(|_, _, value| {
                // SAFETY: values under this type's key are boxed `Self`s
                // (`set`), freed only when the communicator's attributes
                // go (a replaced one is parked until then), and the
                // communicator being duplicated is alive.
                let v = unsafe { &*(value as *const Self) };
                Ok(Some(Box::into_raw(Box::new(v.clone())) as usize))
            }))
        } else {
            attr::Copy::Null
        };
        let delete = attr::Delete::Call(Arc::new(|_, _, value| {
            let replacing = REPLACING.with(Cell::get);
            if replacing != 0 {
                park(replacing, value, drop_boxed::<Self>);
            } else {
                // SAFETY: the value is a boxed `Self` (`set_attr`) that its
                // communicator no longer holds (it is being freed).
                unsafe { drop_boxed::<Self>(value) };
            }
            Ok(())
        }));
        let k = crate::check(attr::create_keyval(Kind::Comm, copy, delete));
        keys.insert(id, k);
        AttributeKey(k)
    }
}

/// The key made for each [`CommAttribute`] type.
fn type_keys() -> &'static Mutex<HashMap<TypeId, i32>> {
    static KEYS: OnceLock<Mutex<HashMap<TypeId, i32>>> = OnceLock::new();
    KEYS.get_or_init(Default::default)
}

thread_local! {
    /// While `set` attaches values on this thread: the address of the
    /// communicator's attributes, under which the delete callback parks
    /// a replaced value (0 otherwise: the communicator is going).
    static REPLACING: Cell<usize> = const { Cell::new(0) };
}

/// A replaced value and how to drop it.
type Parked = (usize, unsafe fn(usize));

/// Replaced values, by the address of their communicator's attributes,
/// dropped when that communicator goes.
fn parked() -> &'static Mutex<HashMap<usize, Vec<Parked>>> {
    static PARKED: OnceLock<Mutex<HashMap<usize, Vec<Parked>>>> = OnceLock::new();
    PARKED.get_or_init(Default::default)
}

fn park(attrs: usize, value: usize, drop: unsafe fn(usize)) {
    parked()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(attrs)
        .or_default()
        .push((value, drop));
}

/// Drops the boxed `T` at `value`.
///
/// # Safety
/// `value` is a `Box<T>` made by `Box::into_raw`, not used afterwards.
unsafe fn drop_boxed<T>(value: usize) {
    // SAFETY: the caller's promise.
    drop(unsafe { Box::from_raw(value as *mut T) });
}

/// The key of the value that drops a communicator's parked values when
/// the communicator goes (its value is the attributes' address).
fn sentinel_key() -> i32 {
    static KEY: OnceLock<i32> = OnceLock::new();
    *KEY.get_or_init(|| {
        let delete = attr::Delete::Call(Arc::new(|_, _, attrs| {
            if REPLACING.with(Cell::get) != 0 {
                // Two threads set the sentinel at once: the communicator
                // is alive, its parked values stay.
                return Ok(());
            }
            let values = parked()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&attrs);
            for (value, drop) in values.into_iter().flatten() {
                // SAFETY: each parked value is a box its delete callback
                // gave up (see `park`), parked once.
                unsafe { drop(value) };
            }
            Ok(())
        }));
        crate::check(attr::create_keyval(Kind::Comm, attr::Copy::Null, delete))
    })
}

/// The `A` attached to `attrs`, if any.
pub(crate) fn get<A: CommAttribute>(attrs: &Attributes) -> Option<&A> {
    let key = A::get_key();
    let value = crate::check(attrs.get(Kind::Comm, key.0))?;
    // SAFETY: values under `A`'s key are boxed `A`s (`set`); one stays
    // allocated until its communicator, which `attrs` belongs to and
    // which outlives the borrow, goes (a replaced one is parked until
    // then).
    Some(unsafe { &*(value as *const A) })
}

/// Attaches `val` to `attrs`, replacing the `A` attached before (dropped
/// when the communicator goes).
pub(crate) fn set<A: CommAttribute>(attrs: &Attributes, val: A) {
    let key = A::get_key();
    let here = attrs as *const Attributes as usize;
    // The sentinel is there before any value can be replaced (also by
    // another thread's `set` on a clone of the communicator).
    let sentinel = sentinel_key();
    REPLACING.with(|r| r.set(here));
    let mut done = Ok(());
    if crate::check(attrs.get(Kind::Comm, sentinel)).is_none() {
        done = attrs.set(Kind::Comm, 0, sentinel, here);
    }
    let value = Box::into_raw(Box::new(val)) as usize;
    if done.is_ok() {
        done = attrs.set(Kind::Comm, 0, key.0, value);
    }
    REPLACING.with(|r| r.set(0));
    if let Err(e) = done {
        // SAFETY: the box was not attached; nothing else has it.
        unsafe { drop_boxed::<A>(value) };
        crate::fatal(&e);
    }
}

/// Copies the attributes of `from` into its duplicate `to` as their keys
/// say (`MPI_Comm_dup`).
pub(crate) fn copy(from: &Attributes, to: &Attributes) {
    crate::check(from.copy_into(Kind::Comm, 0, to))
}
