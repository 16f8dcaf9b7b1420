//! The collectives for Rust programs, with rsmpi's names:
//! [`CommunicatorCollectives`] on every communicator and [`Root`] on the
//! process that roots a collective (`world.process_at_rank(0)`).
//!
//! Buffers are values, slices or `Vec`s of [`Equivalence`] types, whose
//! datatypes the collectives take from the element type; counts come
//! from the buffers' lengths (per member, the receive buffer holds one
//! piece per member). Variable counts go through [`Partition`] /
//! [`PartitionMut`]. Errors are values: a bad root, buffers whose lengths
//! do not fit the communicator, an operation that does not apply to the
//! element type.
//!
//! # Example
//! ```
//! use hmpi_core::prelude::*;
//! use hmpi_core::collective::SystemOperation;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let mut sum = 0u64;
//! world.all_reduce_into(&(world.rank() as u64 + 1), &mut sum, SystemOperation::sum()).unwrap();
//! let n = world.size() as u64;
//! assert_eq!(sum, n * (n + 1) / 2);
//!
//! let mut v = [0i32; 4];
//! let root = world.process_at_rank(0);
//! if world.rank() == 0 {
//!     v = [1, 2, 3, 4];
//! }
//! root.broadcast_into(&mut v[..]).unwrap();
//! assert_eq!(v, [1, 2, 3, 4]);
//! ```
//!
//! [`Equivalence`]: crate::datatype::Equivalence

use super::raw::{self, Buf, CollRequest, Mode};
use crate::comm::Communicator;
use crate::comm::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut, Datatype};
use crate::error::{Error, Result};
use crate::op::Operation;
use crate::point_to_point::Process;
use crate::request::{CollectiveRequest, Scope};
use std::borrow::Borrow;

/// A buffer of pieces of different lengths, one per member (rsmpi's
/// `Partition`): `counts[r]` elements at element displacement
/// `displs[r]`.
#[derive(Debug)]
pub struct Partition<'b, B: ?Sized, C, D> {
    pub(super) buf: &'b B,
    pub(super) counts: C,
    pub(super) displs: D,
}

impl<'b, B: ?Sized + Buffer, C: Borrow<[i32]>, D: Borrow<[i32]>> Partition<'b, B, C, D> {
    /// Pieces of `buf`.
    pub fn new(buf: &'b B, counts: C, displs: D) -> Self {
        Partition {
            buf,
            counts,
            displs,
        }
    }
}

/// A mutable buffer of pieces of different lengths (rsmpi's
/// `PartitionMut`).
#[derive(Debug)]
pub struct PartitionMut<'b, B: ?Sized, C, D> {
    pub(super) buf: &'b mut B,
    pub(super) counts: C,
    pub(super) displs: D,
}

impl<'b, B: ?Sized + BufferMut, C: Borrow<[i32]>, D: Borrow<[i32]>> PartitionMut<'b, B, C, D> {
    /// Pieces of `buf`.
    pub fn new(buf: &'b mut B, counts: C, displs: D) -> Self {
        PartitionMut {
            buf,
            counts,
            displs,
        }
    }
}

/// Counts and displacements as elements, checked against a buffer of
/// `len` elements.
fn layout(counts: &[i32], displs: &[i32], len: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let conv = |v: &[i32], what: &str| -> Result<Vec<usize>> {
        v.iter()
            .map(|&x| {
                usize::try_from(x).map_err(|_| Error::Arg {
                    reason: format!("negative {what} {x}"),
                })
            })
            .collect()
    };
    let (c, d) = (conv(counts, "count")?, conv(displs, "displacement")?);
    if c.len() != d.len() {
        return Err(Error::Arg {
            reason: format!("{} counts but {} displacements", c.len(), d.len()),
        });
    }
    if let Some(r) = (0..c.len()).find(|&r| c[r] + d[r] > len) {
        return Err(Error::Buffer {
            reason: format!(
                "piece {r} ({} elements at {}) reaches past a buffer of {len}",
                c[r], d[r]
            ),
        });
    }
    Ok((c, d))
}

/// The whole elements in `b`.
pub(super) fn elements<B: ?Sized + Buffer>(b: &B) -> usize {
    b.as_bytes().len() / b.element_size().max(1)
}

/// The whole elements in `b`.
pub(super) fn elements_mut<B: ?Sized + BufferMut>(b: &mut B) -> usize {
    let es = b.element_size().max(1);
    b.as_bytes_mut().len() / es
}

fn send_buf<'d, B: ?Sized + Buffer>(b: &B, dt: &'d Datatype) -> Buf<'d> {
    Buf {
        ptr: b.as_bytes().as_ptr(),
        count: elements(b),
        dt,
    }
}

/// Even pieces: a receive buffer of `total` elements split over `n`
/// members.
fn even(total: usize, n: usize, what: &str) -> Result<(Vec<usize>, Vec<usize>)> {
    if n == 0 || total % n != 0 {
        return Err(Error::Buffer {
            reason: format!("{what}: a buffer of {total} elements does not split over {n} ranks"),
        });
    }
    let per = total / n;
    Ok((vec![per; n], (0..n).map(|r| r * per).collect()))
}

/// Even places of `n` pieces in a buffer of `total` elements of `size`
/// bytes (communicators spanning nodes).
#[cfg(feature = "mpi")]
fn even_places(total: usize, size: usize, n: usize, what: &str) -> Result<Vec<(usize, usize)>> {
    let (c, d) = even(total, n, what)?;
    Ok(span::places(&c, &d, size))
}

#[cfg(feature = "mpi")]
use crate::multinode::typed as span;
#[cfg(feature = "mpi")]
use crate::multinode::SpanningCommunicator as SpanComm;

