//! Tunables of the engine, read from the environment.
//!
//! * `HMPI_EAGER_MAX` (default 256 bytes, at most 64 KiB): the largest
//!   payload sent with the immediate protocol, inline in the envelope.
//!   Accepts the sizes `shmheap::env::parse_size` accepts (`256`, `4K`).
//!
//! # Example
//! ```
//! let c = vci::Config::from_lookup(|v| (v == "HMPI_EAGER_MAX").then(|| "1K".into())).unwrap();
//! assert_eq!(c.eager_max, 1024);
//! assert_eq!(vci::Config::default().eager_max, 256);
//! ```

use crate::error::{Error, Result};
use std::ffi::OsString;

/// Variable holding the immediate protocol's largest payload.
pub const EAGER_MAX_VAR: &str = "HMPI_EAGER_MAX";
/// Default largest immediate payload (the papers' x86 threshold).
pub const DEFAULT_EAGER_MAX: usize = 256;
/// The largest accepted `HMPI_EAGER_MAX`.
pub const EAGER_MAX_LIMIT: usize = 64 << 10;

/// The engine's tunables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Payloads up to this many bytes travel inline in the envelope
    /// (immediate protocol).
    pub eager_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            eager_max: DEFAULT_EAGER_MAX,
        }
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
        if let Some(v) = lookup(EAGER_MAX_VAR) {
            let s = v.to_string_lossy().into_owned();
            match shmheap::env::parse_size(&s) {
                Some(n) if n <= EAGER_MAX_LIMIT => c.eager_max = n,
                _ => {
                    return Err(Error::Config {
                        var: EAGER_MAX_VAR,
                        value: s,
                        reason: format!("expected a size of at most {EAGER_MAX_LIMIT} bytes"),
                    })
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: &str) -> Result<Config> {
        let v = v.to_owned();
        Config::from_lookup(move |name| (name == EAGER_MAX_VAR).then(|| v.clone().into()))
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
}
