//! Datatypes: every predefined C (and fixed-size Fortran) type, derived
//! types (contiguous, vector, hvector, indexed, hindexed, indexed block,
//! struct, resized, dup), and packing.
//!
//! A type is flattened when it is built into its *type map*: the list of
//! `(offset, length)` byte blocks of one element, in the order MPI packs
//! them, with neighbouring blocks merged, plus its size, lower and upper
//! bound (extent = ub − lb), true bounds and alignment. `count` elements
//! of a type sit at `buf + i × extent`.
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
use crate::errors::{api, err, out, put, put_string, MpiError, Res};
use crate::handles::{Table, KIND_TYPE};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The most blocks a type map may have (16 Mi: 256 MiB of map).
pub const MAX_BLOCKS: usize = 1 << 24;

/// Addresses below this are never mapped (Linux's `mmap_min_addr` is at
/// least 4 KiB, 64 KiB by default); a null buffer plus a type map that
/// reaches below it cannot be `MPI_BOTTOM` with absolute addresses.
const LOWEST_ADDRESS: isize = 4096;

/// One run of bytes of an element: offset from the element's start, length.
pub type Block = (isize, usize);

/// A datatype, flattened.
#[derive(Debug)]
pub struct TypeInfo {
    /// Bytes of data in one element.
    pub size: usize,
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    pub align: usize,
    /// The type map, in packing order.
    pub blocks: Vec<Block>,
    pub predefined: bool,
    committed: AtomicBool,
    name: Mutex<String>,
}

impl Clone for TypeInfo {
    fn clone(&self) -> Self {
        TypeInfo {
            size: self.size,
            lb: self.lb,
            ub: self.ub,
            true_lb: self.true_lb,
            true_ub: self.true_ub,
            align: self.align,
            blocks: self.blocks.clone(),
            predefined: self.predefined,
            committed: AtomicBool::new(self.is_committed()),
            name: Mutex::new(String::new()),
        }
    }
}

impl TypeInfo {
    pub fn extent(&self) -> isize {
        self.ub - self.lb
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
        match self.blocks.as_slice() {
            [(off, len)] if *len as isize == self.extent() => Some(*off),
            [] => Some(0),
            _ => None,
        }
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
        debug_assert_eq!(out.len(), count * self.size);
        let mut at = 0;
        for i in 0..count {
            let elem = base.wrapping_offset(i as isize * self.extent());
            for &(off, len) in &self.blocks {
                // SAFETY: the caller's guarantee for the source; `out` has
                // room for every block of every element.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        elem.wrapping_offset(off),
                        out.as_mut_ptr().add(at),
                        len,
                    )
                };
                at += len;
            }
        }
    }

    /// Unpacks `data` (at most `count × size` bytes; a shorter tail fills
    /// elements as far as it goes) into `count` elements at `base`.
    ///
    /// # Safety
    /// The type map of every element is writable at `base`.
    pub unsafe fn unpack(&self, data: &[u8], base: *mut u8, count: usize) {
        let mut at = 0;
        'all: for i in 0..count {
            let elem = base.wrapping_offset(i as isize * self.extent());
            for &(off, len) in &self.blocks {
                let n = len.min(data.len() - at);
                // SAFETY: the caller's guarantee for the destination; `n`
                // bytes remain in `data`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().add(at),
                        elem.wrapping_offset(off),
                        n,
                    )
                };
                at += n;
                if at == data.len() {
                    break 'all;
                }
            }
        }
    }
}

fn predefined(
    size: usize,
    align: usize,
    blocks: Vec<Block>,
    extent: isize,
    name: &str,
) -> TypeInfo {
    let true_lb = blocks.first().map_or(0, |b| b.0);
    let true_ub = blocks.last().map_or(0, |b| b.0 + b.1 as isize);
    TypeInfo {
        size,
        lb: 0,
        ub: extent,
        true_lb,
        true_ub,
        align,
        blocks,
        predefined: true,
        committed: AtomicBool::new(true),
        name: Mutex::new(name.to_owned()),
    }
}

