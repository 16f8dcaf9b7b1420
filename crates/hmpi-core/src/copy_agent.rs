//! Copy agents: a small pool of threads per process that help the calling
//! thread with large memory copies (the progress agents of the DART
//! runtime, notes §7).
//!
//! One core copies memory to memory at one core's speed; a put or get of
//! a megabyte between two ranks' windows is such a copy. A copy of at
//! least [`Config::min`] bytes is cut into chunks that the caller and the
//! agents claim one at a time from a shared counter, so on a machine with
//! an idle core an agent does part of the copy while the caller does the
//! rest, and on a busy one (agents asleep or descheduled) the caller
//! claims every chunk itself and loses only the claims. The call returns
//! when every chunk has been copied, whoever copied it: the copy is
//! complete when [`Pool::copy`] returns, exactly as a plain copy is.
//!
//! Agents spin for a short while after a copy (back-to-back copies find
//! them awake), then yield, then sleep on a futex that the next copy
//! wakes. They are detached threads of the process: a process that exits
//! with its agents asleep just exits.
//!
//! Configuration ([`Config::from_env`]): `HMPI_COPY_AGENTS=n` agents per
//! process that share every large copy (0 turns them off), or `auto`, the
//! default: one agent that shares a copy only while a CPU is likely free
//! — some rank of the node asleep in a wait of the runtime, leaving fewer
//! awake ranks than CPUs ([`shmheap::segment::free_cpus`]), and fewer
//! runnable threads on the machine than CPUs (`/proc/loadavg`, read at
//! most every 10 ms); otherwise the caller copies alone, since an agent
//! would only take turns with a rank or another program (and one
//! descheduled in the middle of a chunk makes its caller wait).
//! `HMPI_COPY_MIN=bytes` is the least copy they help with (default
//! [`DEFAULT_MIN`]). Window put and get use the process's pool ([`pool`]);
//! a bad value fails window creation with an error naming the variable.
//!
//! # Example
//! ```
//! use hmpi_core::copy_agent::{Config, Pool};
//!
//! let pool = Pool::new(Config { agents: 1, min: 4096, when_free: false }).unwrap();
//! let src: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
//! let mut dst = vec![0u8; src.len()];
//! // SAFETY: both buffers hold `src.len()` bytes and do not overlap.
//! unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
//! assert_eq!(dst, src);
//! ```

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmheap::sync::futex::{futex_wait_uncounted, futex_wake};

use crate::error::{Error, Result};

/// The number of agents per process.
pub const AGENTS_VAR: &str = "HMPI_COPY_AGENTS";
/// The least copy, in bytes, that agents help with.
pub const MIN_VAR: &str = "HMPI_COPY_MIN";
/// Agents per process unless `HMPI_COPY_AGENTS` says otherwise.
pub const DEFAULT_AGENTS: usize = 1;
/// The value of `HMPI_COPY_AGENTS` that asks for the default: one agent
/// sharing copies only while a CPU is likely free.
pub const AUTO: &str = "auto";
/// The least copy agents help with unless `HMPI_COPY_MIN` says otherwise.
pub const DEFAULT_MIN: usize = 256 << 10;
/// The most agents a process may ask for.
pub const MAX_AGENTS: usize = 64;

/// The smallest chunk a copy is cut into (smaller ones cost more in
/// claims than they balance).
const CHUNK_MIN: usize = 64 << 10;
/// Chunks per worker (caller and agents) of one copy: more than one, so
/// that a worker that is descheduled mid-copy holds up only part of its
/// share, and few, since every claim moves a shared line between cores
/// (in paired 1 MiB runs two per worker beat both four and one).
const CHUNKS_PER_WORKER: usize = 2;
/// How long an agent spins for the next copy before it yields and sleeps.
const SPIN_TIME: Duration = Duration::from_micros(50);
/// Yields between the spin and the sleep.
const YIELDS: u32 = 16;
/// The longest an agent sleeps before it looks again (a copy always wakes
/// sleepers; this only bounds the cost of a wake-up the kernel lost).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// Bits of the claim word given to the chunk index and to the chunk
/// count; the rest (the high bits) hold the copy's generation.
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The most chunks of one copy.
const MAX_CHUNKS: usize = INDEX_MASK as usize;

