//! The collectives of intercommunicators, with MPI's intercommunicator
//! semantics: data flows between the two groups, never within one.
//!
//! * rooted collectives (bcast, gather(v), scatter(v), reduce) take
//!   [`ROOT`] at the root, [`PROC_NULL`] at the other
//!   processes of the root's group, and the root's rank in the remote
//!   group at the processes of the other group;
//! * allgather(v), alltoall(v, w) and allreduce deliver the remote group's
//!   data; reduce_scatter(_block) scatters the reduction of the remote
//!   group's vectors over the local group (both groups give the same
//!   total count, as MPI requires);
//! * a barrier waits for both groups;
//! * scan and exscan are not defined on intercommunicators
//!   ([`Error::Comm`]), nor is `MPI_IN_PLACE`.
//!
//! Each collective is one all-to-all of the intercommunicator's hidden
//! merged intracommunicator ([`crate::intercomm`]), run by the ordinary
//! engine: a process sends its packed pieces to the remote members only
//! (nothing to its own group) and, when the exchange is over, unpacks
//! what arrived into its buffers — or, for reductions, combines the
//! remote vectors in remote rank order (`v0 op (v1 op (… op vn-1))`, the
//! same order on every process and in every run) and unpacks the result.
//! So the nonblocking forms are as nonblocking as the engine's all-to-all,
//! and a request of one completes through the merged communicator.

use super::raw::{exec, local, reduction, Buf, CollRequest, Mode};
use super::Combine;
use crate::comm::SimpleCommunicator;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::intercomm::InterPart;
use crate::op::Operation;
use crate::PROC_NULL;

/// The root argument of the root itself in a rooted intercommunicator
/// collective (`MPI_ROOT`).
pub const ROOT: i32 = -4;

fn part(comm: &SimpleCommunicator) -> Result<&InterPart> {
    comm.inter_part().ok_or_else(|| Error::Comm {
        reason: "not an intercommunicator".into(),
    })
}

/// Whether a rooted collective's `root` names a remote rank, this
/// process (`ROOT`) or none of the work (`PROC_NULL`).
enum Role {
    Root,
    Idle,
    Leaf(usize),
}

fn role(p: &InterPart, root: i32) -> Result<Role> {
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if (0..p.remote.size()).contains(&r) => Ok(Role::Leaf(r as usize)),
        r => Err(Error::Root {
            root: r,
            size: p.remote.size(),
        }),
    }
}

fn no_in_place(what: &str) -> Error {
    Error::Arg {
        reason: format!("MPI_IN_PLACE is not allowed in an intercommunicator {what}"),
    }
}

fn per_remote(p: &InterPart, len: usize, what: &str) -> Result<()> {
    let n = p.remote.size() as usize;
    if len != n {
        return Err(Error::Arg {
            reason: format!("{what}: {len} entries for a remote group of {n}"),
        });
    }
    Ok(())
}

/// `count` elements of `dt` at `ptr`, packed.
///
/// # Safety
/// `ptr` holds `count` elements of `dt`.
unsafe fn pack(ptr: *const u8, count: usize, dt: &Datatype) -> Result<Vec<u8>> {
    let mut v = vec![0u8; dt.packed_size(count)?];
    if !v.is_empty() {
        // SAFETY: the caller's guarantee.
        unsafe { dt.pack_raw(ptr, count, &mut v)? };
    }
    Ok(v)
}

/// Unpacks `data` into `count` elements of `dt` at `ptr`.
///
/// # Safety
/// `ptr` holds `count` writable elements of `dt`.
unsafe fn unpack(data: &[u8], ptr: usize, count: usize, dt: &Datatype) -> Result<()> {
    if !data.is_empty() {
        // SAFETY: the caller's guarantee.
        unsafe { dt.unpack_raw(data, ptr as *mut u8, count)? };
    }
    Ok(())
}

/// A slice whose borrow is not tied to its owner (which the future below
/// keeps alive).
///
/// # Safety
/// The owner outlives every use of the result and its contents stay put.
unsafe fn detach<'x, T>(b: &[T]) -> &'x [T] {
    // SAFETY: the caller's guarantee.
    unsafe { &*std::ptr::from_ref::<[T]>(b) }
}

