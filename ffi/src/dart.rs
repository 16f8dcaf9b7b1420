//! DART (`include/dart.h`): the global-address-space interface of the DASH
//! project, marshalled onto hmpi's global address space (`crates/pgas`).
//!
//! Every routine checks its arguments, calls the [`pgas::Pgas`] context of
//! this process and returns a `dart_ret_t`: `DART_OK`, `DART_ERR_INVAL`
//! for a bad argument (a freed or unknown segment, an offset past the
//! unit's part, a unit outside the team, an unknown team, a null
//! pointer), `DART_ERR_NOTINIT` before `dart_init` or after `dart_exit`,
//! `DART_ERR_OTHER` for a failure of the runtime below. The message of
//! the last failure of a thread is `dart_last_error()`.
//!
//! The context is shared with the OpenSHMEM interface ([`crate::shmem`]):
//! [`start`] makes it on the first of `dart_init` / `shmem_init` (starting
//! MPI if the program has not), [`stop`] finalizes it at the last of
//! `dart_exit` / `shmem_finalize`.
//!
//! `dart_gptr_t` is [`pgas::Gptr`] (the same 16 bytes, unit id absolute);
//! a `dart_team_t` is a team id of the crate (never reused), a
//! `dart_group_t` a sorted set of absolute unit ids, a `dart_handle_t` the
//! target of a transfer that `dart_wait` flushes.

use pgas::{GlobalPtr, Gptr, Pgas, Team};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{RwLock, RwLockReadGuard};

use hmpi_core::datatype::Equivalence;
use hmpi_core::op::SystemOperation;

// dart_ret_t
pub const DART_OK: c_int = 0;
pub const DART_ERR_INVAL: c_int = 2;
pub const DART_ERR_NOTINIT: c_int = 4;
pub const DART_ERR_OTHER: c_int = 999;

// dart_datatype_t
const TYPE_BYTE: c_int = 1;
const TYPE_SHORT: c_int = 2;
const TYPE_INT: c_int = 3;
const TYPE_UINT: c_int = 4;
const TYPE_LONG: c_int = 5;
const TYPE_ULONG: c_int = 6;
const TYPE_LONGLONG: c_int = 7;
const TYPE_FLOAT: c_int = 8;
const TYPE_DOUBLE: c_int = 9;

/// `DART_TEAM_NULL`.
const TEAM_NULL: i16 = -1;

/// A failure: the `dart_ret_t` and what was wrong.
#[derive(Debug)]
pub struct DartError {
    code: c_int,
    msg: String,
}

impl DartError {
    /// What was wrong.
    pub(crate) fn message(&self) -> &str {
        &self.msg
    }
}

impl From<String> for DartError {
    fn from(msg: String) -> DartError {
        DartError {
            code: DART_ERR_INVAL,
            msg,
        }
    }
}

pub(crate) type Res<T = ()> = Result<T, DartError>;

fn inval<T>(msg: impl Into<String>) -> Res<T> {
    Err(DartError {
        code: DART_ERR_INVAL,
        msg: msg.into(),
    })
}

impl From<pgas::Error> for DartError {
    fn from(e: pgas::Error) -> DartError {
        let code = match e {
            pgas::Error::Runtime(_) | pgas::Error::SegmentIds => DART_ERR_OTHER,
            _ => DART_ERR_INVAL,
        };
        DartError {
            code,
            msg: e.to_string(),
        }
    }
}

impl From<hmpi_core::Error> for DartError {
    fn from(e: hmpi_core::Error) -> DartError {
        DartError::from(pgas::Error::from(e))
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs a routine's body: its error's code (and message, kept for
/// `dart_last_error`), a panic as `DART_ERR_OTHER`.
fn run(body: impl FnOnce() -> Res) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => DART_OK,
        Ok(Err(e)) => {
            remember(&e.msg);
            e.code
        }
        Err(_) => {
            remember("internal error (a panic in libhmpi)");
            DART_ERR_OTHER
        }
    }
}

// ------------------------------------------------------------ the context

/// The global address space of this process, between [`start`] and
/// [`stop`].
struct Ctx {
    pg: Pgas,
    /// Users of the context: `dart_init` and `shmem_init` each count once.
    users: u32,
    /// Whether [`start`] called `MPI_Init` (then [`stop`] finalizes MPI).
    mpi_ours: bool,
}

static CTX: RwLock<Option<Ctx>> = RwLock::new(None);

/// Which interface holds the context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum User {
    Dart,
    Shmem,
}

/// Which interfaces hold the context (process-wide: the flags are read
/// and written under `CTX`'s write lock).
static HOLDERS: std::sync::Mutex<[bool; 2]> = std::sync::Mutex::new([false; 2]);

