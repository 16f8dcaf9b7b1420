//! OpenSHMEM 1.5, its core (`include/shmem.h`), marshalled onto hmpi's
//! global address space (`crates/pgas`), sharing its context with DART
//! ([`crate::dart::start`]).
//!
//! * The **symmetric heap**: each `shmem_malloc` / `_calloc` / `_align`
//!   is one collective team allocation over all PEs
//!   (`Pgas::team_memalloc_aligned`), so the object has the same offset in
//!   every PE's part (for `shmem_align` beyond the parts' own alignment,
//!   the PEs exchange where their aligned start is). A table of this PE's
//!   allocations maps a local symmetric address to the allocation's
//!   global pointer and offset: every remote access names the remote
//!   object by the local address of the same object.
//! * Put / get / atomics resolve the address, pick the PE's part and go
//!   through the crate (`put_raw`, `get_raw`, `fetch_op`,
//!   `compare_and_swap`, `atomic_load`); they are complete at once on this
//!   node, so `_nbi` forms are the blocking ones and `shmem_quiet` /
//!   `shmem_fence` flush every segment.
//! * Teams are the crate's teams: a `shmem_team_t` is the team id plus
//!   one (`SHMEM_TEAM_WORLD` is the team of all units, id 0);
//!   collectives use the team's communicator.
//! * The typed forms are inline functions in the header over a few entry
//!   points here (`hshmem_amo`, `hshmem_wait_until`, `hshmem_test`,
//!   `hshmem_reduce`), which take the element type as a `kind` code.
//!
//! Invalid input — an address outside the symmetric heap, a PE out of
//! range, an access past its allocation, a bad team, a call before
//! `shmem_init` — prints the reason and ends the job (as
//! `shmem_global_exit(1)`); the collectives that return an `int` return
//! nonzero for a bad team or root instead, and `shmem_ptr` /
//! `shmem_addr_accessible` answer NULL / 0.

use crate::dart::{pg, start, stop, PgRef, Res, User};
use hmpi_core::datatype::Equivalence;
use hmpi_core::op::SystemOperation;
use hmpi_core::traits::CommunicatorCollectives;
use pgas::{GlobalPtr, Gptr, Team};
use std::ffi::{c_char, c_int, c_long, c_void};
use std::sync::{Mutex, MutexGuard};

/// One symmetric allocation of this PE.
#[derive(Debug, Clone)]
struct Sym {
    /// The object's first byte here.
    base: usize,
    /// Its bytes.
    len: usize,
    /// The allocation's global pointer (the team's unit 0, offset 0).
    g: Gptr,
    /// Per PE, the offset of the object in its part (empty: 0 everywhere).
    starts: Vec<u64>,
}

/// This PE's symmetric allocations, by address.
static SYMS: Mutex<Vec<Sym>> = Mutex::new(Vec::new());

fn syms() -> MutexGuard<'static, Vec<Sym>> {
    SYMS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Prints why `func` cannot go on and ends the job.
fn fatal(func: &str, msg: &str) -> ! {
    let me = hmpi_core::environment::endpoint().map_or(-1, |ep| ep.rank());
    let line = format!("hmpi: PE {me}: {func}: {msg}; ending the job\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    hmpi_core::abort(1)
}

/// The body's value, or the job ends with its error.
fn or_die<T>(func: &str, r: Res<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fatal(func, e.message()),
    }
}

