//! Communicators and groups of the C interface, on `hmpi_core`'s
//! [`SimpleCommunicator`] and [`Group`].
//!
//! A communicator handle leads to a [`CommEntry`]: the runtime's
//! communicator (ranks, size, context, rank translation, name) plus what
//! only the C interface keeps beside it (its handle and error handler).
//! `MPI_COMM_WORLD` and `MPI_COMM_SELF` live in statics set by
//! `MPI_Init`, so the common case needs no table lookup.
//!
//! In C:
//! ```c
//! MPI_Comm half;
//! MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
//! MPI_Group g, world_group;
//! MPI_Comm_group(half, &g);
//! MPI_Comm_group(MPI_COMM_WORLD, &world_group);
//! int zero = 0, in_world;
//! MPI_Group_translate_ranks(g, 1, &zero, world_group, &in_world);
//! ```

use crate::abi::{self, Comm, Group as GroupH, Info, Request};
use crate::errors::{api, api_active, api_comm, err, out, put, put_string, Handler, MpiError, Res};
use crate::handles::{Miss, Table, KIND_COMM, KIND_GROUP};
use hmpi_core::intercomm::{self, CommRelation};
use hmpi_core::traits::Communicator;
use hmpi_core::{raw, Group, GroupRelation, SimpleCommunicator};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

/// A communicator as the C interface sees it: the runtime's communicator
/// (its ranks, size, context and rank translation are `hmpi_core`'s) and
/// what only the C interface keeps beside it.
#[derive(Debug)]
pub struct CommEntry {
    pub comm: SimpleCommunicator,
    /// Its handle (passed to user error handlers).
    pub handle: Comm,
    errhandler: Mutex<Handler>,
}

impl CommEntry {
    pub(crate) fn new(comm: SimpleCommunicator, handle: Comm, errhandler: Handler) -> Self {
        CommEntry {
            handle,
            comm,
            errhandler: Mutex::new(errhandler),
        }
    }

