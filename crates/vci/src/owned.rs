//! Ownership passing in the engine: a heap block moves from one rank to
//! another with a message, and nothing is copied.
//!
//! [`Endpoint::isend_owned`] gives an [`OwnedBlock`] (a block of the
//! process's global allocator) to a peer: when the block is in the node heap
//! the envelope carries its address (protocol `Owned`, see
//! [`crate::envelope`]), otherwise the engine first moves it into the heap.
//! The send is complete at once: the block is no longer the sender's.
//!
//! [`Endpoint::irecv_owned`] / [`Endpoint::recv_owned`] /
//! [`Message::recv_owned`] receive a message as a block of the receiver's
//! global allocator, aligned as asked. A given block is kept as it is (the
//! pointer moves) when the receiver's global allocator is the node heap
//! (`shmheap::ShmHeap`, so it can free the block) and the block is aligned
//! enough; otherwise — or for a message from a plain send — the payload is
//! copied into a fresh block. A plain receive of a given block copies the
//! payload out and frees the block. Both kinds of message share the queues
//! and MPI's ordering.
//!
//! # Example
//! ```
//! use std::alloc::Layout;
//! use vci::{Endpoint, OwnedBlock};
//!
//! let ep = Endpoint::new().unwrap(); // a world of one
//! let v: Vec<u64> = vec![1, 2, 3];
//! let block = OwnedBlock::from_vec(v);
//! // SAFETY: `block` owns the vector's allocation, which we give up.
//! unsafe { ep.isend_owned(block, 0, 9, 0) }.unwrap().wait().unwrap();
//! let (got, st) = ep.recv_owned(8, 0, 9, 0).unwrap();
//! assert_eq!((st.tag, got.len), (9, 24));
//! // SAFETY: a block of the global allocator with room for 3 u64s.
//! let v = unsafe { got.into_vec::<u64>() }.unwrap();
//! assert_eq!(v, [1, 2, 3]);
//! ```

use crate::deliver::delivered;
use crate::endpoint::Endpoint;
use crate::envelope::{Envelope, Header, OwnedInfo, Protocol};
use crate::error::{Error, Result};
use crate::fastbox::{FbHead, OwnedSlot, SlotData};
use crate::matching::{Key, Target};
use crate::message::Message;
use crate::request::{Request, Status, StatusError};
use crate::stats::{bump, bump_locked};
use crate::vci::{Vci, VciShared};
use crate::{PROC_NULL, TAG_UB};
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicU64;

/// A heap block whose ownership travels with a message.
///
/// `ptr` was allocated by this process's global allocator with `layout`
/// (`std::alloc::dealloc(ptr, layout)` frees it), or, when `layout.size()`
/// is 0, is dangling and aligned (nothing to free).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedBlock {
    /// The first byte.
    pub ptr: NonNull<u8>,
    /// The allocation's layout.
    pub layout: Layout,
    /// Payload bytes, at most `layout.size()`.
    pub len: usize,
    /// 32 bytes that travel with the message, not interpreted by the engine
    /// (a type fingerprint, an element count, …); all zero for a message
    /// from a plain send.
    pub meta: [u64; 4],
    /// Whether the sender gave a block ([`Endpoint::isend_owned`]), as
    /// opposed to a plain send whose payload was copied into a fresh block.
    pub given: bool,
}

// SAFETY: a block is plain memory owned by whoever holds the `OwnedBlock`;
// it may be used and freed from any thread.
unsafe impl Send for OwnedBlock {}
// SAFETY: `&OwnedBlock` only reads its fields.
unsafe impl Sync for OwnedBlock {}

impl OwnedBlock {
    /// A dangling pointer aligned to `align` (a power of two).
    pub(crate) fn dangling(align: usize) -> NonNull<u8> {
        NonNull::new(ptr::without_provenance_mut(align)).expect("alignments are non-zero")
    }