/// The global pointer of `len` bytes at the symmetric address `addr` on
/// `pe`.
fn remote(pg: &PgRef, addr: *const c_void, len: usize, pe: c_int) -> Res<Gptr> {
    if pe < 0 || pe as u32 >= pg.size() {
        return Err(format!("PE {pe} is not a PE (0..{})", pg.size()).into());
    }
    let a = addr as usize;
    let s = syms();
    let Some(sym) = s.iter().find(|s| a >= s.base && a < s.base + s.len.max(1)) else {
        return Err(format!(
            "{addr:p} is not in the symmetric heap (only shmem_malloc / shmem_calloc / \
             shmem_align memory is symmetric here)"
        )
        .into());
    };
    let rel = a - sym.base;
    if rel + len > sym.len {
        return Err(format!(
            "{len} bytes at {addr:p} reach past the end of its symmetric allocation \
             ({} bytes at {:#x})",
            sym.len, sym.base
        )
        .into());
    }
    let start = sym.starts.get(pe as usize).copied().unwrap_or(0);
    Ok(Gptr {
        offset: start + rel as u64,
        ..sym.g.at_unit(pe as u32)
    })
}

fn team_of(pg: &PgRef, t: *mut c_void) -> Res<Team> {
    let h = t as usize;
    if h == 0 {
        return Err("SHMEM_TEAM_INVALID is not a team".to_string().into());
    }
    pg.team_by_id(h as u64 - 1).ok_or_else(|| {
        format!("team handle {h:#x}: no such team here (destroyed, or this PE is not a member)")
            .into()
    })
}

fn team_handle(t: &Team) -> *mut c_void {
    (t.id() as usize + 1) as *mut c_void
}

/// `pg()` or the end of the job.
fn ctx(func: &str) -> PgRef {
    or_die(func, pg())
}

// ---------------------------------------------------------- library

/// Starts MPI (if needed) and the global address space (collective).
#[no_mangle]
pub extern "C" fn shmem_init() {
    or_die("shmem_init", start(User::Shmem));
}

/// `shmem_init`; the level provided is `SHMEM_THREAD_MULTIPLE`.
///
/// # Safety
/// `provided` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_init_thread(_requested: c_int, provided: *mut c_int) -> c_int {
    if let Err(e) = start(User::Shmem) {
        fatal("shmem_init_thread", e.message());
    }
    if !provided.is_null() {
        // SAFETY: the caller's pointer, checked non-null.
        unsafe { provided.write(3) };
    }
    0
}

/// The thread level provided: `SHMEM_THREAD_MULTIPLE`.
///
/// # Safety
/// `provided` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_query_thread(provided: *mut c_int) {
    if !provided.is_null() {
        // SAFETY: the caller's pointer, checked non-null.
        unsafe { provided.write(3) };
    }
}

/// Frees the symmetric heap and ends the global address space
/// (collective).
#[no_mangle]
pub extern "C" fn shmem_finalize() {
    {
        let pg = ctx("shmem_finalize");
        or_die("shmem_finalize", pg.quiet().map_err(Into::into));
        or_die(
            "shmem_finalize",
            pg.team_all().barrier().map_err(Into::into),
        );
    }
    syms().clear();
    or_die("shmem_finalize", stop(User::Shmem));
}

/// Ends every PE with `status`.
#[no_mangle]
pub extern "C" fn shmem_global_exit(status: c_int) -> ! {
    hmpi_core::abort(status)
}

/// This PE's number.
#[no_mangle]
pub extern "C" fn shmem_my_pe() -> c_int {
    ctx("shmem_my_pe").myid() as c_int
}

/// The number of PEs.
#[no_mangle]
pub extern "C" fn shmem_n_pes() -> c_int {
    ctx("shmem_n_pes").size() as c_int
}

/// Whether `pe` is a PE (all share this node).
#[no_mangle]
pub extern "C" fn shmem_pe_accessible(pe: c_int) -> c_int {
    c_int::from(pe >= 0 && (pe as u32) < ctx("shmem_pe_accessible").size())
}

/// Whether `addr` is symmetric and `pe` a PE.
#[no_mangle]
pub extern "C" fn shmem_addr_accessible(addr: *const c_void, pe: c_int) -> c_int {
    let pg = ctx("shmem_addr_accessible");
    c_int::from(remote(&pg, addr, 0, pe).is_ok())
}

