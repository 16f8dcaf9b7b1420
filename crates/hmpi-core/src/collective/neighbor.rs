//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`,
//! `MPI_Neighbor_alltoall(v,w)`, blocking, nonblocking and persistent):
//! every process exchanges blocks with the neighbours its communicator's
//! topology gives it ([`crate::topology::Topology::neighborhood`]).
//!
//! They are single-copy on the shared heap. Each process describes its
//! send blocks in a table in its arena of the node heap — for each block
//! the address of its bytes and their length: the user's buffer itself
//! when it is in the heap and its datatype is dense, else a packed copy
//! beside the table — and publishes the table's address with the
//! engine's allgather. Each process then reads its in-neighbours' blocks
//! straight from where they are into its receive buffer (unpacking them
//! when its datatype is not dense), and a barrier of the engine keeps
//! every table and send buffer in place until all readers are done.
//! The pairing of receive block `m` with the send block of its source is
//! the topology's (by direction for a grid, so a periodic dimension of
//! one or two processes, where both neighbours are the same process,
//! still gets MPI's order; by order of the edges for graphs). A
//! neighbour that is `PROC_NULL` leaves its receive block untouched.
//!
//! Both steps are the engine's collectives on the communicator, taken
//! (their epochs) when the call is made, so nonblocking neighbourhood
//! collectives keep their order with every other collective.
//!
//! # Example
//! ```
//! use hmpi_core::topology::TopologyCommunicator;
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let ring = world
//!     .create_cartesian_communicator(&[world.size()], &[true], false)
//!     .unwrap()
//!     .unwrap();
//! let mine = [ring.rank(); 2];
//! let mut got = [-1; 4]; // from below, from above
//! ring.neighbor_all_gather_into(&mine[..], &mut got[..]).unwrap();
//! let n = ring.size();
//! assert_eq!(got[0], (ring.rank() + n - 1) % n);
//! assert_eq!(got[2], (ring.rank() + 1) % n);
//! ```

use super::raw::{exec, local, CollRequest, Mode};
use super::typed::{elements, elements_mut, in_scope, Partition, PartitionMut};
use crate::comm::{Communicator, SimpleCommunicator};
use crate::datatype::{Buffer, BufferMut, Datatype};
use crate::error::{Error, Result};
use crate::request::{CollectiveRequest, Scope};
use crate::topology::{Neighborhood, PROC_NULL};
use std::alloc::{GlobalAlloc, Layout};
use std::borrow::Borrow;

/// One block of a neighbourhood collective: `count` elements of `dt` at
/// byte displacement `disp` from the buffer's address.
#[derive(Debug, Clone, Copy)]
pub struct Block<'d> {
    /// Elements of `dt`.
    pub count: usize,
    /// Byte displacement from the buffer.
    pub disp: isize,
    /// Their datatype.
    pub dt: &'d Datatype,
}

/// Memory in this rank's arena of the node heap, freed when dropped.
struct HeapBuf {
    ptr: usize,
    layout: Option<Layout>,
}

impl HeapBuf {
    fn new(len: usize) -> Result<HeapBuf> {
        if len == 0 {
            return Ok(HeapBuf {
                ptr: 0,
                layout: None,
            });
        }
        let l = Layout::from_size_align(len, 64).map_err(|e| Error::Internal(e.to_string()))?;
        let ptr = shmheap::ShmHeap::new().try_alloc(l)?.as_ptr() as usize;
        Ok(HeapBuf {
            ptr,
            layout: Some(l),
        })
    }
}

impl Drop for HeapBuf {
    fn drop(&mut self) {
        if let Some(l) = self.layout {
            // SAFETY: allocated by `ShmHeap` with this layout in `new`.
            unsafe { shmheap::ShmHeap::new().dealloc(self.ptr as *mut u8, l) };
        }
    }
}

/// This rank's send side: a table of `(address, length)` per send block
/// (two `u64`s each) at the start of `buf`, packed copies after it.
struct Table {
    buf: HeapBuf,
}

