//! The context of the global address space ([`Pgas`]): the team table,
//! the segment table, the local pool, and the calls that resolve a global
//! pointer to a window, a rank and an address.
//!
//! # Segments
//!
//! Every segment is one window of the runtime below (`hmpi_core::window`),
//! opened with `lock_all` once when it is made and closed when it is
//! freed: operations never open an epoch of their own, so two overlapping
//! non-blocking puts to one target never meet a lock (the thesis' reason).
//!
//! * Segment 0 is the units' **local pools**: one window over the team of
//!   all units, each unit's part `HMPI_PGAS_POOL` bytes (a power of two,
//!   8 MiB by default), handed out by a buddy allocator without talking
//!   to anyone ([`Pgas::memalloc`], [`Pgas::memfree`]).
//! * Segments 1, 2, … are **team allocations**
//!   ([`Pgas::team_memalloc_aligned`], [`Pgas::team_memfree`]): the same
//!   number of bytes at every unit of a team, so offsets are symmetric.
//!   The members agree on the id (the largest next id any of them would
//!   use), so in every unit ids increase and are never reused.
//!
//! Each segment keeps its translation table: team-relative unit → the
//! address and size of its part. The node heap is mapped at one address
//! in every rank, so that address is valid here, and a global pointer to
//! any unit of the node converts to a local pointer ([`Pgas::local_ptr`]).
//!
//! # Across nodes
//!
//! With feature `mpi`, under `mpirun`, the units of a team may sit on
//! several nodes (the team's communicator spans them). A segment of such a
//! team is then two windows over the same memory: the runtime's window of
//! the team's units on this node, which the direct path reaches by
//! address as above, and an MPI window over every unit's part
//! ([`hmpi_core::multinode::NetWindow`], in a `lock_all` epoch from
//! allocation to free) for the units of other nodes: put and get to them
//! are `MPI_Put` / `MPI_Get` and a flush. Atomics in such a segment take
//! MPI's way for every unit, this node's too, since MPI makes atomics on
//! one element atomic only with respect to each other.

use crate::buddy::Buddy;
use crate::direct::{self, Fast, Part, Pin, NOT_MEMBER};
use crate::error::{arg, team_err, Error, Result};
use crate::gptr::{GlobalPtr, Gptr};
pub(crate) use crate::net::Net;
use crate::team::{Table, Team, MAP_WORDS};
use hmpi_core::comm::SimpleCommunicator;
use hmpi_core::datatype::{Datatype, Equivalence};
use hmpi_core::op::SystemOperation;
use hmpi_core::traits::{Communicator, CommunicatorCollectives, Root};
use hmpi_core::window::{assert, Win};
use hmpi_core::Group;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The local pool's size when `HMPI_PGAS_POOL` is not set.
pub const DEFAULT_POOL: u64 = 8 << 20;

/// The offset in unit 0's pool of the job's team-id counter (inside the
/// reserved block at offset 0, which no allocation gets).
const TEAM_COUNTER: u64 = 8;

/// A segment: its windows, team and translation table.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) team: Team,
    /// The window of the team's units on this node (all of them unless
    /// the team spans nodes).
    pub(crate) win: Win,
    /// The MPI window over every unit's part, when the team spans nodes.
    pub(crate) net: Option<Net>,
    /// Per team-relative unit: the address of its part (in its node's
    /// heap).
    pub(crate) bases: Vec<u64>,
    /// Per team-relative unit: the bytes of its part.
    pub(crate) sizes: Vec<u64>,
}

impl Segment {
    /// Team unit `rank`'s rank in [`Segment::win`], if it is on this node.
    pub(crate) fn here(&self, rank: i32) -> Option<i32> {
        match &self.net {
            Some(n) => n.on_node(rank),
            None => Some(rank),
        }
    }

    /// Frees the segment's windows (collective over its team; the MPI
    /// window goes before the memory it exposes).
    fn close(self) -> Result<()> {
        let Segment { net, win, .. } = self;
        // Collective (`MPI_Win_free`), before the memory goes.
        if let Some(n) = net {
            n.free();
        }
        win.unlock_all()?;
        Ok(win.free()?)
    }
}

