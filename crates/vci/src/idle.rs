//! A hook the layers above the engine run while a thread waits in it.
//!
//! Operations that do not travel as messages — the collectives of
//! `hmpi-core`, which move through blocks of their own in the node heap —
//! make progress only when a thread moves them on. A thread blocked in the
//! engine (a receive, a wait on a request) runs the hook now and then
//! (where the engine sweeps its other VCIs, off the fast path), so that a
//! collective this process has started can go on while the program waits
//! for a message that depends on it, as MPI's progress rule asks.
//!
//! One hook per process, a plain function (set once; a later call
//! replaces it). It must not block, and must not wait in the engine
//! itself; a hook that does call into the engine does not run again from
//! inside itself.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, Ordering};

static HOOK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// Whether this thread is running the hook (no nested runs).
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// Sets the function waiting threads run now and then.
pub fn set_idle_hook(f: fn()) {
    // SYNC POINT: Release pairs with the Acquire in `run`: a thread that
    // sees the pointer calls a function whose code and statics are ready.
    HOOK.store(f as *mut (), Ordering::Release);
}

/// Runs the hook, if there is one and this thread is not inside it.
#[inline]
pub(crate) fn run() {
    // SYNC POINT: pairs with the Release store in `set_idle_hook`.
    let p = HOOK.load(Ordering::Acquire);
    if p.is_null() || RUNNING.with(Cell::get) {
        return;
    }
    // SAFETY: only `set_idle_hook` stores into HOOK, always a `fn()`
    // pointer cast to `*mut ()`; function pointers and data pointers have
    // the same size on the platforms this crate builds for.
    let f: fn() = unsafe { std::mem::transmute::<*mut (), fn()>(p) };
    RUNNING.with(|r| r.set(true));
    f();
    RUNNING.with(|r| r.set(false));
}