/// How many agents and from what size on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Agent threads per process (0: none, every copy is the caller's).
    pub agents: usize,
    /// The least copy, in bytes, that is shared with the agents.
    pub min: usize,
    /// Share a copy only while a CPU is likely free: some rank of the node
    /// asleep in a wait of the runtime, leaving fewer awake ranks than
    /// CPUs ([`shmheap::segment::free_cpus`]). Otherwise the caller copies
    /// alone, as the agent would only take turns with a rank.
    pub when_free: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            agents: DEFAULT_AGENTS,
            min: DEFAULT_MIN,
            when_free: true,
        }
    }
}

impl Config {
    /// The defaults, overridden by `HMPI_COPY_AGENTS` and `HMPI_COPY_MIN`.
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|v| std::env::var_os(v))
    }

    /// Like [`Config::from_env`], with the variables looked up through
    /// `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Config> {
        let mut c = Config::default();
        let var = |name: &str, max: usize, unit: &str| -> Result<Option<usize>> {
            let Some(v) = lookup(name) else {
                return Ok(None);
            };
            let s = v.to_string_lossy().into_owned();
            match shmheap::env::parse_size(&s) {
                Some(n) if n <= max => Ok(Some(n)),
                _ => Err(Error::Arg {
                    reason: format!("{name}={s:?}: expected 0 to {max} {unit}"),
                }),
            }
        };
        if lookup(AGENTS_VAR).is_some_and(|v| v == AUTO) {
            c.agents = 1;
            c.when_free = true;
        } else if let Some(n) = var(AGENTS_VAR, MAX_AGENTS, "agents, or auto")? {
            c.agents = n;
            c.when_free = false;
        }
        if let Some(n) = var(MIN_VAR, usize::MAX, "bytes")? {
            c.min = n;
        }
        Ok(c)
    }
}

/// What the caller and the agents share: the copy in progress and the
/// words they meet on. Process-local (agents are threads of the process).
#[derive(Debug, Default)]
struct Shared {
    /// Bumped for each shared copy; sleeping agents wait on it.
    generation: AtomicU32,
    /// The claim word: `generation << 40 | chunks << 20 | next chunk`.
    /// A claim is a compare-and-swap of the next index, so a claim can
    /// only succeed on the copy it read the parameters of.
    claim: AtomicU64,
    /// Chunks of the current copy finished (by anyone).
    done: AtomicUsize,
    /// The CPUs the agents may run on (0 until the first agent started):
    /// with [`Config::when_free`], the node's CPUs that
    /// [`shmheap::segment::free_cpus`] counts from. The caller's own
    /// affinity may be one core (a bound rank).
    cpus: AtomicUsize,
    /// The copy's parameters, written before `claim` publishes them.
    src: AtomicUsize,
    dst: AtomicUsize,
    len: AtomicUsize,
    chunk: AtomicUsize,
    /// Agents asleep (or about to sleep) on `generation`.
    sleepers: AtomicU32,
    /// The pool is being dropped: agents return.
    stop: AtomicBool,
}