/// The address here of the symmetric object `dest` of `pe` (NULL if
/// `dest` is not symmetric).
#[no_mangle]
pub extern "C" fn shmem_ptr(dest: *const c_void, pe: c_int) -> *mut c_void {
    let pg = ctx("shmem_ptr");
    match remote(&pg, dest, 0, pe).and_then(|g| Ok(pg.local_addr(g, 0)?)) {
        Ok(p) => p.cast(),
        Err(_) => std::ptr::null_mut(),
    }
}

/// The version of the specification: 1.5.
///
/// # Safety
/// The pointers are null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_version(major: *mut c_int, minor: *mut c_int) {
    if !major.is_null() {
        // SAFETY: the caller's pointer, checked non-null.
        unsafe { major.write(1) };
    }
    if !minor.is_null() {
        // SAFETY: the caller's pointer, checked non-null.
        unsafe { minor.write(5) };
    }
}

/// The vendor string (`SHMEM_MAX_NAME_LEN` bytes at most, NUL included).
///
/// # Safety
/// `name` is null or holds `SHMEM_MAX_NAME_LEN` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmem_info_get_name(name: *mut c_char) {
    const NAME: &[u8] = b"hmpi\0";
    if !name.is_null() {
        // SAFETY: the caller's buffer holds SHMEM_MAX_NAME_LEN (64) bytes.
        unsafe { std::ptr::copy_nonoverlapping(NAME.as_ptr().cast(), name, NAME.len()) };
    }
}

// --------------------------------------------------- symmetric heap

/// `size` bytes at every PE, aligned to `align` (a power of two), zeroed
/// if `zero`; a barrier of all PEs on the way out (as OpenSHMEM requires:
/// no PE may access the object before every PE has it, zeroed).
fn alloc(func: &str, size: usize, align: usize, zero: bool) -> Res<*mut c_void> {
    if size == 0 {
        return Ok(std::ptr::null_mut());
    }
    if !align.is_power_of_two() {
        return Err(format!("alignment {align} is not a power of two").into());
    }
    let pg = pg()?;
    // Window memory starts 64-byte aligned; beyond that the PEs pad.
    let pad = if align > 64 { align } else { 0 };
    let total = size
        .checked_add(pad)
        .ok_or_else(|| format!("{func}: {size} bytes overflow"))?;
    let g = pg.team_memalloc_aligned(pg.team_all(), total as u64)?;
    let me = pg.myid();
    let base = pg.local_addr(g.at_unit(me), 0)? as usize;
    let mine = (base.next_multiple_of(align) - base) as u64;
    let starts = if pad > 0 {
        let mut all = vec![0u64; pg.size() as usize];
        pg.team_all().all_gather_into(&mine, &mut all[..])?;
        all
    } else {
        Vec::new()
    };
    if mine as usize + size > total {
        return Err(
            format!("{func}: the allocation at {base:#x} is not {align}-byte aligned").into(),
        );
    }
    let obj = base + mine as usize;
    if zero {
        // SAFETY: `size` bytes of this PE's part from `obj` on (the part
        // holds `total` bytes from `base`, checked to cover them).
        unsafe { std::ptr::write_bytes(obj as *mut u8, 0, size) };
    }
    {
        let mut s = syms();
        let at = s.partition_point(|x| x.base < obj);
        s.insert(
            at,
            Sym {
                base: obj,
                len: size,
                g,
                starts,
            },
        );
    }
    pg.team_all().barrier()?;
    Ok(obj as *mut c_void)
}

/// `size` bytes of the symmetric heap (collective; NULL for 0 bytes).
#[no_mangle]
pub extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    or_die("shmem_malloc", alloc("shmem_malloc", size, 64, false))
}

/// `count × size` zeroed bytes of the symmetric heap (collective).
#[no_mangle]
pub extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(n) = count.checked_mul(size) else {
        fatal("shmem_calloc", &format!("{count} × {size} bytes overflow"));
    };
    or_die("shmem_calloc", alloc("shmem_calloc", n, 64, true))
}

