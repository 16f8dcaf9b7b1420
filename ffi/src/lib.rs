//! `libhmpi`: the C interface of hmpi — the MPI point-to-point subset with
//! the MPI 5.0 standard ABI, ownership passing (OPI), and `malloc` on the
//! node's shared heap.
//!
//! A C program compiled against `include/mpi.h` (with `hmpicc`, see
//! `docs/c-abi.md`) and linked with `-lhmpi` runs under `hmpirun` as one
//! rank per process; its `malloc`ed buffers live in the shared heap, so the
//! engine copies a message once, from the sender's buffer straight into
//! the receiver's.
//!
//! * [`abi`]: handle types, predefined handles, constants, `MPI_Status`;
//! * [`alloc`]: the `malloc` family and the library's own allocator;
//! * [`errors`]: error classes, error handlers, the routine wrapper;
//! * [`handles`]: the tables behind created handles;
//! * [`env`](mod@env): init, finalize, clocks, versions, `MPI_Alloc_mem`;
//! * [`comm`]: communicators and groups;
//! * [`datatype`]: predefined and derived datatypes, packing;
//! * [`op`]: reduction operations, `MPI_Reduce_local`;
//! * [`p2p`]: sends, receives, probes;
//! * [`request`]: waiting and testing;
//! * [`grequest`]: generalized requests (`MPI_Grequest_*`);
//! * [`session`]: sessions (MPI 4.0), communicators from groups;
//! * [`topo`]: process topologies and neighbourhood collectives;
//! * [`win`]: one-sided communication (windows, `MPI_Put` …);
//! * [`opi`]: ownership passing (`OPI_*`, `include/opi.h`);
//! * [`stream`]: explicit streams (`MPIX_Stream_*`, MPICH's extension);
//! * [`dart`]: DART, the global address space of DASH (`include/dart.h`);
//! * [`shmem`]: OpenSHMEM 1.5, its core (`include/shmem.h`);
//! * [`unsupported`]: every other routine of the standard ABI, exported
//!   so that any program written for it links, each refusing with
//!   `MPI_ERR_UNSUPPORTED_OPERATION`;
//! * `src/pcontrol.c`: `MPI_Pcontrol`, which is variadic (stable Rust
//!   cannot define a C-variadic function), compiled by `build.rs`.
//!
//! Every routine `MPI_X` is exported with its profiling twin `PMPI_X`.
//!
//! ```c
//! #include <mpi.h>
//! int main(int argc, char **argv) {
//!     MPI_Init(&argc, &argv);
//!     int rank;
//!     MPI_Comm_rank(MPI_COMM_WORLD, &rank);
//!     double *x = malloc(1 << 20);           // in the shared heap
//!     if (rank == 0) MPI_Send(x, 1 << 17, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
//!     if (rank == 1) MPI_Recv(x, 1 << 17, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
//!     free(x);
//!     return MPI_Finalize();
//! }
//! ```

#![allow(non_snake_case)]

/// Defines `PMPI_X` with the body and `MPI_X` calling it, both exported.
macro_rules! mpi_fn {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident / $pname:ident ( $($arg:ident : $ty:ty),* $(,)? ) -> $ret:ty $body:block
    )*) => {$(
        $(#[doc = $doc])*
        ///
        /// # Safety
        /// Pointer arguments are valid as the MPI standard requires for
        /// this routine.
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty),*) -> $ret $body

        $(#[doc = $doc])*
        ///
        /// # Safety
        /// As for the `PMPI_` routine of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: the same contract as this function's.
            unsafe { $pname($($arg),*) }
        }
    )*};
}

pub mod abi;
pub mod alloc;
pub mod attr;
pub mod buffered;
pub mod coll;
pub mod coll_large;
pub mod comm;
pub mod dart;
pub mod datatype;
pub mod derived;
pub mod env;
pub mod errors;
pub mod grequest;
pub mod handles;
pub mod info;
pub mod op;
pub mod opi;
pub mod p2p;
pub mod pack;
pub mod partitioned;
pub mod persistent;
pub mod request;
pub mod session;
pub mod shmem;
pub mod stream;
pub mod topo;
pub mod unsupported;
pub mod win;

/// libhmpi's own Rust allocations: the shared heap once attached, glibc's
/// internal entry points before (see [`alloc`]).
#[global_allocator]
static ALLOC: alloc::LibHeap = alloc::LibHeap;