/// The all-to-all on the merged communicator: `to[r]` is the (offset,
/// length) in `send` of the bytes for remote rank `r`, `from[r]` the
/// number of bytes expected from it; `finish` gets what arrived, each
/// remote rank's bytes at its offset, when the exchange is over.
///
/// # Safety
/// What `finish` writes to stays valid until it has run (with
/// [`Mode::Start`], until the request finishes).
unsafe fn exchange(
    p: &InterPart,
    send: Vec<u8>,
    to: &[(usize, usize)],
    from: &[usize],
    mode: Mode,
    finish: impl FnOnce(&[u8], &[usize]) -> Result<()> + Send + 'static,
) -> Result<Option<CollRequest>> {
    let m = &p.merged;
    let n = m.members() as usize;
    let (mut sc, mut sd, mut rc, mut rd) = (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
    let mut offs = Vec::with_capacity(from.len());
    let mut total = 0usize;
    for (r, (&(off, len), &got)) in to.iter().zip(from).enumerate() {
        let mr = p.merged_of_remote(r);
        (sc[mr], sd[mr]) = (len, off);
        (rc[mr], rd[mr]) = (got, total);
        offs.push(total);
        total = total.checked_add(got).ok_or_else(|| Error::Arg {
            reason: "an intercommunicator collective too large".into(),
        })?;
    }
    let Some(c) = m.coll()? else {
        return local(
            m,
            mode,
            Err(Error::Internal("a merged communicator of one".into())),
        );
    };
    let send: Box<[u8]> = send.into();
    let mut landing: Box<[u8]> = vec![0u8; total].into();
    let lp = landing.as_mut_ptr();
    let [sc, sd, rc, rd] = [sc, sd, rc, rd].map(Vec::into_boxed_slice);
    // SAFETY: the boxed buffers and arrays move into the future; their
    // heap contents stay put while it lives; the caller keeps the rest.
    let f = unsafe {
        let inner = c.ialltoallv(
            send.as_ptr(),
            detach(&sc),
            detach(&sd),
            lp,
            detach(&rc),
            detach(&rd),
        );
        async move {
            let _keep = (send, sc, sd, rc, rd);
            inner.await?;
            finish(&landing, &offs)
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(m, c, mode, f) }
}

/// `MPI_Barrier` / `MPI_Ibarrier` of an intercommunicator.
pub fn barrier(comm: &SimpleCommunicator, mode: Mode) -> Result<Option<CollRequest>> {
    super::raw::barrier(&part(comm)?.merged, mode)
}

/// `MPI_Bcast` of an intercommunicator.
///
/// # Safety
/// As [`super::raw::bcast`].
pub unsafe fn bcast(
    comm: &SimpleCommunicator,
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    match role(p, root)? {
        Role::Root => {
            // SAFETY: the caller's guarantee.
            let out = unsafe { pack(buf, count, dt)? };
            let to = vec![(0, out.len()); n];
            // SAFETY: `finish` writes nothing.
            unsafe { exchange(p, out, &to, &vec![0; n], mode, |_, _| Ok(())) }
        }
        // SAFETY: as above.
        Role::Idle => unsafe { idle(p, mode) },
        Role::Leaf(r) => {
            let len = dt.packed_size(count)?;
            let mut from = vec![0; n];
            from[r] = len;
            let (addr, dt) = (buf as usize, dt.clone());
            let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
                // SAFETY: the caller's guarantee for `buf` until the
                // collective finishes.
                unsafe { unpack(&l[o[r]..o[r] + len], addr, count, &dt) }
            };
            // SAFETY: `finish` writes only what the caller keeps valid.
            unsafe { exchange(p, Vec::new(), &vec![(0, 0); n], &from, mode, finish) }
        }
    }
}

/// A process with no part in a rooted collective still joins the
/// merged communicator's exchange, with nothing to send or receive.
///
/// # Safety
/// Nothing is borrowed.
unsafe fn idle(p: &InterPart, mode: Mode) -> Result<Option<CollRequest>> {
    let n = p.remote.size() as usize;
    // SAFETY: `finish` writes nothing.
    unsafe {
        exchange(
            p,
            Vec::new(),
            &vec![(0, 0); n],
            &vec![0; n],
            mode,
            |_, _| Ok(()),
        )
    }
}

/// Unpacks the pieces that arrived from each remote rank `r`:
/// `counts[r]` elements of `dt` at element displacement `displs[r]` of
/// the buffer at `base`.
///
/// # Safety
/// The buffer holds those pieces, writable.
unsafe fn unpack_pieces(
    l: &[u8],
    o: &[usize],
    base: usize,
    counts: &[usize],
    displs: &[usize],
    dt: &Datatype,
) -> Result<()> {
    for r in 0..counts.len() {
        let len = dt.packed_size(counts[r])?;
        let at = (base as *mut u8).wrapping_offset(displs[r] as isize * dt.extent());
        // SAFETY: the caller's guarantee for piece `r`.
        unsafe { unpack(&l[o[r]..o[r] + len], at as usize, counts[r], dt)? };
    }
    Ok(())
}

/// `MPI_Gatherv` (and `MPI_Gather`) of an intercommunicator: `recv`,
/// `counts` and `displs` (one per remote rank) are read at the root.
///
/// # Safety
/// As [`super::raw::gatherv`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn gatherv(
    comm: &SimpleCommunicator,
    send: Option<Buf<'_>>,
    recv: *mut u8,
    counts: &[usize],
    displs: &[usize],
    rdt: &Datatype,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    match role(p, root)? {
        Role::Root => {
            per_remote(p, counts.len(), "gather counts")?;
            per_remote(p, displs.len(), "gather displacements")?;
            let from = counts
                .iter()
                .map(|&c| rdt.packed_size(c))
                .collect::<Result<Vec<_>>>()?;
            let (addr, rdt) = (recv as usize, rdt.clone());
            let (counts, displs) = (counts.to_vec(), displs.to_vec());
            let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
                // SAFETY: the caller's guarantee for `recv` until the
                // collective finishes.
                unsafe { unpack_pieces(l, o, addr, &counts, &displs, &rdt) }
            };
            // SAFETY: `finish` writes only what the caller keeps valid.
            unsafe { exchange(p, Vec::new(), &vec![(0, 0); n], &from, mode, finish) }
        }
        // SAFETY: nothing borrowed.
        Role::Idle => unsafe { idle(p, mode) },
        Role::Leaf(r) => {
            let s = send.ok_or_else(|| no_in_place("gather"))?;
            // SAFETY: the caller's guarantee.
            let out = unsafe { pack(s.ptr, s.count, s.dt)? };
            let mut to = vec![(0, 0); n];
            to[r] = (0, out.len());
            // SAFETY: `finish` writes nothing.
            unsafe { exchange(p, out, &to, &vec![0; n], mode, |_, _| Ok(())) }
        }
    }
}

