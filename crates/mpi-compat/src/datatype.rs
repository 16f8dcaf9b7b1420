//! rsmpi's `mpi::datatype`: which Rust types travel ([`Equivalence`]),
//! buffers, views and partitions, user datatypes.
//!
//! The datatypes are hmpi-core's ([`Datatype`], [`hmpi_core::datatype::UserDatatype`]);
//! [`UserDatatype`] here takes rsmpi's argument types (`Count`, `Address`)
//! and aborts on an error as rsmpi does. A [`View`] / [`MutView`] hands a
//! buffer with a datatype to the typed operations; hmpi-core's typed
//! operations move a buffer's bytes as they lie, so a view accepts only a
//! datatype without gaps (`Datatype::is_dense`) and aborts with a clear
//! message otherwise.

use std::marker::PhantomData;

use crate::{check, fatal, Address, Count};

pub use crate::collective::{DynBuffer, DynBufferMut};
pub use hmpi_core::collective::{Partition, PartitionMut};
pub use hmpi_core::datatype::{Buffer, BufferMut, Datatype, Equivalence};

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{Buffer, BufferMut, UncommittedDatatype};
    pub use hmpi_core::datatype::Equivalence;
}

/// Something that describes a datatype (rsmpi's `UncommittedDatatype` /
/// `Datatype`): hmpi's [`Datatype`], a [`UserDatatype`].
pub trait UncommittedDatatype {
    /// hmpi-core's datatype (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_datatype(&self) -> Datatype;

    /// `MPI_Type_dup`.
    fn dup(&self) -> UserDatatype {
        UserDatatype(hmpi_core::datatype::UserDatatype::dup(
            &self.core_datatype(),
        ))
    }
}

impl UncommittedDatatype for Datatype {
    fn core_datatype(&self) -> Datatype {
        self.clone()
    }
}

impl UncommittedDatatype for hmpi_core::datatype::UserDatatype {
    fn core_datatype(&self) -> Datatype {
        Datatype::from(self.clone())
    }
}

impl UncommittedDatatype for UserDatatype {
    fn core_datatype(&self) -> Datatype {
        Datatype::from(self.0.clone())
    }
}

impl<T: UncommittedDatatype + ?Sized> UncommittedDatatype for &T {
    fn core_datatype(&self) -> Datatype {
        (**self).core_datatype()
    }
}

/// A derived datatype (rsmpi's `UserDatatype`).
#[derive(Clone, Debug)]
pub struct UserDatatype(hmpi_core::datatype::UserDatatype);

/// A count or length that must not be negative.
fn len(n: Count, what: &str) -> usize {
    usize::try_from(n).unwrap_or_else(|_| {
        fatal(&hmpi_core::Error::Arg {
            reason: format!("{what} must not be negative, not {n}"),
        })
    })
}

fn lens(v: &[Count], what: &str) -> Vec<usize> {
    v.iter().map(|&n| len(n, what)).collect()
}

fn displs(v: &[Count]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

impl UserDatatype {
    /// `MPI_Type_contiguous`.
    pub fn contiguous<D: UncommittedDatatype + ?Sized>(count: Count, oldtype: &D) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(hmpi_core::datatype::UserDatatype::contiguous(
            len(count, "count"),
            &t,
        )))
    }

    /// `MPI_Type_vector` (stride in elements).
    pub fn vector<D: UncommittedDatatype + ?Sized>(
        count: Count,
        blocklength: Count,
        stride: Count,
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(hmpi_core::datatype::UserDatatype::vector(
            len(count, "count"),
            len(blocklength, "blocklength"),
            stride as isize,
            &t,
        )))
    }

    /// `MPI_Type_create_hvector` (stride in bytes).
    pub fn heterogeneous_vector<D: UncommittedDatatype + ?Sized>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(
            hmpi_core::datatype::UserDatatype::heterogeneous_vector(
                len(count, "count"),
                len(blocklength, "blocklength"),
                stride,
                &t,
            ),
        ))
    }

    /// `MPI_Type_indexed` (displacements in elements).
    pub fn indexed<D: UncommittedDatatype + ?Sized>(
        blocklengths: &[Count],
        displacements: &[Count],
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(hmpi_core::datatype::UserDatatype::indexed(
            &lens(blocklengths, "a blocklength"),
            &displs(displacements),
            &t,
        )))
    }

    /// `MPI_Type_create_hindexed` (displacements in bytes).
    pub fn heterogeneous_indexed<D: UncommittedDatatype + ?Sized>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(
            hmpi_core::datatype::UserDatatype::heterogeneous_indexed(
                &lens(blocklengths, "a blocklength"),
                displacements,
                &t,
            ),
        ))
    }

    /// `MPI_Type_create_indexed_block` (displacements in elements).
    pub fn indexed_block<D: UncommittedDatatype + ?Sized>(
        blocklength: Count,
        displacements: &[Count],
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(hmpi_core::datatype::UserDatatype::indexed_block(
            len(blocklength, "blocklength"),
            &displs(displacements),
            &t,
        )))
    }

    /// `MPI_Type_create_hindexed_block` (displacements in bytes).
    pub fn heterogeneous_indexed_block<D: UncommittedDatatype + ?Sized>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> UserDatatype {
        let t = oldtype.core_datatype();
        UserDatatype(check(
            hmpi_core::datatype::UserDatatype::heterogeneous_indexed_block(
                len(blocklength, "blocklength"),
                displacements,
                &t,
            ),
        ))
    }

    /// `MPI_Type_create_struct`.
    pub fn structured<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> UserDatatype {
        let types: Vec<Datatype> = types.iter().map(|t| t.core_datatype()).collect();
        UserDatatype(check(hmpi_core::datatype::UserDatatype::structured(
            &lens(blocklengths, "a blocklength"),
            displacements,
            &types,
        )))
    }

    /// The datatype as hmpi's [`Datatype`] (rsmpi's `as_ref`, a
    /// `DatatypeRef`).
    pub fn as_ref(&self) -> Datatype {
        Datatype::from(self.0.clone())
    }
}

