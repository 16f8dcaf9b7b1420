//! Tables that turn C handles into the objects behind them.
//!
//! A handle this library creates is `kind << 24 | (0x1000 + index)`: at or
//! above `0x1000` (the standard ABI keeps the range below for predefined
//! handles), inside an `int` (for `MPI_*_toint`), and tagged with its kind,
//! so a datatype handle passed as a communicator is rejected instead of
//! being taken for whatever sits at the same index.
//!
//! A slot is free, live, or *busy*: an operation that must not hold the
//! table's lock while it runs (waiting on a request drives the engine's
//! progress, which may copy megabytes) checks the object out, leaving the
//! slot busy, and checks it back in or releases the slot afterwards. A
//! second thread that uses a busy handle gets an error, as MPI forbids two
//! threads completing one request at the same time.
//!
//! In C every handle round-trips through an `int`:
//! ```c
//! MPI_Comm dup;
//! MPI_Comm_dup(MPI_COMM_WORLD, &dup);
//! int i = MPI_Comm_toint(dup);            // >= 0x1000
//! MPI_Comm same = MPI_Comm_fromint(i);    // == dup
//! ```

use std::sync::{Mutex, MutexGuard};

/// The first index value of created handles (below: predefined handles).
pub const FIRST: usize = 0x1000;
/// Bits of a handle below its kind tag.
const KIND_SHIFT: u32 = 24;
const INDEX_MASK: usize = (1 << KIND_SHIFT) - 1;

/// Kind tags (bits 24 and up of a created handle).
pub const KIND_COMM: usize = 1;
pub const KIND_GROUP: usize = 2;
pub const KIND_TYPE: usize = 3;
pub const KIND_REQUEST: usize = 4;
pub const KIND_ERRHANDLER: usize = 5;
pub const KIND_MESSAGE: usize = 6;

enum Slot<T> {
    Free,
    Live(T),
    Busy,
}

struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

/// Why a handle did not lead to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Not a handle of this table (wrong kind, never created, or freed).
    Unknown,
    /// Checked out by an operation in another thread.
    Busy,
}

/// A table of objects of one kind.
pub struct Table<T> {
    kind: usize,
    inner: Mutex<Slots<T>>,
}