/// Builds the table of the send blocks.
///
/// # Safety
/// `send` holds every block the arguments describe.
unsafe fn table(nb: &Neighborhood, send: *const u8, blocks: &[Block<'_>]) -> Result<Table> {
    let n = blocks.len();
    let head = 16 * n;
    let mut entries = Vec::with_capacity(n);
    let mut staged = 0usize;
    for (k, b) in blocks.iter().enumerate() {
        let len = b.dt.packed_size(b.count)?;
        let at = send.wrapping_offset(b.disp);
        let direct = match b.dt.dense_offset() {
            _ if len == 0 || nb.destinations[k] == PROC_NULL => Some(0),
            Some(off) if shmheap::is_shared(at.wrapping_offset(off)) => {
                Some(at.wrapping_offset(off) as usize)
            }
            _ => None,
        };
        match direct {
            Some(a) => entries.push((a, len, None)),
            None => {
                let place = head + staged;
                staged = staged
                    .checked_add(len.next_multiple_of(8))
                    .ok_or_else(|| Error::Arg {
                        reason: "neighbourhood collective too large".into(),
                    })?;
                entries.push((0, len, Some(place)));
            }
        }
    }
    let total = head.checked_add(staged).ok_or_else(|| Error::Arg {
        reason: "neighbourhood collective too large".into(),
    })?;
    let buf = HeapBuf::new(total)?;
    for (k, (addr, len, place)) in entries.into_iter().enumerate() {
        let addr = match place {
            None => addr,
            Some(p) => {
                let dst = buf.ptr + p;
                // SAFETY: `dst` holds `len` bytes of the new buffer; the
                // block is readable (caller).
                unsafe {
                    let out = std::slice::from_raw_parts_mut(dst as *mut u8, len);
                    let b = &blocks[k];
                    b.dt.pack_raw(send.wrapping_offset(b.disp), b.count, out)?;
                }
                dst
            }
        };
        // SAFETY: entry `k` of the table is in the buffer (`head` bytes).
        unsafe {
            let e = (buf.ptr + 16 * k) as *mut u64;
            e.write(addr as u64);
            e.add(1).write(len as u64);
        }
    }
    Ok(Table { buf })
}

/// The receive side, as plain data the future can own.
struct Landing {
    recv: usize,
    blocks: Vec<(usize, isize, Datatype)>,
}

impl Landing {
    /// Copies receive block `m` from the table of its source (at
    /// `table`), unless the source is `PROC_NULL`.
    ///
    /// # Safety
    /// The tables are live (their owners are inside the collective, before
    /// its barrier) and describe readable blocks; the receive buffer holds
    /// every block.
    unsafe fn fill(&self, nb: &Neighborhood, tables: &[u64]) -> Result<()> {
        let mut bad = None;
        for (m, &s) in nb.sources.iter().enumerate() {
            if s == PROC_NULL {
                continue;
            }
            let want = self.len(m)?;
            let entry = (tables[s as usize] as usize + 16 * nb.pairing[m]) as *const u64;
            // SAFETY: the source's table has an entry per send block, and
            // `pairing[m]` is one of them (the topology's).
            let (addr, len) = unsafe { (entry.read() as usize, entry.add(1).read() as usize) };
            if len != want {
                bad.get_or_insert(Error::Arg {
                    reason: format!(
                        "neighbourhood collective: rank {s} sends {len} bytes where this rank \
                         expects {want} (counts or datatypes differ)"
                    ),
                });
                continue;
            }
            if len == 0 {
                // An empty block's address may be null.
                continue;
            }
            // SAFETY: the source's block holds `len` bytes until the
            // barrier; the receive buffer holds block `m` (caller).
            unsafe { self.put(m, std::slice::from_raw_parts(addr as *const u8, len))? };
        }
        bad.map_or(Ok(()), Err)
    }

    /// The packed length of receive block `m`.
    fn len(&self, m: usize) -> Result<usize> {
        let (count, _, dt) = &self.blocks[m];
        dt.packed_size(*count)
    }

    /// Writes `src` (the packed bytes of receive block `m`, as long as
    /// [`Landing::len`] says) into block `m` of the receive buffer.
    ///
    /// # Safety
    /// The receive buffer holds block `m`.
    unsafe fn put(&self, m: usize, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let (count, disp, dt) = &self.blocks[m];
        let dst = (self.recv as *mut u8).wrapping_offset(*disp);
        // SAFETY: the receive block holds `count` elements (caller), whose
        // packed bytes `src` is.
        unsafe {
            match dt.dense_offset() {
                Some(off) => std::ptr::copy(src.as_ptr(), dst.wrapping_offset(off), src.len()),
                None => {
                    dt.unpack_raw(src, dst, *count)?;
                }
            }
        }
        Ok(())
    }
}

/// The send blocks as packed bytes, one vector per block (empty for a
/// block to `PROC_NULL`): what a neighbourhood collective sends across
/// nodes.
///
/// # Safety
/// `send` holds every block the arguments describe.
#[cfg(feature = "mpi")]
unsafe fn packed(nb: &Neighborhood, send: *const u8, blocks: &[Block<'_>]) -> Result<Vec<Vec<u8>>> {
    blocks
        .iter()
        .zip(&nb.destinations)
        .map(|(b, &d)| {
            if d == PROC_NULL {
                return Ok(Vec::new());
            }
            let mut out = vec![0u8; b.dt.packed_size(b.count)?];
            // SAFETY: the block is readable (caller) and `out` holds its
            // packed bytes.
            unsafe {
                b.dt.pack_raw(send.wrapping_offset(b.disp), b.count, &mut out)?
            };
            Ok(out)
        })
        .collect()
}

/// [`neighbor_alltoallw`] on a communicator that spans nodes: each block
/// is one message to its neighbour on the communicator's duplicate
/// (`multinode::neighbor`), blocking or on the communicator's progress
/// thread.
///
/// # Safety
/// As [`neighbor_alltoallw`].
#[cfg(feature = "mpi")]
unsafe fn across_nodes(
    comm: &SimpleCommunicator,
    s: &crate::multinode::SpanningCommunicator,
    nb: Neighborhood,
    send: *const u8,
    sblocks: &[Block<'_>],
    landing: Landing,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    // SAFETY: the caller's guarantee for the send blocks.
    let blocks = unsafe { packed(&nb, send, sblocks)? };
    let want: Vec<usize> = (0..nb.sources.len())
        .map(|m| landing.len(m))
        .collect::<Result<_>>()?;
    let run = move |c: &crate::multinode::SpanningCommunicator| -> Result<()> {
        let got =
            c.neighbor_exchange(&nb.destinations, &blocks, &nb.sources, &nb.pairing, &want)?;
        for (m, g) in got.iter().enumerate() {
            // SAFETY: the receive buffer holds every block until the
            // collective completes (caller); this runs before that.
            unsafe { landing.put(m, g)? };
        }
        Ok(())
    };
    match mode {
        Mode::Block => run(s.internal()?).map(|()| None),
        Mode::Start => crate::multinode::typed::start(comm, s, run),
    }
}

/// The neighbourhood of this process in `comm`'s topology;
/// [`Error::Topology`] without one.
fn neighborhood(comm: &SimpleCommunicator) -> Result<Neighborhood> {
    comm.topology()
        .ok_or_else(|| Error::Topology {
            reason: "a neighbourhood collective on a communicator without a topology".into(),
        })?
        .neighborhood(comm.rank())
}

/// The neighbourhood of this process: how many send and receive blocks a
/// neighbourhood collective on `comm` takes (out-degree, in-degree).
pub fn degrees(comm: &SimpleCommunicator) -> Result<(usize, usize)> {
    let nb = neighborhood(comm)?;
    Ok((nb.destinations.len(), nb.sources.len()))
}

/// `MPI_Neighbor_alltoallw` and, through it, every neighbourhood
/// collective: send block `k` (`sblocks[k]` of `send`) goes to
/// out-neighbour `k`; receive block `m` (`rblocks[m]` of `recv`) comes
/// from in-neighbour `m`. [`Error::Topology`] on a communicator without a
/// topology, [`Error::Arg`] for a number of blocks that is not the
/// degree or a block whose length differs from its sender's.
///
/// # Safety
/// The buffers hold the blocks the arguments describe (readable /
/// writable); with [`Mode::Start`] they stay valid until the request
/// finishes.
pub unsafe fn neighbor_alltoallw(
    comm: &SimpleCommunicator,
    send: *const u8,
    sblocks: &[Block<'_>],
    recv: *mut u8,
    rblocks: &[Block<'_>],
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let nb = neighborhood(comm)?;
    for (what, got, want) in [
        ("send", sblocks.len(), nb.destinations.len()),
        ("receive", rblocks.len(), nb.sources.len()),
    ] {
        if got != want {
            return Err(Error::Arg {
                reason: format!(
                    "neighbourhood collective: {got} {what} blocks for {want} neighbours"
                ),
            });
        }
    }
    let landing = Landing {
        recv: recv as usize,
        blocks: rblocks
            .iter()
            .map(|b| (b.count, b.disp, b.dt.clone()))
            .collect(),
    };
    #[cfg(feature = "mpi")]
    if let Some(s) = comm.spanning() {
        // SAFETY: the caller's guarantee.
        return unsafe { across_nodes(comm, s, nb, send, sblocks, landing, mode) };
    }
    // SAFETY: the caller's guarantee for the send blocks.
    let t = unsafe { table(&nb, send, sblocks)? };
    let Some(c) = comm.coll()? else {
        // One member: every neighbour is this process (or nobody).
        // SAFETY: our own table, alive here; the caller's receive buffer.
        let r = unsafe { landing.fill(&nb, &[t.buf.ptr as u64]) };
        return local(comm, mode, r);
    };
    let n = comm.size() as usize;
    let mine: Box<[u64]> = vec![t.buf.ptr as u64].into();
    let mut tables: Box<[u64]> = vec![0u64; n].into();
    let counts: Box<[usize]> = vec![8; n].into();
    let displs: Box<[usize]> = (0..n).map(|r| 8 * r).collect();
    let tables_at = tables.as_mut_ptr() as usize;
    // SAFETY: the boxed arrays move into the future and their contents
    // stay put while it lives; both engine steps take their epochs now.
    let f = unsafe {
        let gather = c.iallgatherv(
            mine.as_ptr().cast(),
            8,
            tables_at as *mut u8,
            &*std::ptr::from_ref::<[usize]>(&counts),
            &*std::ptr::from_ref::<[usize]>(&displs),
        );
        let barrier = c.ibarrier();
        async move {
            let r = match gather.await {
                // Every table's address has arrived (the engine's
                // acquire): read the in-neighbours' blocks.
                Ok(()) => landing.fill(&nb, &tables),
                Err(e) => Err(e),
            };
            // Keep our table and buffer until every reader is done, even
            // when this rank failed (the others wait for it).
            let b = barrier.await;
            drop(t);
            drop((mine, counts, displs));
            r.and(b)
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

/// `MPI_Neighbor_allgatherv`: this process's `send` to every
/// out-neighbour; from in-neighbour `m`, `counts[m]` elements of `rdt` at
/// element displacement `displs[m]` of `recv`.
///
/// # Safety
/// As [`neighbor_alltoallw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_allgatherv(
    comm: &SimpleCommunicator,
    send: *const u8,
    scount: usize,
    sdt: &Datatype,
    recv: *mut u8,
    counts: &[usize],
    displs: &[isize],
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let (outdeg, _) = degrees(comm)?;
    let s = vec![
        Block {
            count: scount,
            disp: 0,
            dt: sdt,
        };
        outdeg
    ];
    let r = blocks_at(counts, displs, rdt)?;
    // SAFETY: the caller's guarantee.
    unsafe { neighbor_alltoallw(comm, send, &s, recv, &r, mode) }
}

/// `MPI_Neighbor_alltoallv`: to out-neighbour `k`, `scounts[k]` elements
/// of `sdt` at element displacement `sdispls[k]`; from in-neighbour `m`,
/// `rcounts[m]` elements of `rdt` at `rdispls[m]`.
///
/// # Safety
/// As [`neighbor_alltoallw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_alltoallv(
    comm: &SimpleCommunicator,
    send: *const u8,
    scounts: &[usize],
    sdispls: &[isize],
    sdt: &Datatype,
    recv: *mut u8,
    rcounts: &[usize],
    rdispls: &[isize],
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let s = blocks_at(scounts, sdispls, sdt)?;
    let r = blocks_at(rcounts, rdispls, rdt)?;
    // SAFETY: the caller's guarantee.
    unsafe { neighbor_alltoallw(comm, send, &s, recv, &r, mode) }
}

/// Blocks of `counts[i]` elements at element displacements `displs[i]`.
fn blocks_at<'d>(counts: &[usize], displs: &[isize], dt: &'d Datatype) -> Result<Vec<Block<'d>>> {
    if counts.len() != displs.len() {
        return Err(Error::Arg {
            reason: format!("{} counts but {} displacements", counts.len(), displs.len()),
        });
    }
    let ext = dt.extent();
    counts
        .iter()
        .zip(displs)
        .map(|(&count, &d)| {
            let disp = d.checked_mul(ext).ok_or_else(|| Error::Arg {
                reason: format!("displacement {d} overflows"),
            })?;
            Ok(Block { count, disp, dt })
        })
        .collect()
}

/// Equal blocks one after the other: `n` blocks of `count` elements.
fn even_blocks(n: usize, count: usize, dt: &Datatype) -> Result<Vec<Block<'_>>> {
    let counts = vec![count; n];
    let displs: Vec<isize> = (0..n)
        .map(|k| {
            isize::try_from(k * count).map_err(|_| Error::Arg {
                reason: "neighbourhood collective too large".into(),
            })
        })
        .collect::<Result<_>>()?;
    blocks_at(&counts, &displs, dt)
}

/// `MPI_Neighbor_allgather`: `count` elements of `sdt` to every
/// out-neighbour, `rcount` elements of `rdt` from each in-neighbour, one
/// block after the other.
///
/// # Safety
/// As [`neighbor_alltoallw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_allgather(
    comm: &SimpleCommunicator,
    send: *const u8,
    scount: usize,
    sdt: &Datatype,
    recv: *mut u8,
    rcount: usize,
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let (outdeg, indeg) = degrees(comm)?;
    let s = vec![
        Block {
            count: scount,
            disp: 0,
            dt: sdt,
        };
        outdeg
    ];
    let r = even_blocks(indeg, rcount, rdt)?;
    // SAFETY: the caller's guarantee.
    unsafe { neighbor_alltoallw(comm, send, &s, recv, &r, mode) }
}

/// `MPI_Neighbor_alltoall`: block `k` of `scount` elements to
/// out-neighbour `k`, block `m` of `rcount` elements from in-neighbour
/// `m`.
///
/// # Safety
/// As [`neighbor_alltoallw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn neighbor_alltoall(
    comm: &SimpleCommunicator,
    send: *const u8,
    scount: usize,
    sdt: &Datatype,
    recv: *mut u8,
    rcount: usize,
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let (outdeg, indeg) = degrees(comm)?;
    let s = even_blocks(outdeg, scount, sdt)?;
    let r = even_blocks(indeg, rcount, rdt)?;
    // SAFETY: the caller's guarantee.
    unsafe { neighbor_alltoallw(comm, send, &s, recv, &r, mode) }
}

// ---------------------------------------------------------------- typed

/// Equal shares of `total` elements among `n` blocks.
fn share(total: usize, n: usize, what: &str) -> Result<usize> {
    match n {
        0 => Ok(0),
        _ if total % n == 0 => Ok(total / n),
        _ => Err(Error::Buffer {
            reason: format!("a {what} buffer of {total} elements does not split into {n} blocks"),
        }),
    }
}

/// Counts and displacements of a partition, checked against its buffer.
fn pieces(counts: &[i32], displs: &[i32], len: usize) -> Result<(Vec<usize>, Vec<isize>)> {
    if counts.len() != displs.len() {
        return Err(Error::Arg {
            reason: format!("{} counts but {} displacements", counts.len(), displs.len()),
        });
    }
    let mut c = Vec::with_capacity(counts.len());
    let mut d = Vec::with_capacity(counts.len());
    for (i, (&n, &at)) in counts.iter().zip(displs).enumerate() {
        let (Ok(n), Ok(at)) = (usize::try_from(n), usize::try_from(at)) else {
            return Err(Error::Arg {
                reason: format!("negative count or displacement in piece {i}"),
            });
        };
        if n + at > len {
            return Err(Error::Buffer {
                reason: format!("piece {i} ({n} elements at {at}) reaches past a buffer of {len}"),
            });
        }
        c.push(n);
        d.push(at as isize);
    }
    Ok((c, d))
}

/// `MPI_Neighbor_allgather` on typed buffers, run or started.
///
/// # Safety
/// With [`Mode::Start`] the buffers stay untouched until the request
/// finishes.
unsafe fn all_gather_typed<S, R>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    mode: Mode,
) -> Result<Option<CollRequest>>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let (_, indeg) = degrees(comm)?;
    let (sdt, rdt) = (
        sendbuf.element_datatype_ref(),
        recvbuf.element_datatype_ref(),
    );
    let per = share(elements_mut(recvbuf), indeg, "receive")?;
    // SAFETY: the blocks are inside the buffers; the caller's guarantee
    // for their life.
    unsafe {
        neighbor_allgather(
            comm,
            sendbuf.as_bytes().as_ptr(),
            elements(sendbuf),
            &sdt,
            recvbuf.as_bytes_mut().as_mut_ptr(),
            per,
            &rdt,
            mode,
        )
    }
}

