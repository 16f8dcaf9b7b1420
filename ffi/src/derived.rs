//! The datatype routines beyond the basic constructors: subarrays and
//! distributed arrays (`MPI_Type_create_subarray`, `_darray`), the
//! large-count constructors (`MPI_Type_contiguous_c`, …), decoding
//! (`MPI_Type_get_envelope`, `MPI_Type_get_contents`), the predefined
//! types chosen by size or Fortran kind (`MPI_Type_match_size`,
//! `MPI_Type_create_f90_*`, `MPI_Type_get_value_index`) and the
//! `"external32"` representation (`MPI_Pack_external`, …). The semantics
//! are `hmpi_core::datatype`'s ([`contents`](hmpi_core::datatype::contents),
//! [`external`](hmpi_core::datatype::external)); this module converts the
//! C arguments and handles.
//!
//! * A type made by a `_c` constructor gives its counts as large counts:
//!   `MPI_Type_get_envelope` and `MPI_Type_get_contents` (the `int` forms)
//!   refuse it with `MPI_ERR_TYPE`; the `_c` forms decode every type.
//! * `MPI_Type_get_contents` returns predefined types (and the Fortran
//!   kind types) as their own handles, and every derived type it was
//!   built from as a new handle, which the program frees.
//! * `MPI_Type_create_f90_*` returns one handle per kind and arguments
//!   (created on first use, never freed, like a predefined type);
//!   `MPI_Type_match_size` returns the Fortran sized types
//!   (`MPI_INTEGER4`, `MPI_REAL8`, `MPI_COMPLEX16`, …);
//!   `MPI_Type_get_value_index` the predefined pair type of a value and
//!   an index type, or `MPI_DATATYPE_NULL` if there is none.
//! * The only data representation is `"external32"`; any other is
//!   `MPI_ERR_ARG`.
//!
//! In C:
//! ```c
//! int sizes[2] = {6, 8}, sub[2] = {4, 1}, starts[2] = {1, 0};
//! MPI_Datatype halo;                      // column 0, rows 1-4, of 6x8
//! MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &halo);
//! MPI_Type_commit(&halo);
//! ```

use crate::abi::{self, Aint, Count, Datatype};
use crate::datatype::{array, store, store_fixed, type_any, type_ref, TypeRef};
use crate::errors::{api_active, err, out, MpiError, Res};
use hmpi_core::datatype::{
    contents::codes, match_size, BasicType, Combiner, Datatype as CoreType, Distribution, Order,
    TypeClass, UserDatatype,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

/// `MPI_TYPECLASS_INTEGER`, `_REAL`, `_COMPLEX`.
const TYPECLASS_INTEGER: c_int = 192;
const TYPECLASS_REAL: c_int = 193;
const TYPECLASS_COMPLEX: c_int = 194;

/// The `MPI_COMBINER_*` value of a combiner.
pub fn combiner_code(c: Combiner) -> c_int {
    match c {
        Combiner::Named => 101,
        Combiner::Dup => 102,
        Combiner::Contiguous => 103,
        Combiner::Vector => 104,
        Combiner::Hvector => 105,
        Combiner::Indexed => 106,
        Combiner::Hindexed => 107,
        Combiner::IndexedBlock => 108,
        Combiner::HindexedBlock => 109,
        Combiner::Struct => 110,
        Combiner::Subarray => 111,
        Combiner::Darray => 112,
        Combiner::F90Real => 113,
        Combiner::F90Complex => 114,
        Combiner::F90Integer => 115,
        Combiner::Resized => 116,
        // A combiner added to the engine later: none of the standard's.
        _ => abi::UNDEFINED,
    }
}

/// A non-negative argument (`MPI_ERR_ARG` otherwise).
fn nonneg(v: i64, what: &str) -> Res<usize> {
    usize::try_from(v).map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative {what} {v}")))
}

/// A count argument (`MPI_ERR_COUNT` if negative).
fn count(v: i64) -> Res<usize> {
    usize::try_from(v).map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {v}")))
}

/// A displacement or stride.
fn signed(v: i64, what: &str) -> Res<isize> {
    isize::try_from(v)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("{what} {v} overflows an address")))
}

fn nonnegs<T: Copy + Into<i64>>(v: &[T], what: &str) -> Res<Vec<usize>> {
    v.iter().map(|&x| nonneg(x.into(), what)).collect()
}

fn signeds<T: Copy + Into<i64>>(v: &[T], what: &str) -> Res<Vec<isize>> {
    v.iter().map(|&x| signed(x.into(), what)).collect()
}

fn order_arg(order: c_int) -> Res<Order> {
    Order::from_code(i64::from(order)).ok_or_else(|| {
        MpiError::new(
            abi::ERR_ARG,
            format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )
    })
}

