//! Helpers for loop fusion (the papers' ch. 5): once ranks share memory,
//! the packing loop of one rank and the unpacking loop of another can be
//! fused into one loop that moves data straight from the sender's
//! structures into the receiver's, synchronised by flags and counters in
//! the node heap instead of messages.
//!
//! * [`node_rank`]: the node-local rank of a communicator rank (`None` for
//!   a rank on another node), an index into node-shared arrays;
//! * [`NodeShared<T>`] / [`NodeArray<T>`]: a value (an array) in the node
//!   heap, created by one rank and visible to all members of a
//!   communicator (the papers' `GlobalData`); its address is broadcast
//!   once, and the last handle dropped frees it;
//! * [`Signal`]: set / clear / wait for either state;
//! * [`Counter`]: add (returns the previous value, as `CounterAdd`) and
//!   wait until greater than a value (`CounterWaitGT`).
//!
//! Waiting spins, then yields, then sleeps on a futex (bounded sleeps), so
//! more ranks than cores still progress. What lives in node-shared memory
//! must be valid in every rank: [`NodeSafe`] types (atomics, numbers,
//! signals, counters, arrays and tuples of them).
//!
//! # Example
//! ```
//! use opi::fusion::{node_rank, Counter, NodeArray, Signal};
//! use opi::prelude::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! // One (signal, counter) per rank of the node, made by rank 0.
//! let shared = NodeArray::new(&world, 0, world.size() as usize, |_| {
//!     (Signal::new(), Counter::new())
//! })
//! .unwrap();
//! let me = node_rank(&world, world.rank()).unwrap() as usize;
//! shared[me].1.add(1);
//! shared[me].0.set();
//! shared[me].0.wait(true);
//! assert_eq!(shared[me].1.wait_until_greater(0), 1);
//! ```

use crate::collective::TAG_NODE_SHARED;
use hmpi_core::raw::{self, Traffic};
use hmpi_core::traits::Communicator;
use hmpi_core::{Error, Result};
use shmheap::sync::futex::{wake_all, Backoff};
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The node-local rank of communicator rank `rank` (an index into
/// node-shared arrays), or `None` if it is not a rank of this node or not
/// a rank of the communicator (`HMPI_Comm_node_rank`). On one node, the
/// node-local rank is the world rank.
pub fn node_rank<C: Communicator>(comm: &C, rank: i32) -> Option<u32> {
    let raw::Route::Local(w) = raw::route(comm.as_simple(), rank).ok()? else {
        return None;
    };
    let ranks = shmheap::Segment::current()?.ranks();
    u32::try_from(w).ok().filter(|&w| w < ranks)
}

/// The number of ranks on this node.
pub fn node_size() -> u32 {
    shmheap::Segment::current().map_or(1, |s| s.ranks())
}

/// Types whose values may live in node-shared memory and be used from
/// every rank at once: `Sync`, no pointer to private memory, no code
/// pointer, nothing that needs its own process to drop it.
///
/// # Safety
/// An implementation promises the above for every value of the type.
pub unsafe trait NodeSafe: Sync + Send + 'static {}

macro_rules! node_safe {
    ($($t:ty),*) => {$(
        // SAFETY: plain numbers and atomics: no pointers, `Sync`.
        unsafe impl NodeSafe for $t {}
    )*};
}

node_safe!(
    u8,
    u16,
    u32,
    u64,
    usize,
    i8,
    i16,
    i32,
    i64,
    isize,
    f32,
    f64,
    bool,
    std::sync::atomic::AtomicU8,
    std::sync::atomic::AtomicU16,
    std::sync::atomic::AtomicU32,
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicUsize,
    std::sync::atomic::AtomicI8,
    std::sync::atomic::AtomicI16,
    std::sync::atomic::AtomicI32,
    std::sync::atomic::AtomicI64,
    std::sync::atomic::AtomicIsize,
    std::sync::atomic::AtomicBool,
    Signal,
    Counter
);

// SAFETY: elements side by side, each node-safe.
unsafe impl<T: NodeSafe, const N: usize> NodeSafe for [T; N] {}
// SAFETY: as for arrays.
unsafe impl<A: NodeSafe, B: NodeSafe> NodeSafe for (A, B) {}
// SAFETY: as for arrays.
unsafe impl<A: NodeSafe, B: NodeSafe, C: NodeSafe> NodeSafe for (A, B, C) {}
// SAFETY: as for arrays.
unsafe impl<A: NodeSafe, B: NodeSafe, C: NodeSafe, D: NodeSafe> NodeSafe for (A, B, C, D) {}

/// A flag that ranks set, clear and wait on (`SignalSet`, `SignalClear`,
/// `SignalWait`). `#[repr(C)]`, one atomic word; all-zero is clear.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Signal {
    /// Bit 0: the value; bit 1: a waiter may sleep on the word.
    word: AtomicU32,
}

