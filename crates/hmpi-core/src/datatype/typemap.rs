//! Datatypes as type maps: the predefined basic types ([`BasicType`]), the
//! [`Datatype`] value, and the derived type constructors of
//! [`UserDatatype`] (contiguous, vector, hvector, indexed, hindexed,
//! indexed block, hindexed block, struct, resized, dup, subarray).
//!
//! A type is flattened when it is built into its *type map*: the list of
//! `(offset, length)` byte blocks of one element, in the order MPI packs
//! them, with neighbouring blocks merged, plus its size, lower and upper
//! bound (extent = ub − lb), true bounds and alignment. `count` elements
//! of a type sit at `buf + i × extent`.
//!
//! * A *dense* type (one block whose length is the extent, or no block)
//!   travels straight from and into the program's buffer.
//! * A struct type pads its extent to the alignment of its most aligned
//!   member, as C lays out an array of structs.
//! * A type map longer than [`MAX_BLOCKS`] blocks is refused with
//!   [`Error::Type`] rather than exhausting memory; displacements and
//!   sizes that overflow are [`Error::Arg`].
//!
//! Building costs time and memory proportional to the blocks of the
//! resulting type map (at most [`MAX_BLOCKS`]) plus the description given:
//! blocks of zero elements, types without data and strides that close the
//! gaps (a vector that is one run) are handled without walking the
//! elements. The type map itself is flat, not a tree of the constructors:
//! a vector of `n` separate blocks holds `n` blocks.

use crate::{Error, Result};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The most blocks a type map may have (16 Mi: 256 MiB of map).
pub const MAX_BLOCKS: usize = 1 << 24;

/// One run of bytes of an element: offset from the element's start, length.
pub type Block = (isize, usize);

/// The predefined basic types of MPI, by what their bytes hold (the C and
/// Fortran names that share a layout share a kind: `MPI_INT`,
/// `MPI_INT32_T` and `MPI_INTEGER4` are all [`BasicType::I32`]).
///
/// Sizes and alignments are those of the LP64 C ABI (`long` is 8 bytes,
/// `long double` 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BasicType {
    /// Signed 8-bit integer (`MPI_INT8_T`, `MPI_SIGNED_CHAR`, `MPI_INTEGER1`).
    I8,
    /// Unsigned 8-bit integer (`MPI_UINT8_T`, `MPI_UNSIGNED_CHAR`).
    U8,
    /// Signed 16-bit integer (`MPI_SHORT`, `MPI_INT16_T`).
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer (`MPI_INT`, `MPI_INTEGER`).
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer (`MPI_LONG`, `MPI_LONG_LONG`, `MPI_AINT`,
    /// `MPI_COUNT`, `MPI_OFFSET`).
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 128-bit integer (`MPI_INTEGER16`).
    I128,
    /// Unsigned 128-bit integer (Rust's `u128`).
    U128,
    /// IEEE half precision (`MPI_REAL2`).
    F16,
    /// IEEE single precision (`MPI_FLOAT`, `MPI_REAL`).
    F32,
    /// IEEE double precision (`MPI_DOUBLE`, `MPI_DOUBLE_PRECISION`).
    F64,
    /// C `long double` (x87 extended precision in 16 bytes).
    LongDouble,
    /// IEEE quadruple precision (`MPI_REAL16`).
    F128,
    /// Complex of two halves (`MPI_COMPLEX4`).
    ComplexF16,
    /// Complex of two floats (`MPI_C_FLOAT_COMPLEX`, `MPI_COMPLEX`).
    ComplexF32,
    /// Complex of two doubles (`MPI_C_DOUBLE_COMPLEX`, `MPI_DOUBLE_COMPLEX`).
    ComplexF64,
    /// Complex of two `long double`s.
    ComplexLongDouble,
    /// Complex of two quadruple precision numbers (`MPI_COMPLEX32`).
    ComplexF128,
    /// C `bool` (`MPI_C_BOOL`, `MPI_CXX_BOOL`).
    Bool,
    /// Fortran `LOGICAL*1`.
    Logical1,
    /// Fortran `LOGICAL*2`.
    Logical2,
    /// Fortran `LOGICAL` and `LOGICAL*4`.
    Logical4,
    /// Fortran `LOGICAL*8`.
    Logical8,
    /// Fortran `LOGICAL*16`.
    Logical16,
    /// A character (`MPI_CHAR`, `MPI_CHARACTER`): not a number.
    Char,
    /// `wchar_t` (`MPI_WCHAR`): not a number.
    WChar,
    /// Uninterpreted bytes (`MPI_BYTE`).
    Byte,
    /// Packed data (`MPI_PACKED`).
    Packed,
    /// `struct { float; int; }` (`MPI_FLOAT_INT`).
    FloatInt,
    /// `struct { double; int; }` (`MPI_DOUBLE_INT`): 12 bytes of data in 16.
    DoubleInt,
    /// `struct { long; int; }` (`MPI_LONG_INT`): 12 bytes of data in 16.
    LongInt,
    /// `struct { int; int; }` (`MPI_2INT`, `MPI_2INTEGER`).
    TwoInt,
    /// `struct { short; int; }` (`MPI_SHORT_INT`): 6 bytes of data in 8.
    ShortInt,
    /// `struct { long double; int; }` (`MPI_LONG_DOUBLE_INT`).
    LongDoubleInt,
    /// Two floats, value and index (`MPI_2REAL`).
    TwoF32,
    /// Two doubles, value and index (`MPI_2DOUBLE_PRECISION`).
    TwoF64,
}