/// `MPI_Scatterv` (and `MPI_Scatter`) of an intercommunicator: `send`,
/// `counts` and `displs` (one per remote rank) are read at the root.
///
/// # Safety
/// As [`super::raw::scatterv`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatterv(
    comm: &SimpleCommunicator,
    send: *const u8,
    counts: &[usize],
    displs: &[usize],
    sdt: &Datatype,
    recv: Option<Buf<'_>>,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    match role(p, root)? {
        Role::Root => {
            per_remote(p, counts.len(), "scatter counts")?;
            per_remote(p, displs.len(), "scatter displacements")?;
            let mut out = Vec::new();
            let mut to = Vec::with_capacity(n);
            for r in 0..n {
                let at = send.wrapping_offset(displs[r] as isize * sdt.extent());
                // SAFETY: the caller's guarantee for piece `r`.
                let piece = unsafe { pack(at, counts[r], sdt)? };
                to.push((out.len(), piece.len()));
                out.extend_from_slice(&piece);
            }
            // SAFETY: `finish` writes nothing.
            unsafe { exchange(p, out, &to, &vec![0; n], mode, |_, _| Ok(())) }
        }
        // SAFETY: nothing borrowed.
        Role::Idle => unsafe { idle(p, mode) },
        Role::Leaf(r) => {
            let b = recv.ok_or_else(|| no_in_place("scatter"))?;
            let len = b.dt.packed_size(b.count)?;
            let mut from = vec![0; n];
            from[r] = len;
            let (addr, count, dt) = (b.ptr as usize, b.count, b.dt.clone());
            let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
                // SAFETY: the caller's guarantee for the receive buffer until the
                // collective finishes.
                unsafe { unpack(&l[o[r]..o[r] + len], addr, count, &dt) }
            };
            // SAFETY: `finish` writes only what the caller keeps valid.
            unsafe { exchange(p, Vec::new(), &vec![(0, 0); n], &from, mode, finish) }
        }
    }
}