/// The type of a handle, as a constructor's old type.
fn old(t: Datatype) -> Res<CoreType> {
    Ok(type_any(t)?.ty.clone())
}

/// Subarray of `ndims` dimensions whose arrays hold `T`s.
///
/// # Safety
/// The arrays hold `ndims` values each (MPI's contract); `newtype` is
/// valid for a write.
#[allow(clippy::too_many_arguments)]
unsafe fn subarray<T: Copy + Into<i64>>(
    ndims: c_int,
    sizes: *const T,
    subsizes: *const T,
    starts: *const T,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
    large: bool,
) -> Res {
    let nd = nonneg(ndims.into(), "ndims")?;
    // SAFETY: the caller's guarantee.
    let (s, ss, st) = unsafe {
        (
            array(sizes, nd, "array_of_sizes")?,
            array(subsizes, nd, "array_of_subsizes")?,
            array(starts, nd, "array_of_starts")?,
        )
    };
    let mut t = UserDatatype::subarray(
        &nonnegs(s, "size")?,
        &nonnegs(ss, "subsize")?,
        &nonnegs(st, "start")?,
        order_arg(order)?,
        &old(oldtype)?,
    )?;
    if large {
        t = t.with_large_counts();
    }
    // SAFETY: the caller's handle pointer.
    unsafe { store(t, false, newtype) }
}

/// Darray whose global sizes are `T`s.
///
/// # Safety
/// The arrays hold `ndims` values each (MPI's contract); `newtype` is
/// valid for a write.
#[allow(clippy::too_many_arguments)]
unsafe fn darray<T: Copy + Into<i64>>(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const T,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: Datatype,
    newtype: *mut Datatype,
    large: bool,
) -> Res {
    let nd = nonneg(ndims.into(), "ndims")?;
    // SAFETY: the caller's guarantee.
    let (g, dist, da, p) = unsafe {
        (
            array(gsizes, nd, "array_of_gsizes")?,
            array(distribs, nd, "array_of_distribs")?,
            array(dargs, nd, "array_of_dargs")?,
            array(psizes, nd, "array_of_psizes")?,
        )
    };
    let distribs = dist
        .iter()
        .map(|&d| {
            Distribution::from_code(i64::from(d)).ok_or_else(|| {
                MpiError::new(abi::ERR_ARG, format!("{d} is not an MPI_DISTRIBUTE_ value"))
            })
        })
        .collect::<Res<Vec<_>>>()?;
    let dargs = da
        .iter()
        .map(|&d| {
            if i64::from(d) == codes::DISTRIBUTE_DFLT_DARG {
                Ok(None)
            } else {
                nonneg(d.into(), "distribution argument").map(Some)
            }
        })
        .collect::<Res<Vec<_>>>()?;
    let mut t = UserDatatype::darray(
        nonneg(size.into(), "size")?,
        nonneg(rank.into(), "rank")?,
        &nonnegs(g, "global size")?,
        &distribs,
        &dargs,
        &nonnegs(p, "process count")?,
        order_arg(order)?,
        &old(oldtype)?,
    )?;
    if large {
        t = t.with_large_counts();
    }
    // SAFETY: the caller's handle pointer.
    unsafe { store(t, false, newtype) }
}

/// Stores a type made by a `_c` constructor.
///
/// # Safety
/// `newtype` is valid for a write when not null.
unsafe fn store_large(t: hmpi_core::Result<UserDatatype>, newtype: *mut Datatype) -> Res {
    // SAFETY: the caller's guarantee.
    unsafe { store(t?.with_large_counts(), false, newtype) }
}

/// The handle under which `get_contents` returns a type a type was built
/// from: a predefined or Fortran kind type is its own handle; a derived
/// type is a new handle (committed if the handle it was made under is).
fn constituent(t: &CoreType) -> Res<Datatype> {
    let own = t.handle().map(Datatype);
    let live = own.and_then(|h| type_any(h).ok().map(|r| (h, r)));
    let named = t.predefined().is_some()
        || matches!(
            t.combiner(),
            Combiner::F90Integer | Combiner::F90Real | Combiner::F90Complex
        );
    match live {
        Some((h, r)) if named && r.ty.ptr_eq(t) => Ok(h),
        _ => {
            let committed = live.is_some_and(|(_, r)| r.ty.ptr_eq(t) && r.is_committed());
            let mut h = abi::DATATYPE_NULL;
            // SAFETY: a local handle.
            unsafe { store(t.clone(), committed, &mut h) }?;
            Ok(h)
        }
    }
}

/// The envelope of a type for the `int` form (`large`: the `_c` form).
fn envelope(datatype: Datatype, large: bool) -> Res<(TypeRef, hmpi_core::datatype::Envelope)> {
    let t = type_any(datatype)?;
    let e = t.ty.envelope();
    if !large && e.large_counts > 0 {
        return err(
            abi::ERR_TYPE,
            "the datatype was made with large counts: use the _c form",
        );
    }
    Ok((t, e))
}

