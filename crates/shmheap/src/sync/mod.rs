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
pub mod futex;
pub mod mutex;
