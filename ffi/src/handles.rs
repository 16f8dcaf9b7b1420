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

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The first index value of created handles (below: predefined handles).
pub const FIRST: usize = 0x1000;
/// Bits of a handle below its kind tag.
pub const KIND_SHIFT: u32 = 24;
const INDEX_MASK: usize = (1 << KIND_SHIFT) - 1;

/// A handle of `kind` that no table creates (its index is below
/// [`FIRST`]): for a library-wide object of that kind.
pub const fn reserved(kind: usize) -> usize {
    kind << KIND_SHIFT | (FIRST - 1)
}

/// Kind tags (bits 24 and up of a created handle).
pub const KIND_COMM: usize = 1;
pub const KIND_GROUP: usize = 2;
pub const KIND_TYPE: usize = 3;
pub const KIND_REQUEST: usize = 4;
pub const KIND_ERRHANDLER: usize = 5;
pub const KIND_MESSAGE: usize = 6;
pub const KIND_OP: usize = 7;
pub const KIND_COLL: usize = 8;
pub const KIND_INFO: usize = 9;
/// Windows (`MPI_Win`, see `win`).
pub const KIND_WIN: usize = 10;

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

    /// Puts checked-out objects back and frees the slots of finished
    /// ones, under one lock.
    pub fn settle(&self, back: impl IntoIterator<Item = (usize, T)>, done: &[usize]) {
        let mut t = self.lock();
        for (handle, value) in back {
            if let Some(i) = self.index(handle) {
                if let Some(s @ Slot::Busy) = t.slots.get_mut(i) {
                    *s = Slot::Live(value);
                }
            }
        }
        for &handle in done {
            if let Some(i) = self.index(handle) {
                if let Some(s @ Slot::Busy) = t.slots.get_mut(i) {
                    *s = Slot::Free;
                    t.free.push(i);
                }
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

// ------------------------------------------------------------ SlotTable

/// Slots per chunk of a [`SlotTable`].
const CHUNK: usize = 1024;
/// Chunks a [`SlotTable`] may have (its handles' index range).
const CHUNKS: usize = (INDEX_MASK + 1 - FIRST) / CHUNK;

const FREE: u8 = 0;
const LIVE: u8 = 1;
const BUSY: u8 = 2;

/// One slot: its state, its link in the free list, and (when live or
/// busy) its object.
struct Cell<T> {
    state: AtomicU8,
    /// When free: the next free index + 1 (0: none).
    next_free: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A table for objects that one thread at a time completes (requests):
/// slots live in chunks that never move or go away, each with an atomic
/// state, so storing, taking and returning an object takes no lock. Free
/// indices form a lock-free stack (Treiber's) linked through the cells,
/// its head tagged with a counter against ABA; never-used indices come
/// from a bump counter. Taking an object is one compare-exchange on its
/// state; making it live and freeing it are release stores and one
/// compare-exchange on the free list's head.
pub struct SlotTable<T> {
    kind: usize,
    chunks: [AtomicPtr<Cell<T>>; CHUNKS],
    /// `tag << 32 | (index + 1)` of the first free index (low half 0: none).
    free_head: AtomicU64,
    /// The next never-used index.
    next: AtomicUsize,
}

// SAFETY: a cell's value is written by the thread that makes it live and
// read only by the one thread that takes it (the LIVE→BUSY exchange
// admits one), with release/acquire on the state ordering the accesses;
// objects move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for SlotTable<T> {}

/// An object of a [`SlotTable`] marked busy where it is
/// ([`SlotTable::lock_many`]): its holder's alone until it is taken out
/// ([`Busy::take`], which frees the slot) or dropped (back to live).
pub struct Busy<'t, T> {
    table: &'t SlotTable<T>,
    cell: &'t Cell<T>,
    index: usize,
}

impl<T> Busy<'_, T> {
    /// The object.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: the cell was live (initialised) when we marked it busy,
        // and the mark makes it ours until `take` or drop.
        unsafe { (*self.cell.value.get()).assume_init_mut() }
    }

    /// Takes the object out and frees its slot.
    #[inline]
    pub fn take(self) -> T {
        // SAFETY: as in `get_mut`; the object is read once, and the slot
        // is freed below without dropping it again.
        let v = unsafe { (*self.cell.value.get()).assume_init_read() };
        // Relaxed: the free list's Release exchange publishes the FREE
        // state before the index can be popped again (as in `release`).
        self.cell.state.store(FREE, Ordering::Relaxed);
        self.table.give_index(self.index);
        std::mem::forget(self);
        v
    }
}

impl<'t, T> Busy<'t, T> {
    /// Takes the object out; its slot joins `batch`, freed when the batch
    /// is dropped (one exchange on the free list for the whole batch).
    #[inline]
    pub fn take_into(self, batch: &mut FreeBatch<'t, T>) -> T {
        // SAFETY: as in `get_mut`; the object is read once, and the slot
        // is freed by the batch without dropping it again.
        let v = unsafe { (*self.cell.value.get()).assume_init_read() };
        self.free_into(batch);
        v
    }

    /// Drops the object where it is; its slot joins `batch` (as in
    /// [`Busy::take_into`], without moving the object out first).
    #[inline]
    pub fn drop_into(self, batch: &mut FreeBatch<'t, T>) {
        // SAFETY: as in `get_mut`; dropped once, and the slot is freed by
        // the batch without dropping it again.
        unsafe { (*self.cell.value.get()).assume_init_drop() };
        self.free_into(batch);
    }

    /// Drops the object where it is and frees its slot.
    #[inline]
    pub fn drop_here(self) {
        let mut batch = self.table.free_batch();
        self.drop_into(&mut batch);
    }

    /// Marks the slot, whose object is gone, free, and adds it to `batch`.
    #[inline]
    fn free_into(self, batch: &mut FreeBatch<'t, T>) {
        // Relaxed: the batch's Release exchange publishes the FREE state
        // before the index can be popped again.
        self.cell.state.store(FREE, Ordering::Relaxed);
        batch.add(self.cell, self.index);
        std::mem::forget(self);
    }
}

/// A free slot of a table, taken for an object that is written into it in
/// place ([`SlotTable::vacant`]). Filled, it becomes live under a handle;
/// dropped unfilled, it goes back to the free list.
pub struct Vacant<'t, T> {
    table: &'t SlotTable<T>,
    index: usize,
    cell: &'t Cell<T>,
}

