//! Collectives of a [`SpanningCommunicator`], hierarchical: a node-local
//! phase on the shared heap (hmpi's own collectives and point-to-point on
//! the communicator's node-local part), an inter-node phase among one
//! leader per node (each node's lowest rank) through MPI's collectives,
//! then a node-local phase again.
//!
//! Results equal the flat definition: pieces are placed by rank, and
//! reductions combine contributions in rank order (`op` need only be
//! associative). When every node holds consecutive ranks, a reduction
//! combines each node's contributions on its leader first; otherwise every
//! contribution travels to every rank and each combines them in rank order.
//!
//! A reduction with a predefined operation on numbers
//! ([`SpanningCommunicator::all_reduce_into`]) combines on the node with
//! hmpi's operation kernels and leaves the phase between nodes to MPI's
//! `MPI_Allreduce` with MPI's datatype and operation: for large vectors on
//! nodes of equal size every member leads one slice (a reduce-scatter on
//! the heap, one `MPI_Allreduce` per slice among the members of the same
//! node index, the slices then read from their owners), else the node's
//! leader leads the whole vector (hmpi's reduce and broadcast around it).
//!
//! `scatterv`'s and `alltoallv`'s last node-local step is point-to-point
//! on the heap from the leader to each member, as is that of the scans and
//! of `reduce_scatter`: each leader combines its node's contributions, the
//! leaders exchange their node's total through MPI (`MPI_Allgatherv`), and
//! each leader hands every member of its node its own result.

use super::comm::{Inner, SpanningCommunicator};
use crate::collective::{PartitionMut, Root};
use crate::comm::{Communicator, SimpleCommunicator};
use crate::datatype::{BasicType, Datatype, Equivalence};
use crate::error::{Error, Result};
use crate::op::{reduce_local, Operation, SystemOperation};
use crate::raw;

/// Element types the typed collectives take: plain numbers, every byte
/// pattern of their size a value and no padding.
///
/// # Safety
/// Implementors have no padding and no invalid bit patterns.
pub unsafe trait Plain: Copy + 'static {}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: no padding, every bit pattern valid.
        unsafe impl Plain for $t {}
    )* };
}
plain!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

fn as_bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding, so every byte is initialised;
    // the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn from_bytes<T: Plain>(b: &[u8]) -> Result<Vec<T>> {
    let sz = std::mem::size_of::<T>().max(1);
    if b.len() % sz != 0 {
        return Err(Error::Count {
            bytes: b.len() as u64,
            element_size: sz,
            expected: None,
        });
    }
    Ok(b.chunks_exact(sz)
        // SAFETY: `c` holds size_of::<T>() bytes and every pattern is a
        // valid `T` (`Plain`); read unaligned.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
        .collect())
}

/// `acc[k] = op(acc[k], piece[k])` for every element of `piece` (the
/// bytes of a `[T]` as long as `acc`), in place.
fn fold_into<T: Plain>(acc: &mut [T], piece: &[u8], op: &impl Fn(T, T) -> T) -> Result<()> {
    let sz = std::mem::size_of::<T>().max(1);
    if piece.len() != acc.len() * sz {
        return Err(Error::Arg {
            reason: format!(
                "reduce: members give {} and {} elements",
                acc.len(),
                piece.len() / sz
            ),
        });
    }
    for (a, c) in acc.iter_mut().zip(piece.chunks_exact(sz)) {
        // SAFETY: `c` holds size_of::<T>() bytes and every pattern is a
        // valid `T` (`Plain`); read unaligned.
        let x = unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) };
        *a = op(*a, x);
    }
    Ok(())
}

/// The pieces (each the bytes of a `[T]`) combined element by element
/// with `op`, in order; all pieces must hold the same number of elements.
fn fold<T: Plain>(parts: Vec<Vec<u8>>, op: &impl Fn(T, T) -> T) -> Result<Vec<T>> {
    let mut it = parts.into_iter();
    let Some(first) = it.next() else {
        return Ok(Vec::new());
    };
    let mut acc = from_bytes::<T>(&first)?;
    for p in it {
        fold_into(&mut acc, &p, op)?;
    }
    Ok(acc)
}

/// The bytes of `v`, writable.
fn as_bytes_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: `Plain` types have no padding and every byte pattern is a
    // valid value, so any bytes written leave valid `T`s; the length is
    // the slice's size in bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

