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
//! [`Operation`] on any datatype and combine in rank order
//! (`x0 op (x1 op (… op x(n-1)))`), so the result equals the flat
//! definition whether or not the operation commutes: when every node
//! holds consecutive ranks, each node's leader combines its node's
//! contributions (gathered on the heap), the leaders exchange and combine
//! their partials through MPI and hand the result (or each member's part
//! of it) back on the node; otherwise the contributions are gathered
//! (every one, or at the root) and combined by each member.
//!
//! The nonblocking forms ([`Lent`], [`start`]) run the same functions on
//! the communicator's progress thread.

use super::coll::Plain;
use super::comm::SpanningCommunicator;
use crate::datatype::{BasicType, Datatype, Equivalence};
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

/// `x0 op (x1 op …)` of `pieces` (at least one), as [`fold`].
fn fold_some(pieces: &[Vec<u8>], r: &Reduction<'_>) -> Result<Vec<u8>> {
    fold(pieces, r.count, r.dt, r.op)?
        .ok_or_else(|| Error::Internal("a reduction of no contributions".into()))
}

/// `a op b`.
fn combine(a: &[u8], b: &[u8], r: &Reduction<'_>) -> Result<Vec<u8>> {
    fold_some(&[a.to_vec(), b.to_vec()], r)
}

/// On a node's leader, the node's contributions combined in rank order
/// (the node phase of the hierarchical reductions: hmpi's gather on the
/// heap); `None` on the other members. Only for nodes of consecutive
/// ranks, whose partials combine in node order.
fn node_partial(s: &SpanningCommunicator, r: &Reduction<'_>) -> Result<Option<Vec<u8>>> {
    match s.inner.local_gather(r.send)? {
        Some(node) => fold_some(&node, r).map(Some),
        None => Ok(None),
    }
}

/// On a node's leader, the reduction over every member: the node
/// partials exchanged among the leaders (`MPI_Allgatherv`) and combined
/// in node order, which is rank order when every node holds consecutive
/// ranks.
fn leaders_total(s: &SpanningCommunicator, partial: &[u8], r: &Reduction<'_>) -> Result<Vec<u8>> {
    let partials = s.inner.leaders()?.allgatherv(partial)?;
    fold_some(&partials, r)
}

/// A predefined operation on a dense datatype of one basic number type
/// (what `all_reduce_into(&x, &mut y, SystemOperation::sum())` on numbers
/// gives): [`SpanningCommunicator::all_reduce_into`]'s way, hmpi's reduce
/// and broadcast on the node and `MPI_Allreduce` among the leaders, which
/// lets MPI choose its algorithm. `None` for any other reduction (the
/// caller takes the general way); the choice depends only on the
/// operation and the datatype, the same on every member.
fn all_reduce_predefined(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    out: &mut [u8],
) -> Option<Result<()>> {
    let Operation::System(op) = r.op else {
        return None;
    };
    let dt = r.dt;
    let dense = dt.is_dense()
        && isize::try_from(dt.size()).ok() == Some(dt.extent())
        && dt.true_lower_bound() == 0;
    if !dense {
        return None;
    }
    macro_rules! by_type {
        ($($b:ident => $t:ty),* $(,)?) => {
            match dt.basic_type()? {
                $(BasicType::$b => Some(all_reduce_as::<$t>(s, r.send, out, *op)),)*
                _ => None,
            }
        };
    }
    by_type!(
        I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32,
        I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64,
    )
}