const SIG_SET: u32 = 1;
const SIG_SLEEPERS: u32 = 2;

impl Signal {
    /// A clear signal.
    pub const fn new() -> Self {
        Signal {
            word: AtomicU32::new(0),
        }
    }

    fn store(&self, v: u32) {
        // SYNC POINT: Release pairs with the Acquire loads in `is_set` and
        // `wait`: what this thread wrote before is visible to whoever sees
        // the new state.
        if self.word.swap(v, Ordering::Release) & SIG_SLEEPERS != 0 {
            wake_all(&self.word);
        }
    }

    /// Sets the signal and wakes its waiters.
    pub fn set(&self) {
        self.store(SIG_SET);
    }

    /// Clears the signal and wakes its waiters.
    pub fn clear(&self) {
        self.store(0);
    }

    /// Whether the signal is set.
    pub fn is_set(&self) -> bool {
        // SYNC POINT: Acquire pairs with the Release swap in `store`.
        self.word.load(Ordering::Acquire) & SIG_SET != 0
    }

    /// Waits until the signal is `set` (true) or clear (false).
    pub fn wait(&self, set: bool) {
        let want = |w: u32| (w & SIG_SET != 0) == set;
        let mut backoff = Backoff::new();
        loop {
            // SYNC POINT: Acquire pairs with the Release swap in `store`.
            let w = self.word.load(Ordering::Acquire);
            if want(w) {
                return;
            }
            if !backoff.is_sleeping() {
                backoff.snooze();
                continue;
            }
            // Mark the word before sleeping on it, so a store wakes us. A
            // store that came first replaced the word: then the mark's
            // old value shows the new state and we look again.
            // SYNC POINT: Acquire pairs with the Release swap in `store`
            // (this RMW may read the stored state).
            let old = self.word.fetch_or(SIG_SLEEPERS, Ordering::Acquire);
            if want(old) {
                return;
            }
            backoff.snooze_on(&self.word, old | SIG_SLEEPERS);
        }
    }
}

/// A counter that ranks add to and wait on (`CounterAdd`,
/// `CounterWaitGT`). `#[repr(C)]`; all-zero is 0. Built on
/// `shmheap::sync::flag::Counter` (sleeping waiters are woken only when
/// there are any).
#[repr(transparent)]
#[derive(Debug, Default)]
pub struct Counter(shmheap::sync::flag::Counter);

impl Counter {
    /// A counter at 0.
    pub const fn new() -> Self {
        Counter(shmheap::sync::flag::Counter::new())
    }

    /// Adds `n` (wrapping) and returns the value before (fetch-and-add).
    /// What this thread wrote before is visible to a waiter that sees the
    /// new value.
    pub fn add(&self, n: u64) -> u64 {
        self.0.add(n).wrapping_sub(n)
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.get()
    }

    /// Waits until the value is greater than `n`; returns the value seen.
    pub fn wait_until_greater(&self, n: u64) -> u64 {
        self.0.wait_until_greater(n)
    }

    /// Waits until the value is at least `n`; returns the value seen.
    pub fn wait_until_at_least(&self, n: u64) -> u64 {
        self.0.wait_until_at_least(n)
    }
}

/// The header in front of a node-shared array.
#[repr(C)]
struct Header {
    /// Handles still alive, over every rank; the last one frees.
    refs: AtomicU64,
    /// Elements.
    len: u64,
    /// `fingerprint`-like check: size and alignment of the element type.
    elem: u64,
}

