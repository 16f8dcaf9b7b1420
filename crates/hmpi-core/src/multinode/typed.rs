//! The typed API's collectives on a communicator that spans nodes: what
//! [`crate::collective::CommunicatorCollectives`] and
//! [`crate::collective::Root`] call when their communicator is one
//! ([`crate::SimpleCommunicator::spanning`]).
//!
//! The data travel through the [`SpanningCommunicator`]'s hierarchical
//! byte collectives (node phase on the heap, leaders through MPI, node
//! phase again); this module only cuts the typed buffers into the pieces
//! those take and puts the pieces back, checking that every member's
//! piece has the length its buffers say. Reductions take any
//! [`Operation`] on any datatype: the members' contributions are gathered
//! (every one, or at the root) and combined in rank order with the
//! operation (`x0 op (x1 op (… op x(n-1)))`), so the result equals the
//! flat definition whether or not the operation commutes.

use super::comm::SpanningCommunicator;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::op::{Operation, SystemOperation};

/// The bytes of each member's piece in a buffer: `(offset, length)`.
pub(crate) type Places = [(usize, usize)];

/// Places from element counts and displacements (checked against the
/// buffer already) of elements of `size` bytes.
pub(crate) fn places(counts: &[usize], displs: &[usize], size: usize) -> Vec<(usize, usize)> {
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| (d * size, c * size))
        .collect()
}

fn one_per_member(s: &SpanningCommunicator, n: usize, what: &str) -> Result<()> {
    if n == s.size() as usize {
        Ok(())
    } else {
        Err(Error::Buffer {
            reason: format!("{what}: {n} pieces for {} members", s.size()),
        })
    }
}

/// The bytes at `(at, len)` of `buf`, or [`Error::Buffer`] when they lie
/// beyond it.
fn at(buf: &[u8], (at, len): (usize, usize), what: &str) -> Result<std::ops::Range<usize>> {
    match at.checked_add(len) {
        Some(end) if end <= buf.len() => Ok(at..end),
        _ => Err(Error::Buffer {
            reason: format!(
                "{what}: a piece of {len} bytes at {at} reaches past a buffer of {}",
                buf.len()
            ),
        }),
    }
}

/// Copies `pieces[r]` to `places[r]` of `out`, each of the length its
/// place says.
fn place(out: &mut [u8], pieces: &[Vec<u8>], places: &Places, what: &str) -> Result<()> {
    for (r, (p, &pl)) in pieces.iter().zip(places).enumerate() {
        if p.len() != pl.1 {
            return Err(Error::Buffer {
                reason: format!(
                    "{what}: rank {r} gave {} bytes where {} were expected",
                    p.len(),
                    pl.1
                ),
            });
        }
        let range = at(out, pl, what)?;
        out[range].copy_from_slice(p);
    }
    Ok(())
}

/// The pieces of `buf` at `places`.
fn cut(buf: &[u8], places: &Places, what: &str) -> Result<Vec<Vec<u8>>> {
    places
        .iter()
        .map(|&pl| Ok(buf[at(buf, pl, what)?].to_vec()))
        .collect()
}

/// `MPI_Bcast` of `buf` from `root`; every member's buffer must have the
/// root's length.
pub(crate) fn bcast(s: &SpanningCommunicator, buf: &mut [u8], root: i32) -> Result<()> {
    let mut data = if s.rank() == root {
        buf.to_vec()
    } else {
        Vec::new()
    };
    s.bcast_bytes(&mut data, root)?;
    put(buf, &data, "broadcast", "the root's message")
}

/// `MPI_Allgather(v)`: every member's `mine` at its place in `out`.
pub(crate) fn all_gather(
    s: &SpanningCommunicator,
    mine: &[u8],
    out: &mut [u8],
    places: &Places,
) -> Result<()> {
    one_per_member(s, places.len(), "all_gather")?;
    let all = s.allgatherv_bytes(mine)?;
    place(out, &all, places, "all_gather")
}

/// `MPI_Gather(v)` to `root`; `out` and its places at the root only.
pub(crate) fn gather(
    s: &SpanningCommunicator,
    mine: &[u8],
    root: i32,
    out: Option<(&mut [u8], &Places)>,
) -> Result<()> {
    if let Some((_, p)) = &out {
        one_per_member(s, p.len(), "gather")?;
    }
    let all = s.gatherv_bytes(mine, root)?;
    match (all, out) {
        (Some(all), Some((buf, p))) => place(buf, &all, p, "gather"),
        _ => Ok(()),
    }
}