/// A reduction of `sendbuf` with `op` (communicators spanning nodes).
#[cfg(feature = "mpi")]
fn with_reduction<S: ?Sized + Buffer, T>(
    sendbuf: &S,
    op: Operation,
    f: impl FnOnce(&span::Reduction<'_>) -> Result<T>,
) -> Result<T> {
    let dt = sendbuf.element_datatype();
    f(&span::Reduction {
        send: sendbuf.as_bytes(),
        count: elements(sendbuf),
        dt: &dt,
        op: &op,
    })
}

/// A reduction of `sendbuf` with `op` lent to a nonblocking collective
/// across nodes.
///
/// # Safety
/// As [`span::Lent::new`] for `sendbuf`.
#[cfg(feature = "mpi")]
unsafe fn lent_reduction<S: ?Sized + Buffer>(sendbuf: &S, op: Operation) -> span::LentReduction {
    let (count, dt) = (elements(sendbuf), sendbuf.element_datatype());
    // SAFETY: the caller's guarantee.
    unsafe { span::LentReduction::new(sendbuf.as_bytes(), count, dt, op) }
}

/// The collectives every communicator has (rsmpi's
/// `CommunicatorCollectives`; `barrier` is on [`Communicator`]).
pub trait CommunicatorCollectives: Communicator {
    /// Every member's `sendbuf`, in rank order, into every member's
    /// `recvbuf` (`MPI_Allgather`).
    fn all_gather_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let (total, size) = (elements_mut(recvbuf), recvbuf.element_size());
            let p = even_places(total, size, s.size() as usize, "all_gather_into")?;
            return span::all_gather(s, sendbuf.as_bytes(), recvbuf.as_bytes_mut(), &p);
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe { all_gather(self.as_simple(), sendbuf, recvbuf, Mode::Block) }.map(drop)
    }

    /// Pieces of different lengths into every member's `recvbuf`
    /// (`MPI_Allgatherv`).
    fn all_gather_varcount_into<S, R, C, D>(
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
        let (c, d) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            let p = span::places(&c, &d, recvbuf.buf.element_size());
            return span::all_gather(s, sendbuf.as_bytes(), recvbuf.buf.as_bytes_mut(), &p);
        }
        let recv = recvbuf.buf.as_bytes_mut().as_mut_ptr();
        // SAFETY: as in `all_gather_into`, the pieces checked against the
        // buffer.
        unsafe {
            raw::allgatherv(
                comm,
                Some(send_buf(sendbuf, &sdt)),
                recv,
                &c,
                &d,
                &rdt,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// Piece `r` of this member's `sendbuf` to member `r`, whose piece
    /// from this member lands at place `rank` of its `recvbuf`
    /// (`MPI_Alltoall`).
    fn all_to_all_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let n = s.size() as usize;
            let what = "all_to_all_into";
            let to = even_places(elements(sendbuf), sendbuf.element_size(), n, what)?;
            let from = even_places(elements_mut(recvbuf), recvbuf.element_size(), n, what)?;
            return span::all_to_all(s, sendbuf.as_bytes(), &to, recvbuf.as_bytes_mut(), &from);
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe { all_to_all_even(self.as_simple(), sendbuf, recvbuf, Mode::Block) }.map(drop)
    }

    /// [`CommunicatorCollectives::all_to_all_into`] with pieces of
    /// different lengths (`MPI_Alltoallv`).
    fn all_to_all_varcount_into<S, R, C1, D1, C2, D2>(
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
        let (sc, sd) = layout(
            sendbuf.counts.borrow(),
            sendbuf.displs.borrow(),
            elements(sendbuf.buf),
        )?;
        let total = elements_mut(recvbuf.buf);
        let (rc, rd) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            let to = span::places(&sc, &sd, sendbuf.buf.element_size());
            let from = span::places(&rc, &rd, recvbuf.buf.element_size());
            let out = recvbuf.buf.as_bytes_mut();
            return span::all_to_all(s, sendbuf.buf.as_bytes(), &to, out, &from);
        }
        let sdt = sendbuf.buf.element_datatype_ref();
        let rdt = recvbuf.buf.element_datatype_ref();
        // SAFETY: both buffers are borrowed for the call.
        unsafe {
            all_to_all(
                comm,
                sendbuf.buf,
                &sc,
                &sd,
                &sdt,
                recvbuf.buf,
                &rc,
                &rd,
                &rdt,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// The reduction of every member's `sendbuf` with `op`, in rank
    /// order, into every member's `recvbuf` (`MPI_Allreduce`).
    fn all_reduce_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let out = recvbuf.as_bytes_mut();
            return with_reduction(sendbuf, op.into(), |r| span::all_reduce(s, r, out));
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe {
            reduce_typed(
                self.as_simple(),
                sendbuf,
                Some(recvbuf),
                op.into(),
                None,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// Block `r` of the reduction of every member's `sendbuf` into member
    /// `r`'s `recvbuf` (`MPI_Reduce_scatter_block`).
    fn reduce_scatter_block_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let n = s.size() as usize;
            if elements(sendbuf) != elements_mut(recvbuf) * n {
                return Err(Error::Buffer {
                    reason: format!(
                        "reduce_scatter_block_into: {} elements to send, {} per rank for {n} ranks",
                        elements(sendbuf),
                        elements_mut(recvbuf)
                    ),
                });
            }
            let out = recvbuf.as_bytes_mut();
            return with_reduction(sendbuf, op.into(), |r| {
                span::reduce_scatter_block(s, r, out)
            });
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe { reduce_scatter_block(self.as_simple(), sendbuf, recvbuf, op.into(), Mode::Block) }
            .map(drop)
    }

    /// The inclusive prefix reduction (`MPI_Scan`): member `r` gets the
    /// reduction of members `0..=r`.
    fn scan_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let out = recvbuf.as_bytes_mut();
            return with_reduction(sendbuf, op.into(), |r| span::scan(s, r, false, out));
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe {
            scan_typed(
                self.as_simple(),
                sendbuf,
                recvbuf,
                op.into(),
                false,
                Mode::Block,
            )
        }
        .map(drop)
    }

    /// The exclusive prefix reduction (`MPI_Exscan`): member `r > 0` gets
    /// the reduction of members `0..r`; member 0's `recvbuf` is left as it
    /// is.
    fn exclusive_scan_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let out = recvbuf.as_bytes_mut();
            return with_reduction(sendbuf, op.into(), |r| span::scan(s, r, true, out));
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe {
            scan_typed(
                self.as_simple(),
                sendbuf,
                recvbuf,
                op.into(),
                true,
                Mode::Block,
            )
        }
        .map(drop)
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// What a collective call gives back: nothing when it ran to its end, the
/// request when it was started.
type Started = Result<Option<CollRequest>>;

/// # Safety
/// With [`Mode::Start`], both buffers stay valid until the request
/// finishes (a scope guarantees it).
unsafe fn all_gather<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    mode: Mode,
) -> Started {
    let sdt = sendbuf.element_datatype_ref();
    let rdt = recvbuf.element_datatype_ref();
    let total = elements_mut(recvbuf);
    let (c, d) = even(total, comm.peers() as usize, "all_gather_into")?;
    let recv = recvbuf.as_bytes_mut().as_mut_ptr();
    // SAFETY: `recv` holds `size` pieces of `c[r]` elements; the caller
    // keeps both buffers.
    unsafe {
        raw::allgatherv(
            comm,
            Some(send_buf(sendbuf, &sdt)),
            recv,
            &c,
            &d,
            &rdt,
            mode,
        )
    }
}

/// # Safety
/// As [`all_gather`].
unsafe fn all_to_all_even<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    mode: Mode,
) -> Started {
    let n = comm.peers() as usize;
    let (sc, sd) = even(elements(sendbuf), n, "all_to_all_into")?;
    let (rc, rd) = even(elements_mut(recvbuf), n, "all_to_all_into")?;
    let sdt = sendbuf.element_datatype_ref();
    let rdt = recvbuf.element_datatype_ref();
    // SAFETY: the caller's guarantee.
    unsafe { all_to_all(comm, sendbuf, &sc, &sd, &sdt, recvbuf, &rc, &rd, &rdt, mode) }
}

/// # Safety
/// As [`all_gather`]; the pieces fit the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn all_to_all<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    sc: &[usize],
    sd: &[usize],
    sdt: &Datatype,
    recvbuf: &mut R,
    rc: &[usize],
    rd: &[usize],
    rdt: &Datatype,
    mode: Mode,
) -> Started {
    let n = comm.peers() as usize;
    if sc.len() != n || rc.len() != n {
        return Err(Error::Arg {
            reason: format!(
                "all-to-all: {} send and {} receive pieces for {n} ranks",
                sc.len(),
                rc.len()
            ),
        });
    }
    let bytes = |d: &[usize], t: &Datatype| -> Vec<isize> {
        d.iter().map(|&x| x as isize * t.extent()).collect()
    };
    let (sdb, rdb) = (bytes(sd, sdt), bytes(rd, rdt));
    let sdts = vec![sdt; n];
    let rdts = vec![rdt; n];
    let recv = recvbuf.as_bytes_mut().as_mut_ptr();
    // SAFETY: the caller's guarantee.
    unsafe {
        raw::alltoallw(
            comm,
            Some(sendbuf.as_bytes().as_ptr()),
            sc,
            &sdb,
            &sdts,
            recv,
            rc,
            &rdb,
            &rdts,
            mode,
        )
    }
}

/// # Safety
/// As [`all_gather`].
unsafe fn reduce_typed<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: Option<&mut R>,
    op: Operation,
    root: Option<i32>,
    mode: Mode,
) -> Started {
    let dt = sendbuf.element_datatype_ref();
    let count = elements(sendbuf);
    let recv = match recvbuf {
        Some(r) => {
            if elements_mut(r) != count {
                return Err(Error::Buffer {
                    reason: format!(
                        "a reduction of {count} elements into a buffer of {}",
                        elements_mut(r)
                    ),
                });
            }
            r.as_bytes_mut().as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    // SAFETY: `sendbuf` holds `count` elements, `recv` as many where a
    // result is wanted (checked); the caller keeps them.
    unsafe {
        raw::reduce(
            comm,
            Some(sendbuf.as_bytes().as_ptr()),
            recv,
            count,
            &dt,
            &op,
            root,
            mode,
        )
    }
}

/// # Safety
/// As [`all_gather`].
unsafe fn reduce_scatter_block<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: Operation,
    mode: Mode,
) -> Started {
    let n = comm.size() as usize;
    let per = elements_mut(recvbuf);
    if elements(sendbuf) != per * n {
        return Err(Error::Buffer {
            reason: format!(
                "reduce_scatter_block_into: {} elements to send, {per} per rank for {n} ranks",
                elements(sendbuf)
            ),
        });
    }
    let dt = sendbuf.element_datatype_ref();
    let recv = recvbuf.as_bytes_mut().as_mut_ptr();
    // SAFETY: `sendbuf` holds `n × per` elements, `recvbuf` `per`; the
    // caller keeps them.
    unsafe {
        raw::reduce_scatter(
            comm,
            Some(sendbuf.as_bytes().as_ptr()),
            recv,
            &vec![per; n],
            &dt,
            &op,
            mode,
        )
    }
}

/// # Safety
/// As [`all_gather`].
unsafe fn scan_typed<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: Operation,
    exclusive: bool,
    mode: Mode,
) -> Started {
    let dt = sendbuf.element_datatype_ref();
    let count = elements(sendbuf);
    if elements_mut(recvbuf) != count {
        return Err(Error::Buffer {
            reason: format!(
                "a scan of {count} elements into a buffer of {}",
                elements_mut(recvbuf)
            ),
        });
    }
    let recv = recvbuf.as_bytes_mut().as_mut_ptr();
    // SAFETY: both hold `count` elements; the caller keeps them.
    unsafe {
        raw::scan(
            comm,
            Some(sendbuf.as_bytes().as_ptr()),
            recv,
            count,
            &dt,
            &op,
            exclusive,
            mode,
        )
    }
}