impl Shared {
    /// Claims and copies chunks of the current copy until none is left;
    /// returns how many this thread copied.
    fn work(&self) -> usize {
        let mut copied = 0;
        loop {
            // SYNC POINT: Acquire pairs with the Release store of the
            // claim word by `Pool::copy` (and the claims after it, its
            // release sequence): the parameters below are this copy's.
            let v = self.claim.load(Ordering::Acquire);
            let (chunks, next) = ((v >> INDEX_BITS) & INDEX_MASK, v & INDEX_MASK);
            if next >= chunks {
                return copied;
            }
            // SYNC POINT: Acquire on success, as the load above; a failure
            // (someone else claimed, or a new copy began) reloads.
            if self
                .claim
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // The claim succeeded, so this copy is still in progress and
            // its caller waits for this chunk: the parameters stay as
            // published until `done` counts it. Relaxed: ordered by the
            // claim's Acquire.
            let src = self.src.load(Ordering::Relaxed);
            let dst = self.dst.load(Ordering::Relaxed);
            let len = self.len.load(Ordering::Relaxed);
            let chunk = self.chunk.load(Ordering::Relaxed);
            let at = next as usize * chunk;
            let n = chunk.min(len - at);
            // SAFETY: `Pool::copy`'s caller guarantees both ranges for the
            // whole copy and that they do not overlap; `[at, at + n)` lies
            // inside it (`at < len` since `next < chunks`), and the caller
            // does not return before `done` counts this chunk.
            unsafe {
                std::ptr::copy_nonoverlapping((src + at) as *const u8, (dst + at) as *mut u8, n)
            };
            // SYNC POINT: Release pairs with the caller's Acquire load of
            // `done`: the bytes above are written before the copy is seen
            // complete.
            self.done.fetch_add(1, Ordering::Release);
            copied += 1;
        }
    }

