//! The errors of the communication engine.
//!
//! Every failure on user input is a value of [`Error`]; nothing panics on a
//! bad rank, tag or buffer.
//!
//! # Example
//! ```
//! use vci::{Error, TAG_UB};
//!
//! let e = Error::Tag { tag: TAG_UB + 1 };
//! assert!(e.to_string().contains("tag"));
//! ```

use crate::request::Status;
use std::fmt;

/// Why an operation of the engine failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A rank outside `0..size` (and not a wildcard or `PROC_NULL` where
    /// those are allowed).
    Rank {
        /// The rank given.
        rank: i32,
        /// The number of ranks.
        size: u32,
    },
    /// A tag outside `0..=TAG_UB` (or `ANY_TAG` on a send).
    Tag {
        /// The tag given.
        tag: i32,
    },
    /// The message was longer than the receive buffer: the buffer holds the
    /// message's first `status.count` bytes.
    Truncate {
        /// The receive's status (`count` = bytes delivered).
        status: Status,
        /// The length of the message that was sent.
        message_len: u64,
    },
    /// The kernel-assisted copy of a message failed (see
    /// [`crate::StatusError::Transfer`]).
    Transfer {
        /// The receive's status.
        status: Status,
        /// The OS error number.
        errno: i32,
    },
    /// Some of the requests given to [`crate::wait_all`] ended in an error;
    /// every status is here, each with its own `error`.
    InStatus(Vec<Status>),
    /// The shared heap failed (not attached, exhausted, bad configuration).
    Heap(shmheap::Error),
    /// An engine variable holds a value that cannot be used.
    Config {
        /// The variable's name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// This process already has an [`crate::Endpoint`].
    AlreadyInitialized,
    /// A receive that had to allocate a block for an owned message (see
    /// [`crate::StatusError::Alloc`]) could not.
    Alloc {
        /// The receive's status (`count` = 0).
        status: Status,
        /// The bytes it needed.
        bytes: u64,
    },
    /// An [`crate::OwnedBlock`] given to the engine is not one: its length
    /// exceeds its layout, or its address does not fit the layout.
    Block {
        /// What is wrong.
        reason: &'static str,
    },
    /// A VCI's shared part published by a peer does not look like one.
    BadPeer {
        /// The peer's rank.
        rank: u32,
        /// The address found in its registry slot.
        addr: u64,
    },
    /// A peer the operation depends on has failed: its process ended
    /// without finalizing (see `crate::liveness`).
    ProcFailed {
        /// The failed peer's rank.
        rank: u32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rank { rank, size } => {
                write!(f, "invalid rank {rank}: the job has {size} ranks")
            }
            Error::Tag { tag } => write!(
                f,
                "invalid tag {tag}: tags are 0..={} (ANY_TAG only on receives)",
                crate::TAG_UB
            ),
            Error::Truncate {
                status,
                message_len,
            } => write!(
                f,
                "message truncated: {message_len} bytes from rank {} (tag {}) into a buffer of {}",
                status.source, status.tag, status.count
            ),
            Error::Transfer { status, errno } => write!(
                f,
                "reading the message from rank {} (tag {}) with process_vm_readv failed: {}",
                status.source,
                status.tag,
                std::io::Error::from_raw_os_error(*errno)
            ),
            Error::InStatus(s) => {
                let n = s.iter().filter(|s| s.error.is_some()).count();
                write!(f, "{n} of {} requests failed", s.len())
            }
            Error::Heap(e) => write!(f, "shared heap: {e}"),
            Error::Config { var, value, reason } => {
                write!(f, "bad value {value:?} for {var}: {reason}")
            }
            Error::AlreadyInitialized => write!(f, "this process already has an endpoint"),
            Error::Alloc { status, bytes } => write!(
                f,
                "no memory for the {bytes}-byte block of the message from rank {} (tag {}); \
                 the message was discarded",
                status.source, status.tag
            ),
            Error::Block { reason } => write!(f, "invalid owned block: {reason}"),
            Error::BadPeer { rank, addr } => write!(
                f,
                "rank {rank} published {addr:#x} as its VCI, which is not a VCI in its arena"
            ),
            Error::ProcFailed { rank } => write!(
                f,
                "rank {rank} ended without finalizing; the operation depends on it"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Heap(e) => Some(e),
            _ => None,
        }
    }
}

impl From<shmheap::Error> for Error {
    fn from(e: shmheap::Error) -> Self {
        Error::Heap(e)
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
