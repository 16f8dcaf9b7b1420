//! The untyped core that the C interface wraps: `OPI_Alloc` = [`alloc`],
//! `OPI_Free` = [`free`], `OPI_Give` / `OPI_Igive` = [`give`] / [`igive`],
//! `OPI_Take` / `OPI_Itake` = [`take`] / [`itake`]. Blocks are
//! [`OwnedBlock`]s of raw bytes (kind RAW, see [`crate::givable`]):
//! the typed `take` accepts them as plain values, and a raw take accepts
//! any given block whose value owns no further heap blocks, or a plain
//! send.
//!
//! A C caller only keeps the pointer; [`block_at`] finds the rest of a
//! node-heap block from it.
//!
//! # Example
//! ```
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let mut b = opi::raw::alloc(100).unwrap();
//! // SAFETY: the block has room for 100 bytes and is ours.
//! unsafe { b.ptr.as_ptr().write_bytes(7, 100) };
//! // SAFETY: `b` came from `alloc` and is given up here.
//! unsafe { opi::raw::give(b, &world, 0, 5, 0) }.unwrap();
//! let (t, st) = opi::raw::take(&world, 0, 5).unwrap();
//! assert_eq!((t.len, st.tag()), (100, 5));
//! // SAFETY: `t` came from `take`; freed once.
//! unsafe { opi::raw::free(t) };
//! ```

use crate::givable::{meta, origin, Origin, KIND_RAW};
use crate::p2p::{no_block, recv_block_into};
pub use hmpi_core::raw::OwnedBlock;
use hmpi_core::raw::{Request, Traffic};
use hmpi_core::{Error, Result, SimpleCommunicator, Status};
use std::alloc::Layout;
use std::ptr::NonNull;

/// Alignment of raw blocks (a cache line; enough for any C type).
pub const RAW_ALIGN: usize = 64;

/// A pool buffer for `len` bytes (`OPI_Alloc`): `len` is the payload a
/// give sends (set [`OwnedBlock::len`] to send less).
pub fn alloc(len: usize) -> Result<OwnedBlock> {
    let (ptr, layout) = crate::pool::alloc(len, RAW_ALIGN)?;
    Ok(OwnedBlock {
        ptr,
        layout,
        len,
        meta: meta(KIND_RAW, false, 0, len as u64),
        given: false,
    })
}

/// Returns a block to the pool (`OPI_Free`).
///
/// # Safety
/// `b` came from [`alloc`], [`take`], [`itake`] or [`block_at`], is owned
/// by the caller and not used afterwards.
pub unsafe fn free(b: OwnedBlock) {
    // SAFETY: a block of the global allocator with its layout (caller).
    unsafe { crate::pool::free(b.ptr, b.layout) }
}

/// The block a C caller knows only by its address: a node-heap block from
/// [`alloc`] or [`take`] in a program whose global allocator is the node
/// heap. `None` if `ptr` is not the start of a node-heap block.
///
/// The layout's size is the block's usable size, which the node heap
/// accepts when freeing (it frees by address); `len` is set to it too.
///
/// # Safety
/// If `ptr` is in the node heap it must be the first byte of a live block.
pub unsafe fn block_at(ptr: *mut u8) -> Option<OwnedBlock> {
    let size = shmheap::usable_size(ptr)?;
    let align = 1usize << (ptr as usize).trailing_zeros().min(12);
    Some(OwnedBlock {
        ptr: NonNull::new(ptr)?,
        layout: Layout::from_size_align(size, align).ok()?,
        len: size,
        meta: meta(KIND_RAW, false, 0, size as u64),
        given: false,
    })
}

/// The block of a raw give: its metadata set (`code` travels in it).
fn given(b: OwnedBlock, code: u64) -> OwnedBlock {
    crate::pool::prepare();
    OwnedBlock {
        meta: meta(KIND_RAW, false, code, b.len as u64),
        given: true,
        ..b
    }
}

/// Gives `b.len` bytes of `b` to communicator rank `dest` with `tag`
/// (`OPI_Give`); `code` travels in the metadata (the C interface's
/// datatype). On error the block is still the caller's.
///
/// # Safety
/// `b` is a block of the global allocator with its layout (or of size 0),
/// owned by the caller, given up on success.
pub unsafe fn give(
    b: OwnedBlock,
    comm: &SimpleCommunicator,
    dest: i32,
    tag: i32,
    code: u64,
) -> Result<()> {
    // SAFETY: our caller gives the block up (contract above).
    unsafe { hmpi_core::raw::give(comm, Traffic::PointToPoint, given(b, code), dest, tag) }
}

/// [`give`] as a request (`OPI_Igive`), complete already.
///
/// # Safety
/// As for [`give`].
pub unsafe fn igive(
    b: OwnedBlock,
    comm: &SimpleCommunicator,
    dest: i32,
    tag: i32,
    code: u64,
) -> Result<Request<'static>> {
    // SAFETY: our caller gives the block up (contract above).
    unsafe { hmpi_core::raw::igive(comm, Traffic::PointToPoint, given(b, code), dest, tag) }
}

/// Whether a raw take may keep `b`: bytes, or a given value that owns no
/// further blocks.
pub fn is_flat(b: &OwnedBlock) -> bool {
    !matches!(origin(b), Origin::Given { deep: true, .. })
}

/// Takes a message from `source` (or `ANY_SOURCE`) with `tag` (or
/// `ANY_TAG`) as a raw block (`OPI_Take`), aligned to [`RAW_ALIGN`] (a
/// given block that is less aligned is copied). A given value that owns
/// further heap blocks is refused ([`Error::Type`]; its outer block is
/// freed).
pub fn take(comm: &SimpleCommunicator, source: i32, tag: i32) -> Result<(OwnedBlock, Status)> {
    let mut out = None;
    let st = take_into(comm, source, tag, &mut out)?;
    match out {
        Some(b) => Ok((b, st)),
        None => Err(no_block()),
    }
}

/// [`take`] into `out`, where the block stays as the engine wrote it (set
/// only on success): a caller that reads a few of its fields copies
/// nothing. (Moved out in a `Result`, the block was copied in wide loads
/// right after the narrower stores that wrote it, which store forwarding
/// cannot serve: a stall on every take.)
#[inline]
pub fn take_into(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
    out: &mut Option<OwnedBlock>,
) -> Result<Status> {
    *out = None;
    let mut st = hmpi_core::raw::Status::empty();
    recv_block_into(
        comm,
        source,
        tag,
        Traffic::PointToPoint,
        RAW_ALIGN,
        out,
        &mut st,
    )?;
    if let Some(b) = out.take_if(|b| !is_flat(b)) {
        // SAFETY: ours, not used again.
        unsafe { b.free() };
        return Err(Error::Type {
            reason: "a raw take of a value that owns heap blocks (take it with its type)".into(),
        });
    }
    Ok(Status::from_engine(st, None))
}

/// Starts a raw take into `*out` (`OPI_Itake`); check the block with
/// [`is_flat`] once the request completed.
///
/// # Safety
/// As for [`hmpi_core::raw::irecv_owned`]: the request must be completed
/// or dropped, never leaked.
pub unsafe fn itake<'a>(
    out: &'a mut Option<OwnedBlock>,
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
) -> Result<Request<'a>> {
    // SAFETY: the caller's contract.
    unsafe { hmpi_core::raw::irecv_owned(comm, out, RAW_ALIGN, source, tag) }
}
