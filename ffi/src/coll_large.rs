//! The integer arguments of the C collectives, for both families of
//! routines: the classic ones (`MPI_Bcast`, …) take `int` counts and
//! displacements, the large-count ones of MPI 4.0 (`MPI_Bcast_c`,
//! `MPI_Ibcast_c`, `MPI_Bcast_init_c`, …) take `MPI_Count` counts and
//! `MPI_Aint` displacements. [`crate::coll`] writes each collective once
//! and defines both families from the same body; what differs is only how
//! an argument becomes a `usize` count or an `isize` displacement, which
//! is [`Int`]: a negative count, or a count or displacement that the
//! engine's `usize`/`isize` arithmetic cannot hold, is an error value
//! (`MPI_ERR_COUNT`, `MPI_ERR_ARG`), never truncated.
//!
//! In C:
//! ```c
//! MPI_Count n = (MPI_Count)1 << 31;            // more than an int holds
//! char *buf = malloc(n);
//! MPI_Bcast_c(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
//! ```

use crate::abi;
use crate::errors::{MpiError, Res};
use std::ffi::c_int;
use std::fmt::Display;

/// An integer type of a count or displacement argument: `int`,
/// `MPI_Count` (`i64`) or `MPI_Aint` (`isize`).
pub trait Int: Copy + Display {
    /// The value, widened without loss.
    fn wide(self) -> i128;

    /// As a count: non-negative and within `usize`.
    fn to_count(self, what: &str) -> Res<usize> {
        let v = self.wide();
        if v < 0 {
            return Err(MpiError::new(
                abi::ERR_COUNT,
                format!("negative {what} {self}"),
            ));
        }
        usize::try_from(v).map_err(|_| {
            MpiError::new(
                abi::ERR_COUNT,
                format!("{what} {self} is larger than this machine's address space"),
            )
        })
    }

    /// As a displacement: within `isize`.
    fn to_disp(self, what: &str) -> Res<isize> {
        isize::try_from(self.wide()).map_err(|_| {
            MpiError::new(
                abi::ERR_ARG,
                format!("{what} {self} is larger than this machine's address space"),
            )
        })
    }
}

impl Int for c_int {
    fn wide(self) -> i128 {
        self.into()
    }
}

impl Int for i64 {
    fn wide(self) -> i128 {
        self.into()
    }
}

impl Int for isize {
    fn wide(self) -> i128 {
        // `isize` is at most 64 bits on every target Rust supports, so
        // the widening is exact; `i128: From<isize>` does not exist.
        self as i128
    }
}

/// `n * per`: the displacement of piece `n` of equal pieces of `per`
/// units, checked.
pub fn times(n: usize, per: usize, what: &str) -> Res<usize> {
    n.checked_mul(per).ok_or_else(|| {
        MpiError::new(
            abi::ERR_COUNT,
            format!("{what}: {n} pieces of {per} overflow the address space"),
        )
    })
}

/// `d * ext`: a displacement in units of an extent, in bytes, checked.
pub fn scaled(d: isize, ext: isize, what: &str) -> Res<isize> {
    d.checked_mul(ext).ok_or_else(|| {
        MpiError::new(
            abi::ERR_ARG,
            format!("{what} {d} times the extent {ext} overflows the address space"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_checked_never_truncated() {
        assert_eq!(7i32.to_count("count").unwrap(), 7);
        assert_eq!((1i64 << 33).to_count("count").unwrap(), 1usize << 33);
        assert_eq!((-1i32).to_count("count").unwrap_err().class, abi::ERR_COUNT);
        assert_eq!(
            (-(1i64 << 40)).to_count("count").unwrap_err().class,
            abi::ERR_COUNT
        );
        assert_eq!((-5isize).to_disp("displacement").unwrap(), -5);
        assert_eq!(i64::MAX.to_disp("displacement").unwrap(), isize::MAX);
    }

    #[test]
    fn products_that_overflow_are_errors() {
        assert_eq!(times(3, 5, "x").unwrap(), 15);
        assert!(times(usize::MAX / 2, 3, "x").is_err());
        assert_eq!(scaled(-3, 8, "d").unwrap(), -24);
        assert!(scaled(isize::MAX / 2, 4, "d").is_err());
    }
}