/// `MPI_Iscan` (`exclusive` false) and `MPI_Iexscan` (true): on a
/// spanning communicator through its progress thread, else on the node.
fn immediate_scan_in<'s, S, R>(
    comm: &SimpleCommunicator,
    scope: &'s Scope<'s, '_>,
    sendbuf: &'s S,
    recvbuf: &'s mut R,
    op: Operation,
    exclusive: bool,
) -> Result<CollectiveRequest<'s>>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    #[cfg(feature = "mpi")]
    if let Some(s) = comm.spanning() {
        // SAFETY: the buffers are borrowed for the scope, which completes
        // the request (the progress thread is then done with them) before
        // they are released.
        let (r, mut out) = unsafe {
            (
                lent_reduction(sendbuf, op),
                span::Lent::new_mut(recvbuf.as_bytes_mut()),
            )
        };
        let job = move |c: &SpanComm| r.with(|r| span::scan(c, r, exclusive, out.bytes_mut()));
        return in_scope(scope, span::start(comm, s, job));
    }
    // SAFETY: as in `immediate_all_reduce_into`.
    let r = unsafe { scan_typed(comm, sendbuf, recvbuf, op, exclusive, Mode::Start) };
    in_scope(scope, r)
}

/// A started collective, kept in `scope`.
pub(super) fn in_scope<'s>(scope: &'s Scope<'s, '_>, r: Started) -> Result<CollectiveRequest<'s>> {
    match r? {
        Some(c) => Ok(scope.insert_collective(c)),
        None => Err(Error::Internal(
            "a started collective without a request".into(),
        )),
    }
}

