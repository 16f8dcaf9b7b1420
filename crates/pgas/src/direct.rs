//! The direct path: a global pointer resolved to an address with no lock
//! and no hash map, so a put is a copy and an atomic a hardware atomic on
//! another unit's memory, mapped at the same address here. A unit on
//! another node has no address here: the direct path says so and the
//! caller takes the segment's MPI window instead.
//!
//! * The **segment table** is a fixed array of [`SLOTS`] slots indexed by
//!   segment id. A slot's state word says whether its segment is live or
//!   freed (read with Acquire); its translation table ([`Fast`]: per
//!   absolute unit the address, size and team rank of the unit's part) is
//!   written once, before the segment is published, and never changes: ids
//!   are never reused, so a slot never holds a second segment.
//! * A freed segment's memory returns to the node heap. An access that
//!   found the segment live must end before the memory goes, even if
//!   another thread of the unit frees the segment meanwhile: each thread
//!   has a **hazard word** naming the slot it is using. The reader stores
//!   it and then loads the state; the freer stores the state and then
//!   reads every hazard word, waiting while one names its slot (Dekker's
//!   argument: one of the two sees the other's store). The reader's side
//!   of the fence is moved into the freer with
//!   `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` — a full barrier on
//!   every CPU running a thread of this process — so an access costs two
//!   plain stores and a load; where `membarrier` is unavailable both sides
//!   use a SeqCst fence.
//!
//! An access holds one hazard at a time ([`Pin`]); the calls that pin do
//! not call out while pinned.

use crate::error::{Error, Result};
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Segment ids are 16 bits: one slot each.
pub(crate) const SLOTS: usize = 1 << 16;

/// A slot whose segment is live.
const LIVE: u8 = 1;
/// A slot whose segment was freed (for good: ids are never reused).
const FREED: u8 = 2;

/// Where one unit's part of a segment is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    /// The address of its first byte (valid in every unit of the node).
    pub(crate) base: u64,
    /// Its bytes.
    pub(crate) size: u64,
    /// The unit's rank in the segment's team; [`NOT_MEMBER`] if it is not
    /// in the team.
    pub(crate) rank: u32,
    /// `size + 1` for a unit on this node, 0 for one elsewhere (whose
    /// `base` is no address here): an access ending at or past it leaves
    /// the direct path, so a unit of another node costs the fast path
    /// nothing but the bound it checks anyway.
    pub(crate) limit: u64,
}

impl Part {
    /// A unit on this node.
    pub(crate) fn here(base: u64, size: u64, rank: u32) -> Part {
        Part {
            base,
            size,
            rank,
            limit: size.saturating_add(1),
        }
    }

    /// A unit on another node.
    pub(crate) fn elsewhere(size: u64, rank: u32) -> Part {
        Part {
            base: 0,
            size,
            rank,
            limit: 0,
        }
    }
}

/// [`Part::rank`] of a unit outside the segment's team.
pub(crate) const NOT_MEMBER: u32 = u32::MAX;

/// A segment's translation table, indexed by absolute unit id.
#[derive(Debug)]
pub(crate) struct Fast {
    /// The index of the segment's team in the team table.
    pub(crate) index: u16,
    /// The team's id (for messages).
    pub(crate) team_id: u64,
    /// Whether the team spans nodes (then every atomic takes MPI's way,
    /// so that all of them on one element are atomic with each other).
    pub(crate) spans: bool,
    /// Per absolute unit.
    pub(crate) parts: Box<[Part]>,
}

#[derive(Debug, Default)]
struct Slot {
    /// 0 (never used), [`LIVE`] or [`FREED`].
    state: AtomicU8,
    /// Set once, before the state becomes [`LIVE`].
    fast: OnceLock<Box<Fast>>,
}

/// The segment table of one context.
pub(crate) struct Table {
    slots: Box<[Slot]>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: a report only.
        let live: Vec<usize> = (0..SLOTS)
            .filter(|&i| self.slots[i].state.load(Ordering::Relaxed) == LIVE)
            .collect();
        f.debug_struct("Table").field("live", &live).finish()
    }
}

/// One thread's hazard word: the address of the slot it is using, 0 for
/// none.
#[derive(Debug)]
struct Hazard {
    slot: AtomicUsize,
    /// Whether a live thread owns this word (words of exited threads are
    /// handed to new ones).
    taken: AtomicBool,
}

/// Every hazard word of the process (a word is never freed: the freer
/// reads them without holding a thread's lifetime).
static HAZARDS: Mutex<Vec<&'static Hazard>> = Mutex::new(Vec::new());

fn hazards() -> std::sync::MutexGuard<'static, Vec<&'static Hazard>> {
    HAZARDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A hazard word for the calling thread: a free one, or a new one.
fn claim() -> &'static Hazard {
    let mut list = hazards();
    for &h in list.iter() {
        // Acquire: pairs with the Release in `Mine::drop`: the previous
        // owner's last access is over before this thread uses the word.
        if h.taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return h;
        }
    }
    let h: &'static Hazard = Box::leak(Box::new(Hazard {
        slot: AtomicUsize::new(0),
        taken: AtomicBool::new(true),
    }));
    list.push(h);
    h
}

