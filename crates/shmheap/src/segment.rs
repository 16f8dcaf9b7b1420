//! The node segment: one file in `/dev/shm` (or `HMPI_SHM_DIR`) without a
//! name, mapped at the same address in every rank of the node.
//!
//! ```text
//! base                                                        base + HEADER_LEN
//! | SegmentHeader | registry (ranks × slots) | rank states | arena 0 | … | arena n-1 |
//! ```
//!
//! The launcher creates the file ([`SegmentFile::create`]) with `O_TMPFILE`,
//! so it never has a name that could outlive the job: mode 0600, sparse size
//! `HEADER_LEN + ranks × arena_len`, the header written in place and its
//! magic published last with a release store. (A file system without
//! `O_TMPFILE` gets an `O_EXCL` file under a unique name that is unlinked
//! before `create` returns.) Ranks inherit the file's descriptor and open it
//! again through [`SegmentFile::path`], `/proc/self/fd/N`; each maps the
//! whole file at the header's base with `MAP_FIXED_NOREPLACE`
//! ([`Segment::attach`]). The memory is freed when the last descriptor and
//! mapping are gone, however the job ends.
//!
//! Only the header region is backed at creation. Each rank's arena reserves
//! real backing with `fallocate` as it grows ([`Segment::reserve`]), so an
//! exhausted `/dev/shm` is an allocation error, never a `SIGBUS`.
//!
//! Each rank has a state word in the header ([`RankState`]): attaching
//! claims it (once per job: a second process attaching as the same rank is
//! refused), the runtime above marks it initializing, running and
//! finalized, and the launcher reads it ([`SegmentFile::rank_state`]) to
//! tell a rank that exited after finalizing from one that left its peers
//! waiting; peers read it too ([`Segment::rank_state`]) when they look for
//! ranks that are gone.
//!
//! # Example
//! ```
//! use shmheap::segment::{RankState, SegmentFile, SegmentSpec};
//!
//! let spec = SegmentSpec { ranks: 2, arena_len: 64 << 20, ..SegmentSpec::default() };
//! let file = SegmentFile::create(&spec, "doc").unwrap();
//! assert!(file.path().exists()); // this process's descriptor
//! assert_eq!(file.rank_state(1), RankState::Unknown);
//! drop(file); // closes it: nothing is left in /dev/shm
//! ```

use crate::env;
use crate::error::{Error, Exhausted, Limit, Result};
use crate::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::sync::barrier::NodeBarrier;
use crate::sync::futex::Backoff;
use nix::errno::Errno;
use nix::fcntl::{FallocateFlags, OFlag};
use nix::sys::mman::{MapFlags, ProtFlags};
use nix::sys::stat::Mode;
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::AtomicI32;

/// Default base address of the segment: 32 TiB.
///
/// On x86-64 Linux (47-bit user space) non-PIE binaries and their `brk` heap
/// sit below 4 GiB, PIE binaries load near `0x55…` (85 TiB), and `mmap`
/// allocations and stacks grow down from `0x7f…`; 32 TiB is far from all of
/// them, leaves 53 TiB for the segment, and lies in AddressSanitizer's
/// high-memory range. Override with `HMPI_SHM_BASE`.
pub const DEFAULT_BASE: usize = 0x2000_0000_0000;
/// Default virtual size of one rank's arena (sparse: only used memory is backed).
pub const DEFAULT_ARENA_LEN: usize = 16 << 30;
/// Bytes before the first arena: the header and the registry.
pub const HEADER_LEN: usize = 2 << 20;
/// Alignment of the base and of arena sizes.
pub const SEGMENT_ALIGN: usize = 2 << 20;
/// Registry slots per rank (see [`Segment::publish`]).
pub const REGISTRY_SLOTS: usize = 64;
/// The most ranks one node segment serves.
pub const MAX_RANKS: u32 = 2048;
/// Smallest arena: room for its metadata and some data.
pub const MIN_ARENA_LEN: usize = 4 << 20;

const MAGIC: u64 = u64::from_le_bytes(*b"HMPISEG\0");
/// Layout version; 2 added the rank states, 3 claims them at attach.
const VERSION: u32 = 3;
const REGISTRY_OFFSET: usize = 4096;
/// Offset of the rank states: one `AtomicU32` per rank, after the registry.
const STATE_OFFSET: usize = REGISTRY_OFFSET + MAX_RANKS as usize * REGISTRY_SLOTS * 8;