    pub fn errhandler(&self) -> Handler {
        self.errhandler
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn set_errhandler(&self, h: Handler) {
        *self.errhandler.lock().unwrap_or_else(|p| p.into_inner()) = h;
    }
}

/// A source rank from C as `hmpi_core::raw` takes it: `MPI_ANY_SOURCE`
/// becomes the runtime's wildcard, and the runtime's wildcard value (not
/// a rank in C) becomes C's, which the runtime refuses as a rank.
#[inline(always)]
pub fn source_arg(rank: c_int) -> i32 {
    match rank {
        abi::ANY_SOURCE => raw::ANY_SOURCE,
        raw::ANY_SOURCE => abi::ANY_SOURCE,
        r => r,
    }
}

/// A receive's tag from C as `hmpi_core::raw` takes it: `MPI_ANY_TAG`
/// becomes the runtime's wildcard, and the runtime's wildcard value (not
/// a tag in C) becomes C's, which the runtime refuses as a tag.
#[inline(always)]
pub fn tag_arg(tag: c_int) -> i32 {
    match tag {
        abi::ANY_TAG => raw::ANY_TAG,
        raw::ANY_TAG => abi::ANY_TAG,
        t => t,
    }
}

/// A communicator found from its handle.
#[derive(Debug, Clone)]
pub enum CommRef {
    Static(&'static CommEntry),
    Shared(Arc<CommEntry>),
}

impl Deref for CommRef {
    type Target = CommEntry;
    #[inline]
    fn deref(&self) -> &CommEntry {
        match self {
            CommRef::Static(c) => c,
            CommRef::Shared(c) => c,
        }
    }
}

static WORLD: OnceLock<CommEntry> = OnceLock::new();
static SELF: OnceLock<CommEntry> = OnceLock::new();
static COMMS: Table<Arc<CommEntry>> = Table::new(KIND_COMM);

// C's name buffers are hmpi-core's limit.
const _: () = assert!(abi::MAX_OBJECT_NAME == hmpi_core::comm::MAX_OBJECT_NAME);
static GROUPS: Table<Arc<Group>> = Table::new(KIND_GROUP);

/// Sets up `MPI_COMM_WORLD` and `MPI_COMM_SELF` (from `MPI_Init`).
pub fn init_predefined(universe: &hmpi_core::Universe) {
    let fatal = Handler::Predefined(abi::ERRORS_ARE_FATAL);
    let _ = WORLD.set(CommEntry::new(
        universe.world(),
        abi::COMM_WORLD,
        fatal.clone(),
    ));
    let _ = SELF.set(CommEntry::new(universe.self_comm(), abi::COMM_SELF, fatal));
}

fn not_initialized() -> MpiError {
    if hmpi_core::is_finalized() {
        MpiError::new(abi::ERR_OTHER, "MPI_Finalize was already called")
    } else {
        MpiError::new(abi::ERR_OTHER, "MPI_Init has not been called")
    }
}

/// `MPI_COMM_WORLD` or `MPI_COMM_SELF` without a table lookup, for the
/// fast paths (`None`: another handle, or not initialized).
#[inline]
pub fn predefined_comm(c: Comm) -> Option<&'static CommEntry> {
    match c {
        abi::COMM_WORLD => WORLD.get(),
        abi::COMM_SELF => SELF.get(),
        _ => None,
    }
}

/// A handle of its own to the communicator `c` (the same communicator,
/// not a duplicate: no attribute callbacks run), for a persistent request
/// whose communicator the program may free first; the predefined
/// communicators are their own. [`release_held_comm`] drops it.
pub(crate) fn hold_comm(c: &CommRef) -> Res<Comm> {
    match c {
        CommRef::Static(e) => Ok(e.handle),
        CommRef::Shared(a) => COMMS
            .insert(a.clone())
            .map(Comm)
            .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many communicators")),
    }
}

/// Drops a handle made by [`hold_comm`].
pub(crate) fn release_held_comm(h: Comm) {
    if ![abi::COMM_WORLD, abi::COMM_SELF].contains(&h) {
        let _ = COMMS.remove(h.0);
    }
}

/// The communicator of a handle.
#[inline]
pub fn comm_ref(c: Comm) -> Res<CommRef> {
    match c {
        abi::COMM_WORLD | abi::COMM_SELF if hmpi_core::environment::world_finalized() => {
            Err(not_initialized())
        }
        abi::COMM_WORLD => WORLD.get().map(CommRef::Static).ok_or_else(not_initialized),
        abi::COMM_SELF => SELF.get().map(CommRef::Static).ok_or_else(not_initialized),
        abi::COMM_NULL => Err(MpiError::new(
            abi::ERR_COMM,
            "MPI_COMM_NULL is not a communicator",
        )),
        _ => COMMS.get(c.0).map(CommRef::Shared).map_err(|m| match m {
            Miss::Busy => MpiError::new(abi::ERR_COMM, "communicator in use"),
            Miss::Unknown => MpiError::new(
                abi::ERR_COMM,
                format!(
                    "{:#x} is not a communicator (freed, or another kind of handle)",
                    c.0
                ),
            ),
        }),
    }
}

/// Stores a new communicator (errors on `parent`'s handler) and writes
/// its handle to `newcomm`.
///
/// # Safety
/// `newcomm` is valid for a write.
pub(crate) unsafe fn store_comm(
    parent: &CommEntry,
    comm: Option<SimpleCommunicator>,
    newcomm: *mut Comm,
) -> Res {
    let Some(comm) = comm else {
        // SAFETY: the caller's pointer (checked non-null before the
        // collective call).
        unsafe { newcomm.write(abi::COMM_NULL) };
        return Ok(());
    };
    let errhandler = parent.errhandler();
    let h = COMMS
        .insert_with(|h| Arc::new(CommEntry::new(comm, Comm(h), errhandler)))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many communicators"))?;
    // SAFETY: as above.
    unsafe { newcomm.write(Comm(h)) };
    Ok(())
}

/// Stores a new communicator with the error handler `errhandler` (one
/// made from a group, which has no parent) and writes its handle.
///
/// # Safety
/// `newcomm` is valid for a write.
pub(crate) unsafe fn store_comm_with(
    comm: SimpleCommunicator,
    errhandler: Handler,
    newcomm: *mut Comm,
) -> Res {
    let h = COMMS
        .insert_with(|h| Arc::new(CommEntry::new(comm, Comm(h), errhandler)))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many communicators"))?;
    // SAFETY: the caller's guarantee.
    unsafe { newcomm.write(Comm(h)) };
    Ok(())
}

pub fn group_ref(g: GroupH) -> Res<Arc<Group>> {
    match g {
        abi::GROUP_EMPTY => Ok(Arc::new(Group::empty(my_world_rank()))),
        abi::GROUP_NULL => Err(MpiError::new(
            abi::ERR_GROUP,
            "MPI_GROUP_NULL is not a group",
        )),
        _ => GROUPS.get(g.0).map_err(|_| {
            MpiError::new(
                abi::ERR_GROUP,
                format!(
                    "{:#x} is not a group (freed, or another kind of handle)",
                    g.0
                ),
            )
        }),
    }
}

fn my_world_rank() -> i32 {
    hmpi_core::environment::endpoint().map_or(0, |ep| ep.rank())
}

/// Stores a group and writes its handle (`MPI_GROUP_EMPTY` when empty).
///
/// # Safety
/// `newgroup` is valid for a write when not null.
pub unsafe fn store_group(g: Group, newgroup: *mut GroupH) -> Res {
    let p = out(newgroup, "newgroup")?;
    let h = if g.size() == 0 {
        abi::GROUP_EMPTY
    } else {
        GroupH(
            GROUPS
                .insert(Arc::new(g))
                .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many groups"))?,
        )
    };
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(h) };
    Ok(())
}

