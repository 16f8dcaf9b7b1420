//! Solo mode: the process's locks without locked instructions while one
//! thread communicates.
//!
//! Most ranks communicate from one thread. For them the VCI lock and the
//! lane locks are never contended, yet each acquisition is a locked
//! instruction, and a locked instruction waits until every store before it
//! has left the core: the path of a tiny message (receive, then send the
//! reply) takes three of them.
//!
//! On by default (`HMPI_SOLO=0` turns it off, see [`crate::config`]); what
//! it gains was measured as described in docs/performance.md, "Locked
//! instructions".
//!
//! So the locks are *biased* towards the thread that created the endpoint,
//! the owner (the technique of biased locking in virtual machines, made
//! exact with `membarrier(2)`):
//!
//! * While the process is in solo mode, the owner enters a critical
//!   section by raising its nesting depth `inside` with a plain store,
//!   checking that solo mode still holds, and leaves it by lowering the
//!   depth (a Release store). No lock word is touched.
//! * The first time another thread needs a lock, it ends solo mode for
//!   good: it sets `multi`, runs `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//!   — a full memory barrier on every CPU that runs a thread of this
//!   process — and waits until the owner is outside every critical
//!   section. From then on every thread, the owner too, takes the real
//!   locks.
//!
//! Why that is exclusive (Dekker's argument, with the owner's fence moved
//! into the other thread's system call): the owner stores `inside`, then
//! loads `multi`; the other thread stores `multi`, then has the barrier
//! run, then loads `inside`. If the owner's load missed `multi`, it ran
//! before the barrier reached the owner's CPU, and so did its store, which
//! the barrier made visible: the other thread sees the owner inside and
//! waits. Otherwise the owner sees `multi` and takes the real lock.
//!
//! With `HMPI_SOLO=0`, or where `membarrier` is unavailable (kernels
//! before 4.14, sandboxes that forbid it), the process starts in multi
//! mode: the locks are what they would be without this module.

use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};

/// The process's solo-mode state (one per process: see [`SOLO`]).
#[derive(Debug)]
pub(crate) struct Solo {
    /// Set once, never cleared: solo mode is ending or over; the owner
    /// takes the real locks.
    multi: AtomicBool,
    /// Set once, never cleared, after `multi`: the owner has left its last
    /// solo section, and every thread takes the real locks at once.
    settled: AtomicBool,
    /// The owner's token ([`token`]); 0 before [`Solo::claim`].
    owner: AtomicUsize,
    /// How many critical sections the owner is in (written by the owner
    /// only).
    inside: AtomicU32,
}

/// The process's solo-mode state, shared by its VCI and lane locks.
pub(crate) static SOLO: Solo = Solo::new();

/// What a lock's fast path returns: whether the caller is inside in solo
/// mode (then it must call [`Solo::leave`]) or must take the real lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The owner entered in solo mode without touching the lock.
    Solo,
    /// Take the real lock.
    Real,
}

impl Solo {
    /// A state no thread owns yet: the first lock taken ends solo mode
    /// (until [`Solo::claim`]).
    pub(crate) const fn new() -> Solo {
        Solo {
            multi: AtomicBool::new(false),
            settled: AtomicBool::new(false),
            owner: AtomicUsize::new(0),
            inside: AtomicU32::new(0),
        }
    }

    /// Makes the calling thread the owner if `want` is set, `membarrier`
    /// works here and no lock was taken before; otherwise every thread
    /// takes the real locks from now on. Returns whether solo mode is on.
    pub(crate) fn claim(&self, want: bool) -> bool {
        // Relaxed: only the creating thread calls this, once, before any
        // other thread can reach the locks.
        if self.multi.load(Ordering::Relaxed) {
            return false;
        }
        if !want || !membarrier_ready() {
            // Relaxed: nobody owns the state, so no solo section ran; the
            // stores only route every later `enter` to the real locks.
            self.multi.store(true, Ordering::Relaxed);
            self.settled.store(true, Ordering::Relaxed);
            return false;
        }
        // SYNC POINT: Release pairs with the Acquire loads in `enter` and
        // `end_solo`.
        self.owner.store(token(), Ordering::Release);
        true
    }