/// The bytes of `send` and `out` as `T`s through
/// [`SpanningCommunicator::all_reduce_into`] (through aligned copies when
/// a buffer is not aligned for `T`).
fn all_reduce_as<T: Plain + Equivalence + Default>(
    s: &SpanningCommunicator,
    send: &[u8],
    out: &mut [u8],
    op: SystemOperation,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    if send.len() % size != 0 || out.len() % size != 0 {
        return Err(Error::Buffer {
            reason: format!(
                "all_reduce: {} and {} bytes are not whole elements of {size}",
                send.len(),
                out.len()
            ),
        });
    }
    let aligned = |p: *const u8| p.align_offset(std::mem::align_of::<T>()) == 0;
    if aligned(send.as_ptr()) && aligned(out.as_ptr()) {
        // SAFETY: `send` holds `send.len() / size` whole `T`s at an
        // address aligned for `T`, and every bit pattern is a `T` (`Plain`).
        let send =
            unsafe { std::slice::from_raw_parts(send.as_ptr().cast::<T>(), send.len() / size) };
        // SAFETY: as above, for `out`, borrowed mutably here only.
        let out = unsafe {
            std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<T>(), out.len() / size)
        };
        return s.all_reduce_into(send, out, op);
    }
    let mut a = vec![T::default(); send.len() / size];
    let mut b = vec![T::default(); out.len() / size];
    // SAFETY: `a` holds `send.len()` bytes (whole `T`s, no padding:
    // `Plain`), distinct from `send`.
    unsafe {
        std::ptr::copy_nonoverlapping(send.as_ptr(), a.as_mut_ptr().cast::<u8>(), send.len())
    };
    s.all_reduce_into(&a, &mut b, op)?;
    // SAFETY: `b` holds `out.len()` bytes, distinct from `out`.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr().cast::<u8>(), out.as_mut_ptr(), out.len()) };
    Ok(())
}

/// `MPI_Allreduce` into `out`.
///
/// A predefined operation on numbers: [`all_reduce_predefined`].
/// Otherwise, with nodes of consecutive ranks: each leader combines its
/// node's contributions, the leaders exchange their partials and combine
/// them, and each leader broadcasts the result on its node; with nodes of
/// other ranks, every member gathers every contribution and combines them
/// in rank order.
pub(crate) fn all_reduce(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    s.active()?;
    if let Some(done) = all_reduce_predefined(s, r, out) {
        return done;
    }
    let v = if s.inner.contiguous {
        let mut v = match node_partial(s, r)? {
            Some(partial) => leaders_total(s, &partial, r)?,
            None => Vec::new(),
        };
        s.inner.local_bcast(&mut v)?;
        v
    } else {
        let all = s.allgatherv_bytes(r.send)?;
        fold(&all, r.count, r.dt, r.op)?.unwrap_or_default()
    };
    put(out, &v, "all_reduce", "a result")
}

/// `MPI_Reduce` to `root` (`out` at the root only).
///
/// Nodes of consecutive ranks: each leader combines its node's
/// contributions, the root's leader gathers the partials
/// (`MPI_Gatherv`), combines them and hands the result to the root.
/// Otherwise the root gathers every contribution.
pub(crate) fn reduce(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    root: i32,
    out: Option<&mut [u8]>,
) -> Result<()> {
    r.check()?;
    s.check_root(root)?;
    let i = &s.inner;
    let result = if i.contiguous {
        let root_node = i.node_of[root as usize] as usize;
        let root_leader = i.node_members[root_node][0];
        let mut result = None;
        if let Some(partial) = node_partial(s, r)? {
            if let Some(partials) = i.leaders()?.gatherv(&partial, root_node as i32)? {
                result = Some(fold_some(&partials, r)?);
            }
        }
        if root != root_leader {
            if i.rank == root_leader {
                let v = result
                    .take()
                    .ok_or_else(|| Error::Internal("reduce: no result at the leader".into()))?;
                i.local_send(&v, root)?;
            } else if i.rank == root {
                result = Some(i.local_recv(root_leader)?);
            }
        }
        result
    } else {
        match s.gatherv_bytes(r.send, root)? {
            Some(all) => Some(fold(&all, r.count, r.dt, r.op)?.unwrap_or_default()),
            None => None,
        }
    };
    match (result, out) {
        (Some(v), Some(out)) => put(out, &v, "reduce", "a result"),
        _ => Ok(()),
    }
}