/// `size` bytes of the symmetric heap aligned to `alignment`
/// (collective).
#[no_mangle]
pub extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    or_die("shmem_align", alloc("shmem_align", size, alignment, false))
}

/// Frees a symmetric allocation (collective: a barrier, then the free).
#[no_mangle]
pub extern "C" fn shmem_free(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let r: Res = (|| {
        let pg = pg()?;
        let sym = {
            let mut s = syms();
            let Some(i) = s.iter().position(|x| x.base == ptr as usize) else {
                return Err(format!(
                    "{ptr:p} is not the start of a symmetric allocation of this PE"
                )
                .into());
            };
            s.remove(i)
        };
        pg.quiet()?;
        pg.team_all().barrier()?;
        Ok(pg.team_memfree(sym.g)?)
    })();
    or_die("shmem_free", r);
}

// ---------------------------------------------------------------- RMA

fn putmem(func: &str, dest: *mut c_void, source: *const c_void, n: usize, pe: c_int) {
    if n == 0 {
        return;
    }
    let r: Res = (|| {
        let pg = pg()?;
        let g = remote(&pg, dest, n, pe)?;
        if source.is_null() {
            return Err("source is a null pointer".to_string().into());
        }
        let byte = u8::equivalent_datatype();
        // SAFETY: the caller's `n` readable bytes at `source`.
        unsafe { pg.put_raw(g, source.cast(), n, &byte, n, &byte)? };
        Ok(())
    })();
    or_die(func, r);
}

fn getmem(func: &str, dest: *mut c_void, source: *const c_void, n: usize, pe: c_int) {
    if n == 0 {
        return;
    }
    let r: Res = (|| {
        let pg = pg()?;
        let g = remote(&pg, source, n, pe)?;
        if dest.is_null() {
            return Err("dest is a null pointer".to_string().into());
        }
        let byte = u8::equivalent_datatype();
        // SAFETY: the caller's `n` writable bytes at `dest`.
        unsafe { pg.get_raw(g, dest.cast(), n, &byte, n, &byte)? };
        Ok(())
    })();
    or_die(func, r);
}

/// `nelems` bytes from `source` into the symmetric `dest` of `pe`.
#[no_mangle]
pub extern "C" fn shmem_putmem(dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
    putmem("shmem_putmem", dest, source, nelems, pe);
}

/// `nelems` bytes of the symmetric `source` of `pe` into `dest`.
#[no_mangle]
pub extern "C" fn shmem_getmem(dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
    getmem("shmem_getmem", dest, source, nelems, pe);
}

/// `shmem_putmem`, complete by `shmem_quiet` (here at once).
#[no_mangle]
pub extern "C" fn shmem_putmem_nbi(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    putmem("shmem_putmem_nbi", dest, source, nelems, pe);
}

/// `shmem_getmem`, complete by `shmem_quiet` (here at once).
#[no_mangle]
pub extern "C" fn shmem_getmem_nbi(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    getmem("shmem_getmem_nbi", dest, source, nelems, pe);
}

// ----------------------------------------------- ordering, barriers

/// Completes every put, get and atomic of this PE.
#[no_mangle]
pub extern "C" fn shmem_quiet() {
    let pg = ctx("shmem_quiet");
    or_die("shmem_quiet", pg.quiet().map_err(Into::into));
}

/// Orders this PE's puts to each PE (by completing them).
#[no_mangle]
pub extern "C" fn shmem_fence() {
    let pg = ctx("shmem_fence");
    or_die("shmem_fence", pg.quiet().map_err(Into::into));
}

/// `shmem_quiet`, then a barrier of all PEs.
#[no_mangle]
pub extern "C" fn shmem_barrier_all() {
    let pg = ctx("shmem_barrier_all");
    or_die("shmem_barrier_all", pg.quiet().map_err(Into::into));
    or_die(
        "shmem_barrier_all",
        pg.team_all().barrier().map_err(Into::into),
    );
}

