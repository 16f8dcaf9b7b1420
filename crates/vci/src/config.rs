//! Tunables of the engine, read from the environment.
//!
//! * `HMPI_EAGER_MAX` (default 256 bytes, at most 64 KiB): the largest
//!   payload sent with the immediate protocol, inline in the envelope.
//!   It does not limit the fast boxes: a message of up to
//!   [`crate::fastbox::FB_SPAN_MAX`] bytes goes through them whenever
//!   they have credit for it. Accepts the sizes `shmheap::env::parse_size` accepts (`256`, `4K`).
//! * `HMPI_SYNERGISTIC_MIN` (default 64 KiB): single-copy messages of at
//!   least this many bytes and of at least two blocks, received into a
//!   buffer in the node heap, are copied synergistically: the receiver
//!   and, while it is inside the library, the sender copy blocks of the
//!   message in parallel. A size larger than any message (`1T`) turns it
//!   off.
//! * `HMPI_SYNERGISTIC_BLOCK` (default 64 KiB, 64 bytes to 1 GiB): the
//!   least block size of a synergistic copy, and the block size of copies
//!   longer than 2 MiB (shorter ones go in halves: see
//!   [`synergistic_block`]).
//! * `HMPI_CMA` (default `1`): `0` turns off the kernel-assisted single copy
//!   (`process_vm_readv`) of private send buffers; they then travel through a
//!   heap bounce buffer (two copy).
//! * `HMPI_FASTBOX` (default `1`): `0` turns off the fast boxes (see
//!   [`crate::fastbox`]); small messages then take the path their size
//!   picks (envelope or single copy).
//! * `HMPI_VCIS` (default 1, at most [`crate::slots::MAX_VCIS`]): the number
//!   of VCIs per rank, the same in every rank. A communicator context
//!   `c` uses VCI `(c / 2) % HMPI_VCIS` in every rank (contexts come in
//!   pairs, `2k` and `2k + 1`, that share a VCI), so threads that work on
//!   consecutive communicators progress in parallel; a context word made by
//!   [`crate::endpoint::on_vci`] names its VCI instead (communicator hints
//!   and streams in hmpi-core).
//! * `HMPI_SOLO` (default `1`): biases the VCI and lane locks towards the
//!   thread that creates the endpoint, which then takes them without
//!   locked instructions until another thread communicates (see
//!   `solo.rs`, "solo mode"); `0` makes every lock real from the start.
//!
//! The synergistic threshold and block size are starting points: tune both
//! by measurement on the target machine (see docs/performance.md,
//! "Synergistic copy", for what the defaults rest on).
//!
//! # Example
//! ```
//! let c = vci::Config::from_lookup(|v| (v == "HMPI_EAGER_MAX").then(|| "1K".into())).unwrap();
//! assert_eq!(c.eager_max, 1024);
//! let d = vci::Config::default();
//! assert_eq!((d.eager_max, d.synergistic_min, d.synergistic_block), (256, 64 << 10, 64 << 10));
//! assert!(d.cma);
//! ```

use crate::error::{Error, Result};
use std::ffi::OsString;

/// Variable holding the immediate protocol's largest payload.
pub const EAGER_MAX_VAR: &str = "HMPI_EAGER_MAX";
/// Default largest immediate payload (the papers' x86 threshold).
pub const DEFAULT_EAGER_MAX: usize = 256;
/// The largest accepted `HMPI_EAGER_MAX`.
pub const EAGER_MAX_LIMIT: usize = 64 << 10;
/// Variable holding the smallest synergistically copied message.
pub const SYNERGISTIC_MIN_VAR: &str = "HMPI_SYNERGISTIC_MIN";
/// Default smallest synergistically copied message (to be tuned).
pub const DEFAULT_SYNERGISTIC_MIN: usize = 64 << 10;
/// Variable holding the synergistic copy's block size.
pub const SYNERGISTIC_BLOCK_VAR: &str = "HMPI_SYNERGISTIC_BLOCK";
/// Default synergistic block size (see docs/performance.md, "Synergistic
/// copy").
pub const DEFAULT_SYNERGISTIC_BLOCK: usize = 64 << 10;
/// Longest copy that [`synergistic_block`] cuts in halves.
pub const SYNERGISTIC_HALVES_MAX: u64 = 2 << 20;