impl<T> Vacant<'_, T> {
    /// The slot's storage (uninitialised until the caller writes it).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.cell.value.get().cast::<T>()
    }

    /// Makes the object written at [`Vacant::as_ptr`] live; its handle.
    ///
    /// # Safety
    ///
    /// The storage holds an initialised object.
    #[inline(always)]
    pub unsafe fn fill(self) -> usize {
        // SYNC POINT: Release publishes the object to the thread that
        // takes it (Acquire in `checkout`), as in `insert`.
        self.cell.state.store(LIVE, Ordering::Release);
        let h = self.table.handle(self.index);
        std::mem::forget(self);
        h
    }
}

impl<T> Drop for Vacant<'_, T> {
    fn drop(&mut self) {
        self.table.give_index(self.index);
    }
}

/// Slots freed together ([`Busy::take_into`]): linked to each other as
/// they come, pushed on the table's free list at once when dropped.
pub struct FreeBatch<'t, T> {
    table: &'t SlotTable<T>,
    /// The chain's first index + 1 (0: empty) and its last cell.
    first: u32,
    last: Option<&'t Cell<T>>,
}

impl<'t, T> FreeBatch<'t, T> {
    fn add(&mut self, cell: &'t Cell<T>, index: usize) {
        // Relaxed: published with the chain by the Release exchange in
        // `drop`.
        cell.next_free.store(self.first, Ordering::Relaxed);
        self.first = index as u32 + 1;
        self.last.get_or_insert(cell);
    }
}

