//! The MPI-like runtime of hmpi: what a user programs against.
//!
//! This crate will hold init/finalize and bootstrap, communicators and
//! groups, typed point-to-point, collectives, one-sided windows and the
//! global-address-space layer. For now it contains the job launcher:
//!
//! * [`launch`]: the launcher as a library ([`launch::Launcher`]), used by
//!   the `hmpirun` binary and by multi-process tests and benchmarks;
//! * [`env`](mod@env): the environment variables the launcher gives every rank.
//!
//! # Example
//! ```
//! use hmpi_core::launch::Launcher;
//!
//! let report = Launcher::new("/bin/sh", 2)
//!     .args(["-c", "echo rank $HMPI_RANK of $HMPI_SIZE"])
//!     .capture_output(true)
//!     .run()
//!     .unwrap();
//! assert!(report.success());
//! assert_eq!(report.ranks[1].stdout, b"rank 1 of 2\n");
//! ```

#![warn(missing_docs)]

pub mod env;
pub mod launch;