/// Predefined types by `handle - 0x200`.
fn predefined_table() -> &'static [Option<TypeInfo>] {
    static T: OnceLock<Vec<Option<TypeInfo>>> = OnceLock::new();
    T.get_or_init(|| {
        let mut v: Vec<Option<TypeInfo>> = (0..0x100).map(|_| None).collect();
        for &(h, name, size, align) in abi::PREDEFINED_TYPES {
            let (blocks, extent) = match abi::PAIR_TYPES.iter().find(|p| p.0 == h) {
                Some(&(_, b, e)) => (b.to_vec(), e),
                None => (vec![(0, size)], size as isize),
            };
            v[h - 0x200] = Some(predefined(size, align, blocks, extent, name));
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
/// from the same tables as [`predefined_table`] (a test checks the two
/// agree).
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

// ---------------------------------------------------------------- building

/// Accumulates a type map.
struct Builder {
    blocks: Vec<Block>,
    size: usize,
    bounds: Option<(isize, isize, isize, isize)>, // lb, ub, true_lb, true_ub
    align: usize,
}

fn overflow() -> MpiError {
    MpiError::new(
        abi::ERR_ARG,
        "the datatype's displacements or size overflow",
    )
}

impl Builder {
    fn new() -> Self {
        Builder {
            blocks: Vec::new(),
            size: 0,
            bounds: None,
            align: 1,
        }
    }

    fn push_block(&mut self, off: isize, len: usize) -> Res {
        if len == 0 {
            return Ok(());
        }
        if let Some(last) = self.blocks.last_mut() {
            if last.0.checked_add(last.1 as isize) == Some(off) {
                last.1 += len;
                return Ok(());
            }
        }
        if self.blocks.len() >= MAX_BLOCKS {
            return err(
                abi::ERR_TYPE,
                format!("the datatype's type map has more than {MAX_BLOCKS} blocks"),
            );
        }
        self.blocks.push((off, len));
        Ok(())
    }

    /// Adds `n` elements of `t`, the first at byte `disp`, the others one
    /// extent apart.
    fn add(&mut self, disp: isize, n: usize, t: &TypeInfo) -> Res {
        if n == 0 {
            return Ok(());
        }
        let ext = t.extent();
        let span = (n as isize - 1).checked_mul(ext).ok_or_else(overflow)?;
        let add = |a: isize, b: isize| a.checked_add(b).ok_or_else(overflow);
        let (lo, hi) = (span.min(0), span.max(0));
        let b = (
            add(add(disp, t.lb)?, lo)?,
            add(add(disp, t.ub)?, hi)?,
            add(add(disp, t.true_lb)?, lo)?,
            add(add(disp, t.true_ub)?, hi)?,
        );
        self.bounds = Some(match self.bounds {
            None => b,
            Some(o) => (o.0.min(b.0), o.1.max(b.1), o.2.min(b.2), o.3.max(b.3)),
        });
        self.size = n
            .checked_mul(t.size)
            .and_then(|s| s.checked_add(self.size))
            .ok_or_else(overflow)?;
        self.align = self.align.max(t.align);
        match t.dense_offset() {
            // A gapless element type: the n elements are one run.
            Some(off) if t.size as isize == ext && t.size > 0 => {
                self.push_block(add(disp, off)?, t.size * n)?;
            }
            _ => {
                if n.saturating_mul(t.blocks.len())
                    .saturating_add(self.blocks.len())
                    > MAX_BLOCKS
                    && t.blocks.len() > 1
                {
                    return err(
                        abi::ERR_TYPE,
                        format!("the datatype's type map has more than {MAX_BLOCKS} blocks"),
                    );
                }
                for i in 0..n {
                    let base = add(disp, (i as isize).checked_mul(ext).ok_or_else(overflow)?)?;
                    for &(off, len) in &t.blocks {
                        self.push_block(add(base, off)?, len)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self, pad_to_align: bool) -> TypeInfo {
        let (lb, mut ub, true_lb, true_ub) = self.bounds.unwrap_or((0, 0, 0, 0));
        if pad_to_align {
            let rem = (ub - lb).rem_euclid(self.align as isize);
            if rem != 0 {
                ub += self.align as isize - rem;
            }
        }
        TypeInfo {
            size: self.size,
            lb,
            ub,
            true_lb,
            true_ub,
            align: self.align,
            blocks: self.blocks,
            predefined: false,
            committed: AtomicBool::new(false),
            name: Mutex::new(String::new()),
        }
    }
}

/// Stores a new type and writes its handle.
///
/// # Safety
/// `newtype` is valid for a write when not null.
unsafe fn store(t: TypeInfo, newtype: *mut Datatype) -> Res {
    let p = out(newtype, "newtype")?;
    let h = TYPES
        .insert(Arc::new(t))
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many datatypes"))?;
    // SAFETY: checked non-null; the caller's pointer.
    unsafe { p.write(Datatype(h)) };
    Ok(())
}

/// `n` values from C.
///
/// # Safety
/// `p` is valid for `n` values when not null.
unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> Res<&'a [T]> {
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

/// Builds a type from `(byte displacement, block length)` pairs of `old`.
fn build(old: Datatype, parts: impl IntoIterator<Item = Res<(isize, usize)>>) -> Res<TypeInfo> {
    let t = type_any(old)?;
    let mut b = Builder::new();
    for part in parts {
        let (disp, n) = part?;
        b.add(disp, n, &t)?;
    }
    Ok(b.finish(false))
}

/// Refuses up front a vector of `count` blocks of `bl` elements of `old`
/// whose type map would exceed [`MAX_BLOCKS`] (instead of building it).
fn check_vector_size(count: usize, bl: usize, old: Datatype) -> Res {
    let t = type_any(old)?;
    let per_block = if t.dense_offset().is_some() {
        1
    } else {
        bl.saturating_mul(t.blocks.len())
    };
    if bl > 0 && count.saturating_mul(per_block) > MAX_BLOCKS {
        return err(
            abi::ERR_TYPE,
            format!("the datatype's type map would have more than {MAX_BLOCKS} blocks"),
        );
    }
    Ok(())
}

fn scaled(i: isize, ext: isize) -> Res<isize> {
    i.checked_mul(ext).ok_or_else(overflow)
}

mpi_fn! {
    /// Bytes of data in one element.
    fn MPI_Type_size / PMPI_Type_size(datatype: Datatype, size: *mut c_int) -> c_int {
        api("MPI_Type_size", || {
            let t = type_any(datatype)?;
            let v = c_int::try_from(t.size).unwrap_or(abi::UNDEFINED);
            // SAFETY: the caller's int pointer.
            unsafe { put(size, "size", v) }
        })
    }

    /// Bytes of data in one element, as `MPI_Count`.
    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: Datatype, size: *mut Count) -> c_int {
        api("MPI_Type_size_x", || {
            let t = type_any(datatype)?;
            // SAFETY: the caller's pointer.
            unsafe { put(size, "size", t.size as Count) }
        })
    }

    /// Bytes of data in one element, as `MPI_Count`.
    fn MPI_Type_size_c / PMPI_Type_size_c(datatype: Datatype, size: *mut Count) -> c_int {
        api("MPI_Type_size_c", || {
            let t = type_any(datatype)?;
            // SAFETY: the caller's pointer.
            unsafe { put(size, "size", t.size as Count) }
        })
    }

    /// Lower bound and extent.
    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype: Datatype, lb: *mut Aint, extent: *mut Aint) -> c_int {
        api("MPI_Type_get_extent", || {
            let t = type_any(datatype)?;
            out(extent, "extent")?;
            // SAFETY: the caller's pointers.
            unsafe {
                put(lb, "lb", t.lb)?;
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
        api("MPI_Type_get_true_extent", || {
            let t = type_any(datatype)?;
            out(extent, "true_extent")?;
            // SAFETY: the caller's pointers.
            unsafe {
                put(lb, "true_lb", t.true_lb)?;
                put(extent, "true_extent", t.true_ub - t.true_lb)
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
        api("MPI_Type_contiguous", || {
            let n = count_arg(count)?;
            let t = build(oldtype, [Ok((0, n))])?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_vector", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            check_vector_size(n, bl, oldtype)?;
            let ext = type_any(oldtype)?.extent();
            let step = scaled(stride as isize, ext)?;
            let t = build(oldtype, (0..n).map(|i| Ok((scaled(i as isize, step)?, bl))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_create_hvector", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            check_vector_size(n, bl, oldtype)?;
            let t = build(oldtype, (0..n).map(|i| Ok((scaled(i as isize, stride)?, bl))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_indexed", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(blocklengths, n, "blocklengths")?, array(displacements, n, "displacements")?) };
            let ext = type_any(oldtype)?.extent();
            let t = build(oldtype, bls.iter().zip(ds).map(|(&b, &d)| Ok((scaled(d as isize, ext)?, blocklen(b)?))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_create_hindexed", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds) = unsafe { (array(blocklengths, n, "blocklengths")?, array(displacements, n, "displacements")?) };
            let t = build(oldtype, bls.iter().zip(ds).map(|(&b, &d)| Ok((d, blocklen(b)?))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_create_indexed_block", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(displacements, n, "displacements") }?;
            let ext = type_any(oldtype)?.extent();
            let t = build(oldtype, ds.iter().map(|&d| Ok((scaled(d as isize, ext)?, bl))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_create_hindexed_block", || {
            let n = count_arg(count)?;
            let bl = blocklen(blocklength)?;
            // SAFETY: MPI's contract: `count` entries.
            let ds = unsafe { array(displacements, n, "displacements") }?;
            let t = build(oldtype, ds.iter().map(|&d| Ok((d, bl))))?;
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
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
        api("MPI_Type_create_struct", || {
            let n = count_arg(count)?;
            // SAFETY: MPI's contract: `count` entries each.
            let (bls, ds, ts) = unsafe {
                (
                    array(blocklengths, n, "blocklengths")?,
                    array(displacements, n, "displacements")?,
                    array(types, n, "types")?,
                )
            };
            let mut b = Builder::new();
            for i in 0..n {
                let t = type_any(ts[i])?;
                b.add(ds[i], blocklen(bls[i])?, &t)?;
            }
            // SAFETY: the caller's handle pointer.
            unsafe { store(b.finish(true), newtype) }
        })
    }

    /// `oldtype` with another lower bound and extent.
    fn MPI_Type_create_resized / PMPI_Type_create_resized(
        oldtype: Datatype,
        lb: Aint,
        extent: Aint,
        newtype: *mut Datatype,
    ) -> c_int {
        api("MPI_Type_create_resized", || {
            let mut t = (*type_any(oldtype)?).clone();
            t.lb = lb;
            t.ub = lb.checked_add(extent).ok_or_else(overflow)?;
            t.predefined = false;
            t.committed = AtomicBool::new(false);
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
        })
    }

    /// A copy of a type (committed if the original is).
    fn MPI_Type_dup / PMPI_Type_dup(oldtype: Datatype, newtype: *mut Datatype) -> c_int {
        api("MPI_Type_dup", || {
            let old = type_any(oldtype)?;
            let mut t = (*old).clone();
            t.predefined = false;
            t.committed = AtomicBool::new(old.is_committed());
            // SAFETY: the caller's handle pointer.
            unsafe { store(t, newtype) }
        })
    }

    /// Makes a type usable in communication.
    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut Datatype) -> c_int {
        api("MPI_Type_commit", || {
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
        api("MPI_Type_free", || {
            let p = out(datatype, "datatype")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if type_any(h)?.predefined {
                return err(abi::ERR_TYPE, "a predefined datatype cannot be freed");
            }
            TYPES.remove(h.0).map_err(|_| MpiError::new(abi::ERR_TYPE, "datatype in use"))?;
            // SAFETY: as above.
            unsafe { p.write(abi::DATATYPE_NULL) };
            Ok(())
        })
    }

    /// A type's name (`MPI_INT`, …, or what `MPI_Type_set_name` gave).
    fn MPI_Type_get_name / PMPI_Type_get_name(datatype: Datatype, name: *mut c_char, len: *mut c_int) -> c_int {
        api("MPI_Type_get_name", || {
            let t = type_any(datatype)?;
            // SAFETY: MPI requires MPI_MAX_OBJECT_NAME bytes at `name`.
            unsafe { put_string(name, abi::MAX_OBJECT_NAME, len, &t.name()) }
        })
    }

    /// Names a derived type.
    fn MPI_Type_set_name / PMPI_Type_set_name(datatype: Datatype, name: *const c_char) -> c_int {
        api("MPI_Type_set_name", || {
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
        api("MPI_Pack", || {
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
        api("MPI_Unpack", || {
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
        api("MPI_Pack_size", || {
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
        api("MPI_Get_address", || {
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
    api(func, || {
        let t = type_any(datatype)?;
        let (names, l, e) = if true_ {
            (("true_lb", "true_extent"), t.true_lb, t.true_ub - t.true_lb)
        } else {
            (("lb", "extent"), t.lb, t.extent())
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
    fn predefined_sizes_and_pairs() {
        assert_eq!(t(0x209).size, 4); // MPI_INT
        assert_eq!(t(0x214).extent(), 8); // MPI_DOUBLE
        assert_eq!(t(0x229).size, 12); // MPI_DOUBLE_INT
        assert_eq!(t(0x229).extent(), 16);
        assert_eq!(t(0x22c).blocks, vec![(0, 2), (4, 4)]); // MPI_SHORT_INT
        assert!(t(0x22c).dense_offset().is_none());
        assert_eq!(t(0x209).dense_offset(), Some(0));
        assert_eq!(
            type_any(abi::DATATYPE_NULL).unwrap_err().class,
            abi::ERR_TYPE
        );
        assert_eq!(type_any(Datatype(0x211)).unwrap_err().class, abi::ERR_TYPE);
    }

    #[test]
    fn vector_map_bounds_and_packing() {
        let int = t(0x209);
        let mut b = Builder::new();
        for i in 0..3 {
            b.add(i * 5 * 4, 2, &int).unwrap(); // vector(3, 2, 5, INT)
        }
        let v = b.finish(false);
        assert_eq!(v.blocks, vec![(0, 8), (20, 8), (40, 8)]);
        assert_eq!((v.size, v.lb, v.ub), (24, 0, 48));
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
        let (int, dbl, ch) = (t(0x209), t(0x214), t(0x243));
        let mut b = Builder::new();
        b.add(0, 1, &int).unwrap();
        b.add(8, 1, &dbl).unwrap();
        b.add(16, 1, &ch).unwrap();
        let s = b.finish(true);
        assert_eq!((s.size, s.lb, s.ub), (13, 0, 24));
        assert_eq!(s.blocks, vec![(0, 4), (8, 9)]);
        // hvector(2, 1, -8, DOUBLE): elements at 0 and -8.
        let mut b = Builder::new();
        b.add(0, 1, &dbl).unwrap();
        b.add(-8, 1, &dbl).unwrap();
        let h = b.finish(false);
        assert_eq!((h.lb, h.ub, h.extent()), (-8, 8, 16));
        assert_eq!(h.blocks, vec![(0, 8), (-8, 8)]);
        // Contiguous of a gapless type merges into one block.
        let mut b = Builder::new();
        b.add(0, 1000, &int).unwrap();
        assert_eq!(b.finish(false).blocks, vec![(0, 4000)]);
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
        let mut b = Builder::new();
        assert!(b.add(isize::MAX - 2, 2, &int).is_err());
    }
}