    /// An agent's life: wait for a copy, help with it, again.
    fn agent(&self) {
        unbind();
        // Relaxed: a hint for `Pool::copy`, which reads 0 (no sharing)
        // until the agent has widened its affinity.
        self.cpus
            .store(shmheap::load::thread_cpus(), Ordering::Relaxed);
        // Relaxed: only compared with later values of the same word.
        let mut seen = self.generation.load(Ordering::Relaxed);
        loop {
            let spin_from = Instant::now();
            let mut yields = 0;
            loop {
                // Relaxed: a flag with no data behind it.
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                // Relaxed: the copy's data is published by `claim`, which
                // `work` loads with Acquire.
                let g = self.generation.load(Ordering::Relaxed);
                if g != seen {
                    seen = g;
                    break;
                }
                if spin_from.elapsed() < SPIN_TIME {
                    for _ in 0..64 {
                        std::hint::spin_loop();
                    }
                } else if yields < YIELDS {
                    yields += 1;
                    std::thread::yield_now();
                } else {
                    // SeqCst, with the caller's SeqCst store of
                    // `generation` and load of `sleepers`: either the
                    // caller sees this sleeper and wakes it, or this
                    // re-check sees the new generation (and the futex
                    // compares the word in the kernel in any case).
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    if self.generation.load(Ordering::SeqCst) == seen
                        // Relaxed: as above.
                        && !self.stop.load(Ordering::Relaxed)
                    {
                        futex_wait_uncounted(&self.generation, seen, MAX_SLEEP);
                    }
                    // SeqCst: the counterpart of the increment.
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
            self.work();
        }
    }
}

/// Lets the calling thread run on every CPU the system allows it (the
/// kernel intersects the set with the process's cpuset). A thread starts
/// with its process's affinity, and a rank bound to one core (`hmpirun
/// --bind`, `mpirun --bind-to core`) would keep its agents on that core,
/// where they can only take turns with the caller. Failing leaves the
/// affinity as it was.
fn unbind() {
    // SAFETY: a zeroed `cpu_set_t` is the empty set, `CPU_SET` writes bits
    // inside it (every index is below `CPU_SETSIZE`), and
    // `sched_setaffinity` on pid 0 (this thread) reads a set of the size
    // given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A pool of copy agents. [`pool`] is the process's; tests and tools may
/// make their own (its agents stop when it is dropped).
#[derive(Debug)]
pub struct Pool {
    config: Config,
    shared: Arc<Shared>,
    /// A thread of this process is sharing a copy with the agents; copies
    /// by other threads meanwhile are done alone.
    busy: AtomicBool,
    threads: Vec<JoinHandle<()>>,
    /// The least chunk (tests cut small copies into many chunks).
    chunk_min: usize,
}

impl Pool {
    /// Starts `config.agents` agent threads.
    pub fn new(config: Config) -> Result<Pool> {
        Pool::with_chunk_min(config, CHUNK_MIN)
    }

    fn with_chunk_min(config: Config, chunk_min: usize) -> Result<Pool> {
        if config.agents > MAX_AGENTS {
            return Err(Error::Arg {
                reason: format!("{} copy agents (at most {MAX_AGENTS})", config.agents),
            });
        }
        let shared = Arc::new(Shared::default());
        let mut pool = Pool {
            config,
            shared,
            busy: AtomicBool::new(false),
            threads: Vec::with_capacity(config.agents),
            chunk_min: chunk_min.max(1),
        };
        for i in 0..config.agents {
            let s = Arc::clone(&pool.shared);
            let t = std::thread::Builder::new()
                .name(format!("hmpi-copy-{i}"))
                .spawn(move || s.agent())
                .map_err(|e| Error::Internal(format!("starting copy agent {i}: {e}")))?;
            pool.threads.push(t);
        }
        Ok(pool)
    }

    /// The pool's configuration.
    pub fn config(&self) -> Config {
        self.config
    }

    /// Whether a CPU is likely free for an agent (see [`Config::when_free`]):
    /// some rank of the node is asleep in the runtime leaving fewer awake
    /// ranks than the CPUs the agents may use, and the machine's run queue
    /// (`/proc/loadavg`, read at most every [`shmheap::load::RUNNABLE_EVERY`], this
    /// process's agents not counted) has fewer runnable threads than those
    /// CPUs: other programs' threads take cores too.
    fn cpu_free(&self) -> bool {
        // Relaxed: see `Shared::cpus`.
        let cpus = self.shared.cpus.load(Ordering::Relaxed);
        if shmheap::segment::free_cpus(cpus) == 0 {
            return false;
        }
        shmheap::load::runnable_threads().saturating_sub(self.config.agents) < cpus
    }

    /// Copies `len` bytes from `src` to `dst`, with the agents' help when
    /// `len` is at least [`Config::min`] and no other thread of the
    /// process is sharing a copy with them. Complete when it returns.
    /// Overlapping ranges are copied as `memmove` does, by the caller
    /// alone.
    ///
    /// # Safety
    /// `src` is valid for reads and `dst` for writes of `len` bytes, for
    /// the duration of the call.
    pub unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) {
        let (d, s) = (dst as usize, src as usize);
        let overlap = d < s.wrapping_add(len) && s < d.wrapping_add(len);
        if len == 0
            || len < self.config.min
            || self.config.agents == 0
            || overlap
            || (self.config.when_free && !self.cpu_free())
            // Acquire: pairs with the Release store that ends another
            // thread's shared copy, after which the words are ours.
            || self.busy.swap(true, Ordering::Acquire)
        {
            // SAFETY: the caller's guarantee; `copy` allows an overlap.
            unsafe { std::ptr::copy(src, dst, len) };
            return;
        }
        let sh = &*self.shared;
        let workers = self.config.agents + 1;
        let mut chunk = (len / (workers * CHUNKS_PER_WORKER)).max(self.chunk_min);
        chunk = chunk.div_ceil(64) * 64;
        if len.div_ceil(chunk) > MAX_CHUNKS {
            chunk = len.div_ceil(MAX_CHUNKS);
        }
        let chunks = len.div_ceil(chunk) as u64;
        // Relaxed: published by the Release store of `claim` below.
        sh.src.store(s, Ordering::Relaxed);
        sh.dst.store(d, Ordering::Relaxed);
        sh.len.store(len, Ordering::Relaxed);
        sh.chunk.store(chunk, Ordering::Relaxed);
        sh.done.store(0, Ordering::Relaxed);
        // Relaxed: only this thread (holding `busy`) writes it.
        let g = sh.generation.load(Ordering::Relaxed).wrapping_add(1);
        // SYNC POINT: Release pairs with the claims' Acquire: a claim of
        // this copy sees its parameters and the reset `done`. The
        // generation's low bits in the high bits of the word make a stale
        // claimer's compare-and-swap fail.
        sh.claim.store(
            (u64::from(g) << (2 * INDEX_BITS)) | (chunks << INDEX_BITS),
            Ordering::Release,
        );
        // SeqCst: see `Shared::agent`'s sleep.
        sh.generation.store(g, Ordering::SeqCst);
        if sh.sleepers.load(Ordering::SeqCst) > 0 {
            futex_wake(&sh.generation, self.config.agents as i32);
        }
        sh.work();
        // The chunks left are being copied by agents that claimed them.
        let mut polls = 0u32;
        // SYNC POINT: Acquire pairs with each chunk's Release increment:
        // all bytes are in place once the count is full.
        while sh.done.load(Ordering::Acquire) < chunks as usize {
            polls += 1;
            if polls < 1 << 12 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // Release: the words may be reused by the next thread's copy.
        self.busy.store(false, Ordering::Release);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Relaxed: the agents look at it in every wait step; the wake
        // below ends their sleep.
        self.shared.stop.store(true, Ordering::Relaxed);
        // SeqCst: as a copy's, so a sleeper wakes up to see `stop`.
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.shared.generation, i32::MAX);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

static POOL: OnceLock<std::result::Result<Pool, String>> = OnceLock::new();

/// The process's pool, started on first use with [`Config::from_env`];
/// the error (a bad variable, no thread) is the same at every call.
pub fn pool() -> Result<&'static Pool> {
    POOL.get_or_init(|| {
        Config::from_env()
            .and_then(Pool::new)
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|reason| Error::Arg {
        reason: reason.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn configuration() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |v: &str| pairs.iter().find(|p| p.0 == v).map(|p| OsString::from(p.1))
        };
        assert_eq!(Config::from_lookup(env(&[])).unwrap(), Config::default());
        let c = Config::from_lookup(env(&[(AGENTS_VAR, "3"), (MIN_VAR, "1M")])).unwrap();
        assert_eq!(
            c,
            Config {
                agents: 3,
                min: 1 << 20,
                when_free: false,
            }
        );
        for bad in [
            &[(AGENTS_VAR, "65")][..],
            &[(AGENTS_VAR, "two")],
            &[(MIN_VAR, "-1")],
            &[(MIN_VAR, "1Q")],
        ] {
            let e = Config::from_lookup(env(bad)).unwrap_err().to_string();
            assert!(e.contains(bad[0].0), "{e}");
        }
        let auto = Config::from_lookup(env(&[(AGENTS_VAR, "auto")])).unwrap();
        assert!(auto.when_free && auto.agents == 1);
        assert_eq!(auto, Config::default());
        let three = Config::from_lookup(env(&[(AGENTS_VAR, "3")])).unwrap();
        assert!(!three.when_free);
        let none = Config::from_lookup(env(&[(AGENTS_VAR, "0")])).unwrap();
        assert_eq!(none.agents, 0);
        assert!(Pool::new(Config {
            agents: 65,
            min: 0,
            when_free: false
        })
        .is_err());
    }

    /// Every size up to a few chunks and every relative alignment, cut
    /// into small chunks so that the edges of chunks fall everywhere;
    /// the bytes around the destination stay untouched.
    #[test]
    fn split_copies_of_every_size_and_alignment() {
        let pool = Pool::with_chunk_min(
            Config {
                agents: 2,
                min: 0,
                when_free: false,
            },
            64,
        )
        .unwrap();
        let src = pattern(4096 + 64, 7);
        // Under Miri, fewer sizes and alignments: the agents' hand-offs
        // are what it checks, and each copy is interpreted.
        let (lens, sos, dofs): (Vec<usize>, usize, &[usize]) = if cfg!(miri) {
            ((0..140).step_by(7).chain([256, 257]).collect(), 2, &[0, 3])
        } else {
            (
                (0..700)
                    .chain([1000, 2047, 2048, 2049, 4095, 4096])
                    .collect(),
                8,
                &[0, 1, 3, 7, 8, 13],
            )
        };
        for len in lens {
            for so in 0..sos {
                for &dof in dofs {
                    let mut dst = vec![0xeeu8; len + 32];
                    // SAFETY: `so + len <= src.len()`, `dof + len <
                    // dst.len()`; distinct vectors.
                    unsafe { pool.copy(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), len) };
                    assert!(dst[..dof].iter().all(|&b| b == 0xee), "{len} {so} {dof}");
                    assert_eq!(&dst[dof..dof + len], &src[so..so + len], "{len} {so} {dof}");
                    assert!(
                        dst[dof + len..].iter().all(|&b| b == 0xee),
                        "{len} {so} {dof}"
                    );
                }
            }
        }
    }

    /// Copies of the real chunk size, above and below the threshold, and
    /// an overlapping one (done as `memmove`).
    #[test]
    #[cfg_attr(miri, ignore)] // megabytes copied: hours under Miri
    fn large_copies_and_overlap() {
        let pool = Pool::new(Config {
            agents: 1,
            min: 256 << 10,
            when_free: false,
        })
        .unwrap();
        for len in [(256 << 10) - 1, 256 << 10, (1 << 20) + 13, 3 << 20] {
            let src = pattern(len + 5, len as u8);
            let mut dst = vec![0u8; len + 3];
            // SAFETY: both in bounds, distinct vectors.
            unsafe { pool.copy(dst.as_mut_ptr().add(3), src.as_ptr().add(5), len) };
            assert!(dst[3..] == src[5..], "{len}");
        }
        let len = 1 << 20;
        let mut v = pattern(len + 4096, 1);
        let want: Vec<u8> = v[..len].to_vec();
        // SAFETY: both ranges inside `v`; `copy` allows the overlap.
        unsafe { pool.copy(v.as_mut_ptr().add(4096), v.as_ptr(), len) };
        assert!(v[4096..] == want[..]);
    }

    /// More agents than cores, and more copying threads than agents: every
    /// copy is exact whoever does its chunks.
    #[test]
    #[cfg_attr(miri, ignore)] // megabytes copied, and sleeps: hours under Miri
    fn more_agents_than_cores() {
        let pool = Pool::with_chunk_min(
            Config {
                agents: 8,
                min: 1024,
                when_free: false,
            },
            1024,
        )
        .unwrap();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let pool = &pool;
                s.spawn(move || {
                    for round in 0..40usize {
                        let len = 1024 + round * 4099 + t as usize * 77;
                        let src = pattern(len, t.wrapping_add(round as u8));
                        let mut dst = vec![0u8; len];
                        // SAFETY: both hold `len` bytes, distinct vectors.
                        unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), len) };
                        assert!(dst == src, "thread {t} round {round}");
                        if round % 8 == 0 {
                            // Let the agents fall asleep now and then.
                            std::thread::sleep(Duration::from_millis(3));
                        }
                    }
                });
            }
        });
    }

    /// With no agents every copy is the caller's.
    #[test]
    #[cfg_attr(miri, ignore)] // 300 KB copied byte by byte is slow under Miri
    fn no_agents() {
        let pool = Pool::new(Config {
            agents: 0,
            min: 0,
            when_free: false,
        })
        .unwrap();
        let src = pattern(300_000, 9);
        let mut dst = vec![0u8; src.len()];
        // SAFETY: both hold `src.len()` bytes, distinct vectors.
        unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
        assert!(dst == src);
    }

    const CHILD: &str = "HMPI_TEST_COPY_AGENT_CHILD";

    /// The child's part of `process_exits_with_agents_asleep`: copies with
    /// the process's pool, lets the agents fall asleep, exits.
    #[test]
    fn exit_child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let pool = pool().unwrap();
        let src = pattern(1 << 20, 3);
        let mut dst = vec![0u8; src.len()];
        // SAFETY: both hold `src.len()` bytes, distinct vectors.
        unsafe { pool.copy(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
        assert!(dst == src);
        std::thread::sleep(Duration::from_millis(300));
        std::process::exit(0);
    }

    /// A process whose agents sleep exits at once, with its status.
    #[test]
    #[cfg_attr(miri, ignore)] // Miri cannot spawn processes
    fn process_exits_with_agents_asleep() {
        let exe = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(exe)
            .args(["--exact", "copy_agent::tests::exit_child", "--nocapture"])
            .env(CHILD, "1")
            .env(AGENTS_VAR, "4")
            .env(MIN_VAR, "64K")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the child did not exit with its agents asleep");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "{status:?}");
    }
}
