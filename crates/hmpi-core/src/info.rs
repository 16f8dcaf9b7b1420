//! Info objects ([`Info`], `MPI_Info`): ordered maps of string keys to
//! string values, the hints that `*_with_info` calls and
//! `MPI_Comm_set_info` pass to the runtime.
//!
//! Keys keep the order in which they were first set (MPI numbers them for
//! `MPI_Info_get_nthkey`); setting a key again replaces its value in
//! place. A key is 1 to [`MAX_INFO_KEY`]` - 1` bytes, a value 1 to
//! [`MAX_INFO_VAL`]` - 1` bytes (MPI's limits, which leave room for the C
//! terminator); neither may hold a NUL byte. MPI ignores leading and
//! trailing spaces of keys, so they are trimmed.
//!
//! A communicator keeps the hints set on it
//! ([`SimpleCommunicator::info`](crate::SimpleCommunicator::info)), for
//! the runtime's layers that read them.
//!
//! # Example
//! ```
//! use hmpi_core::Info;
//!
//! let mut info = Info::new();
//! info.set("mpi_assert_no_any_tag", "true").unwrap();
//! info.set("hmpi_vcis", "4").unwrap();
//! info.set("mpi_assert_no_any_tag", "false").unwrap();
//! assert_eq!(info.get("mpi_assert_no_any_tag"), Some("false"));
//! assert_eq!(info.nth_key(1), Some("hmpi_vcis"));
//! assert_eq!(info.len(), 2);
//! assert!(info.delete("absent").is_err()); // Error::InfoNoKey
//! assert!(info.set("", "x").is_err()); // Error::InfoKey
//! ```

use crate::error::{Error, Result};

/// `MPI_MAX_INFO_KEY`: a key is shorter than this many bytes.
pub const MAX_INFO_KEY: usize = 256;
/// `MPI_MAX_INFO_VAL`: a value is shorter than this many bytes.
pub const MAX_INFO_VAL: usize = 1024;

/// An ordered key/value map of hints (`MPI_Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    entries: Vec<(String, String)>,
}

/// A key as MPI compares it: without leading and trailing spaces, checked
/// against the limits.
fn check_key(key: &str) -> Result<&str> {
    let k = key.trim_matches(' ');
    if k.is_empty() {
        return Err(Error::InfoKey {
            reason: "an info key is empty".into(),
        });
    }
    if k.len() >= MAX_INFO_KEY {
        return Err(Error::InfoKey {
            reason: format!(
                "an info key of {} bytes (at most {} allowed)",
                k.len(),
                MAX_INFO_KEY - 1
            ),
        });
    }
    if k.contains('\0') {
        return Err(Error::InfoKey {
            reason: "an info key holds a NUL byte".into(),
        });
    }
    Ok(k)
}

fn check_value(value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::InfoValue {
            reason: "an info value is empty".into(),
        });
    }
    if value.len() >= MAX_INFO_VAL {
        return Err(Error::InfoValue {
            reason: format!(
                "an info value of {} bytes (at most {} allowed)",
                value.len(),
                MAX_INFO_VAL - 1
            ),
        });
    }
    if value.contains('\0') {
        return Err(Error::InfoValue {
            reason: "an info value holds a NUL byte".into(),
        });
    }
    Ok(())
}

impl Info {
    /// An empty info object (`MPI_Info_create`).
    pub fn new() -> Info {
        Info::default()
    }

    /// The info object of the environment (`MPI_INFO_ENV`): how the
    /// process was started, under MPI's reserved keys (`command`, `argv`,
    /// `maxprocs`, `host`, `wdir`, …) where they are known.
    pub fn env() -> Info {
        let mut info = Info::new();
        let mut args = std::env::args();
        if let Some(cmd) = args.next() {
            let _ = info.set("command", &cmd);
        }
        let rest: Vec<String> = args.collect();
        if !rest.is_empty() {
            let _ = info.set("argv", &rest.join(" "));
        }
        if let Ok(ep) = crate::environment::endpoint() {
            let _ = info.set("maxprocs", &ep.size().to_string());
        }
        if let Ok(h) = crate::environment::processor_name() {
            let _ = info.set("host", &h);
        }
        if let Ok(d) = std::env::current_dir() {
            let _ = info.set("wdir", &d.to_string_lossy());
        }
        let _ = info.set("thread_level", "MPI_THREAD_MULTIPLE");
        info
    }

    /// Sets `key` to `value` (`MPI_Info_set`): a new key goes last, an
    /// existing one keeps its place. [`Error::InfoKey`] /
    /// [`Error::InfoValue`] for a key or value outside MPI's limits.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let k = check_key(key)?;
        check_value(value)?;
        match self.entries.iter_mut().find(|(ek, _)| ek == k) {
            Some((_, v)) => *v = value.to_owned(),
            None => self.entries.push((k.to_owned(), value.to_owned())),
        }
        Ok(())
    }

    /// The value of `key`, `None` if it is not set (`MPI_Info_get_string`).
    /// A key outside the limits is never set, so it is `None` too.
    pub fn get(&self, key: &str) -> Option<&str> {
        let k = key.trim_matches(' ');
        self.entries
            .iter()
            .find(|(ek, _)| ek == k)
            .map(|(_, v)| v.as_str())
    }

    /// [`Info::get`] with the key checked ([`Error::InfoKey`] for a key
    /// outside MPI's limits), as the C routines need it.
    pub fn get_checked(&self, key: &str) -> Result<Option<&str>> {
        check_key(key).map(|k| self.get(k))
    }

    /// Removes `key` (`MPI_Info_delete`): [`Error::InfoNoKey`] if it is
    /// not set.
    pub fn delete(&mut self, key: &str) -> Result<()> {
        let k = check_key(key)?;
        match self.entries.iter().position(|(ek, _)| ek == k) {
            Some(i) => {
                self.entries.remove(i);
                Ok(())
            }
            None => Err(Error::InfoNoKey { key: k.to_owned() }),
        }
    }

    /// The number of keys (`MPI_Info_get_nkeys`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `n`-th key in the order of first setting
    /// (`MPI_Info_get_nthkey`), `None` past the last.
    pub fn nth_key(&self, n: usize) -> Option<&str> {
        self.entries.get(n).map(|(k, _)| k.as_str())
    }

    /// The keys and values in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_limits_and_errors() {
        let mut i = Info::new();
        i.set(" a ", "1").unwrap();
        i.set("b", "2").unwrap();
        i.set("a", "3").unwrap();
        assert_eq!(i.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(i.get(" b"), Some("2"));
        assert!(matches!(i.delete("c"), Err(Error::InfoNoKey { .. })));
        i.delete("a").unwrap();
        assert_eq!((i.len(), i.nth_key(0), i.nth_key(1)), (1, Some("b"), None));
        let long_key = "k".repeat(MAX_INFO_KEY);
        assert!(matches!(i.set(&long_key, "v"), Err(Error::InfoKey { .. })));
        assert!(i.set(&long_key[1..], "v").is_ok());
        let long_val = "v".repeat(MAX_INFO_VAL);
        assert!(matches!(
            i.set("x", &long_val),
            Err(Error::InfoValue { .. })
        ));
        assert!(matches!(i.set("x", ""), Err(Error::InfoValue { .. })));
        assert!(matches!(i.set("  ", "v"), Err(Error::InfoKey { .. })));
        assert!(matches!(
            i.get_checked(&long_key),
            Err(Error::InfoKey { .. })
        ));
        let d = i.clone();
        i.set("y", "z").unwrap();
        assert_eq!((d.len(), i.len()), (2, 3));
    }
}