/// Where a rank's runtime is, as recorded in its state word in the header.
///
/// The word is zero ([`RankState::Unknown`]) until a process attaches as the
/// rank; attaching claims it ([`RankState::Attached`]) with a compare and
/// swap, so a second process that attaches as the same rank is refused
/// ([`Error::RankClaimed`]). The runtime above then moves it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum RankState {
    /// No process has attached as this rank.
    Unknown = 0,
    /// The runtime was initialised and not yet finalized.
    Running = 1,
    /// The runtime was finalized.
    Finalized = 2,
    /// A process attached as this rank (its heap is in use); the runtime
    /// was not started (or the program does not use it).
    Attached = 3,
    /// The runtime is being started: the rank waits in init for its peers.
    Initializing = 4,
}

impl RankState {
    fn from_word(w: u32) -> RankState {
        match w {
            1 => RankState::Running,
            2 => RankState::Finalized,
            3 => RankState::Attached,
            4 => RankState::Initializing,
            _ => RankState::Unknown,
        }
    }

    /// Whether a process that is in this state and has ended left its
    /// peers without the messages or the collective calls they may be
    /// waiting for: it started the runtime and did not finalize it.
    pub fn leaves_peers_waiting(self) -> bool {
        matches!(self, RankState::Initializing | RankState::Running)
    }
}

/// Rank `rank`'s state word in a header region mapped at `header`.
///
/// # Safety
/// `header` must point to a mapping of the segment's first [`HEADER_LEN`]
/// bytes that stays mapped for `'a`, and `rank < MAX_RANKS`.
unsafe fn state_word<'a>(header: *const u8, rank: u32) -> &'a AtomicU32 {
    debug_assert!(rank < MAX_RANKS);
    // SAFETY: the state words lie inside the header region (asserted at
    // compile time for MAX_RANKS), which is backed and zeroed at creation;
    // the offset is 4-byte aligned and the mapping outlives 'a (caller).
    unsafe { &*(header.add(STATE_OFFSET + rank as usize * 4) as *const AtomicU32) }
}

/// What a new segment looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSpec {
    /// Ranks on the node (one arena each).
    pub ranks: u32,
    /// Address at which every rank maps the segment.
    pub base: usize,
    /// Virtual size of each arena.
    pub arena_len: usize,
    /// Directory of the segment file.
    pub dir: PathBuf,
}

impl Default for SegmentSpec {
    fn default() -> Self {
        SegmentSpec {
            ranks: 1,
            base: DEFAULT_BASE,
            arena_len: DEFAULT_ARENA_LEN,
            dir: PathBuf::from("/dev/shm"),
        }
    }
}

impl SegmentSpec {
    /// The defaults, overridden by `HMPI_SHM_BASE`, `HMPI_HEAP_PER_RANK` and
    /// `HMPI_SHM_DIR` from the process environment.
    pub fn from_env(ranks: u32) -> Result<Self> {
        Self::from_vars(ranks, &|v: &str| std::env::var_os(v))
    }

