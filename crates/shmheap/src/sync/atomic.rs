//! The atomics every primitive uses, from one place.
//!
//! The primitives name their atomics through `super::atomic`, so the loom
//! models in `tests/loom.rs` can compile the very same source files against
//! loom's model-checked types instead (see that file).

pub use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