/// The windows of a segment of `nbytes` at every unit of `comm`: the
/// runtime's (over this node's units when `comm` spans nodes) and, then,
/// the MPI window over every part; both in a `lock_all` epoch.
fn open(comm: &SimpleCommunicator, nbytes: u64) -> Result<(Win, Option<Net>)> {
    #[cfg(feature = "mpi")]
    if let Some(span) = comm.spanning() {
        if span.nodes() == 1 {
            // Every unit is on this node (ranked alike in its
            // communicator): the node's window serves them all. (MPI is
            // not asked: Open MPI 4.1 makes no window on a communicator of
            // one process under MPI_THREAD_MULTIPLE.)
            let win = Win::allocate(span.node_comm(), nbytes, 1)?;
            win.lock_all(assert::NOCHECK)?;
            return Ok((win, None));
        }
        // The segment is closed with the MPI window first.
        let (win, net) = Net::allocate(span, Ok(nbytes), 1)?;
        return Ok((win, Some(net)));
    }
    let win = Win::allocate(comm, nbytes, 1)?;
    win.lock_all(assert::NOCHECK)?;
    Ok((win, None))
}

#[derive(Debug, Default)]
struct Segments {
    map: HashMap<u16, Segment>,
    freed: HashSet<u16>,
    /// The id this unit would give the next team allocation.
    next: u32,
}

/// Where a global pointer's bytes are.
#[derive(Debug)]
pub(crate) struct Place<'a> {
    pub(crate) seg: &'a Segment,
    /// The unit's rank in the segment's window (team-relative).
    pub(crate) rank: i32,
    /// The address of the first byte here.
    pub(crate) addr: u64,
}

impl Place<'_> {
    /// Runs `f` on the segment's MPI window (the segment spans nodes).
    /// The window's gets and atomics are complete when they return; its
    /// puts and accumulates only at the origin, so their callers flush
    /// the unit after them.
    pub(crate) fn far<R>(&self, f: impl FnOnce(&Net) -> hmpi_core::Result<R>) -> Result<R> {
        let Some(n) = &self.seg.net else {
            return Err(Error::Runtime(hmpi_core::Error::Internal(
                "a segment of one node taken for one spanning nodes".into(),
            )));
        };
        Ok(f(n)?)
    }
}

/// The global address space of one unit: create it once after the
/// runtime ([`Pgas::new`], collective over all units), and call
/// [`Pgas::finalize`] (or drop it) before the runtime is finalized.
#[derive(Debug)]
pub struct Pgas {
    all: Team,
    teams: Mutex<Table>,
    segs: RwLock<Segments>,
    pool: Mutex<Buddy>,
    /// The direct path's segment table (the same segments as `segs`).
    table: direct::Table,
    finalized: bool,
}

/// The error of a pointer whose team slot is not its segment's.
#[cold]
pub(crate) fn wrong_team(segment: u16, index: u16, flags: u16) -> Error {
    arg(format!(
        "segment {segment} belongs to the team in slot {index}, the pointer names slot {flags}"
    ))
}

/// The error of a pointer to a unit outside its segment's team.
#[cold]
pub(crate) fn not_in_team(unit: u32, team_id: u64, segment: u16) -> Error {
    Error::Unit {
        unit,
        what: format!("team {team_id} of segment {segment}"),
    }
}