/// Writes `v` into the C array `p` of capacity `max`.
///
/// # Safety
/// `p` holds `max` values when `v` is not empty.
unsafe fn fill<T: Copy>(p: *mut T, max: i64, v: &[T], what: &str) -> Res {
    if (max as i128) < v.len() as i128 {
        return err(
            abi::ERR_ARG,
            format!("{what}: room for {max}, the datatype has {}", v.len()),
        );
    }
    if v.is_empty() {
        return Ok(());
    }
    let p = out(p, what)?;
    // SAFETY: `p` holds at least `v.len()` values (checked above against
    // the caller's capacity).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

/// The contents of `datatype` into the C arrays.
///
/// # Safety
/// Each array holds its `max_*` values.
#[allow(clippy::too_many_arguments)]
unsafe fn contents(
    datatype: Datatype,
    large: bool,
    max: [i64; 4],
    integers: *mut c_int,
    addresses: *mut Aint,
    large_counts: *mut Count,
    datatypes: *mut Datatype,
) -> Res {
    let (t, _) = envelope(datatype, large)?;
    let c = t.ty.contents()?;
    let ints = c
        .integers
        .iter()
        .map(|&v| {
            c_int::try_from(v)
                .map_err(|_| MpiError::new(abi::ERR_TYPE, format!("{v} does not fit an int")))
        })
        .collect::<Res<Vec<_>>>()?;
    if (max[3] as i128) < c.datatypes.len() as i128 {
        return err(
            abi::ERR_ARG,
            format!(
                "array_of_datatypes: room for {}, the datatype has {}",
                max[3],
                c.datatypes.len()
            ),
        );
    }
    // SAFETY: the caller's guarantee for each array.
    unsafe {
        fill(integers, max[0], &ints, "array_of_integers")?;
        fill(addresses, max[1], &c.addresses, "array_of_addresses")?;
        fill(
            large_counts,
            max[2],
            &c.large_counts,
            "array_of_large_counts",
        )?;
    }
    let mut hs = Vec::with_capacity(c.datatypes.len());
    for d in &c.datatypes {
        match constituent(d) {
            Ok(h) => hs.push(h),
            Err(e) => {
                // Nothing half done: the handles made so far go.
                for h in hs {
                    if let Ok(r) = type_any(h) {
                        if !r.predefined {
                            let mut h = h;
                            // SAFETY: a local handle.
                            let _ = unsafe { crate::datatype::PMPI_Type_free(&mut h) };
                        }
                    }
                }
                return Err(e);
            }
        }
    }
    // SAFETY: checked capacity; the caller's array.
    unsafe { fill(datatypes, max[3], &hs, "array_of_datatypes") }
}

/// What a Fortran kind type is made from: its combiner, `p` and `r`.
type F90Key = (Combiner, i32, i32);

/// The Fortran kind types made so far, and their handles.
static F90: Mutex<Vec<(F90Key, Datatype)>> = Mutex::new(Vec::new());

/// The handle of a Fortran kind type, made on first use.
///
/// # Safety
/// `newtype` is valid for a write when not null.
unsafe fn f90(
    key: F90Key,
    make: impl FnOnce() -> hmpi_core::Result<UserDatatype>,
    newtype: *mut Datatype,
) -> Res {
    let p = out(newtype, "newtype")?;
    let mut cache = F90.lock().unwrap_or_else(|e| e.into_inner());
    let h = match cache.iter().find(|(k, _)| *k == key) {
        Some(&(_, h)) => h,
        None => {
            let h = store_fixed(make()?.into_datatype())?;
            cache.push((key, h));
            h
        }
    };
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(h) };
    Ok(())
}

/// `p` or `r` of the f90 routines: `MPI_UNDEFINED` is none.
fn defined(v: c_int) -> Option<i32> {
    (v != abi::UNDEFINED).then_some(v)
}

/// The Fortran sized type of a basic type (`MPI_Type_match_size`).
fn sized_handle(b: BasicType) -> Option<usize> {
    use BasicType::*;
    Some(match b {
        I8 => 0x2c1,          // MPI_INTEGER1
        I16 => 0x2c9,         // MPI_INTEGER2
        I32 => 0x2d1,         // MPI_INTEGER4
        I64 => 0x2d9,         // MPI_INTEGER8
        I128 => 0x2e1,        // MPI_INTEGER16
        F16 => 0x2ca,         // MPI_REAL2
        F32 => 0x2d2,         // MPI_REAL4
        F64 => 0x2da,         // MPI_REAL8
        F128 => 0x2e2,        // MPI_REAL16
        ComplexF16 => 0x2d3,  // MPI_COMPLEX4
        ComplexF32 => 0x2db,  // MPI_COMPLEX8
        ComplexF64 => 0x2e3,  // MPI_COMPLEX16
        ComplexF128 => 0x2eb, // MPI_COMPLEX32
        _ => return None,
    })
}