thread_local! {
    /// Each thread's scratch for the node partial of
    /// [`SpanningCommunicator::all_reduce_into`] (16-byte words, the
    /// largest alignment of a `Plain` type); it keeps the largest size
    /// asked for.
    static SCRATCH: std::cell::RefCell<Vec<u128>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `n` elements of `T` in `scratch`, grown (zeroed) as needed.
fn scratch_for<T: Plain>(scratch: &mut Vec<u128>, n: usize) -> &mut [T] {
    let words = std::mem::size_of::<T>()
        .saturating_mul(n)
        .div_ceil(std::mem::size_of::<u128>());
    if scratch.len() < words {
        scratch.resize(words, 0);
    }
    // SAFETY: the words hold at least `n · size_of::<T>()` initialised
    // bytes, aligned to 16 (at least `T`'s alignment, `Plain` types being
    // primitive numbers); every pattern is a valid `T` (`Plain`); the
    // slice borrows `scratch` exclusively.
    unsafe { std::slice::from_raw_parts_mut(scratch.as_mut_ptr().cast::<T>(), n) }
}

/// Pieces as one buffer: their count, their lengths, their bytes.
fn encode<P: AsRef<[u8]>>(pieces: &[P]) -> Vec<u8> {
    let total: usize = pieces.iter().map(|p| p.as_ref().len()).sum();
    let mut out = Vec::with_capacity(8 + 8 * pieces.len() + total);
    out.extend_from_slice(&(pieces.len() as u64).to_le_bytes());
    for p in pieces {
        out.extend_from_slice(&(p.as_ref().len() as u64).to_le_bytes());
    }
    for p in pieces {
        out.extend_from_slice(p.as_ref());
    }
    out
}

/// The pieces of an [`encode`]d buffer.
fn decode(b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let bad = || Error::Internal("a collective's pieces arrived damaged".into());
    let word = |i: usize| -> Result<usize> {
        let s = b.get(8 * i..8 * i + 8).ok_or_else(bad)?;
        let v = u64::from_le_bytes(s.try_into().map_err(|_| bad())?);
        usize::try_from(v).map_err(|_| bad())
    };
    let n = word(0)?;
    let mut at = 8usize
        .checked_mul(n.checked_add(1).ok_or_else(bad)?)
        .ok_or_else(bad)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let len = word(i + 1)?;
        let end = at.checked_add(len).ok_or_else(bad)?;
        out.push(b.get(at..end).ok_or_else(bad)?.to_vec());
        at = end;
    }
    Ok(out)
}

/// The smallest vector (bytes) that [`SpanningCommunicator::all_reduce_into`]
/// splits over lanes; smaller ones go through one leader per node.
const SLICED_MIN: usize = 4096;

/// An MPI handle moved into the sliced allreduce's middle step (a plain
/// value that MPI lets any thread use).
#[derive(Clone, Copy)]
struct SendHandle<H>(H);
// SAFETY: predefined MPI datatype and operation handles are constants of
// the library, valid on every thread.
unsafe impl<H> Send for SendHandle<H> {}

/// The tag of the node-local messages of the collectives (their own
/// communicator, so no user message can match them).
const TAG_LOCAL: i32 = 1;

impl Inner {
    fn is_leader(&self) -> bool {
        self.node_members[self.my_node][0] == self.rank
    }

    pub(super) fn leaders(&self) -> Result<&super::mpi::RawComm> {
        self.leaders.as_ref().ok_or_else(|| {
            Error::Internal("a node leader without the leaders' communicator".into())
        })
    }

    /// Whether every node holds as many members as the others, as
    /// consecutive ranks: then member `j` of each node has a lane.
    fn lanes_fit(&self) -> bool {
        self.contiguous
            && self
                .node_members
                .iter()
                .all(|m| m.len() == self.node_members[self.my_node].len())
    }

    /// This member's lane (the members of its node index on every node,
    /// in node order), made on first use: collective over every member,
    /// which all reach it in the same call (the decision to use lanes
    /// depends only on what every member knows alike).
    fn lane(&self) -> Result<&super::mpi::RawComm> {
        if let Some(l) = self.lane.get() {
            return Ok(l);
        }
        let made = self
            .remote
            .split(Some(self.coll_local.rank()), self.my_node as i32)?
            .ok_or_else(|| Error::Internal("MPI gave no lane communicator".into()))?;
        // A second caller racing here would break MPI's rule that one
        // communicator's collectives are not called concurrently; the
        // first communicator kept wins either way.
        Ok(self.lane.get_or_init(|| made))
    }

    /// Every node member's bytes at the node's leader, in rank order.
    pub(super) fn local_gather(&self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let c: &SimpleCommunicator = &self.coll_local;
        let root = c.process_at_rank(0);
        let len = mine.len() as u64;
        if c.rank() != 0 {
            root.gather_into(&len)?;
            root.gather_varcount_into(mine)?;
            return Ok(None);
        }
        let mut lens = vec![0u64; c.size() as usize];
        root.gather_into_root(&len, &mut lens[..])?;
        let mut counts = Vec::with_capacity(lens.len());
        let mut displs = Vec::with_capacity(lens.len());
        let mut at = 0usize;
        for &l in &lens {
            let l = usize::try_from(l).map_err(|_| Error::Internal("length".into()))?;
            counts.push(super::mpi::count(l)?);
            displs.push(super::mpi::count(at)?);
            at += l;
        }
        let mut all = vec![0u8; at];
        {
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(mine, &mut part)?;
        }
        Ok(Some(
            counts
                .iter()
                .zip(&displs)
                .map(|(&n, &d)| all[d as usize..(d + n) as usize].to_vec())
                .collect(),
        ))
    }