/// A barrier of all PEs (no completion of communication).
#[no_mangle]
pub extern "C" fn shmem_sync_all() {
    let pg = ctx("shmem_sync_all");
    or_die(
        "shmem_sync_all",
        pg.team_all().barrier().map_err(Into::into),
    );
}

// -------------------------------------------------------------- teams

/// This PE's number in `team` (-1 if not a member or invalid).
#[no_mangle]
pub extern "C" fn shmem_team_my_pe(team: *mut c_void) -> c_int {
    let pg = ctx("shmem_team_my_pe");
    team_of(&pg, team).map_or(-1, |t| t.myid() as c_int)
}

/// The PEs of `team` (-1 if invalid).
#[no_mangle]
pub extern "C" fn shmem_team_n_pes(team: *mut c_void) -> c_int {
    let pg = ctx("shmem_team_n_pes");
    team_of(&pg, team).map_or(-1, |t| t.size() as c_int)
}

/// The PEs `start`, `start + stride`, … (`size` of them, numbered in
/// `parent`) as a new team (collective over `parent`);
/// `SHMEM_TEAM_INVALID` at the others. 0 on success, nonzero (and
/// `SHMEM_TEAM_INVALID` everywhere) for a bad triplet.
///
/// # Safety
/// `new_team` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent: *mut c_void,
    start: c_int,
    stride: c_int,
    size: c_int,
    _config: *const c_void,
    _config_mask: c_long,
    new_team: *mut *mut c_void,
) -> c_int {
    if new_team.is_null() {
        fatal("shmem_team_split_strided", "new_team is a null pointer");
    }
    // SAFETY: checked non-null.
    unsafe { new_team.write(std::ptr::null_mut()) };
    let pg = ctx("shmem_team_split_strided");
    let Ok(p) = team_of(&pg, parent) else {
        return -1;
    };
    let n = p.size() as i64;
    let members: Option<Vec<i32>> = (0..i64::from(size.max(0)))
        .map(|i| {
            let pe = i64::from(start) + i * i64::from(stride);
            (0..n)
                .contains(&pe)
                .then(|| p.unit_to_world(pe as u32).ok().map(|w| w as i32))
                .flatten()
        })
        .collect();
    let valid = size > 0
        && members.as_ref().is_some_and(|m| {
            let mut s = m.clone();
            s.sort_unstable();
            s.dedup();
            s.len() == m.len()
        });
    // Every member of the parent takes part, so a bad triplet fails
    // everywhere alike (the same arguments are required at every PE).
    let group = match (&members, valid) {
        (Some(m), true) => m.clone(),
        _ => return -1,
    };
    let r: Res<Option<Team>> = (|| {
        let g = hmpi_core::Group::from_world_ranks(group, pg.myid() as i32)?;
        Ok(pg.team_create(&p, &g)?)
    })();
    match r {
        Ok(Some(t)) => {
            // SAFETY: checked non-null.
            unsafe { new_team.write(team_handle(&t)) };
            0
        }
        Ok(None) => 0,
        Err(e) => fatal("shmem_team_split_strided", e.message()),
    }
}

/// The number in `dest` of PE `src_pe` of `src` (-1 if not a member).
#[no_mangle]
pub extern "C" fn shmem_team_translate_pe(
    src: *mut c_void,
    src_pe: c_int,
    dest: *mut c_void,
) -> c_int {
    let pg = ctx("shmem_team_translate_pe");
    let (Ok(s), Ok(d)) = (team_of(&pg, src), team_of(&pg, dest)) else {
        return -1;
    };
    if src_pe < 0 {
        return -1;
    }
    s.unit_to_world(src_pe as u32)
        .and_then(|w| d.world_to_unit(w))
        .map_or(-1, |u| u as c_int)
}