/// `n` ints from C, checked.
///
/// # Safety
/// `p` is valid for `n` ints when not null.
pub unsafe fn ints<'a>(p: *const c_int, n: c_int, what: &str) -> Res<&'a [c_int]> {
    let n = usize::try_from(n)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative count {n} of {what}")))?;
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return err(abi::ERR_ARG, format!("{what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn check_distinct(ranks: &[c_int], size: c_int) -> Res {
    let mut seen = vec![false; size.max(0) as usize];
    for &r in ranks {
        let Some(s) = usize::try_from(r).ok().and_then(|i| seen.get_mut(i)) else {
            return err(
                abi::ERR_RANK,
                format!("invalid rank {r}: the group has {size} ranks"),
            );
        };
        if *s {
            return err(abi::ERR_RANK, format!("rank {r} is listed twice"));
        }
        *s = true;
    }
    Ok(())
}

/// The ranks of `(first, last, stride)` triplets.
fn expand_ranges(ranges: &[[c_int; 3]], size: c_int) -> Res<Vec<c_int>> {
    let mut v = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return err(abi::ERR_ARG, "a range with stride 0");
        }
        for end in [first, last] {
            if end < 0 || end >= size {
                return err(
                    abi::ERR_RANK,
                    format!("invalid rank {end}: the group has {size} ranks"),
                );
            }
        }
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            continue;
        }
        let mut r = first;
        loop {
            v.push(r);
            if v.len() > size as usize {
                return err(abi::ERR_RANK, "the ranges list a rank twice");
            }
            match r.checked_add(stride) {
                Some(n) if (stride > 0 && n <= last) || (stride < 0 && n >= last) => r = n,
                _ => break,
            }
        }
    }
    Ok(v)
}

/// # Safety
/// `ranges` is valid for `n` triplets when not null.
unsafe fn triplets<'a>(ranges: *const [c_int; 3], n: c_int) -> Res<&'a [[c_int; 3]]> {
    let n = usize::try_from(n)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative count {n}")))?;
    if n == 0 {
        return Ok(&[]);
    }
    if ranges.is_null() {
        return err(abi::ERR_ARG, "ranges is a null pointer");
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(ranges, n) })
}

fn relation(r: GroupRelation) -> c_int {
    match r {
        GroupRelation::Identical => abi::IDENT,
        GroupRelation::Similar => abi::SIMILAR,
        GroupRelation::Unequal => abi::UNEQUAL,
    }
}