    /// Like [`SegmentSpec::from_env`], with the variables looked up through
    /// `lookup`.
    pub fn from_vars(
        ranks: u32,
        lookup: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Self> {
        let mut spec = SegmentSpec {
            ranks,
            ..SegmentSpec::default()
        };
        let addr = "an address such as 0x200000000000";
        if let Some(base) = env::read_from(lookup, env::SHM_BASE, addr, env::parse_addr)? {
            spec.base = base;
        }
        let size = "a size such as 16G or 512M";
        if let Some(len) = env::read_from(lookup, env::HEAP_PER_RANK, size, env::parse_size)? {
            spec.arena_len = len;
        }
        let dir = |s: &str| Some(PathBuf::from(s));
        if let Some(dir) = env::read_from(lookup, env::SHM_DIR, "a directory", dir)? {
            spec.dir = dir;
        }
        // A value the user typed is echoed as typed (`1M`, not `1048576`).
        spec.validate().map_err(|e| match e {
            Error::Config { var, value, reason }
                if var == env::HEAP_PER_RANK || var == env::SHM_BASE =>
            {
                let typed = lookup(var).map(|v| v.to_string_lossy().into_owned());
                Error::Config {
                    var,
                    value: typed.unwrap_or(value),
                    reason,
                }
            }
            e => e,
        })?;
        Ok(spec)
    }

    /// Checks sizes and alignment; arena sizes are rounded up to
    /// [`SEGMENT_ALIGN`] by [`SegmentSpec::arena_len_rounded`].
    pub fn validate(&self) -> Result<()> {
        if self.ranks == 0 || self.ranks > MAX_RANKS {
            return Err(Error::Config {
                var: env::LOCAL_SIZE,
                value: self.ranks.to_string(),
                reason: format!("a node segment serves 1 to {MAX_RANKS} ranks"),
            });
        }
        if self.base == 0 || self.base % SEGMENT_ALIGN != 0 {
            return Err(Error::Config {
                var: env::SHM_BASE,
                value: format!("{:#x}", self.base),
                reason: format!("the base must be a non-zero multiple of {SEGMENT_ALIGN:#x}"),
            });
        }
        if self.arena_len < MIN_ARENA_LEN {
            return Err(Error::Config {
                var: env::HEAP_PER_RANK,
                value: self.arena_len.to_string(),
                reason: format!("an arena needs at least {MIN_ARENA_LEN} bytes"),
            });
        }
        let end = self.total_len().and_then(|len| self.base.checked_add(len));
        match end {
            Some(end) if end <= (1usize << 47) => Ok(()),
            _ => Err(Error::Config {
                var: env::HEAP_PER_RANK,
                value: self.arena_len.to_string(),
                reason: format!(
                    "{} arenas of this size from base {:#x} do not fit below the 128 TiB user address limit",
                    self.ranks, self.base
                ),
            }),
        }
    }

    /// The arena size actually used: rounded up to [`SEGMENT_ALIGN`].
    pub fn arena_len_rounded(&self) -> usize {
        self.arena_len.next_multiple_of(SEGMENT_ALIGN)
    }

    /// The segment's total (virtual) length, if it does not overflow.
    pub fn total_len(&self) -> Option<usize> {
        self.arena_len_rounded()
            .checked_mul(self.ranks as usize)?
            .checked_add(HEADER_LEN)
    }
}

/// The segment header, at the segment's base. Written by the creator before
/// it publishes `magic`; read-only afterwards except for the atomics.
#[repr(C)]
pub struct SegmentHeader {
    magic: AtomicU64,
    version: u32,
    ranks: u32,
    base: u64,
    total_len: u64,
    arena_len: u64,
    creator_pid: u32,
    _reserved: u32,
    /// Ranks that have mapped the segment.
    attached: AtomicU32,
    /// Set at creation: the file has no name (kept for the layout).
    unlinked: AtomicU32,
    /// A barrier over all ranks of the node.
    barrier: NodeBarrier,
    /// Threads of the node's ranks asleep in a wait of the runtime (see
    /// [`asleep`]): a hint that cores are free.
    sleeping: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<SegmentHeader>() <= REGISTRY_OFFSET);
const _: () = assert!(STATE_OFFSET + MAX_RANKS as usize * 4 <= HEADER_LEN);

/// A segment file made by a launcher: the only descriptor of a file without
/// a name, and a mapping of its header for the launcher's reads. Dropping it
/// closes both; the memory lives on while ranks have it mapped.
#[derive(Debug)]
pub struct SegmentFile {
    fd: OwnedFd,
    /// `/proc/self/fd/N` for `fd`.
    path: PathBuf,
    /// The header region, mapped read-write at an address of the kernel's
    /// choice.
    header: NonNull<c_void>,
}

// SAFETY: `header` points to shared memory that is only read through
// atomics (the rank states) after creation; it is unmapped once, in drop.
unsafe impl Send for SegmentFile {}
// SAFETY: as above; `&SegmentFile` only allows atomic loads.
unsafe impl Sync for SegmentFile {}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

fn errno_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(Errno) -> Error + 'a {
    move |e| io_err(op, path)(e.into())
}

/// A random 64-bit value from the kernel.
fn random_u64() -> u64 {
    let mut x = 0u64;
    // Raw libc: nix has no getrandom.
    // SAFETY: the buffer is a valid, writable 8-byte location.
    let n = unsafe { libc::getrandom(&mut x as *mut u64 as *mut libc::c_void, 8, 0) };
    if n != 8 {
        // Unreachable in practice (getrandom on 8 bytes does not fail once
        // the pool is initialised); fall back to time and pid, which is still
        // unique enough together with O_EXCL.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        x = t ^ ((std::process::id() as u64) << 32);
    }
    x
}