/// `MPI_Neighbor_alltoall` on typed buffers, run or started.
///
/// # Safety
/// As [`all_gather_typed`].
unsafe fn all_to_all_typed<S, R>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    mode: Mode,
) -> Result<Option<CollRequest>>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let (outdeg, indeg) = degrees(comm)?;
    let (sdt, rdt) = (
        sendbuf.element_datatype_ref(),
        recvbuf.element_datatype_ref(),
    );
    let sper = share(elements(sendbuf), outdeg, "send")?;
    let rper = share(elements_mut(recvbuf), indeg, "receive")?;
    // SAFETY: the blocks are inside the buffers; the caller's guarantee
    // for their life.
    unsafe {
        neighbor_alltoall(
            comm,
            sendbuf.as_bytes().as_ptr(),
            sper,
            &sdt,
            recvbuf.as_bytes_mut().as_mut_ptr(),
            rper,
            &rdt,
            mode,
        )
    }
}

/// Neighbourhood collectives on communicators with a topology (rsmpi's
/// names); bring them into scope with `use hmpi_core::traits::*`.
/// Collective; [`Error::Topology`] on a communicator without a topology.
pub trait NeighborCollectives: Communicator {
    /// `sendbuf` to every out-neighbour; `recvbuf` holds one equal block
    /// per in-neighbour, in the topology's order (`MPI_Neighbor_allgather`).
    /// A block of a `PROC_NULL` neighbour is left as it is.
    fn neighbor_all_gather_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        // SAFETY: both buffers are borrowed for the call.
        unsafe { all_gather_typed(self.as_simple(), sendbuf, recvbuf, Mode::Block) }.map(drop)
    }

    /// [`NeighborCollectives::neighbor_all_gather_into`] with blocks of
    /// different lengths from the in-neighbours (`MPI_Neighbor_allgatherv`).
    fn neighbor_all_gather_varcount_into<S, R, C, D>(
        &self,
        sendbuf: &S,
        recvbuf: &mut PartitionMut<'_, R, C, D>,
    ) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        let comm = self.as_simple();
        let sdt = sendbuf.element_datatype_ref();
        let rdt = recvbuf.buf.element_datatype_ref();
        let total = elements_mut(recvbuf.buf);
        let (c, d) = pieces(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        // SAFETY: both buffers are borrowed for the call; the pieces are
        // checked against the receive buffer.
        unsafe {
            neighbor_allgatherv(
                comm,
                sendbuf.as_bytes().as_ptr(),
                elements(sendbuf),
                &sdt,
                recvbuf.buf.as_bytes_mut().as_mut_ptr(),
                &c,
                &d,
                &rdt,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// Block `k` of `sendbuf` to out-neighbour `k`, block `m` of `recvbuf`
    /// from in-neighbour `m`, equal blocks (`MPI_Neighbor_alltoall`).
    fn neighbor_all_to_all_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        // SAFETY: both buffers are borrowed for the call.
        unsafe { all_to_all_typed(self.as_simple(), sendbuf, recvbuf, Mode::Block) }.map(drop)
    }

    /// [`NeighborCollectives::neighbor_all_to_all_into`] with blocks of
    /// different lengths (`MPI_Neighbor_alltoallv`).
    fn neighbor_all_to_all_varcount_into<S, R, C1, D1, C2, D2>(
        &self,
        sendbuf: &Partition<'_, S, C1, D1>,
        recvbuf: &mut PartitionMut<'_, R, C2, D2>,
    ) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C1: Borrow<[i32]>,
        D1: Borrow<[i32]>,
        C2: Borrow<[i32]>,
        D2: Borrow<[i32]>,
    {
        let comm = self.as_simple();
        let (sc, sd) = pieces(
            sendbuf.counts.borrow(),
            sendbuf.displs.borrow(),
            elements(sendbuf.buf),
        )?;
        let total = elements_mut(recvbuf.buf);
        let (rc, rd) = pieces(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        let sdt = sendbuf.buf.element_datatype_ref();
        let rdt = recvbuf.buf.element_datatype_ref();
        // SAFETY: both buffers are borrowed for the call; the pieces are
        // checked against them.
        unsafe {
            neighbor_alltoallv(
                comm,
                sendbuf.buf.as_bytes().as_ptr(),
                &sc,
                &sd,
                &sdt,
                recvbuf.buf.as_bytes_mut().as_mut_ptr(),
                &rc,
                &rd,
                &rdt,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// `MPI_Ineighbor_allgather`
    /// ([`NeighborCollectives::neighbor_all_gather_into`] started in a
    /// [`request::scope`](crate::request::scope), which completes it if
    /// it is left unfinished).
    fn immediate_neighbor_all_gather_into<'s, S, R>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        // SAFETY: the buffers are borrowed for the scope, which completes
        // the collective before they are released.
        let r = unsafe { all_gather_typed(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    /// `MPI_Ineighbor_alltoall`
    /// ([`NeighborCollectives::neighbor_all_to_all_into`] started in a
    /// scope).
    fn immediate_neighbor_all_to_all_into<'s, S, R>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        // SAFETY: as in `immediate_neighbor_all_gather_into`.
        let r = unsafe { all_to_all_typed(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }
}

impl<C: Communicator + ?Sized> NeighborCollectives for C {}