/// A barrier of `team` (0, or nonzero for a bad team).
#[no_mangle]
pub extern "C" fn shmem_team_sync(team: *mut c_void) -> c_int {
    let pg = ctx("shmem_team_sync");
    match team_of(&pg, team).and_then(|t| Ok(t.barrier()?)) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// Destroys `team` (collective over it; not the predefined teams).
#[no_mangle]
pub extern "C" fn shmem_team_destroy(team: *mut c_void) {
    let pg = ctx("shmem_team_destroy");
    let r: Res = team_of(&pg, team).and_then(|t| Ok(pg.team_destroy(&t)?));
    or_die("shmem_team_destroy", r);
}

// -------------------------------------------------------- collectives

/// Reports a collective's error and returns nonzero.
fn coll_result(func: &str, r: Res) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            let me = hmpi_core::environment::endpoint().map_or(-1, |ep| ep.rank());
            let line = format!("hmpi: PE {me}: {func}: {}\n", e.message());
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            -1
        }
    }
}

/// # Safety
/// `p` holds `n` bytes (null only when `n` is 0).
unsafe fn bytes<'a>(p: *const c_void, n: usize, what: &str) -> Res<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(format!("{what} is a null pointer").into());
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(p.cast(), n) })
}

/// # Safety
/// `p` holds `n` writable bytes (null only when `n` is 0).
unsafe fn bytes_mut<'a>(p: *mut c_void, n: usize, what: &str) -> Res<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(format!("{what} is a null pointer").into());
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast(), n) })
}

/// `nelems` bytes of `source` at `PE_root` of `team` into `dest` at
/// every PE of the team.
///
/// # Safety
/// The buffers hold `nelems` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmem_broadcastmem(
    team: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    root: c_int,
) -> c_int {
    let pg = ctx("shmem_broadcastmem");
    let r: Res = (|| {
        let t = team_of(&pg, team)?;
        if root < 0 || root as u32 >= t.size() {
            return Err(format!("PE_root {root} is not in the team (0..{})", t.size()).into());
        }
        // SAFETY: the caller's buffers.
        let d = unsafe { bytes_mut(dest, nelems, "dest")? };
        if t.myid() == root as u32 {
            // SAFETY: the caller's buffer; copied with overlap allowed.
            let s = unsafe { bytes(source, nelems, "source")? };
            let tmp = s.to_vec();
            d.copy_from_slice(&tmp);
        }
        Ok(t.broadcast_into(root as u32, d)?)
    })();
    coll_result("shmem_broadcastmem", r)
}

/// Block `j` (of `nelems` bytes) of PE `i`'s `source` into block `i` of PE
/// `j`'s `dest`, over `team`.
///
/// # Safety
/// The buffers hold `nelems × team size` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmem_alltoallmem(
    team: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    let pg = ctx("shmem_alltoallmem");
    let r: Res = (|| {
        let t = team_of(&pg, team)?;
        let n = nelems
            .checked_mul(t.size() as usize)
            .ok_or_else(|| "the buffer size overflows".to_string())?;
        // SAFETY: the caller's buffers.
        let s = unsafe { bytes(source, n, "source")? }.to_vec();
        // SAFETY: as above.
        let d = unsafe { bytes_mut(dest, n, "dest")? };
        if n == 0 {
            return Ok(t.barrier()?);
        }
        Ok(t.comm().all_to_all_into(&s[..], d)?)
    })();
    coll_result("shmem_alltoallmem", r)
}