/// `MPI_Scatter(v)` from `root` (`from` and its places at the root only)
/// into `out`, whose length the piece must have.
pub(crate) fn scatter(
    s: &SpanningCommunicator,
    from: Option<(&[u8], &Places)>,
    root: i32,
    out: &mut [u8],
) -> Result<()> {
    let pieces = match from {
        Some((buf, p)) => {
            one_per_member(s, p.len(), "scatter")?;
            Some(cut(buf, p, "scatter")?)
        }
        None => None,
    };
    let mine = s.scatterv_bytes(pieces.as_deref(), root)?;
    put(out, &mine, "scatter", "a piece")
}

/// `MPI_Alltoall(v)`: the piece of `send` at `to[d]` to member `d`; the
/// piece from member `r` at `from[r]` of `out`.
pub(crate) fn all_to_all(
    s: &SpanningCommunicator,
    send: &[u8],
    to: &Places,
    out: &mut [u8],
    from: &Places,
) -> Result<()> {
    one_per_member(s, to.len(), "all_to_all")?;
    one_per_member(s, from.len(), "all_to_all")?;
    let got = s.alltoallv_bytes(&cut(send, to, "all_to_all")?)?;
    place(out, &got, from, "all_to_all")
}

/// `x0 op (x1 op (… op xk))` of `pieces` (contributions in rank order,
/// `count` elements of `dt` each); `None` for no pieces.
fn fold(
    pieces: &[Vec<u8>],
    count: usize,
    dt: &Datatype,
    op: &Operation,
) -> Result<Option<Vec<u8>>> {
    let Some((last, rest)) = pieces.split_last() else {
        return Ok(None);
    };
    let mut acc = last.clone();
    for (r, p) in rest.iter().enumerate().rev() {
        if p.len() != acc.len() {
            return Err(Error::Buffer {
                reason: format!(
                    "reduction: rank {r} gave {} bytes where {} were expected",
                    p.len(),
                    acc.len()
                ),
            });
        }
        // SAFETY: `p` and `acc` are distinct buffers of the same length,
        // that of `count` elements of `dt` (every member's send buffer).
        unsafe { crate::op::reduce_local_raw(p.as_ptr(), acc.as_mut_ptr(), count, dt, op) }?;
    }
    Ok(Some(acc))
}

/// `v` into `out`, which must have its length (`thing` names `v` in the
/// error of collective `what`).
fn put(out: &mut [u8], v: &[u8], what: &str, thing: &str) -> Result<()> {
    if out.len() != v.len() {
        return Err(Error::Buffer {
            reason: format!(
                "{what}: {thing} of {} bytes into a buffer of {}",
                v.len(),
                out.len()
            ),
        });
    }
    out.copy_from_slice(v);
    Ok(())
}

/// A reduction's arguments: this member's contribution, `count` elements
/// of `dt`, combined with `op`.
pub(crate) struct Reduction<'a> {
    pub send: &'a [u8],
    pub count: usize,
    pub dt: &'a Datatype,
    pub op: &'a Operation,
}

impl Reduction<'_> {
    /// Checks a predefined operation against the datatype before anything
    /// travels, so that a bad pair is an error on every member alike.
    fn check(&self) -> Result<()> {
        if let Operation::System(op) = self.op {
            if !matches!(op, SystemOperation::Replace | SystemOperation::NoOp) {
                op.element_type(self.dt)?;
            }
        }
        Ok(())
    }
}

/// `MPI_Allreduce` into `out`.
pub(crate) fn all_reduce(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    let all = s.allgatherv_bytes(r.send)?;
    let v = fold(&all, r.count, r.dt, r.op)?.unwrap_or_default();
    put(out, &v, "all_reduce", "a result")
}

/// `MPI_Reduce` to `root` (`out` at the root only).
pub(crate) fn reduce(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    root: i32,
    out: Option<&mut [u8]>,
) -> Result<()> {
    r.check()?;
    if let Some(all) = s.gatherv_bytes(r.send, root)? {
        let v = fold(&all, r.count, r.dt, r.op)?.unwrap_or_default();
        if let Some(out) = out {
            put(out, &v, "reduce", "a result")?;
        }
    }
    Ok(())
}