fn fallocate(fd: BorrowedFd<'_>, offset: usize, len: usize) -> std::result::Result<(), Errno> {
    loop {
        // Mode 0 allocates backing without changing the file size.
        match nix::fcntl::fallocate(
            fd,
            FallocateFlags::empty(),
            offset as libc::off_t,
            len as libc::off_t,
        ) {
            Err(Errno::EINTR) => continue,
            r => return r,
        }
    }
}

/// A new segment file in `dir`, without a name: `O_TMPFILE` where the file
/// system has it, else an `O_EXCL` file that is unlinked at once.
fn create_unnamed(dir: &Path, job: &str) -> Result<OwnedFd> {
    let mode = Mode::from_bits_truncate(0o600);
    let flags = OFlag::O_RDWR | OFlag::O_CLOEXEC;
    match nix::fcntl::open(dir, flags | OFlag::O_TMPFILE, mode) {
        Ok(fd) => return Ok(fd),
        // Not supported by the file system (or the kernel, which then sees
        // O_DIRECTORY | O_RDWR and answers EISDIR).
        Err(Errno::EOPNOTSUPP | Errno::EISDIR) => {}
        Err(e) => return Err(errno_err("create a segment file in", dir)(e)),
    }
    let uid = nix::unistd::getuid();
    let job: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("hmpi-{uid}-{job}-{:016x}", random_u64()));
    let fd = nix::fcntl::open(&path, flags | OFlag::O_CREAT | OFlag::O_EXCL, mode)
        .map_err(errno_err("create segment file", &path))?;
    nix::unistd::unlink(&path).map_err(errno_err("unlink segment file", &path))?;
    Ok(fd)
}

impl SegmentFile {
    /// Creates the segment file for a job: no name, mode 0600, sparse size,
    /// header backed and initialised, magic published last. `job` names the
    /// file for its short life where `O_TMPFILE` is missing.
    pub fn create(spec: &SegmentSpec, job: &str) -> Result<SegmentFile> {
        spec.validate()?;
        let total_len = spec.total_len().expect("validated");
        let fd = create_unnamed(&spec.dir, job)?;
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        // The mode given to open is filtered by the umask; make it exact.
        nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o600))
            .map_err(errno_err("set the mode of", &path))?;
        nix::unistd::ftruncate(&fd, total_len as libc::off_t)
            .map_err(errno_err("size segment file", &path))?;
        fallocate(fd.as_fd(), 0, HEADER_LEN).map_err(errno_err("reserve the header of", &path))?;
        // Map just the header, anywhere, to initialise it in place.
        // SAFETY: a fresh shared mapping of a range of our own file; no
        // existing memory is affected (no MAP_FIXED).
        let p = unsafe {
            nix::sys::mman::mmap(
                None,
                NonZeroUsize::new(HEADER_LEN).expect("non-zero"),
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )
        }
        .map_err(errno_err("map the header of", &path))?;
        let h = p.as_ptr() as *mut SegmentHeader;
        // SAFETY: `h` points to HEADER_LEN bytes of zeroed, writable, shared
        // memory that nobody else has mapped yet (the file has no name and
        // its magic is not published); the header fits (asserted above).
        unsafe {
            (*h).version = VERSION;
            (*h).ranks = spec.ranks;
            (*h).base = spec.base as u64;
            (*h).total_len = total_len as u64;
            (*h).arena_len = spec.arena_len_rounded() as u64;
            (*h).creator_pid = std::process::id();
            // Relaxed: published by the Release store of the magic below.
            (*h).unlinked.store(1, Ordering::Relaxed);
            // SYNC POINT: Release publishes the fields above to attachers,
            // which check the magic with Acquire.
            (*h).magic.store(MAGIC, Ordering::Release);
        }
        Ok(SegmentFile {
            fd,
            path,
            header: p,
        })
    }

    /// A path that opens the file: `/proc/self/fd/N`, valid in this process
    /// and in children that inherit descriptor N (what ranks receive in
    /// `HMPI_SHM_NAME`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's descriptor (close-on-exec; a launcher clears the flag in
    /// each rank between fork and exec so that the rank inherits it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The state rank `rank` recorded ([`Segment::set_rank_state`]);
    /// [`RankState::Unknown`] for a rank out of range.
    pub fn rank_state(&self, rank: u32) -> RankState {
        // SAFETY: `header` is this file's header region, mapped until drop.
        let ranks = unsafe { (*(self.header.as_ptr() as *const SegmentHeader)).ranks };
        if rank >= ranks {
            return RankState::Unknown;
        }
        // SAFETY: as above, and rank < ranks <= MAX_RANKS.
        let word = unsafe { state_word(self.header.as_ptr() as *const u8, rank) };
        // SYNC POINT: Acquire pairs with the rank's Release store in
        // `set_rank_state` (the launcher reads after the rank ended).
        RankState::from_word(word.load(Ordering::Acquire))
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        // SAFETY: unmapping the header mapping made in `create`, which no
        // reference outlives (`rank_state` borrows it only during the call).
        unsafe {
            let _ = nix::sys::mman::munmap(self.header, HEADER_LEN);
        }
    }
}

