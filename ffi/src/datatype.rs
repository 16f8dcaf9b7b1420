//! Datatypes of the C interface: the handles of every predefined C (and
//! fixed-size Fortran) type and of derived types, and the `MPI_Type_*`,
//! `MPI_Pack*` entry points. The datatype engine itself — type maps,
//! derived type constructors, packing — is `hmpi_core::datatype`; this
//! module converts C arguments, keeps the handle table and each handle's
//! C-only state (committed or not, its name), and gives the other C
//! modules their view of a type ([`TypeInfo`]).
//!
//! * A *dense* type (one block whose length is the extent) travels straight
//!   from and into the program's buffer: all predefined types but the
//!   padded pairs (`MPI_DOUBLE_INT`, `MPI_SHORT_INT`, …) and any derived
//!   type that happens to be one gapless run.
//! * Any other type is packed into a contiguous buffer (in the shared heap,
//!   so the receiver copies it once) before a send, and received into one
//!   and unpacked after the receive; a short message unpacks as far as its
//!   bytes go, and `MPI_Get_count` then says `MPI_UNDEFINED` if they are
//!   not a whole number of elements.
//! * `MPI_Type_create_struct` pads the extent to the alignment of its
//!   most aligned member, as C lays out an array of structs.
//!
//! A type map longer than [`MAX_BLOCKS`] blocks is refused with
//! `MPI_ERR_TYPE` rather than exhausting memory.
//!
//! In C:
//! ```c
//! MPI_Datatype column;                       // one column of a 4x4 matrix
//! MPI_Type_vector(4, 1, 4, MPI_DOUBLE, &column);
//! MPI_Type_commit(&column);
//! MPI_Send(&m[0][2], 1, column, 1, 0, MPI_COMM_WORLD);
//! ```

use crate::abi::{self, Aint, Count, Datatype};
use crate::comm::comm_ref;
use crate::errors::{api_active, err, out, put, put_string, MpiError, Res};
use crate::handles::{Table, KIND_TYPE};
use hmpi_core::attr::Kind;
use hmpi_core::datatype::{BasicType, Datatype as CoreType, UserDatatype};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use hmpi_core::datatype::{Block, MAX_BLOCKS};

/// Addresses below this are never mapped (Linux's `mmap_min_addr` is at
/// least 4 KiB, 64 KiB by default); a null buffer plus a type map that
/// reaches below it cannot be `MPI_BOTTOM` with absolute addresses.
const LOWEST_ADDRESS: isize = 4096;

/// A datatype handle's object: the engine's type and the C-only state.
#[derive(Debug)]
pub struct TypeInfo {
    /// Bytes of data in one element (`ty.size()`, kept at hand for the
    /// message path).
    pub size: usize,
    /// Lower and upper bound, true bounds, alignment (`ty`'s, at hand).
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    pub align: usize,
    /// The type.
    pub ty: CoreType,
    /// A predefined handle (never freed or renamed).
    pub predefined: bool,
    committed: AtomicBool,
    name: Mutex<String>,
    /// Its attributes (`MPI_Type_set_attr`, see [`crate::attr`]).
    pub attrs: hmpi_core::attr::Attributes,
}

impl TypeInfo {
    fn new(ty: CoreType, predefined: bool, committed: bool, name: &str) -> Self {
        TypeInfo {
            size: ty.size(),
            lb: ty.lower_bound(),
            ub: ty.upper_bound(),
            true_lb: ty.true_lower_bound(),
            true_ub: ty.true_upper_bound(),
            align: ty.alignment(),
            ty,
            predefined,
            committed: AtomicBool::new(committed),
            name: Mutex::new(name.to_owned()),
            attrs: hmpi_core::attr::Attributes::new(),
        }
    }

    pub fn extent(&self) -> isize {
        self.ty.extent()
    }

    pub fn is_committed(&self) -> bool {
        // Relaxed: a flag the program sets before using the type; the
        // type map itself never changes after construction.
        self.predefined || self.committed.load(Ordering::Relaxed)
    }