/// The translation table of segment `seg`, indexed by absolute unit over
/// `nunits` units.
fn fast_table(seg: &Segment, nunits: u32) -> Fast {
    let mut parts = vec![Part::elsewhere(0, NOT_MEMBER); nunits as usize];
    for (rank, &unit) in seg.team.units().iter().enumerate() {
        if let Some(p) = parts.get_mut(unit as usize) {
            let (base, size) = (seg.bases[rank], seg.sizes[rank]);
            *p = match seg.here(rank as i32) {
                Some(_) => Part::here(base, size, rank as u32),
                None => Part::elsewhere(size, rank as u32),
            };
        }
    }
    Fast {
        index: seg.team.index(),
        team_id: seg.team.id(),
        spans: seg.net.is_some(),
        parts: parts.into_boxed_slice(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pool size from `HMPI_PGAS_POOL` (bytes).
fn pool_size() -> Result<u64> {
    match std::env::var("HMPI_PGAS_POOL") {
        Err(_) => Ok(DEFAULT_POOL),
        Ok(v) => shmheap::env::parse_size(&v)
            .map(|n| n as u64)
            .ok_or_else(|| {
                arg(format!(
                    "HMPI_PGAS_POOL={v:?}: expected a size such as 8M (a power of two)"
                ))
            }),
    }
}

impl Pgas {
    /// The global address space over the units of `world` (collective;
    /// `world` is normally the runtime's world, and a unit's absolute id
    /// is its rank in the job's world).
    pub fn new(world: &SimpleCommunicator) -> Result<Pgas> {
        let comm = world.duplicate()?;
        let size = pool_size();
        // Agree on the pool before allocating: a bad size anywhere fails
        // everywhere.
        let mine = match &size {
            Ok(s) if Buddy::new(*s).is_ok() => *s,
            _ => 0,
        };
        let mut all_sizes = vec![0u64; comm.size() as usize];
        comm.all_gather_into(&mine, &mut all_sizes[..])?;
        let size = size?;
        let buddy = Buddy::new(size)?;
        if all_sizes.iter().any(|&s| s != size) {
            return Err(arg(format!(
                "the units' local pools differ in size ({all_sizes:?} bytes): set \
                 HMPI_PGAS_POOL alike everywhere"
            )));
        }
        let (win, net) = open(&comm, size)?;
        let mut bases = vec![0u64; comm.size() as usize];
        comm.all_gather_into(&(win.base() as u64), &mut bases[..])?;
        let all = Team::new(0, 0, comm);
        let pools = Segment {
            team: all.clone(),
            win,
            net,
            bases,
            sizes: all_sizes,
        };
        let table = direct::Table::new();
        table.publish(0, fast_table(&pools, all.size()))?;
        let mut segs = Segments {
            next: 1,
            ..Segments::default()
        };
        segs.map.insert(0, pools);
        Ok(Pgas {
            teams: Mutex::new(Table::new(all.clone())),
            all,
            segs: RwLock::new(segs),
            pool: Mutex::new(buddy),
            table,
            finalized: false,
        })
    }

    /// This unit's absolute id (`dart_myid`).
    pub fn myid(&self) -> u32 {
        self.all.myid()
    }

    /// The number of units (`dart_size`).
    pub fn size(&self) -> u32 {
        self.all.size()
    }

    /// The team of all units (`DART_TEAM_ALL`, id 0, index 0).
    pub fn team_all(&self) -> &Team {
        &self.all
    }

    /// The team in slot `index` of this unit's team table.
    pub fn team_by_index(&self, index: u16) -> Result<Team> {
        lock(&self.teams)
            .get(index)
            .cloned()
            .ok_or_else(|| team_err(format!("no team in slot {index} of this unit's table")))
    }

    /// The team with id `id`, if this unit is a member.
    pub fn team_by_id(&self, id: u64) -> Option<Team> {
        lock(&self.teams).teams().find(|t| t.id() == id).cloned()
    }

    fn segs(&self) -> RwLockReadGuard<'_, Segments> {
        self.segs.read().unwrap_or_else(|p| p.into_inner())
    }

    fn segs_mut(&self) -> RwLockWriteGuard<'_, Segments> {
        self.segs.write().unwrap_or_else(|p| p.into_inner())
    }

    // ------------------------------------------------------------ teams

    /// A team of the units of `group` (absolute ids, in the group's
    /// order), a subgroup of `parent` (`dart_team_create`). Collective
    /// over `parent`; `None` at the units outside `group`. Units may pass
    /// different groups if those are disjoint: each becomes a team.
    pub fn team_create(&self, parent: &Team, group: &Group) -> Result<Option<Team>> {
        parent.check()?;
        let sub = parent.comm().split_by_subgroup_collective(group)?;
        self.register(parent.comm(), sub)
    }

    /// A team of the units of `comm` (collective over `comm`; the team
    /// works on a duplicate of it).
    pub fn team_from_comm(&self, comm: &SimpleCommunicator) -> Result<Team> {
        let dup = comm.duplicate()?;
        let t = self.register(comm, Some(dup))?;
        t.ok_or_else(|| Error::Runtime(hmpi_core::Error::Internal("a team vanished".into())))
    }

    /// Gives the new team `sub` (at its members) an id and an index:
    /// collective over `parent`.
    fn register(
        &self,
        parent: &SimpleCommunicator,
        sub: Option<SimpleCommunicator>,
    ) -> Result<Option<Team>> {
        let offer = match sub {
            Some(_) => lock(&self.teams).free_map(),
            None => [u64::MAX; MAP_WORDS],
        };
        let mut common = [0u64; MAP_WORDS];
        parent.all_reduce_into(&offer[..], &mut common[..], SystemOperation::BitwiseAnd)?;
        let Some(sub) = sub else { return Ok(None) };
        // [id, index]; index u64::MAX: the table is full at some member.
        let mut pick = [0u64; 2];
        if sub.rank() == 0 {
            pick[1] = lock(&self.teams)
                .choose(&common)
                .map_or(u64::MAX, u64::from);
            if pick[1] != u64::MAX {
                pick[0] = self.next_team_id()?;
            }
        }
        sub.process_at_rank(0).broadcast_into(&mut pick[..])?;
        if pick[1] == u64::MAX {
            return Err(team_err(format!(
                "the team table ({} slots) has no slot free at every member",
                crate::team::MAX_TEAMS
            )));
        }
        let team = Team::new(pick[0], pick[1] as u16, sub);
        lock(&self.teams).place(team.clone())?;
        Ok(Some(team))
    }

    /// The job's next team id: one atomic add on the counter in unit 0's
    /// pool.
    fn next_team_id(&self) -> Result<u64> {
        let counter = Gptr {
            unit: self.all.units()[0],
            segment: 0,
            flags: self.all.index(),
            offset: TEAM_COUNTER,
        };
        Ok(self.fetch_add(GlobalPtr::<u64>::from_raw(counter), 1)? + 1)
    }

    /// Destroys `team` (`dart_team_destroy`, collective over it): its slot
    /// is free again, its id is never used again. An error if it still
    /// owns segments, or for the team of all units.
    pub fn team_destroy(&self, team: &Team) -> Result<()> {
        team.check()?;
        if team.id() == 0 {
            return Err(team_err("the team of all units cannot be destroyed"));
        }
        let owned: Vec<u16> = self
            .segs()
            .map
            .iter()
            .filter(|(_, s)| s.team.id() == team.id())
            .map(|(&i, _)| i)
            .collect();
        if !owned.is_empty() {
            return Err(team_err(format!(
                "team {} still owns segments {owned:?}: free them first",
                team.id()
            )));
        }
        team.comm().barrier()?;
        // Release: pairs with `is_destroyed`'s Acquire (a flag only).
        team.0
            .destroyed
            .store(true, std::sync::atomic::Ordering::Release);
        lock(&self.teams).remove(team);
        Ok(())
    }

    // ------------------------------------------------------- allocation

    /// `nbytes` of this unit's local pool (`dart_memalloc`, not
    /// collective): a global pointer of segment 0 that any unit can use.
    pub fn memalloc(&self, nbytes: u64) -> Result<Gptr> {
        let offset = lock(&self.pool).alloc(nbytes)?;
        Ok(Gptr {
            unit: self.myid(),
            segment: 0,
            flags: 0,
            offset,
        })
    }

    /// Room for `n` values of `T` in the local pool.
    pub fn memalloc_typed<T>(&self, n: usize) -> Result<GlobalPtr<T>> {
        let bytes = (n as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .ok_or_else(|| arg(format!("{n} elements overflow")))?;
        Ok(GlobalPtr::from_raw(self.memalloc(bytes)?))
    }

    /// Frees an allocation of [`Pgas::memalloc`] (`dart_memfree`): only
    /// the unit that made it can.
    pub fn memfree(&self, g: Gptr) -> Result<()> {
        if g.segment != 0 {
            return Err(arg(format!(
                "memfree of {g:?}: a team allocation (free it with team_memfree)"
            )));
        }
        if g.unit != self.myid() {
            return Err(arg(format!(
                "memfree of {g:?}: unit {} allocated it, not this unit ({})",
                g.unit,
                self.myid()
            )));
        }
        lock(&self.pool).free(g.offset)
    }

    /// `nbytes` at every unit of `team` (`dart_team_memalloc_aligned`,
    /// collective over the team; every unit passes the same size): a
    /// global pointer to the first byte of the team's unit 0. Offsets are
    /// symmetric, so [`Gptr::at_unit`] reaches the others' parts.
    pub fn team_memalloc_aligned(&self, team: &Team, nbytes: u64) -> Result<Gptr> {
        team.check()?;
        let comm = team.comm();
        let (win, net) = open(comm, nbytes)?;
        let n = team.size() as usize;
        let next = u64::from(self.segs().next);
        let mine = [next, nbytes, win.base() as u64];
        let mut all = vec![0u64; 3 * n];
        comm.all_gather_into(&mine[..], &mut all[..])?;
        let id = all.chunks_exact(3).map(|c| c[0]).max().unwrap_or(next);
        let sizes: Vec<u64> = all.chunks_exact(3).map(|c| c[1]).collect();
        let bases: Vec<u64> = all.chunks_exact(3).map(|c| c[2]).collect();
        let seg = Segment {
            team: team.clone(),
            win,
            net,
            bases,
            sizes,
        };
        if seg.sizes.iter().any(|&s| s != nbytes) {
            let sizes = seg.sizes.clone();
            seg.close()?;
            return Err(arg(format!(
                "team_memalloc_aligned: the units asked for different sizes ({sizes:?} bytes)"
            )));
        }
        let Ok(id16) = u16::try_from(id) else {
            seg.close()?;
            return Err(Error::SegmentIds);
        };
        let fast = fast_table(&seg, self.size());
        let mut segs = self.segs_mut();
        self.table.publish(id16, fast)?;
        segs.next = id as u32 + 1;
        segs.map.insert(id16, seg);
        Ok(Gptr {
            unit: team.units()[0],
            segment: id16,
            flags: team.index(),
            offset: 0,
        })
    }

    /// Frees the team allocation `g` points into (`dart_team_memfree`,
    /// collective over its team). Its id is never used again; pointers
    /// into it give [`Error::FreedSegment`].
    pub fn team_memfree(&self, g: Gptr) -> Result<()> {
        if g.segment == 0 {
            return Err(arg(format!(
                "team_memfree of {g:?}: segment 0 is the local pools (free with memfree)"
            )));
        }
        let seg = {
            let mut segs = self.segs_mut();
            let Some(s) = segs.map.remove(&g.segment) else {
                return Err(Self::missing(&segs, g.segment));
            };
            segs.freed.insert(g.segment);
            s
        };
        // No access of this unit's threads may still be copying into the
        // memory when the window gives it back.
        self.table.retire(g.segment)?;
        seg.close()
    }

    fn missing(segs: &Segments, segment: u16) -> Error {
        if segs.freed.contains(&segment) {
            Error::FreedSegment { segment }
        } else {
            Error::UnknownSegment { segment }
        }
    }

    /// The team of the segment `g` points into.
    pub fn segment_team(&self, g: Gptr) -> Result<Team> {
        let segs = self.segs();
        let s = segs
            .map
            .get(&g.segment)
            .ok_or_else(|| Self::missing(&segs, g.segment))?;
        Ok(s.team.clone())
    }

    /// The bytes of unit `unit`'s part of the segment `g` points into.
    pub fn segment_size(&self, g: Gptr) -> Result<u64> {
        self.with(g, 0, |p| Ok(p.seg.sizes[p.rank as usize]))
    }

    /// Resolves `g` for an access of `len` bytes and calls `f` with where
    /// they are (under the segment table's read lock, so the segment
    /// cannot be freed meanwhile).
    pub(crate) fn with<R>(
        &self,
        g: Gptr,
        len: u64,
        f: impl FnOnce(Place<'_>) -> Result<R>,
    ) -> Result<R> {
        let segs = self.segs();
        let seg = segs
            .map
            .get(&g.segment)
            .ok_or_else(|| Self::missing(&segs, g.segment))?;
        if g.flags != seg.team.index() {
            return Err(wrong_team(g.segment, seg.team.index(), g.flags));
        }
        let rank = seg
            .team
            .world_to_unit(g.unit)
            .map_err(|_| not_in_team(g.unit, seg.team.id(), g.segment))?;
        let size = seg.sizes[rank as usize];
        if g.offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::Offset {
                segment: g.segment,
                unit: g.unit,
                offset: g.offset,
                len,
                size,
            });
        }
        f(Place {
            seg,
            rank: rank as i32,
            addr: seg.bases[rank as usize] + g.offset,
        })
    }

    /// The direct path: `g` resolved for an access of `len` bytes with the
    /// checks of [`Pgas::with`] (a live segment, a unit of its team, inside
    /// the unit's part) but no lock and no map: the address, and the pin
    /// that keeps the segment's memory allocated until it is dropped. The
    /// caller must not pin again while holding it.
    /// [`Error::Elsewhere`] for a unit on another node (with the checks
    /// passed): the caller takes the segment's MPI window.
    #[inline]
    pub(crate) fn direct(&self, g: Gptr, len: u64) -> Result<(Pin<'_>, *mut u8)> {
        let Some(pin) = self.table.pin(g.segment) else {
            return Err(self.gone(g.segment));
        };
        let a = direct::address(pin.fast, g.segment, g.flags, g.unit, g.offset, len)?;
        Ok((pin, a))
    }

    /// Calls `f` with the MPI window of the segment `g` points into (which
    /// spans nodes), `g`'s unit's rank in it and `g`'s displacement,
    /// checked for an access of `len` bytes (see [`Place::far`]).
    pub(crate) fn net<R>(
        &self,
        g: Gptr,
        len: u64,
        f: impl FnOnce(&Net, i32, u64) -> hmpi_core::Result<R>,
    ) -> Result<R> {
        self.with(g, len, |p| p.far(|n| f(n, p.rank, g.offset)))
    }

    #[cold]
    fn gone(&self, segment: u16) -> Error {
        if self.table.is_freed(segment) {
            Error::FreedSegment { segment }
        } else {
            Error::UnknownSegment { segment }
        }
    }

    /// Calls `f` with the window of the segment `g` points into, `g`'s
    /// unit's rank in it and `g`'s displacement (bytes), checked for an
    /// access of `len` bytes: for callers that need the window layer's
    /// other operations (`get_accumulate`, derived types at both ends) on
    /// global memory. The segment's `lock_all` epoch is open; `f` must not
    /// close it. The window is the node's: a segment whose team spans
    /// nodes is an [`Error::Elsewhere`] (its atomics must all take MPI's
    /// way).
    pub fn with_window<R>(
        &self,
        g: Gptr,
        len: u64,
        f: impl FnOnce(&Win, i32, u64) -> hmpi_core::Result<R>,
    ) -> Result<R> {
        self.with(g, len, |p| match p.seg.net {
            None => Ok(f(&p.seg.win, p.rank, g.offset)?),
            Some(_) => Err(Error::Elsewhere { unit: g.unit }),
        })
    }

    /// The address here of `len` bytes at `g` (checked: a live segment, a
    /// unit of its team, inside the unit's part, on this node).
    pub fn local_addr(&self, g: Gptr, len: u64) -> Result<*mut u8> {
        self.with(g, len, |p| match p.seg.here(p.rank) {
            Some(_) => Ok(p.addr as usize as *mut u8),
            None => Err(Error::Elsewhere { unit: g.unit }),
        })
    }

    /// The global pointer of the byte at `addr` in this unit's part of the
    /// segment `g` points into (`dart_gptr_setaddr`): `g` with this unit
    /// and the offset of `addr`. An [`Error::Offset`] if `addr` is outside
    /// this unit's part.
    pub fn gptr_of_addr(&self, g: Gptr, addr: *const u8) -> Result<Gptr> {
        let mine = g.at_unit(self.myid());
        let (base, size) = self.with(mine, 0, |p| {
            Ok((p.addr - mine.offset, p.seg.sizes[p.rank as usize]))
        })?;
        let a = addr as u64;
        match a.checked_sub(base) {
            Some(offset) if offset < size => Ok(Gptr { offset, ..mine }),
            _ => Err(Error::Offset {
                segment: g.segment,
                unit: self.myid(),
                offset: a.wrapping_sub(base),
                len: 1,
                size,
            }),
        }
    }

    /// The address here of the `T` at `g` (checked as
    /// [`Pgas::local_addr`], and for `T`'s alignment).
    pub fn local_ptr<T>(&self, g: GlobalPtr<T>) -> Result<*mut T> {
        let p = self.local_addr(g.raw(), std::mem::size_of::<T>() as u64)?;
        if (p as usize) % std::mem::align_of::<T>() != 0 {
            return Err(arg(format!(
                "{g:?} is not aligned for {} ({} bytes)",
                std::any::type_name::<T>(),
                std::mem::align_of::<T>()
            )));
        }
        Ok(p.cast())
    }

    /// Calls `f` with every live segment.
    pub(crate) fn each_segment(&self, mut f: impl FnMut(&Segment) -> Result<()>) -> Result<()> {
        let segs = self.segs();
        for s in segs.map.values() {
            f(s)?;
        }
        Ok(())
    }

    // ------------------------------------------------------- the end

    fn finalize_inner(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let mut segs = std::mem::take(&mut *self.segs_mut());
        let mut ids: Vec<u16> = segs.map.keys().copied().collect();
        // Ascending ids are the order the allocations were made in, at
        // every unit, so the collective frees cannot wait on each other in
        // a cycle; the pools (segment 0) last.
        ids.sort_unstable_by_key(|&i| (i == 0, i));
        let mut first = Ok(());
        for i in ids {
            if let Some(s) = segs.map.remove(&i) {
                let r = s.close();
                if first.is_ok() {
                    first = r;
                }
            }
        }
        first
    }

    /// Frees every segment (collective over all units: each team
    /// allocation still alive is freed with its team, in the order they
    /// were made, then the pools).
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_inner()
    }

    /// The raw datatype of `T`.
    pub(crate) fn dt<T: Equivalence>() -> Datatype {
        T::equivalent_datatype()
    }
}