/// The predefined pair type of a value and an index type, by handle: the
/// C pairs have an `MPI_INT` index, the Fortran ones an `MPI_INTEGER`.
fn value_index_pair(value: Datatype, index: Datatype) -> Datatype {
    const PAIRS: &[(usize, usize, usize)] = &[
        (0x210, 0x209, 0x228), // MPI_FLOAT, MPI_INT: MPI_FLOAT_INT
        (0x214, 0x209, 0x229), // MPI_DOUBLE_INT
        (0x20a, 0x209, 0x22a), // MPI_LONG_INT
        (0x209, 0x209, 0x22b), // MPI_2INT
        (0x208, 0x209, 0x22c), // MPI_SHORT_INT
        (0x220, 0x209, 0x22d), // MPI_LONG_DOUBLE_INT
        (0x21a, 0x219, 0x230), // MPI_REAL, MPI_INTEGER: MPI_2REAL
        (0x21c, 0x219, 0x231), // MPI_2DOUBLE_PRECISION
        (0x219, 0x219, 0x232), // MPI_2INTEGER
    ];
    PAIRS
        .iter()
        .find(|p| p.0 == value.0 && p.1 == index.0)
        .map_or(abi::DATATYPE_NULL, |p| Datatype(p.2))
}

/// Checks the data representation: only `"external32"`.
///
/// # Safety
/// `datarep` is a NUL-terminated string when not null.
unsafe fn external32(datarep: *const c_char) -> Res {
    if datarep.is_null() {
        return err(abi::ERR_ARG, "datarep is a null pointer");
    }
    // SAFETY: the caller's guarantee.
    let s = unsafe { CStr::from_ptr(datarep) };
    if s.to_bytes() != b"external32" {
        return err(
            abi::ERR_ARG,
            format!(
                "data representation {:?}: only \"external32\" is known",
                s.to_string_lossy()
            ),
        );
    }
    Ok(())
}

/// The common part of `MPI_Pack_external` and `MPI_Unpack_external`:
/// `elements` elements of `datatype` at `user` (the side in the program's
/// layout) against the external32 buffer of `size` bytes at `*position`.
/// Returns the type, the count, the position and the external32 length,
/// once the run `[position, position + length)` is known to lie inside
/// the buffer (`MPI_ERR_TRUNCATE` otherwise).
///
/// # Safety
/// `datarep` is a string and `position` valid when not null.
unsafe fn external_span(
    datarep: *const c_char,
    user: *const c_void,
    elements: i64,
    datatype: Datatype,
    size: i64,
    position: *mut i64,
) -> Res<(TypeRef, usize, usize, usize)> {
    // SAFETY: the caller's string.
    unsafe { external32(datarep) }?;
    let n = count(elements)?;
    let t = type_ref(datatype)?;
    t.check_buffer(user, n)?;
    let pos = out(position, "position")?;
    // SAFETY: checked non-null.
    let at = unsafe { pos.read() };
    let bytes = t.ty.external32_size(n)?;
    let (Ok(at), Ok(size)) = (usize::try_from(at), usize::try_from(size)) else {
        return err(abi::ERR_ARG, "negative position or buffer size");
    };
    if at.checked_add(bytes).is_none_or(|end| end > size) {
        return err(
            abi::ERR_TRUNCATE,
            format!("{bytes} bytes of external32 data do not fit at {at} of {size}"),
        );
    }
    Ok((t, n, at, bytes))
}

/// `MPI_Pack_external` with any integer widths.
///
/// # Safety
/// MPI's contract for the buffers; `position` is valid when not null.
unsafe fn pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    datatype: Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut i64,
) -> Res {
    // SAFETY: the caller's guarantees.
    let (t, n, at, bytes) =
        unsafe { external_span(datarep, inbuf, incount, datatype, outsize, position) }?;
    if bytes > 0 {
        out(outbuf, "outbuf")?;
        // SAFETY: `outbuf` holds `outsize` bytes (MPI's contract) and
        // [at, at + bytes) is inside; the input holds `incount` elements.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(outbuf.cast::<u8>().add(at), bytes);
            t.ty.pack_external_raw(inbuf.cast(), n, dst)?;
        }
    }
    // SAFETY: checked non-null by `external_span`.
    unsafe { position.write((at + bytes) as i64) };
    Ok(())
}