/// Every PE's `nelems` bytes, in team order, into `dest` at every PE.
///
/// # Safety
/// `source` holds `nelems` bytes, `dest` `nelems × team size`.
#[no_mangle]
pub unsafe extern "C" fn shmem_fcollectmem(
    team: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    let pg = ctx("shmem_fcollectmem");
    let r: Res = (|| {
        let t = team_of(&pg, team)?;
        let n = nelems
            .checked_mul(t.size() as usize)
            .ok_or_else(|| "the buffer size overflows".to_string())?;
        // SAFETY: the caller's buffers.
        let s = unsafe { bytes(source, nelems, "source")? }.to_vec();
        // SAFETY: as above.
        let d = unsafe { bytes_mut(dest, n, "dest")? };
        if n == 0 {
            return Ok(t.barrier()?);
        }
        Ok(t.all_gather_into(&s[..], d)?)
    })();
    coll_result("shmem_fcollectmem", r)
}

// ------------------------------------------ typed forms: entry points

/// Runs `$body` with `$T` the type of the header's `kind` code.
macro_rules! by_kind {
    ($kind:expr, $T:ident => $body:expr) => {
        match $kind {
            1 => {
                type $T = i8;
                $body
            }
            2 => {
                type $T = i16;
                $body
            }
            4 => {
                type $T = i32;
                $body
            }
            8 => {
                type $T = i64;
                $body
            }
            17 => {
                type $T = u8;
                $body
            }
            18 => {
                type $T = u16;
                $body
            }
            20 => {
                type $T = u32;
                $body
            }
            24 => {
                type $T = u64;
                $body
            }
            36 => {
                type $T = f32;
                $body
            }
            40 => {
                type $T = f64;
                $body
            }
            k => Err(format!("element kind {k} is not supported").into()),
        }
    };
}

fn is_float(kind: c_int) -> bool {
    kind >= 32
}

/// An atomic on the element at the symmetric `dest` of `pe`.
///
/// # Safety
/// `value`, `cond` (for compare-and-swap) and `result` (unless null) hold
/// one element of `kind`; `value` may be null only for a fetch.
#[no_mangle]
pub unsafe extern "C" fn hshmem_amo(
    dest: *mut c_void,
    value: *const c_void,
    cond: *const c_void,
    result: *mut c_void,
    kind: c_int,
    op: c_int,
    pe: c_int,
) {
    let r: Res = (|| {
        let pg = pg()?;
        by_kind!(kind, T => {
            let g = GlobalPtr::<T>::from_raw(remote(&pg, dest, std::mem::size_of::<T>(), pe)?);
            let read = |p: *const c_void, what: &str| -> Res<T> {
                if p.is_null() {
                    return Err(format!("{what} is a null pointer").into());
                }
                // SAFETY: the caller's element.
                Ok(unsafe { p.cast::<T>().read_unaligned() })
            };
            let old: T = match op {
                0 => pg.atomic_load(g)?,
                1..=5 => {
                    let o = match op {
                        1 => SystemOperation::Replace,
                        2 => SystemOperation::Sum,
                        3 => SystemOperation::BitwiseAnd,
                        4 => SystemOperation::BitwiseOr,
                        _ => SystemOperation::BitwiseXor,
                    };
                    if op >= 3 && is_float(kind) {
                        return Err("a bitwise atomic on a floating-point type".to_string().into());
                    }
                    pg.fetch_op(g, read(value, "value")?, o)?
                }
                6 => {
                    if is_float(kind) {
                        return Err("compare_swap on a floating-point type".to_string().into());
                    }
                    pg.compare_and_swap(g, read(value, "value")?, read(cond, "cond")?)?
                }
                o => return Err(format!("atomic operation {o} is not one").into()),
            };
            if !result.is_null() {
                // SAFETY: the caller's element.
                unsafe { result.cast::<T>().write_unaligned(old) };
            }
            Ok(())
        })
    })();
    or_die("shmem atomic", r);
}

fn compare<T: PartialOrd>(v: T, cmp: c_int, value: T) -> Res<bool> {
    Ok(match cmp {
        0 => v == value,
        1 => v != value,
        2 => v > value,
        3 => v <= value,
        4 => v < value,
        5 => v >= value,
        c => return Err(format!("{c} is not a SHMEM_CMP_ constant").into()),
    })
}