    /// A fresh block of the global allocator for `len` bytes aligned to
    /// `align` (dangling if `len` is 0); `None` if the allocator has none
    /// (or `align` is not a power of two).
    pub(crate) fn fresh(
        len: usize,
        align: usize,
        meta: [u64; 4],
        given: bool,
    ) -> Option<OwnedBlock> {
        let layout = Layout::from_size_align(len, align).ok()?;
        let ptr = if len == 0 {
            OwnedBlock::dangling(align)
        } else {
            // SAFETY: `layout` has a non-zero size.
            NonNull::new(unsafe { std::alloc::alloc(layout) })?
        };
        Some(OwnedBlock {
            ptr,
            layout,
            len,
            meta,
            given,
        })
    }

    /// The block of a vector's allocation (its length as payload).
    pub fn from_vec<T>(v: Vec<T>) -> OwnedBlock {
        let mut v = std::mem::ManuallyDrop::new(v);
        let size = std::mem::size_of::<T>() * v.capacity();
        let layout = Layout::from_size_align(size, std::mem::align_of::<T>())
            .expect("a vector's allocation has a valid layout");
        OwnedBlock {
            ptr: NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("a vector's pointer is non-null"),
            layout,
            len: std::mem::size_of::<T>() * v.len(),
            meta: [0; 4],
            given: false,
        }
    }

    /// The block as a vector of `len / size_of::<T>()` elements and the
    /// capacity the layout holds; `None` (the block is dropped unchanged —
    /// call [`OwnedBlock::free`] to free it) if `T` does not fit the
    /// layout: another alignment, a size that is not a multiple of `T`'s,
    /// or a zero-sized `T`.
    ///
    /// # Safety
    ///
    /// The block is owned by the caller and allocated by the global
    /// allocator (or has size 0), and its first `len` bytes are valid `T`s.
    pub unsafe fn into_vec<T>(self) -> Option<Vec<T>> {
        let size = std::mem::size_of::<T>();
        if size == 0
            || self.layout.align() != std::mem::align_of::<T>()
            || self.layout.size() % size != 0
            || self.len % size != 0
        {
            return None;
        }
        let ptr = if self.layout.size() == 0 {
            NonNull::<T>::dangling().as_ptr()
        } else {
            self.ptr.as_ptr().cast::<T>()
        };
        // SAFETY: the global allocator allocated `ptr` with the layout of
        // `cap` T's (same alignment, size a multiple of T's), the first
        // `len` are initialised (caller's contract), and the caller owns it.
        Some(unsafe { Vec::from_raw_parts(ptr, self.len / size, self.layout.size() / size) })
    }

    /// Frees the block.
    ///
    /// # Safety
    ///
    /// The caller owns the block, nobody uses it afterwards.
    pub unsafe fn free(self) {
        if self.layout.size() > 0 {
            // SAFETY: allocated by the global allocator with this layout
            // (the type's contract), owned by the caller.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }

    fn check(&self) -> Result<()> {
        if self.len > self.layout.size() {
            return Err(Error::Block {
                reason: "its length exceeds its layout's size",
            });
        }
        if self.ptr.as_ptr() as usize & (self.layout.align() - 1) != 0 {
            return Err(Error::Block {
                reason: "its address is not aligned as its layout says",
            });
        }
        Ok(())
    }
}

fn check_align(align: usize) -> Result<()> {
    if align.is_power_of_two() {
        Ok(())
    } else {
        Err(Error::Block {
            reason: "a receive's alignment must be a power of two",
        })
    }
}

impl Endpoint {
    /// Gives `block` to `dest` with `tag` in communicator context `context`.
    /// The request is complete at once: the block is the receiver's (or,
    /// for [`PROC_NULL`], freed). If the block is in the node heap its
    /// address travels and nothing is copied; otherwise the engine moves it
    /// into the node heap first (and frees the original).
    ///
    /// On error (a bad rank or tag, an exhausted heap) the block is still
    /// the caller's, untouched.
    ///
    /// # Safety
    /// The caller owns `block`, allocated by the global allocator with
    /// `block.layout` (or of size 0), and gives it up on success: nobody
    /// touches it afterwards.
    pub unsafe fn isend_owned(
        &self,
        block: OwnedBlock,
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'_>> {
        // SAFETY: the caller's contract.
        let (v, st) = unsafe { self.give_block(block, dest, tag, context) }?;
        Ok(Request::complete(self, v, st))
    }

    /// Gives `block` as [`Endpoint::isend_owned`] does, without a request
    /// (the give is complete when this returns).
    ///
    /// # Safety
    /// As for [`Endpoint::isend_owned`].
    #[inline(always)]
    pub unsafe fn give(&self, block: OwnedBlock, dest: i32, tag: i32, context: u32) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.give_block(block, dest, tag, context) }.map(drop)
    }