fn holders() -> std::sync::MutexGuard<'static, [bool; 2]> {
    HOLDERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes the context for `who` (collective over all units the first
/// time): starts MPI if the program has not, then the global address
/// space over `MPI_COMM_WORLD`. An error if `who` already holds it.
pub(crate) fn start(who: User) -> Res {
    let mut g = CTX.write().unwrap_or_else(|p| p.into_inner());
    let mut h = holders();
    if h[who as usize] {
        return inval(match who {
            User::Dart => "dart_init was already called",
            User::Shmem => "shmem_init was already called",
        });
    }
    if let Some(c) = g.as_mut() {
        c.users += 1;
        h[who as usize] = true;
        return Ok(());
    }
    let mut flag: c_int = 0;
    // SAFETY: a valid int pointer.
    unsafe { crate::env::PMPI_Initialized(&mut flag) };
    let mpi_ours = flag == 0;
    if mpi_ours {
        // SAFETY: null argc/argv are allowed.
        let rc = unsafe { crate::env::PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) };
        if rc != 0 {
            return Err(DartError {
                code: DART_ERR_OTHER,
                msg: format!("MPI_Init failed (error {rc})"),
            });
        }
    } else if hmpi_core::is_finalized() {
        return Err(DartError {
            code: DART_ERR_OTHER,
            msg: "MPI_Finalize was already called".into(),
        });
    }
    let world = hmpi_core::SimpleCommunicator::world()?;
    let pg = Pgas::new(&world)?;
    *g = Some(Ctx {
        pg,
        users: 1,
        mpi_ours,
    });
    h[who as usize] = true;
    Ok(())
}

/// Releases `who`'s hold on the context; the last one finalizes it
/// (collective: frees every segment) and MPI if [`start`] started it.
pub(crate) fn stop(who: User) -> Res {
    let mut g = CTX.write().unwrap_or_else(|p| p.into_inner());
    let mut h = holders();
    if !h[who as usize] {
        return Err(DartError {
            code: DART_ERR_NOTINIT,
            msg: match who {
                User::Dart => "dart_init has not been called (or dart_exit was)",
                User::Shmem => "shmem_init has not been called (or shmem_finalize was)",
            }
            .into(),
        });
    }
    h[who as usize] = false;
    let Some(c) = g.as_mut() else {
        return Err(DartError {
            code: DART_ERR_NOTINIT,
            msg: "the global address space is not set up".into(),
        });
    };
    c.users -= 1;
    if c.users > 0 {
        return Ok(());
    }
    let Some(c) = g.take() else { return Ok(()) };
    drop(h);
    drop(g);
    c.pg.finalize()?;
    if c.mpi_ours {
        // SAFETY: no arguments.
        let rc = unsafe { crate::env::PMPI_Finalize() };
        if rc != 0 {
            return Err(DartError {
                code: DART_ERR_OTHER,
                msg: format!("MPI_Finalize failed (error {rc})"),
            });
        }
    }
    Ok(())
}

/// Whether `who` holds the context.
pub(crate) fn holds(who: User) -> bool {
    holders()[who as usize]
}

/// The context, read-locked for one call.
pub(crate) struct PgRef(RwLockReadGuard<'static, Option<Ctx>>);

impl std::ops::Deref for PgRef {
    type Target = Pgas;
    fn deref(&self) -> &Pgas {
        match self.0.as_ref() {
            Some(c) => &c.pg,
            // `pg()` checked it is there, and the guard keeps it.
            None => unreachable!("the context vanished under its lock"),
        }
    }
}

/// The context, or `DART_ERR_NOTINIT`.
pub(crate) fn pg() -> Res<PgRef> {
    let g = CTX.read().unwrap_or_else(|p| p.into_inner());
    if g.is_none() {
        return Err(DartError {
            code: DART_ERR_NOTINIT,
            msg: "dart_init (or shmem_init) has not been called".into(),
        });
    }
    Ok(PgRef(g))
}

// ----------------------------------------------------------- arguments

fn team(pg: &Pgas, id: i16) -> Res<Team> {
    if id < 0 {
        return inval(format!("team {id} is not a team (DART_TEAM_NULL?)"));
    }
    pg.team_by_id(id as u64).ok_or_else(|| DartError {
        code: DART_ERR_INVAL,
        msg: format!("team {id}: no such team here (destroyed, or this unit is not a member)"),
    })
}

fn team_id(t: &Team) -> Res<i16> {
    i16::try_from(t.id()).map_err(|_| DartError {
        code: DART_ERR_OTHER,
        msg: format!("team id {} does not fit in dart_team_t", t.id()),
    })
}

fn size_of_type(dt: c_int) -> Res<usize> {
    Ok(match dt {
        TYPE_BYTE => 1,
        TYPE_SHORT => 2,
        TYPE_INT | TYPE_UINT | TYPE_FLOAT => 4,
        TYPE_LONG | TYPE_ULONG | TYPE_LONGLONG | TYPE_DOUBLE => 8,
        _ => return inval(format!("{dt} is not a dart_datatype_t")),
    })
}

/// Runs `$body` with `$T` the Rust type of the DART datatype `$dt`.
macro_rules! by_type {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            TYPE_BYTE => {
                type $T = u8;
                $body
            }
            TYPE_SHORT => {
                type $T = i16;
                $body
            }
            TYPE_INT => {
                type $T = i32;
                $body
            }
            TYPE_UINT => {
                type $T = u32;
                $body
            }
            TYPE_LONG | TYPE_LONGLONG => {
                type $T = i64;
                $body
            }
            TYPE_ULONG => {
                type $T = u64;
                $body
            }
            TYPE_FLOAT => {
                type $T = f32;
                $body
            }
            TYPE_DOUBLE => {
                type $T = f64;
                $body
            }
            dt => inval(format!("{dt} is not a dart_datatype_t")),
        }
    };
}