    /// The leader's bytes on every member of the node.
    pub(super) fn local_bcast(&self, data: &mut Vec<u8>) -> Result<()> {
        let root = self.coll_local.process_at_rank(0);
        let mut len = data.len() as u64;
        root.broadcast_into(&mut len)?;
        let len = usize::try_from(len).map_err(|_| Error::Internal("length".into()))?;
        data.resize(len, 0);
        root.broadcast_into(&mut data[..])
    }

    /// Sends `data` to member `to` of this node (a rank here).
    pub(super) fn local_send(&self, data: &[u8], to: i32) -> Result<()> {
        raw::send(
            &self.coll_local,
            data,
            self.local_of[to as usize],
            TAG_LOCAL,
        )
    }

    /// Receives bytes from member `from` of this node (a rank here).
    pub(super) fn local_recv(&self, from: i32) -> Result<Vec<u8>> {
        let l = self.local_of[from as usize];
        let st = raw::probe(&self.coll_local, l, TAG_LOCAL)?;
        let mut buf = vec![0u8; st.count as usize];
        let mut st = raw::Status::empty();
        raw::recv_with_status(&self.coll_local, &mut buf, l, TAG_LOCAL, &mut st)?;
        Ok(buf)
    }

    /// Piece `k` to the `k`-th member of this node (the leader keeps its
    /// own); on a member, the leader's piece for it. Called with
    /// `Some(pieces)` on the leader only.
    pub(super) fn local_deal(&self, pieces: Option<Vec<Vec<u8>>>) -> Result<Vec<u8>> {
        let members = &self.node_members[self.my_node];
        let Some(pieces) = pieces else {
            return self.local_recv(members[0]);
        };
        if pieces.len() != members.len() {
            return Err(Error::Internal("pieces for the wrong node".into()));
        }
        let mut own = Vec::new();
        for (&r, p) in members.iter().zip(pieces) {
            if r == self.rank {
                own = p;
            } else {
                self.local_send(&p, r)?;
            }
        }
        Ok(own)
    }

    /// Per node, its members' pieces in rank order, from `all` by rank.
    fn by_node<'p>(&self, all: &'p [Vec<u8>]) -> Vec<Vec<&'p [u8]>> {
        self.node_members
            .iter()
            .map(|m| m.iter().map(|&r| &all[r as usize][..]).collect())
            .collect()
    }
}

impl SpanningCommunicator {
    pub(super) fn check_root(&self, root: i32) -> Result<()> {
        self.active()?;
        if (0..self.inner.size).contains(&root) {
            Ok(())
        } else {
            Err(Error::Root {
                root,
                size: self.inner.size,
            })
        }
    }

    /// Returns once every member has called it (`MPI_Barrier`).
    pub fn barrier(&self) -> Result<()> {
        self.active()?;
        let i = &self.inner;
        i.coll_local.barrier()?;
        if i.is_leader() {
            i.leaders()?.barrier()?;
        }
        i.coll_local.barrier()
    }

    /// The root's `data` on every member (`MPI_Bcast`; the other members'
    /// `data` is replaced, whatever its length).
    pub fn bcast_bytes(&self, data: &mut Vec<u8>, root: i32) -> Result<()> {
        self.check_root(root)?;
        let i = &self.inner;
        let root_node = i.node_of[root as usize] as usize;
        let root_leader = i.node_members[root_node][0];
        if root != root_leader {
            if i.rank == root {
                i.local_send(data, root_leader)?;
            } else if i.rank == root_leader {
                *data = i.local_recv(root)?;
            }
        }
        if i.is_leader() {
            i.leaders()?.bcast(data, root_node as i32)?;
        }
        i.local_bcast(data)
    }

