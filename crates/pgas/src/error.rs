//! The errors of the global-address-space layer: what went wrong with a
//! team, a segment or a global pointer, or an error of the runtime below.

use std::fmt;

/// An error of the global-address-space layer.
///
/// The variants name the argument that was wrong, so that a C layer can
/// map them to its own codes (`DART_ERR_INVAL`, …); errors of the runtime
/// below (communication, windows, the heap) come as [`Error::Runtime`].
#[non_exhaustive]
pub enum Error {
    /// A global pointer names a segment that was freed.
    FreedSegment {
        /// The segment id.
        segment: u16,
    },
    /// A global pointer names a segment this unit does not know (never
    /// allocated in a team of this unit).
    UnknownSegment {
        /// The segment id.
        segment: u16,
    },
    /// A global pointer's offset (with the length of the access) reaches
    /// past its unit's part of the segment.
    Offset {
        /// The segment id.
        segment: u16,
        /// The unit (absolute id).
        unit: u32,
        /// The first byte of the access.
        offset: u64,
        /// The bytes of the access.
        len: u64,
        /// The bytes of the unit's part.
        size: u64,
    },
    /// A unit id that is not a member of the team (or of the segment's
    /// team).
    Unit {
        /// The unit id given.
        unit: u32,
        /// What it was checked against.
        what: String,
    },
    /// A team cannot do this (destroyed, not a member, still owns
    /// segments, the team table is full).
    Team {
        /// What is wrong.
        reason: String,
    },
    /// No segment id is left (16 bits of them, never reused).
    SegmentIds,
    /// A local address was asked for memory of a unit on another node
    /// (reach it with put and get).
    Elsewhere {
        /// The unit (absolute id).
        unit: u32,
    },
    /// An argument out of range (a size that overflows, a misaligned
    /// pointer, sizes that differ between the units of a symmetric
    /// allocation, a local pool that is exhausted).
    Arg {
        /// What is wrong.
        reason: String,
    },
    /// The runtime below failed.
    Runtime(hmpi_core::Error),
}

/// The result of a call of this layer.
pub type Result<T> = std::result::Result<T, Error>;

impl From<hmpi_core::Error> for Error {
    fn from(e: hmpi_core::Error) -> Error {
        Error::Runtime(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::FreedSegment { segment } => {
                write!(f, "segment {segment} has been freed")
            }
            Error::UnknownSegment { segment } => write!(
                f,
                "segment {segment} is not known to this unit (not allocated in a team it \
                 belongs to)"
            ),
            Error::Offset {
                segment,
                unit,
                offset,
                len,
                size,
            } => write!(
                f,
                "bytes {offset}..{} of unit {unit}'s part of segment {segment}, which has \
                 {size} bytes",
                u128::from(*offset) + u128::from(*len)
            ),
            Error::Unit { unit, what } => write!(f, "unit {unit} is not a member of {what}"),
            Error::Team { reason } => write!(f, "team: {reason}"),
            Error::SegmentIds => write!(
                f,
                "no segment id is left: {} collective allocations were made and ids are \
                 never reused",
                u16::MAX
            ),
            Error::Elsewhere { unit } => write!(
                f,
                "unit {unit} is on another node: its memory has no address here (reach it \
                 with put and get)"
            ),
            Error::Arg { reason } => f.write_str(reason),
            Error::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {}

pub(crate) fn arg(reason: impl Into<String>) -> Error {
    Error::Arg {
        reason: reason.into(),
    }
}

pub(crate) fn team_err(reason: impl Into<String>) -> Error {
    Error::Team {
        reason: reason.into(),
    }
}