    /// Whether every thread takes the real locks now.
    pub(crate) fn is_multi(&self) -> bool {
        // Relaxed: a report (tests, statistics); `enter` decides.
        self.multi.load(Ordering::Relaxed)
    }

    /// A lock's fast path: enters a critical section in solo mode, or says
    /// to take the real lock (ending solo mode first if the caller is not
    /// the owner).
    #[inline(always)]
    pub(crate) fn enter(&self) -> Entry {
        // SYNC POINT: Acquire pairs with the Release store in `end_solo`:
        // the owner's solo sections happen before our real one. (`multi`
        // alone would not do: the thread that set it may still be waiting
        // for the owner to leave.)
        if self.settled.load(Ordering::Acquire) {
            return Entry::Real;
        }
        // Acquire: pairs with the Release store in `claim`.
        if self.owner.load(Ordering::Acquire) != token() {
            self.end_solo();
            return Entry::Real;
        }
        // Relaxed: only this thread (the owner) writes `inside`.
        let depth = self.inside.load(Ordering::Relaxed);
        self.inside.store(depth + 1, Ordering::Relaxed);
        // The store above must come before the load below in the program;
        // the ordering between them in the hardware comes from the barrier
        // that `end_solo` runs on this CPU (see the module docs).
        compiler_fence(Ordering::SeqCst);
        // SYNC POINT: Relaxed; the exclusion argument is the module's
        // (membarrier in `end_solo`), not a happens-before edge here.
        if !self.multi.load(Ordering::Relaxed) {
            return Entry::Solo;
        }
        // Solo mode ended under us: step out again and take the lock.
        // Release: the thread that ended it waits for this store.
        self.inside.store(depth, Ordering::Release);
        Entry::Real
    }

    /// Leaves a critical section entered with [`Entry::Solo`].
    #[inline(always)]
    pub(crate) fn leave(&self) {
        // Relaxed load: only this thread writes `inside`.
        let depth = self.inside.load(Ordering::Relaxed);
        debug_assert!(depth > 0);
        // SYNC POINT: Release pairs with the Acquire load in `end_solo`:
        // what the owner did in the section happens before the thread that
        // ended solo mode takes the real lock.
        self.inside.store(depth - 1, Ordering::Release);
    }

    /// Ends solo mode for good: after it returns, the owner is in no
    /// critical section and will take the real locks.
    #[cold]
    #[inline(never)]
    fn end_solo(&self) {
        // SeqCst: the store must precede the barrier below (the system call
        // orders it in any case). Another thread may be ending solo mode at
        // the same time: each waits for the owner by itself.
        self.multi.store(true, Ordering::SeqCst);
        // Acquire: pairs with the Release store in `claim`. Unclaimed, no
        // solo section ever ran (nor was membarrier registered).
        if self.owner.load(Ordering::Acquire) == 0 {
            // SYNC POINT: Release pairs with the Acquire load in `enter`.
            self.settled.store(true, Ordering::Release);
            return;
        }
        membarrier_now();
        let mut spins = 0u32;
        // SYNC POINT: Acquire pairs with the Release stores of `inside` in
        // `leave` and `enter`.
        while self.inside.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // SYNC POINT: Release pairs with the Acquire load in `enter`.
        self.settled.store(true, Ordering::Release);
    }
}

/// This thread's token: never 0 and distinct among the threads alive at
/// any moment (a thread that ended may pass its token on, which is
/// harmless: it takes no locks any more).
///
/// On x86-64 Linux it is the thread pointer, the first word of the
/// thread's control block (see docs/performance.md, "Locked
/// instructions"); elsewhere the address of a thread-local byte.
#[inline(always)]
fn token() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux `fs` is the thread's TLS base, whose
        // first word the C library sets to the control block's own address
        // (the ABI's thread pointer); a load of it has no side effects.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags, pure));
        }
        tp
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        thread_local! {
            static TOKEN: u8 = const { 0 };
        }
        TOKEN.with(|t| t as *const u8 as usize)
    }
}

#[cfg(target_os = "linux")]
mod sys {
    /// `membarrier(2)` commands (linux/membarrier.h).
    pub const QUERY: libc::c_int = 0;
    pub const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    pub const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    pub fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier takes two integers and a CPU number and
        // touches no memory of ours; an unknown command is EINVAL.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }
}

