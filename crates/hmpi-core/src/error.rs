//! The errors of the runtime: one enum, [`Error`], whose variants are MPI's
//! error classes, each with what went wrong.
//!
//! Nothing in the runtime panics on bad user input: a bad rank, tag or
//! count, a truncated receive, an unusable group, a communicator used after
//! finalize are all values of [`Error`]. Errors of the engine
//! ([`vci::Error`]) and of the shared heap ([`shmheap::Error`]) convert with
//! `From`.
//!
//! # Example
//! ```
//! use hmpi_core::Error;
//!
//! let e = Error::Tag { tag: -5 };
//! assert!(e.to_string().contains("tag -5"));
//! assert_eq!(format!("{e:?}"), e.to_string()); // what `main` prints
//! let e: Error = vci::Error::Rank { rank: 9, size: 2 }.into();
//! assert!(matches!(e, Error::Rank { rank: 9, size: 2 }));
//! ```

use crate::point_to_point::Status;
use std::fmt;

/// Why an operation of the runtime failed (the MPI error class, with
/// details).
///
/// `Debug` prints the same text as `Display` (what went wrong and what to
/// do about it): it is what a `main` returning [`Result`] prints after
/// `Error: `. Match on the variants to inspect the details.
#[non_exhaustive]
pub enum Error {
    /// `MPI_ERR_RANK`: a rank outside `0..size` of the communicator or
    /// group (and not a wildcard or `PROC_NULL` where those are allowed).
    Rank {
        /// The rank given.
        rank: i32,
        /// The size of the communicator or group.
        size: i32,
    },
    /// `MPI_ERR_ROOT`: a collective's root outside the communicator.
    Root {
        /// The root given.
        root: i32,
        /// The size of the communicator.
        size: i32,
    },
    /// `MPI_ERR_TAG`: a tag outside `0..=TAG_UB` (or `ANY_TAG` on a send).
    Tag {
        /// The tag given.
        tag: i32,
    },
    /// `MPI_ERR_COUNT`: the message's length does not fit the receive's
    /// element type or expected element count.
    Count {
        /// The message's length in bytes.
        bytes: u64,
        /// The size of one element in bytes.
        element_size: usize,
        /// The number of elements expected, if a fixed number was.
        expected: Option<u64>,
    },
    /// `MPI_ERR_TRUNCATE`: the message was longer than the receive buffer;
    /// the buffer holds the message's first `status.byte_count()` bytes.
    Truncate {
        /// The receive's status (bytes delivered).
        status: Status,
        /// The length of the message that was sent, in bytes.
        message_len: u64,
    },
    /// `MPI_ERR_COMM`: the communicator cannot do this (for example, no
    /// context id is left).
    Comm {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_GROUP`: a group operation got unusable arguments (for
    /// example, a rank listed twice).
    Group {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_TYPE`: the element type cannot be used here (for example, a
    /// zero-sized type where a count must be derived from bytes).
    Type {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_ARG`: an argument is out of range (a negative length, a
    /// displacement or size that overflows, a subarray outside its array).
    Arg {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_TOPOLOGY`: the communicator has no topology of the kind
    /// the call needs, or the topology asked for cannot be made (a grid
    /// larger than the communicator, a graph whose edges do not agree).
    Topology {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_DIMS`: a dimension that is not at least 1, or dimensions
    /// that cannot make the number of processes given.
    Dims {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_BUFFER`: a buffer does not hold what the datatype and count
    /// reach.
    Buffer {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_OP`: the reduction operation cannot be applied (for
    /// example, `max` on a complex type, or a freed user operation).
    Op {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_COUNT`: `count` elements of `element_size` bytes are more
    /// bytes than an address can span.
    TooLarge {
        /// The count given.
        count: u64,
        /// The size of one element in bytes.
        element_size: usize,
    },
    /// `MPI_ERR_INFO_KEY`: an info key that is empty, too long or holds a
    /// NUL byte.
    InfoKey {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_INFO_VALUE`: an info value that is empty, too long or
    /// holds a NUL byte.
    InfoValue {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_INFO_NOKEY`: the info key is not set.
    InfoNoKey {
        /// The key asked for.
        key: String,
    },
    /// `MPI_ERR_NO_MEM` and friends: the shared heap failed (not attached,
    /// exhausted, bad configuration).
    Heap(shmheap::Error),
    /// Another failure of the engine (bad configuration, a peer that does
    /// not look like one, …).
    Engine(vci::Error),
    /// `MPI_ERR_OTHER`: `init` was called a second time in this process.
    AlreadyInitialized,
    /// The runtime was not initialised ([`crate::init`]) in this process.
    NotInitialized,
    /// The runtime was finalised (its [`crate::Universe`] was dropped): no
    /// more communication in this process.
    Finalized,
    /// `MPI_ERR_INTERN`: a broken invariant of the runtime itself.
    Internal(String),
    /// `MPI_ERR_WIN`: the window cannot do this (freed, or used by a
    /// process outside its group).
    Win {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_RMA_RANGE`: a one-sided operation reaches outside the
    /// target's window (or outside every region attached to a dynamic one).
    RmaRange {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_RMA_SYNC`: a one-sided operation or synchronisation call
    /// outside the epoch it needs (or one that conflicts with the epochs
    /// already open).
    RmaSync {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_RMA_ATTACH`: memory cannot be attached to (or detached
    /// from) a dynamic window.
    RmaAttach {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_RMA_FLAVOR`: the call needs a window of another flavor
    /// (for example `shared_query` on a window not made by
    /// `allocate_shared`).
    RmaFlavor {
        /// What is wrong.
        reason: String,
    },
    /// `MPI_ERR_NO_MEM`: memory the operation needs (outside the shared
    /// heap: a packing buffer) could not be allocated.
    NoMemory {
        /// The bytes asked for.
        bytes: usize,
    },
    /// `MPI_ERR_PROC_ABORTED`: a process the operation depends on ended
    /// without finalizing (a receive from it, a send to it that needs it,
    /// a receive from any source), so the operation cannot finish.
    ProcFailed {
        /// The failed process's rank in the communicator of the operation
        /// (its world rank where the operation has none, such as init;
        /// `-1` if it is not a member of that communicator's groups).
        rank: i32,
        /// The failed process's rank in the job (`MPI_COMM_WORLD`).
        world: i32,
    },
    /// `MPI_ERR_KEYVAL`: an attribute key that does not exist (freed, never
    /// created, or made for another kind of object).
    Keyval {
        /// What is wrong.
        reason: String,
    },
    /// An attribute copy or delete callback failed: `code` is what it
    /// returned, which the call that ran it returns in turn.
    Callback {
        /// The callback's error code.
        code: i32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rank { rank, size } if *size == 1 && !launched() => write!(
                f,
                "rank {rank} does not exist in a world of 1 process (this program was not \
                 started by hmpirun); run it under `hmpirun -n N`"
            ),
            Error::Rank { rank, size } => write!(
                f,
                "invalid rank {rank}: the communicator or group has {size} rank{} (0..{size})",
                if *size == 1 { "" } else { "s" }
            ),
            Error::Root { root, size } => {
                write!(f, "invalid root {root}: the communicator has {size} ranks")
            }
            Error::Tag { tag } => write!(
                f,
                "invalid tag {tag}: tags are 0..={} (ANY_TAG only on receives)",
                vci::TAG_UB
            ),
            Error::Count {
                bytes,
                element_size,
                expected: Some(n),
            } => write!(
                f,
                "count mismatch: the message has {bytes} bytes, the receive expected {n} \
                 elements of {element_size} bytes"
            ),
            Error::Count {
                bytes,
                element_size,
                expected: None,
            } => write!(
                f,
                "count mismatch: a message of {bytes} bytes is not a whole number of \
                 {element_size}-byte elements"
            ),
            Error::Truncate {
                status,
                message_len,
            } => write!(
                f,
                "message truncated: {message_len} bytes from rank {} (tag {}) into a buffer of {}",
                status.source_rank(),
                status.tag(),
                status.byte_count()
            ),
            Error::Comm { reason } => write!(f, "invalid communicator: {reason}"),
            Error::Group { reason } => write!(f, "invalid group: {reason}"),
            Error::Type { reason } => write!(f, "invalid datatype: {reason}"),
            Error::Arg { reason } => write!(f, "invalid argument: {reason}"),
            Error::Buffer { reason } => write!(f, "invalid buffer: {reason}"),
            Error::Topology { reason } => write!(f, "invalid topology: {reason}"),
            Error::Dims { reason } => write!(f, "invalid dimensions: {reason}"),
            Error::Op { reason } => write!(f, "invalid operation: {reason}"),
            Error::TooLarge {
                count,
                element_size,
            } => write!(f, "{count} elements of {element_size} bytes overflow"),
            Error::InfoKey { reason } => write!(f, "invalid info key: {reason}"),
            Error::InfoValue { reason } => write!(f, "invalid info value: {reason}"),
            Error::InfoNoKey { key } => write!(f, "info key {key:?} is not set"),
            Error::Heap(e) => write!(f, "shared heap: {e}"),
            Error::Engine(e) => write!(f, "engine: {e}"),
            Error::AlreadyInitialized => {
                write!(f, "hmpi is already initialized in this process")
            }
            Error::NotInitialized => write!(f, "hmpi is not initialized (call hmpi::init)"),
            Error::Finalized => write!(
                f,
                "hmpi was finalized in this process (its Universe was dropped)"
            ),
            Error::Internal(m) => write!(f, "internal error: {m}"),
            Error::Win { reason } => write!(f, "invalid window: {reason}"),
            Error::RmaRange { reason } => write!(f, "RMA range: {reason}"),
            Error::RmaSync { reason } => write!(f, "RMA synchronisation: {reason}"),
            Error::RmaAttach { reason } => write!(f, "RMA attach: {reason}"),
            Error::RmaFlavor { reason } => write!(f, "RMA flavor: {reason}"),
            Error::NoMemory { bytes } => write!(f, "no memory for {bytes} bytes"),
            Error::ProcFailed { rank, world } => write!(
                f,
                "rank {rank} of the communicator (rank {world} of the job) ended without \
                 finalizing; this operation depends on it"
            ),
            Error::Keyval { reason } => write!(f, "invalid attribute key: {reason}"),
            Error::Callback { code } => {
                write!(f, "an attribute callback failed with error code {code}")
            }
        }
    }
}

/// Whether this process was started by the launcher (it sets
/// `HMPI_SIZE` for every rank).
fn launched() -> bool {
    std::env::var_os(crate::env::SIZE).is_some()
}

/// The `Display` text, so that `fn main() -> hmpi::Result<()>` prints the
/// cause and the fix rather than the variant's fields.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One `write_str`: a formatter on an unbuffered stream (standard
        // error) writes each piece with its own system call, and ranks'
        // messages must not interleave within a line.
        f.write_str(&self.to_string())
    }
}

impl Error {
    /// This error with a failed process named by its rank in a
    /// communicator: `rank_of(world)` is that rank (`None`: not a member).
    /// Other errors pass unchanged.
    pub(crate) fn in_comm(self, rank_of: impl FnOnce(i32) -> Option<i32>) -> Error {
        match self {
            Error::ProcFailed { world, .. } => Error::ProcFailed {
                rank: rank_of(world).unwrap_or(-1),
                world,
            },
            e => e,
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Heap(e) => Some(e),
            Error::Engine(e) => Some(e),
            _ => None,
        }
    }
}

impl From<shmheap::Error> for Error {
    fn from(e: shmheap::Error) -> Self {
        Error::Heap(e)
    }
}

/// Maps the engine's errors to classes. Ranks in the engine's errors are
/// world ranks; the communicator layer translates them (see
/// [`crate::comm`]) where it knows the communicator.
impl From<vci::Error> for Error {
    fn from(e: vci::Error) -> Self {
        match e {
            vci::Error::Rank { rank, size } => Error::Rank {
                rank,
                size: i32::try_from(size).unwrap_or(i32::MAX),
            },
            vci::Error::Tag { tag } => Error::Tag { tag },
            vci::Error::Truncate {
                status,
                message_len,
            } => Error::Truncate {
                status: Status::from_engine(status, None),
                message_len,
            },
            vci::Error::Heap(e) => Error::Heap(e),
            vci::Error::AlreadyInitialized => Error::AlreadyInitialized,
            vci::Error::ProcFailed { rank } => {
                let world = i32::try_from(rank).unwrap_or(i32::MAX);
                Error::ProcFailed { rank: world, world }
            }
            other => Error::Engine(other),
        }
    }
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `n` zeroed bytes (a packing buffer), or [`Error::NoMemory`] instead of
/// an abort when they cannot be allocated.
pub(crate) fn zeroed_bytes(n: usize) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::NoMemory { bytes: n })?;
    v.resize(n, 0);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packing_buffer_that_cannot_be_had_is_an_error() {
        assert_eq!(zeroed_bytes(16).unwrap(), vec![0u8; 16]);
        assert!(matches!(
            zeroed_bytes(usize::MAX),
            Err(Error::NoMemory { bytes: usize::MAX })
        ));
        // Miri stops at an allocation larger than its memory instead of
        // failing it, so the case it cannot model is left to native runs.
        if !cfg!(miri) {
            assert!(matches!(
                zeroed_bytes(isize::MAX as usize),
                Err(Error::NoMemory { .. })
            ));
        }
    }

    #[test]
    fn a_rank_outside_a_world_of_one_names_the_launcher() {
        let e = Error::Rank { rank: 1, size: 1 };
        let text = format!("{e:?}");
        if launched() {
            assert_eq!(
                text,
                "invalid rank 1: the communicator or group has 1 rank (0..1)"
            );
        } else {
            assert_eq!(
                text,
                "rank 1 does not exist in a world of 1 process (this program was not started \
                 by hmpirun); run it under `hmpirun -n N`"
            );
        }
        let e = Error::Rank { rank: 5, size: 4 };
        assert_eq!(
            e.to_string(),
            "invalid rank 5: the communicator or group has 4 ranks (0..4)"
        );
    }
}