impl Drop for Pgas {
    fn drop(&mut self) {
        // Errors cannot be returned from a drop; `finalize` reports them.
        let _ = self.finalize_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last segment id is handed out once; after it the call fails
    /// at every unit (here the only one) and nothing leaks.
    fn segment_ids_run_out_cleanly(world: &SimpleCommunicator) {
        let pg = Pgas::new(world).unwrap();
        let all = pg.team_all().clone();
        let first = pg.team_memalloc_aligned(&all, 8).unwrap();
        assert_eq!(first.segment, 1);
        pg.segs_mut().next = u32::from(u16::MAX);
        let last = pg.team_memalloc_aligned(&all, 8).unwrap();
        assert_eq!(last.segment, u16::MAX);
        assert!(matches!(
            pg.team_memalloc_aligned(&all, 8),
            Err(Error::SegmentIds)
        ));
        pg.team_memfree(last).unwrap();
        assert!(matches!(
            pg.team_memalloc_aligned(&all, 8),
            Err(Error::SegmentIds)
        ));
        // The earlier segment still works; the pools too. A local address
        // maps back to its global pointer.
        pg.put(GlobalPtr::<u64>::from_raw(first), &[5]).unwrap();
        let a = pg.local_addr(first.byte_offset(4).unwrap(), 4).unwrap();
        assert_eq!(pg.gptr_of_addr(first, a).unwrap().offset, 4);
        let past = a.wrapping_add(4);
        assert!(matches!(
            pg.gptr_of_addr(first, past),
            Err(Error::Offset { .. })
        ));
        let before = a.wrapping_sub(5);
        assert!(matches!(
            pg.gptr_of_addr(first, before),
            Err(Error::Offset { .. })
        ));
        assert_eq!(pg.get_value(GlobalPtr::<u64>::from_raw(first)).unwrap(), 5);
        let p = GlobalPtr::<u32>::from_raw(pg.memalloc(4).unwrap());
        pg.put_value(p, 9).unwrap();
        assert_eq!(pg.fetch_add(p, 1).unwrap(), 9);
        pg.memfree(p.raw()).unwrap();
        pg.finalize().unwrap();
    }

    /// The team table is bounded: 255 teams beside the team of all, then
    /// a clear error; a destroyed team's index is the next one used (the
    /// top of the free-index stack), its id is not.
    fn the_team_table_is_bounded_and_reuses_indices(world: &SimpleCommunicator) {
        let pg = Pgas::new(world).unwrap();
        let mut teams = Vec::new();
        for i in 1..crate::MAX_TEAMS {
            let t = pg.team_from_comm(world).unwrap();
            assert_eq!(usize::from(t.index()), i);
            teams.push(t);
        }
        let e = pg.team_from_comm(world).unwrap_err();
        assert!(matches!(e, Error::Team { .. }), "{e:?}");
        let gone = teams.remove(100);
        pg.team_destroy(&gone).unwrap();
        assert!(pg.team_by_index(gone.index()).is_err());
        let again = pg.team_from_comm(world).unwrap();
        assert_eq!(again.index(), gone.index());
        let max = teams.iter().map(Team::id).max().unwrap();
        assert!(again.id() > max);
        assert_eq!(pg.team_by_id(again.id()).unwrap().index(), again.index());
        for t in teams.iter().chain([&again]) {
            pg.team_destroy(t).unwrap();
        }
        pg.finalize().unwrap();
    }

    /// The runtime is initialised once per process: one test runs the
    /// parts above, each with a context of its own.
    #[test]
    fn limits_on_a_runtime_of_one_unit() {
        let universe = hmpi_core::init().unwrap();
        let world = universe.world();
        segment_ids_run_out_cleanly(&world);
        the_team_table_is_bounded_and_reuses_indices(&world);
    }
}