/// Whether this kernel offers what solo mode needs
/// (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`), without registering
/// for it: where it does not, every lock is real whatever
/// [`Config::solo`](crate::Config::solo) says.
pub fn supported() -> bool {
    #[cfg(target_os = "linux")]
    {
        let cmds = sys::membarrier(sys::QUERY);
        cmds >= 0 && cmds & sys::PRIVATE_EXPEDITED as libc::c_long != 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Whether `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` works in this
/// process (registering for it).
fn membarrier_ready() -> bool {
    #[cfg(target_os = "linux")]
    {
        supported() && sys::membarrier(sys::REGISTER_PRIVATE_EXPEDITED) == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Runs a full memory barrier on every CPU that runs a thread of this
/// process. Solo mode is on only where [`membarrier_ready`] said yes, and
/// the call then cannot fail.
fn membarrier_now() {
    #[cfg(target_os = "linux")]
    {
        let r = sys::membarrier(sys::PRIVATE_EXPEDITED);
        assert!(
            r == 0,
            "membarrier failed after registering: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// A counter guarded by a `Solo` and a real spin lock, as the VCI and
    /// lane locks use them.
    struct Guarded {
        solo: Solo,
        locked: AtomicBool,
        value: UnsafeCell<u64>,
    }

    // SAFETY: `value` is touched only inside `with`, which excludes (the
    // protocol under test).
    unsafe impl Sync for Guarded {}

    impl Guarded {
        fn with(&self, f: impl FnOnce(&mut u64)) {
            match self.solo.enter() {
                Entry::Solo => {
                    // SAFETY: inside in solo mode: no other thread is.
                    f(unsafe { &mut *self.value.get() });
                    self.solo.leave();
                }
                Entry::Real => {
                    // Acquire/Release: a plain spin lock.
                    while self.locked.swap(true, Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    // SAFETY: we hold the real lock.
                    f(unsafe { &mut *self.value.get() });
                    self.locked.store(false, Ordering::Release);
                }
            }
        }
    }

    #[test]
    fn owner_alone_stays_solo() {
        let g = Guarded {
            solo: Solo::new(),
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(0),
        };
        if !g.solo.claim(true) {
            // No membarrier here: multi mode from the start is the
            // documented fallback.
            assert!(g.solo.is_multi());
            return;
        }
        for _ in 0..1000 {
            g.with(|v| *v += 1);
        }
        assert!(!g.solo.is_multi());
        assert_eq!(g.solo.enter(), Entry::Solo);
        // Nested sections.
        assert_eq!(g.solo.enter(), Entry::Solo);
        g.solo.leave();
        g.solo.leave();
        g.with(|v| assert_eq!(*v, 1000));
    }

    #[test]
    fn unclaimed_is_real() {
        let s = Solo::new();
        assert_eq!(s.enter(), Entry::Real);
        assert!(s.is_multi());
        // Once multi, a claim cannot bring solo mode back.
        assert!(!s.claim(true));
        assert_eq!(s.enter(), Entry::Real);
    }

    /// The owner increments in a tight loop while other threads join in
    /// mid-way (ending solo mode): no increment is lost.
    #[test]
    fn ending_solo_mode_loses_nothing() {
        for _ in 0..20 {
            let g = Arc::new(Guarded {
                solo: Solo::new(),
                locked: AtomicBool::new(false),
                value: UnsafeCell::new(0),
            });
            let solo = g.solo.claim(true);
            let started = Arc::new(AtomicU64::new(0));
            const N: u64 = 20_000;
            let others: Vec<_> = (0..3)
                .map(|_| {
                    let (g, started) = (g.clone(), started.clone());
                    std::thread::spawn(move || {
                        // Join once the owner is under way.
                        while started.load(Ordering::Acquire) == 0 {
                            std::hint::spin_loop();
                        }
                        for _ in 0..N {
                            g.with(|v| *v += 1);
                        }
                    })
                })
                .collect();
            for i in 0..N {
                g.with(|v| *v += 1);
                if i == 100 {
                    started.store(1, Ordering::Release);
                }
            }
            for t in others {
                t.join().expect("thread");
            }
            assert!(g.solo.is_multi() || !solo);
            g.with(|v| assert_eq!(*v, 4 * N));
        }
    }
}