// ---------------------------------------------------------------------------
// The attached segment of this process.

static HEADER: std::sync::atomic::AtomicPtr<SegmentHeader> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
static LOCAL_RANK: AtomicU32 = AtomicU32::new(0);
static SEG_FD: AtomicI32 = AtomicI32::new(-1);
/// [start, end) of the mapping, for the allocator's address checks.
static SEG_START: AtomicUsize = AtomicUsize::new(0);
static SEG_END: AtomicUsize = AtomicUsize::new(0);

/// This process's handle to the attached node segment.
#[derive(Clone, Copy)]
pub struct Segment {
    header: &'static SegmentHeader,
    local_rank: u32,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("base", &format_args!("{:#x}", self.base()))
            .field("len", &self.len())
            .field("ranks", &self.ranks())
            .field("local_rank", &self.local_rank)
            .finish()
    }
}

/// Is `addr` inside the attached segment? `false` when none is attached.
#[inline]
pub fn contains(addr: usize) -> bool {
    // Relaxed: the bounds are written before HEADER is published and never
    // change afterwards; a stale zero only sends an address to the system
    // allocator's path, which happens only for memory from before the
    // attach (none of the segment's memory can reach a thread before the
    // Release store that publishes the attach).
    addr.wrapping_sub(SEG_START.load(Ordering::Relaxed))
        < SEG_END
            .load(Ordering::Relaxed)
            .wrapping_sub(SEG_START.load(Ordering::Relaxed))
}

/// Counts the calling thread as asleep in a wait of the runtime while `f`
/// runs (a futex wait or a short sleep), for [`free_cpus`]. Outside a
/// segment it only runs `f`.
pub(crate) fn asleep<R>(f: impl FnOnce() -> R) -> R {
    // Acquire: pairs with the attach's Release store; the header is mapped.
    let h = HEADER.load(Ordering::Acquire);
    // SAFETY: a non-null HEADER points to the attached segment's header,
    // mapped for the rest of the process's life.
    let Some(h) = (unsafe { h.as_ref() }) else {
        return f();
    };
    // Relaxed: a hint read by other ranks; nothing is published with it.
    h.sleeping.fetch_add(1, Ordering::Relaxed);
    let r = f();
    // Relaxed: as above.
    h.sleeping.fetch_sub(1, Ordering::Relaxed);
    r
}

/// How many of `cpus` CPUs (those the node's ranks share) are likely
/// free: `cpus` less the node's ranks that are not asleep in a wait of the
/// runtime (at most one per rank counted; threads of a rank that never
/// wait in the runtime are not seen). 0 outside a segment. A hint, for
/// work that a free core could share (copy agents).
pub fn free_cpus(cpus: usize) -> usize {
    // Acquire: as in `asleep`.
    let h = HEADER.load(Ordering::Acquire);
    // SAFETY: as in `asleep`.
    let Some(h) = (unsafe { h.as_ref() }) else {
        return 0;
    };
    // Relaxed: a hint (see `asleep`).
    let asleep = h.sleeping.load(Ordering::Relaxed).min(h.ranks) as usize;
    cpus.saturating_sub(h.ranks as usize - asleep)
}

