//! Environment variables that configure the node heap, and their parsing.
//!
//! The launcher (`hmpirun`) sets the job's variables for every rank; the
//! tuning variables may be set by the user and are read by the launcher
//! when it creates the segment.

use crate::error::{Error, Result};

/// Path that opens the job's segment file (set by the launcher): the file
/// has no name, so this is `/proc/self/fd/N`, the descriptor every rank
/// inherits from the launcher.
pub const SHM_NAME: &str = "HMPI_SHM_NAME";
/// Base address of the segment, e.g. `0x200000000000` (read by the creator).
pub const SHM_BASE: &str = "HMPI_SHM_BASE";
/// Directory for segment files (default `/dev/shm`).
pub const SHM_DIR: &str = "HMPI_SHM_DIR";
/// Virtual size of each rank's arena, e.g. `16G`, `512MiB` (read by the creator).
pub const HEAP_PER_RANK: &str = "HMPI_HEAP_PER_RANK";
/// This rank's index among the ranks of its node (set by the launcher).
pub const LOCAL_RANK: &str = "HMPI_LOCAL_RANK";
/// Number of ranks on this node (set by the launcher).
pub const LOCAL_SIZE: &str = "HMPI_LOCAL_SIZE";

/// Parses a byte size: a number with an optional binary suffix
/// (`K`, `M`, `G`, `T`, optionally followed by `iB` or `B`; case-insensitive).
///
/// ```
/// assert_eq!(shmheap::env::parse_size("64M"), Some(64 << 20));
/// assert_eq!(shmheap::env::parse_size("2GiB"), Some(2 << 30));
/// assert_eq!(shmheap::env::parse_size("4096"), Some(4096));
/// assert_eq!(shmheap::env::parse_size("lots"), None);
/// ```
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let n: usize = digits.parse().ok()?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1usize << shift)
}

/// Parses an address in hexadecimal (`0x…`) or decimal.
pub fn parse_addr(s: &str) -> Option<usize> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => usize::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => s.parse().ok(),
    }
}

/// Reads variable `var` from the process environment, parsing it with
/// `parse`; `Ok(None)` when unset.
pub fn read<T>(
    var: &'static str,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>> {
    read_from(&|v: &str| std::env::var_os(v), var, what, parse)
}

/// Like [`read`], with the variables looked up through `lookup` (e.g. a
/// launcher's overrides in front of the process environment).
pub fn read_from<T>(
    lookup: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    var: &'static str,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>> {
    let Some(v) = lookup(var) else {
        return Ok(None);
    };
    let Some(v) = v.to_str() else {
        return Err(Error::Config {
            var,
            value: v.to_string_lossy().into_owned(),
            reason: "not valid UTF-8".into(),
        });
    };
    match parse(v) {
        Some(x) => Ok(Some(x)),
        None => Err(Error::Config {
            var,
            value: v.to_owned(),
            reason: format!("expected {what}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("3 MiB"), Some(3 << 20));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("5X"), None);
        assert_eq!(parse_size("99999999999999999999"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn addrs() {
        assert_eq!(parse_addr("0x2000_0000_0000"), Some(0x2000_0000_0000));
        assert_eq!(parse_addr("4096"), Some(4096));
        assert_eq!(parse_addr("0xzz"), None);
    }
}
