//! The errors of the shared heap layer.

use std::fmt;
use std::io;

/// Why a shared-heap operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call on the segment failed.
    Io {
        /// What was being done, e.g. "create segment file".
        op: &'static str,
        /// The segment's path.
        path: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// Something is already mapped where the segment must go.
    AddressInUse {
        /// The requested base address.
        base: usize,
        /// The length of the mapping.
        len: usize,
    },
    /// The segment file is not an hmpi segment of this version, or does not
    /// fit this process's view of the job.
    BadHeader(String),
    /// An environment variable holds a value that cannot be used.
    Config {
        /// The variable's name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The arena cannot supply the requested memory.
    Exhausted(Exhausted),
    /// The process is already attached to a node heap.
    AlreadyAttached,
    /// No node heap is attached to this process.
    NotAttached,
    /// Another process has already attached to the segment as this rank
    /// (a rank slot is claimed once per job).
    RankClaimed {
        /// The local rank asked for.
        rank: u32,
    },
}

/// Details of an exhausted arena.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    /// The local rank whose arena is full.
    pub rank: u32,
    /// Bytes that were requested.
    pub requested: usize,
    /// Which limit was hit.
    pub limit: Limit,
}

/// The limit an exhausted arena ran into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// The arena's virtual size (`HMPI_HEAP_PER_RANK`) is used up.
    ArenaSize(usize),
    /// The file system behind the segment (`/dev/shm`) has no space left.
    NoSpace,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => write!(f, "cannot {op} {path}: {source}"),
            Error::AddressInUse { base, len } => write!(
                f,
                "cannot map the node heap at {base:#x} ({len} bytes): the address range is in use \
                 in this process; choose another base with {}=0x...",
                crate::env::SHM_BASE
            ),
            Error::BadHeader(why) => write!(f, "not a usable hmpi segment: {why}"),
            Error::Config { var, value, reason } => {
                write!(f, "bad value {value:?} for {var}: {reason}")
            }
            Error::Exhausted(e) => e.fmt(f),
            Error::AlreadyAttached => write!(f, "this process is already attached to a node heap"),
            Error::NotAttached => write!(f, "this process is not attached to a node heap"),
            Error::RankClaimed { rank } => write!(
                f,
                "local rank {rank} of this job is already taken by another process \
                 (a rank can be started once per job)"
            ),
        }
    }
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.limit {
            Limit::ArenaSize(size) => write!(
                f,
                "shared heap of local rank {} exhausted: {} more bytes requested but the arena's \
                 size of {size} bytes is used up; raise {}",
                self.rank,
                self.requested,
                crate::env::HEAP_PER_RANK
            ),
            Limit::NoSpace => write!(
                f,
                "shared heap of local rank {} exhausted: no space left on the segment's file \
                 system for {} more bytes (ENOSPC); enlarge /dev/shm (or {}) or lower {}",
                self.rank,
                self.requested,
                crate::env::SHM_DIR,
                crate::env::HEAP_PER_RANK
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<Exhausted> for Error {
    fn from(e: Exhausted) -> Self {
        Error::Exhausted(e)
    }
}

/// The shared heap's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
