//! hmpi: message passing between the processes of a node through a shared heap.
//!
//! This facade re-exports the layers users program against:
//!
//! * [`shmheap`]: the node's shared heap and its allocator ([`ShmHeap`]).

pub use shmheap;