mpi_fn! {
    /// This process's rank in `comm`.
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Comm, rank: *mut c_int) -> c_int {
        api_comm("MPI_Comm_rank", comm, |c| {
            // SAFETY: the caller's int pointer.
            unsafe { put(rank, "rank", c.comm.my_rank()) }
        })
    }

    /// The number of processes of `comm`.
    fn MPI_Comm_size / PMPI_Comm_size(comm: Comm, size: *mut c_int) -> c_int {
        api_comm("MPI_Comm_size", comm, |c| {
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", c.comm.members()) }
        })
    }

    /// A new communicator with `comm`'s group and error handler.
    fn MPI_Comm_dup / PMPI_Comm_dup(comm: Comm, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Comm_dup", comm, |c| {
            out(newcomm, "newcomm")?;
            let d = c.comm.duplicate()?;
            crate::attr::copy_comm(&c.comm, comm, &d)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(d), newcomm) }
        })
    }

    /// One communicator per color (`MPI_UNDEFINED`: none), ordered by key.
    fn MPI_Comm_split / PMPI_Comm_split(comm: Comm, color: c_int, key: c_int, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Comm_split", comm, |c| {
            out(newcomm, "newcomm")?;
            let color = match color {
                abi::UNDEFINED => None,
                c if c >= 0 => Some(c as u32),
                c => return err(abi::ERR_ARG, format!("invalid color {c}: colors are >= 0 or MPI_UNDEFINED")),
            };
            let s = c.comm.split(color, key)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, s, newcomm) }
        })
    }

    /// `MPI_COMM_TYPE_SHARED`: every process of `comm` (one node);
    /// `MPI_UNDEFINED` and the hardware-guided types: `MPI_COMM_NULL`.
    fn MPI_Comm_split_type / PMPI_Comm_split_type(
        comm: Comm,
        split_type: c_int,
        key: c_int,
        info: Info,
        newcomm: *mut Comm,
    ) -> c_int {
        api_comm("MPI_Comm_split_type", comm, |c| {
            out(newcomm, "newcomm")?;
            let hints = crate::info::hints_of(info)?;
            let color = match split_type {
                abi::COMM_TYPE_SHARED => Some(0),
                abi::UNDEFINED
                | abi::COMM_TYPE_HW_UNGUIDED
                | abi::COMM_TYPE_HW_GUIDED
                | abi::COMM_TYPE_RESOURCE_GUIDED => None,
                t => return err(abi::ERR_ARG, format!("unknown split type {t}")),
            };
            let s = c.comm.split(color, key)?;
            if let Some(n) = &s {
                n.set_info(&hints)?;
            }
            // SAFETY: checked non-null.
            unsafe { store_comm(c, s, newcomm) }
        })
    }

    /// A communicator of `group`'s members (`MPI_COMM_NULL` elsewhere).
    fn MPI_Comm_create / PMPI_Comm_create(comm: Comm, group: GroupH, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Comm_create", comm, |c| {
            out(newcomm, "newcomm")?;
            let g = group_ref(group)?;
            let s = c.comm.split_by_subgroup_collective(&g)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, s, newcomm) }
        })
    }

    /// Frees a communicator; `*comm` becomes `MPI_COMM_NULL`.
    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut Comm) -> c_int {
        api("MPI_Comm_free", || {
            let p = out(comm, "comm")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if [abi::COMM_WORLD, abi::COMM_SELF].contains(&h) {
                return err(abi::ERR_COMM, "a predefined communicator cannot be freed");
            }
            let c = comm_ref(h)?;
            crate::attr::free_comm(&c.comm, h).map_err(|e| e.on(&c))?;
            COMMS.remove(h.0).map_err(|_| MpiError::new(abi::ERR_COMM, "communicator in use"))?;
            // SAFETY: as above.
            unsafe { p.write(abi::COMM_NULL) };
            Ok(())
        })
    }

    /// `MPI_IDENT`, `MPI_CONGRUENT`, `MPI_SIMILAR` or `MPI_UNEQUAL`.
    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: Comm, comm2: Comm, result: *mut c_int) -> c_int {
        api("MPI_Comm_compare", || {
            let (a, b) = (comm_ref(comm1)?, comm_ref(comm2)?);
            let r = match intercomm::compare(&a.comm, &b.comm) {
                CommRelation::Identical => abi::IDENT,
                CommRelation::Congruent => abi::CONGRUENT,
                CommRelation::Similar => abi::SIMILAR,
                CommRelation::Unequal => abi::UNEQUAL,
            };
            // SAFETY: the caller's int pointer.
            unsafe { put(result, "result", r) }
        })
    }

    /// The communicator's name (`MPI_COMM_WORLD`, `MPI_COMM_SELF`,
    /// `MPI_COMM_NULL`, or what `MPI_Comm_set_name` gave; empty otherwise).
    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: Comm, name: *mut c_char, len: *mut c_int) -> c_int {
        if comm == abi::COMM_NULL {
            // MPI 4.1: the null handle has a name too.
            return api("MPI_Comm_get_name", || {
                // SAFETY: MPI requires MPI_MAX_OBJECT_NAME bytes at `name`.
                unsafe { put_string(name, abi::MAX_OBJECT_NAME, len, "MPI_COMM_NULL") }
            });
        }
        api_comm("MPI_Comm_get_name", comm, |c| {
            // SAFETY: MPI requires MPI_MAX_OBJECT_NAME bytes at `name`.
            unsafe { put_string(name, abi::MAX_OBJECT_NAME, len, &c.comm.name()) }
        })
    }

    /// Names a communicator (hmpi-core keeps at most
    /// `MPI_MAX_OBJECT_NAME - 1` bytes).
    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: Comm, name: *const c_char) -> c_int {
        api_comm("MPI_Comm_set_name", comm, |c| {
            if name.is_null() {
                return err(abi::ERR_ARG, "the name is a null pointer");
            }
            // SAFETY: a NUL-terminated string from the caller.
            let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            Ok(c.comm.set_name(&s)?)
        })
    }

    /// The group of `comm` (a new group handle).
    fn MPI_Comm_group / PMPI_Comm_group(comm: Comm, group: *mut GroupH) -> c_int {
        api_comm("MPI_Comm_group", comm, |c| {
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(c.comm.group(), group) }
        })
    }

    /// Whether `comm` is an intercommunicator.
    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: Comm, flag: *mut c_int) -> c_int {
        api_comm("MPI_Comm_test_inter", comm, |c| {
            // SAFETY: the caller's int pointer.
            unsafe { put(flag, "flag", c_int::from(c.comm.is_inter())) }
        })
    }

    /// The size of an intercommunicator's remote group.
    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: Comm, size: *mut c_int) -> c_int {
        api_comm("MPI_Comm_remote_size", comm, |c| {
            let g = intercomm::remote_group(&c.comm)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", g.size()) }
        })
    }

    /// The remote group of an intercommunicator (a new group handle).
    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: Comm, group: *mut GroupH) -> c_int {
        api_comm("MPI_Comm_remote_group", comm, |c| {
            let g = intercomm::remote_group(&c.comm)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(g, group) }
        })
    }

    /// An intercommunicator between `local_comm`'s group and the group of
    /// `remote_leader` (a rank of `peer_comm`, which only the local leader
    /// reads).
    fn MPI_Intercomm_create / PMPI_Intercomm_create(
        local_comm: Comm,
        local_leader: c_int,
        peer_comm: Comm,
        remote_leader: c_int,
        tag: c_int,
        newintercomm: *mut Comm,
    ) -> c_int {
        api_comm("MPI_Intercomm_create", local_comm, |c| {
            out(newintercomm, "newintercomm")?;
            let leader = c.comm.my_rank() == local_leader;
            let peer = if leader { Some(comm_ref(peer_comm)?) } else { None };
            let ic = intercomm::intercomm_create(
                &c.comm,
                local_leader,
                peer.as_ref().map(|p| &p.comm),
                remote_leader,
                tag,
            )?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(ic.into_simple()), newintercomm) }
        })
    }

    /// An intracommunicator of both groups of an intercommunicator, the
    /// group that passes `high = 0` first.
    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: Comm, high: c_int, newintracomm: *mut Comm) -> c_int {
        api_comm("MPI_Intercomm_merge", intercomm, |c| {
            out(newintracomm, "newintracomm")?;
            let m = intercomm::merge(&c.comm, high != 0)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(m), newintracomm) }
        })
    }

    /// A communicator of `group`'s members, collective over them only.
    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: Comm, group: GroupH, tag: c_int, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Comm_create_group", comm, |c| {
            out(newcomm, "newcomm")?;
            let g = group_ref(group)?;
            if g.rank().is_none() {
                // MPI: a process outside the group gets MPI_COMM_NULL.
                // SAFETY: checked non-null.
                unsafe { newcomm.write(abi::COMM_NULL) };
                return Ok(());
            }
            let n = intercomm::create_group(&c.comm, &g, tag)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(n), newcomm) }
        })
    }

    /// Sets hints on `comm` (keys of `info` replace those set before).
    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: Comm, info: Info) -> c_int {
        api_comm("MPI_Comm_set_info", comm, |c| {
            let i = crate::info::info_of(info)?;
            c.comm.set_info(&i)?;
            Ok(())
        })
    }

    /// The hints in effect on `comm` (a new info object).
    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: Comm, info_used: *mut Info) -> c_int {
        api_comm("MPI_Comm_get_info", comm, |c| {
            // SAFETY: the caller's handle pointer.
            unsafe { crate::info::store_info(c.comm.info(), info_used) }
        })
    }

    /// `MPI_Comm_dup` whose new communicator has the hints of `info`
    /// instead of `comm`'s.
    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: Comm, info: Info, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Comm_dup_with_info", comm, |c| {
            out(newcomm, "newcomm")?;
            let hints = crate::info::hints_of(info)?;
            let d = dup_with(&c.comm, &hints)?;
            crate::attr::copy_comm(&c.comm, comm, &d)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(d), newcomm) }
        })
    }

    /// `MPI_Comm_dup` as a request, completed by the wait and test
    /// family (see [`idup`]).
    fn MPI_Comm_idup / PMPI_Comm_idup(comm: Comm, newcomm: *mut Comm, request: *mut Request) -> c_int {
        api_comm("MPI_Comm_idup", comm, |c| {
            // SAFETY: the caller's pointers.
            unsafe { idup(c, None, newcomm, request) }
        })
    }

    /// `MPI_Comm_dup_with_info` as a request (as `MPI_Comm_idup`).
    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: Comm, info: Info, newcomm: *mut Comm, request: *mut Request) -> c_int {
        api_comm("MPI_Comm_idup_with_info", comm, |c| {
            let hints = crate::info::hints_of(info)?;
            // Malformed VCI hints are the caller's error, before anything
            // starts.
            hmpi_core::hints::CommHints::from_info(&hints)?;
            // SAFETY: the caller's pointers.
            unsafe { idup(c, Some(hints), newcomm, request) }
        })
    }

    /// The number of processes of a group.
    fn MPI_Group_size / PMPI_Group_size(group: GroupH, size: *mut c_int) -> c_int {
        api_active("MPI_Group_size", || {
            let g = group_ref(group)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", g.size()) }
        })
    }

    /// This process's rank in a group (`MPI_UNDEFINED` if not a member).
    fn MPI_Group_rank / PMPI_Group_rank(group: GroupH, rank: *mut c_int) -> c_int {
        api_active("MPI_Group_rank", || {
            let g = group_ref(group)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(rank, "rank", g.rank().unwrap_or(abi::UNDEFINED)) }
        })
    }

    /// The listed ranks of a group, in the listed order.
    fn MPI_Group_incl / PMPI_Group_incl(group: GroupH, n: c_int, ranks: *const c_int, newgroup: *mut GroupH) -> c_int {
        api_active("MPI_Group_incl", || {
            let g = group_ref(group)?;
            // SAFETY: `ranks` holds `n` ints (MPI's contract).
            let r = unsafe { ints(ranks, n, "ranks") }?;
            check_distinct(r, g.size())?;
            let ng = g.incl(r)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(ng, newgroup) }
        })
    }

    /// A group without the listed ranks.
    fn MPI_Group_excl / PMPI_Group_excl(group: GroupH, n: c_int, ranks: *const c_int, newgroup: *mut GroupH) -> c_int {
        api_active("MPI_Group_excl", || {
            let g = group_ref(group)?;
            // SAFETY: `ranks` holds `n` ints (MPI's contract).
            let r = unsafe { ints(ranks, n, "ranks") }?;
            check_distinct(r, g.size())?;
            let ng = g.excl(r)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(ng, newgroup) }
        })
    }

    /// The ranks of `(first, last, stride)` triplets of a group.
    fn MPI_Group_range_incl / PMPI_Group_range_incl(
        group: GroupH,
        n: c_int,
        ranges: *const [c_int; 3],
        newgroup: *mut GroupH,
    ) -> c_int {
        api_active("MPI_Group_range_incl", || {
            let g = group_ref(group)?;
            // SAFETY: `ranges` holds `n` triplets (MPI's contract).
            let r = expand_ranges(unsafe { triplets(ranges, n) }?, g.size())?;
            check_distinct(&r, g.size())?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(g.incl(&r)?, newgroup) }
        })
    }

    /// A group without the ranks of `(first, last, stride)` triplets.
    fn MPI_Group_range_excl / PMPI_Group_range_excl(
        group: GroupH,
        n: c_int,
        ranges: *const [c_int; 3],
        newgroup: *mut GroupH,
    ) -> c_int {
        api_active("MPI_Group_range_excl", || {
            let g = group_ref(group)?;
            // SAFETY: `ranges` holds `n` triplets (MPI's contract).
            let r = expand_ranges(unsafe { triplets(ranges, n) }?, g.size())?;
            check_distinct(&r, g.size())?;
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(g.excl(&r)?, newgroup) }
        })
    }

    /// `group1`'s members, then `group2`'s that are not in `group1`.
    fn MPI_Group_union / PMPI_Group_union(group1: GroupH, group2: GroupH, newgroup: *mut GroupH) -> c_int {
        api_active("MPI_Group_union", || {
            let (a, b) = (group_ref(group1)?, group_ref(group2)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(a.union(&b), newgroup) }
        })
    }

    /// `group1`'s members that are in `group2`.
    fn MPI_Group_intersection / PMPI_Group_intersection(group1: GroupH, group2: GroupH, newgroup: *mut GroupH) -> c_int {
        api_active("MPI_Group_intersection", || {
            let (a, b) = (group_ref(group1)?, group_ref(group2)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(a.intersection(&b), newgroup) }
        })
    }

    /// `group1`'s members that are not in `group2`.
    fn MPI_Group_difference / PMPI_Group_difference(group1: GroupH, group2: GroupH, newgroup: *mut GroupH) -> c_int {
        api_active("MPI_Group_difference", || {
            let (a, b) = (group_ref(group1)?, group_ref(group2)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_group(a.difference(&b), newgroup) }
        })
    }

    /// The rank in `group2` of each listed rank of `group1`
    /// (`MPI_UNDEFINED` for non-members; `MPI_PROC_NULL` passes).
    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(
        group1: GroupH,
        n: c_int,
        ranks1: *const c_int,
        group2: GroupH,
        ranks2: *mut c_int,
    ) -> c_int {
        api_active("MPI_Group_translate_ranks", || {
            let (a, b) = (group_ref(group1)?, group_ref(group2)?);
            // SAFETY: `ranks1` holds `n` ints (MPI's contract).
            let r = unsafe { ints(ranks1, n, "ranks1") }?;
            if !r.is_empty() {
                out(ranks2, "ranks2")?;
            }
            let mut res = Vec::with_capacity(r.len());
            for &x in r {
                res.push(if x == abi::PROC_NULL {
                    abi::PROC_NULL
                } else {
                    a.translate_rank(x, &b)?.unwrap_or(abi::UNDEFINED)
                });
            }
            // SAFETY: `ranks2` holds `n` ints (MPI's contract).
            unsafe { std::ptr::copy_nonoverlapping(res.as_ptr(), ranks2, res.len()) };
            Ok(())
        })
    }

    /// `MPI_IDENT`, `MPI_SIMILAR` or `MPI_UNEQUAL`.
    fn MPI_Group_compare / PMPI_Group_compare(group1: GroupH, group2: GroupH, result: *mut c_int) -> c_int {
        api_active("MPI_Group_compare", || {
            let (a, b) = (group_ref(group1)?, group_ref(group2)?);
            // SAFETY: the caller's int pointer.
            unsafe { put(result, "result", relation(a.compare(&b))) }
        })
    }

    /// Frees a group; `*group` becomes `MPI_GROUP_NULL`.
    fn MPI_Group_free / PMPI_Group_free(group: *mut GroupH) -> c_int {
        api_active("MPI_Group_free", || {
            let p = out(group, "group")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if h != abi::GROUP_EMPTY {
                GROUPS.remove(h.0).map_err(|_| {
                    MpiError::new(abi::ERR_GROUP, format!("{:#x} is not a group", h.0))
                })?;
            }
            // SAFETY: as above.
            unsafe { p.write(abi::GROUP_NULL) };
            Ok(())
        })
    }
}