    /// Every member's bytes, by rank (`MPI_Allgatherv`).
    pub fn allgatherv_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.active()?;
        let i = &self.inner;
        let node = i.local_gather(mine)?;
        let mut data = Vec::new();
        if let Some(node) = node {
            let blobs = i.leaders()?.allgatherv(&encode(&node))?;
            let mut full = vec![Vec::new(); i.size as usize];
            for (n, b) in blobs.iter().enumerate() {
                for (k, p) in decode(b)?.into_iter().enumerate() {
                    full[i.node_members[n][k] as usize] = p;
                }
            }
            data = encode(&full);
        }
        i.local_bcast(&mut data)?;
        decode(&data)
    }

    /// Every member's bytes at `root`, by rank (`MPI_Gatherv`); `None`
    /// elsewhere.
    pub fn gatherv_bytes(&self, mine: &[u8], root: i32) -> Result<Option<Vec<Vec<u8>>>> {
        self.check_root(root)?;
        let i = &self.inner;
        let root_node = i.node_of[root as usize] as usize;
        let root_leader = i.node_members[root_node][0];
        let node = i.local_gather(mine)?;
        let mut full = None;
        if let Some(node) = node {
            if let Some(blobs) = i.leaders()?.gatherv(&encode(&node), root_node as i32)? {
                let mut all = vec![Vec::new(); i.size as usize];
                for (n, b) in blobs.iter().enumerate() {
                    for (k, p) in decode(b)?.into_iter().enumerate() {
                        all[i.node_members[n][k] as usize] = p;
                    }
                }
                full = Some(all);
            }
        }
        if root != root_leader {
            if i.rank == root_leader {
                let all = full
                    .take()
                    .ok_or_else(|| Error::Internal("gather".into()))?;
                i.local_send(&encode(&all), root)?;
            } else if i.rank == root {
                full = Some(decode(&i.local_recv(root_leader)?)?);
            }
        }
        Ok(full)
    }

    /// Piece `r` of the root's `pieces` to member `r` (`MPI_Scatterv`;
    /// `pieces` is read at the root only and must hold one piece per
    /// member there).
    pub fn scatterv_bytes(&self, pieces: Option<&[Vec<u8>]>, root: i32) -> Result<Vec<u8>> {
        self.check_root(root)?;
        let i = &self.inner;
        let root_node = i.node_of[root as usize] as usize;
        let root_leader = i.node_members[root_node][0];
        let mut all: Option<Vec<Vec<u8>>> = None;
        if i.rank == root {
            let p = pieces.ok_or_else(|| Error::Arg {
                reason: "scatter: the root gives no pieces".into(),
            })?;
            if p.len() != i.size as usize {
                return Err(Error::Arg {
                    reason: format!("scatter: {} pieces for {} members", p.len(), i.size),
                });
            }
            if root == root_leader {
                all = Some(p.to_vec());
            } else {
                i.local_send(&encode(p), root_leader)?;
            }
        } else if i.rank == root_leader {
            all = Some(decode(&i.local_recv(root)?)?);
        }
        if i.is_leader() {
            let blobs: Option<Vec<Vec<u8>>> = all
                .as_ref()
                .map(|a| i.by_node(a).iter().map(|n| encode(n)).collect());
            let mine = i.leaders()?.scatterv(blobs.as_deref(), root_node as i32)?;
            let pieces = decode(&mine)?;
            let members = &i.node_members[i.my_node];
            if pieces.len() != members.len() {
                return Err(Error::Internal("scatter: pieces for the wrong node".into()));
            }
            let mut own = Vec::new();
            for (&r, p) in members.iter().zip(pieces) {
                if r == i.rank {
                    own = p;
                } else {
                    i.local_send(&p, r)?;
                }
            }
            return Ok(own);
        }
        i.local_recv(i.node_members[i.my_node][0])
    }

    /// Piece `d` of `pieces` to member `d`; the piece every member sent
    /// here, by rank (`MPI_Alltoallv`).
    pub fn alltoallv_bytes(&self, pieces: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        self.active()?;
        let i = &self.inner;
        if pieces.len() != i.size as usize {
            return Err(Error::Arg {
                reason: format!("alltoall: {} pieces for {} members", pieces.len(), i.size),
            });
        }
        let node = i.local_gather(&encode(pieces))?;
        let members = &i.node_members[i.my_node];
        if let Some(node) = node {
            // outgoing[k][d]: member k of this node to rank d.
            let outgoing: Vec<Vec<Vec<u8>>> =
                node.iter().map(|b| decode(b)).collect::<Result<_>>()?;
            // To node m: for each member k here, for each member j there.
            let blobs: Vec<Vec<u8>> = i
                .node_members
                .iter()
                .map(|m| {
                    let flat: Vec<&[u8]> = outgoing
                        .iter()
                        .flat_map(|o| m.iter().map(move |&d| &o[d as usize][..]))
                        .collect();
                    encode(&flat)
                })
                .collect();
            let got = i.leaders()?.alltoallv(&blobs)?;
            // incoming[j][s]: from rank s to member j of this node.
            let mut incoming = vec![vec![Vec::new(); i.size as usize]; members.len()];
            for (n, b) in got.iter().enumerate() {
                let flat = decode(b)?;
                let src = &i.node_members[n];
                if flat.len() != src.len() * members.len() {
                    return Err(Error::Internal(
                        "alltoall: pieces for the wrong node".into(),
                    ));
                }
                for (x, p) in flat.into_iter().enumerate() {
                    incoming[x % members.len()][src[x / members.len()] as usize] = p;
                }
            }
            let mut own = Vec::new();
            for (&r, inc) in members.iter().zip(incoming) {
                if r == i.rank {
                    own = inc;
                } else {
                    i.local_send(&encode(&inc), r)?;
                }
            }
            return Ok(own);
        }
        decode(&i.local_recv(members[0])?)
    }

    /// `send` combined element by element over every member with `op`,
    /// in rank order, on every member (`MPI_Allreduce`). Every member
    /// gives the same number of elements.
    pub fn allreduce<T: Plain>(&self, send: &[T], op: impl Fn(T, T) -> T) -> Result<Vec<T>> {
        self.active()?;
        let i = &self.inner;
        if !i.contiguous {
            return fold(self.allgatherv_bytes(as_bytes(send))?, &op);
        }
        // Every member gives as many elements as this one (MPI's rule), so
        // the node phases move fixed lengths: no lengths travel, and the
        // leader combines in place.
        let c: &SimpleCommunicator = &i.coll_local;
        let root = c.process_at_rank(0);
        let mine = as_bytes(send);
        let mut out: Vec<T> = send.to_vec();
        let alone = c.size() == 1;
        if c.rank() != 0 {
            root.gather_into(mine)?;
        } else {
            if !alone {
                let mut all = vec![0u8; mine.len() * c.size() as usize];
                root.gather_into_root(mine, &mut all[..])?;
                // The leader is the node's lowest rank: `out` (its own)
                // comes first, the members' follow in rank order.
                for piece in all.chunks_exact(mine.len().max(1)).skip(1) {
                    fold_into(&mut out, piece, &op)?;
                }
            }
            // The partials have one length too: fixed-length allgather.
            let partials = i.leaders()?.allgather_fixed(as_bytes(&out))?;
            let mut pieces = partials.chunks_exact(mine.len().max(1));
            if let Some(first) = pieces.next() {
                out.copy_from_slice(&from_bytes::<T>(first)?);
                for p in pieces {
                    fold_into(&mut out, p, &op)?;
                }
            }
        }
        if !alone {
            root.broadcast_into(as_bytes_mut(&mut out))?;
        }
        Ok(out)
    }

    /// `send` combined element by element over every member with the
    /// predefined operation `op`, into `recv` on every member
    /// (`MPI_Allreduce`, rsmpi's `all_reduce_into`). Every member gives as
    /// many elements as `recv` holds.
    ///
    /// From 4 KiB on, when every node holds as many members as the others
    /// as consecutive ranks (and MPI has a handle for the type and the
    /// operation), every member leads a slice: member `j` of a node
    /// combines slice `j` of its node's vectors on the heap with hmpi's
    /// kernels in rank order, allreduces it with member `j` of every other
    /// node through MPI (one communicator per node index, made on first
    /// use), and every member copies the other slices from their owners.
    /// Otherwise the node phases are hmpi's own reduce to the node's leader and
    /// broadcast from it, combining with hmpi's operation kernels in their
    /// fixed order; between them the leaders call MPI's `MPI_Allreduce`
    /// with MPI's datatype and operation, which lets MPI pick its algorithm
    /// and gives every leader the same bytes. Either way each element's
    /// combining order is fixed, so results are the same on every member
    /// and in every call. Types and operations MPI has no handle for
    /// (128-bit integers, `REPLACE`, `NO_OP`) exchange the leaders'
    /// partials instead and combine them in node order. [`Error::Op`] for
    /// an operation MPI does not define on `T` (as node-local reductions);
    /// [`Error::Buffer`] when `send` and `recv` differ in length.
    pub fn all_reduce_into<T: Plain + Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: SystemOperation,
    ) -> Result<()> {
        self.active()?;
        if send.len() != recv.len() {
            return Err(Error::Buffer {
                reason: format!(
                    "allreduce: {} elements to send and room for {}",
                    send.len(),
                    recv.len()
                ),
            });
        }
        let dt = T::equivalent_datatype();
        let basic = match op {
            SystemOperation::Replace | SystemOperation::NoOp => dt.basic_type(),
            _ => op.element_type(&dt)?,
        };
        let Some(basic) = basic else {
            return Ok(());
        };
        if send.is_empty() {
            // Every member gives the same count (MPI's rule): all return.
            return Ok(());
        }
        let i = &self.inner;
        let c: &SimpleCommunicator = &i.coll_local;
        let alone = c.size() == 1;
        if !alone && i.lanes_fit() && std::mem::size_of_val(send) >= SLICED_MIN {
            if let (Some(mdt), Some(mop)) = (super::mpi::datatype_of(basic), super::mpi::op_of(op))
            {
                return self.all_reduce_sliced(send, recv, op, mdt, mop, &dt);
            }
        }
        let root = c.process_at_rank(0);
        if c.rank() != 0 {
            root.reduce_into(send, op)?;
            return root.broadcast_into(recv);
        }
        // The node's partial: hmpi's reduce on the heap (the leader is
        // the node's lowest rank, so local rank 0), into this thread's
        // scratch (no allocation or copy per call).
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let partial: &[T] = if alone {
                send
            } else {
                let partial = scratch_for::<T>(&mut scratch, send.len());
                root.reduce_into_root(send, &mut *partial, op)?;
                partial
            };
            self.leaders_allreduce(partial, recv, op, basic, &dt)
        })?;
        if !alone {
            root.broadcast_into(recv)?;
        }
        Ok(())
    }

    /// [`SpanningCommunicator::all_reduce_into`] with every member a
    /// leader of its slice: the node's members reduce-scatter on the heap
    /// (member `j` of the node combines slice `j` of every member's
    /// `send`, in rank order), member `j` of every node allreduces slice
    /// `j` through MPI on its lane, then each member copies the other
    /// slices from their owners on the heap — one node epoch, every
    /// member's core and MPI connection busy at once.
    fn all_reduce_sliced<T: Plain + Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: SystemOperation,
        mdt: ::mpi::ffi::MPI_Datatype,
        mop: ::mpi::ffi::MPI_Op,
        dt: &Datatype,
    ) -> Result<()> {
        let i = &self.inner;
        let lane = i.lane()?;
        let es = std::mem::size_of::<T>();
        // Raw handles are plain values; the closure runs on this thread.
        let (mdt, mop) = (SendHandle(mdt), SendHandle(mop));
        let middle = move |part: &[u8], out: &mut [u8]| {
            let (mdt, mop) = (mdt, mop);
            lane.allreduce(part, out, part.len() / es, mdt.0, mop.0)
        };
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let buf = scratch_for::<T>(&mut scratch, send.len());
            // SAFETY: `send` and `recv` hold `send.len()` elements of the
            // dense `dt` and do not overlap (a shared and an exclusive
            // borrow); `buf` is this thread's scratch of as many elements,
            // initialised.
            unsafe {
                crate::collective::raw::allreduce_sliced(
                    &i.coll_local,
                    send.as_ptr().cast(),
                    recv.as_mut_ptr().cast(),
                    send.len(),
                    dt,
                    &Operation::from(op),
                    buf.as_mut_ptr().cast(),
                    middle,
                )
            }
        })
    }

    /// The leaders' phase of [`SpanningCommunicator::all_reduce_into`]:
    /// `recv` = every node's `partial` combined with `op`.
    fn leaders_allreduce<T: Plain + Equivalence>(
        &self,
        partial: &[T],
        recv: &mut [T],
        op: SystemOperation,
        basic: BasicType,
        dt: &Datatype,
    ) -> Result<()> {
        let i = &self.inner;
        let leaders = i.leaders()?;
        match (super::mpi::datatype_of(basic), super::mpi::op_of(op)) {
            (Some(mdt), Some(mop)) => leaders.allreduce(
                as_bytes(partial),
                as_bytes_mut(recv),
                partial.len(),
                mdt,
                mop,
            )?,
            _ => {
                // Folded from the last node's partial down, each step
                // `acc = partial(n) op acc`: the nodes' order, fixed.
                let all = leaders.allgather_fixed(as_bytes(partial))?;
                let len = std::mem::size_of_val(partial);
                let mut pieces = all.chunks_exact(len).rev();
                let acc = as_bytes_mut(recv);
                acc.copy_from_slice(pieces.next().unwrap_or(&[]));
                let op = Operation::from(op);
                for p in pieces {
                    reduce_local(p, &mut *acc, partial.len(), dt, &op)?;
                }
            }
        }
        Ok(())
    }

    /// `send` combined element by element over every member with `op`,
    /// in rank order, at `root` (`MPI_Reduce`; `None` elsewhere). Each
    /// leader combines its node's contributions, the root's leader
    /// combines the leaders' partials (`MPI_Gatherv`) and hands the result
    /// to the root.
    pub fn reduce<T: Plain>(
        &self,
        send: &[T],
        op: impl Fn(T, T) -> T,
        root: i32,
    ) -> Result<Option<Vec<T>>> {
        self.check_root(root)?;
        let i = &self.inner;
        if !i.contiguous {
            return match self.gatherv_bytes(as_bytes(send), root)? {
                Some(all) => fold(all, &op).map(Some),
                None => Ok(None),
            };
        }
        let root_node = i.node_of[root as usize] as usize;
        let root_leader = i.node_members[root_node][0];
        let mut result = None;
        if let Some(node) = i.local_gather(as_bytes(send))? {
            let partial = fold(node, &op)?;
            if let Some(partials) = i.leaders()?.gatherv(as_bytes(&partial), root_node as i32)? {
                result = Some(fold(partials, &op)?);
            }
        }
        if root != root_leader {
            if i.rank == root_leader {
                let r = result
                    .take()
                    .ok_or_else(|| Error::Internal("reduce: no result at the leader".into()))?;
                i.local_send(as_bytes(&r), root)?;
            } else if i.rank == root {
                result = Some(from_bytes(&i.local_recv(root_leader)?)?);
            }
        }
        Ok(result)
    }

    /// Every member's `mine` concatenated in rank order, on every member
    /// (`MPI_Allgather`).
    pub fn all_gather<T: Plain>(&self, mine: &[T]) -> Result<Vec<T>> {
        let parts = self.allgatherv_bytes(as_bytes(mine))?;
        from_bytes(&parts.concat())
    }

    /// Every member's `mine` concatenated in rank order, at `root`
    /// (`MPI_Gather`).
    pub fn gather<T: Plain>(&self, mine: &[T], root: i32) -> Result<Option<Vec<T>>> {
        match self.gatherv_bytes(as_bytes(mine), root)? {
            Some(parts) => from_bytes(&parts.concat()).map(Some),
            None => Ok(None),
        }
    }

    /// Block `r` of `count` elements of the root's `send` to member `r`
    /// (`MPI_Scatter`; `send` is read at the root only).
    pub fn scatter<T: Plain>(&self, send: Option<&[T]>, count: usize, root: i32) -> Result<Vec<T>> {
        let pieces = match (self.inner.rank == root, send) {
            (true, Some(s)) => {
                if s.len() != count * self.inner.size as usize {
                    return Err(Error::Arg {
                        reason: format!(
                            "scatter: {} elements for {} members of {count}",
                            s.len(),
                            self.inner.size
                        ),
                    });
                }
                let chunk = count.max(1);
                Some(
                    s.chunks(chunk)
                        .map(|c| as_bytes(&c[..count.min(c.len())]).to_vec())
                        .chain(std::iter::repeat_with(Vec::new))
                        .take(self.inner.size as usize)
                        .collect::<Vec<_>>(),
                )
            }
            _ => None,
        };
        from_bytes(&self.scatterv_bytes(pieces.as_deref(), root)?)
    }

    /// Block `d` of `count` elements of `send` to member `d`; the blocks
    /// received, in rank order (`MPI_Alltoall`).
    pub fn all_to_all<T: Plain>(&self, send: &[T], count: usize) -> Result<Vec<T>> {
        if send.len() != count * self.inner.size as usize {
            return Err(Error::Arg {
                reason: format!(
                    "alltoall: {} elements for {} members of {count}",
                    send.len(),
                    self.inner.size
                ),
            });
        }
        let pieces: Vec<Vec<u8>> = (0..self.inner.size as usize)
            .map(|d| as_bytes(&send[d * count..(d + 1) * count]).to_vec())
            .collect();
        from_bytes(&self.alltoallv_bytes(&pieces)?.concat())
    }

    /// The inclusive prefixes of `send` (`MPI_Scan`): on member `r`, the
    /// contributions of members `0..=r` combined element by element with
    /// `op`, in rank order. Every member gives the same number of elements.
    pub fn scan<T: Plain>(&self, send: &[T], op: impl Fn(T, T) -> T) -> Result<Vec<T>> {
        self.active()?;
        let own = self.prefix(send, &op, true)?;
        own.ok_or_else(|| Error::Internal("scan: no prefix".into()))
    }

    /// The exclusive prefixes of `send` (`MPI_Exscan`): on member `r > 0`,
    /// the contributions of members `0..r` combined with `op` in rank
    /// order; `None` on member 0 (MPI leaves its buffer undefined).
    pub fn exscan<T: Plain>(&self, send: &[T], op: impl Fn(T, T) -> T) -> Result<Option<Vec<T>>> {
        self.active()?;
        self.prefix(send, &op, false)
    }

    /// The prefix of this member (inclusive or not): each leader folds its
    /// node's contributions into per-member prefixes, the leaders exchange
    /// their node totals, and each leader puts the earlier nodes' total in
    /// front of each member's prefix. Nodes of non-consecutive ranks: every
    /// contribution everywhere, each member folds its own prefix.
    fn prefix<T: Plain>(
        &self,
        send: &[T],
        op: &impl Fn(T, T) -> T,
        inclusive: bool,
    ) -> Result<Option<Vec<T>>> {
        let i = &self.inner;
        let upto = |r: i32| {
            if inclusive {
                r as usize + 1
            } else {
                r as usize
            }
        };
        if !i.contiguous {
            let mut all = self.allgatherv_bytes(as_bytes(send))?;
            all.truncate(upto(i.rank));
            return Ok(if all.is_empty() {
                None
            } else {
                Some(fold(all, op)?)
            });
        }
        let dealt = match i.local_gather(as_bytes(send))? {
            None => i.local_deal(None)?,
            Some(node) => {
                let members = &i.node_members[i.my_node];
                // The node's inclusive prefixes, member by member.
                let mut incl: Vec<Vec<T>> = Vec::with_capacity(node.len());
                for p in node {
                    let v = from_bytes::<T>(&p)?;
                    let next = match incl.last() {
                        None => v,
                        Some(a) => fold(vec![as_bytes(a).to_vec(), p], op)?,
                    };
                    incl.push(next);
                }
                let total = incl.last().cloned().unwrap_or_default();
                let totals = i.leaders()?.allgatherv(as_bytes(&total))?;
                // Nodes are numbered in rank order when ranks are
                // consecutive: the earlier nodes are those before this one.
                let before: Vec<Vec<u8>> = totals.into_iter().take(i.my_node).collect();
                let earlier = if before.is_empty() {
                    None
                } else {
                    Some(fold::<T>(before, op)?)
                };
                let mut pieces = Vec::with_capacity(members.len());
                for k in 0..members.len() {
                    let local = if inclusive {
                        Some(&incl[k])
                    } else if k > 0 {
                        Some(&incl[k - 1])
                    } else {
                        None
                    };
                    let p = match (&earlier, local) {
                        (Some(e), Some(l)) => {
                            let v =
                                fold::<T>(vec![as_bytes(e).to_vec(), as_bytes(l).to_vec()], op)?;
                            encode(&[as_bytes(&v)])
                        }
                        (Some(e), None) => encode(&[as_bytes(e)]),
                        (None, Some(l)) => encode(&[as_bytes(l)]),
                        (None, None) => encode::<&[u8]>(&[]),
                    };
                    pieces.push(p);
                }
                i.local_deal(Some(pieces))?
            }
        };
        let mut got = decode(&dealt)?;
        match got.pop() {
            Some(b) if got.is_empty() => from_bytes(&b).map(Some),
            None => Ok(None),
            Some(_) => Err(Error::Internal("scan: a damaged prefix".into())),
        }
    }

    /// `send` combined element by element over every member with `op` in
    /// rank order, cut into consecutive blocks of `counts[r]` elements,
    /// block `r` on member `r` (`MPI_Reduce_scatter`). Every member gives
    /// the same `counts` and `counts.iter().sum()` elements.
    pub fn reduce_scatter<T: Plain>(
        &self,
        send: &[T],
        counts: &[usize],
        op: impl Fn(T, T) -> T,
    ) -> Result<Vec<T>> {
        self.active()?;
        let i = &self.inner;
        if counts.len() != i.size as usize {
            return Err(Error::Arg {
                reason: format!(
                    "reduce_scatter: {} counts for {} members",
                    counts.len(),
                    i.size
                ),
            });
        }
        let total: usize = counts.iter().sum();
        if send.len() != total {
            return Err(Error::Arg {
                reason: format!(
                    "reduce_scatter: {} elements where the counts add up to {total}",
                    send.len()
                ),
            });
        }
        let start: usize = counts[..i.rank as usize].iter().sum();
        let mine = start..start + counts[i.rank as usize];
        if !i.contiguous {
            let all = fold(self.allgatherv_bytes(as_bytes(send))?, &op)?;
            return Ok(all[mine].to_vec());
        }
        let dealt = match i.local_gather(as_bytes(send))? {
            None => i.local_deal(None)?,
            Some(node) => {
                let partial = fold(node, &op)?;
                let partials = i.leaders()?.allgatherv(as_bytes(&partial))?;
                let all = fold::<T>(partials, &op)?;
                if all.len() != total {
                    return Err(Error::Arg {
                        reason: "reduce_scatter: members give different counts".into(),
                    });
                }
                let members = &i.node_members[i.my_node];
                let pieces = members
                    .iter()
                    .map(|&r| {
                        let s: usize = counts[..r as usize].iter().sum();
                        as_bytes(&all[s..s + counts[r as usize]]).to_vec()
                    })
                    .collect();
                i.local_deal(Some(pieces))?
            }
        };
        from_bytes(&dealt)
    }

    /// `send` (`count` elements per member, `count · size` in all)
    /// combined with `op` in rank order; block `r` on member `r`
    /// (`MPI_Reduce_scatter_block`).
    pub fn reduce_scatter_block<T: Plain>(
        &self,
        send: &[T],
        count: usize,
        op: impl Fn(T, T) -> T,
    ) -> Result<Vec<T>> {
        let counts = vec![count; self.inner.size as usize];
        self.reduce_scatter(send, &counts, op)
    }
}