/// A datatype's elements in a buffer, and its bytes.
fn view_bytes<T>(buffer: *const T, buffer_len: usize, count: Count, datatype: &Datatype) -> usize {
    if !datatype.is_dense() {
        fatal(&hmpi_core::Error::Type {
            reason: "a View or MutView in hmpi takes a datatype without gaps (is_dense); \
                     send a strided layout through hmpi-core's raw tier"
                .into(),
        });
    }
    let n = len(count, "count");
    let bytes = n.saturating_mul(datatype.size());
    let have = buffer_len.saturating_mul(std::mem::size_of::<T>());
    if bytes > have {
        fatal(&hmpi_core::Error::Buffer {
            reason: format!(
                "a view of {n} elements of {} bytes does not fit a buffer of {have} bytes at {buffer:p}",
                datatype.size()
            ),
        });
    }
    bytes
}

/// A buffer seen as `count` elements of a datatype (rsmpi's `View`).
pub struct View<'d, 'b, D, B: ?Sized> {
    bytes: &'b [u8],
    datatype: Datatype,
    _marker: PhantomData<(&'d D, &'b B)>,
}

impl<'d, 'b, D: UncommittedDatatype, T: Equivalence> View<'d, 'b, D, [T]> {
    /// `count` elements of `datatype` at the start of `buffer`.
    ///
    /// # Safety
    /// As in rsmpi: the datatype must describe memory of `buffer`. hmpi
    /// checks that the elements fit the buffer and that the datatype has
    /// no gaps (aborting otherwise).
    pub unsafe fn with_count_and_datatype(buffer: &'b [T], count: Count, datatype: &'d D) -> Self {
        let datatype = datatype.core_datatype();
        let n = view_bytes(buffer.as_ptr(), buffer.len(), count, &datatype);
        // SAFETY: `T: Equivalence` values are plain bytes without padding,
        // and `n` is at most the slice's size (checked above); the borrow
        // lasts `'b` like the slice's.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), n) };
        View {
            bytes,
            datatype,
            _marker: PhantomData,
        }
    }
}

impl<D, B: ?Sized> Buffer for View<'_, '_, D, B> {
    fn as_bytes(&self) -> &[u8] {
        self.bytes
    }
    fn element_size(&self) -> usize {
        self.datatype.size()
    }
    fn element_datatype(&self) -> Datatype {
        self.datatype.clone()
    }
}

/// A buffer seen as `count` elements of a datatype, for receiving
/// (rsmpi's `MutView`).
pub struct MutView<'d, 'b, D, B: ?Sized> {
    bytes: &'b mut [u8],
    datatype: Datatype,
    _marker: PhantomData<(&'d D, &'b mut B)>,
}

impl<'d, 'b, D: UncommittedDatatype, T: Equivalence> MutView<'d, 'b, D, [T]> {
    /// `count` elements of `datatype` at the start of `buffer`.
    ///
    /// # Safety
    /// As [`View::with_count_and_datatype`].
    pub unsafe fn with_count_and_datatype(
        buffer: &'b mut [T],
        count: Count,
        datatype: &'d D,
    ) -> Self {
        let datatype = datatype.core_datatype();
        let n = view_bytes(buffer.as_ptr(), buffer.len(), count, &datatype);
        // SAFETY: as in `View::with_count_and_datatype`; every byte
        // pattern is a valid `T`, so writes through the bytes keep the
        // values valid, and the exclusive borrow is carried over.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<u8>(), n) };
        MutView {
            bytes,
            datatype,
            _marker: PhantomData,
        }
    }
}

impl<D, B: ?Sized> BufferMut for MutView<'_, '_, D, B> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
    fn element_size(&self) -> usize {
        self.datatype.size()
    }
    fn element_datatype(&self) -> Datatype {
        self.datatype.clone()
    }
}