/// Layout of header + `len` elements, and the elements' offset.
fn array_layout<T>(len: usize) -> Result<(Layout, usize)> {
    Layout::new::<Header>()
        .extend(Layout::array::<T>(len).map_err(|_| too_long(len))?)
        .map(|(l, off)| (l.pad_to_align(), off))
        .map_err(|_| too_long(len))
}

fn too_long(len: usize) -> Error {
    Error::Count {
        bytes: len as u64,
        element_size: 1,
        expected: None,
    }
}

fn elem_code<T>() -> u64 {
    (std::mem::size_of::<T>() as u64) << 8 | std::mem::align_of::<T>().trailing_zeros() as u64
}

/// An array in the node heap shared by the members of a communicator: made
/// by one rank, readable (and, through atomics, writable) by all. Each
/// member holds a handle; the last handle dropped, in whichever rank, drops
/// the elements and frees the memory.
pub struct NodeArray<T: NodeSafe> {
    header: NonNull<Header>,
    data: NonNull<T>,
    len: usize,
}

// SAFETY: the elements are NodeSafe (Sync + Send), the header is atomic.
unsafe impl<T: NodeSafe> Send for NodeArray<T> {}
// SAFETY: as above: `&NodeArray` gives `&[T]` of Sync T's.
unsafe impl<T: NodeSafe> Sync for NodeArray<T> {}

impl<T: NodeSafe> NodeArray<T> {
    /// Creates the array (collective over `comm`): `root` allocates `len`
    /// elements in its arena, initialises element `i` with `init(i)` and
    /// sends the address to every other member (on the internal context);
    /// the others receive it (their `init` is not called). Needs the node
    /// heap (an initialized runtime), whatever the global allocator.
    pub fn new<C: Communicator>(
        comm: &C,
        root: i32,
        len: usize,
        mut init: impl FnMut(usize) -> T,
    ) -> Result<Self> {
        let c = comm.as_simple();
        let root_world = match raw::route(c, root)? {
            raw::Route::Local(w) => w,
            _ => {
                return Err(Error::Rank {
                    rank: root,
                    size: c.size(),
                })
            }
        };
        let (layout, off) = array_layout::<T>(len)?;
        if c.rank() == root {
            let base = ShmHeap.try_alloc(layout)?;
            let header = base.cast::<Header>();
            // SAFETY: a fresh block of `layout`: header at 0, `len` T's at
            // `off`, properly aligned (Layout::extend).
            unsafe {
                header.as_ptr().write(Header {
                    refs: AtomicU64::new(c.size() as u64),
                    len: len as u64,
                    elem: elem_code::<T>(),
                });
                let data = base.as_ptr().add(off).cast::<T>();
                for i in 0..len {
                    data.add(i).write(init(i));
                }
            }
            let addr = (base.as_ptr() as u64).to_ne_bytes();
            for r in 0..c.size() {
                if r != root {
                    // The send's Release publication orders the
                    // initialisation above before the receiver's use.
                    raw::send_on(c, Traffic::Internal, &addr, r, TAG_NODE_SHARED)?;
                }
            }
            // SAFETY: initialised above.
            Ok(unsafe { Self::from_base(base, off, len) })
        } else {
            let mut addr = [0u8; 8];
            let st = raw::recv_on(c, Traffic::Internal, &mut addr, root, TAG_NODE_SHARED)?
                .into_result()?;
            let a = u64::from_ne_bytes(addr);
            let ok = st.count == 8
                && a % layout.align() as u64 == 0
                && shmheap::owner_of(a as *const u8) == u32::try_from(root_world).ok();
            let base = NonNull::new(a as *mut u8).filter(|_| ok).ok_or_else(|| {
                Error::Internal(format!(
                    "node-shared array: rank {root} sent {a:#x}, not a block of its arena"
                ))
            })?;
            // SAFETY: the root's initialised block (checked to be in its
            // arena and aligned): its header is readable.
            let h = unsafe { &*base.as_ptr().cast::<Header>() };
            if h.len != len as u64 || h.elem != elem_code::<T>() {
                // This rank's handle stays uncounted down: the block is
                // never freed (a leak, not a free with the wrong layout).
                return Err(Error::Count {
                    bytes: h.len,
                    element_size: std::mem::size_of::<T>(),
                    expected: Some(len as u64),
                });
            }
            // SAFETY: as above, with the length and element type checked;
            // the root counted this handle in `refs`.
            Ok(unsafe { Self::from_base(base, off, len) })
        }
    }