impl<T> Drop for FreeBatch<'_, T> {
    fn drop(&mut self) {
        if let Some(last) = self.last {
            self.table.push_chain(self.first, last);
        }
    }
}

impl<T> Drop for Busy<'_, T> {
    fn drop(&mut self) {
        // SYNC POINT: Release, as in `insert`.
        self.cell.state.store(LIVE, Ordering::Release);
    }
}

impl<T> SlotTable<T> {
    /// An empty table for handles of `kind`.
    pub const fn new(kind: usize) -> Self {
        SlotTable {
            kind,
            chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS],
            free_head: AtomicU64::new(0),
            next: AtomicUsize::new(0),
        }
    }

    fn handle(&self, index: usize) -> usize {
        self.kind << KIND_SHIFT | (FIRST + index)
    }

    /// The cell of an index, if its chunk exists.
    #[inline]
    fn cell_at(&self, i: usize) -> Option<&Cell<T>> {
        // SYNC POINT: Acquire pairs with the Release publication of the
        // chunk in `chunk_for`, so its initialised cells are visible.
        let chunk = self.chunks.get(i / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a published chunk holds CHUNK cells and is never freed.
        Some(unsafe { &*chunk.add(i % CHUNK) })
    }

    /// The cell of a handle of this table, if its chunk exists.
    #[inline]
    fn cell(&self, handle: usize) -> Option<&Cell<T>> {
        if handle >> KIND_SHIFT != self.kind {
            return None;
        }
        self.cell_at((handle & INDEX_MASK).checked_sub(FIRST)?)
    }

    /// Makes sure the chunk of `index` exists.
    fn chunk_for(&self, index: usize) -> Option<()> {
        let slot = self.chunks.get(index / CHUNK)?;
        // SYNC POINT: Acquire, as in `cell_at`.
        if !slot.load(Ordering::Acquire).is_null() {
            return Some(());
        }
        let cells: Box<[Cell<T>]> = (0..CHUNK)
            .map(|_| Cell {
                state: AtomicU8::new(FREE),
                next_free: AtomicU32::new(0),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        let p = Box::into_raw(cells).cast::<Cell<T>>();
        // SYNC POINT: Release publishes the initialised cells (Acquire in
        // `cell_at`); on a lost race the other thread's chunk is used (and
        // was published the same way).
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                p,
                Ordering::Release,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: ours, never published.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, CHUNK)) });
        }
        Some(())
    }

    /// A free index: the top of the free list, else a never-used one.
    #[inline(always)]
    fn take_index(&self) -> Option<usize> {
        // SYNC POINT: Acquire pairs with the Release exchange in
        // `give_index`, so the popped cell's `next_free` is the one its
        // pusher wrote (a stale read fails the exchange: the tag moved).
        let mut head = self.free_head.load(Ordering::Acquire);
        while head as u32 != 0 {
            let i = (head as u32 - 1) as usize;
            let cell = self.cell_at(i)?;
            // Relaxed: validated by the exchange below (same tag = nobody
            // popped or pushed in between).
            let next = cell.next_free.load(Ordering::Relaxed);
            let new = (head >> 32).wrapping_add(1) << 32 | u64::from(next);
            // SYNC POINT: Acquire on success, as for the load above.
            match self.free_head.compare_exchange_weak(
                head,
                new,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(i),
                Err(h) => head = h,
            }
        }
        // Relaxed: only uniqueness matters; the cells are published
        // through the chunk pointer and the states.
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.chunk_for(i)?;
        Some(i)
    }

    /// Pushes a freed index on the free list.
    #[inline]
    fn give_index(&self, i: usize) {
        if let Some(cell) = self.cell_at(i) {
            self.push_chain(i as u32 + 1, cell);
        }
    }

    /// An empty batch of slots to free together.
    pub fn free_batch(&self) -> FreeBatch<'_, T> {
        FreeBatch {
            table: self,
            first: 0,
            last: None,
        }
    }

    /// Pushes a chain of free indices, linked through `next_free` from
    /// index `first - 1` to the cell `last`, on the free list.
    #[inline]
    fn push_chain(&self, first: u32, last: &Cell<T>) {
        // Relaxed: the exchange below validates the head it links to.
        let mut head = self.free_head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release exchange below.
            last.next_free.store(head as u32, Ordering::Relaxed);
            let new = (head >> 32).wrapping_add(1) << 32 | u64::from(first);
            // SYNC POINT: Release publishes the chain's `next_free` links
            // (and the cells' FREE states) to the threads that pop these
            // indices (Acquire in `take_index`).
            match self.free_head.compare_exchange_weak(
                head,
                new,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Stores `value`; its handle, or the value back if the table is full.
    #[inline(always)]
    pub fn insert(&self, value: T) -> Result<usize, T> {
        let Some(i) = self.take_index().filter(|&i| FIRST + i <= INDEX_MASK) else {
            return Err(value);
        };
        let Some(cell) = self.cell_at(i) else {
            return Err(value);
        };
        // SAFETY: a free cell whose index only this thread holds.
        unsafe { (*cell.value.get()).write(value) };
        // SYNC POINT: Release publishes the value to the thread that
        // takes it (Acquire in `checkout`).
        cell.state.store(LIVE, Ordering::Release);
        Ok(self.handle(i))
    }

    /// A free slot, for an object to be written in place; `None` if the
    /// table is full.
    #[inline(always)]
    pub fn vacant(&self) -> Option<Vacant<'_, T>> {
        let index = self.take_index().filter(|&i| FIRST + i <= INDEX_MASK)?;
        let cell = self.cell_at(index)?;
        Some(Vacant {
            table: self,
            index,
            cell,
        })
    }

    /// Whether `handle` names a live object (a snapshot).
    pub fn is_live(&self, handle: usize) -> bool {
        // Relaxed: a hint; `checkout` decides.
        self.cell(handle)
            .is_some_and(|c| c.state.load(Ordering::Relaxed) == LIVE)
    }

    /// Takes the object of `handle` out and frees its slot.
    pub fn remove(&self, handle: usize) -> Result<T, Miss> {
        let v = self.checkout(handle)?;
        self.release(handle);
        Ok(v)
    }

    /// Takes the object of `handle` out, leaving its slot busy.
    #[inline]
    pub fn checkout(&self, handle: usize) -> Result<T, Miss> {
        let cell = self.cell(handle).ok_or(Miss::Unknown)?;
        // SYNC POINT: Acquire pairs with the Release store that made the
        // cell live (the value's writes are visible); one thread wins.
        match cell
            .state
            .compare_exchange(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        {
            // SAFETY: the cell was live (initialised) and is now ours.
            Ok(_) => Ok(unsafe { (*cell.value.get()).assume_init_read() }),
            Err(BUSY) => Err(Miss::Busy),
            Err(_) => Err(Miss::Unknown),
        }
    }

    /// Takes out the objects of every handle (`None` where `skip` says so),
    /// or none of them if one is not live (its position and why).
    pub fn checkout_many(
        &self,
        handles: &[usize],
        skip: impl Fn(usize) -> bool,
    ) -> Result<Vec<Option<T>>, (usize, Miss)> {
        let mut out = Vec::with_capacity(handles.len());
        for (pos, &h) in handles.iter().enumerate() {
            if skip(h) {
                out.push(None);
                continue;
            }
            match self.checkout(h) {
                Ok(v) => out.push(Some(v)),
                Err(m) => {
                    for (p, v) in out.into_iter().enumerate() {
                        if let Some(v) = v {
                            self.checkin(handles[p], v);
                        }
                    }
                    return Err((pos, m));
                }
            }
        }
        Ok(out)
    }

    /// Marks the objects of `handles` busy where they are (`None` for the
    /// handles `skip` names), or none of them if one is not live: its
    /// position and why.
    pub fn lock_many(
        &self,
        handles: &[usize],
        skip: impl Fn(usize) -> bool,
    ) -> Result<Vec<Option<Busy<'_, T>>>, (usize, Miss)> {
        // On failure, dropping `out` puts back what was marked.
        let mut out = Vec::with_capacity(handles.len());
        for (pos, &h) in handles.iter().enumerate() {
            if skip(h) {
                out.push(None);
                continue;
            }
            out.push(Some(self.lock(h).map_err(|m| (pos, m))?));
        }
        Ok(out)
    }

    /// Marks the object of `handle` busy where it is.
    #[inline]
    pub fn lock(&self, handle: usize) -> Result<Busy<'_, T>, Miss> {
        let cell = self.cell(handle).ok_or(Miss::Unknown)?;
        // SYNC POINT: Acquire, as in `checkout`.
        match cell
            .state
            .compare_exchange(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(Busy {
                table: self,
                cell,
                index: (handle & INDEX_MASK) - FIRST,
            }),
            Err(BUSY) => Err(Miss::Busy),
            Err(_) => Err(Miss::Unknown),
        }
    }

    /// Puts a checked-out object back.
    pub fn checkin(&self, handle: usize, value: T) {
        if let Some(cell) = self.cell(handle) {
            // SAFETY: the cell is busy and ours (we checked it out).
            unsafe { (*cell.value.get()).write(value) };
            // SYNC POINT: Release, as in `insert`.
            cell.state.store(LIVE, Ordering::Release);
        }
    }

    /// Frees the slot of a checked-out object that is finished.
    #[inline]
    pub fn release(&self, handle: usize) {
        if let Some(cell) = self.cell(handle) {
            // Relaxed: the value was moved out already, by this thread;
            // the free list's Release exchange publishes the FREE state
            // before the index can be popped again.
            if cell.state.load(Ordering::Relaxed) == BUSY {
                cell.state.store(FREE, Ordering::Relaxed);
                self.give_index((handle & INDEX_MASK) - FIRST);
            }
        }
    }

    /// Puts objects back and frees the slots of finished ones.
    pub fn settle(&self, back: impl IntoIterator<Item = (usize, T)>, done: &[usize]) {
        for (h, v) in back {
            self.checkin(h, v);
        }
        for &h in done {
            self.release(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_table_handles_and_states() {
        static T: SlotTable<String> = SlotTable::new(KIND_REQUEST);
        let a = T.insert("a".into()).unwrap();
        let b = T.insert("b".into()).unwrap();
        assert!(a >= FIRST && b <= i32::MAX as usize && a >> 24 == KIND_REQUEST && a != b);
        assert!(T.is_live(a) && !T.is_live(a ^ (1 << 24)) && !T.is_live(0x180));
        assert_eq!(T.checkout(a).as_deref(), Ok("a"));
        assert_eq!(T.checkout(a), Err(Miss::Busy));
        T.checkin(a, "a2".into());
        assert_eq!(
            T.checkout_many(&[a, b, 0x180], |h| h == 0x180)
                .map(|v| v.len()),
            Ok(3)
        );
        T.settle([(a, "a3".to_string())], &[b]);
        assert_eq!(T.checkout(b), Err(Miss::Unknown));
        assert_eq!(T.remove(a).as_deref(), Ok("a3"));
        assert_eq!(T.remove(a), Err(Miss::Unknown));
        // Freed indices are reused; many threads insert and remove at once.
        let c = T.insert("c".into()).unwrap();
        assert!(c == a || c == b);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..5000 {
                        mine.push(T.insert(format!("{t}-{i}")).unwrap());
                        if i % 3 == 0 {
                            let h = mine.swap_remove(0);
                            assert!(T.remove(h).unwrap().starts_with(&format!("{t}-")));
                        }
                    }
                    for h in mine {
                        assert!(T.remove(h).unwrap().starts_with(&format!("{t}-")));
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert_eq!(T.remove(c).as_deref(), Ok("c"));
    }

    #[test]
    fn slot_table_marks_in_place() {
        static T: SlotTable<String> = SlotTable::new(KIND_REQUEST);
        let a = T.insert("a".into()).unwrap();
        let b = T.insert("b".into()).unwrap();
        let null = |h: usize| h == 0x180;
        // All or nothing: an unknown or a repeated handle marks none.
        assert_eq!(
            T.lock_many(&[a, 7 << 24], null).err(),
            Some((1, Miss::Unknown))
        );
        assert_eq!(T.lock_many(&[a, b, a], null).err(), Some((2, Miss::Busy)));
        assert!(T.is_live(a) && T.is_live(b));
        let mut busy = T.lock_many(&[a, 0x180, b], null).unwrap();
        assert!(busy[1].is_none());
        assert_eq!(T.checkout(a), Err(Miss::Busy));
        busy[0].as_mut().unwrap().get_mut().push('!');
        // Taken out: the slot is free; dropped: live again, as changed.
        assert_eq!(busy[2].take().unwrap().take(), "b");
        drop(busy);
        assert_eq!(T.checkout(b), Err(Miss::Unknown));
        assert_eq!(T.remove(a).as_deref(), Ok("a!"));
    }

    #[test]
    fn slot_table_fills_in_place() {
        static T: SlotTable<String> = SlotTable::new(KIND_REQUEST);
        let fill = |v: &'static str| {
            let slot = T.vacant().unwrap();
            // SAFETY: the slot's storage, written once, then filled.
            unsafe {
                slot.as_ptr().write(v.to_string());
                slot.fill()
            }
        };
        let a = fill("a");
        assert_eq!(T.checkout(a).as_deref(), Ok("a"));
        T.checkin(a, "a".into());
        // A slot dropped unfilled is free again: the next one takes it.
        drop(T.vacant().unwrap());
        let b = fill("b");
        let c = T.insert("c".into()).unwrap();
        assert!(a != b && b != c && a != c);
        assert_eq!(T.next.load(Ordering::Relaxed), 3);
        for (h, v) in [(a, "a"), (b, "b"), (c, "c")] {
            assert_eq!(T.remove(h).as_deref(), Ok(v));
        }
    }

    #[test]
    fn slot_table_frees_a_batch_at_once() {
        static T: SlotTable<String> = SlotTable::new(KIND_REQUEST);
        let hs: Vec<usize> = (0..8).map(|i| T.insert(i.to_string()).unwrap()).collect();
        // Many threads take windows of their own and free each window as
        // one batch, while the others pop and push.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..2000 {
                        let mine: Vec<usize> = (0..(1 + round % 9))
                            .map(|i| T.insert(format!("{t}-{i}")).unwrap())
                            .collect();
                        let busy = T.lock_many(&mine, |_| false).unwrap();
                        let mut batch = T.free_batch();
                        for (i, b) in busy.into_iter().enumerate() {
                            assert_eq!(b.unwrap().take_into(&mut batch), format!("{t}-{i}"));
                        }
                        // Free, and nobody else's until the batch is pushed.
                        assert!(mine.iter().all(|&h| !T.is_live(h)));
                        drop(batch);
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        // Every freed slot is on the free list once: the next inserts
        // reuse them, distinct, before any new index is used.
        let used = T.next.load(Ordering::Relaxed);
        let again: Vec<usize> = (0..used - 8)
            .map(|_| T.insert(String::new()).unwrap())
            .collect();
        assert_eq!(T.next.load(Ordering::Relaxed), used);
        let mut all: Vec<usize> = again.iter().chain(&hs).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), used);
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(T.remove(h), Ok(i.to_string()));
        }
    }

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
        // settle: back in, or freed, in one go.
        let c = t.insert(4).unwrap();
        assert_eq!(
            t.checkout_many(&[b, c], |_| false),
            Ok(vec![Some(2), Some(4)])
        );
        t.settle([(b, 7)], &[c]);
        assert_eq!((t.get(b), t.get(c)), (Ok(7), Err(Miss::Unknown)));
    }
}