    /// The give of [`Endpoint::isend_owned`]: the VCI it went through and
    /// its status.
    ///
    /// # Safety
    /// As for [`Endpoint::isend_owned`].
    #[inline(always)]
    unsafe fn give_block(
        &self,
        block: OwnedBlock,
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<(usize, Status)> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { tag });
        }
        block.check()?;
        let v = self.vci_of(context);
        if dest == PROC_NULL {
            // SAFETY: ours to free (caller's contract).
            unsafe { block.free() };
            return Ok((v, Status::empty()));
        }
        let d = self.check_rank(dest)?;
        let (size, p) = (block.layout.size(), block.ptr.as_ptr());
        let in_heap = size == 0 || {
            // SAFETY: `size - 1` is inside the allocation.
            let last = unsafe { p.add(size - 1) };
            shmheap::is_shared(p) && shmheap::is_shared(last)
        };
        let moved = if in_heap {
            None
        } else {
            Some(ShmHeap.try_alloc(block.layout)?)
        };
        let data = match (size, moved) {
            (0, _) => 0,
            (_, Some(m)) => m.as_ptr() as u64,
            (_, None) => p as u64,
        };
        let info = OwnedInfo {
            size: size as u64,
            align: block.layout.align() as u64,
            meta: block.meta,
        };
        if let Some(m) = moved {
            // SAFETY: the original holds `len` bytes (checked against its
            // layout); `m` is a fresh block of the same layout.
            unsafe { ptr::copy_nonoverlapping(p, m.as_ptr(), block.len) };
        }
        // The block's record fits a fast-box slot: no envelope.
        // The message is on its way: the original of a moved block goes.
        // (It was counted under its lane lock, fast box or queue.)
        let sent = || {
            if moved.is_some() {
                // SAFETY: the original is ours (caller's contract), copied
                // into the node heap above.
                unsafe { block.free() };
            }
            let st = Status {
                source: dest,
                tag,
                count: block.len as u64,
                error: None,
                cancelled: false,
            };
            (v, st)
        };
        if let Ok(len) = u32::try_from(block.len) {
            let (kind, words, n) = OwnedSlot { addr: data, info }.encode();
            let head = FbHead {
                tag,
                context,
                len,
                kind,
            };
            if self.try_slot(d, v, head, SlotData::Words(&words, n)) {
                return Ok(sent());
            }
        }
        let h = Header {
            source: self.rank() as u32,
            tag,
            context,
            protocol: Protocol::Owned,
            len: block.len as u64,
            data,
            reply: self.bell() as *const VciShared as u64,
            flags: 0,
        };
        let env = Envelope::create(h, &info.to_bytes()).inspect_err(|_| {
            if let Some(m) = moved {
                // SAFETY: allocated above with this layout, used by nothing.
                unsafe { ShmHeap.dealloc(m.as_ptr(), block.layout) };
            }
        })?;
        // SAFETY: a fresh envelope in the node heap, not queued; the
        // receiver frees it (and takes or frees the block).
        unsafe { self.post(d, v, env, Protocol::Owned, false) };
        Ok(sent())
    }

    /// Starts an ownership receive from `source` (a rank, `ANY_SOURCE` or
    /// `PROC_NULL`) with `tag` (or `ANY_TAG`) in context `context`. When it
    /// matches, `*out` becomes `Some(block)`: a block of this process's
    /// global allocator, aligned to `align` (a power of two) — the sender's
    /// own block if it gave one in the node heap, suitably aligned, and this
    /// process's global allocator is the node heap; otherwise a fresh block
    /// (`layout` = `len` bytes aligned to `align`) holding a copy. `*out`
    /// stays `None` for `PROC_NULL` and if the allocation failed
    /// ([`Error::Alloc`] from the request).
    ///
    /// # Safety
    /// As for [`Endpoint::irecv`]: the request must be completed or
    /// dropped, never leaked.
    pub unsafe fn irecv_owned<'a>(
        &'a self,
        out: &'a mut Option<OwnedBlock>,
        align: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Request<'a>> {
        check_align(align)?;
        *out = None;
        let target = Target::Owned {
            out: out as *mut Option<OwnedBlock>,
            align,
        };
        // SAFETY: `out` is borrowed mutably for 'a by the request, which
        // collects the receive's slot before it ends (waiting on drop).
        unsafe { self.post_recv(target, source, tag, context) }
    }

    /// Receives a message as an owned block and waits (see
    /// [`Endpoint::irecv_owned`]). For `PROC_NULL` the block is empty.
    #[inline(always)]
    pub fn recv_owned(
        &self,
        align: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<(OwnedBlock, Status)> {
        let mut out = None;
        let st = self.recv_owned_into(&mut out, align, source, tag, context)?;
        Ok((out.unwrap_or_else(|| empty_block(align)), st))
    }

    /// [`Endpoint::recv_owned`] into `out` (`None` for `PROC_NULL` and on
    /// error): the block stays where the engine wrote it, so a caller that
    /// reads a few of its fields copies nothing (see docs/performance.md,
    /// "Store forwarding").
    #[inline(always)]
    pub fn recv_owned_into(
        &self,
        out: &mut Option<OwnedBlock>,
        align: usize,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Result<Status> {
        check_align(align)?;
        *out = None;
        let target = Target::Owned {
            out: out as *mut Option<OwnedBlock>,
            align,
        };
        let mut st = Status::empty();
        // SAFETY: `out` is borrowed for the call, which delivers (if at
        // all) before it returns.
        unsafe { self.recv_blocking(target, source, tag, context, &mut st) }?;
        st.into_result()
    }
}

/// The empty block of a receive from `PROC_NULL`.
fn empty_block(align: usize) -> OwnedBlock {
    OwnedBlock::fresh(0, align, [0; 4], false).expect("an empty block needs no memory")
}

impl Message<'_> {
    /// Receives the matched message as an owned block (as
    /// [`Endpoint::recv_owned`] does).
    pub fn recv_owned(mut self, align: usize) -> Result<(OwnedBlock, Status)> {
        check_align(align)?;
        let mut out = None;
        let target = Target::Owned {
            out: &mut out as *mut Option<OwnedBlock>,
            align,
        };
        // SAFETY: `out` lives until after the delivery, which happens in
        // this call.
        let st = unsafe { self.deliver_to(target) };
        let st = st.into_result()?;
        Ok((out.unwrap_or_else(|| empty_block(align)), st))
    }
}