impl BasicType {
    /// Every basic type.
    pub const ALL: &'static [BasicType] = &[
        BasicType::I8,
        BasicType::U8,
        BasicType::I16,
        BasicType::U16,
        BasicType::I32,
        BasicType::U32,
        BasicType::I64,
        BasicType::U64,
        BasicType::I128,
        BasicType::U128,
        BasicType::F16,
        BasicType::F32,
        BasicType::F64,
        BasicType::LongDouble,
        BasicType::F128,
        BasicType::ComplexF16,
        BasicType::ComplexF32,
        BasicType::ComplexF64,
        BasicType::ComplexLongDouble,
        BasicType::ComplexF128,
        BasicType::Bool,
        BasicType::Logical1,
        BasicType::Logical2,
        BasicType::Logical4,
        BasicType::Logical8,
        BasicType::Logical16,
        BasicType::Char,
        BasicType::WChar,
        BasicType::Byte,
        BasicType::Packed,
        BasicType::FloatInt,
        BasicType::DoubleInt,
        BasicType::LongInt,
        BasicType::TwoInt,
        BasicType::ShortInt,
        BasicType::LongDoubleInt,
        BasicType::TwoF32,
        BasicType::TwoF64,
    ];

    /// Bytes of data in one element, and its alignment.
    pub const fn size_align(self) -> (usize, usize) {
        use BasicType::*;
        match self {
            I8 | U8 | Bool | Logical1 | Char | Byte | Packed => (1, 1),
            I16 | U16 | F16 | Logical2 => (2, 2),
            I32 | U32 | F32 | Logical4 | WChar => (4, 4),
            I64 | U64 | F64 | Logical8 => (8, 8),
            I128 | U128 | F128 | Logical16 | LongDouble => (16, 16),
            ComplexF16 => (4, 2),
            ComplexF32 => (8, 4),
            ComplexF64 => (16, 8),
            ComplexLongDouble | ComplexF128 => (32, 16),
            FloatInt | TwoInt | TwoF32 => (8, 4),
            DoubleInt | LongInt => (12, 8),
            ShortInt => (6, 4),
            LongDoubleInt => (20, 16),
            TwoF64 => (16, 8),
        }
    }

    /// Bytes of data in one element.
    pub const fn size(self) -> usize {
        self.size_align().0
    }

    /// The alignment of one element.
    pub const fn alignment(self) -> usize {
        self.size_align().1
    }

    /// The data blocks of one element (all types but the padded pairs are
    /// one block from 0) and its extent.
    pub const fn layout(self) -> (&'static [Block], isize) {
        use BasicType::*;
        match self {
            DoubleInt | LongInt => (&[(0, 12)], 16),
            ShortInt => (&[(0, 2), (4, 4)], 8),
            LongDoubleInt => (&[(0, 20)], 32),
            _ => match self.size() {
                1 => (&[(0, 1)], 1),
                2 => (&[(0, 2)], 2),
                4 => (&[(0, 4)], 4),
                6 => (&[(0, 6)], 6),
                8 => (&[(0, 8)], 8),
                12 => (&[(0, 12)], 12),
                16 => (&[(0, 16)], 16),
                20 => (&[(0, 20)], 20),
                _ => (&[(0, 32)], 32),
            },
        }
    }

    fn index(self) -> usize {
        // `ALL` lists every variant once, in declaration order.
        self as usize
    }
}