fn is_integer(dt: c_int) -> bool {
    matches!(
        dt,
        TYPE_BYTE | TYPE_SHORT | TYPE_INT | TYPE_UINT | TYPE_LONG | TYPE_ULONG | TYPE_LONGLONG
    )
}

fn op_of(op: c_int, dt: c_int) -> Res<SystemOperation> {
    use SystemOperation as S;
    let o = match op {
        1 => S::Min,
        2 => S::Max,
        3 => S::Sum,
        4 => S::Product,
        5 => S::BitwiseAnd,
        6 => S::LogicalAnd,
        7 => S::BitwiseOr,
        8 => S::LogicalOr,
        9 => S::BitwiseXor,
        10 => S::LogicalXor,
        11 => S::Replace,
        12 => S::NoOp,
        _ => return inval(format!("{op} is not a dart_operation_t")),
    };
    if matches!(o, S::BitwiseAnd | S::BitwiseOr | S::BitwiseXor) && !is_integer(dt) {
        return inval("a bitwise operation on a floating-point type");
    }
    Ok(o)
}

fn nonnull<T>(p: *const T, what: &str) -> Res<()> {
    if p.is_null() {
        return inval(format!("{what} is a null pointer"));
    }
    Ok(())
}

fn bytes(nelem: usize, dt: c_int) -> Res<usize> {
    nelem
        .checked_mul(size_of_type(dt)?)
        .ok_or_else(|| DartError {
            code: DART_ERR_INVAL,
            msg: format!("{nelem} elements overflow"),
        })
}

/// `nelem` elements of `src_type` at `ptr` (null only when empty).
fn transfer_types(ptr: *const c_void, nelem: usize, src: c_int, dst: c_int) -> Res<usize> {
    if src != dst {
        return inval(format!(
            "src_type {src} and dst_type {dst} differ (conversions are not supported)"
        ));
    }
    let n = bytes(nelem, src)?;
    if n > 0 {
        nonnull(ptr, "the buffer")?;
    }
    Ok(n)
}

/// Refuses `DART_GPTR_NULL` as the target of an access (it names the
/// reserved first block of unit 0's pool).
fn not_null(g: Gptr) -> Res {
    if g.is_null() {
        return inval("the global pointer is DART_GPTR_NULL");
    }
    Ok(())
}

fn put_bytes(g: Gptr, src: *const c_void, nelem: usize, st: c_int, dt: c_int) -> Res {
    not_null(g)?;
    let n = transfer_types(src, nelem, st, dt)?;
    let pg = pg()?;
    let byte = u8::equivalent_datatype();
    // SAFETY: the caller's `n` readable bytes at `src` (checked non-null
    // when n > 0).
    unsafe { pg.put_raw(g, src.cast(), n, &byte, n, &byte)? };
    Ok(())
}

fn get_bytes(dest: *mut c_void, g: Gptr, nelem: usize, st: c_int, dt: c_int) -> Res {
    not_null(g)?;
    let n = transfer_types(dest, nelem, st, dt)?;
    let pg = pg()?;
    let byte = u8::equivalent_datatype();
    // SAFETY: the caller's `n` writable bytes at `dest`.
    unsafe { pg.get_raw(g, dest.cast(), n, &byte, n, &byte)? };
    Ok(())
}

/// Writes `v` to the caller's `p`.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn out<T>(p: *mut T, what: &str, v: T) -> Res {
    nonnull(p, what)?;
    // SAFETY: checked non-null; the caller's guarantee.
    unsafe { p.write(v) };
    Ok(())
}

// ----------------------------------------------------------------- groups

/// `dart_group_t`: a sorted set of absolute unit ids.
#[derive(Debug, Default, Clone)]
pub struct DartGroup {
    units: Vec<i32>,
}

/// The group behind a handle.
///
/// # Safety
/// `g` is null or a handle of `dart_group_create` not destroyed.
unsafe fn group<'a>(g: *mut DartGroup) -> Res<&'a mut DartGroup> {
    nonnull(g, "the group")?;
    // SAFETY: the caller's guarantee.
    Ok(unsafe { &mut *g })
}

fn new_group(units: Vec<i32>, gout: *mut *mut DartGroup) -> Res {
    nonnull(gout, "gout")?;
    let b = Box::into_raw(Box::new(DartGroup { units }));
    // SAFETY: checked non-null.
    unsafe { gout.write(b) };
    Ok(())
}

fn unit_ok(u: i32) -> Res<()> {
    let pg = pg()?;
    if u < 0 || u as u32 >= pg.size() {
        return inval(format!("unit {u} is not a unit (0..{})", pg.size()));
    }
    Ok(())
}

// --------------------------------------------------------------- handles

/// `dart_handle_t`: the target of a transfer already done, flushed when
/// waited for.
#[derive(Debug)]
pub struct DartHandle {
    target: Gptr,
}

fn handle_out(h: *mut *mut DartHandle, target: Gptr) -> Res {
    let b = Box::into_raw(Box::new(DartHandle { target }));
    // SAFETY: checked non-null by the caller of this function.
    unsafe { h.write(b) };
    Ok(())
}