/// `MPI_Scan` (`exclusive`: `MPI_Exscan`, which leaves rank 0's `out` as
/// it is).
///
/// Nodes of consecutive ranks: each leader folds its node's contributions
/// into per-member prefixes, the leaders exchange their node totals, and
/// each leader puts the earlier nodes' total in front of each member's
/// prefix and hands it to the member. Otherwise every member gathers
/// every contribution and folds its own prefix.
pub(crate) fn scan(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    exclusive: bool,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    s.active()?;
    let i = &s.inner;
    if !i.contiguous {
        let all = s.allgatherv_bytes(r.send)?;
        let me = s.rank() as usize;
        let upto = if exclusive { me } else { me + 1 };
        return match fold(&all[..upto.min(all.len())], r.count, r.dt, r.op)? {
            Some(v) => put(out, &v, "scan", "a result"),
            None => Ok(()),
        };
    }
    // A member's piece: a flag byte (1: a prefix follows, 0: none, for
    // rank 0 of an exclusive scan), then the prefix.
    let dealt = match i.local_gather(r.send)? {
        None => i.local_deal(None)?,
        Some(node) => {
            // The node's inclusive prefixes, member by member.
            let mut incl: Vec<Vec<u8>> = Vec::with_capacity(node.len());
            for p in &node {
                let next = match incl.last() {
                    None => p.clone(),
                    Some(a) => combine(a, p, r)?,
                };
                incl.push(next);
            }
            let total = incl.last().cloned().unwrap_or_default();
            let totals = i.leaders()?.allgatherv(&total)?;
            // Nodes of consecutive ranks are numbered in rank order: the
            // earlier nodes are those before this one.
            let earlier = fold(&totals[..i.my_node], r.count, r.dt, r.op)?;
            let mut pieces = Vec::with_capacity(node.len());
            for k in 0..node.len() {
                let local = if !exclusive {
                    Some(&incl[k])
                } else if k > 0 {
                    Some(&incl[k - 1])
                } else {
                    None
                };
                let prefix = match (&earlier, local) {
                    (Some(e), Some(l)) => Some(combine(e, l, r)?),
                    (Some(e), None) => Some(e.clone()),
                    (None, Some(l)) => Some(l.clone()),
                    (None, None) => None,
                };
                pieces.push(match prefix {
                    Some(p) => [&[1u8][..], &p].concat(),
                    None => vec![0u8],
                });
            }
            i.local_deal(Some(pieces))?
        }
    };
    match dealt.split_first() {
        Some((1, v)) => put(out, v, "scan", "a result"),
        Some((0, _)) => Ok(()),
        _ => Err(Error::Internal("scan: a damaged prefix".into())),
    }
}

/// `MPI_Reduce_scatter_block`: block `rank` (of `out.len()` bytes) of the
/// reduction into `out`.
///
/// Nodes of consecutive ranks: each leader combines its node's
/// contributions, the leaders exchange and combine their partials, and
/// each leader hands every member of its node its block. Otherwise every
/// member gathers every contribution.
pub(crate) fn reduce_scatter_block(
    s: &SpanningCommunicator,
    r: &Reduction<'_>,
    out: &mut [u8],
) -> Result<()> {
    r.check()?;
    s.active()?;
    let i = &s.inner;
    let b = out.len();
    let block = |v: &[u8], rank: i32| -> Result<Vec<u8>> {
        let at = rank as usize * b;
        v.get(at..at + b)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::Buffer {
                reason: format!(
                    "reduce_scatter_block: {} bytes do not hold block {rank} of {b}",
                    v.len()
                ),
            })
    };
    let mine = if i.contiguous {
        match node_partial(s, r)? {
            None => i.local_deal(None)?,
            Some(partial) => {
                let v = leaders_total(s, &partial, r)?;
                let members = &i.node_members[i.my_node];
                let pieces = members
                    .iter()
                    .map(|&m| block(&v, m))
                    .collect::<Result<Vec<_>>>()?;
                i.local_deal(Some(pieces))?
            }
        }
    } else {
        let all = s.allgatherv_bytes(r.send)?;
        let v = fold(&all, r.count, r.dt, r.op)?.unwrap_or_default();
        block(&v, s.rank())?
    };
    put(out, &mine, "reduce_scatter_block", "a block")
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