/// Which basic types the elements of a type map are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elements {
    /// No data.
    None,
    /// Every element of data is of this basic type.
    One(BasicType),
    /// Several basic types.
    Mixed,
}

impl Elements {
    fn join(self, other: Elements) -> Elements {
        match (self, other) {
            (Elements::None, x) | (x, Elements::None) => x,
            (Elements::One(a), Elements::One(b)) if a == b => Elements::One(a),
            _ => Elements::Mixed,
        }
    }
}

/// A flattened type: what a [`Datatype`] shares.
#[derive(Clone)]
pub(crate) struct TypeMap {
    pub(crate) size: usize,
    pub(crate) lb: isize,
    pub(crate) ub: isize,
    pub(crate) true_lb: isize,
    pub(crate) true_ub: isize,
    pub(crate) align: usize,
    /// The type map, in packing order.
    pub(crate) blocks: Vec<Block>,
    elements: Elements,
    predefined: Option<BasicType>,
    handle: Option<usize>,
}

/// A datatype: the layout of one element of a message in memory (rsmpi's
/// `DatatypeRef`/`UserDatatype` as one value). Cheap to clone (shared),
/// `Send + Sync`, immutable.
///
/// ```
/// use hmpi_core::datatype::{BasicType, Datatype, UserDatatype};
///
/// let int = Datatype::basic(BasicType::I32);
/// let column = UserDatatype::vector(4, 1, 4, &int).unwrap(); // a 4x4 column
/// assert_eq!((column.size(), column.extent()), (16, 52));
/// assert!(!column.is_dense());
/// ```
#[derive(Clone)]
pub struct Datatype(pub(crate) Arc<TypeMap>);

impl fmt::Debug for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &*self.0;
        let mut d = f.debug_struct("Datatype");
        if let Some(b) = m.predefined {
            d.field("predefined", &b);
        }
        d.field("size", &m.size)
            .field("lb", &m.lb)
            .field("ub", &m.ub)
            .field("blocks", &m.blocks.len())
            .finish()
    }
}

impl AsRef<Datatype> for Datatype {
    fn as_ref(&self) -> &Datatype {
        self
    }
}

impl Datatype {
    /// The predefined datatype of a basic type.
    pub fn basic(b: BasicType) -> Datatype {
        static TABLE: OnceLock<Vec<Datatype>> = OnceLock::new();
        let t = TABLE.get_or_init(|| {
            BasicType::ALL
                .iter()
                .map(|&b| {
                    let (blocks, extent) = b.layout();
                    let (size, align) = b.size_align();
                    Datatype(Arc::new(TypeMap {
                        size,
                        lb: 0,
                        ub: extent,
                        true_lb: blocks.first().map_or(0, |b| b.0),
                        true_ub: blocks.last().map_or(0, |b| b.0 + b.1 as isize),
                        align,
                        blocks: blocks.to_vec(),
                        elements: Elements::One(b),
                        predefined: Some(b),
                        handle: None,
                    }))
                })
                .collect()
        });
        t[b.index()].clone()
    }

    /// Bytes of data in one element.
    #[inline]
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// The lower bound.
    #[inline]
    pub fn lower_bound(&self) -> isize {
        self.0.lb
    }

    /// The upper bound.
    #[inline]
    pub fn upper_bound(&self) -> isize {
        self.0.ub
    }

    /// Upper bound − lower bound: the distance between consecutive elements.
    #[inline]
    pub fn extent(&self) -> isize {
        self.0.ub - self.0.lb
    }

    /// The lowest byte of data (without resizing or padding).
    #[inline]
    pub fn true_lower_bound(&self) -> isize {
        self.0.true_lb
    }

    /// One past the highest byte of data.
    #[inline]
    pub fn true_upper_bound(&self) -> isize {
        self.0.true_ub
    }

    /// True upper bound − true lower bound.
    #[inline]
    pub fn true_extent(&self) -> isize {
        self.0.true_ub - self.0.true_lb
    }

    /// The alignment of the most aligned basic element.
    #[inline]
    pub fn alignment(&self) -> usize {
        self.0.align
    }

    /// The type map: `(offset, length)` blocks of one element, in packing
    /// order, neighbours merged.
    #[inline]
    pub fn blocks(&self) -> &[Block] {
        &self.0.blocks
    }