    fn name(&self) -> String {
        self.name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// If `count` elements are one run of bytes: its offset from the buffer.
    #[inline]
    pub fn dense_offset(&self) -> Option<isize> {
        self.ty.dense_offset()
    }

    /// Bytes of `count` elements, or `MPI_ERR_COUNT` if that overflows.
    pub fn bytes(&self, count: usize) -> Res<usize> {
        bytes_of(count, self.size)
    }

    /// Checks that `buf` can hold `count` elements: a null buffer is only
    /// `MPI_BOTTOM` for a derived type whose blocks are absolute addresses.
    pub fn check_buffer(&self, buf: *const c_void, count: usize) -> Res {
        if buf.is_null()
            && count > 0
            && self.size > 0
            && (self.predefined || self.true_lb < LOWEST_ADDRESS)
        {
            return err(abi::ERR_BUFFER, format!("null buffer for {count} elements"));
        }
        Ok(())
    }

    /// Packs `count` elements at `base` into `out` (`count × size` bytes).
    ///
    /// # Safety
    /// The type map of every element is readable at `base`.
    pub unsafe fn pack(&self, base: *const u8, count: usize, out: &mut [u8]) {
        // SAFETY: the caller's guarantee.
        let r = unsafe { self.ty.pack_raw(base, count, out) };
        debug_assert!(r.is_ok(), "{r:?}");
    }

    /// Unpacks `data` (at most `count × size` bytes; a shorter tail fills
    /// elements as far as it goes) into `count` elements at `base`.
    ///
    /// # Safety
    /// The type map of every element is writable at `base`.
    pub unsafe fn unpack(&self, data: &[u8], base: *mut u8, count: usize) {
        let whole = count.saturating_mul(self.size);
        let data = &data[..data.len().min(whole)];
        // SAFETY: the caller's guarantee; `data` is at most what `count`
        // elements hold.
        let r = unsafe { self.ty.unpack_raw(data, base, count) };
        debug_assert!(r.is_ok(), "{r:?}");
    }
}

/// The basic type of each predefined datatype handle (the handle values
/// are the standard ABI's, [`abi::PREDEFINED_TYPES`]; sizes and layouts
/// are the engine's, and a test checks that the two agree).
const PREDEFINED_KINDS: &[(usize, BasicType)] = {
    use BasicType::*;
    &[
        (0x201, I64),               // MPI_AINT
        (0x202, I64),               // MPI_COUNT
        (0x203, I64),               // MPI_OFFSET
        (0x207, Packed),            // MPI_PACKED
        (0x208, I16),               // MPI_SHORT
        (0x209, I32),               // MPI_INT
        (0x20a, I64),               // MPI_LONG
        (0x20b, I64),               // MPI_LONG_LONG
        (0x20c, U16),               // MPI_UNSIGNED_SHORT
        (0x20d, U32),               // MPI_UNSIGNED
        (0x20e, U64),               // MPI_UNSIGNED_LONG
        (0x20f, U64),               // MPI_UNSIGNED_LONG_LONG
        (0x210, F32),               // MPI_FLOAT
        (0x212, ComplexF32),        // MPI_C_FLOAT_COMPLEX
        (0x213, ComplexF32),        // MPI_CXX_FLOAT_COMPLEX
        (0x214, F64),               // MPI_DOUBLE
        (0x216, ComplexF64),        // MPI_C_DOUBLE_COMPLEX
        (0x217, ComplexF64),        // MPI_CXX_DOUBLE_COMPLEX
        (0x218, Logical4),          // MPI_LOGICAL
        (0x219, I32),               // MPI_INTEGER
        (0x21a, F32),               // MPI_REAL
        (0x21b, ComplexF32),        // MPI_COMPLEX
        (0x21c, F64),               // MPI_DOUBLE_PRECISION
        (0x21d, ComplexF64),        // MPI_DOUBLE_COMPLEX
        (0x21e, Char),              // MPI_CHARACTER
        (0x220, LongDouble),        // MPI_LONG_DOUBLE
        (0x224, ComplexLongDouble), // MPI_C_LONG_DOUBLE_COMPLEX
        (0x225, ComplexLongDouble), // MPI_CXX_LONG_DOUBLE_COMPLEX
        (0x228, FloatInt),          // MPI_FLOAT_INT
        (0x229, DoubleInt),         // MPI_DOUBLE_INT
        (0x22a, LongInt),           // MPI_LONG_INT
        (0x22b, TwoInt),            // MPI_2INT
        (0x22c, ShortInt),          // MPI_SHORT_INT
        (0x22d, LongDoubleInt),     // MPI_LONG_DOUBLE_INT
        (0x230, TwoF32),            // MPI_2REAL
        (0x231, TwoF64),            // MPI_2DOUBLE_PRECISION
        (0x232, TwoInt),            // MPI_2INTEGER
        (0x238, Bool),              // MPI_C_BOOL
        (0x239, Bool),              // MPI_CXX_BOOL
        (0x23c, WChar),             // MPI_WCHAR
        (0x240, I8),                // MPI_INT8_T
        (0x241, U8),                // MPI_UINT8_T
        (0x243, Char),              // MPI_CHAR
        (0x244, I8),                // MPI_SIGNED_CHAR
        (0x245, U8),                // MPI_UNSIGNED_CHAR
        (0x247, Byte),              // MPI_BYTE
        (0x248, I16),               // MPI_INT16_T
        (0x249, U16),               // MPI_UINT16_T
        (0x250, I32),               // MPI_INT32_T
        (0x251, U32),               // MPI_UINT32_T
        (0x258, I64),               // MPI_INT64_T
        (0x259, U64),               // MPI_UINT64_T
        (0x2c0, Logical1),          // MPI_LOGICAL1
        (0x2c1, I8),                // MPI_INTEGER1
        (0x2c8, Logical2),          // MPI_LOGICAL2
        (0x2c9, I16),               // MPI_INTEGER2
        (0x2ca, F16),               // MPI_REAL2
        (0x2d0, Logical4),          // MPI_LOGICAL4
        (0x2d1, I32),               // MPI_INTEGER4
        (0x2d2, F32),               // MPI_REAL4
        (0x2d3, ComplexF16),        // MPI_COMPLEX4
        (0x2d8, Logical8),          // MPI_LOGICAL8
        (0x2d9, I64),               // MPI_INTEGER8
        (0x2da, F64),               // MPI_REAL8
        (0x2db, ComplexF32),        // MPI_COMPLEX8
        (0x2e0, Logical16),         // MPI_LOGICAL16
        (0x2e1, I128),              // MPI_INTEGER16
        (0x2e2, F128),              // MPI_REAL16
        (0x2e3, ComplexF64),        // MPI_COMPLEX16
        (0x2eb, ComplexF128),       // MPI_COMPLEX32
    ]
};

/// Predefined types by `handle - 0x200`.
fn predefined_table() -> &'static [Option<TypeInfo>] {
    static T: OnceLock<Vec<Option<TypeInfo>>> = OnceLock::new();
    T.get_or_init(|| {
        let mut v: Vec<Option<TypeInfo>> = (0..0x100).map(|_| None).collect();
        for &(h, name, _, _) in abi::PREDEFINED_TYPES {
            if let Some(&(_, kind)) = PREDEFINED_KINDS.iter().find(|k| k.0 == h) {
                let ty = CoreType::basic(kind).with_handle(h);
                v[h - 0x200] = Some(TypeInfo::new(ty, true, true, name));
            }
        }
        v
    })
}