/// `MPI_Allgatherv` (and `MPI_Allgather`) of an intercommunicator:
/// `counts` and `displs` are one per remote rank.
///
/// # Safety
/// As [`super::raw::allgatherv`].
pub unsafe fn allgatherv(
    comm: &SimpleCommunicator,
    send: Option<Buf<'_>>,
    recv: *mut u8,
    counts: &[usize],
    displs: &[usize],
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    per_remote(p, counts.len(), "allgather counts")?;
    per_remote(p, displs.len(), "allgather displacements")?;
    let s = send.ok_or_else(|| no_in_place("allgather"))?;
    // SAFETY: the caller's guarantee.
    let out = unsafe { pack(s.ptr, s.count, s.dt)? };
    let to = vec![(0, out.len()); n];
    let from = counts
        .iter()
        .map(|&c| rdt.packed_size(c))
        .collect::<Result<Vec<_>>>()?;
    let (addr, rdt) = (recv as usize, rdt.clone());
    let (counts, displs) = (counts.to_vec(), displs.to_vec());
    let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
        // SAFETY: the caller's guarantee for `recv` until the
        // collective finishes.
        unsafe { unpack_pieces(l, o, addr, &counts, &displs, &rdt) }
    };
    // SAFETY: `finish` writes only what the caller keeps valid.
    unsafe { exchange(p, out, &to, &from, mode, finish) }
}

/// `MPI_Alltoallw` (and `MPI_Alltoall(v)`) of an intercommunicator: one
/// entry per remote rank, byte displacements.
///
/// # Safety
/// As [`super::raw::alltoallw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallw(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    scounts: &[usize],
    sdispls: &[isize],
    sdts: &[&Datatype],
    recv: *mut u8,
    rcounts: &[usize],
    rdispls: &[isize],
    rdts: &[&Datatype],
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    let send = send.ok_or_else(|| no_in_place("all-to-all"))?;
    for (what, len) in [
        ("all-to-all send counts", scounts.len()),
        ("all-to-all send displacements", sdispls.len()),
        ("all-to-all send datatypes", sdts.len()),
        ("all-to-all receive counts", rcounts.len()),
        ("all-to-all receive displacements", rdispls.len()),
        ("all-to-all receive datatypes", rdts.len()),
    ] {
        per_remote(p, len, what)?;
    }
    let mut out = Vec::new();
    let mut to = Vec::with_capacity(n);
    for r in 0..n {
        // SAFETY: the caller's guarantee for piece `r`.
        let piece = unsafe { pack(send.wrapping_offset(sdispls[r]), scounts[r], sdts[r])? };
        to.push((out.len(), piece.len()));
        out.extend_from_slice(&piece);
    }
    let from = rcounts
        .iter()
        .zip(rdts)
        .map(|(&c, t)| t.packed_size(c))
        .collect::<Result<Vec<_>>>()?;
    let rdts: Vec<Datatype> = rdts.iter().map(|d| (*d).clone()).collect();
    let (addr, rcounts, rdispls) = (recv as usize, rcounts.to_vec(), rdispls.to_vec());
    let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
        for r in 0..rdts.len() {
            let len = rdts[r].packed_size(rcounts[r])?;
            let at = (addr as *mut u8).wrapping_offset(rdispls[r]) as usize;
            // SAFETY: the caller's guarantee for piece `r` of `recv`,
            // until the collective finishes.
            unsafe { unpack(&l[o[r]..o[r] + len], at, rcounts[r], &rdts[r])? };
        }
        Ok(())
    };
    // SAFETY: `finish` writes only what the caller keeps valid.
    unsafe { exchange(p, out, &to, &from, mode, finish) }
}