/// The calling thread's hazard word, given back when the thread ends.
struct Mine(&'static Hazard);

impl Drop for Mine {
    fn drop(&mut self) {
        // Release: the thread's accesses are over before another thread
        // takes the word (its Acquire in `claim`).
        self.0.slot.store(0, Ordering::Release);
        self.0.taken.store(false, Ordering::Release);
    }
}

thread_local! {
    static MINE: Mine = Mine(claim());
}

#[inline]
fn hazard() -> &'static Hazard {
    // A thread that calls in while its thread-locals are being destroyed
    // takes a word of its own for good (it is never given back).
    MINE.try_with(|m| m.0).unwrap_or_else(|_| claim())
}

/// Whether `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` works in this
/// process: 0 not asked yet, 1 yes, 2 no.
static ASYM: AtomicU8 = AtomicU8::new(0);

#[cfg(target_os = "linux")]
fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier(2) with a command and no flags reads and writes
    // no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_int) }
}

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (linux/membarrier.h).
#[cfg(target_os = "linux")]
const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
/// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED`.
#[cfg(target_os = "linux")]
const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Registers for the asymmetric fence once per process (before any slot
/// is published, so every access and every free agree on the mode).
fn init_fences() {
    // Relaxed: the value only chooses a fence; the state it guards is
    // published later with Release (`Table::publish`).
    if ASYM.load(Ordering::Relaxed) != 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    let ok = membarrier(REGISTER_PRIVATE_EXPEDITED) == 0;
    #[cfg(not(target_os = "linux"))]
    let ok = false;
    // Relaxed: as above; a second thread racing here computes the same.
    ASYM.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
}

/// The reader's side of the fence between its hazard store and its state
/// load.
#[inline(always)]
fn light_fence() {
    // Relaxed: set by `init_fences` in `Table::new`, before the context
    // that owns the table can reach another thread (spawning the thread or
    // handing it the context orders the store before this load).
    if ASYM.load(Ordering::Relaxed) == 1 {
        // The CPU-side barrier is the freer's membarrier; the compiler
        // must still keep the store before the load.
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The freer's side: a barrier on every CPU that runs a thread of this
/// process (or a SeqCst fence, matching the readers' own fences).
fn heavy_fence() -> Result<()> {
    fence(Ordering::SeqCst);
    // Relaxed: as in `light_fence`.
    if ASYM.load(Ordering::Relaxed) == 1 {
        #[cfg(target_os = "linux")]
        if membarrier(PRIVATE_EXPEDITED) != 0 {
            return Err(Error::Runtime(hmpi_core::Error::Internal(format!(
                "membarrier failed after registering: {}",
                std::io::Error::last_os_error()
            ))));
        }
    }
    Ok(())
}

/// A segment in use by this thread: its translation table stays, and its
/// memory stays allocated, until the pin is dropped.
pub(crate) struct Pin<'a> {
    hz: &'static Hazard,
    pub(crate) fast: &'a Fast,
}

impl Drop for Pin<'_> {
    #[inline]
    fn drop(&mut self) {
        // SYNC POINT: Release pairs with the freer's Acquire load of the
        // word: the access happens before the segment's memory is freed.
        self.hz.slot.store(0, Ordering::Release);
    }
}

impl Table {
    /// An empty table (and the process's fence mode chosen).
    pub(crate) fn new() -> Table {
        init_fences();
        Table {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }

    /// Makes segment `id` live with its translation table.
    pub(crate) fn publish(&self, id: u16, fast: Fast) -> Result<()> {
        let slot = &self.slots[usize::from(id)];
        if slot.fast.set(Box::new(fast)).is_err() {
            return Err(Error::Runtime(hmpi_core::Error::Internal(format!(
                "segment id {id} was used twice"
            ))));
        }
        // SYNC POINT: Release pairs with the Acquire load in `pin`: the
        // translation table is written before a reader sees the segment
        // live.
        slot.state.store(LIVE, Ordering::Release);
        Ok(())
    }

    /// Marks segment `id` freed and waits until no thread of this process
    /// is in an access to it; afterwards its memory may go.
    pub(crate) fn retire(&self, id: u16) -> Result<()> {
        let slot = &self.slots[usize::from(id)];
        // SeqCst: the store is ordered before the hazard loads below by
        // the barrier (Dekker's argument, see the module docs).
        slot.state.store(FREED, Ordering::SeqCst);
        heavy_fence()?;
        let me = slot as *const Slot as usize;
        let list: Vec<&'static Hazard> = hazards().clone();
        for h in list {
            // SYNC POINT: Acquire pairs with `Pin::drop`'s Release: the
            // access is over before the memory is freed.
            while h.slot.load(Ordering::Acquire) == me {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Whether segment `id` was freed (for the error of a failed access).
    pub(crate) fn is_freed(&self, id: u16) -> bool {
        // Acquire: as in `pin`; an error message only.
        self.slots[usize::from(id)].state.load(Ordering::Acquire) == FREED
    }

    /// The translation table of live segment `id` for an access by this
    /// thread; `None` if the segment is not live. The caller must not pin
    /// again before dropping the pin.
    #[inline]
    pub(crate) fn pin(&self, id: u16) -> Option<Pin<'_>> {
        let slot = &self.slots[usize::from(id)];
        let hz = hazard();
        // Relaxed: ordered before the state load by `light_fence` (and the
        // freer's barrier), which is all Dekker's argument needs.
        hz.slot
            .store(slot as *const Slot as usize, Ordering::Relaxed);
        light_fence();
        // SYNC POINT: Acquire pairs with `publish`'s Release: the
        // translation table is complete.
        if slot.state.load(Ordering::Acquire) != LIVE {
            // Release: as in `Pin::drop`.
            hz.slot.store(0, Ordering::Release);
            return None;
        }
        match slot.fast.get() {
            Some(fast) => Some(Pin { hz, fast }),
            None => {
                // Release: as in `Pin::drop` (live implies published, so
                // this is not reached).
                hz.slot.store(0, Ordering::Release);
                None
            }
        }
    }
}

/// Resolves an access of `len` bytes at `offset` of `unit`'s part of a
/// pinned segment to its address, with the checks of the slow path: a
/// unit of the segment's team, inside its part, the pointer naming the
/// segment's team. [`Error::Elsewhere`] for a unit on another node (the
/// access otherwise allowed).
#[inline]
pub(crate) fn address(
    f: &Fast,
    segment: u16,
    flags: u16,
    unit: u32,
    offset: u64,
    len: u64,
) -> Result<*mut u8> {
    if flags != f.index {
        return Err(crate::runtime::wrong_team(segment, f.index, flags));
    }
    let part = match f.parts.get(unit as usize) {
        Some(p) if p.rank != NOT_MEMBER => p,
        _ => return Err(crate::runtime::not_in_team(unit, f.team_id, segment)),
    };
    if offset.checked_add(len).is_none_or(|end| end >= part.limit) {
        return Err(refused(part, segment, unit, offset, len));
    }
    Ok((part.base + offset) as usize as *mut u8)
}

/// Why an access left the direct path: past its part, or to a unit of
/// another node.
#[cold]
fn refused(part: &Part, segment: u16, unit: u32, offset: u64, len: u64) -> Error {
    if offset.checked_add(len).is_none_or(|end| end > part.size) {
        return Error::Offset {
            segment,
            unit,
            offset,
            len,
            size: part.size,
        };
    }
    Error::Elsewhere { unit }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn one_part(base: u64) -> Fast {
        Fast {
            index: 0,
            team_id: 0,
            spans: false,
            parts: vec![Part::here(base, 8, 0)].into_boxed_slice(),
        }
    }

    #[test]
    fn slots_go_live_and_freed_once() {
        let t = Table::new();
        assert!(t.pin(3).is_none());
        assert!(!t.is_freed(3));
        t.publish(3, one_part(64)).unwrap();
        {
            let p = t.pin(3).unwrap();
            assert_eq!(address(p.fast, 3, 0, 0, 4, 4).unwrap() as usize, 68);
            assert!(matches!(
                address(p.fast, 3, 0, 0, 4, 5),
                Err(Error::Offset { .. })
            ));
            assert!(matches!(
                address(p.fast, 3, 0, 1, 0, 1),
                Err(Error::Unit { .. })
            ));
            assert!(address(p.fast, 3, 1, 0, 0, 1).is_err());
        }
        t.retire(3).unwrap();
        assert!(t.pin(3).is_none());
        assert!(t.is_freed(3));
        assert!(t.publish(3, one_part(64)).is_err());
    }

    /// A free waits for an access in flight on another thread, and no
    /// access starts after it.
    #[test]
    fn retire_waits_for_a_pinned_access() {
        let t = Arc::new(Table::new());
        t.publish(7, one_part(0)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let (t, done) = (t.clone(), done.clone());
            std::thread::spawn(move || {
                let p = t.pin(7).unwrap();
                tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(50));
                // Relaxed: the freer's Acquire on the hazard word orders
                // it (the pin's Release drop comes after).
                done.store(true, Ordering::Relaxed);
                drop(p);
            })
        };
        rx.recv().unwrap();
        t.retire(7).unwrap();
        // Relaxed: `retire` synchronised with the pin's drop.
        assert!(
            done.load(Ordering::Relaxed),
            "retire returned during an access"
        );
        reader.join().unwrap();
        assert!(t.pin(7).is_none());
    }
}