/// The block size of a synergistic copy of `len` bytes, with `min` the
/// configured block size (`HMPI_SYNERGISTIC_BLOCK`). Up to
/// [`SYNERGISTIC_HALVES_MAX`], half the copy (page-rounded), so that the
/// receiver and a helping sender each stream one contiguous half; longer
/// copies in blocks of `min`, which is also the least block size (why:
/// docs/performance.md, "Synergistic copy").
///
/// ```
/// use vci::config::synergistic_block;
/// assert_eq!(synergistic_block(1 << 20, 64 << 10), 512 << 10);
/// assert_eq!(synergistic_block(100_000, 64 << 10), 64 << 10);
/// assert_eq!(synergistic_block(4 << 20, 64 << 10), 64 << 10);
/// ```
pub fn synergistic_block(len: u64, min: u64) -> u64 {
    if len <= SYNERGISTIC_HALVES_MAX {
        (len / 2).next_multiple_of(4096).max(min)
    } else {
        min
    }
}

/// Smallest accepted synergistic block size.
pub const SYNERGISTIC_BLOCK_MIN: usize = 64;
/// Largest accepted synergistic block size.
pub const SYNERGISTIC_BLOCK_MAX: usize = 1 << 30;
/// Variable turning the kernel-assisted single copy off (`0`) or on (`1`).
pub const CMA_VAR: &str = "HMPI_CMA";
/// Variable turning the fast boxes off (`0`) or on (`1`).
pub const FASTBOX_VAR: &str = "HMPI_FASTBOX";
/// Variable holding the number of VCIs per rank.
pub const VCIS_VAR: &str = "HMPI_VCIS";
/// Variable turning solo mode (locks biased to the creating thread) off
/// (`0`) or on (`1`).
pub const SOLO_VAR: &str = "HMPI_SOLO";

/// The engine's tunables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Payloads up to this many bytes travel inline in the envelope
    /// (immediate protocol).
    pub eager_max: usize,
    /// Single-copy messages of at least this many bytes are copied
    /// synergistically (when the receive buffer is in the node heap).
    pub synergistic_min: usize,
    /// Block size of a synergistic copy (at least 64 bytes).
    pub synergistic_block: usize,
    /// Whether private send buffers above `eager_max` may be read by the
    /// receiver with `process_vm_readv` (kernel-assisted single copy).
    pub cma: bool,
    /// Whether tiny messages use the per-pair fast boxes.
    pub fastbox: bool,
    /// VCIs per rank (1 to [`crate::slots::MAX_VCIS`]).
    pub vcis: usize,
    /// Whether the creating thread takes the locks without locked
    /// instructions while it is the only thread that communicates.
    pub solo: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            eager_max: DEFAULT_EAGER_MAX,
            synergistic_min: DEFAULT_SYNERGISTIC_MIN,
            synergistic_block: DEFAULT_SYNERGISTIC_BLOCK,
            cma: true,
            fastbox: true,
            vcis: 1,
            solo: true,
        }
    }
}

fn bool_var(lookup: &impl Fn(&str) -> Option<OsString>, var: &'static str) -> Result<Option<bool>> {
    let Some(v) = lookup(var) else {
        return Ok(None);
    };
    let s = v.to_string_lossy().into_owned();
    match s.trim() {
        "0" | "off" | "no" | "false" => Ok(Some(false)),
        "1" | "on" | "yes" | "true" => Ok(Some(true)),
        _ => Err(Error::Config {
            var,
            value: s,
            reason: "expected 0 or 1".into(),
        }),
    }
}