    /// If `count` elements are one run of bytes: its offset from the buffer.
    #[inline]
    pub fn dense_offset(&self) -> Option<isize> {
        match self.0.blocks.as_slice() {
            [(off, len)] if *len as isize == self.extent() => Some(*off),
            [] => Some(0),
            _ => None,
        }
    }

    /// Whether any number of elements is one run of bytes (sent without
    /// packing).
    #[inline]
    pub fn is_dense(&self) -> bool {
        self.dense_offset().is_some()
    }

    /// The basic type of every element of data, when there is one (for
    /// reductions): `Some` for predefined types and derived types built
    /// from one basic type only.
    pub fn basic_type(&self) -> Option<BasicType> {
        match self.0.elements {
            Elements::One(b) => Some(b),
            _ => None,
        }
    }

    /// Whether the type has several basic types (a struct of an `int` and a
    /// `double`, say).
    pub fn is_mixed(&self) -> bool {
        self.0.elements == Elements::Mixed
    }

    /// `Some` if this is a predefined type itself (not derived from one).
    pub fn predefined(&self) -> Option<BasicType> {
        self.0.predefined
    }

    /// The handle under which a foreign interface (the C library) knows
    /// this type, if it registered one with [`Datatype::with_handle`].
    pub fn handle(&self) -> Option<usize> {
        self.0.handle
    }

    /// This type, tagged with the handle a foreign interface knows it by
    /// (what user reduction functions of that interface are given). Copies
    /// the type map unless this value is its only owner.
    pub fn with_handle(mut self, handle: usize) -> Datatype {
        Arc::make_mut(&mut self.0).handle = Some(handle);
        self
    }

    /// Whether two values are the same type object (not merely equal maps).
    pub fn ptr_eq(&self, other: &Datatype) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

// ---------------------------------------------------------------- building

fn overflow() -> Error {
    Error::Arg {
        reason: "the datatype's displacements or size overflow".into(),
    }
}

fn too_many_blocks() -> Error {
    Error::Type {
        reason: format!("the datatype's type map has more than {MAX_BLOCKS} blocks"),
    }
}

fn add(a: isize, b: isize) -> Result<isize> {
    a.checked_add(b).ok_or_else(overflow)
}

fn mul(a: isize, b: isize) -> Result<isize> {
    a.checked_mul(b).ok_or_else(overflow)
}

fn signed(n: usize) -> Result<isize> {
    isize::try_from(n).map_err(|_| overflow())
}

/// Accumulates a type map.
pub(crate) struct Builder {
    blocks: Vec<Block>,
    size: usize,
    bounds: Option<(isize, isize, isize, isize)>, // lb, ub, true_lb, true_ub
    align: usize,
    elements: Elements,
}

impl Builder {
    pub(crate) fn new() -> Self {
        Builder {
            blocks: Vec::new(),
            size: 0,
            bounds: None,
            align: 1,
            elements: Elements::None,
        }
    }

    fn push_block(&mut self, off: isize, len: usize) -> Result<()> {
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
            return Err(too_many_blocks());
        }
        self.blocks.push((off, len));
        Ok(())
    }