/// Completes and frees `*h` (nothing for `DART_HANDLE_NULL`).
///
/// # Safety
/// `h` is valid; `*h` null or a live handle.
unsafe fn complete(h: *mut *mut DartHandle) -> Res {
    // SAFETY: the caller's guarantee.
    let p = unsafe { *h };
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: a live handle of this module, taken back once.
    let b = unsafe { Box::from_raw(p) };
    // SAFETY: the caller's guarantee.
    unsafe { h.write(std::ptr::null_mut()) };
    pg()?.flush(b.target)?;
    Ok(())
}

/// # Safety
/// `handles` holds `n` handles (each null or live).
unsafe fn complete_all(handles: *mut *mut DartHandle, n: usize) -> Res {
    if n == 0 {
        return Ok(());
    }
    nonnull(handles, "handles")?;
    let mut first = Ok(());
    for i in 0..n {
        // SAFETY: the caller's guarantee: `n` handles.
        let r = unsafe { complete(handles.add(i)) };
        if first.is_ok() {
            first = r;
        }
    }
    first
}

// ------------------------------------------------------------- routines

macro_rules! dart_fn {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block
    )*) => {$(
        $(#[doc = $doc])*
        ///
        /// # Safety
        /// Pointer arguments are valid as `dart.h` documents.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            run(|| $body)
        }
    )*};
}