    /// # Safety
    /// `base` is an initialised node-shared block of header + `len` T's at
    /// `off`, with a reference counted for the new handle.
    unsafe fn from_base(base: NonNull<u8>, off: usize, len: usize) -> Self {
        NodeArray {
            header: base.cast(),
            // SAFETY: inside the block (caller's contract).
            data: unsafe { NonNull::new_unchecked(base.as_ptr().add(off).cast::<T>()) },
            len,
        }
    }

    /// The address of the first element (the same in every rank).
    pub fn as_ptr(&self) -> *const T {
        self.data.as_ptr()
    }
}

impl<T: NodeSafe> Deref for NodeArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements, alive while any handle is
        // (this one holds a reference); only shared references exist.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }
}

impl<T: NodeSafe> Drop for NodeArray<T> {
    fn drop(&mut self) {
        // SAFETY: the header lives while any handle does.
        let h = unsafe { self.header.as_ref() };
        // SYNC POINT: AcqRel: Release orders this rank's uses of the
        // elements before the count drops; the last one's Acquire sees
        // every other rank's uses before it drops and frees.
        if h.refs.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let Ok((layout, _)) = array_layout::<T>(self.len) else {
            return;
        };
        // SAFETY: the last handle: nobody else uses the elements or the
        // block, which the node heap allocated with `layout` (ShmHeap frees
        // any rank's block, routed to its arena).
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.data.as_ptr(),
                self.len,
            ));
            ShmHeap.dealloc(self.header.as_ptr().cast(), layout);
        }
    }
}

impl<T: NodeSafe + std::fmt::Debug> std::fmt::Debug for NodeArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One value in the node heap shared by the members of a communicator (a
/// [`NodeArray`] of one): `Deref` to `T`.
pub struct NodeShared<T: NodeSafe>(NodeArray<T>);

impl<T: NodeSafe> NodeShared<T> {
    /// Creates the value (collective): `root` runs `init` and publishes the
    /// value; every member gets a handle.
    pub fn new<C: Communicator>(comm: &C, root: i32, init: impl FnOnce() -> T) -> Result<Self> {
        let mut init = Some(init);
        let a = NodeArray::new(comm, root, 1, |_| match init.take() {
            Some(f) => f(),
            None => unreachable!("one element, initialised once"),
        })?;
        Ok(NodeShared(a))
    }
}

impl<T: NodeSafe> Deref for NodeShared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0[0]
    }
}

impl<T: NodeSafe + std::fmt::Debug> std::fmt::Debug for NodeShared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("NodeShared").field(&**self).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn signal_set_clear_wait_across_threads() {
        let s = Arc::new((Signal::new(), Signal::new()));
        let t = {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    s.0.wait(true);
                    s.0.clear();
                    s.1.set();
                }
            })
        };
        for _ in 0..200 {
            s.0.set();
            s.1.wait(true);
            s.1.clear();
            s.0.wait(false);
        }
        t.join().unwrap();
        assert!(!s.0.is_set());
    }

    #[test]
    fn counter_returns_previous_value() {
        let c = Counter::new();
        assert_eq!(c.add(3), 0);
        assert_eq!(c.add(2), 3);
        assert_eq!(c.get(), 5);
        assert_eq!(c.wait_until_greater(4), 5);
    }

    #[test]
    fn layouts() {
        let (l, off) = array_layout::<u64>(3).unwrap();
        assert_eq!(off, 24);
        assert_eq!(l.size(), 48);
        let (l, off) = array_layout::<[u8; 64]>(0).unwrap();
        assert_eq!((l.size(), off), (24, 24));
    }
}