fn size_var(
    lookup: &impl Fn(&str) -> Option<OsString>,
    var: &'static str,
    range: std::ops::RangeInclusive<usize>,
    unit: &str,
) -> Result<Option<usize>> {
    let Some(v) = lookup(var) else {
        return Ok(None);
    };
    let s = v.to_string_lossy().into_owned();
    match shmheap::env::parse_size(&s) {
        Some(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(Error::Config {
            var,
            value: s,
            reason: format!("expected {} to {} {unit}", range.start(), range.end()),
        }),
    }
}

impl Config {
    /// The defaults, overridden by the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|v| std::env::var_os(v))
    }

    /// Like [`Config::from_env`], with variables looked up through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Self> {
        let mut c = Config::default();
        if let Some(n) = size_var(&lookup, EAGER_MAX_VAR, 0..=EAGER_MAX_LIMIT, "bytes")? {
            c.eager_max = n;
        }
        if let Some(n) = size_var(&lookup, SYNERGISTIC_MIN_VAR, 0..=usize::MAX, "bytes")? {
            c.synergistic_min = n;
        }
        let blocks = SYNERGISTIC_BLOCK_MIN..=SYNERGISTIC_BLOCK_MAX;
        if let Some(n) = size_var(&lookup, SYNERGISTIC_BLOCK_VAR, blocks, "bytes")? {
            c.synergistic_block = n;
        }
        if let Some(b) = bool_var(&lookup, CMA_VAR)? {
            c.cma = b;
        }
        if let Some(b) = bool_var(&lookup, FASTBOX_VAR)? {
            c.fastbox = b;
        }
        if let Some(n) = size_var(&lookup, VCIS_VAR, 1..=crate::slots::MAX_VCIS, "VCIs")? {
            c.vcis = n;
        }
        if let Some(b) = bool_var(&lookup, SOLO_VAR)? {
            c.solo = b;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_var(var: &'static str, v: &str) -> Result<Config> {
        let v = v.to_owned();
        Config::from_lookup(move |name| (name == var).then(|| v.clone().into()))
    }

    fn with(v: &str) -> Result<Config> {
        with_var(EAGER_MAX_VAR, v)
    }

    #[test]
    fn eager_max() {
        assert_eq!(Config::from_lookup(|_| None).unwrap(), Config::default());
        assert_eq!(with("0").unwrap().eager_max, 0);
        assert_eq!(with("64K").unwrap().eager_max, EAGER_MAX_LIMIT);
        assert!(matches!(with("65537"), Err(Error::Config { .. })));
        assert!(matches!(with("lots"), Err(Error::Config { .. })));
        assert!(with("lots")
            .unwrap_err()
            .to_string()
            .contains(EAGER_MAX_VAR));
    }

    #[test]
    fn synergistic_and_cma() {
        let c = with_var(SYNERGISTIC_MIN_VAR, "1M").unwrap();
        assert_eq!(c.synergistic_min, 1 << 20);
        let c = with_var(SYNERGISTIC_BLOCK_VAR, "4K").unwrap();
        assert_eq!(c.synergistic_block, 4096);
        assert!(with_var(SYNERGISTIC_BLOCK_VAR, "8").is_err());
        assert!(with_var(SYNERGISTIC_MIN_VAR, "x").is_err());
        assert!(!with_var(CMA_VAR, "0").unwrap().cma);
        assert!(with_var(CMA_VAR, "1").unwrap().cma);
        assert!(with_var(CMA_VAR, "maybe")
            .unwrap_err()
            .to_string()
            .contains(CMA_VAR));
        assert!(!with_var(FASTBOX_VAR, "off").unwrap().fastbox);
        assert_eq!(with_var(VCIS_VAR, "4").unwrap().vcis, 4);
        assert!(with_var(VCIS_VAR, "0").is_err());
        assert!(with_var(VCIS_VAR, "9").is_err());
        assert!(Config::default().solo);
        assert!(with_var(SOLO_VAR, "1").unwrap().solo);
        assert!(!with_var(SOLO_VAR, "0").unwrap().solo);
        assert!(with_var(SOLO_VAR, "2").is_err());
    }
}