/// `MPI_Allgatherv` into a partitioned buffer, blocking or started.
///
/// # Safety
/// As [`all_gather`].
unsafe fn all_gather_var<S, R, C, D>(
    comm: &SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut PartitionMut<'_, R, C, D>,
    mode: Mode,
) -> Started
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    C: Borrow<[i32]>,
    D: Borrow<[i32]>,
{
    let sdt = sendbuf.element_datatype_ref();
    let rdt = recvbuf.buf.element_datatype_ref();
    let total = elements_mut(recvbuf.buf);
    let (c, d) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
    let recv = recvbuf.buf.as_bytes_mut().as_mut_ptr();
    // SAFETY: the pieces were checked against the buffer; the caller
    // keeps both buffers.
    unsafe {
        raw::allgatherv(
            comm,
            Some(send_buf(sendbuf, &sdt)),
            recv,
            &c,
            &d,
            &rdt,
            mode,
        )
    }
}

/// `MPI_Alltoallv` between partitioned buffers, blocking or started.
///
/// # Safety
/// As [`all_gather`].
unsafe fn all_to_all_var<S, R, C1, D1, C2, D2>(
    comm: &SimpleCommunicator,
    sendbuf: &Partition<'_, S, C1, D1>,
    recvbuf: &mut PartitionMut<'_, R, C2, D2>,
    mode: Mode,
) -> Started
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    C1: Borrow<[i32]>,
    D1: Borrow<[i32]>,
    C2: Borrow<[i32]>,
    D2: Borrow<[i32]>,
{
    let (sc, sd) = layout(
        sendbuf.counts.borrow(),
        sendbuf.displs.borrow(),
        elements(sendbuf.buf),
    )?;
    let total = elements_mut(recvbuf.buf);
    let (rc, rd) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
    let sdt = sendbuf.buf.element_datatype_ref();
    let rdt = recvbuf.buf.element_datatype_ref();
    // SAFETY: the pieces were checked against the buffers; the caller
    // keeps them.
    unsafe {
        all_to_all(
            comm,
            sendbuf.buf,
            &sc,
            &sd,
            &sdt,
            recvbuf.buf,
            &rc,
            &rd,
            &rdt,
            mode,
        )
    }
}

/// `MPI_Gatherv` from this member: `sendbuf` to the root, whose receive
/// side is `recv` (`None` away from the root), blocking or started.
///
/// # Safety
/// As [`all_gather`]; at the root, `recv`'s pieces fit its buffer.
unsafe fn gather_to<S: ?Sized + Buffer>(
    comm: &SimpleCommunicator,
    root: i32,
    sendbuf: &S,
    recv: Option<(*mut u8, &[usize], &[usize], &Datatype)>,
    mode: Mode,
) -> Started {
    let sdt = sendbuf.element_datatype_ref();
    let (ptr, c, d, rdt) = recv.unwrap_or((std::ptr::null_mut(), &[], &[], &sdt));
    // SAFETY: the caller's guarantee.
    unsafe {
        raw::gatherv(
            comm,
            Some(send_buf(sendbuf, &sdt)),
            ptr,
            c,
            d,
            rdt,
            root,
            mode,
        )
    }
}

/// `MPI_Scatterv` to this member's `recvbuf`, from the root's send side
/// `send` (`None` away from the root), blocking or started.
///
/// # Safety
/// As [`all_gather`]; at the root, `send`'s pieces fit its buffer.
unsafe fn scatter_from<R: ?Sized + BufferMut>(
    comm: &SimpleCommunicator,
    root: i32,
    send: Option<(*const u8, &[usize], &[usize], &Datatype)>,
    recvbuf: &mut R,
    mode: Mode,
) -> Started {
    let rdt = recvbuf.element_datatype_ref();
    let count = elements_mut(recvbuf);
    let p = recvbuf.as_bytes_mut().as_mut_ptr() as *const u8;
    let (sp, c, d, sdt) = send.unwrap_or((std::ptr::null(), &[], &[], &rdt));
    // SAFETY: the caller's guarantee.
    unsafe {
        raw::scatterv(
            comm,
            sp,
            c,
            d,
            sdt,
            Some(Buf {
                ptr: p,
                count,
                dt: &rdt,
            }),
            root,
            mode,
        )
    }
}

