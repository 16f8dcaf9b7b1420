//! The communication engine of hmpi: two-sided messages between the ranks
//! of one node through the shared heap.
//!
//! A message's way (see the project's architecture guide):
//!
//! 1. [`Endpoint::isend`] picks the VCI of the message's communicator
//!    context; a small message (up to [`fastbox::FB_SPAN_MAX`] bytes, not
//!    synchronous) goes into the destination's per-sender [`fastbox`]
//!    ring when the ring has credit for it — one slot up to
//!    [`fastbox::FB_PAYLOAD`] bytes (a tiny one is one cache line), up to
//!    four consecutive slots beyond; anything else becomes an [`envelope`] in the sender's arena (payload
//!    inline when small) appended to the destination [`vci`]'s incoming
//!    queue with one atomic swap — no lock;
//! 2. the receiver's progress (run by whoever tests or waits) drains its
//!    incoming queue into its private unexpected list in order, matches
//!    posted receives with MPI's rules, and moves the data: inline copy, or
//!    one `memcpy` from the sender's heap buffer (single copy; for large
//!    messages into a heap buffer a *synergistic* copy, in blocks claimed by
//!    the receiver and by the sender if it is waiting), or one
//!    `process_vm_readv` from a private sender buffer (kernel assisted, see
//!    [`kernel_assisted`]), or from a heap bounce buffer when neither works
//!    (two copy);
//! 3. for single copy, kernel assisted and every synchronous send
//!    ([`SendMode::Synchronous`]) the receiver publishes
//!    completion (Release) after matching and copying, and rings the
//!    sender's doorbell; the sender's request sees it (Acquire) and frees
//!    the envelope. Other envelopes are freed by the receiver (a cross-rank
//!    free back to the sender's arena).
//!
//! Requests complete one by one ([`Request::wait`], [`Request::test`]) or as
//! sets ([`wait_all`], [`wait_any`], [`wait_some`], [`test_all`],
//! [`test_any`], [`test_some`] over `&mut [Option<Request>]`). A matched
//! probe ([`Endpoint::mprobe`], [`Endpoint::improbe`]) takes a message off
//! the matching lists as a [`Message`] that only its holder can receive.
//! Ownership passing ([`owned`]) moves a heap block with its message.
//!
//! Where each concept lives: [`endpoint`] (the process's handle, the send
//! paths and the choice of protocol), [`envelope`], [`fastbox`] (the ring in
//! `fastbox/ring.rs`, the lane lock in `fastbox/lane_lock.rs`), [`vci`] (a
//! VCI's shared and private parts, its lock), `progress.rs` (draining the
//! queue and the fast boxes, matching passes, the sweep of other VCIs),
//! `post.rs` (posting receives, blocking attempts, probes), `spread.rs`
//! (receives and probes on every VCI, for senders spread by thread:
//! [`endpoint::on_every_vci`], [`Endpoint::thread_vci`]), `deliver.rs`
//! (moving a matched message's data), one file per protocol —
//! `immediate.rs`, `single_copy.rs`, `synergistic.rs`,
//! [`kernel_assisted`], `two_copy.rs`, [`owned`] — and `wait.rs`,
//! `doorbell.rs`, `stats.rs`, [`request`], [`message`], `matching.rs`,
//! `solo.rs`. Why some of it is written as it is: `docs/performance.md`.
//!
//! Matching keys are (source, tag, context); [`ANY_SOURCE`] and [`ANY_TAG`]
//! exist only on receives; [`PROC_NULL`] operations complete at once.
//! Valid tags are `0..=`[`TAG_UB`].
//!
//! # Example
//! ```
//! use vci::{Endpoint, SendMode, Status, ANY_SOURCE, ANY_TAG};
//!
//! // Under `hmpirun -n N` every rank calls this; alone it is a world of one.
//! let ep = Endpoint::new().unwrap();
//! let me = ep.rank();
//! // Single copy if `data` is in the node heap (a program whose global
//! // allocator is `shmheap::ShmHeap`), two copy through a bounce buffer here.
//! let data = vec![7u8; 1000];
//! // SAFETY: the request is waited for below, never leaked.
//! let s = unsafe { ep.isend(&data, me, 5, 0, SendMode::Standard) }.unwrap();
//! let mut got = vec![0u8; 1000];
//! let mut st = Status::empty();
//! ep.recv(&mut got, ANY_SOURCE, ANY_TAG, 0, &mut st).unwrap();
//! let st = st.into_result().unwrap();
//! s.wait().unwrap();
//! assert_eq!((st.source, st.tag, st.count), (me, 5, 1000));
//! assert_eq!(got, data);
//! ```

#![warn(missing_docs)]

pub mod config;
mod deliver;
mod doorbell;
pub mod endpoint;
pub mod envelope;
pub mod error;
pub mod fastbox;
pub mod idle;
mod immediate;
pub mod kernel_assisted;
mod liveness;
mod matching;
pub mod message;
pub mod owned;
mod post;
mod progress;
pub mod request;
mod single_copy;
pub mod slots;
mod solo;
mod spread;
mod stats;
mod synergistic;
mod two_copy;
pub mod vci;
mod wait;

/// [`kernel_assisted`] under its former name.
pub use kernel_assisted as cma;

pub use config::Config;
pub use endpoint::{Endpoint, SendMode, Start};
pub use envelope::Protocol;
pub use error::{Error, Result};
pub use idle::set_idle_hook;
pub use message::Message;
pub use owned::OwnedBlock;
pub use request::{
    test_all, test_any, test_some, wait_all, wait_all_in_place, wait_all_statuses, wait_any,
    wait_some,
};
pub use request::{Request, Status, StatusError};
pub use solo::supported as solo_supported;
pub use vci::Stats;

/// Wildcard source for receives and probes.
pub const ANY_SOURCE: i32 = -2;
/// Wildcard tag for receives and probes (and the tag of a `PROC_NULL`
/// status).
pub const ANY_TAG: i32 = -1;
/// The null process: sends to it and receives from it complete at once.
pub const PROC_NULL: i32 = -3;
/// The largest valid tag, 2^30 − 1 (MPI requires at least 32767). Tags are
/// `0..=TAG_UB`; negative tags are invalid on sends.
pub const TAG_UB: i32 = (1 << 30) - 1;
