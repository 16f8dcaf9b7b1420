//! Registry slots (see [`shmheap::Segment::publish`]) used by the engine.
//!
//! Each rank has [`shmheap::segment::REGISTRY_SLOTS`] slots. Slots in use
//! elsewhere in the workspace: 8 (`hmpi-bench`'s cross-free ring), 32 and 33
//! (`examples/heap_demo.rs`), 40 (`tests/heap_ranks.rs`), 48 (`opi`'s pool
//! return stacks). The engine owns
//! slots **16..=23**: slot `VCI_BASE + i` holds the address of the shared part
//! ([`crate::vci::VciShared`]) of the rank's VCI number `i`, so a rank can
//! publish up to [`MAX_VCIS`] VCIs.
//!
//! # Example
//! ```
//! assert_eq!(vci::slots::vci_slot(0), Some(16));
//! assert_eq!(vci::slots::vci_slot(7), Some(23));
//! assert_eq!(vci::slots::vci_slot(8), None);
//! ```

/// First registry slot of the engine: VCI 0's shared part.
pub const VCI_BASE: usize = 16;
/// How many VCIs per rank have a registry slot.
pub const MAX_VCIS: usize = 8;
/// Last registry slot of the engine.
pub const VCI_LAST: usize = VCI_BASE + MAX_VCIS - 1;

const _: () = assert!(VCI_LAST < shmheap::segment::REGISTRY_SLOTS);
const _: () = assert!(VCI_LAST < 32, "slots 32.. belong to examples and tests");

/// The registry slot of VCI `index`, if it has one.
pub const fn vci_slot(index: usize) -> Option<usize> {
    if index < MAX_VCIS {
        Some(VCI_BASE + index)
    } else {
        None
    }
}
