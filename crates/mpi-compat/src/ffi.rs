//! rsmpi's `mpi::ffi`: the C types that rsmpi's unsafe interfaces name,
//! here for [`crate::collective::UnsafeUserOperation`]'s C-style reduction
//! functions.
//!
//! rsmpi re-exports an MPI library's C bindings here. hmpi has no C
//! handles behind its Rust types (the C library, `libhmpi`, is a separate
//! marshalling layer over the same hmpi-core), so this module holds only
//! what a C-style callback receives: [`MPI_Datatype`], an opaque handle of
//! the MPI 5.0 standard ABI's shape (a pointer to an incomplete struct),
//! which leads to hmpi-core's datatype of the data while the callback
//! runs, and the sizes C code declares buffers with.

#![allow(non_camel_case_types)]

use std::ffi::c_int;

use hmpi_core::datatype::Datatype;

/// The struct an [`MPI_Datatype`] points to (opaque, as in the standard
/// ABI's `struct MPI_ABI_Datatype`).
#[repr(C)]
pub struct MPI_ABI_Datatype {
    _opaque: [u8; 0],
}

/// A datatype handle, as a reduction function receives it.
pub type MPI_Datatype = *mut MPI_ABI_Datatype;

/// `MPI_MAX_OBJECT_NAME`: a name's bytes, with the terminating NUL.
pub const MPI_MAX_OBJECT_NAME: c_int = hmpi_core::comm::MAX_OBJECT_NAME as c_int;

/// The handle of `datatype`, valid while the borrow lasts.
pub(crate) fn handle_of(datatype: &Datatype) -> MPI_Datatype {
    (datatype as *const Datatype).cast_mut().cast()
}

/// The datatype behind a handle this crate gave out.
///
/// # Safety
/// `handle` came from a reduction callback's argument (or another handle
/// this crate made) and is used while that call runs.
pub unsafe fn datatype_of<'a>(handle: MPI_Datatype) -> &'a Datatype {
    // SAFETY: the caller's guarantee: the handle points to a live
    // `Datatype` (see `handle_of`).
    unsafe { &*handle.cast_const().cast::<Datatype>() }
}