/// The element size of a predefined dense datatype (every predefined type
/// but the padded pairs), for the fast paths; `None` otherwise.
#[inline]
pub fn dense_predefined_size(t: Datatype) -> Option<usize> {
    match *DENSE_SIZES.get(t.0.wrapping_sub(0x200))? {
        NOT_DENSE => None,
        n => Some(n as usize),
    }
}

/// [`DENSE_SIZES`] entry of a handle that is not a dense predefined type.
const NOT_DENSE: u32 = u32::MAX;

/// The size of each dense predefined type by `handle - 0x200` (the C
/// message path's lookup: one load), [`NOT_DENSE`] for the rest; built
/// from the ABI tables (a test checks it agrees with the engine's types).
static DENSE_SIZES: [u32; 0x100] = dense_sizes();

const fn dense_sizes() -> [u32; 0x100] {
    let mut t = [NOT_DENSE; 0x100];
    let mut i = 0;
    while i < abi::PREDEFINED_TYPES.len() {
        let (h, _, size, _) = abi::PREDEFINED_TYPES[i];
        // A pair type is dense only if its one block fills its extent.
        let mut dense = true;
        let mut j = 0;
        while j < abi::PAIR_TYPES.len() {
            let (ph, blocks, extent) = abi::PAIR_TYPES[j];
            if ph == h {
                dense = blocks.len() == 1 && blocks[0].0 == 0 && blocks[0].1 as isize == extent;
            }
            j += 1;
        }
        if dense {
            t[h - 0x200] = size as u32;
        }
        i += 1;
    }
    t
}

/// A datatype found from its handle.
#[derive(Debug, Clone)]
pub enum TypeRef {
    Static(&'static TypeInfo),
    Shared(Arc<TypeInfo>),
}

impl Deref for TypeRef {
    type Target = TypeInfo;
    #[inline]
    fn deref(&self) -> &TypeInfo {
        match self {
            TypeRef::Static(t) => t,
            TypeRef::Shared(t) => t,
        }
    }
}

static TYPES: Table<Arc<TypeInfo>> = Table::new(KIND_TYPE);

/// The datatype of a handle (committed or not).
pub fn type_any(t: Datatype) -> Res<TypeRef> {
    if let Some(i) = t.0.checked_sub(0x200).filter(|&i| i < 0x100) {
        if let Some(Some(ti)) = predefined_table().get(i) {
            return Ok(TypeRef::Static(ti));
        }
        let what = if t == abi::DATATYPE_NULL {
            "MPI_DATATYPE_NULL"
        } else {
            "an unknown predefined handle"
        };
        return err(
            abi::ERR_TYPE,
            format!("{what} ({:#x}) is not a datatype", t.0),
        );
    }
    TYPES.get(t.0).map(TypeRef::Shared).map_err(|_| {
        MpiError::new(
            abi::ERR_TYPE,
            format!(
                "{:#x} is not a datatype (freed, or another kind of handle)",
                t.0
            ),
        )
    })
}

/// A handle of its own to the type of `t` (the same type, not a copy:
/// no attribute callbacks run), for a persistent request whose type the
/// program may free before the request; predefined handles are their own.
/// [`release_held`] drops it.
pub(crate) fn hold(t: Datatype) -> Res<Datatype> {
    match type_any(t)? {
        TypeRef::Static(_) => Ok(t),
        TypeRef::Shared(ti) => TYPES
            .insert(ti)
            .map(Datatype)
            .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many datatypes")),
    }
}

/// Drops a handle made by [`hold`].
pub(crate) fn release_held(t: Datatype) {
    if let Ok(TypeRef::Shared(_)) = type_any(t) {
        let _ = TYPES.remove(t.0);
    }
}

/// The datatype of a handle, which must be committed (for communication).
#[inline]
pub fn type_ref(t: Datatype) -> Res<TypeRef> {
    let ty = type_any(t)?;
    if !ty.is_committed() {
        return err(
            abi::ERR_TYPE,
            format!("datatype {:#x} is not committed (MPI_Type_commit)", t.0),
        );
    }
    Ok(ty)
}

/// Bytes of `count` elements of `size` bytes each; `MPI_ERR_COUNT` if
/// that overflows.
pub fn bytes_of(count: usize, size: usize) -> Res<usize> {
    count
        .checked_mul(size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            MpiError::new(
                abi::ERR_COUNT,
                format!("{count} elements of {size} bytes overflow"),
            )
        })
}

