//! Process-shared synchronisation built for the node segment.
//!
//! Everything here lives in shared memory: `#[repr(C)]`, only atomics, plain
//! data and pointers into the segment, and all-zero bytes are a valid
//! initial state. Waiting spins, then yields, then sleeps on a futex
//! ([`futex`]), so ranks that outnumber cores still make progress.
//!
//! * [`mutex`]: a small unfair futex mutex for internal state;
//! * [`mcs`]: a FIFO MCS queue lock;
//! * [`mpsc`]: a lock-free MCS-style intrusive multi-producer queue;
//! * [`barrier`]: a reusable node barrier;
//! * [`flag`]: flags and counters that can be waited on.

pub mod atomic;
pub mod barrier;
pub mod flag;
pub mod futex;
pub mod mcs;
pub mod mpsc;
pub mod mutex;

/// Defines a `const fn` in the crate.
///
/// The loom models in `tests/loom.rs` recompile some primitives (`mcs.rs`,
/// `mpsc.rs`) against loom's atomics, whose constructors are not `const`;
/// their stand-in for this `sync` module defines a macro of the same name that
/// drops the `const`. Constructors in those files are written as
/// `super::shared_const_fn! { pub fn new() -> Self { … } }`.
macro_rules! shared_const_fn {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        $(#[$attr])* $vis const fn $($rest)*
    };
}
pub(crate) use shared_const_fn;