impl Segment {
    /// Maps the segment at `path` as local rank `local_rank` of `local_size`.
    ///
    /// Checks the header (magic, version, rank count, sizes), maps the whole
    /// file at the recorded base with `MAP_FIXED_NOREPLACE` and counts this
    /// rank as attached. A process attaches at most once.
    pub fn attach(path: &Path, local_rank: u32, local_size: u32) -> Result<Segment> {
        if !HEADER.load(Ordering::Acquire).is_null() {
            return Err(Error::AlreadyAttached);
        }
        let fd = nix::fcntl::open(path, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(errno_err("open segment file", path))?;
        // Read the header through a temporary mapping.
        // SAFETY: a fresh read-only shared mapping, placed by the kernel.
        let p = unsafe {
            nix::sys::mman::mmap(
                None,
                NonZeroUsize::new(4096).expect("non-zero"),
                ProtFlags::PROT_READ,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )
        }
        .map_err(errno_err("map the header of", path))?;
        let (magic, version, ranks, base, total_len, arena_len) = {
            let h = p.as_ptr() as *const SegmentHeader;
            // SAFETY: `h` points to a readable page of the file; the fields
            // are plain integers and atomics, valid for any bit pattern.
            // SYNC POINT: Acquire on the magic pairs with the creator's
            // Release store, so the fields read after it are complete.
            unsafe {
                (
                    (*h).magic.load(Ordering::Acquire),
                    (*h).version,
                    (*h).ranks,
                    (*h).base as usize,
                    (*h).total_len as usize,
                    (*h).arena_len as usize,
                )
            }
        };
        // SAFETY: unmapping the temporary mapping made above; nothing
        // refers to it any more.
        let _ = unsafe { nix::sys::mman::munmap(p, 4096) };
        if magic != MAGIC {
            return Err(Error::BadHeader(format!(
                "{} has no hmpi segment magic",
                path.display()
            )));
        }
        if version != VERSION {
            return Err(Error::BadHeader(format!(
                "{} has layout version {version}, this library understands {VERSION}",
                path.display()
            )));
        }
        if ranks != local_size || local_rank >= ranks {
            return Err(Error::BadHeader(format!(
                "{} is made for {ranks} ranks; this process is local rank {local_rank} of {local_size}",
                path.display()
            )));
        }
        let addr = NonZeroUsize::new(base);
        let len = NonZeroUsize::new(total_len);
        let (Some(addr), Some(len)) = (addr, len) else {
            return Err(Error::BadHeader(format!(
                "{} has a zero base or length",
                path.display()
            )));
        };
        if total_len != HEADER_LEN + ranks as usize * arena_len || base % SEGMENT_ALIGN != 0 {
            return Err(Error::BadHeader(format!(
                "{} has inconsistent sizes",
                path.display()
            )));
        }
        // SAFETY: a shared mapping of our file at `base`; MAP_FIXED_NOREPLACE
        // refuses (EEXIST) instead of replacing anything already mapped there.
        let m = unsafe {
            nix::sys::mman::mmap(
                Some(addr),
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED | MapFlags::MAP_FIXED_NOREPLACE | MapFlags::MAP_NORESERVE,
                &fd,
                0,
            )
        };
        let m = match m {
            Ok(m) => m,
            Err(Errno::EEXIST) => {
                return Err(Error::AddressInUse {
                    base,
                    len: total_len,
                })
            }
            Err(e) => return Err(errno_err("map segment", path)(e)),
        };
        if m.as_ptr() as usize != base {
            // A kernel older than 4.17 treats the flag as a hint only.
            // SAFETY: unmapping the mapping we just made elsewhere.
            let _ = unsafe { nix::sys::mman::munmap(m, total_len) };
            return Err(Error::AddressInUse {
                base,
                len: total_len,
            });
        }
        // Claim the rank's slot: one process per rank and job.
        // SAFETY: the header region is mapped at `base` (just above) and
        // local_rank < ranks <= MAX_RANKS (checked above).
        let word = unsafe { state_word(base as *const u8, local_rank) };
        // SYNC POINT: AcqRel; the claim orders nothing else (the word is
        // read by the launcher and by peers as a state, see `rank_state`),
        // but a second attacher must see the first one's claim: the
        // compare and swap on one word is what decides.
        let claimed = word.compare_exchange(
            RankState::Unknown as u32,
            RankState::Attached as u32,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if claimed.is_err() {
            // SAFETY: unmapping the mapping we just made; nothing refers to it.
            let _ = unsafe { nix::sys::mman::munmap(m, total_len) };
            return Err(Error::RankClaimed { rank: local_rank });
        }
        // SAFETY: the mapping at `base` holds the header (checked above) and
        // stays mapped for the rest of the process's life.
        let header: &'static SegmentHeader = unsafe { &*(base as *const SegmentHeader) };
        SEG_START.store(base, Ordering::Relaxed);
        SEG_END.store(base + total_len, Ordering::Relaxed);
        LOCAL_RANK.store(local_rank, Ordering::Relaxed);
        // Kept open for `reserve` for the rest of the process's life.
        SEG_FD.store(std::os::fd::IntoRawFd::into_raw_fd(fd), Ordering::Relaxed);
        let seg = Segment { header, local_rank };
        // Relaxed: a count for diagnostics; nothing is published with it.
        header.attached.fetch_add(1, Ordering::Relaxed);
        Ok(seg)
    }

    /// Makes `seg` the process's segment for [`Segment::current`]. Called
    /// once the rank's own arena is ready.
    pub(crate) fn publish_current(seg: &Segment) {
        // SYNC POINT: Release pairs with the Acquire in `current`: whoever
        // sees the header also sees the bounds, the rank and the arena set
        // up before this store.
        HEADER.store(
            seg.header as *const SegmentHeader as *mut SegmentHeader,
            Ordering::Release,
        );
    }

    /// The segment this process is attached to, if any.
    #[inline]
    pub fn current() -> Option<Segment> {
        let h = HEADER.load(Ordering::Acquire);
        if h.is_null() {
            return None;
        }
        Some(Segment {
            // SAFETY: a non-null HEADER points to the header of a segment
            // mapped for the rest of the process's life.
            header: unsafe { &*h },
            local_rank: LOCAL_RANK.load(Ordering::Relaxed),
        })
    }

    /// First address of the segment.
    pub fn base(&self) -> usize {
        self.header.base as usize
    }

    /// Length of the segment in bytes.
    pub fn len(&self) -> usize {
        self.header.total_len as usize
    }

    /// Whether the segment has zero length (never true for a valid segment).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of ranks (arenas) on the node.
    pub fn ranks(&self) -> u32 {
        self.header.ranks
    }

    /// This process's local rank.
    pub fn local_rank(&self) -> u32 {
        self.local_rank
    }

    /// Virtual size of each arena.
    pub fn arena_len(&self) -> usize {
        self.header.arena_len as usize
    }

    /// First address of local rank `rank`'s arena.
    pub fn arena_base(&self, rank: u32) -> usize {
        debug_assert!(rank < self.ranks());
        self.base() + HEADER_LEN + rank as usize * self.arena_len()
    }

    /// Whether `addr` lies in this segment.
    pub fn contains(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.base()) < self.len()
    }

    /// The local rank whose arena holds `addr`, if `addr` is in an arena.
    pub fn owner_of(&self, addr: usize) -> Option<u32> {
        let off = addr.checked_sub(self.base() + HEADER_LEN)?;
        let r = off / self.arena_len();
        (r < self.ranks() as usize).then_some(r as u32)
    }

    /// Reserves backing for `len` bytes at `addr` (inside the segment) with
    /// `fallocate`, so that touching them cannot raise `SIGBUS`.
    pub fn reserve(&self, addr: usize, len: usize) -> Result<(), Limit> {
        debug_assert!(self.contains(addr) && self.contains(addr + len - 1));
        // SAFETY: SEG_FD was stored before the segment was published (this
        // `Segment` exists) and is never closed.
        let fd = unsafe { BorrowedFd::borrow_raw(SEG_FD.load(Ordering::Relaxed)) };
        match fallocate(fd, addr - self.base(), len) {
            Ok(()) => Ok(()),
            Err(Errno::ENOSPC) => Err(Limit::NoSpace),
            Err(e) => {
                // Anything else (EIO, EFBIG, EOPNOTSUPP) is as fatal for an
                // allocation as no space; say what happened on stderr since
                // the allocator's callers only see a null pointer. No
                // allocation here: this runs inside the allocator.
                crate::diag::write_stderr_fmt(format_args!(
                    "hmpi: fallocate on the node segment failed with errno {}\n",
                    e as i32
                ));
                Err(Limit::NoSpace)
            }
        }
    }

    /// Reports an exhausted arena to the caller's error type.
    pub(crate) fn exhausted(&self, requested: usize, limit: Limit) -> Exhausted {
        Exhausted {
            rank: self.local_rank,
            requested,
            limit,
        }
    }

    fn registry_slot(&self, rank: u32, slot: usize) -> &AtomicU64 {
        assert!(rank < self.ranks(), "rank {rank} out of range");
        assert!(slot < REGISTRY_SLOTS, "registry slot {slot} out of range");
        let p = self.base() + REGISTRY_OFFSET + (rank as usize * REGISTRY_SLOTS + slot) * 8;
        // SAFETY: the registry lies inside the header region (asserted at
        // compile time for MAX_RANKS), which is mapped, backed and zeroed
        // at creation; `p` is 8-byte aligned.
        unsafe { &*(p as *const AtomicU64) }
    }

    /// Publishes `value` (non-zero) in this rank's registry `slot`, for the
    /// layers above to find each other's shared structures.
    pub fn publish(&self, slot: usize, value: u64) {
        assert_ne!(value, 0, "zero means 'not published'");
        // SYNC POINT: Release pairs with `lookup`'s Acquire: whatever the
        // value points to is initialised before it is visible.
        self.registry_slot(self.local_rank, slot)
            .store(value, Ordering::Release);
    }

    /// The value rank `rank` published in `slot`, or 0 if none yet.
    pub fn lookup(&self, rank: u32, slot: usize) -> u64 {
        self.registry_slot(rank, slot).load(Ordering::Acquire)
    }

    /// Waits until rank `rank` has published in `slot`, then returns it.
    pub fn wait_lookup(&self, rank: u32, slot: usize) -> u64 {
        let mut backoff = Backoff::new();
        loop {
            let v = self.lookup(rank, slot);
            if v != 0 {
                return v;
            }
            backoff.snooze();
        }
    }

    /// The state rank `rank` recorded ([`Segment::set_rank_state`]);
    /// [`RankState::Unknown`] for a rank out of range.
    pub fn rank_state(&self, rank: u32) -> RankState {
        if rank >= self.ranks() {
            return RankState::Unknown;
        }
        // SAFETY: the header region is mapped at `base` for the process's
        // life, and rank < ranks <= MAX_RANKS.
        let word = unsafe { state_word(self.base() as *const u8, rank) };
        // SYNC POINT: Acquire pairs with the rank's Release store in
        // `set_rank_state`.
        RankState::from_word(word.load(Ordering::Acquire))
    }

    /// Records this rank's [`RankState`] for the launcher and its peers.
    pub fn set_rank_state(&self, state: RankState) {
        // SAFETY: the header region is mapped at `base` for the process's
        // life, and local_rank < ranks <= MAX_RANKS.
        let word = unsafe { state_word(self.base() as *const u8, self.local_rank) };
        // SYNC POINT: Release pairs with the Acquire in
        // `SegmentFile::rank_state`.
        word.store(state as u32, Ordering::Release);
    }

    /// Blocks until every rank of the node has called `barrier`.
    pub fn barrier(&self) {
        self.header.barrier.wait(self.ranks());
    }

    /// [`Segment::barrier`] for ranks that may end before they reach it:
    /// `gone` is asked now and then while this rank sleeps (see
    /// [`NodeBarrier::wait_or`]).
    pub fn barrier_or<T>(&self, gone: impl FnMut() -> Option<T>) -> Result<(), T> {
        self.header.barrier.wait_or(self.ranks(), gone)
    }

    /// Ranks attached so far.
    pub fn attached(&self) -> u32 {
        self.header.attached.load(Ordering::Acquire)
    }

    /// Whether the segment file has no name (true from its creation on).
    pub fn is_unlinked(&self) -> bool {
        self.header.unlinked.load(Ordering::Acquire) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_size_is_echoed_as_typed() {
        let lookup = |v: &str| (v == env::HEAP_PER_RANK).then(|| "1M".into());
        let e = SegmentSpec::from_vars(2, &lookup).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("bad value \"1M\" for HMPI_HEAP_PER_RANK"),
            "{text}"
        );
    }
}