impl<T> Table<T> {
    /// An empty table for handles of `kind`.
    pub const fn new(kind: usize) -> Self {
        Table {
            kind,
            inner: Mutex::new(Slots {
                slots: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        // A panic while holding the lock leaves the table consistent (every
        // change is one assignment), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn index(&self, handle: usize) -> Option<usize> {
        if handle >> KIND_SHIFT != self.kind {
            return None;
        }
        (handle & INDEX_MASK).checked_sub(FIRST)
    }

    fn handle(&self, index: usize) -> usize {
        self.kind << KIND_SHIFT | (FIRST + index)
    }

    /// Stores `value`; its new handle, or `None` if the table is full
    /// (16 million live objects of one kind).
    pub fn insert(&self, value: T) -> Option<usize> {
        self.insert_with(|_| value)
    }

    /// Stores the value `make` builds from its future handle.
    pub fn insert_with(&self, make: impl FnOnce(usize) -> T) -> Option<usize> {
        let mut t = self.lock();
        let i = match t.free.pop() {
            Some(i) => i,
            None => {
                if FIRST + t.slots.len() > INDEX_MASK {
                    return None;
                }
                t.slots.push(Slot::Free);
                t.slots.len() - 1
            }
        };
        let h = self.handle(i);
        t.slots[i] = Slot::Live(make(h));
        Some(h)
    }

    /// Runs `f` on the live object of `handle`, under the table's lock.
    pub fn with<R>(&self, handle: usize, f: impl FnOnce(&mut T) -> R) -> Result<R, Miss> {
        let i = self.index(handle).ok_or(Miss::Unknown)?;
        let mut t = self.lock();
        match t.slots.get_mut(i) {
            Some(Slot::Live(v)) => Ok(f(v)),
            Some(Slot::Busy) => Err(Miss::Busy),
            _ => Err(Miss::Unknown),
        }
    }

    /// Removes the object of `handle` and frees its slot.
    pub fn remove(&self, handle: usize) -> Result<T, Miss> {
        let i = self.index(handle).ok_or(Miss::Unknown)?;
        let mut t = self.lock();
        match t.slots.get(i) {
            Some(Slot::Live(_)) => {}
            Some(Slot::Busy) => return Err(Miss::Busy),
            _ => return Err(Miss::Unknown),
        }
        let Slot::Live(v) = std::mem::replace(&mut t.slots[i], Slot::Free) else {
            unreachable!("checked live above")
        };
        t.free.push(i);
        Ok(v)
    }

    /// Takes the object of `handle` out, leaving its slot busy.
    pub fn checkout(&self, handle: usize) -> Result<T, Miss> {
        let i = self.index(handle).ok_or(Miss::Unknown)?;
        let mut t = self.lock();
        match t.slots.get(i) {
            Some(Slot::Live(_)) => {}
            Some(Slot::Busy) => return Err(Miss::Busy),
            _ => return Err(Miss::Unknown),
        }
        let Slot::Live(v) = std::mem::replace(&mut t.slots[i], Slot::Busy) else {
            unreachable!("checked live above")
        };
        Ok(v)
    }

    /// Takes out the objects of every handle (`None` where `skip` says so),
    /// or none of them if one handle is not live (its position and why).
    pub fn checkout_many(
        &self,
        handles: &[usize],
        skip: impl Fn(usize) -> bool,
    ) -> Result<Vec<Option<T>>, (usize, Miss)> {
        let mut t = self.lock();
        for (pos, &h) in handles.iter().enumerate() {
            if skip(h) {
                continue;
            }
            let i = self.index(h).ok_or((pos, Miss::Unknown))?;
            match t.slots.get(i) {
                Some(Slot::Live(_)) => {}
                Some(Slot::Busy) => return Err((pos, Miss::Busy)),
                _ => return Err((pos, Miss::Unknown)),
            }
        }
        // A handle listed twice is busy by its second appearance.
        let mut out = Vec::with_capacity(handles.len());
        for (pos, &h) in handles.iter().enumerate() {
            if skip(h) {
                out.push(None);
                continue;
            }
            let i = self.index(h).expect("checked above");
            match std::mem::replace(&mut t.slots[i], Slot::Busy) {
                Slot::Live(v) => out.push(Some(v)),
                _ => {
                    // Undo: put back what was taken so far.
                    for (p, v) in out.into_iter().enumerate() {
                        if let Some(v) = v {
                            let j = self.index(handles[p]).expect("checked above");
                            t.slots[j] = Slot::Live(v);
                        }
                    }
                    return Err((pos, Miss::Busy));
                }
            }
        }
        Ok(out)
    }

    /// Puts a checked-out object back.
    pub fn checkin(&self, handle: usize, value: T) {
        if let Some(i) = self.index(handle) {
            let mut t = self.lock();
            if let Some(s @ Slot::Busy) = t.slots.get_mut(i) {
                *s = Slot::Live(value);
            }
        }
    }

    /// Frees the slot of a checked-out object that is finished.
    pub fn release(&self, handle: usize) {
        if let Some(i) = self.index(handle) {
            let mut t = self.lock();
            if let Some(s @ Slot::Busy) = t.slots.get_mut(i) {
                *s = Slot::Free;
                t.free.push(i);
            }
        }
    }
}

impl<T: Clone> Table<T> {
    /// A clone of the live object of `handle`.
    pub fn get(&self, handle: usize) -> Result<T, Miss> {
        self.with(handle, |v| v.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_tagged_reused_and_checked_out() {
        let t: Table<u32> = Table::new(KIND_TYPE);
        let a = t.insert(1).unwrap();
        let b = t.insert(2).unwrap();
        assert!(a >= FIRST && a <= i32::MAX as usize);
        assert_eq!(a >> 24, KIND_TYPE);
        assert_eq!(t.get(b), Ok(2));
        // Another kind's handle with the same index is unknown here.
        let other = (KIND_COMM << 24) | (a & INDEX_MASK);
        assert_eq!(t.get(other), Err(Miss::Unknown));
        assert_eq!(t.get(0x209), Err(Miss::Unknown));
        assert_eq!(t.checkout(a), Ok(1));
        assert_eq!(t.get(a), Err(Miss::Busy));
        assert_eq!(t.remove(a), Err(Miss::Busy));
        t.checkin(a, 5);
        assert_eq!(t.get(a), Ok(5));
        assert_eq!(t.remove(a), Ok(5));
        assert_eq!(t.get(a), Err(Miss::Unknown));
        let c = t.insert(3).unwrap();
        assert_eq!(c, a); // the slot is reused
                          // checkout_many: all or nothing.
        assert_eq!(
            t.checkout_many(&[b, c, 7], |h| h == 7),
            Ok(vec![Some(2), Some(3), None])
        );
        assert_eq!(t.get(b), Err(Miss::Busy));
        t.checkin(b, 2);
        t.release(c);
        assert_eq!(t.checkout_many(&[b, c], |_| false), Err((1, Miss::Unknown)));
        assert_eq!(t.get(b), Ok(2)); // untouched after the failure
        assert_eq!(t.checkout_many(&[b, b], |_| false), Err((1, Miss::Busy)));
        assert_eq!(t.get(b), Ok(2));
    }
}