/// A count argument: `MPI_ERR_COUNT` if negative.
pub fn count_arg(count: c_int) -> Res<usize> {
    usize::try_from(count)
        .map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {count}")))
}

// ------------------------------------------------------------ constructors

/// Stores a new type (tagged with its handle, which user reduction
/// functions are given) and writes its handle.
///
/// # Safety
/// `newtype` is valid for a write when not null.
pub(crate) unsafe fn store(t: impl Into<CoreType>, committed: bool, newtype: *mut Datatype) -> Res {
    let p = out(newtype, "newtype")?;
    let t = t.into();
    let h = TYPES
        .insert_with(|h| Arc::new(TypeInfo::new(t.with_handle(h), false, committed, "")))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many datatypes"))?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(Datatype(h)) };
    Ok(())
}

/// Stores a type that behaves as a predefined one (committed, never
/// freed or renamed: the Fortran kind types) and returns its handle.
pub(crate) fn store_fixed(t: CoreType) -> Res<Datatype> {
    TYPES
        .insert_with(|h| Arc::new(TypeInfo::new(t.with_handle(h), true, true, "")))
        .map(Datatype)
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many datatypes"))
}

/// `n` values from C.
///
/// # Safety
/// `p` is valid for `n` values when not null.
pub(crate) unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> Res<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return err(abi::ERR_ARG, format!("{what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn blocklen(b: c_int) -> Res<usize> {
    usize::try_from(b)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative block length {b}")))
}

fn blocklens(bs: &[c_int]) -> Res<Vec<usize>> {
    bs.iter().map(|&b| blocklen(b)).collect()
}

fn element_displacements(ds: &[c_int]) -> Vec<isize> {
    ds.iter().map(|&d| d as isize).collect()
}

mpi_fn! {
    /// Bytes of data in one element.
    fn MPI_Type_size / PMPI_Type_size(datatype: Datatype, size: *mut c_int) -> c_int {
        api_active("MPI_Type_size", || {
            let t = type_any(datatype)?;
            let v = c_int::try_from(t.size).unwrap_or(abi::UNDEFINED);
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", v) }
        })
    }

    /// Bytes of data in one element, as `MPI_Count`.
    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: Datatype, size: *mut Count) -> c_int {
        api_active("MPI_Type_size_x", || {
            let t = type_any(datatype)?;
            // SAFETY: the caller's pointer.
            unsafe { put(size, "size", t.size as Count) }
        })
    }

    /// Bytes of data in one element, as `MPI_Count`.
    fn MPI_Type_size_c / PMPI_Type_size_c(datatype: Datatype, size: *mut Count) -> c_int {
        api_active("MPI_Type_size_c", || {
            let t = type_any(datatype)?;
            // SAFETY: the caller's pointer.
            unsafe { put(size, "size", t.size as Count) }
        })
    }

    /// Lower bound and extent.
    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype: Datatype, lb: *mut Aint, extent: *mut Aint) -> c_int {
        api_active("MPI_Type_get_extent", || {
            let t = type_any(datatype)?;
            out(extent, "extent")?;
            // SAFETY: the caller's pointers.
            unsafe {
                put(lb, "lb", t.ty.lower_bound())?;
                put(extent, "extent", t.extent())
            }
        })
    }

    /// Lower bound and extent, as `MPI_Count`.
    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        unsafe { extent_count("MPI_Type_get_extent_x", datatype, false, lb, extent) }
    }

    /// Lower bound and extent, as `MPI_Count`.
    fn MPI_Type_get_extent_c / PMPI_Type_get_extent_c(datatype: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        unsafe { extent_count("MPI_Type_get_extent_c", datatype, false, lb, extent) }
    }

    /// Bounds of the data itself (without resizing or padding).
    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(datatype: Datatype, lb: *mut Aint, extent: *mut Aint) -> c_int {
        api_active("MPI_Type_get_true_extent", || {
            let t = type_any(datatype)?;
            out(extent, "true_extent")?;
            // SAFETY: the caller's pointers.
            unsafe {
                put(lb, "true_lb", t.ty.true_lower_bound())?;
                put(extent, "true_extent", t.ty.true_extent())
            }
        })
    }

    /// Bounds of the data itself, as `MPI_Count`.
    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        unsafe { extent_count("MPI_Type_get_true_extent_x", datatype, true, lb, extent) }
    }

    /// Bounds of the data itself, as `MPI_Count`.
    fn MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(datatype: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        unsafe { extent_count("MPI_Type_get_true_extent_c", datatype, true, lb, extent) }
    }

    /// `count` elements of `oldtype`, one after the other.
    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_contiguous", || {
            let n = count_arg(count)?;
            let t = UserDatatype::contiguous(n, &type_any(oldtype)?.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// `count` blocks of `blocklength` elements, `stride` elements apart.
    fn MPI_Type_vector / PMPI_Type_vector(
        count: c_int,
        blocklength: c_int,
        stride: c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_vector", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            let t = UserDatatype::vector(n, bl, stride as isize, &type_any(oldtype)?.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// `count` blocks of `blocklength` elements, `stride` bytes apart.
    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(
        count: c_int,
        blocklength: c_int,
        stride: Aint,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_hvector", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            let t = UserDatatype::heterogeneous_vector(n, bl, stride, &type_any(oldtype)?.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// Blocks of given lengths at given displacements (in elements).
    fn MPI_Type_indexed / PMPI_Type_indexed(
        count: c_int,
        blocklengths: *const c_int,
        displacements: *const c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_indexed", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(blocklengths, n, "blocklengths")?, array(displacements, n, "displacements")?) };
            let old = type_any(oldtype)?;
            let t = UserDatatype::indexed(&blocklens(bls)?, &element_displacements(ds), &old.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// Blocks of given lengths at given byte displacements.
    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(
        count: c_int,
        blocklengths: *const c_int,
        displacements: *const Aint,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_hindexed", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(blocklengths, n, "blocklengths")?, array(displacements, n, "displacements")?) };
            let old = type_any(oldtype)?;
            let t = UserDatatype::heterogeneous_indexed(&blocklens(bls)?, ds, &old.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// Blocks of one length at given displacements (in elements).
    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(
        count: c_int,
        blocklength: c_int,
        displacements: *const c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_indexed_block", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(displacements, n, "displacements") }?;
            let t = UserDatatype::indexed_block(bl, &element_displacements(ds), &type_any(oldtype)?.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// Blocks of one length at given byte displacements.
    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(
        count: c_int,
        blocklength: c_int,
        displacements: *const Aint,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_hindexed_block", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(displacements, n, "displacements") }?;
            let t = UserDatatype::heterogeneous_indexed_block(bl, ds, &type_any(oldtype)?.ty)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// Blocks of different types at byte displacements; the extent is
    /// padded to the most aligned member's alignment.
    fn MPI_Type_create_struct / PMPI_Type_create_struct(
        count: c_int,
        blocklengths: *const c_int,
        displacements: *const Aint,
        types: *const Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_struct", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds, ts) = unsafe {
                (
                    array(blocklengths, n, "blocklengths")?,
                    array(displacements, n, "displacements")?,
                    array(types, n, "types")?,
                )
            };
            let types = ts.iter().map(|&t| Ok(type_any(t)?.ty.clone())).collect::<Res<Vec<_>>>()?;
            let t = UserDatatype::structured(&blocklens(bls)?, ds, &types)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// `oldtype` with another lower bound and extent.
    fn MPI_Type_create_resized / PMPI_Type_create_resized(
        oldtype: Datatype,
        lb: Aint,
        extent: Aint,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_resized", || {
            let t = UserDatatype::resized(&type_any(oldtype)?.ty, lb, extent)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, false, newtype) }
        })
    }

    /// A copy of a type (committed if the original is).
    fn MPI_Type_dup / PMPI_Type_dup(oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_dup", || {
            let old = type_any(oldtype)?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(UserDatatype::dup(&old.ty), old.is_committed(), newtype) }?;
            // SAFETY: written just now.
            let h = unsafe { newtype.read() };
            let new = type_any(h)?;
            if let Err(e) = old.attrs.copy_into(Kind::Type, oldtype.0, &new.attrs) {
                let _ = new.attrs.delete_all(Kind::Type, h.0);
                let _ = TYPES.remove(h.0);
                // SAFETY: the caller's handle pointer.
                unsafe { newtype.write(abi::DATATYPE_NULL) };
                return Err(e.into());
            }
            Ok(())
        })
    }

    /// Makes a type usable in communication.
    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut Datatype) -> c_int {
        api_active("MPI_Type_commit", || {
            let p = out(datatype, "datatype")?;
            // SAFETY: checked non-null; the caller's handle.
            let t = type_any(unsafe { p.read() })?;
            // Relaxed: see `is_committed`.
            t.committed.store(true, Ordering::Relaxed);
            Ok(())
        })
    }

    /// Frees a derived type; `*datatype` becomes `MPI_DATATYPE_NULL`.
    /// Types built from it and pending operations keep their copy.
    fn MPI_Type_free / PMPI_Type_free(datatype: *mut Datatype) -> c_int {
        api_active("MPI_Type_free", || {
            let p = out(datatype, "datatype")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            let t = type_any(h)?;
            if t.predefined {
                return err(abi::ERR_TYPE, "a predefined datatype cannot be freed");
            }
            t.attrs.delete_all(Kind::Type, h.0)?;
            TYPES.remove(h.0).map_err(|_| MpiError::new(abi::ERR_TYPE, "datatype in use"))?;
            // SAFETY: as above.
            unsafe { p.write(abi::DATATYPE_NULL) };
            Ok(())
        })
    }

    /// A type's name (`MPI_INT`, …, or what `MPI_Type_set_name` gave).
    fn MPI_Type_get_name / PMPI_Type_get_name(datatype: Datatype, name: *mut c_char, len: *mut c_int) -> c_int {
        api_active("MPI_Type_get_name", || {
            let t = type_any(datatype)?;
            // SAFETY: MPI requires MPI_MAX_OBJECT_NAME bytes at `name`.
            unsafe { put_string(name, abi::MAX_OBJECT_NAME, len, &t.name()) }
        })
    }

    /// Names a derived type.
    fn MPI_Type_set_name / PMPI_Type_set_name(datatype: Datatype, name: *const c_char) -> c_int {
        api_active("MPI_Type_set_name", || {
            let t = type_any(datatype)?;
            if t.predefined {
                return err(abi::ERR_TYPE, "a predefined datatype cannot be renamed");
            }
            if name.is_null() {
                return err(abi::ERR_ARG, "the name is a null pointer");
            }
            // SAFETY: a NUL-terminated string from the caller.
            let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            let mut end = s.len().min(abi::MAX_OBJECT_NAME - 1);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            *t.name.lock().unwrap_or_else(|p| p.into_inner()) = s[..end].to_owned();
            Ok(())
        })
    }

    /// Packs `incount` elements into `outbuf` at `*position`.
    fn MPI_Pack / PMPI_Pack(
        inbuf: *const c_void,
        incount: c_int,
        datatype: Datatype,
        outbuf: *mut c_void,
        outsize: c_int,
        position: *mut c_int,
        comm: crate::abi::Comm,
    ) -> c_int {
        api_active("MPI_Pack", || {
            let c = comm_ref(comm)?;
            let go = || -> Res {
                let n = count_arg(incount)?;
                let t = type_ref(datatype)?;
                t.check_buffer(inbuf, n)?;
                let pos = out(position, "position")?;
                // SAFETY: checked non-null.
                let at = unsafe { pos.read() };
                let bytes = t.bytes(n)?;
                let (Ok(at), Ok(size)) = (usize::try_from(at), usize::try_from(outsize)) else {
                    return err(abi::ERR_ARG, "negative position or outsize");
                };
                if at.checked_add(bytes).is_none_or(|end| end > size) {
                    return err(abi::ERR_TRUNCATE, format!("{bytes} bytes do not fit at {at} in {size}"));
                }
                if bytes > 0 {
                    out(outbuf, "outbuf")?;
                    // SAFETY: `outbuf` holds `outsize` bytes (MPI's
                    // contract) and [at, at + bytes) is inside; the input
                    // holds `incount` elements.
                    unsafe {
                        let dst = std::slice::from_raw_parts_mut(outbuf.cast::<u8>().add(at), bytes);
                        t.pack(inbuf.cast(), n, dst);
                    }
                }
                // SAFETY: checked non-null.
                unsafe { pos.write((at + bytes) as c_int) };
                Ok(())
            };
            go().map_err(|e| e.on(&c))
        })
    }

    /// Unpacks `outcount` elements from `inbuf` at `*position`.
    fn MPI_Unpack / PMPI_Unpack(
        inbuf: *const c_void,
        insize: c_int,
        position: *mut c_int,
        outbuf: *mut c_void,
        outcount: c_int,
        datatype: Datatype,
        comm: crate::abi::Comm,
    ) -> c_int {
        api_active("MPI_Unpack", || {
            let c = comm_ref(comm)?;
            let go = || -> Res {
                let n = count_arg(outcount)?;
                let t = type_ref(datatype)?;
                t.check_buffer(outbuf, n)?;
                let pos = out(position, "position")?;
                // SAFETY: checked non-null.
                let at = unsafe { pos.read() };
                let bytes = t.bytes(n)?;
                let (Ok(at), Ok(size)) = (usize::try_from(at), usize::try_from(insize)) else {
                    return err(abi::ERR_ARG, "negative position or insize");
                };
                if at.checked_add(bytes).is_none_or(|end| end > size) {
                    return err(abi::ERR_TRUNCATE, format!("{bytes} bytes are not there at {at} of {size}"));
                }
                if bytes > 0 {
                    if inbuf.is_null() {
                        return err(abi::ERR_ARG, "inbuf is a null pointer");
                    }
                    // SAFETY: `inbuf` holds `insize` bytes (MPI's
                    // contract); the output holds `outcount` elements.
                    unsafe {
                        let src = std::slice::from_raw_parts(inbuf.cast::<u8>().add(at), bytes);
                        t.unpack(src, outbuf.cast(), n);
                    }
                }
                // SAFETY: checked non-null.
                unsafe { pos.write((at + bytes) as c_int) };
                Ok(())
            };
            go().map_err(|e| e.on(&c))
        })
    }

    /// Bytes `MPI_Pack` needs for `incount` elements.
    fn MPI_Pack_size / PMPI_Pack_size(incount: c_int, datatype: Datatype, comm: crate::abi::Comm, size: *mut c_int) -> c_int {
        api_active("MPI_Pack_size", || {
            comm_ref(comm)?;
            let n = count_arg(incount)?;
            let b = type_any(datatype)?.bytes(n)?;
            let v = c_int::try_from(b).map_err(|_| MpiError::new(abi::ERR_COUNT, "more than INT_MAX bytes"))?;
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", v) }
        })
    }

    /// The address of a location, for displacements.
    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut Aint) -> c_int {
        api_active("MPI_Get_address", || {
            // SAFETY: the caller's pointer.
            unsafe { put(address, "address", location as Aint) }
        })
    }
}