dart_fn! {
    /// Starts MPI (if needed) and the global address space (collective).
    fn dart_init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
        start(User::Dart)
    }

    /// `dart_init`; the level provided is `DART_THREAD_MULTIPLE`.
    fn dart_init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, level: *mut c_int) {
        nonnull(level, "thread_safety")?;
        start(User::Dart)?;
        // SAFETY: checked non-null.
        unsafe { level.write(10) };
        Ok(())
    }

    /// Ends the global address space (collective).
    fn dart_exit() {
        stop(User::Dart)
    }

    /// This unit's absolute id.
    fn dart_myid(myid: *mut i32) {
        let me = pg()?.myid() as i32;
        // SAFETY: the caller's pointer.
        unsafe { out(myid, "myid", me) }
    }

    /// The number of units.
    fn dart_size(size: *mut usize) {
        let n = pg()?.size() as usize;
        // SAFETY: the caller's pointer.
        unsafe { out(size, "size", n) }
    }

    /// This unit's id in `teamid`.
    fn dart_team_myid(teamid: i16, myid: *mut i32) {
        let t = team(&*pg()?, teamid)?;
        // SAFETY: the caller's pointer.
        unsafe { out(myid, "myid", t.myid() as i32) }
    }

    /// The units of `teamid`.
    fn dart_team_size(teamid: i16, size: *mut usize) {
        let t = team(&*pg()?, teamid)?;
        // SAFETY: the caller's pointer.
        unsafe { out(size, "size", t.size() as usize) }
    }

    /// An empty group.
    fn dart_group_create(g: *mut *mut DartGroup) {
        new_group(Vec::new(), g)
    }

    /// Frees a group; `*g` becomes `DART_GROUP_NULL`.
    fn dart_group_destroy(g: *mut *mut DartGroup) {
        nonnull(g, "group")?;
        // SAFETY: the caller's pointer.
        let p = unsafe { *g };
        nonnull(p, "*group")?;
        // SAFETY: a group of dart_group_create, freed once.
        drop(unsafe { Box::from_raw(p) });
        // SAFETY: the caller's pointer.
        unsafe { g.write(std::ptr::null_mut()) };
        Ok(())
    }

    /// A copy of `gin`.
    fn dart_group_clone(gin: *mut DartGroup, gout: *mut *mut DartGroup) {
        // SAFETY: the caller's group.
        let units = unsafe { group(gin)? }.units.clone();
        new_group(units, gout)
    }

    /// The units of either group.
    fn dart_group_union(g1: *mut DartGroup, g2: *mut DartGroup, gout: *mut *mut DartGroup) {
        // SAFETY: the caller's groups.
        let (a, b) = unsafe { (group(g1)?.units.clone(), &group(g2)?.units) };
        let mut u = a;
        u.extend_from_slice(b);
        u.sort_unstable();
        u.dedup();
        new_group(u, gout)
    }

    /// The units of both groups.
    fn dart_group_intersect(g1: *mut DartGroup, g2: *mut DartGroup, gout: *mut *mut DartGroup) {
        // SAFETY: the caller's groups.
        let (a, b) = unsafe { (&group(g1)?.units, &group(g2)?.units) };
        let u = a.iter().copied().filter(|x| b.binary_search(x).is_ok()).collect();
        new_group(u, gout)
    }

    /// Adds a unit (absolute id) to `g`.
    fn dart_group_addmember(g: *mut DartGroup, unit: i32) {
        unit_ok(unit)?;
        // SAFETY: the caller's group.
        let g = unsafe { group(g)? };
        if let Err(i) = g.units.binary_search(&unit) {
            g.units.insert(i, unit);
        }
        Ok(())
    }

    /// Removes a unit from `g`.
    fn dart_group_delmember(g: *mut DartGroup, unit: i32) {
        // SAFETY: the caller's group.
        let g = unsafe { group(g)? };
        match g.units.binary_search(&unit) {
            Ok(i) => {
                g.units.remove(i);
                Ok(())
            }
            Err(_) => inval(format!("unit {unit} is not in the group")),
        }
    }

    /// Whether `unit` is in `g`.
    fn dart_group_ismember(g: *mut DartGroup, unit: i32, ismember: *mut i32) {
        // SAFETY: the caller's group.
        let g = unsafe { group(g)? };
        let v = i32::from(g.units.binary_search(&unit).is_ok());
        // SAFETY: the caller's pointer.
        unsafe { out(ismember, "ismember", v) }
    }

    /// The units in `g`.
    fn dart_group_size(g: *mut DartGroup, size: *mut usize) {
        // SAFETY: the caller's group.
        let n = unsafe { group(g)? }.units.len();
        // SAFETY: the caller's pointer.
        unsafe { out(size, "size", n) }
    }

    /// The units of `g`, ascending, into `unitids` (room for its size).
    fn dart_group_getmembers(g: *mut DartGroup, unitids: *mut i32) {
        // SAFETY: the caller's group.
        let g = unsafe { group(g)? };
        if g.units.is_empty() {
            return Ok(());
        }
        nonnull(unitids, "unitids")?;
        // SAFETY: the caller gives room for the group's size.
        unsafe { std::ptr::copy_nonoverlapping(g.units.as_ptr(), unitids, g.units.len()) };
        Ok(())
    }

    /// The units of `teamid` as a new group.
    fn dart_team_get_group(teamid: i16, g: *mut *mut DartGroup) {
        let t = team(&*pg()?, teamid)?;
        let mut u: Vec<i32> = t.units().iter().map(|&x| x as i32).collect();
        u.sort_unstable();
        new_group(u, g)
    }

    /// A team of the units of `g` (collective over `teamid`);
    /// `DART_TEAM_NULL` outside `g`.
    fn dart_team_create(teamid: i16, g: *mut DartGroup, newteam: *mut i16) {
        nonnull(newteam, "newteam")?;
        let pg = pg()?;
        let parent = team(&pg, teamid)?;
        // SAFETY: the caller's group.
        let units = unsafe { group(g)? }.units.clone();
        if let Some(&u) = units.iter().find(|&&u| parent.world_to_unit(u as u32).is_err()) {
            return inval(format!("unit {u} of the group is not in team {teamid}"));
        }
        let grp = hmpi_core::Group::from_world_ranks(units, pg.myid() as i32)?;
        let made = pg.team_create(&parent, &grp)?;
        let id = match made {
            None => TEAM_NULL,
            Some(t) => match team_id(&t) {
                Ok(id) => id,
                Err(e) => {
                    pg.team_destroy(&t)?;
                    return Err(e);
                }
            },
        };
        // SAFETY: checked non-null.
        unsafe { newteam.write(id) };
        Ok(())
    }

    /// A team of the same units as `team` (collective over it).
    fn dart_team_clone(teamid: i16, newteam: *mut i16) {
        nonnull(newteam, "newteam")?;
        let pg = pg()?;
        let t = team(&pg, teamid)?;
        let made = pg.team_from_comm(t.comm())?;
        let id = match team_id(&made) {
            Ok(id) => id,
            Err(e) => {
                pg.team_destroy(&made)?;
                return Err(e);
            }
        };
        // SAFETY: checked non-null.
        unsafe { newteam.write(id) };
        Ok(())
    }

    /// Destroys `*teamid` (collective over it; refused while it owns
    /// segments); `*teamid` becomes `DART_TEAM_NULL`.
    fn dart_team_destroy(teamid: *mut i16) {
        nonnull(teamid, "teamid")?;
        let pg = pg()?;
        // SAFETY: checked non-null.
        let t = team(&pg, unsafe { *teamid })?;
        pg.team_destroy(&t)?;
        // SAFETY: checked non-null.
        unsafe { teamid.write(TEAM_NULL) };
        Ok(())
    }

    /// The absolute id of `team`'s unit `localid`.
    fn dart_team_unit_l2g(teamid: i16, localid: i32, globalid: *mut i32) {
        let t = team(&*pg()?, teamid)?;
        if localid < 0 {
            return inval(format!("unit {localid} is not in team {teamid}"));
        }
        let g = t.unit_to_world(localid as u32)?;
        // SAFETY: the caller's pointer.
        unsafe { out(globalid, "globalid", g as i32) }
    }

    /// The id in `team` of the absolute unit `globalid`.
    fn dart_team_unit_g2l(teamid: i16, globalid: i32, localid: *mut i32) {
        let t = team(&*pg()?, teamid)?;
        if globalid < 0 {
            return inval(format!("unit {globalid} is not in team {teamid}"));
        }
        let l = t.world_to_unit(globalid as u32)?;
        // SAFETY: the caller's pointer.
        unsafe { out(localid, "localid", l as i32) }
    }

    /// The local address of `gptr` (a unit of this node; checked).
    fn dart_gptr_getaddr(gptr: Gptr, addr: *mut *mut c_void) {
        nonnull(addr, "addr")?;
        let a = pg()?.local_addr(gptr, 0)?;
        // SAFETY: checked non-null.
        unsafe { addr.write(a.cast()) };
        Ok(())
    }

    /// Points `*gptr` at `addr`, an address in this unit's part of the
    /// same segment (its unit becomes this unit).
    fn dart_gptr_setaddr(gptr: *mut Gptr, addr: *mut c_void) {
        nonnull(gptr, "gptr")?;
        // SAFETY: checked non-null.
        let g = unsafe { *gptr };
        let n = pg()?.gptr_of_addr(g, addr.cast())?;
        // SAFETY: checked non-null.
        unsafe { gptr.write(n) };
        Ok(())
    }

    /// Moves `*gptr` by `offs` bytes.
    fn dart_gptr_incaddr(gptr: *mut Gptr, offs: i64) {
        nonnull(gptr, "gptr")?;
        // SAFETY: checked non-null.
        let n = unsafe { *gptr }.byte_offset(offs)?;
        // SAFETY: checked non-null.
        unsafe { gptr.write(n) };
        Ok(())
    }

    /// Points `*gptr` at unit `unit` (relative to the segment's team) at
    /// the same offset.
    fn dart_gptr_setunit(gptr: *mut Gptr, unit: i32) {
        nonnull(gptr, "gptr")?;
        // SAFETY: checked non-null.
        let g = unsafe { *gptr };
        if unit < 0 {
            return inval(format!("unit {unit} is not a unit"));
        }
        let t = pg()?.segment_team(g)?;
        let abs = t.unit_to_world(unit as u32)?;
        // SAFETY: checked non-null.
        unsafe { gptr.write(g.at_unit(abs)) };
        Ok(())
    }

    /// `nelem` elements of `dtype` in this unit's local pool (not
    /// collective).
    fn dart_memalloc(nelem: usize, dtype: c_int, gptr: *mut Gptr) {
        nonnull(gptr, "gptr")?;
        let n = bytes(nelem, dtype)?;
        let g = pg()?.memalloc(n as u64)?;
        // SAFETY: checked non-null.
        unsafe { gptr.write(g) };
        Ok(())
    }

    /// Frees an allocation of `dart_memalloc` (by the unit that made it).
    fn dart_memfree(gptr: Gptr) {
        Ok(pg()?.memfree(gptr)?)
    }

    /// `nelem` elements of `dtype` at every unit of `teamid` (collective):
    /// a pointer to the team's unit 0.
    fn dart_team_memalloc_aligned(teamid: i16, nelem: usize, dtype: c_int, gptr: *mut Gptr) {
        nonnull(gptr, "gptr")?;
        let n = bytes(nelem, dtype)?;
        let pg = pg()?;
        let t = team(&pg, teamid)?;
        let g = pg.team_memalloc_aligned(&t, n as u64)?;
        // SAFETY: checked non-null.
        unsafe { gptr.write(g) };
        Ok(())
    }

    /// Frees a team allocation (collective over its team).
    fn dart_team_memfree(gptr: Gptr) {
        Ok(pg()?.team_memfree(gptr)?)
    }

    /// Waits for every unit of `team`.
    fn dart_barrier(teamid: i16) {
        let t = team(&*pg()?, teamid)?;
        Ok(t.barrier()?)
    }

    /// `root`'s `nelem` elements into every unit's `buf`.
    fn dart_bcast(buf: *mut c_void, nelem: usize, dtype: c_int, root: i32, teamid: i16) {
        let n = bytes(nelem, dtype)?;
        let t = team(&*pg()?, teamid)?;
        if root < 0 {
            return inval(format!("root {root} is not in team {teamid}"));
        }
        if n > 0 {
            nonnull(buf, "buf")?;
        }
        let s: &mut [u8] = if n == 0 {
            &mut []
        } else {
            // SAFETY: the caller's `n` bytes at `buf`.
            unsafe { std::slice::from_raw_parts_mut(buf.cast(), n) }
        };
        Ok(t.broadcast_into(root as u32, s)?)
    }

    /// Every unit's `nelem` elements, in team order, into `recvbuf`.
    fn dart_allgather(sendbuf: *const c_void, recvbuf: *mut c_void, nelem: usize, dtype: c_int, teamid: i16) {
        let n = bytes(nelem, dtype)?;
        let t = team(&*pg()?, teamid)?;
        if n == 0 {
            return Ok(t.barrier()?);
        }
        nonnull(sendbuf, "sendbuf")?;
        nonnull(recvbuf, "recvbuf")?;
        let total = n.checked_mul(t.size() as usize).ok_or_else(|| DartError { code: DART_ERR_INVAL, msg: "the receive size overflows".into() })?;
        // SAFETY: the caller's buffers; the send one is copied first, so
        // they may overlap.
        let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), n) }.to_vec();
        // SAFETY: the caller's `size × n` bytes at recvbuf.
        let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
        Ok(t.all_gather_into(&send[..], recv)?)
    }

    /// The element-wise reduction of every unit's `sendbuf` into every
    /// unit's `recvbuf`.
    fn dart_allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, nelem: usize, dtype: c_int, op: c_int, teamid: i16) {
        let o = op_of(op, dtype)?;
        if matches!(o, SystemOperation::Replace | SystemOperation::NoOp) {
            return inval("DART_OP_REPLACE and DART_OP_NO_OP are not reductions");
        }
        let t = team(&*pg()?, teamid)?;
        if nelem > 0 {
            nonnull(sendbuf, "sendbuf")?;
            nonnull(recvbuf, "recvbuf")?;
        }
        by_type!(dtype, T => {
            if nelem == 0 {
                return Ok(t.barrier()?);
            }
            // SAFETY: the caller's `nelem` elements; copied first, so
            // the buffers may overlap.
            let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<T>(), nelem) }.to_vec();
            // SAFETY: the caller's `nelem` elements at recvbuf.
            let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<T>(), nelem) };
            Ok(t.all_reduce_into(&send[..], recv, o)?)
        })
    }

    /// Block `j` of unit `i`'s `sendbuf` into block `i` of unit `j`'s
    /// `recvbuf` (blocks of `nelem` elements).
    fn dart_alltoall(sendbuf: *const c_void, recvbuf: *mut c_void, nelem: usize, dtype: c_int, teamid: i16) {
        use hmpi_core::traits::CommunicatorCollectives;
        let n = bytes(nelem, dtype)?;
        let t = team(&*pg()?, teamid)?;
        if n == 0 {
            return Ok(t.barrier()?);
        }
        nonnull(sendbuf, "sendbuf")?;
        nonnull(recvbuf, "recvbuf")?;
        let total = n.checked_mul(t.size() as usize).ok_or_else(|| DartError { code: DART_ERR_INVAL, msg: "the buffer size overflows".into() })?;
        // SAFETY: the caller's buffers of `size × n` bytes each.
        let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), total) }.to_vec();
        // SAFETY: as above.
        let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
        Ok(t.comm().all_to_all_into(&send[..], recv)?)
    }

    /// Combines `nelem` values into the elements at `gptr` with `op`,
    /// element-wise atomically.
    fn dart_accumulate(gptr: Gptr, values: *const c_void, nelem: usize, dtype: c_int, op: c_int) {
        not_null(gptr)?;
        let o = op_of(op, dtype)?;
        if nelem > 0 {
            nonnull(values, "values")?;
        }
        let pg = pg()?;
        by_type!(dtype, T => {
            let v: &[T] = if nelem == 0 {
                &[]
            } else {
                // SAFETY: the caller's `nelem` elements.
                unsafe { std::slice::from_raw_parts(values.cast::<T>(), nelem) }
            };
            Ok(pg.accumulate(GlobalPtr::<T>::from_raw(gptr), v, o)?)
        })
    }

    /// Combines `*value` into the element at `gptr` with `op`; the element
    /// from before into `*result`, atomically.
    fn dart_fetch_and_op(gptr: Gptr, value: *const c_void, result: *mut c_void, dtype: c_int, op: c_int) {
        not_null(gptr)?;
        let o = op_of(op, dtype)?;
        nonnull(result, "result")?;
        if o != SystemOperation::NoOp {
            nonnull(value, "value")?;
        }
        let pg = pg()?;
        by_type!(dtype, T => {
            let v: T = if value.is_null() {
                T::default()
            } else {
                // SAFETY: the caller's element (maybe unaligned).
                unsafe { value.cast::<T>().read_unaligned() }
            };
            let old = pg.fetch_op(GlobalPtr::<T>::from_raw(gptr), v, o)?;
            // SAFETY: the caller's element, checked non-null.
            unsafe { result.cast::<T>().write_unaligned(old) };
            Ok(())
        })
    }

    /// If the element at `gptr` equals `*compare` it becomes `*value`;
    /// the element from before into `*result`, atomically (integer types).
    fn dart_compare_and_swap(gptr: Gptr, value: *const c_void, compare: *const c_void, result: *mut c_void, dtype: c_int) {
        not_null(gptr)?;
        if !is_integer(dtype) {
            return inval("dart_compare_and_swap needs an integer type");
        }
        nonnull(value, "value")?;
        nonnull(compare, "compare")?;
        nonnull(result, "result")?;
        let pg = pg()?;
        by_type!(dtype, T => {
            // SAFETY: the caller's elements, checked non-null.
            let (v, c) = unsafe { (value.cast::<T>().read_unaligned(), compare.cast::<T>().read_unaligned()) };
            let old = pg.compare_and_swap(GlobalPtr::<T>::from_raw(gptr), v, c)?;
            // SAFETY: as above.
            unsafe { result.cast::<T>().write_unaligned(old) };
            Ok(())
        })
    }

    /// Gets `nelem` elements from `gptr` into `dest` (complete when
    /// `dart_flush` returns; here at once).
    fn dart_get(dest: *mut c_void, gptr: Gptr, nelem: usize, st: c_int, dt: c_int) {
        get_bytes(dest, gptr, nelem, st, dt)
    }

    /// Puts `nelem` elements from `src` at `gptr`.
    fn dart_put(gptr: Gptr, src: *const c_void, nelem: usize, st: c_int, dt: c_int) {
        put_bytes(gptr, src, nelem, st, dt)
    }

    /// Completes the operations to `gptr`'s unit in its segment.
    fn dart_flush(gptr: Gptr) {
        Ok(pg()?.flush(gptr)?)
    }

    /// Completes the operations to every unit of `gptr`'s segment.
    fn dart_flush_all(gptr: Gptr) {
        Ok(pg()?.flush_all(gptr)?)
    }

    /// Local completion of the operations to `gptr`'s unit.
    fn dart_flush_local(gptr: Gptr) {
        Ok(pg()?.flush(gptr)?)
    }

    /// Local completion of the operations in `gptr`'s segment.
    fn dart_flush_local_all(gptr: Gptr) {
        Ok(pg()?.flush_all(gptr)?)
    }

    /// `dart_get` with a handle to wait for.
    fn dart_get_handle(dest: *mut c_void, gptr: Gptr, nelem: usize, st: c_int, dt: c_int, handle: *mut *mut DartHandle) {
        nonnull(handle, "handle")?;
        get_bytes(dest, gptr, nelem, st, dt)?;
        handle_out(handle, gptr)
    }

    /// `dart_put` with a handle to wait for.
    fn dart_put_handle(gptr: Gptr, src: *const c_void, nelem: usize, st: c_int, dt: c_int, handle: *mut *mut DartHandle) {
        nonnull(handle, "handle")?;
        put_bytes(gptr, src, nelem, st, dt)?;
        handle_out(handle, gptr)
    }

    /// Completes `*handle` at both ends and frees it (`DART_HANDLE_NULL`
    /// afterwards).
    fn dart_wait(handle: *mut *mut DartHandle) {
        nonnull(handle, "handle")?;
        // SAFETY: the caller's handle.
        unsafe { complete(handle) }
    }

    /// Completes every handle.
    fn dart_waitall(handles: *mut *mut DartHandle, n: usize) {
        // SAFETY: the caller's `n` handles.
        unsafe { complete_all(handles, n) }
    }

    /// Local completion of `*handle` (the same as `dart_wait` here).
    fn dart_wait_local(handle: *mut *mut DartHandle) {
        nonnull(handle, "handle")?;
        // SAFETY: the caller's handle.
        unsafe { complete(handle) }
    }

    /// Local completion of every handle.
    fn dart_waitall_local(handles: *mut *mut DartHandle, n: usize) {
        // SAFETY: the caller's `n` handles.
        unsafe { complete_all(handles, n) }
    }

    /// Whether `*handle` is complete (then it is freed).
    fn dart_test(handle: *mut *mut DartHandle, is_finished: *mut i32) {
        nonnull(handle, "handle")?;
        nonnull(is_finished, "is_finished")?;
        // SAFETY: the caller's handle.
        unsafe { complete(handle)? };
        // SAFETY: checked non-null.
        unsafe { is_finished.write(1) };
        Ok(())
    }

    /// `dart_test` for local completion.
    fn dart_test_local(handle: *mut *mut DartHandle, is_finished: *mut i32) {
        nonnull(handle, "handle")?;
        nonnull(is_finished, "is_finished")?;
        // SAFETY: the caller's handle.
        unsafe { complete(handle)? };
        // SAFETY: checked non-null.
        unsafe { is_finished.write(1) };
        Ok(())
    }

    /// Whether every handle is complete (then they are freed).
    fn dart_testall(handles: *mut *mut DartHandle, n: usize, is_finished: *mut i32) {
        nonnull(is_finished, "is_finished")?;
        // SAFETY: the caller's `n` handles.
        unsafe { complete_all(handles, n)? };
        // SAFETY: checked non-null.
        unsafe { is_finished.write(1) };
        Ok(())
    }

    /// `dart_testall` for local completion.
    fn dart_testall_local(handles: *mut *mut DartHandle, n: usize, is_finished: *mut i32) {
        nonnull(is_finished, "is_finished")?;
        // SAFETY: the caller's `n` handles.
        unsafe { complete_all(handles, n)? };
        // SAFETY: checked non-null.
        unsafe { is_finished.write(1) };
        Ok(())
    }

    /// Frees `*handle` without waiting (the transfer is done already).
    fn dart_handle_free(handle: *mut *mut DartHandle) {
        nonnull(handle, "handle")?;
        // SAFETY: the caller's pointer.
        let p = unsafe { *handle };
        if !p.is_null() {
            // SAFETY: a live handle of this module, taken back once.
            drop(unsafe { Box::from_raw(p) });
            // SAFETY: the caller's pointer.
            unsafe { handle.write(std::ptr::null_mut()) };
        }
        Ok(())
    }

    /// Gets `nelem` elements, complete on return.
    fn dart_get_blocking(dest: *mut c_void, gptr: Gptr, nelem: usize, st: c_int, dt: c_int) {
        get_bytes(dest, gptr, nelem, st, dt)?;
        Ok(pg()?.flush(gptr)?)
    }

    /// Puts `nelem` elements, complete at both ends on return.
    fn dart_put_blocking(gptr: Gptr, src: *const c_void, nelem: usize, st: c_int, dt: c_int) {
        put_bytes(gptr, src, nelem, st, dt)?;
        Ok(pg()?.flush(gptr)?)
    }
}

/// Whether `dart_init` was called and `dart_exit` not yet.
#[no_mangle]
pub extern "C" fn dart_initialized() -> bool {
    holds(User::Dart)
}

/// Ends the whole job with `errorcode`.
#[no_mangle]
pub extern "C" fn dart_abort(errorcode: c_int) -> ! {
    let me = hmpi_core::environment::endpoint().map_or(-1, |ep| ep.rank());
    let line = format!("hmpi: unit {me} called dart_abort({errorcode}); ending the job\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    hmpi_core::abort(errorcode)
}

/// What the last failing call of this thread found wrong ("" if none).
/// The string stays valid until this thread's next failing call.
#[no_mangle]
pub extern "C" fn dart_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}