/// A duplicate of `comm` with exactly the hints of `hints`.
fn dup_with(comm: &SimpleCommunicator, hints: &hmpi_core::Info) -> Res<SimpleCommunicator> {
    // Malformed VCI hints are the caller's error, before anything starts.
    hmpi_core::hints::CommHints::from_info(hints)?;
    let d = comm.duplicate()?;
    d.replace_info(hints);
    Ok(d)
}

/// `MPI_Comm_idup(_with_info)`: `*newcomm` gets a handle at once, whose
/// slot stays busy ("communicator in use") until the duplicate exists;
/// the duplication agrees in the background
/// ([`hmpi_core::intercomm::idup`]) and then fills the slot and completes
/// the request, an ordinary engine request of the wait and test family.
///
/// # Safety
/// `newcomm` and `request` are valid for writes when not null.
unsafe fn idup(
    c: &CommEntry,
    hints: Option<hmpi_core::Info>,
    newcomm: *mut Comm,
    request: *mut Request,
) -> Res {
    out(newcomm, "newcomm")?;
    out(request, "request")?;
    let parent = comm_ref(c.handle)?;
    let errhandler = c.errhandler();
    // A slot for the new communicator, busy until it is made (the
    // parent's communicator stands in, never seen).
    let h = COMMS
        .insert_with(|h| Arc::new(CommEntry::new(c.comm.clone(), Comm(h), errhandler.clone())))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many communicators"))?;
    let _ = COMMS.checkout(h);
    let (src, src_handle) = (c.comm.clone(), c.handle);
    let done = move |r: hmpi_core::Result<SimpleCommunicator>| match r {
        // The attributes are copied as the duplicate is made (a failing
        // copy callback leaves it without the values it refused).
        Ok(d) => {
            let _ = crate::attr::copy_comm(&src, src_handle, &d);
            COMMS.checkin(h, Arc::new(CommEntry::new(d, Comm(h), errhandler)))
        }
        // The handle becomes invalid; later use reports MPI_ERR_COMM.
        Err(_) => COMMS.release(h),
    };
    let req = match intercomm::idup(&c.comm, hints, done) {
        Ok(r) => r,
        Err(e) => {
            COMMS.release(h);
            return Err(e.into());
        }
    };
    let e = crate::request::ReqEntry {
        req: crate::request::EngineReq(req),
        rest: crate::request::Rest::plain(parent),
    };
    let rh = crate::request::insert(e)?;
    // SAFETY: checked non-null.
    unsafe {
        newcomm.write(Comm(h));
        request.write(rh);
    }
    Ok(())
}