/// `base + disp`.
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    base.wrapping_add(disp)
}

/// `base + disp`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    base.wrapping_add(disp)
}

/// `addr1 - addr2`.
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(addr1: Aint, addr2: Aint) -> Aint {
    addr1.wrapping_sub(addr2)
}

/// `addr1 - addr2`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(addr1: Aint, addr2: Aint) -> Aint {
    addr1.wrapping_sub(addr2)
}

/// The lower bound and extent of `datatype` (its true ones if `true_`) as
/// `MPI_Count`, for the `_x` and `_c` routines named `func`.
///
/// # Safety
/// `lb` and `extent`, if not null, are valid for writes.
unsafe fn extent_count(
    func: &'static str,
    datatype: Datatype,
    true_: bool,
    lb: *mut Count,
    extent: *mut Count,
) -> c_int {
    api_active(func, || {
        let t = type_any(datatype)?;
        let (names, l, e) = if true_ {
            (
                ("true_lb", "true_extent"),
                t.ty.true_lower_bound(),
                t.ty.true_extent(),
            )
        } else {
            (("lb", "extent"), t.ty.lower_bound(), t.extent())
        };
        out(extent, names.1)?;
        // SAFETY: the caller's pointers.
        unsafe {
            put(lb, names.0, l as Count)?;
            put(extent, names.1, e as Count)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: usize) -> TypeRef {
        type_any(Datatype(h)).unwrap()
    }

    #[test]
    fn dense_sizes_agree_with_the_type_table() {
        for h in 0..0x400usize {
            let from_table = predefined_table()
                .get(h.wrapping_sub(0x200))
                .and_then(|t| t.as_ref())
                .and_then(|ti| (ti.dense_offset() == Some(0)).then_some(ti.size));
            assert_eq!(
                dense_predefined_size(Datatype(h)),
                from_table,
                "handle {h:#x}"
            );
        }
        assert_eq!(dense_predefined_size(Datatype(0x209)), Some(4)); // MPI_INT
        assert_eq!(dense_predefined_size(Datatype(0x229)), None); // MPI_DOUBLE_INT
    }

    #[test]
    fn engine_types_agree_with_the_abi_tables() {
        assert_eq!(PREDEFINED_KINDS.len(), abi::PREDEFINED_TYPES.len());
        for &(h, name, size, align) in abi::PREDEFINED_TYPES {
            let ti = t(h);
            assert_eq!(ti.name(), name);
            assert_eq!((ti.size, ti.ty.alignment()), (size, align), "{name}");
            assert_eq!(ti.ty.handle(), Some(h), "{name}");
            let (blocks, extent) = match abi::PAIR_TYPES.iter().find(|p| p.0 == h) {
                Some(&(_, b, e)) => (b.to_vec(), e),
                None => (vec![(0, size)], size as isize),
            };
            assert_eq!(
                (ti.ty.blocks(), ti.extent()),
                (&blocks[..], extent),
                "{name}"
            );
        }
    }

    #[test]
    fn predefined_sizes_and_pairs() {
        assert_eq!(t(0x209).size, 4); // MPI_INT
        assert_eq!(t(0x214).extent(), 8); // MPI_DOUBLE
        assert_eq!(t(0x229).size, 12); // MPI_DOUBLE_INT
        assert_eq!(t(0x229).extent(), 16);
        assert_eq!(t(0x22c).ty.blocks(), &[(0, 2), (4, 4)]); // MPI_SHORT_INT
        assert!(t(0x22c).dense_offset().is_none());
        assert_eq!(t(0x209).dense_offset(), Some(0));
        assert_eq!(
            type_any(abi::DATATYPE_NULL).unwrap_err().class,
            abi::ERR_TYPE
        );
        assert_eq!(type_any(Datatype(0x211)).unwrap_err().class, abi::ERR_TYPE);
    }

    /// The runtime, started once for the tests of this binary (a world
    /// of one rank): the entry points are allowed only after `MPI_Init`.
    fn initialized() {
        static UNIVERSE: std::sync::OnceLock<hmpi_core::Universe> = std::sync::OnceLock::new();
        UNIVERSE.get_or_init(|| hmpi_core::init().expect("a world of one rank"));
    }

    /// A derived type through the entry point, as C makes it.
    fn make(f: impl FnOnce(*mut Datatype) -> c_int) -> TypeRef {
        initialized();
        let mut h = abi::DATATYPE_NULL;
        assert_eq!(f(&mut h), abi::SUCCESS);
        t(h.0)
    }

    #[test]
    fn vector_map_bounds_and_packing() {
        // SAFETY: a valid handle pointer.
        let v = make(|p| unsafe { MPI_Type_vector(3, 2, 5, Datatype(0x209), p) });
        assert_eq!(v.ty.blocks(), &[(0, 8), (20, 8), (40, 8)]);
        assert_eq!(
            (v.size, v.ty.lower_bound(), v.ty.upper_bound()),
            (24, 0, 48)
        );
        assert!(!v.is_committed());
        assert_eq!(
            v.ty.handle().map(|h| type_any(Datatype(h)).is_ok()),
            Some(true)
        );
        let src: Vec<i32> = (0..15).collect();
        let mut packed = vec![0u8; 24];
        // SAFETY: src holds the 12 ints of the type map's reach.
        unsafe { v.pack(src.as_ptr().cast(), 1, &mut packed) };
        let ints: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ints, vec![0, 1, 5, 6, 10, 11]);
        let mut dst = vec![-1i32; 15];
        // Unpack only 10 bytes: two ints and half of the third.
        // SAFETY: dst holds the type map's reach.
        unsafe { v.unpack(&packed[..10], dst.as_mut_ptr().cast(), 1) };
        assert_eq!(&dst[..2], &[0, 1]);
        assert_eq!(dst[5].to_ne_bytes()[..2], 5i32.to_ne_bytes()[..2]);
        assert_eq!(dst[6], -1);
    }

    #[test]
    fn struct_extent_is_padded_and_negative_strides_work() {
        let (bl, ds, ts) = (
            [1, 1, 1],
            [0isize, 8, 16],
            [0x209, 0x214, 0x243].map(Datatype),
        );
        // SAFETY: three entries each; a valid handle pointer.
        let s = make(|p| unsafe {
            MPI_Type_create_struct(3, bl.as_ptr(), ds.as_ptr(), ts.as_ptr(), p)
        });
        assert_eq!(
            (s.size, s.ty.lower_bound(), s.ty.upper_bound()),
            (13, 0, 24)
        );
        assert_eq!(s.ty.blocks(), &[(0, 4), (8, 9)]);
        // hvector(2, 1, -8, DOUBLE): elements at 0 and -8.
        // SAFETY: a valid handle pointer.
        let h = make(|p| unsafe { MPI_Type_create_hvector(2, 1, -8, Datatype(0x214), p) });
        assert_eq!(
            (h.ty.lower_bound(), h.ty.upper_bound(), h.extent()),
            (-8, 8, 16)
        );
        assert_eq!(h.ty.blocks(), &[(0, 8), (-8, 8)]);
        // Contiguous of a gapless type merges into one block.
        // SAFETY: a valid handle pointer.
        let c = make(|p| unsafe { MPI_Type_contiguous(1000, Datatype(0x209), p) });
        assert_eq!(c.ty.blocks(), &[(0, 4000)]);
        // A dup of a committed type is committed, a resized one is not.
        // SAFETY: valid handle pointers.
        let d = make(|p| unsafe { MPI_Type_dup(Datatype(0x209), p) });
        assert!(d.is_committed() && !d.predefined);
        // SAFETY: a valid handle pointer.
        let r = make(|p| unsafe { MPI_Type_create_resized(Datatype(0x209), -4, 16, p) });
        assert!(!r.is_committed());
        assert_eq!((r.ty.lower_bound(), r.extent()), (-4, 16));
    }

    #[test]
    fn null_buffers_and_overflows_are_errors() {
        let int = t(0x209);
        assert_eq!(
            int.check_buffer(std::ptr::null(), 3).unwrap_err().class,
            abi::ERR_BUFFER
        );
        assert!(int.check_buffer(std::ptr::null(), 0).is_ok());
        assert_eq!(int.bytes(usize::MAX / 2).unwrap_err().class, abi::ERR_COUNT);
        // (Through the entry points an error would call the error handler,
        // fatal before MPI_Init; the classes come from the engine's errors.)
        let e = UserDatatype::heterogeneous_vector(2, 2, isize::MAX - 2, &int.ty).unwrap_err();
        assert_eq!(MpiError::from(e).class, abi::ERR_ARG);
        let e = UserDatatype::vector(1 << 30, 1, 2, &t(0x22c).ty).unwrap_err();
        assert_eq!(MpiError::from(e).class, abi::ERR_TYPE);
    }
}