/// `MPI_Unpack_external` with any integer widths.
///
/// # Safety
/// MPI's contract for the buffers; `position` is valid when not null.
unsafe fn unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    position: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: Datatype,
) -> Res {
    // SAFETY: the caller's guarantees.
    let (t, n, at, bytes) =
        unsafe { external_span(datarep, outbuf, outcount, datatype, insize, position) }?;
    if bytes > 0 {
        if inbuf.is_null() {
            return err(abi::ERR_ARG, "inbuf is a null pointer");
        }
        // SAFETY: `inbuf` holds `insize` bytes (MPI's contract); the
        // output holds `outcount` elements.
        unsafe {
            let src = std::slice::from_raw_parts(inbuf.cast::<u8>().add(at), bytes);
            t.ty.unpack_external_raw(src, outbuf.cast(), n)?;
        }
    }
    // SAFETY: checked non-null by `external_span`.
    unsafe { position.write((at + bytes) as i64) };
    Ok(())
}

/// Runs `f` on a 64-bit copy of an `MPI_Aint` position and writes it back.
///
/// # Safety
/// `position` is valid when not null.
unsafe fn with_aint_position(position: *mut Aint, f: impl FnOnce(*mut i64) -> Res) -> Res {
    let p = out(position, "position")?;
    // SAFETY: checked non-null.
    let mut at = unsafe { p.read() } as i64;
    f(&mut at)?;
    // SAFETY: checked non-null.
    unsafe { p.write(at as Aint) };
    Ok(())
}