/// The node-local rank (the arena in the shared heap) of rank `rank` of
/// `comm`; `MPI_UNDEFINED` for `MPI_PROC_NULL`. On one node a process's
/// node-local rank is its world rank.
///
/// # Safety
/// `node_rank` is valid for a write of an int.
#[no_mangle]
pub unsafe extern "C" fn HMPI_Comm_node_rank(
    comm: Comm,
    rank: c_int,
    node_rank: *mut c_int,
) -> c_int {
    api_comm("HMPI_Comm_node_rank", comm, |c| {
        let v = match raw::route(&c.comm, rank)? {
            raw::Route::Local(w) => w,
            raw::Route::Null | raw::Route::Any => abi::UNDEFINED,
        };
        // SAFETY: the caller's int pointer.
        unsafe { put(node_rank, "node_rank", v) }
    })
}

/// Whether `ptr` points into the node's shared heap.
///
/// # Safety
/// `flag` is valid for a write of an int.
#[no_mangle]
pub unsafe extern "C" fn HMPI_Is_shared(ptr: *const c_void, flag: *mut c_int) -> c_int {
    api("HMPI_Is_shared", || {
        // SAFETY: the caller's int pointer.
        unsafe { put(flag, "flag", c_int::from(shmheap::is_shared(ptr))) }
    })
}