/// Whether the symmetric `ivar` here compares with `*value` as `cmp` says
/// (read atomically).
///
/// # Safety
/// `value` holds one element of `kind`.
unsafe fn test_once(ivar: *mut c_void, kind: c_int, cmp: c_int, value: *const c_void) -> Res<bool> {
    let pg = pg()?;
    if value.is_null() {
        return Err("cmp_value is a null pointer".to_string().into());
    }
    by_kind!(kind, T => {
        let g = GlobalPtr::<T>::from_raw(remote(&pg, ivar, std::mem::size_of::<T>(), pg.myid() as c_int)?);
        let v = pg.atomic_load(g)?;
        // SAFETY: the caller's element.
        let want = unsafe { value.cast::<T>().read_unaligned() };
        compare(v, cmp, want)
    })
}

/// Waits until the symmetric `ivar` here compares with `*value` as `cmp`
/// says.
///
/// # Safety
/// As [`hshmem_test`].
#[no_mangle]
pub unsafe extern "C" fn hshmem_wait_until(
    ivar: *mut c_void,
    kind: c_int,
    cmp: c_int,
    value: *const c_void,
) {
    let mut spins = 0u32;
    loop {
        // SAFETY: the caller's guarantee.
        match unsafe { test_once(ivar, kind, cmp, value) } {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => fatal("shmem_wait_until", e.message()),
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            // More PEs than cores: let the writer run.
            std::thread::yield_now();
        }
    }
}

/// Whether the symmetric `ivar` here compares with `*value` as `cmp` says
/// (1 or 0).
///
/// # Safety
/// `value` holds one element of `kind`.
#[no_mangle]
pub unsafe extern "C" fn hshmem_test(
    ivar: *mut c_void,
    kind: c_int,
    cmp: c_int,
    value: *const c_void,
) -> c_int {
    // SAFETY: the caller's guarantee.
    match unsafe { test_once(ivar, kind, cmp, value) } {
        Ok(b) => c_int::from(b),
        Err(e) => fatal("shmem_test", e.message()),
    }
}

/// The element-wise reduction of every team member's `nreduce` elements
/// at `source` into `dest` (0, or nonzero for a bad team).
///
/// # Safety
/// `source` and `dest` hold `nreduce` elements of `kind`.
#[no_mangle]
pub unsafe extern "C" fn hshmem_reduce(
    team: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nreduce: usize,
    kind: c_int,
    op: c_int,
) -> c_int {
    let pg = ctx("shmem reduce");
    let r: Res = (|| {
        let t = team_of(&pg, team)?;
        let o = match op {
            0 => SystemOperation::BitwiseAnd,
            1 => SystemOperation::BitwiseOr,
            2 => SystemOperation::BitwiseXor,
            3 => SystemOperation::Max,
            4 => SystemOperation::Min,
            5 => SystemOperation::Sum,
            6 => SystemOperation::Product,
            o => return Err(format!("reduction {o} is not one").into()),
        };
        if op <= 2 && is_float(kind) {
            return Err("a bitwise reduction on a floating-point type"
                .to_string()
                .into());
        }
        if nreduce == 0 {
            return Ok(t.barrier()?);
        }
        if source.is_null() || dest.is_null() {
            return Err("source or dest is a null pointer".to_string().into());
        }
        by_kind!(kind, T => {
            // SAFETY: the caller's elements; copied first, as source and
            // dest may be the same.
            let s = unsafe { std::slice::from_raw_parts(source.cast::<T>(), nreduce) }.to_vec();
            // SAFETY: the caller's `nreduce` elements at dest.
            let d = unsafe { std::slice::from_raw_parts_mut(dest.cast::<T>(), nreduce) };
            Ok(t.all_reduce_into(&s[..], d, o)?)
        })
    })();
    coll_result("shmem reduce", r)
}