    /// Adds `n` elements of `t`, the first at byte `disp`, the others one
    /// extent apart.
    pub(crate) fn add(&mut self, disp: isize, n: usize, t: &Datatype) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let m = &*t.0;
        let ext = t.extent();
        let span = mul(signed(n)? - 1, ext)?;
        let (lo, hi) = (span.min(0), span.max(0));
        let b = (
            add(add(disp, m.lb)?, lo)?,
            add(add(disp, m.ub)?, hi)?,
            add(add(disp, m.true_lb)?, lo)?,
            add(add(disp, m.true_ub)?, hi)?,
        );
        self.bounds = Some(match self.bounds {
            None => b,
            Some(o) => (o.0.min(b.0), o.1.max(b.1), o.2.min(b.2), o.3.max(b.3)),
        });
        self.size = n
            .checked_mul(m.size)
            .and_then(|s| s.checked_add(self.size))
            .filter(|&s| s <= isize::MAX as usize)
            .ok_or_else(overflow)?;
        self.align = self.align.max(m.align);
        self.elements = self.elements.join(m.elements);
        if m.blocks.is_empty() {
            // No data: only the bounds count, and they are set above.
            return Ok(());
        }
        match t.dense_offset() {
            // A gapless element type: the n elements are one run.
            Some(off) if m.size as isize == ext && m.size > 0 => {
                self.push_block(add(disp, off)?, m.size * n)?;
            }
            _ => {
                if n.saturating_mul(m.blocks.len())
                    .saturating_add(self.blocks.len())
                    > MAX_BLOCKS
                    && m.blocks.len() > 1
                {
                    return Err(too_many_blocks());
                }
                for i in 0..n {
                    let base = add(disp, mul(i as isize, ext)?)?;
                    for &(off, len) in &m.blocks {
                        self.push_block(add(base, off)?, len)?;
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self, pad_to_align: bool) -> Result<Datatype> {
        let (lb, mut ub, true_lb, true_ub) = self.bounds.unwrap_or((0, 0, 0, 0));
        if pad_to_align {
            let rem = (ub - lb).rem_euclid(self.align as isize);
            if rem != 0 {
                ub = add(ub, self.align as isize - rem)?;
            }
        }
        Ok(Datatype(Arc::new(TypeMap {
            size: self.size,
            lb,
            ub,
            true_lb,
            true_ub,
            align: self.align,
            blocks: self.blocks,
            elements: self.elements,
            predefined: None,
            handle: None,
        })))
    }
}

/// The order of the dimensions of an array (for
/// [`UserDatatype::subarray`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last dimension varies fastest (`MPI_ORDER_C`).
    C,
    /// Column-major: the first dimension varies fastest
    /// (`MPI_ORDER_FORTRAN`).
    Fortran,
}

/// A derived datatype and its constructors (rsmpi's names). It is a
/// [`Datatype`] (`Deref`, `From`); every constructor returns an error value
/// for arguments that do not make a type.
///
/// ```
/// use hmpi_core::datatype::{Datatype, Equivalence, UserDatatype};
///
/// let d = f64::equivalent_datatype();
/// let pair = UserDatatype::contiguous(2, &d).unwrap();
/// let rows = UserDatatype::heterogeneous_vector(3, 1, 64, &pair).unwrap();
/// assert_eq!((rows.size(), rows.extent()), (48, 144));
/// assert_eq!(rows.blocks(), &[(0, 16), (64, 16), (128, 16)]);
/// ```
#[derive(Clone, Debug)]
pub struct UserDatatype(Datatype);

impl std::ops::Deref for UserDatatype {
    type Target = Datatype;
    fn deref(&self) -> &Datatype {
        &self.0
    }
}

impl AsRef<Datatype> for UserDatatype {
    fn as_ref(&self) -> &Datatype {
        &self.0
    }
}

impl From<UserDatatype> for Datatype {
    fn from(u: UserDatatype) -> Datatype {
        u.0
    }
}

fn same_len(a: usize, b: usize, what: &str) -> Result<()> {
    if a != b {
        return Err(Error::Arg {
            reason: format!("{a} block lengths but {b} {what}"),
        });
    }
    Ok(())
}

/// Refuses up front a vector of `count` blocks of `bl` elements of `old`
/// whose type map would exceed [`MAX_BLOCKS`] (instead of building it).
fn check_vector_size(count: usize, bl: usize, old: &Datatype) -> Result<()> {
    let per_block = if old.is_dense() {
        1
    } else {
        bl.saturating_mul(old.blocks().len())
    };
    if bl > 0 && count.saturating_mul(per_block) > MAX_BLOCKS {
        return Err(Error::Type {
            reason: format!("the datatype's type map would have more than {MAX_BLOCKS} blocks"),
        });
    }
    Ok(())
}

impl UserDatatype {
    /// The type as a [`Datatype`].
    pub fn as_datatype(&self) -> &Datatype {
        &self.0
    }

    /// The type as a [`Datatype`], by value.
    pub fn into_datatype(self) -> Datatype {
        self.0
    }

    /// `count` elements of `oldtype`, one after the other
    /// (`MPI_Type_contiguous`).
    pub fn contiguous(count: usize, oldtype: &Datatype) -> Result<UserDatatype> {
        let mut b = Builder::new();
        b.add(0, count, oldtype)?;
        Ok(UserDatatype(b.finish(false)?))
    }

    /// `count` blocks of `blocklength` elements, `stride` elements apart
    /// (`MPI_Type_vector`).
    pub fn vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let step = mul(stride, oldtype.extent())?;
        Self::heterogeneous_vector(count, blocklength, step, oldtype)
    }

    /// `count` blocks of `blocklength` elements, `stride` bytes apart
    /// (`MPI_Type_create_hvector`).
    pub fn heterogeneous_vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let mut b = Builder::new();
        if count == 0 || blocklength == 0 {
            return Ok(UserDatatype(b.finish(false)?));
        }
        let ext = oldtype.extent();
        let whole = oldtype.is_dense() && oldtype.size() as isize == ext && ext > 0;
        if whole && Some(stride) == signed(blocklength).ok().and_then(|l| l.checked_mul(ext)) {
            // The blocks touch: one run of count × blocklength elements.
            let n = count.checked_mul(blocklength).ok_or_else(overflow)?;
            b.add(0, n, oldtype)?;
            return Ok(UserDatatype(b.finish(false)?));
        }
        let last = mul(signed(count)? - 1, stride)?;
        if oldtype.blocks().is_empty() {
            // No data: the bounds of the first and the last block (they
            // are affine in the block's index) are the bounds of all.
            b.add(0, blocklength, oldtype)?;
            b.add(last, blocklength, oldtype)?;
            return Ok(UserDatatype(b.finish(false)?));
        }
        check_vector_size(count, blocklength, oldtype)?;
        for i in 0..count {
            b.add(mul(i as isize, stride)?, blocklength, oldtype)?;
        }
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of given lengths at given displacements, in elements of
    /// `oldtype` (`MPI_Type_indexed`).
    pub fn indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let ext = oldtype.extent();
        let mut b = Builder::new();
        for (&n, &d) in blocklengths.iter().zip(displacements) {
            b.add(mul(d, ext)?, n, oldtype)?;
        }
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of given lengths at given byte displacements
    /// (`MPI_Type_create_hindexed`).
    pub fn heterogeneous_indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let mut b = Builder::new();
        for (&n, &d) in blocklengths.iter().zip(displacements) {
            b.add(d, n, oldtype)?;
        }
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of one length at given displacements, in elements
    /// (`MPI_Type_create_indexed_block`).
    pub fn indexed_block(
        blocklength: usize,
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let ext = oldtype.extent();
        let mut b = Builder::new();
        if blocklength > 0 {
            for &d in displacements {
                b.add(mul(d, ext)?, blocklength, oldtype)?;
            }
        }
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of one length at given byte displacements
    /// (`MPI_Type_create_hindexed_block`).
    pub fn heterogeneous_indexed_block(
        blocklength: usize,
        displacements: &[isize],
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let mut b = Builder::new();
        if blocklength > 0 {
            for &d in displacements {
                b.add(d, blocklength, oldtype)?;
            }
        }
        Ok(UserDatatype(b.finish(false)?))
    }

    /// Blocks of different types at byte displacements
    /// (`MPI_Type_create_struct`); the extent is padded to the alignment
    /// of the most aligned member.
    pub fn structured<T: AsRef<Datatype>>(
        blocklengths: &[usize],
        displacements: &[isize],
        types: &[T],
    ) -> Result<UserDatatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        same_len(blocklengths.len(), types.len(), "types")?;
        let mut b = Builder::new();
        for ((&n, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            b.add(d, n, t.as_ref())?;
        }
        Ok(UserDatatype(b.finish(true)?))
    }

    /// `oldtype` with another lower bound and extent
    /// (`MPI_Type_create_resized`).
    pub fn resized(oldtype: &Datatype, lb: isize, extent: isize) -> Result<UserDatatype> {
        let mut m = (*oldtype.0).clone();
        m.lb = lb;
        m.ub = add(lb, extent)?;
        m.predefined = None;
        m.handle = None;
        Ok(UserDatatype(Datatype(Arc::new(m))))
    }

    /// A copy of a type (`MPI_Type_dup`).
    pub fn dup(oldtype: &Datatype) -> UserDatatype {
        let mut m = (*oldtype.0).clone();
        m.predefined = None;
        m.handle = None;
        UserDatatype(Datatype(Arc::new(m)))
    }

    /// The part `starts[d] .. starts[d] + subsizes[d]` of each dimension
    /// `d` of an array of `sizes` elements of `oldtype`
    /// (`MPI_Type_create_subarray`), dimensions in `order`. Its lower bound
    /// is 0 and its extent the whole array's.
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        oldtype: &Datatype,
    ) -> Result<UserDatatype> {
        let nd = sizes.len();
        if nd == 0 || subsizes.len() != nd || starts.len() != nd {
            return Err(Error::Arg {
                reason: format!(
                    "a subarray needs as many (at least one) sizes, subsizes and starts: \
                     {nd}, {}, {}",
                    subsizes.len(),
                    starts.len()
                ),
            });
        }
        for d in 0..nd {
            if sizes[d] == 0
                || subsizes[d] == 0
                || subsizes[d] > sizes[d]
                || starts[d] > sizes[d] - subsizes[d]
            {
                return Err(Error::Arg {
                    reason: format!(
                        "dimension {d}: size {}, subsize {}, start {} (need 1 <= subsize <= \
                         size and start + subsize <= size)",
                        sizes[d], subsizes[d], starts[d]
                    ),
                });
            }
        }
        // Dimensions from the fastest varying to the slowest.
        let dims: Vec<usize> = match order {
            Order::C => (0..nd).rev().collect(),
            Order::Fortran => (0..nd).collect(),
        };
        let ext = oldtype.extent();
        let mut t = Self::contiguous(subsizes[dims[0]], oldtype)?.0;
        let mut stride = ext; // bytes between neighbours in dimension dims[0]
        let mut offset = mul(signed(starts[dims[0]])?, ext)?;
        for k in 1..nd {
            let (d, inner) = (dims[k], dims[k - 1]);
            stride = mul(stride, signed(sizes[inner])?)?;
            t = Self::heterogeneous_vector(subsizes[d], 1, stride, &t)?.0;
            offset = add(offset, mul(signed(starts[d])?, stride)?)?;
        }
        let whole = mul(stride, signed(sizes[dims[nd - 1]])?)?;
        let placed = Self::heterogeneous_indexed_block(1, &[offset], &t)?;
        Self::resized(&placed, 0, whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Datatype {
        Datatype::basic(BasicType::I32)
    }

    #[test]
    fn predefined_sizes_and_pairs() {
        assert_eq!(int().size(), 4);
        assert_eq!(Datatype::basic(BasicType::F64).extent(), 8);
        let di = Datatype::basic(BasicType::DoubleInt);
        assert_eq!((di.size(), di.extent()), (12, 16));
        let si = Datatype::basic(BasicType::ShortInt);
        assert_eq!(si.blocks(), &[(0, 2), (4, 4)]);
        assert!(si.dense_offset().is_none());
        assert_eq!(int().dense_offset(), Some(0));
        for (i, &b) in BasicType::ALL.iter().enumerate() {
            assert_eq!(b.index(), i);
            let t = Datatype::basic(b);
            let (blocks, ext) = b.layout();
            assert_eq!(blocks.iter().map(|b| b.1).sum::<usize>(), b.size(), "{b:?}");
            assert_eq!((t.extent(), t.basic_type()), (ext, Some(b)));
            assert_eq!(ext as usize % b.alignment(), 0, "{b:?}");
        }
    }

    #[test]
    fn vector_map_bounds() {
        let v = UserDatatype::vector(3, 2, 5, &int()).unwrap();
        assert_eq!(v.blocks(), &[(0, 8), (20, 8), (40, 8)]);
        assert_eq!((v.size(), v.lower_bound(), v.upper_bound()), (24, 0, 48));
        assert_eq!(v.basic_type(), Some(BasicType::I32));
    }

    #[test]
    fn struct_extent_is_padded_and_negative_strides_work() {
        let (dbl, ch) = (
            Datatype::basic(BasicType::F64),
            Datatype::basic(BasicType::Char),
        );
        let s =
            UserDatatype::structured(&[1, 1, 1], &[0, 8, 16], &[int(), dbl.clone(), ch]).unwrap();
        assert_eq!((s.size(), s.lower_bound(), s.upper_bound()), (13, 0, 24));
        assert_eq!(s.blocks(), &[(0, 4), (8, 9)]);
        assert!(s.is_mixed() && s.basic_type().is_none());
        // hvector(2, 1, -8, DOUBLE): elements at 0 and -8.
        let h = UserDatatype::heterogeneous_vector(2, 1, -8, &dbl).unwrap();
        assert_eq!((h.lower_bound(), h.upper_bound(), h.extent()), (-8, 8, 16));
        assert_eq!(h.blocks(), &[(0, 8), (-8, 8)]);
        // Contiguous of a gapless type merges into one block.
        assert_eq!(
            UserDatatype::contiguous(1000, &int()).unwrap().blocks(),
            &[(0, 4000)]
        );
    }

    #[test]
    fn overflows_and_block_limits_are_errors() {
        let mut b = Builder::new();
        assert!(matches!(
            b.add(isize::MAX - 2, 2, &int()),
            Err(Error::Arg { .. })
        ));
        let si = Datatype::basic(BasicType::ShortInt);
        assert!(matches!(
            UserDatatype::contiguous(MAX_BLOCKS, &si),
            Err(Error::Type { .. })
        ));
        assert!(matches!(
            UserDatatype::vector(MAX_BLOCKS + 1, 1, 2, &int()),
            Err(Error::Type { .. })
        ));
        assert!(matches!(
            UserDatatype::vector(2, 1, isize::MAX, &int()),
            Err(Error::Arg { .. })
        ));
        assert!(matches!(
            UserDatatype::indexed(&[1, 2], &[0], &int()),
            Err(Error::Arg { .. })
        ));
    }

    #[test]
    fn degenerate_descriptions_cost_nothing() {
        // Zero-length blocks: no data, no walk over the count.
        let v = UserDatatype::vector(i32::MAX as usize, 0, 3, &int()).unwrap();
        assert_eq!((v.size(), v.extent(), v.blocks().len()), (0, 0, 0));
        // Touching blocks are one run.
        let v = UserDatatype::vector(i32::MAX as usize, 2, 2, &int()).unwrap();
        assert_eq!(v.blocks(), &[(0, 8 * i32::MAX as usize)]);
        // A type without data keeps the bounds of all its elements.
        let empty =
            UserDatatype::resized(&UserDatatype::contiguous(0, &int()).unwrap(), 0, 4).unwrap();
        let v = UserDatatype::vector(i32::MAX as usize, 1, 2, &empty).unwrap();
        assert_eq!(v.size(), 0);
        assert_eq!(v.extent(), (i32::MAX as isize - 1) * 8 + 4);
        let c = UserDatatype::contiguous(usize::MAX / 16, &empty).unwrap();
        assert_eq!(c.extent(), (usize::MAX / 16) as isize * 4);
    }

    #[test]
    fn resized_dup_and_subarray() {
        let r = UserDatatype::resized(&int(), -4, 16).unwrap();
        assert_eq!(
            (r.lower_bound(), r.extent(), r.true_lower_bound()),
            (-4, 16, 0)
        );
        assert_eq!(r.predefined(), None);
        assert_eq!(r.basic_type(), Some(BasicType::I32));
        let d = UserDatatype::dup(&r);
        assert_eq!(
            (d.lower_bound(), d.extent(), d.blocks()),
            (-4, 16, r.blocks())
        );
        // A 2x2 block at (1, 2) of a 4x5 array of ints, C order.
        let s = UserDatatype::subarray(&[4, 5], &[2, 2], &[1, 2], Order::C, &int()).unwrap();
        assert_eq!(s.blocks(), &[(28, 8), (48, 8)]);
        assert_eq!((s.lower_bound(), s.extent(), s.size()), (0, 80, 16));
        assert_eq!((s.true_lower_bound(), s.true_upper_bound()), (28, 56));
        // The same in Fortran order: dimension 0 varies fastest.
        let f = UserDatatype::subarray(&[5, 4], &[2, 2], &[2, 1], Order::Fortran, &int()).unwrap();
        assert_eq!(f.blocks(), s.blocks());
        assert_eq!(f.extent(), 80);
        // Three dimensions.
        let t =
            UserDatatype::subarray(&[2, 3, 4], &[1, 2, 1], &[1, 1, 3], Order::C, &int()).unwrap();
        let base = (12 + 4 + 3) * 4;
        assert_eq!(t.blocks(), &[(base, 4), (base + 16, 4)]);
        assert_eq!(t.extent(), 96);
        for bad in [
            UserDatatype::subarray(&[4], &[5], &[0], Order::C, &int()),
            UserDatatype::subarray(&[4], &[2], &[3], Order::C, &int()),
            UserDatatype::subarray(&[4], &[0], &[0], Order::C, &int()),
            UserDatatype::subarray(&[], &[], &[], Order::C, &int()),
        ] {
            assert!(matches!(bad, Err(Error::Arg { .. })));
        }
    }
}