/// The nonblocking collectives (rsmpi's `immediate_*`), started in a
/// [`request::scope`](crate::request::scope): the buffers are borrowed
/// for the scope, which completes every collective left unfinished.
pub trait ImmediateCollectives: Communicator {
    /// `MPI_Ibarrier`.
    fn immediate_barrier<'s>(&self, scope: &'s Scope<'s, '_>) -> Result<CollectiveRequest<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            return in_scope(
                scope,
                span::start(self.as_simple(), s, |c: &SpanComm| c.barrier()),
            );
        }
        in_scope(scope, raw::barrier(self.as_simple(), Mode::Start))
    }

    /// `MPI_Iallreduce` ([`CommunicatorCollectives::all_reduce_into`]).
    fn immediate_all_reduce_into<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            // SAFETY: the buffers are borrowed for the scope, which
            // completes the request (the progress thread is then done with
            // them) before they are released.
            let (r, mut out) = unsafe {
                (
                    lent_reduction(sendbuf, op.into()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| r.with(|r| span::all_reduce(c, r, out.bytes_mut()));
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: the buffers are borrowed for the scope, which completes
        // the collective before they are released.
        let r = unsafe {
            reduce_typed(
                self.as_simple(),
                sendbuf,
                Some(recvbuf),
                op.into(),
                None,
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    /// `MPI_Iallgather` ([`CommunicatorCollectives::all_gather_into`]).
    fn immediate_all_gather_into<'s, S, R>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let (total, size) = (elements_mut(recvbuf), recvbuf.element_size());
            let p = even_places(total, size, s.size() as usize, "immediate_all_gather_into")?;
            // SAFETY: the buffers are borrowed for the scope, which
            // completes the request (the progress thread is then done with
            // them) before they are released.
            let (mine, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| span::all_gather(c, mine.bytes(), out.bytes_mut(), &p);
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: as in `immediate_all_reduce_into`.
        let r = unsafe { all_gather(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    /// `MPI_Ialltoall` ([`CommunicatorCollectives::all_to_all_into`]).
    fn immediate_all_to_all_into<'s, S, R>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let (n, what) = (s.size() as usize, "immediate_all_to_all_into");
            let to = even_places(elements(sendbuf), sendbuf.element_size(), n, what)?;
            let from = even_places(elements_mut(recvbuf), recvbuf.element_size(), n, what)?;
            // SAFETY: the buffers are borrowed for the scope, which
            // completes the request (the progress thread is then done with
            // them) before they are released.
            let (send, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job =
                move |c: &SpanComm| span::all_to_all(c, send.bytes(), &to, out.bytes_mut(), &from);
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: as in `immediate_all_reduce_into`.
        let r = unsafe { all_to_all_even(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    /// `MPI_Ireduce_scatter_block`.
    fn immediate_reduce_scatter_block_into<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let n = s.size() as usize;
            if elements(sendbuf) != elements_mut(recvbuf) * n {
                return Err(Error::Buffer {
                    reason: format!(
                        "immediate_reduce_scatter_block_into: {} elements to send, {} per rank \
                         for {n} ranks",
                        elements(sendbuf),
                        elements_mut(recvbuf)
                    ),
                });
            }
            // SAFETY: the buffers are borrowed for the scope, which
            // completes the request (the progress thread is then done with
            // them) before they are released.
            let (r, mut out) = unsafe {
                (
                    lent_reduction(sendbuf, op.into()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job =
                move |c: &SpanComm| r.with(|r| span::reduce_scatter_block(c, r, out.bytes_mut()));
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: as in `immediate_all_reduce_into`.
        let r = unsafe {
            reduce_scatter_block(self.as_simple(), sendbuf, recvbuf, op.into(), Mode::Start)
        };
        in_scope(scope, r)
    }

    /// `MPI_Iscan`.
    fn immediate_scan_into<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        immediate_scan_in(self.as_simple(), scope, sendbuf, recvbuf, op.into(), false)
    }

    /// `MPI_Iexscan`.
    fn immediate_exclusive_scan_into<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        immediate_scan_in(self.as_simple(), scope, sendbuf, recvbuf, op.into(), true)
    }

    /// `MPI_Iallgatherv`
    /// ([`CommunicatorCollectives::all_gather_varcount_into`]).
    fn immediate_all_gather_varcount_into<'s, S, R, C, D>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut PartitionMut<'_, R, C, D>,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let total = elements_mut(recvbuf.buf);
            let (c, d) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
            let p = span::places(&c, &d, recvbuf.buf.element_size());
            // SAFETY: as in `immediate_all_reduce_into` (the partition's
            // buffer is borrowed at least as long as the partition).
            let (mine, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.buf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| span::all_gather(c, mine.bytes(), out.bytes_mut(), &p);
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: as in `immediate_all_reduce_into` (the partition's
        // buffer is borrowed at least as long as the partition).
        let r = unsafe { all_gather_var(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    /// `MPI_Ialltoallv`
    /// ([`CommunicatorCollectives::all_to_all_varcount_into`]).
    fn immediate_all_to_all_varcount_into<'s, S, R, C1, D1, C2, D2>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s Partition<'_, S, C1, D1>,
        recvbuf: &'s mut PartitionMut<'_, R, C2, D2>,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C1: Borrow<[i32]>,
        D1: Borrow<[i32]>,
        C2: Borrow<[i32]>,
        D2: Borrow<[i32]>,
    {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.as_simple().spanning() {
            let (sc, sd) = layout(
                sendbuf.counts.borrow(),
                sendbuf.displs.borrow(),
                elements(sendbuf.buf),
            )?;
            let total = elements_mut(recvbuf.buf);
            let (rc, rd) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
            let to = span::places(&sc, &sd, sendbuf.buf.element_size());
            let from = span::places(&rc, &rd, recvbuf.buf.element_size());
            // SAFETY: as in `immediate_all_gather_varcount_into`.
            let (send, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.buf.as_bytes()),
                    span::Lent::new_mut(recvbuf.buf.as_bytes_mut()),
                )
            };
            let job =
                move |c: &SpanComm| span::all_to_all(c, send.bytes(), &to, out.bytes_mut(), &from);
            return in_scope(scope, span::start(self.as_simple(), s, job));
        }
        // SAFETY: as in `immediate_all_gather_varcount_into`.
        let r = unsafe { all_to_all_var(self.as_simple(), sendbuf, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }
}

impl<C: Communicator + ?Sized> ImmediateCollectives for C {}

/// The nonblocking rooted collectives (rsmpi's `immediate_*` of `Root`),
/// started in a [`request::scope`](crate::request::scope) on
/// `comm.process_at_rank(root)`.
pub trait ImmediateRoot {
    /// `MPI_Ibcast` ([`Root::broadcast_into`]).
    fn immediate_broadcast_into<'s, B: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        buffer: &'s mut B,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Ireduce` at the root ([`Root::reduce_into_root`]).
    fn immediate_reduce_into_root<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>;
    /// `MPI_Ireduce` elsewhere ([`Root::reduce_into`]).
    fn immediate_reduce_into<'s, S, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        O: Into<Operation>;
    /// `MPI_Igather` away from the root ([`Root::gather_into`]).
    fn immediate_gather_into<'s, S: ?Sized + Buffer>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Igather` at the root ([`Root::gather_into_root`]).
    fn immediate_gather_into_root<'s, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Igatherv` away from the root ([`Root::gather_varcount_into`]).
    fn immediate_gather_varcount_into<'s, S: ?Sized + Buffer>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Igatherv` at the root ([`Root::gather_varcount_into_root`]).
    fn immediate_gather_varcount_into_root<'s, S, R, C, D>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut PartitionMut<'_, R, C, D>,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>;
    /// `MPI_Iscatter` away from the root ([`Root::scatter_into`]).
    fn immediate_scatter_into<'s, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Iscatter` at the root ([`Root::scatter_into_root`]).
    fn immediate_scatter_into_root<'s, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Iscatterv` away from the root ([`Root::scatter_varcount_into`]).
    fn immediate_scatter_varcount_into<'s, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>;
    /// `MPI_Iscatterv` at the root ([`Root::scatter_varcount_into_root`]).
    fn immediate_scatter_varcount_into_root<'s, S, R, C, D>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s Partition<'_, S, C, D>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>;
}

impl ImmediateRoot for Process<'_> {
    fn immediate_broadcast_into<'s, B: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        buffer: &'s mut B,
    ) -> Result<CollectiveRequest<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: the buffer is borrowed for the scope, which
            // completes the request (the progress thread is then done with
            // it) before it is released.
            let mut buf = unsafe { span::Lent::new_mut(buffer.as_bytes_mut()) };
            let job = move |c: &SpanComm| span::bcast(c, buf.bytes_mut(), root);
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        let dt = buffer.element_datatype_ref();
        let count = elements_mut(buffer);
        let p = buffer.as_bytes_mut().as_mut_ptr();
        // SAFETY: the buffer is borrowed for the scope, which completes
        // the collective before it is released.
        let r = unsafe { raw::bcast(self.comm(), p, count, &dt, self.rank(), Mode::Start) };
        in_scope(scope, r)
    }

    fn immediate_reduce_into_root<'s, S, R, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Into<Operation>,
    {
        self.is_root("immediate_reduce_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let (r, mut out) = unsafe {
                (
                    lent_reduction(sendbuf, op.into()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job =
                move |c: &SpanComm| r.with(|r| span::reduce(c, r, root, Some(out.bytes_mut())));
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_broadcast_into`.
        let r = unsafe {
            reduce_typed(
                self.comm(),
                sendbuf,
                Some(recvbuf),
                op.into(),
                Some(self.rank()),
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    fn immediate_reduce_into<'s, S, O>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        op: O,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        O: Into<Operation>,
    {
        self.not_root("immediate_reduce_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let r = unsafe { lent_reduction(sendbuf, op.into()) };
            let job = move |c: &SpanComm| r.with(|r| span::reduce(c, r, root, None));
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_broadcast_into`.
        let r = unsafe {
            reduce_typed::<S, [u8]>(
                self.comm(),
                sendbuf,
                None,
                op.into(),
                Some(self.rank()),
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    fn immediate_gather_into<'s, S: ?Sized + Buffer>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
    ) -> Result<CollectiveRequest<'s>> {
        self.not_root("immediate_gather_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let mine = unsafe { span::Lent::new(sendbuf.as_bytes()) };
            let job = move |c: &SpanComm| span::gather(c, mine.bytes(), root, None);
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_broadcast_into`; no receive side away
        // from the root.
        let r = unsafe { gather_to(self.comm(), self.rank(), sendbuf, None, Mode::Start) };
        in_scope(scope, r)
    }

    fn immediate_gather_into_root<'s, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>> {
        self.is_root("immediate_gather_into_root")?;
        let n = self.comm().size() as usize;
        let (c, d) = even(elements_mut(recvbuf), n, "immediate_gather_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            let p = span::places(&c, &d, recvbuf.element_size());
            // SAFETY: as in `immediate_broadcast_into`.
            let (mine, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| {
                span::gather(c, mine.bytes(), root, Some((out.bytes_mut(), &p[..])))
            };
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        let rdt = recvbuf.element_datatype_ref();
        let recv = recvbuf.as_bytes_mut().as_mut_ptr();
        // SAFETY: as in `immediate_broadcast_into`; `recvbuf` holds `n`
        // pieces of `c[r]` elements.
        let r = unsafe {
            gather_to(
                self.comm(),
                self.rank(),
                sendbuf,
                Some((recv, &c, &d, &rdt)),
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    fn immediate_gather_varcount_into<'s, S: ?Sized + Buffer>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
    ) -> Result<CollectiveRequest<'s>> {
        self.not_root("immediate_gather_varcount_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let mine = unsafe { span::Lent::new(sendbuf.as_bytes()) };
            let job = move |c: &SpanComm| span::gather(c, mine.bytes(), root, None);
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_gather_into`.
        let r = unsafe { gather_to(self.comm(), self.rank(), sendbuf, None, Mode::Start) };
        in_scope(scope, r)
    }

    fn immediate_gather_varcount_into_root<'s, S, R, C, D>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut PartitionMut<'_, R, C, D>,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        self.is_root("immediate_gather_varcount_into_root")?;
        let total = elements_mut(recvbuf.buf);
        let (c, d) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            let p = span::places(&c, &d, recvbuf.buf.element_size());
            // SAFETY: as in `immediate_broadcast_into`.
            let (mine, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.buf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| {
                span::gather(c, mine.bytes(), root, Some((out.bytes_mut(), &p[..])))
            };
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        let rdt = recvbuf.buf.element_datatype_ref();
        let recv = recvbuf.buf.as_bytes_mut().as_mut_ptr();
        // SAFETY: as in `immediate_broadcast_into`; the pieces were
        // checked against the buffer.
        let r = unsafe {
            gather_to(
                self.comm(),
                self.rank(),
                sendbuf,
                Some((recv, &c, &d, &rdt)),
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    fn immediate_scatter_into<'s, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>> {
        self.not_root("immediate_scatter_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let mut out = unsafe { span::Lent::new_mut(recvbuf.as_bytes_mut()) };
            let job = move |c: &SpanComm| span::scatter(c, None, root, out.bytes_mut());
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_broadcast_into`; no send side away from
        // the root.
        let r = unsafe { scatter_from(self.comm(), self.rank(), None, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    fn immediate_scatter_into_root<'s, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s S,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>> {
        self.is_root("immediate_scatter_into_root")?;
        let n = self.comm().size() as usize;
        let (c, d) = even(elements(sendbuf), n, "immediate_scatter_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            let p = span::places(&c, &d, sendbuf.element_size());
            // SAFETY: as in `immediate_broadcast_into`.
            let (send, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.as_bytes()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| {
                span::scatter(c, Some((send.bytes(), &p[..])), root, out.bytes_mut())
            };
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        let sdt = sendbuf.element_datatype_ref();
        let send = sendbuf.as_bytes().as_ptr();
        // SAFETY: as in `immediate_broadcast_into`; `sendbuf` holds `n`
        // pieces of `c[r]` elements.
        let r = unsafe {
            scatter_from(
                self.comm(),
                self.rank(),
                Some((send, &c, &d, &sdt)),
                recvbuf,
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }

    fn immediate_scatter_varcount_into<'s, R: ?Sized + BufferMut>(
        &self,
        scope: &'s Scope<'s, '_>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>> {
        self.not_root("immediate_scatter_varcount_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            // SAFETY: as in `immediate_broadcast_into`.
            let mut out = unsafe { span::Lent::new_mut(recvbuf.as_bytes_mut()) };
            let job = move |c: &SpanComm| span::scatter(c, None, root, out.bytes_mut());
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        // SAFETY: as in `immediate_scatter_into`.
        let r = unsafe { scatter_from(self.comm(), self.rank(), None, recvbuf, Mode::Start) };
        in_scope(scope, r)
    }

    fn immediate_scatter_varcount_into_root<'s, S, R, C, D>(
        &self,
        scope: &'s Scope<'s, '_>,
        sendbuf: &'s Partition<'_, S, C, D>,
        recvbuf: &'s mut R,
    ) -> Result<CollectiveRequest<'s>>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        self.is_root("immediate_scatter_varcount_into_root")?;
        let (c, d) = layout(
            sendbuf.counts.borrow(),
            sendbuf.displs.borrow(),
            elements(sendbuf.buf),
        )?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            let p = span::places(&c, &d, sendbuf.buf.element_size());
            // SAFETY: as in `immediate_broadcast_into`.
            let (send, mut out) = unsafe {
                (
                    span::Lent::new(sendbuf.buf.as_bytes()),
                    span::Lent::new_mut(recvbuf.as_bytes_mut()),
                )
            };
            let job = move |c: &SpanComm| {
                span::scatter(c, Some((send.bytes(), &p[..])), root, out.bytes_mut())
            };
            return in_scope(scope, span::start(self.comm(), s, job));
        }
        let sdt = sendbuf.buf.element_datatype_ref();
        let send = sendbuf.buf.as_bytes().as_ptr();
        // SAFETY: as in `immediate_broadcast_into`; the pieces were
        // checked against the buffer.
        let r = unsafe {
            scatter_from(
                self.comm(),
                self.rank(),
                Some((send, &c, &d, &sdt)),
                recvbuf,
                Mode::Start,
            )
        };
        in_scope(scope, r)
    }
}

/// The collectives rooted at a process (rsmpi's `Root`), called on
/// `comm.process_at_rank(root)` by every member.
pub trait Root {
    /// The root's `buffer` into every member's (`MPI_Bcast`).
    fn broadcast_into<B: ?Sized + BufferMut>(&self, buffer: &mut B) -> Result<()>;
    /// This member's `sendbuf` to the root (`MPI_Gather`, members other
    /// than the root).
    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) -> Result<()>;
    /// Every member's `sendbuf`, in rank order, into `recvbuf` (`MPI_Gather`
    /// at the root).
    fn gather_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) -> Result<()>;
    /// This member's `sendbuf` to the root (`MPI_Gatherv`, members other
    /// than the root).
    fn gather_varcount_into<S: ?Sized + Buffer>(&self, sendbuf: &S) -> Result<()>;
    /// Pieces of different lengths into `recvbuf` (`MPI_Gatherv` at the
    /// root).
    fn gather_varcount_into_root<S, R, C, D>(
        &self,
        sendbuf: &S,
        recvbuf: &mut PartitionMut<'_, R, C, D>,
    ) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>;
    /// This member's piece of the root's buffer (`MPI_Scatter`, members
    /// other than the root).
    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) -> Result<()>;
    /// Piece `r` of `sendbuf` to member `r` (`MPI_Scatter` at the root).
    fn scatter_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) -> Result<()>;
    /// This member's piece (`MPI_Scatterv`, members other than the root).
    fn scatter_varcount_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) -> Result<()>;
    /// Pieces of different lengths (`MPI_Scatterv` at the root).
    fn scatter_varcount_into_root<S, R, C, D>(
        &self,
        sendbuf: &Partition<'_, S, C, D>,
        recvbuf: &mut R,
    ) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>;
    /// This member's `sendbuf` into the reduction at the root
    /// (`MPI_Reduce`, members other than the root).
    fn reduce_into<S: ?Sized + Buffer, O: Into<Operation>>(&self, sendbuf: &S, op: O)
        -> Result<()>;
    /// The reduction of every member's `sendbuf`, in rank order, into
    /// `recvbuf` (`MPI_Reduce` at the root).
    fn reduce_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Into<Operation>>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) -> Result<()>;
}

impl Root for Process<'_> {
    fn broadcast_into<B: ?Sized + BufferMut>(&self, buffer: &mut B) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            return span::bcast(s, buffer.as_bytes_mut(), self.rank());
        }
        let dt = buffer.element_datatype_ref();
        let count = elements_mut(buffer);
        let p = buffer.as_bytes_mut().as_mut_ptr();
        // SAFETY: `buffer` holds `count` elements, borrowed for the call.
        unsafe { raw::bcast(self.comm(), p, count, &dt, self.rank(), Mode::Block) }.map(drop)
    }

    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) -> Result<()> {
        self.not_root("gather_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            return span::gather(s, sendbuf.as_bytes(), self.rank(), None);
        }
        let dt = sendbuf.element_datatype_ref();
        // SAFETY: `sendbuf` is borrowed for the call; no receive buffer
        // away from the root.
        unsafe {
            raw::gatherv(
                self.comm(),
                Some(send_buf(sendbuf, &dt)),
                std::ptr::null_mut(),
                &[],
                &[],
                &dt,
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn gather_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) -> Result<()> {
        self.is_root("gather_into_root")?;
        let n = self.comm().size() as usize;
        let (c, d) = even(elements_mut(recvbuf), n, "gather_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let p = span::places(&c, &d, recvbuf.element_size());
            let out = Some((recvbuf.as_bytes_mut(), &p[..]));
            return span::gather(s, sendbuf.as_bytes(), self.rank(), out);
        }
        let sdt = sendbuf.element_datatype_ref();
        let rdt = recvbuf.element_datatype_ref();
        let recv = recvbuf.as_bytes_mut().as_mut_ptr();
        // SAFETY: `recvbuf` holds `n` pieces of `c[r]` elements.
        unsafe {
            raw::gatherv(
                self.comm(),
                Some(send_buf(sendbuf, &sdt)),
                recv,
                &c,
                &d,
                &rdt,
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn gather_varcount_into<S: ?Sized + Buffer>(&self, sendbuf: &S) -> Result<()> {
        self.gather_into(sendbuf)
    }

    fn gather_varcount_into_root<S, R, C, D>(
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
        self.is_root("gather_varcount_into_root")?;
        let total = elements_mut(recvbuf.buf);
        let (c, d) = layout(recvbuf.counts.borrow(), recvbuf.displs.borrow(), total)?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let p = span::places(&c, &d, recvbuf.buf.element_size());
            let out = Some((recvbuf.buf.as_bytes_mut(), &p[..]));
            return span::gather(s, sendbuf.as_bytes(), self.rank(), out);
        }
        let sdt = sendbuf.element_datatype_ref();
        let rdt = recvbuf.buf.element_datatype_ref();
        let recv = recvbuf.buf.as_bytes_mut().as_mut_ptr();
        // SAFETY: the pieces were checked against the buffer.
        unsafe {
            raw::gatherv(
                self.comm(),
                Some(send_buf(sendbuf, &sdt)),
                recv,
                &c,
                &d,
                &rdt,
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) -> Result<()> {
        self.not_root("scatter_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            return span::scatter(s, None, self.rank(), recvbuf.as_bytes_mut());
        }
        let dt = recvbuf.element_datatype_ref();
        let count = elements_mut(recvbuf);
        let p = recvbuf.as_bytes_mut().as_ptr();
        // SAFETY: `recvbuf` holds `count` elements, borrowed for the call.
        unsafe {
            raw::scatterv(
                self.comm(),
                std::ptr::null(),
                &[],
                &[],
                &dt,
                Some(Buf {
                    ptr: p,
                    count,
                    dt: &dt,
                }),
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn scatter_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) -> Result<()> {
        self.is_root("scatter_into_root")?;
        let n = self.comm().size() as usize;
        let (c, d) = even(elements(sendbuf), n, "scatter_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let p = span::places(&c, &d, sendbuf.element_size());
            let from = Some((sendbuf.as_bytes(), &p[..]));
            return span::scatter(s, from, self.rank(), recvbuf.as_bytes_mut());
        }
        let sdt = sendbuf.element_datatype_ref();
        let rdt = recvbuf.element_datatype_ref();
        let count = elements_mut(recvbuf);
        let p = recvbuf.as_bytes_mut().as_ptr();
        // SAFETY: `sendbuf` holds `n` pieces of `c[r]` elements.
        unsafe {
            raw::scatterv(
                self.comm(),
                sendbuf.as_bytes().as_ptr(),
                &c,
                &d,
                &sdt,
                Some(Buf {
                    ptr: p,
                    count,
                    dt: &rdt,
                }),
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn scatter_varcount_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) -> Result<()> {
        self.scatter_into(recvbuf)
    }

    fn scatter_varcount_into_root<S, R, C, D>(
        &self,
        sendbuf: &Partition<'_, S, C, D>,
        recvbuf: &mut R,
    ) -> Result<()>
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        C: Borrow<[i32]>,
        D: Borrow<[i32]>,
    {
        self.is_root("scatter_varcount_into_root")?;
        let (c, d) = layout(
            sendbuf.counts.borrow(),
            sendbuf.displs.borrow(),
            elements(sendbuf.buf),
        )?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let p = span::places(&c, &d, sendbuf.buf.element_size());
            let from = Some((sendbuf.buf.as_bytes(), &p[..]));
            return span::scatter(s, from, self.rank(), recvbuf.as_bytes_mut());
        }
        let sdt = sendbuf.buf.element_datatype_ref();
        let rdt = recvbuf.element_datatype_ref();
        let count = elements_mut(recvbuf);
        let p = recvbuf.as_bytes_mut().as_ptr();
        // SAFETY: the pieces were checked against the buffer.
        unsafe {
            raw::scatterv(
                self.comm(),
                sendbuf.buf.as_bytes().as_ptr(),
                &c,
                &d,
                &sdt,
                Some(Buf {
                    ptr: p,
                    count,
                    dt: &rdt,
                }),
                self.rank(),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn reduce_into<S: ?Sized + Buffer, O: Into<Operation>>(
        &self,
        sendbuf: &S,
        op: O,
    ) -> Result<()> {
        self.not_root("reduce_into")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let root = self.rank();
            return with_reduction(sendbuf, op.into(), |r| span::reduce(s, r, root, None));
        }
        // SAFETY: `sendbuf` is borrowed for the call.
        unsafe {
            reduce_typed::<S, [u8]>(
                self.comm(),
                sendbuf,
                None,
                op.into(),
                Some(self.rank()),
                Mode::Block,
            )
        }
        .map(drop)
    }

    fn reduce_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Into<Operation>>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) -> Result<()> {
        self.is_root("reduce_into_root")?;
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let (root, out) = (self.rank(), recvbuf.as_bytes_mut());
            return with_reduction(sendbuf, op.into(), |r| span::reduce(s, r, root, Some(out)));
        }
        // SAFETY: both buffers are borrowed for the call.
        unsafe {
            reduce_typed(
                self.comm(),
                sendbuf,
                Some(recvbuf),
                op.into(),
                Some(self.rank()),
                Mode::Block,
            )
        }
        .map(drop)
    }
}

impl Process<'_> {
    fn is_root(&self, what: &str) -> Result<()> {
        if self.comm().rank() == self.rank() {
            Ok(())
        } else {
            Err(Error::Arg {
                reason: format!(
                    "{what} is for the root (rank {}); this is rank {}",
                    self.rank(),
                    self.comm().rank()
                ),
            })
        }
    }

    fn not_root(&self, what: &str) -> Result<()> {
        if self.comm().rank() != self.rank() {
            Ok(())
        } else {
            Err(Error::Arg {
                reason: format!(
                    "{what} is for ranks other than the root (rank {}); use the _root form there",
                    self.rank()
                ),
            })
        }
    }
}
