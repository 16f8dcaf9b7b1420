//! The environment variables of a job.
//!
//! The launcher gives every rank [`RANK`], [`SIZE`], [`LOCAL_RANK`],
//! [`LOCAL_SIZE`], [`JOB`] and [`SHM_NAME`]; a rank's runtime reads them at
//! init. The node-heap variables are defined by [`shmheap::env`] and
//! re-exported here so that this module names every variable of a job.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use hmpi_core::env;
//!
//! assert_eq!(env::RANK, "HMPI_RANK");
//! assert_eq!(env::parse_seconds("2.5"), Some(Duration::from_millis(2500)));
//! assert_eq!(env::parse_seconds("10s"), Some(Duration::from_secs(10)));
//! assert_eq!(env::parse_seconds("-1"), None);
//! ```

use std::time::Duration;

pub use shmheap::env::{HEAP_PER_RANK, LOCAL_RANK, LOCAL_SIZE, SHM_BASE, SHM_DIR, SHM_NAME};

/// This rank's index in the job, `0..HMPI_SIZE` (set by the launcher).
pub const RANK: &str = "HMPI_RANK";
/// Number of ranks in the job (set by the launcher).
pub const SIZE: &str = "HMPI_SIZE";
/// The job's identifier, `<launcher pid>-<random hex>` (set by the launcher).
pub const JOB: &str = "HMPI_JOB";
/// Default time limit of `hmpirun` in seconds when `--timeout` is not given
/// (read by the launcher binary; `0` means no limit).
pub const TIMEOUT: &str = "HMPI_TIMEOUT";

/// Parses a duration in seconds: a non-negative decimal number with an
/// optional `s` suffix (`"30"`, `"2.5"`, `"10s"`).
pub fn parse_seconds(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_suffix('s').unwrap_or(s).trim_end();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let secs: f64 = s.parse().ok()?;
    Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("0"), Some(Duration::ZERO));
        assert_eq!(parse_seconds(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_seconds("0.25s"), Some(Duration::from_millis(250)));
        assert_eq!(parse_seconds(""), None);
        assert_eq!(parse_seconds("s"), None);
        assert_eq!(parse_seconds("1e3"), None);
        assert_eq!(parse_seconds("inf"), None);
        assert_eq!(parse_seconds("NaN"), None);
        assert_eq!(parse_seconds("1.2.3"), None);
        assert_eq!(parse_seconds("99999999999999999999999"), None);
    }
}