/// The node-local rank whose arena holds `ptr` (`MPI_UNDEFINED` if none).
///
/// # Safety
/// `node_rank` is valid for a write of an int.
#[no_mangle]
pub unsafe extern "C" fn HMPI_Heap_owner(ptr: *const c_void, node_rank: *mut c_int) -> c_int {
    api("HMPI_Heap_owner", || {
        let r = shmheap::owner_of(ptr).map_or(abi::UNDEFINED, |r| r as c_int);
        // SAFETY: the caller's int pointer.
        unsafe { put(node_rank, "node_rank", r) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_expand_like_mpi() {
        assert_eq!(expand_ranges(&[[0, 6, 2]], 8).unwrap(), vec![0, 2, 4, 6]);
        assert_eq!(expand_ranges(&[[5, 1, -2]], 8).unwrap(), vec![5, 3, 1]);
        assert_eq!(
            expand_ranges(&[[3, 3, 1], [7, 7, 5]], 8).unwrap(),
            vec![3, 7]
        );
        assert_eq!(
            expand_ranges(&[[0, 3, 0]], 8).unwrap_err().class,
            abi::ERR_ARG
        );
        assert_eq!(
            expand_ranges(&[[0, 8, 1]], 8).unwrap_err().class,
            abi::ERR_RANK
        );
        assert!(check_distinct(&[1, 2, 1], 4).is_err());
        assert!(check_distinct(&[0, 3], 4).is_ok());
        assert_eq!(check_distinct(&[4], 4).unwrap_err().class, abi::ERR_RANK);
    }
}