/// A given block as a receive finds it: in an owned envelope or fast-box
/// slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Given {
    /// The block's address in the node heap.
    pub(crate) addr: *mut u8,
    /// Its layout and metadata.
    pub(crate) info: OwnedInfo,
    /// The payload's length.
    pub(crate) len: usize,
}

impl Given {
    /// Takes the block out of an owned envelope and frees the envelope.
    ///
    /// # Safety
    ///
    /// `env` is an owned envelope this VCI popped and has not let go of.
    pub(crate) unsafe fn from_envelope(env: NonNull<Envelope>) -> Given {
        // SAFETY: valid until destroyed below (caller's contract).
        let (addr, len) = unsafe { (env.as_ref().data() as *mut u8, env.as_ref().len() as usize) };
        // SAFETY: an owned envelope (caller's contract).
        let info = unsafe { OwnedInfo::read(env) };
        // SAFETY: an owned envelope is the receiver's to free (never
        // synchronous); `destroy` frees the envelope, not the block.
        unsafe { Envelope::destroy(env) };
        Given { addr, info, len }
    }
}

/// Starts moving the cache line at `p` into this core's cache, ready to be
/// written (a hint: it never faults, whatever `p` is).
#[inline(always)]
fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` changes no register, flag or memory and never
    // faults, whatever the address; processors without it execute its
    // encoding (0F 0D /1) as a no-op.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Vci {
    /// A fresh block of `len` bytes aligned to `align` filled by `fill`
    /// (which returns the delivery's status), or, if there is no memory,
    /// `fill` with an empty buffer (to discard the message) and an
    /// allocation error.
    pub(crate) fn fresh_block(
        &self,
        len: usize,
        align: usize,
        meta: [u64; 4],
        given: bool,
        fill: impl FnOnce(*mut u8) -> Status,
    ) -> (Option<OwnedBlock>, Status) {
        match OwnedBlock::fresh(len, align, meta, given) {
            Some(block) => {
                bump(&self.stats.owned_copied);
                (Some(block), fill(block.ptr.as_ptr()))
            }
            None => {
                let mut st = fill(NonNull::dangling().as_ptr());
                st.count = 0;
                st.error = Some(StatusError::Alloc { bytes: len as u64 });
                (None, st)
            }
        }
    }

    /// Delivers a given block (from an owned envelope or fast-box slot): an
    /// ownership receive keeps it as it is when this process's allocator
    /// can free it and it is aligned enough, else gets a copy in a fresh
    /// block; a plain receive gets a copy of its payload. A block not kept
    /// is freed.
    ///
    /// # Safety
    ///
    /// The given block is ours (the sender gave it up); the target is
    /// valid (see [`Vci::deliver`]); with `locked`, the caller holds the
    /// VCI lock (the statistics go to [`SlotCounters`]).
    #[inline(always)]
    pub(crate) unsafe fn deliver_given(
        &self,
        key: Key,
        g: Given,
        target: Target,
        locked: bool,
    ) -> Status {
        // See docs/performance.md, "Fast-box slots" (given blocks).
        prefetch_for_write(g.addr);
        let count = |shared: &AtomicU64, slot: &AtomicU64| {
            if locked {
                bump_locked(slot);
            } else {
                bump(shared);
            }
        };
        count(
            &self.stats.received[Protocol::Owned as usize - 1],
            &self.stats.slot.owned,
        );
        let layout = g.info.layout();
        let free_block = || {
            if layout.size() > 0 {
                // SAFETY: the given block is ours (caller's contract), in the
                // node heap, and `ShmHeap` frees any rank's block there.
                unsafe { ShmHeap.dealloc(g.addr, layout) };
            }
        };
        let copy = |buf: *mut u8, cap: usize| {
            let n = g.len.min(cap);
            if n > 0 {
                // SAFETY: the block holds `len >= n` bytes; `buf` is valid
                // for `cap >= n` bytes and is not the block.
                unsafe { ptr::copy_nonoverlapping(g.addr.cast_const(), buf, n) };
            }
            delivered(key, g.len, n)
        };
        match target {
            Target::Buffer { buf, cap } => {
                let st = copy(buf, cap);
                free_block();
                st
            }
            Target::Owned { out, align } => {
                let (block, st) = if layout.size() > 0
                    && self.keep_given
                    && g.addr as usize & (align - 1) == 0
                {
                    count(&self.stats.owned_in_place, &self.stats.slot.owned_in_place);
                    let block = OwnedBlock {
                        ptr: NonNull::new(g.addr).expect("a given block of size > 0 is not null"),
                        layout,
                        len: g.len,
                        meta: g.info.meta,
                        given: true,
                    };
                    (Some(block), delivered(key, g.len, g.len))
                } else {
                    let r = self.fresh_block(g.len, align, g.info.meta, true, |b| copy(b, g.len));
                    free_block();
                    r
                };
                // SAFETY: `out` is valid for a write (caller's contract).
                unsafe { out.write(block) };
                st
            }
        }
    }
}