mpi_fn! {
    /// The part `starts .. starts + subsizes` of an array of `sizes`.
    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(
        ndims: c_int,
        array_of_sizes: *const c_int,
        array_of_subsizes: *const c_int,
        array_of_starts: *const c_int,
        order: c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_subarray", || {
            // SAFETY: MPI's contract for the arrays and the handle pointer.
            unsafe { subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype, false) }
        })
    }

    /// [`MPI_Type_create_subarray`] with large counts.
    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(
        ndims: c_int,
        array_of_sizes: *const Count,
        array_of_subsizes: *const Count,
        array_of_starts: *const Count,
        order: c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_subarray_c", || {
            // SAFETY: MPI's contract for the arrays and the handle pointer.
            unsafe { subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, oldtype, newtype, true) }
        })
    }

    /// Process `rank`'s part of a distributed array.
    fn MPI_Type_create_darray / PMPI_Type_create_darray(
        size: c_int,
        rank: c_int,
        ndims: c_int,
        array_of_gsizes: *const c_int,
        array_of_distribs: *const c_int,
        array_of_dargs: *const c_int,
        array_of_psizes: *const c_int,
        order: c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_darray", || {
            // SAFETY: MPI's contract for the arrays and the handle pointer.
            unsafe { darray(size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes, order, oldtype, newtype, false) }
        })
    }

    /// [`MPI_Type_create_darray`] with large global sizes.
    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(
        size: c_int,
        rank: c_int,
        ndims: c_int,
        array_of_gsizes: *const Count,
        array_of_distribs: *const c_int,
        array_of_dargs: *const c_int,
        array_of_psizes: *const c_int,
        order: c_int,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_darray_c", || {
            // SAFETY: MPI's contract for the arrays and the handle pointer.
            unsafe { darray(size, rank, ndims, array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes, order, oldtype, newtype, true) }
        })
    }

    /// `count` elements of `oldtype` (large count).
    fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count_: Count, oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_contiguous_c", || {
            let t = UserDatatype::contiguous(count(count_)?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// A vector, stride in elements (large counts).
    fn MPI_Type_vector_c / PMPI_Type_vector_c(count_: Count, blocklength: Count, stride: Count, oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_vector_c", || {
            let t = UserDatatype::vector(count(count_)?, nonneg(blocklength, "block length")?, signed(stride, "stride")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// A vector, stride in bytes (large counts).
    fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count_: Count, blocklength: Count, stride: Count, oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_create_hvector_c", || {
            let t = UserDatatype::heterogeneous_vector(count(count_)?, nonneg(blocklength, "block length")?, signed(stride, "stride")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// Blocks at displacements in elements (large counts).
    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(
        count_: Count,
        array_of_blocklengths: *const Count,
        array_of_displacements: *const Count,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_indexed_c", || {
            let n = count(count_)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(array_of_blocklengths, n, "blocklengths")?, array(array_of_displacements, n, "displacements")?) };
            let t = UserDatatype::indexed(&nonnegs(bls, "block length")?, &signeds(ds, "displacement")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// Blocks at displacements in bytes (large counts).
    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(
        count_: Count,
        array_of_blocklengths: *const Count,
        array_of_displacements: *const Count,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_hindexed_c", || {
            let n = count(count_)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(array_of_blocklengths, n, "blocklengths")?, array(array_of_displacements, n, "displacements")?) };
            let t = UserDatatype::heterogeneous_indexed(&nonnegs(bls, "block length")?, &signeds(ds, "displacement")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// Blocks of one length at displacements in elements (large counts).
    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(
        count_: Count,
        blocklength: Count,
        array_of_displacements: *const Count,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_indexed_block_c", || {
            let n = count(count_)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(array_of_displacements, n, "displacements") }?;
            let t = UserDatatype::indexed_block(nonneg(blocklength, "block length")?, &signeds(ds, "displacement")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// Blocks of one length at displacements in bytes (large counts).
    fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(
        count_: Count,
        blocklength: Count,
        array_of_displacements: *const Count,
        oldtype: Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_hindexed_block_c", || {
            let n = count(count_)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(array_of_displacements, n, "displacements") }?;
            let t = UserDatatype::heterogeneous_indexed_block(nonneg(blocklength, "block length")?, &signeds(ds, "displacement")?, &old(oldtype)?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// Blocks of several types at byte displacements (large counts).
    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(
        count_: Count,
        array_of_blocklengths: *const Count,
        array_of_displacements: *const Count,
        array_of_types: *const Datatype,
        newtype: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_create_struct_c", || {
            let n = count(count_)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds, ts) = unsafe {
                (
                    array(array_of_blocklengths, n, "blocklengths")?,
                    array(array_of_displacements, n, "displacements")?,
                    array(array_of_types, n, "types")?,
                )
            };
            let types = ts.iter().map(|&t| old(t)).collect::<Res<Vec<_>>>()?;
            let t = UserDatatype::structured(&nonnegs(bls, "block length")?, &signeds(ds, "displacement")?, &types);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// `oldtype` with another lower bound and extent (large counts).
    fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(oldtype: Datatype, lb: Count, extent: Count, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_create_resized_c", || {
            let t = UserDatatype::resized(&old(oldtype)?, signed(lb, "lb")?, signed(extent, "extent")?);
            // SAFETY: the caller's handle pointer.
            unsafe { store_large(t, newtype) }
        })
    }

    /// How a type was built: the sizes of its contents and its combiner.
    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(
        datatype: Datatype,
        num_integers: *mut c_int,
        num_addresses: *mut c_int,
        num_datatypes: *mut c_int,
        combiner: *mut c_int,
    ) -> c_int {
        api_active("MPI_Type_get_envelope", || {
            let ptrs = [out(num_integers, "num_integers")?, out(num_addresses, "num_addresses")?, out(num_datatypes, "num_datatypes")?, out(combiner, "combiner")?];
            let (_, e) = envelope(datatype, false)?;
            let small = |v: usize| c_int::try_from(v).map_err(|_| MpiError::new(abi::ERR_TYPE, "more than INT_MAX arguments"));
            let vals = [small(e.integers)?, small(e.addresses)?, small(e.datatypes)?, combiner_code(e.combiner)];
            for (p, v) in ptrs.into_iter().zip(vals) {
                // SAFETY: checked non-null; the caller's pointers.
                unsafe { p.write(v) };
            }
            Ok(())
        })
    }

    /// How a type was built, large counts included.
    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(
        datatype: Datatype,
        num_integers: *mut Count,
        num_addresses: *mut Count,
        num_large_counts: *mut Count,
        num_datatypes: *mut Count,
        combiner: *mut c_int,
    ) -> c_int {
        api_active("MPI_Type_get_envelope_c", || {
            let ptrs = [out(num_integers, "num_integers")?, out(num_addresses, "num_addresses")?, out(num_large_counts, "num_large_counts")?, out(num_datatypes, "num_datatypes")?];
            let comb = out(combiner, "combiner")?;
            let (_, e) = envelope(datatype, true)?;
            for (p, v) in ptrs.into_iter().zip([e.integers, e.addresses, e.large_counts, e.datatypes]) {
                // SAFETY: checked non-null; the caller's pointers.
                unsafe { p.write(v as Count) };
            }
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { comb.write(combiner_code(e.combiner)) };
            Ok(())
        })
    }

    /// The arguments a type was built with.
    fn MPI_Type_get_contents / PMPI_Type_get_contents(
        datatype: Datatype,
        max_integers: c_int,
        max_addresses: c_int,
        max_datatypes: c_int,
        array_of_integers: *mut c_int,
        array_of_addresses: *mut Aint,
        array_of_datatypes: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_get_contents", || {
            let max = [i64::from(max_integers), i64::from(max_addresses), 0, i64::from(max_datatypes)];
            // SAFETY: MPI's contract: each array holds its maximum.
            unsafe { contents(datatype, false, max, array_of_integers, array_of_addresses, std::ptr::null_mut(), array_of_datatypes) }
        })
    }

    /// The arguments a type was built with, large counts included.
    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(
        datatype: Datatype,
        max_integers: Count,
        max_addresses: Count,
        max_large_counts: Count,
        max_datatypes: Count,
        array_of_integers: *mut c_int,
        array_of_addresses: *mut Aint,
        array_of_large_counts: *mut Count,
        array_of_datatypes: *mut Datatype,
    ) -> c_int {
        api_active("MPI_Type_get_contents_c", || {
            let max = [max_integers, max_addresses, max_large_counts, max_datatypes];
            // SAFETY: MPI's contract: each array holds its maximum.
            unsafe { contents(datatype, true, max, array_of_integers, array_of_addresses, array_of_large_counts, array_of_datatypes) }
        })
    }

    /// The predefined type of a class (`MPI_TYPECLASS_*`) and size in bytes.
    fn MPI_Type_match_size / PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut Datatype) -> c_int {
        api_active("MPI_Type_match_size", || {
            let p = out(datatype, "datatype")?;
            let class = match typeclass {
                TYPECLASS_INTEGER => TypeClass::Integer,
                TYPECLASS_REAL => TypeClass::Real,
                TYPECLASS_COMPLEX => TypeClass::Complex,
                other => return err(abi::ERR_ARG, format!("{other} is not an MPI_TYPECLASS_ value")),
            };
            let b = match_size(class, nonneg(size.into(), "size")?)?;
            let h = sized_handle(b).ok_or_else(|| MpiError::new(abi::ERR_ARG, format!("no sized type for {b:?}")))?;
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { p.write(Datatype(h)) };
            Ok(())
        })
    }

    /// The integer type of Fortran's `SELECTED_INT_KIND(r)`.
    fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_create_f90_integer", || {
            // SAFETY: the caller's handle pointer.
            unsafe { f90((Combiner::F90Integer, 0, r), || UserDatatype::f90_integer(r), newtype) }
        })
    }

    /// The real type of Fortran's `SELECTED_REAL_KIND(p, r)`.
    fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_create_f90_real", || {
            // SAFETY: the caller's handle pointer.
            unsafe { f90((Combiner::F90Real, p, r), || UserDatatype::f90_real(defined(p), defined(r)), newtype) }
        })
    }

    /// The complex type of Fortran's `SELECTED_REAL_KIND(p, r)`.
    fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut Datatype) -> c_int {
        api_active("MPI_Type_create_f90_complex", || {
            // SAFETY: the caller's handle pointer.
            unsafe { f90((Combiner::F90Complex, p, r), || UserDatatype::f90_complex(defined(p), defined(r)), newtype) }
        })
    }

    /// The predefined value–index pair type, or `MPI_DATATYPE_NULL`.
    fn MPI_Type_get_value_index / PMPI_Type_get_value_index(value_type: Datatype, index_type: Datatype, pair_type: *mut Datatype) -> c_int {
        api_active("MPI_Type_get_value_index", || {
            let p = out(pair_type, "pair_type")?;
            type_any(value_type)?;
            type_any(index_type)?;
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { p.write(value_index_pair(value_type, index_type)) };
            Ok(())
        })
    }

    /// Packs `incount` elements in external32 at `*position`.
    fn MPI_Pack_external / PMPI_Pack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        incount: c_int,
        datatype: Datatype,
        outbuf: *mut c_void,
        outsize: Aint,
        position: *mut Aint,
    ) -> c_int {
        api_active("MPI_Pack_external", || {
            // SAFETY: MPI's contract for the string, buffers and position.
            unsafe { with_aint_position(position, |at| pack_external(datarep, inbuf, incount.into(), datatype, outbuf, outsize as i64, at)) }
        })
    }

    /// [`MPI_Pack_external`] with large counts.
    fn MPI_Pack_external_c / PMPI_Pack_external_c(
        datarep: *const c_char,
        inbuf: *const c_void,
        incount: Count,
        datatype: Datatype,
        outbuf: *mut c_void,
        outsize: Count,
        position: *mut Count,
    ) -> c_int {
        api_active("MPI_Pack_external_c", || {
            // SAFETY: MPI's contract for the string, buffers and position.
            unsafe { pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position) }
        })
    }

    /// Unpacks `outcount` elements of external32 data at `*position`.
    fn MPI_Unpack_external / PMPI_Unpack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        insize: Aint,
        position: *mut Aint,
        outbuf: *mut c_void,
        outcount: c_int,
        datatype: Datatype,
    ) -> c_int {
        api_active("MPI_Unpack_external", || {
            // SAFETY: MPI's contract for the string, buffers and position.
            unsafe { with_aint_position(position, |at| unpack_external(datarep, inbuf, insize as i64, at, outbuf, outcount.into(), datatype)) }
        })
    }

    /// [`MPI_Unpack_external`] with large counts.
    fn MPI_Unpack_external_c / PMPI_Unpack_external_c(
        datarep: *const c_char,
        inbuf: *const c_void,
        insize: Count,
        position: *mut Count,
        outbuf: *mut c_void,
        outcount: Count,
        datatype: Datatype,
    ) -> c_int {
        api_active("MPI_Unpack_external_c", || {
            // SAFETY: MPI's contract for the string, buffers and position.
            unsafe { unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype) }
        })
    }

    /// Bytes of `incount` elements in external32.
    fn MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, incount: c_int, datatype: Datatype, size: *mut Aint) -> c_int {
        api_active("MPI_Pack_external_size", || {
            let p = out(size, "size")?;
            // SAFETY: the caller's string.
            unsafe { external32(datarep) }?;
            let b = type_any(datatype)?.ty.external32_size(count(incount.into())?)?;
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { p.write(b as Aint) };
            Ok(())
        })
    }

    /// [`MPI_Pack_external_size`] with a large count.
    fn MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const c_char, incount: Count, datatype: Datatype, size: *mut Count) -> c_int {
        api_active("MPI_Pack_external_size_c", || {
            let p = out(size, "size")?;
            // SAFETY: the caller's string.
            unsafe { external32(datarep) }?;
            let b = type_any(datatype)?.ty.external32_size(count(incount)?)?;
            // SAFETY: checked non-null; the caller's pointer.
            unsafe { p.write(b as Count) };
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combiner_codes_are_the_headers() {
        let header = include_str!("../include/mpi.h");
        for (c, name) in [
            (Combiner::Named, "NAMED"),
            (Combiner::Dup, "DUP"),
            (Combiner::Contiguous, "CONTIGUOUS"),
            (Combiner::Vector, "VECTOR"),
            (Combiner::Hvector, "HVECTOR"),
            (Combiner::Indexed, "INDEXED"),
            (Combiner::Hindexed, "HINDEXED"),
            (Combiner::IndexedBlock, "INDEXED_BLOCK"),
            (Combiner::HindexedBlock, "HINDEXED_BLOCK"),
            (Combiner::Struct, "STRUCT"),
            (Combiner::Subarray, "SUBARRAY"),
            (Combiner::Darray, "DARRAY"),
            (Combiner::F90Real, "F90_REAL"),
            (Combiner::F90Complex, "F90_COMPLEX"),
            (Combiner::F90Integer, "F90_INTEGER"),
            (Combiner::Resized, "RESIZED"),
        ] {
            let line = format!("MPI_COMBINER_{name} ");
            let at = header.find(&line).unwrap_or_else(|| panic!("{line}"));
            let rest = &header[at + line.len()..];
            let value: String = rest
                .trim_start_matches([' ', '='])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            assert_eq!(value.parse::<c_int>().unwrap(), combiner_code(c), "{name}");
        }
        for (name, v) in [
            ("MPI_ORDER_C ", codes::ORDER_C),
            ("MPI_ORDER_FORTRAN ", codes::ORDER_FORTRAN),
            ("MPI_DISTRIBUTE_NONE ", codes::DISTRIBUTE_NONE),
            ("MPI_DISTRIBUTE_BLOCK ", codes::DISTRIBUTE_BLOCK),
            ("MPI_DISTRIBUTE_CYCLIC ", codes::DISTRIBUTE_CYCLIC),
            ("MPI_DISTRIBUTE_DFLT_DARG ", codes::DISTRIBUTE_DFLT_DARG),
            ("MPI_TYPECLASS_INTEGER ", i64::from(TYPECLASS_INTEGER)),
            ("MPI_TYPECLASS_REAL ", i64::from(TYPECLASS_REAL)),
            ("MPI_TYPECLASS_COMPLEX ", i64::from(TYPECLASS_COMPLEX)),
        ] {
            let at = header.find(name).unwrap_or_else(|| panic!("{name}"));
            let rest = header[at + name.len()..].trim_start_matches([' ', '=']);
            let text: String = rest
                .chars()
                .take_while(|c| c.is_ascii_hexdigit() || *c == 'x')
                .collect();
            let parsed = match text.strip_prefix("0x") {
                Some(h) => i64::from_str_radix(h, 16).unwrap(),
                None => text.parse().unwrap(),
            };
            assert_eq!(parsed, v, "{name}");
        }
        assert_eq!(codes::UNDEFINED, i64::from(abi::UNDEFINED));
    }

    #[test]
    fn sized_handles_are_the_sized_types() {
        for &(h, name, size, _) in abi::PREDEFINED_TYPES {
            let b = type_any(Datatype(h)).unwrap().ty.basic_type().unwrap();
            if let Some(sh) = sized_handle(b) {
                if sh == h {
                    let digits: String = name.chars().filter(char::is_ascii_digit).collect();
                    let n: usize = digits.parse().unwrap();
                    assert_eq!(n, size, "{name}");
                }
                assert_eq!(type_any(Datatype(sh)).unwrap().size, b.size());
            }
        }
    }
}