/// Combines the remote vectors (each `len` bytes, remote rank order) as
/// `v0 op (v1 op (… op vn-1))` and returns the packed result.
fn combine(l: &[u8], o: &[usize], len: usize, red: &super::raw::Reduction) -> Result<Vec<u8>> {
    let n = o.len();
    let Some(last) = n.checked_sub(1) else {
        return Ok(Vec::new());
    };
    let mut acc = l[o[last]..o[last] + len].to_vec();
    for r in (0..last).rev() {
        red.apply(&l[o[r]..o[r] + len], &mut acc);
    }
    match red.error() {
        Some(e) => Err(e),
        None => Ok(acc),
    }
}

/// `MPI_Reduce` (`root: Some`) and `MPI_Allreduce` (`None`) of an
/// intercommunicator: the result is the reduction of the remote group's
/// vectors.
///
/// # Safety
/// As [`super::raw::reduce`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Operation,
    root: Option<i32>,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    let (red, _) = reduction(dt, op)?;
    let len = dt.packed_size(count)?;
    let role = match root {
        None => None,
        Some(r) => Some(role(p, r)?),
    };
    let input = match (&role, send) {
        (Some(Role::Root | Role::Idle), _) => None,
        (_, Some(s)) => Some(s),
        (_, None) => return Err(no_in_place("reduction")),
    };
    let out = match input {
        // SAFETY: the caller's guarantee.
        Some(s) => unsafe { pack(s, count, dt)? },
        None => Vec::new(),
    };
    let mut to = vec![(0, 0); n];
    match role {
        None => to.iter_mut().for_each(|t| *t = (0, out.len())),
        Some(Role::Leaf(r)) => to[r] = (0, out.len()),
        Some(_) => {}
    }
    let wants = matches!(role, None | Some(Role::Root));
    let from = vec![if wants { len } else { 0 }; n];
    let (addr, dt) = (recv as usize, dt.clone());
    let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
        if !wants {
            return Ok(());
        }
        let acc = combine(l, o, len, &red)?;
        // SAFETY: the caller's guarantee for `recv` where a result is
        // wanted, until the collective finishes.
        unsafe { unpack(&acc, addr, count, &dt) }
    };
    // SAFETY: `finish` writes only what the caller keeps valid.
    unsafe { exchange(p, out, &to, &from, mode, finish) }
}

/// `MPI_Reduce_scatter` (and `_block`) of an intercommunicator: `counts`
/// are one per local rank; this process gets its block of the reduction
/// of the remote group's vectors.
///
/// # Safety
/// As [`super::raw::reduce_scatter`].
pub unsafe fn reduce_scatter(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    recv: *mut u8,
    counts: &[usize],
    dt: &Datatype,
    op: &Operation,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    let p = part(comm)?;
    let n = p.remote.size() as usize;
    let local_n = comm.members() as usize;
    if counts.len() != local_n {
        return Err(Error::Arg {
            reason: format!(
                "reduce_scatter: {} counts for a local group of {local_n}",
                counts.len()
            ),
        });
    }
    let (red, _) = reduction(dt, op)?;
    let send = send.ok_or_else(|| no_in_place("reduce_scatter"))?;
    let total: usize = counts.iter().sum();
    let len = dt.packed_size(total)?;
    // SAFETY: the caller's guarantee.
    let out = unsafe { pack(send, total, dt)? };
    let to = vec![(0, out.len()); n];
    let me = comm.my_rank() as usize;
    let before = dt.packed_size(counts[..me].iter().sum())?;
    let mine = counts[me];
    let mine_len = dt.packed_size(mine)?;
    let (addr, dt) = (recv as usize, dt.clone());
    let finish = move |l: &[u8], o: &[usize]| -> Result<()> {
        // SAFETY: the caller's guarantee for `recv` until the
        // collective finishes.
        unsafe {
            let acc = combine(l, o, len, &red)?;
            unpack(&acc[before..before + mine_len], addr, mine, &dt)
        }
    };
    // SAFETY: `finish` writes only what the caller keeps valid.
    unsafe { exchange(p, out, &to, &vec![len; n], mode, finish) }
}

/// Scans are not defined on intercommunicators.
pub fn scan() -> Result<Option<CollRequest>> {
    Err(Error::Comm {
        reason: "MPI_Scan and MPI_Exscan are not defined on intercommunicators".into(),
    })
}