/// `MPI_Scan` (`exclusive`: `MPI_Exscan`, which leaves rank 0's `out` as
/// it is).
pub(crate) fn scan(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    exclusive: bool,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    let all = s.allgatherv_bytes(r.send)?;
    let me = s.rank() as usize;
    let upto = if exclusive { me } else { me + 1 };
    match fold(&all[..upto.min(all.len())], r.count, r.dt, r.op)? {
        Some(v) => put(out, &v, "scan", "a result"),
        None => Ok(()),
    }
}

/// `MPI_Reduce_scatter_block`: block `rank` (of `out.len()` bytes) of the
/// reduction into `out`.
pub(crate) fn reduce_scatter_block(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    let all = s.allgatherv_bytes(r.send)?;
    let v = fold(&all, r.count, r.dt, r.op)?.unwrap_or_default();
    let at = s.rank() as usize * out.len();
    let block = v.get(at..at + out.len()).ok_or_else(|| Error::Buffer {
        reason: format!(
            "reduce_scatter_block: {} bytes do not hold block {} of {}",
            v.len(),
            s.rank(),
            out.len()
        ),
    })?;
    out.copy_from_slice(block);
    Ok(())
}

/// A caller's buffer lent to the communicator's progress thread for one
/// nonblocking collective (the typed API's `immediate_*` forms): the
/// thread reads the send side and writes the receive side in place, and
/// the request the caller holds completes only once the thread is done
/// with both.
pub(crate) struct Lent {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a `Lent` is only made by `Lent::new` / `Lent::new_mut`, whose
// callers guarantee that the memory stays valid (and, lent mutably,
// untouched by anyone else) until the collective's request completes;
// the one thread that uses it is then the progress thread.
unsafe impl Send for Lent {}

impl Lent {
    /// Lends `b` to be read.
    ///
    /// # Safety
    /// `b` stays valid and unchanged until the request of the collective
    /// it is lent to has completed (a scope's borrow guarantees it).
    pub(crate) unsafe fn new(b: &[u8]) -> Lent {
        Lent {
            ptr: b.as_ptr().cast_mut(),
            len: b.len(),
        }
    }

    /// Lends `b` to be written.
    ///
    /// # Safety
    /// `b` stays valid and is not touched by anyone else until the request
    /// of the collective it is lent to has completed.
    pub(crate) unsafe fn new_mut(b: &mut [u8]) -> Lent {
        Lent {
            ptr: b.as_mut_ptr(),
            len: b.len(),
        }
    }

    /// The lent bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: valid and unchanged while the collective runs (the
        // constructor's contract); the slice lives no longer than `self`,
        // which the collective's job owns.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The lent bytes, to be written.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; lent mutably, nobody else touches them
        // until the collective's request has completed (`new_mut`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// Starts `f` (a blocking collective of this module on the buffers it
/// lends) on `s`'s progress thread, as a request of `comm` (the typed
/// communicator whose spanning part `s` is): the typed API's nonblocking
/// collectives across nodes.
pub(crate) fn start(
    comm: &crate::SimpleCommunicator,
    s: &SpanningCommunicator,
    f: impl FnOnce(&SpanningCommunicator) -> Result<()> + Send + 'static,
) -> Result<Option<crate::collective::CollRequest>> {
    let r = s.start_coll(f)?;
    Ok(Some(crate::collective::CollRequest::spanning(comm, r)))
}

/// A reduction's arguments owned by a nonblocking collective's job: the
/// contribution lent, the datatype and operation its own.
pub(crate) struct LentReduction {
    send: Lent,
    count: usize,
    dt: Datatype,
    op: Operation,
}

impl LentReduction {
    /// `count` elements of `dt` in `send`, combined with `op`.
    ///
    /// # Safety
    /// As [`Lent::new`] for `send`.
    pub(crate) unsafe fn new(
        send: &[u8],
        count: usize,
        dt: Datatype,
        op: Operation,
    ) -> LentReduction {
        LentReduction {
            // SAFETY: the caller's guarantee.
            send: unsafe { Lent::new(send) },
            count,
            dt,
            op,
        }
    }

    /// Runs `f` on the reduction as the blocking collectives take it.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Reduction<'_>) -> T) -> T {
        f(&Reduction {
            send: self.send.bytes(),
            count: self.count,
            dt: &self.dt,
            op: &self.op,
        })
    }
}
